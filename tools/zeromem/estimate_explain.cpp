// `zeromem estimate --explain` for the step: the terms of its peak, the verdict, and the smallest change (or pair of
// changes, or three, or more GPUs) to the command line that makes it fit, as text and as the fixes it names.
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "estimate.hpp"

namespace zeromem::cli {

// The smallest change that makes the step fit, tried from the least disruptive: each is the command line with its
// flags added, evaluated as `estimate` evaluates any command line (to_inputs), so what it prints is what those flags give.
void explain_step(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const step_estimate& e, const device_choice& device,
                  std::vector<explained_fix>& fixes) {
  out << "\nExplain\n  the peak (" << name(e.peak_phase) << ") by term:\n";
  e.phase(e.peak_phase).for_each([&](const char* term, bytes b) {
    if (b.count() != 0)
      out << "    " << term << ": " << format_bytes(b, size_unit::GiB) << " (" << static_cast<int>(100.0 * (b / e.peak) + 0.5)
          << "% of the peak)\n";
  });
  if (!device.given()) {
    out << "  give --gpu or --gpu-memory for a verdict and the smallest change that makes it fit\n";
    return;
  }
  const step_verdict v = verdict_of(e, device.capacity);
  out << "  verdict: " << format_bytes(v.needed, size_unit::GiB) << " of " << format_bytes(v.capacity, size_unit::GiB) << " on " << device.name
      << (v.fits() ? " -> fits" : " -> OUT OF MEMORY") << "\n";
  // With --host-memory (--nvme-capacity) the job must fit a node's host RAM (NVMe) too; every fix below does.
  const std::optional<bytes> host = host_capacity_of(a), nvme = nvme_capacity_of(a);
  const model_state_estimate states = estimate_model_states(in.job.states);
  const auto node_fits = [&](const model_state_estimate& s) {
    return (!host || s.host_per_node() <= *host) && (!nvme || s.nvme_per_node() <= *nvme);
  };
  if (host && states.host_per_node() > *host)
    out << "  host RAM a node: " << format_bytes(states.host_per_node(), size_unit::GiB) << " of --host-memory " << format_bytes(*host, size_unit::GiB)
        << " -> DOES NOT FIT\n";
  if (nvme && states.nvme_per_node() > *nvme)
    out << "  NVMe a node: " << format_bytes(states.nvme_per_node(), size_unit::GiB) << " of --nvme-capacity " << format_bytes(*nvme, size_unit::GiB)
        << " -> DOES NOT FIT\n";
  if (v.fits() && node_fits(states)) return;
  struct change {
    std::string what;
    std::function<void(estimate_args&)> edit;
    bool replaced_by_more_gpus = false;  // the GPU search below sets what it sets (dp, or the sharding it adds)
  };
  std::vector<change> changes;
  const auto with = [&](std::string what, std::function<void(estimate_args&)> edit, bool replaced_by_more_gpus = false) {
    changes.push_back({std::move(what), std::move(edit), replaced_by_more_gpus});
  };
  // More GPUs help only where the states are sharded over all of dp (not within a node, as HYBRID_SHARD does).
  const bool sharded_over_dp = in.job.states.zero.stage > 0 && shard_group_of(in.job.states) == in.job.states.dp;
  // With --deepspeed-config, a change to a key the config sets is made there: named by its key, the flag beside it.
  const auto in_config = [&](const std::string& flag, const std::string& key, const std::string& value) {
    return set_by_config(a, key) ? key + " " + value + " in " + detail::quoted(a.deepspeed_file, 96) + " (" + flag + ")" : flag;
  };
  // DeepSpeed 0.16.x's ZeRO-3 keeps what a checkpointed backward gathers (DeepSpeed issue #7116); 0.17 releases it.
  if (in.job.step.zero3_backward_keeps_gathered)
    with("--deepspeed-version 0.17.0 (0.16.x keeps every parameter ZeRO-3 gathers in a checkpointed backward, DeepSpeed issue #7116)",
         [](estimate_args& c) { c.deepspeed_version = "0.17.0"; });
  // Expandable segments split every block to the request: the blocks the caching allocator holds above the weights,
  // states and gradients (allocator_blocks) go, and no code changes.
  if (in.job.step.allocator == allocator_mode::caching && e.phase(e.peak_phase).allocator_blocks.count() > 0)
    with("--allocator expandable (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)", [](estimate_args& c) { c.allocator = "expandable"; });
  // The update's temporaries: a fused kernel has none; without one (Adafactor, RMSprop, Adagrad) the for-loop has one
  // parameter's worth at a time.
  if (in.job.step.optimizer == optimizer_impl::foreach_kernels && traits_of(in.job.states.optimizer.kind).cuda_fused)
    with("--optimizer-impl fused", [](estimate_args& c) { c.optimizer_impl = "fused"; });
  else if (in.job.step.optimizer == optimizer_impl::foreach_kernels)
    with("--optimizer-impl forloop", [](estimate_args& c) { c.optimizer_impl = "forloop"; });
  if (in.job.step.loss == loss_impl::hf) with("--loss fused", [](estimate_args& c) { c.loss = "fused"; });
  // ZeRO-1/2's second reduce bucket with overlap_comm (job.hpp deepspeed_buffers).
  const int zero_stage = in.job.states.zero.stage;
  const bool deepspeed_job = a.zero_stage >= 0 || !a.deepspeed_file.empty();
  if ((zero_stage == 1 || zero_stage == 2) && in.job.step.fsdp_world == 0 && overlaps_comm(in.job.overheads, zero_stage))
    with(in_config("--overlap-comm off", "zero_optimization.overlap_comm", "false"), [](estimate_args& c) { c.overlap_comm = "off"; });
  if (in.job.step.ddp && !in.job.step.gradient_as_bucket_view)
    with("--gradient-as-bucket-view", [](estimate_args& c) { c.gradient_as_bucket_view = true; });
  if (in.job.activations.recomputation == recompute::none && offers_selective_recompute(in.job.activations.impl))
    with("--recompute selective", [](estimate_args& c) { c.recompute_name = "selective"; });
  if (in.job.activations.recomputation != recompute::full) with("--recompute full", [](estimate_args& c) { c.recompute_name = "full"; });
  if (in.job.states.adapt.lora_enabled() && !in.job.states.adapt.paged_optimizer && in.job.states.zero.optimizer.device == offload_device::none)
    with("--paged-optimizer", [](estimate_args& c) { c.paged_optimizer = true; });
  if (in.job.states.adapt.lora_enabled() && in.job.states.adapt.quantize == quantization::none)
    with("--quantize nf4 (QLoRA)", [](estimate_args& c) { c.quantize = "nf4"; });
  if (in.job.activations.micro_batch > 1)
    with(in_config("--micro-batch " + std::to_string(in.job.activations.micro_batch / 2), "train_micro_batch_size_per_gpu",
                   std::to_string(in.job.activations.micro_batch / 2)),
         [](estimate_args& c) { c.micro_batch /= 2; });
  // Data-parallel ranks that each hold every state whole, under DeepSpeed or without a sharding framework: ZeRO shards
  // them (stage 1 the optimizer states, 2 the gradients too, 3 the weights too), with DeepSpeed's default optimizer.
  if (a.fsdp.empty() && !a.ddp && in.job.states.dp > 1)
    for (int stage = in.job.states.zero.stage + 1; stage <= 3; ++stage)
      with(in_config("--zero-stage " + std::to_string(stage), "zero_optimization.stage", std::to_string(stage)),
           [stage](estimate_args& c) { c.zero_stage = stage; }, !sharded_over_dp);
  // DeepSpeed's ZeRO-Offload (stages 1-3): the optimizer states and their update on the CPU; at stage 3 the parameters
  // too (ZeRO-Infinity; zero/offload_config.py). What they move is host RAM, printed with the fix.
  // On NVMe (ZeRO-Infinity) they leave host RAM for a node's NVMe, DeepSpeed's swap buffers aside.
  for (const auto& [to, kind] : {std::pair{offload_device::cpu, "cpu"}, std::pair{offload_device::nvme, "nvme"}}) {
    const std::string note = to == offload_device::nvme ? " (ZeRO-Infinity: DeepSpeed needs an nvme_path)" : "";
    if (a.fsdp.empty() && !a.ddp && in.job.states.zero.optimizer.device < to)
      with(in_config("--offload-optimizer " + std::string(kind), "zero_optimization.offload_optimizer.device", kind) + note,
           [kind = kind](estimate_args& c) { c.offload_optimizer = kind; });
    if (a.fsdp.empty() && !a.ddp && in.job.states.zero.params.device < to)
      with(in_config("--offload-params " + std::string(kind), "zero_optimization.offload_param.device", kind) + note,
           [kind = kind](estimate_args& c) { c.offload_params = kind; });
  }
  // A PyTorch job's FSDP on the same GPUs: FULL_SHARD frees each layer's gathered parameters after its forward (FSDP2
  // reshard_after_forward=True, where SHARD_GRAD_OP keeps them to the backward) and shards what DDP and NO_SHARD hold
  // whole; HYBRID_SHARD does so within its shard group. (A job with neither --ddp nor --fsdp is offered ZeRO above.)
  const std::optional<fsdp_strategy> fsdp = a.ddp ? fsdp_strategy::no_shard
                                            : a.fsdp.empty() ? std::optional<fsdp_strategy>{}
                                                             : parse_fsdp_strategy(a.fsdp);
  const std::string in_place_of_ddp = a.gradient_as_bucket_view ? " (in place of --ddp and --gradient-as-bucket-view)" : " (in place of --ddp)";
  if (in.job.states.dp > 1 && (fsdp == fsdp_strategy::no_shard || fsdp == fsdp_strategy::shard_grad_op))
    with("--fsdp FULL_SHARD" + (a.ddp ? in_place_of_ddp : std::string{}), [](estimate_args& c) {
      c.fsdp = "FULL_SHARD";
      c.ddp = c.gradient_as_bucket_view = false;
    }, !sharded_over_dp);
  if (in.job.states.dp > 1 && fsdp == fsdp_strategy::hybrid_shard_zero2)
    with("--fsdp HYBRID_SHARD", [](estimate_args& c) { c.fsdp = "HYBRID_SHARD"; });
  if (sharded_over_dp && in.job.states.dp <= detail::i64_max / 2)
    with("--dp " + std::to_string(in.job.states.dp * 2) + " (twice the GPUs)", [](estimate_args& c) {
      c.dp *= 2;
      if (c.shard_group > 0) c.shard_group *= 2;
    }, true);
  // A config's numeric train_batch_size (noted only then) is kept: a change to the micro-batch or dp takes the
  // accumulation with it, micro-batch x accumulation x dp (runtime/config.py _batch_assertion), or is not made.
  bool batch_kept = false;
  for (const auto& read : a.deepspeed_read) batch_kept = batch_kept || read.first == "train_batch_size";
  const std::int64_t global_batch = batch_kept ? a.micro_batch * a.grad_accum_steps * a.dp : 0;  // checked as the config was read
  // The command line with some changes made; none where the config's batch cannot be kept.
  using made_list = std::vector<const change*>;
  const auto changed = [&](const made_list& made) -> std::optional<estimate_args> {
    estimate_args c = a;
    for (const change* m : made) m->edit(c);
    if (batch_kept && (c.micro_batch != a.micro_batch || c.dp != a.dp)) {
      if (global_batch % c.dp != 0 || (global_batch / c.dp) % c.micro_batch != 0) return std::nullopt;
      c.grad_accum_steps = global_batch / c.dp / c.micro_batch;
    }
    return c;
  };
  // Its verdict; none where the changes are not valid together, or need more host RAM (NVMe) than --host-memory (--nvme-capacity).
  const auto verdict_with = [&](const made_list& made) -> std::optional<step_verdict> {
    const std::optional<estimate_args> c = changed(made);
    if (!c) return std::nullopt;
    try {
      const training_job job = to_inputs(*c).job;
      if (!node_fits(estimate_model_states(job.states))) return std::nullopt;
      return verdict_of(estimate_step(job), device.capacity);
    } catch (const std::exception&) {  // invalid_argument (dp no longer divides, ...) or overflow_error
      return std::nullopt;
    }
  };
  const auto print_fit = [&](const std::string& label, const made_list& made, const step_verdict& cv, const char* kind,
                             std::vector<std::string> named) {
    out << "  " << label << " -> " << format_bytes(cv.needed, size_unit::GiB) << " (margin " << format_bytes(cv.margin(), size_unit::GiB) << ")\n";
    const estimate_args c = *changed(made);
    if (const std::string n = std::to_string(c.grad_accum_steps); c.grad_accum_steps != a.grad_accum_steps)
      out << "    " << (accumulation_derived(a, c) ? "DeepSpeed derives gradient accumulation " + n + " from"
                                                    : "with " + in_config("--grad-accum-steps " + n, "gradient_accumulation_steps", n) + ", keeping")
          << " the config's train_batch_size " << global_batch << "\n";
    // What an offload moves to the host: a node's host RAM with the fix (model_states.hpp host_per_node).
    const model_state_estimate fixed = estimate_model_states(to_inputs(c).job.states);
    if (const bytes now = fixed.host_per_node(), was = states.host_per_node(); now != was)
      out << "    host RAM a node: " << format_bytes(now, size_unit::GiB) << " (" << format_bytes(was, size_unit::GiB) << " as configured"
          << (host ? ", of --host-memory " + format_bytes(*host, size_unit::GiB) : std::string{}) << ")\n";
    if (const bytes now = fixed.nvme_per_node(), was = states.nvme_per_node(); now != was)
      out << "    NVMe a node: " << format_bytes(now, size_unit::GiB) << " (" << format_bytes(was, size_unit::GiB) << " as configured"
          << (nvme ? ", of --nvme-capacity " + format_bytes(*nvme, size_unit::GiB) : std::string{}) << ")\n";
    fixes.push_back({kind, std::move(named), settings_of(a, c), cv});
  };
  for (const change& c : changes)
    if (const auto cv = verdict_with({&c}); cv && cv->fits()) {
      print_fit("smallest change that fits: " + c.what, {&c}, *cv, "change", {c.what});
      return;
    }
  // Two changes together, the least disruptive pairs first (the list's order).
  for (std::size_t j = 1; j < changes.size(); ++j)
    for (std::size_t i = 0; i < j; ++i)
      if (const auto cv = verdict_with({&changes[i], &changes[j]}); cv && cv->fits()) {
        out << "  no single change fits\n";
        print_fit("two changes that fit together: " + changes[i].what + " and " + changes[j].what, {&changes[i], &changes[j]}, *cv, "two changes",
                  {changes[i].what, changes[j].what});
        return;
      }
  // Three together, in the same order (by the last change, then the middle one), before any more GPUs than the list's.
  for (std::size_t k = 2; k < changes.size(); ++k)
    for (std::size_t j = 1; j < k; ++j)
      for (std::size_t i = 0; i < j; ++i)
        if (const auto cv = verdict_with({&changes[i], &changes[j], &changes[k]}); cv && cv->fits()) {
          out << "  no single change or pair of changes fits\n";
          print_fit("three changes that fit together: " + changes[i].what + ", " + changes[j].what + " and " + changes[k].what,
                    {&changes[i], &changes[j], &changes[k]}, *cv, "three changes", {changes[i].what, changes[j].what, changes[k].what});
          return;
        }
  // More GPUs: the fewest, the data-parallel degree doubled up to max_gpus, over which the states shard (the job's own
  // sharding where it already spans dp; else ZeRO-3 for a DeepSpeed job and FSDP's FULL_SHARD for a PyTorch one), alone
  // and with the first change above that needs fewer of them (or fits where more GPUs alone do not). Hybrid sharding,
  // within a node, is left out: more nodes do not shrink its shards.
  constexpr std::int64_t max_gpus = 16384;
  const bool unsharded = in.job.states.zero.stage == 0;
  if ((sharded_over_dp || unsharded) && a.fsdp.find("HYBRID") == std::string::npos && in.job.states.dp <= max_gpus / 2) {
    const std::string how = sharded_over_dp ? std::string{}
                            : deepspeed_job ? in_config("--zero-stage 3", "zero_optimization.stage", "3") + " "
                            : a.ddp         ? "--fsdp FULL_SHARD" + in_place_of_ddp + " "
                                            : "--fsdp FULL_SHARD ";
    const auto over = [sharded = sharded_over_dp, deepspeed_job](std::int64_t gpus) {
      return [=](estimate_args& c) {
        if (sharded) {
          if (c.shard_group > 0) c.shard_group = gpus;
        } else if (deepspeed_job) {
          c.zero_stage = 3;
        } else {
          c.fsdp = "FULL_SHARD";
          c.ddp = c.gradient_as_bucket_view = false;
        }
        c.dp = gpus;
      };
    };
    // The fewest GPUs, fewer than `below`, at which the job fits with `made` (and the more GPUs).
    using found = std::optional<std::pair<std::int64_t, step_verdict>>;
    const auto fewest = [&](made_list made, std::int64_t below) -> found {
      for (std::int64_t gpus = in.job.states.dp * 2; gpus <= max_gpus && gpus < below; gpus *= 2) {
        const change more{"", over(gpus)};
        made.push_back(&more);
        const auto cv = verdict_with(made);
        made.pop_back();
        if (cv && cv->fits()) return std::make_pair(gpus, *cv);
      }
      return std::nullopt;
    };
    const found alone = fewest({}, max_gpus + 1);
    // The first change that needs fewer GPUs (or fits where more GPUs alone do not); where none does and more GPUs
    // alone do not fit, the first pair that fits with them.
    made_list usable, helpers;
    for (const change& c : changes)
      if (!c.replaced_by_more_gpus) usable.push_back(&c);
    found fewer;
    for (std::size_t j = 0; j < usable.size() && !fewer; ++j)
      if ((fewer = fewest({usable[j]}, alone ? alone->first : max_gpus + 1))) helpers = {usable[j]};
    for (std::size_t j = 1; j < usable.size() && !fewer && !alone; ++j)
      for (std::size_t i = 0; i < j && !fewer; ++i)
        if ((fewer = fewest({usable[i], usable[j]}, max_gpus + 1))) helpers = {usable[i], usable[j]};
    // GPUs in all: dp x the tensor-, pipeline- and context-parallel ranks of one replica.
    const std::int64_t replica = in.job.states.model_parallel;
    const auto on = [&](std::int64_t gpus) { return how + "--dp " + std::to_string(gpus) + " (" + std::to_string(gpus * replica) + " GPUs)"; };
    if (alone || fewer) out << "  no single change, pair or three of them fits\n";
    if (alone) {
      const change more{"", over(alone->first)};
      print_fit("the fewest GPUs that fit: " + on(alone->first), {&more}, alone->second, "gpus", {on(alone->first)});
    }
    if (fewer) {
      const change more{"", over(fewer->first)};
      made_list made = helpers;
      made.push_back(&more);
      std::vector<std::string> named;
      for (const change* h : helpers) named.push_back(h->what);
      const std::string with_what = helpers.size() == 1 ? named[0] : named[0] + " and " + named[1];
      named.push_back(on(fewer->first));
      print_fit(std::string(alone ? "fewer GPUs with " : "the fewest GPUs that fit, with ") + with_what + ": " + on(fewer->first), made,
                fewer->second, helpers.size() == 1 ? "gpus with a change" : "gpus with two changes", std::move(named));
    }
    if (alone || fewer) return;
  }
  out << "  no single change, pair or three of them fits; try `zeromem plan` for combinations\n";
}

}  // namespace zeromem::cli
