// RLHF launch configurations read into an rlhf_job: OpenRLHF's train_ppo_ray arguments, verl's and EasyR1's
// configs (as flat dotted keys; the YAML reading is the caller's). Each mapping names the framework code that
// acts on the key. Strings in, values out; does no I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeromem/core/gpus.hpp"
#include "zeromem/core/parse.hpp"
#include "zeromem/jobs/rlhf.hpp"

namespace zeromem {

/// What a launch file cannot say, from `# zeromem:` lines in it and from the command line.
struct job_settings {
  std::string gpu;                    // a name in the GPU table
  bytes host_memory{};                // one node's RAM; 0: host RAM not checked
  double ray_threshold = 0.95;        // RAY_memory_usage_threshold
  std::int64_t mean_tokens = 0;       // real tokens per sequence on average; 0: the maxima
  std::string vllm_version;           // decides what gpu_memory_utilization means
  std::string deepspeed_version;      // 0.16.x has the ZeRO-3 checkpointing defect
  std::string openrlhf_version;       // decides defaults and, for 0.6.0 only, forced sleep modes (read_openrlhf)
  std::string verl_version;           // decides verl's rollout defaults (read_verl); empty: those before v0.6.0
  bytes host_unmodelled{};            // host RAM per node a report shows beyond the modelled terms
  std::int64_t node_gpus = 0;         // GPUs of one node (OpenRLHF's arguments do not say); 0: 8
  std::optional<bytes> cuda_context;  // per process; default: step_config's measured value
  bytes vllm_cuda_graphs{};           // CUDA graph memory per GPU as vLLM logs it; 0: not given
  std::optional<std::int64_t> image_tokens;  // per sequence (vision-language actors); default: the prompt length
  /// Reads a model path (a local directory with config.json); nullopt: match the path's name to a preset.
  std::function<std::optional<transformer_config>(const std::string& path)> resolve_model;
};

/// The job, and which keys were read, which are known not to matter for memory, and which are unknown.
struct job_reading {
  rlhf_job job;
  std::vector<std::string> read, ignored, unknown, assumed;
  std::int64_t actor_token_budget = 0;  // dynamic batches: the actor's tokens per GPU and pass; 0: fixed micro-batches
  std::string token_budget_key;         // the key that sets it (verl ppo_max_token_len_per_gpu, OpenRLHF max_tokens_per_gpu)
  bool grouped_names = false;           // OpenRLHF's grouped arguments (v0.10.2 on)
  // verl: how an actor micro-batch of m sequences a GPU is written in this config's keys (--explain's fixes):
  // micro_prefix + micro_key + "=" + m / micro_divisor x micro_scale, where micro_divisor divides m.
  std::string micro_key, micro_prefix;
  std::int64_t micro_scale = 1, micro_divisor = 1;
  // The sizes of experience making's forward-only passes (log-probs, reference, values) as this config writes them:
  // each key with its value now and its least valid value (--explain halves them together, a step at a time).
  struct size_key {
    std::string key;
    std::int64_t now = 0, least = 1;
  };
  std::vector<size_key> forward_sizes;
  // verl's and EasyR1's critic: its update's micro-batch (or token budget) as this config writes it; empty elsewhere
  // (OpenRLHF's micro_train_batch_size sets the actor's and the critic's alike).
  std::vector<size_key> critic_update_sizes;
  // OpenRLHF: the reference's, critic's and reward model's --X_num_nodes keys and values, where they run
  // (--explain's more GPUs scales them with the actor's).
  std::vector<std::pair<std::string, std::int64_t>> other_nodes;
};

/// Splits a shell command line as bash would for a launch script: backslash-newline joins lines, quotes group,
/// `#` starts a comment at a word's start. `# zeromem: ...` comment lines are returned in `directives`.
struct command_line {
  std::vector<std::string> words;
  std::vector<std::string> directives;
};

inline command_line split_command_line(std::string_view text) {
  command_line out{};
  std::string word;
  bool in_word = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
      ++i;
      continue;
    }
    if (c == '#' && !in_word) {
      const std::size_t end = std::min(text.find('\n', i), text.size());
      const std::string_view comment = detail::trim(text.substr(i + 1, end - i - 1));
      if (comment.substr(0, 8) == "zeromem:") out.directives.emplace_back(detail::trim(comment.substr(8)));
      i = end;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      if (in_word) out.words.push_back(word);
      word.clear();
      in_word = false;
      continue;
    }
    in_word = true;
    if (c == '\'' || c == '"') {
      const std::size_t close = text.find(c, i + 1);
      if (close == std::string_view::npos) detail::fail("unterminated " + std::string(1, c) + " quote in the command line");
      word.append(text.substr(i + 1, close - i - 1));
      i = close;
    } else if (c == '\\' && i + 1 < text.size()) {
      word.push_back(text[++i]);
    } else {
      word.push_back(c);
    }
  }
  if (in_word) out.words.push_back(word);
  return out;
}

/// A case a launch file states about itself: `# zeromem case: LABEL | reported: fits|out of memory|none | WORDS`.
/// WORDS are what `zeromem job FILE` takes after the file: key=value overrides and `--setting value` pairs.
struct launch_case {
  std::string label;
  std::optional<bool> reported_fits;  // what a report says happened; nullopt: no report covers the case
  std::vector<std::string> words;
};

/// What a launch file says about itself: its leading comment lines (the description, up to the first line that is
/// not a comment; `# zeromem:` and case lines left out), their first sentence (the title), and its cases.
struct launch_header {
  std::string title;
  std::vector<std::string> description;
  std::vector<launch_case> cases;
};

inline launch_header read_launch_header(std::string_view text) {
  launch_header h{};
  bool in_header = true;
  for (std::size_t at = 0; at < text.size();) {
    const std::size_t end = std::min(text.find('\n', at), text.size());
    const std::string_view line = detail::trim(text.substr(at, end - at));
    at = end + 1;
    if (line.empty() || line[0] != '#') {
      in_header = in_header && line.empty() && h.description.empty();
      continue;
    }
    const std::string_view comment = detail::trim(line.substr(1));
    if (comment.substr(0, 13) == "zeromem case:") {
      std::string_view rest = comment.substr(13);
      std::vector<std::string_view> parts;
      for (std::size_t bar; (bar = rest.find('|')) != std::string_view::npos; rest = rest.substr(bar + 1)) parts.push_back(rest.substr(0, bar));
      parts.push_back(rest);
      const std::string_view reported = parts.size() > 1 ? detail::trim(parts[1]) : std::string_view{};
      launch_case c{std::string(detail::trim(parts[0])), std::nullopt, {}};
      if (c.label.empty() || parts.size() > 3 || reported.substr(0, 9) != "reported:")
        detail::fail("the case line " + detail::quoted(std::string(line)) +
                     " is not `# zeromem case: LABEL | reported: fits|out of memory|none | key=value ...`");
      const std::string_view verdict = detail::trim(reported.substr(9));
      if (verdict == "fits") c.reported_fits = true;
      else if (verdict == "out of memory") c.reported_fits = false;
      else if (verdict != "none")
        detail::fail("the case " + detail::quoted(c.label) + " says reported: " + detail::quoted(std::string(verdict)) +
                     "; write fits, out of memory or none");
      if (parts.size() == 3) c.words = split_command_line(parts[2]).words;
      h.cases.push_back(std::move(c));
      continue;
    }
    if (comment.substr(0, 8) == "zeromem:" || !in_header) continue;
    h.description.emplace_back(comment);
  }
  // The title is the first sentence of the description, which may run over several lines.
  std::string all;
  for (const std::string& d : h.description) all += (all.empty() ? "" : " ") + d;
  const std::size_t stop = all.find(". ");
  h.title = all.substr(0, stop == std::string::npos ? all.size() : stop + 1);
  return h;
}

namespace detail {

inline std::string lowercase(std::string_view s) { return folded(s, false); }

/// A model path's architecture: the caller's resolver (config.json), else the preset whose name starts the path's
/// last component (lowercase, a leading "meta-" dropped): "Qwen/Qwen2.5-7B-Instruct-1M" is qwen2.5-7b.
inline transformer_config model_of_path(const std::string& path, const job_settings& s, const char* key) {
  if (s.resolve_model)
    if (std::optional<transformer_config> m = s.resolve_model(path)) return *m;
  std::string base = lowercase(path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1));
  if (base.rfind("meta-", 0) == 0) base = base.substr(5);
  const model_preset* best = nullptr;
  for (const model_preset& p : model_presets) {
    const std::string_view n = p.name;
    if (base.size() >= n.size() && base.compare(0, n.size(), n) == 0 && (base.size() == n.size() || base[n.size()] == '-') &&
        (best == nullptr || n.size() > best->name.size()))
      best = &p;
  }
  if (best == nullptr)
    fail("cannot tell the architecture of " + detail::quoted(path) + " (" + key + "); point it to a directory with config.json or name a preset (" +
         join_names(model_presets, ", ", [](const model_preset& p) { return p.name; }) + ")");
  return best->config;
}

/// Three-part version, "0.6.5" -> 6'005; "0.16.4" -> 16'004; "1.2.3" -> 1'002'003.
inline std::int64_t version_number(const std::string& v, const char* what) {
  std::int64_t parts[3] = {0, 0, 0};
  std::size_t at = 0;
  for (int i = 0; i < 3 && at <= v.size(); ++i) {
    const std::size_t dot = std::min(v.find('.', at), v.size());
    const std::string_view p = std::string_view(v).substr(at, dot - at);
    if (p.empty() || p.size() > 4 || !std::all_of(p.begin(), p.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      if (i == 0) fail("cannot read " + std::string(what) + " " + detail::quoted(v) + "; pass a version such as 0.6.5");
      break;
    }
    parts[i] = std::stoll(std::string(p));
    at = dot + 1;
  }
  return parts[0] * 1'000'000 + parts[1] * 1'000 + parts[2];
}

/// Whether a DeepSpeed release has the ZeRO-3 checkpointing defect (known_defects): 0.16.0-0.16.x (DeepSpeed issue
/// #7116, introduced by PR #6726).
inline bool deepspeed_zero3_checkpointing_leak(const std::string& version, const char* what) {
  const std::int64_t v = version_number(version, what);
  return v >= 16'000 && v < 17'000;
}

/// Keys and values of a launch configuration, tracking which were read.
class config_keys {
 public:
  /// `flag_prefix` goes before a key where an error names it: "--" for OpenRLHF's arguments, "" for verl's keys.
  explicit config_keys(std::vector<std::pair<std::string, std::string>> kv, const char* flag_prefix = "") : prefix_(flag_prefix) {
    for (auto& p : kv) values_[p.first] = std::move(p.second);  // later overrides win
  }
  /// The key as the user writes it: "--zero_stage", "trainer.nnodes".
  std::string shown(const std::string& k) const { return prefix_ + k; }
  /// Whether the key is set to a value: YAML's and Hydra's null (null, ~, Python's None) leaves it unset, as
  /// OmegaConf reads it (verl's yaml sets its deprecated keys to null).
  bool has(const std::string& k) const {
    const auto it = values_.find(k);
    return it != values_.end() && !is_null(it->second);
  }
  std::optional<std::string> text(const std::string& k) {
    const auto it = values_.find(k);
    if (it == values_.end()) return std::nullopt;
    read_.insert(k);
    return it->second;
  }
  bool flag(const std::string& k, bool otherwise = false) {
    const std::optional<std::string> v = text(k);
    if (!v) return otherwise;
    const std::string l = lowercase(*v);
    if (l == "" || l == "true" || l == "1" || l == "yes" || l == "on") return true;
    if (l == "false" || l == "0" || l == "no" || l == "off" || l == "null" || l == "~") return false;
    fail(shown(k) + " must be true or false, not " + detail::quoted(*v));
  }
  std::int64_t integer(const std::string& k, std::int64_t otherwise) {
    const std::optional<std::string> v = text(k);
    if (!v || is_null(*v)) return otherwise;
    return parse_integer(*v, shown(k).c_str(), 0, std::int64_t{1} << 40);
  }
  /// An integer of at least 1: nodes, GPUs, a parallel degree, a micro-batch, a length (each divides or bounds
  /// something the reader computes).
  std::int64_t count(const std::string& k, std::int64_t otherwise) {
    const std::int64_t n = integer(k, otherwise);
    if (n < 1) fail(shown(k) + " is " + std::to_string(n) + "; it must be at least 1");
    return n;
  }
  /// A finite number of at least 0.
  double number(const std::string& k, double otherwise) {
    const std::optional<std::string> v = text(k);
    if (!v) return otherwise;
    std::size_t used = 0;
    double d = -1;
    try {
      d = std::stod(*v, &used);
    } catch (...) {
      used = 0;
    }
    if (used == 0 || used != v->size() || !(d >= 0.0 && d < 1e300)) fail(shown(k) + " must be a number of at least 0, not " + detail::quoted(*v));
    return d;
  }
  double fraction(const std::string& k, double otherwise) {
    const std::optional<std::string> v = text(k);
    if (!v) return otherwise;
    std::size_t used = 0;
    double d = 0;
    try {
      d = std::stod(*v, &used);
    } catch (...) {
      used = 0;
    }
    if (used != v->size() || !(d > 0.0 && d <= 1.0)) fail(shown(k) + " must be a fraction in (0, 1], not " + detail::quoted(*v));
    return d;
  }
  void sort_rest(job_reading& r, const std::set<std::string>& ignored_prefixes) const {
    for (const auto& p : values_) {
      if (read_.count(p.first)) r.read.push_back(p.first);
      else if (std::any_of(ignored_prefixes.begin(), ignored_prefixes.end(), [&](const std::string& i) {
                 return p.first == i || (i.back() == '.' && p.first.rfind(i, 0) == 0);
               }))
        r.ignored.push_back(p.first);
      else r.unknown.push_back(p.first);
    }
  }

 private:
  static bool is_null(const std::string& v) { return v == "null" || v == "~" || v == "None"; }
  std::map<std::string, std::string> values_;
  std::set<std::string> read_;
  std::string prefix_;
};

inline void apply_settings(rlhf_job& j, const job_settings& s, job_reading& r) {
  if (s.gpu.empty()) fail("the GPU is not in the launch file; pass --gpu NAME (or a `# zeromem: --gpu NAME` line in the file)");
  j.gpu_capacity = find_gpu(s.gpu).capacity;
  // cuBLAS workspaces of the GPU's architecture, per training process (gpu_group::blas_handles).
  j.step.blas_workspaces = blas_workspaces_of(find_gpu(s.gpu), training_blas_handles);
  j.step.multiprocessors = find_gpu(s.gpu).multiprocessors;
  j.host_capacity = s.host_memory;
  j.host_threshold = s.ray_threshold;
  j.mean_tokens = s.mean_tokens;
  j.host_unmodelled = s.host_unmodelled;
  if (s.cuda_context) j.step.cuda_context = *s.cuda_context;
  j.rollout.cuda_graphs = s.vllm_cuda_graphs;
  if (s.mean_tokens > 0) r.assumed.push_back("mean tokens per sequence " + std::to_string(s.mean_tokens));
}

/// Image tokens per sequence for a vision-language actor: --image-tokens, or the most a prompt holds. EasyR1's and
/// verl's datasets count a prompt's expanded image tokens against data.max_prompt_length and drop longer prompts
/// (filter_overlong_prompts; EasyR1 verl/utils/dataset.py _filter_overlong_prompts, verl verl/utils/dataset/
/// rl_dataset.py doc2len) or refuse them (truncation "error"), and a model given fewer image tokens than image features
/// fails; so a prompt's image tokens are at most max_prompt_length.
inline void apply_image_tokens(rlhf_job& j, const job_settings& s, job_reading& r) {
  const bool vision = j.actor.model.vision.blocks > 0;
  if (s.image_tokens && *s.image_tokens > 0 && !vision)
    fail("--image-tokens: the actor has no vision tower (Qwen2-VL, Qwen2.5-VL); drop --image-tokens");
  if (!vision) return;
  if (s.image_tokens) {
    j.image_tokens = *s.image_tokens;
    r.assumed.push_back("image tokens per sequence " + std::to_string(j.image_tokens));
  } else if (j.ulysses > 1) {
    r.assumed.push_back("no image tokens counted: the vision tower under Ulysses sequence parallelism is not modelled");
  } else {
    j.image_tokens = j.prompt_tokens;
    r.assumed.push_back("image tokens per sequence: the whole prompt (" + std::to_string(j.prompt_tokens) +
                        "), the most the dataset lets through; pass --image-tokens for your images");
  }
}

/// verl's use_dynamic_bsz for `sequences` sequences on one GPU under a per-GPU token budget: rearrange_micro_batches
/// (verl/utils/seqlen_balancing.py) makes min(N, ceil(N x L / (budget x sp))) micro-batches balanced by length; with
/// every sequence L tokens long (the mean, or the maxima) the largest holds ceil(N / that) sequences. verl asserts
/// that the budget x sp holds one sequence of the configured maximum length.
inline std::int64_t dynamic_micro_batch(const rlhf_job& j, const std::string& key, std::int64_t budget, std::int64_t sp, std::int64_t sequences) {
  const std::int64_t longest = longest_sequence(j);
  const std::int64_t room = checked_mul(budget, sp);
  if (room < longest)
    fail(key + " x ulysses_sequence_parallel_size = " + std::to_string(room) + " tokens is below one sequence of max_prompt_length + "
         "max_response_length = " + std::to_string(longest) + " (verl asserts max_token_len >= max_seq_len); raise it");
  const std::int64_t per_sequence = tokens_per_sequence(j);
  const std::int64_t passes = std::min(sequences, ceil_div(checked_mul(sequences, per_sequence), room));
  return ceil_div(sequences, std::max<std::int64_t>(1, passes));
}

/// vLLM's gpu_memory_utilization by version (docs/references.md §4): 0.6.0-0.6.3 a cap on everything on the GPU,
/// 0.6.4 on a per-instance budget, V1 (the default from 0.8.0) also refuses to start below it, and from 0.21.0 its
/// CUDA graph estimate comes out of the budget; V0 keeps swap_space (4 GiB) of pinned host RAM per worker.
inline void set_vllm_version(rollout_engines& e, const std::string& version, bool verl_patched) {
  if (version.empty()) fail("the vLLM version decides what gpu_memory_utilization means; pass --vllm-version (such as 0.6.5)");
  const vllm_version_traits t = vllm_traits(version_number(version, "the vLLM version"), verl_patched);
  e.semantics = t.semantics;
  e.refuse_if_free_below_budget = t.refuse_if_free_below_budget;
  e.swap_space_gib = t.swap_space_gib;
  e.cuda_graphs_in_budget = t.cuda_graphs_in_budget;
}

/// vLLM's default batch limits for the job's version, GPU and context (prompt + response maxima).
inline vllm_batch_limits default_limits(const rlhf_job& j, const job_settings& s) {
  return vllm_default_limits(version_number(s.vllm_version, "the vLLM version"), h100_or_h200(s.gpu),
                             longest_sequence(j));
}

}  // namespace detail

namespace detail {
/// OpenRLHF's argument names. Up to v0.10.1 they are flat (--zero_stage); from v0.10.2 grouped (--ds.zero_stage;
/// openrlhf/cli/train_ppo_ray.py at v0.11.0, 3c3be623). Each pair means the same in both; the names that differ in
/// meaning (lengths, precision, offload of the frozen models) are read apart in read_openrlhf.
struct openrlhf_name {
  std::string_view flat, grouped;
};
inline constexpr openrlhf_name openrlhf_names[] = {
    {"pretrain", "actor.model_name_or_path"},           {"reward_pretrain", "reward.model_name_or_path"},
    {"critic_pretrain", "critic.model_name_or_path"},   {"remote_rm_url", "reward.remote_url"},
    {"actor_num_nodes", "actor.num_nodes"},             {"actor_num_gpus_per_node", "actor.num_gpus_per_node"},
    {"critic_num_nodes", "critic.num_nodes"},           {"critic_num_gpus_per_node", "critic.num_gpus_per_node"},
    {"ref_num_nodes", "ref.num_nodes"},                 {"ref_num_gpus_per_node", "ref.num_gpus_per_node"},
    {"reward_num_nodes", "reward.num_nodes"},           {"reward_num_gpus_per_node", "reward.num_gpus_per_node"},
    {"colocate_all_models", "train.colocate_all"},      {"colocate_actor_ref", "train.colocate_actor_ref"},
    {"colocate_critic_reward", "train.colocate_critic_reward"},
    {"zero_stage", "ds.zero_stage"},                    {"adam_offload", "ds.adam_offload"},
    {"gradient_checkpointing", "actor.gradient_checkpointing_enable"},
    {"deepspeed_enable_sleep", "ds.enable_sleep"},      {"vllm_enable_sleep", "vllm.enable_sleep"},
    {"micro_train_batch_size", "train.micro_batch_size"}, {"micro_rollout_batch_size", "rollout.micro_batch_size"},
    {"vllm_num_engines", "vllm.num_engines"},           {"vllm_tensor_parallel_size", "vllm.tensor_parallel_size"},
    {"vllm_gpu_memory_utilization", "vllm.gpu_memory_utilization"}, {"enforce_eager", "vllm.enforce_eager"},
    {"packing_samples", "ds.packing_samples"},          {"ring_attn_size", "ds.ring_attn_size"},
    {"overlap_comm", "ds.overlap_comm"},                {"advantage_estimator", "algo.advantage.estimator"},
    {"init_kl_coef", "algo.kl.init_coef"},              {"load_in_4bit", "ds.load_in_4bit"},
    {"enable_ema", "train.enable_ema"},                 {"ds_tensor_parallel_size", "ds.tensor_parallel_size"},
    {"lora_rank", "ds.lora.rank"},                      {"zpg", "ds.zpg"},
    {"grad_accum_dtype", "ds.grad_accum_dtype"},        {"param_dtype", "ds.param_dtype"},
    {"attn_implementation", "ds.attn_implementation"},  {"max_len", "data.max_len"},
    {"max_new_tokens", "rollout.max_new_tokens"},       {"use_dynamic_batch", "train.dynamic_batch_enable"},
    {"train_max_tokens_per_gpu", "train.max_tokens_per_gpu"}, {"rollout_max_tokens_per_gpu", "rollout.max_tokens_per_gpu"},
    {"train_batch_size", "train.batch_size"},           {"rollout_batch_size", "rollout.batch_size"},
    {"n_samples_per_prompt", "rollout.n_samples_per_prompt"}, {"async_train", "train.async_enable"},
};
/// A flat name as a launch of grouped names spells it.
inline std::string openrlhf_spelling(std::string_view flat, bool grouped) {
  if (grouped)
    for (const openrlhf_name& n : openrlhf_names)
      if (n.flat == flat) return std::string(n.grouped);
  return std::string(flat);
}
/// Flat names with no grouped twin of the same meaning.
inline constexpr std::string_view openrlhf_flat_only[] = {"bf16", "prompt_max_len", "generate_max_len", "ref_reward_offload", "flash_attn"};
}  // namespace detail

namespace detail {
/// OpenRLHF's dynamic batches (--use_dynamic_batch from v0.9.0, --train.dynamic_batch_enable from v0.10.2): packing is
/// forced on; a pass holds the sequences that fit a per-GPU token budget x ring_attn_size (first fit,
/// utils/seqlen_balancing.py get_minimum_num_micro_batch_size), balanced over that many passes
/// (get_seqlen_balanced_partitions). With every sequence L tokens long (the mean, or the maxima), a budget B holds
/// f = max(1, floor(B / L)) sequences and N sequences take m = ceil(N / f) passes of ceil(N / m). Training: N =
/// train_batch_size / dp on each rank (replay_buffer.py); the experience forward: N = rollout_batch_size x
/// n_samples_per_prompt over max(floor(m / E) x E, E) passes, E = actor ranks / ring (experience_maker.py
/// split_rollout_samples); the rollout budget is the training one (16192 tokens) unless given.
template <class Name>
inline void openrlhf_dynamic_batches(rlhf_job& j, config_keys& k, const Name& name) {
  j.packing = true;
  const std::int64_t ring = j.ulysses, length = tokens_per_sequence(j);
  const std::int64_t train_budget = k.integer(name("train_max_tokens_per_gpu"), 16192);
  const std::int64_t rollout_budget = k.integer(name("rollout_max_tokens_per_gpu"), train_budget);
  const auto per_pass = [&](std::int64_t budget) { return std::max<std::int64_t>(1, checked_mul(budget, ring) / length); };
  const std::int64_t train_batch = k.count(name("train_batch_size"), 128);
  for (rlhf_role* role : {&j.actor, &j.critic}) {
    if (!role->present) continue;
    const std::int64_t dp = std::max<std::int64_t>(1, role->gpus / ring), n = train_batch / dp;
    if (n == 0)
      fail("--" + name("train_batch_size") + " " + std::to_string(train_batch) + " gives no sequence to each of " + std::to_string(dp) +
           " ranks; raise it");
    role->train_micro_batch = ceil_div(n, ceil_div(n, per_pass(train_budget)));
  }
  const std::int64_t samples = checked_mul(k.integer(name("rollout_batch_size"), 1024), k.integer(name("n_samples_per_prompt"), 1));
  const std::int64_t ranks = std::max<std::int64_t>(1, j.actor.gpus / ring);
  const std::int64_t passes = std::max(ceil_div(samples, per_pass(rollout_budget)) / ranks * ranks, ranks);
  for (rlhf_role* role : {&j.actor, &j.critic, &j.reference, &j.reward}) role->forward_micro_batch = ceil_div(samples, passes);
}
}  // namespace detail

/// OpenRLHF `python -m openrlhf.cli.train_ppo_ray ...` arguments, flat (v0.5-v0.10.1) or grouped (v0.10.2 on)
/// (openrlhf/cli/train_ppo_ray.py at c935fc71 and at v0.11.0).
inline job_reading read_openrlhf(const std::vector<std::string>& words, const job_settings& s) {
  // The arguments start after the module (a `ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray` prefix too).
  std::size_t start = 0;
  for (std::size_t i = 0; i < words.size(); ++i)
    if (words[i].find("train_ppo_ray") != std::string::npos) start = i + 1;
  std::vector<std::pair<std::string, std::string>> kv;
  for (std::size_t i = start; i < words.size(); ++i) {
    const std::string& w = words[i];
    if (w.rfind("--", 0) != 0) {
      if (w == "|" || w == ">" || w == "2>&1" || w == "&&") break;  // the rest of the shell line
      detail::fail("unexpected word " + detail::quoted(w) + " in the OpenRLHF arguments; each argument starts with --");
    }
    std::string key = w.substr(2), value;
    if (const std::size_t eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
    } else {
      while (i + 1 < words.size() && words[i + 1].rfind("--", 0) != 0 && words[i + 1] != "|" && words[i + 1] != ">" && words[i + 1] != "2>&1")
        value += (value.empty() ? "" : " ") + words[++i];
    }
    kv.emplace_back(key, value);
  }
  // Grouped names (from v0.10.2) have a dot; one launch uses one kind.
  const bool grouped = std::any_of(kv.begin(), kv.end(), [](const auto& p) { return p.first.find('.') != std::string::npos; });
  if (grouped) {
    for (const auto& p : kv) {
      const auto twin = std::find_if(std::begin(detail::openrlhf_names), std::end(detail::openrlhf_names),
                                     [&](const detail::openrlhf_name& n) { return n.flat == p.first; });
      const bool flat_only = std::find(std::begin(detail::openrlhf_flat_only), std::end(detail::openrlhf_flat_only), p.first) !=
                             std::end(detail::openrlhf_flat_only);
      if (twin != std::end(detail::openrlhf_names) || flat_only)
        detail::fail("--" + p.first + " is an OpenRLHF name from before v0.10.2 and the other arguments are grouped (--ds.zero_stage); " +
                     (twin != std::end(detail::openrlhf_names) ? "write --" + std::string(twin->grouped)
                                                               : std::string("see openrlhf/cli/train_ppo_ray.py for its grouped form")));
    }
    if (!s.openrlhf_version.empty() && detail::version_number(s.openrlhf_version, "the OpenRLHF version") < 10'002)
      detail::fail("grouped OpenRLHF arguments (--ds.zero_stage) came in v0.10.2, not " + s.openrlhf_version + "; fix --openrlhf-version");
  }
  if (!s.verl_version.empty()) detail::fail("--verl-version is for verl configs; this is an OpenRLHF launch (use --openrlhf-version)");
  const auto name = [grouped](std::string_view flat) { return detail::openrlhf_spelling(flat, grouped); };
  detail::config_keys k(std::move(kv), "--");
  job_reading r{};
  rlhf_job& j = r.job;
  j.framework = rlhf_framework::openrlhf;
  detail::apply_settings(j, s, r);
  const int stage = static_cast<int>(k.integer(name("zero_stage"), 2));  // default 2
  if (stage > 3) detail::fail(k.shown(name("zero_stage")) + " must be 0, 1, 2 or 3, got " + std::to_string(stage));
  // Defaults that changed across versions (train_ppo_ray.py): vllm_gpu_memory_utilization 0.9 -> 0.95 in v0.6.4,
  // micro-batches 4 (train) / 8 (rollout) -> 1 / 1 and prompt_max_len + generate_max_len -> max_len + max_new_tokens
  // in v0.10.0, --bf16 (else fp32) -> --param_dtype (bf16 by default) in v0.9.5. Grouped names imply v0.10.2 or
  // later; a flat launch without --openrlhf-version takes v0.6.0's, and each one used is listed as assumed.
  const std::int64_t version = !s.openrlhf_version.empty() ? detail::version_number(s.openrlhf_version, "the OpenRLHF version")
                               : grouped                   ? 10'002
                                                           : 0;
  const auto version_default = [&](const std::string& flat, const std::string& value, const char* changed_in) {
    if (version == 0 && !k.has(name(flat)))
      r.assumed.push_back("--" + flat + " " + value + " (OpenRLHF's default before " + changed_in + "; pass --openrlhf-version)");
  };
  // Precision: --param_dtype bf16 or fp16 (from v0.9.5, bf16 by default), or --bf16 before (else fp32).
  precision recipe = precision::fp32;
  if (k.has(name("param_dtype")) || version >= 9'005) {
    const std::string dtype_name = k.text(name("param_dtype")).value_or("bf16");
    if (dtype_name != "bf16" && dtype_name != "fp16") detail::fail(name("param_dtype") + " must be bf16 or fp16, not " + detail::quoted(dtype_name));
    recipe = dtype_name == "bf16" ? precision::mixed_bf16 : precision::mixed_fp16;
  } else {
    recipe = k.flag("bf16") ? precision::mixed_bf16 : precision::fp32;
    if (recipe == precision::fp32 && version == 0)
      r.assumed.push_back("fp32 training: no --bf16 (from OpenRLHF 0.9.5 --param_dtype is bf16 by default; pass --openrlhf-version)");
  }
  const bool checkpointing = k.flag(name("gradient_checkpointing"));
  // A role of 0 GPUs is a Ray actor group of world size 0, which cannot start (trainer/ray/launcher.py _initiate_actors).
  const std::int64_t nodes = k.count(name("actor_num_nodes"), 1), per_node = k.count(name("actor_num_gpus_per_node"), 8);
  j.colocate_all = k.flag(name("colocate_all_models"));
  j.colocate_actor_ref = k.flag(name("colocate_actor_ref"));
  j.colocate_critic_reward = k.flag(name("colocate_critic_reward"));
  // Sleep modes. vLLM's acts only with --colocate_all_models (turned off without it); DeepSpeed's on its own
  // (ppo_actor.py, ppo_critic.py). For one day of the hybrid engine (commits a75d7a76 to 07608d73, numbered 0.6.0:
  // after the v0.6.0 tag, which has no --colocate_all_models, before v0.6.0.post1) --colocate_all_models turned both
  // on and DeepSpeed's needed it; no release does either.
  if (j.colocate_all && !grouped) {
    if (s.openrlhf_version.empty())
      detail::fail("--colocate_all_models means different things across OpenRLHF versions; pass --openrlhf-version (such as 0.6.1)");
    r.assumed.push_back("OpenRLHF " + s.openrlhf_version);
  }
  const bool first_day = !grouped && version == 6'000 && s.openrlhf_version.find("post") == std::string::npos;
  const bool forced_sleep = first_day && j.colocate_all;
  const bool ds_sleep = (k.flag(name("deepspeed_enable_sleep")) && (!first_day || j.colocate_all)) || forced_sleep;
  const bool vllm_sleep = (k.flag(name("vllm_enable_sleep")) || forced_sleep) && j.colocate_all;
  const std::int64_t micro_train = k.count(name("micro_train_batch_size"), version >= 10'000 ? 1 : 4);
  const std::int64_t micro_rollout = k.count(name("micro_rollout_batch_size"), version >= 10'000 ? 1 : 8);
  version_default("micro_train_batch_size", "4", "0.10.0");
  version_default("micro_rollout_batch_size", "8", "0.10.0");
  const auto role = [&](bool trained, const std::string& path_key, const std::string& prefix) {
    rlhf_role x{};
    x.present = true;
    x.model = detail::model_of_path(*k.text(path_key), s, ("--" + path_key).c_str());
    x.trained = trained;
    x.recipe = recipe;
    // Frozen models run ZeRO-3 when the job does, else stage 0 (openrlhf/utils/deepspeed get_eval_ds_config).
    x.zero_stage = trained || stage == 3 ? stage : 0;
    x.gpus = detail::checked_mul(k.count(name(prefix + "_num_nodes"), 1), k.count(name(prefix + "_num_gpus_per_node"), 8));
    x.gradient_checkpointing = trained && checkpointing;
    x.train_micro_batch = micro_train;
    x.forward_micro_batch = micro_rollout;
    return x;
  };
  if (!k.has(name("pretrain"))) detail::fail("the OpenRLHF arguments have no --" + name("pretrain") + " (the actor model)");
  j.actor = role(true, name("pretrain"), "actor");
  j.actor.gpus = detail::checked_mul(nodes, per_node);
  j.actor.adam_offload = k.flag(name("adam_offload"));
  // DeepSpeed builds the optimizer OpenRLHF names, AdamW: FusedAdam, whose multi-tensor kernel updates in place
  // (openrlhf/utils/deepspeed/deepspeed.py: FusedAdam, or DeepSpeedCPUAdam with --adam_offload; from v0.10 an
  // "AdamW" optimizer section that deepspeed/runtime/engine.py _configure_basic_optimizer turns into FusedAdam).
  j.step.optimizer = optimizer_impl::fused;
  j.actor.sleep_params = j.actor.sleep_optimizer = ds_sleep;
  j.nodes = nodes;
  // The reference model exists only with a KL penalty: init_kl_coef > 0 (default 0.01; train_ppo_ray.py).
  const bool reference = k.number(name("init_kl_coef"), 0.01) > 0.0;
  // Offloaded frozen models: flat --ref_reward_offload for both, grouped --ref.offload and --reward.offload.
  const bool ref_offload = grouped ? k.flag("ref.offload") : k.flag("ref_reward_offload");
  const bool reward_offload = grouped ? k.flag("reward.offload") : ref_offload;
  if (reference) {
    j.reference = role(false, name("pretrain"), "ref");
    j.reference.offload_params = ref_offload;
    if (j.colocate_all || j.colocate_actor_ref) j.reference.gpus = j.actor.gpus;
  }
  // PPO's critic (advantage_estimator gae, the default): --critic_pretrain, else the reward model, else the actor.
  const std::string estimator = k.text(name("advantage_estimator")).value_or("gae");
  const bool remote_reward = k.has(name("remote_rm_url"));
  const std::string critic_path = k.has(name("critic_pretrain")) ? name("critic_pretrain")
                                  : k.has(name("reward_pretrain")) && !remote_reward ? name("reward_pretrain") : name("pretrain");
  if (estimator == "gae") {
    j.critic = role(true, critic_path, "critic");
    j.critic.value_model = true;
    j.critic.adam_offload = j.actor.adam_offload;
    j.critic.sleep_params = j.critic.sleep_optimizer = ds_sleep;
  }
  if (k.has(name("reward_pretrain")) && !remote_reward) {
    j.reward = role(false, name("reward_pretrain"), "reward");
    j.reward.value_model = true;
    j.reward.offload_params = reward_offload;
    if (j.colocate_critic_reward && j.critic.present) j.reward.gpus = j.critic.gpus;
  }
  for (const auto& [role_of, prefix] : {std::pair<const rlhf_role*, const char*>{&j.reference, "ref"}, {&j.critic, "critic"}, {&j.reward, "reward"}})
    if (role_of->present) r.other_nodes.emplace_back(name(std::string(prefix) + "_num_nodes"), k.count(name(std::string(prefix) + "_num_nodes"), 1));
  // Under --colocate_all_models the critic's and the reward model's ranks take the actor's placement group, rank i on
  // its bundle i (train_ppo_ray.py passes the actor's pg to their groups; launcher.py _initiate_actors:
  // placement_group_bundle_index=rank, v0.6.1 to v0.11.0): their own shape, sharded over their own ranks on the first
  // of the actor's GPUs, and no bundle for a rank beyond the actor's GPUs. With --colocate_critic_reward too, a critic
  // and the reward model take a placement group of the critic's GPUs instead (train_ppo_ray.py replaces pg).
  if (j.colocate_all && !(j.colocate_critic_reward && j.critic.present))
    for (const auto& [role_of, prefix] : {std::pair<const rlhf_role*, const char*>{&j.critic, "critic"}, {&j.reward, "reward"}})
      if (role_of->present && role_of->gpus > j.actor.gpus)
        detail::fail("with --" + name("colocate_all_models") + " the " + prefix + "'s " + std::to_string(role_of->gpus) + " GPUs (--" +
                     name(std::string(prefix) + "_num_nodes") + " x --" + name(std::string(prefix) + "_num_gpus_per_node") +
                     ") exceed the actor's " + std::to_string(j.actor.gpus) + ": OpenRLHF places its ranks on the actor's placement group, "
                     "one GPU each; give it at most the actor's GPUs");
  k.text(name("remote_rm_url"));
  if (k.integer(name("vllm_num_engines"), 0) > 0) {
    rollout_engines& e = j.rollout;
    e.present = true;
    e.engines = k.integer(name("vllm_num_engines"), 0);
    e.tp = k.integer(name("vllm_tensor_parallel_size"), 1);
    e.gpu_memory_utilization = k.fraction(name("vllm_gpu_memory_utilization"), version >= 6'004 ? 0.95 : 0.9);
    version_default("vllm_gpu_memory_utilization", "0.9", "0.6.4");
    e.enforce_eager = k.flag(name("enforce_eager"));
    e.sleep_level = vllm_sleep ? 1 : 0;  // vllm_engine.py sleep(level=1)
    e.sized_on_empty_gpu = true;  // create_vllm_engines runs before the DeepSpeed models are built
    detail::set_vllm_version(e, s.vllm_version, false);
    r.assumed.push_back("vLLM " + s.vllm_version);
    // Colocated engines share the actor's GPUs one for one (train_ppo_ray.py asserts it, from e0ff5f1a).
    if (j.colocate_all && detail::checked_mul(e.engines, e.tp) != j.actor.gpus)
      detail::fail("with --" + name("colocate_all_models") + " the vLLM engines must span the actor's GPUs: --" + name("vllm_num_engines") +
                   " x --" + name("vllm_tensor_parallel_size") + " = " + std::to_string(detail::checked_mul(e.engines, e.tp)) +
                   ", --" + name("actor_num_nodes") + " x --" + name("actor_num_gpus_per_node") + " = " + std::to_string(j.actor.gpus));
  }
  // The node's GPUs: the arguments say only how many each role takes per node (8 by default, train_ppo_ray.py).
  if (s.node_gpus > 0) j.gpus_per_node = s.node_gpus;
  else {
    j.gpus_per_node = 8;
    for (const char* prefix : {"actor", "ref", "critic", "reward"})
      j.gpus_per_node = std::max(j.gpus_per_node, k.integer(name(std::string(prefix) + "_num_gpus_per_node"), 8));
    r.assumed.push_back(std::to_string(j.gpus_per_node) + " GPUs per node (--node-gpus)");
  }
  // Lengths. Before v0.10.0: prompt_max_len + generate_max_len (1024 each), max_len (if given) caps both for vLLM
  // and the samples. From v0.10.0: max_len caps prompt + response (2048 by default) and max_new_tokens the response;
  // vLLM gets max_model_len = max_len (create_vllm_engines).
  if (k.has(name("max_new_tokens")) || (version >= 10'000 && !k.has("prompt_max_len") && !k.has("generate_max_len"))) {
    j.max_tokens = k.count(name("max_len"), 2048);
    j.response_tokens = std::min(k.count(name("max_new_tokens"), j.max_tokens), j.max_tokens);
    j.prompt_tokens = j.max_tokens;
  } else {
    j.prompt_tokens = k.count("prompt_max_len", 1024);
    j.response_tokens = k.count("generate_max_len", 1024);
    j.max_tokens = k.integer(name("max_len"), 0);
  }
  // create_vllm_engines passes max_model_len = prompt + response and leaves the batch limits at vLLM's defaults.
  if (j.rollout.present) j.rollout.limits = detail::default_limits(j, s);
  j.packing = k.flag(name("packing_samples"));
  j.ulysses = k.count(name("ring_attn_size"), 1);  // ring attention: each GPU holds 1/ring of a sequence's tokens
  // Ring attention runs on packed samples only (models/actor.py forward: unpacked batches take the plain path). From
  // v0.8.4 (806d0296) ring_attn_size > 1 turns packing on; before, without packing, every GPU holds whole sequences.
  if (j.ulysses > 1 && !j.packing) {
    if (version == 0 || version >= 8'004) j.packing = true;
    else j.ulysses = 1;
    if (version == 0) r.assumed.push_back("--" + name("packing_samples") + " on with ring attention (OpenRLHF from 0.8.4; pass --openrlhf-version)");
  }
  // OpenRLHF writes overlap_comm into the DeepSpeed config only when its flag is given (openrlhf/utils/deepspeed/
  // deepspeed_utils.py get_train_ds_config: `if overlap_comm: zero_opt_dict["overlap_comm"] = True`); without it
  // DeepSpeed's own default applies (off at ZeRO-1/2, where it decides the second bucket: deepspeed_buffers).
  j.overheads.overlap_comm = k.flag(name("overlap_comm")) ? overlap_comm_setting::on : overlap_comm_setting::deepspeed_default;
  // Attention: flash-attn kernels (flash_attention_2, the default, and flash_attention_3 or kernels-community ones: GQA
  // and sliding windows in the kernel) or transformers' SDPA, which packing replaces with flash_attention_2
  // (train_ppo_ray.py). Eager attention is not modelled for RLHF jobs.
  const std::string attn = k.text(name("attn_implementation")).value_or("flash_attention_2");
  if (attn == "eager")
    detail::fail("--" + name("attn_implementation") + " eager is not modelled for RLHF jobs; use flash_attention_2 or sdpa");
  j.attention = attn == "sdpa" && !j.packing ? attention_kind::flash : attention_kind::flash_attention_2;
  if (!grouped) k.flag("flash_attn");
  if (!s.deepspeed_version.empty()) {
    j.defects.deepspeed_016_zero3_checkpointing_leak = detail::deepspeed_zero3_checkpointing_leak(s.deepspeed_version, "the DeepSpeed version");
    r.assumed.push_back("DeepSpeed " + s.deepspeed_version);
  }
  // Memory matters but is not modelled for RLHF jobs: refuse rather than ignore.
  for (const char* key : {"load_in_4bit", "enable_ema"})
    if (k.flag(name(key))) detail::fail("--" + name(key) + " is not modelled for RLHF jobs; remove it to estimate the rest");
  if (k.integer(name("ds_tensor_parallel_size"), 1) > 1)
    detail::fail("--" + name("ds_tensor_parallel_size") + " (DeepSpeed AutoTP) is not modelled for RLHF jobs; remove it to estimate the rest");
  // LoRA with vLLM engines stops at the first weight sync: broadcast_to_vllm sends PEFT's parameter names, which the
  // engine has no target for (OpenRLHF issues #546, #991, #1349, up to v0.11.3).
  if (k.integer(name("lora_rank"), 0) > 0)
    detail::fail("--" + name("lora_rank") + " is not modelled for OpenRLHF jobs (with vLLM engines OpenRLHF fails at the first weight sync, "
                 "issues #546, #1349); remove it to estimate full fine-tuning");
  if (k.integer(name("zpg"), 1) > 1) detail::fail("--" + name("zpg") + " (ZeRO++ hpZ) is not modelled for RLHF jobs; remove it");
  if (k.has(name("grad_accum_dtype")) && *k.text(name("grad_accum_dtype")) != "")
    detail::fail("--" + name("grad_accum_dtype") + " is not modelled for RLHF jobs; remove it");
  if (k.flag(name("async_train"))) detail::fail("--" + name("async_train") + " is not modelled for RLHF jobs; remove it to estimate the rest");
  r.grouped_names = grouped;
  if (k.flag(name("use_dynamic_batch"))) {
    detail::openrlhf_dynamic_batches(j, k, name);
    r.token_budget_key = name("train_max_tokens_per_gpu");
    r.actor_token_budget = k.integer(r.token_budget_key, 16192);
    // The experience forwards' budget (openrlhf_dynamic_batches): a pass holds at least one sequence.
    r.forward_sizes.push_back({name("rollout_max_tokens_per_gpu"), k.integer(name("rollout_max_tokens_per_gpu"), r.actor_token_budget),
                               detail::longest_sequence(j)});
  } else {
    r.forward_sizes.push_back({name("micro_rollout_batch_size"), micro_rollout, 1});  // every role's forwards (role above)
  }
  // Packed samples are made by vLLM's engines only: train_ppo_ray.py asserts "Only support `--packing_samples` with
  // vLLM." (from 4c902a2a, 2024-09), after ring attention and dynamic batches turned packing on.
  if (j.packing && !j.rollout.present)
    detail::fail("--" + name("packing_samples") +
                 (k.flag(name("packing_samples")) ? std::string()
                  : j.ulysses > 1                 ? " (on with --" + name("ring_attn_size") + " " + std::to_string(j.ulysses) + ")"
                                                  : " (on with --" + name("use_dynamic_batch") + ")") +
                 " needs vLLM engines, which OpenRLHF asserts (\"Only support `--packing_samples` with vLLM.\"); pass --" +
                 name("vllm_num_engines") + " of at least 1");
  // Then what OpenRLHF asserts before it places the roles (train_ppo_ray.py train, from v0.3.6, 397d6a1c): a colocated
  // reference (--colocate_actor_ref, --colocate_all_models; with a KL penalty) has the actor's nodes and GPUs per
  // node, and a critic colocated with the reward model (--colocate_critic_reward) the reward model's.
  const auto same_shape = [&](const std::string& a, const std::string& b, const char* why) {
    const auto nodes_of = [&](const std::string& who) { return k.count(name(who + "_num_nodes"), 1); };
    const auto gpus_of = [&](const std::string& who) { return k.count(name(who + "_num_gpus_per_node"), 8); };
    const auto shape = [&](const std::string& who) {
      return "--" + name(who + "_num_nodes") + " " + std::to_string(nodes_of(who)) + " x --" + name(who + "_num_gpus_per_node") + " " +
             std::to_string(gpus_of(who));
    };
    if (nodes_of(a) != nodes_of(b) || gpus_of(a) != gpus_of(b))
      detail::fail("with --" + name(why) + " the " + b + " model takes the " + a + "'s shape, which OpenRLHF asserts: " + shape(b) + " against " +
                   shape(a) + "; give both the same");
  };
  if (j.reference.present && (j.colocate_all || j.colocate_actor_ref))
    same_shape("actor", "ref", j.colocate_all ? "colocate_all_models" : "colocate_actor_ref");
  if (j.colocate_critic_reward && j.critic.present && j.reward.present) same_shape("critic", "reward", "colocate_critic_reward");
  // _validate_args, v0.4.0 to v0.7.0 (removed in v0.7.1, 52498da5), by release: up to v0.5.7 the actor's GPUs a power
  // of 2, and the critic's a power of 2 dividing them; from v0.5.8 rollout_batch_size a multiple of the actor's GPUs
  // and the critic's GPUs dividing them; ZeRO-3 only with vLLM engines; v0.4.6-v0.5.0 no more engines than actor GPUs,
  // v0.5.8-v0.5.9 engines dividing the actor's GPUs, v0.6.0-v0.7.0 either dividing the other.
  if (version >= 4'000 && version <= 7'000) {
    const std::int64_t actor_world = j.actor.gpus, engines = k.integer(name("vllm_num_engines"), 0);
    const std::int64_t critic_world = detail::checked_mul(k.count(name("critic_num_nodes"), 1), k.count(name("critic_num_gpus_per_node"), 8));
    const std::string release = "OpenRLHF " + s.openrlhf_version + " asserts";
    const auto power_of_two = [](std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
    if (version <= 5'007 && !power_of_two(actor_world))
      detail::fail("the actor's " + std::to_string(actor_world) + " GPUs are not a power of 2, which " + release + "; use 1, 2, 4, 8, 16, ... GPUs");
    if (j.critic.present && version <= 5'007 && !power_of_two(critic_world))
      detail::fail("the critic's " + std::to_string(critic_world) + " GPUs (--" + name("critic_num_nodes") + " x --" + name("critic_num_gpus_per_node") +
                   ") are not a power of 2, which " + release + "; use 1, 2, 4, 8, 16, ... GPUs");
    if (j.critic.present && actor_world % critic_world != 0)
      detail::fail("the critic's " + std::to_string(critic_world) + " GPUs do not divide the actor's " + std::to_string(actor_world) + ", which " + release +
                   "; give the critic a divisor of the actor's GPUs (--" + name("critic_num_nodes") + " x --" + name("critic_num_gpus_per_node") + ")");
    if (stage == 3 && engines <= 0)
      detail::fail("ZeRO-3 without vLLM engines, which " + release + " (\"ZeRO-3 is only supported when vLLM enabled\"); add --" +
                   name("vllm_num_engines") + " or use --" + name("zero_stage") + " 2");
    if (const std::int64_t rollout_batch = k.integer(name("rollout_batch_size"), 1024); version >= 5'008 && rollout_batch % actor_world != 0)
      detail::fail("--" + name("rollout_batch_size") + " " + std::to_string(rollout_batch) + " is not a multiple of the actor's " + std::to_string(actor_world) +
                   " GPUs, which " + release + "; make it a multiple of " + std::to_string(actor_world));
    if (engines > 0) {
      const bool engines_fit = version < 4'006  ? true
                               : version <= 5'000 ? engines <= actor_world
                               : version <= 5'007 ? true
                               : version <= 5'009 ? actor_world % engines == 0
                                                  : actor_world % engines == 0 || engines % actor_world == 0;
      const std::string relation = version <= 5'000   ? " is more than the actor's "
                                   : version <= 5'009 ? " does not divide the actor's "
                                                      : " and the actor's GPUs do not divide one another: the actor has ";
      if (!engines_fit)
        detail::fail("--" + name("vllm_num_engines") + " " + std::to_string(engines) + relation + std::to_string(actor_world) + " GPUs, which " + release +
                     (version >= 6'000 ? "; use a divisor or a multiple of the actor's GPUs" : "; use a divisor of the actor's GPUs"));
    }
  }
  // Passes per optimizer step: train_batch_size x ring / micro_train_batch_size / world (openrlhf/utils/deepspeed/
  // deepspeed.py accumulated_gradient; train_ppo_ray.py --train_batch_size default 128); with dynamic batches the
  // passes each rank's share takes (openrlhf_dynamic_batches).
  const std::int64_t train_batch = k.count(name("train_batch_size"), 128);
  // Every role is a DeepSpeed engine whose config carries train_batch_size x ring_attn_size and micro_train_batch_size
  // (deepspeed.py get_ds_train_config, get_ds_eval_config; with dynamic batches the trained ones take micro-batch 1 and
  // one accumulation step instead). DeepSpeed takes gradient_accumulation_steps = train // micro // world and asserts
  // train == micro x steps x world, steps > 0 (deepspeed/runtime/config.py _set_batch_related_parameters,
  // _batch_assertion), world being the role's GPUs: a batch that is not a multiple of micro x GPUs stops the launch.
  // Before v0.7.1 (52498da5), --pretrain_data doubles the actor's (get_ds_train_config: "ptx loss (backward twice)").
  const bool dynamic = k.flag(name("use_dynamic_batch"));
  const std::pair<const rlhf_role*, const char*> deepspeed_roles[] = {
      {&j.actor, "actor"}, {&j.critic, "critic"}, {&j.reference, "ref"}, {&j.reward, "reward"}};
  for (const auto& [engine, label] : deepspeed_roles) {
    if (!engine->present || (dynamic && engine->trained)) continue;
    const std::int64_t batch = detail::checked_mul(train_batch, engine == &j.actor && version < 7'001 && k.has("pretrain_data") ? 2 : 1);
    const std::int64_t engine_batch = detail::checked_mul(batch, j.ulysses), step = detail::checked_mul(micro_train, engine->gpus);
    if (engine_batch % step != 0)
      detail::fail("--" + name("train_batch_size") + " " + std::to_string(train_batch) +
                   (batch != train_batch ? " (doubled by --pretrain_data)" : "") +
                   (j.ulysses > 1 ? " x --" + name("ring_attn_size") + " " + std::to_string(j.ulysses) : std::string()) +
                   " is not a multiple of --" + name("micro_train_batch_size") + " " + std::to_string(micro_train) + " x the " + label +
                   "'s " + std::to_string(engine->gpus) + " GPUs = " + std::to_string(step) +
                   ", which DeepSpeed asserts (train_batch_size == micro_batch_per_gpu x gradient_accumulation_steps x world_size); "
                   "make it a multiple of " + std::to_string(step / std::gcd(step, j.ulysses)) + " or change --" + name("micro_train_batch_size"));
  }
  for (rlhf_role* trained : {&j.actor, &j.critic})
    if (trained->present) {
      const std::int64_t per_rank = train_batch / std::max<std::int64_t>(1, trained->gpus / std::max<std::int64_t>(1, j.ulysses));
      trained->accumulation_steps = std::max<std::int64_t>(1, detail::ceil_div(per_rank, trained->train_micro_batch));
    }
  // The batch a step carries through Ray: rollout_batch_size x n_samples_per_prompt sequences (train_ppo_ray.py, defaults
  // 1024 and 1), held by the driver from v0.7.1 (single controller, 52498da5 PR #972), by each actor rank before.
  j.step_sequences = detail::checked_mul(k.integer(name("rollout_batch_size"), 1024), k.integer(name("n_samples_per_prompt"), 1));
  if (j.step_sequences == 0)
    detail::fail("--" + name("rollout_batch_size") + " x --" + name("n_samples_per_prompt") + " is 0: a step generates no sequence; pass at least 1");
  // From v0.7.2 (cfd42d94) train_ppo_ray.py asserts that the step's samples make at least one micro-batch for each
  // actor process: rollout_batch_size x n_samples_per_prompt // micro_rollout_batch_size >= actor GPUs // ring_attn_size.
  if (version >= 7'002 && j.step_sequences / micro_rollout < j.actor.gpus / j.ulysses)
    detail::fail("--" + name("rollout_batch_size") + " x --" + name("n_samples_per_prompt") + " = " + std::to_string(j.step_sequences) +
                 " makes " + std::to_string(j.step_sequences / micro_rollout) + " micro-batches of --" + name("micro_rollout_batch_size") + " " +
                 std::to_string(micro_rollout) + ", fewer than the " + std::to_string(j.actor.gpus / j.ulysses) +
                 " actor processes, which OpenRLHF asserts (\"The number of sample batches must be greater than or equal to the effective "
                 "number of actor processes.\")");
  j.batch_through_driver = version >= 7'001;
  if (version == 0) r.assumed.push_back("experiences made in each actor rank, no driver batch (OpenRLHF before 0.7.1; pass --openrlhf-version)");
  if (grouped) {
    for (const char* key : {"actor.optim", "critic.optim"})  // Muon keeps one momentum, not Adam's two moments
      if (const std::string o = k.text(key).value_or("adam"); o != "adam")
        detail::fail(std::string("--") + key + " " + o + " is not modelled for RLHF jobs; zeromem models Adam (--" + key + " adam)");
  }
  // Known, no effect on memory: logging, data, learning rates.
  if (grouped) {
    k.sort_rest(r, {"logger.", "ckpt.", "eval.", "actor.adam.", "critic.adam.", "actor.muon.", "critic.muon.", "actor.lr_scheduler",
                    "critic.lr_scheduler", "actor.lr_warmup_ratio", "critic.lr_warmup_ratio", "actor.min_lr_ratio", "critic.min_lr_ratio",
                    "actor.max_norm", "critic.max_norm", "actor.aux_loss_coef", "actor.dual_clip", "actor.entropy_coef", "actor.eps_clip",
                    "actor.eps_clip_low_high", "actor.gradient_checkpointing_reentrant", "actor.policy_loss_type", "critic.freezing_steps",
                    "critic.save_value_network", "critic.value_clip", "algo.advantage.gamma", "algo.advantage.lambd",
                    "algo.advantage.no_std_norm", "algo.advantage.is_correction_enable", "algo.advantage.is_correction_threshold",
                    "algo.advantage.is_correction_type", "algo.dynamic_filtering_enable", "algo.dynamic_filtering_range",
                    "algo.kl.estimator", "algo.kl.horizon", "algo.kl.target", "algo.kl.use_loss", "data.apply_chat_template",
                    "data.dataloader_num_workers", "data.disable_fast_tokenizer", "data.input_key", "data.input_template", "data.label_key",
                    "data.max_samples", "data.prompt_dataset", "data.prompt_probs", "data.prompt_split", "reward.clip_range",
                    "reward.normalize_enable", "reward.overlong_buffer_len", "reward.overlong_penalty_factor",
                    "reward.stop_properly_penalty_coef", "rollout.temperature",
                    "rollout.top_p", "rollout.vllm_generate_batch_size", "rollout.max_tokens_per_gpu",
                    "train.max_epochs", "train.num_episodes", "train.seed", "train.full_determinism_enable", "train.max_tokens_per_gpu",
                    "train.agent_func_path", "train.async_queue_size", "train.partial_rollout_enable", "train.ema_beta",
                    "vllm.enable_prefix_caching", "vllm.sync_backend", "vllm.sync_with_ray", "ds.value_head_prefix", "ds.use_universal_ckpt",
                    "ds.use_liger_kernel", "ds.ring_attn_head_stride", "ds.lora.alpha", "ds.lora.dropout", "ds.lora.target_modules",
                    "local_rank", "use_ms"});
    return r;
  }
  k.sort_rest(r, {"save_path", "ckpt_path", "save_steps", "logging_steps", "eval_steps", "max_ckpt_num", "max_ckpt_mem", "max_epochs",
                  "num_episodes", "max_samples", "prompt_data", "prompt_data_probs", "prompt_split", "input_key", "label_key",
                  "input_template", "apply_chat_template", "actor_learning_rate", "critic_learning_rate", "lr_warmup_ratio",
                  "kl_target", "use_kl_loss", "kl_estimator", "use_wandb", "wandb_org", "wandb_group", "wandb_project",
                  "wandb_run_name", "use_tensorboard", "temperature", "top_p", "seed", "normalize_reward", "advantage_estimator",
                  "eps_clip", "value_clip", "lambd", "gamma", "l2", "max_norm", "ptx_coef", "adam_betas", "reward_clip_range", "reward_pretrain",
                  "save_hf_ckpt", "disable_ds_ckpt", "load_checkpoint", "vllm_sync_backend", "vllm_sync_with_ray",
                  "enable_prefix_caching", "disable_fast_tokenizer", "gradient_checkpointing_use_reentrant", "freezing_actor_steps",
                  "save_value_network", "value_head_prefix", "local_rank", "max_len", "aux_loss_coef", "entropy_loss_coef", "runtime-env-json",
                  "vllm_generate_batch_size", "dynamic_filtering", "dynamic_filtering_reward_range", "no_advantage_std_norm",
                  "pretrain_data", "pretrain_split", "eval_dataset", "eval_split", "eval_temperature", "eval_n_samples_per_prompt",
                  "lora_alpha", "lora_dropout", "target_modules", "perf", "use_ms", "full_determinism", "lr_scheduler",
                  "actor_init_on_gpu", "use_liger_kernel", "use_ds_universal_ckpt"});
  detail::apply_image_tokens(j, s, r);
  return r;
}

namespace detail {
/// "all-linear", "[q_proj, v_proj]" or "['q_proj','v_proj']" -> PEFT target bits.
inline std::uint16_t lora_targets_of(std::string list) {
  std::string clean;
  for (char c : list)
    if (c != '[' && c != ']' && c != '\'' && c != '"' && c != ' ') clean += c;
  return parse_lora_targets(clean);
}

/// verl's FSDP LoRA (docs/advance/ppo_lora.rst; workers/config/model.py lora_rank, target_modules, exclude_modules;
/// fsdp_workers.py _build_model_optimizer applies get_peft_model to the actor). The reference policy is the actor
/// with its adapters disabled (ray_trainer.py ref_in_actor), so no reference model is built. Returns the rank.
inline std::int64_t read_verl_lora(config_keys& k, rlhf_job& j, job_reading& r, const std::string& M, const std::string& R,
                                   const std::string& strategy, const std::string& engine, std::int64_t verl_version) {
  if (k.integer(M + "lora.rank", 0) > 0)
    fail(M + "lora.rank is Megatron-Bridge's LoRA; with actor strategy " + strategy + " set " + M + "lora_rank instead");
  if (k.integer("critic.model.lora_rank", 0) > 0) fail("critic.model.lora_rank (a LoRA critic) is not modelled; remove it to estimate a full critic");
  const std::int64_t rank = k.integer(M + "lora_rank", 0);
  const std::optional<std::string> adapter = k.text(M + "lora_adapter_path");
  const bool has_adapter = adapter && *adapter != "null" && *adapter != "~" && !adapter->empty();
  if (rank == 0) {
    if (has_adapter) fail(M + "lora_adapter_path needs " + M + "lora_rank: give the adapter's rank (its adapter_config.json r)");
    return 0;
  }
  if (engine != "vllm") fail(M + "lora_rank with rollout.name " + detail::quoted(engine) + ": verl's LoRA runs with vLLM only");
  if (verl_version > 0 && verl_version < 7'000 && vllm_max_lora_rank(rank) != rank)
    fail(M + "lora_rank " + std::to_string(rank) + " is not a rank vLLM accepts, and verl before 0.7.0 passes it as is; use " +
         std::to_string(vllm_max_lora_rank(rank)) + " (1, 8, 16, 32, 64, 128, 256, 320 or 512)");
  if (const std::optional<std::string> ex = k.text(M + "exclude_modules"); ex && *ex != "null" && *ex != "~" && !ex->empty())
    fail(M + "exclude_modules is not modelled; list the adapted modules in " + M + "target_modules instead");
  j.actor.adapt.lora.rank = rank;
  j.actor.adapt.lora.targets = lora_targets_of(k.text(M + "target_modules").value_or("all-linear"));
  j.actor.adapt.lora.adapter_dtype = dtype::fp32;  // adapters in the actor's fp32 like the base (PEFT, verl loads fp32)
  k.text(M + "lora_alpha");                         // scales the update; no memory
  if (j.reference.present) {  // a reference policy (read_verl): the actor computes it
    j.reference.present = false;
    j.reference_in_actor = true;
    r.assumed.push_back("reference = the actor with its LoRA adapters disabled (verl ref_in_actor): no reference model");
  }
  // The sync: load_format dummy leaves the base out of vLLM, so the first sync sends it; layered_summon refuses that.
  const std::string load_format = k.text(R + "load_format").value_or("dummy");
  const bool layered = k.flag(R + "layered_summon");
  const bool dummy = load_format.find("dummy") != std::string::npos;
  if (layered && dummy)
    fail(R + "layered_summon needs the base preloaded in vLLM (verl raises); set " + R + "load_format=safetensors");
  j.lora_sync.present = true;
  j.lora_sync.whole_model = strategy == "fsdp" && !layered;
  j.lora_sync.base_through_host = dummy;
  return rank;
}
}  // namespace detail

/// verl's ppo_trainer config (and EasyR1's, told apart by its `worker.` keys) as flat dotted keys.
inline job_reading read_verl(std::vector<std::pair<std::string, std::string>> keys, const job_settings& s) {
  const bool easyr1 = std::any_of(keys.begin(), keys.end(), [](const auto& p) { return p.first.rfind("worker.", 0) == 0; });
  detail::config_keys k(std::move(keys));
  job_reading r{};
  rlhf_job& j = r.job;
  j.framework = rlhf_framework::verl;
  detail::apply_settings(j, s, r);
  const std::string A = easyr1 ? "worker.actor." : "actor_rollout_ref.actor.";
  const std::string R = easyr1 ? "worker.rollout." : "actor_rollout_ref.rollout.";
  const std::string F = easyr1 ? "worker.ref." : "actor_rollout_ref.ref.";
  const std::string M = easyr1 ? "worker.actor.model." : "actor_rollout_ref.model.";
  j.nodes = k.count("trainer.nnodes", 1);
  j.gpus_per_node = k.count("trainer.n_gpus_per_node", 8);
  if (s.node_gpus > 0)
    detail::fail("--node-gpus is for OpenRLHF arguments; a verl or EasyR1 config gives its nodes' GPUs in trainer.n_gpus_per_node");
  const std::int64_t world = detail::checked_mul(j.nodes, j.gpus_per_node);
  const std::string path_key = easyr1 ? M + "model_path" : M + "path";
  const std::optional<std::string> path = k.text(path_key);
  if (!path) detail::fail("the config has no " + path_key + " (the actor model)");
  // verl's release: from v0.6.0 rollout.enforce_eager defaults to False (ff6978c1, PR #2956) and rollout.max_num_seqs
  // reaches vLLM (beb62461, PR #2960), both Aug 2025; 0: unknown, the earlier defaults, each listed as assumed.
  if (easyr1 && !s.verl_version.empty()) detail::fail("--verl-version is for verl configs; this is an EasyR1 config (worker.* keys)");
  if (!s.openrlhf_version.empty()) detail::fail("--openrlhf-version is for OpenRLHF launches; this is a verl config (use --verl-version)");
  const std::int64_t verl_version = s.verl_version.empty() ? 0 : detail::version_number(s.verl_version, "the verl version (--verl-version)");
  if (verl_version > 0) r.assumed.push_back("verl " + s.verl_version);
  const std::string strategy = k.text(A + "strategy").value_or("fsdp");
  if (strategy != "fsdp" && strategy != "fsdp2") detail::fail(A + "strategy " + detail::quoted(strategy) + " is not modelled; use fsdp");
  // The trained models' optimizer: EasyR1's optim.strategy "adamw" is torch.optim.AdamW(fused=True)
  // (verl/workers/fsdp_workers.py _build_model_optimizer); verl's torch.optim.AdamW takes PyTorch's default, foreach.
  if (easyr1) {
    for (const std::string role : {"worker.actor.", "worker.critic."})
      if (const std::string o = k.text(role + "optim.strategy").value_or("adamw"); o != "adamw")
        detail::fail(role + "optim.strategy " + detail::quoted(o) + " is not modelled (AnyPrecisionAdamW keeps its states in bf16); use adamw");
    j.step.optimizer = optimizer_impl::fused;
  }
  const std::int64_t n = k.integer(R + "n", 1);
  // verl lays the GPUs out as a (world / sp) x sp device mesh (fsdp_workers.py: dp = world_size // sp,
  // init_device_mesh(mesh_shape=(dp, sp))), which must hold every rank.
  // Each worker builds its own mesh from its own section's degree: the actor's (the reference's follows it), the
  // critic's and the reward model's, each 1 by default (ppo_trainer.yaml from v0.2: critic and reward_model
  // ulysses_sequence_parallel_size: 1; fsdp_workers.py CriticWorker / RewardModelWorker.__init__). EasyR1 names it
  // ulysses_size (actor/config.py, critic/config.py), ulysses_sequence_parallel_size before.
  const auto sp_of = [&](const std::string& section) {
    std::string key = section + "ulysses_sequence_parallel_size";
    if (easyr1 && k.has(section + "ulysses_size")) {
      if (k.has(key)) detail::fail(section + "ulysses_size and " + key + " are both set; EasyR1 reads one (ulysses_size); remove the other");
      key = section + "ulysses_size";
    }
    const std::int64_t degree = k.count(key, 1);
    if (!detail::divides(degree, world))
      detail::fail(key + " " + std::to_string(degree) + " does not divide the " + std::to_string(world) +
                   " GPUs of trainer.nnodes x trainer.n_gpus_per_node; verl's (GPUs / sp) x sp device mesh needs a divisor");
    return degree;
  };
  const std::int64_t sp = sp_of(A);
  // Padding removal: the actor's (and the reference's, one model section) actor_rollout_ref.model.use_remove_padding,
  // False through v0.6.1 and True from v0.7.0 (561752996, PR #4461: config/model/hf_model.yaml); EasyR1's
  // worker.actor.padding_free, True.
  const bool actor_remove_padding = easyr1 ? k.flag(A + "padding_free", true) : k.flag(M + "use_remove_padding", verl_version >= 7'000);
  if (!easyr1 && verl_version == 0 && !k.has(M + "use_remove_padding"))
    r.assumed.push_back(M + "use_remove_padding False (verl's default before v0.7.0, True from it; pass --verl-version)");
  const std::int64_t dp = detail::quotient(world, sp);
  const std::int64_t batch = k.integer(easyr1 ? "data.rollout_batch_size" : "data.train_batch_size", 1024);
  // Sequences each GPU holds in one step, over `ranks` data-parallel ranks.
  const auto per_gpu_of = [&](std::int64_t ranks) { return detail::ceil_div(detail::checked_mul(batch, n), ranks); };
  const std::int64_t per_gpu = per_gpu_of(dp);
  j.step_sequences = detail::checked_mul(batch, n);  // the driver's batch (ray_trainer.py fit: batch.repeat(rollout.n))
  if (j.step_sequences == 0)
    detail::fail(std::string(easyr1 ? "data.rollout_batch_size" : "data.train_batch_size") + " x " + R + "n is 0: a step generates no sequence; pass at least 1");
  j.batch_through_driver = true;
  // From v0.2 verl checks the batch sizes before it starts (ray_trainer.py _validate_config at v0.2; since then
  // verl/utils/config.py validate_config and workers/config/actor.py), before its workers normalize them: what it
  // refuses is refused here, with its reason. Without dynamic batches: the sequences of a step split evenly over the
  // GPUs, one of each global and *_per_gpu micro-batch key (the global ones are deprecated and have no default), and a
  // global micro-batch that divides the mini-batch and gives every rank one sequence; Ulysses needs use_remove_padding.
  const auto verl_one_micro_key = [&](const std::string& key, bool needed) {
    const bool global = k.has(key), per_gpu_key = k.has(key + "_per_gpu");
    if (global && per_gpu_key) detail::fail(key + " and " + key + "_per_gpu are both set, which verl refuses; remove " + key + " (deprecated)");
    if (needed && !global && !per_gpu_key)
      detail::fail("neither " + key + " nor " + key + "_per_gpu is set, which verl refuses; set " + key + "_per_gpu");
  };
  const auto verl_global_micro = [&](const std::string& section, std::int64_t section_sp) {
    if (!k.has(section + "ppo_micro_batch_size")) return;
    const std::int64_t mini_size = k.integer(section + "ppo_mini_batch_size", k.integer(A + "ppo_mini_batch_size", 256)),
                       micro_size = k.integer(section + "ppo_micro_batch_size", 1);
    if (micro_size < 1 || mini_size % micro_size != 0 || detail::checked_mul(micro_size, section_sp) < world)
      detail::fail(section + "ppo_micro_batch_size " + std::to_string(micro_size) + " must divide " + section + "ppo_mini_batch_size " +
                   std::to_string(mini_size) + " and, times the Ulysses degree " + std::to_string(section_sp) + ", reach the " +
                   std::to_string(world) + " GPUs, which verl asserts; set " + section + "ppo_micro_batch_size_per_gpu instead");
  };
  // From v0.3.0 (4d27461d, PR #559; workers/config/actor.py validate since) verl also asserts that a step's prompts
  // fill a mini-batch: data.train_batch_size >= the actor's ppo_mini_batch_size, and the critic's where one trains.
  const auto verl_mini_within_batch = [&](const std::string& section) {
    if (verl_version < 3'000) return;
    const std::int64_t mini_size = k.integer(section + "ppo_mini_batch_size", k.integer(A + "ppo_mini_batch_size", 256));
    if (batch < mini_size)
      detail::fail("data.train_batch_size " + std::to_string(batch) + " is below " + section + "ppo_mini_batch_size " + std::to_string(mini_size) +
                   ", which verl asserts from v0.3.0; set the mini-batch to at most " + std::to_string(batch) + " prompts");
  };
  if (!easyr1 && verl_version >= 2'000) {
    if (!k.flag(A + "use_dynamic_bsz")) {
      verl_mini_within_batch(A);
      if (!detail::divides(world, j.step_sequences))
        detail::fail("data.train_batch_size x " + R + "n = " + std::to_string(j.step_sequences) + " is not a multiple of the " + std::to_string(world) +
                     " GPUs, which verl asserts (real_train_batch_size % n_gpus == 0); change either");
      verl_one_micro_key(A + "ppo_micro_batch_size", true);
      verl_one_micro_key(R + "log_prob_micro_batch_size", true);
      // The reference's only where verl builds one (from v0.4.0 with a KL term, decided below): a missing key is not
      // refused.
      verl_one_micro_key(F + "log_prob_micro_batch_size", false);
      verl_global_micro(A, sp);
    }
    if (sp > 1 && !actor_remove_padding)
      detail::fail(A + "ulysses_sequence_parallel_size " + std::to_string(sp) + " needs " + M +
                   "use_remove_padding=True, which verl asserts (\"When using sequence parallelism for actor/ref policy, you must enable "
                   "`use_remove_padding`.\")");
  }
  // Sequences per pass: a *_per_gpu size as given, else verl's normalization of the global one (fsdp_workers.py
  // ActorRolloutRefWorker.__init__, "normalize config"). Before v0.2 (9f734014, January 2025) the mini-batch, the
  // micro-batch and the rollout's and reference's log-prob micro-batches are each divided by the data-parallel ranks,
  // then multiplied by rollout.n; from v0.2 (6e003c0b, #183) the mini-batch is multiplied by n before the division and
  // the micro-batches are divided only. EasyR1: micro_batch_size_per_device_for_update.
  // mini, critic_mini: sequences per optimizer step on one GPU
  std::int64_t micro = 0, forward_micro = 0, ref_micro = 0, mini = 0, critic_mini = 0;
  // A micro-batch key: its *_per_gpu form as given, else the global one divided by the ranks (times rollout.n where
  // the release multiplies).
  const auto per_gpu_or_global = [&](const std::string& key, std::int64_t global_default, bool times_n, std::int64_t ranks) {
    // The *_per_gpu keys came with v0.2 (6e003c0b); v0.1's ppo_trainer.yaml has none, and Hydra refuses a key that
    // is not in the config.
    if (k.has(key + "_per_gpu") && verl_version > 0 && verl_version < 2'000)
      detail::fail(key + "_per_gpu is verl's from v0.2, and verl " + s.verl_version + " refuses it; set " + key + " (global, divided by the ranks) instead");
    if (k.has(key + "_per_gpu")) return k.integer(key + "_per_gpu", 1);
    const std::int64_t divided = k.integer(key, global_default) / ranks;
    return times_n ? detail::checked_mul(divided, n) : divided;
  };
  if (easyr1) {
    micro = k.integer(A + "micro_batch_size_per_device_for_update", 4);
    mini = detail::checked_mul(k.integer(A + "global_batch_size", 128), n) / dp;
    forward_micro = ref_micro = k.integer(A + "micro_batch_size_per_device_for_experience", 16);
  } else {
    const bool from_v02 = verl_version >= 2'000;
    const auto per_gpu_or_normalized = [&](const std::string& key, std::int64_t global_default) {
      return per_gpu_or_global(key, global_default, !from_v02, dp);
    };
    const std::int64_t mini_global = k.integer(A + "ppo_mini_batch_size", 256);
    mini = from_v02 ? detail::checked_mul(mini_global, n) / dp : detail::checked_mul(mini_global / dp, n);
    // Whether verl before v0.2 and after read this config differently: a global micro-batch key in use with n > 1,
    // or a mini-batch the ranks do not divide.
    const bool normalization_matters =
        n > 1 && (mini_global % dp != 0 || !k.has(A + "ppo_micro_batch_size_per_gpu") || !k.has(R + "log_prob_micro_batch_size_per_gpu") ||
                  !k.has(F + "log_prob_micro_batch_size_per_gpu"));
    micro = per_gpu_or_normalized(A + "ppo_micro_batch_size", 64);
    // The same size written back: per GPU, or in the global key the config uses (--explain).
    r.micro_key = A + "ppo_micro_batch_size_per_gpu";
    if (!k.has(A + "ppo_micro_batch_size_per_gpu") && k.has(A + "ppo_micro_batch_size")) {
      if (from_v02) r.micro_prefix = A + "ppo_micro_batch_size=null ";  // the per-GPU key alone (verl refuses both)
      else {  // before v0.2 the per-GPU key does not exist: global = m / n x ranks
        r.micro_key = A + "ppo_micro_batch_size";
        r.micro_scale = dp;
        r.micro_divisor = std::max<std::int64_t>(1, n);
      }
    }
    forward_micro = per_gpu_or_normalized(R + "log_prob_micro_batch_size", 128);
    ref_micro = per_gpu_or_normalized(F + "log_prob_micro_batch_size", 128);
    if (from_v02) {  // the same __init__ asserts both (v0.2 on)
      if (mini == 0)
        detail::fail(A + "ppo_mini_batch_size " + std::to_string(mini_global) + " x rollout.n " + std::to_string(n) + " gives no sequence to each of " +
                     std::to_string(dp) + " data-parallel ranks, which verl asserts (\"should be larger than 0 after normalization\"); raise it");
      if (micro < 1)
        detail::fail("the actor's micro-batch (" + A + "ppo_micro_batch_size_per_gpu, or ppo_micro_batch_size / " + std::to_string(dp) +
                     " ranks) is 0 sequences, which verl refuses; set " + A + "ppo_micro_batch_size_per_gpu to at least 1");
      if (mini % micro != 0)
        detail::fail("the normalized " + A + "ppo_mini_batch_size " + std::to_string(mini) + " (x rollout.n / ranks) is not a multiple of the micro-batch " +
                     std::to_string(micro) + ", which verl asserts (\"should be divisible by ppo_micro_batch_size_per_gpu\"); change either");
    } else if (verl_version == 0 && normalization_matters) {
      r.assumed.push_back("verl's batch normalization before v0.2 (global sizes / ranks x rollout.n; pass --verl-version)");
    }
    micro = std::min(micro, mini > 0 ? mini : micro);
  }
  const auto clamp = [&](std::int64_t m, std::int64_t most) { return std::max<std::int64_t>(1, std::min(m, most)); };
  // Gradient checkpointing of the trained models: EasyR1's ModelConfig.enable_gradient_checkpointing is True in every
  // release (workers/actor/config.py, shared by the critic); verl's ppo_trainer.yaml had False for the actor and the
  // critic in v0.1 and True from v0.2 (9fca71d2c, PR #147). Unknown release: v0.1's, the more memory, listed.
  const bool checkpointing_default = easyr1 || verl_version >= 2'000;
  const auto checkpointing_of = [&](const std::string& key) {
    if (!easyr1 && verl_version == 0 && !k.has(key))
      r.assumed.push_back(key + " False (verl's default in v0.1; True from v0.2; pass --verl-version)");
    return k.flag(key, checkpointing_default);
  };
  const bool checkpointing = checkpointing_of(M + "enable_gradient_checkpointing");
  // The actor: fp32 parameters under FSDP with bf16 compute (torch_dtype fp32 for the actor, MixedPrecision param_dtype
  // bf16), FULL_SHARD over every GPU; param/optimizer offload moves states to host RAM outside update_actor.
  j.actor.present = true;
  j.actor.model = detail::model_of_path(*path, s, path_key.c_str());
  // EasyR1's worker.actor.model.freeze_vision_tower (from 3f202f9, March 2025): model.visual.requires_grad_(False) in
  // fsdp_workers.py _build_model_optimizer, so the tower has no gradients or optimizer states and keeps no activations;
  // a model without one is left as it is ("No vision tower found.").
  if (easyr1 && k.flag(M + "freeze_vision_tower") && j.actor.model.vision.blocks > 0) j.actor.adapt.freeze_vision = true;
  j.actor.trained = true;
  j.actor.fsdp = true;
  j.actor.zero_stage = easyr1 && !k.flag(A + "fsdp.enable_full_shard", true) ? 2 : 3;
  j.actor.recipe = precision::amp_bf16;
  j.actor.gpus = world;
  j.actor.gradient_checkpointing = checkpointing;
  j.actor.train_micro_batch = clamp(micro, per_gpu);
  j.actor.forward_micro_batch = clamp(forward_micro, per_gpu);
  j.actor.sleep_params = k.flag(easyr1 ? A + "offload.offload_params" : A + "fsdp_config.param_offload");
  j.actor.sleep_optimizer = k.flag(easyr1 ? A + "offload.offload_optimizer" : A + "fsdp_config.optimizer_offload");
  if (!easyr1) k.flag(A + "fsdp_config.grad_offload");  // gradients go with the parameters
  if (easyr1 && k.flag(A + "fsdp.enable_cpu_offload")) detail::fail(A + "fsdp.enable_cpu_offload (FSDP CPUOffload of a trained model) is not modelled");
  // The reference policy (main_ppo.py maps Role.RefPolicy): bf16, FSDP over every GPU; param_offload (verl) and
  // EasyR1's fsdp.enable_cpu_offload use FSDP CPUOffload(offload_params=True): the weights live in host RAM.
  j.reference = j.actor;
  j.reference.trained = false;
  j.reference.adapt = adaptation{};  // the actor's frozen tower: the reference trains nothing anyway
  j.reference.sleep_params = j.reference.sleep_optimizer = false;
  j.reference.frozen_dtype = dtype::bf16;
  if (easyr1) {
    const bool fsdp_offload = k.flag(F + "fsdp.enable_cpu_offload"), manual_offload = k.flag(F + "offload.offload_params");
    j.reference.offload_params = fsdp_offload || manual_offload;
  } else {
    j.reference.offload_params = k.flag(F + "fsdp_config.param_offload");
  }
  j.reference.forward_micro_batch = clamp(ref_micro, per_gpu);
  const std::string estimator = k.text("algorithm.adv_estimator").value_or("gae");
  // The critic's own Ulysses degree and the data-parallel ranks of its mesh, which its sizes are normalized by.
  std::int64_t critic_sp = 1, critic_dp = dp;
  if (estimator == "gae") {  // PPO: a critic (verl's default estimator is gae)
    const std::string C = easyr1 ? "worker.critic." : "critic.";
    j.critic = j.actor;
    j.critic.value_model = true;
    critic_sp = sp_of(C);
    critic_dp = detail::quotient(world, critic_sp);
    j.critic.ulysses = critic_sp;
    // Its own padding removal: critic.model.use_remove_padding (False in every release's ppo_trainer.yaml, v0.7.0's
    // too), EasyR1's worker.critic.padding_free (False: workers/critic/config.py).
    j.critic.packing = k.flag(easyr1 ? C + "padding_free" : C + "model.use_remove_padding", false);
    if (const std::optional<std::string> cp = k.text(easyr1 ? C + "model.model_path" : C + "model.path"))
      j.critic.model = detail::model_of_path(*cp, s, (C + "model.path").c_str());
    j.critic.gradient_checkpointing = checkpointing_of(C + "model.enable_gradient_checkpointing");
    j.critic.sleep_params = k.flag(easyr1 ? C + "offload.offload_params" : C + "model.fsdp_config.param_offload");
    j.critic.sleep_optimizer = k.flag(easyr1 ? C + "offload.offload_optimizer" : C + "model.fsdp_config.optimizer_offload");
    // verl's CriticWorker.__init__ normalizes its own sizes: global micro-batches divided by the data-parallel ranks
    // only, in every release (fsdp_workers.py at 9f734014 and v0.2); the mini-batch divided only before v0.4.0 and
    // multiplied by rollout.n first from it (9dcac14f, #853). Its forward's micro-batch is forward_micro_batch_size
    // (_per_gpu), which ppo_trainer.yaml interpolates from the critic's ppo_micro_batch_size (_per_gpu).
    // EasyR1: worker.critic.global_batch_size x n / ranks. The ranks are the critic mesh's, (GPUs / its sp).
    const std::int64_t critic_per_gpu = per_gpu_of(critic_dp);
    if (easyr1) {
      // Its own passes (workers/critic/config.py CriticConfig: micro_batch_size_per_device_for_update 4 and
      // _for_experience 16, as the actor's defaults), not the actor's.
      critic_mini = detail::checked_mul(k.integer(C + "global_batch_size", 128), n) / critic_dp;
      j.critic.train_micro_batch = clamp(k.integer(C + "micro_batch_size_per_device_for_update", 4), critic_per_gpu);
      j.critic.forward_micro_batch = clamp(k.integer(C + "micro_batch_size_per_device_for_experience", 16), critic_per_gpu);
    } else {
      const std::int64_t train_micro = per_gpu_or_global(C + "ppo_micro_batch_size", 64, false, critic_dp);
      j.critic.train_micro_batch = clamp(train_micro, critic_per_gpu);
      j.critic.forward_micro_batch = k.has(C + "forward_micro_batch_size_per_gpu") || k.has(C + "forward_micro_batch_size")
                                         ? clamp(per_gpu_or_global(C + "forward_micro_batch_size", 0, false, critic_dp), critic_per_gpu)
                                         : clamp(train_micro, critic_per_gpu);
      const std::int64_t critic_mini_global = k.has(C + "ppo_mini_batch_size") ? k.integer(C + "ppo_mini_batch_size", 256)
                                                                              : k.integer(A + "ppo_mini_batch_size", 256);
      critic_mini = verl_version >= 4'000 ? detail::checked_mul(critic_mini_global, n) / critic_dp : critic_mini_global / critic_dp;
      if (verl_version == 0 && n > 1)
        r.assumed.push_back("verl's critic mini-batch before v0.4.0 (" + C + "ppo_mini_batch_size / ranks, without rollout.n; pass --verl-version)");
    }
  }
  if (k.flag("reward_model.enable")) {
    // From v0.7.0 (0102d04e0, PR #4452) reward_model.use_reward_loop is True by default, and the trainer makes no
    // RewardModelWorker: its reward loop serves the model through rollout servers of reward_model.rollout
    // (trainer/ppo/ray_trainer.py init_workers), which zeromem does not model.
    if (!easyr1 && k.flag("reward_model.use_reward_loop", verl_version >= 7'000))
      detail::fail("reward_model.use_reward_loop (True by default from verl v0.7.0) serves the reward model through its reward loop's "
                   "rollout servers, which zeromem does not model; set reward_model.use_reward_loop=False for the FSDP reward model worker");
    if (!easyr1 && verl_version == 0 && !k.has("reward_model.use_reward_loop"))
      r.assumed.push_back("the reward model as an FSDP worker (verl before v0.7.0; from v0.7.0 reward_model.use_reward_loop serves it "
                          "through rollout servers, not modelled; pass --verl-version)");
    j.reward = j.reference;
    j.reward.value_model = true;
    // reward_model.enable_resource_pool (from v0.6.0, 844c9299d): a pool of its own, nnodes x n_gpus_per_node GPUs, both
    // refused at 0 (trainer/main_ppo.py init_resource_pool_mgr); its worker's world is that pool.
    if (!easyr1 && verl_version > 0 && verl_version < 6'000 && k.has("reward_model.enable_resource_pool"))
      detail::fail("reward_model.enable_resource_pool is verl's from v0.6.0, and verl " + s.verl_version + " refuses it; remove it");
    if (!easyr1 && k.flag("reward_model.enable_resource_pool")) {
      const std::int64_t pool_nodes = k.integer("reward_model.nnodes", 0), pool_gpus = k.integer("reward_model.n_gpus_per_node", 8);
      if (pool_nodes <= 0 || pool_gpus <= 0)
        detail::fail("reward_model.enable_resource_pool needs reward_model.nnodes and reward_model.n_gpus_per_node above 0, which verl "
                     "raises on (nnodes defaults to 0); set both");
      j.reward_own_pool = true;
      j.reward.gpus = detail::checked_mul(pool_nodes, pool_gpus);
    }
    if (const std::optional<std::string> rp = k.text("reward_model.model.path"))
      j.reward.model = detail::model_of_path(*rp, s, "reward_model.model.path");
    j.reward.offload_params = k.flag("reward_model.model.fsdp_config.param_offload");
    j.reward.ulysses = sp_of("reward_model.");
    j.reward.packing = k.flag("reward_model.model.use_remove_padding", false);  // False by default in every release
    // Its own micro-batch, not the reference's: micro_batch_size_per_gpu, or the global micro_batch_size divided by
    // every GPU (RewardModelWorker.__init__ divides by the world size, whatever its sp; v0.1's default 64, null from
    // v0.2, when verl refuses neither or both set: verl/utils/config.py check_mutually_exclusive). Its dynamic
    // batches follow the critic's flag (ppo_trainer.yaml: use_dynamic_bsz: ${critic.use_dynamic_bsz}).
    const bool reward_dynamic = k.flag("reward_model.use_dynamic_bsz", k.flag("critic.use_dynamic_bsz", k.flag(A + "use_dynamic_bsz")));
    if (!reward_dynamic) {
      const bool v01 = verl_version > 0 && verl_version < 2'000;
      const std::string key = "reward_model.micro_batch_size";
      if (k.has(key) && k.has(key + "_per_gpu"))
        detail::fail(key + " and " + key + "_per_gpu are both set, which verl refuses; remove " + key + " (deprecated)");
      if (!v01 && !k.has(key) && !k.has(key + "_per_gpu"))
        detail::fail("neither " + key + " nor " + key + "_per_gpu is set for the reward model, which verl refuses from v0.2 (v0.1 "
                     "defaults " + key + " to 64: pass --verl-version 0.1.0); set " + key + "_per_gpu");
      j.reward.forward_micro_batch =
          clamp(per_gpu_or_global(key, 64, false, j.reward.gpus), per_gpu_of(detail::quotient(j.reward.gpus, j.reward.ulysses)));
    }
  }
  // Whether a reference policy is built at all. verl from v0.4.0 (072fc9fe, PR #644) maps Role.RefPolicy only with a
  // KL term, algorithm.use_kl_in_reward or actor.use_kl_loss (trainer/main_ppo.py; trainer/ppo/utils.py
  // need_reference_policy since), and always before it. EasyR1 builds none with algorithm.disable_kl
  // (workers/fsdp_workers.py FSDPWorker.__init__: `if self.config.actor.disable_kl: self._has_ref = False`).
  if (easyr1) {
    if (k.flag("algorithm.disable_kl")) j.reference.present = false;
  } else if (!k.flag("algorithm.use_kl_in_reward") && !k.flag(A + "use_kl_loss")) {
    if (verl_version >= 4'000) j.reference.present = false;
    else if (verl_version == 0)
      r.assumed.push_back("a reference policy (for the in-reward KL penalty verl applies before v0.4.0; from v0.4.0 only with "
                          "algorithm.use_kl_in_reward or " + A + "use_kl_loss; pass --verl-version)");
  }
  const std::string engine = k.text(R + "name").value_or("vllm");
  const std::int64_t lora_rank = easyr1 ? 0 : detail::read_verl_lora(k, j, r, M, R, strategy, engine, verl_version);
  // The rollout engine: vLLM (or SGLang, verl only) in the same worker, tensor parallel within the GPUs.
  if (engine != "vllm" && (easyr1 || engine != "sglang"))
    detail::fail(R + "name " + detail::quoted(engine) + " is not modelled; use vllm" + (easyr1 ? "" : " or sglang"));
  rollout_engines& e = j.rollout;
  e.present = true;
  const std::string tp_key = easyr1 ? R + "tensor_parallel_size" : R + "tensor_model_parallel_size";
  e.tp = k.count(tp_key, 2);  // both default to 2
  // fsdp_workers.py _build_rollout: assert world_size % infer_tp == 0.
  if (!detail::divides(e.tp, world))
    detail::fail(tp_key + " " + std::to_string(e.tp) + " does not divide the " + std::to_string(world) +
                 " GPUs of trainer.nnodes x trainer.n_gpus_per_node; verl asserts that it does");
  e.engines = detail::quotient(world, e.tp);
  e.gpu_memory_utilization = k.fraction(R + "gpu_memory_utilization", 0.5);
  const bool eager_default = easyr1 || verl_version < 6'000;  // unknown (0) included
  if (!easyr1 && verl_version == 0 && !k.has(R + "enforce_eager"))
    r.assumed.push_back(R + "enforce_eager True (verl's default before v0.6.0; pass --verl-version)");
  e.enforce_eager = k.flag(R + "enforce_eager", eager_default);
  // The engine is built after the FSDP actor (fsdp_workers.py _build_rollout).
  e.sized_on_empty_gpu = false;
  j.prompt_tokens = k.count("data.max_prompt_length", 512);
  j.response_tokens = k.count("data.max_response_length", 512);
  if (engine == "sglang") {
    // verl's sglang_rollout/async_sglang_server.py: mem_fraction_static = gpu_memory_utilization, max_running_requests
    // = max_num_seqs (rollout.yaml: 256), enable_memory_saver; sleep() releases kv_cache and weights when
    // free_cache_engine is set, and the hybrid engine reloads the weights from the actor on wake-up.
    e.kind = rollout_engine_kind::sglang;
    e.max_running_requests = k.integer(R + "max_num_seqs", 256);
    e.sleep_level = k.flag(R + "free_cache_engine", true) ? 2 : 0;
    // SGLang sizes req_to_token rows by the model's context length (max_position_embeddings), which verl does not
    // pass; zeromem takes prompt + response, the longest sequence the rollout produces.
    e.context_len = detail::longest_sequence(j);
    r.assumed.push_back("SGLang context_len = prompt + response (" + std::to_string(e.context_len) +
                        " tokens; SGLang uses the model's max_position_embeddings for its req_to_token rows)");
  } else {
    detail::set_vllm_version(e, s.vllm_version, true);
    r.assumed.push_back("vLLM " + s.vllm_version);
    // enable_lora, max_loras 1, max_lora_rank rounded up to vLLM's allowed ranks (vllm_async_server.py; before
    // verl 1546ce23, vllm_rollout_spmd.py passed lora_rank itself, which vLLM accepts only from that set).
    if (lora_rank > 0) e.max_lora_rank = vllm_max_lora_rank(lora_rank);
    // free_cache_engine frees the KV cache and offload_model_weights the weights after generation (verl's vllm
    // 0.6.3); later versions sleep(level=1), and from verl v0.6.0 (e31a8831, PR #3082) level 2 with vLLM >= 0.8.5
    // (third_party/vllm VLLM_SLEEP_LEVEL), except level 1 under layered_summon (vllm_rollout_spmd.py).
    const bool patched = e.semantics == vllm_semantics::verl_free_fraction;
    const bool level2_vllm = !easyr1 && !patched && detail::version_number(s.vllm_version, "the vLLM version") >= 8'005 && !k.flag(R + "layered_summon");
    e.sleep_level = patched ? (k.flag(R + "free_cache_engine", true) ? 2 : 0) : (level2_vllm && verl_version >= 6'000 ? 2 : 1);
    if (level2_vllm && verl_version == 0)
      r.assumed.push_back("vLLM sleep level 1 (verl before v0.6.0; from v0.6.0 level 2 with vLLM >= 0.8.5; pass --verl-version)");
    if (patched) e.swap_space_gib = 4;
    // LoRA at sleep level 2: the engine discards its base each time, so every sync sends the base again through host
    // RAM (fsdp_workers.py rollout_mode, verl 96e7071d, PR #3541).
    if (j.lora_sync.present && e.sleep_level == 2) j.lora_sync.base_through_host = true;
  }
  if (!easyr1) {
    // use_dynamic_bsz: a pass holds at most max_token_len x sp real tokens (dp_actor.py update_policy and
    // compute_log_prob, dp_critic.py; the defaults from verl's actor, rollout, ref and critic yaml).
    const bool actor_dynamic = k.flag(A + "use_dynamic_bsz");
    const std::int64_t actor_budget = k.integer(A + "ppo_max_token_len_per_gpu", 16384);
    const std::int64_t update_sequences = std::max<std::int64_t>(1, std::min(per_gpu, mini > 0 ? mini : per_gpu));
    const auto dynamic = [&](const std::string& key, std::int64_t budget, std::int64_t sequences, std::int64_t degree) {
      return detail::dynamic_micro_batch(j, key, budget, degree, sequences);
    };
    if (actor_dynamic) {
      j.actor.train_micro_batch = dynamic(A + "ppo_max_token_len_per_gpu", actor_budget, update_sequences, sp);
      r.actor_token_budget = actor_budget;
      r.token_budget_key = A + "ppo_max_token_len_per_gpu";
    }
    if (k.flag(R + "log_prob_use_dynamic_bsz", actor_dynamic))
      j.actor.forward_micro_batch = dynamic(R + "log_prob_max_token_len_per_gpu", k.integer(R + "log_prob_max_token_len_per_gpu", actor_budget), per_gpu, sp);
    if (k.flag(F + "log_prob_use_dynamic_bsz", actor_dynamic))
      j.reference.forward_micro_batch = dynamic(F + "log_prob_max_token_len_per_gpu", k.integer(F + "log_prob_max_token_len_per_gpu", actor_budget), per_gpu, sp);
    // The critic's and the reward model's passes over their own meshes: the sequences of their data-parallel ranks,
    // a budget of max_token_len x their own sp (dp_critic.py, RewardModelWorker.compute_rm_score).
    if (j.critic.present && k.flag("critic.use_dynamic_bsz", actor_dynamic)) {
      const std::int64_t critic_budget = k.integer("critic.ppo_max_token_len_per_gpu", 32768), critic_per_gpu = per_gpu_of(critic_dp);
      j.critic.train_micro_batch = dynamic("critic.ppo_max_token_len_per_gpu", critic_budget,
                                           std::max<std::int64_t>(1, std::min(critic_per_gpu, critic_mini > 0 ? critic_mini : critic_per_gpu)), critic_sp);
      j.critic.forward_micro_batch = dynamic("critic.forward_max_token_len_per_gpu", k.integer("critic.forward_max_token_len_per_gpu", critic_budget),
                                             critic_per_gpu, critic_sp);
    }
    if (j.reward.present && k.flag("reward_model.use_dynamic_bsz", k.flag("critic.use_dynamic_bsz", actor_dynamic)))  // compute_rm_score
      j.reward.forward_micro_batch =
          dynamic("reward_model.forward_max_token_len_per_gpu", k.integer("reward_model.forward_max_token_len_per_gpu", 32768),
                  per_gpu_of(detail::quotient(j.reward.gpus, j.reward.ulysses)), j.reward.ulysses);
    // verl from v0.2 checks the critic's sizes as the actor's (verl_one_micro_key, verl_global_micro).
    if (verl_version >= 2'000 && j.critic.present && critic_sp > 1 && !k.flag("critic.model.use_remove_padding"))
      detail::fail("critic.ulysses_sequence_parallel_size " + std::to_string(critic_sp) +
                   " needs critic.model.use_remove_padding=True, which verl asserts (\"When using sequence parallelism for critic, you must "
                   "enable `use_remove_padding`.\")");
    if (verl_version >= 2'000 && j.critic.present && !k.flag("critic.use_dynamic_bsz", actor_dynamic)) {
      verl_one_micro_key("critic.ppo_micro_batch_size", true);
      verl_global_micro("critic.", critic_sp);
      verl_mini_within_batch("critic.");
    }
  }
  if (easyr1) {
    // EasyR1's dynamic_batching (from 9146f0f, PR #417, July 2025; True for the actor and the critic, the reference
    // following the actor: workers/config.py post_init): a pass holds at most micro_batch_size_per_device_for_update
    // (or _for_experience) x the batch's padded width real tokens (dp_actor.py update_policy and compute_log_prob,
    // dp_critic.py), split by rearrange_micro_batches as verl's, with no Ulysses factor. With every sequence at the
    // maxima this is the fixed micro-batch; shorter ones (--mean-tokens) share a pass.
    const std::int64_t width = detail::longest_sequence(j);
    const auto dynamic = [&](const std::string& section, const std::string& key, std::int64_t micro_size, std::int64_t sequences,
                             std::int64_t fixed) {
      const std::int64_t budget = detail::checked_mul(micro_size, width);
      const std::int64_t m = detail::dynamic_micro_batch(j, section + key, budget, 1, std::max<std::int64_t>(1, sequences));
      const std::string assumed = section + "dynamic_batching True (EasyR1's default from v0.3.2; fixed micro-batches before it)";
      if (m != fixed && !k.has(section + "dynamic_batching") && std::find(r.assumed.begin(), r.assumed.end(), assumed) == r.assumed.end())
        r.assumed.push_back(assumed);
      return m;
    };
    if (k.flag(A + "dynamic_batching", true)) {
      j.actor.train_micro_batch = dynamic(A, "micro_batch_size_per_device_for_update", micro, std::min(per_gpu, mini > 0 ? mini : per_gpu),
                                          j.actor.train_micro_batch);
      j.actor.forward_micro_batch = dynamic(A, "micro_batch_size_per_device_for_experience", forward_micro, per_gpu, j.actor.forward_micro_batch);
      j.reference.forward_micro_batch = j.actor.forward_micro_batch;
    }
    const std::string C = "worker.critic.";
    if (j.critic.present && k.flag(C + "dynamic_batching", true)) {
      const std::int64_t critic_per_gpu = per_gpu_of(critic_dp);
      j.critic.train_micro_batch = dynamic(C, "micro_batch_size_per_device_for_update", k.integer(C + "micro_batch_size_per_device_for_update", 4),
                                           std::min(critic_per_gpu, critic_mini > 0 ? critic_mini : critic_per_gpu), j.critic.train_micro_batch);
      j.critic.forward_micro_batch = dynamic(C, "micro_batch_size_per_device_for_experience",
                                             k.integer(C + "micro_batch_size_per_device_for_experience", 16), critic_per_gpu, j.critic.forward_micro_batch);
    }
  }
  // --explain's forward-only sizes as the config writes them: EasyR1's _for_experience keys (a fixed micro-batch, or
  // the dynamic budget's factor); verl's token budget under dynamic batches (at least one sequence), else the global
  // key where the config sets it (at least one sequence a rank), else the per-GPU key where the release has it.
  if (easyr1) {
    r.forward_sizes.push_back({A + "micro_batch_size_per_device_for_experience", forward_micro, 1});
    if (j.critic.present) {
      r.forward_sizes.push_back({"worker.critic.micro_batch_size_per_device_for_experience",
                                 k.integer("worker.critic.micro_batch_size_per_device_for_experience", 16), 1});
      r.critic_update_sizes.push_back({"worker.critic.micro_batch_size_per_device_for_update",
                                       k.integer("worker.critic.micro_batch_size_per_device_for_update", 4), 1});
    }
  } else {
    const bool actor_dynamic = k.flag(A + "use_dynamic_bsz");
    const std::int64_t actor_budget = k.integer(A + "ppo_max_token_len_per_gpu", 16384);
    const auto size_of_pass = [&](std::vector<job_reading::size_key>& into, const std::string& micro_size, const std::string& budget,
                                  bool dynamic, std::int64_t budget_now, std::int64_t per_gpu_now, std::int64_t ranks) {
      if (dynamic) into.push_back({budget, budget_now, detail::longest_sequence(j)});
      else if (k.has(micro_size)) into.push_back({micro_size, k.integer(micro_size, 1), ranks});
      else if (k.has(micro_size + "_per_gpu") || verl_version == 0 || verl_version >= 2'000)
        into.push_back({micro_size + "_per_gpu", per_gpu_now, 1});
    };
    const auto forward_size = [&](const auto&... args) { size_of_pass(r.forward_sizes, args...); };
    forward_size(R + "log_prob_micro_batch_size", R + "log_prob_max_token_len_per_gpu", k.flag(R + "log_prob_use_dynamic_bsz", actor_dynamic),
                 k.integer(R + "log_prob_max_token_len_per_gpu", actor_budget), j.actor.forward_micro_batch, dp);
    if (j.reference.present)
      forward_size(F + "log_prob_micro_batch_size", F + "log_prob_max_token_len_per_gpu", k.flag(F + "log_prob_use_dynamic_bsz", actor_dynamic),
                   k.integer(F + "log_prob_max_token_len_per_gpu", actor_budget), j.reference.forward_micro_batch, dp);
    if (j.critic.present)
      forward_size("critic.forward_micro_batch_size", "critic.forward_max_token_len_per_gpu", k.flag("critic.use_dynamic_bsz", actor_dynamic),
                   k.integer("critic.forward_max_token_len_per_gpu", k.integer("critic.ppo_max_token_len_per_gpu", 32768)),
                   j.critic.forward_micro_batch, critic_dp);
    if (j.reward.present)  // RewardModelWorker.compute_rm_score: its own micro-batch (global over every GPU) or budget
      forward_size("reward_model.micro_batch_size", "reward_model.forward_max_token_len_per_gpu",
                   k.flag("reward_model.use_dynamic_bsz", k.flag("critic.use_dynamic_bsz", actor_dynamic)),
                   k.integer("reward_model.forward_max_token_len_per_gpu", 32768), j.reward.forward_micro_batch, j.reward.gpus);
    if (j.critic.present)  // its update (dp_critic.py update_critic), in the keys its sizes were read from above
      size_of_pass(r.critic_update_sizes, "critic.ppo_micro_batch_size", "critic.ppo_max_token_len_per_gpu",
                   k.flag("critic.use_dynamic_bsz", actor_dynamic), k.integer("critic.ppo_max_token_len_per_gpu", 32768),
                   j.critic.train_micro_batch, critic_dp);
  }
  // Passes per optimizer step, their gradients accumulated: verl dp_actor.py update_policy (gradient_accumulation =
  // ppo_mini_batch_size x rollout.n per GPU // ppo_micro_batch_size_per_gpu, or the dynamic passes of the mini-batch;
  // dp_critic.py alike); EasyR1 the same with global_batch_size and micro_batch_size_per_device_for_update.
  const auto passes = [&](std::int64_t per_step, std::int64_t per_pass, std::int64_t held) {
    return std::max<std::int64_t>(1, detail::ceil_div(std::max<std::int64_t>(1, std::min(per_step, held)), per_pass));
  };
  j.actor.accumulation_steps = passes(mini, j.actor.train_micro_batch, per_gpu);
  if (j.critic.present) j.critic.accumulation_steps = passes(critic_mini, j.critic.train_micro_batch, per_gpu_of(critic_dp));
  // verl passes rollout.max_num_batched_tokens to vLLM from c99df03f (Jan 2025; EasyR1 too); max_num_seqs only
  // from verl PR #2960 (v0.6.0; rollout.yaml 1024), so before it vLLM's default applies.
  if (e.kind == rollout_engine_kind::vllm) {
    e.limits = detail::default_limits(j, s);
    e.limits.max_num_batched_tokens = k.integer(R + "max_num_batched_tokens", 8192);
    if (!easyr1 && verl_version >= 6'000) e.limits.max_num_seqs = k.integer(R + "max_num_seqs", 1024);
    else if (!easyr1 && verl_version == 0 && k.has(R + "max_num_seqs"))
      r.assumed.push_back(R + "max_num_seqs not passed to vLLM (verl passes it from v0.6.0; pass --verl-version)");
  }
  j.packing = actor_remove_padding;
  j.ulysses = sp;
  k.sort_rest(r, {"data.train_files", "data.val_files", "data.prompt_key", "data.answer_key", "data.image_key", "data.tokenizer",
                  "data.val_batch_size", "data.return_raw_input_ids", "data.return_raw_chat", "data.shuffle", "data.seed",
                  "data.max_pixels", "data.min_pixels", "data.system_prompt", "data.filter_overlong_prompts", "data.truncation",
                  "algorithm.", "trainer.", "actor_rollout_ref.hybrid_engine", "actor_rollout_ref.model.external_lib",
                  "actor_rollout_ref.model.override_config", "actor_rollout_ref.model.trust_remote_code", A + "optim.", A + "grad_clip",
                  A + "clip_ratio", A + "entropy_coeff", A + "ppo_epochs", A + "shuffle", A + "use_kl_loss", A + "kl_loss_coef",
                  A + "kl_loss_type", A + "max_grad_norm", A + "entropy_coeff", A + "fsdp_config.wrap_policy.", A + "fsdp_config.fsdp_size",
                  A + "fsdp.enable_rank0_init", A + "model.trust_remote_code", A + "padding_free",
                  R + "temperature", R + "top_k", R + "top_p", R + "prompt_length", R + "response_length", R + "dtype", R + "ignore_eos",
                  R + "load_format", R + "max_num_seqs", R + "do_sample", R + "enable_chunked_prefill",
                  R + "limit_images", R + "seed", F + "fsdp_config.wrap_policy.", F + "fsdp_config.fsdp_size", F + "fsdp.enable_full_shard",
                  F + "fsdp.enable_rank0_init", F + "ulysses_sequence_parallel_size", "critic.", "worker.critic.", "reward_model.",
                  "worker.reward.", "custom_reward_function."});
  detail::apply_image_tokens(j, s, r);
  return r;
}

}  // namespace zeromem
