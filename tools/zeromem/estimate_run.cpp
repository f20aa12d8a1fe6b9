// `zeromem estimate`: runs the job the flags describe and prints it as text or JSON; --explain.
#include <memory>
#include <ostream>
#include <sstream>
#include <vector>

#include "estimate.hpp"

namespace zeromem::cli {
namespace {

step_estimate step_of(const estimate_inputs& in) { return estimate_step(in.job); }

json placement_json(const placement& p) {
  return {{"gpu_bytes", p.gpu.count()}, {"host_bytes", p.host.count()}, {"host_pinned_bytes", p.host_pinned.count()},
          {"nvme_bytes", p.nvme.count()}};
}

json step_terms_json(const step_terms& t) {
  json terms = json::object();
  t.for_each([&](const char* name, bytes b) { terms[std::string(name) + "_bytes"] = b.count(); });
  return {{"peak_bytes", t.total().count()}, {"largest_term", std::string(t.largest())}, {"terms", terms}};
}

json estimate_json(const estimate_inputs& in, const model_state_estimate& e, const stage_activations* act, const step_estimate* step) {
  const training_states& t = in.job.states;
  const model_state_terms& m = e.per_rank;
  json j;
  j["inputs"] = {{"params_per_rank", t.params.count()}, {"weights_dtype", std::string(name(t.recipe.weights))},
                 {"gradients_dtype", std::string(name(t.recipe.gradients))}, {"fp32_master", t.recipe.fp32_master},
                 {"fp32_gradient_copy", t.recipe.fp32_gradient_copy}, {"optimizer", std::string(name(t.optimizer.kind))},
                 {"zero_stage", t.zero.stage}, {"dp", t.dp}, {"shard_group", e.shard_group}, {"gpus_per_node", t.gpus_per_node},
                 {"ranks_per_node", e.ranks_per_node}, {"offload_optimizer", std::string(name(t.zero.optimizer.device))},
                 {"offload_params", std::string(name(t.zero.params.device))}, {"hpz_partition", t.zero.hpz_partition},
                 {"largest_layer_params", t.largest_layer.count()}, {"gradient_accumulation_steps", t.gradient_accumulation_steps}};
  j["inputs"]["optimizer_impl"] = std::string(name(in.job.step.optimizer));
  j["inputs"]["optimizer_extra_states"] = extra_states(t.optimizer);  // amsgrad, RMSprop's centered and momentum
  j["inputs"]["weight_decay"] = t.optimizer.weight_decay;
  j["inputs"]["nesterov"] = t.optimizer.nesterov;
  j["inputs"]["gradients_from_start"] = in.job.step.keep_gradients || t.gradient_accumulation_steps > 1;
  j["inputs"]["frozen_params_per_rank"] = t.frozen.count();
  j["inputs"]["frozen_weights_bytes_per_rank"] = t.frozen_weights.count();
  if (step != nullptr && t.zero.stage >= 1 && in.job.step.fsdp_world == 0) {  // DeepSpeed's buffers (communication_buffers)
    const runtime_overheads& o = in.job.overheads;
    j["inputs"]["reduce_bucket_size"] = o.reduce_bucket_size;
    if (t.zero.stage == 3) {
      j["inputs"]["prefetch_bucket_size"] = o.prefetch_bucket_size;
      j["inputs"]["max_reuse_distance"] = o.max_reuse_distance;
      j["inputs"]["param_persistence_threshold"] = o.param_persistence_threshold;
      j["inputs"]["zero3_backward_keeps_gathered"] = in.job.step.zero3_backward_keeps_gathered;  // DeepSpeed 0.16.x's defect
    } else j["inputs"]["overlap_comm"] = overlaps_comm(o, t.zero.stage);
  }
  if (in.has_model) {
    const parameter_split split = split_parameters(in.job.model, in.counts, t.adapt, t.recipe.weights);
    j["model"] = {{"params", in.counts.total.count()}, {"language_model_params", in.counts.language_model.count()},
                  {"vision_params", in.counts.vision.count()}, {"params_per_layer", in.counts.layer.count()},
                  {"embedding_params", in.counts.embedding.count()}, {"lm_head_params", in.counts.lm_head.count()},
                  {"largest_layer_params", in.counts.largest_layer.count()},
                  {"trainable_params", split.trainable(in.job.model.layers).count()},
                  {"frozen_params", split.frozen(in.job.model.layers).count()},
                  {"adapter_params", split.adapters.total.count()}};
    // PEFT's print_trainable_parameters counts the adapters among all parameters.
    j["model"]["all_params_with_adapters"] = (in.counts.total + split.adapters.total).count();
    const adaptation& d = t.adapt;
    j["adaptation"] = {{"lora_rank", d.lora.rank}, {"lora_dropout", d.lora.dropout},
                       {"adapter_dtype", std::string(name(trainable_recipe(t).weights))},
                       {"quantize", std::string(name(d.quantize))}, {"double_quant", d.quantize == quantization::nf4 && d.double_quant},
                       {"paged_optimizer", d.paged_optimizer}, {"freeze_vision", d.freeze_vision},
                       {"freeze_embeddings", d.freeze_embeddings || d.lora_enabled()},
                       {"adapter_params_per_layer", split.adapters.per_layer.count()},
                       {"dequantized_weight_bytes", split.dequantized_weight.count()}};
  }
  const bytes act_bytes = act != nullptr ? act->total : bytes{};
  j["per_gpu"] = {{"weights_bytes", (m.weights.gpu + m.hpz_secondary.gpu + m.frozen_weights.gpu).count()},
                  {"frozen_weights_bytes", m.frozen_weights.gpu.count()},
                  {"gradients_bytes", (m.gradients.gpu + m.fp32_gradients.gpu).count()},
                  {"optimizer_states_bytes", (m.master_weights.gpu + m.optimizer_moments.gpu).count()},
                  {"gathered_layer_bytes", m.gathered_layer.gpu.count()}, {"offload_staging_bytes", m.offload_staging.gpu.count()},
                  {"model_states_bytes", e.gpu().count()}, {"activations_bytes", act_bytes.count()},
                  {"total_bytes", (e.gpu() + act_bytes).count()}};
  if (act != nullptr) {
    json terms = json::object();
    act->per_layer.for_each([&](const char* term, bytes b) { terms[term] = b.count(); });
    j["activations"] = {{"attention", std::string(name(in.job.activations.attention))}, {"implementation", std::string(name(in.job.activations.impl))},
                        {"recompute", std::string(name(in.job.activations.recomputation))},
                        {"per_layer_bytes", act->per_layer.total().count()}, {"per_layer_terms", terms},
                        {"layers_on_stage", act->layers_on_stage}, {"microbatches_in_flight", act->microbatches_in_flight},
                        {"layers_bytes", act->layers.count()}, {"input_ids_bytes", act->input_ids.count()},
                        {"position_ids_bytes", act->position_ids.count()},
                        {"rotary_tables_bytes", act->rotary_tables.count()},
                        {"checkpoint_arguments_bytes", act->checkpoint_arguments.count()},
                        {"embedding_dropout_bytes", act->embedding_dropout.count()},
                        {"embedding_projection_bytes", act->embedding_projection.count()},
                        {"embedding_output_bytes", act->embedding_output.count()}, {"output_layer_bytes", act->output_layer.count()},
                        {"logits_bytes", act->logits.count()}, {"total_bytes", act->total.count()},
                        {"full_attention_layers", act->full_attention_layers},
                        {"full_attention_layer_bytes", act->full_attention_layer.total().count()},
                        {"first_layer_unkept_bytes", act->first_layer_unkept.count()},
                        // A vision tower runs over the image tokens' patches (--image-tokens); with none, text only.
                        {"image_tokens", in.job.activations.image_tokens}, {"vision_bytes", act->vision.count()},
                        {"vision_forward_modelled", in.job.model.vision.blocks == 0 || in.job.activations.image_tokens > 0}};
  }
  j["per_rank_host"] = {{"total_bytes", e.host_per_rank().count()}, {"pinned_bytes", e.total_per_rank().host_pinned.count()}};
  j["per_node_host"] = {{"ranks", e.ranks_per_node}, {"total_bytes", e.host_per_node().count()},
                        {"pinned_bytes", e.host_pinned_per_node().count()}};
  j["per_node_nvme"] = {{"total_bytes", e.nvme_per_node().count()}};
  json terms = json::object();
  m.for_each([&](const char* term, const placement& p) { terms[term] = placement_json(p); });
  j["terms_per_rank"] = terms;
  if (step != nullptr) {
    j["per_gpu"]["peak_bytes"] = step->peak.count();
    j["per_gpu"]["peak_phase"] = std::string(name(step->peak_phase));
    j["per_gpu"]["peak_term"] = std::string(step->phase(step->peak_phase).largest());
    j["per_gpu"]["reserved_bytes"] = step->reserved.count();
    j["per_gpu"]["cuda_context_bytes"] = step->cuda_context.count();
    j["per_gpu"]["cuda_modules_bytes"] = step->cuda_modules.count();
    j["per_gpu"]["blas_workspaces_bytes"] = step->forward.blas_workspaces.count();
    j["per_gpu"]["device_used_bytes"] = step->device_used().count();
    j["phases"] = {{"forward", step_terms_json(step->forward)}, {"backward", step_terms_json(step->backward)},
                   {"optimizer_step", step_terms_json(step->optimizer_step)}};
  }
  return j;
}

// The per-GPU model-state terms as a breakdown (for --explain's dominant terms and --svg).
job_breakdown states_job(const model_state_estimate& e) {
  job_breakdown job{};
  e.per_rank.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0) job.add("model", term, p.gpu);
  });
  return job;
}

// The model-states verdict (no --seq-len): the same needed bytes JSON and --explain report.
step_verdict states_verdict(const model_state_estimate& e, bytes capacity) {
  step_verdict v{};
  v.needed = e.gpu();
  v.capacity = capacity;
  return v;
}

// One bar per phase of the step, stacked by what is alive at its high-water mark, plus the CUDA context (and the
// allocator's reserve at the peak): the tallest bar is what the verdict compares with the capacity.
std::string step_svg(const step_estimate& step, bytes capacity) {
  std::vector<svg_bar> bars;
  for (const step_phase p : {step_phase::forward, step_phase::backward, step_phase::optimizer_step}) {
    svg_bar bar{std::string(name(p)) + (p == step.peak_phase ? " (the peak)" : ""), {}};
    step.phase(p).for_each([&](const char* term, bytes b) { bar.segments.push_back({term, b}); });
    if (p == step.peak_phase) bar.segments.push_back({"reserved above allocated (--reserve-fraction)", step.reserved - step.peak});
    bar.segments.push_back({"CUDA context", step.cuda_context});
    bar.segments.push_back({"CUDA modules", step.cuda_modules});
    bars.push_back(std::move(bar));
  }
  return svg_stacked_bars("zeromem estimate: per-GPU memory at each phase of the step", bars, capacity);
}

std::string states_svg(const model_state_estimate& e, bytes capacity) {
  return svg_stacked_bars("zeromem estimate: per-GPU model states", {bar_of("most loaded GPU", states_job(e))}, capacity);
}

}  // namespace

void explain_estimate(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e,
                      const step_estimate* step, const device_choice& device, std::vector<explained_fix>& fixes) {
  if (step != nullptr) return explain_step(out, a, in, *step, device, fixes);
  const job_breakdown job = states_job(e);
  out << "\nExplain\n  dominant terms per GPU:\n";
  print_dominant(out, job);
  if (!device.given()) {
    out << "  give --gpu or --gpu-memory for a verdict\n";
    return;
  }
  const step_verdict v = states_verdict(e, device.capacity);
  out << "  verdict: model states " << format_bytes(v.needed, size_unit::GiB) << " of " << format_bytes(v.capacity, size_unit::GiB)
      << (v.fits() ? " -> fits" : " -> OUT OF MEMORY") << " (give a model and --seq-len for the step's peak)\n";
}

int run_estimate(const estimate_args& given, std::ostream& out) {
  const estimate_args a = with_deepspeed_config(given);
  if (a.forward_only) return run_forward_only(a, out);
  if (a.forward_output != name(forward_only_config{}.output))
    detail::fail("--forward-output describes a forward-only run; add --forward-only");
  const estimate_inputs in = to_inputs(a);
  const model_state_estimate e = estimate_model_states(in.job.states);
  stage_activations act{};
  step_estimate step{};
  if (in.has_activations) {
    act = first_stage_activations(in.job.model, in.job.activations, in.job.pipeline, in.job.states.adapt);
    step = step_of(in);
  }
  const stage_activations* act_ptr = in.has_activations ? &act : nullptr;
  const step_estimate* step_ptr = in.has_activations ? &step : nullptr;
  const device_choice device = device_of(a.gpu, a.gpu_memory);
  const std::optional<bytes> host = host_capacity_of(a), nvme = nvme_capacity_of(a);
  const bytes capacity = device.capacity;
  if (!a.svg.empty()) write_file(a.svg, step_ptr != nullptr ? step_svg(step, capacity) : states_svg(e, capacity));
  if (!a.json) {
    print_estimate(out, a, in, e, act_ptr, step_ptr, device);
    std::vector<explained_fix> fixes;
    if (a.explain) explain_estimate(out, a, in, e, step_ptr, device, fixes);
    return 0;
  }
  json j = estimate_json(in, e, act_ptr, step_ptr);
  if (host) {
    j["per_node_host"]["capacity_bytes"] = host->count();
    j["per_node_host"]["fits"] = e.host_per_node() <= *host;
  }
  if (nvme) {
    j["per_node_nvme"]["capacity_bytes"] = nvme->count();
    j["per_node_nvme"]["fits"] = e.nvme_per_node() <= *nvme;
  }
  if (!a.deepspeed_file.empty()) {
    json keys = json::array();
    for (const auto& [key, value] : a.deepspeed_read) keys.push_back({{"key", key}, {"value", value}});
    j["inputs"]["deepspeed_config"] = {{"file", a.deepspeed_file}, {"read", keys}};
  }
  if (device.given()) {
    const step_verdict v = step_ptr != nullptr ? verdict_of(step, capacity) : states_verdict(e, capacity);
    j["verdict"] = {{"gpu", device.name}, {"capacity_bytes", capacity.count()}, {"capacity_source", device.source},
                    {"needed_bytes", v.needed.count()},
                    {"margin_bytes", v.margin().count()}, {"fits", v.fits()}, {"close", v.close()},
                    {"compares", step_ptr != nullptr ? "device_used_bytes" : "model_states_bytes"}};
  }
  if (a.explain) {
    std::ostringstream text;
    std::vector<explained_fix> fixes;
    explain_estimate(text, a, in, e, step_ptr, device, fixes);
    j["explain"] = text.str().substr(1);  // the same lines --explain prints, without the leading blank line
    j["fixes"] = json::array();  // what it names, each with the verdict it gives (empty where it names none)
    for (const explained_fix& f : fixes) {
      json set = json::array();  // each flag as argv would set it, or the config's key with its JSON value
      for (const fix_setting& s : f.settings)
        if (!s.config_key.empty())
          set.push_back({{"config", a.deepspeed_file}, {"key", s.config_key}, {"value", json::parse(s.config_value)}, {"flag", s.flag}});
        else if (s.is_switch)
          set.push_back({{"flag", s.flag}, {"value", s.value == "true"}});
        else
          set.push_back({{"flag", s.flag}, {"value", s.value}});
      j["fixes"].push_back({{"kind", f.kind}, {"changes", f.changes}, {"set", set}, {"needed_bytes", f.verdict.needed.count()},
                            {"margin_bytes", f.verdict.margin().count()}, {"fits", f.verdict.fits()}});
    }
  }
  out << j.dump(2) << "\n";
  return 0;
}

command add_estimate_command(CLI::App& parent) {
  return make_command<estimate_args>(parent, "estimate", "the step's peak per GPU, per node's host RAM and NVMe of one training job",
                                     "zeromem estimate --model qwen2.5-7b --zero-stage 2 --dp 8 --seq-len 4096 --gpu a100-80gb", add_estimate_flags, run_estimate);
}

}  // namespace zeromem::cli
