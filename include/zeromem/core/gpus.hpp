// GPUs by name with the capacity PyTorch reports as usable (torch.cuda.get_device_properties().total_memory).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/core/cuda_reduce.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

struct gpu_model {
  std::string_view name;
  bytes capacity;
  std::string_view source;
  int compute_capability_major;  // sm80 -> 8, sm89 -> 8, sm90 -> 9 (NVIDIA's CUDA GPUs table)
  // Multiprocessors (NVIDIA's A100 and H100 whitepapers, L40S datasheet) and resident threads per multiprocessor
  // (CUDA C++ Programming Guide, technical specifications: 2048 on 8.0 and 9.0, 1536 on 8.9).
  cuda_multiprocessors multiprocessors;
};

// clang-format off
inline constexpr std::array<gpu_model, 6> gpu_models{{
    {"a100-40gb", bytes_from(40.0L, size_unit::GiB),   "nominal 40 GiB, not read to the byte (docs/references.md §6); pass --gpu-memory with your total_memory", 8, {108, 2048}},
    {"a100-80gb", bytes_from(79.35L, size_unit::GiB),  "PyTorch OOM messages: 'total capacity of 79.35 GiB' (docs/references.md §6)", 8, {108, 2048}},
    {"a800-80gb", bytes_from(79.35L, size_unit::GiB),  "PyTorch OOM messages: 'total capacity of 79.35 GiB' (docs/references.md §6)", 8, {108, 2048}},
    {"h100-80gb", bytes_of_checked(85'017'493'504),     "measured: cudaMemGetInfo total on an H100 80GB HBM3, driver 580.159.04 (tests/data/calibration)", 9, {132, 2048}},
    {"h200",      bytes_of_checked(150'109'880'320),    "measured: cudaMemGetInfo total on an NVIDIA H200, driver 580.159.04 (tests/data/calibration)", 9, {132, 2048}},
    {"l40s",      bytes_from(44.42L, size_unit::GiB),  "vLLM issue #15815 log: 44.42 GiB (docs/references.md §4, §6)", 8, {142, 1536}},
}};
// clang-format on

/// The cuBLAS workspace PyTorch allocates through its caching allocator for each (cuBLAS handle, stream) pair on
/// first use (aten/src/ATen/cuda/CublasHandlePool.cpp parseChosenWorkspaceSize, getNewWorkspace; torch 2.11):
/// 32 MiB on compute capability 9.x, 10.x and 12.x, else the ":4096:2:16:8" default, 2 x 4 MiB + 8 x 16 KiB.
/// cuBLASLt uses the same workspace (unified_cublas_and_lt_workspaces, on by default). CUBLAS_WORKSPACE_CONFIG
/// changes it: pass the bytes it gives.
constexpr bytes cublas_workspace_bytes(int compute_capability_major) {
  if (compute_capability_major < 1) detail::fail_value("a compute capability's major number is at least 1", compute_capability_major, "such as 9 for an H100");
  const bool large = compute_capability_major == 9 || compute_capability_major == 10 || compute_capability_major == 12;
  return bytes_of(large ? std::int64_t{32} << 20 : (std::int64_t{4096} * 2 + 16 * 8) * 1024);
}

/// cuBLAS handles of a training process: handles are per thread (DeviceThreadHandlePool), and a step runs its
/// matmuls on two threads: forward on the caller's, backward on autograd's device thread (torch/csrc/autograd/
/// engine.cpp: one worker thread per CUDA device). Each (handle, stream) pair keeps its workspace for the process.
inline constexpr std::int64_t training_blas_handles = 2;

/// The workspaces of `handles` cuBLAS handles on a catalogued GPU.
constexpr bytes blas_workspaces_of(const gpu_model& g, std::int64_t handles) {
  return cublas_workspace_bytes(g.compute_capability_major) * handles;
}

/// A catalogued GPU by name, case-insensitively ("H100-80GB" is h100-80gb); constexpr, so a job's capacity() can
/// name its GPU.
constexpr const gpu_model& find_gpu(std::string_view name) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (const gpu_model& g : gpu_models) {
    bool same = g.name.size() == name.size();
    for (std::size_t i = 0; same && i < name.size(); ++i) same = lower(name[i]) == g.name[i];
    if (same) return g;
  }
  const auto name_of = [](const gpu_model& g) { return g.name; };
  detail::fail("unknown GPU " + detail::quoted(name) + detail::did_you_mean(gpu_models, name_of, name) + "; expected one of " +
               detail::join_names(gpu_models, ", ", name_of) + ", or give the capacity (--gpu-memory 24GiB)");
}

/// One cuBLAS handle's workspace on the card the defaults were measured on (an H100 80GB): a constant, so that a
/// default-built step_config or forward_only_config does not look its GPU up by name at run time.
inline constexpr bytes h100_blas_workspace = blas_workspaces_of(find_gpu("h100-80gb"), 1);

}  // namespace zeromem
