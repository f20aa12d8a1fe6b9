// `zeromem job FILE [key=value ...]`: an RLHF job as launched (OpenRLHF arguments, a verl or EasyR1 YAML config),
// phase by phase on the most loaded GPU and node.
#include <fstream>
#include <map>
#include <ostream>
#include <sstream>

#include "common.hpp"
#include "job_yaml.hpp"
#include "zeromem/hf_config.hpp"
#include "zeromem/rlhf_config.hpp"

namespace zeromem::cli {
namespace {

struct job_args {
  std::string file;
  std::vector<std::string> overrides;
  std::map<std::string, std::string> settings;  // --gpu and the other job settings given on the command line
  bool json = false;
  bool explain = false;
};

// The settings a launch file cannot carry: flag, help. `# zeromem: --flag value` lines in the file give them too;
// the command line wins.
const std::pair<const char*, const char*> setting_flags[] = {
    {"--gpu", "the GPU model (a name from `zeromem estimate --help`)"},
    {"--host-memory", "one node's host RAM, such as 760GB; checked against Ray's threshold"},
    {"--ray-threshold", "Ray's memory_usage_threshold (default 0.95)"},
    {"--mean-tokens", "real tokens per sequence (prompt + response) on average; default: the configured maxima"},
    {"--vllm-version", "the vLLM version, such as 0.6.5: it decides what gpu_memory_utilization means"},
    {"--deepspeed-version", "the DeepSpeed version, such as 0.16.4 (0.16.x has a ZeRO-3 checkpointing defect)"},
    {"--openrlhf-version", "the OpenRLHF version, such as 0.6.0 (from 0.6.0 --colocate_all_models turns both sleep modes on)"},
    {"--host-unmodelled", "host RAM per node a report shows beyond the modelled terms, such as 500GB"},
    {"--cuda-context", "bytes per process outside PyTorch's allocator (default: measured on an H100, 650,969,088 B)"},
};

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail("cannot read " + detail::quoted(path) + "; pass an OpenRLHF argument file or a verl/EasyR1 YAML config");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> directive_words(const std::string& text) {
  std::vector<std::string> words;
  for (const std::string& d : split_command_line(text).directives)
    for (const std::string& w : split_command_line(d).words) words.push_back(w);
  return words;
}

job_settings settings_of(const job_args& a, const std::vector<std::string>& directives) {
  std::map<std::string, std::string> given;
  for (std::size_t i = 0; i < directives.size(); ++i) {
    const std::string& flag = directives[i];
    const bool known = std::any_of(std::begin(setting_flags), std::end(setting_flags), [&](const auto& f) { return flag == f.first; });
    if (!known || i + 1 == directives.size())
      detail::fail("the file's `# zeromem:` line has " + detail::quoted(flag) + "; it takes --gpu, --host-memory, --mean-tokens, "
                   "--vllm-version, --deepspeed-version, --openrlhf-version, --ray-threshold, --host-unmodelled or --cuda-context, each with a value");
    given[flag] = directives[++i];
  }
  for (const auto& s : a.settings) given[s.first] = s.second;
  job_settings s{};
  for (const auto& g : given) {
    const std::string& v = g.second;
    if (g.first == "--gpu") s.gpu = v;
    else if (g.first == "--host-memory") s.host_memory = parse_bytes(v, "the host memory (--host-memory)");
    else if (g.first == "--ray-threshold") s.ray_threshold = parse_real(v, 0.0, 1.0, true);
    else if (g.first == "--mean-tokens") s.mean_tokens = parse_tokens(v, "the mean tokens (--mean-tokens)");
    else if (g.first == "--vllm-version") s.vllm_version = v;
    else if (g.first == "--deepspeed-version") s.deepspeed_version = v;
    else if (g.first == "--openrlhf-version") s.openrlhf_version = v;
    else if (g.first == "--host-unmodelled") s.host_unmodelled = parse_bytes(v, "the unmodelled host RAM (--host-unmodelled)");
    else if (g.first == "--cuda-context") s.cuda_context = parse_bytes(v, "the CUDA context (--cuda-context)");
  }
  s.resolve_model = [](const std::string& path) -> std::optional<transformer_config> {
    for (const std::string& f : {path + "/config.json", path})
      if (f.size() > 5 && f.compare(f.size() - 5, 5, ".json") == 0 && std::ifstream(f).good()) return read_hf_config(f);
    return std::nullopt;
  };
  return s;
}

/// A Hydra-style `key=value` (a leading `+`, which adds a key, is dropped); `what` names where it came from.
std::pair<std::string, std::string> key_value(const std::string& word, const std::string& what) {
  const std::size_t from = !word.empty() && word[0] == '+' ? 1 : 0;
  const std::size_t eq = word.find('=', from);
  if (eq == std::string::npos || eq == from) detail::fail(what + " " + detail::quoted(word) + " is not key=value");
  return {word.substr(from, eq - from), word.substr(eq + 1)};
}

/// verl's and EasyR1's keys: the file's, then the overrides, interpolations resolved.
job_reading read_verl_keys(std::vector<std::pair<std::string, std::string>> kv, const job_args& a, const std::string& text) {
  for (const std::string& o : a.overrides) kv.push_back(key_value(o, "the override"));
  resolve_interpolations(kv);
  return read_verl(std::move(kv), settings_of(a, directive_words(text)));
}

job_reading read_job(const job_args& a) {
  const std::string text = read_text(a.file);
  std::vector<std::pair<std::string, std::string>> kv;
  if (is_yaml(a.file)) return read_verl_keys(yaml_keys(text, a.file), a, text);
  std::vector<std::string> words = split_command_line(text).words;
  const auto verl = std::find_if(words.begin(), words.end(), [](const std::string& w) { return w.find("verl.trainer.main") != std::string::npos; });
  if (verl != words.end()) {  // a verl launch line: key=value words over verl's defaults
    for (auto w = verl + 1; w != words.end() && *w != "|" && *w != "2>&1" && *w != ">" && *w != "&&"; ++w)
      if (*w != "$@") kv.push_back(key_value(*w, "in the verl command line, the word"));
    return read_verl_keys(std::move(kv), a, text);
  }
  for (const std::string& o : a.overrides) {  // key=value overrides become --key value
    const auto [key, value] = key_value(o, "the override");
    words.push_back("--" + key);
    if (!value.empty()) words.push_back(value);
  }
  return read_openrlhf(words, settings_of(a, directive_words(text)));
}

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
    out << "  host RAM per node: " << format_bytes(m.host_total(), size_unit::GB);
    if (m.host_capacity.count() != 0) out << " of " << format_bytes(m.host_limit(), size_unit::GB) << " (Ray's threshold) -> " << (m.host_fits() ? "fits" : "DOES NOT FIT");
    out << "\n";
    for (const memory_term& t : m.terms)
      if (t.host.count() != 0) out << "    " << t.role << ": " << t.term << "  " << format_bytes(t.host, size_unit::GB) << "\n";
    if (m.unexplained_host.count() != 0) out << "    not modelled (--host-unmodelled)  " << format_bytes(m.unexplained_host, size_unit::GB) << "\n";
  }
}

struct fix {
  std::string change;  // as the user would write it
  bool fits = false;
};

/// The usual fixes, each an override of the launch file tried alone; returns those that make every phase fit, and
/// the first failing ones of each kind otherwise.
std::vector<fix> suggest_fixes(const job_args& a, const job_reading& r) {
  const rlhf_job& j = r.job;
  const bool openrlhf = j.framework == rlhf_framework::openrlhf;
  const bool easyr1 = std::any_of(r.read.begin(), r.read.end(), [](const std::string& k) { return k.rfind("worker.", 0) == 0; });
  std::vector<std::vector<std::string>> groups;  // each group: alternatives from the mildest; the first that fits is shown
  const auto key = [&](const char* o, const char* v, const char* e) { return std::string(openrlhf ? o : easyr1 ? e : v); };
  if (j.rollout.present) {
    std::vector<std::string> g;
    for (int u = static_cast<int>(j.rollout.gpu_memory_utilization * 20 + 1e-9) - 1; u >= 2; --u)
      g.push_back(key("vllm_gpu_memory_utilization", "actor_rollout_ref.rollout.gpu_memory_utilization", "worker.rollout.gpu_memory_utilization") +
                  "=" + std::to_string(u / 20) + "." + (u % 20 * 5 < 10 ? "0" : "") + std::to_string(u % 20 * 5));
    groups.push_back(g);
  }
  if (openrlhf && j.colocate_all) {
    if (j.rollout.present && j.rollout.sleep_level == 0) groups.push_back({"vllm_enable_sleep="});
    if (!j.actor.sleep_params) groups.push_back({"deepspeed_enable_sleep="});
  }
  if (openrlhf && !j.actor.adam_offload) groups.push_back({"adam_offload="});
  if (!openrlhf) {
    const std::string A = easyr1 ? "worker.actor.offload." : "actor_rollout_ref.actor.fsdp_config.";
    const std::string P = easyr1 ? "offload_params" : "param_offload", O = easyr1 ? "offload_optimizer" : "optimizer_offload";
    const char* flip[] = {"false", "true"};
    groups.push_back({A + P + "=" + flip[!j.actor.sleep_params]});
    groups.push_back({A + O + "=" + flip[!j.actor.sleep_optimizer]});
  }
  if (!j.actor.gradient_checkpointing)
    groups.push_back({key("gradient_checkpointing", "actor_rollout_ref.model.enable_gradient_checkpointing", "worker.actor.model.enable_gradient_checkpointing") +
                      (openrlhf ? "=" : "=true")});
  {
    std::vector<std::string> g;
    for (std::int64_t m = j.actor.train_micro_batch / 2; m >= 1; m /= 2)
      g.push_back(openrlhf ? "micro_train_batch_size=" + std::to_string(m)
                  : easyr1 ? "worker.actor.micro_batch_size_per_device_for_update=" + std::to_string(m)
                           : "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=" + std::to_string(m));
    if (!g.empty()) groups.push_back(g);
  }
  groups.push_back({key("actor_num_nodes", "trainer.nnodes", "trainer.nnodes") + "=" + std::to_string(j.nodes * 2)});
  std::vector<fix> out;
  for (const auto& g : groups) {
    fix last{};
    for (const std::string& o : g) {
      job_args tried = a;
      tried.overrides.push_back(o);
      tried.explain = false;
      bool fits = false;
      try {
        fits = estimate_rlhf(read_job(tried).job).fits();
      } catch (const std::exception&) {
        continue;  // this change is not valid for the job (a micro-batch the batch does not divide, ...)
      }
      last = {openrlhf ? "--" + (o.back() == '=' ? o.substr(0, o.size() - 1) : o.substr(0, o.find('=')) + " " + o.substr(o.find('=') + 1)) : o, fits};
      if (fits) break;
    }
    if (!last.change.empty()) out.push_back(last);
  }
  return out;
}

int run_job(const job_args& a, std::ostream& out) {
  const job_reading r = read_job(a);
  const rlhf_estimate e = estimate_rlhf(r.job);
  const std::vector<fix> fixes = a.explain && !e.fits() ? suggest_fixes(a, r) : std::vector<fix>{};
  if (a.json) {
    json j{{"file", a.file}, {"framework", std::string(name(r.job.framework))}, {"fits", e.fits()}};
    const rlhf_phase_estimate* bad = e.first_failing();
    j["first_failing_phase"] = bad == nullptr ? json(nullptr) : json(std::string(name(bad->phase)));
    j["phases"] = json::array();
    for (const rlhf_phase_estimate& p : e.phases) j["phases"].push_back(phase_json(p));
    j["config"] = {{"read", r.read}, {"ignored", r.ignored}, {"unknown", r.unknown}, {"assumed", r.assumed}};
    j["notes"] = e.notes;
    if (a.explain) {
      j["fixes"] = json::array();
      for (const fix& f : fixes) j["fixes"].push_back({{"change", f.change}, {"fits", f.fits}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem job " << a.file << " (" << name(r.job.framework) << "): " << r.job.nodes << " node(s) x " << r.job.gpus_per_node << " GPUs\n";
  for (const rlhf_phase_estimate& p : e.phases) print_phase(out, p);
  const rlhf_phase_estimate* bad = e.first_failing();
  out << "\nverdict: " << (bad == nullptr ? "every phase fits" : "breaks first in " + std::string(name(bad->phase)) + " (" + (bad->blocked.empty() ? "largest term: " : "") + bad->deciding_term() + ")") << "\n";
  for (const std::string& n : e.notes) out << "note: " << n << "\n";
  for (const std::string& n : r.assumed) out << "assumed: " << n << "\n";
  if (!r.unknown.empty()) out << "unknown keys (not read; check they do not change memory): " << detail::join_names(r.unknown, ", ", [](const std::string& s) { return s; }) << "\n";
  if (!r.ignored.empty()) out << "ignored (no effect on memory): " << r.ignored.size() << " keys\n";
  if (a.explain) {
    out << "\nExplain: the smallest changes, each tried alone\n";
    for (const fix& f : fixes) out << "  " << f.change << " -> " << (f.fits ? "fits" : "still does not fit") << "\n";
    if (fixes.empty()) out << "  (nothing to fix: every phase fits)\n";
  }
  return 0;
}

void add_job_flags(CLI::App& app, job_args& a) {
  app.add_option("file", a.file, "an OpenRLHF argument file (train_ppo_ray ...) or a verl / EasyR1 YAML config")->required();
  app.add_option("overrides", a.overrides, "key=value overrides (verl/Hydra keys, or OpenRLHF argument names)");
  for (const auto& f : setting_flags)
    app.add_option_function<std::string>(f.first, [&a, flag = std::string(f.first)](const std::string& v) { a.settings[flag] = v; }, f.second);
  app.add_flag("--json", a.json, "print JSON: phases[] with per_gpu.peak_bytes, per_node_host.total_bytes and fits");
  app.add_flag("--explain", a.explain, "try the usual fixes one at a time and say which make every phase fit");
}

}  // namespace

command add_job_command(CLI::App& parent) {
  return make_command<job_args>(parent, "job", "an RLHF job as launched (OpenRLHF arguments, verl or EasyR1 YAML): memory per phase",
                                "zeromem job examples/jobs/orz-1.5b-ppo.args --json", add_job_flags, run_job);
}

}  // namespace zeromem::cli
