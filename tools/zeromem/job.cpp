// `zeromem job FILE [key=value ...]`: an RLHF job as launched (OpenRLHF arguments, a verl or EasyR1 YAML config),
// phase by phase on the most loaded GPU and node.
#include <algorithm>
#include <ostream>

#include "job.hpp"

namespace zeromem::cli {

json phase_json(const rlhf_phase_estimate& p) {
  json j = breakdown_json(p.memory);
  j["per_gpu"]["peak_bytes"] = p.memory.gpu_total().count();
  json out{{"phase", std::string(name(p.phase))}, {"gpus", p.gpus}, {"activity", p.activity}, {"fits", p.fits()},
           {"deciding_term", p.deciding_term()}};
  out.update(j);
  return out;
}

void print_phase(std::ostream& out, const rlhf_phase_estimate& p) {
  const job_breakdown& m = p.memory;
  out << "\n" << name(p.phase) << ": " << format_bytes(m.gpu_total(), size_unit::GiB) << " of " << format_bytes(m.gpu_capacity, size_unit::GiB)
      << " per GPU (" << p.gpus << ", " << p.activity << ") -> " << (m.gpu_fits() && p.blocked.empty() ? "fits" : "DOES NOT FIT") << "\n";
  if (!p.blocked.empty()) out << "  " << p.blocked << "\n";
  for (const memory_term& t : m.terms)
    if (t.gpu.count() != 0) out << "  " << t.role << ": " << t.term << "  " << format_bytes(t.gpu, size_unit::GiB) << "\n";
  if (m.host_total().count() != 0 || m.host_capacity.count() != 0) {
    out << "  host RAM, most loaded node: " << format_bytes(m.host_total(), size_unit::GB);
    if (m.host_capacity.count() != 0) out << " of " << format_bytes(m.host_limit(), size_unit::GB) << " (Ray's threshold) -> " << (m.host_fits() ? "fits" : "DOES NOT FIT");
    out << "\n";
    for (const memory_term& t : m.terms)
      if (t.host.count() != 0) out << "    " << t.role << ": " << t.term << "  " << format_bytes(t.host, size_unit::GB) << "\n";
    if (m.unexplained_host.count() != 0) out << "    not modelled (--host-unmodelled)  " << format_bytes(m.unexplained_host, size_unit::GB) << "\n";
  }
}

namespace {

int run_job(const job_args& a, std::ostream& out) {
  const job_reading r = read_job(a);
  const rlhf_estimate e = estimate_rlhf(r.job);
  const std::vector<fix> fixes = a.explain && !e.fits() ? suggest_fixes(a, r, e) : std::vector<fix>{};
  if (a.json) {
    json j{{"file", a.file}, {"framework", std::string(name(r.job.framework))}, {"fits", e.fits()},
           {"gpus", e.gpus}, {"nodes", e.nodes}, {"gpus_per_node", r.job.gpus_per_node}};
    const rlhf_phase_estimate* bad = e.first_failing();
    j["first_failing_phase"] = bad == nullptr ? json(nullptr) : json(std::string(name(bad->phase)));
    j["phases"] = json::array();
    for (const rlhf_phase_estimate& p : e.phases) j["phases"].push_back(phase_json(p));
    j["config"] = {{"read", r.read}, {"ignored", r.ignored}, {"unknown", r.unknown}, {"assumed", r.assumed}};
    j["notes"] = e.notes;
    if (a.explain) {
      j["fixes"] = json::array();
      for (const fix& f : fixes) {
        j["fixes"].push_back({{"change", f.change}, {"fits", f.fits}, {"set", f.set}});
        if (!f.together.empty()) j["fixes"].back()["together"] = f.together;
      }
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem job " << a.file << " (" << name(r.job.framework) << "): " << e.gpus << " GPUs on " << e.nodes << " node(s) of "
      << r.job.gpus_per_node << " GPUs\n";
  for (const rlhf_phase_estimate& p : e.phases) print_phase(out, p);
  const rlhf_phase_estimate* bad = e.first_failing();
  out << "\nverdict: " << (bad == nullptr ? "every phase fits" : "breaks first in " + std::string(name(bad->phase)) + " (" + (bad->blocked.empty() ? "largest term: " : "") + bad->deciding_term() + ")") << "\n";
  for (const std::string& n : e.notes) out << "note: " << n << "\n";
  for (const std::string& n : r.assumed) out << "assumed: " << n << "\n";
  if (!r.unknown.empty()) out << "unknown keys (not read; check they do not change memory): " << detail::join_names(r.unknown, ", ", [](const std::string& s) { return s; }) << "\n";
  if (!r.ignored.empty()) out << "ignored (no effect on memory): " << r.ignored.size() << " keys\n";
  if (a.explain) {
    out << "\nExplain: the smallest changes, each tried alone\n";
    for (const fix& f : fixes)
      if (f.together.empty()) out << "  " << f.change << " -> " << (f.fits ? "fits" : "still does not fit") << "\n";
      else if (f.together.size() == 2) out << "  no change fits alone; two that fit together: " << f.together[0] << " and " << f.together[1] << " -> fits\n";
      else out << "  no change or pair fits; three that fit together: " << f.together[0] << ", " << f.together[1] << " and " << f.together[2] << " -> fits\n";
    if (fixes.empty()) out << "  (nothing to fix: every phase fits)\n";
    else if (std::none_of(fixes.begin(), fixes.end(), [](const fix& f) { return f.fits; }))
      out << "  none fits alone, nor two together, nor three (up to " << max_triples_tried << " sets of three tried)\n";
  }
  return 0;
}

void add_job_flags(CLI::App& app, job_args& a) {
  app.add_option("file", a.file, "an OpenRLHF argument file (train_ppo_ray ...) or a verl / EasyR1 YAML config")->required();
  app.add_option("overrides", a.overrides, "key=value overrides (verl/Hydra keys, or OpenRLHF argument names)");
  for (const setting_flag& f : job_setting_flags)
    app.add_option_function<std::string>(f.flag, [&a, flag = std::string(f.flag)](const std::string& v) { a.settings[flag] = v; }, f.help);
  app.add_flag("--json", a.json, "print JSON: phases[] with per_gpu.peak_bytes, per_node_host.total_bytes and fits");
  app.add_flag("--explain", a.explain, "try the usual fixes one at a time and say which make every phase fit; where none does, the first two (else three) that do together");
}

}  // namespace

command add_job_command(CLI::App& parent) {
  return make_command<job_args>(parent, "job", "an RLHF job as launched (OpenRLHF arguments, verl or EasyR1 YAML): memory per phase",
                                "zeromem job examples/jobs/orz-1.5b-ppo.args --json", add_job_flags, run_job);
}

}  // namespace zeromem::cli
