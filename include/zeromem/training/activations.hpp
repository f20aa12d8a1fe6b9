// Activation memory: the bytes autograd keeps for the backward pass, per decoder layer and per pipeline stage.
//
// Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models" (arXiv 2205.05198),
// §4.1 and Table 2, per layer with s tokens, b sequences, h hidden, a heads, t tensor-parallel ranks:
//   attention 11sbh + 5as^2b, MLP 19sbh (ffn = 4h), two LayerNorms 4sbh  ->  sbh(34 + 5as/h)
// with 16-bit activations and 1-byte dropout masks. Each term below is one tensor the paper names, generalised
// to GQA, SwiGLU, RMSNorm, any dtype, flash attention, and to the implementation profiles in docs/activations.md.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/model/adapters.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

enum class recompute { none, selective, full };
/// eager: transformers' eager_attention_forward (s^2 scores kept). flash: transformers' default, SDPA (its flash or
/// memory-efficient kernels: no s^2 terms, a log-sum-exp; transformers' sliding-window mask once a sequence reaches the
/// window). flash_attention_2: attn_implementation="flash_attention_2" (flash-attn), which takes GQA and sliding windows
/// in the kernel, without a mask or repeated K and V.
enum class attention_kind { eager, flash, flash_attention_2 };

/// Which kernels produce the saved tensors.
///  paper:    the paper's idealised block: one saved copy per tensor, norm statistics ignored.
///  eager:    the same op sequence as PyTorch eager runs it: norms also keep their statistics.
///  fused:    Megatron-Core / Transformer Engine kernels: fused norms (input + fp32 statistics) and a fused
///            SwiGLU that keeps [gate | up] and its output (megatron/core/fusions/fused_bias_swiglu.py).
///  hf:       transformers' modeling code (the default): RMSNorm upcast to fp32; with eager attention also softmax
///            in fp32 and K and V repeated to all heads for GQA (modeling_llama.py LlamaRMSNorm,
///            eager_attention_forward, repeat_kv).
enum class implementation { paper, eager, fused, hf };

/// Whether a job run on these kernels can choose selective recompute. transformers' gradient checkpointing wraps whole
/// decoder layers (modeling_layers.py GradientCheckpointingLayer, switched on by modeling_utils.py
/// gradient_checkpointing_enable): its choices are none and full. Selective recompute of the attention core is
/// Megatron-LM's (Korthikanti et al. 2022 §5; --recompute-granularity selective), whose kernels the others model.
constexpr bool offers_selective_recompute(implementation i) { return i != implementation::hf; }

/// Where the kernels run. PyTorch's CPU kernels store dropout masks and LayerNorm statistics in the
/// activation dtype; CUDA's fused dropout stores a 1-byte mask and LayerNorm keeps fp32 statistics.
enum class device_kind { cuda, cpu };

struct activation_config {
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 1;
  dtype activation_dtype = dtype::bf16;
  std::int64_t tp = 1;
  bool sequence_parallel = false;
  std::int64_t cp = 1;
  recompute recomputation = recompute::none;
  attention_kind attention = attention_kind::flash;  // SDPA/FlashAttention, transformers' default since 4.36
  double dropout = 0.0;  // 0: no dropout, no masks
  implementation impl = implementation::hf;           // the kernels transformers' modeling code runs
  device_kind device = device_kind::cuda;
  /// PyTorch 1.x's mean.dim kept its input for backward (derivatives.yaml used self.sizes(); measured on 1.13);
  /// 2.x keeps only sizes (self.sym_sizes(), self.sym_numel()). Matters for HF's RMSNorm: x^2 in fp32.
  int torch_major = 2;
  /// torch.autocast with fp32 weights (precision amp-bf16 / amp-fp16): activation_dtype is the autocast dtype,
  /// the residual stream and the norms stay fp32, each linear casts its input and its weight (autocast's weight
  /// cache), and the cast copies are what autograd saves (torch/csrc/autograd autocast, autocast_mode.cpp).
  bool autocast = false;
  /// Image tokens among each sequence's seq_len tokens (Qwen2-VL / Qwen2.5-VL): each is one merged group of
  /// spatial_merge^2 patches the vision tower runs over (vision_activation_bytes). 0: text only.
  std::int64_t image_tokens = 0;
  /// Whether the forward may build the KV cache config.json's use_cache asks for (transformer_config::use_cache). false:
  /// the layer runs without one whatever the model says, as a checkpointed layer's recomputation does (transformers
  /// forces use_cache off under gradient checkpointing), or a training loop passing use_cache=False.
  bool forward_cache = true;
};

struct pipeline_config {
  std::int64_t pp = 1;
  std::int64_t virtual_stages = 1;  // interleaved 1F1B model chunks per rank (1: plain 1F1B)
  std::int64_t microbatches = 0;    // per step; 0 = at least pp
};

/// The saved tensors of one decoder layer on one rank, in bytes.
struct layer_activations {
  bytes attention_norm;       // what the first norm saves
  bytes attention_input;      // input of the q, k, v projections
  bytes query, key, value;    // q, k, v as the attention core saves them (q and k with Qwen3's q_norm / k_norm)
  bytes attention_scores;     // s^2 terms: softmax output (and its cast copy)
  bytes attention_dropout;    // s^2 terms: dropout mask and dropped-out probabilities
  bytes attention_lse;        // FlashAttention: fp32 log-sum-exp
  bytes attention_mask;       // SDPA with a mask: the additive mask it converts transformers' boolean mask into
  bytes attention_output;     // input of the output projection
  bytes attention_kernel_output;  // SDPA's / FlashAttention's own output, where the output projection keeps another tensor
  bytes attention_residual_mask;
  bytes mlp_norm;
  bytes mlp_input;
  bytes mlp_hidden;           // GELU: fc1 output and GELU output; SwiGLU: gate, SiLU(gate), up, product
  bytes mlp_residual_mask;
  bytes branch_norms;         // Gemma-2's sandwich norms over the attention and MLP outputs
  bytes layer_input;          // full recompute keeps only this
  bytes autocast_weights;     // autocast: the 16-bit copies of the layer's linear weights, saved by each linear
  bytes lora;                 // LoRA: each adapter's rank-r intermediate, and its dropout mask and dropped input

  template <class F>
  ZEROMEM_ALWAYS_INLINE constexpr void for_each(F&& f) const {
    f("attention_norm", attention_norm);
    f("attention_input", attention_input);
    f("query", query);
    f("key", key);
    f("value", value);
    f("attention_scores", attention_scores);
    f("attention_dropout", attention_dropout);
    f("attention_lse", attention_lse);
    f("attention_mask", attention_mask);
    f("attention_output", attention_output);
    f("attention_kernel_output", attention_kernel_output);
    f("attention_residual_mask", attention_residual_mask);
    f("mlp_norm", mlp_norm);
    f("mlp_input", mlp_input);
    f("mlp_hidden", mlp_hidden);
    f("mlp_residual_mask", mlp_residual_mask);
    f("branch_norms", branch_norms);
    f("layer_input", layer_input);
    f("autocast_weights", autocast_weights);
    f("lora", lora);
  }
  ZEROMEM_ALWAYS_INLINE constexpr bytes total() const {
    bytes sum{};
    for_each([&](const char*, bytes b) ZEROMEM_ALWAYS_INLINE { sum += b; });
    return sum;
  }
};

namespace detail {
constexpr std::int64_t dtype_bytes_ceil(dtype d) { return (bit_width(d) + 7) / 8; }

/// What autograd keeps for transformers' RMSNorm over `rows` rows of `width` values (values = rows x width), its
/// weight trained unless frozen. LlamaRMSNorm (modeling_llama.py): x.to(fp32) kept by pow (PyTorch 1.x's mean also
/// keeps x^2 in fp32), rsqrt of the variance per row in fp32, and the normalised tensor cast back to `cast_bytes`
/// per value, kept by the weight multiply. GemmaRMSNorm (modeling_gemma.py, m.norm_scale_fp32) multiplies by
/// (1 + weight.float()) before its cast: the normalised tensor is kept in fp32, and (1 + weight), fp32, always.
/// Olmo2RMSNorm (modeling_olmo2.py, m.norm_weight_fp32) multiplies by the weight itself in fp32: the normalised tensor
/// in fp32, nothing more.
constexpr std::int64_t hf_rmsnorm_saved(const transformer_config& m, int torch_major, std::int64_t rows, std::int64_t width,
                                        std::int64_t cast_bytes, bool frozen) {
  const std::int64_t values = checked_product(rows, width);
  const bool fp32_scale = m.norm_scale_fp32 || m.norm_weight_fp32;
  const std::int64_t normalised = frozen ? 0 : checked_product(fp32_scale ? 4 : cast_bytes, values);
  return checked_sum(checked_product(torch_major == 1 ? 8 : 4, values), normalised, checked_product(4, rows),
                     m.norm_scale_fp32 ? checked_product(4, width) : 0);
}
[[noreturn]] inline void fail_learned_positions(std::int64_t seq_len, std::int64_t positions) {
  fail("the sequence is longer than the model's " + std::to_string(positions) + " learned positions, got " + std::to_string(seq_len) +
       " tokens; use at most " + std::to_string(positions) + " (config.json n_positions / max_position_embeddings)");
}
}  // namespace detail

constexpr void validate(const activation_config& c, const transformer_config& m) {
  validate(m);
  detail::require_positive(c.seq_len, "the sequence length");
  detail::require_positive(c.micro_batch, "the micro-batch size");
  validate_tensor_parallel(m, c.tp);
  detail::require_positive(c.cp, "the context-parallel degree");
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    detail::fail_value("the dropout probability must be in [0, 1)", c.dropout, "pass 0 for no dropout");
  if (!detail::divides(c.cp, c.seq_len))
    detail::fail_value("the sequence length must divide evenly over context-parallel ranks", c.cp,
                       "pick a cp that divides the sequence length");
  if (c.cp > 1 && c.attention == attention_kind::eager)
    detail::fail("context parallelism needs flash attention (ring attention); use --attention flash");
  // transformers 5's grouped_mm experts (integrations/moe.py) are not autocast-enabled: what they keep under autocast
  // is not read here.
  if (c.autocast && c.impl == implementation::hf && m.moe.experts > 0 && m.moe.stacked)
    detail::fail("a mixture of experts under autocast with transformers 5's grouped_mm experts is not modelled; use --precision bf16, "
                 "or --expert-linears for transformers 4's nn.Linear experts");
  if (c.torch_major != 1 && c.torch_major != 2)
    detail::fail_value("the PyTorch major version must be 1 or 2", c.torch_major, "pass 2 for current PyTorch");
  if (c.activation_dtype == dtype::int4) detail::fail("activations cannot be int4; use bf16, fp16, fp32 or fp8");
  // flash-attn's flash_attn_func: "FlashAttention only support fp16 and bf16 data type" (flash_api.cpp mha_fwd).
  if (c.attention == attention_kind::flash_attention_2 && c.activation_dtype == dtype::fp32)
    detail::fail("flash_attention_2 (the flash-attn package) runs fp16 and bf16 only; with fp32 activations use --attention sdpa or eager");
  // A learned position table has one row per position (GPT2Model's wpe(position_ids), OPT's offset rows first): a
  // longer sequence indexes past it and the step fails.
  if (m.positions == position_kind::learned && c.seq_len > m.max_positions - m.position_offset)
    detail::fail_learned_positions(c.seq_len, m.max_positions - m.position_offset);
  if (c.image_tokens < 0) detail::fail_value("the image tokens per sequence cannot be negative", c.image_tokens, "pass 0 for text only");
  if (c.image_tokens > 0) {
    if (m.vision.blocks == 0) detail::fail("image tokens need a model with a vision tower (Qwen2-VL, Qwen2.5-VL); pass 0 image tokens");
    if (c.image_tokens > c.seq_len)
      detail::fail_value("the image tokens are part of the sequence and cannot outnumber its tokens", c.image_tokens,
                         "pass at most the sequence length");
    if (c.tp > 1) detail::fail("a vision tower under tensor parallelism is not modelled (transformers runs it whole); use tp 1 with image tokens");
    if (c.impl != implementation::hf || c.device != device_kind::cuda || c.autocast || (c.activation_dtype != dtype::bf16 && c.activation_dtype != dtype::fp16))
      detail::fail("the vision tower's activations are modelled for transformers' code on CUDA in bf16 or fp16 without autocast; "
                   "drop the image tokens for another setting");
    if (c.attention == attention_kind::eager)
      detail::fail("the vision tower under eager attention keeps each window's scores, which depend on the image sizes; use --attention sdpa "
                   "or flash_attention_2 with image tokens");
    if (c.recomputation == recompute::selective)
      detail::fail("selective recompute is Megatron's and transformers' vision blocks have none; use --recompute none or full with image tokens");
  }
  if (m.qk_norm_whole && c.tp > 1)
    detail::fail_value("q_norm / k_norm over the whole projection (OLMo-2) under tensor parallelism is not modelled",
                       c.tp, "use tp 1 (FSDP or ZeRO shard it instead)");
}

/// How transformers' attention hands K and V to the kernel, per rank (its saved tensors follow from it).
struct attention_layout {
  /// transformers builds a sliding-window mask once a sequence reaches the window (masking_utils.py
  /// _ignore_causal_mask_sdpa skips it only while kv_length < sliding_window). Given a mask, sdpa_attention_forward
  /// repeats K and V to every head (use_gqa_in_sdpa needs attention_mask None), and PyTorch's SDPA converts the
  /// boolean mask into an additive b x 1 x s x s one in the query dtype (attention.cpp convert_boolean_attn_mask, last
  /// dimension padded to 8 by preprocess_mask) that the memory-efficient kernel keeps for backward (derivatives.yaml
  /// _scaled_dot_product_efficient_attention: attn_bias), with its log-sum-exp rows padded to 32.
  bool sdpa_mask = false;
  /// SDPA runs the memory-efficient kernel, whose fp32 log-sum-exp rows are padded to 32 (attention.cu
  /// _efficient_attention_forward: ceil_div(max_seqlen_q, kAlignLSE) * kAlignLSE): given a mask, or in fp32, since
  /// FlashAttention takes fp16 / bf16 only (sdp_utils.cpp use_flash_attention: sm80_flash_dtypes).
  bool efficient_kernel = false;
  bool repeat = false;    // repeat_kv runs: eager attention, or SDPA given a mask
  /// What attention keeps of K and V is a view of its input: repeat_kv's expand + reshape is a stride-0 view with one
  /// kv head and returns its input with kv = heads; SDPA and selective recompute keep that view, eager's matmul its
  /// batch-folded copy, itself a view when b = 1 or one head (nothing to fold).
  bool kv_view = false;
  std::int64_t heads = 0, kv_heads = 0;  // query and key/value heads on this rank (kv replicated when fewer than tp)
  std::int64_t key_heads = 0;            // heads of the K (and V) attention keeps
  /// transformers builds a DynamicCache in a training forward when config.use_cache is true and gradient
  /// checkpointing is off (it forces use_cache False under checkpointing); each layer's update copies K and V
  /// (cache_utils.py DynamicLayer.update: torch.cat), and the cache holds them until the model's output is freed.
  bool cached = false;
};

namespace detail {
constexpr bool keeps_forward_cache(const transformer_config& m, const activation_config& c) {
  return m.use_cache && c.forward_cache && c.impl == implementation::hf && c.recomputation != recompute::full;
}
constexpr attention_layout attention_layout_of(const transformer_config& m, const activation_config& c, std::int64_t layer = 0) {
  attention_layout l{};
  const std::int64_t heads = quotient(m.heads, c.tp), kv_heads = m.kv_heads >= c.tp ? quotient(m.kv_heads, c.tp) : 1;
  l.heads = heads;
  l.kv_heads = kv_heads;
  const bool sdpa = c.impl == implementation::hf && c.attention == attention_kind::flash;
  l.sdpa_mask = sdpa && !full_attention_layer(m, layer) && c.seq_len >= m.sliding_window;
  l.efficient_kernel = sdpa && (l.sdpa_mask || c.activation_dtype == dtype::fp32);
  l.repeat = c.impl == implementation::hf && (c.attention == attention_kind::eager || l.sdpa_mask);
  // One token per sequence leaves an MHA V (b, heads, 1, d) foldable as a view too, where each head's values follow the
  // previous head's: a projection of its own, or GPT-NeoX's per-head [q | k | v] (not GPT-2's [all q | all k | all v]).
  const bool one_token = detail::quotient(c.seq_len, c.cp) == 1 && kv_heads == heads && (!m.fused_qkv || m.qkv_per_head);
  l.kv_view = (kv_heads == 1 || kv_heads == heads) && (c.micro_batch == 1 || heads == 1 || c.recomputation == recompute::selective ||
                                                       c.attention != attention_kind::eager || one_token);
  l.key_heads = l.repeat && !l.kv_view ? heads : kv_heads;
  l.cached = keeps_forward_cache(m, c);
  return l;
}

/// transformers' fused qkv projection (GPT-2's c_attn, GPT-NeoX's query_key_value, Phi-3's qkv_proj): which of Q, K and V
/// attention keeps as views of its one output. The others are new tensors: RoPE's rotated Q and K, a KV cache's copies,
/// eager matmul's batch-folded copies (a view where b = 1 or one head: nothing to fold).
struct fused_qkv_views {
  bool q = false, k = false, v = false;
};
constexpr fused_qkv_views fused_views_of(const transformer_config& m, const activation_config& c, const attention_layout& at,
                                         std::int64_t layer) {
  const bool rope = rope_layer(m, layer);  // SmolLM3's NoPE layers leave q and k views too
  return {!rope && (c.attention != attention_kind::eager || c.micro_batch == 1 || at.heads == 1 || c.recomputation == recompute::selective),
          !rope && !at.cached && at.kv_view, !at.cached && (!at.repeat || at.kv_view)};
}
}  // namespace detail

/// The K and V copies a training forward's KV cache holds beyond what attention keeps, per layer: alive from the
/// layer's forward until the model's output (and its cache) is freed, after the loss (attention_layout::cached).
/// Only when attention keeps other copies: repeat_kv's (GQA) or a batch-folded one.
constexpr bytes forward_kv_cache_bytes(const transformer_config& m, const activation_config& c, std::int64_t layer = 0) {
  if (!detail::keeps_forward_cache(m, c)) return bytes{};
  const attention_layout l = detail::attention_layout_of(m, c, layer);
  if (!l.cached) return bytes{};
  // Under autocast, RoPE rotates K with tables in the fp32 hidden's dtype (LlamaRotaryEmbedding.forward: cos.to(x.dtype)),
  // so K leaves it fp32, and the cache, which concatenates onto empty tensors of K's dtype (cache_utils.py DynamicLayer
  // lazy_initialization, update: torch.cat), holds fp32 K and V; attention keeps its own 16-bit casts of them
  // (autocast_mode.cpp: scaled_dot_product_attention, matmul in the lower-precision list). OLMo casts q and k back.
  if (c.autocast && rope_layer(m, layer) && !m.rope_fp32)
    return bytes_of(detail::checked_product(2 * 4, detail::quotient(c.seq_len, c.cp), c.micro_batch, l.kv_heads, m.head_size()));
  if (!l.repeat || l.kv_view || l.kv_heads >= l.heads) return bytes{};
  return bytes_of(detail::checked_product(2 * detail::dtype_bytes_ceil(c.activation_dtype), detail::quotient(c.seq_len, c.cp),
                                          c.micro_batch, l.kv_heads, m.head_size()));
}

/// Activation bytes one decoder layer keeps for backward on one rank.
///
/// A frozen layer (LoRA freezes the base) keeps less: autograd saves what each input's gradient formula needs
/// only when that input requires grad (tools/autograd/gen_variable_type.py saves a variable under
/// should_compute_output when one derivative uses it), so a linear whose weight is frozen keeps no input and the
/// norms' weight multiply keeps nothing. An adapted linear's lora_A keeps its input (the base linear's, shared)
/// or, with LoRA dropout, the mask and the dropped copy; lora_B keeps the rank-r intermediate (PEFT
/// tuners/lora/layer.py Linear.forward: result + lora_B(lora_A(dropout(x))) * scaling). The residual stream is
/// taken to require grad in every layer, as PEFT's enable_input_require_grads makes it under checkpointing.
namespace detail {
/// Bytes per value of what an adapter's lora_A reads: PEFT casts the input to the adapter's dtype where they differ
/// (tuners_utils.py _cast_input_dtype); under autocast the input is the fp32 residual's and lora_A keeps its own
/// 16-bit cast, the activation dtype's width.
constexpr std::int64_t adapter_input_bytes(const activation_config& c, const adaptation& adapt) {
  return c.autocast ? dtype_bytes_ceil(c.activation_dtype) : dtype_bytes_ceil(adapt.lora.adapter_dtype);
}
/// Bytes per input value an adapter keeps of its own: with LoRA dropout the dropped copy lora_A keeps and dropout's
/// mask (a CPU's noise, in the copy's dtype); else the adapter's own cast where its dtype differs; else none, lora_A
/// keeping the base linear's input (counted with the layer's).
constexpr std::int64_t adapter_input_copy_bytes(const activation_config& c, const adaptation& adapt) {
  const std::int64_t width = adapter_input_bytes(c, adapt);
  if (adapt.lora.dropout > 0.0) return (c.device == device_kind::cpu ? width : 1) + width;
  return width != dtype_bytes_ceil(c.activation_dtype) ? width : 0;
}
/// Bytes Qwen3's q_norm or k_norm keeps (modeling_qwen3.py: an RMSNorm over each head's d values of the q_proj / k_proj
/// output, before RoPE) over sb tokens of `projection_heads` heads: hf_rmsnorm_saved per head row, on the linear's 16-bit
/// output (also under autocast). OLMo-2's (modeling_olmo2.py Olmo2Attention) normalise each token's whole projection: sb
/// rows of heads x d. Fused profiles keep the input and the fp32 rstd.
constexpr std::int64_t head_norm_saved(const transformer_config& m, const activation_config& c, std::int64_t sb,
                                       std::int64_t projection_heads, bool frozen) {
  if (!m.qk_norm) return 0;
  const std::int64_t a = dtype_bytes_ceil(c.activation_dtype), d = m.head_size();
  const std::int64_t rows = m.qk_norm_whole ? sb : checked_product(sb, projection_heads);
  const std::int64_t width = m.qk_norm_whole ? checked_product(projection_heads, d) : d;
  if (c.impl == implementation::hf) return hf_rmsnorm_saved(m, c.torch_major, rows, width, a, frozen);
  return checked_sum(checked_product(a, rows, width), checked_product(4, rows));
}
constexpr layer_activations layer_activation_bytes_unchecked(const transformer_config& m, const activation_config& c,
                                                             const adaptation& adapt = {}, std::int64_t layer = 0) {
  using detail::checked_product, detail::checked_sum;
  const std::int64_t a = detail::dtype_bytes_ceil(c.activation_dtype);
  const bool frozen = adapt.lora_enabled();
  const bool cpu = c.device == device_kind::cpu;
  const std::int64_t mask = cpu ? a : 1;                 // CPU: input * noise keeps noise in the input's dtype
  const std::int64_t stat = cpu ? a : 4;                 // CPU LayerNorm mean/rstd in the input's dtype
  const std::int64_t s = detail::quotient(c.seq_len, c.cp), b = c.micro_batch, h = m.hidden, d = m.head_size();
  const std::int64_t heads = detail::quotient(m.heads, c.tp);
  const std::int64_t kv_heads = m.kv_heads >= c.tp ? detail::quotient(m.kv_heads, c.tp) : 1;  // fewer kv heads than ranks: replicated
  const std::int64_t sb = checked_product(s, b), sbh = checked_product(s, b, h);
  const std::int64_t a_sbh = checked_product(a, sbh);
  const bool attention_dropout = c.dropout > 0.0 || m.attention_dropout > 0.0, residual_dropout = c.dropout > 0.0 || m.residual_dropout > 0.0;
  // Tensors the paper leaves whole on every tensor-parallel rank; sequence parallelism splits them (§4.2.2).
  const auto replicated = [&](std::int64_t n) { return c.sequence_parallel ? detail::ceil_div(n, c.tp) : n; };
  // LayerNorm's mean and rstd, RMSNorm's rstd (fp32 on CUDA; HF's RMSNorm computes rstd in fp32 everywhere; autocast
  // runs layer_norm in fp32); the paper counts none.
  // OLMo's OlmoLayerNorm normalises an fp32 copy of its input (modular_olmo.py): the copy and fp32 statistics are kept.
  const bool fp32_layernorm = c.impl == implementation::hf && m.norm_input_fp32;
  const auto norm_statistics = [&]() -> std::int64_t {
    if (c.impl == implementation::paper) return 0;
    return checked_product(m.norm == norm_kind::layernorm ? 2 : 1, sb, m.norm == norm_kind::rmsnorm || c.autocast || fp32_layernorm ? 4 : stat);
  };
  const auto norm_saved = [&]() -> std::int64_t {
    // transformers' RMSNorm (hf_rmsnorm_saved): 4sbh + a sbh + 4sb for Llama's. Under autocast x is already fp32
    // (the residual stream, kept) and the normalised tensor stays fp32: 4sbh + 4sbh + 4sb.
    if (c.impl == implementation::hf && m.norm == norm_kind::rmsnorm)
      return detail::hf_rmsnorm_saved(m, c.torch_major, sb, h, c.autocast ? 4 : a, frozen);
    // A norm keeps its input (2sbh in the paper's LayerNorm term) and, outside the paper, its statistics.
    return checked_sum(c.autocast || fp32_layernorm ? checked_product(4, sbh) : a_sbh, norm_statistics());
  };

  // Each result is built whole (a return of all terms) rather than cleared and filled: clearing costs more
  // than the arithmetic.
  const bytes none{};
  // Under autocast the residual stream is fp32 (fp32 embedding and weights; autocast leaves add and the norms'
  // ops in fp32), so each norm keeps an fp32 input and every linear keeps its own 16-bit cast of it.
  const std::int64_t residual_sbh = c.autocast ? checked_product(4, sbh) : a_sbh;
  if (c.recomputation == recompute::full)
    // Full recompute keeps the layer input only: 2sbh (Korthikanti Table 2), split by sequence parallelism.
    return layer_activations{none, none, none, none, none, none, none, none, none, none, none, none, none, none, none, none, none,
                             bytes_of(replicated(residual_sbh)), none, none};

  const bytes norm = bytes_of(replicated(norm_saved()));
  // OLMo-2's post-norm layer has no norm before attention or the MLP: the linears read the residual stream (kept once,
  // as a norm's output would be) and its two norms are branch_norms.
  const bytes pre_norm = m.post_norms ? none : norm;
  // LoRA on a frozen layer: which linears keep their input (lora_A without dropout), and what the adapters add.
  // Inputs of column-parallel linears (q, k, v, gate, up, fc1) are whole on each rank; of row-parallel ones
  // (o, down, fc2) split over tp.
  std::int64_t attention_keepers = 0, output_keepers = 0, mlp_keepers = 0, hidden_keepers = 0, lora_bytes = 0;
  if (frozen) {
    // MLPs whose nn.Linear modules a token passes: transformers 5's routed experts are no nn.Linear (3D parameters).
    const std::int64_t routed = m.moe.experts > 0 ? (m.moe.stacked ? m.moe.shared_experts : checked_sum(m.moe.top_k, m.moe.shared_experts)) : 1;
    for_each_linear(m, [&](const linear_shape& l) {
      const adapted_linear ad = adapt_of(m, l, adapt.lora);
      if (l.vision || ad.params == 0) return;
      const bool mlp_module = is_mlp_module(l.role);
      const bool row_parallel = l.role == lora_module::o_proj || l.role == lora_module::down_proj || l.role == lora_module::fc2;
      const std::int64_t tokens = checked_product(sb, mlp_module ? routed : 1);
      // PEFT casts an adapter's input to the adapter's dtype before dropout and lora_A when they differ (lora/layer.py
      // Linear.forward): fp32 adapters on a 16-bit base (autocast_adapter_dtype) keep a cast of their own per adapted
      // linear, and lora_A's output is fp32. Under autocast lora_A keeps its own 16-bit cast (keepers below).
      const std::int64_t width = adapter_input_bytes(c, adapt);
      lora_bytes = checked_sum(lora_bytes, checked_product(width, tokens, ad.intermediates));  // kept by lora_B
      const std::int64_t in = row_parallel ? detail::ceil_div(l.in, c.tp) : l.in;
      const std::int64_t n = checked_product(tokens, in);
      const auto add_input = [&](std::int64_t per_value) {
        lora_bytes = checked_sum(lora_bytes, row_parallel ? checked_product(per_value, n) : replicated(checked_product(per_value, n)));
      };
      // lora_A keeps the dropped copy (dropout its mask) or the adapter's own cast; the base linear, frozen, keeps nothing
      if (const std::int64_t copy = adapter_input_copy_bytes(c, adapt); copy > 0) {
        add_input(copy);
        return;
      }
      if (l.role == lora_module::o_proj) ++output_keepers;
      else if (l.role == lora_module::down_proj || l.role == lora_module::fc2) ++hidden_keepers;
      else if (mlp_module) ++mlp_keepers;
      else ++attention_keepers;
    });
  }
  // "QKV matrix multiplies: 2sbh" (§4.1); "first linear input: 2sbh". Under autocast each linear casts the fp32
  // norm output itself and keeps its own copy: q, k and v (one for a fused qkv), gate and up (one for fc1).
  // Frozen, only the adapted ones keep it (one shared copy, or one cast each under autocast).
  const auto keepers = [&](std::int64_t unfrozen_casts, std::int64_t adapted) -> std::int64_t {
    if (!frozen) return c.autocast ? unfrozen_casts : 1;
    return adapted == 0 ? 0 : c.autocast ? adapted : 1;
  };
  const std::int64_t attention_casts = keepers(m.fused_qkv ? 1 : 3, attention_keepers);
  const std::int64_t mlp_casts = keepers(m.mlp == mlp_kind::swiglu && !m.fused_gate_up ? 2 : 1, mlp_keepers);
  // One norm feeding both parallel branches (Phi): q, k, v and fc1 read one tensor, kept once whoever keeps it; under
  // autocast each linear still keeps its own cast.
  const bool one_input = m.shared_layer_norm && !c.autocast;
  const std::int64_t shared_casts = attention_casts + mlp_casts > 0 ? 1 : 0;
  const bytes input = bytes_of(replicated(checked_product(one_input ? shared_casts : attention_casts, a_sbh)));
  const bytes mlp_input = one_input ? none : bytes_of(replicated(checked_product(mlp_casts, a_sbh)));
  const attention_layout at = detail::attention_layout_of(m, c, layer);
  const bytes query = bytes_of(checked_product(a, sb, heads, d));       // "QK^T: 4sbh" is Q and K
  const bytes key = bytes_of(checked_product(a, sb, at.key_heads, d));  // V likewise: "attention over values: ... 2sbh"
  // transformers' fused qkv projection's output is one tensor and Q, K, V are views of it, unless RoPE rotates Q and
  // K into new tensors or a KV cache copies K and V. What attention keeps as a view keeps that whole output, (q + 2 kv)
  // heads of d per token: the value term holds it, less what the query and key terms already count. (The other
  // profiles keep Q, K and V as the paper's separate tensors.)
  bytes value = key;
  if (m.fused_qkv && c.impl == implementation::hf) {
    const detail::fused_qkv_views views = detail::fused_views_of(m, c, at, layer);
    if (views.q || views.k || views.v) {
      const bytes whole = bytes_of(checked_product(a, sb, checked_sum(heads, checked_product(2, kv_heads)), d));
      value = whole + (views.q ? bytes{} : query) + (views.k ? bytes{} : key) + (views.v ? bytes{} : key) - query - key;
    }
  }
  bytes scores{}, scores_dropout{};
  if (c.attention == attention_kind::eager && c.recomputation == recompute::none) {
    const std::int64_t probs = checked_product(heads, s, s, b);  // a s^2 b / t elements
    // "softmax: 2as^2b"; HF Llama/Qwen2: softmax(dtype=float32) keeps its fp32 output, .to(bf16) the copy P @ V
    // keeps (GPT-2's runs in the model dtype); autocast runs softmax in fp32 and P @ V keeps its 16-bit cast.
    const bool fp32_softmax = c.autocast || (c.impl == implementation::hf && m.eager_softmax_fp32);
    // Gemma-2's attn_logit_softcapping: tanh(scores / cap) * cap, tanh keeping its output (a s^2 per head).
    const std::int64_t softcap = m.attention_softcap > 0.0 && c.impl == implementation::hf ? a : 0;
    // With dropout after an fp32 softmax, P @ V keeps the dropped-out copy instead of the 16-bit cast.
    scores = bytes_of(checked_product((fp32_softmax ? (attention_dropout ? 4 : 4 + a) : a) + softcap, probs));
    if (attention_dropout)  // "softmax dropout: as^2b" mask + "2as^2b" dropped-out probabilities kept by P @ V
      scores_dropout = bytes_of(checked_product(mask + a, probs));
  }
  const bytes q_norm = bytes_of(detail::head_norm_saved(m, c, sb, heads, frozen));
  const bytes k_norm = bytes_of(detail::head_norm_saved(m, c, sb, kv_heads, frozen));
  // OLMo's clip_qkv: query_states.clamp_(...) and the same for k and v on the projections' outputs; an in-place op
  // whose derivative reads its input keeps a clone of it (derivatives.yaml clamp: clamp_backward(grad, self, ...)).
  const bool clip = m.clip_qkv && c.impl == implementation::hf;
  const bytes q_clip = clip ? bytes_of(checked_product(a, sb, heads, d)) : none;
  const bytes kv_clip = clip ? bytes_of(checked_product(a, sb, kv_heads, d)) : none;
  // FlashAttention keeps the row log-sum-exp in fp32 (Dao et al. 2022 §3.1); the memory-efficient kernel pads its rows.
  const bytes lse = c.attention != attention_kind::eager
                        ? bytes_of(checked_product(4, heads, at.efficient_kernel ? checked_product(detail::ceil_div(s, 32), 32) : s, b))
                        : none;
  const bytes sdpa_bias = at.sdpa_mask && c.recomputation == recompute::none ? bytes_of(checked_product(a, b, s, detail::ceil_div(s, 8), 8)) : none;
  const bytes output = bytes_of(checked_product(a, sb, heads, d, keepers(1, output_keepers)));  // "output projection: 2sbh"
  // SDPA and FlashAttention keep their own output for backward (derivatives.yaml _scaled_dot_product_flash_attention,
  // _efficient_attention, _cudnn_attention: `output`; flash-attn's FlashAttnFunc: out). The output projection reads
  // transformers' attn_output.transpose(1, 2).contiguous() (sdpa_attention.py), the same tensor, unless
  //  - contiguous() copies: the flash and cuDNN kernels lay their output out like the query (flash_api.cpp mha_fwd:
  //    out = at::empty_like(q); cuDNN: alloc_with_matching_layout(q, ...)) and torch.cat's query is head-major
  //    (rope_concat). 16-bit only: fp32 runs the memory-efficient kernel, whose output is token-major (attention.cu
  //    _efficient_attention_forward). Measured on H200 with and without a mask (Phi-3-mini at its window; Pythia, Phi-2).
  //  - the output projection keeps nothing of it: frozen without an adapter, or its adapter keeps its own cast.
  const bool kernel_keeps_output = c.impl == implementation::hf && c.attention != attention_kind::eager;
  const bool head_major_output = kernel_keeps_output && c.device == device_kind::cuda && m.rope_concat && rope_layer(m, layer) &&
                                 detail::dtype_bytes_ceil(c.activation_dtype) < 4;
  const bytes kernel_output = kernel_keeps_output && (head_major_output || output.count() == 0) ? bytes_of(checked_product(a, sb, heads, d))
                                                                                                : none;
  // "attention dropout mask: sbh" and "dropout mask: sbh" after the MLP.
  const bytes residual_mask = residual_dropout ? bytes_of(replicated(checked_product(mask, sbh))) : none;
  const std::int64_t f =
      detail::quotient(m.moe.experts > 0 ? checked_product(checked_sum(m.moe.top_k, m.moe.shared_experts), m.moe.expert_ffn) : m.ffn,
                       c.tp);
  // GELU: fc1 output kept by GELU, GELU output kept by fc2 ("8sbh + 8sbh" with f = 4h); written as tensor ops
  // (HF gelu_new: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))) tanh's output, 0.5x and 1 + tanh are kept
  // too. SwiGLU: gate kept by SiLU, SiLU(gate) and up kept by the product, the product kept by down; fused:
  // [gate | up] and the product.
  // gelu_fast (FastGELUActivation): 0.5x * (1 + tanh(x * k * (1 + 0.044715x * x))) keeps x, 0.044715x, 1 + 0.044715x^2,
  // x * k, tanh's output, 1 + tanh and 0.5x: seven, and the output.
  const std::int64_t gelu_tensors = c.impl != implementation::hf ? 2 : m.gelu_fast_ops ? 8 : m.gelu_tensor_ops ? 5 : 2;
  // The last of them (SwiGLU's product, the GELU output) is the down/fc2 input: frozen, kept only when adapted.
  // ReLU keeps its output (threshold_backward), the very tensor fc2 reads: one tensor whoever else keeps it.
  const std::int64_t hidden_tensors = m.mlp == mlp_kind::relu ? 1
                                      : (m.mlp == mlp_kind::gelu ? gelu_tensors : (c.impl == implementation::fused ? 3 : 4)) - 1 +
                                            keepers(1, hidden_keepers);
  // A mixture of experts' dispatch: each routed choice (top_k a token) gathers its token, whose copy the experts'
  // first linear keeps, and the expert's output is multiplied by the routing weight, which keeps it (mul saves each
  // operand for the other's gradient; the weights need one wherever the layer's input does, through the router,
  // frozen or not): a·sbh each per routed choice. Frozen experts (LoRA) keep no gather: their weights need no gradient.
  //  - transformers 5 (stacked experts): integrations/moe.py grouped_mm_experts_forward, the default where
  //    torch._grouped_mm dispatches (modeling_utils.py get_correct_experts_implementation), sums the k outputs of a
  //    token (view + sum) and keeps nothing more. Measured on an H200 (Mixtral's shape on two layers, trained).
  //  - transformers 4 (modeling_mixtral.py MixtralSparseMoeBlock.forward, one loop step per expert): index_add_ keeps
  //    its source, the weighted output (derivatives.yaml index_add: expand_as(source)), one sbh more per routed
  //    choice in the residual's dtype; under autocast each of the two linears reading the gather keeps its own 16-bit
  //    cast instead of it, and the weights stay fp32 (cast to the fp32 hidden dtype), so the product is fp32.
  std::int64_t moe_dispatch = 0;
  if (m.moe.experts > 0 && c.impl == implementation::hf) {
    const bool stacked = m.moe.stacked;
    const std::int64_t gathers = frozen ? (!stacked && mlp_keepers + hidden_keepers > 0 ? 1 : 0) : c.autocast ? 2 : 1;
    // transformers 4's index_add_ source is the weighted output in the residual's dtype (fp32 under autocast: the
    // 16-bit output times the fp32 weights).
    const std::int64_t source = stacked ? 0 : checked_product(m.moe.top_k, residual_sbh);
    // The router's small tensors, per token (MixtralTopKRouter.forward): softmax's fp32 output over the experts (4 E),
    // topk's int64 indices (8 k), where the weights are renormalised in place the divisor (4) and the input (4 k;
    // autograd keeps an in-place op's input its backward reads). Per routed choice, grouped_mm: the int64 token index
    // (the gather keeps it), the sort's permutation and its inverse (8 + 8, kept by the indexing ops) and the weight
    // the multiply keeps (fp32, 4; Qwen-MoE's router casts it to the compute dtype, a); transformers 4's loop:
    // torch.where's int64 position and token (16) and the weight it cast to the hidden dtype (MixtralSparseMoeBlock:
    // routing_weights.to(hidden_states.dtype)).
    const std::int64_t k = m.moe.top_k, renormalized = m.moe.renormalized ? 1 : 0;
    const std::int64_t per_choice = stacked ? 8 + 8 + 8 + (m.moe.weights_in_compute_dtype ? a : 4) : 16 + (c.autocast ? 4 : a);
    const std::int64_t router =
        checked_sum(checked_product(4, m.moe.experts), checked_product(8 + 4 * renormalized + per_choice, k), 4 * renormalized);
    // Qwen2-MoE's sigmoid(shared_expert_gate(x)) * shared_expert(x): the product keeps both operands, the shared
    // expert's output (h) and the gate's sigmoid output, which sigmoid keeps too (1) (derivatives.yaml mul.Tensor,
    // sigmoid: result).
    const std::int64_t shared_gate = m.moe.shared_expert_gate ? checked_product(a, checked_sum(h, 1)) : 0;
    // grouped_mm also keeps its int32 offsets over the experts (4 E a layer; derivatives.yaml _grouped_mm reads offs).
    moe_dispatch = replicated(checked_sum(checked_product(checked_product(gathers + 1, k), a_sbh), source, checked_product(checked_sum(router, shared_gate), sb),
                                          stacked ? checked_product(4, m.moe.experts) : 0));
  }
  // gelu_new's torch.pow(x, 3.0) runs in fp32 under autocast (autocast_mode.cpp: pow on the fp32 list), so the sum it
  // feeds, tanh's output and 1 + tanh are fp32: three of the five kept tensors 4 bytes, pow's input its fp32 cast (the
  // 16-bit x is then kept by nobody). Measured on an H200 (GPT-2 under AMP: forward −5.6% before).
  const std::int64_t gelu_autocast = c.autocast && c.impl == implementation::hf && m.mlp == mlp_kind::gelu && m.gelu_tensor_ops &&
                                             !m.gelu_fast_ops
                                         ? 3 * (4 - a)
                                         : 0;
  const bytes mlp_hidden = bytes_of(checked_sum(checked_product(hidden_tensors * a + gelu_autocast, sb, f), moe_dispatch));
  // autocast's weight cache: each linear's 16-bit weight, kept by autograd until the layer's backward (the norms'
  // weights, Qwen3's q_norm and k_norm among them, stay fp32).
  bytes weights = none;
  if (c.autocast) {
    const parameter_counts counts = detail::count_parameters_unchecked(m);
    const std::int64_t linear_weights =
        detail::checked_sub(counts.layer.count(), checked_sum(counts.norms.count(), detail::qk_norm_parameters(m)));
    weights = bytes_of(checked_product(a, detail::ceil_div(linear_weights, c.tp)));
  }
  // Gemma-2's post_attention_layernorm and post_feedforward_layernorm: two more norms of a layer's input size, over the
  // o_proj and down_proj outputs (16-bit, also under autocast): the fp32 copy is a new tensor either way. OLMo-2's two
  // norms are these, without the pre-norms.
  const bytes branch_norms =
      m.sandwich_norms || m.post_norms ? bytes_of(replicated(checked_product(2, c.impl == implementation::hf && m.norm == norm_kind::rmsnorm
                                                                   ? detail::hf_rmsnorm_saved(m, c.torch_major, sb, h, a, frozen)
                                                                   : norm_saved())))
                       : none;
  // Parallel branches (GPT-NeoX): the second LayerNorm reads the layer input the first one keeps, so it adds only its
  // statistics (autograd saves a tensor once); with one shared norm (Phi) there is no second norm.
  const bytes mlp_norm = !m.parallel_residual ? pre_norm : m.shared_layer_norm ? none : bytes_of(replicated(norm_statistics()));
  return layer_activations{pre_norm,  input,  query + q_norm + q_clip, key + k_norm + kv_clip, value + kv_clip, scores, scores_dropout, lse,
                           sdpa_bias, output, kernel_output, residual_mask,  mlp_norm,     mlp_input, mlp_hidden, residual_mask, branch_norms,
                           none,      weights, bytes_of(lora_bytes)};
}
}  // namespace detail
/// Decoder layer `layer`'s bytes (layers differ only where sliding-window and full-attention layers alternate:
/// full_attention_layer).
constexpr layer_activations layer_activation_bytes(const transformer_config& m, const activation_config& c, const adaptation& adapt = {},
                                                   std::int64_t layer = 0) {
  validate(c, m);
  validate(adapt, m);
  if (layer < 0 || layer >= m.layers)
    detail::fail_value("the layer index must be in [0, layers)", layer, "pass 0 for the first layer");
  return detail::layer_activation_bytes_unchecked(m, c, adapt, layer);
}

/// What a Qwen2-VL / Qwen2.5-VL vision tower keeps for backward over the patches of one micro-batch on one rank
/// (transformers modeling_qwen2_5_vl.py / modeling_qwen2_vl.py, the vision classes), in bytes.
struct vision_activations {
  std::int64_t patches = 0;  // image tokens x spatial_merge^2
  bytes per_block{};         // one block (its input only under full recompute)
  bytes blocks{};            // every block
  bytes merger{};            // the patch merger's norm and MLP
  /// The micro-batch's pixel values (fp32, as the processor makes them), the patch embedding's 16-bit cast of them,
  /// the rotary cos / sin tables every block reads (fp32) and Qwen2.5-VL's window indices.
  bytes inputs{};
  bytes recomputed{};        // full recompute: one block computed whole, beyond its checkpoint
  constexpr bytes total() const { return blocks + merger + inputs; }
};

namespace detail {
/// The pixel values of `patches` patches as the Qwen2-VL processors make them: fp32, in_channels x temporal_patch x
/// patch^2 values a patch (image_processing_qwen2_vl.py flatten_patches), alive while a pass runs.
constexpr bytes pixel_value_bytes(const vision_config& v, std::int64_t patches) {
  return bytes_of(checked_product(4, patches, v.in_channels, v.temporal_patch, v.patch, v.patch));
}

/// A trained tower saves as below; a frozen one (--freeze vision, or LoRA's frozen base with no adapter in the tower)
/// has nothing requiring grad, so autograd keeps nothing and only the pixel values are alive. Per patch, with a bytes
/// per activation, C the tower's width, F its MLP width, H heads of d = C / H, P = in_channels x temporal x patch^2:
///  block: two norms (Qwen2RMSNorm, as the decoder's: fp32 input, rstd, the 16-bit normalised tensor; Qwen2-VL's
///   nn.LayerNorm: its input and fp32 mean and rstd), the qkv input aC and output 3aC (V is a view of it that
///   attention keeps), q and k rotated into new tensors 2aC (apply_rotary_pos_emb_vision: fp32 math, cast back; the
///   multiplies keep only the tables), attention's output aC (proj's input) and fp32 log-sum-exp 4H (flash-attn's
///   varlen kernel over cu_seqlens); SDPA runs each window or image separately and concatenates the outputs, so it
///   keeps them and the concatenation: aC more. The MLP's input aC, then SiLU's gated MLP 4aF (gate, SiLU(gate), up,
///   product) or Qwen2-VL's QuickGELU, x * sigmoid(1.702 x) as tensor ops (activations.py QuickGELUActivation): fc1's
///   output, the sigmoid and the product, 3aF.
///  full recompute (GradientCheckpointingLayer, which transformers' gradient_checkpointing_enable sets on the vision
///   blocks too): the block's input aC, and one block whole during backward.
///  merger: ln_q over C, its output aC (fc1's input), fc1's output kept by GELU and GELU's by fc2, aC each.
///  inputs: pixel values 4P, their cast .to(weight dtype) kept by the Conv3d aP, cos and sin 2 x 4d, and
///   Qwen2.5-VL's window_index and the merger's reverse index (int64, one per merged token) 2 x 8 / merge^2.
constexpr vision_activations vision_activation_bytes_unchecked(const transformer_config& m, const activation_config& c,
                                                               const adaptation& adapt = {}) {
  vision_activations out{};
  if (c.image_tokens == 0) return out;
  const vision_config& v = m.vision;
  const std::int64_t merge = checked_product(v.spatial_merge, v.spatial_merge);
  const std::int64_t n = checked_product(c.image_tokens, c.micro_batch, merge);
  out.patches = n;
  const std::int64_t a = dtype_bytes_ceil(c.activation_dtype), C = v.hidden, F = v.mlp_hidden, H = v.heads;
  const std::int64_t d = quotient(C, H), pixels = checked_product(v.in_channels, v.temporal_patch, v.patch, v.patch);
  const bool frozen = adapt.freeze_vision || adapt.lora_enabled();
  if (adapt.lora_enabled())
    for_each_linear(m, [&](const linear_shape& l) {
      if (l.vision && adapt_of(m, l, adapt.lora).params > 0)
        fail("LoRA adapters in the vision tower with image tokens are not modelled; exclude the vision modules from the targets");
    });
  const bytes pixel_values = pixel_value_bytes(v, n);
  if (frozen) {
    out.inputs = pixel_values;
    return out;
  }
  const std::int64_t norm = v.norm == norm_kind::rmsnorm ? hf_rmsnorm_saved(transformer_config{}, c.torch_major, n, C, a, false)
                                                         : checked_product(checked_sum(checked_product(a, C), 8), n);
  // C-wide 16-bit tensors of a block: qkv's input and output (1 + 3), rotated q and k (2), attention's output, the
  // MLP's input, and under SDPA the per-window outputs beside their concatenation.
  const std::int64_t c_wide = 8 + (c.attention == attention_kind::flash ? 1 : 0);
  const std::int64_t whole_block = checked_sum(
      checked_product(2, norm), checked_product(c_wide, a, n, C),
      checked_product(4, H, n), checked_product(v.gated_mlp ? 4 : 3, a, n, F));
  const std::int64_t checkpoint = checked_product(a, n, C);
  const bool full = c.recomputation == recompute::full;
  out.per_block = bytes_of(full ? checkpoint : whole_block);
  out.blocks = out.per_block * v.blocks;
  // The block recomputed beside its checkpoint: an RMSNorm's x.to(fp32) copies a 16-bit input, a LayerNorm keeps the
  // input itself (counted once).
  const bool norm_copies_input = v.norm == norm_kind::rmsnorm && !c.autocast && a < 4;
  out.recomputed = full ? bytes_of(whole_block - (norm_copies_input ? 0 : checkpoint)) : bytes{};
  out.merger = bytes_of(checked_sum(norm, checked_product(3, a, n, C)));
  out.inputs = pixel_values + bytes_of(checked_sum(checked_product(a, n, pixels), checked_product(2, 4, n, d),
                                                   v.windowed ? checked_product(2, 8, quotient(n, merge)) : 0));
  return out;
}
}  // namespace detail

constexpr vision_activations vision_activation_bytes(const transformer_config& m, const activation_config& c, const adaptation& adapt = {}) {
  validate(c, m);
  validate(adapt, m);
  return detail::vision_activation_bytes_unchecked(m, c, adapt);
}

/// The activations a pipeline stage holds at its peak.
struct stage_activations {
  layer_activations per_layer{};
  std::int64_t layers_on_stage = 0;
  std::int64_t microbatches_in_flight = 0;
  bytes layers{};              // per_layer x layers x micro-batches in flight (x the interleaving factor)
  bytes input_ids{};           // int64 token ids kept by the embedding lookup
  bytes position_ids{};        // int64 position ids a learned position embedding keeps (GPT-2's wpe, OPT's embed_positions)
  bytes rotary_tables{};       // the rotary cos and sin every rotating layer's q * cos and k * sin keep
  bytes checkpoint_arguments{};  // full recompute: the eager masks and position ids each checkpointed layer call holds
  bytes embedding_dropout{};   // embedding dropout mask
  bytes embedding_projection{};  // OPT-350M's project_in keeps the token embedding output (word_embed_proj_dim wide)
  bytes embedding_output{};    // LoRA under full recompute: the frozen embedding's output, a leaf its AccumulateGrad holds
  bytes output_layer{};        // final norm input and output-layer input (OPT-350M: project_out's and lm_head's inputs)
  bytes logits{};              // fp32 logits kept for the cross-entropy backward
  /// The vision tower's saved tensors and inputs over the micro-batches in flight (image tokens; 0 for text).
  bytes vision{};
  bytes total{};
  /// Where sliding-window and full-attention layers alternate and keep different tensors (SDPA with a sequence as long
  /// as the window: the sliding ones keep a mask, attention_layout), per_layer is layer 0's (a sliding one) and these
  /// the full-attention layers' bytes and count on the stage; otherwise per_layer and 0.
  layer_activations full_attention_layer{};
  std::int64_t full_attention_layers = 0;
  /// What the stage's first layer keeps less than per_layer because its input does not require grad (LoRA without
  /// recompute: first_layer_unkept_bytes), per micro-batch in flight; `layers` and `total` are net of it.
  bytes first_layer_unkept{};
  /// Of first_layer_unkept, the K and V a training forward's KV cache still holds (attention_layout::cached): alive in
  /// the forward and at the loss, with the cache, not in backward.
  bytes first_layer_cache_held{};
  /// The rotary tables no layer keeps, where the stage's one layer keeps nothing of its attention (LoRA on the MLP alone
  /// without recompute: no RoPE node is recorded): the model's forward holds them until it returns, not the loss or the
  /// backward. rotary_tables and total are net of them.
  bytes rotary_tables_unkept{};
};

/// The first pipeline stage (the most loaded under 1F1B: it holds p micro-batches of L/p layers), following
/// Megatron-LM megatron/training/theoretical_memory_usage.py compute_activation_memory.
constexpr void validate(const pipeline_config& p, const transformer_config& m) {
  detail::require_positive(p.pp, "the pipeline-parallel degree");
  detail::require_positive(p.virtual_stages, "the virtual pipeline stages");
  if (p.microbatches < 0) detail::fail("the number of micro-batches cannot be negative; pass 0 if unknown");
  // Megatron-LM's megatron/core/pipeline_parallel/schedules.py get_forward_backward_func: a virtual size picks the
  // interleaved schedule only with more than one stage; one stage runs forward_backward_no_pipelining and drops it.
  if (p.virtual_stages > 1 && p.pp == 1) detail::fail("virtual pipeline stages need a pipeline; raise pp above 1 or keep 1 virtual stage");
  if (p.pp > m.layers) detail::fail_value("the pipeline has more stages than layers", p.pp, "lower pp");
}

namespace detail {
/// The kinds of layer a stage of `layers_on_stage` layers holds (layer 0 slides or not; a full-attention layer is there
/// unless every one slides): each kind has a mask of its own (transformers' causal_mask_mapping).
constexpr bool stage_has_sliding_layers(const transformer_config& m) { return !full_attention_layer(m, 0); }
constexpr bool stage_has_full_attention_layers(const transformer_config& m, std::int64_t layers_on_stage) {
  return !stage_has_sliding_layers(m) || (m.sliding_window_pattern >= 2 && layers_on_stage >= m.sliding_window_pattern);
}
}  // namespace detail

namespace detail {
/// LoRA without full recompute (selective recomputes inside a layer and is no gradient checkpointing in transformers):
/// the frozen embedding's output does not require grad (PEFT and transformers call enable_input_require_grads only for
/// gradient checkpointing: modeling_utils.py gradient_checkpointing_enable), so
/// the first decoder layer keeps only what its adapters make require grad (autograd saves a tensor for a derivative it
/// computes: tools/autograd/gen_variable_type.py). Not kept there: the input norm's tensors (its input and weight need
/// no gradient), the LoRA dropout masks of the adapters reading that norm's output, and in parallel layers (GPT-NeoX,
/// Phi) the MLP branch when no MLP module is adapted. A sequential layer without an attention adapter (the attention
/// half and the MLP's norm would keep nothing either) is not modelled: it is counted whole. Measured on an H200:
/// Llama-2-7B +134,215,168 B, Phi-2 +732,984,832 B, Qwen2.5-1.5B on every linear +86,115,840 B before this term.
struct first_layer_unkept {
  bytes saved;        // what the layer keeps less than a layer whose input requires grad
  bytes cache_held;   // of those, the K and V a training forward's KV cache holds to the model's output
  bool attention_keeps_nothing = false;  // nothing before the MLP needs a gradient: no RoPE node is recorded
};
constexpr first_layer_unkept first_layer_unkept_bytes(const transformer_config& m, const activation_config& c, const adaptation& adapt,
                                                      const layer_activations& w) {
  if (!adapt.lora_enabled() || c.impl != implementation::hf || c.recomputation == recompute::full || c.image_tokens > 0 ||
      m.projected_embedding())
    return {};
  const std::int64_t sb = checked_product(quotient(c.seq_len, c.cp), c.micro_batch);
  const std::int64_t width = adapter_input_bytes(c, adapt);
  const std::int64_t mask = c.device == device_kind::cpu ? width : 1;
  const bool drop = adapt.lora.dropout > 0.0;
  bool attention_adapted = false, mlp_adapted = false, query_adapted = false, key_adapted = false, gate_adapted = false, up_adapted = false;
  std::int64_t masks = 0;  // LoRA dropout masks over the input norm's output
  std::int64_t mlp_masks = 0;  // and over the MLP norm's (gate's and up's adapters)
  for_each_linear(m, [&](const linear_shape& l) {
    if (l.vision || adapt_of(m, l, adapt.lora).params == 0) return;
    query_adapted = query_adapted || l.role == lora_module::q_proj || l.role == lora_module::qkv;
    gate_adapted = gate_adapted || l.role == lora_module::gate_proj || l.role == lora_module::gate_up_proj;
    up_adapted = up_adapted || l.role == lora_module::up_proj || l.role == lora_module::gate_up_proj;
    if (drop && c.tp == 1 && (l.role == lora_module::gate_proj || l.role == lora_module::up_proj || l.role == lora_module::gate_up_proj))
      mlp_masks = checked_sum(mlp_masks, checked_product(mask, sb, l.in));
    key_adapted = key_adapted || l.role == lora_module::k_proj || l.role == lora_module::qkv;
    const bool reads_input_norm = l.role == lora_module::q_proj || l.role == lora_module::k_proj || l.role == lora_module::v_proj ||
                                  l.role == lora_module::qkv ||
                                  (m.shared_layer_norm && (l.role == lora_module::fc1 || l.role == lora_module::gate_proj ||
                                                           l.role == lora_module::up_proj || l.role == lora_module::gate_up_proj));
    if (is_mlp_module(l.role)) mlp_adapted = true;
    else if (l.role != lora_module::none) attention_adapted = true;
    if (drop && reads_input_norm && c.tp == 1)
      masks = checked_sum(masks, checked_product(mask, sb, l.in));
  });
  // A sequential layer whose gate and up are adapted and no attention module: nothing in the attention half needs a
  // gradient (its input and weights need none), nor the MLP's norm, whose input is the residual of two such tensors, nor
  // the LoRA dropouts over that norm's output; the layer keeps its adapters' tensors and the MLP's hidden ones (the CPU
  // step oracle's LoRA draws on gate_proj, up_proj and down_proj: +4.9% to +15.6% before; Gemma-3's, with q/k norms,
  // +1.8% forward and +8.2% backward; OLMo-2's post-norm layer alike). Other layers without an attention adapter are
  // counted whole.
  // With down_proj the only MLP module adapted, nothing before it needs a gradient either: of the MLP's hidden tensors only
  // the product lora_A keeps (where it keeps no copy of its own) stays, beside down's adapter's (a LoRA probe of the CPU
  // step oracle on down_proj, ffn 2048: forward +40.0% before).
  const bool down_alone = mlp_adapted && !gate_adapted && !up_adapted && m.moe.experts == 0 && !m.fused_gate_up;
  const attention_layout at = attention_layout_of(m, c, 0);
  if (!m.parallel_residual && !attention_adapted && ((gate_adapted && up_adapted) || down_alone) && m.mlp == mlp_kind::swiglu) {
    // SwiGLU's four hidden tensors, the product the fourth where down keeps it (layer_activation_bytes_unchecked)
    const bytes hidden = !down_alone ? bytes{} : adapter_input_copy_bytes(c, adapt) > 0 ? w.mlp_hidden : bytes_of(w.mlp_hidden.count() / 4 * 3);
    // A training forward's KV cache holds the layer's K and V to the model's output whatever autograd keeps: where
    // attention keeps the cache's own tensors (forward_kv_cache_bytes counts no copy apart), they stay through the forward
    // and the loss (the CPU step oracle's LoRA draw on the MLP with use_cache, seed 20261127: forward -1.27% before,
    // 2 c sb kv d under).
    const bytes cache_held = at.cached && forward_kv_cache_bytes(m, c, 0).count() == 0
                                 ? bytes_of(checked_product(2 * dtype_bytes_ceil(c.activation_dtype), sb, at.kv_heads, m.head_size()))
                                 : bytes{};
    return {w.attention_norm + w.attention_input + w.query + w.key + w.value + w.attention_scores + w.attention_dropout + w.attention_lse +
                w.attention_mask + w.attention_output + w.attention_kernel_output + w.attention_residual_mask + w.mlp_norm +
                bytes_of(mlp_masks) + (down_alone ? w.mlp_input + hidden : bytes{}) +
                bytes_of(m.sandwich_norms || m.post_norms ? w.branch_norms.count() / 2 : 0),  // the attention branch's norm (Gemma-2, OLMo-2)
            cache_held, true};
  }
  if (!m.parallel_residual && !attention_adapted) return {};
  bytes unkept = w.attention_norm + bytes_of(masks);
  // Qwen3's per-head k_norm (OLMo-2's over the whole projection) with k_proj not adapted: nothing on K's path needs a
  // gradient, so it keeps nothing (the CPU step oracle's LoRA draw on q_proj and v_proj with q/k norms, seed 804: +1.33%
  // before, this and the rotated Q below; OLMo-2's: +3.65%).
  const bool qk_norms = m.qk_norm && !m.fused_qkv;
  const bytes q_norm = qk_norms ? bytes_of(head_norm_saved(m, c, sb, at.heads, true)) : bytes{};
  if (qk_norms && !key_adapted) unkept += bytes_of(head_norm_saved(m, c, sb, at.kv_heads, true));
  // Eager attention's QK^T (matmul) keeps Q for K's gradient and K for Q's: with q_proj adapted and k_proj not, K needs
  // none, and the rotated Q is kept by nothing (RoPE's multiplies keep the tables), nor OPT's scaled one (a product with a
  // Python float keeps nothing); q_norm's tensors, before RoPE, stay. Read for Llama-family layers (the CPU step oracle's
  // LoRA steps on q_proj and v_proj: backward +65,504 B before, one c sb heads d) and OPT's (a LoRA probe of the family
  // step oracle's frames: +65,432 B); Gemma-2's soft-capped scores too (modeling_gemma2.py eager_attention_forward: / and *
  // by Python floats keep nothing, tanh its output; the step oracle's LoRA draw, seed 803: +0.53% forward before).
  const bool rope_layer_frames = m.positions == position_kind::rope && m.norm == norm_kind::rmsnorm;
  const bool opt_layer_frames = m.positions == position_kind::learned && m.norm == norm_kind::layernorm;
  if (c.attention == attention_kind::eager && query_adapted && !key_adapted && (rope_layer_frames || opt_layer_frames) &&
      !m.parallel_residual && !m.fused_qkv && !m.clip_qkv)
    unkept += w.query - q_norm;
  if (m.parallel_residual && !mlp_adapted) unkept += w.mlp_norm + w.mlp_input + w.mlp_hidden + w.mlp_residual_mask;
  return {unkept, bytes{}};
}

constexpr stage_activations first_stage_activations_unchecked(const transformer_config& m, const activation_config& c,
                                                              const pipeline_config& p, const adaptation& adapt = {}) {
  using detail::checked_product, detail::checked_sum;
  const layer_activations per_layer = detail::layer_activation_bytes_unchecked(m, c, adapt);
  const std::int64_t layers_on_stage = first_stage_layers(m, p.pp);
  // 1F1B: the first stage runs pp forward passes before its first backward (Narayanan et al. 2021 §2.2).
  const std::int64_t inflight = p.microbatches > 0 && p.microbatches < p.pp ? p.microbatches : p.pp;
  // Alternating layers (sliding_window_pattern N >= 2: layer 0 slides) that keep different tensors: the stage's layers
  // 0 .. layers_on_stage - 1 hold floor(layers_on_stage / N) full-attention ones.
  const bool mixed = m.sliding_window_pattern >= 2 && detail::attention_layout_of(m, c, 0).sdpa_mask;
  const std::int64_t a = detail::dtype_bytes_ceil(c.activation_dtype);
  const std::int64_t s = detail::quotient(c.seq_len, c.cp), b = c.micro_batch, sb = checked_product(s, b);
  const std::int64_t sbh = checked_product(sb, m.hidden);
  const auto replicated = [&](std::int64_t n) { return c.sequence_parallel ? detail::ceil_div(n, c.tp) : n; };
  // Token ids (int64) kept by the embedding, on every tensor-parallel rank: 8sb per micro-batch in flight.
  const bytes input_ids = bytes_of(checked_product(8, sb, inflight));
  // transformers' rotary tables (LlamaModel.forward: position_embeddings = self.rotary_emb(hidden_states, position_ids),
  // cos and sin of s x rotary_width each, since position_ids = cache_position.unsqueeze(0) is one row for the batch, cast
  // to the hidden states' dtype: fp32 under autocast; OLMo's stay fp32) are passed to every layer, whose
  // apply_rotary_pos_emb (q * cos, rotate_half(q) * sin) keeps them for backward (mul saves the other operand): alive
  // from forward to the first layer's backward, once per micro-batch, on every tensor-parallel rank. A model whose
  // layers all skip RoPE (NoPE period 1) keeps none, but under full recompute, where each layer's checkpointed call
  // holds the tables it was passed (below; SmolLM3Model.forward passes them to every layer). Gemma-3 and OLMo-3 make a
  // pair for each kind of layer present and pass each layer its own kind's (transformers 5 modular_gemma3.py
  // Gemma3TextModel.forward, modular_olmo3.py Olmo3Model.forward: `for layer_type in set(self.config.layer_types)`): a
  // stage keeps the pair of each kind of layer it has, with or without recompute (transformers 4 passed both pairs to
  // every layer, and a checkpointed call held both).
  // The kinds of layer on the stage (stage_has_sliding_layers, stage_has_full_attention_layers).
  const bool sliding = detail::stage_has_sliding_layers(m), full = detail::stage_has_full_attention_layers(m, layers_on_stage);
  bytes rotary_tables{};
  if (c.impl == implementation::hf && m.positions == position_kind::rope && (m.nope_period != 1 || c.recomputation == recompute::full)) {
    const std::int64_t table = c.autocast || m.rope_fp32 ? 4 : a;
    const std::int64_t pairs = m.local_rope && sliding && full ? 2 : 1;
    rotary_tables = bytes_of(checked_product(2, table, s, m.rotary_width(), pairs, inflight));
  }
  // Full recompute in transformers (modeling_layers.py GradientCheckpointingLayer.__call__: checkpoint(partial(layer,
  // **kwargs), hidden_states)): each layer's call holds its keyword arguments until that layer's backward, so what
  // the model's forward would free on return stays: the int64 position ids (cache_position.unsqueeze(0), one row) and,
  // under eager attention, the b x 1 x s x s additive mask in the model's dtype of each kind of layer on the stage
  // (Gemma-2's and Gemma-3's sliding and full-attention masks, causal_mask_mapping): inputs_embeds' dtype
  // (masking_utils.py create_causal_mask), fp32 under autocast. Under SDPA the sliding layers'
  // boolean mask, once the sequence reaches the window (attention_layout::sdpa_mask; full-attention layers pass None):
  // masking_utils.py sdpa_mask builds and_masks(causal, sliding_window) over the query and key positions only, a
  // 1 x 1 x s x s bool tensor expanded (a view) to the batch. Measured on an H200 (Mistral, window 512, 4096 tokens x 8,
  // full recompute: its 16,777,216 B `and_mask` at the forward's and the backward's peaks, −3.1% and −1.6% before).
  bytes checkpoint_arguments{};
  if (c.impl == implementation::hf && c.recomputation == recompute::full) {
    const std::int64_t masks = c.attention == attention_kind::eager ? (sliding ? 1 : 0) + (full ? 1 : 0) : 0;
    const bool sdpa_sliding_mask = sliding && detail::attention_layout_of(m, c, 0).sdpa_mask;
    // OPTDecoder passes its per-sequence position_ids (b x s int64) to each layer as well (modeling_opt.py OPTDecoder.forward:
    // decoder_layer(hidden_states, ..., position_ids=position_ids, cache_position=cache_position)).
    const std::int64_t opt_position_ids = positions_per_sequence(m) ? checked_product(8, sb) : 0;
    const std::int64_t mask_bytes = c.autocast ? 4 : a;
    checkpoint_arguments = bytes_of(checked_product(checked_sum(checked_product(masks, mask_bytes, b, s, s), sdpa_sliding_mask ? checked_product(s, s) : 0,
                                                                checked_product(8, s), opt_position_ids),
                                                    inflight));
  }
  // A learned position embedding keeps its int64 indices for its weight's gradient (derivatives.yaml embedding: indices),
  // from forward to its node in backward, unless its table is frozen. OPT's (modeling_opt.py
  // OPTLearnedPositionalEmbedding.forward: position_ids + self.offset) are a new b x s tensor; GPT-2's (modeling_gpt2.py:
  // position_ids = cache_position.unsqueeze(0)) one row, the storage of cache_position, which a checkpointed layer's
  // call already holds under full recompute (checkpoint_arguments). Megatron's learned positions are one row too
  // (megatron/training/utils.py get_ltor_masks_and_position_ids: arange(s).unsqueeze(0).expand_as(data), a view).
  bytes position_ids{};
  if (m.positions == position_kind::learned && !adapt.lora_enabled() && !adapt.freeze_embeddings) {
    if (positions_per_sequence(m) || checkpoint_arguments.count() == 0)
      position_ids = bytes_of(checked_product(learned_position_id_bytes(m, s, b), inflight));
  }
  bytes embedding_dropout{}, embedding_projection{}, embedding_output{}, output_layer{}, logits{};
  // LoRA under full recompute: transformers' enable_input_require_grads (modeling_utils.py, which PEFT's recipes call
  // with gradient checkpointing) hooks the input embeddings' forward with output.requires_grad_(True), so the frozen
  // embedding's output is a leaf that requires grad. Where the model makes a new tensor of it before layer 0 (GemmaModel's
  // normalizer, GraniteModel's embedding_multiplier, GPT-2's and OPT's position embeddings added, OPT-350M's project_in),
  // that op's node reaches the leaf through its AccumulateGrad, which holds the variable (torch/csrc/autograd/functions/
  // accumulate_grad.h): alive from forward to the end of backward, where layer 0's input would otherwise be the only copy
  // (the CPU step oracle's Gemma and Granite LoRA steps under checkpointing: forward and backward one c sbh short before).
  // Qwen2-VL's masked_scatter of the image embeddings is not modelled.
  if (c.impl == implementation::hf && c.recomputation == recompute::full && adapt.lora_enabled() && c.image_tokens == 0 &&
      (m.scaled_embedding || m.embedding_multiplier || m.positions == position_kind::learned || m.projected_embedding()))
    embedding_output = bytes_of(checked_product(c.autocast ? 4 : a, sb, m.token_width(), inflight));
  // OPT-350M's project_in (modeling_opt.py OPTDecoder): an nn.Linear over the token embedding output keeps that input
  // for its weight's gradient (a 16-bit cast under autocast, and its weight's cast), unless the embeddings are frozen.
  const bool frozen_embedding = adapt.lora_enabled() || adapt.freeze_embeddings;
  if (m.projected_embedding() && !frozen_embedding)
    embedding_projection = bytes_of(checked_sum(checked_product(a, sb, m.token_width(), inflight),
                                                c.autocast ? checked_product(a, m.hidden, m.token_width()) : 0));
  if (c.dropout > 0.0 || m.embedding_dropout > 0.0) {
    const std::int64_t mask = c.device == device_kind::cpu ? a : 1;
    embedding_dropout = bytes_of(checked_product(replicated(checked_product(mask, sbh)), inflight));  // "sbhp/t" with SP
  }
  if (p.pp == 1) {
    // Final norm input and output-layer input (2sbh each), fp32 logits 4sbv/t (Korthikanti §4.3: 4sbh/t (1 + v/h)).
    // HF's final RMSNorm keeps what a layer's norm keeps (see layer_activation_bytes); under autocast its input is
    // the fp32 residual, and lm_head keeps a 16-bit cast of its input and of its weight (autocast's cache).
    // Frozen (LoRA; a frozen tied embedding), the final norm's weight multiply and lm_head keep no input.
    const bool frozen_norm = adapt.lora_enabled(), frozen_head = frozen_norm || (adapt.freeze_embeddings && m.tied_embeddings);
    // A final LayerNorm outside the paper also keeps its mean and rstd (fp32 on CUDA and under autocast), as a layer's.
    // OLMo's final OlmoLayerNorm keeps an fp32 copy of its input and fp32 statistics (modular_olmo.py OlmoModel.norm).
    const bool fp32_input = c.autocast || (c.impl == implementation::hf && m.norm_input_fp32);
    const std::int64_t residual = fp32_input ? checked_product(4, sbh) : checked_product(a, sbh);
    const std::int64_t layer_norm_stats =
        c.impl == implementation::paper ? 0 : checked_product(2, sb, c.device == device_kind::cpu && !fp32_input ? a : 4);
    const std::int64_t final_norm = m.post_residual_norms ? 0  // OPT-350M: no final norm
                                    : c.impl == implementation::hf && m.norm == norm_kind::rmsnorm
                                        ? detail::hf_rmsnorm_saved(m, c.torch_major, sb, m.hidden, c.autocast ? 4 : a, frozen_norm)
                                        : checked_sum(residual, m.norm == norm_kind::layernorm ? layer_norm_stats : 0);
    // (Phi's lm_head bias is cast and cached with its weight.) OPT-350M: project_out keeps the last hidden state and
    // lm_head keeps project_out's output, word_embed_proj_dim wide; under autocast both weights are cast.
    const std::int64_t w = m.token_width();
    const std::int64_t head_weight_cast =
        c.autocast ? checked_product(a, checked_sum(detail::ceil_div(checked_product(m.vocab, w + (m.lm_head_bias ? 1 : 0)), c.tp),
                                                    m.projected_embedding() ? checked_product(m.hidden, w) : 0))
                   : 0;
    const std::int64_t head_inputs = checked_sum(frozen_head ? 0 : checked_product(a, sb, w),
                                                 m.projected_embedding() && !frozen_norm ? checked_product(a, sbh) : 0);
    output_layer = bytes_of(checked_sum(replicated(checked_sum(final_norm, head_inputs)), head_weight_cast));
    logits = bytes_of(checked_product(4, sb, detail::ceil_div(m.vocab, c.tp)));
  }
  const bytes vision = c.image_tokens > 0 ? detail::vision_activation_bytes_unchecked(m, c, adapt).total() * inflight : bytes{};
  // The layers, and the result with the full-attention layers' breakdown: a copy of per_layer where the layers are
  // alike, so no breakdown is copied before the result is built (a copy of one just returned waits on its stores).
  const auto with_layers = [&](const layer_activations& full_layer, std::int64_t full_layers) {
    bytes layers = full_layers > 0
                       ? (per_layer.total() * (layers_on_stage - full_layers) + full_layer.total() * full_layers) * inflight
                       : per_layer.total() * checked_product(layers_on_stage, inflight);
    if (p.virtual_stages > 1 && p.pp > 1) {
      // Interleaved schedule: x (1 + (p - 1) / (p m)) (Korthikanti §4.2.3; Megatron's interleaved penalty).
      const std::int64_t den = checked_product(p.pp, p.virtual_stages);
      layers = bytes_of(detail::ceil_div(checked_product(layers.count(), checked_sum(den, p.pp - 1)), den));
    }
    const detail::first_layer_unkept first = detail::first_layer_unkept_bytes(m, c, adapt, per_layer);
    const bytes unkept = first.saved * inflight;
    layers -= unkept;
    // With one layer on the stage and its attention keeping nothing, no RoPE node keeps the tables (the CPU step
    // oracle's one-layer LoRA probes on the MLP alone: +0.23% (Llama) and +1.1% (OLMo-2) in both phases before).
    const bool tables_unkept = first.attention_keeps_nothing && layers_on_stage == 1 && p.pp == 1;
    const bytes tables = tables_unkept ? bytes{} : rotary_tables;
    return stage_activations{per_layer,    layers_on_stage, inflight, layers, input_ids, position_ids, tables, checkpoint_arguments,
                             embedding_dropout, embedding_projection, embedding_output, output_layer, logits, vision,
                             layers + input_ids + position_ids + tables + checkpoint_arguments + embedding_dropout +
                                 embedding_projection + embedding_output + output_layer + logits + vision,
                             full_layer,   full_layers, unkept, first.cache_held * inflight, rotary_tables - tables};
  };
  if (!mixed) return with_layers(per_layer, 0);
  return with_layers(detail::layer_activation_bytes_unchecked(m, c, adapt, m.sliding_window_pattern - 1),
                     layers_on_stage / m.sliding_window_pattern);
}
}  // namespace detail
constexpr stage_activations first_stage_activations(const transformer_config& m, const activation_config& c,
                                                    const pipeline_config& p = {}, const adaptation& adapt = {}) {
  validate(c, m);
  validate(p, m);
  validate(adapt, m);
  return detail::first_stage_activations_unchecked(m, c, p, adapt);
}

constexpr std::string_view name(recompute r) {
  switch (r) {
    case recompute::none: return "none";
    case recompute::selective: return "selective";
    case recompute::full: return "full";
  }
  detail::fail("unknown recompute");
}
constexpr std::string_view name(attention_kind k) {
  return k == attention_kind::flash ? "flash" : k == attention_kind::flash_attention_2 ? "fa2" : "eager";
}
constexpr std::string_view name(implementation i) {
  switch (i) {
    case implementation::paper: return "paper";
    case implementation::eager: return "eager";
    case implementation::fused: return "fused";
    case implementation::hf: return "hf";
  }
  detail::fail("unknown implementation");
}

inline recompute parse_recompute(std::string_view s) {
  static constexpr recompute all[] = {recompute::none, recompute::selective, recompute::full};
  return detail::parse_named(s, all, "recompute");
}
/// zeromem's names, or transformers' attn_implementation values for the same kernels (modeling_utils.py): "sdpa" is
/// torch.nn.functional.scaled_dot_product_attention (zeromem's flash), "flash_attention_2" the flash-attn package (fa2).
inline attention_kind parse_attention(std::string_view s) {
  if (s == "sdpa") return attention_kind::flash;
  if (s == "flash_attention_2") return attention_kind::flash_attention_2;
  for (const attention_kind k : {attention_kind::eager, attention_kind::flash, attention_kind::flash_attention_2})
    if (name(k) == s) return k;
  detail::fail("unknown attention " + detail::quoted(s) +
               "; expected one of eager, flash, fa2 (or transformers' attn_implementation: eager, sdpa, flash_attention_2)");
}
inline implementation parse_implementation(std::string_view s) {
  static constexpr implementation all[] = {implementation::paper, implementation::eager, implementation::fused, implementation::hf};
  return detail::parse_named(s, all, "implementation");
}
constexpr std::string_view name(device_kind d) { return d == device_kind::cuda ? "cuda" : "cpu"; }
inline device_kind parse_device(std::string_view s) {
  static constexpr device_kind all[] = {device_kind::cuda, device_kind::cpu};
  return detail::parse_named(s, all, "device");
}

}  // namespace zeromem
