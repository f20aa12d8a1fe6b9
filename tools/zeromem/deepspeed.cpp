// `zeromem deepspeed`: DeepSpeed's own estimate_zero{2,3}_model_states_mem_needs tables, byte for byte.
#include <cstdio>
#include <memory>
#include <ostream>
#include <vector>

#include "common.hpp"

namespace zeromem::cli {
namespace {

struct deepspeed_args {
  std::string which;
  std::string params;
  std::string largest_layer;
  std::int64_t gpus_per_node = 1;
  std::int64_t nodes = 1;
  double factor = 1.5;
  bool pre_2024 = false;
  bool json = false;
};

void add_deepspeed_flags(CLI::App& app, deepspeed_args& a) {
  app.add_option("estimator", a.which, "zero2 | zero3")->required();
  text_option(app, "--params", a.params, "total parameters: 2783959040, 2.8B")->required();
  text_option(app, "--largest-layer-params", a.largest_layer, "parameters of the largest layer (zero3)");
  integer_option(app, "--gpus-per-node", a.gpus_per_node, "GPUs per node")->capture_default_str();
  integer_option(app, "--nodes", a.nodes, "nodes")->capture_default_str();
  real_option(app, "--additional-buffer-factor", a.factor, "DeepSpeed's CPU buffer factor", 0.0, 1e6, true)->capture_default_str();
  app.add_flag("--pre-2024", a.pre_2024, "zero2: the GPU formula before DeepSpeed PR #5099 (4P + 16P/N)");
  app.add_flag("--json", a.json, "print JSON with the exact bytes of each row");
}

std::string ds_options(bool zero3, const deepspeed::estimator_row& r) {
  if (!zero3) return std::string("cpu_offload=") + (r.offload_optimizer ? "1" : "0");
  // DeepSpeed pads the device name to four characters: f'{OFFLOAD_CPU_DEVICE:4}' == "cpu ".
  return std::string("offload_param=") + (r.offload_param ? "cpu " : "none") + ", offload_optimizer=" + (r.offload_optimizer ? "cpu " : "none") +
         ", zero_init=" + (r.zero_init ? "1" : "0");
}

int run_deepspeed(const deepspeed_args& a, std::ostream& out) {
  const bool zero3 = a.which == "zero3";
  if (!zero3 && a.which != "zero2") detail::fail("unknown estimator " + detail::quoted(a.which) + "; expected zero2 or zero3");
  const std::int64_t P = parse_count(a.params, "the parameter count (--params)");
  const deepspeed::cluster c{a.gpus_per_node, a.nodes, a.factor};
  std::vector<deepspeed::estimator_row> rows;
  std::int64_t L = 0;
  if (zero3) {
    if (a.largest_layer.empty()) detail::fail("zero3 needs --largest-layer-params (DeepSpeed's largest_layer_params)");
    if (a.pre_2024) detail::fail("--pre-2024 selects zero2's earlier GPU formula (DeepSpeed PR #5099); drop it or use zero2");
    L = parse_count(a.largest_layer, "the largest layer (--largest-layer-params)");
    for (const auto& r : deepspeed::zero3_table(P, L, c)) rows.push_back(r);
  } else {
    if (!a.largest_layer.empty()) detail::fail("zero2 takes no --largest-layer-params; drop it or use zero3");
    for (const auto& r : deepspeed::zero2_table(P, c, a.pre_2024 ? deepspeed::zero2_formula::pre_2024 : deepspeed::zero2_formula::current))
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
  out << "HW: Setup with " << a.nodes << (a.nodes > 1 ? " nodes, " : " node, ") << a.gpus_per_node << (a.gpus_per_node > 1 ? " GPUs" : " GPU")
      << " per node.\n";
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

command add_deepspeed_command(CLI::App& parent) {
  return make_command<deepspeed_args>(parent, "deepspeed", "DeepSpeed's own estimate_zero{2,3}_model_states_mem_needs table",
                                     "zeromem deepspeed zero3 --params 2783959040 --largest-layer-params 65798144", add_deepspeed_flags, run_deepspeed);
}

}  // namespace zeromem::cli
