// `zeromem estimate` as text: the step's peak and verdict first, then the tables, then --explain.
#include <ostream>
#include <sstream>

#include "estimate.hpp"

namespace zeromem::cli {
namespace {

std::string both_units(bytes b) { return format_bytes(b, size_unit::GiB) + " (" + format_bytes(b, size_unit::GB) + ")"; }

// What the optimizer keeps, in words that match optimizer_state_bytes (recipe.hpp).
std::string states_of(const training_states& t) {
  const std::string d(name(t.adapt.paged_optimizer ? dtype::fp32 : trainable_recipe(t).optimizer_dtype()));
  const optimizer_traits& o = traits_of(t.optimizer.kind);
  if (t.optimizer.kind == optimizer_kind::adafactor)
    return std::string(o.keeps) + (t.optimizer.adafactor_momentum ? ", momentum in " + d : "");
  std::string extra;
  for (const auto& [on, state] : {std::pair{t.optimizer.amsgrad, "max_exp_avg_sq (amsgrad)"}, std::pair{t.optimizer.centered, "grad_avg (centered)"},
                                  std::pair{t.optimizer.momentum_buffer, "momentum_buffer"}})
    if (on) extra += std::string(", ") + state;
  return std::string(o.keeps) + extra + (o.moments > 0 ? " in " + d : "");
}

std::string number_text(double p) {
  std::ostringstream s;
  s << p;
  return s.str();
}

std::string ranks(std::int64_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

// The verdict first when a GPU is named (needed vs capacity, margin, the phase and term that decide), then the
// step's peak: what the GPU reaches, in which phase, set by which term.
void print_peak(std::ostream& out, const estimate_inputs& in, const step_estimate& e, const device_choice& device) {
  const std::string decides = std::string(name(e.peak_phase)) + ", set by " + std::string(e.phase(e.peak_phase).largest());
  if (device.given()) {
    const step_verdict v = verdict_of(e, device.capacity);
    out << "  verdict      " << (v.fits() ? "fits " : "DOES NOT FIT ") << device.name << ": " << format_bytes(v.needed, size_unit::GiB) << " of "
        << format_bytes(v.capacity, size_unit::GiB) << ", margin " << format_bytes(v.margin(), size_unit::GiB) << "; the peak is in " << decides
        << "\n";
    if (v.close())
      out << "  caution      the margin is within " << number_text(100.0 * stated_accuracy)
          << "% of the card, the step model's stated accuracy; the caching allocator's reserve above the peak is not counted "
             "(--reserve-fraction)\n";
  }
  out << "  peak per GPU " << both_units(e.peak) << " in " << decides << "\n";
  // Without --reserve-fraction the reserved bytes are the allocated peak: say so, rather than call the peak reserved.
  const bool reserve_given = in.job.step.reserve_fraction > 0.0;
  out << "  device used  " << both_units(e.device_used()) << " = " << (reserve_given ? "reserved " : "peak ")
      << format_bytes(e.reserved, size_unit::GiB) << " + CUDA context " << format_bytes(e.cuda_context, size_unit::GiB) << " + modules "
      << format_bytes(e.cuda_modules, size_unit::GiB)
      << (reserve_given ? "" : " (allocator reserve not included: --reserve-fraction)") << "\n";
  out << "  step         loss " << name(in.job.step.loss) << ", optimizer " << name(in.job.step.optimizer) << ", allocator " << name(in.job.step.allocator)
      << (in.job.step.fsdp_world > 0 ? ", FSDP2 over " + ranks(in.job.step.fsdp_world) + (in.job.step.reshard_after_forward ? "" : " (no reshard after forward)")
                                 : std::string())
      << (in.job.step.ddp ? std::string(", DDP buckets") + (in.job.step.gradient_as_bucket_view ? " (gradients as bucket views)" : "") : std::string())
      << ", cuBLAS workspaces " << format_bytes(in.job.step.blas_workspaces, size_unit::MiB)
      << (in.job.step.keep_gradients ? ", gradients kept between steps"
          : in.job.states.gradient_accumulation_steps > 1 ? ", gradients alive from the start (a micro-batch after the first)"
                                                         : "")
      << "\n";
}

void print_phases(std::ostream& out, const step_estimate& e) {
  for (step_phase ph : {step_phase::forward, step_phase::backward, step_phase::optimizer_step}) {
    const step_terms& t = e.phase(ph);
    out << "\nPhase " << name(ph) << " at its high-water mark" << (ph == e.peak_phase ? " (the peak)" : "") << "\n" << table_head();
    t.for_each([&](const char* term, bytes b) {
      if (b.count() != 0) out << bytes_row(term, b) << "\n";
    });
    out << bytes_row("total", t.total()) << "\n";
  }
}

void print_sharding(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e) {
  const training_states& t = in.job.states;
  out << "  sharding     ";
  if (!a.fsdp.empty()) out << "FSDP " << a.fsdp << " (ZeRO stage " << t.zero.stage << " equivalent)";
  else out << "ZeRO stage " << t.zero.stage;
  if (t.zero.stage > 0) out << ", states sharded over " << ranks(e.shard_group);
  if (e.shard_group < t.dp) out << ", replicated " << t.dp / e.shard_group << " times";
  out << " (dp " << t.dp << "), " << ranks(e.ranks_per_node) << " per node\n";
  if (t.zero.stage == 3 && e.shard_group == 1)
    out << "  note         ZeRO-3 over 1 rank shards nothing but still gathers the largest layer ("
        << format_bytes(e.per_rank.gathered_layer.gpu, size_unit::GiB) << "), so it needs more than ZeRO-2 here\n";
}

void print_inputs(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e) {
  const training_states& t = in.job.states;
  if (in.has_model) {
    out << "  model        " << format_count(in.counts.total.count()) << " parameters";
    if (in.counts.vision.count() > 0) out << " (vision tower " << format_count(in.counts.vision.count()) << ")";
    out << "; largest layer " << format_count(in.counts.largest_layer.count()) << "\n";
  }
  if (t.frozen.count() == 0) out << "  per rank     " << format_count(t.params.count()) << " parameters\n";
  else {
    out << "  per rank     " << format_count(t.params.count()) << " parameters train, " << format_count(t.frozen.count())
        << " frozen (" << format_bytes(t.frozen_weights, size_unit::GiB) << " as stored)\n";
    const adaptation& d = t.adapt;
    if (d.lora_enabled())
      out << "  adapters     LoRA rank " << d.lora.rank << " on " << a.lora_targets << ", "
          << name(trainable_recipe(t).weights) << (d.lora.dropout > 0.0 ? ", dropout " + number_text(d.lora.dropout) : std::string())
          << "; base " << (d.quantize == quantization::none ? std::string(name(t.recipe.weights))
                                                           : std::string(name(d.quantize)) + (d.quantize == quantization::nf4 && d.double_quant ? " with double quantization" : ""))
          << "\n";
  }
  if (t.adapt.paged_optimizer) out << "  note         paged optimizer: its fp32 states are counted in host RAM, which backs them\n";
  if (!in.has_model && t.params.count() < 1'000'000 && a.params.find_first_of("kKmMbBgGtTeE") == std::string::npos)
    out << "  note         --params " << a.params << " is " << format_count(t.params.count())
        << " parameters; write " << a.params << "B for billions or " << a.params << "M for millions\n";
  const precision_recipe r = trainable_recipe(t);  // what trains: the adapters under LoRA
  out << "  recipe       " << (t.frozen.count() > 0 ? "trained " : "") << "weights " << name(r.weights) << ", gradients " << name(r.gradients)
      << (r.fp32_master ? ", fp32 master weights" : ", no master copy") << (r.fp32_gradient_copy ? ", fp32 gradient copy" : "")
      << "; optimizer " << name(t.optimizer.kind) << " (" << states_of(t) << ")\n";
  print_sharding(out, a, in, e);
  if (!a.deepspeed_file.empty()) {
    out << "  deepspeed    " << detail::quoted(a.deepspeed_file, 96) << " read:";
    for (const auto& [key, value] : a.deepspeed_read) out << "\n               " << key << " " << value;
    out << "\n";
  }
  out << "  offload      optimizer " << name(t.zero.optimizer.device) << ", parameters " << name(t.zero.params.device)
      << (t.zero.optimizer.pin_memory ? " (pinned)" : "")
      << (t.gradient_accumulation_steps > 1 ? "; " + std::to_string(t.gradient_accumulation_steps) + " micro-batches per step" : "") << "\n";
  if (in.has_activations) {
    const activation_config& c = in.job.activations;
    out << "  activations  seq " << c.seq_len << " x micro-batch " << c.micro_batch << ", " << name(c.activation_dtype) << ", tp " << c.tp
        << (c.sequence_parallel ? " + sp" : "") << ", cp " << c.cp << ", pp " << in.job.pipeline.pp << ", recompute " << name(c.recomputation)
        << ", attention " << name(c.attention) << ", dropout " << c.dropout << ", profile " << name(c.impl) << "\n";
    if (c.impl == implementation::hf && !walks_inside_layers(c))
      out << "  note         transformers' nodes inside a layer are walked at tp 1 without selective recompute; here the backward "
             "is read before and after each layer only\n";
    if (in.job.step.zero3_backward_keeps_gathered)
      out << "  note         DeepSpeed 0.16.x under ZeRO-3 with recompute releases nothing its backward gathers (DeepSpeed issue "
             "#7116): the whole model is gathered by the embedding's backward; 0.15.x and 0.17 and later release it\n";
    if (in.job.model.vision.blocks > 0 && c.image_tokens == 0)
      out << "  note         no image tokens: the vision tower does not run (its weights, gradients and optimizer states are counted); "
             "pass --image-tokens, the image tokens among --seq-len, for its activations\n";
    else if (c.image_tokens > 0)
      out << "  vision       " << c.image_tokens << " image tokens per sequence through the vision tower (its bytes: the activations "
             "table's vision row)\n";
  }
  if (t.optimizer.kind == optimizer_kind::adafactor)
    out << (in.has_model ? "  note         Adafactor's factored state from the model's tensor shapes, split in proportion to the parameters\n"
                         : "  note         Adafactor without tensor shapes: its factored state is a lower bound\n");
  if (t.zero.stage == 3 && t.largest_layer.count() == 0)
    out << "  note         ZeRO-3 gathers each layer whole; pass --largest-layer-params or a model to count it\n";
  if (t.zero.stage != 3 && needs_largest_layer(t.zero) && t.largest_layer.count() == 0)
    out << "  note         CPU offload stages gradients in buffers of the largest layer; pass --largest-layer-params or a model to count them\n";
}

void print_activations(std::ostream& out, const stage_activations& act) {
  out << "\nActivations of the first pipeline stage (" << act.layers_on_stage << " layers x " << act.microbatches_in_flight
      << " micro-batches in flight)\n"
      << table_head();
  act.per_layer.for_each([&](const char* term, bytes b) {
    if (b.count() != 0) out << bytes_row(std::string("1 layer: ") + term, b) << "\n";
  });
  // Alternating layers: the terms above are layer 0's, a sliding-window one.
  out << bytes_row(act.full_attention_layers > 0 ? "1 sliding layer: total" : "1 layer: total", act.per_layer.total()) << "\n";
  if (act.full_attention_layers > 0)
    out << bytes_row("1 full-attention layer (x" + std::to_string(act.full_attention_layers) + ")", act.full_attention_layer.total()) << "\n";
  out << bytes_row("all layers in flight", act.layers) << "\n";
  if (act.input_ids.count() != 0) out << bytes_row("input token ids", act.input_ids) << "\n";
  if (act.position_ids.count() != 0) out << bytes_row("learned positions' ids", act.position_ids) << "\n";
  if (act.rotary_tables.count() != 0) out << bytes_row("rotary cos and sin", act.rotary_tables) << "\n";
  if (act.checkpoint_arguments.count() != 0) out << bytes_row("checkpointed calls' masks, positions", act.checkpoint_arguments) << "\n";
  if (act.embedding_dropout.count() != 0) out << bytes_row("embedding dropout", act.embedding_dropout) << "\n";
  if (act.embedding_projection.count() != 0) out << bytes_row("project_in input", act.embedding_projection) << "\n";
  if (act.embedding_output.count() != 0) out << bytes_row("embedding output (a leaf)", act.embedding_output) << "\n";
  if (act.output_layer.count() != 0) out << bytes_row("output layer inputs", act.output_layer) << "\n";
  if (act.logits.count() != 0) out << bytes_row("fp32 logits", act.logits) << "\n";
  if (act.vision.count() != 0) out << bytes_row("vision tower (image patches)", act.vision) << "\n";
  out << bytes_row("total", act.total) << "\n";
}

}  // namespace

void print_estimate(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e,
                    const stage_activations* act, const step_estimate* step, const device_choice& device) {
  const model_state_terms& m = e.per_rank;
  out << "zeromem estimate\n";
  if (step != nullptr) print_peak(out, in, *step, device);
  if (step == nullptr && device.given())
    out << "  verdict      model states " << (e.gpu() <= device.capacity ? "fit " : "DO NOT FIT ") << device.name << ": "
        << format_bytes(e.gpu(), size_unit::GiB) << " of " << format_bytes(device.capacity, size_unit::GiB) << ", margin "
        << format_bytes(device.capacity - e.gpu(), size_unit::GiB) << " (activations and the step's transients need a model and --seq-len)\n";
  print_inputs(out, a, in, e);
  // With a step the peak leads the report; this table is the sum of terms (gathered_layer being DeepSpeed's estimator's
  // 4 B x the largest layer, where the phases below hold what ZeRO-3's trace keeps gathered at each moment).
  out << (act != nullptr ? "\nPer GPU (most loaded rank): the terms summed, not the peak (model states as DeepSpeed's estimator counts them)\n"
                         : "\nPer GPU (most loaded rank)\n")
      << table_head();
  m.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0) out << bytes_row(term, p.gpu) << "\n";
  });
  if (act != nullptr) out << bytes_row("activations", act->total) << "\n";
  out << bytes_row("total", e.gpu() + (act != nullptr ? act->total : bytes{})) << "\n";
  if (act != nullptr) print_activations(out, *act);

  out << "\nPer node host RAM (" << ranks(e.ranks_per_node) << " x per-rank bytes)\n" << table_head();
  m.for_each([&](const char* term, const placement& p) {
    if (p.host.count() != 0) out << bytes_row(term, p.host * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.host_per_node()) << "\n";
  out << bytes_row("of which pinned", e.host_pinned_per_node()) << "\n";
  if (const std::optional<bytes> host = host_capacity_of(a))
    out << "  " << (e.host_per_node() <= *host ? "fits" : "DOES NOT FIT") << " --host-memory " << format_bytes(*host, size_unit::GiB) << ", margin "
        << format_bytes(*host - e.host_per_node(), size_unit::GiB) << "\n";

  out << "\nPer node NVMe\n" << table_head();
  m.for_each([&](const char* term, const placement& p) {
    if (p.nvme.count() != 0) out << bytes_row(term, p.nvme * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.nvme_per_node()) << "\n";
  if (const std::optional<bytes> nvme = nvme_capacity_of(a))
    out << "  " << (e.nvme_per_node() <= *nvme ? "fits" : "DOES NOT FIT") << " --nvme-capacity " << format_bytes(*nvme, size_unit::GiB) << ", margin "
        << format_bytes(*nvme - e.nvme_per_node(), size_unit::GiB) << "\n";
  if (step != nullptr) print_phases(out, *step);
  out << (act != nullptr ? "\nThe per-GPU table sums model states and saved activations; the phases above add what a real step "
                           "holds at each high-water mark.\n"
                         : "\nModel states only (give a model and --seq-len for the step's peak); buffers and framework "
                           "overheads are not included.\n");
}

}  // namespace zeromem::cli
