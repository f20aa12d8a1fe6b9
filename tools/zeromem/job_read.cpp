// Reading a launch file for `zeromem job` and `zeromem scenario` (job.hpp): the file's text, its `# zeromem:`
// settings, the command line's settings and key=value overrides, into the library's readers.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "job.hpp"
#include "job_yaml.hpp"
#include "zeromem/model/hf_config.hpp"

namespace zeromem::cli {

// `# zeromem: --flag value` lines in the file give them too; the command line wins.
const std::vector<setting_flag> job_setting_flags{
    {"--gpu", "the GPU model (a name from `zeromem estimate --help`)"},
    {"--host-memory", "one node's host RAM, such as 760GB; checked against Ray's threshold"},
    {"--ray-threshold", "Ray's memory_usage_threshold (default 0.95)"},
    {"--mean-tokens", "real tokens per sequence (prompt + response) on average; default: the configured maxima"},
    {"--image-tokens", "image tokens in each prompt (Qwen2-VL, Qwen2.5-VL actors); default: the whole prompt, the most the dataset lets through"},
    {"--vllm-version", "the vLLM version, such as 0.6.5: it decides what gpu_memory_utilization means"},
    {"--deepspeed-version", "the DeepSpeed version, such as 0.16.4 (0.16.x has a ZeRO-3 checkpointing defect)"},
    {"--openrlhf-version", "the OpenRLHF version, such as 0.6.1: defaults and sleep modes changed across versions"},
    {"--verl-version", "the verl version, such as 0.6.0: rollout defaults changed across versions (default: those before 0.6.0)"},
    {"--host-unmodelled", "host RAM per node a report shows beyond the modelled terms, such as 500GB"},
    {"--node-gpus", "GPUs of one node, such as 8 (OpenRLHF's arguments do not say; default 8): the roles' GPUs are placed on nodes of this size"},
    {"--cuda-context", "bytes per process outside PyTorch's allocator (default: measured on an H100, 650,969,088 B)"},
    {"--vllm-cuda-graphs", "vLLM's CUDA graph memory per GPU as it logs it, such as 0.36GiB (from 0.21: 'Estimated CUDA graph memory')"},
};

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail("cannot read " + detail::quoted(path) + "; pass an OpenRLHF argument file or a verl/EasyR1 YAML config");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

bool is_setting(const std::string& flag) {
  return std::any_of(job_setting_flags.begin(), job_setting_flags.end(), [&](const setting_flag& f) { return flag == f.flag; });
}

/// Adds `--flag value` to `given`; `where` says where the pair was written, for the error.
void add_setting(std::map<std::string, std::string>& given, const std::vector<std::string>& words, std::size_t& i, const std::string& where) {
  const std::string& flag = words[i];
  if (!is_setting(flag) || i + 1 == words.size())
    detail::fail(where + " has " + detail::quoted(flag) + "; it takes " +
                 detail::join_names(job_setting_flags, ", ", [](const setting_flag& f) { return std::string(f.flag); }) + ", each with a value");
  given[flag] = words[++i];
}

job_settings settings_of(const job_args& a, const std::string& text) {
  std::map<std::string, std::string> given;
  std::vector<std::string> directives;
  for (const std::string& d : split_command_line(text).directives)
    for (const std::string& w : split_command_line(d).words) directives.push_back(w);
  for (std::size_t i = 0; i < directives.size(); ++i) add_setting(given, directives, i, "the file's `# zeromem:` line");
  for (const auto& s : a.settings) given[s.first] = s.second;
  job_settings s{};
  for (const auto& g : given) {
    const std::string& v = g.second;
    if (g.first == "--gpu") s.gpu = v;
    else if (g.first == "--host-memory") s.host_memory = parse_bytes(v, "the host memory (--host-memory)");
    else if (g.first == "--ray-threshold") s.ray_threshold = parse_real(v, 0.0, 1.0, true);
    else if (g.first == "--mean-tokens") s.mean_tokens = parse_tokens(v, "the mean tokens (--mean-tokens)");
    else if (g.first == "--image-tokens") s.image_tokens = parse_count(v, "the image tokens per sequence (--image-tokens)");
    else if (g.first == "--vllm-version") s.vllm_version = v;
    else if (g.first == "--deepspeed-version") s.deepspeed_version = v;
    else if (g.first == "--openrlhf-version") s.openrlhf_version = v;
    else if (g.first == "--verl-version") s.verl_version = v;
    else if (g.first == "--host-unmodelled") s.host_unmodelled = parse_bytes(v, "the unmodelled host RAM (--host-unmodelled)");
    else if (g.first == "--node-gpus") s.node_gpus = detail::require_positive(parse_count(v, "the GPUs per node (--node-gpus)"), "the GPUs per node (--node-gpus)");
    else if (g.first == "--cuda-context") s.cuda_context = parse_bytes(v, "the CUDA context (--cuda-context)");
    else if (g.first == "--vllm-cuda-graphs") s.vllm_cuda_graphs = parse_bytes(v, "vLLM's CUDA graph memory (--vllm-cuda-graphs)");
  }
  if (given.count("--ray-threshold") != 0 && given.count("--host-memory") == 0)
    detail::fail("--ray-threshold is applied to one node's host RAM; add --host-memory (such as 760GB) or drop it");
  s.resolve_model = [](const std::string& path) -> std::optional<transformer_config> {
    // A model's directory holding a config.json, or a .json file, read as --hf-config reads it; anything else (a Hub
    // name) is left to the caller.
    std::error_code ec;
    const bool json_file = path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0 && std::ifstream(path).good();
    if (json_file || std::filesystem::is_regular_file(path + "/config.json", ec)) return read_hf_config(path);
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

/// The settings given on the command line that the launch reads nothing with are refused (each printed the same bytes):
/// the vLLM ones where no vLLM engine runs, and the DeepSpeed version where FSDP trains (verl, EasyR1). A file's own
/// `# zeromem:` line is not refused: an override such as vllm_num_engines=0 may leave it unread.
job_reading with_settings_read(job_reading r, const job_args& a, bool fsdp) {
  const rollout_engines& e = r.job.rollout;
  if ((a.settings.count("--vllm-version") != 0 || a.settings.count("--vllm-cuda-graphs") != 0) && !(e.present && e.kind == rollout_engine_kind::vllm))
    detail::fail(std::string("--vllm-version and --vllm-cuda-graphs describe vLLM engines, and this launch has ") +
                 (e.present ? "SGLang engines" : "no rollout engine") + "; drop them");
  if (fsdp && a.settings.count("--deepspeed-version") != 0)
    detail::fail("--deepspeed-version is for OpenRLHF's DeepSpeed roles; a verl or EasyR1 config trains with FSDP, drop it");
  return r;
}

/// verl's and EasyR1's keys: the file's, then the overrides, interpolations resolved.
job_reading read_verl_keys(config_pairs kv, const job_args& a, const std::string& text) {
  for (const std::string& o : a.overrides) kv.push_back(key_value(o, "the override"));
  resolve_interpolations(kv);
  return with_settings_read(read_verl(std::move(kv), settings_of(a, text)), a, true);
}

}  // namespace

job_args with_case_words(job_args a, const std::vector<std::string>& words) {
  for (std::size_t i = 0; i < words.size(); ++i) {
    if (words[i].rfind("--", 0) == 0) add_setting(a.settings, words, i, "the case");
    else a.overrides.push_back(words[i]);
  }
  return a;
}

job_reading read_job(const job_args& a) {
  const std::string text = a.text ? *a.text : read_text(a.file);
  if (is_yaml(a.file)) return read_verl_keys(yaml_keys(text, a.file), a, text);
  // A model's config.json (a JSON object naming model_type) given where a launch file goes.
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{' && text.find("\"model_type\"") != std::string::npos)
    detail::fail(detail::quoted(a.file) + " is a model's config.json, not a launch file; pass it to zeromem estimate --hf-config, "
                 "and give job an OpenRLHF argument file or a verl/EasyR1 YAML config");
  std::vector<std::string> words = split_command_line(text).words;
  const auto verl = std::find_if(words.begin(), words.end(), [](const std::string& w) { return w.find("verl.trainer.main") != std::string::npos; });
  if (verl != words.end()) {  // a verl launch line: key=value words over verl's defaults
    config_pairs kv;
    for (auto w = verl + 1; w != words.end() && *w != "|" && *w != "2>&1" && *w != ">" && *w != "&&"; ++w)
      if (*w != "$@") kv.push_back(key_value(*w, "in the verl command line, the word"));
    return read_verl_keys(std::move(kv), a, text);
  }
  for (const std::string& o : a.overrides) {  // key=value overrides become --key value
    const auto [key, value] = key_value(o, "the override");
    words.push_back("--" + key);
    if (!value.empty()) words.push_back(value);
  }
  return with_settings_read(read_openrlhf(words, settings_of(a, text)), a, false);
}

}  // namespace zeromem::cli
