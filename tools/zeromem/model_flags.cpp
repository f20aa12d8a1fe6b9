// The model's flags (--model, --hf-config or the shape flags) and the transformer_config they describe.
#include "common.hpp"

#include "zeromem/model/hf_config.hpp"

namespace zeromem::cli {

void add_model_flags(CLI::App& app, model_flags& f, bool attention_only) {
  auto* preset = text_option(app, "--model", f.preset,
                             "preset: " + detail::join_names(model_presets, ", ", [](const model_preset& p) { return p.name; }));
  CLI::Option* hf =
      text_option(app, "--hf-config", f.hf_config, "a Hugging Face config.json, or a model's directory holding one (model_type " + std::string(supported_model_types) + ")");
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
    shape.push_back(integer_option(app, "--rotary-dims", f.rotary_dims,
                                   "RoPE rotates this many dimensions of each head, the rotary tables' width (GPT-NeoX's rotary_pct, "
                                   "Phi's partial_rotary_factor x head dim); 0: whole heads"));
    shape.push_back(app.add_flag("--rope-concat", f.rope_concat,
                                 "RoPE joins each head's rotated and passed parts with torch.cat into head-major q and k (GPT-NeoX, Phi, "
                                 "StableLM, Phi-3)"));
    shape.push_back(app.add_flag("--scaled-residual", f.scaled_residual,
                                 "each branch is multiplied by a scalar into a new tensor before its residual add (Granite's residual_multiplier)"));
    shape.push_back(app.add_flag("--scaled-logits", f.scaled_logits,
                                 "the logits are divided by a scalar into a new tensor (Granite's logits_scaling)"));
    shape.push_back(app.add_flag("--embedding-multiplier", f.embedding_multiplier,
                                 "the embedding output is multiplied by a scalar into a new tensor (Granite's embedding_multiplier)"));
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
    shape.push_back(app.add_flag("--residual-added-first", f.residual_added_first,
                                 "parallel branches summed as residual + attn + mlp, the residual added first (StableLM); with "
                                 "--parallel-residual"));
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
    shape.push_back(app.add_flag("--shared-expert-gate", f.shared_expert_gate,
                                 "the shared experts' output scaled by sigmoid(nn.Linear(h, 1)) (Qwen2-MoE); with --shared-experts"));
  }
  for (CLI::Option* s : shape) {
    preset->excludes(s);
    hf->excludes(s);
  }
  if (!attention_only)
    app.add_flag("--expert-linears", f.expert_linears,
                 "a mixture of experts held as transformers 4 held it: nn.Linear modules per expert and router (default: "
                 "transformers 5's two 3D parameters per layer, run by grouped_mm)");
}

namespace {
transformer_config shaped_model_of(const model_flags& f);
}  // namespace

transformer_config model_of(const model_flags& f, const hf_quantization& base) {
  transformer_config m = !f.preset.empty()      ? find_preset(f.preset).config
                         : !f.hf_config.empty() ? read_hf_config(f.hf_config, base)
                                                : shaped_model_of(f);
  if (f.expert_linears) {
    if (m.moe.experts == 0) detail::fail("--expert-linears: the model has no experts; drop it");
    m.moe.stacked = false;
  }
  return m;
}

namespace {
transformer_config shaped_model_of(const model_flags& f) {
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
  m.rotary_dims = f.rotary_dims;
  m.rope_concat = f.rope_concat;
  m.scaled_residual = f.scaled_residual;
  m.scaled_logits = f.scaled_logits;
  m.scaled_embedding = f.scaled_embedding;
  m.embedding_multiplier = f.embedding_multiplier;
  m.sandwich_norms = f.sandwich_norms;
  m.attention_softcap = f.attention_softcap;
  m.final_logit_softcap = f.final_logit_softcap;
  m.sliding_window_pattern = f.sliding_window_pattern;
  m.local_rope = f.local_rope;
  m.parallel_residual = f.parallel_residual;
  m.residual_added_first = f.residual_added_first;
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
    if (f.shared_expert_gate && f.shared_experts == 0)
      detail::fail("--shared-expert-gate gates shared experts; add --shared-experts (Qwen1.5-MoE-A2.7B: 4, its 5632 over --expert-ffn 1408)");
    m.moe.shared_expert_gate = f.shared_expert_gate;
  }
  validate(m);
  return m;
}
}  // namespace

}  // namespace zeromem::cli
