// PyTorch's CUDA caching allocator: the block it hands out for a request (c10/cuda/CUDACachingAllocator.cpp, the
// default configuration, one stream). torch.cuda.memory_allocated() counts those blocks, not the tensors' bytes.
#pragma once

#include <cstdint>

#include "zeromem/core/error.hpp"

namespace zeromem::caching_allocator {

inline constexpr std::int64_t min_block_size = 512;          // kMinBlockSize: every request rounds up to a multiple
inline constexpr std::int64_t small_size = 1 << 20;          // kSmallSize: the small pool's largest request
inline constexpr std::int64_t small_buffer = 2 << 20;        // kSmallBuffer: a small-pool segment
inline constexpr std::int64_t large_buffer = 20 << 20;       // kLargeBuffer: the segment for requests under kMinLargeAlloc
inline constexpr std::int64_t min_large_alloc = 10 << 20;    // kMinLargeAlloc
inline constexpr std::int64_t round_large = 2 << 20;         // kRoundLarge: larger segments round up to a multiple

/// round_size: at least kMinBlockSize, else up to a multiple of it.
constexpr std::int64_t round_size(std::int64_t n) {
  if (n < 0) detail::fail("an allocation's size cannot be negative; pass the tensor's bytes");
  return n < min_block_size ? min_block_size : (n + min_block_size - 1) & ~(min_block_size - 1);  // a power of two
}

/// get_allocation_size: the segment cudaMalloc'd for a rounded request no cached block can serve.
constexpr std::int64_t segment_size(std::int64_t rounded) {
  if (rounded <= small_size) return small_buffer;
  if (rounded < min_large_alloc) return large_buffer;
  return (rounded + round_large - 1) & ~(round_large - 1);  // a power of two
}

/// Requests without frees, in order, served as the allocator serves them: best fit among the cached free blocks
/// (get_free_block: the smallest at least as large), else a new segment; the block is split only where what is left
/// passes should_split (the small pool, or expandable segments: kMinBlockSize or more; the large pool: more than
/// kSmallSize), so a block up to 1 MiB larger than the request is counted whole. Small-pool blocks always split to the
/// request. Free large-pool blocks smaller than `dead_below` (set_dead_below: no later request can use them) are
/// dropped; at most `capacity` are kept, the smallest dropped first.
class no_free_replay {
 public:
  static constexpr int capacity = 16;

  constexpr no_free_replay() = default;
  constexpr explicit no_free_replay(bool expandable_segments) : expandable_(expandable_segments) {}

  /// Serves a request of `n` bytes and returns the bytes its block holds.
  constexpr std::int64_t allocate(std::int64_t n) {
    const std::int64_t size = round_size(n);
    if (size <= small_size || expandable_) return size;
    std::int64_t block = 0;
    int i = 0;
    while (i < count_ && free_[i] < size) ++i;  // ascending: the first that fits is the best fit
    if (i < count_) {
      block = free_[i];
      erase(i);
    } else {
      block = segment_size(size);
    }
    const std::int64_t remaining = block - size;
    if (remaining > small_size) {  // should_split for the large pool
      insert(remaining);
      return size;
    }
    return block;
  }

  /// Free blocks below `n` bytes can serve none of the requests still to come.
  constexpr void set_dead_below(std::int64_t n) {
    dead_below_ = n;
    int kept = 0;
    for (int i = 0; i < count_; ++i)
      if (free_[i] >= n) free_[kept++] = free_[i];
    count_ = kept;
  }

  /// The same cached free blocks (by size), so the same requests are served the same way from here on.
  constexpr bool same_free_blocks(const no_free_replay& o) const {
    if (count_ != o.count_) return false;
    for (int i = 0; i < count_; ++i)
      if (free_[i] != o.free_[i]) return false;
    return true;
  }

 private:
  constexpr void erase(int i) {
    for (int k = i + 1; k < count_; ++k) free_[k - 1] = free_[k];
    --count_;
  }
  constexpr void insert(std::int64_t b) {
    if (b < dead_below_) return;
    if (count_ == capacity) {
      if (b <= free_[0]) return;
      erase(0);
    }
    int i = count_;
    while (i > 0 && free_[i - 1] > b) {
      free_[i] = free_[i - 1];
      --i;
    }
    free_[i] = b;
    ++count_;
  }

  std::int64_t free_[capacity]{};
  int count_ = 0;
  std::int64_t dead_below_ = 0;
  bool expandable_ = false;
};

}  // namespace zeromem::caching_allocator
