// What every subcommand shares: validated options (one error text for every flag), the model flags, table rows
// and file output. Every option is checked when it is parsed: no value is clamped, and an empty or out-of-range
// value is an error naming the flag and its range, never "not given".
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>

#include "zeromem/model/hf_config.hpp"
#include "zeromem/zeromem.hpp"

namespace zeromem::cli {

using json = nlohmann::ordered_json;

/// A subcommand: its CLI11 app, one example invocation (shown by `zeromem --help` and its own --help), what runs
/// when it was chosen, and what adds its flags (once; run before the command's arguments are parsed).
struct command {
  CLI::App* app = nullptr;
  std::string example;
  std::function<int(std::ostream&)> run;
  std::function<void()> add_flags;
};

/// A subcommand whose flags fill an Args (owned by the command) and whose run function reads them.
template <class Args>
command make_command(CLI::App& parent, const std::string& name, const std::string& help, const std::string& example,
                     void (*add_flags)(CLI::App&, Args&), int (*run)(const Args&, std::ostream&)) {
  auto args = std::make_shared<Args>();
  CLI::App* app = parent.add_subcommand(name, help);
  app->footer("Example:\n  " + example);
  // The flags are added when the command is chosen: CLI11 calls a subcommand's pre-parse callback before its first
  // argument. An invocation builds its own command's flags, not all eight commands' (each new CLI11 option is
  // compared with every option before it, most of a short invocation's time).
  auto added = std::make_shared<bool>(false);
  std::function<void()> add = [app, args, add_flags, added] {
    if (*added) return;
    *added = true;
    add_flags(*app, *args);
  };
  app->preparse_callback([add](std::size_t) { add(); });
  return {app, example, [args, run](std::ostream& out) { return run(*args, out); }, add};
}

command add_estimate_command(CLI::App& parent);
command add_kv_command(CLI::App& parent);
command add_scenario_command(CLI::App& parent);
command add_plan_command(CLI::App& parent);
command add_deepspeed_command(CLI::App& parent);
command add_job_command(CLI::App& parent);
command add_vllm_command(CLI::App& parent);
command add_sglang_command(CLI::App& parent);
/// --attention's help, for every command that takes it.
inline constexpr const char* attention_help =
    "flash or sdpa (SDPA, transformers' default) | fa2 or flash_attention_2 (the flash-attn package) | eager (s^2 scores kept)";

// ---- options ----------------------------------------------------------------------------------------
/// An integer flag in [lo, hi], plain decimal digits.
CLI::Option* integer_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help,
                            std::int64_t lo = 1, std::int64_t hi = detail::i64_max);
/// A token count in [lo, hi]: 4096, 32K (32,768), 1M (1,048,576).
CLI::Option* tokens_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help,
                           std::int64_t lo = 1, std::int64_t hi = detail::i64_max);
/// A finite real number in [lo, hi) (or [lo, hi] when hi_inclusive; (lo, ... when not lo_inclusive).
CLI::Option* real_option(CLI::App& app, const std::string& flag, double& target, const std::string& help, double lo, double hi,
                         bool hi_inclusive, bool lo_inclusive = true);
/// The finite real number `s` in [lo, hi) (or with the ends chosen as above); throws "the value must be a number in ..."
/// otherwise.
double parse_real(const std::string& s, double lo, double hi, bool hi_inclusive, bool lo_inclusive = true);
/// What an inference engine (`what`: vLLM, SGLang) finds free before it loads: the card less its CUDA context and the
/// other processes' memory; nothing free is an error naming the three sizes.
bytes free_before_load(const char* what, bytes total, bytes cuda_context, bytes other_processes);
/// A share of something in percent ("5%", [0, 100)) or a size ("4GiB"), kept as text for the command to read.
CLI::Option* share_or_size_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help);
/// A non-empty string.
CLI::Option* text_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help);

// ---- the model, from a preset, a config.json or flags ---------------------------------------------------
struct model_flags {
  std::string preset;
  std::string hf_config;
  std::int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, ffn = 0, vocab = 0, max_positions = 0;
  std::string mlp = "swiglu";
  std::string norm = "rmsnorm";
  bool tied = false;
  bool qkv_bias = false;
  bool qk_norm = false, qk_norm_whole = false, norm_weight_fp32 = false, post_norms = false, rope_fp32 = false;
  bool norm_scale_fp32 = false, scaled_embedding = false, sandwich_norms = false, local_rope = false;
  bool no_norm_weights = false, norm_input_fp32 = false, gelu_fast = false, post_residual_norms = false, clip_qkv = false;
  std::int64_t embedding_width = 0;
  bool parallel_residual = false, residual_added_first = false, shared_layer_norm = false, lm_head_bias = false, gelu_new = false, qkv_per_head = false;
  double attention_softcap = 0.0, final_logit_softcap = 0.0;
  std::int64_t sliding_window_pattern = 0, nope_period = 0, rotary_dims = 0;
  bool rope_concat = false;
  bool fused_qkv = false, fused_gate_up = false, use_cache = false, scaled_residual = false, scaled_logits = false,
       embedding_multiplier = false;
  std::int64_t sliding_window = 0;
  std::int64_t experts = 0, experts_per_token = 0, expert_ffn = 0, shared_experts = 0;  // 0: not given (dense)
  bool expert_linears = false;  // transformers 4's per-expert nn.Linear modules (moe_config::stacked false)
  bool shared_expert_gate = false;  // Qwen2-MoE's sigmoid gate over the shared experts (moe_config::shared_expert_gate)
  bool given() const { return !preset.empty() || !hf_config.empty() || shape_given(); }
  bool shape_given() const {
    return hidden != 0 || layers != 0 || heads != 0 || kv_heads != 0 || head_dim != 0 || ffn != 0 || vocab != 0;
  }
  bool moe_given() const { return experts != 0 || experts_per_token != 0 || expert_ffn != 0 || shared_experts != 0 || shared_expert_gate; }
};
/// --model, --hf-config and the shape flags; `attention_only` (kv) adds just the attention shape flags. A shape flag
/// next to --model or --hf-config is an error: the preset's own value would silently win.
void add_model_flags(CLI::App& app, model_flags& f, bool attention_only);
/// The model the flags describe (a preset, a config.json, or a full set of shape flags). `base`: how the command models
/// the frozen base (estimate's --quantize), which a config.json's quantization_config must match.
transformer_config model_of(const model_flags& f, const hf_quantization& base = {});

// ---- the device a verdict is against ----------------------------------------------------------------------
/// A catalogued GPU (--gpu, any case) or a capacity (--gpu-memory 24GiB); neither: no verdict.
struct device_choice {
  std::string name;
  bytes capacity{};
  std::string source;  // how the capacity was obtained
  bool given() const { return capacity.count() > 0; }
};
/// Adds --gpu and --gpu-memory (one excludes the other).
void add_device_flags(CLI::App& app, std::string& gpu, std::string& gpu_memory, const std::string& why);
device_choice device_of(const std::string& gpu, const std::string& gpu_memory);
/// The cuBLAS workspaces of `handles` handles: --blas-workspaces as given, else the named --gpu's, else `fallback`
/// (the library's H100 default).
inline bytes blas_workspaces_arg(const std::string& given, const std::string& gpu, std::int64_t handles, bytes fallback) {
  if (!given.empty()) return parse_bytes(given, "the cuBLAS workspaces (--blas-workspaces)");
  return gpu.empty() ? fallback : blas_workspaces_of(find_gpu(gpu), handles);
}

// ---- output -------------------------------------------------------------------------------------------
/// One line of text: CLI11 and exceptions may carry newlines; bounded so one error is one short line.
std::string one_line(std::string s);
/// The option of `app` an unknown `--name` most likely meant: detail::meant_name's (other case or punctuation, or
/// the one option it begins: --seq for --seq-len), else the one option that begins it (--recompute for
/// --recompute-full), else the nearest by edit distance (a swap of neighbours one edit) below a third of its length
/// plus one; empty when none is that close.
std::string nearest_option(const CLI::App& app, const std::string& given);
/// "  label   exact B   GB   GiB" with fixed columns; `table_head` names them.
std::string bytes_row(const std::string& label, bytes b);
std::string table_head(const std::string& first_column = "term");
void write_file(const std::string& path, const std::string& text);
json breakdown_json(const job_breakdown& job);
svg_bar bar_of(const std::string& label, const job_breakdown& job);
void print_dominant(std::ostream& out, const job_breakdown& job);

}  // namespace zeromem::cli
