// DeepSpeed's own model-state estimators, reproduced operation for operation so that zeromem's model can be
// set beside DeepSpeed's answer on the same inputs:
//   deepspeed/runtime/zero/stage_1_and_2.py  estimate_zero2_model_states_mem_needs
//   deepspeed/runtime/zero/stage3.py         estimate_zero3_model_states_mem_needs
// DeepSpeed computes in Python floats in the order written below and truncates with int(); it prints
// value / 2**30 with "%7.2fGB | %6.2fGB" and calls the unit GB although it is GiB.
#pragma once

#include <array>
#include <cstdint>

#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem::deepspeed {

/// ZeRO-2 GPU formula: current code (DeepSpeed PR #5099, 2024) or the one before it (still in memory.rst).
enum class zero2_formula { current, pre_2024 };

struct estimator_row {
  bool offload_param = false;      // ZeRO-3 rows only
  bool offload_optimizer = false;  // "cpu_offload" in DeepSpeed's code
  bool zero_init = false;          // ZeRO-3 rows only
  bytes cpu{};                     // per node, as DeepSpeed reports it ("per CPU")
  bytes gpu{};                     // per GPU
};

struct cluster {
  std::int64_t gpus_per_node = 1;
  std::int64_t nodes = 1;
  double additional_buffer_factor = 1.5;  // DeepSpeed default; scales the CPU figure only
};

}  // namespace zeromem::deepspeed

namespace zeromem::detail {
constexpr void validate_deepspeed_inputs(std::int64_t total_params, const deepspeed::cluster& c) {
  if (total_params <= 0)
    detail::fail_value("the parameter count must be positive", total_params, "pass --params such as 3B");
  // Beyond 2^53 Python's float arithmetic is no longer exact integer arithmetic; refuse rather than differ.
  if (total_params > (std::int64_t{1} << 53) / 64)
    detail::fail_value("the parameter count is beyond what DeepSpeed's float arithmetic computes exactly",
                       total_params, "pass fewer than 1.4e14 parameters");
  detail::require_positive(c.gpus_per_node, "GPUs per node");
  detail::require_positive(c.nodes, "the node count");
  if (!(c.additional_buffer_factor > 0) || c.additional_buffer_factor > 1e6)
    detail::fail("additional_buffer_factor must be a positive number; DeepSpeed's default is 1.5");
}
// Python's int() of a non-negative float: truncation toward zero.
constexpr bytes py_int(double v) {
  if (!(v >= 0) || v > 9.2e18) detail::fail_overflow("a DeepSpeed estimate");
  return bytes_of_checked(static_cast<std::int64_t>(v));
}
constexpr double py_max(double a, double b) { return a >= b ? a : b; }
}  // namespace zeromem::detail

namespace zeromem::deepspeed {

/// estimate_zero2_model_states_mem_needs(total_params, num_gpus_per_node, num_nodes, cpu_offload,
/// additional_buffer_factor), returning (cpu_mem, gpu_mem) as bytes.
constexpr estimator_row estimate_zero2(std::int64_t total_params, const cluster& c, bool cpu_offload,
                                       zero2_formula formula = zero2_formula::current) {
  detail::validate_deepspeed_inputs(total_params, c);
  const std::int64_t total_gpus = detail::checked_mul(c.nodes, c.gpus_per_node);
  const double P = static_cast<double>(total_params);
  const double f = c.additional_buffer_factor;
  estimator_row row{};
  row.offload_optimizer = cpu_offload;
  if (cpu_offload) {
    row.gpu = detail::py_int(2 * P);                                                          // 2 * total_params
    row.cpu = detail::py_int(P * detail::py_max(4.0 * static_cast<double>(total_gpus), 16.0) * f);  // P*max(4N,16)*f
  } else {
    if (formula == zero2_formula::current)
      row.gpu = detail::py_int(2 * P + static_cast<double>(detail::py_int(18 * P / static_cast<double>(total_gpus)).count()));
    else
      row.gpu = detail::py_int(4 * P + static_cast<double>(detail::py_int(16 * P / static_cast<double>(total_gpus)).count()));
    row.cpu = detail::py_int(P * 4 * static_cast<double>(c.gpus_per_node) * f);  // P*4*g*f
  }
  return row;
}

/// estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node, num_nodes,
/// cpu_offload, cpu_offload_params, zero_init, additional_buffer_factor).
constexpr estimator_row estimate_zero3(std::int64_t total_params, std::int64_t largest_layer_params, const cluster& c,
                                       bool cpu_offload, bool cpu_offload_params, bool zero_init) {
  detail::validate_deepspeed_inputs(total_params, c);
  if (largest_layer_params <= 0 || largest_layer_params > total_params)
    detail::fail_value("the largest layer must have between 1 and total_params parameters",
                       largest_layer_params, "pass --largest-layer-params");
  const double P = static_cast<double>(total_params);
  const double L = static_cast<double>(largest_layer_params);
  const double g = static_cast<double>(c.gpus_per_node);
  const double N = static_cast<double>(detail::checked_mul(c.nodes, c.gpus_per_node));
  const double gpus_factor = 1.0 / static_cast<double>(c.nodes);
  const double f = c.additional_buffer_factor;
  const double largest_layer_memory = 4 * L;
  estimator_row row{};
  row.offload_param = cpu_offload && cpu_offload_params;
  row.offload_optimizer = cpu_offload;
  row.zero_init = zero_init;
  double cpu = 0;
  if (cpu_offload) {
    if (cpu_offload_params) {
      row.gpu = detail::py_int(largest_layer_memory);
      cpu = zero_init ? P * 18 * gpus_factor * f : P * detail::py_max(4 * g, 18 * gpus_factor) * f;
    } else {
      row.gpu = detail::py_int(largest_layer_memory + static_cast<double>(detail::py_int(2 * P / N).count()));
      cpu = zero_init ? P * 16 * gpus_factor * f : P * detail::py_max(4 * g, 16 * gpus_factor) * f;
    }
  } else {
    row.gpu = detail::py_int(largest_layer_memory + static_cast<double>(detail::py_int(18 * P / N).count()));
    cpu = zero_init ? L * 4 * g * f : P * 4 * g * f;
  }
  row.cpu = detail::py_int(cpu);
  return row;
}

/// The rows of estimate_zero2_model_states_mem_needs_all_cold, in DeepSpeed's order (cpu_offload True, False).
constexpr std::array<estimator_row, 2> zero2_table(std::int64_t total_params, const cluster& c,
                                                   zero2_formula formula = zero2_formula::current) {
  return {estimate_zero2(total_params, c, true, formula), estimate_zero2(total_params, c, false, formula)};
}

/// The rows of estimate_zero3_model_states_mem_needs_all_cold, in DeepSpeed's order:
/// (offload_param, offload_optimizer, zero_init) = (cpu,cpu,1) (cpu,cpu,0) (none,cpu,1) (none,cpu,0)
/// (none,none,1) (none,none,0).
constexpr std::array<estimator_row, 6> zero3_table(std::int64_t total_params, std::int64_t largest_layer_params,
                                                   const cluster& c) {
  return {estimate_zero3(total_params, largest_layer_params, c, true, true, true),
          estimate_zero3(total_params, largest_layer_params, c, true, true, false),
          estimate_zero3(total_params, largest_layer_params, c, true, false, true),
          estimate_zero3(total_params, largest_layer_params, c, true, false, false),
          estimate_zero3(total_params, largest_layer_params, c, false, false, true),
          estimate_zero3(total_params, largest_layer_params, c, false, false, false)};
}

}  // namespace zeromem::deepspeed
