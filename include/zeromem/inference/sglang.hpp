// What an SGLang engine takes from a GPU under mem_fraction_static: its KV pool is sized from the free memory
// measured before and after loading the weights (docs/references.md §4).
#pragma once

#include <cstdint>
#include <string>

#include "zeromem/core/error.hpp"
#include "zeromem/core/format.hpp"
#include "zeromem/core/units.hpp"
#include "zeromem/inference/kv_cache.hpp"
#include "zeromem/model/model.hpp"

namespace zeromem {

struct sglang_engine_config {
  /// Free memory when the engine measures it before loading (model_runner.py init_torch_distributed:
  /// get_available_gpu_memory after its CUDA context and NCCL exist): the card less everything already on it.
  bytes free_before_load{};
  bytes weights{};                      // what loading takes from it: one tensor-parallel rank's weights
  double mem_fraction_static = 0.9;     // verl passes rollout.gpu_memory_utilization
  bytes kv_per_token{};                 // K and V of one token on one rank (kv_bytes_per_token)
  std::int64_t page_size = 1;           // ServerArgs.page_size (default 1)
  std::int64_t context_len = 0;         // the model's context length
  std::int64_t max_running_requests = 0;  // 0: SGLang's default, derived from the KV tokens
};

struct sglang_engine_memory {
  bytes weights{};              // as given: one rank's weights
  /// free after loading - free before loading x (1 - mem_fraction_static): the bytes left for the KV pool
  /// (negative when the weights take more than mem_fraction_static of the free memory).
  bytes rest{};
  std::int64_t kv_tokens = 0;   // max_total_num_tokens
  bytes kv_pool{};              // (kv_tokens + page_size) x bytes per token
  std::int64_t max_requests = 0;
  bytes req_to_token{};         // max_requests x (context_len + 4) int32 slots
  /// (1 - mem_fraction_static) x free before loading: what SGLang leaves free for activations and CUDA graphs.
  bytes runtime_room{};
  bytes page{};                 // one page of KV: page_size x bytes per token
  constexpr bool starts() const { return kv_tokens > 0; }
  std::string refusal() const {
    if (starts()) return {};
    return "SGLang does not start (\"Not enough memory. Please try to increase --mem-fraction-static\"): its weights leave " +
           format_bytes(rest, size_unit::GiB) + " for the KV pool" +
           (rest.count() > 0 ? ", less than one page of " + format_bytes(page, size_unit::GiB) : std::string()) +
           "; raise mem_fraction_static (verl: rollout.gpu_memory_utilization), use more tensor parallelism or free the GPU";
  }
};

/// SGLang's memory pools (python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py, profile_max_num_token
/// and init_memory; model_runner.py in releases before the mixin): tokens = int(rest) // bytes per token with
/// rest = free after loading - free before loading x (1 - mem_fraction_static), rounded down to whole pages;
/// max_running_requests defaults to min(max(int(tokens / context_len x 512), 2048), 4096); the KV pool holds
/// tokens + page_size slots per layer (mem_cache/memory_pool.py MHATokenToKVPool: the padded slot 0) and
/// ReqToTokenPool one int32 row of context_len + 4 per request.
constexpr sglang_engine_memory sglang_engine(const sglang_engine_config& c) {
  if (!(c.mem_fraction_static > 0.0 && c.mem_fraction_static < 1.0))
    detail::fail_value("mem_fraction_static must be in (0, 1)", c.mem_fraction_static,
                       "pass a fraction such as 0.8");
  if (c.free_before_load.count() <= 0) detail::fail("SGLang finds no free GPU memory before loading; free the GPU or pass --gpu");
  if (c.weights.count() < 0) detail::fail("the weights of an SGLang engine cannot be negative");
  if (c.kv_per_token.count() <= 0) detail::fail("the KV bytes per token must be positive");
  detail::require_positive(c.page_size, "the SGLang page size");
  detail::require_positive(c.context_len, "the SGLang context length");
  if (c.max_running_requests < 0)
    detail::fail_value("max_running_requests cannot be negative", c.max_running_requests, "pass 0 for SGLang's default");
  sglang_engine_memory r{};
  r.weights = c.weights;
  r.page = c.kv_per_token * c.page_size;
  const long double before = static_cast<long double>(c.free_before_load.count());
  const long double after = before - static_cast<long double>(c.weights.count());
  const long double reserve = before * (1.0L - static_cast<long double>(c.mem_fraction_static));
  r.runtime_room = bytes_of_checked(static_cast<std::int64_t>(reserve));
  r.rest = bytes_of_checked(static_cast<std::int64_t>(after - reserve));  // Python's int(): toward zero
  if (r.rest.count() <= 0) return r;
  const std::int64_t tokens = r.rest.count() / c.kv_per_token.count();
  r.kv_tokens = tokens / c.page_size * c.page_size;
  if (r.kv_tokens <= 0) return r;
  r.kv_pool = c.kv_per_token * detail::checked_add(r.kv_tokens, c.page_size);
  if (c.max_running_requests > 0) r.max_requests = c.max_running_requests;
  else {
    const auto derived = static_cast<std::int64_t>(static_cast<long double>(r.kv_tokens) / static_cast<long double>(c.context_len) * 512.0L);
    r.max_requests = derived < 2048 ? 2048 : derived > 4096 ? 4096 : derived;
  }
  r.req_to_token = bytes_of(detail::checked_product(r.max_requests, detail::checked_add(c.context_len, 4), 4));
  return r;
}

/// The engine config of `model` on one of its `tp` GPUs, with `free_before_load` free when it starts: its share of
/// the weights and its KV bytes per token.
constexpr sglang_engine_config sglang_config_of(const transformer_config& model, std::int64_t tp, bytes free_before_load,
                                                double mem_fraction_static, std::int64_t context_len,
                                                std::int64_t max_running_requests = 0, dtype weights = dtype::bf16,
                                                dtype kv = dtype::bf16, std::int64_t page_size = 1) {
  // SGLang's attention layers split the heads over the ranks (python/sglang/srt/models/qwen2.py Qwen2Attention,
  // llama.py LlamaAttention: assert total_num_heads % tp_size == 0).
  detail::require_heads_split(model.heads, tp, "tp_size");
  kv_cache_config k{};
  k.kv_dtype = kv;
  k.tp = tp;
  sglang_engine_config c{};
  c.free_before_load = free_before_load;
  c.weights = largest_share(count_parameters(model).total * size_of(weights), tp);
  c.mem_fraction_static = mem_fraction_static;
  c.kv_per_token = kv_bytes_per_token(model, k);
  c.page_size = page_size;
  c.context_len = context_len;
  c.max_running_requests = max_running_requests;
  return c;
}

/// One engine's pools for `model` on one of its `tp` GPUs, with `free_before_load` free when it starts.
constexpr sglang_engine_memory size_sglang_engine(const transformer_config& model, std::int64_t tp, bytes free_before_load,
                                                  double mem_fraction_static, std::int64_t context_len,
                                                  std::int64_t max_running_requests = 0, dtype weights = dtype::bf16,
                                                  dtype kv = dtype::bf16) {
  return sglang_engine(sglang_config_of(model, tp, free_before_load, mem_fraction_static, context_len, max_running_requests, weights, kv));
}

}  // namespace zeromem
