// Which parameters train: LoRA adapters (PEFT's LoraConfig), frozen components, and a frozen base stored
// quantized (QLoRA's NF4, LLM.int8()). One walk over the model's linear modules feeds the adapter counts and the
// quantized storage.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// How the frozen base is stored. nf4: QLoRA's 4-bit NormalFloat, blocks of 64 (Dettmers et al. 2023,
/// arXiv 2305.14314 §3; bitsandbytes functional.quantize_4bit). int8: LLM.int8() (Dettmers et al. 2022,
/// arXiv 2208.07339 §3.2; bitsandbytes Int8Params: int8 weight and one fp32 scale per output row).
enum class quantization { none, nf4, int8 };

struct lora_config {
  std::int64_t rank = 0;        // 0: no LoRA
  std::uint16_t targets = 0;    // lora_module bits
  double dropout = 0.0;         // LoraConfig.lora_dropout
  /// PEFT keeps 16-bit adapters in fp32 (get_peft_model(autocast_adapter_dtype=True), PEFT >= 0.12,
  /// tuners_utils.py _cast_adapter_dtype) unless the recipe keeps an fp32 master copy of 16-bit weights.
  dtype adapter_dtype = dtype::fp32;
};

/// Which parameters train. With LoRA, PEFT freezes every base parameter (mark_only_lora_as_trainable).
struct adaptation {
  lora_config lora{};
  quantization quantize = quantization::none;
  bool double_quant = true;       // QLoRA §3 double quantization (BitsAndBytesConfig bnb_4bit_use_double_quant)
  bool paged_optimizer = false;   // bitsandbytes paged 32-bit optimizer: fp32 states in CUDA unified memory
  bool freeze_vision = false;     // the vision tower does not train
  bool freeze_embeddings = false; // the token (and position) embeddings do not train

  constexpr bool lora_enabled() const { return lora.rank > 0; }
  constexpr bool any() const { return lora_enabled() || freeze_vision || freeze_embeddings || paged_optimizer; }
  /// Nothing set at all: every parameter trains as the recipe says (nothing to validate either).
  constexpr bool trains_everything() const { return !any() && lora.targets == 0 && quantize == quantization::none; }
};

constexpr std::string_view name(quantization q) { return q == quantization::none ? "none" : q == quantization::nf4 ? "nf4" : "int8"; }
inline quantization parse_quantization(std::string_view s) {
  static constexpr quantization all[] = {quantization::none, quantization::nf4, quantization::int8};
  return detail::parse_named(s, all, "quantization");
}

namespace detail {
struct lora_name {
  std::string_view text;
  lora_module module;
};
inline constexpr lora_name lora_names[] = {
    {"q_proj", lora_module::q_proj},       {"k_proj", lora_module::k_proj}, {"v_proj", lora_module::v_proj},
    {"o_proj", lora_module::o_proj},       {"gate_proj", lora_module::gate_proj}, {"up_proj", lora_module::up_proj},
    {"down_proj", lora_module::down_proj}, {"fc1", lora_module::fc1},       {"fc2", lora_module::fc2},
    {"qkv", lora_module::qkv},             {"qkv_proj", lora_module::qkv},  {"gate_up_proj", lora_module::gate_up_proj},
    {"proj", lora_module::proj},           {"all-linear", lora_module::all_linear}};
}  // namespace detail

/// "q_proj,v_proj" -> the target bits. Unknown names throw, naming the accepted ones.
inline std::uint16_t parse_lora_targets(std::string_view list) {
  std::uint16_t bits = 0;
  while (true) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    bool found = false;
    for (const detail::lora_name& n : detail::lora_names)
      if (n.text == item) {
        bits = static_cast<std::uint16_t>(bits | bit(n.module));
        found = true;
      }
    if (!found)
      detail::fail("unknown LoRA target " + detail::quoted(item) + "; expected a comma-separated list of " +
                   detail::join_names(detail::lora_names, ", ", [](const detail::lora_name& n) { return n.text; }));
    if (comma == std::string_view::npos) return bits;
    list.remove_prefix(comma + 1);
  }
}

namespace detail {
/// The outputs one module's adapters write, each as f(out): the whole module's, or a fused qkv module's targeted q,
/// k and v slices each, in that order. Each carries lora_A (r x in) and lora_B (out x r). all-linear adapts every
/// linear whole; a fused qkv module named as qkv (or in the vision tower) is adapted whole.
template <class F>
constexpr void for_each_adapted_output(const transformer_config& m, const linear_shape& l, const lora_config& c, F&& f) {
  if (c.rank <= 0) return;
  if (c.targets & bit(lora_module::all_linear)) {
    f(l.out);
    return;
  }
  if (l.role == lora_module::qkv && !l.vision && !(c.targets & bit(lora_module::qkv))) {
    const std::int64_t d = m.head_size(), q_out = checked_mul(m.heads, d), kv_out = checked_mul(m.kv_heads, d);
    if (c.targets & bit(lora_module::q_proj)) f(q_out);
    if (c.targets & bit(lora_module::k_proj)) f(kv_out);
    if (c.targets & bit(lora_module::v_proj)) f(kv_out);
    return;
  }
  if (l.role != lora_module::none && (c.targets & bit(l.role))) f(l.out);
}
}  // namespace detail

/// Adapter parameters of one adapted module: lora_A (in -> r) and lora_B (r -> out), no bias (PEFT
/// tuners/lora/layer.py update_layer; Hu et al. 2021, arXiv 2106.09685 §4.1: W0 + BA, B in R^{d x r}, A in R^{r x k}).
/// On a fused qkv module the targeted q/k/v slices are adapted each: r (in + slice).
struct adapted_linear {
  std::int64_t params = 0;       // adapter parameters of one module
  std::int64_t intermediates = 0;  // rank-r outputs of lora_A per token (r per adapted module or slice)
};

constexpr adapted_linear adapt_of(const transformer_config& m, const linear_shape& l, const lora_config& c) {
  using detail::checked_product, detail::checked_sum;
  adapted_linear a{};
  detail::for_each_adapted_output(m, l, c, [&](std::int64_t out) {
    a.params = checked_sum(a.params, checked_product(c.rank, checked_sum(l.in, out)));
    a.intermediates = checked_sum(a.intermediates, c.rank);
  });
  return a;
}

namespace detail {
/// The adapter tensors of one module (adapt_of), each as f(rows, columns): lora_A (r x in), then lora_B (out x r),
/// as PEFT registers them (tuners/lora/layer.py LoraLayer.update_layer); a fused qkv module's targeted slices each.
template <class F>
constexpr void for_each_adapter_tensor(const transformer_config& m, const linear_shape& l, const lora_config& c, F&& f) {
  for_each_adapted_output(m, l, c, [&](std::int64_t out) {
    f(c.rank, l.in);
    f(out, c.rank);
  });
}
}  // namespace detail

/// Adapter parameter counts (PEFT's print_trainable_parameters counts these as the trainable parameters).
struct lora_counts {
  elements per_layer{};   // one decoder layer
  elements vision{};      // the whole vision tower
  elements total{};
  elements largest_tensor{};  // the largest lora_A or lora_B matrix
  bool mlp = false;           // a module of the decoder layers' MLP is adapted
};

constexpr void validate(const lora_config& c, const transformer_config& m) {
  if (c.rank < 0) detail::fail_value("the LoRA rank cannot be negative", c.rank, "pass --lora-rank such as 16");
  if (c.rank == 0) {
    if (c.targets != 0) detail::fail("LoRA targets need a rank; add --lora-rank such as 16");
    return;
  }
  if (c.targets == 0) detail::fail("LoRA needs target modules; pass --lora-targets such as q_proj,v_proj");
  if (!(c.dropout >= 0.0 && c.dropout < 1.0))
    detail::fail_value("the LoRA dropout must be in [0, 1)", c.dropout, "pass 0 for none");
  if (c.adapter_dtype == dtype::int8 || c.adapter_dtype == dtype::int4 || c.adapter_dtype == dtype::fp8_e4m3 || c.adapter_dtype == dtype::fp8_e5m2)
    detail::fail("LoRA adapters train in fp32, bf16 or fp16; pass one of those as the adapter dtype");
  // PEFT's all-linear adapts OPT-350M's project_in and project_out too, which zeromem does not adapt.
  if ((c.targets & bit(lora_module::all_linear)) && m.projected_embedding())
    detail::fail("all-linear on a model with project_in / project_out (OPT-350M) is not modelled; name the target modules instead");
  // Every named target must exist in this architecture (PEFT raises "Target modules ... not found in the base model").
  std::uint16_t present = bit(lora_module::all_linear);
  for_each_linear(m, [&](const linear_shape& l) { present = static_cast<std::uint16_t>(present | bit(l.role)); });
  if (m.fused_qkv) present = static_cast<std::uint16_t>(present | bit(lora_module::q_proj) | bit(lora_module::k_proj) | bit(lora_module::v_proj));
  const bool stacked_experts = m.moe.experts > 0 && m.moe.stacked;
  if (stacked_experts && m.moe.shared_experts > 0 &&
      (c.targets & (bit(lora_module::all_linear) | bit(lora_module::gate_proj) | bit(lora_module::up_proj) | bit(lora_module::gate_up_proj) |
                    bit(lora_module::down_proj) | bit(lora_module::fc1) | bit(lora_module::fc2))))
    detail::fail("LoRA on the shared experts beside transformers 5's 3D routed experts is not modelled; target the attention modules only");
  // PEFT 0.19+ maps transformers 4's expert names onto transformers 5's 3D parameters as lora.ParamWrapper adapters,
  // and from 0.20 all-linear resolves to the attention's linears plus the experts and the router
  // (utils/transformers_weight_conversion.py _convert_peft_config_moe, _resolve_string_target_modules; an H100 run with
  // PEFT 0.21 raised ParamWrapper's "does not work with lora_dropout != 0" on Qwen3-MoE's all-linear). Not modelled.
  if (stacked_experts && (c.targets & bit(lora_module::all_linear)))
    detail::fail("all-linear on transformers 5's experts adapts their 3D parameters and the router too (PEFT lora.ParamWrapper), which "
                 "is not modelled; name the attention modules (q_proj,k_proj,v_proj,o_proj), or pass --expert-linears for transformers 4's modules");
  for (const detail::lora_name& n : detail::lora_names)
    if ((c.targets & bit(n.module)) && !(present & bit(n.module)) && stacked_experts && detail::is_mlp_module(n.module))
      detail::fail("PEFT adapts transformers 5's 3D experts (gate_up_proj, down_proj) as lora.ParamWrapper parameters, which is not "
                   "modelled: drop " + std::string(n.text) + " from the targets, or pass --expert-linears for transformers 4's modules");
    else if ((c.targets & bit(n.module)) && !(present & bit(n.module)))
      detail::fail("the model has no " + std::string(n.text) + " module to adapt; target modules it has (" +
                   std::string(m.fused_gate_up ? "gate_up_proj, down_proj" : m.mlp == mlp_kind::swiglu ? "gate_proj, up_proj, down_proj" : "fc1, fc2") +
                   ", o_proj, " + (m.fused_qkv ? "qkv" : "q_proj, k_proj, v_proj") + ") or all-linear");
}

constexpr lora_counts count_lora_parameters(const transformer_config& m, const lora_config& c) {
  validate(m);
  validate(c, m);
  lora_counts out{};
  for_each_linear(m, [&](const linear_shape& l) {
    const adapted_linear a = adapt_of(m, l, c);
    if (a.params == 0) return;
    const elements n = elements_of(detail::checked_mul(a.params, l.count));
    (l.vision ? out.vision : out.per_layer) += n;
    out.mlp = out.mlp || (!l.vision && detail::is_mlp_module(l.role));
    detail::for_each_adapter_tensor(m, l, c, [&](std::int64_t rows, std::int64_t columns) {
      const elements tensor = elements_of(detail::checked_mul(rows, columns));
      if (tensor > out.largest_tensor) out.largest_tensor = tensor;
    });
  });
  out.total = out.per_layer * m.layers + out.vision;
  return out;
}

/// The adapters DeepSpeed ZeRO-3 keeps gathered: like any parameter, each lora_A and lora_B of at most `threshold`
/// (stage3_param_persistence_threshold) elements on its tensor-parallel rank, split over tp as the module walk splits a
/// tensor, is ds_persist (runtime/zero/parameter_offload.py mark_persistent_parameters walks module.named_parameters(),
/// PEFT's adapters among them). Of one decoder layer, and of the whole vision tower.
struct lora_persistent {
  elements per_layer{};
  elements vision{};
};
namespace detail {
constexpr lora_persistent persistent_lora_elements_unchecked(const transformer_config& m, const lora_config& c, std::int64_t threshold,
                                                             std::int64_t tp) {
  lora_persistent out{};
  for_each_linear(m, [&](const linear_shape& l) {
    elements& sum = l.vision ? out.vision : out.per_layer;
    for_each_adapter_tensor(m, l, c, [&](std::int64_t rows, std::int64_t columns) {
      const std::int64_t n = ceil_div(checked_mul(rows, columns), tp);
      if (n <= threshold) sum += elements_of(checked_mul(n, l.count));
    });
  });
  return out;
}
}  // namespace detail
constexpr lora_persistent persistent_lora_elements(const transformer_config& m, const lora_config& c, std::int64_t threshold,
                                                   std::int64_t tp = 1) {
  validate(m);
  validate(c, m);
  detail::require_positive(tp, "the tensor-parallel degree");
  if (threshold < 0)
    detail::fail_value("stage3_param_persistence_threshold cannot be negative", threshold, "pass DeepSpeed's 1e5, 0 for none, or your config's");
  return detail::persistent_lora_elements_unchecked(m, c, threshold, tp);
}

/// forloop_moment_elements over PEFT's adapters: the optimizer steps [p for p in model.parameters() if p.requires_grad],
/// the adapters in module order, each module's lora_A (r x in) before its lora_B (out x r) (PEFT tuners/lora/layer.py
/// LoraLayer.__init__ registers lora_A, then lora_B; a fused qkv module's targeted slices each as one), the vision
/// tower's before the decoder layers' (Qwen2-VL: `visual` is registered first), a block's or layer's modules in two
/// passes where there are two, for the step from one's last adapter to the next's first, and a module repeated within
/// a layer twice. Each tensor's local size under FSDP2 is its dim-0 chunk, padded (ranks; 1: whole). For consecutive
/// tensors p, c: max(current x c + carried x p, early x c + early_carried x p).
constexpr std::int64_t lora_forloop_moment_elements(const transformer_config& m, const lora_config& c, std::int64_t ranks,
                                                    std::int64_t current, std::int64_t carried, std::int64_t early_carried,
                                                    std::int64_t early) {
  using detail::checked_add, detail::checked_mul, detail::ceil_div;
  std::int64_t previous = 0, peak = 0;
  const auto visit = [&](std::int64_t rows, std::int64_t columns) {
    const std::int64_t n = checked_mul(ranks > 1 ? ceil_div(rows, ranks) : rows, columns);
    const std::int64_t late = checked_add(checked_mul(current, n), checked_mul(carried, previous));
    const std::int64_t first = checked_add(checked_mul(early, n), checked_mul(early_carried, previous));
    peak = detail::max_of(peak, detail::max_of(late, first));
    previous = n;
  };
  const auto module = [&](const linear_shape& l) {
    for (std::int64_t repeat = 0; repeat < (l.count >= 2 && !l.vision ? 2 : 1); ++repeat) detail::for_each_adapter_tensor(m, l, c, visit);
  };
  for (std::int64_t pass = 0; pass < (m.vision.blocks > 1 ? 2 : 1); ++pass)
    for_each_linear(m, [&](const linear_shape& l) {
      if (l.vision) module(l);
    });
  for (std::int64_t pass = 0; pass < (m.layers > 1 ? 2 : 1); ++pass)
    for_each_linear(m, [&](const linear_shape& l) {
      if (!l.vision) module(l);
    });
  return peak;
}

/// Bytes of one quantized weight matrix of `out` x `in` elements.
///  nf4: two 4-bit values per byte and one absmax per block of 64 (32/64 = 0.5 bit per parameter in fp32), or with
///  double quantization an 8-bit absmax per block plus an fp32 constant per 256 of them: 8/64 + 32/(64 x 256)
///  = 0.127 bit (QLoRA §3 "Double Quantization"; bitsandbytes quantize_4bit(blocksize=64) and, with
///  compress_statistics, quantize_blockwise(absmax, blocksize=256)). The per-tensor offset and code scalars
///  (under 100 B per matrix) are left out.
///  int8: one byte per weight and one fp32 row scale per output row (LLM.int8() §3.2 vector-wise quantization;
///  bitsandbytes Int8Params CB and SCB).
constexpr bytes quantized_weight_bytes(std::int64_t in, std::int64_t out, quantization q, bool double_quant) {
  using detail::ceil_div, detail::checked_product, detail::checked_sum;
  const std::int64_t n = checked_product(in, out);
  switch (q) {
    case quantization::none: break;
    case quantization::nf4: {
      const std::int64_t blocks = ceil_div(n, 64);
      const std::int64_t constants = double_quant ? checked_sum(blocks, checked_product(4, ceil_div(blocks, 256))) : checked_product(4, blocks);
      return bytes_of(checked_sum(ceil_div(n, 2), constants));
    }
    case quantization::int8: return bytes_of(checked_sum(n, checked_product(4, out)));
  }
  detail::fail("quantized_weight_bytes needs nf4 or int8");
}

/// The model's parameters by the groups that train or freeze together, with the bytes the frozen ones occupy.
/// Decoder-layer figures are for one layer.
struct parameter_split {
  elements layer_trainable{}, embedding_trainable{}, vision_trainable{}, head_trainable{};
  elements layer_frozen{}, embedding_frozen{}, vision_frozen{}, head_frozen{};
  bytes layer_frozen_bytes{}, embedding_frozen_bytes{}, vision_frozen_bytes{}, head_frozen_bytes{};
  lora_counts adapters{};
  /// The largest tensor that trains (the forloop optimizer's temporaries follow it).
  elements largest_trainable{};
  /// The largest frozen linear weight dequantized to 16 bits for its matmul (bitsandbytes MatMul4Bit forward and
  /// backward: F.dequantize_4bit(B).to(A.dtype); MatMul8bitLt backward: CB.to(dtype) * SCB / 127); 0 unquantized.
  bytes dequantized_weight{};

  /// Over the whole model of `layers` decoder layers.
  constexpr elements trainable(std::int64_t layers) const {
    return layer_trainable * layers + embedding_trainable + vision_trainable + head_trainable;
  }
  constexpr elements frozen(std::int64_t layers) const { return layer_frozen * layers + embedding_frozen + vision_frozen + head_frozen; }
};

/// Whether a quantized (NF4, int8) base of model m is modelled: bitsandbytes replaces nn.Linear modules, which
/// transformers 5's 3D expert parameters are not (moe_config::stacked).
constexpr bool quantized_base_modelled(const transformer_config& m) { return !(m.moe.experts > 0 && m.moe.stacked); }

constexpr void validate(const adaptation& a, const transformer_config& m) {
  validate(a.lora, m);
  if (a.quantize != quantization::none && !a.lora_enabled())
    detail::fail("a quantized base cannot train; add LoRA adapters (--lora-rank and --lora-targets) or drop --quantize");
  if (a.freeze_vision && m.vision.blocks == 0) detail::fail("--freeze vision: the model has no vision tower");
  if (a.quantize != quantization::none && !quantized_base_modelled(m))
    detail::fail("a quantized base with transformers 5's 3D expert parameters is not modelled (bitsandbytes replaces nn.Linear "
                 "modules); pass --expert-linears for transformers 4's per-expert nn.Linear modules");
}

/// Splits the model's parameters into what trains and what is frozen (stored in `weights`, or quantized).
constexpr parameter_split split_parameters(const transformer_config& m, const parameter_counts& c, const adaptation& a, dtype weights) {
  if (a.trains_everything())  // built whole (clearing a split and filling it costs more than the sums)
    return parameter_split{c.layer, c.embedding + c.position_embedding, c.vision, c.final_norm + c.lm_head,
                           elements{}, elements{}, elements{}, elements{},
                           bytes{}, bytes{}, bytes{}, bytes{},
                           lora_counts{}, c.largest_tensor, bytes{}};
  validate(a, m);
  using detail::checked_product;
  parameter_split s{};
  const bytes_per_element w = size_of(weights);
  const bool lora = a.lora_enabled();
  if (lora) {
    s.adapters = count_lora_parameters(m, a.lora);
    s.layer_trainable = s.adapters.per_layer;
    s.vision_trainable = s.adapters.vision;
    s.largest_trainable = s.adapters.largest_tensor;
    // Every base parameter is frozen; the linear weights are stored quantized when asked, the rest (norms, biases,
    // embeddings, lm_head, the patch embedding) in the weights' dtype (transformers' bitsandbytes integration
    // keeps the output layer unquantized: get_keys_to_not_convert).
    s.layer_frozen = c.layer;
    s.vision_frozen = c.vision;
    s.layer_frozen_bytes = c.layer * w;
    s.vision_frozen_bytes = c.vision * w;
    if (a.quantize != quantization::none) {
      bytes largest{};
      for_each_linear(m, [&](const linear_shape& l) {
        const elements n = elements_of(checked_product(l.in, l.out));
        const bytes saved = (n * w - quantized_weight_bytes(l.in, l.out, a.quantize, a.double_quant)) * l.count;
        (l.vision ? s.vision_frozen_bytes : s.layer_frozen_bytes) -= saved;
        if (n * size_of(dtype::bf16) > largest) largest = n * size_of(dtype::bf16);
      });
      s.dequantized_weight = largest;
    }
  } else {
    s.layer_trainable = c.layer;
    s.largest_trainable = c.largest_tensor;
    (a.freeze_vision ? s.vision_frozen : s.vision_trainable) = c.vision;
    s.vision_frozen_bytes = a.freeze_vision ? c.vision * w : bytes{};
  }
  const elements embeddings = c.embedding + c.position_embedding;
  const bool freeze_embeddings = lora || a.freeze_embeddings;
  (freeze_embeddings ? s.embedding_frozen : s.embedding_trainable) = embeddings;
  s.embedding_frozen_bytes = freeze_embeddings ? embeddings * w : bytes{};
  const elements head = c.final_norm + c.lm_head;  // a tied output layer is the embedding's
  (lora ? s.head_frozen : s.head_trainable) = head;
  s.head_frozen_bytes = lora ? head * w : bytes{};
  return s;
}

}  // namespace zeromem
