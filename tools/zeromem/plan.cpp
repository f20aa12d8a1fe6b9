// `zeromem plan`: the configurations of one training job that fit, ranked.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <ostream>
#include <vector>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct plan_args {
  model_flags model;
  std::string gpu;
  std::string gpu_memory;
  std::int64_t gpus = 8;
  std::int64_t nodes = 1;
  std::string host_memory;
  std::string nvme_capacity;
  std::int64_t seq_len = 0;
  std::int64_t global_batch = 0;
  std::string precision_name = "mixed-bf16";
  std::string optimizer_name = "adamw";
  std::string implementation_name{name(activation_config{}.impl)};
  std::string attention_name{name(activation_config{}.attention)};  // the library's default
  std::string min_headroom = "5%";
  std::int64_t max_micro_batch = 16;
  std::int64_t top = 10;
  std::string svg;
  bool json = false;
  bool allow_lora = false;
  std::int64_t lora_rank = plan_request{}.lora.rank;
  std::string lora_targets = "all-linear";
};

void add_plan_flags(CLI::App& app, plan_args& a) {
  add_model_flags(app, a.model, false);
  add_device_flags(app, a.gpu, a.gpu_memory, "the capacity every configuration must fit (one of the two is required)");
  integer_option(app, "--gpus", a.gpus, "GPUs per node")->capture_default_str();
  integer_option(app, "--nodes", a.nodes, "nodes")->capture_default_str();
  text_option(app, "--host-memory", a.host_memory, "host RAM per node, e.g. 1TB or 760GB (offload must fit in it; default: not checked)");
  text_option(app, "--nvme-capacity", a.nvme_capacity,
              "NVMe per node for ZeRO-Infinity, e.g. 3.84TB: also try the optimizer (and parameters) on it, which must fit (default: no NVMe)");
  tokens_option(app, "--seq-len", a.seq_len, "tokens per sequence: 4096, 32K (= 32,768)")->required();
  integer_option(app, "--global-batch", a.global_batch, "sequences per step (dp x micro-batch must divide it)");
  text_option(app, "--precision", a.precision_name, "mixed-bf16 | mixed-fp16 | bf16 | fp16 | fp32 | amp-bf16 | amp-fp16")->capture_default_str();
  text_option(app, "--optimizer", a.optimizer_name, optimizer_names())->capture_default_str();
  text_option(app, "--implementation", a.implementation_name, "hf (transformers' modeling code) | eager | fused | paper (docs/activations.md)")->capture_default_str();
  text_option(app, "--attention", a.attention_name, attention_help)->capture_default_str();
  share_or_size_option(app, "--min-headroom", a.min_headroom,
              "keep at least this much free per GPU: a share of its capacity (5%, the step model's stated accuracy) or a size (4GiB, 0B)")
      ->capture_default_str();
  integer_option(app, "--max-micro-batch", a.max_micro_batch, "largest micro-batch tried (powers of 2)")->capture_default_str();
  integer_option(app, "--top", a.top, "configurations to print")->capture_default_str();
  text_option(app, "--svg", a.svg, "write memory against micro-batch for the best configuration to this file");
  app.add_flag("--allow-lora", a.allow_lora, "also try LoRA adapters on a frozen base and QLoRA (NF4 base), ranked after full training");
  integer_option(app, "--lora-rank", a.lora_rank, "LoRA rank tried with --allow-lora", 1, 1 << 20)->capture_default_str();
  text_option(app, "--lora-targets", a.lora_targets, "LoRA target modules tried with --allow-lora (Hugging Face names or all-linear)")
      ->capture_default_str();
  app.add_flag("--json", a.json, "print JSON with a configs array");
}

json plan_config_json(const plan_config& c) {
  return {{"zero_stage", c.stage}, {"offload_optimizer", std::string(name(c.optimizer_offload))},
          {"offload_params", std::string(name(c.params_offload))}, {"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp},
          {"sequence_parallel", c.tp > 1}, {"micro_batch", c.micro_batch},
          {"gradient_accumulation_steps", c.accumulation_steps}, {"training", std::string(name(c.training))}, {"recompute", std::string(name(c.recomputation))},
          {"per_gpu_bytes", c.gpu.count()}, {"headroom_bytes", c.headroom.count()},
          {"offloaded_host_bytes_per_node", c.offloaded_per_node.count()}, {"offloaded_nvme_bytes_per_node", c.nvme_per_node.count()}};
}

plan_request request_of(const plan_args& a, const device_choice& device) {
  if (!a.model.given()) detail::fail("plan needs a model: --model PRESET, --hf-config FILE or --hidden ...");
  if (!device.given()) detail::fail("plan needs the GPU: --gpu NAME or --gpu-memory SIZE");
  plan_request r{};
  r.model = model_of(a.model);
  r.gpu_capacity = device.capacity;
  r.step.blas_workspaces = blas_workspaces_arg("", a.gpu, training_blas_handles, r.step.blas_workspaces);
  if (!a.gpu.empty()) r.step.multiprocessors = find_gpu(a.gpu).multiprocessors;
  r.gpus_per_node = a.gpus;
  r.nodes = a.nodes;
  if (!a.host_memory.empty()) {
    r.host_memory = parse_bytes(a.host_memory, "the host memory (--host-memory)");
    if (r.host_memory.count() == 0) detail::fail("--host-memory must be more than 0 B; leave it out to not check host RAM");
  }
  if (!a.nvme_capacity.empty()) {
    r.nvme_capacity = parse_bytes(a.nvme_capacity, "the NVMe capacity (--nvme-capacity)");
    if (r.nvme_capacity.count() == 0) detail::fail("--nvme-capacity must be more than 0 B; leave it out to not offload to NVMe");
  }
  r.seq_len = a.seq_len;
  r.global_batch = a.global_batch;
  r.recipe = recipe_of(parse_precision(a.precision_name));
  r.optimizer.kind = parse_optimizer(a.optimizer_name);
  r.step.optimizer = deepspeed_default_impl(r.optimizer.kind);  // plan's layouts are DeepSpeed jobs (ZeRO stages)
  r.impl = parse_implementation(a.implementation_name);
  r.attention = parse_attention(a.attention_name);
  if (a.min_headroom.back() == '%') {  // checked when parsed: a share in [0, 100) or a size
    r.min_headroom_fraction = parse_real(a.min_headroom.substr(0, a.min_headroom.size() - 1), 0.0, 100.0, false) / 100.0;
  } else {
    r.min_headroom = parse_bytes(a.min_headroom, "the minimum headroom (--min-headroom)");
    r.min_headroom_fraction = 0.0;
  }
  r.max_micro_batch = a.max_micro_batch;
  r.max_results = static_cast<std::size_t>(a.top);
  r.allow_lora = a.allow_lora;
  if (!a.allow_lora && (a.lora_rank != r.lora.rank || a.lora_targets != "all-linear"))
    detail::fail("--lora-rank and --lora-targets choose the adapters --allow-lora tries; add --allow-lora");
  r.lora.rank = a.lora_rank;
  r.lora.targets = parse_lora_targets(a.lora_targets);
  return r;
}

void write_svg(const plan_args& a, const plan_request& r, const plan_result& p) {
  if (p.configs.empty()) detail::fail("nothing fits, so there is no best configuration to chart in " + detail::quoted(a.svg, 256));
  std::vector<svg_point> points;
  for (std::int64_t mb = 1; points.size() < 16; mb *= 2) {  // 2^15 sequences per micro-batch is past any GPU
    plan_config c = p.configs.front();
    c.micro_batch = mb;
    points.push_back({std::to_string(mb), evaluate(r, c).gpu});
    if (mb > r.max_micro_batch / 2) break;  // the next doubling passes the largest micro-batch tried
  }
  const plan_config& best = p.configs.front();
  write_file(a.svg, svg_line("zeromem plan: per-GPU memory of the best configuration (ZeRO " + std::to_string(best.stage) + ", dp " +
                                 std::to_string(best.dp) + ", tp " + std::to_string(best.tp) + ", pp " + std::to_string(best.pp) +
                                 ", recompute " + std::string(name(best.recomputation)) + ")",
                             "micro-batch", points, r.gpu_capacity));
}

int run_plan(const plan_args& a, std::ostream& out) {
  const device_choice g = device_of(a.gpu, a.gpu_memory);
  const plan_request r = request_of(a, g);
  const plan_result p = plan(r);
  if (p.evaluated == 0)
    detail::fail(r.global_batch > 0 ? "no configuration to evaluate: dp x micro-batch must divide --global-batch " +
                                          std::to_string(r.global_batch) + ", with dp = GPUs / (tp x pp); use a global batch that is a "
                                          "multiple of the data-parallel ranks, or fewer GPUs"
                                    : "no configuration to evaluate: no tensor x pipeline split of the model fits the GPUs; check --gpus");
  if (!a.svg.empty()) write_svg(a, r, p);
  if (a.json) {
    json j{{"gpu", g.name}, {"capacity_bytes", g.capacity.count()}, {"capacity_source", g.source}, {"gpus", detail::checked_mul(r.gpus_per_node, r.nodes)},
           {"min_headroom_bytes", required_headroom_of(r).count()}, {"objective", p.objective}, {"evaluated", p.evaluated},
           {"fitting", p.fitting}, {"left_out", p.left_out}};
    j["configs"] = json::array();
    for (const plan_config& c : p.configs) j["configs"].push_back(plan_config_json(c));
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "zeromem plan: " << format_count(count_parameters(r.model).total.count()) << " parameters on " << r.nodes << " x " << r.gpus_per_node
      << " GPUs (" << g.name << ", " << format_bytes(g.capacity, size_unit::GiB) << " each), " << r.seq_len << " tokens per sequence, "
      << a.precision_name << ", " << name(r.optimizer.kind) << "\n";
  out << "  evaluated " << p.evaluated << " configurations; " << p.fitting << " fit" << (p.fitting > static_cast<std::int64_t>(p.configs.size()) ? "; the best " + std::to_string(p.configs.size()) + " shown" : "") << "\n";
  out << "  fits: at least " << format_auto(required_headroom_of(r)) << " left per GPU (--min-headroom " << a.min_headroom
      << ")\n";
  out << "  ranked by: " << p.objective << "\n";
  out << "  per GPU: the step's peak (forward, backward or optimizer step; activations " << name(r.impl) << ", " << name(r.attention)
      << " attention; loss " << name(r.step.loss) << ", optimizer " << name(r.step.optimizer) << ") + DeepSpeed buffers + the CUDA context and modules"
      << (r.global_batch > 0 ? "; with accumulation (accum > 1) a step's later micro-batches start with every gradient" : "") << "\n\n";
  // What a configuration offloads, and where: the optimizer alone, or the parameters too, on the CPU or NVMe.
  const auto offload_of = [](const plan_config& c) -> std::string {
    if (c.optimizer_offload == offload_device::none) return "none";
    if (c.optimizer_offload == offload_device::cpu) return c.params_offload == offload_device::cpu ? "params+optim" : "optimizer";
    return c.params_offload == offload_device::none ? "optim:nvme" : c.params_offload == offload_device::cpu ? "optim:nvme params:cpu" : "params+optim:nvme";
  };
  int width = 14;
  for (const plan_config& c : p.configs) width = std::max(width, static_cast<int>(offload_of(c).size()));
  const bool nvme = r.nvme_capacity.count() > 0;
  char line[320];
  std::snprintf(line, sizeof line, "  %4s %-5s %-5s %-*s %4s %4s %4s %6s %5s %-9s %12s %12s %14s%s\n", "rank", "train", "ZeRO", width, "offload", "dp", "tp",
                "pp", "micro", "accum", "recompute", "per GPU", "headroom", "host per node", nvme ? "  NVMe per node" : "");
  out << line;
  int rank = 1;
  for (const plan_config& c : p.configs) {
    std::snprintf(line, sizeof line, "  %4d %-5s %-5d %-*s %4lld %4lld %4lld %6lld %5lld %-9s %12s %12s %14s", rank++,
                  std::string(name(c.training)).c_str(), c.stage, width, offload_of(c).c_str(),
                  static_cast<long long>(c.dp), static_cast<long long>(c.tp), static_cast<long long>(c.pp),
                  static_cast<long long>(c.micro_batch), static_cast<long long>(c.accumulation_steps), std::string(name(c.recomputation)).c_str(),
                  format_bytes(c.gpu, size_unit::GiB).c_str(), format_bytes(c.headroom, size_unit::GiB).c_str(),
                  format_bytes(c.offloaded_per_node, size_unit::GB).c_str());
    out << line;
    if (nvme) {
      std::snprintf(line, sizeof line, " %15s", format_bytes(c.nvme_per_node, size_unit::GB).c_str());
      out << line;
    }
    out << "\n";
  }
  if (p.configs.empty())
    out << "  nothing fits: add GPUs, shorten sequences, or allow more host memory" << (nvme ? "" : " (or NVMe: --nvme-capacity)") << "\n";
  // As estimate's note: transformers' nodes inside a layer are walked at tp 1 only (walks_inside_layers).
  const bool unwalked = std::any_of(p.configs.begin(), p.configs.end(), [&](const plan_config& c) {
    return r.impl == implementation::hf && !walks_inside_layers(plan_job(r, c).activations);
  });
  if (unwalked)
    out << "  note: under transformers' code the rows with tp above 1 read each layer's backward before and after it only "
           "(its nodes inside a layer are walked at tp 1)\n";
  for (const std::string& why : p.left_out) out << "  left out: " << why << "\n";
  return 0;
}

}  // namespace

command add_plan_command(CLI::App& parent) {
  return make_command<plan_args>(parent, "plan", "search parallelism, ZeRO stage, offload, micro-batch and recompute for configurations that fit",
                                     "zeromem plan --model llama-3-70b --gpu a100-80gb --gpus 8 --nodes 4 --seq-len 4096", add_plan_flags, run_plan);
}

}  // namespace zeromem::cli
