// Decoder-only transformer architectures and their exact parameter counts, per component.
// Counting follows the modules as Hugging Face transformers builds them (nn.Linear weight out x in, plus bias).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/core/cuda_reduce.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

// GELU: fc1 h->f, fc2 f->h; SwiGLU: gate and up h->f, down f->h, act(gate) * up with an activation that keeps only
// its input (SiLU; Gemma's GELU, a gated GELU with the same saved tensors); ReLU: fc1, fc2 as GELU, the activation
// keeping its output, which is fc2's input (OPT).
enum class mlp_kind { gelu, swiglu, relu };
enum class norm_kind { layernorm, rmsnorm };   // LayerNorm: weight and bias; RMSNorm: weight only
enum class position_kind { rope, learned };

/// Mixture of experts in every layer (experts = 0: dense). Each expert is an MLP of expert_ffn.
struct moe_config {
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_ffn = 0;
  std::int64_t shared_experts = 0;  // always-active experts of expert_ffn each
  /// Qwen2-MoE's sigmoid gate over the shared experts' output (modular_qwen2_moe.py Qwen2MoeSparseMoeBlock:
  /// sigmoid(shared_expert_gate(x)) * shared_expert(x), shared_expert_gate an nn.Linear(h, 1) without bias).
  bool shared_expert_gate = false;
  bool router_bias = false;
  /// The top-k routing weights renormalised to sum to 1 (Mixtral always; Qwen3-MoE's norm_topk_prob).
  bool renormalized = true;
  /// The top-k routing weights cast to the router logits' dtype (Qwen2-MoE's and Qwen3-MoE's TopKRouter:
  /// router_top_value.to(router_logits.dtype)); false: kept in fp32 from the softmax (MixtralTopKRouter).
  bool weights_in_compute_dtype = false;
  /// transformers >= 5 holds a layer's routed experts as two 3D parameters, gate_up_proj [E, 2F, H] and down_proj
  /// [E, H, F] (modeling_mixtral.py MixtralExperts, Qwen3MoeExperts), in one module beside a router that is not an
  /// nn.Linear (MixtralTopKRouter): neither is an nn.Linear LoRA can target. false: transformers 4's nn.Linear
  /// w1, w3 and w2 per expert (MixtralBlockSparseTop2MLP) and the router's nn.Linear.
  bool stacked = true;
};

/// A ViT-style vision tower with a patch merger (Qwen2-VL / Qwen2.5-VL layout); blocks = 0: none.
struct vision_config {
  std::int64_t blocks = 0;
  std::int64_t hidden = 0;
  std::int64_t mlp_hidden = 0;
  std::int64_t heads = 0;
  bool gated_mlp = true;     // gate, up, down (Qwen2.5-VL) or fc1, fc2 (Qwen2-VL)
  bool biases = true;        // qkv, proj and MLP linears carry biases
  norm_kind norm = norm_kind::rmsnorm;
  std::int64_t in_channels = 3;
  std::int64_t temporal_patch = 2;
  std::int64_t patch = 14;
  std::int64_t spatial_merge = 2;  // the merger concatenates merge^2 patches
  std::int64_t out_hidden = 0;     // the language model's hidden size
  /// Qwen2.5-VL's window attention: the patches are reordered by window before the blocks and back after the merger
  /// (modeling_qwen2_5_vl.py get_window_index), each index kept for backward.
  bool windowed = true;
};

struct transformer_config {
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;   // = heads for MHA, 1 for MQA
  std::int64_t head_dim = 0;   // 0: hidden / heads
  std::int64_t ffn = 0;        // MLP intermediate size
  std::int64_t vocab = 0;
  mlp_kind mlp = mlp_kind::swiglu;
  norm_kind norm = norm_kind::rmsnorm;
  position_kind positions = position_kind::rope;
  std::int64_t max_positions = 0;  // learned position embeddings only: rows of the table
  /// Rows of the learned table before position 0 (OPTLearnedPositionalEmbedding adds an offset of 2): a sequence may be
  /// max_positions - position_offset tokens long.
  std::int64_t position_offset = 0;
  /// OPT's word_embed_proj_dim where it differs from the hidden size (OPT-350M: 512): the token embedding and the tied
  /// output layer are this wide, project_in (width -> hidden) follows the lookup and project_out (hidden -> width) comes
  /// before the output layer, both nn.Linear without bias (modeling_opt.py OPTDecoder). 0: the hidden size, no projections.
  std::int64_t embedding_width = 0;
  /// OPT-350M's do_layer_norm_before false (modeling_opt.py OPTDecoderLayer): each LayerNorm after its residual add and
  /// no final norm. A layer keeps what the pre-norm layer keeps: the same tensors' sizes, read at other places.
  bool post_residual_norms = false;
  bool qkv_bias = false;
  bool attention_out_bias = false;
  bool mlp_bias = false;
  bool fused_qkv = false;          // one h x 3h projection module (GPT-2, Megatron) instead of q, k, v
  /// The fused projection's output laid out per head as [q | k | v] (GPT-NeoX's query_key_value: view(b, s, heads, 3d)
  /// then chunk) rather than [all q | all k | all v] (GPT-2's c_attn, Phi-3's qkv_proj).
  bool qkv_per_head = false;
  /// One h x 2f projection for gate and up (Phi-3's gate_up_proj, modeling_phi3.py Phi3MLP), split by chunk(2).
  bool fused_gate_up = false;
  /// transformers' sliding-window attention span in tokens (config.json sliding_window of Mistral, Mixtral and Phi-3;
  /// 0: none). With SDPA it matters once a sequence reaches it: transformers then builds a mask (training/activations.hpp).
  std::int64_t sliding_window = 0;
  /// config.json use_cache: transformers then builds a KV cache in a training forward without gradient
  /// checkpointing (training/activations.hpp attention_layout). zeromem's presets describe no config: false.
  bool use_cache = false;
  /// Dropout config.json sets, applied in model.train(): on the attention probabilities (GPT-2's attn_pdrop; Llama's,
  /// Mistral's, Qwen's and Phi-3's attention_dropout), on both residual branches (GPT-2's and Phi-3's resid_pdrop) and
  /// on the embeddings (GPT-2's embd_pdrop). Only p > 0 matters for memory (a mask per site); activation_config::dropout
  /// adds dropout at all three, as Korthikanti's block has it.
  double attention_dropout = 0.0, residual_dropout = 0.0, embedding_dropout = 0.0;
  /// GELU written as tensor ops (transformers' NewGELUActivation, activation_function "gelu_new": tanh
  /// approximation in Python, activations.py); each op saves its own inputs. false: one fused GELU kernel.
  bool gelu_tensor_ops = false;
  /// GPT-NeoX-20B's "gelu_fast" (transformers activations.py FastGELUActivation): 0.5 x (1 + tanh(x 0.7978845608 (1 +
  /// 0.044715 x x))) as tensor ops, of which autograd keeps seven tensors of the MLP width beside the output.
  bool gelu_fast_ops = false;
  /// transformers' eager attention upcasts the softmax for Llama/Qwen2 (softmax(..., dtype=torch.float32)) and
  /// runs it in the model's dtype for GPT-2 (modeling_gpt2.py eager_attention_forward).
  bool eager_softmax_fp32 = true;
  bool tied_embeddings = false;
  /// Qwen3: an RMSNorm over each head's query and key before RoPE (modeling_qwen3.py Qwen3Attention q_norm, k_norm
  /// of head_dim each).
  bool qk_norm = false;
  /// OLMo-2: q_norm and k_norm over the whole q_proj and k_proj outputs (heads x d and kv_heads x d values per token,
  /// modeling_olmo2.py Olmo2Attention) rather than over each head's d.
  bool qk_norm_whole = false;
  /// Gemma's RMSNorm (modeling_gemma.py GemmaRMSNorm): scales by (1 + weight) in fp32 and casts after, so autograd
  /// keeps the normalised tensor in fp32 and the (1 + weight) vector; LlamaRMSNorm casts first and scales in the
  /// model's dtype. The same norm serves q_norm / k_norm when qk_norm is set.
  bool norm_scale_fp32 = false;
  /// OLMo-2's RMSNorm (modeling_olmo2.py Olmo2RMSNorm): (weight * x_normalised).to(input_dtype), the weight multiply in
  /// fp32 before the cast, so autograd keeps the normalised tensor in fp32 (and no (1 + weight) vector: Gemma's is
  /// norm_scale_fp32). The same norm serves q_norm / k_norm when qk_norm is set.
  bool norm_weight_fp32 = false;
  /// The layer norms and the final norm carry a weight (LayerNorm: and a bias). false: no parameters (OLMo's
  /// OlmoLayerNorm, modular_olmo.py; OPT's layer_norm_elementwise_affine false); autograd keeps the same tensors.
  bool norm_affine = true;
  /// OLMo's OlmoLayerNorm (modular_olmo.py): F.layer_norm(x.to(torch.float32), ...).to(orig_dtype), so autograd keeps the
  /// fp32 copy of the input and fp32 statistics rather than the 16-bit input.
  bool norm_input_fp32 = false;
  /// OLMo's clip_qkv (modular_olmo.py OlmoAttention): q, k and v clamped in place (clamp_); clamp's backward needs the
  /// values before the clamp, so autograd keeps a copy of each projection's output.
  bool clip_qkv = false;
  /// GemmaModel multiplies the embedding output by sqrt(hidden) into a new tensor (modeling_gemma.py); autograd keeps
  /// only the 0-dimensional factor, but without autograd both tensors are alive through the layers (forward.hpp).
  bool scaled_embedding = false;
  /// Gemma-2's sandwich norms (modeling_gemma2.py Gemma2DecoderLayer): post_attention_layernorm and
  /// post_feedforward_layernorm over each branch's output before its residual add, four norms per layer.
  bool sandwich_norms = false;
  /// OLMo-2's post-norm layer (modeling_olmo2.py Olmo2DecoderLayer): no norm before attention or the MLP, which read the
  /// residual stream; post_attention_layernorm and post_feedforward_layernorm over their outputs, two norms a layer.
  bool post_norms = false;
  /// Gemma-2's attn_logit_softcapping (eager attention: tanh(scores / cap) * cap, tanh's output kept) and
  /// final_logit_softcapping (tanh(logits / cap) * cap, tanh's output kept); 0: none.
  double attention_softcap = 0.0, final_logit_softcap = 0.0;
  /// Layers alternate sliding-window and full attention (Gemma-2: 2; Gemma-3's sliding_window_pattern: 6): layer i
  /// has full attention when (i + 1) % N == 0, the others slide. 0: every layer alike.
  std::int64_t sliding_window_pattern = 0;
  /// Gemma-3: the sliding layers rotate with their own base (rope_local_base_freq), so the model holds a second cos/sin
  /// pair while it runs (forward.hpp).
  bool local_rope = false;
  /// OLMo's rotary tables stay fp32 (modeling_olmo.py OlmoRotaryEmbedding, inherited by OLMo-2 and OLMo-3) and
  /// apply_rotary_pos_emb rotates q and k in fp32 before casting back: fp32 temporaries in a forward (forward.hpp); what
  /// autograd keeps is unchanged (the tables are constants).
  bool rope_fp32 = false;
  /// SmolLM3's NoPE layers (modular_smollm3.py SmolLM3Attention: apply_rotary_pos_emb only where
  /// config.no_rope_layers[i] is 1): layer i skips RoPE when (i + 1) % N == 0 (no_rope_layer_interval, 4 by default).
  /// Autograd keeps the same bytes either way (attention keeps q and k as views of the projections instead of the
  /// rotated copies); a forward without autograd skips the rotation's temporaries on those layers (forward.hpp). 0: none.
  std::int64_t nope_period = 0;
  /// Head dimensions RoPE rotates where it rotates part of each head (GPT-NeoX's rotary_pct, Phi's and StableLM's
  /// partial_rotary_factor; transformers modeling_rope_utils.py _compute_default_rope_parameters: dim =
  /// int(head_dim x factor)): the rotary cos and sin tables are that wide. 0: the whole head.
  std::int64_t rotary_dims = 0;
  /// apply_rotary_pos_emb splits each head into rotated and passed parts and joins them with torch.cat (GPT-NeoX, Phi,
  /// StableLM, and Phi-3 even at factor 1: modeling_phi3.py q_embed = torch.cat([..., q_pass], dim=-1)). cat's output is
  /// contiguous in the (b, heads, s, d) order, where Llama's elementwise rotation keeps the projection's token-major
  /// strides: attention kernels that lay out their output like the query then hand back a head-major tensor.
  bool rope_concat = false;
  /// Granite's scalar multipliers (modular_granite.py): GraniteDecoderLayer adds branch * residual_multiplier, the
  /// product a new tensor beside the branch output; GraniteForCausalLM divides the logits by logits_scaling into a
  /// new tensor beside lm_head's output. Autograd keeps only the scalars, so training keeps what Llama's layer keeps;
  /// a forward without autograd holds the products (forward.hpp).
  bool scaled_residual = false;
  bool scaled_logits = false;
  /// GraniteModel multiplies the embedding's output by embedding_multiplier into a new tensor before layer 0
  /// (modular_granite.py). Like Gemma's scaled_embedding it changes no size; it matters where the embedding's own output
  /// is kept (LoRA under full recompute: stage_activations::embedding_output).
  bool embedding_multiplier = false;
  /// Attention and the MLP both read the layer's input: x + attn(ln1(x)) + mlp(ln2(x)) (GPT-NeoX's
  /// use_parallel_residual, modeling_gpt_neox.py GPTNeoXLayer; Phi-1/2's PhiDecoderLayer), instead of x + attn, then + mlp.
  bool parallel_residual = false;
  /// Parallel branches summed as residual + attn + mlp (StableLM's StableLmDecoderLayer), the residual added to the
  /// attention's output first, instead of attn + mlp, then + residual (GPT-NeoX, Phi). Under autocast each 16-bit
  /// branch then gets a cast of its own of the fp32 gradient, where the others share one.
  bool residual_added_first = false;
  /// One norm feeds both parallel branches (Phi's input_layernorm, modeling_phi.py): a layer holds one norm.
  bool shared_layer_norm = false;
  /// The output layer carries a bias of vocab elements (Phi's lm_head = nn.Linear(hidden, vocab, bias=True)).
  bool lm_head_bias = false;
  moe_config moe{};
  vision_config vision{};

  constexpr std::int64_t head_size() const { return head_dim > 0 ? head_dim : detail::quotient(hidden, heads); }
  /// Width of the rotary cos and sin tables: inv_freq holds every other of the rotated dimensions and
  /// cat((freqs, freqs)) doubles them (LlamaRotaryEmbedding.forward), 2 ceil(dims / 2).
  constexpr std::int64_t rotary_width() const {
    const std::int64_t dims = rotary_dims > 0 ? rotary_dims : head_size();
    return 2 * ((dims + 1) / 2);
  }
  /// Width of the token embedding and of the output layer's input.
  constexpr std::int64_t token_width() const { return embedding_width > 0 ? embedding_width : hidden; }
  constexpr bool projected_embedding() const { return embedding_width > 0 && embedding_width != hidden; }
};

constexpr void validate(const transformer_config& m) {
  detail::require_positive(m.hidden, "the hidden size");
  detail::require_positive(m.layers, "the number of layers");
  detail::require_positive(m.heads, "the number of attention heads");
  detail::require_positive(m.kv_heads, "the number of key/value heads");
  detail::require_positive(m.ffn, "the MLP intermediate size");
  detail::require_positive(m.vocab, "the vocabulary size");
  if (m.head_dim < 0) detail::fail_value("the head dimension cannot be negative", m.head_dim, "pass 0 for hidden / heads");
  if (m.head_dim == 0 && !detail::divides(m.heads, m.hidden))
    detail::fail_value("the hidden size must be a multiple of the heads", m.hidden, "or give the head dimension");
  if (m.kv_heads > m.heads || !detail::divides(m.kv_heads, m.heads))
    detail::fail_value("the heads must be a multiple of the key/value heads", m.kv_heads,
                       "use kv_heads = heads (MHA), a divisor of heads (GQA) or 1 (MQA)");
  if (m.positions == position_kind::learned) detail::require_positive(m.max_positions, "max_positions for learned positions");
  if (m.embedding_width < 0) detail::fail_value("the embedding width cannot be negative", m.embedding_width, "pass 0 for the hidden size");
  if (m.post_residual_norms && (m.norm != norm_kind::layernorm || m.parallel_residual || m.post_norms || m.sandwich_norms))
    detail::fail("norms after the residual adds (OPT-350M) are modelled for LayerNorm layers in sequence; pass norm layernorm without other layouts");
  if (m.position_offset < 0 || (m.positions == position_kind::learned && m.position_offset >= m.max_positions))
    detail::fail_value("the learned positions' offset must be >= 0 and below max_positions", m.position_offset, "pass 0 (OPT: 2)");
  for (const double p : {m.attention_dropout, m.residual_dropout, m.embedding_dropout})
    if (!(p >= 0.0 && p < 1.0)) detail::fail_value("a dropout probability must be in [0, 1)", p, "pass 0 for none");
  if (m.sliding_window < 0)
    detail::fail_value("the sliding window cannot be negative", m.sliding_window, "pass 0 for full attention");
  for (const double cap : {m.attention_softcap, m.final_logit_softcap})
    if (!(cap >= 0.0 && cap < 1e300)) detail::fail_value("a logit soft-cap must be a finite number >= 0", cap, "pass 0 for none");
  if (m.sliding_window_pattern < 0 || (m.sliding_window_pattern > 0 && m.sliding_window == 0))
    detail::fail_value("a sliding-window pattern needs a sliding window and a period >= 1", m.sliding_window_pattern,
                       "pass 0 when every layer is alike");
  if (m.norm_scale_fp32 && m.norm != norm_kind::rmsnorm) detail::fail("a norm that scales in fp32 (Gemma's) is an RMSNorm; pass norm rmsnorm");
  if (m.norm_weight_fp32 && (m.norm != norm_kind::rmsnorm || m.norm_scale_fp32))
    detail::fail("a norm that multiplies its weight in fp32 (OLMo-2's) is an RMSNorm without Gemma's (1 + weight); pass norm rmsnorm only");
  if (m.clip_qkv && m.fused_qkv) detail::fail("q, k and v clamped in place (OLMo's clip_qkv) are modelled for separate projections; drop fused_qkv");
  if (m.norm_input_fp32 && m.norm != norm_kind::layernorm)
    detail::fail("a norm over an fp32 copy of its input (OLMo's OlmoLayerNorm) is a LayerNorm; pass norm layernorm");
  if (m.nope_period < 0 || (m.nope_period > 0 && m.positions != position_kind::rope))
    detail::fail_value("layers without RoPE need rotary positions and a period >= 1", m.nope_period,
                       "pass 0 when every layer rotates");
  if (m.rotary_dims < 0 || m.rotary_dims > m.head_size() || (m.rotary_dims > 0 && m.positions != position_kind::rope))
    detail::fail_value("the rotated head dimensions must be between 1 and the head dimension, with rotary positions", m.rotary_dims,
                       "pass 0 when RoPE rotates whole heads");
  if (m.qk_norm_whole && !m.qk_norm) detail::fail("q_norm / k_norm over the whole projection needs qk_norm; set qk_norm too");
  if (m.post_norms && (m.sandwich_norms || m.parallel_residual))
    detail::fail("post-norm layers (OLMo-2) have neither pre-norms (sandwich norms) nor parallel branches; pass one layout");
  if (m.scaled_residual && (m.post_norms || m.sandwich_norms || m.parallel_residual))
    detail::fail("a scaled residual branch (Granite's) is modelled on Llama's pre-norm layer; drop the post, sandwich or parallel layout");
  if (m.parallel_residual && (m.norm != norm_kind::layernorm || m.sandwich_norms))
    detail::fail("parallel attention and MLP branches are modelled with LayerNorm and no sandwich norms (GPT-NeoX, Phi); pass norm layernorm");
  if (m.qkv_per_head && (!m.fused_qkv || m.kv_heads != m.heads))
    detail::fail("a per-head [q | k | v] layout is a fused qkv projection with as many key/value heads as heads; set fused_qkv");
  if (m.residual_added_first && !m.parallel_residual)
    detail::fail("the residual added before the parallel branches' sum needs parallel branches; set parallel_residual too");
  if (m.shared_layer_norm && !m.parallel_residual)
    detail::fail("one norm shared by attention and the MLP needs parallel branches; set parallel_residual too");
  if ((m.gelu_tensor_ops || m.gelu_fast_ops) && m.mlp != mlp_kind::gelu) detail::fail("GELU written as tensor ops is a GELU MLP's activation; pass mlp gelu");
  if (m.gelu_tensor_ops && m.gelu_fast_ops) detail::fail("an MLP has one GELU: gelu_new's tensor ops or gelu_fast's, not both");
  if (m.lm_head_bias && m.tied_embeddings) detail::fail("an output-layer bias is modelled on an untied output layer; untie the embeddings");
  if (m.fused_gate_up && (m.mlp != mlp_kind::swiglu || m.moe.experts > 0))
    detail::fail("a fused gate_up projection needs a dense gated MLP (swiglu without experts)");
  if (m.moe.experts < 0 || (m.moe.experts > 0 && (m.moe.top_k <= 0 || m.moe.top_k > m.moe.experts || m.moe.expert_ffn <= 0)))
    detail::fail("a mixture of experts needs experts > 0, 1 <= top_k <= experts and expert_ffn > 0");
  if (m.moe.shared_experts < 0 || (m.moe.shared_experts > 0 && m.moe.experts == 0))
    detail::fail_value("shared experts must be 0, or at least 1 next to routed experts", m.moe.shared_experts,
                       "set moe.experts, or pass 0 shared experts");
  if (m.moe.shared_expert_gate && m.moe.shared_experts == 0) detail::fail("a shared-expert gate needs shared experts; set moe.shared_experts");
  if (m.vision.blocks < 0) detail::fail("the vision tower's block count cannot be negative");
  if (m.vision.blocks > 0) {
    detail::require_positive(m.vision.hidden, "the vision hidden size");
    detail::require_positive(m.vision.mlp_hidden, "the vision MLP size");
    detail::require_positive(m.vision.heads, "the vision heads");
    detail::require_positive(m.vision.out_hidden, "the vision merger's output size");
    detail::require_positive(m.vision.in_channels, "the vision input channels");
    detail::require_positive(m.vision.temporal_patch, "the vision temporal patch size");
    detail::require_positive(m.vision.patch, "the vision patch size");
    detail::require_positive(m.vision.spatial_merge, "the vision spatial merge size");
  }
}

/// Whether decoder layer i attends over the whole sequence: every layer without a sliding window; with a pattern of N
/// (Gemma-2: 2, Gemma-3: 6), the layers with (i + 1) % N == 0 (modeling_gemma2.py: is_sliding = not bool(layer_idx % 2)).
constexpr bool full_attention_layer(const transformer_config& m, std::int64_t i) {
  return m.sliding_window == 0 || (m.sliding_window_pattern > 0 && (i + 1) % m.sliding_window_pattern == 0);
}

/// Whether the model's learned positions are OPT's (modeling_opt.py OPTLearnedPositionalEmbedding, its offset rows
/// first): OPTDecoder computes them by cumsum over the attention mask, one row a sequence, where GPT-2's wpe (no offset)
/// takes one row for the whole batch.
constexpr bool positions_per_sequence(const transformer_config& m) { return m.positions == position_kind::learned && m.position_offset > 0; }

/// Bytes of the int64 indices a learned position embedding keeps for its weight's gradient (derivatives.yaml embedding:
/// indices) over b sequences of s tokens: OPT's position_ids + offset, a row a sequence (8 s b); GPT-2's and Megatron's
/// one row for the batch (8 s).
constexpr std::int64_t learned_position_id_bytes(const transformer_config& m, std::int64_t s, std::int64_t b) {
  return detail::checked_product(8, s, positions_per_sequence(m) ? b : 1);
}

/// Whether decoder layer i rotates q and k: rotary positions, unless layer i is one of SmolLM3's NoPE layers
/// ((i + 1) % nope_period == 0; SmolLM3Config: no_rope_layers[i] = int((i + 1) % no_rope_layer_interval != 0)).
constexpr bool rope_layer(const transformer_config& m, std::int64_t i) {
  return m.positions == position_kind::rope && (m.nope_period == 0 || (i + 1) % m.nope_period != 0);
}

/// Megatron-LM's tensor-parallel rules (arguments.py: num_attention_heads % tp == 0, and num_query_groups % tp == 0
/// or, as vLLM replicates KV heads, tp a multiple of them; ColumnParallelLinear: ffn % tp == 0).
constexpr void validate_tensor_parallel(const transformer_config& m, std::int64_t tp) {
  detail::require_positive(tp, "the tensor-parallel degree");
  detail::require_heads_split(m.heads, tp);
  detail::require_kv_heads_split(m.kv_heads, tp);
  if (!detail::divides(tp, m.ffn)) detail::fail_split("MLP channels", m.ffn, tp, "tp");
}

/// The linear modules LoRA can adapt, by their Hugging Face names. PEFT matches target_modules against the last
/// component of each module's name (peft/tuners/tuners_utils.py check_target_module_exists), so one name adapts
/// every module so called: gate_proj adapts every expert's and the vision tower's gated MLP too. On a fused qkv
/// projection (GPT-2's c_attn), q_proj/k_proj/v_proj adapt its slices as loralib's MergedLinear does (the LoRA
/// paper's code, loralib/layers.py enable_lora); qkv adapts the fused module whole.
enum class lora_module : std::uint16_t {
  none = 0,  // linears matched only by all-linear: the MoE router, the vision merger
  q_proj = 1 << 0,
  k_proj = 1 << 1,
  v_proj = 1 << 2,
  o_proj = 1 << 3,
  gate_proj = 1 << 4,
  up_proj = 1 << 5,
  down_proj = 1 << 6,
  fc1 = 1 << 7,
  fc2 = 1 << 8,
  qkv = 1 << 9,
  proj = 1 << 10,       // the vision tower's attention output
  gate_up_proj = 1 << 11,  // Phi-3's fused gate and up projection
  all_linear = 1 << 15  // PEFT's "all-linear": every nn.Linear but the output layer (tuners_utils.py _maybe_include_all_linear_layers)
};

constexpr std::uint16_t bit(lora_module m) { return static_cast<std::uint16_t>(m); }

namespace detail {
/// A decoder layer's MLP linears (dense or each expert's), as LoRA names them.
constexpr bool is_mlp_module(lora_module r) {
  return r == lora_module::gate_proj || r == lora_module::up_proj || r == lora_module::gate_up_proj || r == lora_module::fc1 ||
         r == lora_module::down_proj || r == lora_module::fc2;
}
}  // namespace detail

/// Where a module's parameters count (the fields of parameter_counts). attention, mlp and layer_norms are per
/// decoder layer; the others are counted once in the model.
enum class module_group : unsigned { embedding, position_embedding, attention, mlp, layer_norms, final_norm, lm_head, vision };
static_assert(static_cast<unsigned>(module_group::vision) == 7, "count_parameters sums the 8 groups in an array");

/// One kind of module that holds parameters, as Hugging Face transformers builds it: its weight's shape S in
/// PyTorch order (nn.Linear [out, in], nn.Embedding [rows, dim], Conv3d [out, in, t, p, p], a norm [n]) kept as
/// rows = prod(S[:-1]), last = S[-1] and prefix = prod(S[:-2]); its bias elements (a LayerNorm's bias too); and how
/// many of them a decoder layer holds (per-layer groups) or the model holds.
struct module_shape {
  module_group group;
  lora_module role;  // an nn.Linear's name as LoRA matches it; none for the router, the merger and non-linear modules
  bool linear;       // an nn.Linear [out = rows, in = last] (the output layer is not: all-linear leaves it out)
  bool matrix;       // the weight has two or more dimensions (a norm's is a vector: rows 1)
  std::int64_t rows, last, prefix;
  std::int64_t bias;
  std::int64_t count;
  std::int64_t dim0 = 0;  // S[0] where a weight has three or more dimensions (FSDP2 chunks dim 0); 0: rows, or last for a vector

  /// The weight's first dimension, which FSDP2 chunks over the ranks.
  constexpr std::int64_t first_dimension() const { return dim0 > 0 ? dim0 : matrix ? rows : last; }

  constexpr std::int64_t weight_elements() const { return detail::checked_mul(rows, last, "a parameter count"); }
  /// attention, mlp and layer_norms modules are in every decoder layer; the other groups are in the model once.
  constexpr bool in_every_layer() const {
    return group == module_group::attention || group == module_group::mlp || group == module_group::layer_norms;
  }
  /// Parameters of one module: weight and bias (what DeepSpeed's largest_layer_params compares).
  ZEROMEM_ALWAYS_INLINE constexpr std::int64_t elements() const { return detail::checked_add(weight_elements(), bias, "a parameter count"); }
  /// Adafactor's statistics of the weight (transformers optimization.py _get_options: factored when it has two or
  /// more dimensions): rows prod(S[:-1]) + columns prod(S[:-2]) x S[-1]; a vector keeps every value.
  constexpr std::int64_t factored_statistics() const {
    return matrix ? detail::checked_add(rows, detail::checked_mul(prefix, last)) : weight_elements();
  }
};

namespace detail {
/// transformers 5's MoE parameters of a decoder layer: the router's weight (MixtralTopKRouter, registered first), then
/// the experts' two 3D parameters, [gate | up] (or fc1) and down. Out of line and cold: dense models never run it, and
/// kept apart it leaves the hot walks as small as they were.
template <class F>
ZEROMEM_COLD constexpr void for_each_stacked_expert_tensor(const transformer_config& m, F& f) {
  const std::int64_t e = m.moe.experts, h = m.hidden;
  const std::int64_t in = m.mlp == mlp_kind::swiglu ? checked_product(2, m.moe.expert_ffn) : m.moe.expert_ffn;
  f(module_shape{module_group::mlp, lora_module::none, false, true, e, h, 1, m.moe.router_bias ? e : 0, 1});
  f(module_shape{module_group::mlp, lora_module::none, false, true, checked_product(e, in), h, e, m.mlp_bias ? checked_product(e, in) : 0, 1, e});
  f(module_shape{module_group::mlp, lora_module::none, false, true, checked_product(e, h), m.moe.expert_ffn, e, m.mlp_bias ? checked_product(e, h) : 0, 1, e});
}
}  // namespace detail

/// Every module of the architecture that holds parameters: the one walk that parameter counts, Adafactor's state,
/// LoRA adapters, quantized storage and LoRA's saved inputs are computed from.
template <class F>
constexpr void for_each_module(const transformer_config& m, F&& f) {
  using detail::checked_product, detail::checked_sum;
  const std::int64_t h = m.hidden, d = m.head_size(), q_out = checked_product(m.heads, d), kv_out = checked_product(m.kv_heads, d);
  const auto linear = [&f](module_group g, lora_module role, std::int64_t in, std::int64_t out, bool bias, std::int64_t count) ZEROMEM_ALWAYS_INLINE {
    f(module_shape{g, role, true, true, out, in, 1, bias ? out : 0, count});
  };
  const auto table = [&f](module_group g, std::int64_t rows, std::int64_t dim) ZEROMEM_ALWAYS_INLINE {
    f(module_shape{g, lora_module::none, false, true, rows, dim, 1, 0, 1});
  };
  const auto norm = [&f](module_group g, norm_kind k, std::int64_t n, std::int64_t count) ZEROMEM_ALWAYS_INLINE {  // LayerNorm: weight and bias
    f(module_shape{g, lora_module::none, false, false, 1, n, 1, k == norm_kind::layernorm ? n : 0, count});
  };
  const std::int64_t w = m.token_width();
  table(module_group::embedding, m.vocab, w);
  // OPT-350M's project_in after the lookup (nn.Linear(word_embed_proj_dim, hidden, bias=False)); project_out is the
  // output side's.
  if (m.projected_embedding()) f(module_shape{module_group::embedding, lora_module::none, false, true, h, w, 1, 0, 1});
  if (m.positions == position_kind::learned) table(module_group::position_embedding, m.max_positions, h);
  // Attention: q, k, v (or one fused qkv module) and the output projection.
  if (m.fused_qkv) linear(module_group::attention, lora_module::qkv, h, checked_sum(q_out, kv_out, kv_out), m.qkv_bias, 1);
  else {
    linear(module_group::attention, lora_module::q_proj, h, q_out, m.qkv_bias, 1);
    linear(module_group::attention, lora_module::k_proj, h, kv_out, m.qkv_bias, 1);
    linear(module_group::attention, lora_module::v_proj, h, kv_out, m.qkv_bias, 1);
  }
  linear(module_group::attention, lora_module::o_proj, q_out, h, m.attention_out_bias, 1);
  if (m.qk_norm && m.qk_norm_whole) {  // OLMo-2's q_norm and k_norm over the whole projections
    norm(module_group::attention, norm_kind::rmsnorm, q_out, 1);
    norm(module_group::attention, norm_kind::rmsnorm, kv_out, 1);
  } else if (m.qk_norm) {
    norm(module_group::attention, norm_kind::rmsnorm, d, 2);  // Qwen3's q_norm and k_norm
  }
  // MLP: GELU has fc1 and fc2; SwiGLU has gate, up and down (Shazeer 2020, "GLU Variants Improve Transformer").
  // A mixture of experts holds experts + shared experts of them and a router h -> experts.
  const bool moe = m.moe.experts > 0;
  const bool stacked = moe && m.moe.stacked;
  if (stacked) detail::for_each_stacked_expert_tensor(m, f);
  const std::int64_t mlps = moe ? (stacked ? m.moe.shared_experts : checked_sum(m.moe.experts, m.moe.shared_experts)) : 1;
  const std::int64_t ffn = moe ? m.moe.expert_ffn : m.ffn;
  if (mlps > 0) {  // the dense MLP, transformers 4's experts, or the shared experts (nn.Linear in either)
    if (m.fused_gate_up) {
      linear(module_group::mlp, lora_module::gate_up_proj, h, checked_product(2, ffn), m.mlp_bias, mlps);
      linear(module_group::mlp, lora_module::down_proj, ffn, h, m.mlp_bias, mlps);
    } else if (m.mlp == mlp_kind::swiglu) {
      linear(module_group::mlp, lora_module::gate_proj, h, ffn, m.mlp_bias, mlps);
      linear(module_group::mlp, lora_module::up_proj, h, ffn, m.mlp_bias, mlps);
      linear(module_group::mlp, lora_module::down_proj, ffn, h, m.mlp_bias, mlps);
    } else {
      linear(module_group::mlp, lora_module::fc1, h, ffn, m.mlp_bias, mlps);
      linear(module_group::mlp, lora_module::fc2, ffn, h, m.mlp_bias, mlps);
    }
  }
  if (moe && !stacked) linear(module_group::mlp, lora_module::none, h, m.moe.experts, m.moe.router_bias, 1);
  if (moe && m.moe.shared_expert_gate) linear(module_group::mlp, lora_module::none, h, 1, false, 1);  // Qwen2-MoE's h -> 1
  // Gemma-2: + the two post-branch norms; Phi: one norm feeds both branches; OLMo-2: the two post-branch norms only.
  if (m.norm_affine) {  // OlmoLayerNorm holds no parameters
    norm(module_group::layer_norms, m.norm, h, m.sandwich_norms ? 4 : m.shared_layer_norm ? 1 : 2);
    if (!m.post_residual_norms) norm(module_group::final_norm, m.norm, h, 1);  // OPT-350M has none
  }
  if (m.projected_embedding()) f(module_shape{module_group::lm_head, lora_module::none, false, true, w, h, 1, 0, 1});  // project_out
  if (!m.tied_embeddings) f(module_shape{module_group::lm_head, lora_module::none, false, true, m.vocab, w, 1, m.lm_head_bias ? m.vocab : 0, 1});
  // Vision tower (Qwen2.5-VL modeling_qwen2_5_vl.py): Conv3d patch embed without bias, blocks of norm1, qkv (3C),
  // proj, norm2, MLP; merger: norm(C), Linear(C m^2, C m^2), GELU, Linear(C m^2, out).
  if (m.vision.blocks > 0) {
    const vision_config& v = m.vision;
    const std::int64_t c = v.hidden, merged = checked_product(c, v.spatial_merge, v.spatial_merge);
    const std::int64_t conv_prefix = checked_product(c, v.in_channels, v.temporal_patch);  // [C, in, t, p, p]
    f(module_shape{module_group::vision, lora_module::none, false, true, checked_product(conv_prefix, v.patch), v.patch, conv_prefix, 0, 1});
    linear(module_group::vision, lora_module::qkv, c, checked_product(3, c), v.biases, v.blocks);
    linear(module_group::vision, lora_module::proj, c, c, v.biases, v.blocks);
    if (v.gated_mlp) {
      linear(module_group::vision, lora_module::gate_proj, c, v.mlp_hidden, v.biases, v.blocks);
      linear(module_group::vision, lora_module::up_proj, c, v.mlp_hidden, v.biases, v.blocks);
      linear(module_group::vision, lora_module::down_proj, v.mlp_hidden, c, v.biases, v.blocks);
    } else {
      linear(module_group::vision, lora_module::fc1, c, v.mlp_hidden, v.biases, v.blocks);
      linear(module_group::vision, lora_module::fc2, v.mlp_hidden, c, v.biases, v.blocks);
    }
    norm(module_group::vision, v.norm, c, checked_product(2, v.blocks));
    norm(module_group::vision, v.norm, c, 1);
    linear(module_group::vision, lora_module::none, merged, merged, true, 1);
    linear(module_group::vision, lora_module::none, merged, v.out_hidden, true, 1);
  }
}

namespace detail {
/// The vision tower's patch merger, as for_each_module walks it: ln_q over C (RMSNorm: a weight; Qwen2-VL's
/// LayerNorm: weight and bias), Linear(C m^2, C m^2) and Linear(C m^2, out), both with biases.
constexpr elements vision_merger_parameters(const vision_config& v) {
  const std::int64_t merged = checked_product(v.hidden, v.spatial_merge, v.spatial_merge);
  return elements_of(checked_sum(v.norm == norm_kind::rmsnorm ? v.hidden : checked_product(2, v.hidden), checked_product(merged, merged),
                                 merged, checked_product(merged, v.out_hidden), v.out_hidden));
}
}  // namespace detail

/// One kind of linear module: in x out weight (plus bias), `count` of them per decoder layer (vision: in the tower).
struct linear_shape {
  lora_module role;
  std::int64_t in, out, count;
  bool bias;
  bool vision;
};

/// Every nn.Linear of the architecture (for_each_module's linear modules): what LoRA adapts and what is quantized.
template <class F>
constexpr void for_each_linear(const transformer_config& m, F&& f) {
  for_each_module(m, [&f](const module_shape& s) {
    if (s.linear) f(linear_shape{s.role, s.last, s.rows, s.count, s.bias > 0, s.group == module_group::vision});
  });
}

/// Parameter counts. Per-layer figures are for one decoder layer; totals count every layer once.
struct parameter_counts {
  elements embedding{};          // vocab x hidden (OPT-350M: vocab x word_embed_proj_dim and project_in)
  elements position_embedding{}; // learned positions only
  elements attention{};          // per layer: q, k, v, o projections with their biases
  elements mlp{};                // per layer: dense MLP, or experts + shared experts + router
  elements norms{};              // per layer: the two norms (four with sandwich norms)
  elements layer{};              // per layer: attention + mlp + norms
  elements final_norm{};
  elements lm_head{};            // 0 when tied to the embedding (OPT-350M: project_out)
  elements vision{};             // the whole vision tower with its merger
  elements total{};
  elements language_model{};     // total without the vision tower
  elements largest_layer{};      // most parameters held directly by one module (DeepSpeed's largest_layer_params)
  elements largest_tensor{};     // most elements of one parameter (with an nn.Linear's bias: autograd makes both at once)
};

namespace detail {
constexpr std::int64_t norm_params(norm_kind k, std::int64_t n) { return k == norm_kind::layernorm ? checked_mul(2, n) : n; }
constexpr std::int64_t max_of(std::int64_t a, std::int64_t b) { return a > b ? a : b; }
/// q_norm and k_norm weights of one layer: Qwen3's two of head_dim, OLMo-2's heads x d and kv_heads x d, or none.
/// Elements of transformers 5's experts module in one decoder layer: gate_up_proj [E, 2F, H] (fc1 [E, F, H] without
/// a gate) and down_proj [E, H, F], with their biases where the MLP has them.
constexpr std::int64_t stacked_experts_elements(const transformer_config& m) {
  const std::int64_t in = m.mlp == mlp_kind::swiglu ? checked_mul(2, m.moe.expert_ffn) : m.moe.expert_ffn;
  const std::int64_t weights = checked_mul(checked_add(in, m.moe.expert_ffn), m.hidden);
  return checked_mul(m.moe.experts, m.mlp_bias ? checked_add(weights, checked_add(in, m.hidden)) : weights);
}
constexpr std::int64_t qk_norm_parameters(const transformer_config& m) {
  if (!m.qk_norm) return 0;
  const std::int64_t d = m.head_size();
  return m.qk_norm_whole ? checked_mul(checked_add(m.heads, m.kv_heads), d) : checked_mul(2, d);
}
}  // namespace detail

namespace detail {
/// One decoder layer's modules as DeepSpeed ZeRO-3's module trace meets them in forward: the layer norms together
/// first (the input norm's place), then for_each_module's attention and MLP in order; transformers 5's experts module
/// (gate_up_proj and down_proj, the two 3D parameters) as one. zero3_retained_parameters walks them.
struct layer_module_order {
  struct kind {
    std::int64_t elements = 0, count = 0;  // one module's weight and bias, and how many of it a layer holds
    std::int64_t persistent = 0;           // of one module, on a tensor-parallel rank: its tensors DeepSpeed keeps whole
  };
  std::array<kind, 16> kinds{};  // [0]: the norms, empty without norm weights
  int n = 1;
  std::int64_t largest = 0;  // the largest module's elements
  bool after_3d = false;     // (while recording: the last module was gate_up_proj)
  // DeepSpeed ZeRO-3's persistent parameters (ds_persist: a tensor of at most stage3_param_persistence_threshold
  // elements on its rank stays gathered; runtime/zero/parameter_offload.py mark_persistent_parameters). Set before the
  // walk; 0 marks none.
  std::int64_t persistence_threshold = 0;
  std::int64_t tp = 1;
  std::int64_t outside[8] = {};       // the persistent elements of the groups outside the layers, by module_group
  std::int64_t layer_persistent = 0;  // a layer's persistent elements on a tensor-parallel rank
  std::int64_t largest_resident = 0;  // the most one module of a layer holds beyond its persistent tensors, on that rank

  ZEROMEM_ALWAYS_INLINE constexpr void record(const module_shape& s) {
    const std::int64_t w = s.weight_elements(), e = checked_add(w, s.bias, "a parameter count");
    // Each tensor on a tensor-parallel rank (split over tp, as zero3_retained splits); a module's persistent elements
    // are at most its own, whose products with the counts are checked, so their sums need no check of their own.
    // (threshold 0 marks none: every tensor has elements, and an absent bias adds 0)
    const std::int64_t wt = ceil_div(w, tp, assume_valid), bt = ceil_div(s.bias, tp, assume_valid);
    const std::int64_t p = (wt <= persistence_threshold ? wt : 0) + (bt <= persistence_threshold ? bt : 0);
    if (!s.in_every_layer()) {
      if (p > 0) outside[static_cast<unsigned>(s.group) & 7u] += p * s.count;
      return;
    }
    layer_persistent += p * s.count;
    if (s.group == module_group::layer_norms) {
      kinds[0] = {checked_add(kinds[0].elements, checked_mul(e, s.count)), 1, kinds[0].persistent + p * s.count};
    } else if ((s.dim0 > 0 && after_3d) || n == static_cast<int>(kinds.size())) {
      // down_proj joins gate_up_proj's module; past the list's 16 kinds (more than any layer zeromem models) the rest
      // join the last as one module, which keeps the layer's total
      kind& last = kinds[static_cast<std::size_t>(n - 1)];
      last = {checked_add(checked_mul(last.elements, last.count), checked_mul(e, s.count)), 1, last.persistent * last.count + p * s.count};
      largest = max_of(largest, last.elements);
      largest_resident = max_of(largest_resident, ceil_div(last.elements, tp, assume_valid) - last.persistent);
    } else {
      kinds[static_cast<std::size_t>(n++)] = {e, s.count, p};
      largest_resident = max_of(largest_resident, ceil_div(e, tp, assume_valid) - p);
    }
    largest = max_of(largest, e);
    after_3d = s.dim0 > 0 && !after_3d;
  }
};

/// The counts, from one walk over the modules (for_each_module); with `order`, a decoder layer's modules recorded too.
constexpr parameter_counts count_parameters_unchecked(const transformer_config& m, layer_module_order* order = nullptr) {
  // Sums by group; per-layer groups for one decoder layer.
  std::int64_t sum[8] = {}, largest = 0;  // indexed by module_group (an array: a chain of ifs per module costs more)
  for_each_module(m, [&](const module_shape& s) ZEROMEM_ALWAYS_INLINE {
    const std::int64_t one = s.elements();
    std::int64_t& g = sum[static_cast<unsigned>(s.group) & 7u];
    g = checked_add(g, s.count == 1 ? one : checked_mul(one, s.count, "a parameter count"), "a parameter count");
    largest = max_of(largest, one);
    if (order != nullptr) order->record(s);
  });
  const std::int64_t largest_tensor = largest;
  // DeepSpeed's largest_layer_params sums a module's own parameters (m.parameters(recurse=False)): transformers 5's
  // experts module holds gate_up_proj and down_proj together.
  if (m.moe.experts > 0 && m.moe.stacked) largest = max_of(largest, stacked_experts_elements(m));
  const std::int64_t embedding = sum[0], positions = sum[1], attention = sum[2], mlp = sum[3], norms = sum[4], final_norm = sum[5],
                     lm_head = sum[6], vision = sum[7];
  const elements layer = elements_of(attention) + elements_of(mlp) + elements_of(norms);
  const elements language_model =
      elements_of(embedding) + elements_of(positions) + layer * m.layers + elements_of(final_norm) + elements_of(lm_head);
  // Built whole at the end rather than cleared and filled (clearing the result first costs more than the sums).
  return parameter_counts{elements_of(embedding), elements_of(positions), elements_of(attention), elements_of(mlp),
                          elements_of(norms), layer, elements_of(final_norm), elements_of(lm_head), elements_of(vision),
                          language_model + elements_of(vision), language_model, elements_of(largest), elements_of(largest_tensor)};
}
}  // namespace detail
/// The most parameters one module of a decoder layer holds (weight and bias), as largest_layer counts them.
constexpr elements largest_layer_module(const transformer_config& m) {
  std::int64_t largest = 0;
  for_each_module(m, [&](const module_shape& s) {
    if (s.in_every_layer()) largest = detail::max_of(largest, s.elements());
  });
  return elements_of(largest);
}
/// The highest moment of a for-loop optimizer over model.parameters() (torch/optim's _single_tensor_* functions), in
/// elements: the parameters in transformers' registration order, each weight before its bias (the embedding, OPT-350M's
/// project_in and the learned positions; each decoder layer's attention, MLP and norms in for_each_module's order;
/// the final norm, project_out and the output layer; the vision tower is not walked), each tensor's local size
/// ceil(S[0] / ranks) x n / S[0] (FSDP2's dim-0 chunk, padded to chunk 0's size: _fsdp_param.py _init_sharded_param;
/// 1 rank: whole). For consecutive tensors p, c: max(current x c + carried x p,
/// early x c + early_carried x p) (optimizer_traits::forloop_carried: a local name of the last iteration alive until
/// reassigned). Frozen embeddings (and a frozen output layer) are not the optimizer's and are skipped.
namespace detail {
/// model.parameters() as a for-loop optimizer steps them (forloop_moment_elements): f(local elements, the module, a
/// weight?) for each tensor, a repeated module twice, the layer's modules in two passes where there are two layers.
template <class F>
constexpr void for_each_stepped_tensor(const transformer_config& m, bool embeddings_train, bool head_trains, std::int64_t ranks, F&& f) {
  const auto visit = [&](std::int64_t n, std::int64_t first_dimension, const module_shape& s, bool weight) {
    if (ranks > 1) n = checked_mul(ceil_div(first_dimension, ranks), n / first_dimension);  // a padded dim-0 chunk
    f(n, s, weight);
  };
  // A module repeated count times (a layer's norms, experts) is consecutive tensors of one size: two repeats hold
  // every pair it makes.
  const auto module = [&](const module_shape& s) {
    for (std::int64_t r = 0; r < (s.count < 2 ? s.count : 2); ++r) {
      visit(s.weight_elements(), s.first_dimension(), s, true);
      if (s.bias > 0) visit(s.bias, s.bias, s, false);
    }
  };
  // Two passes over the layer's modules: the second sees the step from one layer's last tensor to the next's first.
  const std::int64_t passes = m.layers > 1 ? 2 : 1;
  for (std::int64_t pass = 0; pass < passes; ++pass) {
    for_each_module(m, [&](const module_shape& s) {
      const bool last = pass + 1 == passes;
      if (s.in_every_layer()) module(s);
      else if (pass == 0 && (s.group == module_group::embedding || s.group == module_group::position_embedding)) {
        if (embeddings_train) module(s);
      } else if (last && s.group == module_group::final_norm) {
        module(s);
      } else if (last && s.group == module_group::lm_head) {
        if (head_trains) module(s);
      }
    });
  }
}
}  // namespace detail

constexpr std::int64_t forloop_moment_elements(const transformer_config& m, bool embeddings_train, bool head_trains, std::int64_t ranks,
                                               std::int64_t current, std::int64_t carried, std::int64_t early_carried, std::int64_t early) {
  using detail::checked_add, detail::checked_mul;
  std::int64_t previous = 0, peak = 0;
  detail::for_each_stepped_tensor(m, embeddings_train, head_trains, ranks, [&](std::int64_t n, const module_shape&, bool) {
    const std::int64_t late = checked_add(checked_mul(current, n), checked_mul(carried, previous));
    const std::int64_t first = checked_add(checked_mul(early, n), checked_mul(early_carried, previous));
    peak = detail::max_of(peak, detail::max_of(late, first));
    previous = n;
  });
  return peak;
}

/// Adafactor's column statistic of a matrix, torch.norm(grad, dim=-2) (torch/optim/_adafactor.py
/// _single_tensor_adafactor), sums its rows on CUDA's reduction kernel, whose staging buffer (cuda_sum_staging_bytes:
/// the matrix's columns as outputs, its local rows as inputs) stands beside the previous parameter's `update`, which
/// its local name holds until reassigned (carried_bytes per element of that parameter): the highest such moment over
/// the parameters in order, in bytes. A 3D expert weight [E, R, C] reduces its middle dimension: the reduced dimension
/// comes first in the kernel's iterator, so it is the same launch over E x C outputs of R inputs (its local E under FSDP2).
constexpr std::int64_t adafactor_norm_staging_bytes(const transformer_config& m, bool embeddings_train, bool head_trains, std::int64_t ranks,
                                                    std::int64_t carried_bytes, const cuda_multiprocessors& sm) {
  std::int64_t previous = 0, peak = 0;
  detail::for_each_stepped_tensor(m, embeddings_train, head_trains, ranks, [&](std::int64_t n, const module_shape& s, bool weight) {
    if (weight && s.matrix) {
      const std::int64_t columns = s.last;
      const std::int64_t reduced = s.prefix == 1 ? n / columns : s.rows / s.prefix;  // a 2D shard's local rows; an expert's R
      const std::int64_t outputs = n / reduced;                                          // C, or the local E x C
      peak = detail::max_of(peak, detail::checked_add(detail::checked_mul(carried_bytes, previous), cuda_sum_staging_bytes(outputs, reduced, sm)));
    }
    previous = n;
  });
  return peak;
}

constexpr parameter_counts count_parameters(const transformer_config& m) {
  validate(m);
  return detail::count_parameters_unchecked(m);
}

/// Elements of Adafactor's factored second moment over all of a model's parameters, as Hugging Face's Adafactor
/// keeps it (optimization.py, `factored = len(shape) >= 2`): a weight of shape S keeps prod(S[:-1]) row and
/// prod(S[:-2]) x S[-1] column statistics; a vector keeps all its values (Shazeer & Stern 2018, Alg. 4). Summed
/// over the same walk as count_parameters (for_each_module).
constexpr elements adafactor_second_moment_elements(const transformer_config& m) {
  validate(m);
  std::int64_t total = 0;
  for_each_module(m, [&](const module_shape& s) {
    total = detail::checked_sum(total, detail::checked_product(s.count, s.in_every_layer() ? m.layers : 1,
                                                                detail::checked_sum(s.factored_statistics(), s.bias)));
  });
  return elements_of(total);
}

/// Parameters held by one tensor- and pipeline-parallel rank. Following Megatron-LM
/// (theoretical_memory_usage.py): the first stage holds ceil(L/p) layers and the embeddings (and the vision
/// tower), the last stage ceil(L/p) layers, the final norm and the output layer (a copy of the embedding when
/// tied and p > 1); everything is split over t ranks (norms, which TP replicates, are counted split too).
struct stage_parameters {
  elements first_stage{};
  elements last_stage{};
  elements most_loaded{};
};

/// Decoder layers on the first (the most loaded) pipeline stage: L layers split over pp stages as evenly as they go.
constexpr std::int64_t first_stage_layers(const transformer_config& m, std::int64_t pp) { return detail::ceil_div(m.layers, pp); }

constexpr stage_parameters parameters_per_rank(const transformer_config& m, const parameter_counts& c, std::int64_t tp,
                                               std::int64_t pp) {
  validate_tensor_parallel(m, tp);
  detail::require_positive(pp, "the pipeline-parallel degree");
  if (pp > m.layers) detail::fail_value("the pipeline has more stages than layers", pp, "lower pp");
  const elements layers = c.layer * first_stage_layers(m, pp);
  const elements first = layers + c.embedding + c.position_embedding + c.vision;
  // The output-layer group holds no weight when tied, but OPT-350M's project_out (parameter_counts::lm_head) all the same.
  const elements head = c.final_norm + c.lm_head + (m.tied_embeddings && pp > 1 ? c.embedding : elements{});
  stage_parameters r{};
  r.first_stage = largest_share(pp == 1 ? first + head : first, tp);
  r.last_stage = pp == 1 ? r.first_stage : largest_share(layers + head, tp);
  r.most_loaded = r.first_stage > r.last_stage ? r.first_stage : r.last_stage;
  return r;
}
constexpr stage_parameters parameters_per_rank(const transformer_config& m, std::int64_t tp, std::int64_t pp) {
  return parameters_per_rank(m, count_parameters(m), tp, pp);
}

// ---- presets ------------------------------------------------------------------------------------

struct model_preset {
  std::string_view name;
  transformer_config config;
  std::int64_t published_total;      // the publisher's parameter count, as published
  std::int64_t published_precision;  // 1 for an exact count; 100'000'000 for a figure such as "175.0B"
  std::string_view source;
};

namespace detail {
constexpr transformer_config qwen2_text(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv,
                                        std::int64_t ffn, std::int64_t vocab, bool tied) {
  transformer_config m{};
  m.hidden = h; m.layers = layers; m.heads = heads; m.kv_heads = kv; m.head_dim = 128; m.ffn = ffn; m.vocab = vocab;
  m.qkv_bias = true; m.tied_embeddings = tied;
  return m;
}
/// Qwen3: Qwen2's shape without the q/k/v biases, with q_norm and k_norm (transformers modeling_qwen3.py).
constexpr transformer_config qwen3(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv,
                                   std::int64_t ffn, std::int64_t vocab, bool tied) {
  transformer_config m = qwen2_text(h, layers, heads, kv, ffn, vocab, tied);
  m.qkv_bias = false;
  m.qk_norm = true;
  return m;
}
constexpr transformer_config llama(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv,
                                   std::int64_t ffn, std::int64_t vocab) {
  transformer_config m{};
  m.hidden = h; m.layers = layers; m.heads = heads; m.kv_heads = kv; m.ffn = ffn; m.vocab = vocab;
  return m;
}
/// Mistral-7B-v0.1: Llama's shapes with MistralConfig's 4096-token sliding window.
constexpr transformer_config mistral_v01() {
  transformer_config m = llama(4096, 32, 32, 8, 14336, 32000);
  m.sliding_window = 4096;
  return m;
}
/// Phi-3-mini (modeling_phi3.py): one qkv_proj and one gate_up_proj per layer, 32 heads of 96, untied.
constexpr transformer_config phi3_mini(std::int64_t sliding_window) {
  transformer_config m = llama(3072, 32, 32, 32, 8192, 32064);
  m.fused_qkv = m.fused_gate_up = m.rope_concat = true;
  m.sliding_window = sliding_window;
  return m;
}
/// Gemma (modeling_gemma.py): head_dim 256, tied embeddings, a 256,000-token vocabulary, GemmaRMSNorm.
constexpr transformer_config gemma(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t ffn) {
  transformer_config m = llama(h, layers, heads, kv, ffn, 256000);
  m.head_dim = 256;
  m.tied_embeddings = true;
  m.norm_scale_fp32 = m.scaled_embedding = true;
  return m;
}
/// Gemma-2 (modeling_gemma2.py): Gemma's layout with sandwich norms, soft-capped attention (50) and final logits (30),
/// and a 4096-token window on every other layer.
constexpr transformer_config gemma2(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t ffn) {
  transformer_config m = gemma(h, layers, heads, kv, ffn);
  m.sandwich_norms = true;
  m.attention_softcap = 50.0;
  m.final_logit_softcap = 30.0;
  m.sliding_window = 4096;
  m.sliding_window_pattern = 2;
  return m;
}
/// Gemma-3 text (modeling_gemma3.py Gemma3ForCausalLM): Gemma-2's sandwich norms with Gemma-style q_norm / k_norm, no
/// soft-caps, a 262,144-token vocabulary, five sliding layers (window `window`) to one full-attention layer.
constexpr transformer_config gemma3_text(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t ffn,
                                         std::int64_t window) {
  transformer_config m = gemma(h, layers, heads, kv, ffn);
  m.vocab = 262144;
  m.scaled_embedding = false;  // Gemma3TextScaledWordEmbedding scales inside the embedding module
  m.sandwich_norms = m.qk_norm = m.local_rope = true;
  m.sliding_window = window;
  m.sliding_window_pattern = 6;
  return m;
}
constexpr transformer_config mixtral(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t expert_ffn,
                                     std::int64_t experts, std::int64_t top_k, std::int64_t vocab) {
  transformer_config m = llama(h, layers, heads, kv, expert_ffn, vocab);
  m.moe.experts = experts; m.moe.top_k = top_k; m.moe.expert_ffn = expert_ffn;  // MixtralSparseMoeBlock: gate h -> E, no bias
  return m;
}
/// Qwen3-MoE (modular_qwen3_moe.py): Qwen3's attention over Mixtral's expert block (Qwen3MoeExperts is MixtralExperts;
/// its router, h -> experts, has no bias), untied.
constexpr transformer_config qwen3_moe(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t expert_ffn,
                                       std::int64_t experts, std::int64_t top_k) {
  transformer_config m = qwen3(h, layers, heads, kv, expert_ffn, 151936, false);
  m.moe.experts = experts; m.moe.top_k = top_k; m.moe.expert_ffn = expert_ffn; m.moe.weights_in_compute_dtype = true;
  return m;
}
/// Qwen2-MoE (modular_qwen2_moe.py): Qwen2's attention (biases on q, k, v) over Qwen3-MoE's routed experts and router
/// (norm_topk_prob false by default), with one shared expert of shared_ffn = n expert_ffn, held as n shared experts (the
/// same parameters and tensors), behind its sigmoid gate; untied.
constexpr transformer_config qwen2_moe(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t kv, std::int64_t expert_ffn,
                                       std::int64_t shared_ffn, std::int64_t experts, std::int64_t top_k, std::int64_t vocab) {
  transformer_config m = qwen2_text(h, layers, heads, kv, expert_ffn, vocab, false);
  m.moe.experts = experts; m.moe.top_k = top_k; m.moe.expert_ffn = expert_ffn; m.moe.weights_in_compute_dtype = true;
  m.moe.renormalized = false;
  m.moe.shared_experts = shared_ffn / expert_ffn; m.moe.shared_expert_gate = true;
  return m;
}
/// OLMoE (modular_olmoe.py): Llama's pre-norm layer and attention with q_norm / k_norm over the whole projections, over
/// Mixtral's experts (of the MLP width) and Qwen2-MoE's router (norm_topk_prob false); untied.
constexpr transformer_config olmoe(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t expert_ffn, std::int64_t experts,
                                   std::int64_t top_k, std::int64_t vocab) {
  transformer_config m = llama(h, layers, heads, heads, expert_ffn, vocab);
  m.qk_norm = m.qk_norm_whole = true;
  m.moe.experts = experts; m.moe.top_k = top_k; m.moe.expert_ffn = expert_ffn; m.moe.weights_in_compute_dtype = true;
  m.moe.renormalized = false;
  return m;
}
constexpr transformer_config qwen25_vl_7b() {
  transformer_config m = qwen2_text(3584, 28, 28, 4, 18944, 152064, false);
  m.vision.blocks = 32; m.vision.hidden = 1280; m.vision.mlp_hidden = 3420; m.vision.heads = 16; m.vision.out_hidden = 3584;
  return m;
}
/// Pythia (GPT-NeoX, modeling_gpt_neox.py): fused per-head qkv, LayerNorms, parallel attention and MLP, exact GELU,
/// biases on every linear, an untied embed_out, 4h MLP, RoPE over a quarter of each head (config.json rotary_pct 0.25).
constexpr transformer_config pythia(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t vocab) {
  transformer_config m = llama(h, layers, heads, heads, 4 * h, vocab);
  m.rotary_dims = h / heads / 4;
  m.mlp = mlp_kind::gelu;
  m.norm = norm_kind::layernorm;
  m.qkv_bias = m.attention_out_bias = m.mlp_bias = true;
  m.fused_qkv = m.qkv_per_head = m.parallel_residual = m.rope_concat = true;
  return m;
}
/// OLMo-2 (modeling_olmo2.py): Llama's shapes with as many KV heads as heads, post-branch norms only, q_norm / k_norm over
/// the whole projections, Olmo2RMSNorm, untied, a 100,352-token vocabulary.
constexpr transformer_config olmo2(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t ffn) {
  transformer_config m = llama(h, layers, heads, heads, ffn, 100352);
  m.qk_norm = m.qk_norm_whole = m.norm_weight_fp32 = m.post_norms = m.rope_fp32 = true;
  return m;
}
constexpr transformer_config gpt3_175b() {
  transformer_config m{};
  m.hidden = 12288; m.layers = 96; m.heads = 96; m.kv_heads = 96; m.ffn = 4 * 12288; m.vocab = 50257;
  m.mlp = mlp_kind::gelu; m.norm = norm_kind::layernorm; m.positions = position_kind::learned; m.max_positions = 2048;
  m.qkv_bias = m.attention_out_bias = m.mlp_bias = true; m.fused_qkv = true; m.tied_embeddings = true;
  return m;
}
}  // namespace detail

// Configs are the Hugging Face config.json values (docs/references.md §7); totals are the publishers' figures.
// Exact totals of the Llama 3, Mistral and Mixtral checkpoints: model.safetensors.index.json "total_size" / 2 B (bf16).
inline constexpr std::array<model_preset, 26> model_presets{{
    {"qwen2.5-1.5b", detail::qwen2_text(1536, 28, 12, 2, 8960, 151936, true), 1'543'714'304, 1,
     "Qwen/Qwen2.5-1.5B config.json; Qwen2.5 model card (1.54B)"},
    {"qwen2.5-3b", detail::qwen2_text(2048, 36, 16, 2, 11008, 151936, true), 3'090'000'000, 10'000'000,
     "Qwen/Qwen2.5-3B-Instruct config.json; Qwen2.5-3B model card (3.09B, 2.77B without embeddings)"},
    {"qwen2.5-7b", detail::qwen2_text(3584, 28, 28, 4, 18944, 152064, false), 7'615'616'512, 1,
     "Qwen/Qwen2.5-7B(-Instruct-1M) config.json; Qwen2.5 model card (7.61B)"},
    {"qwen3-8b", detail::qwen3(4096, 36, 32, 8, 12288, 151936, false), 8'200'000'000, 100'000'000,
     "Qwen/Qwen3-8B config.json; Qwen3-8B model card (Number of Parameters: 8.2B)"},
    {"qwen2-7b", detail::qwen2_text(3584, 28, 28, 4, 18944, 152064, false), 7'615'616'512, 1,
     "Qwen/Qwen2-7B-Instruct config.json (the shape of Qwen2.5-7B); Qwen2 model card (7.62B)"},
    {"llama-3-8b", detail::llama(4096, 32, 32, 8, 14336, 128256), 8'030'261'248, 1,
     "meta-llama/Meta-Llama-3-8B config.json; total_size 16,060,522,496 B"},
    {"llama-3.1-8b", detail::llama(4096, 32, 32, 8, 14336, 128256), 8'030'261'248, 1,
     "meta-llama/Llama-3.1-8B config.json (Llama 3 shapes, longer RoPE); total_size 16,060,522,496 B"},
    {"llama-3-70b", detail::llama(8192, 80, 64, 8, 28672, 128256), 70'553'706'496, 1,
     "meta-llama/Meta-Llama-3-70B config.json; 70.55B on its model page"},
    {"llama-3.1-70b", detail::llama(8192, 80, 64, 8, 28672, 128256), 70'553'706'496, 1,
     "meta-llama/Llama-3.1-70B config.json (Llama 3 shapes, longer RoPE); 70.55B on its model page"},
    {"mistral-7b", detail::mistral_v01(), 7'241'732'096, 1,
     "mistralai/Mistral-7B-v0.1 config.json; total_size 14,483,464,192 B"},
    {"mixtral-8x7b", detail::mixtral(4096, 32, 32, 8, 14336, 8, 2, 32000), 46'702'792'704, 1,
     "mistralai/Mixtral-8x7B-v0.1 config.json; total_size 93,405,585,408 B (46.7B)"},
    {"qwen3-30b-a3b", detail::qwen3_moe(2048, 48, 32, 4, 768, 128, 8), 30'500'000'000, 100'000'000,
     "Qwen/Qwen3-30B-A3B config.json; Qwen3-30B-A3B model card (Number of Parameters: 30.5B in total and 3.3B activated)"},
    {"qwen1.5-moe-a2.7b", detail::qwen2_moe(2048, 24, 16, 16, 1408, 5632, 60, 4, 151936), 14'300'000'000, 100'000'000,
     "Qwen/Qwen1.5-MoE-A2.7B config.json; Qwen1.5-MoE-A2.7B model card (14.3B parameters in total, 2.7B activated)"},
    {"olmoe-1b-7b", detail::olmoe(2048, 16, 16, 1024, 64, 8, 50304), 6'900'000'000, 100'000'000,
     "allenai/OLMoE-1B-7B-0924 config.json; Muennighoff et al. 2024 (arXiv 2409.02060): 6.9B total, 1.3B active"},
    {"phi-3-mini", detail::phi3_mini(2047), 3'800'000'000, 100'000'000,
     "microsoft/Phi-3-mini-4k-instruct config.json (sliding_window 2047); Abdin et al. 2024 (arXiv 2404.14219) §2: 3.8B"},
    {"gemma-2b", detail::gemma(2048, 18, 8, 1, 16384), 2'506'434'560, 1'000'000,
     "google/gemma-2b config.json; Gemma Team 2024 (arXiv 2403.08295) Table 2: 524,550,144 embedding + 1,981,884,416 "
     "non-embedding parameters, the embedding counted with 256,128 rows (config.json: 256,000)"},
    {"gemma-7b", detail::gemma(3072, 28, 16, 16, 24576), 8'537'680'896, 1,
     "google/gemma-7b config.json; total_size 17,075,361,792 B"},
    {"gemma-2-2b", detail::gemma2(2304, 26, 8, 4, 9216), 2'614'636'800, 1'000'000,
     "google/gemma-2-2b config.json; Gemma Team 2024 (arXiv 2408.00118) Table 1: 590,118,912 embedding + 2,024,517,888 "
     "non-embedding parameters, the embedding counted with 256,128 rows (config.json: 256,000)"},
    {"gemma-2-9b", detail::gemma2(3584, 42, 16, 8, 14336), 9'242'164'736, 1'000'000,
     "google/gemma-2-9b config.json; Gemma Team 2024 (arXiv 2408.00118) Table 1: 917,962,752 embedding + 8,324,201,984 "
     "non-embedding parameters, the embedding counted with 256,128 rows (config.json: 256,000)"},
    {"gemma-3-1b", detail::gemma3_text(1152, 26, 4, 1, 6912, 512), 1'000'000'000, 1'000'000,
     "google/gemma-3-1b-pt config.json; Gemma Team 2025 (arXiv 2503.19786) Table 1: 302M embedding + 698M non-embedding"},
    {"qwen2.5-vl-7b", detail::qwen25_vl_7b(), 8'292'166'656, 1, "Qwen/Qwen2.5-VL-7B-Instruct config.json (8.29B)"},
    {"llama-2-7b", detail::llama(4096, 32, 32, 32, 11008, 32000), 6'738'415'616, 1,
     "meta-llama/Llama-2-7b-hf config.json; transformers num_parameters()"},
    {"pythia-1b", detail::pythia(2048, 16, 8, 50304), 1'011'781'632, 1,
     "EleutherAI/pythia-1b config.json; Biderman et al. 2023 (arXiv 2304.01373) Table 1 and the model card: 805,736,448 "
     "non-embedding, 1,011,781,632 total"},
    {"pythia-6.9b", detail::pythia(4096, 32, 32, 50432), 6'857'302'016, 1,
     "EleutherAI/pythia-6.9b config.json; Biderman et al. 2023 Table 1 and the model card: 6,444,163,072 non-embedding, "
     "6,857,302,016 total"},
    {"olmo-2-13b", detail::olmo2(5120, 40, 40, 13824), 13'716'198'400, 1,
     "allenai/OLMo-2-1124-13B config.json; model.safetensors.index.json total_size 54,864,793,600 B (fp32)"},
    // GPT-3: the published architecture counts 174,604,259,328, 0.40e9 (0.23%) below the paper's 175.0B;
    // the paper does not say what makes up the difference (tests/unit/test_model.cpp states it).
    {"gpt3-175b", detail::gpt3_175b(), 175'000'000'000, 100'000'000, "Brown et al. 2020 Table 2.1 (n_params 175.0B)"},
}};

/// A preset's configuration, usable in constant expressions (an unknown name fails to compile there).
constexpr transformer_config preset_config(std::string_view name) {
  for (const model_preset& p : model_presets)
    if (p.name == name) return p.config;
  detail::fail("unknown model preset; see zeromem::model_presets for the names");
}

inline const model_preset& find_preset(std::string_view name) {
  for (const model_preset& p : model_presets)
    if (p.name == name) return p;
  const auto name_of = [](const model_preset& p) { return p.name; };
  detail::fail("unknown model " + detail::quoted(name) + detail::did_you_mean(model_presets, name_of, name) + "; expected one of " +
               detail::join_names(model_presets, ", ", name_of));
}

}  // namespace zeromem
