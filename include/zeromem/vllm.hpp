// What a vLLM engine takes from a GPU under gpu_memory_utilization, which has meant three things across
// versions (docs/references.md §4), and what sleep mode and swap space put in host RAM.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/error.hpp"
#include "zeromem/units.hpp"

namespace zeromem {

enum class vllm_semantics {
  /// vLLM >= 0.6.4 and V1: a per-instance budget. KV = util x total - (weights + profiled activation peak
  /// + non-torch memory) of this instance (vllm/worker/worker.py determine_num_available_blocks).
  per_instance,
  /// vLLM 0.6.0-0.6.3 (and early V1): memory held by anything on the GPU, other processes included,
  /// counts against the cap: vLLM + everything else <= util x total (vLLM PR #9505 describes the change).
  global_cap,
  /// verl's patched vLLM 0.6.3: KV = (free memory after profiling) x util.
  verl_free_fraction,
};

constexpr std::string_view name(vllm_semantics s) {
  switch (s) {
    case vllm_semantics::per_instance: return "per-instance";
    case vllm_semantics::global_cap: return "global-cap";
    case vllm_semantics::verl_free_fraction: return "verl-free-fraction";
  }
  detail::fail("unknown vLLM semantics");
}

struct vllm_engine_config {
  bytes total{};                        // the GPU's total memory as PyTorch reports it
  double gpu_memory_utilization = 0.9;  // vLLM default
  vllm_semantics semantics = vllm_semantics::per_instance;
  bytes weights{};                      // this engine's weights on one GPU
  bytes activation_peak{};              // peak of the profiling forward pass
  bytes non_torch{};                    // CUDA context, NCCL buffers: memory outside PyTorch's allocator
  bytes other_processes{};              // memory held on the GPU by others when the engine starts
  bytes cuda_graphs{};                  // captured after profiling, outside the budget; 0 with enforce_eager
  bytes kv_block{};                     // bytes of one KV block on one GPU (kv_bytes_per_block)
  /// V1 refuses to start when free memory is below util x total (vLLM v1 worker request_memory).
  bool refuse_if_free_below_budget = false;
};

struct vllm_engine_memory {
  bytes budget{};          // util x total (per_instance, global_cap) or util x free-after-profiling (verl)
  bytes kv_cache{};        // whole blocks
  std::int64_t kv_blocks = 0;
  bytes gpu_held{};        // what the engine holds awake: weights + KV + non-torch + CUDA graphs
                           // (+ the profiled activation peak, which the allocator keeps reserved)
};

/// Sizes the KV cache the way each vLLM version does. Throws when no block fits or V1 refuses to start.
constexpr vllm_engine_memory vllm_engine(const vllm_engine_config& c) {
  if (!(c.gpu_memory_utilization > 0.0 && c.gpu_memory_utilization <= 1.0))
    detail::fail_value("gpu_memory_utilization must be in (0, 1]", static_cast<long double>(c.gpu_memory_utilization),
                       "pass a fraction such as 0.9");
  if (c.total.count() <= 0) detail::fail("the GPU's total memory must be positive; pass --gpu or --gpu-memory");
  if (c.kv_block.count() <= 0) detail::fail("the KV block size in bytes must be positive");
  if (c.weights.count() < 0 || c.activation_peak.count() < 0 || c.non_torch.count() < 0 || c.other_processes.count() < 0 ||
      c.cuda_graphs.count() < 0)
    detail::fail("memory terms of a vLLM engine cannot be negative");
  const auto fraction = [&](bytes b) {  // round down: vLLM's int(total * util)
    return bytes_of_checked(static_cast<std::int64_t>(static_cast<long double>(b.count()) * c.gpu_memory_utilization));
  };
  const bytes used_by_engine = c.weights + c.activation_peak + c.non_torch;
  vllm_engine_memory r{};
  bytes kv{};
  switch (c.semantics) {
    case vllm_semantics::per_instance:
      r.budget = fraction(c.total);
      kv = r.budget - used_by_engine;
      if (c.refuse_if_free_below_budget && c.total - c.other_processes < r.budget)
        detail::fail("vLLM V1 refuses to start: free memory " + std::to_string(to_gib(c.total - c.other_processes)) +
                     " GiB is below gpu_memory_utilization x total " + std::to_string(to_gib(r.budget)) +
                     " GiB; lower gpu_memory_utilization or free the GPU first");
      break;
    case vllm_semantics::global_cap:
      r.budget = fraction(c.total);
      kv = r.budget - used_by_engine - c.other_processes;
      break;
    case vllm_semantics::verl_free_fraction:
      r.budget = fraction(c.total - c.other_processes - used_by_engine);
      kv = r.budget;
      break;
  }
  if (kv.count() < c.kv_block.count())
    detail::fail("no memory is left for the KV cache (" + std::to_string(to_gib(kv)) +
                 " GiB for blocks of " + std::to_string(c.kv_block.count()) +
                 " B); raise gpu_memory_utilization, use more tensor parallelism or a smaller model");
  r.kv_blocks = kv.count() / c.kv_block.count();  // vLLM: int(available // cache_block_size)
  r.kv_cache = c.kv_block * r.kv_blocks;
  r.gpu_held = c.weights + c.activation_peak + c.non_torch + c.cuda_graphs + r.kv_cache;
  return r;
}

/// Sequences of `tokens` tokens the KV cache holds at once: each takes ceil(tokens / block_size) whole blocks
/// (vLLM's block manager allocates whole blocks per sequence).
constexpr std::int64_t vllm_concurrent_sequences(std::int64_t kv_blocks, std::int64_t block_size, std::int64_t tokens) {
  if (kv_blocks < 0) detail::fail_value("the number of KV blocks cannot be negative", static_cast<long double>(kv_blocks), "pass >= 0");
  detail::require_positive(block_size, "the KV block size");
  detail::require_positive(tokens, "the tokens per sequence");
  return kv_blocks / detail::ceil_div(tokens, block_size);
}

/// Sleep mode (vLLM >= 0.7.3, LLM.sleep): level 1 offloads the weights to host RAM and discards the KV cache;
/// level 2 discards both. Returns the host RAM a sleeping engine holds.
constexpr bytes vllm_sleep_host_bytes(int level, bytes weights) {
  if (level == 1) return weights;
  if (level == 2) return bytes{};
  detail::fail_value("vLLM sleep level must be 1 or 2", static_cast<long double>(level), "pass 1 (keep weights on the host) or 2");
}

/// V0 swap space: swap_space GiB of pinned host RAM per GPU (vLLM EngineArgs.swap_space, default 4).
constexpr bytes vllm_swap_space_bytes(std::int64_t swap_space_gib = 4) {
  if (swap_space_gib < 0) detail::fail_value("swap_space cannot be negative", static_cast<long double>(swap_space_gib), "pass GiB >= 0");
  return bytes_of(detail::checked_mul(swap_space_gib, std::int64_t{1} << 30));
}

}  // namespace zeromem
