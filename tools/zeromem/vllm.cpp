// `zeromem vllm`: one vLLM engine on one of its GPUs: weights, the profiled activation peak, the KV cache the
// version's gpu_memory_utilization leaves, and the tokens and sequences it holds.
#include <cstdio>
#include <ostream>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct vllm_args {
  model_flags model;
  std::string gpu, gpu_memory;
  std::int64_t tp = 1;
  double utilization = 0.9;
  std::string version;
  bool verl_patched = false;
  std::int64_t max_model_len = 0;
  std::int64_t max_num_seqs = 0, max_num_batched_tokens = 0;  // 0: the version's default
  std::int64_t block_size = 16;
  std::int64_t max_lora_rank = 0;  // enable_lora; 0: off
  std::string dtype_name = "bf16", kv_dtype_name = "bf16";
  std::string other_processes, cuda_context, cuda_graphs;
  std::string graph_estimate;  // "", "on", "off": VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS
  bool enforce_eager = false;
  bool json = false;
};

void add_vllm_flags(CLI::App& app, vllm_args& a) {
  add_model_flags(app, a.model, false);
  add_device_flags(app, a.gpu, a.gpu_memory, "the GPU the engine runs on (one of the two is required)");
  integer_option(app, "--tp", a.tp, "tensor_parallel_size")->capture_default_str();
  real_option(app, "--gpu-memory-utilization", a.utilization, "gpu_memory_utilization, in (0, 1]", 0.0, 1.0, true, false)->capture_default_str();
  text_option(app, "--vllm-version", a.version, "the vLLM version, such as 0.8.5: it decides what the utilization means")->required();
  app.add_flag("--verl-patched", a.verl_patched, "verl's own copy of vLLM <= 0.6.3: KV = utilization x free memory after profiling");
  tokens_option(app, "--max-model-len", a.max_model_len, "max_model_len: the longest sequence, prompt + response (8K, 32K)")->required();
  integer_option(app, "--max-num-seqs", a.max_num_seqs, "max_num_seqs (default: the version's, stated in the output)");
  tokens_option(app, "--max-num-batched-tokens", a.max_num_batched_tokens, "max_num_batched_tokens (default: the version's)");
  integer_option(app, "--block-size", a.block_size, "tokens per KV block")->capture_default_str();
  integer_option(app, "--max-lora-rank", a.max_lora_rank, "enable_lora with max_loras 1 and this max_lora_rank (1, 8, 16, 32, 64, 128, 256, 320, 512)");
  text_option(app, "--dtype", a.dtype_name, "weights and activations: bf16, fp16, fp32")->capture_default_str();
  text_option(app, "--kv-dtype", a.kv_dtype_name, "KV cache: bf16, fp16, fp8_e4m3, fp8_e5m2, fp32")->capture_default_str();
  text_option(app, "--other-processes", a.other_processes, "GPU memory held by other processes when the engine starts, such as 20GiB");
  text_option(app, "--cuda-context", a.cuda_context, "non-torch memory: CUDA context, NCCL (default: measured on an H100, 650,969,088 B)");
  text_option(app, "--cuda-graphs", a.cuda_graphs,
              "CUDA graph memory as vLLM logs it, such as 2464MiB ('Estimated CUDA graph memory' from 0.21, the capture's before); zeromem does not derive it");
  text_option(app, "--cudagraph-estimate", a.graph_estimate,
              "on | off: VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS, whether the graphs come out of the KV budget (default: on from 0.21.0)");
  app.add_flag("--enforce-eager", a.enforce_eager, "enforce_eager: no CUDA graphs");
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

std::string fixed2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// The budget row's label: what gpu_memory_utilization multiplies under each meaning (vllm.hpp try_vllm_engine).
std::string budget_label(vllm_semantics s, double utilization) {
  const std::string util = fixed2(utilization);
  switch (s) {
    case vllm_semantics::per_instance: return "budget (" + util + " x total)";
    case vllm_semantics::global_cap: return "budget (" + util + " x total, others included)";
    case vllm_semantics::verl_free_fraction: return "budget (" + util + " x free after profiling)";
  }
  return {};
}

std::string semantics_text(vllm_semantics s, bool graphs_in_budget) {
  switch (s) {
    case vllm_semantics::per_instance:
      return graphs_in_budget ? "KV = util x total - (weights + activation peak + non-torch + CUDA graph estimate)"
                              : "KV = util x total - (weights + activation peak + non-torch)";
    case vllm_semantics::global_cap: return "KV = util x total - (weights + activation peak + non-torch) - other processes";
    case vllm_semantics::verl_free_fraction: return "KV = util x (total - other processes - weights - activation peak - non-torch)";
  }
  return {};
}

int run_vllm(const vllm_args& a, std::ostream& out) {
  const device_choice device = device_of(a.gpu, a.gpu_memory);
  if (!device.given()) detail::fail("vllm needs the GPU: pass --gpu NAME or --gpu-memory SIZE");
  if (!a.model.given()) detail::fail("vllm needs the model: pass --model, --hf-config or the shape flags");
  if (a.enforce_eager && !a.cuda_graphs.empty()) detail::fail("--cuda-graphs contradicts --enforce-eager, which captures no CUDA graphs; drop one");
  const std::int64_t version = detail::version_number(a.version, "the vLLM version (--vllm-version)");
  const vllm_version_traits traits = vllm_traits(version, a.verl_patched);
  if (a.verl_patched && traits.semantics != vllm_semantics::verl_free_fraction)
    detail::fail("--verl-patched applies to verl's copies of vLLM up to 0.6.3; drop it for " + a.version);
  if (!a.graph_estimate.empty() && a.graph_estimate != "on" && a.graph_estimate != "off")
    detail::fail("--cudagraph-estimate takes on or off (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 or 0), not '" + a.graph_estimate + "'");
  if (a.graph_estimate == "on" && !traits.v1)
    detail::fail("--cudagraph-estimate on needs the V1 engine (vLLM >= 0.8); vLLM " + a.version + " captures its graphs outside the budget");
  if (a.enforce_eager && !a.graph_estimate.empty()) detail::fail("--cudagraph-estimate has no graphs to estimate under --enforce-eager; drop one");
  const bool graphs_in_budget = !a.enforce_eager && (a.graph_estimate.empty() ? traits.cuda_graphs_in_budget : a.graph_estimate == "on");

  vllm_engine_spec spec{};
  spec.model = model_of(a.model);
  spec.tp = a.tp;
  spec.weights = parse_dtype(a.dtype_name);
  spec.kv_dtype = parse_dtype(a.kv_dtype_name);
  spec.block_size = a.block_size;
  spec.max_model_len = a.max_model_len;
  if (a.max_lora_rank != 0 && vllm_max_lora_rank(a.max_lora_rank) != a.max_lora_rank)
    detail::fail("--max-lora-rank " + std::to_string(a.max_lora_rank) + " is not one vLLM accepts; use " +
                 std::to_string(vllm_max_lora_rank(a.max_lora_rank)) + " (1, 8, 16, 32, 64, 128, 256, 320 or 512)");
  spec.max_lora_rank = a.max_lora_rank;
  const vllm_batch_limits defaults = vllm_default_limits(version, h100_or_h200(device.name), a.max_model_len);
  spec.limits = {a.max_num_batched_tokens != 0 ? a.max_num_batched_tokens : defaults.max_num_batched_tokens,
                 a.max_num_seqs != 0 ? a.max_num_seqs : defaults.max_num_seqs};
  vllm_engine_config c{};
  c.total = device.capacity;
  c.gpu_memory_utilization = a.utilization;
  c.semantics = traits.semantics;
  c.refuse_if_free_below_budget = traits.refuse_if_free_below_budget;
  c.non_torch = a.cuda_context.empty() ? step_config{}.cuda_context : parse_bytes(a.cuda_context, "the CUDA context (--cuda-context)");
  c.other_processes = a.other_processes.empty() ? bytes{} : parse_bytes(a.other_processes, "the other processes' memory (--other-processes)");
  free_before_load("vLLM", c.total, c.non_torch, c.other_processes);  // refuses a card with nothing free
  c.cuda_graphs = a.cuda_graphs.empty() ? bytes{} : parse_bytes(a.cuda_graphs, "the CUDA graph memory (--cuda-graphs)");
  c.cuda_graphs_in_budget = graphs_in_budget;
  const vllm_sizing s = size_vllm_engine(spec, c);
  const vllm_engine_memory& m = s.memory;
  const bool starts = m.start == vllm_start::starts;
  const bool fits = starts && m.gpu_held + c.other_processes <= c.total;
  const std::string engine = std::string(traits.v1 ? "V1" : "V0") + (a.verl_patched ? ", verl-patched" : "");
  std::vector<std::string> notes;
  if (!a.enforce_eager && a.cuda_graphs.empty())
    notes.push_back(graphs_in_budget
                        ? "CUDA graphs come out of the KV budget (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS): the engine's total stays "
                          "the budget, but the KV cache above still holds their share; pass --cuda-graphs with vLLM's 'Estimated CUDA "
                          "graph memory'"
                        : "CUDA graphs are captured (no --enforce-eager) above the budget but not modelled: pass --cuda-graphs with what "
                          "vLLM logs");
  if (traits.v1) notes.push_back("the sampler term follows V0's top-k/top-p path; V1 and FlashInfer sampling are not modelled separately");

  if (a.json) {
    json j;
    j["inputs"] = {{"tp", spec.tp}, {"gpu_total_bytes", c.total.count()}, {"gpu_memory_utilization", a.utilization},
                   {"vllm_version", a.version}, {"engine", engine}, {"semantics", std::string(name(c.semantics))},
                   {"max_model_len", spec.max_model_len}, {"max_num_batched_tokens", spec.limits.max_num_batched_tokens},
                   {"max_num_seqs", spec.limits.max_num_seqs}, {"block_size", spec.block_size},
                   {"cuda_graphs_in_budget", graphs_in_budget}};
    j["per_gpu"] = {{"budget_bytes", m.budget.count()}, {"weights_bytes", s.weights.count()},
                    {"lora_slots_bytes", s.lora_slots.count()}, {"activation_peak_bytes", s.profile.peak().count()}, {"activation_layer_bytes", s.profile.layer.count()},
                    {"activation_sampler_bytes", s.profile.sampler.count()}, {"non_torch_bytes", c.non_torch.count()},
                    {"cuda_graphs_bytes", c.cuda_graphs.count()}, {"kv_room_bytes", m.kv_room.count()},
                    {"kv_cache_bytes", m.kv_cache.count()}, {"held_bytes", m.gpu_held.count()}};
    j["kv_cache"] = {{"block_bytes", s.kv_block.count()}, {"blocks", m.kv_blocks}, {"tokens", s.kv_tokens},
                     {"blocks_per_sequence", s.blocks_per_sequence}, {"full_length_sequences", s.full_length_sequences},
                     {"concurrency", s.concurrency}};
    j["starts"] = starts;
    j["fits"] = fits;
    if (!starts) j["refusal"] = m.refusal();
    j["notes"] = notes;
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem vllm: tp " << spec.tp << ", " << format_bytes(c.total, size_unit::GiB) << " GPU (" << device.source << "), vLLM "
      << a.version << " (" << engine << "), " << name(c.semantics) << ": " << semantics_text(c.semantics, graphs_in_budget) << "\n";
  out << table_head("per GPU");
  out << bytes_row(budget_label(c.semantics, a.utilization), m.budget) << "\n";
  out << bytes_row("weights (" + std::string(name(spec.weights)) + ")", s.weights) << "\n";
  if (s.lora_slots.count() != 0)
    out << bytes_row("LoRA slots (max_lora_rank " + std::to_string(spec.max_lora_rank) + ")", s.lora_slots) << "\n";
  out << bytes_row(std::string("activation peak (") + (s.profile.sampler >= s.profile.layer ? "sampler" : "layer") + ")", s.profile.peak())
      << "\n";
  out << bytes_row("non-torch (CUDA context)", c.non_torch) << "\n";
  if (c.other_processes.count() != 0) out << bytes_row("other processes", c.other_processes) << "\n";
  out << bytes_row("KV cache (" + format_count(m.kv_blocks) + " blocks)", m.kv_cache) << "\n";
  if (c.cuda_graphs.count() != 0)
    out << bytes_row(graphs_in_budget ? "CUDA graphs (estimated, in the budget)" : "CUDA graphs (outside the budget)", c.cuda_graphs) << "\n";
  out << bytes_row("held by the engine", m.gpu_held) << "\n";
  if (!starts) {
    out << "does not start: " << m.refusal() << "\n";
  } else {
    out << "KV cache: " << format_count(s.kv_tokens) << " tokens (" << format_count(m.kv_blocks) << " blocks of " << spec.block_size
        << " tokens, " << format_count(s.kv_block.count()) << " B each); " << format_count(s.full_length_sequences) << " sequences of "
        << format_count(spec.max_model_len) << " tokens at once (vLLM's maximum concurrency " << fixed2(s.concurrency) << "x)\n";
    out << (fits ? "fits" : "DOES NOT FIT") << ": " << format_bytes(m.gpu_held + c.other_processes, size_unit::GiB) << " of "
        << format_bytes(c.total, size_unit::GiB) << " on the GPU\n";
  }
  out << "profiled with max_num_batched_tokens " << format_count(spec.limits.max_num_batched_tokens) << " and max_num_seqs "
      << format_count(spec.limits.max_num_seqs) << (a.max_num_batched_tokens == 0 || a.max_num_seqs == 0 ? " (defaults of this version and GPU)" : "")
      << "; the widest layer moment " << format_bytes(s.profile.layer, size_unit::GiB) << ", sampling "
      << format_bytes(s.profile.sampler, size_unit::GiB) << "\n";
  for (const std::string& n : notes) out << "note: " << n << "\n";
  return 0;
}

}  // namespace

command add_vllm_command(CLI::App& parent) {
  return make_command<vllm_args>(parent, "vllm", "one vLLM engine: weights, profiled activation peak, KV cache, tokens and sequences",
                                 "zeromem vllm --model llama-3-8b --gpu h100-80gb --vllm-version 0.8.5 --max-model-len 8K", add_vllm_flags, run_vllm);
}

}  // namespace zeromem::cli
