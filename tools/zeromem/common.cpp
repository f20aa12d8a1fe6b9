#include "common.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <stdexcept>

#include "zeromem/model/hf_config.hpp"

namespace zeromem::cli {
namespace {

// Runs a library parser as a CLI11 transform: its message becomes "--flag: message", and the text it accepted is
// replaced by the plain number CLI11 then stores.
CLI::Validator checked(std::function<std::string(const std::string&)> parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          text = parse(text);
          return {};
        } catch (const std::exception& e) {
          std::string m = e.what();
          const std::string prefix = "zeromem: ";
          return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
        }
      },
      "");
}

std::string range_text(std::int64_t lo, std::int64_t hi) {
  return "from " + std::to_string(lo) + " to " + (hi == detail::i64_max ? std::string("2^63 - 1") : std::to_string(hi));
}

}  // namespace

CLI::Option* integer_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help, std::int64_t lo,
                            std::int64_t hi) {
  return app.add_option(flag, target, help)->transform(checked([lo, hi](const std::string& s) {
    return std::to_string(parse_integer(s, "the value", lo, hi));
  }));
}

CLI::Option* tokens_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help, std::int64_t lo,
                           std::int64_t hi) {
  return app.add_option(flag, target, help)->type_name("TOKENS")->transform(checked([lo, hi](const std::string& s) {
    const std::int64_t n = parse_tokens(s, "the token count");
    if (n < lo || n > hi) detail::fail("the token count must be " + range_text(lo, hi) + ", got " + detail::quoted(s));
    return std::to_string(n);
  }));
}

double parse_real(const std::string& s, double lo, double hi, bool hi_inclusive) {
  char* end = nullptr;
  const double v = s.empty() ? std::nan("") : std::strtod(s.c_str(), &end);
  const bool whole = !s.empty() && end == s.c_str() + s.size();
  if (!whole || !std::isfinite(v) || v < lo || (hi_inclusive ? v > hi : v >= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, "a number in [%g, %g%s", lo, hi, hi_inclusive ? "]" : ")");
    detail::fail(std::string("the value must be ") + range + ", got " + detail::quoted(s));
  }
  return v;
}

CLI::Option* real_option(CLI::App& app, const std::string& flag, double& target, const std::string& help, double lo, double hi,
                         bool hi_inclusive) {
  return app.add_option(flag, target, help)->transform(checked([lo, hi, hi_inclusive](const std::string& s) {
    parse_real(s, lo, hi, hi_inclusive);
    return s;
  }));
}

CLI::Option* share_or_size_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help) {
  return app.add_option(flag, target, help)->transform(checked([](const std::string& s) {
    if (!s.empty() && s.back() == '%') parse_real(s.substr(0, s.size() - 1), 0.0, 100.0, false);
    else parse_size(s, "the value");
    return s;
  }));
}

CLI::Option* text_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help) {
  return app.add_option(flag, target, help)->transform(checked([](const std::string& s) {
    if (s.empty()) detail::fail("the value cannot be empty; leave the flag out for its default");
    return s;
  }));
}

void add_model_flags(CLI::App& app, model_flags& f, bool attention_only) {
  auto* preset = text_option(app, "--model", f.preset,
                             "preset: " + detail::join_names(model_presets, ", ", [](const model_preset& p) { return p.name; }));
  CLI::Option* hf =
      text_option(app, "--hf-config", f.hf_config, "a Hugging Face config.json (model_type " + std::string(supported_model_types) + ")");
  preset->excludes(hf);
  std::vector<CLI::Option*> shape{
      integer_option(app, "--hidden", f.hidden, attention_only ? "hidden size (with --layers --heads [--kv-heads])"
                                                               : "hidden size (with --layers --heads --ffn --vocab)"),
      integer_option(app, "--layers", f.layers, "decoder layers"),
      integer_option(app, "--heads", f.heads, "attention heads"),
      integer_option(app, "--kv-heads", f.kv_heads, "key/value heads (default: heads)"),
      integer_option(app, "--head-dim", f.head_dim, "head dimension (default: hidden / heads)")};
  if (!attention_only) {
    shape.push_back(integer_option(app, "--ffn", f.ffn, "MLP intermediate size"));
    shape.push_back(integer_option(app, "--vocab", f.vocab, "vocabulary size"));
    shape.push_back(text_option(app, "--mlp", f.mlp, "gelu | swiglu | relu")->capture_default_str());
    shape.push_back(text_option(app, "--norm", f.norm, "layernorm | rmsnorm")->capture_default_str());
    shape.push_back(integer_option(app, "--max-positions", f.max_positions, "learned position embeddings of this many positions"));
    shape.push_back(integer_option(app, "--embedding-width", f.embedding_width,
                                   "token embedding width with project_in / project_out around the layers (OPT-350M's word_embed_proj_dim: 512)"));
    shape.push_back(app.add_flag("--post-residual-norms", f.post_residual_norms,
                                 "each LayerNorm after its residual add, no final norm (OPT-350M's do_layer_norm_before false)"));
    shape.push_back(app.add_flag("--tied-embeddings", f.tied, "output layer shares the embedding matrix"));
    shape.push_back(app.add_flag("--qkv-bias", f.qkv_bias, "q, k, v projections with bias"));
    shape.push_back(app.add_flag("--qk-norm", f.qk_norm, "an RMSNorm over each head's query and key (Qwen3's q_norm, k_norm)"));
    shape.push_back(app.add_flag("--norm-scale-fp32", f.norm_scale_fp32,
                                 "RMSNorm scales by (1 + weight) in fp32 before its cast (Gemma's GemmaRMSNorm)"));
    shape.push_back(app.add_flag("--qk-norm-whole", f.qk_norm_whole,
                                 "q_norm / k_norm over the whole q and k projections, not each head (OLMo-2); with --qk-norm"));
    shape.push_back(app.add_flag("--norm-weight-fp32", f.norm_weight_fp32,
                                 "RMSNorm multiplies by its weight in fp32 before its cast (OLMo-2's Olmo2RMSNorm)"));
    shape.push_back(app.add_flag("--no-norm-weights", f.no_norm_weights,
                                 "the layer norms and the final norm have no weight or bias (OLMo's OlmoLayerNorm)"));
    shape.push_back(app.add_flag("--norm-input-fp32", f.norm_input_fp32,
                                 "LayerNorm over an fp32 copy of its input, cast back (OLMo's OlmoLayerNorm); with --norm layernorm"));
    shape.push_back(app.add_flag("--clip-qkv", f.clip_qkv, "q, k and v clamped in place, each kept once more for backward (OLMo's clip_qkv)"));
    shape.push_back(app.add_flag("--post-norms", f.post_norms,
                                 "no norm before attention or the MLP, one over each branch's output, two a layer (OLMo-2)"));
    shape.push_back(app.add_flag("--rope-fp32", f.rope_fp32,
                                 "fp32 rotary tables, q and k rotated in fp32 and cast back (OLMo's OlmoRotaryEmbedding)"));
    shape.push_back(integer_option(app, "--nope-period", f.nope_period,
                                   "every N-th layer skips RoPE (SmolLM3's no_rope_layers: 4); 0: every layer rotates"));
    shape.push_back(app.add_flag("--scaled-residual", f.scaled_residual,
                                 "each branch is multiplied by a scalar into a new tensor before its residual add (Granite's residual_multiplier)"));
    shape.push_back(app.add_flag("--scaled-logits", f.scaled_logits,
                                 "the logits are divided by a scalar into a new tensor (Granite's logits_scaling)"));
    shape.push_back(app.add_flag("--scaled-embedding", f.scaled_embedding,
                                 "the embedding output is multiplied by sqrt(hidden) into a new tensor (Gemma's GemmaModel)"));
    shape.push_back(app.add_flag("--sandwich-norms", f.sandwich_norms,
                                 "a norm over each branch's output before its residual add, four a layer (Gemma-2)"));
    shape.push_back(real_option(app, "--attention-softcap", f.attention_softcap,
                                "eager attention's scores soft-capped as tanh(x / cap) x cap (Gemma-2: 50); 0: none", 0.0, 1e300, false));
    shape.push_back(real_option(app, "--final-logit-softcap", f.final_logit_softcap,
                                "the logits soft-capped as tanh(x / cap) x cap (Gemma-2: 30); 0: none", 0.0, 1e300, false));
    shape.push_back(integer_option(app, "--sliding-window-pattern", f.sliding_window_pattern,
                                   "every N-th layer has full attention, the others slide (Gemma-2: 2)"));
    shape.push_back(app.add_flag("--local-rope", f.local_rope,
                                 "the sliding layers rotate with their own base, a second cos/sin pair (Gemma-3's rope_local_base_freq)"));
    shape.push_back(app.add_flag("--parallel-residual", f.parallel_residual,
                                 "attention and the MLP both read the layer input, x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX, Phi)"));
    shape.push_back(app.add_flag("--shared-layer-norm", f.shared_layer_norm,
                                 "one norm feeds both parallel branches, one norm a layer (Phi's input_layernorm)"));
    shape.push_back(app.add_flag("--lm-head-bias", f.lm_head_bias, "the output layer has a bias (Phi's lm_head)"));
    shape.push_back(app.add_flag("--gelu-new", f.gelu_new,
                                 "GELU written as tensor ops that keep more (transformers' gelu_new: GPT-2, Phi); with --mlp gelu"));
    shape.push_back(app.add_flag("--gelu-fast", f.gelu_fast,
                                 "GELU written as transformers' gelu_fast tensor ops, which keep more (GPT-NeoX-20B); with --mlp gelu"));
    shape.push_back(app.add_flag("--fused-qkv", f.fused_qkv, "one projection for q, k and v (Phi-3's qkv_proj, GPT-2's c_attn)"));
    shape.push_back(app.add_flag("--qkv-per-head", f.qkv_per_head,
                                 "the fused qkv output is laid out per head as [q | k | v] (GPT-NeoX's query_key_value); with --fused-qkv"));
    shape.push_back(app.add_flag("--fused-gate-up", f.fused_gate_up, "one projection for gate and up (Phi-3's gate_up_proj)"));
    shape.push_back(integer_option(app, "--sliding-window", f.sliding_window,
                                   "transformers' sliding-window span in tokens (config.json sliding_window; SDPA then gets a mask)"));
    shape.push_back(app.add_flag("--use-cache", f.use_cache,
                                 "config.json use_cache: transformers builds a KV cache in a training forward without checkpointing"));
    shape.push_back(integer_option(app, "--experts", f.experts, "mixture of experts: routed experts per layer (Mixtral: 8)"));
    shape.push_back(integer_option(app, "--experts-per-token", f.experts_per_token, "experts each token is routed to (Mixtral: 2)"));
    shape.push_back(integer_option(app, "--expert-ffn", f.expert_ffn, "each expert's MLP intermediate size (default: --ffn)"));
    shape.push_back(integer_option(app, "--shared-experts", f.shared_experts, "always-active experts next to the routed ones"));
  }
  for (CLI::Option* s : shape) {
    preset->excludes(s);
    hf->excludes(s);
  }
}

transformer_config model_of(const model_flags& f) {
  if (!f.preset.empty()) return find_preset(f.preset).config;
  if (!f.hf_config.empty()) return read_hf_config(f.hf_config);
  if (f.hidden == 0 || f.layers == 0 || f.heads == 0 || f.ffn == 0 || f.vocab == 0)
    detail::fail("a model given by flags needs --hidden, --layers, --heads, --ffn and --vocab");
  transformer_config m{};
  m.hidden = f.hidden;
  m.layers = f.layers;
  m.heads = f.heads;
  m.kv_heads = f.kv_heads != 0 ? f.kv_heads : f.heads;
  m.head_dim = f.head_dim;
  m.ffn = f.ffn;
  m.vocab = f.vocab;
  if (f.mlp == "gelu") m.mlp = mlp_kind::gelu;
  else if (f.mlp == "swiglu") m.mlp = mlp_kind::swiglu;
  else if (f.mlp == "relu") m.mlp = mlp_kind::relu;
  else detail::fail("unknown --mlp " + detail::quoted(f.mlp) + "; expected gelu, swiglu or relu");
  if (f.norm == "layernorm") m.norm = norm_kind::layernorm;
  else if (f.norm == "rmsnorm") m.norm = norm_kind::rmsnorm;
  else detail::fail("unknown --norm " + detail::quoted(f.norm) + "; expected layernorm or rmsnorm");
  if (f.max_positions != 0) {
    m.positions = position_kind::learned;
    m.max_positions = f.max_positions;
  }
  m.tied_embeddings = f.tied;
  m.qk_norm = f.qk_norm;
  m.norm_scale_fp32 = f.norm_scale_fp32;
  m.qk_norm_whole = f.qk_norm_whole;
  m.norm_weight_fp32 = f.norm_weight_fp32;
  m.post_norms = f.post_norms;
  m.norm_affine = !f.no_norm_weights;
  m.embedding_width = f.embedding_width == f.hidden ? 0 : f.embedding_width;
  m.post_residual_norms = f.post_residual_norms;
  m.norm_input_fp32 = f.norm_input_fp32;
  m.clip_qkv = f.clip_qkv;
  m.rope_fp32 = f.rope_fp32;
  m.nope_period = f.nope_period;
  m.scaled_residual = f.scaled_residual;
  m.scaled_logits = f.scaled_logits;
  m.scaled_embedding = f.scaled_embedding;
  m.sandwich_norms = f.sandwich_norms;
  m.attention_softcap = f.attention_softcap;
  m.final_logit_softcap = f.final_logit_softcap;
  m.sliding_window_pattern = f.sliding_window_pattern;
  m.local_rope = f.local_rope;
  m.parallel_residual = f.parallel_residual;
  m.shared_layer_norm = f.shared_layer_norm;
  m.lm_head_bias = f.lm_head_bias;
  if (f.gelu_new && m.mlp != mlp_kind::gelu) detail::fail("--gelu-new is a GELU MLP's activation; pass --mlp gelu with it");
  m.gelu_tensor_ops = f.gelu_new;
  if (f.gelu_fast && m.mlp != mlp_kind::gelu) detail::fail("--gelu-fast is a GELU MLP's activation; pass --mlp gelu with it");
  m.gelu_fast_ops = f.gelu_fast;
  m.fused_qkv = f.fused_qkv;
  m.fused_gate_up = f.fused_gate_up;
  m.qkv_per_head = f.qkv_per_head;
  m.sliding_window = f.sliding_window;
  m.use_cache = f.use_cache;
  // A GELU (or ReLU) MLP model is GPT-style: biases on every linear (Korthikanti's block, GPT-2, OPT).
  const bool gpt_style = m.mlp == mlp_kind::gelu || m.mlp == mlp_kind::relu;
  m.qkv_bias = f.qkv_bias || gpt_style;
  m.attention_out_bias = m.mlp_bias = gpt_style;
  if (f.moe_given()) {
    if (f.experts == 0 || f.experts_per_token == 0)
      detail::fail("a mixture of experts needs --experts and --experts-per-token (Mixtral: --experts 8 --experts-per-token 2)");
    m.moe.experts = f.experts;
    m.moe.top_k = f.experts_per_token;
    m.moe.expert_ffn = f.expert_ffn != 0 ? f.expert_ffn : f.ffn;
    m.moe.shared_experts = f.shared_experts;
  }
  validate(m);
  return m;
}

void add_device_flags(CLI::App& app, std::string& gpu, std::string& gpu_memory, const std::string& why) {
  const std::string names = detail::join_names(gpu_models, " | ", [](const gpu_model& g) { return g.name; });
  auto* g = text_option(app, "--gpu", gpu, names + ": " + why);
  auto* m = text_option(app, "--gpu-memory", gpu_memory, "any GPU by its capacity as PyTorch reports it (total_memory), e.g. 23.55GiB: " + why);
  g->excludes(m);
}

device_choice device_of(const std::string& gpu, const std::string& gpu_memory) {
  if (!gpu.empty()) {
    const gpu_model& g = find_gpu(gpu);
    return {std::string(g.name), g.capacity, std::string(g.source)};
  }
  if (gpu_memory.empty()) return {};
  const bytes capacity = parse_bytes(gpu_memory, "the GPU memory (--gpu-memory)");
  if (capacity.count() == 0) detail::fail("--gpu-memory must be more than 0 B");
  return {"the GPU", capacity, "--gpu-memory " + gpu_memory};
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  constexpr std::size_t longest = 400;  // CLI11 echoes unknown arguments whole
  if (s.size() > longest) s = s.substr(0, longest) + "... (" + std::to_string(s.size()) + " characters)";
  return s;
}

// Exact bytes, then the size in the largest decimal and binary units it reaches, so small terms read "32.77 kB"
// rather than "0.000 GB".
std::string bytes_row(const std::string& label, bytes b) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-30s %26s %14s %14s", label.c_str(), format_exact(b).c_str(), format_auto(b, false, 3).c_str(),
                format_auto(b, true, 3).c_str());
  return buf;
}

std::string table_head(const std::string& first_column) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-30s %26s %14s %14s\n", first_column.c_str(), "exact", "decimal", "binary");
  return buf;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text)) detail::fail("cannot write " + detail::quoted(path, 256));
}

json breakdown_json(const job_breakdown& job) {
  json terms = json::array();
  for (const memory_term& t : job.terms)
    terms.push_back({{"role", t.role}, {"term", t.term}, {"gpu_bytes", t.gpu.count()}, {"host_bytes", t.host.count()}});
  return {{"per_gpu", {{"total_bytes", job.gpu_total().count()}, {"capacity_bytes", job.gpu_capacity.count()},
                       {"headroom_bytes", job.gpu_headroom().count()}, {"fits", job.gpu_fits()}}},
          {"per_node_host",
           {{"total_bytes", job.host_total().count()}, {"capacity_bytes", job.host_capacity.count()},
            {"limit_bytes", job.host_capacity.count() != 0 ? job.host_limit().count() : 0},
            {"unexplained_bytes", job.unexplained_host.count()}, {"fits", job.host_fits()}}},
          {"terms", terms}};
}

svg_bar bar_of(const std::string& label, const job_breakdown& job) {
  svg_bar b{label, {}};
  for (const memory_term& t : job.terms)
    if (t.gpu.count() != 0) b.segments.push_back({t.role + ": " + t.term, t.gpu});
  return b;
}

void print_dominant(std::ostream& out, const job_breakdown& job) {
  const bytes total = job.gpu_total();
  for (const named_bytes& d : dominant_terms(job))
    out << "    " << d.name << ": " << format_bytes(d.value, size_unit::GiB) << " ("
        << static_cast<int>(100.0 * (total.count() > 0 ? d.value / total : 0.0) + 0.5) << "% of the GPU total)\n";
}

}  // namespace zeromem::cli
