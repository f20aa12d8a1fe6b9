// `zeromem estimate`: the one job its flags describe (estimate_inputs); the flags are in estimate_flags.cpp.
#include "estimate.hpp"

namespace zeromem::cli {

hf_quantization quantization_of(const estimate_args& a) {
  const quantization q = parse_quantization(a.quantize);
  if (a.no_double_quant && q != quantization::nf4) detail::fail("--no-double-quant applies to --quantize nf4; drop it");
  return hf_quantization{q, !a.no_double_quant};
}

namespace {

adaptation adaptation_of(const estimate_args& a) {
  adaptation d{};
  d.lora.rank = a.lora_rank;
  if (!a.lora_targets.empty()) d.lora.targets = parse_lora_targets(a.lora_targets);
  d.lora.dropout = a.lora_dropout;
  d.lora.adapter_dtype = parse_dtype(a.lora_dtype);
  const hf_quantization q = quantization_of(a);
  d.quantize = q.kind;
  d.double_quant = q.double_quant;
  d.paged_optimizer = a.paged_optimizer;
  if (a.lora_dropout != 0.0 && a.lora_rank == 0) detail::fail("--lora-dropout needs LoRA; add --lora-rank and --lora-targets");
  if (a.lora_dtype != name(lora_config{}.adapter_dtype) && a.lora_rank == 0)
    detail::fail("--lora-dtype sets the adapters' dtype; add --lora-rank and --lora-targets, or drop it");
  std::string_view list = a.freeze;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    const std::string_view item = list.substr(0, comma);
    if ((item == "vision" || item == "embeddings") && a.lora_rank != 0)  // adapters.hpp split_parameters: the whole base is frozen
      detail::fail("--freeze " + std::string(item) + ": LoRA freezes the whole base model, vision tower and embeddings included; drop it");
    if (item == "vision") d.freeze_vision = true;
    else if (item == "embeddings") d.freeze_embeddings = true;
    else if (item == "all-but-adapters") {
      if (a.lora_rank == 0) detail::fail("--freeze all-but-adapters needs adapters; add --lora-rank and --lora-targets");
    } else
      detail::fail("unknown --freeze component " + detail::quoted(item) + "; expected vision, embeddings or all-but-adapters");
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return d;
}

/// The flags' degrees through the same typed layout a constexpr job uses (job.hpp with_layout), so the two paths
/// put each degree in the same place.
parallel_layout layout_of(const estimate_args& a) {
  return parallel_layout{data_parallel{a.dp}, tensor_parallel{a.tp}, pipeline_parallel{a.pp}, context_parallel{a.cp}};
}

void set_model_states(const estimate_args& a, estimate_inputs& in) {
  training_states& t = in.job.states;
  t.adapt = adaptation_of(a);
  t.recipe = recipe_of(parse_precision(a.precision_name));
  if (in.has_model) {
    in.counts = count_parameters(in.job.model);
  } else {
    if (a.tp != 1 || a.pp != 1) detail::fail("--tp and --pp split a model's layers; give the model (--model, --hf-config or --hidden ...)");
    if (t.adapt.lora_enabled() || t.adapt.freeze_vision || t.adapt.freeze_embeddings || t.adapt.quantize != quantization::none)
      detail::fail("LoRA, --freeze and --quantize need the model's shapes; give --model, --hf-config or --hidden ...");
    t.params = parse_elements(a.params, "the parameter count (--params)");
  }
  t.recipe.fp32_gradient_copy = a.fp32_grad_copy;
  if (!a.main_grads.empty()) t.recipe.gradients = parse_dtype(a.main_grads);
  // Model states are those of the most loaded tensor/pipeline-parallel rank: what trains there and what is frozen.
  if (in.has_model) t = states_on_rank(in.job.model, in.counts, t, a.tp, a.pp);
  t.optimizer.kind = parse_optimizer(a.optimizer_name);
  t.optimizer.weight_decay = a.weight_decay;
  t.optimizer.amsgrad = a.amsgrad;
  t.optimizer.centered = a.rmsprop_centered;
  t.optimizer.momentum_buffer = a.rmsprop_momentum;
  t.optimizer.nesterov = a.nesterov;
  if (in.has_model && t.optimizer.kind == optimizer_kind::adafactor) {
    // The model's own tensor shapes, split like the parameters over tensor and pipeline ranks.
    t.optimizer.adafactor_factored = adafactor_factored_on_rank(in.job.model, in.counts, t.params);
  }
  const parallel_layout layout = layout_of(a);
  t = with_layout(t, layout);
  t.gpus_per_node = a.gpus_per_node;
  if (!a.fsdp.empty()) {
    const fsdp_strategy f = parse_fsdp_strategy(a.fsdp);
    const bool hybrid = f == fsdp_strategy::hybrid_shard || f == fsdp_strategy::hybrid_shard_zero2;
    t.zero = fsdp_config(f, a.shard_group > 0 ? a.shard_group : a.gpus_per_node);
    if (!hybrid) t.zero.shard_group = a.shard_group;
  } else {
    t.zero.stage = a.zero_stage < 0 ? 0 : static_cast<int>(a.zero_stage);
    t.zero.shard_group = a.shard_group;
  }
  t.zero.hpz_partition = a.hpz;
  if (a.sub_group_size >= 0) t.zero.sub_group_size = a.sub_group_size;
  if (a.optimizer_buffer_count > 0) t.zero.optimizer_buffer_count = a.optimizer_buffer_count;
  if (a.param_buffer_count > 0) t.zero.param_buffer_count = a.param_buffer_count;
  if (a.param_buffer_size > 0) t.zero.param_buffer_size = a.param_buffer_size;
  t.zero.optimizer = {parse_offload_device(a.offload_optimizer), a.pin_memory};
  t.zero.params = {parse_offload_device(a.offload_params), a.pin_memory};
  if (a.pin_memory && t.zero.optimizer.device == offload_device::none && t.zero.params.device == offload_device::none)
    detail::fail("--pin-memory pins offloaded states; add --offload-optimizer or --offload-params, or drop it");
  if (!a.largest_layer.empty()) {
    // Read only where the whole layer is gathered or staged (model_states.hpp needs_largest_layer); elsewhere it changed nothing.
    if (!needs_largest_layer(t.zero))
      detail::fail("--largest-layer-params sizes ZeRO-3's gathered layer and ZeRO-1/2 CPU offload's staging; drop it or pass "
                   "--zero-stage 3");
    t.largest_layer = parse_elements(a.largest_layer, "the largest layer (--largest-layer-params)");
  } else if (in.has_model && needs_largest_layer(t.zero))
    t.largest_layer = largest_share(in.counts.largest_layer, a.tp);
  t.gradient_accumulation_steps = a.grad_accum_steps;
  t.model_parallel = layout.gpus() / layout.dp().value();  // tp x pp x cp
  validate(t);
}

void set_step(const estimate_args& a, estimate_inputs& in) {
  in.has_activations = true;
  activation_config& c = in.job.activations;
  c.seq_len = a.seq_len;
  c.micro_batch = a.micro_batch;
  c.image_tokens = a.image_tokens;
  c.forward_cache = !a.no_cache;
  c = with_recipe(c, in.job.states.recipe);
  if (!a.activation_dtype.empty()) c.activation_dtype = parse_dtype(a.activation_dtype);
  c = with_layout(c, layout_of(a));
  c.sequence_parallel = a.sp;
  c.recomputation = parse_recompute(a.recompute_name);
  c.attention = parse_attention(a.attention_name);
  c.dropout = a.dropout;
  if (a.dropout_given) in.job.model.attention_dropout = in.job.model.residual_dropout = in.job.model.embedding_dropout = 0.0;
  c.impl = parse_implementation(a.implementation_name);
  c.device = parse_device(a.device_name);
  c.torch_major = static_cast<int>(a.torch_major);
  // Both are read by transformers' modeling code only (activations.hpp hf_rmsnorm_saved; forward_kv_cache_bytes).
  if (c.impl != implementation::hf && (a.torch_major != activation_config{}.torch_major || a.no_cache))
    detail::fail("--torch-version and --no-cache describe transformers' modeling code (--implementation hf); drop them for " +
                 std::string(name(c.impl)));
  in.job.pipeline = with_layout(pipeline_config{1, a.virtual_stages, a.microbatches}, layout_of(a));
  validate(c, in.job.model);
  validate(in.job.pipeline, in.job.model);
  step_config& st = in.job.step;
  st.loss = parse_loss(a.loss);
  const optimizer_kind kind = in.job.states.optimizer.kind;
  const bool deepspeed = a.zero_stage >= 0 && a.fsdp.empty();
  st.optimizer = !a.optimizer_impl.empty() ? parse_optimizer_impl(a.optimizer_impl)
                 : deepspeed               ? deepspeed_default_impl(kind)
                                           : pytorch_default_impl(kind);
  st.allocator = parse_allocator(a.allocator);
  if (!a.cuda_context.empty()) st.cuda_context = parse_bytes(a.cuda_context, "the CUDA context (--cuda-context)");
  if (!a.cuda_modules.empty()) st.cuda_modules = parse_bytes(a.cuda_modules, "the CUDA modules (--cuda-modules)");
  st.blas_workspaces = blas_workspaces_arg(a.blas_workspaces, a.gpu, training_blas_handles, st.blas_workspaces);
  if (!a.gpu.empty()) st.multiprocessors = find_gpu(a.gpu).multiprocessors;
  st.reserve_fraction = a.reserve_fraction;
  st.ddp = a.ddp;
  st.gradient_as_bucket_view = a.gradient_as_bucket_view;
  st.keep_gradients = a.keep_grads;
  if (!a.deepspeed_version.empty()) {
    if (!deepspeed)
      detail::fail("--deepspeed-version names DeepSpeed's release; pass --zero-stage for a DeepSpeed job, or drop it (FSDP and "
                   "plain PyTorch jobs have none)");
    // The defect needs ZeRO-3 with gradient checkpointing (DeepSpeed issue #7116).
    st.zero3_backward_keeps_gathered =
        detail::deepspeed_zero3_checkpointing_leak(a.deepspeed_version, "the DeepSpeed version (--deepspeed-version)") && a.zero_stage == 3 &&
        c.recomputation != recompute::none;
  }
  if (!a.fsdp.empty()) {
    // FSDP2 fully_shard: FULL_SHARD and HYBRID_SHARD reshard after forward; SHARD_GRAD_OP keeps layers unsharded.
    const fsdp_strategy f = parse_fsdp_strategy(a.fsdp);
    if (f != fsdp_strategy::no_shard) st.fsdp_world = shard_group_of(in.job.states);
    st.reshard_after_forward = f == fsdp_strategy::full_shard || f == fsdp_strategy::hybrid_shard;
  }
  validate(st);
}

/// DeepSpeed ZeRO's buffers as the config sets them; read only by the step's communication_buffers term
/// (step.hpp: deepspeed_buffers at stages 1-3), so elsewhere they would change nothing.
void set_deepspeed_buffers(const estimate_args& a, estimate_inputs& in) {
  if (!a.max_reuse_distance.empty()) {
    if (a.zero_stage != 3) detail::fail("--max-reuse-distance is ZeRO-3's stage3_max_reuse_distance; drop it or pass --zero-stage 3");
    if (a.seq_len == 0) detail::fail("--max-reuse-distance sets what ZeRO-3 keeps gathered in the step; add a model and --seq-len");
    in.job.overheads.max_reuse_distance = parse_elements(a.max_reuse_distance, "the reuse distance (--max-reuse-distance)").count();
  }
  if (!a.param_persistence_threshold.empty()) {
    if (a.zero_stage != 3)
      detail::fail("--param-persistence-threshold is ZeRO-3's stage3_param_persistence_threshold; drop it or pass --zero-stage 3");
    if (a.seq_len == 0) detail::fail("--param-persistence-threshold sets what ZeRO-3 keeps gathered in the step; add a model and --seq-len");
    in.job.overheads.param_persistence_threshold =
        parse_elements(a.param_persistence_threshold, "the persistence threshold (--param-persistence-threshold)").count();
  }
  if (a.reduce_bucket.empty() && a.prefetch_bucket.empty() && a.overlap_comm.empty()) return;
  if (a.zero_stage < 1)
    detail::fail("--reduce-bucket, --prefetch-bucket and --overlap-comm size DeepSpeed ZeRO's buffers; add --zero-stage 1, 2 or 3, "
                 "or drop them");
  if (a.seq_len == 0)
    detail::fail("--reduce-bucket, --prefetch-bucket and --overlap-comm count toward the step's peak; add a model and --seq-len");
  runtime_overheads& o = in.job.overheads;
  if (!a.reduce_bucket.empty()) o.reduce_bucket_size = parse_elements(a.reduce_bucket, "the reduce bucket (--reduce-bucket)").count();
  if (!a.prefetch_bucket.empty()) {
    if (a.zero_stage != 3) detail::fail("--prefetch-bucket is ZeRO-3's stage3_prefetch_bucket_size; drop it or pass --zero-stage 3");
    o.prefetch_bucket_size = parse_elements(a.prefetch_bucket, "the prefetch bucket (--prefetch-bucket)").count();
  }
  if (!a.overlap_comm.empty() && a.zero_stage == 3)
    detail::fail("--overlap-comm sizes ZeRO-1/2's buffers; ZeRO-3 holds its reduce bucket and the bucket's reduce-scatter copy "
                 "either way: drop it");
  if (a.overlap_comm == "on") o.overlap_comm = overlap_comm_setting::on;
  else if (a.overlap_comm == "off") o.overlap_comm = overlap_comm_setting::off;
  else if (!a.overlap_comm.empty()) detail::fail("unknown --overlap-comm " + detail::quoted(a.overlap_comm) + "; expected on or off");
  validate(o);
}

}  // namespace

namespace {
std::optional<bytes> node_capacity_of(const std::string& text, const std::string& what, const char* example) {
  if (text.empty()) return std::nullopt;
  const bytes b = parse_bytes(text, what.c_str());
  if (b.count() <= 0) detail::fail(what + " must be above 0 B, such as " + example);
  return b;
}
}  // namespace

std::optional<bytes> host_capacity_of(const estimate_args& a) { return node_capacity_of(a.host_memory, "the host memory (--host-memory)", "1TB"); }

std::optional<bytes> nvme_capacity_of(const estimate_args& a) {
  return node_capacity_of(a.nvme_capacity, "the NVMe capacity (--nvme-capacity)", "3.84TB");
}

estimate_inputs to_inputs(const estimate_args& a) {
  estimate_inputs in{};
  in.has_model = a.model.given();
  if (in.has_model && !a.params.empty()) detail::fail("give either --params or a model (--model, --hf-config, --hidden ...), not both");
  if (!in.has_model && a.params.empty()) detail::fail("give --params (such as 7.5B) or a model (--model, --hf-config, --hidden ...)");
  if (in.has_model) in.job.model = model_of(a.model, quantization_of(a));
  set_model_states(a, in);

  constexpr activation_config defaults{};
  const bool activation_flags = a.seq_len != 0 || a.sp || a.cp != 1 || a.recompute_name != "none" || a.dropout != 0.0 ||
                                a.attention_name != name(defaults.attention) || a.implementation_name != name(defaults.impl) ||
                                a.micro_batch != 1 || a.virtual_stages != 1 || a.microbatches != 0 || a.image_tokens != 0 ||
                                a.device_name != name(defaults.device) || !a.activation_dtype.empty() || a.torch_major != defaults.torch_major ||
                                a.no_cache;
  if (activation_flags && !in.has_model)
    detail::fail("activation memory needs a model: pass --model, --hf-config or --hidden ... with --seq-len");
  if (activation_flags && a.seq_len == 0) detail::fail("activation flags (--micro-batch, --recompute, --sp, ...) need --seq-len");
  if (a.keep_grads && a.seq_len == 0) detail::fail("--keep-grads changes the step's peak; add a model and --seq-len");
  if (!a.deepspeed_version.empty() && a.seq_len == 0)
    detail::fail("--deepspeed-version changes what the step keeps gathered; add a model and --seq-len");
  if ((a.ddp || a.gradient_as_bucket_view) && a.seq_len == 0)
    detail::fail("--ddp and --gradient-as-bucket-view change the step's peak; add a model and --seq-len");
  if ((!a.optimizer_impl.empty() || a.loss != name(loss_impl::hf)) && a.seq_len == 0)
    detail::fail("--optimizer-impl and --loss choose the step's kernels; add a model and --seq-len for the step's peak");
  if ((!a.cuda_context.empty() || !a.cuda_modules.empty() || !a.blas_workspaces.empty()) && a.seq_len == 0)
    detail::fail("--cuda-context, --cuda-modules and --blas-workspaces count toward the step's peak and verdict; add a model and --seq-len");
  if ((a.allocator != name(step_config{}.allocator) || a.reserve_fraction != 0.0) && a.seq_len == 0)
    detail::fail("--allocator and --reserve-fraction shape the step's peak and reserved bytes; add a model and --seq-len");
  if (a.microbatches != 0 && a.pp == 1)
    detail::fail("--microbatches sets a pipeline's schedule (with --pp above 1); for gradient accumulation pass --grad-accum-steps");
  if (a.weight_decay != 0.0 && a.seq_len == 0)
    detail::fail("--weight-decay changes the optimizer step's temporaries; add a model and --seq-len for the step's peak");
  set_deepspeed_buffers(a, in);
  if (a.seq_len != 0) set_step(a, in);
  return in;
}

}  // namespace zeromem::cli
