// KV cache: bytes per token, per block and for a set of sequences, under GQA/MQA and tensor parallelism.
#pragma once

#include <cstdint>

#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

/// What the KV cache depends on: layers, key/value heads and the head dimension.
struct attention_shape {
  std::int64_t layers = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
};

constexpr attention_shape attention_shape_of(const transformer_config& m) {
  validate(m);
  return {m.layers, m.kv_heads, m.head_size()};
}

constexpr void validate(const attention_shape& a) {
  detail::require_positive(a.layers, "the number of layers");
  detail::require_positive(a.kv_heads, "the number of key/value heads");
  detail::require_positive(a.head_dim, "the head dimension");
}

struct kv_cache_config {
  dtype kv_dtype = dtype::bf16;
  std::int64_t tp = 1;           // tensor-parallel ranks the heads are split over
  std::int64_t block_size = 16;  // tokens per paged block (vLLM's default on CUDA)
};

constexpr void validate(const kv_cache_config& c) {
  detail::require_positive(c.tp, "the tensor-parallel degree");
  detail::require_positive(c.block_size, "the KV block size");
}

/// KV heads held by one tensor-parallel rank: K/t, or one replicated head when t > K
/// (vLLM ModelConfig.get_num_kv_heads: max(1, total_num_kv_heads // tensor_parallel_size)); vLLM's
/// QKVParallelLinear divide()s one by the other, so one must divide the other.
constexpr std::int64_t kv_heads_per_rank(const attention_shape& a, std::int64_t tp) {
  detail::require_positive(tp, "the tensor-parallel degree");
  detail::require_kv_heads_split(a.kv_heads, tp);
  const std::int64_t k = a.kv_heads / tp;
  return k > 1 ? k : 1;
}
constexpr std::int64_t kv_heads_per_rank(const transformer_config& m, std::int64_t tp) {
  return kv_heads_per_rank(attention_shape_of(m), tp);
}

/// Bytes of K and V for one token on one rank: 2 x layers x kv heads per rank x head dim x element size
/// (vLLM paper, arXiv 2309.06180 §2.3; Llama-2-7B fp16: 524,288 B = 0.5 MiB).
constexpr bytes kv_bytes_per_token(const attention_shape& a, const kv_cache_config& c) {
  validate(a);
  validate(c);
  const std::int64_t values = detail::checked_product(2, a.layers, kv_heads_per_rank(a, c.tp), a.head_dim);
  return elements_of(values) * size_of(c.kv_dtype);
}
constexpr bytes kv_bytes_per_token(const transformer_config& m, const kv_cache_config& c) {
  return kv_bytes_per_token(attention_shape_of(m), c);
}

/// One paged block: block_size tokens (vLLM CacheEngine.get_cache_block_size).
template <class Model>
constexpr bytes kv_bytes_per_block(const Model& m, const kv_cache_config& c) {
  return kv_bytes_per_token(m, c) * c.block_size;
}

/// Blocks one sequence of `tokens` occupies: the last block is allocated whole.
constexpr std::int64_t kv_blocks_for(std::int64_t tokens, const kv_cache_config& c) {
  validate(c);
  if (tokens < 0) detail::fail_value("a token count cannot be negative", tokens, "pass >= 0");
  return detail::ceil_div(tokens, c.block_size);
}

/// KV cache of `sequences` sequences of `tokens` tokens each, in whole blocks.
template <class Model>
constexpr bytes kv_cache_bytes(const Model& m, const kv_cache_config& c, std::int64_t sequences, std::int64_t tokens) {
  if (sequences < 0) detail::fail_value("a sequence count cannot be negative", sequences, "pass >= 0");
  return kv_bytes_per_block(m, c) * detail::checked_mul(kv_blocks_for(tokens, c), sequences);
}

}  // namespace zeromem
