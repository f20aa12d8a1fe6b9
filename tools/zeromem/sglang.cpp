// `zeromem sglang`: one SGLang engine on one of its GPUs: weights, the KV pool mem_fraction_static leaves, the
// req_to_token rows, the room left for activations and CUDA graphs, and the tokens it holds.
#include <ostream>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct sglang_args {
  model_flags model;
  std::string gpu, gpu_memory;
  std::int64_t tp = 1;
  double fraction = 0.0;
  std::int64_t context_len = 0;
  std::int64_t max_running_requests = 0;  // 0: SGLang's default from the KV tokens
  std::int64_t page_size = 1;
  std::string dtype_name = "bf16", kv_dtype_name = "bf16";
  std::string other_processes, cuda_context;
  bool json = false;
};

void add_sglang_flags(CLI::App& app, sglang_args& a) {
  add_model_flags(app, a.model, false);
  add_device_flags(app, a.gpu, a.gpu_memory, "the GPU the engine runs on (one of the two is required)");
  integer_option(app, "--tp", a.tp, "tp_size")->capture_default_str();
  // SGLang derives its default from the GPU and tp (server_args.py), differently across releases: asked, not assumed.
  real_option(app, "--mem-fraction-static", a.fraction, "mem_fraction_static, in (0, 1) (verl: rollout.gpu_memory_utilization)", 0.0, 1.0, false, false)
      ->required();
  tokens_option(app, "--context-len", a.context_len, "the model's context length (SGLang: max_position_embeddings unless --context-length)")
      ->required();
  integer_option(app, "--max-running-requests", a.max_running_requests, "max_running_requests (default: SGLang's, from the KV tokens)");
  integer_option(app, "--page-size", a.page_size, "page_size")->capture_default_str();
  text_option(app, "--dtype", a.dtype_name, "weights: bf16, fp16, fp32")->capture_default_str();
  text_option(app, "--kv-dtype", a.kv_dtype_name, "KV pool: bf16, fp16, fp8_e4m3, fp8_e5m2, fp32")->capture_default_str();
  text_option(app, "--other-processes", a.other_processes, "GPU memory held by other processes when the engine starts, such as 20GiB");
  text_option(app, "--cuda-context", a.cuda_context, "its CUDA context and NCCL (default: measured on an H100, 650,969,088 B)");
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

int run_sglang(const sglang_args& a, std::ostream& out) {
  const device_choice device = device_of(a.gpu, a.gpu_memory);
  if (!device.given()) detail::fail("sglang needs the GPU: pass --gpu NAME or --gpu-memory SIZE");
  if (!a.model.given()) detail::fail("sglang needs the model: pass --model, --hf-config or the shape flags");
  const transformer_config m = model_of(a.model);
  const bytes context = a.cuda_context.empty() ? step_config{}.cuda_context : parse_bytes(a.cuda_context, "the CUDA context (--cuda-context)");
  const bytes others = a.other_processes.empty() ? bytes{} : parse_bytes(a.other_processes, "the other processes' memory (--other-processes)");
  const bytes free_before = free_before_load("SGLang", device.capacity, context, others);
  const sglang_engine_config c = sglang_config_of(m, a.tp, free_before, a.fraction, a.context_len, a.max_running_requests,
                                                  parse_dtype(a.dtype_name), parse_dtype(a.kv_dtype_name), a.page_size);
  const sglang_engine_memory e = sglang_engine(c);
  const bytes held = c.weights + e.kv_pool + e.req_to_token + context;
  const std::int64_t sequences = e.kv_tokens / a.context_len;

  if (a.json) {
    json j;
    j["inputs"] = {{"tp", a.tp}, {"gpu_total_bytes", device.capacity.count()}, {"mem_fraction_static", a.fraction},
                   {"context_len", a.context_len}, {"max_running_requests", a.max_running_requests}, {"page_size", a.page_size}};
    j["per_gpu"] = {{"free_before_load_bytes", free_before.count()}, {"weights_bytes", c.weights.count()},
                    {"rest_bytes", e.rest.count()}, {"kv_pool_bytes", e.kv_pool.count()}, {"req_to_token_bytes", e.req_to_token.count()},
                    {"cuda_context_bytes", context.count()}, {"runtime_room_bytes", e.runtime_room.count()}, {"held_bytes", held.count()}};
    j["kv_pool"] = {{"bytes_per_token", c.kv_per_token.count()}, {"tokens", e.kv_tokens}, {"max_requests", e.max_requests},
                    {"full_length_sequences", sequences}};
    j["starts"] = e.starts();
    if (!e.starts()) j["refusal"] = e.refusal();
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem sglang: tp " << a.tp << ", " << format_bytes(device.capacity, size_unit::GiB) << " GPU (" << device.source
      << "); KV pool = free after loading - free before loading x (1 - mem_fraction_static)\n";
  out << table_head("per GPU");
  out << bytes_row("free before loading", free_before) << "\n";
  out << bytes_row("weights (" + std::string(name(parse_dtype(a.dtype_name))) + ")", c.weights) << "\n";
  out << bytes_row("KV pool (" + format_count(e.kv_tokens) + " tokens)", e.kv_pool) << "\n";
  out << bytes_row("req_to_token (" + format_count(e.max_requests) + " requests)", e.req_to_token) << "\n";
  out << bytes_row("CUDA context", context) << "\n";
  out << bytes_row("held by the engine", held) << "\n";
  out << bytes_row("free for activations, graphs", e.runtime_room) << "\n";
  if (!e.starts()) out << "does not start: " << e.refusal() << "\n";
  else
    out << "KV pool: " << format_count(e.kv_tokens) << " tokens of " << format_count(c.kv_per_token.count()) << " B; "
        << format_count(sequences) << " sequences of " << format_count(a.context_len) << " tokens at once\n";
  out << "note: SGLang's activations and CUDA graphs are not modelled; they run in the free share on the line above\n";
  return 0;
}

}  // namespace

command add_sglang_command(CLI::App& parent) {
  return make_command<sglang_args>(parent, "sglang", "one SGLang engine: weights, KV pool, req_to_token rows, tokens it holds",
                                   "zeromem sglang --model qwen2.5-7b --gpu h100-80gb --mem-fraction-static 0.8 --context-len 32K",
                                   add_sglang_flags, run_sglang);
}

}  // namespace zeromem::cli
