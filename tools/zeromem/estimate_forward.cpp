// `zeromem estimate --forward-only`: one model run forward without autograd (a reference or reward model, a
// log-prob pass). The training flags do not apply and are refused.
#include <ostream>
#include <utility>

#include "estimate.hpp"

namespace zeromem::cli {

int run_forward_only(const estimate_args& a, std::ostream& out) {
  if (!a.model.given() || a.seq_len == 0) detail::fail("--forward-only needs a model (--model, --hf-config or --hidden ...) and --seq-len");
  const estimate_args defaults;  // not `{}`: GCC 12 -O2 then reports a false maybe-uninitialized in std::string
  const std::pair<bool, const char*> training_only[] = {
      {a.zero_stage >= 0 || !a.fsdp.empty() || a.ddp, "--zero-stage, --fsdp and --ddp"},
      {!a.reduce_bucket.empty() || !a.prefetch_bucket.empty() || !a.overlap_comm.empty(), "--reduce-bucket, --prefetch-bucket and --overlap-comm"},
      {!a.max_reuse_distance.empty() || !a.param_persistence_threshold.empty() || !a.deepspeed_version.empty(),
       "--max-reuse-distance, --param-persistence-threshold and --deepspeed-version"},
      {a.dp != defaults.dp || a.tp != 1 || a.pp != 1 || a.cp != 1 || a.sp, "--dp, --tp, --pp, --cp and --sp"},
      {a.lora_rank != 0 || !a.lora_targets.empty() || a.lora_dropout != 0.0 || a.lora_dtype != defaults.lora_dtype || !a.freeze.empty() ||
           a.paged_optimizer,
       "LoRA (--lora-rank, --lora-targets, --lora-dropout, --lora-dtype), --freeze and --paged-optimizer"},
      {a.weight_decay != 0.0 || a.amsgrad || a.rmsprop_centered || a.rmsprop_momentum || a.nesterov,
       "the optimizer's flags (--weight-decay, --amsgrad, --rmsprop-centered, --rmsprop-momentum, --nesterov)"},
      {a.recompute_name != defaults.recompute_name || a.optimizer_name != defaults.optimizer_name || a.optimizer_impl != defaults.optimizer_impl ||
           a.loss != defaults.loss || a.grad_accum_steps != 1 || a.offload_optimizer != defaults.offload_optimizer || a.offload_params != defaults.offload_params,
       "--recompute, --optimizer, --optimizer-impl, --loss, --grad-accum-steps and offload"},
      {a.implementation_name != defaults.implementation_name || a.dropout != 0.0 || a.torch_major != defaults.torch_major,
       "--implementation, --dropout and --torch-version"},
      {a.gpus_per_node != defaults.gpus_per_node || a.shard_group != 0 || a.hpz != 1 || a.pin_memory || a.fp32_grad_copy ||
           !a.main_grads.empty() || !a.largest_layer.empty() || a.virtual_stages != 1 || a.microbatches != 0 || !a.params.empty(),
       "the model-state and pipeline flags (--gpus-per-node, --shard-group, --hpz, --pin-memory, --fp32-grad-copy, "
       "--main-grads, --largest-layer-params, --virtual-stages, --microbatches, --params)"},
      {a.allocator != defaults.allocator || a.reserve_fraction != 0.0 || a.gradient_as_bucket_view || a.keep_grads || a.explain || !a.svg.empty() ||
           !a.host_memory.empty() || !a.nvme_capacity.empty(),
       "--allocator, --reserve-fraction, --gradient-as-bucket-view, --keep-grads, --explain, --svg, --host-memory and --nvme-capacity"}};
  for (const auto& [given, flags] : training_only)
    if (given) detail::fail(std::string("--forward-only runs the model without training; drop ") + flags);
  // Not modelled in a forward-only pass: the vision tower's activations, and the modules a training step loads (measured
  // after training steps only).
  if (a.image_tokens != 0) detail::fail("--forward-only does not model a vision tower's pass; drop --image-tokens");
  if (!a.cuda_modules.empty()) detail::fail("--cuda-modules is measured for a training step; --forward-only counts the CUDA context only, drop it");
  const hf_quantization q = quantization_of(a);
  const transformer_config m = model_of(a.model, q);
  const precision p = parse_precision(a.precision_name);
  forward_only_config f{};
  f.seq_len = a.seq_len;
  f.micro_batch = a.micro_batch;
  f.compute = a.activation_dtype.empty() ? compute_dtype_of(p) : parse_dtype(a.activation_dtype);
  f.attention = parse_attention(a.attention_name);
  f.use_cache = !a.no_cache;
  f.output = parse_forward_output(a.forward_output);
  f.device = parse_device(a.device_name);
  f.blas_workspaces = blas_workspaces_arg(a.blas_workspaces, a.gpu, 1, f.blas_workspaces);  // the forward's thread
  // Inference keeps the weights in the compute dtype (a mixed or AMP recipe's fp32 copies belong to training).
  const forward_only_estimate e = estimate_forward_only(m, f, forward_weight_bytes(m, f.compute, q.kind, q.double_quant));
  const bytes context = a.cuda_context.empty() ? step_config{}.cuda_context : parse_bytes(a.cuda_context, "the CUDA context (--cuda-context)");
  const bytes used = e.peak + context;
  const device_choice device = device_of(a.gpu, a.gpu_memory);
  const char* where = e.layers_phase > e.output_phase ? "the layers" : "the output";
  if (a.json) {
    json j;
    j["forward_only"] = {{"weights_bytes", e.weights.count()}, {"layer_peak_bytes", e.layer_peak.count()},
                         {"layers_phase_bytes", e.layers_phase.count()}, {"output_phase_bytes", e.output_phase.count()},
                         {"blas_workspaces_bytes", e.blas_workspaces.count()},
                         {"peak_bytes", e.peak.count()}, {"cuda_context_bytes", context.count()}, {"device_used_bytes", used.count()},
                         {"peak_in", e.layers_phase > e.output_phase ? "layers" : "output"}, {"output", std::string(name(f.output))},
                         {"use_cache", f.use_cache}, {"attention", std::string(name(f.attention))},
                         {"compute_dtype", std::string(name(f.compute))}, {"quantize", std::string(name(q.kind))}};
    j["model"] = {{"params", count_parameters(m).total.count()}};
    if (device.given())
      j["verdict"] = {{"gpu", device.name}, {"capacity_bytes", device.capacity.count()}, {"capacity_source", device.source},
                      {"needed_bytes", used.count()}, {"margin_bytes", (device.capacity - used).count()}, {"fits", used <= device.capacity},
                      {"compares", "device_used_bytes"}};
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem estimate --forward-only\n";
  if (device.given())
    out << "  verdict      " << (used <= device.capacity ? "fits " : "DOES NOT FIT ") << device.name << ": " << format_bytes(used, size_unit::GiB)
        << " of " << format_bytes(device.capacity, size_unit::GiB) << ", margin " << format_bytes(device.capacity - used, size_unit::GiB)
        << "; the peak is at " << where << "\n";
  out << "  peak per GPU " << format_bytes(e.peak, size_unit::GiB) << " (" << format_bytes(e.peak, size_unit::GB) << ") at " << where
      << "; device used " << format_bytes(used, size_unit::GiB) << " with the CUDA context\n";
  out << "  forward      seq " << f.seq_len << " x micro-batch " << f.micro_batch << ", " << name(f.compute) << ", attention "
      << name(f.attention) << ", output " << name(f.output) << (f.use_cache ? ", KV cache kept (use_cache)" : ", no KV cache") << "\n\n";
  out << table_head();
  out << bytes_row("weights", e.weights) << "\n";
  out << bytes_row("cuBLAS workspace (one handle)", e.blas_workspaces) << "\n";
  out << bytes_row("largest layer's live tensors", e.layer_peak) << "\n";
  out << bytes_row("at the last layer (all held)", e.layers_phase) << "\n";
  out << bytes_row("at the output (all held)", e.output_phase) << "\n";
  out << bytes_row("peak", e.peak) << "\n";
  return 0;
}

}  // namespace zeromem::cli
