// Reads a Hugging Face config.json (or a model's directory holding one) into a transformer_config: the model types
// supported_model_types lists. An optional component: it needs nlohmann/json (CMake: find_package(zeromem COMPONENTS
// hf_config) and zeromem::hf_config); nothing else in zeromem includes it. Field names and defaults follow transformers'
// configuration classes (LlamaConfig, MistralConfig, Qwen2Config, GPT2Config, ...), each named where it is read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

#include "zeromem/core/error.hpp"
#include "zeromem/model/adapters.hpp"
#include "zeromem/model/model.hpp"

namespace zeromem {

/// How a checkpoint's weights are stored: config.json's quantization_config, which from_pretrained loads them by
/// (transformers quantizers/auto.py). zeromem reads bitsandbytes' two (BitsAndBytesConfig): 4-bit NF4, with or without
/// double quantization, and 8-bit (LLM.int8()).
struct hf_quantization {
  quantization kind = quantization::none;
  bool double_quant = true;  // NF4's bnb_4bit_use_double_quant (adaptation::double_quant)
};

/// The config.json model types parse_hf_config reads.
inline constexpr std::string_view supported_model_types =
    "llama, mistral, mixtral, phi3, phi, gemma, gemma2, gemma3_text, qwen2, qwen2_moe, qwen3, qwen3_moe, qwen2_vl, qwen2_5_vl, olmo, olmo2, olmo3, smollm3, "
    "olmoe, granite, stablelm, starcoder2, gpt_neox, opt, gpt2";

namespace detail::hf {

using json = nlohmann::json;

[[noreturn]] inline void fail_config(const std::string& what) { detail::fail("config.json: " + what); }

// A JSON value as it appears in an error: bounded, never the whole of a huge array or string.
inline std::string shown(const json& v) { return detail::quoted(v.dump()); }

inline const json* find(const json& j, const char* key) {
  const auto it = j.find(key);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

inline std::int64_t integer(const json& j, const char* key, const std::string& model_type) {
  const json* v = find(j, key);
  if (v == nullptr) fail_config("missing field " + detail::quoted(key) + " (needed for model_type " + detail::quoted(model_type) + ")");
  if (!v->is_number_integer() || v->get<std::int64_t>() <= 0)
    fail_config("field " + detail::quoted(key) + " must be a positive integer, got " + shown(*v));
  return v->get<std::int64_t>();
}

inline std::int64_t integer_or(const json& j, const char* key, std::int64_t fallback, const std::string& model_type) {
  return find(j, key) == nullptr ? fallback : integer(j, key, model_type);
}

// A dropout probability: absent -> the configuration class's default, else a number in [0, 1).
inline double probability_or(const json& j, const char* key, double fallback) {
  const json* v = find(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_number() || !(v->get<double>() >= 0.0 && v->get<double>() < 1.0))
    fail_config("field " + detail::quoted(key) + " must be a probability in [0, 1), got " + shown(*v));
  return v->get<double>();
}

// The head dimensions RoPE rotates: int(head_dim x factor) (transformers modeling_rope_utils.py
// _compute_default_rope_parameters; GPTNeoXAttention's rotary_ndims = int(head_size * rotary_pct)), the factor read from
// `key` (config.json), else from rope_parameters' partial_rotary_factor (transformers 5's layout), else `fallback`.
// Returns 0 (the whole head) for a factor of 1.
inline std::int64_t rotary_dims_of(const json& j, const char* key, double fallback, std::int64_t head_size) {
  const json* v = find(j, key);
  const char* shown_key = key;
  if (v == nullptr)
    if (const json* rope = find(j, "rope_parameters"); rope != nullptr && rope->is_object()) {
      v = find(*rope, "partial_rotary_factor");
      shown_key = "rope_parameters.partial_rotary_factor";
    }
  const double factor = v == nullptr ? fallback : v->is_number() ? v->get<double>() : -1.0;
  if (!(factor > 0.0 && factor <= 1.0))
    fail_config("field " + detail::quoted(shown_key) + " must be a fraction of each head in (0, 1], got " + shown(*v));
  const auto dims = static_cast<std::int64_t>(static_cast<double>(head_size) * factor);
  if (dims < 1) fail_config("field " + detail::quoted(shown_key) + " rotates no dimension of a head of " + std::to_string(head_size));
  return dims == head_size ? 0 : dims;
}

inline bool boolean_or(const json& j, const char* key, bool fallback) {
  const json* v = find(j, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) fail_config("field " + detail::quoted(key) + " must be true or false, got " + shown(*v));
  return v->get<bool>();
}

// Qwen2-VL's vision MLP width: int(embed_dim * mlp_ratio) (transformers modeling_qwen2_vl.py Qwen2VLVisionBlock),
// mlp_ratio a number (4 by default, Qwen2VLVisionConfig). int() truncates, so 1280 x 4.5 = 5760 exactly.
inline std::int64_t mlp_hidden_of(const json& vision, std::int64_t embed_dim) {
  const json* ratio = find(vision, "mlp_ratio");
  if (ratio == nullptr) return detail::checked_mul(embed_dim, 4, "embed_dim x mlp_ratio");
  if (!ratio->is_number() || !(ratio->get<double>() > 0.0))
    fail_config("field 'mlp_ratio' must be a positive number, got " + shown(*ratio));
  if (ratio->is_number_integer()) return detail::checked_mul(embed_dim, ratio->get<std::int64_t>(), "embed_dim x mlp_ratio");
  const long double width = static_cast<long double>(embed_dim) * ratio->get<double>();
  if (!(width >= 1.0L && width < 9.2e18L)) fail_config("embed_dim x mlp_ratio is out of range, got mlp_ratio " + shown(*ratio));
  return static_cast<std::int64_t>(width);
}

// config.json's sliding_window: absent -> the configuration class's default (MistralConfig: 4096; MixtralConfig,
// Phi3Config: None), null -> full attention (0), else a positive number of tokens.
inline std::int64_t sliding_window_of(const json& j, std::int64_t absent, const std::string& model_type) {
  if (!j.contains("sliding_window")) return absent;
  return integer_or(j, "sliding_window", 0, model_type);
}

// Qwen2Config / Qwen3Config: use_sliding_window makes the layers from max_window_layers on slide (layer_types), the
// others not (SmolLM3Config: its NoPE layers); zeromem models every layer alike, so that mix is refused. Without it
// sliding_window is ignored.
inline void refuse_layered_sliding_window(const json& j, const char* which = "from max_window_layers on") {
  if (boolean_or(j, "use_sliding_window", false))
    fail_config(std::string("use_sliding_window true (sliding layers ") + which + ") is not modelled; every layer is taken alike, set it false");
}

// A per-layer list in which layer i is marked exactly when (i + 1) % N == 0 for one N: returns N (0: none marked), or
// refuses any other arrangement by field. `marked(value)` says whether a layer's entry is marked (and refuses bad ones);
// `what` names the marked layers in the error.
template <class Marked>
std::int64_t period_of(const json& list, std::int64_t layers, const char* field, const char* what, Marked marked) {
  std::int64_t period = 0;
  for (std::int64_t i = 0; i < layers; ++i) {
    const bool m = marked(list[static_cast<std::size_t>(i)]);
    if (m && period == 0) period = i + 1;
    if (period > 0 && m != ((i + 1) % period == 0))
      fail_config("field " + detail::quoted(field) + " is not every N-th layer " + what + " (the first at layer " +
                  std::to_string(period - 1) + ", then layer " + std::to_string(i) + "); zeromem models that period only");
  }
  return period;
}

// SmolLM3Config's NoPE layers: no_rope_layers (1: layer i rotates, 0: it does not) when given, else a NoPE layer every
// no_rope_layer_interval layers (4 by default): layer i rotates when (i + 1) % interval != 0. zeromem models that period;
// any other arrangement is refused. Returns the period (0: every layer rotates).
inline std::int64_t nope_period_of(const json& j, std::int64_t layers, const std::string& model_type) {
  const std::int64_t interval = integer_or(j, "no_rope_layer_interval", 4, model_type);
  const json* list = find(j, "no_rope_layers");
  if (list == nullptr) return interval;
  if (!list->is_array() || static_cast<std::int64_t>(list->size()) < layers)
    fail_config("field 'no_rope_layers' must list 1 (RoPE) or 0 (none) for each of the " + std::to_string(layers) + " layers, got " + shown(*list));
  return period_of(*list, layers, "no_rope_layers", "without RoPE", [](const json& v) {
    if (v != 0 && v != 1) fail_config("field 'no_rope_layers' holds " + shown(v) + "; expected 1 (RoPE) or 0 (none)");
    return v == 0;
  });
}

// The gated MLP's activation (config.json hidden_act; Gemma's hidden_activation): zeromem's gated-MLP tensors hold
// for one kernel that keeps only its input (transformers activations.py ACT2FN: "silu"/"swish" nn.SiLU, "gelu"
// GELUActivation's nn.functional.gelu, "gelu_pytorch_tanh" nn.functional.gelu(approximate="tanh")). The ones written
// as tensor ops ("gelu_new", "gelu_fast", ...) keep more and are refused.
inline void require_one_kernel_activation(const json& j, const char* key) {
  const json* v = find(j, key);
  if (v == nullptr) return;
  static constexpr const char* known[] = {"silu", "swish", "gelu", "gelu_pytorch_tanh"};
  if (v->is_string())
    for (const char* name : known)
      if (v->get<std::string>() == name) return;
  fail_config("field " + detail::quoted(key) + R"( must be an activation zeromem models in a gated MLP ("silu", "swish", "gelu", "gelu_pytorch_tanh"), got )" +
              shown(*v));
}

// A logit soft-cap (Gemma2Config attn_logit_softcapping, final_logit_softcapping): absent -> the class's default,
// null -> none (0), else a positive number.
inline double softcap_or(const json& j, const char* key, double fallback) {
  if (!j.contains(key)) return fallback;
  const json* v = find(j, key);
  if (v == nullptr) return 0.0;
  if (!v->is_number() || !(v->get<double>() > 0.0 && v->get<double>() < 1e300))
    fail_config("field " + detail::quoted(key) + " must be a positive number or null, got " + shown(*v));
  return v->get<double>();
}

// Which layers slide (Gemma2Config, Gemma3TextConfig): config.json's layer_types ("sliding_attention" /
// "full_attention" per layer), else sliding_window_pattern, else the class's period; zeromem models a period N (layer i
// has full attention when (i + 1) % N == 0) and refuses any other arrangement. Returns N (0: every layer slides).
inline std::int64_t sliding_pattern_of(const json& j, std::int64_t layers, std::int64_t fallback, const std::string& model_type) {
  const json* types = find(j, "layer_types");
  if (types == nullptr) return integer_or(j, "sliding_window_pattern", fallback, model_type);
  if (!types->is_array() || static_cast<std::int64_t>(types->size()) != layers)
    fail_config("field 'layer_types' must list one attention type per layer (" + std::to_string(layers) + "), got " + shown(*types));
  return period_of(*types, layers, "layer_types", "full attention", [](const json& t) {
    if (t != "full_attention" && t != "sliding_attention")
      fail_config("field 'layer_types' holds " + shown(t) + "; expected \"sliding_attention\" or \"full_attention\"");
    return t == "full_attention";
  });
}

// Llama-family text fields: LlamaConfig / MistralConfig / Qwen2Config.
inline transformer_config llama_like(const json& j, const std::string& type, bool qwen) {
  transformer_config m{};
  m.hidden = integer(j, "hidden_size", type);
  m.layers = integer(j, "num_hidden_layers", type);
  m.heads = integer(j, "num_attention_heads", type);
  m.kv_heads = integer_or(j, "num_key_value_heads", m.heads, type);
  m.head_dim = integer_or(j, "head_dim", 0, type);
  m.ffn = integer(j, "intermediate_size", type);
  m.vocab = integer(j, "vocab_size", type);
  m.tied_embeddings = boolean_or(j, "tie_word_embeddings", false);
  require_one_kernel_activation(j, "hidden_act");
  // eager_attention_forward's dropout on the probabilities (SDPA's keeps only its RNG state); default 0.0.
  m.attention_dropout = probability_or(j, "attention_dropout", 0.0);
  if (qwen) {
    m.qkv_bias = true;  // Qwen2Attention: q_proj, k_proj, v_proj with bias; o_proj without
  } else {
    m.qkv_bias = m.attention_out_bias = boolean_or(j, "attention_bias", false);  // LlamaAttention: all four
    m.mlp_bias = boolean_or(j, "mlp_bias", false);
  }
  return m;
}

// GPT-NeoX and Phi fields (GPTNeoXConfig, PhiConfig): LayerNorm, RoPE (no learned positions), MHA (Phi: kv heads), a non-gated
// MLP with biases and an untied output layer. hidden_act (the class's default when absent): "gelu" is one kernel that
// keeps its input; "gelu_new" is NewGELUActivation and "gelu_fast" FastGELUActivation (GPT-NeoX-20B), tensor ops that keep
// more (activations.py); others are refused.
inline transformer_config neox_like(const json& j, const std::string& type, const char* default_act) {
  transformer_config m{};
  m.hidden = integer(j, "hidden_size", type);
  m.layers = integer(j, "num_hidden_layers", type);
  m.heads = m.kv_heads = integer(j, "num_attention_heads", type);
  m.ffn = integer(j, "intermediate_size", type);
  m.vocab = integer(j, "vocab_size", type);
  m.mlp = mlp_kind::gelu;
  m.norm = norm_kind::layernorm;
  m.mlp_bias = true;
  m.tied_embeddings = boolean_or(j, "tie_word_embeddings", false);
  m.attention_dropout = probability_or(j, "attention_dropout", 0.0);
  const json* act = find(j, "hidden_act");
  const std::string name = act == nullptr ? default_act : act->is_string() ? act->get<std::string>() : "";
  if (name != "gelu" && name != "gelu_new" && name != "gelu_fast")
    fail_config(R"(field 'hidden_act' must be "gelu", "gelu_new" or "gelu_fast" for model_type )" + detail::quoted(type) + ", got " +
                (act == nullptr ? std::string("nothing") : shown(*act)));
  m.gelu_tensor_ops = name == "gelu_new";
  m.gelu_fast_ops = name == "gelu_fast";  // GPT-NeoX-20B
  return m;
}

// OLMo's and OLMoE's clip_qkv (a number; null or absent: none): q, k and v clamped in place (clamp_).
inline bool clip_qkv_of(const json& j) {
  const json* clip = find(j, "clip_qkv");
  if (clip == nullptr) return false;
  if (!clip->is_number() || !(clip->get<double>() > 0.0)) fail_config("field 'clip_qkv' must be a positive number or null, got " + shown(*clip));
  return true;
}

// The routed block Qwen2-MoE and Qwen3-MoE share (modular_qwen2_moe.py / modular_qwen3_moe.py): num_experts (also
// answered as num_local_experts) experts of moe_intermediate_size in transformers 5's two 3D tensors (MixtralExperts),
// num_experts_per_tok a token, a bias-free h -> experts router whose top-k weights are renormalised only with
// norm_topk_prob (default false) and cast to the logits' dtype (router_top_value.to(router_logits.dtype): bf16; measured
// on Qwen3-MoE, whose router is Qwen2-MoE's). decoder_sparse_step and mlp_only_layers put dense MLPs
// (intermediate_size) on some layers: refused.
inline void qwen_moe_block(const json& j, transformer_config& m, const std::string& type, std::int64_t experts, std::int64_t top_k,
                           std::int64_t expert_ffn) {
  m.moe.experts = find(j, "num_experts") != nullptr ? integer(j, "num_experts", type) : integer_or(j, "num_local_experts", experts, type);
  m.moe.top_k = integer_or(j, "num_experts_per_tok", top_k, type);
  m.moe.expert_ffn = integer_or(j, "moe_intermediate_size", expert_ffn, type);
  m.ffn = m.moe.expert_ffn;  // intermediate_size sizes the dense layers only, refused below (Mixtral's is its experts')
  m.moe.renormalized = boolean_or(j, "norm_topk_prob", false);
  m.moe.weights_in_compute_dtype = true;
  if (integer_or(j, "decoder_sparse_step", 1, type) != 1)
    fail_config("decoder_sparse_step other than 1 (dense MLP layers between the MoE layers) is not modelled for model_type " + detail::quoted(type) +
                "; set it 1");
  if (const json* dense = find(j, "mlp_only_layers"); dense != nullptr && !dense->is_null() && !(dense->is_array() && dense->empty()))
    fail_config("field 'mlp_only_layers' holds " + shown(*dense) + " (dense MLP layers among the MoE layers), not modelled for model_type " +
                detail::quoted(type) + "; pass [] (every layer a mixture of experts)");
}

// GemmaConfig and its successors (modeling_gemma.py, modeling_gemma2.py, modeling_gemma3.py): Llama's fields with head_dim
// 256 by default, attention_bias on q, k, v and o, no MLP bias, tied embeddings by default, GemmaRMSNorm (fp32
// scaling), and the gated MLP's hidden_activation (else hidden_act; gelu_pytorch_tanh by default).
inline transformer_config gemma_like(const json& j, const std::string& type) {
  transformer_config m = llama_like(j, type, false);
  if (m.head_dim == 0) m.head_dim = 256;
  m.mlp_bias = false;
  m.tied_embeddings = boolean_or(j, "tie_word_embeddings", true);
  m.norm_scale_fp32 = true;
  require_one_kernel_activation(j, "hidden_activation");
  return m;
}

// Gemma-2 and Gemma-3: the soft-caps, the window (4096 by default in both configuration classes) and which layers slide.
inline void gemma_layers(const json& j, transformer_config& m, const std::string& type, double attention_cap, double final_cap,
                         std::int64_t period) {
  m.attention_softcap = softcap_or(j, "attn_logit_softcapping", attention_cap);
  m.final_logit_softcap = softcap_or(j, "final_logit_softcapping", final_cap);
  m.sliding_window = sliding_window_of(j, 4096, type);
  m.sliding_window_pattern = m.sliding_window > 0 ? sliding_pattern_of(j, m.layers, period, type) : 0;
}

// quantization_config (transformers utils/quantization_config.py): absent or null, the weights as their dtype says;
// bitsandbytes' load_in_4bit with bnb_4bit_quant_type (BitsAndBytesConfig's default "fp4") and
// bnb_4bit_use_double_quant (default false), or load_in_8bit. Any other method is refused by name.
inline hf_quantization declared_quantization(const json& j) {
  const json* q = find(j, "quantization_config");
  if (q == nullptr) return {};
  if (!q->is_object()) fail_config("field 'quantization_config' must be an object, got " + shown(*q));
  const json* method = find(*q, "quant_method");
  if (method == nullptr || *method != "bitsandbytes")
    fail_config("quantization_config with quant_method " + (method == nullptr ? std::string("missing") : shown(*method)) +
                " is not modelled (zeromem reads bitsandbytes' nf4 and 8-bit); drop quantization_config to estimate the unquantized weights");
  const bool four = boolean_or(*q, "load_in_4bit", false), eight = boolean_or(*q, "load_in_8bit", false);
  if (four == eight) fail_config("quantization_config (bitsandbytes) must set exactly one of load_in_4bit and load_in_8bit");
  if (eight) return {quantization::int8, true};
  const json* type = find(*q, "bnb_4bit_quant_type");
  if (type != nullptr && *type != "nf4" && *type != "fp4")
    fail_config(R"(field 'quantization_config.bnb_4bit_quant_type' must be "nf4" or "fp4", got )" + shown(*type));
  if (type == nullptr || *type == "fp4")
    fail_config("quantization_config stores the weights in bitsandbytes' 4-bit fp4 (bnb_4bit_quant_type, \"fp4\" by default), "
                "which is not modelled; zeromem reads nf4");
  return {quantization::nf4, boolean_or(*q, "bnb_4bit_use_double_quant", false)};
}

inline std::string described(const hf_quantization& q) {
  if (q.kind == quantization::none) return "unquantized weights";
  if (q.kind == quantization::int8) return "bitsandbytes 8-bit (int8)";
  return std::string("bitsandbytes NF4 ") + (q.double_quant ? "with" : "without") + " double quantization";
}
}  // namespace detail::hf

/// Parses config.json text. Throws std::invalid_argument ("zeromem: config.json: ...") for malformed JSON, an
/// unsupported model_type, or a missing or mistyped field. `base`: the quantization the caller models the frozen base
/// with (adaptation::quantize, double_quant); a quantization_config that stores the weights otherwise is refused,
/// naming the setting that matches it. Without one the base may still be quantized as it loads (QLoRA's
/// BitsAndBytesConfig passed to from_pretrained).
inline transformer_config parse_hf_config(const std::string& text, const hf_quantization& base = {}) {
  using namespace detail::hf;
  // Real config.json files nest 3 levels; a deeper document is refused while it is read, before it can exhaust the
  // stack of a recursive dump or destructor.
  constexpr int deepest = 32;
  const json::parser_callback_t depth_limit = [](int depth, json::parse_event_t, json&) {
    if (depth > deepest) fail_config("nested deeper than " + std::to_string(deepest) + " levels; is this a config.json?");
    return true;
  };
  json j;
  try {
    j = json::parse(text, depth_limit);
  } catch (const json::exception& e) {
    fail_config("not valid JSON: " + detail::quoted(e.what(), 160));
  }
  if (!j.is_object()) fail_config("expected a JSON object");
  const json* type_field = find(j, "model_type");
  if (type_field == nullptr || !type_field->is_string())
    fail_config("missing field 'model_type' (a transformers config.json names its model's family there); pass the model's config.json");
  const std::string type = type_field->get<std::string>();
  if (const hf_quantization declared = declared_quantization(j);
      declared.kind != quantization::none &&
      (declared.kind != base.kind || (declared.kind == quantization::nf4 && declared.double_quant != base.double_quant))) {
    const std::string flags = declared.kind == quantization::int8 ? "--quantize int8"
                              : declared.double_quant             ? "--quantize nf4"
                                                                  : "--quantize nf4 --no-double-quant";
    fail_config("quantization_config stores the weights in " + described(declared) + ", but the base is modelled as " + described(base) +
                ": model it so (" + flags + "; adaptation::quantize) or drop quantization_config for the unquantized weights");
  }

  transformer_config m{};
  if (type == "llama") {
    m = llama_like(j, type, false);
  } else if (type == "mistral") {
    m = llama_like(j, type, false);
    m.sliding_window = sliding_window_of(j, 4096, type);  // MistralConfig(sliding_window=4096)
  } else if (type == "phi3") {
    // Phi3Config / modeling_phi3.py: Phi3Attention's one qkv_proj (q + 2 kv heads, no bias), o_proj without bias,
    // Phi3MLP's gate_up_proj (2 x intermediate_size, chunked into gate and up) and down_proj, RMSNorm, no head_dim
    // field (hidden / heads), untied by default; sliding_window None by default (Phi-3-mini-4k sets 2047).
    m = llama_like(j, type, false);
    m.head_dim = 0;
    m.qkv_bias = m.attention_out_bias = m.mlp_bias = false;
    m.fused_qkv = m.fused_gate_up = true;
    m.sliding_window = sliding_window_of(j, 0, type);
    m.residual_dropout = probability_or(j, "resid_pdrop", 0.0);  // Phi3DecoderLayer resid_attn_dropout, resid_mlp_dropout
    m.rotary_dims = rotary_dims_of(j, "partial_rotary_factor", 1.0, m.head_size());  // Phi-4-mini: 0.75
    m.rope_concat = true;  // apply_rotary_pos_emb: torch.cat of the rotated and passed parts
  } else if (type == "gemma") {
    // GemmaConfig / modeling_gemma.py (gemma_like); GemmaModel scales the embedding output by sqrt(hidden).
    m = gemma_like(j, type);
    m.scaled_embedding = true;
  } else if (type == "gemma2") {
    // Gemma2Config / modeling_gemma2.py: Gemma's layout and norm, plus post_attention_layernorm and
    // post_feedforward_layernorm (four norms a layer), attn_logit_softcapping 50.0 and final_logit_softcapping 30.0 by
    // default, sliding_window 4096 on every other layer (layer i slides unless (i + 1) % 2 == 0). Gemma2Model builds
    // its cache only outside training (`use_cache and past_key_values is None and not self.training`).
    m = gemma_like(j, type);
    m.scaled_embedding = m.sandwich_norms = true;
    gemma_layers(j, m, type, 50.0, 30.0, 2);
  } else if (type == "gemma3_text") {
    // Gemma3TextConfig / modeling_gemma3.py: Gemma-2's layer with q_norm and k_norm (Gemma3RMSNorm over each head), no
    // soft-caps by default, sliding_window 4096 and a full-attention layer every 6 by default, the embedding scaled
    // inside Gemma3TextScaledWordEmbedding, a second rotary table for the sliding layers (rope_local_base_freq); like
    // Gemma-2, no cache while training.
    m = gemma_like(j, type);
    m.sandwich_norms = m.qk_norm = m.local_rope = true;
    gemma_layers(j, m, type, 0.0, 0.0, 6);
  } else if (type == "gemma3") {
    fail_config("model_type gemma3 (Gemma 3 with its SigLIP vision tower) is not modelled; pass its language model's config "
                "(text_config, model_type gemma3_text)");
  } else if (type == "mixtral") {
    // MixtralConfig: num_local_experts (default 8) experts of intermediate_size, num_experts_per_tok (default 2) of
    // them per token; MixtralSparseMoeBlock's router (gate) is a Linear(hidden, experts) without bias.
    m = llama_like(j, type, false);
    m.moe.experts = integer_or(j, "num_local_experts", 8, type);
    m.moe.top_k = integer_or(j, "num_experts_per_tok", 2, type);
    m.moe.expert_ffn = m.ffn;
    m.sliding_window = sliding_window_of(j, 0, type);  // MixtralConfig(sliding_window=None)
  } else if (type == "qwen2") {
    refuse_layered_sliding_window(j);
    m = llama_like(j, type, true);
  } else if (type == "qwen3") {
    // Qwen3Config: head_dim (default 128 in the config class; every released config gives it), attention_bias
    // (default false) on q, k, v and o, and Qwen3Attention's q_norm / k_norm.
    refuse_layered_sliding_window(j);
    m = llama_like(j, type, false);
    if (m.head_dim == 0) m.head_dim = 128;
    m.mlp_bias = false;
    m.qk_norm = true;
  } else if (type == "qwen3_moe") {
    // Qwen3MoeConfig / modular_qwen3_moe.py: Qwen3's attention (q_norm, k_norm; no head_dim field in the class, so
    // hidden / heads unless config.json gives it) over a Mixtral-style block (qwen_moe_block; default 128 experts of 768,
    // 8 a token).
    refuse_layered_sliding_window(j);
    m = llama_like(j, type, false);
    m.mlp_bias = false;
    m.qk_norm = true;
    qwen_moe_block(j, m, type, 128, 8, 768);
  } else if (type == "qwen2_moe") {
    // Qwen2MoeConfig / modular_qwen2_moe.py: Qwen2's attention (qkv_bias, default true, on q, k and v; o without) over
    // the same block (default 60 experts of 1408, 4 a token), plus Qwen2MoeSparseMoeBlock's shared_expert, a SwiGLU MLP
    // of shared_expert_intermediate_size (default 5632), whose output sigmoid(shared_expert_gate(x)) scales.
    refuse_layered_sliding_window(j);
    m = llama_like(j, type, true);
    m.qkv_bias = boolean_or(j, "qkv_bias", true);
    qwen_moe_block(j, m, type, 60, 4, 1408);
    const std::int64_t shared = integer_or(j, "shared_expert_intermediate_size", 5632, type);
    if (shared <= 0 || shared % m.moe.expert_ffn != 0)
      fail_config("shared_expert_intermediate_size " + std::to_string(shared) + " is not a multiple of moe_intermediate_size " +
                  std::to_string(m.moe.expert_ffn) + " (the shared expert is modelled as that many experts' widths); not modelled");
    m.moe.shared_experts = shared / m.moe.expert_ffn;  // one SwiGLU of n expert widths: the same parameters and tensors
    m.moe.shared_expert_gate = true;
  } else if (type == "qwen2_5_vl" || type == "qwen2_vl") {
    const json* text_config = find(j, "text_config");
    const json& t = text_config != nullptr && text_config->is_object() && text_config->contains("hidden_size") ? *text_config : j;
    m = llama_like(t, type, true);
    if (find(j, "tie_word_embeddings") != nullptr) m.tied_embeddings = boolean_or(j, "tie_word_embeddings", false);
    const json* v = find(j, "vision_config");
    if (v == nullptr || !v->is_object()) fail_config("missing object 'vision_config' (needed for model_type " + detail::quoted(type) + ")");
    const std::string vt = type + ".vision_config";
    m.vision.blocks = integer(*v, "depth", vt);
    m.vision.heads = integer(*v, "num_heads", vt);
    m.vision.patch = integer_or(*v, "patch_size", 14, vt);
    m.vision.temporal_patch = integer_or(*v, "temporal_patch_size", 2, vt);
    m.vision.spatial_merge = integer_or(*v, "spatial_merge_size", 2, vt);
    m.vision.in_channels = integer_or(*v, "in_channels", integer_or(*v, "in_chans", 3, vt), vt);
    if (type == "qwen2_5_vl") {
      require_one_kernel_activation(*v, "hidden_act");  // Qwen2_5_VLVisionConfig: "silu", the gated MLP's
      m.vision.hidden = integer(*v, "hidden_size", vt);
      m.vision.mlp_hidden = integer(*v, "intermediate_size", vt);
      m.vision.out_hidden = integer_or(*v, "out_hidden_size", m.hidden, vt);
    } else {  // Qwen2-VL: embed_dim, mlp_ratio, fc1/fc2 MLP with LayerNorm
      m.vision.hidden = integer(*v, "embed_dim", vt);
      m.vision.mlp_hidden = mlp_hidden_of(*v, m.vision.hidden);
      m.vision.out_hidden = integer_or(*v, "hidden_size", m.hidden, vt);
      m.vision.gated_mlp = false;
      m.vision.norm = norm_kind::layernorm;
      m.vision.windowed = false;
      // Qwen2VLVisionConfig hidden_act "quick_gelu": QuickGELUActivation, x * sigmoid(1.702 x) as tensor ops
      // (activations.py), whose saved tensors vision_activation_bytes counts; another activation keeps others.
      if (const json* act = find(*v, "hidden_act"); act != nullptr && !(act->is_string() && act->get<std::string>() == "quick_gelu"))
        fail_config(R"(field 'vision_config.hidden_act' must be "quick_gelu" for model_type 'qwen2_vl', got )" + shown(*act));
    }
  } else if (type == "olmo") {
    // OlmoConfig / modular_olmo.py (OLMo-1B-hf, OLMo-7B-hf): LlamaAttention (attention_bias on q, k, v and o, default
    // false) and LlamaMLP without bias in Llama's pre-norm layer, every norm an OlmoLayerNorm (F.layer_norm over
    // x.to(torch.float32) without weight or bias, cast back), OlmoRotaryEmbedding's fp32 tables, untied by default.
    // clip_qkv (a number; null: none) clamps q, k and v in place (clamp_).
    m = llama_like(j, type, false);
    m.mlp_bias = false;
    m.norm = norm_kind::layernorm;
    m.norm_affine = false;
    m.norm_input_fp32 = m.rope_fp32 = true;
    m.clip_qkv = clip_qkv_of(j);
  } else if (type == "olmoe") {
    // OlmoeConfig / modular_olmoe.py (transformers 5; OLMoE-1B-7B): OlmoeAttention is LlamaAttention (attention_bias,
    // default false) with q_norm and k_norm, OlmoeRMSNorm (LlamaRMSNorm) over the whole q and k projections, then
    // clip_qkv's in-place clamps; LlamaDecoderLayer's pre-norms; OlmoeExperts is MixtralExperts (num_experts, default 64,
    // of intermediate_size) and OlmoeTopKRouter is Qwen2MoeTopKRouter (num_experts_per_tok, default 8; norm_topk_prob,
    // default false; the weights cast to the logits' dtype); untied by default.
    m = llama_like(j, type, false);
    m.mlp_bias = false;
    m.qk_norm = m.qk_norm_whole = true;
    m.clip_qkv = clip_qkv_of(j);
    m.moe.experts = integer_or(j, "num_experts", 64, type);
    m.moe.top_k = integer_or(j, "num_experts_per_tok", 8, type);
    m.moe.expert_ffn = m.ffn;
    m.moe.renormalized = boolean_or(j, "norm_topk_prob", false);
    m.moe.weights_in_compute_dtype = true;
  } else if (type == "stablelm") {
    // StableLmConfig / modeling_stablelm.py (stablelm-3b-4e1t, stablelm-2-1_6b, stablelm-zephyr-3b): q_proj, k_proj,
    // v_proj with use_qkv_bias (default false), o_proj without bias, StableLmMLP (Mistral's gate / up / down without
    // bias, hidden_act silu), nn.LayerNorm with weight and bias before attention and before the MLP, or one
    // input_layernorm feeding both when use_parallel_residual (default false); RoPE on partial_rotary_factor of each head
    // (rotated and passed parts concatenated: what autograd keeps does not depend on the fraction); untied by default.
    // hidden_dropout drops the MLP branch only, qk_layernorm normalises each head with its own LayerNorm, and the
    // attention of that modeling file repeats K and V to every head before SDPA: none of these is modelled.
    m = llama_like(j, type, false);
    m.head_dim = 0;  // StableLmAttention: hidden_size // num_attention_heads
    m.kv_heads = integer_or(j, "num_key_value_heads", 32, type);  // StableLmConfig's default, whatever the heads
    m.qkv_bias = boolean_or(j, "use_qkv_bias", false);
    m.attention_out_bias = m.mlp_bias = false;
    m.norm = norm_kind::layernorm;
    m.rotary_dims = rotary_dims_of(j, "partial_rotary_factor", 0.25, m.head_size());  // StableLmConfig's default
    m.rope_concat = true;  // apply_rotary_pos_emb: torch.cat of the rotated and passed parts
    m.parallel_residual = m.shared_layer_norm = m.residual_added_first = boolean_or(j, "use_parallel_residual", false);
    if (boolean_or(j, "qk_layernorm", false)) fail_config("qk_layernorm true (a LayerNorm per head on q and k) is not modelled for model_type 'stablelm'; set it false");
    if (probability_or(j, "hidden_dropout", 0.0) > 0.0)
      fail_config("hidden_dropout > 0 (dropout on the MLP branch only) is not modelled for model_type 'stablelm'; set it 0");
    if (m.kv_heads != m.heads)
      fail_config("num_key_value_heads below num_attention_heads is not modelled for model_type 'stablelm' (its attention repeats K and V "
                  "before SDPA); pass as many key/value heads as heads");
  } else if (type == "olmo2" || type == "olmo3") {
    // Olmo2Config / modeling_olmo2.py: OlmoAttention's q_proj, k_proj, v_proj, o_proj (attention_bias on all four,
    // default false), Olmo2Attention's q_norm and k_norm over the whole projections, LlamaMLP's gate / up / down without
    // bias, no norm before attention or the MLP, post_attention_layernorm and post_feedforward_layernorm over their
    // outputs, Olmo2RMSNorm (the weight multiply in fp32) everywhere, OlmoRotaryEmbedding's fp32 cos and sin, untied by
    // default. Olmo3Config adds sliding_window (4096 by default) on three layers in four (layer_types; "full_attention"
    // where (i + 1) % 4 == 0), and Olmo3Model a rotary pair per layer type.
    m = llama_like(j, type, false);
    m.mlp_bias = false;
    m.qk_norm = m.qk_norm_whole = m.norm_weight_fp32 = m.post_norms = m.rope_fp32 = true;
    if (type == "olmo3") {
      m.sliding_window = sliding_window_of(j, 4096, type);
      m.sliding_window_pattern = m.sliding_window > 0 ? sliding_pattern_of(j, m.layers, 4, type) : 0;
      m.local_rope = m.sliding_window_pattern >= 2;
    }
  } else if (type == "smollm3") {
    // SmolLM3Config / modular_smollm3.py (HuggingFaceTB/SmolLM3-3B): LlamaAttention, LlamaDecoderLayer and
    // LlamaForCausalLM (attention_bias, mlp_bias default false) under Qwen2Model, tied by default; SmolLM3Attention skips
    // RoPE on the layers no_rope_layers marks 0. use_sliding_window puts a window on those layers only: refused.
    refuse_layered_sliding_window(j, "on the NoPE layers only");
    m = llama_like(j, type, false);
    m.tied_embeddings = boolean_or(j, "tie_word_embeddings", true);
    m.nope_period = nope_period_of(j, m.layers, type);
  } else if (type == "granite") {
    // GraniteConfig / modular_granite.py (IBM Granite 3.x dense): LlamaAttention with attention_bias on q, k, v, o,
    // LlamaMLP with mlp_bias, untied by default. The multipliers (embedding_multiplier, residual_multiplier,
    // attention_multiplier, logits_scaling) are Python floats: their values change no size, but the products are new
    // tensors.
    m = llama_like(j, type, false);
    m.scaled_residual = m.scaled_logits = m.embedding_multiplier = true;
  } else if (type == "starcoder2") {
    // Starcoder2Config / modeling_starcoder2.py: Llama's pre-norm layer with LayerNorms (weight and bias), q, k, v, o
    // and the MLP's c_fc / act / c_proj all with use_bias (default true), GQA (num_key_value_heads, default 2),
    // residual_dropout after o_proj and after the MLP, embedding_dropout on the embeddings, attention_dropout on the
    // probabilities (0.0 each by default), sliding_window None by default, tied by default; hidden_act
    // gelu_pytorch_tanh by default (one kernel; "gelu" too), "gelu_new" as tensor ops, others refused.
    m.hidden = integer(j, "hidden_size", type);
    m.layers = integer(j, "num_hidden_layers", type);
    m.heads = integer(j, "num_attention_heads", type);
    m.kv_heads = integer_or(j, "num_key_value_heads", 2, type);
    m.ffn = integer(j, "intermediate_size", type);
    m.vocab = integer(j, "vocab_size", type);
    m.mlp = mlp_kind::gelu;
    m.norm = norm_kind::layernorm;
    m.qkv_bias = m.attention_out_bias = m.mlp_bias = boolean_or(j, "use_bias", true);
    m.tied_embeddings = boolean_or(j, "tie_word_embeddings", true);
    m.sliding_window = sliding_window_of(j, 0, type);
    m.attention_dropout = probability_or(j, "attention_dropout", 0.0);
    m.residual_dropout = probability_or(j, "residual_dropout", 0.0);
    m.embedding_dropout = probability_or(j, "embedding_dropout", 0.0);
    const json* act = find(j, "hidden_act");
    const std::string name = act == nullptr ? "gelu_pytorch_tanh" : act->is_string() ? act->get<std::string>() : "";
    if (name != "gelu_pytorch_tanh" && name != "gelu" && name != "gelu_new")
      fail_config(R"(field 'hidden_act' must be "gelu_pytorch_tanh", "gelu" or "gelu_new" for model_type 'starcoder2', got )" +
                  (act == nullptr ? std::string("nothing") : shown(*act)));
    m.gelu_tensor_ops = name == "gelu_new";
  } else if (type == "gpt_neox") {
    // GPTNeoXConfig / modeling_gpt_neox.py: one query_key_value Linear(h, 3h) laid out per head as [q | k | v], dense,
    // LayerNorms with biases, dense_h_to_4h / act / dense_4h_to_h, biases on every linear (attention_bias, default
    // true), an untied embed_out without bias, and by default attention and the MLP in parallel (use_parallel_residual)
    // each behind its own LayerNorm. RoPE rotates rotary_pct of each head (0.25 by default); apply_rotary_pos_emb
    // concatenates the rotated and passed parts into new query and key tensors, so what a layer keeps does not depend
    // on the fraction; the rotary tables are that fraction of a head wide.
    m = neox_like(j, type, "gelu");
    m.qkv_bias = m.attention_out_bias = boolean_or(j, "attention_bias", true);
    m.fused_qkv = m.qkv_per_head = true;
    m.parallel_residual = boolean_or(j, "use_parallel_residual", true);
    m.rotary_dims = rotary_dims_of(j, "rotary_pct", 0.25, m.head_size());
    m.rope_concat = true;  // apply_rotary_pos_emb: torch.cat of the rotated and passed parts
    m.residual_dropout = m.embedding_dropout = probability_or(j, "hidden_dropout", 0.0);  // post_attention/post_mlp/emb_dropout
  } else if (type == "phi") {
    // PhiConfig / modeling_phi.py (Phi-1, Phi-1.5, Phi-2): q_proj, k_proj, v_proj and dense with biases, fc1 / act /
    // fc2 with biases, one input_layernorm feeding attention and the MLP in parallel, lm_head with a bias, untied;
    // resid_pdrop on both branches, embd_pdrop on the embeddings. RoPE on partial_rotary_factor of each head (rotated
    // and passed parts concatenated, as GPT-NeoX). qk_layernorm (LayerNorms on q and k) is not modelled.
    m = neox_like(j, type, "gelu_new");
    m.kv_heads = integer_or(j, "num_key_value_heads", m.heads, type);
    m.qkv_bias = m.attention_out_bias = true;
    m.parallel_residual = m.shared_layer_norm = m.lm_head_bias = true;
    m.residual_dropout = probability_or(j, "resid_pdrop", 0.0);
    m.embedding_dropout = probability_or(j, "embd_pdrop", 0.0);
    m.rotary_dims = rotary_dims_of(j, "partial_rotary_factor", 0.5, m.head_size());  // PhiConfig's default
    m.rope_concat = true;  // apply_rotary_pos_emb: torch.cat of the rotated and passed parts
    if (boolean_or(j, "qk_layernorm", false)) fail_config("qk_layernorm true (LayerNorms on q and k) is not modelled for model_type 'phi'; set it false");
  } else if (type == "opt") {
    // OPTConfig / modeling_opt.py (OPT-125M ... 66B): q_proj, k_proj, v_proj, out_proj and fc1, fc2 with biases
    // (enable_bias), a LayerNorm before attention and before the MLP, ReLU (activation_function), learned positions
    // of max_position_embeddings + 2 rows (OPTLearnedPositionalEmbedding's offset), a final LayerNorm, the output layer
    // tied; `dropout` (0.1 by default) on both branches, attention_dropout on the probabilities, none on the embeddings.
    m.hidden = integer(j, "hidden_size", type);
    m.layers = integer(j, "num_hidden_layers", type);
    m.heads = m.kv_heads = integer(j, "num_attention_heads", type);
    m.ffn = integer(j, "ffn_dim", type);
    m.vocab = integer(j, "vocab_size", type);
    m.max_positions = detail::checked_add(integer(j, "max_position_embeddings", type), 2, "max_position_embeddings + 2");
    m.position_offset = 2;
    m.positions = position_kind::learned;
    m.norm = norm_kind::layernorm;
    m.mlp = mlp_kind::relu;
    m.qkv_bias = m.attention_out_bias = m.mlp_bias = boolean_or(j, "enable_bias", true);
    m.tied_embeddings = boolean_or(j, "tie_word_embeddings", true);
    m.residual_dropout = probability_or(j, "dropout", 0.1);
    m.attention_dropout = probability_or(j, "attention_dropout", 0.0);
    const json* act = find(j, "activation_function");
    if (act != nullptr && *act != "relu")
      fail_config(R"(field 'activation_function' must be "relu" for model_type 'opt', got )" + shown(*act));
    // OPT-350M: do_layer_norm_before false puts each LayerNorm after its residual add and drops the final one
    // (OPTDecoder builds final_layer_norm only when do_layer_norm_before); word_embed_proj_dim 512 narrows the embedding,
    // with project_in and project_out around the layers.
    m.post_residual_norms = !boolean_or(j, "do_layer_norm_before", true);
    const std::int64_t width = integer_or(j, "word_embed_proj_dim", m.hidden, type);
    m.embedding_width = width == m.hidden ? 0 : width;
    m.norm_affine = boolean_or(j, "layer_norm_elementwise_affine", true);  // false: LayerNorms without weight or bias
    if (boolean_or(j, "_remove_final_layer_norm", false)) fail_config("_remove_final_layer_norm true is not modelled; set it false");
    if (probability_or(j, "layerdrop", 0.0) > 0.0)
      fail_config("layerdrop > 0 (layers skipped at random in training) is not modelled; the peak is a step that runs them all, set it 0");
  } else if (type == "gpt2") {
    m.hidden = integer(j, "n_embd", type);
    m.layers = integer(j, "n_layer", type);
    m.heads = m.kv_heads = integer(j, "n_head", type);
    // GPT2MLP: intermediate_size = n_inner if set, else 4 * hidden_size (modeling_gpt2.py GPT2Block).
    m.ffn = integer_or(j, "n_inner", detail::checked_mul(4, m.hidden, "4 x n_embd"), type);
    m.vocab = integer(j, "vocab_size", type);
    m.max_positions = integer(j, "n_positions", type);
    m.positions = position_kind::learned;
    m.mlp = mlp_kind::gelu;
    m.norm = norm_kind::layernorm;
    m.qkv_bias = m.attention_out_bias = m.mlp_bias = true;
    m.fused_qkv = true;  // GPT-2's c_attn is one Conv1D of n_embd x 3 n_embd
    // transformers ACT2FN: "gelu_new" (GPT-2's default) is NewGELUActivation, the tanh formula as tensor ops, "gelu_fast"
    // FastGELUActivation's; "gelu", "gelu_pytorch_tanh", "silu" and "swish" one kernel that keeps its input; "relu" keeps
    // its output, the tensor c_proj reads. Others are refused.
    const json* act = find(j, "activation_function");
    const std::string name = act == nullptr ? "gelu_new" : act->is_string() ? act->get<std::string>() : "";
    static constexpr const char* known[] = {"gelu_new", "gelu_fast", "gelu", "gelu_pytorch_tanh", "silu", "swish", "relu"};
    bool modelled = false;
    for (const char* k : known) modelled = modelled || name == k;
    if (!modelled)
      fail_config(R"(field 'activation_function' must be "gelu_new", "gelu_fast", "gelu", "gelu_pytorch_tanh", "silu", "swish" or "relu" )"
                  "for model_type 'gpt2', got " + shown(*act));
    if (name == "relu") m.mlp = mlp_kind::relu;
    m.eager_softmax_fp32 = false;
    m.gelu_tensor_ops = name == "gelu_new";
    m.gelu_fast_ops = name == "gelu_fast";
    // GPT2Attention._upcast_and_reordered_attn computes the scores and softmax in fp32 (baddbmm) whatever the attention
    // implementation: other saved tensors.
    if (boolean_or(j, "reorder_and_upcast_attn", false))
      fail_config("reorder_and_upcast_attn true (GPT-2's attention upcast to fp32) is not modelled; set it false");
    m.tied_embeddings = boolean_or(j, "tie_word_embeddings", true);
    // GPT2Config: attn_pdrop, resid_pdrop (attention and MLP outputs), embd_pdrop, 0.1 each by default.
    m.attention_dropout = probability_or(j, "attn_pdrop", 0.1);
    m.residual_dropout = probability_or(j, "resid_pdrop", 0.1);
    m.embedding_dropout = probability_or(j, "embd_pdrop", 0.1);
  } else {
    fail_config("unsupported model_type " + detail::quoted(type) +
                "; describe the model by its shape instead (the command line's --hidden, --layers, --heads, --ffn, --vocab) or "
                "pass a config of a supported type: " + std::string(supported_model_types));
  }
  // Every configuration class read here defaults use_cache to True (PretrainedConfig subclasses' __init__); Gemma-2
  // and Gemma-3 build no cache in training whatever it says.
  const bool use_cache = boolean_or(j, "use_cache", true);
  m.use_cache = use_cache && type != "gemma2" && type != "gemma3_text";
  validate(m);
  return m;
}

/// The config.json a path names: the file itself, or a model's directory's config.json, as
/// AutoConfig.from_pretrained(directory) reads it (transformers utils/__init__.py CONFIG_NAME = "config.json").
inline std::string hf_config_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) return path;
  const std::string file = (std::filesystem::path(path) / "config.json").string();
  if (!std::filesystem::is_regular_file(file, ec))
    detail::fail("directory " + detail::quoted(path, 256) + " holds no config.json; pass a model's directory or its config.json");
  return file;
}

namespace detail {
/// The text of a small configuration file (`what`: "config.json file", "DeepSpeed config"), at most 16 MiB: anything
/// past that (or a device that never ends, such as /dev/zero) is refused after reading at most one byte more.
inline std::string read_small_file(const std::string& path, const std::string& what) {
  constexpr std::size_t largest = std::size_t{16} << 20;
  std::ifstream in(path, std::ios::binary);
  if (!in) detail::fail("cannot read " + what + " " + detail::quoted(path, 256) + "; check that it is a readable file");
  std::string text(largest + 1, '\0');
  in.read(&text[0], static_cast<std::streamsize>(text.size()));
  if (in.bad()) detail::fail("cannot read " + what + " " + detail::quoted(path, 256));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > largest) detail::fail(what + " " + detail::quoted(path, 256) + " is larger than 16 MiB; pass the file itself");
  return text;
}
}  // namespace detail

/// Reads and parses a config.json file, or the config.json in a model's directory (at most 16 MiB; the largest
/// config.json on the Hugging Face Hub is a few hundred KB).
inline transformer_config read_hf_config(const std::string& given, const hf_quantization& base = {}) {
  const std::string path = hf_config_file(given);
  if (!std::ifstream(path, std::ios::binary)) {
    std::error_code ec;
    if (std::filesystem::exists(path, ec))
      detail::fail("cannot read config.json file " + detail::quoted(path, 256) + "; check that it is a readable file");
    // "owner/name" that is no local path reads as a Hugging Face Hub id: zeromem reads files and downloads nothing.
    const std::size_t slash = given.find('/');
    bool hub_id = given.size() <= 96 && slash != std::string::npos && slash > 0 && slash + 1 < given.size() &&
                  given.find('/', slash + 1) == std::string::npos && given[0] != '.';
    for (const char c : given)
      hub_id = hub_id && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '/' || c == '-' ||
                          c == '_' || c == '.');
    if (hub_id)
      detail::fail("cannot read config.json file " + detail::quoted(path, 256) +
                   ": no such file; zeromem reads a local file and downloads nothing: save the model's config.json "
                   "(huggingface-cli download " + given + " config.json) and pass its path");
    detail::fail("cannot read config.json file " + detail::quoted(path, 256) + ": no such file; pass a model's config.json or its directory");
  }
  const std::string text = detail::read_small_file(path, "config.json file");
  try {
    return parse_hf_config(text, base);
  } catch (const std::invalid_argument& e) {
    // Name the file: "zeromem: config.json: X" becomes "zeromem: config.json 'path': X".
    const std::string m = e.what(), prefix = "zeromem: config.json: ";
    if (m.compare(0, prefix.size(), prefix) != 0) throw;
    detail::fail("config.json " + detail::quoted(path, 256) + ": " + m.substr(prefix.size()));
  }
}

}  // namespace zeromem
