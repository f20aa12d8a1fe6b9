// The peak of one optimizer step on one GPU: forward (with the loss), backward walked layer by layer, and the
// optimizer step, each with the resting states plus what is alive at its high-water mark. Checked against real
// steps measured on an H100 (docs/validation.md, tests/data/calibration).
//
// What each phase holds, with the code that allocates it:
//  - resting: weights and optimizer states; gradients are None between steps (zero_grad(set_to_none=True), the
//    PyTorch 2.x default).
//  - forward: the saved activations of every layer, then the loss. transformers' ForCausalLMLoss
//    (loss/loss_utils.py) keeps the lm_head logits in the compute dtype, upcasts them with logits.float() and
//    calls cross_entropy, whose log_softmax output (fp32) is saved for backward: c + 4 + 4 bytes per logit at
//    the end of forward, 4 after it, beside the shifted int64 labels.
//  - backward: starts with the loss: nll_loss's gradient and log_softmax's gradient (fp32 each) beside the saved
//    log-softmax (12 bytes per logit). Then layer by layer: parameter gradients appear as the layer's
//    activations are freed (a recomputed layer is alive whole with its gradients), and inside a layer the MLP's
//    nodes and norms each have a moment. It ends with every gradient alive and the gradient of the embedding output;
//    with tied embeddings, the embedding's new gradient and lm_head's held one summed out of place instead.
//  - optimizer step: every gradient plus the optimizer's temporaries. torch.optim.AdamW with foreach (the
//    default on CUDA) takes torch._foreach_sqrt of every exp_avg_sq at once (optim/adam.py _multi_tensor_adam):
//    one parameter-sized buffer in the state dtype. forloop (_single_tensor_adam) holds sqrt and its quotient
//    for one tensor at a time (2 x the largest tensor); fused (_fused_adamw_) allocates none.
//  - FSDP2 (torch.distributed.fsdp fully_shard per decoder layer and on the root; _fsdp_param.py,
//    _fsdp_collectives.py): sharded parameters and states rest; the root (embedding, final norm, lm_head) stays
//    unsharded from its all-gather in forward to the end of backward; one layer is all-gathered ahead
//    (backward prefetch); each layer's gradients are unsharded in the compute dtype, copied into a
//    reduce-scatter input in the reduce dtype (the previous one still held) and kept as a shard; the layer's own
//    unsharded parameters are freed before that copy (post_backward reshards, then reduces).
//    reshard_after_forward=False (SHARD_GRAD_OP) keeps every layer unsharded from forward to its backward.
//  - every phase: the cuBLAS workspaces of the process's two handles (forward's thread and autograd's), which
//    PyTorch allocates through its caching allocator at their first matmul and keeps (cublas_workspace_bytes).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "zeromem/training/activations.hpp"
#include "zeromem/training/allocator_blocks.hpp"
#include "zeromem/inference/forward.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/cuda_reduce.hpp"
#include "zeromem/core/gpus.hpp"
#include "zeromem/core/parallel.hpp"
#include "zeromem/jobs/job.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/training/model_states.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// How the loss is computed. hf: transformers' ForCausalLMLoss (full logits, fp32 upcast, log_softmax).
/// fused: a chunked linear-cross-entropy kernel (Liger-Kernel fused_linear_cross_entropy, Apple's Cut Cross
/// Entropy) that never holds the full logits; it computes the gradients of the hidden states and of the lm_head
/// weight during forward and keeps them for backward.
enum class loss_impl { hf, fused };

/// torch.optim's implementation of the update (optim/adam.py): foreach (default on CUDA), fused, forloop.
enum class optimizer_impl { foreach_kernels, fused, forloop };

/// What torch.optim picks when neither foreach nor fused is given: foreach on CUDA (optim/optimizer.py
/// _default_to_fused_or_foreach), except Adafactor, which keeps its for-loop unless foreach=True is passed
/// (optim/_adafactor.py: "Adafactor will default to the slower single tensor for-loop implementation").
constexpr optimizer_impl pytorch_default_impl(optimizer_kind k) {
  return k == optimizer_kind::adafactor ? optimizer_impl::forloop : optimizer_impl::foreach_kernels;
}

/// What DeepSpeed steps with when its config names the optimizer: Adam and AdamW become deepspeed.ops.adam.FusedAdam
/// (runtime/engine.py _configure_basic_optimizer, unless "torch_adam": true), whose multi-tensor kernel updates in
/// place like torch's fused; any other name is torch.optim's class, with PyTorch's default.
constexpr optimizer_impl deepspeed_default_impl(optimizer_kind k) {
  return k == optimizer_kind::adam || k == optimizer_kind::adamw ? optimizer_impl::fused : pytorch_default_impl(k);
}

/// PyTorch's CUDA caching allocator: default segments, or PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
enum class allocator_mode { caching, expandable };

enum class step_phase { forward, backward, optimizer_step };

struct step_config {
  loss_impl loss = loss_impl::hf;
  optimizer_impl optimizer = optimizer_impl::foreach_kernels;
  allocator_mode allocator = allocator_mode::caching;
  /// FSDP2 ranks sharding the model (0: no FSDP2; the model states follow training_states.zero instead).
  std::int64_t fsdp_world = 0;
  /// FSDP2 reshard_after_forward: true for FULL_SHARD, false for SHARD_GRAD_OP.
  bool reshard_after_forward = true;
  /// The loss is computed inside the model's forward call (transformers' CausalLM given labels), so FSDP2's root
  /// post-forward, which frees the last layer's all-gather output, comes after it; false where the loss is taken from
  /// the returned logits (verl's and OpenRLHF's log-probs).
  bool loss_in_forward = true;
  /// A value model (an RLHF critic): a scalar head over the hidden states in place of lm_head (rlhf's value_backbone
  /// models it as tied, so no output layer is counted). DeepSpeed ZeRO-3's module trace then has no output layer
  /// between the forward and the backward (zero3_retained_parameters).
  bool value_head = false;
  /// DeepSpeed ZeRO-3's backward releases nothing it gathers: DeepSpeed 0.16.0-0.16.x with gradient checkpointing
  /// miscounts ds_grads_remaining (DeepSpeed issue #7116, from PR #6726; known_defects), so layer i's backward holds
  /// every layer from i up and the output layer gathered, and the embedding's the whole model. ZeRO-3 steps only.
  bool zero3_backward_keeps_gathered = false;
  /// PyTorch DistributedDataParallel: its Reducer allocates all-reduce buckets as large as every gradient when it
  /// is built (torch/csrc/distributed/c10d/reducer.cpp initialize_buckets: bucket.gradients = at::empty(...)),
  /// so they are alive through every phase; autograd's gradients are copied into them.
  bool ddp = false;
  /// DDP(gradient_as_bucket_view=True): the gradients are views into the buckets, "the saved memory size will be
  /// equal to the total gradients size" (torch.nn.parallel.DistributedDataParallel docs).
  bool gradient_as_bucket_view = false;
  /// zero_grad(set_to_none=False): gradients stay allocated (zeroed) between steps, so they are alive from the start
  /// of every forward. A gradient accumulation (training_states::gradient_accumulation_steps > 1) does the same for
  /// every micro-batch after the first, whose forward and backward are then the higher.
  bool keep_gradients = false;
  /// Driver-side memory outside PyTorch's allocator once the process has allocated: the CUDA context. Default: measured
  /// on an H100 80GB HBM3 (an H200 the same) with torch 2.11.0+cu130 and driver 580.159.04 after torch.zeros(1)
  /// (tests/data/calibration, cuda_context_bytes).
  bytes cuda_context = bytes_of_checked(650'969'088);
  /// Driver-side memory outside PyTorch's allocator that a training step adds to the context: the kernel modules CUDA
  /// loads on first launch (lazy loading) and the cuBLAS/cuBLASLt handles' own memory: cudaMemGetInfo's used minus
  /// max_memory_reserved() minus the context after a step. Default: what a fresh process's first step held in 18 of the
  /// 21 such steps measured on an H100 and an H200 (torch 2.11.0+cu130, driver 580.159.04), 153,092,096 B = 146 MiB
  /// (148 MiB in two; 130 MiB under SGD with momentum). It grows with the kinds of kernels a process has run: up to
  /// 178 MiB after dozens of models in one process.
  bytes cuda_modules = bytes_of_checked(153'092'096);
  /// cuBLAS workspaces inside PyTorch's allocator, alive from the first step on: an H100's two by default (the card
  /// cuda_context was measured on); blas_workspaces_of(find_gpu(...), training_blas_handles) for another.
  bytes blas_workspaces = h100_blas_workspace * training_blas_handles;
  /// The card's multiprocessors, which set the CUDA reduction kernel's staging buffer (cuda_sum_staging_bytes): an
  /// H100's by default, find_gpu(...).multiprocessors for another.
  cuda_multiprocessors multiprocessors{};
  /// The caching allocator's reserved bytes above the allocated peak, as a fraction of that peak (fragmentation,
  /// separate pools for communication streams). zeromem does not model it: measure
  /// torch.cuda.max_memory_reserved() / max_memory_allocated() - 1 on your job and pass it. Default 0.
  double reserve_fraction = 0.0;
};

/// What is alive at one phase's high-water mark, by kind. Each starts a 64-byte cache line: with thirteen 8-byte terms
/// the step estimate's time moved by 10% with where its temporaries fell on the stack, on the same instructions
/// (docs/performance.md).
struct alignas(64) step_terms {
  bytes resting;          // weights, master weights and optimizer states (gradients are None between steps)
  bytes gradients;        // parameter gradients (kept shards; FSDP2's unsharded gradients of the current layer)
  bytes activations;      // tensors autograd saved for backward (checkpoints under full recompute); in forward under
                          // full recompute, a checkpointed layer's working tensors where they set the phase's peak, and
                          // without it the last layer's routed experts' unsaved pair (transformers 5's MoE)
  bytes recomputed;       // the layer being recomputed, whole
  bytes flowing;          // gradients of activations flowing through the layer being differentiated
  bytes loss;             // logits, their fp32 upcast, the saved log-softmax and their gradients
  bytes gathered;         // FSDP2 unsharded parameters and all-gather outputs
  bytes communication;    // reduce-scatter inputs; DeepSpeed's reduce and prefetch buckets
  bytes optimizer_temporaries;
  bytes dequantized;      // a quantized frozen weight dequantized to 16 bits for the matmul being computed
  bytes kv_cache;         // a training forward's KV cache: the K and V attention does not keep itself (forward only)
  bytes blas_workspaces{};  // cuBLAS workspaces held by the process (step_config::blas_workspaces), in every phase
  bytes autocast_cache{};   // forward under autocast and full recompute: autocast's 16-bit casts of every layer's weights
  bytes allocator_blocks{};  // the caching allocator's blocks above the per-parameter tensors (parameter_block_excess)

  template <class F>
  constexpr void for_each(F&& f) const {
    f("resting_states", resting);
    f("blas_workspaces", blas_workspaces);
    f("gradients", gradients);
    f("activations", activations);
    f("recomputed_layer", recomputed);
    f("flowing_gradients", flowing);
    f("loss", loss);
    f("gathered_parameters", gathered);
    f("communication_buffers", communication);
    f("optimizer_temporaries", optimizer_temporaries);
    f("dequantized_weight", dequantized);
    f("kv_cache", kv_cache);
    f("autocast_cache", autocast_cache);
    f("allocator_blocks", allocator_blocks);
  }
  ZEROMEM_ALWAYS_INLINE constexpr bytes total() const {
    return resting + gradients + activations + recomputed + flowing + loss + gathered + communication + optimizer_temporaries +
           dequantized + kv_cache + blas_workspaces + autocast_cache + allocator_blocks;
  }
  /// The largest term above the resting states: what sets this phase's peak.
  constexpr std::string_view largest() const {
    std::string_view name = "resting_states";
    bytes best{};
    for_each([&](const char* n, bytes b) {
      const std::string_view term(n);
      if (b >= best && b.count() > 0 && term != "resting_states" && term != "blas_workspaces" && term != "allocator_blocks") {  // a tie goes to the later, transient term
        best = b;
        name = n;
      }
    });
    return name;
  }
};

struct step_estimate {
  step_terms forward{};
  step_terms backward{};
  step_terms optimizer_step{};
  bytes peak{};
  step_phase peak_phase = step_phase::forward;
  bytes reserved{};       // the allocator's reserved bytes at the peak: peak x (1 + reserve_fraction)
  bytes cuda_context{};
  bytes cuda_modules{};   // kernel modules and library handles outside the allocator (step_config::cuda_modules)

  constexpr const step_terms& phase(step_phase p) const {
    return p == step_phase::forward ? forward : p == step_phase::backward ? backward : optimizer_step;
  }
  /// What the driver reports as used at the peak: reserved + the CUDA context + the step's modules.
  constexpr bytes device_used() const { return reserved + cuda_context + cuda_modules; }
};

/// The step model's stated accuracy, a share of the card: every measured step's peak within 3%, 5% for steps held out
/// (docs/validation.md). plan keeps this much free by default; a verdict whose margin is inside it is close either way.
inline constexpr double stated_accuracy = 0.05;

/// Whether a step fits a card whose driver reports `device_total` bytes (cudaMemGetInfo's total).
struct step_verdict {
  bytes capacity{};
  bytes needed{};
  constexpr bytes margin() const { return capacity - needed; }
  constexpr bool fits() const { return needed <= capacity; }
  /// The margin, fitting or not, is under stated_accuracy of the card.
  constexpr bool close() const {
    const double m = static_cast<double>(margin().count());  // in double: no int64 negation
    return (m < 0.0 ? -m : m) < stated_accuracy * static_cast<double>(capacity.count());
  }
};

constexpr step_verdict verdict_of(const step_estimate& e, bytes device_total) { return {device_total, e.device_used()}; }

/// Whether estimate_step walks a layer's backward node by node (its moments 2b-2j): transformers' code at tp 1 without
/// selective recompute (and, in the step, with the layer's weights trained as its walk reads them). Elsewhere a layer
/// is read before and after its backward only.
ZEROMEM_ALWAYS_INLINE constexpr bool walks_inside_layers(const activation_config& a) {
  return a.impl == implementation::hf && a.tp == 1 && a.recomputation != recompute::selective;
}

constexpr std::string_view name(step_phase p) {
  return p == step_phase::forward ? "forward" : p == step_phase::backward ? "backward" : "optimizer_step";
}
constexpr std::string_view name(loss_impl l) { return l == loss_impl::hf ? "hf" : "fused"; }
constexpr std::string_view name(optimizer_impl o) {
  return o == optimizer_impl::foreach_kernels ? "foreach" : o == optimizer_impl::fused ? "fused" : "forloop";
}
constexpr std::string_view name(allocator_mode a) { return a == allocator_mode::caching ? "default" : "expandable"; }

inline loss_impl parse_loss(std::string_view s) {
  static constexpr loss_impl all[] = {loss_impl::hf, loss_impl::fused};
  return detail::parse_named(s, all, "loss");
}
inline optimizer_impl parse_optimizer_impl(std::string_view s) {
  static constexpr optimizer_impl all[] = {optimizer_impl::foreach_kernels, optimizer_impl::fused, optimizer_impl::forloop};
  return detail::parse_named(s, all, "optimizer implementation");
}
inline allocator_mode parse_allocator(std::string_view s) {
  static constexpr allocator_mode all[] = {allocator_mode::caching, allocator_mode::expandable};
  return detail::parse_named(s, all, "allocator");
}

constexpr void validate(const step_config& s) {
  if (s.fsdp_world < 0) detail::fail_value("the FSDP2 world size cannot be negative", s.fsdp_world, "pass 0 without FSDP2");
  if (s.cuda_context.count() < 0) detail::fail("the CUDA context bytes cannot be negative; pass --cuda-context such as 650MB");
  if (s.cuda_modules.count() < 0) detail::fail("the CUDA module bytes cannot be negative; pass --cuda-modules such as 146MiB, or 0B");
  if (s.blas_workspaces.count() < 0) detail::fail("the cuBLAS workspace bytes cannot be negative; pass --blas-workspaces such as 64MiB, or 0B");
  if (s.ddp && s.fsdp_world > 0) detail::fail("DDP and FSDP2 both wrap the model; choose --ddp or --fsdp");
  if (s.gradient_as_bucket_view && !s.ddp) detail::fail("--gradient-as-bucket-view is a DDP option; add --ddp");
  if (!(s.reserve_fraction >= 0.0 && s.reserve_fraction < 10.0))
    detail::fail_value("the allocator reserve fraction must be in [0, 10)", s.reserve_fraction,
                       "pass max_memory_reserved / max_memory_allocated - 1 measured on your job");
}

namespace detail {
/// A layer's breakdown filled only where it is needed: a union leaves it unwritten otherwise (clearing two of them at
/// every estimate, with `rep stos`, took a fifth of the step's own time), and stays usable in a constant expression.
union breakdown_slot {
  char empty;
  layer_activations value;
  constexpr breakdown_slot() : empty() {}
  constexpr explicit breakdown_slot(const layer_activations& v) : value(v) {}
};

/// FSDP2's padding of transformers 5's 3D experts, in elements a layer. FSDP2 chunks each parameter's dim 0 over the
/// ranks and pads every chunk to chunk 0's size (_fsdp_param.py _init_sharded_param: torch.chunk, then
/// padded_sharded_param_size = chunks[0].size(), allocated on every rank): the experts' dim 0 is E, so each rank holds
/// ceil(E / ranks) experts of each layer (rank 0 holds them all as its own), and the all-gather outputs and reduce-scatter
/// inputs are ranks x that (_fsdp_collectives.py). The other parameters' padding, under a row each, is left out.
ZEROMEM_ALWAYS_INLINE constexpr std::int64_t fsdp2_expert_padding(const transformer_config& m, std::int64_t ranks, std::int64_t tp) {
  if (tp > 1) fail("FSDP2 over transformers 5's 3D experts with tensor parallelism is not modelled; use tp 1, or --expert-linears");
  const std::int64_t e = m.moe.experts;
  return checked_product(checked_product(ceil_div(e, ranks), ranks) - e, stacked_experts_elements(m) / e);
}
}  // namespace detail

namespace detail {
/// Whether every parameter trains as one tensor of its own (no frozen part, adapter or paged state): then torch.optim's
/// states and the gradients are laid out as the weights are, and their allocator blocks are counted.
constexpr bool every_parameter_trains(const training_states& t) {
  return t.frozen.count() == 0 && !t.adapt.paged_optimizer && !t.adapt.lora_enabled();
}
/// The caching allocator's blocks above the gradients, one tensor per parameter (parameter_block_excess), all of them.
ZEROMEM_NOINLINE ZEROMEM_COLD constexpr bytes gradient_block_excess(const transformer_config& m, const training_states& t,
                                                                     const precision_recipe& r, bool expandable, bytes grads_all) {
  if (!every_parameter_trains(t) || grads_all.count() == 0) return bytes{};
  return parameter_block_excess(m, r.gradients, expandable);
}
/// A moment's share of them: as many as its gradients are of all the gradients.
constexpr bytes held_block_excess(bytes gradients, bytes grads_all, bytes grads_excess) {
  if (grads_all.count() == 0) return bytes{};
  const double held = std::min(1.0, static_cast<double>(gradients.count()) / static_cast<double>(grads_all.count()));
  return bytes_of(static_cast<std::int64_t>(held * static_cast<double>(grads_excess.count()) + 0.5));
}
/// The caching allocator's blocks above the weights, torch.optim's states and the gradients, one tensor per parameter
/// each (parameter_block_excess; the states and gradients laid out as the weights are built): in every phase the
/// weights' and states', the gradients' where they are alive, a backward moment's share of them. The peak, its phase
/// and the reserved bytes are compared again. Out of line and cold: ZeRO's, FSDP2's and mixed-precision steps never run
/// it, and their hot path stays as compact as it was.
ZEROMEM_NOINLINE ZEROMEM_COLD constexpr void add_allocator_blocks(step_estimate& out, const transformer_config& m, const training_states& t,
                                                     const precision_recipe& r, bool expandable, bytes grads_all, bytes grads_excess,
                                                     bool accumulating) {
  // The weights in their storage dtype (under LoRA the frozen base's; the adapters, small tensors, are left out).
  const bytes weights_excess =
      grads_excess.count() > 0 && r.gradients == t.recipe.weights ? grads_excess : parameter_block_excess(m, t.recipe.weights, expandable);
  const optimizer_traits& ot = traits_of(t.optimizer.kind);
  const int states = !every_parameter_trains(t) ? 0
                     : ot.moments >= 0          ? ot.moments + extra_states(t.optimizer)
                                                : (t.optimizer.kind == optimizer_kind::adafactor && t.optimizer.adafactor_momentum ? 1 : 0);
  const dtype state = r.optimizer_dtype();
  const bytes state_excess = states == 0 ? bytes{} : state == t.recipe.weights ? weights_excess : parameter_block_excess(m, state, expandable);
  const bytes resting_excess = weights_excess + state_excess * states;
  out.forward.allocator_blocks = resting_excess + (accumulating ? grads_excess : bytes{});
  out.backward.allocator_blocks = resting_excess + held_block_excess(out.backward.gradients, grads_all, grads_excess);
  out.optimizer_step.allocator_blocks = resting_excess + grads_excess;
  out.peak = out.forward.total();
  out.peak_phase = step_phase::forward;
  if (const bytes b = out.backward.total(); b > out.peak) {
    out.peak = b;
    out.peak_phase = step_phase::backward;
  }
  if (const bytes st = out.optimizer_step.total(); st > out.peak) {
    out.peak = st;
    out.peak_phase = step_phase::optimizer_step;
  }
  out.reserved = out.peak;
}
}  // namespace detail

namespace detail {
/// Whether a step walks a layer's modules for what DeepSpeed ZeRO-3's trace keeps gathered (zero3_retained_parameters):
/// stage 3 under DeepSpeed, not FSDP2.
constexpr bool walks_zero3_trace(const training_states& t, const step_config& s) { return t.zero.stage == 3 && s.fsdp_world == 0; }

/// The inputs of a step, checked before anything is computed from them.
constexpr void validate_step(const transformer_config& m, const training_states& t, const activation_config& a, const step_config& s,
                             const pipeline_config& p, const runtime_overheads& o) {
  validate(a, m);
  validate(p, m);
  validate(s);
  validate(o);  // stage3_max_reuse_distance sizes the ZeRO-3 trace's retained set
  if (ZEROMEM_RARELY(s.zero3_backward_keeps_gathered && !walks_zero3_trace(t, s)))
    fail("DeepSpeed 0.16.x's backward that keeps every gathered parameter is a ZeRO-3 defect; use ZeRO stage 3 without FSDP2, or drop it");
}

/// The one walk over the model's modules a step reads (validated inputs): the parameter counts, and under DeepSpeed
/// ZeRO-3 what its trace keeps gathered on the first pipeline stage. It reads the model, the stage and whether FSDP2
/// runs the step, tp, pp, the value head and the ZeRO-3 overheads only, so a caller evaluating many steps of one model
/// (plan) walks once for each of those.
constexpr counts_and_retained step_walk(const transformer_config& m, const training_states& t, const activation_config& a,
                                        const step_config& s, const pipeline_config& p, const runtime_overheads& o) {
  return walks_zero3_trace(t, s) ? count_with_zero3_retained(m, first_stage_layers(m, p.pp), a.tp, p.pp == 1 && !s.value_head, p.pp == 1,
                                                            o.max_reuse_distance, o.param_persistence_threshold)
                                 : counts_and_retained{count_parameters_unchecked(m), {}};
}

/// estimate_step of inputs validate_step has checked, given their step_walk.
constexpr step_estimate estimate_walked_step(const transformer_config& m, const training_states& t_in, const activation_config& a,
                                             const step_config& s, const pipeline_config& p, const runtime_overheads& o,
                                             const counts_and_retained& walked) {
  using detail::checked_product, detail::checked_sum;
  const bool zero3 = walks_zero3_trace(t_in, s);
  const parameter_counts& counts = walked.counts;
  training_states t = t_in;
  place_on_rank(t, m, counts, a.tp, p.pp);  // what trains and what is frozen on this rank
  if (t.largest_layer.count() == 0 && needs_largest_layer(t.zero)) t.largest_layer = largest_share(counts.largest_layer, a.tp);
  validate(t);
  const parameter_split split = split_parameters(m, counts, t.adapt, t.recipe.weights);

  const dtype compute = a.activation_dtype;
  const stage_activations stage = detail::first_stage_activations_unchecked(m, a, p, t.adapt);
  const std::int64_t L = stage.layers_on_stage;
  const std::int64_t s_local = detail::quotient(a.seq_len, a.cp), sb = checked_product(s_local, a.micro_batch);
  // dL/d(hidden states), c sbh. Under autocast the residual stream is fp32 (autocast leaves add off its lists), so its
  // gradient is too; a 16-bit branch output gets its own cast of it (the engine's validate_outputs). Measured on an
  // H200: AMP steps whose layer walk sets the peak, Gemma under recompute −2.9% → −0.6% with it.
  const bytes hidden_grad = elements_of(checked_product(sb, m.hidden)) * size_of(a.autocast ? dtype::fp32 : compute);

  // Activations: what every layer saves (a checkpoint under full recompute), and one layer computed whole.
  const bytes saved = stage.total - stage.logits;            // the log-softmax is the loss term's
  // Where sliding-window and full-attention layers alternate and differ (stage_activations), F of the stage's layers
  // (every N-th) keep the full-attention layer's bytes.
  const std::int64_t F = stage.full_attention_layers, N = m.sliding_window_pattern;
  const bytes layer_total = stage.per_layer.total(), full_layer_total = F > 0 ? stage.full_attention_layer.total() : bytes{};
  const bytes per_layer_saved = layer_total * stage.microbatches_in_flight;
  const bytes full_layer_saved = full_layer_total * stage.microbatches_in_flight;
  // What a layer holds whole while it is differentiated: its saved tensors, or under full recompute what the
  // recomputation saves again (the layer's tensors without recompute, the checkpoint aside).
  // Without recompute they are the stage's own breakdowns, referred to rather than copied or cleared.
  const bool recomputes = a.recomputation != recompute::none;
  // (The job without recompute is copied only where it is read.) The recomputation runs the layer's forward under
  // checkpointing, where transformers drops config.json's cache (modeling_layers.py GradientCheckpointingLayer.__call__:
  // use_cache=False, past_key_values=None): no K and V cache copies (an H200's GPT-2 step under recompute, use_cache
  // true: backward +2.60% before, 2 c sbh over at the MLP's product node).
  const auto whole = [&a] {
    activation_config w = a;
    w.recomputation = recompute::none;
    w.forward_cache = a.forward_cache && a.recomputation != recompute::full;
    return w;
  };
  const detail::breakdown_slot recomputed_layer =
      recomputes ? detail::breakdown_slot(detail::layer_activation_bytes_unchecked(m, whole(), t.adapt)) : detail::breakdown_slot();
  const detail::breakdown_slot recomputed_full_layer =
      recomputes && F > 0 ? detail::breakdown_slot(detail::layer_activation_bytes_unchecked(m, whole(), t.adapt, N - 1)) : detail::breakdown_slot();
  const layer_activations& layer_whole = recomputes ? recomputed_layer.value : stage.per_layer;
  const layer_activations& full_whole = recomputes && F > 0 ? recomputed_full_layer.value : stage.full_attention_layer;
  bytes recomputed{}, full_recomputed{};
  // Under full recompute the checkpoint (the layer's input) is alive beside the recomputed layer. The layer's saved
  // tensors count it once where its first node keeps that very tensor: a LayerNorm's input (F.layer_norm), OLMo-2's
  // and OPT-350M's linears reading the residual stream, and x.to(fp32) in transformers' RMSNorm (and OLMo's
  // LayerNorm) only when x is fp32 already (autocast's residual stream, fp32 compute), where `to` returns x itself.
  // A 16-bit x is copied: the recomputed layer holds its fp32 copy beside the checkpoint (the training-step oracle).
  const bool input_is_fp32 = a.autocast || compute == dtype::fp32;
  const bool norm_copies_input = a.impl == implementation::hf && !m.post_norms && !m.post_residual_norms &&
                                 (m.norm == norm_kind::rmsnorm || m.norm_input_fp32) && !input_is_fp32;
  // OLMo-2's q, k and v frozen under LoRA keep nothing of the residual stream unless an adapter's lora_A reads it
  // itself (layer_whole's attention input; an fp32 adapter keeps its own cast): the CPU step oracle's checkpointed
  // OLMo-2 LoRA steps.
  const bool layer_keeps_input = !m.post_norms || !t.adapt.lora_enabled() || a.autocast || layer_whole.attention_input.count() > 0;
  const bytes checkpoint_in_layer = a.recomputation == recompute::full && !norm_copies_input && layer_keeps_input ? layer_total : bytes{};
  if (recomputes) {
    const bool full = a.recomputation == recompute::full;
    recomputed = layer_whole.total() - (full ? checkpoint_in_layer : layer_total);
    if (F > 0) full_recomputed = full_whole.total() - (full ? checkpoint_in_layer : full_layer_total);
  }

  // Parameters by group on this rank: all of them (what FSDP2 gathers) and those that train (what has gradients).
  const elements layer_params = largest_share(counts.layer, a.tp);
  const elements layer_trainable = largest_share(split.layer_trainable, a.tp);
  const elements head_trainable = p.pp == 1 ? largest_share(split.head_trainable, a.tp) : elements{};
  const elements root_params = p.pp == 1 ? largest_share(counts.embedding + counts.position_embedding + counts.vision + counts.lm_head +
                                                             counts.final_norm, a.tp)
                                         : largest_share(counts.embedding + counts.position_embedding + counts.vision, a.tp);
  const elements root_trainable =
      largest_share(split.embedding_trainable + split.vision_trainable + (p.pp == 1 ? split.head_trainable : elements{}), a.tp);

  // Resting states and gradients of the whole rank, and of one layer.
  // comm: the communication buffers in backward; comm_outside_backward: in forward and the optimizer step, without
  // ZeRO-3's reduce-scatter copy (deepspeed_reduce_scatter_copy), which only a bucket's reduction in backward makes.
  bytes resting{}, grads_all{}, layer_grads_kept{}, head_grads{}, comm{}, comm_outside_backward{};
  bytes root_unsharded{}, layer_unsharded{}, layer_grads_unsharded{}, reduce_input{};
  const bool fsdp = s.fsdp_world > 0;
  // Gradients alive from the start (step_config::keep_gradients, or a micro-batch after the first of an accumulation):
  // every moment holds them all. The backward's new gradients are added into them in place (torch/csrc/autograd/
  // functions/accumulate_grad.h accumulateGrad: `variable_grad += new_grad`) and freed; AccumulateGrad nodes run as
  // soon as they are ready (their sequence_nr is UINT64_MAX, torch/csrc/autograd/function.h), so after a layer one new
  // gradient is held at a time, the layer's largest module's. FSDP2 reduce-scatters the layer's unsharded gradients
  // together as before and adds the new shard into the kept one (_fsdp_collectives.py foreach_reduce:
  // `sharded_param.grad._local_tensor += new_sharded_grad`).
  const bool accumulating = s.keep_gradients || t.gradient_accumulation_steps > 1;
  const bool partitioned_grads = !fsdp && t.zero.stage >= 2;  // DeepSpeed keeps gradient partitions only
  double per_param = 0.0;  // gradient bytes per parameter without FSDP2 (share)
  const auto share = [&](elements part) { return bytes_of(static_cast<std::int64_t>(per_param * static_cast<double>(part.count()) + 0.5)); };
  bytes new_layer_grad{}, new_embedding_grad{}, tied_gradient{}, root_shard_grads{}, root_reduce_input{};
  // DeepSpeed's 16-bit gradient partitions are one flat buffer, part of grads_all (0 at stages 0-1 and under FSDP2).
  // ZeRO-3 allocates it, zeroed, when the optimizer is built (stage3.py _setup_for_real_optimizer:
  // grad_partitions_flat_buffer = torch.zeros(...), never freed): alive from the start of every step, reduced
  // gradients copied (added, when accumulating) into their slices (__reduce_and_partition_ipg_grads). ZeRO-2 allocates
  // it in backward, at the first reduction of the bucket (stage_1_and_2.py copy_grads_in_partition: grads_in_partition
  // = torch.empty(...) when None; reduce_independent_p_g_buckets_and_remove_grads reduces once the next gradient
  // would pass reduce_bucket_size elements), and releases it after (_release_ipg_buffers): until then the gradients
  // made are in the bucket. That is the rank whose partition holds the model's last parameters (the output layer's,
  // reduced first); a rank holding earlier ones makes it later. Layers i <= buffer_top hold it: counted through layer
  // i's parameters, an upper bound at the moments of the one layer in which the bucket first fills. Without
  // accumulation; accumulating, grads_all from the start.
  bytes grad_buffer{};
  std::int64_t buffer_top = L;     // the highest layer whose backward holds grad_buffer (ZeRO-3: every one)
  bool buffer_at_head = true;      // lm_head's and the final norm's moments hold it
  bool buffer_at_end = true;       // the embeddings' moments hold it
  const bool stage2_partitioned = partitioned_grads && !zero3;
  // DeepSpeed ZeRO-3 gathers parameters by moment (zero3_retained_parameters): what it keeps at the turnaround, and in
  // backward the unsharded gradient of the module differentiated, until its copy into the reduce bucket (stage3.py
  // __add_grad_to_ipg_bucket: param.grad.data = the bucket's slice). They stand for model_states' gathered_layer (the
  // estimator's 4 x the largest module, in every phase): nothing is gathered in the optimizer step.
  const zero3_retained& kept3 = walked.kept;
  bytes_per_element zero3_width = size_of(dtype::bf16);  // set where zero3
  bytes zero3_adapters{};                                // PEFT's persistent adapters, gathered at every moment (zero3)
  bytes zero3_head_grad{}, zero3_layer_grad{};
  bytes stage2_head_grad{};  // ZeRO-2: lm_head's new whole gradient at its moment, before its hook copies it into the bucket
  // tie_word_embeddings: the shared weight feeds two nodes, so autograd sums its two gradients in the input buffer of
  // its AccumulateGrad before that runs (torch/csrc/autograd/input_buffer.cpp accumulate). lm_head's, made by the
  // walk's first node, waits there through every layer's moment (beside the existing gradient when accumulating);
  // the embedding's backward at the end makes a new whole table (embedding_dense_backward), and the two are summed
  // out of place, into a third table, once dL/d(embedding output) is freed: the CPU step oracle and the H200's
  // Gemma-7B step (its backward at that moment, −2.18% before) both hold the three. Under FSDP2 the same three
  // unsharded tables, in the compute dtype (an H200's FSDP2 rank of a tied Gemma-3 over 2 ranks, −24.4% before).
  const bool tied_head = m.tied_embeddings && p.pp == 1 && split.embedding_trainable.count() > 0;
  // Those tables are the token embedding alone (vocab x its width), the one parameter tied and the one
  // embedding_dense_backward makes at the end: learned positions (GPT-2's wpe, OPT's embed_positions) and OPT-350M's
  // project_in, in the embedding group too, get their own gradients, each kept as it is made (the CPU step oracle's
  // GPT-2 and OPT steps: all gradients and two more token tables at the end, not two more embedding groups).
  const auto token_table = [&] {  // computed where read: tied, accumulating, or the fused loss
    return split.embedding_trainable.count() > 0 ? elements_of(checked_product(m.vocab, m.token_width())) : elements{};
  };
  const precision_recipe r = trainable_recipe(t);  // the adapters' dtype under LoRA
  // A gradient autograd has just made, without FSDP2, before DeepSpeed's hook reduces it: a share of the rank's
  // gradients where they are kept whole (stages 0-1); at stages 2-3, which keep only partitions, the whole tensor in
  // the gradients' dtype, which the hook copies into the reduce bucket after AccumulateGrad has run (stage_1_and_2.py
  // reduce_ready_partitions_and_remove_grads, stage3.py reduce_partition_and_remove_grads).
  const auto just_made = [&](elements part) ZEROMEM_ALWAYS_INLINE { return partitioned_grads ? part * size_of(r.gradients) : share(part); };
  // FSDP2: sharded parameters in their storage dtype (fp32 under MixedPrecisionPolicy(param_dtype=bf16)),
  // optimizer states and gradient shards in the same dtype; all-gathers and unsharded gradients in the compute dtype.
  const dtype storage = r.fp32_master ? dtype::fp32 : r.weights;
  // FSDP2's local shards, ceil(n / ranks) of the parameters; transformers 5's experts are padded to whole dim-0 chunks
  // (pad: elements a layer; trainable_pad where the experts train).
  const std::int64_t pad = fsdp && m.moe.experts > 0 && m.moe.stacked ? detail::fsdp2_expert_padding(m, s.fsdp_world, a.tp) : 0;
  const bool experts_train = !t.adapt.lora_enabled();
  const std::int64_t trainable_pad = experts_train ? pad : 0;
  const elements shard = fsdp ? elements_of(detail::ceil_div(checked_sum(t.params.count(), checked_product(L, trainable_pad)), s.fsdp_world)) : elements{};
  if (ZEROMEM_RARELY(fsdp)) {
    const std::int64_t n = s.fsdp_world;
    precision_recipe states_recipe = r;
    states_recipe.fp32_master = false;
    states_recipe.weights = storage;
    // A paged optimizer's states live in host RAM, as estimate_model_states places them.
    resting = shard * size_of(storage) + (t.adapt.paged_optimizer ? bytes{} : optimizer_state_bytes(t.optimizer, states_recipe, shard)) +
              bytes_of(detail::ceil_div((t.frozen_weights + elements_of(experts_train ? 0 : checked_product(L, pad)) * size_of(t.recipe.weights)).count(), n));  // frozen: their shard
    grads_all = shard * size_of(storage);
    layer_grads_kept = elements_of(detail::ceil_div(checked_sum(layer_trainable.count(), trainable_pad), n)) * size_of(storage);
    head_grads = head_trainable * size_of(compute);           // the root's gradients stay unsharded until its post-backward
    root_unsharded = root_params * size_of(compute);
    layer_unsharded = elements_of(checked_sum(layer_params.count(), pad)) * size_of(compute);
    layer_grads_unsharded = layer_trainable * size_of(compute);
    reduce_input = elements_of(checked_sum(layer_trainable.count(), trainable_pad)) * size_of(storage);  // reduce_dtype: the gradients' (fp32 when mixed)
    if (tied_head) tied_gradient = largest_share(token_table(), a.tp) * size_of(compute);  // lm_head's, waiting
    head_grads += tied_gradient;
    // The root's own group is reduced last, in the final callback of backward (_fully_shard/_fsdp_state.py
    // _root_post_backward_final_callback): until then its sharded gradients do not exist (zero_grad(set_to_none)), and
    // its reduce-scatter input, all its gradients in the reduce dtype, is made after it has resharded
    // (_fsdp_param_group.py post_backward: reshard, then foreach_reduce; parameters dim 0 padded to the ranks, not counted).
    root_shard_grads = elements_of(detail::ceil_div(root_trainable.count(), n)) * size_of(storage);
    root_reduce_input = root_trainable * size_of(storage);
  } else {
    const model_state_estimate e = detail::estimate_model_states_unchecked(t, -1);
    grads_all = e.per_rank.gradients.gpu + e.per_rank.fp32_gradients.gpu;
    resting = e.gpu() - grads_all;
    if (zero3) {
      resting -= e.per_rank.gathered_layer.gpu;
      const bool lora = t.adapt.lora_enabled();
      zero3_width = size_of(lora ? t.recipe.weights : r.weights);
      if (!lora) zero3_layer_grad = kept3.largest_module * size_of(r.gradients);
      // The adapters are parameters to DeepSpeed like the rest: those at most the threshold persist, in their dtype.
      if (ZEROMEM_RARELY(lora)) {
        const lora_persistent adapters = detail::persistent_lora_elements_unchecked(m, t.adapt.lora, o.param_persistence_threshold, a.tp);
        zero3_adapters = (adapters.per_layer * L + adapters.vision) * size_of(r.weights);
      }
    }
    // lm_head's new whole gradient at stages 2-3, before its hook (a tied head's waits in the table's input buffer
    // instead: tied_gradient, below): ZeRO-3 counts it with the head gathered, ZeRO-2 with the gradients.
    if (partitioned_grads && !t.adapt.lora_enabled() && p.pp == 1 && !s.value_head && !m.tied_embeddings && head_trainable.count() > 0)
      (zero3 ? zero3_head_grad : stage2_head_grad) = largest_share(counts.lm_head, a.tp) * size_of(r.gradients);
    // A group's share of the rank's gradient bytes (sharded or offloaded alike), in proportion to its parameters, in
    // double: the exact product can pass 2^63, and double's relative error (2^-52) is under a byte for any share
    // below 4.5 PB (x87 long double, used before, took longer than the rest of the step's arithmetic).
    if (partitioned_grads) grad_buffer = e.per_rank.gradients.gpu;  // ZeRO-3 with the optimizer offloaded: on the CPU, 0 here
    if (ZEROMEM_RARELY(stage2_partitioned && !accumulating)) {
      // Elements handed to the bucket before layer i's moments end: the head's (a tied table's only after the
      // embedding's backward, which sums its two gradients first) and layers L - 1 down to i.
      const std::int64_t cap = o.reduce_bucket_size, head = head_trainable.count(), layer = layer_trainable.count();
      buffer_at_head = head > cap;
      buffer_top = buffer_at_head ? L : layer == 0 ? -1 : L - ((cap - head) / layer + 1);
      buffer_at_end = buffer_top >= 0 || checked_sum(head, checked_product(layer, L)) > cap;
    }
    per_param = static_cast<double>((grads_all - grad_buffer).count()) / static_cast<double>(t.params.count());
    layer_grads_kept = share(layer_trainable);
    head_grads = share(head_trainable);
    layer_grads_unsharded = layer_grads_kept;  // no sharding: a layer's gradients are kept as they appear
    // ZeRO-3 counts a module's new gradient where it gathers the module (zero3_layer_grad), not again here.
    if ((accumulating || stage2_partitioned) && zero3_layer_grad.count() == 0) {
      const elements largest_module = t.adapt.lora_enabled() ? split.adapters.largest_tensor : largest_layer_module(m);
      new_layer_grad = just_made(layer_trainable.count() > 0 ? largest_share(largest_module, a.tp) : elements{});
    }
    if (accumulating || tied_head || partitioned_grads) new_embedding_grad = just_made(largest_share(token_table(), a.tp));
    if (tied_head) tied_gradient = new_embedding_grad;  // the same table's, held in the input buffer
    head_grads += tied_gradient;
    if (t.zero.stage >= 1) {  // DeepSpeed's buckets live through the step; ZeRO-3's reduce-scatter copy in backward only
      comm = deepspeed_buffers(t.zero.stage, o);
      comm_outside_backward = comm - deepspeed_reduce_scatter_copy(t.zero.stage, o);
    }
    if (s.ddp) {
      if (t.zero.stage > 0) detail::fail("DDP replicates every state and does not combine with ZeRO stages; drop --ddp or --zero-stage");
      comm = comm_outside_backward = e.per_rank.gradients.gpu;  // the Reducer's buckets: a copy of every gradient
      if (s.gradient_as_bucket_view) grads_all = layer_grads_kept = head_grads = layer_grads_unsharded = bytes{};  // views into them
    }
  }

  const bytes grads_alive = accumulating ? grads_all : zero3 ? grad_buffer : bytes{};  // held from the start of forward
  // Held at lm_head's and the final norm's moments, before the layers' (ZeRO-2: only where the head fills the bucket).
  const bytes grads_at_head = accumulating ? grads_all : buffer_at_head ? grad_buffer : bytes{};
  // Accumulating, after the output layer's backward: every gradient, and beside them lm_head's waiting in a tied table's
  // input buffer; under FSDP2 the root's unsharded gradients (head_grads, the tied one among them), which its
  // post-backward adds into the kept shards only in backward's final callback (_fsdp_state.py
  // _root_post_backward_final_callback), as without accumulation.
  const bytes kept_accumulating = grads_all + (fsdp ? head_grads : tied_gradient);

  // QLoRA: the frozen weight of the matmul being differentiated, dequantized to 16 bits.
  const bytes dequantized = bytes_of(detail::ceil_div(split.dequantized_weight.count(), a.tp));

  // The loss: n logits on this rank.
  const std::int64_t logits = p.pp == 1 ? checked_product(sb, detail::ceil_div(m.vocab, a.tp)) : 0;
  // dL/d(lm_head's input): c sbh, or c sb word_embed_proj_dim after OPT-350M's project_out.
  const bytes head_input_grad = m.projected_embedding() ? elements_of(checked_product(sb, m.token_width())) * size_of(compute) : hidden_grad;
  bytes loss_forward{}, loss_backward{}, loss_held{};
  bytes logits_grad{}, head_made{};  // lm_head's backward (1b below): the logits' gradient, and what it adds to the loss's moment
  // Under autocast lm_head reads 16-bit casts of its fp32 weight and of its fp32 input (autocast_mode.cpp cached_cast),
  // and its backward is three nodes. MmBackward0 makes the two 16-bit gradients beside the logits' (A) and releases
  // what it saved, both casts. The input's cast node runs next and makes dL/d(input) in fp32 (autocast's wrapper casts
  // F.linear's arguments right to left, so the input's cast is the later node; tests/oracle/autocast_linear_casts.py
  // shows the CPU's order), then the weight's makes the fp32 weight gradient (B), the 16-bit one standing in for the
  // weight cast it replaced (counted in the saved tensors); the logits' gradient is gone. Tied, the fp32 gradient waits
  // in the input buffer. Measured on an H200: four AMP steps with accumulation whose backward peaks at lm_head (Llama,
  // Qwen3, OLMo, OLMo-2; a 50,304-token vocabulary over 4096 wide: 110,376,448 B over at A's terms with fp32 gradients)
  // read +0.36% ... +1.29% before, −0.018% ... −0.000% with these (22,528 to 1,053,696 B not explained). Read without a
  // lm_head bias, OPT-350M's project_out (a 16-bit input, not a cast), FSDP2, DDP, ZeRO, tensor parallelism or frozen
  // head weights.
  struct head_terms {
    bytes gradients, freed, flowing, logits;  // made; freed of the saved tensors; activations' gradients; the logits'
  };
  bool head_casts = false;  // lm_head is read at its casts' nodes (autocast_head)
  const auto autocast_head = [&]() ZEROMEM_NOINLINE ZEROMEM_COLD -> head_terms {
    const elements head_weight = m.tied_embeddings ? token_table() : counts.lm_head;
    const bytes input_cast = elements_of(checked_product(sb, m.hidden)) * size_of(compute);
    const bytes fp32_weight_grad = m.tied_embeddings ? tied_gradient : share(head_weight);
    const bytes mm_made = logits_grad + head_weight * size_of(compute) + input_cast;  // (A)
    if (fp32_weight_grad + hidden_grad > mm_made + input_cast) return {fp32_weight_grad, input_cast, hidden_grad, bytes{}};  // (B)
    return {head_weight * size_of(compute), bytes{}, input_cast, logits_grad};
  };
  if (logits > 0 && s.loss == loss_impl::hf) {
    const bytes c = elements_of(logits) * size_of(compute), f32 = elements_of(logits) * size_of(dtype::fp32);
    // Gemma-2's final_logit_softcapping (modeling_gemma2.py Gemma2ForCausalLM): logits = tanh(logits / cap) * cap,
    // tanh keeping its 16-bit output until its backward, after the loss's.
    const bytes softcap = m.final_logit_softcap > 0.0 ? c : bytes{};
    // The labels: pad(labels, (0, 1), value=ignore_index) (int64, b x (s + 1)) and shift_labels = labels[..., 1:]
    // .contiguous() (int64, sb) beside the cross-entropy; nll_loss keeps shift_labels, its target, until its backward
    // has run (autograd then frees a node's saved tensors), before log_softmax's. At one sequence the slice is already
    // contiguous (a size-1 dimension's stride is not compared: c10 TensorImpl::compute_contiguous), so .contiguous()
    // returns the view, and the target keeps the padded tensor itself.
    const bytes padded = bytes_of(checked_product(8, a.micro_batch, s_local + 1));
    const bool labels_view = a.micro_batch == 1;
    const bytes shifted = labels_view ? bytes{} : bytes_of(checked_product(8, sb));
    loss_held = f32 + softcap + (labels_view ? padded : shifted);                              // log_softmax output, saved
    loss_forward = c + (compute == dtype::fp32 ? bytes{} : f32) + f32 + softcap + padded + shifted;  // logits, .float(), log_softmax
    // Under autocast the final norm's output is fp32 and lm_head keeps only its 16-bit cast, but the CausalLM forward
    // holds that output (outputs.last_hidden_state, its local hidden_states) until it returns, after the loss:
    // 4 sbh more at the loss's moment (an H200's Gemma step under AMP, forward −5.0% → −0.00%; GPT-NeoX −3.1% → −0.8%).
    // OPT-350M's project_out hands lm_head a 16-bit tensor it keeps itself.
    if (a.autocast && a.impl == implementation::hf && !m.projected_embedding())
      loss_forward += elements_of(checked_product(sb, m.hidden)) * size_of(dtype::fp32);
    // A frozen output layer (LoRA; a frozen tied embedding) keeps no input, and the frame holds that output all the same:
    // c sbh at the loss's moment (the CPU step oracle's LoRA steps: forward −65,544 B before at sb 128, h 256); OPT-350M's
    // is project_out's, frozen too, word_embed_proj_dim wide (an OPT LoRA probe of the family step oracle's frames, with
    // OPTForCausalLM's outputs held through the loss: −32,768 B before at sb 128, width 128).
    else if (ZEROMEM_RARELY(t.adapt.lora_enabled() || (t.adapt.freeze_embeddings && m.tied_embeddings)) && a.impl == implementation::hf)
      loss_forward += elements_of(checked_product(sb, m.token_width())) * size_of(compute);
    loss_backward = f32 * 3 + softcap;                                                      // saved + nll_loss grad + log_softmax grad
    logits_grad = c;
    head_made = head_grads + stage2_head_grad + head_input_grad + logits_grad;
    head_casts = ZEROMEM_RARELY(a.autocast && a.impl == implementation::hf && !m.projected_embedding() && !m.lm_head_bias && !fsdp &&
                                !s.ddp && t.zero.stage == 0 && a.tp == 1 && split.head_trainable == counts.final_norm + counts.lm_head &&
                                (!m.tied_embeddings || tied_head));
    if (head_casts) {
      const head_terms h = autocast_head();
      head_made = h.gradients + h.flowing + h.logits - h.freed;
    }
  } else if (logits > 0) {
    // Fused linear-cross-entropy: dL/dhidden and dL/dW_lm_head computed in forward and held for backward.
    const bool head_trains = !t.adapt.lora_enabled() && !(m.tied_embeddings && t.adapt.freeze_embeddings);
    const elements head_weight = head_trains ? largest_share(m.tied_embeddings ? token_table() : counts.lm_head, a.tp) : elements{};
    loss_held = head_input_grad + head_weight * size_of(r.gradients);
    loss_forward = loss_held;
    loss_backward = loss_held;
  }

  // ---- forward: every saved activation, then the loss ----
  // FSDP2 keeps a group's flat all-gather output (ranks x its padded shard, compute dtype) in forward until the next
  // group's copy-out (_fsdp_param_group.py wait_for_unshard: comm_ctx.all_gather_state), and the last layer's until the
  // root's post-forward (_fsdp_state.py _post_forward): one layer's beside every forward moment inside the layers, and
  // beside the loss where the model's forward computes it (a CausalLM given labels; not a loss taken from the returned
  // logits, step_config::loss_in_forward). One rank copies nothing (world_size == 1).
  const bytes deferred_all_gather = fsdp && s.fsdp_world > 1 ? layer_unsharded : bytes{};
  const bytes gathered_forward =
      fsdp ? root_unsharded + (s.reshard_after_forward ? bytes{} : layer_unsharded * L) + (s.loss_in_forward ? deferred_all_gather : bytes{})
      : zero3 ? kept3.turnaround() * zero3_width + zero3_adapters
           : bytes{};
  // transformers' KV cache in a training forward (use_cache without checkpointing) lives until the model's output is
  // freed, after the loss: every layer's K and V copies that attention does not keep itself, and the first layer's
  // where LoRA leaves it keeping nothing (stage_activations::first_layer_cache_held).
  const bytes kv_cache = (forward_kv_cache_bytes(m, a) * (L - F) + (F > 0 ? forward_kv_cache_bytes(m, a, N - 1) * F : bytes{})) *
                             stage.microbatches_in_flight +
                         stage.first_layer_cache_held;
  // Under full recompute a checkpointed layer's forward saves nothing: its working tensors come and go as under
  // no_grad (forward_layer_peak), beside the checkpoints of the layers so far, before the output layer's tensors exist.
  // Where the MLP is wide beside the vocabulary, or eager attention's s x s scores are large, this is above the loss's
  // moment (the training-step oracle). Read for the layers forward_layer_peak models, in transformers' code with every
  // layer weight trained, without autocast (under it, the eager softmax's lower bound below), Korthikanti's dropout
  // (--dropout), tensor, context or pipeline parallelism, FSDP2 or ZeRO-3 (whose gathered layer would stand beside it),
  // and with config.json's dropout only where the layer's frames follow it (dropout_modelled); elsewhere the forward
  // keeps its moment at the loss.
  // Inside the last layer the output layer's tensors do not exist yet; GemmaModel's inputs_embeds stays referenced
  // beside its scaled copy (the first checkpoint) until the model returns, and GPT2Model's inputs_embeds and
  // position_embeds (one row of positions) beside their sum; OPTDecoder's pos_embeds are one row a sequence, beside the
  // fp32 attention mask it makes and the int64 position_ids (estimate_forward_only's model-level terms), which each
  // checkpointed layer's call holds under full recompute (stage.checkpoint_arguments).
  const bool opt_positions = positions_per_sequence(m);
  const bool checkpointed_calls = a.impl == implementation::hf && a.recomputation == recompute::full;
  const dtype table_output = a.autocast ? dtype::fp32 : compute;  // fp32 tables under autocast (embedding is on no list)
  const bytes position_rows = m.positions != position_kind::learned ? bytes{}
                              : opt_positions ? elements_of(checked_product(sb, m.hidden)) * size_of(table_output) +
                                                    bytes_of(checked_product(checkpointed_calls ? 4 : 12, sb))
                                              : elements_of(checked_product(s_local, m.hidden)) * size_of(table_output);
  // (Under LoRA the embedding's own output may be a leaf kept from forward to backward, stage.embedding_output, in saved:
  // there it is inputs_embeds, but for OPT-350M's, the token-wide input of project_in.)
  const bool embeddings_referenced = (m.scaled_embedding || m.positions == position_kind::learned) &&
                                     (stage.embedding_output.count() == 0 || m.projected_embedding());
  // Where the layers alternate (sliding_window_pattern N >= 2), the model's forward builds both kinds' masks whatever
  // layers it has (modeling_gemma3.py Gemma3TextModel.forward, Gemma-2's and modular_olmo3.py Olmo3Model.forward:
  // causal_mask_mapping's "full_attention" and "sliding_attention") and holds them until it returns. With fewer layers
  // than N no layer attends fully, so the stage's terms hold no full-attention eager mask, but every forward moment
  // inside the model does. (Its rotary pairs are made for the layer types present: an H200's 3-layer Gemma-3 step,
  // random-20261127-070, read +0.02% with a global pair counted.) The CPU step oracle's checkpointed Gemma-3 with 2
  // layers: forward −0.81% before.
  const bool kinds_absent = ZEROMEM_RARELY(N >= 2) && a.impl == implementation::hf && p.pp == 1 && L < N;
  const bytes absent_kinds_frame =
      kinds_absent && a.attention == attention_kind::eager
          ? bytes_of(checked_product(a.autocast ? 4 : detail::dtype_bytes_ceil(compute), a.micro_batch, s_local, s_local))
          : bytes{};
  const bytes before_output = saved - stage.output_layer + (embeddings_referenced ? hidden_grad : bytes{}) + position_rows +
                              absent_kinds_frame + stage.rotary_tables_unkept;
  // A LoRA layer (every base weight frozen, none quantized) runs the same frames with its adapters' own tensors
  // (forward_lora_modelled; bitsandbytes' dequantized weights are not modelled).
  const bool lora_layers = ZEROMEM_RARELY(t.adapt.lora_enabled()) && t.adapt.quantize == quantization::none && forward_lora_modelled(m, t.adapt.lora);
  bytes checkpointed_forward{};
  if (a.recomputation == recompute::full && a.impl == implementation::hf && !a.autocast && a.dropout == 0.0 && a.tp == 1 && a.cp == 1 &&
      p.pp == 1 && !fsdp && t.zero.stage < 3 && (split.layer_trainable == counts.layer || lora_layers) &&
      forward_layer_modelled(m, a.attention, s_local, true) && dropout_modelled(m)) {
    forward_only_config f{};
    f.seq_len = s_local;
    f.micro_batch = a.micro_batch;
    f.compute = compute;
    f.attention = a.attention;
    f.use_cache = false;  // transformers turns the cache off under gradient checkpointing
    f.device = a.device;
    f.train_dropout = true;  // model.train(): config.json's dropout runs
    if (lora_layers) f.lora = t.adapt.lora;
    // The last layer, and the last of each other kind (SmolLM3's NoPE layers; under SDPA's sliding-window mask Gemma-2's
    // and Gemma-3's sliding and full-attention layers), with fewer checkpoints beside it: those of the layers after it.
    checkpointed_forward = before_output + forward_layer_peak(m, f, L - 1);
    detail::for_each_other_layer_kind(m, f, L - 1, [&](std::int64_t i) {
      bytes later{};
      for (std::int64_t j = i + 1; j < L; ++j) later += F > 0 && full_attention_layer(m, j) ? full_layer_saved : per_layer_saved;
      const bytes other = before_output - later + forward_layer_peak(m, f, i);
      if (other > checkpointed_forward) checkpointed_forward = other;
    });
  }
  // Without recompute, the last layer's routed experts (transformers 5's grouped_mm_experts_forward) hold two [S, h]
  // tensors autograd keeps neither of beside every saved one: the routing-weight product out_g * w (mul keeps its
  // operands, not its result) and its reordered copy out_g[inv_perm] (indexing keeps the indices), in the weights'
  // dtype, until view + sum frees both, before the output layer's tensors. The two an H100's allocator trace
  // held at a checkpointed MoE layer's forward peak (forward_layer_peak). Above the loss's moment where the vocabulary
  // is small beside k h. Every layer's KV cache (use_cache without checkpointing) is there too.
  bytes routed_forward{};
  if (a.recomputation == recompute::none && a.impl == implementation::hf && !a.autocast && a.tp == 1 && a.cp == 1 && p.pp == 1 &&
      m.moe.experts > 0 && m.moe.stacked) {
    const dtype weights = m.moe.weights_in_compute_dtype ? compute : dtype::fp32;
    routed_forward = before_output + elements_of(checked_product(2, sb, m.moe.top_k, m.hidden)) * size_of(weights);
  }
  // autocast's cast cache (aten/src/ATen/autocast_mode.cpp cached_cast: the 16-bit cast of an fp32 leaf that requires
  // grad is cached, in grad mode or not; torch/amp/autocast_mode.py __exit__ clears the cache when the outermost
  // region exits) holds each trained layer linear's cast from its first use to the end of the forward and its loss.
  // Without recompute autograd saves those casts anyway (layer_activations::autocast_weights); under full recompute
  // the checkpoints save none of them, so every layer's casts stand beside the loss's moment. Frozen weights (LoRA's
  // base) are cast afresh at each use and not cached; FSDP2 gathers 16-bit parameters and ZeRO-3 partitions them, and
  // neither is read here. Measured on an H200 (19 AMP steps with recompute: forward −0.4% to −17.4% before).
  bytes autocast_cache{};
  if (ZEROMEM_RARELY(a.autocast && a.recomputation == recompute::full && !fsdp && t.zero.stage < 3)) {
    if (split.layer_trainable == counts.layer)
      autocast_cache = layer_whole.autocast_weights * (L - F) + full_whole.autocast_weights * F;
    else if (t.adapt.lora_enabled() && r.weights == dtype::fp32)  // fp32 adapters are cast and cached
      autocast_cache = largest_share(split.adapters.per_layer, a.tp) * size_of(compute) * L;
  }
  // Under autocast and full recompute, the last checkpointed layer's eager softmax: its input is the masked scores in
  // fp32 (QK^T is 16-bit, but the model's additive mask is made in inputs_embeds' dtype, fp32 under autocast, and add,
  // on no autocast list, promotes: masking_utils.py eager_mask) and its output fp32 (softmax is on CUDA autocast's fp32
  // list; transformers' eager functions also pass dtype=float32): 8 A beside the checkpoints and the arguments every
  // checkpointed call holds (the fp32 mask among them), the weight casts cached so far, the attention's q, k and v (at
  // least 16-bit) and, behind a pre-norm, the norm's fp32 output the attention reads. `softmax(attn_weights, dim=-1,
  // dtype=torch.float32).to(query.dtype)` (eager_attention_forward) is one statement: Python evaluates its right-hand
  // side before it rebinds attn_weights, so where query is 16-bit the copy is made beside both fp32 tensors, 2 A more.
  // A rotated query is fp32 under autocast (RoPE's cos and sin are in the hidden states' dtype, fp32, and mul promotes),
  // and `.to` returns it itself; OPT's (learned positions) and a NoPE layer's are 16-bit. The cache holds every earlier
  // layer's casts and this layer's q, k and v projections' (with their biases), not yet its output projection's or its
  // MLP's (autocast_mode.cpp cached_cast: a weight is cast at its first use). A lower bound for rotated layers: their
  // frame's other tensors (the fp32 rotated q and k, matmul's fold copies and casts, repeat_kv) are not counted;
  // forward_layer_peak has one compute dtype and does not read autocast. Measured on an H200: OPT under AMP, eager,
  // 2048 x 4 tokens, 16 heads (random-20261127-021), forward -58.8% without this moment, -10.7% with it as 8 A beside
  // the whole cache, and to the byte with the copy (536,870,912 B) and the last layer's out_proj, fc1 and fc2 casts not
  // yet made (41,959,424 B).
  // o_proj's weight and bias, elements (its cast, its gradient).
  const auto o_proj_params = [&] { return elements_of(checked_sum(checked_product(m.hidden, m.heads, m.head_size()), m.attention_out_bias ? m.hidden : 0)); };
  bytes casts_to_come{};  // autocast's weight casts not yet made at the checkpointed forward's moment
  if (ZEROMEM_RARELY(a.autocast && a.recomputation == recompute::full && a.impl == implementation::hf && a.attention == attention_kind::eager &&
                     m.eager_softmax_fp32 && m.attention_softcap == 0.0 && a.dropout == 0.0 && a.tp == 1 && a.cp == 1 && p.pp == 1 &&
                     !fsdp && t.zero.stage < 3)) {
    const bytes qkv = elements_of(checked_product(sb, checked_sum(m.heads, checked_product(2, m.kv_heads)), m.head_size())) * size_of(compute);
    const bytes norm_output = m.post_residual_norms || m.post_norms ? bytes{} : hidden_grad;  // fp32 under autocast
    const bool query_16bit = !rope_layer(m, L - 1) && compute != dtype::fp32;
    const std::int64_t per_score = query_16bit ? checked_sum(8, detail::dtype_bytes_ceil(compute)) : 8;  // 4 + 4 B (+ the copy)
    const bytes scores = bytes_of(checked_product(per_score, m.heads, s_local, s_local, a.micro_batch));
    checkpointed_forward = before_output + qkv + norm_output + scores;
    if (split.layer_trainable == counts.layer) casts_to_come = (counts.mlp + o_proj_params()) * size_of(compute);
  }
  // Without recompute, the last layer's eager softmax (softmax(scores + mask, dtype=float32)): every earlier layer's
  // saved tensors and this layer's up to q, k, v and the softmax's fp32 output are alive, with what autograd keeps none
  // of: the masked 16-bit scores and their fp32 copy the kernel reads (a s^2 per head, 4 s^2), the model's b x 1 x s x s
  // additive mask of each kind of layer (masking_utils.py eager_mask) and position_ids (cache_position.unsqueeze(0),
  // int64), all gone by the loss. Where the norm copies its 16-bit input to fp32 rather than keeps it (transformers'
  // RMSNorm, OLMo's LayerNorm), also the embedding's output the model still refers to (inputs_embeds) and the layer's
  // input (its residual). Read from an H200's Llama trace at 2048 x 4 (the forward −3.7% before) for pre-norm layers
  // with rotary positions; no measured peak is here: the backward's softmax node holds three fp32 s^2 tensors.
  // OPT's layer too (no rotation: the frame is Llama's, q_proj's scaled output and k_proj's token-major ones copied by
  // matmul; OPTDecoder's positions are in before_output). Measured on an H200: a one-layer OPT-350M-style step (norms
  // after the residual adds, eager, 2048 x 8) read its forward −12.4% without this moment, +0.55% with it. GPT-2's
  // softmax runs in the model's dtype (eager_softmax_fp32 false): not read.
  // The attention frame also holds, beside what attention keeps (the layer's query, key and value terms), what its
  // names still refer to (the CPU step oracles' live allocations at this moment, four LayerNorm families and Llama's):
  //  - Llama's frame (q, k and v projections, apply_rotary_pos_emb's q * cos + rotate_half(q) * sin): the rotated q and
  //    k are laid out token by token, so matmul's reshape copies them (aten/native/LinearAlgebra.cpp matmul: the batch
  //    and head dimensions fold only as a view when b = 1 or one head) and keeps the copies;
  //  - Phi's and StableLM's (modeling_phi.py, modeling_stablelm.py): query_pass and key_pass keep the projections' whole
  //    outputs and query_rot and key_rot their rotated parts beside torch.cat's q and k, which attention keeps;
  //  - GPT-NeoX's and Phi-3's fused projection: V is a view of it, so the whole output stays beside the copy of V that
  //    attention keeps from the second matmul on;
  //  - and under GQA repeat_kv's copies of K and V (one kv head: a view) beside the frame's own K and V.
  // The model's b x 1 x s x s additive mask of each kind of layer under eager attention (masking_utils.py eager_mask).
  const auto eager_masks = [&] {
    const std::int64_t masks = (detail::stage_has_sliding_layers(m) ? 1 : 0) + (detail::stage_has_full_attention_layers(m, L) ? 1 : 0);
    return elements_of(checked_product(masks, a.micro_batch, s_local, s_local)) * size_of(compute);
  };
  bytes last_layer_forward{};  // without recompute: the last layer's eager softmax, its ReLU, or the final norm (below)
  const bool norm_copies_layer_input = m.norm == norm_kind::rmsnorm || m.norm_input_fp32;
  if (ZEROMEM_RARELY(a.recomputation == recompute::none && a.impl == implementation::hf && a.attention == attention_kind::eager &&
                     m.eager_softmax_fp32 && m.attention_softcap == 0.0 && !a.autocast && a.dropout == 0.0 && a.tp == 1 && a.cp == 1 &&
                     p.pp == 1 && !fsdp && t.zero.stage < 3 && stage.microbatches_in_flight == 1 && !m.post_norms &&
                     ((m.positions == position_kind::rope && (m.rope_concat || !m.fused_qkv)) || opt_positions))) {
    const layer_activations& w = F > 0 && full_attention_layer(m, L - 1) ? full_whole : layer_whole;
    const bytes scores_c = elements_of(checked_product(m.heads, s_local, s_local, a.micro_batch)) * size_of(compute);
    const bytes softmax_fp32 = w.attention_scores - scores_c;  // its output, kept; its input's fp32 copy is as large
    const bytes later = w.total() - w.attention_norm - w.attention_input - w.query - w.key - w.value - softmax_fp32;
    const bytes eager_mask = eager_masks();
    const bytes positions = bytes_of(checked_product(8, s_local));
    const bytes embedding_output = norm_copies_layer_input && !m.scaled_embedding ? hidden_grad : bytes{};
    const bytes layer_input = norm_copies_layer_input && L > 1 ? hidden_grad : bytes{};  // with one layer, its input is inputs_embeds
    bytes frame{};
    const attention_layout at = detail::attention_layout_of(m, a, L - 1);
    const std::int64_t d = m.head_size(), rotated = rope_layer(m, L - 1) ? (m.rotary_dims > 0 ? m.rotary_dims : d) : 0;
    const auto of = [&](std::int64_t heads, std::int64_t width) { return elements_of(checked_product(sb, heads, width)) * size_of(compute); };
    const bytes q = of(at.heads, d), kv = of(at.kv_heads, d), rotated_qk = of(checked_sum(at.heads, at.kv_heads), rotated);
    const bytes fused_output = of(checked_sum(at.heads, checked_product(2, at.kv_heads)), d);
    if (!at.cached) {
      // repeat_kv copies K and V before the scores (one kv head: a stride-0 view); the frame's own V stays beside.
      const bytes repeated = at.repeat && at.kv_heads > 1 && at.kv_heads < at.heads ? of(at.key_heads, d) : bytes{};
      const bytes k_copied = at.kv_heads < at.heads && !at.kv_view ? kv : bytes{};  // torch.cat's K, copied before the scores
      if (m.fused_qkv)
        frame = fused_output + k_copied + repeated - w.value;
      else if (m.rope_concat)
        frame = q + kv + rotated_qk + k_copied + kv + repeated - w.value;
      else
        frame = (a.micro_batch == 1 || at.heads == 1 || s_local == 1 ? bytes{} : q) + (at.kv_view ? bytes{} : kv) + kv + repeated - w.value;
    } else if (m.rope_concat) {
      // A KV cache rebinds key_states and value_states to its copies (attention keeps those; forward_kv_cache_bytes what
      // it keeps beyond them). The frame's other names still hold the projections' outputs: GPT-NeoX's and Phi-3's
      // `qkv` the fused one whole; Phi's and StableLM's query_pass and key_pass q_proj's and k_proj's, beside query_rot
      // and key_rot. Measured on an H200 (StableLM, use_cache true, one layer at 2048 tokens: the forward read −23.9%
      // without this moment, −0.41% with it).
      frame = m.fused_qkv ? fused_output : q + kv + rotated_qk;
    }
    last_layer_forward = before_output - later + softmax_fp32 + scores_c + eager_mask + positions + embedding_output + layer_input + frame;
  }
  // Without recompute, the last layer's ReLU: fc1's output, which nothing keeps (relu keeps its own output), beside
  // that output, every earlier layer's saved tensors and this layer's (but post-norm layers' final_layer_norm, after
  // it), the model's mask under eager attention (SDPA runs is_causal without one) and its positions (cache_position,
  // int64); GPT2Block's frame also keeps c_proj's output, bound as attn_output to its end. Read for OPT's and GPT-2's
  // layers (activation_function relu), whose LayerNorms keep the residual stream the frame refers to. Above the loss's
  // moment where the vocabulary is small beside ffn (the family step oracle: OPT, seed 81, forward -3.83% before;
  // GPT-2 at ffn 16 h, -1.41% without attn_output).
  if (ZEROMEM_RARELY(m.mlp == mlp_kind::relu && m.positions == position_kind::learned && m.norm == norm_kind::layernorm &&
                     a.recomputation == recompute::none && a.impl == implementation::hf && !a.autocast && a.dropout == 0.0 && a.tp == 1 &&
                     a.cp == 1 && p.pp == 1 && !fsdp && t.zero.stage < 3 && stage.microbatches_in_flight == 1)) {
    const bytes later = m.post_residual_norms ? layer_whole.mlp_norm : bytes{};
    const bytes attn_output = m.fused_qkv ? hidden_grad : bytes{};  // GPT-2's c_attn: GPT2Block
    // cache_position: GPT-2's position ids are a view of it, counted once in the stage where wpe keeps them.
    const bytes cache_position = !opt_positions && stage.position_ids.count() > 0 ? bytes{} : bytes_of(checked_product(8, s_local));
    const bytes relu_forward = before_output - later + elements_of(checked_product(sb, m.ffn)) * size_of(compute) + attn_output +
                               (a.attention == attention_kind::eager ? eager_masks() : bytes{}) + cache_position;
    if (relu_forward > last_layer_forward) last_layer_forward = relu_forward;  // after the softmax's, in the same layer
  }
  // An adapted MLP linear's moment (lora_linear_recomputed_peak: what its adapter keeps stays) beside what the layer has
  // saved so far (the layer whole less the MLP's tensors made after it), R1 and the norm's output (saved only where
  // lora_A keeps it) and, at down_proj, the product: above the layer whole by the most of these (negative: below it).
  //  - Without recompute, in the last layer, beside every earlier layer's saved tensors and the frame's (the layer's
  //    input, inputs_embeds, cache_position, the eager mask): the CPU step oracle's all-linear LoRA steps with few
  //    tokens beside the vocabulary, forward −5.0% to −8.5% before, at up_proj's adapter sum.
  //  - Under full recompute, in the rerun of a checkpointed layer at its first node that unpacks a saved tensor
  //    (torch/utils/checkpoint.py, non-reentrant, early_stop: rerun to the layer's last saved tensor). Where down_proj
  //    is adapted the rerun starts at its scaling's node and stops as `* scaling` saves its scalar, before the product
  //    is made; the sum promoted past the compute dtype has handed dL/d(sum) to it and the base output its cast, beside
  //    dL/d(layer output). Granite's `* residual_multiplier` saves the layer's last scalar after down_proj's whole
  //    forward. The CPU step oracle's all-linear LoRA steps under checkpointing: the backward's highest moment, at
  //    up_proj's adapter sum (−22.1% before at the base shape; −27.1% with ffn 2048 and LoRA dropout).
  //    Gemma's and OLMo-2's norm over the MLP's output saves the layer's last tensors: the rerun starts at its weight
  //    multiply, after the cast back's node made dL/d(its output) in fp32, and goes on through down_proj's whole forward.
  //    OLMo-2's MLP reads R1 itself (no norm before it), walked under recompute only. The CPU step oracle's checkpointed
  //    steps with the MLP adapted: Gemma-3 all-linear −11.7% before, OLMo-2 gate and up at ffn 8h −38.8%.
  const bool lora_mlp_frames = ZEROMEM_RARELY(lora_layers) && split.adapters.mlp && a.impl == implementation::hf && !a.autocast &&
                               a.dropout == 0.0 && m.residual_dropout == 0.0 && a.tp == 1 && a.cp == 1 && p.pp == 1 && !fsdp &&
                               t.zero.stage < 3 && m.moe.experts == 0 && m.mlp == mlp_kind::swiglu && !m.fused_gate_up &&
                               !m.parallel_residual && (norm_copies_input || (m.post_norms && a.recomputation == recompute::full));
  const bool lora_recompute_walk = lora_mlp_frames && a.recomputation == recompute::full;
  std::int64_t recompute_above = 0;
  bytes recompute_flowing{};  // beside dL/d(layer output) there
  if (ZEROMEM_RARELY((lora_recompute_walk || (lora_mlp_frames && a.recomputation == recompute::none)) && stage.microbatches_in_flight == 1)) {
    forward_only_config f{};
    f.compute = compute;
    f.device = a.device;
    f.train_dropout = true;
    f.lora = t.adapt.lora;
    const activation_config wc = whole();
    const auto adapted = [&](lora_module l) { return (t.adapt.lora.targets & (bit(l) | bit(lora_module::all_linear))) != 0; };
    const std::int64_t c = detail::dtype_bytes_ceil(compute), sbf = checked_product(sb, m.ffn), ch = checked_product(c, sb, m.hidden);
    const std::int64_t width = detail::adapter_input_bytes(wc, t.adapt), copy = detail::adapter_input_copy_bytes(wc, t.adapt);
    const auto adapter_saved = [&](std::int64_t in) { return checked_sum(checked_product(width, sb, t.adapt.lora.rank), checked_product(copy, sb, in)); };
    const std::int64_t gate = adapted(lora_module::gate_proj) ? adapter_saved(m.hidden) : 0, up = adapted(lora_module::up_proj) ? adapter_saved(m.hidden) : 0;
    const bool down_adapted = adapted(lora_module::down_proj), rerun = a.recomputation == recompute::full;
    // The rerun goes on through down_proj's whole forward where a later op saves the layer's last tensor: Granite's
    // `* residual_multiplier` its scalar, Gemma's and OLMo-2's norm over the MLP's output its own.
    const bool branch_normed = m.sandwich_norms || m.post_norms;
    const bool rerun_past_down = m.scaled_residual || branch_normed;
    // The norm over the MLP's output comes after each of them, its saved tensors with down's adapter's.
    const std::int64_t down = checked_sum(down_adapted ? adapter_saved(m.ffn) : 0, branch_normed ? layer_whole.branch_norms.count() / 2 : 0);
    const std::int64_t hidden = layer_whole.mlp_hidden.count();
    // R1 and the norm's output, each where nothing saves it (OLMo-2's MLP input is R1 itself)
    const std::int64_t frame = checked_sum(m.post_norms ? 0 : ch, layer_whole.mlp_input.count() == 0 ? ch : 0);
    std::int64_t best = std::numeric_limits<std::int64_t>::min();
    if (adapted(lora_module::gate_proj))  // act(gate), up and the product not made yet
      best = checked_sum(frame, detail::lora_linear_recomputed_peak(f, sb, m.hidden, m.ffn, false)) - checked_sum(hidden, gate, up, down);
    if (adapted(lora_module::up_proj))  // gate's output and act's made
      best = detail::max_of(best, checked_sum(frame, detail::lora_linear_recomputed_peak(f, sb, m.hidden, m.ffn, false)) -
                                      checked_sum(hidden - checked_product(2, c, sbf), up, down));
    if (down_adapted)  // the product held by the frame where lora_A keeps a copy of its own
      best = detail::max_of(best, checked_sum(frame, copy > 0 ? checked_product(c, sbf) : 0,
                                              detail::lora_linear_recomputed_peak(f, sb, m.ffn, m.hidden, rerun && !rerun_past_down)) -
                                      down);
    if (rerun) {
      const std::int64_t sum_bytes = detail::lora_sum_bytes(compute, t.adapt.lora.adapter_dtype);
      const bool promoted = down_adapted && !rerun_past_down && sum_bytes != c;
      recompute_above = best;
      recompute_flowing = promoted        ? bytes_of(checked_sum(ch, checked_product(sum_bytes, sb, m.hidden)))
                          : branch_normed ? bytes_of(checked_product(4, sb, m.hidden))
                                          : bytes{};
    } else {
      const bytes layer_input = L > 1 ? hidden_grad : bytes{};  // with one layer, its input is inputs_embeds
      const bytes embedding_output = !m.scaled_embedding && stage.embedding_output.count() == 0 ? hidden_grad : bytes{};
      const bytes lora_forward = before_output + bytes_of(best) + layer_input + embedding_output + bytes_of(checked_product(8, s_local)) +
                                 (a.attention == attention_kind::eager ? eager_masks() : bytes{});
      if (lora_forward > last_layer_forward) last_layer_forward = lora_forward;
    }
  }
  // The final norm's forward, after the last layer and before the output layer's tensors: transformers' RMSNorm makes
  // its fp32 product (LlamaRMSNorm's x * rsqrt, bound to hidden_states to the return; GemmaRMSNorm's output * (1 +
  // weight); Olmo2RMSNorm's weight * x), 4 sbh, beside everything it keeps and its 16-bit output (lm_head's input), and
  // the model's frame still refers to the norm's input (the last layer's output, which nothing keeps: the norm copies it
  // to fp32), to inputs_embeds where layer 0's norm copies it too, and to the masks and position ids (causal_mask_mapping,
  // cache_position). Above the loss's moment where the vocabulary is small beside the hidden size (the CPU step
  // oracle's Gemma-2 with a 128-token vocabulary over 1024 wide: forward -2.65% before, 883,258 B under; nine H200
  // steps, e.g. Gemma-2 at 1024 x 4 tokens, vocabulary 1024 over 4096 wide, -1.45% -> -0.15%). Read without recompute (an
  // H200's checkpointed Qwen3-MoE step read +0.31% with it, +0.03% without: not established), for 16-bit compute
  // without autocast (an fp32 x is not copied, and its casts return x itself).
  if (a.recomputation == recompute::none && a.impl == implementation::hf && m.norm == norm_kind::rmsnorm && !m.post_residual_norms &&
      !input_is_fp32 && a.dropout == 0.0 && a.tp == 1 && a.cp == 1 && p.pp == 1 && !fsdp && t.zero.stage < 3 && stage.microbatches_in_flight == 1 &&
      t.adapt.quantize == quantization::none && !t.adapt.freeze_embeddings) {
    const bytes product = elements_of(checked_product(sb, m.hidden)) * size_of(dtype::fp32);
    // Under LoRA the norm's weight and lm_head are frozen and keep neither the normalised tensor nor the norm's output
    // (output_layer leaves them out), but at this moment both are alive all the same: LlamaRMSNorm's 16-bit cast is
    // the weight multiply's operand and Olmo2RMSNorm's fp32 x is bound to hidden_states, and the output is being made.
    // GemmaRMSNorm rebinds `output` to its product, which frees the normalised tensor before the cast: its moment is
    // the product's, with the normalised tensor and without the output. Where no norm copies the embeddings and layer
    // 0 keeps no residual (OLMo-2's frozen projections), inputs_embeds is the frame's alone. The CPU step oracle, Llama
    // q, v at hidden 512 with 32 tokens: forward -0.33% before; OLMo-2's -1.90%.
    const bool frozen_output = t.adapt.lora_enabled();
    const bytes unkept = frozen_output ? elements_of(checked_product(sb, m.hidden)) *
                                             (m.norm_scale_fp32 ? size_of(dtype::fp32)
                                                                : (m.norm_weight_fp32 ? size_of(dtype::fp32) : size_of(compute)) + size_of(compute))
                                       : bytes{};
    const bool frame_holds_embeddings =
        !m.scaled_embedding && (norm_copies_input || (frozen_output && m.post_norms && !layer_keeps_input && stage.embedding_output.count() == 0));
    const bytes embedding_output = frame_holds_embeddings ? hidden_grad : bytes{};
    const bool sdpa_sliding_mask = detail::stage_has_sliding_layers(m) && detail::attention_layout_of(m, a, 0).sdpa_mask;
    const bytes frame = (a.attention == attention_kind::eager ? eager_masks() : bytes{}) + bytes_of(checked_product(8, s_local)) +
                        (sdpa_sliding_mask ? bytes_of(checked_product(s_local, s_local)) : bytes{});
    const bytes final_norm_forward = before_output + stage.output_layer + unkept + hidden_grad + product + embedding_output + frame;
    if (final_norm_forward > last_layer_forward) last_layer_forward = final_norm_forward;
  }
  // Inside the last layer its all-gather output is there whatever computes the loss, and FULL_SHARD's gathered layer
  // too (the loss comes after its post-forward reshard).
  const bytes last_layer_gathered = (s.loss_in_forward ? bytes{} : deferred_all_gather) + (fsdp && s.reshard_after_forward ? layer_unsharded : bytes{});
  const bytes loss_level = saved + loss_forward;  // the loss's moment, beside what every forward moment holds
  const auto forward = [&] {
    if (checkpointed_forward > loss_level + casts_to_come && checkpointed_forward > last_layer_forward) {
      step_terms checkpointed_terms{resting, grads_alive, checkpointed_forward, bytes{}, bytes{}, bytes{}, gathered_forward, comm_outside_backward, bytes{},
                                    bytes{}, bytes{}};
      checkpointed_terms.autocast_cache = autocast_cache - casts_to_come;  // the weight casts made by then under autocast, else 0
      return checkpointed_terms;
    }
    if (routed_forward > bytes{} && routed_forward + last_layer_gathered > loss_level && routed_forward + last_layer_gathered > last_layer_forward)
      return step_terms{resting, grads_alive, routed_forward, bytes{}, bytes{}, bytes{}, gathered_forward + last_layer_gathered, comm_outside_backward,
                        bytes{}, bytes{}, kv_cache};
    if (last_layer_forward > loss_level)
      return step_terms{resting, grads_alive, last_layer_forward, bytes{}, bytes{}, bytes{}, gathered_forward, comm_outside_backward, bytes{}, bytes{}, kv_cache};
    step_terms loss_moment_terms{resting, grads_alive, saved, bytes{}, bytes{}, loss_forward, gathered_forward, comm_outside_backward, bytes{}, bytes{}, kv_cache};
    loss_moment_terms.autocast_cache = autocast_cache;
    return loss_moment_terms;
  };

  // ---- backward ----
  // Each moment is a function that builds its terms, so that the walk compares totals and only the highest moment is
  // built into the result (building every moment and copying the winner costs more than the arithmetic).
  // (1) The loss's backward, every activation still alive; FSDP2 prefetches the last layer's all-gather.
  const bytes gathered_start = fsdp    ? root_unsharded + (s.reshard_after_forward ? layer_unsharded : layer_unsharded * L)
                               : zero3 ? gathered_forward
                                       : bytes{};
  const auto loss_moment = [&] {
    return step_terms{resting, grads_alive, saved, bytes{}, bytes{}, loss_backward, gathered_start, comm, bytes{}, bytes{}, bytes{}};
  };
  // (1b) Then lm_head's backward (ForCausalLMLoss): the loss's fp32 tensors are freed, and the logits' gradient in the
  // compute dtype (logits.float()'s backward) is alive while lm_head makes its weight's gradient (tied: the shared
  // weight's first, which autograd holds in its input buffer) and dL/d(its input), every activation still alive. It
  // tops the loss's moment where the head's weights are large beside its tokens (2 v h against 10 sb v in bf16: few
  // tokens, the CPU step oracle). The fused loss made these in forward.
  const auto head_moment = [&] {
    const head_terms h = ZEROMEM_RARELY(head_casts) ? autocast_head() : head_terms{head_grads, bytes{}, head_input_grad, logits_grad};
    return step_terms{resting, grads_at_head + h.gradients + stage2_head_grad, saved - h.freed, bytes{}, h.flowing, h.logits,
                      (zero3 ? kept3.at_output_layer() * zero3_width + zero3_adapters + zero3_head_grad : gathered_start), comm, bytes{}, bytes{}, bytes{}};
  };
  // (2) Layer i, from the last (i = L - 1) to the first (i = 0). Before its backward: the layers below it still
  // hold their activations, the layers above have left their gradients (kept shards), layer i is alive whole
  // (recomputed if checkpointed). After it: its gradients exist (unsharded and copied into a reduce-scatter input
  // under FSDP2, the previous layer's input still held), its activations are gone. Both are linear in i, so the
  // ends of the walk hold the maximum; under FSDP2 two terms step at the ends (no layer is prefetched below layer 0
  // and no reduce-scatter input waits above layer L - 1), so layers 1 and L - 2, the ends of the linear part, are
  // considered too.
  // Below the layers: the token ids, the embeddings' and the rotary tables. The final norm's and lm_head's inputs are
  // gone by then: autograd frees a node's saved tensors once it has run (torch/csrc/autograd/function.h release_variables),
  // and their nodes run before layer L - 1's.
  const bytes other_saved = saved - per_layer_saved * (L - F) - full_layer_saved * F - stage.output_layer;
  // Under full recompute each checkpointed call holds its own kind's eager mask (stage.checkpoint_arguments) until its
  // layer's backward frees the call: below the first full-attention layer (N - 1) no call holds Gemma-2's or Gemma-3's
  // full-attention mask any more (the CPU step oracle's checkpointed Gemma-2 steps, at layer 0: +0.15% to +0.30% before).
  const bool full_mask_held = ZEROMEM_RARELY(N >= 2) && a.recomputation == recompute::full && a.impl == implementation::hf &&
                              a.attention == attention_kind::eager && p.pp == 1 && detail::stage_has_sliding_layers(m) &&
                              detail::stage_has_full_attention_layers(m, L);
  const bytes full_mask = full_mask_held ? elements_of(checked_product(a.micro_batch, s_local, s_local)) *
                                               size_of(a.autocast ? dtype::fp32 : compute)
                                         : bytes{};
  // Where both kinds of layer are on the stage and each has its own rotary pair (Gemma-3, OLMo-3: local_rope), only the
  // full-attention layers hold the global pair (their RoPE nodes keep it without recompute, their checkpointed calls
  // with it; transformers 5 passes each layer its own kind's pair): below the first of them (N - 1) it is gone.
  const bool global_pair_released = ZEROMEM_RARELY(N >= 2) && m.local_rope && a.impl == implementation::hf && p.pp == 1 &&
                                    stage.microbatches_in_flight == 1 && detail::stage_has_sliding_layers(m) &&
                                    detail::stage_has_full_attention_layers(m, L);
  const bytes global_pair = global_pair_released ? bytes_of(detail::quotient(stage.rotary_tables.count(), 2)) : bytes{};
  const bytes released_below_full = full_mask + global_pair;
  // (2b) Inside layer i's backward, once its MLP branch is differentiated, while the norm in front of the MLP is
  // (post_attention_layernorm; Gemma-2's pre_feedforward_layernorm): the MLP's saved tensors are gone, its weight
  // gradients and the MLP side's norm weights' have appeared (half the layer's norms: one of two, or two of Gemma-2's
  // four), the attention half's saved tensors (under full recompute: recomputed) are alive, and dL/d(residual stream)
  // waits beside the norm's backward. transformers' RMSNorm (x.to(fp32), pow(2).mean(-1), rsqrt, two multiplies)
  // differentiated: at pow's node (FunctionsManual.cpp pow_backward: grad * (exponent * self.pow(exponent - 1)), three
  // fp32 tensors alive to the end of the expression) it holds its saved fp32 input, the multiply's gradient of that
  // input waiting to be summed, mean's expanded gradient and those three: six fp32 copies of the norm's input. Where
  // a layer's weights are large beside its tokens this is the layer's highest moment (the training-step oracle); read
  // for RMSNorm layers in sequence.
  // The walk inside a layer (2b-2i) is read for transformers' layers with a dense MLP and every layer weight trained,
  // without tensor parallelism or selective recompute; elsewhere it keeps its two moments. Under autocast the same
  // nodes run on the tensors layer_activations keeps then (fp32 norms, 16-bit casts), with fp32 weight and residual
  // gradients, each linear's weight cast alive until its node has run, and gelu_new's fp32 product: an H200's AMP steps,
  // walked, went from −39.4% … −4.6% (five of 57) to within 2% (docs/validation.md).
  // The norms' nodes (2b, 2h, 1c) come after the whole MLP branch or before it, whatever it is: walked in transformers
  // 5's mixture-of-experts layers too (stacked experts, without autocast), where an H200's Mixtral, Qwen3-MoE and
  // Qwen2-MoE steps peaked at them (−5.4% … −1.2% before).
  const bool layer_walk = walks_inside_layers(a) && split.layer_trainable == counts.layer;
  const bool mlp_walk = layer_walk && m.moe.experts == 0;
  const bool norm_walk = layer_walk && (m.moe.experts == 0 || (m.moe.stacked && !a.autocast));
  const bool mlp_norm_walk = norm_walk && m.norm == norm_kind::rmsnorm && !m.parallel_residual;
  // Gradients appearing in layer i's backward: added in place when accumulating; at ZeRO-2 copied into the bucket.
  const auto new_grads = [&](elements n) { return fsdp ? n * size_of(compute) : accumulating || stage2_partitioned ? bytes{} : share(n); };
  // The terms of the walk inside a layer (2b-2f) are computed only where a layer is walked (mlp_walk, norm_walk);
  // elsewhere 0.
  const bytes mlp_grads = norm_walk ? new_grads(counts.mlp + elements_of(counts.norms.count() / 2)) : bytes{};
  const bytes mlp_linear_grads = mlp_walk ? new_grads(counts.mlp) : bytes{};
  // Accumulating without FSDP2, the one weight gradient a node makes stands beside what the node made until its
  // AccumulateGrad, ready next, adds it in (accumulate_grad.h); every earlier one is gone: `made_here` at the node's
  // own moment, 0 (new_grads) at the later ones. Elsewhere gradients stay, and the two agree.
  // At ZeRO-2 alike, the gradient whole until its hook copies it into the bucket (stage_1_and_2.py
  // reduce_independent_p_g_buckets_and_remove_grads: `grad_reduc.data = new_grad_tensor.data`, a view of the bucket).
  const bool adding_in = (accumulating || stage2_partitioned) && !fsdp;
  const auto made_here = [&](elements n) ZEROMEM_ALWAYS_INLINE {
    return stage2_partitioned ? just_made(n) : adding_in ? share(n) : new_grads(n);
  };
  // Before pow's node, the norm's weight multiply (weight * x_normed; Gemma's x_normed * (1 + weight)) is differentiated.
  // Where it multiplies in fp32 (autocast, or a norm that scales in fp32), MulBackward0 makes two fp32 products beside
  // the norm's fp32 input and normalised tensor, its rstd and the fp32 incoming gradient, and on CUDA the weight's sum
  // over the tokens (validate_outputs: sum_to) stages in a buffer of its own (core/cuda_reduce.hpp): 20 sbh + 4 sb
  // bytes and the buffer, above pow's six copies where the buffer passes 4 sbh. Inside a checkpoint the node's saved
  // tensors are the checkpoint's recomputed ones, which it drops as the node unpacks them (torch/utils/checkpoint.py
  // _checkpoint_hook unpack_hook): the normalised tensor is gone by the sum (16 sbh + 4 sb). An H200's Qwen3 trace
  // under AMP, at the final norm: two 25,165,824 B products, then a 50,331,696 B buffer (−1.96% before).
  // Under LoRA the RMSNorms are frozen: the weight's multiply makes one product and no gradient, below pow's six copies.
  // Two of their nodes are read there: (2e') a post-norm layer's norm over the MLP's output, its first node as in (2e),
  // under full recompute after the rerun of the whole layer, whose last saved tensors are that norm's (the CPU step
  // oracle's checkpointed OLMo-2, Gemma-2 and Gemma-3 LoRA steps: backward -11.7% to -20.1% before); (1c) the final norm.
  const bool lora_norm_walk = ZEROMEM_RARELY(lora_layers) && walks_inside_layers(a) && !a.autocast && !fsdp && m.moe.experts == 0 &&
                              m.norm == norm_kind::rmsnorm && !m.parallel_residual;
  const bool lora_branch_norm_walk = lora_norm_walk && (m.sandwich_norms || m.post_norms);
  const bytes norm_pow_backward = norm_walk || lora_norm_walk ? elements_of(checked_product(6, sb, m.hidden)) * size_of(dtype::fp32) : bytes{};
  const bool norm_multiplies_fp32 = norm_walk && m.norm == norm_kind::rmsnorm && a.device == device_kind::cuda &&
                                    (a.autocast || m.norm_scale_fp32 || m.norm_weight_fp32);
  const auto norm_multiply_backward = [&](bool checkpointed) {
    return bytes_of(checked_sum(checked_product(checkpointed ? 16 : 20, sb, m.hidden), checked_product(4, sb),
                                cuda_sum_staging_bytes(m.hidden, sb, s.multiprocessors)));
  };
  const bytes norm_backward =
      norm_multiplies_fp32 ? std::max(norm_pow_backward, norm_multiply_backward(a.recomputation == recompute::full)) : norm_pow_backward;
  const bytes final_norm_backward = norm_multiplies_fp32 ? std::max(norm_pow_backward, norm_multiply_backward(false)) : norm_pow_backward;
  // (2c) Earlier in the same walk, a gated MLP's product act(gate) * up differentiated (MulBackward0): down_proj's
  // node has run (its weight's gradient appeared, its saved input, the product, freed), and the product's gradient
  // is alive beside the two it makes, of act(gate) and of up: three sb x ffn tensors beside the residual's gradient.
  // Where the tokens are many beside the hidden size, this is above the layer's moment before its backward. Phi-3's
  // fused gate_up (Phi3MLP: chunk(2) of one output, views) keeps and frees the same bytes (an H200's Phi-3 step at 4096
  // tokens: backward −4.6% → −0.84%). GELU written as tensor ops (gelu_new's and gelu_fast's 0.5 x * (1 + tanh(...)),
  // transformers activations.py) ends with the same product: its MulBackward0 makes the gradients of 0.5 x and of
  // (1 + tanh) beside its incoming one.

  // Under LoRA the base is frozen and no layer is walked but this node, read where no MLP module is adapted: the frozen
  // down_proj keeps no input (its weight needs no gradient), so its node frees nothing and makes no weight gradient;
  // act(gate) * up's MulBackward0 makes the same two sb x ffn gradients beside its incoming one, three beside the
  // residual's gradient and the layer's saved tensors (the CPU step oracle's LoRA steps on q_proj and v_proj under full
  // recompute: the backward's highest moment, 1,310,720 B above the layer's start at s b = 512, h 256, ffn 512).
  const bool lora_product_walk = ZEROMEM_RARELY(t.adapt.lora_enabled()) && !split.adapters.mlp && walks_inside_layers(a) && !a.autocast &&
                                 !fsdp && m.moe.experts == 0 && m.mlp == mlp_kind::swiglu && !m.parallel_residual;
  // (2b') An adapted down_proj differentiated, after the residual add's node and (under recompute) the rerun: its adapter's
  // nodes run before the frozen base linear's (made later in PEFT's Linear.forward, so higher in autograd's order),
  // dL/d(base output) waiting, a tensor of its own where the adapter's sum is promoted or Granite scales the branch.
  // (A) lora_A's node: lora_B's node has freed its saved rank-r input and made its gradient; lora_A makes the input's
  // (the adapter dtype's sb x ffn) and its weight's beside what it saved. (B) Then the base linear's node makes
  // dL/d(product) beside the adapter path's, cast back (ToCopyBackward0), and the input buffer sums the two out of place:
  // three c sb x ffn, the adapter's saved input gone (the product itself where lora_A kept it). The CPU step oracle's
  // LoRA steps with down_proj adapted, ffn 2048 beside hidden 256: backward −2.80% (A, fp32 adapters) and −11.15% (B,
  // bf16 adapters) before.
  const bool lora_down_walk = ZEROMEM_RARELY(lora_layers) && walks_inside_layers(a) && !a.autocast && a.dropout == 0.0 &&
                              m.residual_dropout == 0.0 && a.tp == 1 && !fsdp && m.moe.experts == 0 && m.mlp == mlp_kind::swiglu &&
                              !m.fused_gate_up && !m.parallel_residual &&
                              (t.adapt.lora.targets & (bit(lora_module::down_proj) | bit(lora_module::all_linear))) != 0;
  bytes lora_down_made{}, lora_down_gone{}, lora_down_flowing{};
  if (ZEROMEM_RARELY(lora_down_walk)) {
    const activation_config wc = whole();
    const std::int64_t c = detail::dtype_bytes_ceil(compute), rank = t.adapt.lora.rank, sbf = checked_product(sb, m.ffn);
    const std::int64_t width = detail::adapter_input_bytes(wc, t.adapt), copy = detail::adapter_input_copy_bytes(wc, t.adapt);
    const std::int64_t sum_bytes = detail::lora_sum_bytes(compute, t.adapt.lora.adapter_dtype);
    const bytes rank_input = bytes_of(checked_product(width, sb, rank));  // lora_A's output, which lora_B kept
    // Gemma's and OLMo-2's norm over the MLP's output was differentiated first: its saved tensors are gone, and dL/d(its
    // input) is the branch's own gradient, as Granite's scaled one is.
    const bool branch_normed = m.sandwich_norms || m.post_norms;
    const bytes branch_norm = branch_normed ? bytes_of(layer_whole.branch_norms.count() / 2) : bytes{};
    const bytes base_grad_own =
        m.scaled_residual || branch_normed || sum_bytes != c ? bytes_of(checked_product(c, sb, m.hidden)) : bytes{};
    const bytes at_a = base_grad_own + rank_input + bytes_of(checked_product(width, sbf));
    const bytes input_gone = bytes_of(checked_product(copy > 0 ? copy : c, sbf));  // its own copy, or the product
    const bytes at_b = bytes_of(checked_product(3, c, sbf));
    const elements lora_a = elements_of(checked_product(rank, m.ffn)), lora_b = elements_of(checked_product(m.hidden, rank));
    if (at_a >= at_b - input_gone) {
      lora_down_made = made_here(lora_a) + new_grads(lora_b);
      lora_down_gone = rank_input + branch_norm;
      lora_down_flowing = hidden_grad + at_a;
    } else {
      lora_down_made = new_grads(lora_a + lora_b);
      lora_down_gone = rank_input + input_gone + branch_norm;
      lora_down_flowing = hidden_grad + at_b;
    }
  }
  const bool gated_walk = mlp_walk && (m.mlp == mlp_kind::swiglu ||
                                       (m.mlp == mlp_kind::gelu && (m.gelu_tensor_ops || m.gelu_fast_ops)));
  const bytes product = mlp_walk ? elements_of(checked_product(sb, m.ffn)) * size_of(compute) : bytes{};
  // A 16-bit gradient of the residual stream's width, c sbh: a branch's own (its output scaled, normalised or dropped
  // out before the residual add), or under autocast the cast of the fp32 one that a 16-bit branch output gets
  // (validate_outputs). GPT-NeoX's and Phi's parallel branches are summed before the residual is added (attn + mlp,
  // then + residual): both read one cast. StableLM's residual + attn + mlp adds the residual to the attention's output
  // first, and that add's node, made after the MLP, runs before it: a cast for each. Either way the attention branch's
  // cast waits in its input buffer through every node of the MLP branch (a CPU autocast probe of the three layouts; an
  // H200's Phi step under AMP, at the product's node: -1.29% before, 33,554,432 B short, 2 sbh).
  const bytes branch_grad = mlp_walk ? elements_of(checked_product(sb, m.hidden)) * size_of(compute) : bytes{};
  const bytes attention_cast_waiting = a.autocast && m.parallel_residual ? branch_grad : bytes{};
  // Under autocast gelu_new's product is fp32 (its 1 + tanh is: pow runs in fp32), so its MulBackward0 holds the fp32
  // gradient fc2's cast hands back (ToCopyBackward) and makes two fp32 gradients, the one of 0.5 x then cast to x's 16
  // bits in validate_outputs beside them: 4 + 4 + 4 + c bytes an element against 3c (an H200's Phi-2 step under AMP:
  // the two fp32 gradients and the cast at its backward peak).
  const bool gelu_fp32_product = gated_walk && a.autocast && m.mlp == mlp_kind::gelu && m.gelu_tensor_ops && !m.gelu_fast_ops;
  const bytes product_flowing = !gated_walk        ? bytes{}
                                : gelu_fp32_product ? elements_of(checked_product(sb, m.ffn)) * (size_of(dtype::fp32) * 3 + size_of(compute))
                                                    : product * 3;
  const elements down_params = mlp_walk ? elements_of(checked_sum(checked_product(m.hidden, m.ffn), m.mlp_bias ? m.hidden : 0)) : elements{};
  const bytes down_grad = mlp_walk ? new_grads(down_params) : bytes{};
  // (2c') Before it, the MLP's second linear differentiated (fc2's AddmmBackward0): the whole layer alive (recomputed,
  // under full recompute), fc2's weight and bias gradients made beside the input gradient it makes (c sb ffn) and
  // dL/d(layer output). It is a GELU MLP's highest moment (GELU's backward after it holds as much, less fc2's saved
  // input; ReLU's holds more: 2c''); a product's moment (2c) is higher, so it is read for non-gated MLPs only, and
  // for gated ones when accumulating: there down's weight gradient is gone by the product's moment, and this one
  // stands higher where the layer's tokens are fewer than its hidden size (the CPU step oracle's random shapes).
  // Behind post-norm layers (OPT-350M) final_layer_norm, after the MLP, went first: its saved tensors are gone. Where
  // gradients are kept, fc2's new weight gradient waits beside its input's there (the family step oracle's post-norm
  // OPT under --keep-grads: -8.39% before).
  const bool down_walk = mlp_walk && (m.mlp != mlp_kind::swiglu || adding_in);
  // (2c'') Next, ReLU's node (threshold_backward(grad, result), derivatives.yaml relu: result): relu keeps its output,
  // the very tensor fc2 kept, so fc2's node freed nothing, and the node makes dL/d(fc1's output) beside dL/d(its
  // output): c sb ffn above (2c') where fc2's bias sum staged less; fc2's gradients made, added in when accumulating
  // (AccumulateGrad runs first). Behind post-norm layers (OPT-350M) final_layer_norm went first, its saved input gone.
  // The family step oracle's OPT steps (seed 81: wide MLP, 500-token vocabulary): backward -7.48% before.
  const bool activation_walk = mlp_walk && m.mlp == mlp_kind::relu;
  // (2d) The MLP's last node, its first linear differentiated (fc1; SwiGLU's gate_proj, made before up_proj): every
  // MLP weight gradient has appeared and the MLP's hidden tensors are freed; the linear's input (the norm's output)
  // and the norm's saved tensors are alive beside the attention half, with the gradient of the linear's output
  // (c sb ffn), the input gradient it makes (c sbh) and, for SwiGLU, up_proj's input gradient waiting to be summed
  // with it (c sbh), beside the residual's gradient.
  // Behind one norm shared by both branches (Phi, StableLM in parallel) the same: the norm's output, kept once, is in
  // the attention half, and the MLP's input gradients wait in its buffer (the family step oracle's random StableLM
  // steps: backward -2.69% before).
  // Behind post-norm layers (OPT-350M) final_layer_norm, after the MLP, went first: its saved tensors are gone, and
  // fc1's input is self_attn_layer_norm's output (the family step oracle's OPT steps under recompute, few tokens beside
  // wide layers: backward -4.64% before).
  // Phi-3's fused gate_up_proj (modeling_phi3.py Phi3MLP: gate_up_proj(x).chunk(2)) is one node: chunk's backward
  // (SplitBackward0) has joined the gate's and up's gradients into one 2 c sb ffn tensor (cat), the node's incoming one,
  // and it makes one input gradient (no up_proj's waits) and the 2 h ffn weight gradient (the step oracle's Phi-3 steps,
  // few tokens beside the MLP: backward -0.68% before, one c sbh).
  const bool first_linear_walk = mlp_walk;
  const auto first_linear_outputs = [&] { return m.fused_gate_up ? checked_product(2, m.ffn) : m.ffn; };
  const auto first_linear_params = [&] {
    return elements_of(checked_sum(checked_product(m.hidden, first_linear_outputs()), m.mlp_bias ? first_linear_outputs() : 0));
  };
  const bytes first_linear_made = mlp_walk && adding_in ? made_here(first_linear_params()) : mlp_linear_grads;
  // The norm's weight gradient is made at its weight multiply's node, before pow's: added in by then when accumulating.
  const bytes mlp_norm_made = adding_in ? bytes{} : mlp_grads;
  // On CUDA a linear's bias gradient, the sum of its incoming [sb, n] gradient over the tokens (autograd's
  // validate_outputs, after the node made its input's and weight's gradients), may stage its partial sums in a buffer of
  // its own (core/cuda_reduce.hpp): fc1's (n = ffn) at (2d), fc2's (n = h) at (2c'). Measured on an H200 (OPT, ffn
  // 5440, 4096 tokens: 139,264,000 B beside fc1's gradients).
  const auto bias_staging = [&](std::int64_t n) ZEROMEM_ALWAYS_INLINE {
    return mlp_walk && m.mlp_bias && a.device == device_kind::cuda ? bytes_of(cuda_sum_staging_bytes(n, sb, s.multiprocessors)) : bytes{};
  };
  const bytes down_staging = down_walk ? bias_staging(m.hidden) : bytes{};
  // A biased second linear's node has the first linear's two instants (2d): (A) its weight's gradient made with its
  // saved input kept and its bias's not yet made; (B) that input freed and the bias's gradient made beside its sum's
  // staging. The input is freed only where this node alone keeps it: not ReLU's output (relu's node keeps it too), not
  // an adapted linear's (lora_A keeps it), and not under autocast, whose cast nodes are not walked (all counted at once,
  // as for the first linear). An H200's GPT-2 step (gelu_new, c_proj's staging 138,412,160 B at 8,192 tokens of 4,096)
  // read both at once 71,301,248 B above its measured backward peak.
  const bytes down_input_freed =
      down_walk && m.mlp_bias && m.mlp != mlp_kind::relu && m.moe.experts == 0 && !a.autocast && !t.adapt.lora_enabled() ? product : bytes{};
  const bytes down_bias_made =
      down_input_freed.count() > 0 ? made_here(down_params) - made_here(elements_of(checked_product(m.hidden, m.ffn))) : bytes{};
  // OLMo-2's MLP reads the residual stream itself (post_norms): up_proj's input gradient was added into the residual's,
  // which waits in the same input buffer (torch/csrc/autograd/input_buffer.cpp accumulate: in place, into whichever of
  // the two it alone holds), so beside gate_proj's node one c sbh fewer waits (the CPU step oracle, seed 203: +0.55%).
  // Under autocast the linear reads its own 16-bit cast of the norm's fp32 output: the input gradient it makes is 16-bit
  // (c sbh), up_proj's waits as fp32 (its cast's ToCopyBackward0 ran), and the attention branch's cast of a parallel
  // layer's gradient waits too (attention_cast_waiting).
  const std::int64_t first_linear_waiting = m.mlp == mlp_kind::swiglu && !m.post_norms && !m.fused_gate_up ? 3 : 2;
  const bytes first_linear_flowing =
      mlp_walk ? hidden_grad * (first_linear_waiting - 1) + branch_grad + attention_cast_waiting + (m.fused_gate_up ? product * 2 : product)
               : bytes{};
  // A biased first linear's node has two instants, as the attention input linear's (2i): (A) its weight's gradient made
  // (AddmmBackward0's second mm) with its input kept and its bias's gradient not made; (B) once it has freed that input,
  // the bias's gradient and, on CUDA, its sum's staging (the family step oracle's StarCoder2 trace: c_fc's input freed
  // between the weight's mm and the bias's sum; +0.19% when both were counted at once). Not under autocast, where the
  // node's gradients pass through the casts' own nodes (ToCopyBackward0), which are not walked: there all three stay
  // counted, as an H200 GPT-NeoX step under AMP reads them (backward −0.23%; −1.45% at (B)).
  const bytes first_linear_bias_made =
      m.mlp_bias ? first_linear_made - (adding_in ? made_here(elements_of(checked_product(m.hidden, first_linear_outputs())))
                                                  : mlp_linear_grads - new_grads(elements_of(first_linear_outputs())))
                 : bytes{};
  const bytes first_linear_staging = m.mlp_bias ? bias_staging(first_linear_outputs()) : bytes{};
  // Gemma-2's and OLMo-2's norm over the attention's output (one of their two branch norms) is differentiated after
  // the MLP: its saved tensors belong to the attention half.
  const auto attention_branch_norm = [&](const layer_activations& w) ZEROMEM_ALWAYS_INLINE {
    return bytes_of(m.sandwich_norms || m.post_norms ? w.branch_norms.count() / 2 : 0);
  };
  // Under autocast each linear's 16-bit weight cast is saved by its matmul until that linear's node has run
  // (layer_activations::autocast_weights): the attention's stay through the MLP's nodes, down's goes with its node and
  // the first linear's is in use at its own.
  // (The last two computed where a moment reads them: this step's arithmetic is timed, docs/performance.md.)
  const bytes attention_casts = mlp_walk && a.autocast ? layer_whole.autocast_weights - counts.mlp * size_of(compute) : bytes{};
  const auto attention_half = [&](const layer_activations& w) ZEROMEM_ALWAYS_INLINE {
    return w.attention_norm + w.attention_input + w.query + w.key + w.value + w.attention_scores + w.attention_dropout + w.attention_lse +
           w.attention_mask + w.attention_output + w.attention_kernel_output + w.attention_residual_mask + attention_branch_norm(w) +
           attention_casts;
  };
  // (2e) Gemma-2's and OLMo-2's layers end with a norm over the MLP's output (post_feedforward_layernorm), the layer's
  // first node differentiated: the whole layer alive but that norm's saved tensors, which its RMSNorm backward holds
  // as the six fp32 copies, and dL/d(layer output), which is also the norm's incoming gradient.
  const bool branch_norm_walk = mlp_norm_walk && (m.sandwich_norms || m.post_norms);
  // (2f) Later, eager attention's core (eager_attention_forward: softmax(QK^T * scale + mask, dtype=float32).to(c) @ V)
  // differentiated at softmax's node: o_proj's weight gradient has appeared and its saved input is freed, P @ V's node
  // has run (the 16-bit probabilities and V it kept are freed, V's gradient, sb x heads x d, waits for the projection),
  // and _softmax_backward_data makes its fp32 gradient beside the fp32 output it kept and the fp32 gradient .to(c)'s
  // backward made: three fp32 s x s tensors per head, four on CUDA (its grad * output). Under full recompute, or where
  // the scores are large beside the layer's weights, this is the layer's highest moment (the training-step oracle).
  // Read for Llama-family eager attention without soft-capping (Gemma-2's tanh keeps more) or dropout.
  // LayerNorm layers likewise, in sequence (StarCoder2, StableLM, GPT-NeoX) or in parallel (GPT-NeoX, Phi: the MLP
  // branch, made after attention, is differentiated first); a fused qkv output (GPT-NeoX) is freed with V only where
  // RoPE has made Q and K new tensors. One norm shared by both branches (Phi) is differentiated after attention: its
  // weights' gradients are not there yet and the MLP branch's gradient of its output waits beside it.
  // Norms after the residual adds (OPT-350M) are differentiated before the branch they follow.
  const bool core_layout = (mlp_norm_walk || (m.norm == norm_kind::layernorm && !m.sandwich_norms)) &&
                           (!m.fused_qkv || (m.positions == position_kind::rope && m.nope_period == 0));
  // GPT-2's layer (modeling_gpt2.py: c_attn's output split into Q, K and V, no RoPE; eager_attention_forward's softmax
  // in the scores' dtype, `.type(value.dtype)` returning P itself) is walked there too: softmax's node holds P, which it
  // kept, the 16-bit dL/dP that P @ V's node made, and makes the 16-bit dL/d(scores); Q, K and V views of c_attn's
  // output keep all of it alive through QK^T's saved Q and K (fused_views_of). Under autocast
  // its softmax runs in fp32 and .type casts, as Llama's (the CPU step oracle's GPT-2 steps under recompute: −28.8%
  // before, where the scores are large beside a small model).
  const bool gpt2_core = m.fused_qkv && m.positions == position_kind::learned && m.norm == norm_kind::layernorm && !m.sandwich_norms;
  const bool softmax_fp32 = m.eager_softmax_fp32 || a.autocast;
  const bool attention_core_walk = norm_walk && (core_layout || gpt2_core) && a.attention == attention_kind::eager &&
                                   (softmax_fp32 || gpt2_core) && m.attention_softcap == 0.0 && a.dropout == 0.0;
  // Computed only where walked: heads x s^2 x b need not fit an int64 for SDPA's long sequences.
  const std::int64_t score_values = attention_core_walk ? checked_product(m.heads, s_local, s_local, a.micro_batch) : 0;
  bytes probabilities{}, softmax_gradients{}, value_grad{}, o_proj_grad{}, o_proj_cast{};
  if (attention_core_walk) {
    probabilities = softmax_fp32 ? elements_of(score_values) * size_of(compute) : bytes{};  // the 16-bit copy P @ V kept
    // On CUDA, softmax_backward_cuda_out first forms grad * output (aten/src/ATen/native/cuda/SoftMax.cu: `Tensor tmp =
    // grad * output`), a third fp32 s x s tensor beside the two (measured on an H200, 2026-11-27: Llama eager −6.9% before).
    // Not counted for a 16-bit softmax: with it the two H200 GPT-2 eager steps that reach this moment read +2.61% and
    // +1.56%, without it +0.41% and +0.60% (what the kernel allocates there is not established).
    softmax_gradients = elements_of(checked_product(a.device == device_kind::cuda && softmax_fp32 ? 3 : 2, score_values)) * size_of(softmax_fp32 ? dtype::fp32 : compute);
    value_grad = elements_of(checked_product(sb, m.heads, m.head_size())) * size_of(compute);
    o_proj_grad = new_grads(o_proj_params());
    if (a.autocast) o_proj_cast = o_proj_params() * size_of(compute);  // freed with o_proj's node
  }
  // What P @ V's node frees of V once it has run: V itself; of GPT-2's c_attn output, a copy of V (a cache's, a batch
  // fold's), the whole output where V alone viewed it, nothing where QK^T still keeps Q or K as views of it.
  const auto value_freed = [&](const layer_activations& w) {
    if (!gpt2_core) return w.value;
    const activation_config wc = recomputes ? whole() : a;  // the configuration w was computed for
    const detail::fused_qkv_views v = detail::fused_views_of(m, wc, detail::attention_layout_of(m, wc, 0), 0);
    return !v.v ? w.key : v.q || v.k ? bytes{} : w.value;
  };
  // (2g) A mixture of experts' backward as transformers 5 runs it (integrations/moe.py grouped_mm_experts_forward:
  // out = grouped_mm(act(gate) * up, down) * w, reordered and summed over the k choices, then cast back). Its nodes,
  // last first, over S = k sb routed rows: the routing-weight product's MulBackward0 holds its incoming gradient and
  // makes two [S, h] gradients (derivatives.yaml mul.Tensor; the weights' one is reduced to [S, 1] only in the engine's
  // validate_outputs), all fp32 where the weights are (Mixtral's; validate_outputs casts the output's to the compute
  // dtype beside them) and in the compute dtype where the router cast them (Qwen-MoE's), every tensor of the layer
  // still alive; down's grouped_mm backward makes dL/d(product) and down_proj's gradient (the output it kept is gone);
  // act(gate) * up's MulBackward0 makes two [S, f] gradients beside its incoming one (the product is gone too);
  // gate_up's grouped_mm backward makes dL/d(gather) and gate_up_proj's gradient from the cat of the two halves'
  // gradients (gate_up's output, act's and the product gone). The highest of the four is the layer's: the same one for
  // every layer. Frozen experts (LoRA on the attention) make no weight gradient and keep neither the gather nor the
  // product (the activations' frozen experts), so their nodes free less and make less: measured on an H100 (Mixtral
  // under LoRA and recompute, act(gate) * up's node: 13,351,431,680 B, −18.1% before this). Read for routed experts only
  // (no shared expert, or Qwen2-MoE's gated one), every layer weight trained or only LoRA's adapters, SwiGLU.
  // Qwen2-MoE: sigmoid(shared_expert_gate(x)) * shared_expert(x), added last, is differentiated before the routed experts
  // (the engine runs the later-created ready node first, torch/csrc/autograd/engine.cpp CompareNodeTaskTime): its
  // MulBackward0 and the gate's nodes have freed the shared expert's output and the sigmoid's, and left dL/d(shared
  // expert output) waiting for the shared expert's own nodes, which come after the router's, and dL/dx, the gate
  // linear's input gradient, in the input buffer every other reader of x adds into (input_buffer.cpp accumulate); the
  // gate's weight gradient has appeared. The shared expert's own nodes come when the routed rows are freed: lower.
  const bool experts_trained = split.layer_trainable == counts.layer;
  const bool moe_walk = walks_inside_layers(a) && !a.autocast && m.moe.experts > 0 && m.moe.stacked &&
                        (m.moe.shared_experts == 0 || m.moe.shared_expert_gate) && m.mlp == mlp_kind::swiglu &&
                        (experts_trained || t.adapt.lora_enabled());
  bytes moe_gone{}, moe_flowing{}, moe_made{};
  if (ZEROMEM_RARELY(moe_walk)) {
    const std::int64_t routed = checked_product(sb, m.moe.top_k);
    const bytes rows_h = elements_of(checked_product(routed, m.hidden)) * size_of(compute);
    const bytes rows_f = elements_of(checked_product(routed, m.moe.expert_ffn)) * size_of(compute);
    const bytes rows_h32 = elements_of(checked_product(routed, m.hidden)) * size_of(dtype::fp32);
    // A projection's gradient is made at its own node (made_here): accumulating, it stands beside the existing one
    // until its AccumulateGrad adds it in, and down's is gone by gate_up's node (an H200's OLMoE step over two
    // micro-batches: gate_up's new 2 E h f gradient beside every expert gradient, backward −4.4% before).
    const elements projection_elements = experts_trained ? elements_of(checked_product(m.moe.experts, m.hidden, m.moe.expert_ffn)) : elements{};
    const bytes projection = new_grads(projection_elements), projection_here = made_here(projection_elements);
    const bytes kept_product = experts_trained ? rows_f : bytes{};  // kept by down's grouped_mm for its weight's gradient
    const bytes weights_mul = m.moe.weights_in_compute_dtype ? rows_h * 3 : rows_h32 * 3 + (compute == dtype::fp32 ? bytes{} : rows_h);
    moe_flowing = weights_mul;  // the first node's: nothing gone, nothing made
    struct candidate { bytes gone, flowing, made; };
    for (const candidate& c : {candidate{rows_h, rows_h + rows_f, projection_here}, candidate{rows_h + kept_product, rows_f * 3, projection},
                               candidate{rows_h + rows_f * 3 + kept_product, rows_f * 2 + rows_h, projection + projection_here * 2}})
      if (c.flowing + c.made - c.gone > moe_flowing + moe_made - moe_gone) {
        moe_gone = c.gone;
        moe_flowing = c.flowing;
        moe_made = c.made;
      }
    if (m.moe.shared_expert_gate) {  // differentiated before: its output and the sigmoid's gone, two [sb, h] gradients
      moe_gone += hidden_grad + elements_of(sb) * size_of(compute);
      moe_flowing += hidden_grad * 2;
      if (experts_trained) moe_made += new_grads(elements_of(m.hidden));
    }
  }
  // (2h) The layer's last node, the norm in front of attention (input_layernorm) differentiated at pow's node as the
  // MLP's is at (2b): every gradient of the layer has appeared and its saved tensors are gone but that norm's fp32
  // input, among the six copies, with the residual's gradient waiting beside them. Layer 0's tops the end's moment
  // where the embedding's gradient is small beside 22 sbh 16-bit values (few tokens; the CPU step oracle's random
  // shapes). OLMo-2 has no norm there.
  const bool attention_norm_walk = mlp_norm_walk && !m.post_norms;
  // The walk reaches a layer's attention nodes (2i, 2k) once its MLP or stacked-expert block is differentiated
  // (norm_walk), in core_layout, without autocast or post-residual norms; (2i) is read for dense MLPs only.
  const bool attention_nodes_walk = norm_walk && core_layout && !a.autocast && !m.post_residual_norms;
  // (2i) The attention's input linear differentiated: fused qkv's node (GPT-NeoX's query_key_value), else q_proj's, the
  // last of the three (created first). With a bias, its gradient's sum over the tokens stages on CUDA in a buffer of its
  // own (core/cuda_reduce.hpp) once the node has made its input's gradient and freed what it kept (an H200's GPT-NeoX
  // trace: its 2 MB input freed by AddmmBackward0::apply before the 25,165,872 B buffer, −7.7% before); without one
  // (MmBackward0) the node's highest instant is its weight's gradient made with its input kept, which tops the layer's
  // other moments where weights are large beside the tokens (the CPU step oracle's OLMo step, seed 211). Layer 0's RoPE
  // nodes have freed the rotary tables by then. Every gradient of the layer has appeared (the input norm's h-sized ones
  // counted with them); its saved tensors are gone but the input norm's; beside the residual's gradient wait the
  // linear's incoming gradient (fused: c sb (heads + 2 kv) d; q_proj: c sb heads d, and k's and v's input gradients
  // summed in the norm output's input buffer, c sbh) and the input gradient it made (c sbh). Read without autocast
  // (each linear's input its own cast there); OPT-350M's linears read the residual stream (no norm before them).
  // Under FSDP2 the same nodes run on the gathered layer (an H200's OLMo rank over 64 ranks, 512 tokens against
  // 2048-wide layers: −3.09% before).
  const bool attention_input_walk = attention_nodes_walk && m.moe.experts == 0;
  // (2k) Qwen3's per-head norms differentiated at pow's node, as (2h)'s is. Qwen3Attention.forward (modeling_qwen3.py)
  // runs q_proj, q_norm, k_proj, k_norm, v_proj, so backward runs RoPE's nodes, v_proj's, k_norm's, k_proj's, q_norm's,
  // q_proj's. At k_norm's: o_proj's and v_proj's gradients and k_norm's weight's have appeared; the input norm's saved
  // tensors, its output (kept by q_proj and k_proj) and q_norm's are alive, with k_norm's fp32 input among its six fp32
  // copies (c sb kv d each); beside the residual's gradient wait v_proj's input gradient (c sbh) and dL/dq (c sb heads d).
  // At q_norm's, k_proj's gradient has appeared too and the two input gradients are summed; q_norm's six copies. These
  // top the layer's other moments where few tokens stand beside the weights (the CPU step oracle's Qwen3 draw, seed 803,
  // one layer of 8 heads of 64 over 96 tokens: backward -2.59% before, 201,864 B under; an H200's Qwen3 step, 32 heads of
  // 128 over hidden 1024, checkpointed: its backward phase -2.54% before). Gemma-3 norms after all three projections, in
  // fp32 (norm_scale_fp32): not this order. Qwen3-MoE's attention is Qwen3's (modular_qwen3_moe.py: Qwen3MoeAttention
  // subclasses Qwen3Attention, no forward of its own): its layers reach these nodes once the MoE block is differentiated,
  // every expert's and the router's gradient made (mlp_grads; three H200 Qwen3-MoE steps' backward phases -0.27%, -0.68%
  // and -0.81% before, -0.0001%, +0.10% and -0.42% with it).
  const bool head_norm_walk = attention_nodes_walk && m.qk_norm && !m.qk_norm_whole && !m.fused_qkv && m.norm == norm_kind::rmsnorm &&
                              !m.norm_scale_fp32 && !m.norm_weight_fp32;
  // (2j) SDPA's kernel differentiated (cuDNN's on an H100 or H200: torch 2.11 puts cudnn_attention first in the SDPA
  // priority on compute capability 9.x and 10.x, sdp_utils.cpp check_prefer_cudnn_attention): o_proj's node has run,
  // its weight's gradient made, its input gone only where it was a copy of the kernel's output; the kernel's node
  // makes dq, dk and dv beside dL/d(its output) (c sb heads d) and a workspace, while q, k, v, the output and the row
  // log-sum-exp it kept are alive. The workspace is cuDNN's (get_workspace_size, not in PyTorch's source): an H200's
  // StableLM trace held 1,597,696 B at 512 tokens of 12 heads of 64, the fp32 dq accumulator 4 sb heads d and the fp32
  // row sums 4 b heads s (256 B more not explained) (−4.4% before). Below the norms' moments in RMSNorm layers (their
  // six fp32 copies), it is read for LayerNorm layers (GPT-NeoX, StableLM, Phi, StarCoder2), 16-bit, without autocast
  // or dropout, with as many key heads as query heads (under FSDP2 too, on the gathered layer).
  const bool attention_kernel_walk = mlp_walk && core_layout && m.norm == norm_kind::layernorm && a.attention == attention_kind::flash &&
                                     a.device == device_kind::cuda && !a.autocast && a.dropout == 0.0 && !m.post_residual_norms &&
                                     (compute == dtype::bf16 || compute == dtype::fp16) && m.kv_heads == m.heads;
  enum class layer_part {
    before, recomputation, lora_down, branch_norm, moe_experts, mlp_down, mlp_activation, mlp_product, mlp_first_linear, mlp_norm,
    attention_core, attention_norm, after
  };
  // What every moment of layer i shares, computed once for the layer however many of its parts are walked.
  struct layer_context {
    bytes kept, appeared, below, gathered, copy_out, communication, saved, recomputed, attention_half;
    const layer_activations* whole;
  };
  const bool half_walked = first_linear_walk || mlp_norm_walk || attention_core_walk || attention_kernel_walk;
  const auto layer_at = [&](std::int64_t i) ZEROMEM_ALWAYS_INLINE {
    const bool full = F > 0 && (i + 1) % N == 0;
    const std::int64_t above = L - 1 - i, full_below = F > 0 ? i / N : 0;
    const std::int64_t unsharded_layers = s.reshard_after_forward ? (i > 0 ? 2 : 1) : i + 1;  // current (+ prefetched)
    // FSDP2's pre-backward copies the layer's all-gather output into its parameters' storage, the output freed after it
    // (_fsdp_param_group.py wait_for_unshard; kept for the next all-gather in forward only), before it prefetches the
    // layer below: layer 0, with nothing below, holds its own output there in the prefetched layer's place.
    const bytes copy_out = fsdp && s.reshard_after_forward && i == 0 ? layer_unsharded : bytes{};
    const layer_activations& w = full ? full_whole : layer_whole;
    return layer_context{accumulating ? kept_accumulating : (i <= buffer_top ? grad_buffer : bytes{}) + head_grads + layer_grads_kept * above,
                         accumulating && !fsdp ? new_layer_grad
                         : stage2_partitioned  ? new_layer_grad + layer_grads_unsharded
                                               : layer_grads_unsharded,  // the layer's new gradients
                         per_layer_saved * (i - full_below) + full_layer_saved * full_below + other_saved - (i < N - 1 ? released_below_full : bytes{}),
                         fsdp    ? root_unsharded + layer_unsharded * unsharded_layers
                         : zero3 ? (ZEROMEM_RARELY(s.zero3_backward_keeps_gathered) ? kept3.at_layer_unreleased(i, L) : kept3.at_layer(i, L)) *
                                           zero3_width +
                                       zero3_adapters + zero3_layer_grad
                                 : bytes{},
                         copy_out,
                         comm + (fsdp && above > 0 ? reduce_input : bytes{}),  // the previous layer's reduce-scatter input
                         full ? full_layer_saved : per_layer_saved,
                         full ? full_recomputed : recomputed,
                         half_walked ? attention_half(w) : bytes{},
                         &w};
  };
  // Layer 0's RoPE nodes free the rotary tables (one micro-batch's, without recompute), before its input norm's.
  const bytes tables_freed = a.recomputation == recompute::none && stage.microbatches_in_flight == 1 ? stage.rotary_tables - global_pair : bytes{};
  const auto layer_moment = [&](const layer_context& l, layer_part part, bool bottom) ZEROMEM_ALWAYS_INLINE {
    const bytes kept = l.kept, below = l.below, gathered = l.gathered, layer_saved = l.saved;
    const layer_activations& w = *l.whole;
    if (part == layer_part::before) {
      // A checkpointed layer is rerun after that copy: FSDP2's pre-backward hook is on the layer's output tensors
      // (_fsdp_state.py _register_pre_backward_hook: register_hook), called before their node unpacks a saved tensor.
      // The larger of the two stands (either is 0 where there is no copy or no rerun).
      const bool copying = l.copy_out > l.recomputed;
      return step_terms{resting, kept, below + layer_saved, copying ? bytes{} : l.recomputed, hidden_grad * 2, bytes{},
                        gathered + (copying ? l.copy_out : bytes{}), l.communication, bytes{}, dequantized, bytes{}};
    }
    if (part == layer_part::recomputation)
      return step_terms{resting, kept, below + layer_saved, l.recomputed + bytes_of(recompute_above), hidden_grad + recompute_flowing, bytes{},
                        gathered, l.communication, bytes{}, bytes{}, bytes{}};
    if (part == layer_part::lora_down) {
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + lora_down_made, below + layer_saved, l.recomputed - lora_down_gone, lora_down_flowing, bytes{},
                          gathered, l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + lora_down_made, below + layer_saved - lora_down_gone, bytes{}, lora_down_flowing, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::branch_norm) {
      const bytes norm_saved = attention_branch_norm(w);  // the two branch norms are alike
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept, below + layer_saved, l.recomputed - norm_saved, hidden_grad + norm_backward, bytes{}, gathered,
                          l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept, below + layer_saved - norm_saved, bytes{}, hidden_grad + norm_backward, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::mlp_product) {
      // Gemma-2's and OLMo-2's norm over the MLP's output was differentiated first: its saved tensors are gone.
      // The residual dropout after down was differentiated before it too: its mask is gone.
      const bytes gone = product + attention_branch_norm(w) + w.mlp_residual_mask +
                         (a.autocast ? down_params * size_of(compute) : bytes{});  // down's cast too
      // Under LoRA (lora_product_walk) product is 0: a frozen down kept none, and the three gradients are added here.
      const bytes product_moment_flowing =
          hidden_grad + attention_cast_waiting + product_flowing +
          (ZEROMEM_RARELY(lora_product_walk) ? elements_of(checked_product(sb, m.ffn)) * size_of(compute) * 3 : bytes{});
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + down_grad, below + layer_saved, l.recomputed - gone, product_moment_flowing, bytes{}, gathered,
                          l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + down_grad, below + layer_saved - gone, bytes{}, product_moment_flowing, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::moe_experts) {
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + moe_made, below + layer_saved, l.recomputed - moe_gone, hidden_grad + moe_flowing, bytes{}, gathered,
                          l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + moe_made, below + layer_saved - moe_gone, bytes{}, hidden_grad + moe_flowing, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::mlp_down) {
      // OLMo-2's norm over the MLP went first, OPT-350M's final_layer_norm, and the residual dropout after down (its mask).
      const bool at_weight = down_input_freed > down_bias_made + down_staging;  // (A), else (B)
      bytes made = made_here(down_params) - (at_weight ? down_bias_made : bytes{}),
            gone = attention_branch_norm(w) + w.mlp_residual_mask + (m.post_residual_norms ? w.mlp_norm : bytes{}) +
                   (at_weight ? bytes{} : down_input_freed);
      // Where the branch's output is scaled (Granite's residual_multiplier), normalised (OLMo-2's and Gemma-2's norm
      // over the MLP's output) or dropped out (config.json's residual dropout: the dropout node's output) before the
      // residual add, down's incoming gradient is a tensor of its own beside the residual's, which the residual path's
      // input buffer holds until the branch is differentiated. Under autocast it is otherwise the branch's cast: its
      // own, or the one the attention's parallel branch shares (counted as attention_cast_waiting).
      const bool own_gradient = m.scaled_residual || m.post_norms || m.sandwich_norms || w.mlp_residual_mask.count() > 0 ||
                                (a.autocast && (!m.parallel_residual || m.residual_added_first));
      bytes flowing =
          hidden_grad + (own_gradient ? branch_grad : bytes{}) + attention_cast_waiting + product + (at_weight ? bytes{} : down_staging);
      if (ZEROMEM_RARELY(a.autocast && !fsdp)) {
        // Under autocast down reads a 16-bit cast of its weight: the node makes the cast's 16-bit gradients (A: with its
        // bias's sum staging). It then releases its saved input and the weight cast and frees its incoming gradient; the
        // weight cast's node makes the fp32 gradient (B), the 16-bit one standing in for the freed cast, and, where down
        // cast its input too (gelu_new's fp32 product), the input's cast node, the later one, has made its fp32 gradient
        // first (lm_head's two nodes, above). relu's node keeps its output, down's input. Measured on an H200: three AMP
        // steps whose backward peaks at down's node (Llama and Gemma-3 accumulating, Phi) read +0.10% … +0.53% with
        // the fp32 gradient at (A).
        const elements down_weight = elements_of(checked_product(m.hidden, m.ffn));
        const bytes made_a = down_params * size_of(compute);
        const bytes made_b = made_here(down_weight) + (down_params - down_weight) * size_of(compute);
        const bytes input_freed = m.mlp == mlp_kind::relu ? bytes{} : product;
        const bytes input_grad_b = gelu_fp32_product ? elements_of(checked_product(sb, m.ffn)) * size_of(dtype::fp32) : product;
        if (made_b + input_grad_b > made_a + input_freed + flowing - hidden_grad - attention_cast_waiting) {  // (B)
          made = made_b;
          gone += input_freed;
          flowing = hidden_grad + attention_cast_waiting + input_grad_b;
        } else {
          made = made_a;
        }
      }
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + made, below + layer_saved, l.recomputed - gone, flowing, bytes{}, gathered,
                          l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + made, below + layer_saved - gone, bytes{}, flowing, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::mlp_first_linear) {
      const bytes first_linear_cast =  // under autocast the first linear's weight cast, in use
          a.autocast ? first_linear_params() * size_of(compute) : bytes{};
      const bool apart = !a.autocast, at_weight = apart && w.mlp_input > first_linear_bias_made + first_linear_staging;  // (A), else (B)
      const bytes made = first_linear_made - (at_weight ? first_linear_bias_made : bytes{});
      const bytes flowing = first_linear_flowing + (at_weight ? bytes{} : first_linear_staging);
      const bytes alive = l.attention_half + (m.post_residual_norms ? bytes{} : w.mlp_norm) + (at_weight || !apart ? w.mlp_input : bytes{}) +
                          first_linear_cast;
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + made, below + layer_saved, alive - checkpoint_in_layer, flowing, bytes{}, gathered, l.communication,
                          bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + made, below + layer_saved - w.total() + alive, bytes{}, flowing, bytes{}, gathered, l.communication,
                        bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::mlp_norm) {  // the layer's other micro-batches in flight (pipeline) keep all of theirs
      // OLMo-2 has no norm before its MLP: the norm differentiated here is post_attention_layernorm itself, whose saved
      // input is among the six copies.
      const bytes half = l.attention_half - (m.post_norms ? attention_branch_norm(w) : bytes{});
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + mlp_norm_made, below + layer_saved, half - checkpoint_in_layer, hidden_grad + norm_backward, bytes{},
                          gathered, l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + mlp_norm_made, below + layer_saved - w.total() + half, bytes{}, hidden_grad + norm_backward, bytes{},
                        gathered, l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::attention_core) {
      // The residual dropout after o_proj was differentiated before it, and a norm after the attention's residual add
      // (OPT-350M's self_attn_layer_norm) before that: their saved tensors are gone (an H200's OPT step, eager).
      const bytes alive = l.attention_half - (m.post_norms ? attention_branch_norm(w) : bytes{}) - w.attention_output - probabilities -
                          value_freed(w) - w.attention_residual_mask - (m.post_residual_norms ? w.attention_norm : bytes{}) - o_proj_cast;
      const bytes flowing = hidden_grad * (m.shared_layer_norm ? 2 : 1) + value_grad + softmax_gradients;
      const bytes made = (m.shared_layer_norm ? mlp_linear_grads : mlp_grads) + o_proj_grad;
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + made, below + layer_saved, alive - checkpoint_in_layer, flowing, bytes{},
                          gathered, l.communication, bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + made, below + layer_saved - w.total() + alive, bytes{}, flowing, bytes{},
                        gathered, l.communication, bytes{}, bytes{}, bytes{}};
    }
    if (part == layer_part::mlp_activation) {  // (2c''), ReLU MLPs only: tested after the common parts
      const bytes made = adding_in ? bytes{} : made_here(down_params),
                  gone = w.mlp_residual_mask + (m.post_residual_norms ? w.mlp_norm : bytes{}),
                  relu_flowing = hidden_grad + attention_cast_waiting + product * 2;
      if (a.recomputation == recompute::full)
        return step_terms{resting, kept + made, below + layer_saved, l.recomputed - gone, relu_flowing, bytes{}, gathered, l.communication,
                          bytes{}, bytes{}, bytes{}};
      return step_terms{resting, kept + made, below + layer_saved - gone, bytes{}, relu_flowing, bytes{}, gathered, l.communication, bytes{},
                        bytes{}, bytes{}};
    }
    if (part == layer_part::attention_norm)  // under full recompute the checkpoint's input stays to the layer's end
      return step_terms{resting, kept + (adding_in ? mlp_norm_made : l.appeared),
                        below - (bottom ? tables_freed : bytes{}) + (a.recomputation == recompute::full ? layer_saved : bytes{}), bytes{}, hidden_grad + norm_backward,
                        bytes{}, gathered, l.communication, bytes{}, bytes{}, bytes{}};
    // FSDP2 reshards the layer before it reduce-scatters its gradients (_fsdp_param_group.py post_backward:
    // "post_backward_reshard", then "post_backward_reduce"): its unsharded parameters are gone by then, and so is the
    // previous layer's reduce-scatter input (`self.comm_ctx.reduce_scatter_state = None` before foreach_reduce
    // allocates this layer's).
    return step_terms{resting, kept + l.appeared, below, bytes{}, hidden_grad * 2, bytes{}, fsdp ? gathered - layer_unsharded : gathered,
                      fsdp ? comm + reduce_input : l.communication, bytes{}, bytes{}, bytes{}};
  };
  // (2i)'s moment, considered apart from the parts every walk tests (read for every layer walk now: not marked cold).
  const auto attention_input_moment = [&](const layer_context& l, bool bottom) {
    // Layer 0's RoPE nodes, before this one, have freed the rotary tables (tables_freed).
    const bytes kept = l.kept, below = l.below - (bottom ? tables_freed : bytes{}), gathered = l.gathered, layer_saved = l.saved;
    const layer_activations& w = *l.whole;
    const std::int64_t outputs = checked_product(m.fused_qkv ? checked_sum(m.heads, checked_product(2, m.kv_heads)) : m.heads, m.head_size());
    const bytes incoming = elements_of(checked_product(sb, outputs)) * size_of(compute) + hidden_grad * (m.fused_qkv ? 1 : 2);
    // Only a bias's gradient is a sum over the tokens (derivatives.yaml addmm); an unbiased linear's node (mm) stages none.
    const bytes staging =
        m.qkv_bias && a.device == device_kind::cuda ? bytes_of(cuda_sum_staging_bytes(outputs, sb, s.multiprocessors)) : bytes{};
    const elements weight = elements_of(checked_product(m.hidden, outputs)), bias = elements_of(m.qkv_bias ? outputs : 0);
    // Two instants of the node: (A) while it makes its weight's gradient (the mm after its input's), the input it kept
    // (the norm's output, w.attention_input) still alive and its bias's gradient not made; (B) once it has freed that
    // input, the bias's sum staging its partial sums (CUDA). derivatives.yaml addmm: mat2's gradient is mat1^T x grad,
    // a second mm after mat1's; the family step oracle's GPT-NeoX steps peak at (A), the input freed right after.
    const bytes made_b = adding_in ? made_here(weight + bias) : l.appeared, made_a = adding_in ? made_here(weight) : l.appeared - new_grads(bias);
    const bool at_weight = w.attention_input + made_a > staging + made_b;
    const bytes made = at_weight ? made_a : made_b, input = at_weight ? w.attention_input : bytes{};
    const bytes flowing = hidden_grad + incoming + (at_weight ? bytes{} : staging);
    if (a.recomputation == recompute::full)
      return step_terms{resting, kept + made, below + layer_saved, w.attention_norm + input - checkpoint_in_layer, flowing, bytes{}, gathered,
                        l.communication, bytes{}, bytes{}, bytes{}};
    return step_terms{resting, kept + made, below + w.attention_norm + input, bytes{}, flowing, bytes{}, gathered, l.communication, bytes{},
                      bytes{}, bytes{}};
  };
  // (2k)'s moments, k_norm's and q_norm's, considered apart as (2i)'s is (only Qwen3's layers: cold).
  const auto head_norm_moment = [&](const layer_context& l, bool query, bool bottom) ZEROMEM_COLD {
    const layer_activations& w = *l.whole;
    const std::int64_t d = m.head_size();
    const auto projection = [&](std::int64_t heads) {
      return elements_of(checked_sum(checked_product(m.hidden, heads, d), m.qkv_bias ? checked_product(heads, d) : 0));
    };
    const bytes copy = elements_of(checked_product(sb, query ? m.heads : m.kv_heads, d)) * size_of(dtype::fp32);  // the norm's fp32 input
    const bytes made = mlp_grads + new_grads(o_proj_params() + projection(m.kv_heads) * (query ? 2 : 1) + elements_of(query ? 2 * d : d));
    const bytes q_norm_kept = query ? bytes{} : bytes_of(detail::head_norm_saved(m, a, sb, m.heads, false));
    const bytes query_grad = query ? bytes{} : elements_of(checked_product(sb, m.heads, d)) * size_of(compute);
    const bytes alive = w.attention_norm + w.attention_input + q_norm_kept + copy;
    const bytes flowing = hidden_grad * 2 + query_grad + copy * 5;
    if (a.recomputation == recompute::full)
      return step_terms{resting, l.kept + made, l.below + l.saved, alive - checkpoint_in_layer, flowing, bytes{}, l.gathered, l.communication,
                        bytes{}, bytes{}, bytes{}};
    return step_terms{resting, l.kept + made, l.below - (bottom ? tables_freed : bytes{}) + alive, bytes{}, flowing, bytes{}, l.gathered,
                      l.communication, bytes{}, bytes{}, bytes{}};
  };
  // (2j)'s moment, considered apart as (2i)'s is.
  const auto attention_kernel_moment = [&](const layer_context& l) ZEROMEM_COLD {
    const layer_activations& w = *l.whole;
    const std::int64_t query_values = checked_product(sb, m.heads, m.head_size());
    const bytes alive = l.attention_half - (w.attention_kernel_output.count() > 0 ? w.attention_output : bytes{}) - w.attention_residual_mask;
    const bytes workspace = bytes_of(checked_sum(checked_product(4, query_values), checked_product(4, a.micro_batch, m.heads, s_local)));
    const bytes flowing = hidden_grad * (m.shared_layer_norm ? 2 : 1) + elements_of(checked_product(4, query_values)) * size_of(compute) + workspace;
    const bytes made = (m.shared_layer_norm ? mlp_linear_grads : mlp_grads) + new_grads(o_proj_params());
    if (a.recomputation == recompute::full)
      return step_terms{resting, l.kept + made, l.below + l.saved, alive - checkpoint_in_layer, flowing, bytes{}, l.gathered, l.communication,
                        bytes{}, bytes{}, bytes{}};
    return step_terms{resting, l.kept + made, l.below + l.saved - w.total() + alive, bytes{}, flowing, bytes{}, l.gathered, l.communication,
                      bytes{}, bytes{}, bytes{}};
  };
  // (3) A vision tower's backward (image tokens): the model builds the text embeddings before the image features and
  // scatters these into them (modeling_qwen2_5_vl.py Qwen2_5_VLModel.forward: masked_scatter), so autograd, which runs
  // the later-created nodes first, differentiates the tower before the embedding: dL/d(embedding output) waits beside
  // it. Its first block (all the tower's checkpoints alive, one block recomputed) and its end (every block's gradient,
  // the inputs left) bound the walk, as a decoder's do. The merger's gradients are there from the start; the tower's
  // are shares of the rank's like any group's (all of them at once under FSDP2, where it is in the root).
  vision_activations vision{};
  bool vision_trains = false;
  bytes pixel_values{}, vision_grads_start{}, vision_grads_blocks{}, vision_flowing{}, vision_other{};
  if (ZEROMEM_RARELY(a.image_tokens > 0)) {  // text models skip all of it
    vision = detail::vision_activation_bytes_unchecked(m, a, t.adapt);
    vision_trains = vision.blocks.count() > 0;
    pixel_values = detail::pixel_value_bytes(m.vision, vision.patches) * stage.microbatches_in_flight;
    vision_flowing = elements_of(checked_product(2, vision.patches, m.vision.hidden)) * size_of(compute);
    vision_other = stage.vision - vision.total();  // other micro-batches in flight (pipeline)
    if (vision_trains) {
      const elements merger = detail::vision_merger_parameters(m.vision);
      const elements patch_embedding = elements_of(checked_product(m.vision.hidden, m.vision.in_channels, m.vision.temporal_patch,
                                                                   m.vision.patch, m.vision.patch));  // Conv3d, no bias
      const auto grad_bytes = [&](elements n) { return fsdp ? n * size_of(compute) : share(n); };
      vision_grads_start = (accumulating ? kept_accumulating : (buffer_at_end ? grad_buffer : bytes{}) + head_grads + layer_grads_kept * L) +
                           grad_bytes(merger);
      vision_grads_blocks = grad_bytes(counts.vision - merger - patch_embedding);
    }
  }
  const auto vision_moment = [&](bool end) {
    return step_terms{resting, vision_grads_start + (end ? vision_grads_blocks : bytes{}),
                      vision_other + vision.inputs + (end ? bytes{} : vision.blocks), end ? bytes{} : vision.recomputed,
                      hidden_grad + vision_flowing, bytes{}, fsdp ? root_unsharded : bytes{}, comm, bytes{}, bytes{}, bytes{}};
  };
  // (4) The end: every gradient, and dL/d(embedding output) while the embedding's gradient is computed (the pixel
  // values of an image batch still alive). FSDP2: the root's unsharded gradients too; accumulating without FSDP2: the
  // embedding's new gradient beside them all. Tied embeddings: lm_head's gradient, the embedding's and their sum, after
  // dL/d(embedding output) is freed (accumulating, or at DeepSpeed stages 2-3, whose partitions stand for none of them:
  // beside the kept gradients).
  // Under autocast lm_head's gradient reaches the input buffer through the weight cast's ToCopyBackward, a fresh
  // tensor the buffer alone holds, so the embedding's is added into it in place (torch/csrc/autograd/input_buffer.cpp
  // accumulate: can_accumulate_inplace(old_var)): no third table (an H200's GPT-2 step under AMP, +21% before).
  const bytes tied_sum = a.autocast ? bytes{} : tied_gradient;
  // Every gradient, ZeRO-2's partitions only where the bucket filled before the embeddings' backward (buffer_at_end).
  const bytes grads_at_end = buffer_at_end || accumulating ? grads_all : grads_all - grad_buffer;
  // FSDP2: every layer's sharded gradients (the root's too when accumulating) and the root's unsharded ones.
  const bytes grads_before_root = fsdp ? grads_all - (accumulating ? bytes{} : root_shard_grads) + root_trainable * size_of(compute) : bytes{};
  const bytes grads_end = fsdp ? grads_before_root + tied_gradient + tied_sum
                               : grads_at_end + new_embedding_grad + tied_sum + (accumulating || partitioned_grads ? tied_gradient : bytes{});
  // Accumulating without FSDP2, learned positions (GPT-2's wpe, OPT's embed_positions, made after the token embedding
  // and so differentiated first) make their own new table first, beside every kept gradient, lm_head's tied one
  // waiting and dL/d(embedding output): above the end where the position table is large beside the token table (the
  // family step oracle's GPT-2 under --keep-grads, 1,040 positions beside 500 tokens: -3.73% before). GPT-2's one row
  // of positions gets the batch's gradient summed into a row of its own (the add's broadcast: sum_to), c s h. At
  // DeepSpeed stages 2-3 that new table is whole until its hook (just_made); at ZeRO-2 without accumulating too.
  const bytes positions_new =
      (accumulating || stage2_partitioned) && !fsdp && m.positions == position_kind::learned && split.embedding_trainable.count() > 0
          ? just_made(largest_share(counts.position_embedding, a.tp))
          : bytes{};
  const bytes positions_row_grad =
      positions_new.count() > 0 && !opt_positions && a.micro_batch > 1 ? elements_of(checked_product(s_local, m.hidden)) * size_of(compute) : bytes{};
  // The embedding's node still holds the int64 position ids it saved (stage.position_ids; GPT-2's row under full
  // recompute is counted with the checkpoints', which are gone by then).
  const auto positions_moment = [&] {
    const bytes ids = bytes_of(learned_position_id_bytes(m, s_local, a.micro_batch));
    return step_terms{resting, grads_at_end + positions_new + tied_gradient, pixel_values + ids, bytes{}, hidden_grad + positions_row_grad,
                      bytes{}, bytes{}, comm, bytes{}, bytes{}, bytes{}};
  };
  // ZeRO-3 gathers the embedding for its backward, which the gradient reaching its output starts (parameter_offload.py
  // _post_forward_module_hook: PreBackwardFunctionForModule on the outputs), unless the trace kept it from the forward:
  // the token table, beside the embeddings the trace keeps (zero3_retained::root, without a tied table). Where the
  // backward releases nothing, the whole stage is gathered by then.
  const bool embedding_backward = split.embedding_trainable.count() > 0;
  const elements zero3_end_elements =
      !zero3                                 ? elements{}
      : s.zero3_backward_keeps_gathered      ? kept3.at_layer_unreleased(0, L) + (embedding_backward && kept3.root.count() == 0 ? kept3.resident.embeddings : elements{})
      : embedding_backward                   ? kept3.at_embeddings(m.tied_embeddings)
                                             : kept3.persistent;
  const bytes zero3_end_gathered = zero3_end_elements * zero3_width + zero3_adapters;
  const auto end_moment = [&] {
    return step_terms{resting, grads_end, pixel_values, bytes{}, tied_gradient.count() > 0 ? bytes{} : hidden_grad, bytes{},
                      fsdp ? root_unsharded : zero3_end_gathered,
                      comm + (fsdp ? reduce_input : bytes{}), bytes{}, bytes{}, bytes{}};
  };
  // (5) FSDP2's root reduced, after backward: its parameters resharded, its unsharded gradients copied into its
  // reduce-scatter input (the last layer's released before it is made). Where the vocabulary is large beside the
  // layers this tops the end: an H200's FSDP2 ranks of 1-2 layer models with 152k-token vocabularies, mixed
  // precision (fp32 reduce), −28.5% and −13.2% before.
  const auto root_reduce_moment = [&] {
    return step_terms{resting, grads_before_root, bytes{}, bytes{}, bytes{}, bytes{}, bytes{}, comm + root_reduce_input, bytes{}, bytes{}, bytes{}};
  };
  // (1c) Then the final RMSNorm differentiated at pow's node, as a layer's norm is at (2b): lm_head's input and the
  // norm's saved tensors are gone but its fp32 input, which is among the six fp32 copies of the norm's input; its
  // weight's gradient and lm_head's have appeared; no residual gradient waits (nothing else reads the last hidden
  // state). It tops the loss's moment where the vocabulary is small beside the hidden size (the CPU step oracle's
  // random shapes, exact; its LoRA steps with few tokens beside hidden 512: -4.78% before). Read where the layers' norm
  // is (mlp_norm_walk, or frozen under LoRA) and the loss is transformers'.
  const bool final_norm_walk = (mlp_norm_walk || lora_norm_walk) && p.pp == 1 && s.loss == loss_impl::hf;
  // Accumulating without FSDP2, lm_head's and the norm's new gradients are added in by then (a tied head's waits).
  const auto final_norm_moment = [&] {
    return step_terms{resting, accumulating && !fsdp ? grads_all + tied_gradient : grads_at_head + head_grads,
                      saved - stage.output_layer, bytes{}, final_norm_backward, bytes{}, gathered_start, comm, bytes{}, bytes{}, bytes{}};
  };
  // The moments in the order they happen: the loss's backward, layers L - 1 and 0 before and after, the end; the first
  // on a tie. Alternating layers: between layers i and i + N the walk changes by the same amounts, so each residue of
  // i mod N has its highest moments at its first or last layer on the stage.
  // Where the caching allocator's blocks are counted (one tensor per parameter: add_allocator_blocks), a moment holds
  // its gradients' share of those above the gradients, and moments are compared with it: one holding more gradients
  // (the end) can top one that is higher without them (the loss's), as a step's peak does.
  const bool blocks_counted = a.device == device_kind::cuda && !fsdp && t.zero.stage == 0 && !r.fp32_master && !r.fp32_gradient_copy &&
                              t.adapt.quantize == quantization::none && a.tp == 1 && p.pp == 1;
  const bytes grads_excess =
      ZEROMEM_RARELY(blocks_counted) ? detail::gradient_block_excess(m, t, r, s.allocator == allocator_mode::expandable, grads_all) : bytes{};
  const auto total_of = [&](const step_terms& x) ZEROMEM_ALWAYS_INLINE {
    return ZEROMEM_RARELY(grads_excess.count() > 0) ? x.total() + detail::held_block_excess(x.gradients, grads_all, grads_excess) : x.total();
  };
  enum class moment_kind {
    loss, head, final_norm, layer, attention_input, key_norm, query_norm, attention_kernel, vision_start, vision_end, positions, end, root_reduce
  };
  moment_kind highest = moment_kind::loss;
  std::int64_t highest_layer = 0;
  layer_part highest_part = layer_part::before;
  bytes backward_total = total_of(loss_moment());
  // lm_head's moment differs from the loss's by its new gradients, the two flowing gradients and the loss's tensors.
  if (ZEROMEM_RARELY(grads_excess.count() > 0)) {
    if (const bytes total = total_of(head_moment()); total > backward_total) {
      backward_total = total;
      highest = moment_kind::head;
    }
  } else if (head_made > loss_backward) {
    backward_total += head_made - loss_backward;
    highest = moment_kind::head;
  }
  if (final_norm_walk) {
    if (const bytes total = total_of(final_norm_moment()); total > backward_total) {
      backward_total = total;
      highest = moment_kind::final_norm;
    }
  }
  // The parts of a layer walked, one bit each in layer_part's order (the order they are considered in), chosen once:
  // testing every part's condition for every layer considered cost more than the moments themselves.
  const auto bit = [](layer_part part) { return 1u << static_cast<unsigned>(part); };
  const unsigned walked_parts = bit(layer_part::before) | bit(layer_part::after) |
                                (branch_norm_walk || lora_branch_norm_walk ? bit(layer_part::branch_norm) : 0u) |
                                (lora_recompute_walk ? bit(layer_part::recomputation) : 0u) | (lora_down_walk ? bit(layer_part::lora_down) : 0u) |
                                (moe_walk ? bit(layer_part::moe_experts) : 0u) |
                                (down_walk ? bit(layer_part::mlp_down) : 0u) | (activation_walk ? bit(layer_part::mlp_activation) : 0u) |
                                (gated_walk || lora_product_walk ? bit(layer_part::mlp_product) : 0u) |
                                (first_linear_walk ? bit(layer_part::mlp_first_linear) : 0u) |
                                (mlp_norm_walk ? bit(layer_part::mlp_norm) : 0u) | (attention_core_walk ? bit(layer_part::attention_core) : 0u) |
                                (attention_norm_walk ? bit(layer_part::attention_norm) : 0u);
  const auto consider_layer = [&](std::int64_t i) ZEROMEM_ALWAYS_INLINE {
    const layer_context layer = layer_at(i);
    for (unsigned rest = walked_parts; rest != 0; rest &= rest - 1) {
      const auto part = static_cast<layer_part>(detail::log2_of_power_of_two(static_cast<std::int64_t>(rest & (0u - rest))));
      if (const bytes total = total_of(layer_moment(layer, part, i == 0)); total > backward_total) {
        backward_total = total;
        highest = moment_kind::layer;
        highest_layer = i;
        highest_part = part;
      }
    }
  };
  // The layers read, in the order they happen; each a call of one inlined walk, not a copy of it per layer.
  // ZeRO-2's buffer appears at layer buffer_top: above and below it the walk changes by the same amounts again, so
  // the layers on either side of it are read too.
  std::int64_t layers_read[6] = {L - 1}, read = 1;
  if (fsdp && L > 2) layers_read[read++] = L - 2;
  if (ZEROMEM_RARELY(stage2_partitioned && buffer_top > 0 && buffer_top < L - 1)) {
    if (buffer_top + 1 < L - 1) layers_read[read++] = buffer_top + 1;
    layers_read[read++] = buffer_top;
  }
  if (fsdp && L > 3) layers_read[read++] = 1;
  if (L > 1) layers_read[read++] = 0;
  for (std::int64_t k = 0; k < read; ++k) consider_layer(layers_read[k]);
  // The moments considered apart (2i, 2j, 2k), at the same layers.
  const auto take_apart = [&](bytes total, moment_kind kind, std::int64_t i) ZEROMEM_ALWAYS_INLINE {
    if (total > backward_total) {
      backward_total = total;
      highest = kind;
      highest_layer = i;
    }
  };
  if (attention_input_walk || head_norm_walk || attention_kernel_walk)
    for (std::int64_t k = 0; k < read; ++k) {
      const std::int64_t i = layers_read[k];
      const layer_context layer = layer_at(i);
      if (attention_input_walk) take_apart(total_of(attention_input_moment(layer, i == 0)), moment_kind::attention_input, i);
      if (head_norm_walk)
        for (const bool query : {false, true})
          take_apart(total_of(head_norm_moment(layer, query, i == 0)), query ? moment_kind::query_norm : moment_kind::key_norm, i);
      if (attention_kernel_walk) take_apart(total_of(attention_kernel_moment(layer)), moment_kind::attention_kernel, i);
    }
  for (const bool end : {false, true})
    if (!vision_trains) break;
    else if (const bytes total = total_of(vision_moment(end)); total > backward_total) {
      backward_total = total;
      highest = end ? moment_kind::vision_end : moment_kind::vision_start;
    }
  if (ZEROMEM_RARELY(positions_new.count() > 0))
    if (const bytes total = total_of(positions_moment()); total > backward_total) {
      backward_total = total;
      highest = moment_kind::positions;
    }
  if (const bytes total = total_of(end_moment()); total > backward_total) {
    backward_total = total;
    highest = moment_kind::end;
  }
  if (fsdp && root_trainable.count() > 0) {
    if (const bytes total = total_of(root_reduce_moment()); total > backward_total) {
      backward_total = total;
      highest = moment_kind::root_reduce;
    }
  }
  for (std::int64_t residue = 0; F > 0 && residue < N && residue < L; ++residue) {
    const std::int64_t last = residue + (L - 1 - residue) / N * N;
    // FSDP2: where a residue's first or last layer is one of the walk's two steps (0, L - 1), the next one in too.
    for (const std::int64_t i : {residue, last, fsdp && residue == 0 && N < last ? N : -1,
                                 fsdp && last == L - 1 && last - N > residue ? last - N : -1})
      if (i >= 0) consider_layer(i);
  }

  // ---- optimizer step ----
  bytes temporaries{};
  // The update's temporaries (optimizer_table, by implementation): under foreach, lists of every updated parameter's
  // size at once; under the for-loop, tensors of the largest one's size; fused, none. An offloaded optimizer runs on
  // the CPU and a paged one runs bitsandbytes' own fused update.
  const optimizer_traits& opt = traits_of(t.optimizer.kind);
  if (t.zero.optimizer.device == offload_device::none && !t.adapt.paged_optimizer) {
    if (s.optimizer == optimizer_impl::fused && !opt.cuda_fused)
      detail::fail("optimizer " + std::string(opt.name) + " has no fused CUDA implementation in torch.optim; use --optimizer-impl foreach or forloop");
    const dtype state = fsdp ? storage : r.optimizer_dtype();
    elements updated = fsdp ? shard : (t.zero.stage >= 1 ? largest_share(t.params, shard_group_of(t)) : t.params);
    // The largest tensor the for-loop steps. FSDP2: a parameter's local shard, its dim-0 chunk (_fsdp_param.py
    // _init_sharded_param: torch.chunk over the ranks; DTensor's pointwise ops allocate on the local tensor).
    // DeepSpeed ZeRO-1/2: one flat fp32 partition per parameter group (stage_1_and_2.py
    // single_partition_of_fp32_groups, the optimizer's only parameter). ZeRO-3 steps one flat sub-group at a time
    // (stage3.py _optimizer_step: param_groups[i]['params'] = [fp32_partitioned_groups_flat[sub_group_id]]), so its
    // foreach lists are one sub-group too: sub_group_size elements (a lower bound: _create_fp16_sub_groups closes a
    // group once it reaches that size, up to one parameter's partition past it).
    elements largest = largest_share(split.largest_trainable, a.tp);
    if (fsdp) {
      largest = elements_of(detail::ceil_div(largest.count(), s.fsdp_world));
      if (trainable_pad > 0) {  // transformers 5's gate_up_proj: ceil(E / ranks) experts of it
        const elements chunk = elements_of(checked_product(detail::ceil_div(m.moe.experts, s.fsdp_world), m.mlp == mlp_kind::swiglu ? 2 : 1,
                                                           m.moe.expert_ffn, m.hidden));
        if (chunk > largest) largest = chunk;
      }
    }
    else if (t.zero.stage == 3 && t.zero.sub_group_size < updated.count()) {
      // At least one parameter's partition, ceil(numel / ranks): a sub-group closes after the parameter that reaches
      // sub_group_size (after every parameter at 0).
      const elements one_parameter = elements_of(detail::ceil_div(largest.count(), shard_group_of(t)));
      largest = updated = elements_of(t.zero.sub_group_size) > one_parameter ? elements_of(t.zero.sub_group_size)
                          : one_parameter < updated                          ? one_parameter
                                                                             : updated;
    }
    else if (t.zero.stage >= 1) largest = updated;
    // Coupled weight decay's decayed gradients (optimizer_traits::decay_foreach / decay_forloop).
    const bool decays = t.optimizer.weight_decay != 0.0;
    if (decays && s.optimizer != optimizer_impl::fused && (opt.decay_foreach < 0 || opt.decay_forloop < 0))
      detail::fail("weight decay's temporaries are read for " + optimizers_with_decay() + " only; " + std::string(opt.name) +
                   " with a weight decay is not modelled, drop --weight-decay or use --optimizer-impl fused where it has one");
    // foreach: its lists, and beside them the per-tensor temporaries of the largest parameter (torch.bool masks: 1 B,
    // as int8). The for-loop: its tensors of one parameter, one more for SGD's Nesterov grad.add(buf), beside those of
    // the previous parameter its local names still hold (forloop_moment_elements, over the model's parameters in
    // order, whole or as FSDP2 shards; LoRA's adapters in theirs, lora_forloop_moment_elements). A flat ZeRO partition is
    // one tensor; tensor- and pipeline-parallel ranks take the largest tensor without the previous one's (a lower bound
    // by at most forloop_carried x that tensor).
    if (s.optimizer == optimizer_impl::foreach_kernels) {
      temporaries = updated * size_of(state) * (opt.foreach_temporaries + (decays ? opt.decay_foreach : 0)) +
                    largest * size_of(state) * opt.foreach_largest + largest * size_of(dtype::int8) * opt.foreach_largest_masks;
    } else if (s.optimizer == optimizer_impl::forloop) {
      const int decayed = decays ? opt.decay_forloop : 0;
      const int current = opt.forloop_temporaries + decayed + (t.optimizer.nesterov ? 1 : 0);
      elements moment = largest * current;
      if (t.zero.stage == 0 && !t.adapt.lora_enabled() && a.tp == 1 && p.pp == 1)
        moment = elements_of(forloop_moment_elements(m, split.embedding_trainable.count() > 0, split.head_trainable.count() > 0,
                                                     fsdp ? s.fsdp_world : 1, current, opt.forloop_carried, opt.forloop_early_carried,
                                                     opt.forloop_early > 0 ? opt.forloop_early + decayed : 0));
      else if (t.zero.stage == 0 && a.tp == 1 && p.pp == 1)  // LoRA: the adapters in order (the CPU step oracle's LoRA steps)
        moment = elements_of(lora_forloop_moment_elements(m, t.adapt.lora, fsdp ? s.fsdp_world : 1, current, opt.forloop_carried,
                                                          opt.forloop_early_carried, opt.forloop_early > 0 ? opt.forloop_early + decayed : 0));
      temporaries = moment * size_of(state);
      // Adafactor on CUDA: a matrix's column norm stages its partial sums beside the previous parameter's update
      // (adafactor_norm_staging_bytes). Measured on an H200: the step phase 18% above its prediction before (a tied
      // 8,192-token embedding, first in the loop, 100,663,344 B).
      if (t.optimizer.kind == optimizer_kind::adafactor && a.device == device_kind::cuda && t.zero.stage == 0 && !t.adapt.lora_enabled() &&
          a.tp == 1 && p.pp == 1) {
        const bytes staging = bytes_of(adafactor_norm_staging_bytes(m, split.embedding_trainable.count() > 0, split.head_trainable.count() > 0,
                                                                     fsdp ? s.fsdp_world : 1, (elements_of(opt.forloop_carried) * size_of(state)).count(),
                                                                     s.multiprocessors));
        if (staging > temporaries) temporaries = staging;
      }
    }
  }
  // ZeRO-3 partitions every parameter before the update, the persistent ones too, and gathers those again after it
  // (stage3.py step: _partition_all_parameters, then _post_step's all_gather of persistent_parameters): the phase's
  // highest moment holds the update's temporaries or, where they are smaller, the persistent tensors.
  const bytes persistent_after_step = zero3 ? kept3.persistent * zero3_width + zero3_adapters : bytes{};
  const bool persistent_sets_step = persistent_after_step > temporaries;
  const auto optimizer_step = [&] {
    return step_terms{resting, grads_all, bytes{}, bytes{}, bytes{}, bytes{}, persistent_sets_step ? persistent_after_step : bytes{},
                      comm_outside_backward, persistent_sets_step ? bytes{} : temporaries, bytes{}, bytes{}};
  };

  // The result is built in place: each phase's terms straight into it. The workspaces are in every phase alike, so
  // they are added once the phases are compared.
  const bytes forward_total = forward().total(), optimizer_total = optimizer_step().total();
  bytes peak = forward_total;
  step_phase peak_phase = step_phase::forward;
  if (backward_total > peak) {
    peak = backward_total;
    peak_phase = step_phase::backward;
  }
  if (optimizer_total > peak) {
    peak = optimizer_total;
    peak_phase = step_phase::optimizer_step;
  }
  peak += s.blas_workspaces;
  step_estimate out{forward(),
                    highest == moment_kind::loss           ? loss_moment()
                    : highest == moment_kind::head         ? head_moment()
                    : highest == moment_kind::final_norm   ? final_norm_moment()
                    : highest == moment_kind::end          ? end_moment()
                    : highest == moment_kind::positions    ? positions_moment()
                    : highest == moment_kind::root_reduce  ? root_reduce_moment()
                    : highest == moment_kind::attention_input ? attention_input_moment(layer_at(highest_layer), highest_layer == 0)
                    : highest == moment_kind::key_norm || highest == moment_kind::query_norm
                        ? head_norm_moment(layer_at(highest_layer), highest == moment_kind::query_norm, highest_layer == 0)
                    : highest == moment_kind::attention_kernel ? attention_kernel_moment(layer_at(highest_layer))
                    : highest == moment_kind::vision_start ? vision_moment(false)
                    : highest == moment_kind::vision_end   ? vision_moment(true)
                                                           : layer_moment(layer_at(highest_layer), highest_part, highest_layer == 0),
                    optimizer_step(),
                    peak,
                    peak_phase,
                    peak,
                    s.cuda_context,
                    s.cuda_modules};
  out.forward.blas_workspaces = out.backward.blas_workspaces = out.optimizer_step.blas_workspaces = s.blas_workspaces;
  // One tensor per parameter on CUDA: the caching allocator's blocks above them (detail::add_allocator_blocks).
  if (blocks_counted) detail::add_allocator_blocks(out, m, t, r, s.allocator == allocator_mode::expandable, grads_all, grads_excess, accumulating);
  if (s.reserve_fraction > 0.0)
    out.reserved += bytes_of_checked(static_cast<std::int64_t>(static_cast<long double>(out.peak.count()) * s.reserve_fraction));
  return out;
}
}  // namespace detail

/// The per-GPU step of the most loaded rank (first pipeline stage; with pp = 1 it also holds the loss).
constexpr step_estimate estimate_step(const transformer_config& m, const training_states& t, const activation_config& a,
                                      const step_config& s, const pipeline_config& p = {}, const runtime_overheads& o = {}) {
  detail::validate_step(m, t, a, s, p, o);
  return detail::estimate_walked_step(m, t, a, s, p, o, detail::step_walk(m, t, a, s, p, o));
}

/// The activations of a job trained under recipe r: computed in its compute dtype, under torch.autocast where it runs
/// one. Every command that builds a job from a precision reads this (estimate, plan), so that they evaluate the same job.
constexpr activation_config with_recipe(activation_config a, const precision_recipe& r) {
  a.activation_dtype = r.compute;
  a.autocast = r.autocast;
  return a;
}

/// One training job, as every path describes it: the model, its states (precision, optimizer, sharding, offload,
/// adapters, dp), what a micro-batch keeps (activations: sequence, micro-batch, tp, cp, recompute), the pipeline,
/// the step's kernels and allocator, and the runtime overheads. `zeromem estimate`, its --explain, `plan` and the
/// trained roles of an RLHF job all build this struct and evaluate it with estimate_step.
struct training_job {
  transformer_config model{};
  training_states states{};
  activation_config activations{};
  pipeline_config pipeline{};
  step_config step{};
  runtime_overheads overheads{};
};

constexpr step_estimate estimate_step(const training_job& j) {
  return estimate_step(j.model, j.states, j.activations, j.step, j.pipeline, j.overheads);
}

/// A layout's degrees into every part of the job that keeps one.
constexpr training_job with_layout(training_job j, const parallel_layout& l) {
  j.states = with_layout(j.states, l);
  j.activations = with_layout(j.activations, l);
  j.pipeline = with_layout(j.pipeline, l);
  return j;
}

// ---- a job declared as a type, checked by the compiler --------------------------------------------------------
//
// A job type has static constexpr model(), states(), activations() and pipeline(), its card as gpu() (a gpu_model:
// find_gpu("h100-80gb")) or capacity() (the card's total bytes), and optionally parallel() (a parallel_layout; then
// the other parts leave their degrees at 1), step() (a step_config: optimizer kernels, loss, allocator, CUDA
// context) and overheads(). What it leaves out is what `zeromem estimate` takes when its flag is left out.
namespace detail {
// Which of its optional parts a job type has: detects<part, Job> is true where part<Job> is a valid type.
template <template <class> class Part, class Job, class = void>
struct detects : std::false_type {};
template <template <class> class Part, class Job>
struct detects<Part, Job, std::void_t<Part<Job>>> : std::true_type {};
template <class Job>
using parallel_part = decltype(Job::parallel());
template <class Job>
using step_part = decltype(Job::step());
template <class Job>
using overheads_part = decltype(Job::overheads());
template <class Job>
using gpu_part = decltype(Job::gpu());
template <class Job>
using capacity_part = decltype(Job::capacity());

template <class Job>
constexpr bytes job_capacity() {
  static_assert(detects<gpu_part, Job>::value != detects<capacity_part, Job>::value,
                "zeromem: give a job's card once: gpu() (a gpu_model from find_gpu) or capacity() (its total bytes)");
  if constexpr (detects<gpu_part, Job>::value) {
    static_assert(std::is_same_v<std::decay_t<decltype(Job::gpu())>, gpu_model>, "zeromem: a job's gpu() returns a gpu_model (find_gpu)");
    return Job::gpu().capacity;
  } else {
    return Job::capacity();
  }
}
}  // namespace detail

/// The training_job a job type describes: the same struct `zeromem estimate` builds from its flags and evaluates.
template <class Job>
constexpr training_job job_of() {
  static_assert(Job::activations().activation_dtype == Job::states().recipe.compute &&
                    Job::activations().autocast == Job::states().recipe.autocast,
                "zeromem: a job's activations() compute in its recipe's dtype; return with_recipe(a, states().recipe)");
  training_job j{};
  j.model = Job::model();
  j.states = Job::states();
  j.activations = Job::activations();
  j.pipeline = Job::pipeline();
  if constexpr (detail::detects<detail::step_part, Job>::value) {
    static_assert(std::is_same_v<std::decay_t<decltype(Job::step())>, step_config>, "zeromem: a job's step() returns a step_config");
    j.step = Job::step();
  } else {
    // The optimizer's kernels as the command line picks them without --optimizer-impl: DeepSpeed's under ZeRO,
    // PyTorch's default otherwise.
    const optimizer_kind kind = j.states.optimizer.kind;
    j.step.optimizer = j.states.zero.stage > 0 ? deepspeed_default_impl(kind) : pytorch_default_impl(kind);
  }
  if constexpr (detail::detects<detail::gpu_part, Job>::value) {  // the card's cuBLAS workspaces and multiprocessors, as --gpu sets them
    j.step.blas_workspaces = blas_workspaces_of(Job::gpu(), training_blas_handles);
    j.step.multiprocessors = Job::gpu().multiprocessors;
  }
  if constexpr (detail::detects<detail::overheads_part, Job>::value) {
    static_assert(std::is_same_v<std::decay_t<decltype(Job::overheads())>, runtime_overheads>,
                  "zeromem: a job's overheads() returns a runtime_overheads");
    j.overheads = Job::overheads();
  }
  if constexpr (detail::detects<detail::parallel_part, Job>::value) {
    static_assert(std::is_same_v<std::decay_t<decltype(Job::parallel())>, parallel_layout>,
                  "zeromem: a job's parallel() returns a parallel_layout{data_parallel{...}, tensor_parallel{...}, ...}");
    static_assert(Job::states().dp == 1 && Job::activations().tp == 1 && Job::activations().cp == 1 && Job::pipeline().pp == 1,
                  "zeromem: give the parallel degrees once: in parallel(), or in states(), activations() and pipeline(), not both");
    j = with_layout(j, Job::parallel());
  }
  return j;
}

/// The job type's step: its peak, the phase and term that set it, and what the driver reports as used.
template <class Job>
inline constexpr step_estimate job_step_v = estimate_step(job_of<Job>());

/// Whether the job type's step fits its card: its device-used bytes (the allocated peak, the CUDA context and the
/// step's modules) against gpu().capacity or capacity(), as `zeromem estimate --gpu` decides.
template <class Job>
inline constexpr step_verdict job_verdict_v = verdict_of(job_step_v<Job>, detail::job_capacity<Job>());

namespace detail {
template <class Job>
constexpr bytes job_gpu_bytes() {
  constexpr training_job j = job_of<Job>();
  return training_gpu_bytes(j.model, j.states, j.activations, j.pipeline, j.overheads);
}
}  // namespace detail
/// The sum of the job type's terms (training_gpu_bytes: model states, first-stage activations, DeepSpeed's buffers,
/// the overheads' context). Not what decides a fit: a step's peak is not the sum of its terms (job_step_v,
/// assert_fits).
template <class Job>
inline constexpr bytes job_gpu_bytes_v = detail::job_gpu_bytes<Job>();

/// Instantiating assert_fits<Job> fails to compile when the job's step does not fit its GPU (job_verdict_v).
template <class Job>
struct assert_fits {
  static_assert(job_verdict_v<Job>.fits(),
                "zeromem: the job does not fit its GPU; shard more (zero<3>), offload, recompute activations, use fused "
                "optimizer kernels or add GPUs");
  /// capacity() minus the step's device-used bytes.
  static constexpr bytes headroom = job_verdict_v<Job>.margin();
};

}  // namespace zeromem
