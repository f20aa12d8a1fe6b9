// `zeromem scenario NAME`: a launch file of examples/jobs (compiled in) and the cases it states about itself
// (`# zeromem case:` lines), each evaluated as `zeromem job` evaluates it, with the report's verdict beside zeromem's.
#include <algorithm>
#include <fstream>
#include <ostream>
#include <sstream>

#include "embedded_jobs.hpp"
#include "job.hpp"
#include "zeromem/report/report.hpp"

namespace zeromem::cli {
namespace {

struct scenario_args {
  std::string name;
  bool json = false;
  bool explain = false;
  bool print_file = false;
  std::string svg;
};

std::string stem(const std::string& file) { return file.substr(0, file.rfind('.')); }

/// The embedded files that state cases: the scenarios, by name.
std::vector<std::string> scenario_names() {
  std::vector<std::string> names;
  for (const embedded_file& f : embedded_jobs())
    if (!read_launch_header(f.text).cases.empty()) names.push_back(stem(f.name));
  return names;
}

/// The launch file a name stands for: an embedded one, or a file of the user's with `# zeromem case:` lines.
embedded_file scenario_file(const std::string& name) {
  for (const embedded_file& f : embedded_jobs())
    if (stem(f.name) == name || f.name == name) return f;
  std::ifstream in(name, std::ios::binary);
  if (in) {
    std::ostringstream s;
    s << in.rdbuf();
    return {name, s.str()};
  }
  detail::fail("unknown scenario " + detail::quoted(name) + "; expected one of " +
               detail::join_names(scenario_names(), ", ", [](const std::string& n) { return n; }) +
               ", or a launch file with `# zeromem case:` lines");
}

struct evaluated_case {
  launch_case spec;
  rlhf_estimate estimate;
  /// The phase the case is decided in: the first that does not fit, else the one with the highest per-GPU peak.
  const rlhf_phase_estimate& deciding() const {
    if (const rlhf_phase_estimate* bad = estimate.first_failing()) return *bad;
    return *std::max_element(estimate.phases.begin(), estimate.phases.end(), [](const rlhf_phase_estimate& a, const rlhf_phase_estimate& b) {
      return a.memory.gpu_total() < b.memory.gpu_total();
    });
  }
};

std::vector<evaluated_case> evaluate(const embedded_file& f, const launch_header& h) {
  if (h.cases.empty()) detail::fail(detail::quoted(f.name) + " states no cases; add `# zeromem case: LABEL | reported: fits|out of memory|none | key=value ...` lines");
  job_args base{};
  base.file = f.name;
  base.text = f.text;
  std::vector<evaluated_case> out;
  for (const launch_case& c : h.cases) out.push_back({c, estimate_rlhf(read_job(with_case_words(base, c.words)).job)});
  return out;
}

std::string verdict(bool fits) { return fits ? "fits" : "out of memory"; }

std::string case_line(const evaluated_case& c) {
  const bool fits = c.estimate.fits();
  if (!c.spec.reported_fits) return c.spec.label + ": zeromem " + verdict(fits) + " (no report for this case)";
  return c.spec.label + ": reported " + verdict(*c.spec.reported_fits) + ", zeromem " + verdict(fits) +
         (fits == *c.spec.reported_fits ? " (agrees)" : " (DISAGREES)");
}

/// A term's name without what follows " (": the part two cases of one job share.
std::string base_name(const memory_term& t) { return t.role + " " + t.term.substr(0, t.term.find(" (")); }

void explain_case(std::ostream& out, const evaluated_case& c, const std::vector<evaluated_case>& all) {
  const rlhf_phase_estimate& p = c.deciding();
  out << "  " << c.spec.label << ": dominant terms in " << name(p.phase) << "\n";
  print_dominant(out, p.memory);
  const auto fixed = std::find_if(all.begin(), all.end(), [](const evaluated_case& e) { return e.estimate.fits(); });
  if (fixed == all.end()) return;
  out << "  what \"" << fixed->spec.label << "\" changes in " << name(p.phase) << " (changes of 256 MiB or more):\n";
  const job_breakdown* after = nullptr;
  for (const rlhf_phase_estimate& q : fixed->estimate.phases)
    if (q.phase == p.phase) after = &q.memory;
  if (after == nullptr) return;
  for (const memory_term& t : p.memory.terms) {
    bytes then{};
    for (const memory_term& u : after->terms)
      if (base_name(u) == base_name(t)) then = u.gpu;
    const bytes delta = then - t.gpu;
    if (delta.count() >= (1LL << 28) || delta.count() <= -(1LL << 28))
      out << "    " << base_name(t) << ": " << format_bytes(t.gpu, size_unit::GiB) << " -> " << format_bytes(then, size_unit::GiB) << "\n";
  }
}

int run_scenario(const scenario_args& a, std::ostream& out) {
  const embedded_file f = scenario_file(a.name);
  if (a.print_file) {
    out << f.text;
    return 0;
  }
  const launch_header h = read_launch_header(f.text);
  const std::vector<evaluated_case> cases = evaluate(f, h);
  if (!a.svg.empty()) {
    std::vector<svg_bar> bars;
    for (const evaluated_case& c : cases) bars.push_back(bar_of(c.spec.label + " (" + std::string(name(c.deciding().phase)) + ")", c.deciding().memory));
    write_file(a.svg, svg_stacked_bars("zeromem scenario " + stem(f.name) + ": per-GPU memory", bars, cases.front().deciding().memory.gpu_capacity));
  }
  if (a.json) {
    json j{{"scenario", stem(f.name)}, {"file", f.name}, {"title", h.title}, {"description", h.description}};
    j["cases"] = json::array();
    for (const evaluated_case& c : cases) {
      json item{{"label", c.spec.label}, {"words", c.spec.words}, {"reported", c.spec.reported_fits.has_value()}};
      if (c.spec.reported_fits) item["reported_fits"] = *c.spec.reported_fits;
      item["fits"] = c.estimate.fits();
      item["phase"] = std::string(name(c.deciding().phase));
      item.update(phase_json(c.deciding()));
      item["phases"] = json::array();
      for (const rlhf_phase_estimate& p : c.estimate.phases) item["phases"].push_back(phase_json(p));
      j["cases"].push_back(item);
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem scenario " << stem(f.name) << "\n";
  for (const std::string& d : h.description) out << "  " << d << "\n";
  out << "  (the launch file: `zeromem scenario " << stem(f.name) << " --print-file`; each case is `zeromem job " << f.name
      << "` with the case's words)\n";
  for (const evaluated_case& c : cases) {
    out << "\n" << case_line(c) << "\n";
    if (!c.spec.words.empty())
      out << "  with: " << detail::join_names(c.spec.words, " ", [](const std::string& w) { return w; }) << "\n";
    for (const rlhf_phase_estimate& p : c.estimate.phases)
      out << "  " << name(p.phase) << ": " << format_bytes(p.memory.gpu_total(), size_unit::GiB) << " per GPU"
          << (p.memory.host_total().count() != 0 ? ", " + format_bytes(p.memory.host_total(), size_unit::GB) + " host RAM on the most loaded node" : std::string())
          << " -> " << (p.fits() ? "fits" : "DOES NOT FIT (" + p.deciding_term() + ")") << "\n";
    out << "  " << name(c.deciding().phase) << (c.deciding().fits() ? " (the highest peak):\n" : " (the first phase that does not fit):\n");
    if (!c.deciding().blocked.empty()) out << "    " << c.deciding().blocked << "\n";
    out << render_breakdown(c.deciding().memory);
  }
  if (a.explain) {
    out << "\nExplain\n";
    for (const evaluated_case& c : cases)
      if (!c.estimate.fits()) explain_case(out, c, cases);
  }
  return 0;
}

void add_scenario_flags(CLI::App& app, scenario_args& a) {
  app.add_option("name", a.name,
                 detail::join_names(scenario_names(), " | ", [](const std::string& n) { return n; }) +
                     ", or a launch file with `# zeromem case:` lines")
      ->required();
  app.add_flag("--json", a.json, "print JSON: a cases array with label, reported_fits, fits, phase, per_gpu, per_node_host and phases");
  app.add_flag("--explain", a.explain, "the dominant terms of each failing case and what a fitting case changes");
  app.add_flag("--print-file", a.print_file, "print the launch file (to edit and run with `zeromem job`)");
  text_option(app, "--svg", a.svg, "write a stacked bar per case (its deciding phase) to this file");
}

}  // namespace

command add_scenario_command(CLI::App& parent) {
  return make_command<scenario_args>(parent, "scenario", "a reported out-of-memory case: its launch file and cases, evaluated as `zeromem job` does",
                                     "zeromem scenario orz-1.5b-ppo --explain", add_scenario_flags, run_scenario);
}

}  // namespace zeromem::cli
