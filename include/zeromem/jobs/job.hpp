// Whole jobs: named memory terms per GPU and per node's host RAM, by role (actor, critic, reference, reward,
// rollout engine), runtime overheads as explicit inputs, known framework defects as named toggles, and the
// verdict against a device. Builds values and strings; does no I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "zeromem/training/activations.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/gpus.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/training/model_states.hpp"
#include "zeromem/core/parallel.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// DeepSpeed's zero_optimization.overlap_comm: on, off, or not given in the config (then DeepSpeed's default).
enum class overlap_comm_setting { deepspeed_default, on, off };

/// Runtime overheads, each an explicit input with its source; nothing hides in a factor.
struct runtime_overheads {
  /// Per process, outside PyTorch's allocator: the CUDA context, cuBLAS workspaces, NCCL buffers. Default: the
  /// "non-torch memory" vLLM measured for one worker (vLLM issue #15815, L40S: 0.30 GiB). Older CUDA without
  /// lazy module loading reports 723-800 MiB (PyTorch forum threads 73021, 81330): set it to your measurement.
  bytes cuda_context = bytes_of_checked(322'122'547);  // 0.30 GiB, rounded to the byte
  /// DeepSpeed's reduce bucket (reduce_bucket_size elements of 16-bit gradients, default 5e8) and stage 3's prefetch
  /// bucket (5e7), as deepspeed_buffers counts them (docs/references.md §2).
  std::int64_t reduce_bucket_size = 500'000'000;
  std::int64_t prefetch_bucket_size = 50'000'000;
  /// overlap_comm as the config gives it; unset, DeepSpeed turns it on for stage 3 only (overlaps_comm). It sizes
  /// ZeRO-1/2's buffers (deepspeed_buffers).
  overlap_comm_setting overlap_comm = overlap_comm_setting::deepspeed_default;
  /// ZeRO-3 stage3_max_live_parameters (default 1e9): DeepSpeed releases gathered parameters to stay below it,
  /// so 2 B x min(max_live, parameters) bounds a healthy gathered working set (docs/references.md §2).
  std::int64_t max_live_parameters = 1'000'000'000;
  /// ZeRO-3 stage3_max_reuse_distance (default 1e9): parameters used again within this many elements of the module
  /// trace are not released (zero3_retained_parameters).
  std::int64_t max_reuse_distance = 1'000'000'000;
  /// ZeRO-3 stage3_param_persistence_threshold (default 1e5; Hugging Face Trainer's "auto" 10 x hidden): tensors of at
  /// most this many elements stay gathered on every rank (zero3_retained::persistent). 0: none.
  std::int64_t param_persistence_threshold = 100'000;
  /// PyTorch's caching allocator reserves more than is allocated (fragmentation). A fraction of the allocated
  /// bytes, added as its own term by add_allocator_reserve. Default 0: measure memory_reserved / memory_allocated
  /// on your job and set it; zeromem does not guess.
  double allocator_reserve_fraction = 0.0;
  /// Anything else a framework keeps per GPU (NCCL user buffers, a dataloader's pinned batch, ...). Default 0.
  bytes framework_extra{};
};

constexpr void validate(const runtime_overheads& o) {
  if (o.cuda_context.count() < 0) detail::fail("the CUDA context bytes cannot be negative; pass your measurement, such as 650MB");
  if (o.reduce_bucket_size < 0 || o.prefetch_bucket_size < 0 || o.max_live_parameters < 0 || o.max_reuse_distance < 0)
    detail::fail("DeepSpeed bucket sizes, max_live_parameters and max_reuse_distance cannot be negative; pass DeepSpeed's element counts "
                 "(5e8, 5e7, 1e9, 1e9)");
  if (o.param_persistence_threshold < 0)
    detail::fail("stage3_param_persistence_threshold cannot be negative; pass DeepSpeed's 1e5, 0 for none, or your config's");
  if (o.framework_extra.count() < 0) detail::fail("framework extra bytes cannot be negative");
}

/// Upper bound of ZeRO-3 parameters gathered at once in a healthy run: 2 B x min(max_live_parameters, params).
constexpr bytes zero3_live_parameter_bound(const runtime_overheads& o, elements params) {
  return (elements_of(o.max_live_parameters) < params ? elements_of(o.max_live_parameters) : params) * size_of(dtype::bf16);
}

/// What DeepSpeed ZeRO-3 holds gathered where one micro-batch's forward turns into its backward, on one rank. After a
/// module has run, ZeRO-3 releases its parameters unless they are used again within stage3_max_reuse_distance
/// elements of the module trace from the next module on (deepspeed/runtime/zero/partitioned_param_coordinator.py
/// __params_to_release: each traced module adds its parameters' ds_numel until the sum reaches the distance; the trace
/// is complete, and this applies, from the second step on). The trace is the forward, then the backward in reverse, so a
/// module stays gathered from its forward to its backward where the rest of the forward and the backward up to it again
/// hold fewer elements than the distance, 2 x (the modules after it in the stage) < distance: the output layer and final
/// norm, the last layers whole, the last modules of the layer below, and everything of a small enough model.
/// Beside them, every tensor of at most stage3_param_persistence_threshold elements is never released (ds_persist:
/// parameter_offload.py mark_persistent_parameters; __params_to_release leaves them out): the norms and biases. The
/// walk counts them in its distances all the same; the moments count each once (`persistent`, `resident`).
struct zero3_retained {
  elements head;                   // of the final norm and the output layer (tied: the embedding table), what is kept
  elements output_layer;           // lm_head's weights (tied: the table), gathered again at its backward where not kept
  elements layer;                  // one decoder layer
  elements largest_module;         // a layer's largest module (weight and bias): what a released layer gathers at a time
  std::int64_t whole_layers = 0;   // the stage's last whole_layers layers stay gathered whole
  elements partial;                // of the layer below them, its last modules
  elements root;                   // the embeddings and vision tower, where the whole stage is within the distance
  elements table_in_backward;      // a tied table the backward keeps from lm_head's node to the embedding's
  elements final_norm;             // the final norm, on the last stage (a value model's too)
  elements embeddings;             // the embeddings and vision tower (without a tied output layer's table): root, where kept
  elements persistent;             // every persistent tensor of the stage, gathered from one step's end to the next's start
  /// The amounts above without their persistent tensors (largest_module: the most one module adds), and the token table's.
  struct beyond_persistent {
    elements head, output_layer, layer, largest_module, partial, root, table_in_backward, final_norm, embeddings, token_table;
  } resident;

  /// Everything kept gathered at the turnaround.
  constexpr elements turnaround() const {
    return persistent + resident.head + resident.layer * whole_layers + resident.partial + resident.root;
  }
  /// Gathered while lm_head is differentiated: the turnaround's, and lm_head's own where it was released.
  constexpr elements at_output_layer() const { return turnaround() + (head.count() == 0 ? resident.output_layer : elements{}); }
  /// Gathered while layer i (0 = the stage's first) of `layers` is differentiated: what the layers below it keep, and
  /// layer i's own (kept, or its largest module gathered for the moment), with the embeddings where they are kept.
  constexpr elements at_layer(std::int64_t i, std::int64_t layers) const {
    const std::int64_t from_top = layers - 1 - i;
    const std::int64_t whole_below = whole_layers - from_top - 1 > 0 ? whole_layers - from_top - 1 : 0;
    const beyond_persistent& r = resident;
    const elements own = from_top < whole_layers ? r.layer : from_top == whole_layers && r.partial > r.largest_module ? r.partial : r.largest_module;
    return persistent + r.layer * whole_below + (from_top < whole_layers ? r.partial : elements{}) + own + r.root + r.table_in_backward;
  }
  /// at_layer where the backward releases nothing it gathers (DeepSpeed 0.16.x with checkpointing, known_defects): the
  /// output layer and the final norm, every layer from i up, and what the forward kept below them.
  constexpr elements at_layer_unreleased(std::int64_t i, std::int64_t layers) const {
    const std::int64_t up = layers - i;
    const beyond_persistent& r = resident;
    return persistent + r.output_layer + r.final_norm + r.layer * (up > whole_layers ? up : whole_layers) +
           (up <= whole_layers ? r.partial : elements{}) + r.root;
  }
  /// Gathered at the embeddings' backward (the end of the stage's backward): what the trace kept of them (root), or
  /// the token table gathered for it; a tied table the backward kept is the same table.
  constexpr elements at_embeddings(bool tied) const {
    return persistent + resident.root + (root.count() > 0 && !tied ? elements{} : resident.token_table);
  }
};

namespace detail {
/// `order` from count_parameters_unchecked(m, &order), which walks the modules once for both (with its
/// persistence_threshold and tp set before the walk).
/// `head`: the stage holds the output layer; `last`: the final norm (a value model's last stage has it without a head).
constexpr zero3_retained zero3_retained_unchecked(const transformer_config& m, const parameter_counts& c, const layer_module_order& order,
                                                  std::int64_t layers, std::int64_t tp, bool head, bool last, std::int64_t max_reuse_distance) {
  using detail::checked_product, detail::checked_sum;
  const int n = order.n;
  // each module is partitioned over tp as a whole
  const auto size = [&](int j) { return ceil_div(order.kinds[static_cast<std::size_t>(j)].elements, tp); };
  const auto persistent_of = [&](int j) { return order.kinds[static_cast<std::size_t>(j)].persistent; };
  const std::int64_t largest = ceil_div(order.largest, tp);
  const std::int64_t layer = detail::ceil_div(c.layer.count(), tp);
  const std::int64_t table = m.tied_embeddings && head ? checked_product(m.vocab, m.token_width()) : 0;  // lm_head's weight
  const std::int64_t output_layer = head ? detail::ceil_div(checked_sum(c.lm_head.count(), table), tp) : 0;
  const std::int64_t final_norm = head || last ? detail::ceil_div(c.final_norm.count(), tp) : 0;
  const std::int64_t head_elements = output_layer + final_norm;
  const std::int64_t d = max_reuse_distance;
  // The persistent tensors: a layer's, the token table's (one tensor), and those of the groups outside the layers.
  const std::int64_t thr = order.persistence_threshold;
  const std::int64_t layer_persistent = order.layer_persistent;
  const std::int64_t token_table = ceil_div(checked_product(m.vocab, m.token_width()), tp);
  const std::int64_t table_persistent = token_table <= thr ? token_table : 0;
  const auto outside = [&](module_group g) { return order.outside[static_cast<unsigned>(g)]; };
  const std::int64_t output_persistent = head ? checked_sum(outside(module_group::lm_head), table > 0 ? table_persistent : 0) : 0;
  const std::int64_t final_norm_persistent = head || last ? outside(module_group::final_norm) : 0;
  const std::int64_t embeddings_persistent = checked_sum(outside(module_group::embedding) - (table > 0 ? table_persistent : 0),
                                                         outside(module_group::position_embedding), outside(module_group::vision));
  zero3_retained r{};
  // lm_head's backward follows its forward at once (nothing traversed: kept for any d > 0); the final norm's follows
  // lm_head's forward and backward.
  r.output_layer = elements_of(output_layer);
  const bool head_kept = d > 0, final_norm_kept = checked_product(2, output_layer) < d;
  r.head = elements_of((head_kept ? output_layer : 0) + (final_norm_kept ? final_norm : 0));
  r.layer = elements_of(layer);
  r.largest_module = elements_of(largest);
  // Layer k from the top stays whole when 2 (its modules after its first + k layers + the head) < d: k < q / (2 layer).
  const std::int64_t first = order.kinds[0].count > 0 ? size(0) : size(1);
  const std::int64_t q = d - checked_product(2, checked_sum(layer - first, head_elements));
  // (a division only past one layer: each costs more than the rest of a small model's arithmetic)
  const std::int64_t k = q <= 0                        ? 0
                         : layer == 0                  ? layers
                         : q <= checked_product(2, layer) ? std::min<std::int64_t>(layers, 1)
                                                       : std::min(layers, (q - 1) / checked_product(2, layer) + 1);
  r.whole_layers = k;
  // The partial layer: its modules from the last, each kept while 2 (the modules after it) < d - 2 (k layers + head).
  const std::int64_t budget = k < layers ? d - checked_product(2, checked_sum(checked_product(k, layer), head_elements)) : 0;
  std::int64_t after = 0, kept = 0, kept_persistent = 0;
  for (int j = n - 1; j >= 0 && budget > 2 * after; --j) {
    const std::int64_t e = size(j), count = order.kinds[static_cast<std::size_t>(j)].count;
    if (e == 0 || count == 0) continue;
    // copies t = 0 .. count - 1 from the end, each with after + t x e behind it (sums within one layer's elements);
    // the loop's condition keeps the last copy of each kind
    const std::int64_t fit = count == 1 ? 1 : (budget - 2 * after - 1) / (2 * e) + 1;
    const std::int64_t copies = fit < count ? fit : count;
    kept += copies * e;
    kept_persistent += copies * persistent_of(j);
    if (copies < count) break;
    after += count * e;
  }
  r.partial = elements_of(kept);
  const std::int64_t stage = checked_sum(checked_product(layers, layer), head_elements);
  // The embeddings (and a vision tower) run first: kept only where the whole stage after them is within the distance.
  r.final_norm = elements_of(final_norm);
  r.embeddings = elements_of(detail::ceil_div((c.embedding + c.position_embedding + c.vision).count() - table, tp));
  const bool root_kept = k == layers && checked_product(2, stage) < d;
  if (root_kept) r.root = r.embeddings;
  // A tied table: lm_head's node in backward is followed by the final norm's and the layers' before the embedding's.
  if (table > 0 && head && checked_sum(checked_product(layers, layer), detail::ceil_div(c.final_norm.count(), tp)) < d)
    r.table_in_backward = elements_of(detail::ceil_div(table, tp));
  // What each amount gathers beyond the persistent tensors, which every moment holds once.
  r.persistent = elements_of(checked_sum(checked_product(layers, layer_persistent), output_persistent, final_norm_persistent, embeddings_persistent));
  zero3_retained::beyond_persistent& x = r.resident;
  // (at least 0: split over tp ranks, a module's tensors round up one by one and the module as a whole)
  const auto beyond = [](std::int64_t all, std::int64_t persistent) { return elements_of(max_of(all - persistent, std::int64_t{0})); };
  x.output_layer = beyond(output_layer, output_persistent);
  x.final_norm = beyond(final_norm, final_norm_persistent);
  x.head = (head_kept ? x.output_layer : elements{}) + (final_norm_kept ? x.final_norm : elements{});
  x.layer = beyond(layer, layer_persistent);
  x.largest_module = elements_of(max_of(order.largest_resident, std::int64_t{0}));
  x.partial = beyond(kept, kept_persistent);
  x.embeddings = beyond(r.embeddings.count(), embeddings_persistent);
  x.root = root_kept ? x.embeddings : elements{};
  x.table_in_backward = r.table_in_backward.count() > 0 ? beyond(r.table_in_backward.count(), table_persistent) : elements{};
  x.token_table = beyond(token_table, table_persistent);
  return r;
}

/// The counts and, for a DeepSpeed ZeRO-3 step, what its trace keeps gathered: one walk over the modules for both.
struct counts_and_retained {
  parameter_counts counts;
  zero3_retained kept;
};
constexpr counts_and_retained count_with_zero3_retained(const transformer_config& m, std::int64_t layers, std::int64_t tp, bool head,
                                                        bool last, std::int64_t max_reuse_distance, std::int64_t param_persistence_threshold) {
  layer_module_order order{};
  order.persistence_threshold = param_persistence_threshold;
  order.tp = tp;
  const parameter_counts c = count_parameters_unchecked(m, &order);
  return {c, zero3_retained_unchecked(m, c, order, layers, tp, head, last, max_reuse_distance)};
}
}  // namespace detail

/// zero3_retained of a pipeline stage of `layers` decoder layers (with the output layer where `head`), parameters split
/// over tp ranks, tensors of at most `param_persistence_threshold` elements persistent (DeepSpeed's default 1e5; 0:
/// none). Layer norms are placed first in a layer and a router after its experts; either moves the boundary in the
/// partial layer by at most its own elements.
constexpr zero3_retained zero3_retained_parameters(const transformer_config& m, std::int64_t layers, std::int64_t tp, bool head,
                                                   std::int64_t max_reuse_distance, std::int64_t param_persistence_threshold = 100'000) {
  validate(m);
  detail::require_positive(tp, "the tensor-parallel degree");
  if (layers < 1 || layers > m.layers) detail::fail_value("the stage's layers must be 1 .. the model's layers", layers, "pass the layers of one stage");
  if (max_reuse_distance < 0) detail::fail_value("stage3_max_reuse_distance cannot be negative", max_reuse_distance, "pass DeepSpeed's 1e9 or your config's");
  if (param_persistence_threshold < 0)
    detail::fail_value("stage3_param_persistence_threshold cannot be negative", param_persistence_threshold, "pass DeepSpeed's 1e5, 0 for none, or your config's");
  return detail::count_with_zero3_retained(m, layers, tp, head, head, max_reuse_distance, param_persistence_threshold).kept;
}

/// Whether DeepSpeed overlaps the gradients' reduction with backward at this stage: the setting, or unset, stage 3
/// only (deepspeed/runtime/zero/config.py DeepSpeedZeroConfig.overlap_comm_valid: overlap_comm = stage == weights).
constexpr bool overlaps_comm(const runtime_overheads& o, int stage) {
  return o.overlap_comm == overlap_comm_setting::deepspeed_default ? stage == 3 : o.overlap_comm == overlap_comm_setting::on;
}

/// ZeRO-3's flattened copy of the reduce bucket (runtime/comm/coalesced_collectives.py reduce_scatter_coalesced: torch.cat
/// of the bucket's padded partitions), alive while a bucket is reduced in backward, freed once its partitions are
/// copied out; 0 at other stages. deepspeed_buffers counts it.
constexpr bytes deepspeed_reduce_scatter_copy(int stage, const runtime_overheads& o) {
  return stage == 3 ? elements_of(o.reduce_bucket_size) * size_of(dtype::bf16) : bytes{};
}

/// DeepSpeed ZeRO-1/2/3 communication buffers on one GPU (16-bit elements).
/// ZeRO-1/2: the reduce bucket, two with overlap_comm (deepspeed/runtime/zero/stage_1_and_2.py backward: ipg_buffer's
/// buf_1 "to avoid data access conflict"). ZeRO-3: one bucket (stage3.py _setup_for_real_optimizer) and, while it is
/// reduced, its flattened copy (runtime/comm/coalesced_collectives.py reduce_scatter_coalesced: torch.cat of the padded
/// partitions; only a lone gradient divisible by the ranks is reduced in place), whatever overlap_comm says; and the
/// prefetch bucket.
constexpr bytes deepspeed_buffers(int stage, const runtime_overheads& o) {
  if (stage < 0 || stage > 3) detail::fail_value("ZeRO stage must be 0, 1, 2 or 3", stage, "use stage 3 for full sharding");
  validate(o);
  if (stage == 0) return bytes{};
  const bytes bucket = elements_of(o.reduce_bucket_size) * size_of(dtype::bf16);
  if (stage == 3) return bucket + deepspeed_reduce_scatter_copy(stage, o) + elements_of(o.prefetch_bucket_size) * size_of(dtype::bf16);
  return overlaps_comm(o, stage) ? bucket + bucket : bucket;
}

/// Per-GPU bytes of a training job: model states of the most loaded rank (its parameters split by tensor and
/// pipeline parallelism), first-stage activations, DeepSpeed buffers and the CUDA context. constexpr, so a job
/// can be checked by the compiler.
constexpr bytes training_gpu_bytes(const transformer_config& m, training_states t, const activation_config& a,
                                   const pipeline_config& p = {}, const runtime_overheads& o = {}) {
  validate(a, m);  // validates the model too
  validate(p, m);
  const parameter_counts counts = detail::count_parameters_unchecked(m);
  place_on_rank(t, m, counts, a.tp, p.pp);
  if (t.largest_layer.count() == 0 && needs_largest_layer(t.zero)) t.largest_layer = largest_share(counts.largest_layer, a.tp);
  validate(t);
  return detail::estimate_model_states_unchecked(t, -1).gpu() + detail::first_stage_activations_unchecked(m, a, p, t.adapt).total +
         deepspeed_buffers(t.zero.stage, o) + o.cuda_context;
}

/// A layout's degrees where the job's parts keep them: dp in the states, tp and cp in the activations, pp in the
/// pipeline.
constexpr training_states with_layout(training_states t, const parallel_layout& l) {
  t.dp = l.dp().value();
  return t;
}
constexpr activation_config with_layout(activation_config a, const parallel_layout& l) {
  a.tp = l.tp().value();
  a.cp = l.cp().value();
  return a;
}
constexpr pipeline_config with_layout(pipeline_config p, const parallel_layout& l) {
  p.pp = l.pp().value();
  return p;
}

/// Known framework defects, each with its version range and source.
struct known_defects {
  /// DeepSpeed 0.16.0-0.16.x with gradient checkpointing under ZeRO-3: remaining gradients are miscounted, so
  /// gathered parameters are not released during backward and the whole 16-bit model ends up on every GPU
  /// (DeepSpeed issue #7116, introduced by PR #6726; 0.15.0 is not affected).
  bool deepspeed_016_zero3_checkpointing_leak = false;
};

/// One named term: bytes on one GPU and bytes in one node's host RAM.
struct memory_term {
  std::string role;
  std::string term;
  bytes gpu{};
  bytes host{};
  std::string note;
};

/// A job's memory on its most loaded GPU and in one node's host RAM, term by term.
struct job_breakdown {
  std::vector<memory_term> terms;
  bytes gpu_capacity{};
  bytes host_capacity{};
  double host_threshold = 0.95;   // Ray's memory_usage_threshold (docs/references.md §5)
  bytes unexplained_host{};       // a reported figure minus what is modelled, shown, never folded into a term

  void add(std::string role, std::string term, bytes gpu, bytes host = bytes{}, std::string note = {}) {
    if (gpu.count() < 0 || host.count() < 0)
      detail::fail("the memory term " + detail::quoted(role + " " + term) + " cannot be negative; pass the bytes it holds");
    terms.push_back({std::move(role), std::move(term), gpu, host, std::move(note)});
  }
  bytes gpu_total() const {
    bytes s{};
    for (const memory_term& t : terms) s += t.gpu;
    return s;
  }
  bytes host_total() const {
    bytes s{};
    for (const memory_term& t : terms) s += t.host;
    return s + unexplained_host;
  }
  bytes gpu_headroom() const { return gpu_capacity - gpu_total(); }
  bool gpu_fits() const { return gpu_total() <= gpu_capacity; }
  bytes host_limit() const {
    if (!(host_threshold > 0.0 && host_threshold <= 1.0))
      detail::fail_value("the host memory threshold must be in (0, 1]", host_threshold,
                         "pass Ray's memory_usage_threshold, such as 0.95");
    // Ray's MemoryMonitor::GetMemoryThreshold (src/ray/common/memory_monitor.cc): (int64_t)(total * usage_threshold)
    // with usage_threshold a float RAY_CONFIG, so the product is taken in float; min_memory_free_bytes is off (-1).
    const float limit = static_cast<float>(host_capacity.count()) * static_cast<float>(host_threshold);
    return limit >= 0x1p63f ? host_capacity : bytes_of(static_cast<std::int64_t>(limit));
  }
  bool host_fits() const { return host_capacity.count() == 0 || host_total() <= host_limit(); }
  bool fits() const { return gpu_fits() && host_fits(); }
};

/// A trained role (actor, critic): model states of its most loaded rank; host terms scaled to a node.
inline void add_model_states(job_breakdown& job, const std::string& role, const training_states& t) {
  const model_state_estimate e = estimate_model_states(t);
  e.per_rank.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0 || p.host.count() != 0) job.add(role, term, p.gpu, p.host * e.ranks_per_node);
  });
}

/// A frozen role (reference, reward): 16-bit weights only, sharded over `shard` ranks (1: whole on each GPU),
/// on the GPU or offloaded to host RAM.
inline void add_frozen_weights(job_breakdown& job, const std::string& role, elements params, std::int64_t shard,
                               std::int64_t ranks_per_node, bool offloaded, dtype weights = dtype::bf16) {
  detail::require_positive(shard, "the shard count of a frozen model");
  const bytes per_rank = largest_share(params * size_of(weights), shard);
  if (offloaded)
    job.add(role, "weights (offloaded)", bytes{}, per_rank * ranks_per_node);
  else
    job.add(role, "weights", per_rank);
}

/// Adds the allocator reserve (a fraction of everything allocated on the GPU so far) and framework extras as
/// their own terms, so neither hides in another number.
inline void add_allocator_reserve(job_breakdown& job, const runtime_overheads& o) {
  if (!(o.allocator_reserve_fraction >= 0.0 && o.allocator_reserve_fraction < 1.0))
    detail::fail_value("the allocator reserve fraction must be in [0, 1)", o.allocator_reserve_fraction,
                       "pass memory_reserved / memory_allocated - 1 measured on your job");
  if (o.framework_extra.count() < 0) detail::fail("framework extra bytes cannot be negative");
  const bytes allocated = job.gpu_total();
  job.add("all", "allocator reserve (" + std::to_string(o.allocator_reserve_fraction) + " of allocated)",
          bytes_of_checked(static_cast<std::int64_t>(static_cast<long double>(allocated.count()) * o.allocator_reserve_fraction)));
  if (o.framework_extra.count() != 0) job.add("all", "framework extras", o.framework_extra);
}

inline void add_activations(job_breakdown& job, const std::string& role, const transformer_config& m,
                            const activation_config& c, const pipeline_config& p = {}) {
  const stage_activations a = first_stage_activations(m, c, p);
  job.add(role, "activations (" + std::to_string(a.layers_on_stage) + " layers, " + std::string(name(c.recomputation)) +
                    " recompute)", a.total - a.logits);
  if (a.logits.count() != 0) job.add(role, "fp32 logits", a.logits);
}

}  // namespace zeromem
