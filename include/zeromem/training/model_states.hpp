// Model states (weights, gradients, master weights, optimizer states) per GPU, per node's host RAM and per
// node's NVMe, under ZeRO stages 0-3 / FSDP, CPU and NVMe offload, hpZ.
//
// ZeRO paper (Rajbhandari et al. 2020, arXiv 1910.02054, §5.1 and Fig. 1), with Psi parameters, N_d ranks
// sharing the states and K optimizer bytes per parameter:
//   stage 0: (2 + 2 + K) Psi;  stage 1: 2Psi + 2Psi + K Psi/N_d;  stage 2: 2Psi + (2 + K) Psi/N_d;
//   stage 3: (2 + 2 + K) Psi/N_d.
// Each term below is computed whole and then split over the ranks that shard it, so that summed over the
// ranks the shares equal the unsharded total exactly.
#pragma once

#include <cstdint>

#include "zeromem/model/adapters.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/training/recipe.hpp"
#include "zeromem/training/sharding.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// Where one term's bytes sit on one rank. host_pinned is the part of host that is page-locked.
struct placement {
  bytes gpu{};
  bytes host{};
  bytes host_pinned{};
  bytes nvme{};
  constexpr bytes total() const { return gpu + host + nvme; }
};

constexpr placement operator+(const placement& a, const placement& b) {
  return {a.gpu + b.gpu, a.host + b.host, a.host_pinned + b.host_pinned, a.nvme + b.nvme};
}

/// The named terms of model-state memory on one rank.
struct model_state_terms {
  placement weights;            // working weights (16-bit in mixed precision)
  placement gradients;          // gradients in the recipe's gradient dtype
  placement master_weights;     // fp32 master copy kept by the optimizer
  placement fp32_gradients;     // fp32 gradient partition kept by the optimizer (or by CPU Adam)
  placement optimizer_moments;  // optimizer state proper (Adam m and v, momentum, ...)
  placement hpz_secondary;      // ZeRO++ hpZ secondary weight partition
  placement gathered_layer;     // ZeRO-3: the largest layer gathered whole, weights and gradients
  placement swap_buffers;       // pinned host buffers for NVMe offload
  placement offload_staging;    // ZeRO-1/2 CPU offload: 16-bit gradient staging and accumulation buffers
  placement frozen_weights;     // parameters that do not train (LoRA's base, a frozen tower): weights only

  template <class F>
  ZEROMEM_ALWAYS_INLINE constexpr void for_each(F&& f) const {
    f("weights", weights);
    f("gradients", gradients);
    f("master_weights", master_weights);
    f("fp32_gradients", fp32_gradients);
    f("optimizer_moments", optimizer_moments);
    f("hpz_secondary", hpz_secondary);
    f("gathered_layer", gathered_layer);
    f("swap_buffers", swap_buffers);
    f("offload_staging", offload_staging);
    f("frozen_weights", frozen_weights);
  }
  constexpr placement sum() const {
    return weights + gradients + master_weights + fp32_gradients + optimizer_moments + hpz_secondary +
           gathered_layer + swap_buffers + offload_staging + frozen_weights;
  }
  /// One device's bytes over all terms, e.g. sum(&placement::gpu).
  /// (Inlined with its walk where it is called: the step estimate reads the GPU's sum once per call.)
  ZEROMEM_ALWAYS_INLINE constexpr bytes sum(bytes placement::*device) const {
    bytes s{};
    for_each([&](const char*, const placement& p) ZEROMEM_ALWAYS_INLINE { s += p.*device; });
    return s;
  }
};

/// The inputs: a model's parameters on one model-parallel rank, its recipe, and how data parallelism shards it.
struct training_states {
  elements params{};
  precision_recipe recipe = recipe_of(precision::mixed_bf16);
  optimizer_spec optimizer{};
  zero_config zero{};
  std::int64_t dp = 1;              // data-parallel ranks
  std::int64_t gpus_per_node = 8;   // ranks of this job on one node
  elements largest_layer{};         // ZeRO-3 gathers it whole on the GPU; 0 = unknown, term left out
  /// Micro-batches per optimizer step (DeepSpeed gradient_accumulation_steps). With ZeRO-1/2 and the optimizer
  /// offloaded to the CPU, more than 1 adds a 16-bit host buffer per parameter of the rank's partition.
  std::int64_t gradient_accumulation_steps = 1;
  /// Ranks of one data-parallel replica: tp x pp x cp. Each is a process on a node with its own host buffers, so
  /// a node holds min(dp x model_parallel, gpus_per_node) ranks (Megatron-LM/DeepSpeed world = dp x tp x pp x cp).
  std::int64_t model_parallel = 1;
  /// Which parameters train: LoRA adapters, frozen components, a quantized base, a paged optimizer. The model-aware
  /// entry points (states_on_rank, estimate_step, training_gpu_bytes, plan) turn it into params, frozen and
  /// frozen_weights; estimate_model_states reads the adapters' dtype and the paged optimizer from it.
  adaptation adapt{};
  /// Parameters of this rank that do not train, not counted in params: weights only (no gradients, no optimizer
  /// states), frozen_weights bytes as stored (the weights' dtype, or quantized), sharded like the weights.
  elements frozen{};
  bytes frozen_weights{};
};

/// The recipe the trainable parameters follow. PEFT keeps 16-bit adapters in the adapter dtype (fp32 by default)
/// beside a 16-bit frozen base; a recipe with an fp32 master copy keeps its 16-bit working copy of them instead.
constexpr precision_recipe trainable_recipe(const training_states& t) {
  precision_recipe r = t.recipe;
  if (t.adapt.lora_enabled() && !r.fp32_master) r.weights = r.gradients = t.adapt.lora.adapter_dtype;
  return r;
}

/// Whether the largest layer changes the estimate: ZeRO-3 gathers it whole; ZeRO-1/2 CPU offload sizes its
/// gradient staging buffers by it.
constexpr bool needs_largest_layer(const zero_config& z) {
  return z.stage == 3 || (z.optimizer.device == offload_device::cpu && (z.stage == 1 || z.stage == 2));
}

constexpr std::int64_t shard_group_of(const training_states& t) { return t.zero.shard_group > 0 ? t.zero.shard_group : t.dp; }
constexpr std::int64_t ranks_per_node(const training_states& t) {
  const std::int64_t world = detail::saturating_product(t.dp, t.model_parallel);
  return world < t.gpus_per_node ? world : t.gpus_per_node;
}

constexpr void validate(const training_states& t) {
  if (t.params.count() <= 0) detail::fail_value("the parameter count must be positive", t.params.count(), "pass --params such as 7.5B");
  detail::require_positive(t.dp, "the data-parallel degree");
  detail::require_positive(t.gpus_per_node, "GPUs per node");
  detail::require_positive(t.gradient_accumulation_steps, "gradient accumulation steps");
  detail::require_positive(t.model_parallel, "the model-parallel ranks (tp x pp x cp)");
  validate(t.zero);
  const std::int64_t n = shard_group_of(t);
  if (n > t.dp || !detail::divides(n, t.dp))
    detail::fail_value("the shard group must divide the data-parallel degree", n,
                       "pick a shard group size that divides dp");
  if (t.zero.stage > 0 && n > t.params.count())
    detail::fail_value("the shard group has more ranks than there are parameters to shard", n,
                       "lower dp or the shard group; each rank must hold at least one parameter");
  if (t.zero.hpz_partition > n || !detail::divides(t.zero.hpz_partition, n))
    detail::fail_value("the hpZ partition size must divide the shard group", t.zero.hpz_partition,
                       "use the GPUs per node, or 1 to turn hpZ off");
  if (t.largest_layer > t.params + t.frozen) detail::fail("the largest layer cannot exceed the parameter count; check --largest-layer-params");
  if (t.frozen_weights.count() < 0) detail::fail("frozen weight bytes cannot be negative");
  if ((t.frozen.count() > 0) != (t.frozen_weights.count() > 0))
    detail::fail("frozen parameters and their bytes go together; set both frozen and frozen_weights, or neither");
  const optimizer_kind kind = t.optimizer.kind;
  if (t.optimizer.amsgrad && kind != optimizer_kind::adam && kind != optimizer_kind::adamw)
    detail::fail("amsgrad is an option of adam and adamw, not " + std::string(name(kind)) + "; drop --amsgrad");
  if ((t.optimizer.centered || t.optimizer.momentum_buffer) && kind != optimizer_kind::rmsprop)
    detail::fail("centered and momentum are options of rmsprop here, not " + std::string(name(kind)) +
                 "; drop --rmsprop-centered and --rmsprop-momentum (SGD with momentum is --optimizer sgd-momentum)");
  if (t.optimizer.nesterov && kind != optimizer_kind::sgd_momentum)
    detail::fail("Nesterov momentum needs a momentum: use --optimizer sgd-momentum with --nesterov, not " + std::string(name(kind)));
  if (kind == optimizer_kind::adafactor && t.adapt.lora_enabled())
    detail::fail("Adafactor's factored state over LoRA adapters is not modelled; use --optimizer adamw (or adam, sgd, lion)");
  if (!(t.optimizer.weight_decay >= 0.0 && t.optimizer.weight_decay < 1e300))
    detail::fail_value("the weight decay must be a finite number >= 0", t.optimizer.weight_decay, "pass 0 for none");
  if (t.optimizer.weight_decay != 0.0 && traits_of(kind).decay_foreach == -2)
    detail::fail(std::string(name(kind)) + " takes no weight decay (torch.optim has no weight_decay argument for it); drop --weight-decay");
  if (t.adapt.paged_optimizer && t.zero.optimizer.device != offload_device::none)
    detail::fail("a paged optimizer and optimizer offload both move the optimizer states; drop --paged-optimizer or --offload-optimizer");
}

/// Model-state bytes on one rank, and per node.
struct model_state_estimate {
  model_state_terms per_rank{};
  std::int64_t ranks_per_node = 1;
  std::int64_t shard_group = 1;

  constexpr placement total_per_rank() const { return per_rank.sum(); }
  constexpr bytes gpu() const { return per_rank.sum(&placement::gpu); }
  constexpr bytes host_per_rank() const { return per_rank.sum(&placement::host); }
  constexpr bytes nvme_per_rank() const { return per_rank.sum(&placement::nvme); }
  /// Per-node host RAM = host bytes per rank x ranks per node.
  constexpr bytes host_per_node() const { return host_per_rank() * ranks_per_node; }
  constexpr bytes host_pinned_per_node() const { return per_rank.sum(&placement::host_pinned) * ranks_per_node; }
  constexpr bytes nvme_per_node() const { return nvme_per_rank() * ranks_per_node; }

  // The ZeRO paper's three groups, on whatever device they live.
  constexpr bytes weights_bytes() const {
    return per_rank.weights.total() + per_rank.hpz_secondary.total() + per_rank.frozen_weights.total();
  }
  constexpr bytes gradients_bytes() const { return per_rank.gradients.total() + per_rank.fp32_gradients.total(); }
  constexpr bytes optimizer_states_bytes() const {
    return per_rank.master_weights.total() + per_rank.optimizer_moments.total();
  }
};

namespace detail {
constexpr placement place(bytes b, offload_device d, bool pinned) {
  placement p{};
  switch (d) {
    case offload_device::none: p.gpu = b; break;
    case offload_device::cpu:
      p.host = b;
      if (pinned) p.host_pinned = b;
      break;
    case offload_device::nvme: p.nvme = b; break;
  }
  return p;
}
constexpr placement on_host_pinned(bytes b) { return {bytes{}, b, b, bytes{}}; }
}  // namespace detail

/// Model states of rank `rank` (0-based within the shard group), or of the most loaded rank when rank < 0.
namespace detail {
// Inlined where it is called: the step estimate reads only the GPU bytes, and inlined, the host, pinned and NVMe
// placements nobody reads are never computed (a step estimate 9% faster, docs/performance.md).
ZEROMEM_ALWAYS_INLINE constexpr model_state_estimate estimate_model_states_unchecked(const training_states& t, std::int64_t rank) {
  const std::int64_t n = shard_group_of(t);
  const zero_config& z = t.zero;
  const precision_recipe r = trainable_recipe(t);
  const bytes_per_element fp32 = size_of(dtype::fp32);
  const auto share = [&](bytes total, bool sharded, std::int64_t parts) ZEROMEM_ALWAYS_INLINE {
    if (!sharded) return total;
    return rank < 0 ? largest_share(total, parts) : share_of_rank(total, parts, detail::remainder(rank, parts));
  };
  const bool optimizer_offloaded = z.optimizer.device != offload_device::none;

  // Working weights: replicated until stage 3 (ZeRO §5.1 P_os+g+p).
  const placement weights = detail::place(share(t.params * size_of(r.weights), z.stage >= 3, n), z.params.device, z.params.pin_memory);

  // Gradients: sharded from stage 2 (ZeRO §5.1 P_os+g). With the optimizer offloaded at stage 2, DeepSpeed
  // copies each reduced gradient as fp32 into the CPU partition and drops the GPU copy (ZeRO-Offload, arXiv
  // 2101.06840 §4.1; stage_1_and_2.py async_inplace_copy_grad_to_fp32_buffer_from_gpu: `param.grad = None`);
  // its 16-bit staging buffers are the offload_staging term. At stage 3 the gradient partition is allocated on
  // the optimizer's device, the CPU, pinned with pin_memory (stage3.py _setup_for_real_optimizer:
  // grad_partitions_flat_buffer on self.device), besides the fp32 partition CPU Adam reads.
  const placement gradients =
      optimizer_offloaded && z.stage == 2
          ? placement{}
          : detail::place(share(t.params * size_of(r.gradients), z.stage >= 2, n),
                          optimizer_offloaded && z.stage == 3 ? offload_device::cpu : offload_device::none, z.optimizer.pin_memory);

  // fp32 master weights: optimizer state, sharded from stage 1 (ZeRO §5.1 P_os).
  const placement master_weights =
      r.fp32_master ? detail::place(share(t.params * fp32, z.stage >= 1, n), z.optimizer.device, z.optimizer.pin_memory)
                    : placement{};

  // fp32 gradient partition: kept by the recipe (Megatron fp16 main grads, DeepSpeed's estimator) or by the
  // offloaded optimizer, on its device: CPU Adam's per-sub-group buffers in host RAM, or, with the optimizer on
  // NVMe, swapped out with its states (stage3.py initialize_optimizer_states and partition_grads ->
  // optimizer_swapper.swap_out_gradients; sub-groups below the swapper's minimum I/O size stay in host RAM).
  const placement fp32_gradients =
      (r.fp32_gradient_copy && r.gradients != dtype::fp32) || optimizer_offloaded
          ? detail::place(share(t.params * fp32, z.stage >= 1, n), z.optimizer.device, z.optimizer.pin_memory)
          : placement{};

  // Optimizer states proper: sharded from stage 1. A bitsandbytes paged optimizer keeps 32-bit states in CUDA
  // unified memory (bitsandbytes optim/optimizer.py get_state_buffer -> F.get_paged), which the driver evicts to
  // host RAM when the GPU runs short (QLoRA §3 "Paged Optimizers"): they are counted in host RAM, where they
  // are guaranteed room, and need none on the GPU.
  precision_recipe state_recipe = r;
  if (t.adapt.paged_optimizer) state_recipe.fp32_master = true;  // 32-bit states whatever the parameters' dtype
  const bytes moments = optimizer_state_bytes(t.optimizer, state_recipe, t.params);
  const placement optimizer_moments =
      t.adapt.paged_optimizer ? detail::place(share(moments, z.stage >= 1, n), offload_device::cpu, false)
                              : detail::place(share(moments, z.stage >= 1, n), z.optimizer.device, z.optimizer.pin_memory);

  // Frozen weights: only the weights, sharded and offloaded as the weights are.
  const placement frozen_weights = detail::place(share(t.frozen_weights, z.stage >= 3, n), z.params.device, z.params.pin_memory);

  // ZeRO++ hpZ: a secondary copy of the 16-bit weights sharded within hpz_partition ranks (arXiv 2306.10209 §3.2).
  const placement hpz_secondary =
      z.stage == 3 && z.hpz_partition > 1
          ? detail::place(share(t.params * size_of(r.weights), true, z.hpz_partition), offload_device::none, false)
          : placement{};

  // ZeRO-3 gathers a whole layer (weights and its gradient before reduce-scatter) on the GPU; DeepSpeed's
  // estimator counts largest_layer_memory = 4 * largest_layer_params (deepspeed/runtime/zero/stage3.py).
  // Under LoRA the base is frozen: the gathered layer has no gradient.
  const placement gathered_layer =
      z.stage == 3 && t.largest_layer.count() > 0
          ? detail::place(t.largest_layer * (t.adapt.lora_enabled() ? size_of(t.recipe.weights) : size_of(r.weights) + size_of(r.gradients)),
                          offload_device::none, false)
          : placement{};

  // NVMe swap buffers pinned in host RAM (DeepSpeed swap_tensor/*_swapper.py): the optimizer swapper holds
  // buffer_count buffers of one fp32 sub-group; the parameter swapper buffer_count x buffer_size elements.
  bytes swap{};
  if (z.optimizer.device == offload_device::nvme) {
    const elements partition = largest_share(t.params, n);
    elements sub_group = elements_of(z.sub_group_size) < partition ? elements_of(z.sub_group_size) : partition;
    // A sub-group holds at least one parameter's partition (stage3.py _create_fp16_sub_groups closes it once it
    // reaches sub_group_size, after each parameter at 0); the largest layer's share stands in for the largest tensor's.
    const elements one_parameter = largest_share(t.largest_layer, n);
    if (one_parameter > sub_group) sub_group = one_parameter < partition ? one_parameter : partition;
    swap += sub_group * fp32 * z.optimizer_buffer_count;
  }
  if (z.params.device == offload_device::nvme)
    swap += elements_of(z.param_buffer_size) * size_of(r.weights) * z.param_buffer_count;

  // ZeRO-1/2 with the optimizer on the CPU (DeepSpeed runtime/zero/stage_1_and_2.py, DeepSpeedZeroOptimizer):
  // __init__ allocates temp_grad_buffer_for_gpu_offload on the GPU and temp_grad_buffer_for_cpu_offload on the
  // host (pinned with pin_memory), each largest_param_numel elements of the 16-bit dtype. With
  // gradient_accumulation_steps > 1, async_accumulate_grad_in_cpu_via_gpu keeps a whole 16-bit copy of every
  // parameter in the rank's partition (accumulated_grads_in_cpu); the first and last of them may extend past
  // the partition by less than one largest parameter each, so min(Psi, Psi/N_d + 2 x largest) bounds it (per
  // parameter group; a second group, such as Hugging Face's no-weight-decay norms, adds two of its largest).
  // The largest layer stands in for the largest tensor (equal without biases); unknown (0), the staging
  // buffers are left out and the accumulation buffer is the partition alone.
  placement offload_staging{};
  if (z.optimizer.device == offload_device::cpu && (z.stage == 1 || z.stage == 2)) {
    const bytes_per_element width = size_of(r.weights);
    const bytes staging = t.largest_layer * width;
    bytes host = staging;
    if (t.gradient_accumulation_steps > 1) {
      const elements bound = largest_share(t.params, n) + t.largest_layer * 2;
      host += (bound < t.params ? bound : t.params) * width;
    }
    offload_staging = {staging, host, z.optimizer.pin_memory ? host : bytes{}, bytes{}};
  }

  // Built whole at the end rather than cleared and filled: clearing the ~300-byte result first costs more than
  // the arithmetic.
  return model_state_estimate{model_state_terms{weights, gradients, master_weights, fp32_gradients, optimizer_moments,
                                                hpz_secondary, gathered_layer, detail::on_host_pinned(swap), offload_staging,
                                                frozen_weights},
                              ranks_per_node(t), n};
}
}  // namespace detail
constexpr model_state_estimate estimate_model_states(const training_states& t, std::int64_t rank = -1) {
  validate(t);
  return detail::estimate_model_states_unchecked(t, rank);
}

/// The training states of model m's most loaded tensor/pipeline-parallel rank (the stage parameters_per_rank picks):
/// what trains in params, what is frozen in frozen and frozen_weights, as t.adapt says; in place.
constexpr void place_on_rank(training_states& t, const transformer_config& m, const parameter_counts& c, std::int64_t tp,
                             std::int64_t pp) {
  const stage_parameters all = parameters_per_rank(m, c, tp, pp);
  if (!t.adapt.trains_everything()) validate(t.adapt, m);
  if (!t.adapt.any()) {
    t.params = all.most_loaded;
    t.frozen = elements{};
    t.frozen_weights = bytes{};
    return;
  }
  const parameter_split s = split_parameters(m, c, t.adapt, t.recipe.weights);
  const std::int64_t layers = first_stage_layers(m, pp);
  const bool first = pp == 1 || all.first_stage >= all.last_stage;
  elements trainable = s.layer_trainable * layers, frozen = s.layer_frozen * layers;
  bytes frozen_bytes = s.layer_frozen_bytes * layers;
  if (first) {
    trainable += s.embedding_trainable + s.vision_trainable;
    frozen += s.embedding_frozen + s.vision_frozen;
    frozen_bytes += s.embedding_frozen_bytes + s.vision_frozen_bytes;
  }
  if (pp == 1 || !first) {
    trainable += s.head_trainable;
    frozen += s.head_frozen;
    frozen_bytes += s.head_frozen_bytes;
    if (m.tied_embeddings && pp > 1) {  // the last stage keeps its own copy of the tied embedding as the output layer
      trainable += s.embedding_trainable;
      frozen += s.embedding_frozen;
      frozen_bytes += s.embedding_frozen_bytes;
    }
  }
  t.params = largest_share(trainable, tp);
  t.frozen = largest_share(frozen, tp);
  t.frozen_weights = bytes_of(detail::ceil_div(frozen_bytes.count(), tp));
  if (t.params.count() == 0)
    detail::fail("nothing trains on the most loaded rank; add LoRA targets on its layers or unfreeze a component");
}
/// Adafactor's factored second moment on a rank that trains `params` of model m's c.total parameters: the model's
/// own shapes (adafactor_second_moment_elements), in the rank's share, rounded up.
constexpr elements adafactor_factored_on_rank(const transformer_config& m, const parameter_counts& c, elements params) {
  return elements_of(detail::ceil_div(detail::checked_mul(adafactor_second_moment_elements(m).count(), params.count()), c.total.count()));
}

/// The same, as a copy.
constexpr training_states states_on_rank(const transformer_config& m, const parameter_counts& c, training_states t, std::int64_t tp,
                                         std::int64_t pp) {
  place_on_rank(t, m, c, tp, pp);
  return t;
}

}  // namespace zeromem
