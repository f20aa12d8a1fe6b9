// zeromem command-line program: thin parsing and printing over the headers. Every number comes from them.
#include "cli.hpp"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "zeromem/zeromem.hpp"

namespace zeromem::cli {
namespace {

using json = nlohmann::ordered_json;

// One line of text: CLI11 and exceptions may carry newlines.
std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  return s;
}

std::string bytes_row(const std::string& label, bytes b) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "  %-22s %24s %14s %14s", label.c_str(), format_exact(b).c_str(),
                format_bytes(b, size_unit::GB, 3).c_str(), format_bytes(b, size_unit::GiB, 3).c_str());
  return buf;
}

// ---- estimate -------------------------------------------------------------------------------------

struct estimate_args {
  std::string params;
  std::string precision_name = "mixed-bf16";
  std::string optimizer_name = "adamw";
  int zero_stage = -1;
  std::string fsdp;
  std::int64_t dp = 1;
  std::int64_t gpus_per_node = 8;
  std::int64_t shard_group = 0;
  std::int64_t hpz = 1;
  std::string offload_optimizer = "none";
  std::string offload_params = "none";
  bool pin_memory = false;
  bool fp32_grad_copy = false;
  std::string main_grads;
  std::string largest_layer = "0";
  bool json = false;
};

void add_estimate(CLI::App& app, estimate_args& a) {
  app.add_option("--params", a.params, "parameter count: 7.5e9, 7.5B, 350M, 1T")->required();
  app.add_option("--precision", a.precision_name, "mixed-bf16 | mixed-fp16 | bf16 | fp16 | fp32")
      ->capture_default_str();
  app.add_option("--optimizer", a.optimizer_name, "adam | adamw | sgd | sgd-momentum | adam-8bit | adafactor | lion")
      ->capture_default_str();
  auto* stage = app.add_option("--zero-stage", a.zero_stage, "DeepSpeed ZeRO stage 0-3 (default 0)");
  auto* fsdp = app.add_option("--fsdp", a.fsdp, "FSDP strategy: NO_SHARD | SHARD_GRAD_OP | FULL_SHARD | HYBRID_SHARD | _HYBRID_SHARD_ZERO2");
  stage->excludes(fsdp);
  app.add_option("--dp", a.dp, "data-parallel degree")->capture_default_str();
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs (ranks) per node")->capture_default_str();
  app.add_option("--shard-group", a.shard_group, "ranks sharing one copy of sharded states (default: dp)");
  app.add_option("--hpz", a.hpz, "ZeRO++ hpZ secondary partition size (1 = off)")->capture_default_str();
  app.add_option("--offload-optimizer", a.offload_optimizer, "none | cpu | nvme")->capture_default_str();
  app.add_option("--offload-params", a.offload_params, "none | cpu | nvme (ZeRO stage 3 only)")->capture_default_str();
  app.add_flag("--pin-memory", a.pin_memory, "offloaded states in pinned host memory");
  app.add_flag("--fp32-grad-copy", a.fp32_grad_copy, "optimizer keeps an fp32 copy of 16-bit gradients (DeepSpeed, Megatron fp16)");
  app.add_option("--main-grads", a.main_grads, "gradient accumulation dtype, e.g. fp32 (Megatron main grads)");
  app.add_option("--largest-layer-params", a.largest_layer, "parameters of the largest layer (ZeRO-3 gathers it whole)");
  app.add_flag("--json", a.json, "print JSON with exact byte counts");
}

training_states to_states(const estimate_args& a) {
  training_states t{};
  t.params = elements_of(parse_count(a.params, "the parameter count (--params)"));
  t.recipe = recipe_of(parse_precision(a.precision_name));
  t.recipe.fp32_gradient_copy = a.fp32_grad_copy;
  if (!a.main_grads.empty()) t.recipe.gradients = parse_dtype(a.main_grads);
  t.optimizer.kind = parse_optimizer(a.optimizer_name);
  t.dp = a.dp;
  t.gpus_per_node = a.gpus_per_node;
  if (!a.fsdp.empty()) {
    t.zero = fsdp_config(parse_fsdp_strategy(a.fsdp), a.shard_group > 0 ? a.shard_group : a.gpus_per_node);
    if (a.fsdp != "HYBRID_SHARD" && a.fsdp != "_HYBRID_SHARD_ZERO2") t.zero.shard_group = a.shard_group;
  } else {
    t.zero.stage = a.zero_stage < 0 ? 0 : a.zero_stage;
    t.zero.shard_group = a.shard_group;
  }
  t.zero.hpz_partition = a.hpz;
  t.zero.optimizer = {parse_offload_device(a.offload_optimizer), a.pin_memory};
  t.zero.params = {parse_offload_device(a.offload_params), a.pin_memory};
  t.largest_layer = elements_of(parse_count(a.largest_layer, "the largest layer (--largest-layer-params)"));
  validate(t);
  return t;
}

json placement_json(const placement& p) {
  return {{"gpu_bytes", p.gpu.count()}, {"host_bytes", p.host.count()}, {"host_pinned_bytes", p.host_pinned.count()},
          {"nvme_bytes", p.nvme.count()}};
}

json estimate_json(const training_states& t, const model_state_estimate& e) {
  const model_state_terms& m = e.per_rank;
  json j;
  j["inputs"] = {{"params", t.params.count()},
                 {"weights_dtype", std::string(name(t.recipe.weights))},
                 {"gradients_dtype", std::string(name(t.recipe.gradients))},
                 {"fp32_master", t.recipe.fp32_master},
                 {"fp32_gradient_copy", t.recipe.fp32_gradient_copy},
                 {"optimizer", std::string(name(t.optimizer.kind))},
                 {"zero_stage", t.zero.stage},
                 {"dp", t.dp},
                 {"shard_group", e.shard_group},
                 {"gpus_per_node", t.gpus_per_node},
                 {"ranks_per_node", e.ranks_per_node},
                 {"offload_optimizer", std::string(name(t.zero.optimizer.device))},
                 {"offload_params", std::string(name(t.zero.params.device))},
                 {"hpz_partition", t.zero.hpz_partition},
                 {"largest_layer_params", t.largest_layer.count()}};
  j["per_gpu"] = {{"weights_bytes", (m.weights.gpu + m.hpz_secondary.gpu).count()},
                  {"gradients_bytes", (m.gradients.gpu + m.fp32_gradients.gpu).count()},
                  {"optimizer_states_bytes", (m.master_weights.gpu + m.optimizer_moments.gpu).count()},
                  {"gathered_layer_bytes", m.gathered_layer.gpu.count()},
                  {"total_bytes", e.gpu().count()}};
  j["per_rank_host"] = {{"total_bytes", e.host_per_rank().count()},
                        {"pinned_bytes", e.total_per_rank().host_pinned.count()}};
  j["per_node_host"] = {{"ranks", e.ranks_per_node},
                        {"total_bytes", e.host_per_node().count()},
                        {"pinned_bytes", e.host_pinned_per_node().count()}};
  j["per_node_nvme"] = {{"total_bytes", e.nvme_per_node().count()}};
  json terms = json::object();
  m.for_each([&](const char* term, const placement& p) { terms[term] = placement_json(p); });
  j["terms_per_rank"] = terms;
  return j;
}

void print_estimate(std::ostream& out, const training_states& t, const model_state_estimate& e) {
  const model_state_terms& m = e.per_rank;
  out << "zeromem estimate: model states\n";
  out << "  parameters   " << format_count(t.params.count()) << "\n";
  out << "  recipe       weights " << name(t.recipe.weights) << ", gradients " << name(t.recipe.gradients)
      << (t.recipe.fp32_master ? ", fp32 master weights" : ", no master copy")
      << (t.recipe.fp32_gradient_copy ? ", fp32 gradient copy" : "") << "; optimizer " << name(t.optimizer.kind)
      << " (states in " << name(t.recipe.optimizer_dtype()) << ")\n";
  out << "  sharding     ZeRO stage " << t.zero.stage << " over " << e.shard_group << " ranks (dp " << t.dp << "), "
      << e.ranks_per_node << " ranks per node\n";
  out << "  offload      optimizer " << name(t.zero.optimizer.device) << ", parameters " << name(t.zero.params.device)
      << (t.zero.optimizer.pin_memory ? " (pinned)" : "") << "\n";
  if (t.optimizer.kind == optimizer_kind::adafactor)
    out << "  note         Adafactor without tensor shapes: its factored state is a lower bound\n";
  if (t.zero.stage == 3 && t.largest_layer.count() == 0)
    out << "  note         ZeRO-3 gathers each layer whole; pass --largest-layer-params to count it\n";

  out << "\nPer GPU (most loaded rank)\n";
  char head[160];
  std::snprintf(head, sizeof head, "  %-22s %24s %14s %14s\n", "term", "exact", "GB (1e9 B)", "GiB (2^30 B)");
  out << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.gpu.count() != 0) out << bytes_row(term, p.gpu) << "\n";
  });
  out << bytes_row("total", e.gpu()) << "\n";

  out << "\nPer node host RAM (" << e.ranks_per_node << " ranks x per-rank bytes)\n" << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.host.count() != 0) out << bytes_row(term, p.host * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.host_per_node()) << "\n";
  out << bytes_row("of which pinned", e.host_pinned_per_node()) << "\n";

  out << "\nPer node NVMe\n" << head;
  m.for_each([&](const char* term, const placement& p) {
    if (p.nvme.count() != 0) out << bytes_row(term, p.nvme * e.ranks_per_node) << "\n";
  });
  out << bytes_row("total", e.nvme_per_node()) << "\n";
  out << "\nModel states only: activations, buffers and framework overheads are not included.\n";
}

// ---- deepspeed ------------------------------------------------------------------------------------

struct deepspeed_args {
  std::string params;
  std::string largest_layer;
  std::int64_t gpus_per_node = 1;
  std::int64_t nodes = 1;
  double factor = 1.5;
  bool pre_2024 = false;
  bool json = false;
};

void add_deepspeed(CLI::App& app, deepspeed_args& a) {
  app.add_option("--params", a.params, "total parameters: 2783959040, 2.8B")->required();
  app.add_option("--largest-layer-params", a.largest_layer, "parameters of the largest layer (zero3)");
  app.add_option("--gpus-per-node", a.gpus_per_node, "GPUs per node")->capture_default_str();
  app.add_option("--nodes", a.nodes, "nodes")->capture_default_str();
  app.add_option("--additional-buffer-factor", a.factor, "DeepSpeed's CPU buffer factor")->capture_default_str();
  app.add_flag("--pre-2024", a.pre_2024, "zero2: the GPU formula before DeepSpeed PR #5099 (4P + 16P/N)");
  app.add_flag("--json", a.json, "print JSON with the exact bytes of each row");
}

std::string ds_options(bool zero3, const deepspeed::estimator_row& r) {
  if (!zero3) return std::string("cpu_offload=") + (r.offload_optimizer ? "1" : "0");
  // DeepSpeed pads the device name to four characters: f'{OFFLOAD_CPU_DEVICE:4}' == "cpu ".
  return std::string("offload_param=") + (r.offload_param ? "cpu " : "none") +
         ", offload_optimizer=" + (r.offload_optimizer ? "cpu " : "none") + ", zero_init=" + (r.zero_init ? "1" : "0");
}

int run_deepspeed(const std::string& which, const deepspeed_args& a, std::ostream& out) {
  const bool zero3 = which == "zero3";
  if (!zero3 && which != "zero2") detail::fail("unknown estimator '" + which + "'; expected zero2 or zero3");
  const std::int64_t P = parse_count(a.params, "the parameter count (--params)");
  const deepspeed::cluster c{a.gpus_per_node, a.nodes, a.factor};
  std::vector<deepspeed::estimator_row> rows;
  std::int64_t L = 0;
  if (zero3) {
    if (a.largest_layer.empty()) detail::fail("zero3 needs --largest-layer-params (DeepSpeed's largest_layer_params)");
    L = parse_count(a.largest_layer, "the largest layer (--largest-layer-params)");
    for (const auto& r : deepspeed::zero3_table(P, L, c)) rows.push_back(r);
  } else {
    if (!a.largest_layer.empty()) detail::fail("zero2 takes no --largest-layer-params; drop it or use zero3");
    for (const auto& r : deepspeed::zero2_table(P, c, a.pre_2024 ? deepspeed::zero2_formula::pre_2024
                                                                  : deepspeed::zero2_formula::current))
      rows.push_back(r);
  }
  if (a.json) {
    json j;
    j["estimator"] = zero3 ? "estimate_zero3_model_states_mem_needs" : "estimate_zero2_model_states_mem_needs";
    j["params"] = P;
    if (zero3) j["largest_layer_params"] = L;
    j["gpus_per_node"] = a.gpus_per_node;
    j["nodes"] = a.nodes;
    j["additional_buffer_factor"] = a.factor;
    if (!zero3) j["formula"] = a.pre_2024 ? "pre-2024" : "current";
    j["rows"] = json::array();
    for (const auto& r : rows) {
      json row{{"offload_optimizer", r.offload_optimizer ? "cpu" : "none"}};
      if (zero3) {
        row["offload_param"] = r.offload_param ? "cpu" : "none";
        row["zero_init"] = r.zero_init;
      }
      row["cpu_bytes_per_node"] = r.cpu.count();
      row["gpu_bytes_per_gpu"] = r.gpu.count();
      j["rows"].push_back(row);
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  // DeepSpeed's own text (estimate_zero{2,3}_model_states_mem_needs_all_cold), line for line.
  out << "Estimated memory needed for params, optim states and gradients for a:\n";
  out << "HW: Setup with " << a.nodes << (a.nodes > 1 ? " nodes, " : " node, ") << a.gpus_per_node
      << (a.gpus_per_node > 1 ? " GPUs" : " GPU") << " per node.\n";
  out << "SW: Model with " << P / 1'000'000 << "M total params";
  if (zero3) out << ", " << L / 1'000'000 << "M largest layer params";
  out << ".\n";
  out << "  per CPU  |  per GPU |   Options\n";
  for (const auto& r : rows) {
    char buf[200];
    std::snprintf(buf, sizeof buf, " %7.2fGB | %6.2fGB | %s", to_gib(r.cpu), to_gib(r.gpu), ds_options(zero3, r).c_str());
    out << buf << "\n";
  }
  out << "(DeepSpeed's \"GB\" is GiB = 2^30 B; exact bytes with --json)\n";
  return 0;
}

}  // namespace

int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  CLI::App app{"zeromem: bytes per GPU, host and NVMe of LLM jobs, before launch", "zeromem"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(version_string));

  estimate_args est;
  CLI::App* estimate = app.add_subcommand("estimate", "model-state memory per GPU, per node's host RAM and NVMe");
  add_estimate(*estimate, est);

  deepspeed_args ds;
  std::string which;
  CLI::App* dsapp = app.add_subcommand("deepspeed", "DeepSpeed's own estimate_zero{2,3}_model_states_mem_needs table");
  dsapp->add_option("estimator", which, "zero2 | zero3")->required();
  add_deepspeed(*dsapp, ds);

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes arguments in reverse order
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    out << (app.got_subcommand(estimate) ? estimate->help() : app.got_subcommand(dsapp) ? dsapp->help() : app.help());
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    out << app.help("", CLI::AppFormatMode::All);
    return 0;
  } catch (const CLI::CallForVersion&) {
    out << version_string << "\n";
    return 0;
  } catch (const CLI::ParseError& e) {
    err << "zeromem: " << one_line(e.what()) << " (see zeromem --help)\n";
    return 2;
  }

  try {
    if (app.got_subcommand(estimate)) {
      const training_states t = to_states(est);
      const model_state_estimate e = estimate_model_states(t);
      if (est.json)
        out << estimate_json(t, e).dump(2) << "\n";
      else
        print_estimate(out, t, e);
      return 0;
    }
    return run_deepspeed(which, ds, out);
  } catch (const std::exception& e) {  // invalid_argument and overflow_error carry "zeromem: ..." already
    err << one_line(e.what()) << "\n";
    return 2;
  }
}

}  // namespace zeromem::cli
