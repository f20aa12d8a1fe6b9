// A model run forward only, without autograd (torch.no_grad / torch.inference_mode): RLHF reference and reward
// models, frozen teachers, log-prob passes. Nothing is kept for backward; each op's output lives exactly as long as a
// Python name or argument refers to it, so the peak follows the frames of transformers' modeling code
// (modeling_llama.py: LlamaForCausalLM, LlamaModel, LlamaDecoderLayer, LlamaRMSNorm, LlamaAttention with
// eager_attention_forward or sdpa_attention_forward, apply_rotary_pos_emb, LlamaMLP). Checked op by op against
// PyTorch on the CPU with eager attention (tests/oracle/forward.py); the SDPA kernel itself is derived, not measured.
#pragma once

#include <cstdint>
#include <string_view>

#include "zeromem/training/activations.hpp"
#include "zeromem/model/adapters.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/gpus.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// What the caller keeps from the forward. hidden_states: the last hidden state only (a reward or value head's
/// scalar per token is negligible). logits: lm_head's output in the compute dtype. log_probs: also
/// log_softmax(logits.float()), the usual reference log-prob pass: an fp32 copy and its fp32 log-softmax.
enum class forward_output { hidden_states, logits, log_probs };

struct forward_only_config {
  std::int64_t seq_len = 0;
  std::int64_t micro_batch = 1;
  dtype compute = dtype::bf16;
  attention_kind attention = attention_kind::flash;
  /// transformers' forward default (config.use_cache): a DynamicCache keeps every layer's K (after RoPE) and V, and
  /// the returned output holds it.
  bool use_cache = true;
  forward_output output = forward_output::logits;
  /// The cuBLAS workspace of the one thread that runs the forward (an H100's by default; blas_workspaces_of for
  /// another card). 0 on a CPU.
  bytes blas_workspaces = h100_blas_workspace;
  /// Where it runs: a LayerNorm's mean and rstd are fp32 on CUDA (aten/src/ATen/native/cuda/layer_norm_kernel.cu,
  /// acc_type) and in the input's dtype on a CPU (the forward oracle's).
  device_kind device = device_kind::cuda;
  /// The model's own dropout runs (model.train(), as a checkpointed layer's forward does in a training step; false for
  /// inference): each site whose config.json probability is above 0 makes its output beside its input, and for the op's
  /// span the mask (native_dropout's bool on CUDA, 1 B a value; on a CPU a noise tensor in the input's dtype). Read by
  /// the layers whose frames model it (dropout_modelled).
  bool train_dropout = false;
  /// PEFT's LoRA adapters on the decoder layers' linears, unmerged (tuners/lora/layer.py Linear.forward): each adapted
  /// linear's own tensors at their highest moment, lora_dropout under train_dropout (forward_lora_modelled). None by
  /// default; the adapters' weights are the caller's.
  lora_config lora{};
};

struct forward_only_estimate {
  bytes weights{};
  bytes layer_peak{};     // the most one decoder layer adds above what the model holds while it runs
  bytes layers_phase{};   // the last layer's peak: token ids, the mask and rotary tables, the embedding output, the
                          // layer input, the earlier layers' KV cache, and layer_peak
  bytes output_phase{};   // at the output: token ids, the last hidden state, the KV cache, logits (and log-probs)
  bytes blas_workspaces{};  // forward_only_config::blas_workspaces, held through the pass
  bytes peak{};           // weights + the workspaces + max(layers_phase, output_phase)
};

constexpr std::string_view name(forward_output o) {
  return o == forward_output::hidden_states ? "hidden-states" : o == forward_output::logits ? "logits" : "log-probs";
}
inline forward_output parse_forward_output(std::string_view s) {
  static constexpr forward_output all[] = {forward_output::hidden_states, forward_output::logits, forward_output::log_probs};
  return detail::parse_named(s, all, "forward output");
}

namespace detail {
/// An RMSNorm over `rows` rows of `width` values under no_grad, above its input; the largest of the moments between
/// its ops. LlamaRMSNorm: x.to(fp32) (a copy unless already fp32), x.pow(2) and its mean (4 per row), rsqrt(variance +
/// eps), x * rsqrt, its cast back and the weight multiply. GemmaRMSNorm (m.norm_scale_fp32): x.float() and x.pow(2)
/// with the mean (the copy only below fp32), then, once _norm has returned, the fp32 normalised tensor, (1 + weight)
/// and their product, before the cast.
constexpr std::int64_t forward_norm_peak(const transformer_config& m, std::int64_t c, std::int64_t rows, std::int64_t width,
                                        device_kind device = device_kind::cuda) {
  const std::int64_t values = checked_product(rows, width);
  // nn.LayerNorm (GPT-NeoX's): native_layer_norm's output beside its mean and rstd, one value a row each (fp32 on
  // CUDA, the input's dtype on a CPU), which layer_norm drops as it returns.
  if (m.norm == norm_kind::layernorm && !m.norm_input_fp32)
    return checked_sum(checked_product(c, values), checked_product(2, rows, device == device_kind::cuda ? 4 : c));
  if (m.norm_input_fp32) {
    // OlmoLayerNorm (modular_olmo.py): x.to(fp32) (a copy below fp32), native_layer_norm's fp32 output beside it with
    // its mean and rstd (4 B a row each), then, the copy gone, the cast back beside the output: max(8v + 8r, 4v + c v).
    if (c >= 4) return checked_sum(checked_product(4, values), checked_product(8, rows));
    return max_of(checked_sum(checked_product(8, values), checked_product(8, rows)), checked_product(4 + c, values));
  }
  if (m.norm_weight_fp32) {
    // Olmo2RMSNorm (modeling_olmo2.py): as LlamaRMSNorm up to x * rsqrt (8 B a row beside the two fp32 tensors), then
    // the weight multiply in fp32 beside the normalised tensor and the variance, and its cast back below fp32.
    if (c >= 4) return checked_sum(checked_product(8, values), checked_product(4, rows));
    return checked_sum(checked_product(8, values), checked_product(4, rows), max_of(checked_product(4, rows), checked_product(c, values)));
  }
  if (m.norm_scale_fp32) {
    const std::int64_t scale = checked_sum(checked_product(8, values), checked_product(4, width));
    return c >= 4 ? scale : max_of(scale, checked_sum(checked_product(8, values), checked_product(4, rows)));
  }
  if (c >= 4) return checked_sum(checked_product(8, values), checked_product(4, rows));
  return max_of(checked_sum(checked_product(8, values), checked_product(8, rows)),
                checked_sum(checked_product(4, values), checked_product(4, rows), checked_product(2, c, values)));
}
}  // namespace detail

/// Whether layer `layer` runs SDPA over transformers' boolean sliding-window mask: a sliding layer (full_attention_layer)
/// once the sequence reaches the window (masking_utils.py sdpa_mask skips it only while kv_length < sliding_window).
constexpr bool sliding_mask(const transformer_config& m, const forward_only_config& f, std::int64_t layer) {
  return f.attention == attention_kind::flash && !full_attention_layer(m, layer) && f.seq_len >= m.sliding_window;
}

namespace detail {
/// Calls f(i) for the last layer i below `last` of each kind of layer other than last's: those that skip RoPE (SmolLM3's
/// NoPE layers, rope_layer) and those that run SDPA over the sliding-window mask (Gemma-2's and Gemma-3's sliding
/// layers beside their full-attention ones, sliding_mask), whose peaks differ.
template <class F>
constexpr void for_each_other_layer_kind(const transformer_config& m, const forward_only_config& f, std::int64_t last, F&& call) {
  const bool masks_differ = m.sliding_window_pattern >= 2 && sliding_mask(m, f, 0) != sliding_mask(m, f, m.sliding_window_pattern - 1);
  const int kinds = (m.nope_period > 0 ? 2 : 1) * (masks_differ ? 2 : 1);
  if (kinds == 1) return;
  const auto kind = [&](std::int64_t i) { return (rope_layer(m, i) ? 1u : 0u) | (sliding_mask(m, f, i) ? 2u : 0u); };
  unsigned seen = 1u << kind(last);
  int found = 1;
  for (std::int64_t i = last - 1; i >= 0 && found < kinds; --i)
    if (const unsigned k = 1u << kind(i); (seen & k) == 0) {
      seen |= k;
      ++found;
      call(i);
    }
}

/// StableLM's layer layout: LayerNorms, separate projections with RoPE joined by torch.cat, a SwiGLU MLP.
constexpr bool stablelm_layer(const transformer_config& m) {
  return m.norm == norm_kind::layernorm && !m.norm_input_fp32 && m.mlp == mlp_kind::swiglu && !m.fused_qkv && !m.fused_gate_up &&
         m.rope_concat && m.positions == position_kind::rope && m.shared_layer_norm == m.parallel_residual && !m.post_residual_norms &&
         !m.post_norms && !m.sandwich_norms && !m.scaled_residual && !m.projected_embedding() && m.moe.experts == 0 &&
         m.vision.blocks == 0 && m.nope_period == 0;
}
}  // namespace detail

/// Whether forward_layer_peak models model m's layers with `attention` over `seq_len` tokens: Llama-family text layers
/// (RMSNorm or OLMo's LayerNorm, SwiGLU; separate q/k/v rotating whole heads, or Phi-3's fused projections), dense or,
/// with `experts`, transformers 5's routed experts (alone or beside Qwen2-MoE's gated shared expert), with SDPA's
/// sliding-window mask too (sliding_mask); the other families without it (a sequence as long as the window).
constexpr bool forward_layer_modelled(const transformer_config& m, attention_kind attention, std::int64_t seq_len, bool experts = false) {
  // transformers 5's routed experts, alone or beside Qwen2-MoE's gated shared expert.
  const bool mlp = m.moe.experts == 0 || (experts && m.moe.stacked && (m.moe.shared_experts == 0 || m.moe.shared_expert_gate));
  // Phi-3's layout (modeling_phi3.py): one qkv_proj sliced into q, k and v, one gate_up_proj chunked, RoPE over the first
  // rotary_width() values of each head joined to the rest by torch.cat; else separate projections rotating whole heads.
  const bool phi3 = m.fused_qkv && !m.qkv_per_head && m.fused_gate_up && m.rope_concat && m.moe.experts == 0;
  const bool llama = !m.fused_qkv && !m.fused_gate_up && !m.rope_concat && (m.rotary_dims == 0 || m.rotary_dims == m.head_size());
  const bool sliding = attention == attention_kind::flash && !full_attention_layer(m, 0) && seq_len >= m.sliding_window;
  // GPT-NeoX's layer (modular_gpt_neox.py): LayerNorms, the per-head [q | k | v] projection, partial RoPE joined by
  // torch.cat, a GELU MLP, parallel or sequential branches.
  const bool neox = m.norm == norm_kind::layernorm && !m.norm_input_fp32 && m.mlp == mlp_kind::gelu && m.fused_qkv && m.qkv_per_head &&
                    m.rope_concat && m.positions == position_kind::rope && !m.shared_layer_norm && !m.post_residual_norms &&
                    !m.projected_embedding() && m.moe.experts == 0 && m.vision.blocks == 0 && m.nope_period == 0;
  if (neox) return !sliding;
  // Phi's layer (modeling_phi.py): one LayerNorm feeding attention (separate q, k, v, a partial rotation joined by
  // torch.cat) and a GELU MLP in parallel.
  const bool phi = m.norm == norm_kind::layernorm && !m.norm_input_fp32 && m.mlp == mlp_kind::gelu && !m.fused_qkv && m.rope_concat &&
                   m.positions == position_kind::rope && m.shared_layer_norm && m.parallel_residual && !m.qk_norm &&
                   !m.projected_embedding() && m.moe.experts == 0 && m.vision.blocks == 0 && m.nope_period == 0;
  if (phi) return !sliding;
  // StableLM's layer (modeling_stablelm.py): LayerNorms, Phi's attention frame (separate q, k, v, a partial rotation
  // joined by torch.cat), a SwiGLU MLP, in sequence or in parallel behind one norm; as many key/value heads as heads and
  // no per-head qk_layernorm (both refused where config.json is read).
  if (detail::stablelm_layer(m)) return m.kv_heads == m.heads && !m.qk_norm && !sliding;
  // GPT-2's block (modeling_gpt2.py): learned positions, LayerNorms, one c_attn split into [all q | all k | all v], the
  // eager softmax in the model's dtype, a GELU or ReLU MLP, in sequence.
  const bool gpt2 = m.positions == position_kind::learned && m.norm == norm_kind::layernorm && !m.norm_input_fp32 && m.fused_qkv &&
                    !m.qkv_per_head && !m.eager_softmax_fp32 && (m.mlp == mlp_kind::gelu || m.mlp == mlp_kind::relu) &&
                    m.kv_heads == m.heads && !m.parallel_residual && !m.post_residual_norms && !m.projected_embedding() &&
                    m.moe.experts == 0 && m.vision.blocks == 0;
  if (gpt2) return !sliding;
  // OPT's layer (modeling_opt.py): learned positions, LayerNorms before the branches or after each residual add
  // (OPT-350M, whose embedding may be narrower: project_in, project_out), separate q, k, v, a ReLU MLP, in sequence.
  const bool opt = m.positions == position_kind::learned && m.norm == norm_kind::layernorm && !m.norm_input_fp32 && !m.fused_qkv &&
                   m.mlp == mlp_kind::relu && m.kv_heads == m.heads && !m.parallel_residual && !m.shared_layer_norm && !m.qk_norm &&
                   !m.rope_concat && m.moe.experts == 0 && m.vision.blocks == 0;
  if (opt) return !sliding;
  // StarCoder2's layer (modular_starcoder2.py): Llama's frames with nn.LayerNorm and a GELU MLP (c_fc, act, c_proj).
  const bool starcoder2 = llama && m.norm == norm_kind::layernorm && !m.norm_input_fp32 && m.mlp == mlp_kind::gelu && !m.gelu_fast_ops &&
                          m.positions == position_kind::rope && !m.parallel_residual && !m.post_residual_norms && !m.qk_norm &&
                          !m.sandwich_norms && !m.post_norms && !m.scaled_residual && m.nope_period == 0 && m.moe.experts == 0;
  if (starcoder2) return m.vision.blocks == 0;
  return m.mlp == mlp_kind::swiglu && (m.norm == norm_kind::rmsnorm || m.norm_input_fp32) && mlp && m.vision.blocks == 0 && (phi3 || llama);
}

/// Whether forward_layer_peak follows PEFT's adapters `lora` on model m's layers (true without adapters): Llama's frames with
/// separate q, k and v projections, and a dense SwiGLU MLP (gate_proj, up_proj, down_proj) where an MLP linear or
/// all-linear is targeted (all-linear adapts a mixture's router too).
constexpr bool forward_lora_modelled(const transformer_config& m, const lora_config& lora) {
  if (lora.rank <= 0) return true;
  const bool llama = !m.qkv_per_head && !m.shared_layer_norm && !detail::stablelm_layer(m) && m.positions != position_kind::learned && !m.fused_qkv;
  const std::uint16_t attention = bit(lora_module::q_proj) | bit(lora_module::k_proj) | bit(lora_module::v_proj) | bit(lora_module::o_proj);
  const std::uint16_t mlp = bit(lora_module::gate_proj) | bit(lora_module::up_proj) | bit(lora_module::down_proj) | bit(lora_module::all_linear);
  const bool dense_swiglu = m.moe.experts == 0 && m.mlp == mlp_kind::swiglu && !m.fused_gate_up;
  return llama && (lora.targets & ~(attention | mlp)) == 0 && ((lora.targets & mlp) == 0 || dense_swiglu);
}

/// Whether forward_layer_peak follows model m's own dropout under model.train() (forward_only_config::train_dropout):
/// GPT-2's frames do; Phi's residual dropout never sets its layer's peak (forward_partial_rope_layer_peak); the other
/// layers' only where their config sets none.
constexpr bool dropout_modelled(const transformer_config& m) {
  const bool none = m.attention_dropout == 0.0 && m.residual_dropout == 0.0;
  const bool phi_residual = m.shared_layer_norm && !m.qkv_per_head && m.attention_dropout == 0.0;
  return none || m.positions == position_kind::learned || phi_residual;
}

namespace detail {
/// Bytes of a dropout mask's value: native_dropout's bool on CUDA, a noise tensor in the input's dtype on a CPU
/// (aten/src/ATen/native/Dropout.cpp).
constexpr std::int64_t dropout_mask_bytes(const forward_only_config& f, std::int64_t c) { return f.device == device_kind::cuda ? 1 : c; }

/// Bytes per value of PEFT's adapter sum `result + lora_B(lora_A(x)) * scaling` (tuners/lora/layer.py Linear.forward):
/// the base output's where the adapter shares its dtype, else the promoted one (c10/core/ScalarType.h promoteTypes:
/// bf16 + fp32 is fp32, fp16 + bf16 is fp32).
constexpr std::int64_t lora_sum_bytes(dtype compute, dtype adapter) {
  const std::int64_t c = dtype_bytes_ceil(compute);
  return adapter == compute ? c : max_of(4, max_of(dtype_bytes_ceil(adapter), c));
}

/// One adapted linear's tensors over sb tokens, in bytes, as PEFT's Linear.forward (tuners/lora/layer.py) makes them.
struct lora_linear_tensors {
  std::int64_t c, a, sum_bytes;  // bytes per value: the base output, the adapter, their sum
  std::int64_t copies;           // the add's copies of its operands (a CPU's TensorIterator casts, see lora_linear_peak)
  std::int64_t R, x, B, sum;     // the base output; x cast to the adapter's dtype; lora_B's output; the sum
  bool drop;                     // lora_dropout is applied (nn.Identity when it is 0)
};
constexpr lora_linear_tensors lora_linear_sizes(const forward_only_config& f, std::int64_t sb, std::int64_t in, std::int64_t out) {
  lora_linear_tensors t{};
  t.c = dtype_bytes_ceil(f.compute);
  t.a = dtype_bytes_ceil(f.lora.adapter_dtype);
  t.sum_bytes = lora_sum_bytes(f.compute, f.lora.adapter_dtype);
  t.copies = f.device != device_kind::cpu ? 0 : (t.c != t.sum_bytes) + (t.a != t.sum_bytes);
  t.R = checked_product(t.c, sb, out);
  t.x = f.lora.adapter_dtype == f.compute ? 0 : checked_product(t.a, sb, in);
  t.B = checked_product(t.a, sb, out);
  t.sum = checked_product(t.sum_bytes, sb, out);
  t.drop = f.train_dropout && f.lora.dropout > 0.0;
  return t;
}

/// Bytes an adapted linear holds above what its caller holds, the base output included, at its highest moment: PEFT's
/// Linear.forward (tuners/lora/layer.py) result = base_layer(x); x cast to lora_A's dtype where it differs
/// (_cast_input_dtype, a local to the return); result + lora_B(lora_A(dropout(x))) * scaling, each operand a
/// temporary freed once its consumer returns, the sum promoted (lora_sum_bytes); result.to(the base output's dtype).
/// On a CPU the add first copies each operand not in the promoted dtype (TensorIteratorBase::compute_types,
/// aten/src/ATen/TensorIterator.cpp: on kCPU, promote_inputs_to_common_dtype makes temporaries); CUDA casts in the kernel.
constexpr std::int64_t lora_linear_peak(const forward_only_config& f, std::int64_t sb, std::int64_t in, std::int64_t out) {
  const lora_linear_tensors t = lora_linear_sizes(f, sb, in, out);
  const std::int64_t D = t.drop ? checked_product(t.a, sb, in) : 0, mask = t.drop ? checked_product(dropout_mask_bytes(f, t.a), sb, in) : 0;
  const std::int64_t A = checked_product(t.a, sb, f.lora.rank);
  const std::int64_t held = checked_sum(t.R, t.x);  // the base output and the cast input, to the adapter sum
  const std::int64_t add = checked_sum(t.B, t.sum, checked_product(t.copies, t.sum_bytes, sb, out));  // lora_B's scaled output, the sum
  const std::int64_t adapter =
      max_of(max_of(checked_sum(D, mask), checked_sum(D, A)), max_of(checked_sum(A, t.B), max_of(checked_product(2, t.B), add)));
  // result.to(c) beside the promoted sum (no copy where the sum is already in c), the cast input still bound.
  return max_of(checked_sum(held, adapter), checked_sum(t.x, t.sum, t.sum_bytes == t.c ? 0 : t.R));
}

/// lora_linear_peak's linear rerun with grad enabled (a checkpointed layer recomputed in backward): the dropped copy,
/// its mask and lora_A's rank-r output are kept for backward (lora_A's and lora_B's saved inputs) to the layer's end.
/// `to_scaling`: the rerun stops as `* scaling` saves its scalar, the layer's last saved tensor
/// (torch/utils/checkpoint.py _recomputation_hook raises _StopRecomputationError), before the product is made.
constexpr std::int64_t lora_linear_recomputed_peak(const forward_only_config& f, std::int64_t sb, std::int64_t in, std::int64_t out,
                                                   bool to_scaling) {
  const lora_linear_tensors t = lora_linear_sizes(f, sb, in, out);
  const std::int64_t kept = checked_sum(t.drop ? checked_product(checked_sum(t.a, dropout_mask_bytes(f, t.a)), sb, in) : 0,
                                        checked_product(t.a, sb, f.lora.rank));  // D and its mask, A
  const std::int64_t held = checked_sum(t.R, t.x, kept);
  if (to_scaling) return checked_sum(held, t.B);
  // lora_B's output and its scaled copy; the scaled copy, the sum and the add's copies; the sum cast back, R freed.
  const std::int64_t add = checked_sum(t.B, t.sum, checked_product(t.copies, t.sum_bytes, sb, out));
  return max_of(checked_sum(held, max_of(checked_product(2, t.B), add)), checked_sum(t.x, kept, t.sum, t.sum_bytes == t.c ? 0 : t.R));
}

/// Bytes a GPT-NeoX layer (modular_gpt_neox.py GPTNeoXLayer, GPTNeoXAttention, apply_rotary_pos_emb, GPTNeoXMLP), a
/// Phi layer (modeling_phi.py PhiDecoderLayer, PhiAttention, PhiMLP) or a StableLM layer (modeling_stablelm.py
/// StableLmDecoderLayer, StableLmAttention / StableLmSdpaAttention, StableLmMLP) adds above its input under no_grad.
/// Sizes as forward_layer_peak's; R = c sb heads r and its k twin R_k over the rotated r = rotary_width() values of a head.
constexpr std::int64_t forward_partial_rope_layer_peak(const transformer_config& m, const forward_only_config& f) {
  const std::int64_t c = dtype_bytes_ceil(f.compute), s = f.seq_len, b = f.micro_batch, d = m.head_size(), r = m.rotary_width();
  const std::int64_t sb = checked_product(s, b);
  const std::int64_t H = checked_product(c, sb, m.hidden), Q = checked_product(c, sb, m.heads, d), K = checked_product(c, sb, m.kv_heads, d);
  const std::int64_t F = checked_product(c, sb, m.ffn), Qr = checked_product(c, sb, m.heads, r), Kr = checked_product(c, sb, m.kv_heads, r);
  const std::int64_t norm = forward_norm_peak(m, c, sb, m.hidden, f.device);
  // The input norm's output Y: GPT-NeoX passes it to attention as an argument, alive until attention returns; Phi and
  // StableLM bind it to hidden_states, which neither rebinds: alive to the layer's end. The projections' outputs
  // (Q + 2K) stay to the attention frame's end: GPT-NeoX's qkv (q, k and v chunks of it), Phi's and StableLM's through
  // query_pass and key_pass (views of q and k) and v. StableLM's attention frame is Phi's (the same names and ops).
  const bool phi = !m.qkv_per_head, stablelm = m.mlp == mlp_kind::swiglu;
  const std::int64_t qkv = checked_sum(H, Q, checked_product(2, K));
  // apply_rotary_pos_emb on the rotated parts: q_rot * cos, rotate_half and its product with sin, the sum (3 R at most);
  // then k's beside q's rotated part; then torch.cat joins q's parts (a new Q) and k's (a new K). GPT-NeoX's rotated
  // parts are the function's locals, dropped on rebinding; Phi's frame keeps them (query_rot, key_rot) to its end.
  const std::int64_t kept = phi ? checked_sum(Qr, Kr) : 0;
  std::int64_t attention = max_of(max_of(checked_sum(qkv, checked_product(3, Qr)), checked_sum(qkv, Qr, checked_product(3, Kr))),
                                  max_of(checked_sum(qkv, Qr, Kr, Q), checked_sum(qkv, phi ? Qr : 0, Q, Kr, K)));
  std::int64_t after_rope = checked_sum(qkv, kept, Q, K);
  if (f.use_cache) {
    // DynamicLayer.update's copies of K and V while k_embed is alive; then k_embed goes on rebinding, and Phi's v_proj
    // output with it (GPT-NeoX's V stays a chunk of qkv).
    attention = max_of(attention, checked_sum(after_rope, checked_product(2, K)));
    after_rope = checked_sum(after_rope, phi ? 0 : K);
  }
  std::int64_t probs_kept = 0;
  // transpose(1, 2).contiguous() copies unless one token or one head leaves it contiguous.
  const std::int64_t transposed = s > 1 && m.heads > 1 ? checked_product(2, Q) : Q;
  if (f.attention == attention_kind::eager) {
    // eager_attention_forward: repeat_kv copies K and V to every head (2Q) unless one kv head makes it a stride-0 view;
    // QK^T (q and k from torch.cat, or repeat_kv's copies, fold as views; one kv head's expansion copies K for b > 1),
    // its scaled copy, the mask added, softmax with dtype=float32 (a cast, then its output), .to(c), P @ V (V copied to
    // fold (batch, heads): a token-major view when b, heads and s exceed 1, one kv head's expansion when b > 1; the
    // cache's and repeat_kv's copies fold), the transposed copy, the output projection.
    const std::int64_t A = checked_product(m.heads, s, s, b), cA = checked_product(c, A);
    const bool fp32 = c >= 4, copies = m.heads > m.kv_heads && m.kv_heads > 1, one_kv = m.kv_heads == 1 && m.heads > 1;
    const std::int64_t base = checked_sum(after_rope, copies ? checked_product(2, Q) : 0);
    const std::int64_t fold_k = one_kv && b > 1 ? Q : 0;
    const std::int64_t fold_v = copies ? 0 : one_kv ? fold_k : !f.use_cache && b > 1 && m.heads > 1 && s > 1 ? Q : 0;
    attention = max_of(attention, checked_sum(base, fold_k, cA));
    attention = max_of(attention, checked_sum(base, checked_product(2, cA)));
    attention = max_of(attention, checked_sum(base, cA, checked_product(fp32 ? 4 : 8, A)));
    if (!fp32) attention = max_of(attention, checked_sum(base, checked_product(2, cA), checked_product(4, A)));
    attention = max_of(attention, checked_sum(base, cA, fold_v, Q));
    attention = max_of(attention, checked_sum(base, cA, transposed));
    attention = max_of(attention, checked_sum(after_rope, cA, Q, H));
    // Returned as attn_weights, bound in the layer's frame to its end; StableLmAttention sets them to None before it
    // returns (output_attentions false).
    probs_kept = stablelm ? 0 : cA;
  } else {
    // sdpa_attention_forward (as forward_layer_peak's): the output and the fp32 log-sum-exp, the transposed copy, dense.
    attention = max_of(attention, checked_sum(after_rope, Q, checked_product(4, m.heads, s, b)));
    attention = max_of(attention, checked_sum(after_rope, transposed));
    attention = max_of(attention, checked_sum(after_rope, Q, H));
  }
  // Held after attention: its output (H), the probabilities (eager), the cache's K and V, and Phi's Y. The MLP reads
  // Phi's Y or post_attention_layernorm's output (an argument alive through it): fc1's output and act's (GELU one kernel;
  // gelu_new's tensor ops hold three more of the MLP's width at once, gelu_fast's four: activations.py), then act's
  // output and fc2's. Parallel: attn + mlp, then + x, both sums beside the branches (and Phi's Y, bound until the sum is
  // assigned). Sequential: R1 = attn + x replaces the attention output, the MLP over ln2(R1), then mlp + R1.
  const std::int64_t held = checked_sum(phi ? H : 0, H, probs_kept, f.use_cache ? checked_product(2, K) : 0);
  if (stablelm) {
    // StableLmDecoderLayer keeps Y (hidden_states) and the attention output (self_attn_output) bound to its end, beside
    // the cache's K and V (held). StableLmMLP down(act(gate(x)) * up(x)): gate's output and act's, then act's, up's
    // and their product (3F), then the product and down's output (F + H). Parallel (use_parallel_residual): the MLP
    // over Y, then residual + attention output (a new tensor) + the MLP output. In sequence: R1 = residual + attention
    // output; post_attention_layernorm(R1), the argument the MLP reads to its return; R1 + the MLP output.
    // hidden_dropout > 0 is refused where config.json is read (attention_dropout runs inside SDPA's kernel).
    const std::int64_t swiglu = max_of(checked_product(3, F), checked_sum(F, H));
    const std::int64_t end = checked_sum(held, checked_product(3, H));  // parallel: M, x + A, the sum; in sequence: R1, M, R1 + M
    if (m.parallel_residual) return max_of(max_of(norm, attention), max_of(checked_sum(held, swiglu), end));
    const std::int64_t mlp_norm = checked_sum(held, H, norm), mlp = checked_sum(held, checked_product(2, H), swiglu);
    return max_of(max_of(norm, attention), max_of(max_of(mlp_norm, mlp), end));
  }
  const std::int64_t act = m.gelu_fast_ops ? checked_product(5, F) : m.gelu_tensor_ops ? checked_product(4, F) : checked_product(2, F);
  const std::int64_t mlp = checked_sum(held, phi ? 0 : H, max_of(act, checked_sum(F, H)));
  const std::int64_t second_norm = phi ? 0 : checked_sum(held, norm);
  const std::int64_t first_sum = m.parallel_residual ? 0 : checked_sum(held, H);
  const std::int64_t end = checked_sum(held, checked_product(m.parallel_residual ? 3 : 2, H));
  // Phi's resid_dropout under model.train() (on the attention output, then on the MLP's) holds a dropped copy and its
  // mask beside its input: held + 2H + mask at most, never above the final sums' held + 3H (the mask is at most H).
  return max_of(max_of(max_of(norm, attention), max_of(second_norm, mlp)), max_of(first_sum, end));
}

/// Bytes a GPT-2 block (modeling_gpt2.py GPT2Block, GPT2Attention, eager_attention_forward, GPT2MLP; transformers 5)
/// adds above its input under no_grad. Sizes as forward_layer_peak's.
constexpr std::int64_t forward_gpt2_layer_peak(const transformer_config& m, const forward_only_config& f) {
  const std::int64_t c = dtype_bytes_ceil(f.compute), s = f.seq_len, b = f.micro_batch, d = m.head_size();
  const std::int64_t sb = checked_product(s, b);
  const std::int64_t H = checked_product(c, sb, m.hidden), Q = checked_product(c, sb, m.heads, d), F = checked_product(c, sb, m.ffn);
  const std::int64_t norm = forward_norm_peak(m, c, sb, m.hidden, f.device);
  // ln_1's output Y, bound until R1 is assigned; c_attn's output (3Q), split into q, k and v views that keep it to the
  // attention frame's end; with a cache, DynamicLayer.update's copies of K and V.
  const std::int64_t cache = f.use_cache ? checked_product(2, Q) : 0;
  const std::int64_t base = checked_sum(H, checked_product(3, Q), cache);
  // resid_dropout under model.train() on c_proj's output in attention: the output, its dropped copy and the mask at
  // once. The MLP's (the same three beside R1, Y2 and the attention output) stays H below it, the probabilities held
  // in both. SDPA's own attention dropout runs inside the kernel.
  const std::int64_t mask = dropout_mask_bytes(f, c);
  const bool resid = f.train_dropout && m.residual_dropout > 0.0;
  const std::int64_t dropped = checked_sum(checked_product(2, H), checked_product(mask, sb, m.hidden));
  std::int64_t attention = base, probs_kept = 0;
  // reshape(...).contiguous() of the transposed output copies unless one token or one head leaves it contiguous.
  const std::int64_t reshaped = s > 1 && m.heads > 1 ? checked_product(2, Q) : Q;
  if (f.attention == attention_kind::eager) {
    // q, k and v are views into c_attn's token-major output: matmul copies each to fold (batch, heads) when b and heads
    // exceed 1 (the cache's contiguous copies fold as views); QK^T, divided by sqrt(d) and the mask added (2cA at
    // each), softmax in the model's dtype (its input and output), .type(value.dtype) returning itself, P @ V, the
    // copy of its transposed view, c_proj.
    const std::int64_t A = checked_product(m.heads, s, s, b), cA = checked_product(c, A);
    const std::int64_t fold = b > 1 && m.heads > 1 ? Q : 0, fold_kv = f.use_cache ? 0 : fold;
    attention = max_of(attention, checked_sum(base, fold, fold_kv, cA));
    attention = max_of(attention, checked_sum(base, checked_product(2, cA)));
    // attn_dropout under model.train(): the dropped probabilities beside the softmax's and the mask.
    if (f.train_dropout && m.attention_dropout > 0.0)
      attention = max_of(attention, checked_sum(base, checked_product(2, cA), checked_product(mask, A)));
    attention = max_of(attention, checked_sum(base, cA, fold_kv, Q));
    attention = max_of(attention, checked_sum(base, cA, reshaped));
    attention = max_of(attention, checked_sum(base, cA, Q, H));
    if (resid) attention = max_of(attention, checked_sum(base, cA, dropped));  // resid_dropout on c_proj's output
    probs_kept = cA;  // `attn_output, _ = self.attn(...)`: bound in the block's frame to its end
  } else {
    // sdpa_attention_forward: the output and the fp32 log-sum-exp, its transpose(1, 2).contiguous(), c_proj.
    attention = max_of(attention, checked_sum(base, Q, checked_product(4, m.heads, s, b)));
    attention = max_of(attention, checked_sum(base, checked_product(2, Q)));
    attention = max_of(attention, checked_sum(base, Q, H));
    if (resid) attention = max_of(attention, checked_sum(base, dropped));
  }
  // After attention: its output (bound as attn_output to the block's end), the probabilities, the cache; R1 beside Y,
  // then Y goes. ln_2's output Y2 (bound until the last sum is assigned); c_fc's output and act's (GELU or ReLU one
  // kernel; gelu_new's tensor ops hold three more of the MLP's width, gelu_fast's four), then act's and c_proj's; R1 + mlp.
  const std::int64_t held = checked_sum(H, probs_kept, cache);
  const std::int64_t first_sum = checked_sum(held, checked_product(2, H));
  const std::int64_t held_r1 = checked_sum(held, H);
  const std::int64_t act = m.gelu_fast_ops ? checked_product(5, F) : m.gelu_tensor_ops ? checked_product(4, F) : checked_product(2, F);
  const std::int64_t mlp = checked_sum(held_r1, H, max_of(act, checked_sum(F, H)));
  const std::int64_t end = checked_sum(held_r1, checked_product(3, H));
  return max_of(max_of(max_of(norm, attention), max_of(first_sum, checked_sum(held_r1, norm))), max_of(mlp, end));
}

/// Bytes an OPT decoder layer (modeling_opt.py OPTDecoderLayer, OPTAttention, its eager_attention_forward) adds above
/// its input under no_grad, before its LayerNorms (do_layer_norm_before) or after each residual add (OPT-350M). Sizes as
/// forward_layer_peak's (MHA: K = Q = H).
constexpr std::int64_t forward_opt_layer_peak(const transformer_config& m, const forward_only_config& f) {
  const std::int64_t c = dtype_bytes_ceil(f.compute), s = f.seq_len, b = f.micro_batch, d = m.head_size();
  const std::int64_t sb = checked_product(s, b);
  const std::int64_t H = checked_product(c, sb, m.hidden), Q = checked_product(c, sb, m.heads, d), F = checked_product(c, sb, m.ffn);
  const std::int64_t norm = forward_norm_peak(m, c, sb, m.hidden, f.device);
  const bool before = !m.post_residual_norms;  // do_layer_norm_before: attention reads the first norm's output Y
  const std::int64_t Y = before ? H : 0;       // bound to hidden_states until the attention output rebinds it
  // OPTAttention: q_proj's output times scaling (a new tensor; the product's input goes with the expression), then k_proj's
  // and v_proj's; with a cache, DynamicLayer.update copies K and V and the originals go on rebinding.
  std::int64_t attention = max_of(before ? norm : 0, checked_sum(Y, checked_product(2, Q)));
  const std::int64_t base = checked_sum(Y, checked_product(3, Q));
  if (f.use_cache) attention = max_of(attention, checked_sum(base, checked_product(2, Q)));
  // The dropouts under model.train(): each site's output beside its input and, for the op's span, the mask.
  const std::int64_t mask = dropout_mask_bytes(f, c);
  const bool resid = f.train_dropout && m.residual_dropout > 0.0;
  const std::int64_t dropped = checked_sum(H, checked_product(mask, sb, m.hidden));
  if (f.attention == attention_kind::eager) {
    // eager_attention_forward: QK^T (q, and K unless it is the cache's head-major copy, are transposed views of token-major
    // projections: matmul copies each to fold (batch, heads) when b, heads and s exceed 1), times scaling (1.0, a new
    // tensor), the mask added (a new tensor), softmax with dtype=float32 (a cast, then its output), .to(c), attention
    // dropout under model.train(), P @ V (V folded as K is), transpose(1, 2).contiguous(); OPTAttention then reshapes
    // (a view) and runs out_proj with the probabilities still bound, setting them to None only before it returns.
    const std::int64_t A = checked_product(m.heads, s, s, b), cA = checked_product(c, A);
    const std::int64_t fold_q = b > 1 && s > 1 && m.heads > 1 ? Q : 0, fold_kv = f.use_cache ? 0 : fold_q;
    const bool fp32 = c >= 4;
    attention = max_of(attention, checked_sum(base, fold_q, fold_kv, cA));
    attention = max_of(attention, checked_sum(base, checked_product(2, cA)));
    attention = max_of(attention, checked_sum(base, cA, checked_product(fp32 ? 4 : 8, A)));
    if (!fp32) attention = max_of(attention, checked_sum(base, checked_product(2, cA), checked_product(4, A)));
    if (f.train_dropout && m.attention_dropout > 0.0)
      attention = max_of(attention, checked_sum(base, checked_product(2, cA), checked_product(mask, A)));
    attention = max_of(attention, checked_sum(base, cA, fold_kv, Q));
    attention = max_of(attention, checked_sum(base, cA, s > 1 && m.heads > 1 ? checked_product(2, Q) : Q));
    attention = max_of(attention, checked_sum(base, cA, Q, H));
  } else {
    // sdpa_attention_forward (as forward_layer_peak's): the output and the fp32 log-sum-exp, the transposed copy, out_proj.
    attention = max_of(attention, checked_sum(base, Q, checked_product(4, m.heads, s, b)));
    attention = max_of(attention, checked_sum(base, checked_product(2, Q)));
    attention = max_of(attention, checked_sum(base, Q, H));
  }
  // After attention (Y gone with the rebinding; the cache's K and V held): the residual dropout on its output, then
  // R1 = residual + it. OPT-350M normalises R1 into Y1 (R1 goes with the rebinding). The MLP's residual (R1, or Y1) is
  // bound to the layer's end; before it, final_layer_norm's output Y2 is fc1's input until fc1's output rebinds it
  // (OPT-350M's fc1 reads Y1 itself); ReLU beside fc1's output, fc2's output beside ReLU's, the residual dropout on it,
  // the sum; OPT-350M's final_layer_norm over that sum beside the residual.
  const std::int64_t cached = f.use_cache ? checked_product(2, Q) : 0;
  std::int64_t after = checked_sum(cached, checked_product(2, H));  // the attention output (or its dropped copy) and R1
  if (resid) after = max_of(after, checked_sum(cached, H, dropped));
  if (!before) after = max_of(after, checked_sum(cached, H, norm));  // self_attn_layer_norm over R1
  const std::int64_t held = checked_sum(cached, H);                   // R1 (before) or Y1 (after)
  std::int64_t mlp = checked_sum(held, max_of(checked_product(2, F), checked_sum(F, H)));
  if (before) mlp = max_of(max_of(mlp, checked_sum(held, norm)), checked_sum(held, H, F));  // final_layer_norm, then fc1 beside Y2
  if (resid) mlp = max_of(mlp, checked_sum(held, H, dropped));
  const std::int64_t end = before ? checked_sum(held, checked_product(2, H)) : checked_sum(held, H, norm);
  return max_of(max_of(attention, after), max_of(mlp, end));
}
}  // namespace detail

/// Bytes decoder layer `layer` of a Llama-family model adds above its input under no_grad, what the model holds
/// beside it left out. Sizes: H = c sbh, Q = c sb heads d, K = c sb kv d, F = c sb f, A = heads s^2 b (c = compute
/// bytes). Layers differ only where some skip RoPE (SmolLM3's NoPE layers, rope_layer).
constexpr bytes forward_layer_peak(const transformer_config& m, const forward_only_config& f, std::int64_t layer = 0) {
  using detail::checked_product, detail::checked_sum, detail::max_of;
  if (ZEROMEM_RARELY(!forward_lora_modelled(m, f.lora)))
    detail::fail("LoRA's own tensors in a layer's forward are modelled for Llama-family layers with separate q, k and v projections "
                 "and a dense SwiGLU MLP; target those modules, or leave the adapters out of the forward");
  // GPT-NeoX's query_key_value, Phi's shared norm and StableLM's layer, each with a partial rotation joined by torch.cat.
  if (m.qkv_per_head || m.shared_layer_norm || detail::stablelm_layer(m)) return bytes_of(detail::forward_partial_rope_layer_peak(m, f));
  if (m.positions == position_kind::learned)  // GPT-2's block (one c_attn), or OPT's layer
    return bytes_of(m.fused_qkv ? detail::forward_gpt2_layer_peak(m, f) : detail::forward_opt_layer_peak(m, f));
  const std::int64_t c = detail::dtype_bytes_ceil(f.compute), s = f.seq_len, b = f.micro_batch, h = m.hidden, d = m.head_size();
  const std::int64_t sb = checked_product(s, b), sbh = checked_product(sb, h);
  const std::int64_t H = checked_product(c, sbh), Q = checked_product(c, sb, m.heads, d), K = checked_product(c, sb, m.kv_heads, d);
  const std::int64_t F = checked_product(c, sb, m.ffn);
  const std::int64_t norm = detail::forward_norm_peak(m, c, sb, h, f.device);
  // The normed input Y alive through attention (LlamaDecoderLayer passes input_layernorm's output); OLMo-2's attention
  // reads the layer input itself, which is not counted here.
  const std::int64_t Y = m.post_norms ? 0 : H;

  // Qwen3 (modeling_qwen3.py): q_norm(q_proj(Y)) beside Y, then k_norm(k_proj(Y)) beside Y and the normed q, each
  // an RMSNorm per head row above its input (forward_norm_peak over the projection's values and head rows); OLMo-2's
  // over each token's whole projection.
  std::int64_t qk_norms = 0;
  if (m.qk_norm) {
    const bool whole = m.qk_norm_whole;
    qk_norms = max_of(checked_sum(Y, Q, detail::forward_norm_peak(m, c, whole ? sb : checked_product(sb, m.heads), whole ? checked_product(m.heads, d) : d)),
                      checked_sum(Y, Q, K, detail::forward_norm_peak(m, c, whole ? sb : checked_product(sb, m.kv_heads), whole ? checked_product(m.kv_heads, d) : d)));
  }
  // apply_rotary_pos_emb: q * cos + rotate_half(q) * sin holds q, its two products and the sum (3Q) beside k and v;
  // then k likewise beside q_embed. OLMo's (modeling_olmo.py: OlmoRotaryEmbedding returns fp32 cos and sin) rotates
  // in fp32 (4 B a value) and casts q_embed and k_embed back while both fp32 results are alive. On a CPU a 16-bit
  // operand of an fp32 product is first copied to fp32 (TensorIterator::compute_types promotes CPU inputs by
  // temporaries; CUDA casts inside the kernel): at rotate_half(q) * sin, q * cos, rotate_half(q), its fp32 copy and the
  // product are alive (3 fp32 + one 16-bit q, where the sum's moment holds 3 fp32); then k likewise beside q_embed.
  const std::int64_t Qe = checked_product(sb, m.heads, d), Ke = checked_product(sb, m.kv_heads, d);
  const std::int64_t p = m.rope_fp32 ? 4 : c;  // bytes of the rotation's products
  const std::int64_t promoted = m.rope_fp32 && c < 4 && f.device == device_kind::cpu ? c : 0;  // rotate_half(q) beside its copy
  const std::int64_t qkv = checked_sum(Y, Q, checked_product(2, K));
  // SmolLM3's NoPE layers (modular_smollm3.py SmolLM3Attention) skip the rotation: q and k stay views of the projections.
  const bool rotates = rope_layer(m, layer);
  std::int64_t rope = 0;
  if (rotates) {
    rope = max_of(checked_sum(qkv, checked_product(3 * p + promoted, Qe)),
                  checked_sum(qkv, checked_product(p, Qe), checked_product(3 * p + promoted, Ke)));
    if (m.rope_fp32 && c < 4) rope = max_of(rope, checked_sum(qkv, checked_product(p + c, checked_sum(Qe, Ke))));
  }
  std::int64_t after_rope = qkv;  // Y, q_embed, k_embed, v
  // Phi-3 (Phi3Attention.forward): q, k and v are views of the one qkv_proj output, which the frame's `qkv` keeps to its
  // end. apply_rotary_pos_emb rotates the first r = rotary_width() values of each head (q_rot * cos, rotate_half's
  // -x2 and cat, its product with sin, the sum: 3 Qr at most) and joins the rest with torch.cat into a new head-major
  // q_embed (the sum beside it); then k beside q_embed. q_embed and k_embed stay beside the whole qkv output. With a
  // cache, DynamicLayer.update copies K and V while k_embed is alive; k_embed goes on rebinding, v stays in qkv.
  std::int64_t cache_moment = 0;
  if (m.fused_qkv) {
    const std::int64_t r = m.rotary_width(), Qr = checked_product(c, sb, m.heads, r), Kr = checked_product(c, sb, m.kv_heads, r);
    const std::int64_t base = qkv;  // Y and the qkv output (Q + 2K)
    rope = max_of(max_of(checked_sum(base, checked_product(3, Qr)), checked_sum(base, Qr, Q)),
                  max_of(checked_sum(base, Q, checked_product(3, Kr)), checked_sum(base, Q, Kr, K)));
    after_rope = checked_sum(base, Q, K);
    if (f.use_cache) {
      cache_moment = checked_sum(after_rope, checked_product(2, K));
      after_rope = checked_sum(after_rope, K);  // the two copies in place of k_embed
    }
  }
  std::int64_t attention = max_of(max_of(rope, qk_norms), cache_moment), probs_kept = 0;
  // PEFT's adapted projections (lora_linear_peak) beside what LlamaAttention.forward holds as each runs: q_proj beside Y,
  // k_proj beside Y and q (normed under q/k norms), v_proj beside both; o_proj below.
  const auto adapted = [&](lora_module l) { return f.lora.rank > 0 && (f.lora.targets & (bit(l) | bit(lora_module::all_linear))) != 0; };
  const std::int64_t q_out = checked_product(m.heads, d), kv_out = checked_product(m.kv_heads, d);
  if (adapted(lora_module::q_proj)) attention = max_of(attention, checked_sum(Y, detail::lora_linear_peak(f, sb, h, q_out)));
  if (adapted(lora_module::k_proj)) attention = max_of(attention, checked_sum(Y, Q, detail::lora_linear_peak(f, sb, h, kv_out)));
  if (adapted(lora_module::v_proj)) attention = max_of(attention, checked_sum(Y, Q, K, detail::lora_linear_peak(f, sb, h, kv_out)));
  if (f.attention == attention_kind::eager) {
    // eager_attention_forward: repeat_kv copies K and V to every head unless one kv head makes it a stride-0 view;
    // matmul folds (batch, heads) into one dimension, copying an operand that cannot be folded as a view (b > 1:
    // q_embed, and K or V unless they are repeat_kv's copies); QK^T, its scaled and masked copies; softmax with
    // dtype=float32 casts to fp32 and then computes (8A at once); .to(c); P @ V; transpose().contiguous().
    const std::int64_t A = checked_product(m.heads, s, s, b), cA = checked_product(c, A);
    const bool copies = m.heads > m.kv_heads && m.kv_heads > 1;
    const std::int64_t base = checked_sum(after_rope, copies ? checked_product(2, Q) : 0);
    // Without RoPE q (b, heads, s, d) is the transposed view of q_proj's (b, s, heads, d) output: (batch, heads) fold as
    // a view unless b, heads and s all exceed 1; K likewise, and one kv head's stride-0 expansion folds only when b = 1.
    // One head in all (repeat_kv returns K and V themselves, n_rep = 1) folds as a view at any b and s.
    // Phi-3's torch.cat makes q_embed and k_embed head-major, which fold as views; K copies only as one kv head's
    // expansion, V (a view of the token-major qkv output, or the cache's head-major copy) unless it is the one head.
    const bool one_kv = m.kv_heads == 1 && m.heads > 1;
    const std::int64_t fold_q = m.fused_qkv ? 0 : rotates ? (b > 1 ? Q : 0) : (b > 1 && s > 1 && m.heads > 1 ? Q : 0);
    const std::int64_t fold_kv =
        m.fused_qkv ? (b > 1 && !copies && (one_kv || (m.heads > 1 && !f.use_cache)) ? Q : 0)
        : rotates   ? (b > 1 && !copies ? Q : 0)
                    : (b > 1 && !copies && m.heads > 1 && (m.kv_heads == 1 || s > 1) ? Q : 0);
    const std::int64_t fold_k = m.fused_qkv ? (b > 1 && one_kv ? Q : 0) : fold_kv;
    attention = max_of(attention, checked_sum(base, fold_q, fold_k, cA));                // QK^T
    attention = max_of(attention, checked_sum(base, checked_product(2, cA)));            // scaled, masked
    // In fp32 the cast and .to(c) copy nothing (Tensor.to returns self): the masked scores and the softmax output.
    const bool fp32 = c >= 4;
    attention = max_of(attention, checked_sum(base, cA, checked_product(fp32 ? 4 : 8, A)));        // softmax(dtype=float32)
    if (!fp32) attention = max_of(attention, checked_sum(base, cA, checked_product(4, A), cA));  // .to(c)
    attention = max_of(attention, checked_sum(base, cA, fold_kv, Q));                    // P @ V
    // transpose(1, 2).contiguous() copies unless one token or one head leaves the transposed tensor contiguous.
    attention = max_of(attention, checked_sum(base, cA, s > 1 && m.heads > 1 ? checked_product(2, Q) : Q));
    attention = max_of(attention, checked_sum(after_rope, cA, Q, H));                    // o_proj
    if (adapted(lora_module::o_proj)) attention = max_of(attention, checked_sum(after_rope, cA, Q, detail::lora_linear_peak(f, sb, q_out, h)));
    probs_kept = cA;  // returned as attn_weights; the decoder layer's `hidden_states, _ =` keeps them to its end
  } else {
    // sdpa_attention_forward with enable_gqa (torch >= 2.5, no mask): the output, the kernel's fp32 log-sum-exp,
    // then transpose().contiguous(); o_proj.
    const std::int64_t lse = checked_product(4, m.heads, s, b);
    attention = max_of(attention, checked_sum(after_rope, Q, lse));
    attention = max_of(attention, checked_sum(after_rope, checked_product(2, Q)));
    attention = max_of(attention, checked_sum(after_rope, Q, H));
    if (adapted(lora_module::o_proj)) attention = max_of(attention, checked_sum(after_rope, Q, detail::lora_linear_peak(f, sb, q_out, h)));
    if (sliding_mask(m, f, layer)) {
      // A sliding layer once the sequence reaches the window gets the model's boolean mask (attention_layout::sdpa_mask,
      // as in training): sdpa_attention_forward repeats K and V to every head (use_gqa_in_sdpa needs no mask: copies
      // under GQA, a stride-0 view for one kv head), kept to its return. PyTorch's SDPA makes the additive mask,
      // at::where(mask, 0, -inf) in the query dtype over the batch (c b s^2, attention.cpp convert_boolean_attn_mask);
      // preprocess_mask pads its rows to 8 (pad_bias, a copy beside it) unless s is a multiple of 8; the
      // memory-efficient kernel writes its token-major output and the fp32 log-sum-exp, rows padded to 32 (attention.cu
      // _efficient_attention_forward), and transpose().contiguous() then copies nothing.
      const std::int64_t repeated = m.heads > m.kv_heads && m.kv_heads > 1 ? checked_product(2, Q) : 0;
      const std::int64_t additive = checked_product(c, b, s, s), padded = s % 8 == 0 ? additive : checked_product(c, b, s, detail::ceil_div(s, 8), 8);
      const std::int64_t held = checked_sum(after_rope, repeated);
      attention = max_of(attention, checked_sum(held, additive));
      if (s % 8 != 0) attention = max_of(attention, checked_sum(held, additive, padded));
      attention = max_of(attention, checked_sum(held, padded, Q, checked_product(4, m.heads, detail::ceil_div(s, 32), 32, b)));
    }
  }
  // With a cache, this layer's K and V stay alive after attention returns: transformers 5's DynamicLayer.update copies
  // them (torch.cat) and hands attention the copies, the originals freed on rebinding; the moment of both pairs,
  // qkv + 2K, never tops o_proj's above (K <= Q), and the copies' contiguous layout only spares matmul a fold copy of
  // K and V at moments o_proj's also tops where heads x d <= hidden (the forward oracle, exact either way).
  const std::int64_t cached = f.use_cache ? checked_product(2, K) : 0;
  // LlamaMLP's adapted linears above what the MLP's caller holds with its argument: gate_proj's, then up_proj's beside
  // act(gate)'s output, then down_proj's beside their product.
  const auto adapted_mlp = [&](std::int64_t base) {
    std::int64_t peak = 0;
    if (adapted(lora_module::gate_proj)) peak = max_of(peak, checked_sum(base, detail::lora_linear_peak(f, sb, h, m.ffn)));
    if (adapted(lora_module::up_proj)) peak = max_of(peak, checked_sum(base, F, detail::lora_linear_peak(f, sb, h, m.ffn)));
    if (adapted(lora_module::down_proj)) peak = max_of(peak, checked_sum(base, F, detail::lora_linear_peak(f, sb, m.ffn, h)));
    return peak;
  };
  if (m.post_norms) {
    // Olmo2DecoderLayer: post_attention_layernorm over the attention output, the residual sum R1; the MLP reads R1
    // itself (3F, or its product and down's output); post_feedforward_layernorm over the MLP output; the sum.
    const std::int64_t before = checked_sum(probs_kept, cached), held = checked_sum(before, H);  // held: R1
    const std::int64_t branch = max_of(checked_sum(before, H, norm), checked_sum(before, checked_product(2, H)));
    const std::int64_t mlp = max_of(checked_sum(held, max_of(checked_product(3, F), checked_sum(F, H))), adapted_mlp(held));
    const std::int64_t after = max_of(checked_sum(held, H, norm), checked_sum(held, checked_product(2, H)));
    return bytes_of(max_of(max_of(attention, branch), max_of(mlp, after)));
  }
  // Then: R1 = x + attention output; the second norm; LlamaMLP down(act(gate(y)) * up(y)): gate and its activation,
  // then the activation, up and their product (3F), then the product and down's output; the residual sum.
  // GraniteDecoderLayer adds branch * residual_multiplier: the product beside the branch output and the sum.
  const std::int64_t held = checked_sum(H, probs_kept, cached);  // R1, the probabilities (eager), the cache
  const std::int64_t norm2 = checked_sum(held, norm);
  // transformers 5's routed experts (integrations/moe.py grouped_mm_experts_forward) over S = k sb rows: the router's
  // logits (c sb E) beside the gathered rows (c S h) and gate_up's output, act's and the product (4 c S f); later the
  // gathered rows, down's output, its product with the routing weights and that product reordered by the inverse
  // permutation (each S h, the last two in the weights' dtype: fp32 for Mixtral, c where the router casts them),
  // before the k rows are summed: the four [S, h] tensors an H100's allocator trace held at Qwen3-MoE's forward peak
  // (h100-moe-steps.json). The per-row indices (under 1% there) are left out.
  std::int64_t moe = 0;
  if (m.moe.experts > 0) {
    const std::int64_t rows = checked_product(sb, m.moe.top_k), weights = m.moe.weights_in_compute_dtype ? c : max_of(c, 4);
    const std::int64_t rows_h = checked_product(c, rows, h), rows_f = checked_product(c, rows, m.moe.expert_ffn);
    moe = checked_sum(checked_product(c, sb, m.moe.experts),
                      max_of(checked_sum(rows_h, checked_product(4, rows_f)), checked_sum(checked_product(2, rows_h), checked_product(2, weights, rows, h))));
    // Qwen2MoeSparseMoeBlock runs its shared expert first, a SwiGLU of n expert widths (3 F_s, then F_s and its
    // output), and keeps that output (H) through the routed experts until the gate's product (3H, below moe's).
    if (m.moe.shared_expert_gate) {
      const std::int64_t shared = checked_product(c, sb, m.moe.shared_experts, m.moe.expert_ffn);
      moe = max_of(max_of(checked_product(3, shared), checked_sum(shared, H)), checked_sum(H, moe));
    }
  }
  // Phi3MLP: gate_up's output (2F, which `gate` keeps to the frame's end), act(gate) and the product (4F), then the
  // product and down's output beside it (3F + H).
  // Starcoder2MLP: c_fc's output and act's (one GELU kernel; gelu_new's tensor ops hold three more at once), then act's
  // output and c_proj's.
  const std::int64_t gelu = m.gelu_tensor_ops ? checked_product(4, F) : checked_product(2, F);
  const std::int64_t dense = m.mlp == mlp_kind::gelu ? max_of(gelu, checked_sum(F, H))
                             : m.fused_gate_up       ? max_of(checked_product(4, F), checked_sum(checked_product(3, F), H))
                                                     : max_of(checked_product(3, F), checked_sum(F, H));
  const std::int64_t mlp = max_of(checked_sum(held, H, m.moe.experts > 0 ? moe : dense), adapted_mlp(checked_sum(held, H)));
  const std::int64_t end = checked_sum(held, checked_product(m.scaled_residual ? 3 : 2, H));
  const std::int64_t first_sum = m.scaled_residual ? checked_sum(probs_kept, cached, checked_product(3, H)) : 0;  // R1's add
  // Gemma-2's sandwich norms (Gemma2DecoderLayer): post_attention_layernorm over the attention output before the
  // residual add (the moment norm2 already has), post_feedforward_layernorm over the MLP output beside R1.
  const std::int64_t branch_norm = m.sandwich_norms ? checked_sum(held, H, norm) : 0;
  return bytes_of(max_of(max_of(max_of(norm, attention), max_of(norm2, max_of(mlp, end))), max_of(branch_norm, first_sum)));
}

/// The bytes of model m's parameters as stored for inference: every parameter in `weights`, or the linear weights
/// quantized (bitsandbytes NF4 / LLM.int8(), quantized_weight_bytes) and the rest in `weights`.
constexpr bytes forward_weight_bytes(const transformer_config& m, dtype weights, quantization q = quantization::none, bool double_quant = true) {
  const bytes_per_element w = size_of(weights);
  bytes total = count_parameters(m).total * w;
  if (q == quantization::none) return total;
  for_each_linear(m, [&](const linear_shape& l) {
    const bytes saved = elements_of(detail::checked_mul(l.in, l.out)) * w - quantized_weight_bytes(l.in, l.out, q, double_quant);
    total -= saved * (l.vision ? l.count : detail::checked_mul(l.count, m.layers));
  });
  return total;
}

/// The forward-only peak of model m with `weights` bytes of parameters (as stored).
constexpr forward_only_estimate estimate_forward_only(const transformer_config& m, const forward_only_config& f, bytes weights) {
  validate(m);
  detail::require_positive(f.seq_len, "the sequence length");
  detail::require_positive(f.micro_batch, "the micro-batch size");
  // OLMo's OlmoLayerNorm (norm_input_fp32) is the one LayerNorm modelled: it sits where Llama's RMSNorm does.
  // transformers 5's routed experts run the same frames under no_grad as in a checkpointed layer's forward, which
  // nothing saves either: forward_layer_peak's experts, held there by the H100's and H200's Mixtral, Qwen3-MoE and
  // Qwen1.5-MoE steps under recompute (forward within 0.26%, docs/validation.md).
  if (!forward_layer_modelled(m, attention_kind::eager, f.seq_len, true))
    detail::fail("forward-only peaks are modelled for Llama-family text models (RMSNorm or OLMo's LayerNorm, SwiGLU, separate q/k/v "
                 "rotating whole heads or Phi-3's fused projections; dense, or transformers 5's routed experts), GPT-2's, OPT's, GPT-NeoX's, "
                 "Phi's, StableLM's and StarCoder2's layers; pass such a model or estimate the step instead");
  if (weights.count() < 0) detail::fail("the weight bytes cannot be negative");
  if (f.lora.rank != 0 || f.lora.targets != 0) validate(f.lora, m);
  // A learned position table has one row per position (GPT2Model's wpe(position_ids)), as in training.
  if (m.positions == position_kind::learned && f.seq_len > m.max_positions - m.position_offset)
    detail::fail_learned_positions(f.seq_len, m.max_positions - m.position_offset);
  if (f.blas_workspaces.count() < 0) detail::fail("the cuBLAS workspace bytes cannot be negative; pass --blas-workspaces such as 32MiB, or 0B");
  if (!forward_layer_modelled(m, f.attention, f.seq_len, true))  // layer 0 slides if any does
    detail::fail_value("forward-only peaks with SDPA's sliding-window mask (a sequence as long as sliding_window) are not modelled",
                       f.seq_len, "use a shorter sequence or --attention eager");
  using detail::checked_product, detail::checked_sum, detail::max_of;
  const std::int64_t c = detail::dtype_bytes_ceil(f.compute), s = f.seq_len, b = f.micro_batch, sb = checked_product(s, b);
  const std::int64_t sbh = checked_product(sb, m.hidden), H = checked_product(c, sbh), K = checked_product(c, sb, m.kv_heads, m.head_size());
  const std::int64_t ids = checked_product(8, sb);  // the caller's int64 token ids
  // LlamaModel holds the positions, the causal mask (eager: c b s^2 from create_causal_mask; SDPA runs is_causal
  // without one), the rotary cos and sin (c s d each: position_ids = cache_position.unsqueeze(0) is one row, which
  // q * cos broadcasts over the batch), the embedding output (inputs_embeds) and the layer input.
  // Alternating layers (Gemma-2, Gemma-3) hold two masks, full and sliding (causal_mask_mapping); Gemma-3 and OLMo-3 a
  // rotary pair for each kind of layer present, global and local (transformers 5 modular_gemma3.py
  // Gemma3TextModel.forward: `for layer_type in set(self.config.layer_types)`): one where every layer slides.
  // Under SDPA the sliding layers' boolean mask once the sequence reaches the window (sliding_mask; full-attention layers
  // pass None): masking_utils.py sdpa_mask builds it over the query and key positions only, 1 x 1 x s x s expanded to
  // the batch (measured in training, step.hpp's checkpoint_arguments).
  const bool sliding_layers = sliding_mask(m, f, 0);  // layer 0 slides where any does
  const std::int64_t mask = f.attention == attention_kind::eager ? checked_product(c, b, s, s, m.sliding_window_pattern >= 2 ? 2 : 1)
                            : sliding_layers                      ? checked_product(s, s)
                                                                  : 0;
  // GPT2Model (learned positions) holds wpe's output for one row of positions (c s h) instead of rotary tables.
  // OPTDecoder (modeling_opt.py) builds its positions from the attention mask it makes (torch.ones(b, s), fp32) by
  // cumsum, one row a sequence (int64 position_ids, b s), and holds embed_positions' output for all of them (c sb h)
  // beside inputs_embeds (project_in's output where the embedding is narrower) and their sum.
  const bool learned = m.positions == position_kind::learned, opt = positions_per_sequence(m);
  const bool two_pairs = m.local_rope && detail::stage_has_sliding_layers(m) && detail::stage_has_full_attention_layers(m, m.layers);
  const std::int64_t rotary = opt       ? H
                              : learned ? checked_product(c, s, m.hidden)
                                        : checked_product(2, m.rope_fp32 ? 4 : c, s, m.rotary_width(), two_pairs ? 2 : 1);
  // cache_position = torch.arange(s) (int64), position_ids a view of it; OPT's fp32 mask and int64 position_ids besides.
  const std::int64_t positions = checked_sum(checked_product(8, s), opt ? checked_product(12, sb) : 0);
  // OPT-350M's project_out narrows the last hidden state (word_embed_proj_dim) before lm_head.
  const std::int64_t last_hidden = m.projected_embedding() ? checked_product(c, sb, m.token_width()) : H;
  const std::int64_t cache = f.use_cache ? checked_product(2, K) : 0;  // one layer's K and V
  forward_only_estimate e{};
  e.weights = weights;
  // Layer i (and, as i = layers, the final norm) runs beside the i layers' cache before it, its input and, past layer 0,
  // the embedding output that LlamaModel's inputs_embeds keeps referenced; GemmaModel scales the embedding output by
  // sqrt(hidden) into a new tensor, and GPT2Model adds the position embeddings into one, so two from layer 0 on. The
  // last layer, and with NoPE layers also the last layer of the other kind, whose own peak may be higher with less beside it.
  const auto layer_moment = [&](std::int64_t i, std::int64_t peak) {
    return checked_sum(i > 0 || m.scaled_embedding || learned ? checked_product(2, H) : H, checked_product(cache, i), peak);
  };
  const std::int64_t last = m.layers - 1;
  e.layer_peak = forward_layer_peak(m, f, last);
  std::int64_t last_layer = layer_moment(last, e.layer_peak.count());
  detail::for_each_other_layer_kind(m, f, last, [&](std::int64_t i) {
    const bytes other = forward_layer_peak(m, f, i);
    last_layer = max_of(last_layer, layer_moment(i, other.count()));
    if (other > e.layer_peak) e.layer_peak = other;
  });
  // The final norm (OPT-350M has none), then OPT-350M's project_out beside the last hidden state.
  std::int64_t final_norm = m.post_residual_norms ? 0 : layer_moment(m.layers, detail::forward_norm_peak(m, c, sb, m.hidden, f.device));
  if (m.projected_embedding()) final_norm = max_of(final_norm, layer_moment(m.layers, last_hidden));
  // Building the rotary tables (LlamaRotaryEmbedding.forward, after the mask, beside the embedding output): the fp32
  // positions (4 s), freqs = inv_freq @ positions (4 s d/2), emb = cat(freqs, freqs) (4 s d), cos and sin in fp32
  // (8 s d) and their casts to the compute dtype; OLMo's stay fp32 (the tables themselves), as an fp32 model's do.
  // Gemma-3 builds its local pair beside the global one where it has both. It sets the peak only where the layers are
  // tiny (a model whose layers skip RoPE).
  const std::int64_t d = m.rotary_width(), half_d = detail::ceil_div(d, 2);  // the rotated values of a head (Phi-3's factor)
  const std::int64_t building = checked_sum(checked_product(4, s), checked_product(4, s, half_d), checked_product(12, s, d),
                                            m.rope_fp32 || c >= 4 ? 0 : checked_product(2, c, s, d));
  const std::int64_t tables = learned ? 0 : checked_sum(building, two_pairs ? checked_product(2, m.rope_fp32 ? 4 : c, s, d) : 0);
  const std::int64_t layers = checked_sum(rotary, max_of(last_layer, final_norm));
  e.layers_phase = bytes_of(checked_sum(ids, positions, mask, max_of(layers, checked_sum(H, tables))));
  // The output, LlamaModel's locals gone: the last hidden state (kept by LlamaForCausalLM while lm_head runs), the
  // cache, lm_head's logits; log-probs: log_softmax(logits.float()) beside the logits (c + 4 + 4 bytes per logit).
  // Gemma-2's final_logit_softcapping: logits / cap, tanh, * cap, two logits-sized tensors at each step; Granite's
  // logits / logits_scaling, the quotient beside lm_head's output.
  const std::int64_t n = checked_product(sb, m.vocab);
  const std::int64_t logits = checked_product(m.final_logit_softcap > 0.0 || m.scaled_logits ? 2 * c : c, n);
  std::int64_t output = last_hidden;
  if (f.output == forward_output::logits) output = checked_sum(last_hidden, logits);
  // In fp32, logits.float() is the logits themselves (Tensor.to returns self when nothing changes): c + 4 bytes a logit.
  if (f.output == forward_output::log_probs) output = max_of(checked_sum(last_hidden, logits), checked_product(c >= 4 ? c + 4 : c + 8, n));
  e.output_phase = bytes_of(checked_sum(ids, checked_product(cache, m.layers), output));
  e.blas_workspaces = f.blas_workspaces;
  e.peak = weights + f.blas_workspaces + (e.layers_phase > e.output_phase ? e.layers_phase : e.output_phase);
  return e;
}

}  // namespace zeromem
