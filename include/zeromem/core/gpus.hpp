// GPUs by name with the capacity PyTorch reports as usable (torch.cuda.get_device_properties().total_memory).
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

struct gpu_model {
  std::string_view name;
  bytes capacity;
  std::string_view source;
};

// clang-format off
inline constexpr std::array<gpu_model, 6> gpu_models{{
    {"a100-40gb", bytes_from(40.0L, size_unit::GiB),   "nominal 40 GiB, not read to the byte (docs/references.md §6); pass --gpu-memory with your total_memory"},
    {"a100-80gb", bytes_from(79.35L, size_unit::GiB),  "PyTorch OOM messages: 'total capacity of 79.35 GiB' (docs/references.md §6)"},
    {"a800-80gb", bytes_from(79.35L, size_unit::GiB),  "PyTorch OOM messages: 'total capacity of 79.35 GiB' (docs/references.md §6)"},
    {"h100-80gb", bytes_of_checked(85'017'493'504),     "measured: cudaMemGetInfo total on an H100 80GB HBM3, driver 580.159.04 (tests/data/calibration)"},
    {"h200",      bytes_from(139.0L, size_unit::GiB),  "approximate: about 139 GiB as PyTorch reports an H200 (141 GB nominal), not read to the byte (docs/references.md §6)"},
    {"l40s",      bytes_from(44.42L, size_unit::GiB),  "vLLM issue #15815 log: 44.42 GiB (docs/references.md §4, §6)"},
}};
// clang-format on

/// A catalogued GPU by name, case-insensitively ("H100-80GB" is h100-80gb); constexpr, so a job's capacity() can
/// name its GPU.
constexpr const gpu_model& find_gpu(std::string_view name) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (const gpu_model& g : gpu_models) {
    bool same = g.name.size() == name.size();
    for (std::size_t i = 0; same && i < name.size(); ++i) same = lower(name[i]) == g.name[i];
    if (same) return g;
  }
  detail::fail("unknown GPU " + detail::quoted(name) + "; expected one of " +
               detail::join_names(gpu_models, ", ", [](const gpu_model& g) { return g.name; }) + ", or give the capacity (--gpu-memory 24GiB)");
}

}  // namespace zeromem
