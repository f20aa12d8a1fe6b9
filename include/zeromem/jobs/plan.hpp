// Planning: sweep ZeRO stage x offload x dp/tp/pp x micro-batch x recompute for a training job, keep the
// configurations that fit, rank them by a stated objective; and explain an estimate: which terms dominate and
// the smallest single change that makes an out-of-memory configuration fit. Builds values; does no I/O.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "zeromem/training/activations.hpp"
#include "zeromem/core/gpus.hpp"
#include "zeromem/jobs/job.hpp"
#include "zeromem/jobs/step.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/training/model_states.hpp"

namespace zeromem {

struct plan_request {
  transformer_config model{};
  bytes gpu_capacity{};
  std::int64_t gpus_per_node = 8;
  std::int64_t nodes = 1;
  bytes host_memory{};             // per node; 0 = not checked
  /// NVMe per node for ZeRO-Infinity's offload; 0 = no NVMe, and the optimizer or parameters are not offloaded to it.
  bytes nvme_capacity{};
  std::int64_t seq_len = 0;
  /// Sequences per step; 0 = any (no divisibility constraint). With a global batch, each configuration's
  /// gradient accumulation steps are global_batch / (dp x micro-batch); without one, 1 step is assumed, which
  /// leaves out the host accumulation buffer of ZeRO-1/2 CPU offload.
  std::int64_t global_batch = 0;
  precision_recipe recipe = recipe_of(precision::mixed_bf16);
  optimizer_spec optimizer{};
  runtime_overheads overheads{};
  step_config step{};              // loss, optimizer implementation, allocator and CUDA context of every configuration
  implementation impl = activation_config{}.impl;        // the library's defaults: transformers' kernels,
  attention_kind attention = activation_config{}.attention;  // SDPA/flash attention
  std::size_t max_results = 10;
  /// A configuration fits only with at least max(min_headroom, min_headroom_fraction x capacity) left. The 5%
  /// default is the step model's stated accuracy (stated_accuracy), so the top pick still fits when the estimate
  /// errs by that much.
  bytes min_headroom{};
  double min_headroom_fraction = stated_accuracy;
  std::int64_t max_micro_batch = 16;
  /// Also try LoRA adapters on a frozen base, and (tp = pp = 1, parameters on the GPU) QLoRA's NF4 base, with
  /// these adapters; ranked after full training (plan_objective).
  bool allow_lora = false;
  lora_config lora{16, bit(lora_module::all_linear), 0.0, dtype::fp32};
};

/// What a configuration trains: every parameter, LoRA adapters on a frozen base, or adapters on an NF4 base.
enum class plan_training { full, lora, qlora };
constexpr std::string_view name(plan_training t) { return t == plan_training::full ? "full" : t == plan_training::lora ? "lora" : "qlora"; }

/// One configuration, evaluated.
struct plan_config {
  int stage = 0;
  offload_device optimizer_offload = offload_device::none;
  offload_device params_offload = offload_device::none;
  std::int64_t dp = 1, tp = 1, pp = 1;
  std::int64_t micro_batch = 1;
  recompute recomputation = recompute::none;
  plan_training training = plan_training::full;
  std::int64_t accumulation_steps = 1;  // micro-batches per optimizer step: the global batch / (dp x micro-batch)
  bytes gpu{};                // per GPU: model states + activations + buffers + context
  bytes headroom{};
  bytes offloaded_per_node{}; // host RAM the offload takes on one node
  bytes nvme_per_node{};      // NVMe the offload takes on one node (ZeRO-Infinity)
};

struct plan_result {
  std::vector<plan_config> configs;  // fitting, best first
  std::int64_t evaluated = 0;
  std::int64_t fitting = 0;
  std::string objective;
  std::vector<std::string> left_out;  // what the request asked for that is not evaluated, and why
};

inline constexpr const char* plan_objective =
    "full training before LoRA before QLoRA (with --allow-lora), then nothing on NVMe before ZeRO-Infinity's NVMe offload (with --nvme-capacity), "
    "then the fewest offloaded bytes (host RAM, then NVMe), then the least recomputation, then the fewest pipeline and tensor-parallel ranks, "
    "then the largest micro-batch, then the most headroom";

namespace detail {
inline int recompute_rank(recompute r) { return r == recompute::none ? 0 : r == recompute::selective ? 1 : 2; }
inline bool better(const plan_config& a, const plan_config& b) {
  if (a.training != b.training) return a.training < b.training;
  // NVMe after host RAM, the slower tier below it (ZeRO-Infinity, arXiv 2104.07857, adds NVMe for room beyond CPU memory).
  if ((a.nvme_per_node.count() == 0) != (b.nvme_per_node.count() == 0)) return a.nvme_per_node.count() == 0;
  if (a.offloaded_per_node != b.offloaded_per_node) return a.offloaded_per_node < b.offloaded_per_node;
  if (a.nvme_per_node != b.nvme_per_node) return a.nvme_per_node < b.nvme_per_node;
  if (a.recomputation != b.recomputation) return recompute_rank(a.recomputation) < recompute_rank(b.recomputation);
  if (a.pp != b.pp) return a.pp < b.pp;
  if (a.tp != b.tp) return a.tp < b.tp;
  if (a.micro_batch != b.micro_batch) return a.micro_batch > b.micro_batch;
  return a.headroom > b.headroom;
}
}  // namespace detail

/// The training job a configuration of `r` stands for: what `plan` evaluates, and what `zeromem estimate` with the
/// configuration's flags evaluates too (tested).
inline training_job plan_job(const plan_request& r, const plan_config& c) {
  detail::require_positive(c.dp, "the data-parallel degree");
  detail::require_positive(c.micro_batch, "the micro-batch size");
  training_job j{};
  j.model = r.model;
  training_states& t = j.states;
  t.recipe = r.recipe;
  t.optimizer = r.optimizer;
  t.zero.stage = c.stage;
  t.zero.optimizer.device = c.optimizer_offload;
  t.zero.params.device = c.params_offload;
  t.gpus_per_node = r.gpus_per_node;
  if (c.training != plan_training::full) {
    t.adapt.lora = r.lora;
    if (c.training == plan_training::qlora) t.adapt.quantize = quantization::nf4;
  }
  if (t.optimizer.kind == optimizer_kind::adafactor && t.optimizer.adafactor_factored.count() == 0) {
    const parameter_counts counts = count_parameters(r.model);
    t.optimizer.adafactor_factored = adafactor_factored_on_rank(r.model, counts, states_on_rank(r.model, counts, t, c.tp, c.pp).params);
  }
  if (r.global_batch > 0) {
    if (!detail::divides(c.dp, r.global_batch) || !detail::divides(c.micro_batch, r.global_batch / c.dp))
      detail::fail_value("dp x micro-batch must divide the global batch", r.global_batch,
                         "pick a global batch that is a multiple of dp x micro-batch");
    t.gradient_accumulation_steps = r.global_batch / c.dp / c.micro_batch;
  }
  activation_config& a = j.activations;
  a = with_recipe(a, r.recipe);
  a.seq_len = r.seq_len;
  a.micro_batch = c.micro_batch;
  a.sequence_parallel = c.tp > 1;
  a.recomputation = c.recomputation;
  a.attention = r.attention;
  a.impl = r.impl;
  j.step = r.step;
  j.overheads = r.overheads;
  return with_layout(j, parallel_layout{data_parallel{c.dp}, tensor_parallel{c.tp}, pipeline_parallel{c.pp}});
}

namespace detail {
/// What a sweep of one request walks over the model's modules once rather than at each configuration: the step's walk
/// (step_walk) without DeepSpeed ZeRO-3's trace, whose counts an offloading configuration's host placement reads too,
/// and the walk with it, made at the first ZeRO-3 configuration of a tp and pp (it reads nothing else that a sweep varies).
struct plan_walks {
  counts_and_retained plain;
  counts_and_retained zero3;
  bool zero3_walked = false;  // cleared when tp or pp changes
};

// evaluate, with the request's walks kept by a caller that evaluates many configurations, or (null) walked here.
inline plan_config evaluate_walked(const plan_request& r, plan_config c, plan_walks* walks) {
  training_job j = plan_job(r, c);
  c.accumulation_steps = j.states.gradient_accumulation_steps;
  // The step's peak (forward, backward or optimizer step) as the device sees it: reserved + the CUDA context and modules.
  if (walks == nullptr) {
    c.gpu = estimate_step(j).device_used();
  } else {
    validate_step(j.model, j.states, j.activations, j.step, j.pipeline, j.overheads);
    const bool zero3 = walks_zero3_trace(j.states, j.step);
    if (zero3 && !walks->zero3_walked) {
      walks->zero3 = step_walk(j.model, j.states, j.activations, j.step, j.pipeline, j.overheads);
      walks->zero3_walked = true;
    }
    const counts_and_retained& walked = zero3 ? walks->zero3 : walks->plain;
    c.gpu = estimate_walked_step(j.model, j.states, j.activations, j.step, j.pipeline, j.overheads, walked).device_used();
  }
  c.headroom = r.gpu_capacity - c.gpu;
  // Host RAM holds model states only when something is offloaded (or paged); otherwise it is 0 B.
  training_states& t = j.states;
  if (t.zero.optimizer.device != offload_device::none || t.zero.params.device != offload_device::none || t.adapt.paged_optimizer) {
    const parameter_counts counts = walks != nullptr ? walks->plain.counts : count_parameters(r.model);
    place_on_rank(t, r.model, counts, c.tp, c.pp);
    t.model_parallel = detail::checked_mul(c.tp, c.pp);
    if (needs_largest_layer(t.zero)) t.largest_layer = largest_share(counts.largest_layer, c.tp);
    const model_state_estimate states = estimate_model_states(t);
    c.offloaded_per_node = states.host_per_node();
    c.nvme_per_node = states.nvme_per_node();
  }
  return c;
}
}  // namespace detail

/// Evaluates one configuration of a plan request: its step's peak on the device, its headroom, and what it offloads.
inline plan_config evaluate(const plan_request& r, plan_config c) { return detail::evaluate_walked(r, c, nullptr); }

/// Whether what a configuration offloads fits one node's host RAM and NVMe (either unchecked where the request leaves it 0).
inline bool offload_fits(const plan_request& r, const plan_config& c) {
  return (r.host_memory.count() == 0 || c.offloaded_per_node <= r.host_memory) &&
         (c.nvme_per_node.count() == 0 || c.nvme_per_node <= r.nvme_capacity);
}

/// What a configuration of `r` must leave free per GPU: max(min_headroom, min_headroom_fraction x capacity).
inline bytes required_headroom_of(const plan_request& r) {
  if (r.min_headroom.count() < 0) detail::fail("the minimum headroom cannot be negative");
  if (!(r.min_headroom_fraction >= 0.0 && r.min_headroom_fraction < 1.0))
    detail::fail_value("the minimum headroom fraction must be in [0, 1)", r.min_headroom_fraction,
                       "pass a fraction of the capacity such as 0.05");
  const double share = std::ceil(r.min_headroom_fraction * static_cast<double>(r.gpu_capacity.count()));
  return std::max(r.min_headroom, bytes_of(static_cast<std::int64_t>(share)));
}

/// Sweeps the configurations of `r` and returns those that fit, ranked by plan_objective.
inline plan_result plan(const plan_request& r) {
  validate(r.model);
  detail::require_positive(r.gpus_per_node, "GPUs per node");
  detail::require_positive(r.nodes, "the node count");
  detail::require_positive(r.seq_len, "the sequence length");
  if (r.gpu_capacity.count() <= 0) detail::fail("the GPU capacity must be positive; pass --gpu");
  if (r.global_batch < 0) detail::fail("the global batch cannot be negative; pass 0 for any");
  if (r.host_memory.count() < 0) detail::fail("the host memory cannot be negative; pass 0 to not check it");
  if (r.nvme_capacity.count() < 0) detail::fail("the NVMe capacity cannot be negative; pass 0 for no NVMe offload");
  detail::require_positive(r.max_micro_batch, "the largest micro-batch");
  const bytes required_headroom = required_headroom_of(r);
  if (r.allow_lora) validate(r.lora, r.model);
  if (r.allow_lora && r.optimizer.kind == optimizer_kind::adafactor)
    detail::fail("Adafactor's factored state over LoRA adapters is not modelled; drop --allow-lora or use --optimizer adamw");
  plan_result out{};
  out.objective = plan_objective;
  std::vector<plan_training> trainings{plan_training::full};
  if (r.allow_lora) {
    trainings.push_back(plan_training::lora);
    if (quantized_base_modelled(r.model)) trainings.push_back(plan_training::qlora);
    else
      out.left_out.push_back("QLoRA: a quantized base with transformers 5's 3D expert parameters is not modelled (bitsandbytes "
                             "replaces nn.Linear modules); --expert-linears plans transformers 4's per-expert nn.Linear modules");
  }
  const std::int64_t gpus = detail::checked_mul(r.gpus_per_node, r.nodes);
  detail::plan_walks walks{{count_parameters(r.model), {}}, {}};
  struct zero_option {
    int stage;
    offload_device optimizer, params;
  };
  // ZeRO-Infinity (arXiv 2104.07857) only with NVMe given: the optimizer on it (stage 3 only, DeepSpeed
  // zero/offload_config.py), the parameters on the GPU, the CPU or the NVMe too.
  const zero_option zero_options[] = {{0, offload_device::none, offload_device::none},
                                      {1, offload_device::none, offload_device::none},
                                      {2, offload_device::none, offload_device::none},
                                      {3, offload_device::none, offload_device::none},
                                      {1, offload_device::cpu, offload_device::none},
                                      {2, offload_device::cpu, offload_device::none},
                                      {3, offload_device::cpu, offload_device::none},
                                      {3, offload_device::cpu, offload_device::cpu},
                                      {3, offload_device::nvme, offload_device::none},
                                      {3, offload_device::nvme, offload_device::cpu},
                                      {3, offload_device::nvme, offload_device::nvme}};
  // Powers of two up to max_micro_batch, doubled only while that cannot pass it (nor 2^63).
  std::vector<std::int64_t> micro_batches;
  for (std::int64_t micro = 1;; micro *= 2) {
    micro_batches.push_back(micro);
    if (micro > r.max_micro_batch / 2) break;
  }
  std::vector<plan_config> fitting;
  // OLMo-2's whole-projection q_norm / k_norm under tensor parallelism is not modelled (activations.hpp): tp 1 only.
  const std::int64_t largest_tp = r.model.qk_norm_whole ? 1 : r.gpus_per_node;
  for (std::int64_t tp = 1; tp <= largest_tp && tp <= r.model.heads; tp *= 2) {
    if (r.model.heads % tp != 0 || r.model.ffn % tp != 0 || (r.model.kv_heads % tp != 0 && tp % r.model.kv_heads != 0)) continue;
    for (std::int64_t pp = 1; pp <= r.model.layers && tp * pp <= gpus; pp *= 2) {
      if (gpus % (tp * pp) != 0) continue;
      const std::int64_t dp = gpus / (tp * pp);
      walks.zero3_walked = false;  // tp and pp changed
      for (const zero_option& z : zero_options) {
        if (z.optimizer == offload_device::nvme && r.nvme_capacity.count() == 0) continue;
        if (z.stage > 0 && dp == 1 && z.optimizer == offload_device::none) continue;  // stages 1-3 shard nothing at dp 1
        // At dp 1 ZeRO-1 and ZeRO-2 run one engine (DeepSpeed stage_1_and_2.py) with no collectives; stage 2 frees
        // each gradient once it is reduced (offloaded), so stage 1 never holds less and is not a choice of its own.
        if (z.stage == 1 && dp == 1) continue;
        for (const plan_training training : trainings)
        for (const std::int64_t micro : micro_batches) {
          // bitsandbytes' 4-bit weights are neither split by Megatron-style tensor/pipeline ranks nor offloaded.
          if (training == plan_training::qlora && (tp > 1 || pp > 1 || z.params != offload_device::none)) continue;
          // global_batch % (dp x micro) == 0 without forming dp x micro, which can pass 2^63.
          if (r.global_batch > 0 && (!detail::divides(dp, r.global_batch) || !detail::divides(micro, r.global_batch / dp))) continue;
          bytes cheaper = bytes_of(-1);  // per GPU at the previous (cheaper) recompute level
          for (recompute rc : {recompute::none, recompute::selective, recompute::full}) {
            if (rc == recompute::selective && !offers_selective_recompute(r.impl)) continue;  // transformers: none or full
            plan_config c{};
            c.stage = z.stage;
            c.optimizer_offload = z.optimizer;
            c.params_offload = z.params;
            c.dp = dp;
            c.tp = tp;
            c.pp = pp;
            c.micro_batch = micro;
            c.recomputation = rc;
            c.training = training;
            c = detail::evaluate_walked(r, c, &walks);
            ++out.evaluated;
            // More recomputation that saves nothing (selective under flash attention: no s^2 terms to drop) is
            // the same memory for more compute, not a choice of its own.
            const bool saves = c.gpu != cheaper;
            cheaper = c.gpu;
            if (!saves) continue;
            if (c.headroom >= required_headroom && offload_fits(r, c)) fitting.push_back(c);
          }
        }
      }
    }
  }
  out.fitting = static_cast<std::int64_t>(fitting.size());
  std::sort(fitting.begin(), fitting.end(), detail::better);
  if (fitting.size() > r.max_results) fitting.resize(r.max_results);
  out.configs = std::move(fitting);
  return out;
}

// ---- explain ------------------------------------------------------------------------------------

struct named_bytes {
  std::string name;
  bytes value;
};

/// The largest terms of a breakdown, largest first, with their share of the total.
inline std::vector<named_bytes> dominant_terms(const job_breakdown& job, std::size_t count = 3) {
  std::vector<named_bytes> terms;
  for (const memory_term& t : job.terms)
    if (t.gpu.count() > 0) terms.push_back({t.role + " " + t.term, t.gpu});
  std::sort(terms.begin(), terms.end(), [](const named_bytes& a, const named_bytes& b) { return a.value > b.value; });
  if (terms.size() > count) terms.resize(count);
  return terms;
}

/// Single changes to a configuration, cheapest first (in throughput and complexity); the first that fits is
/// the suggestion. Each returns the per-GPU bytes after the change.
struct suggestion {
  std::string change;
  bytes gpu{};
  bool fits = false;
};

inline std::vector<suggestion> single_changes(const plan_request& r, const plan_config& c) {
  std::vector<suggestion> out;
  const auto try_change = [&](const std::string& what, plan_config changed) {
    changed = evaluate(r, changed);
    out.push_back({what, changed.gpu, changed.headroom >= r.min_headroom && offload_fits(r, changed)});
  };
  if (c.recomputation == recompute::none && offers_selective_recompute(r.impl)) {
    plan_config s = c;
    s.recomputation = recompute::selective;
    try_change("selective recompute", s);
  }
  if (c.recomputation != recompute::full) {
    plan_config s = c;
    s.recomputation = recompute::full;
    try_change("full recompute (gradient checkpointing)", s);
  }
  if (c.micro_batch > 1) {
    plan_config s = c;
    s.micro_batch = c.micro_batch / 2;
    try_change("micro-batch " + std::to_string(s.micro_batch), s);
  }
  for (int stage = c.stage + 1; stage <= 3 && c.dp > 1; ++stage) {
    plan_config s = c;
    s.stage = stage;
    try_change("ZeRO stage " + std::to_string(stage), s);
  }
  if (c.optimizer_offload == offload_device::none && (c.stage >= 1 || c.dp == 1)) {
    plan_config s = c;
    s.stage = c.stage == 0 ? 1 : c.stage;
    s.optimizer_offload = offload_device::cpu;
    try_change("offload the optimizer to CPU", s);
  }
  if (c.params_offload == offload_device::none) {
    plan_config s = c;
    s.stage = 3;
    s.optimizer_offload = offload_device::cpu;
    s.params_offload = offload_device::cpu;
    try_change("ZeRO-3 with parameters and optimizer on CPU", s);
  }
  // ZeRO-Infinity, where the request gives NVMe: the optimizer on it (the parameters where they were), then both.
  if (r.nvme_capacity.count() > 0 && c.optimizer_offload != offload_device::nvme) {
    plan_config s = c;
    s.stage = 3;
    s.optimizer_offload = offload_device::nvme;
    try_change("ZeRO-3 with the optimizer on NVMe (ZeRO-Infinity)", s);
  }
  if (r.nvme_capacity.count() > 0 && c.params_offload != offload_device::nvme) {
    plan_config s = c;
    s.stage = 3;
    s.optimizer_offload = offload_device::nvme;
    s.params_offload = offload_device::nvme;
    try_change("ZeRO-3 with parameters and optimizer on NVMe (ZeRO-Infinity)", s);
  }
  return out;
}

}  // namespace zeromem
