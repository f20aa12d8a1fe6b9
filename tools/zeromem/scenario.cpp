// `zeromem scenario`: a reported out-of-memory case, rebuilt term by term and explained.
#include <memory>
#include <ostream>
#include <vector>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct scenario_args {
  std::string name;
  bool json = false;
  bool explain = false;
  std::string svg;
};

void explain_scenario(std::ostream& out, const scenario& s) {
  out << "\nExplain\n";
  const scenario_case* fixed = nullptr;
  for (const scenario_case& c : s.cases)
    if (c.job.fits()) fixed = &c;
  for (const scenario_case& c : s.cases) {
    if (c.job.fits()) continue;
    out << "  " << c.label << ": dominant terms\n";
    print_dominant(out, c.job);
    if (fixed == nullptr || c.job.terms.empty()) continue;
    // What the fix changed, term by term (matched by role and name); changes under 256 MiB are left out.
    out << "  what \"" << fixed->label << "\" changes:\n";
    for (const memory_term& t : c.job.terms) {
      bytes after{};
      for (const memory_term& f : fixed->job.terms)
        if (f.role == t.role && f.term == t.term) after = f.gpu;
      const bytes delta = after - t.gpu;
      if (delta.count() > (1LL << 28) || delta.count() < -(1LL << 28))
        out << "    " << t.role << " " << t.term << ": " << format_bytes(t.gpu, size_unit::GiB) << " -> "
            << format_bytes(after, size_unit::GiB) << "\n";
    }
  }
}

int run_scenario(const scenario_args& a, std::ostream& out) {
  const scenario s = find_scenario(a.name);
  if (!a.svg.empty()) {
    std::vector<svg_bar> bars;
    for (const scenario_case& c : s.cases) bars.push_back(bar_of(c.label, c.job));
    write_file(a.svg, svg_stacked_bars("zeromem scenario " + s.name + ": per-GPU memory", bars, s.cases.front().job.gpu_capacity));
  }
  if (!a.json) {
    out << render_scenario(s);
    if (a.explain) explain_scenario(out, s);
    return 0;
  }
  json j{{"scenario", s.name}, {"title", s.title}, {"configuration", s.configuration}, {"findings", s.findings}};
  j["cases"] = json::array();
  for (const scenario_case& c : s.cases) {
    json item = breakdown_json(c.job);
    item["label"] = c.label;
    item["fits"] = c.job.fits();
    item["reported"] = c.reported;
    if (c.reported) item["reported_fits"] = c.reported_fits;
    j["cases"].push_back(item);
  }
  out << j.dump(2) << "\n";
  return 0;
}


void add_scenario_flags(CLI::App& app, scenario_args& a) {
  app.add_option("name", a.name, detail::join_names(scenario_names(), " | ", [](const std::string& n) { return n; }))->required();
  app.add_flag("--json", a.json, "print JSON: a cases array with label, fits, per_gpu and per_node_host");
  app.add_flag("--explain", a.explain, "the dominant terms of each failing case and what the fix changes");
  text_option(app, "--svg", a.svg, "write a stacked bar per case to this file");
}

}  // namespace

command add_scenario_command(CLI::App& parent) {
  return make_command<scenario_args>(parent, "scenario", "a reported out-of-memory case, rebuilt and explained",
                                     "zeromem scenario openrlhf-70b-ppo --explain", add_scenario_flags, run_scenario);
}

}  // namespace zeromem::cli
