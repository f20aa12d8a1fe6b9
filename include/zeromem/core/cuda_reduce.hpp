// The global staging buffer PyTorch's CUDA reduction kernel allocates through the caching allocator when it splits
// one output's inputs across thread blocks: a bias gradient, the sum of a [tokens, n] gradient over its tokens
// (autograd's validate_outputs: at::sum_to), is such a reduction. Boost-free and constexpr.
#pragma once

#include <algorithm>
#include <cstdint>

#include "zeromem/core/error.hpp"

namespace zeromem {

/// What the kernel's launch configuration depends on: the card's multiprocessors and resident threads per
/// multiprocessor (cudaDeviceProp multiProcessorCount, maxThreadsPerMultiProcessor).
struct cuda_multiprocessors {
  std::int64_t count = 132;              // an H100 SXM5 and an H200 (NVIDIA H100 Tensor Core GPU Architecture whitepaper)
  std::int64_t threads_per_count = 2048;  // compute capability 8.0 and 9.0 (CUDA C++ Programming Guide, technical specifications)
};

namespace detail {
constexpr std::int64_t last_pow2(std::int64_t n) {  // floor(log2(n)) as a power of two, at least 1 (Reduce.cuh last_pow2)
  std::int64_t p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}
}  // namespace detail

/// Bytes the reduction of a contiguous [inputs, outputs] tensor over its first dimension allocates beside its result
/// (its staging buffer and semaphores; 0 where it reduces within thread blocks), with a 4-byte accumulator (float:
/// sums of bf16, fp16 and fp32). Follows aten/src/ATen/native/cuda/Reduce.cuh (torch 2.11) setReduceConfig for a
/// reduction not on the fastest-striding dimension: outputs vectorised by 4, 2 or 1 (get_output_vec_size, the data
/// aligned), block set_block_dimension<scalar_t>(outputs / vec, inputs) under 512 / vec threads, inputs split across
/// warps when at least min(16 block_height, 256) each, and across ctas_per_output = max(min(div_up(target_grid,
/// grid), div_up(values, 16)), div_up(values, 256)) blocks when each thread still has 256 values and the grid is at
/// most the target (multiprocessors x resident blocks); global_memory_size() = 4 outputs ctas block_width vec,
/// semaphore_size() = 4 grid.
constexpr std::int64_t cuda_sum_staging_bytes(std::int64_t outputs, std::int64_t inputs, const cuda_multiprocessors& sm = {}) {
  if (outputs < 1 || inputs < 1)
    detail::fail("a CUDA reduction needs at least one output and one input; pass positive sizes");
  if (sm.count < 1 || sm.threads_per_count < 1)
    detail::fail("a GPU has at least one multiprocessor and one resident thread; pass its multiProcessorCount and maxThreadsPerMultiProcessor");
  const std::int64_t vec = outputs % 4 == 0 ? 4 : outputs % 2 == 0 ? 2 : 1;
  const std::int64_t dim0 = outputs / vec, dim1 = inputs;
  const std::int64_t max_threads = 512 / vec;
  const std::int64_t dim0_pow2 = dim0 < max_threads ? detail::last_pow2(dim0) : max_threads;
  const std::int64_t dim1_pow2 = dim1 < max_threads ? detail::last_pow2(dim1) : max_threads;
  std::int64_t block_width = std::min<std::int64_t>(dim0_pow2, 32);
  const std::int64_t block_height = std::min(dim1_pow2, max_threads / block_width);
  block_width = std::min(dim0_pow2, max_threads / block_height);
  const std::int64_t step_output = block_width;  // the outputs across a warp's lanes
  if (inputs < std::min<std::int64_t>(block_height * 16, 256)) return 0;  // each warp its own outputs: no global reduce
  const std::int64_t values_per_thread = detail::ceil_div(inputs, block_height);
  const std::int64_t target_grid = detail::checked_product(sm.count, sm.threads_per_count / (block_width * block_height));
  const std::int64_t grid = detail::ceil_div(outputs / vec, step_output);
  if (values_per_thread < 256 || grid > target_grid) return 0;
  const std::int64_t ctas = std::max(std::min(detail::ceil_div(target_grid, grid), detail::ceil_div(values_per_thread, 16)),
                                     detail::ceil_div(values_per_thread, 256));
  if (ctas <= 1) return 0;
  return detail::checked_sum(detail::checked_product(4, outputs, ctas, block_width, vec), detail::checked_product(4, grid));
}

}  // namespace zeromem
