// The CUDA caching allocator's blocks above a model's parameter-shaped tensors: one tensor per parameter, requested
// in transformers' construction order, as the weights are when a model is built on the GPU. A block can hold up to
// 1 MiB more than its tensor (caching_allocator::no_free_replay), and torch.cuda.memory_allocated() counts it whole.
#pragma once

#include <cstdint>

#include "zeromem/core/caching_allocator.hpp"
#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"
#include "zeromem/model/model.hpp"

namespace zeromem {

namespace detail {
/// One module's parameters as requests: its weight, then its bias (nn.Linear.__init__), `count` of them.
struct parameter_request {
  std::int64_t weight, bias, count;
};

/// The language model's modules in three runs: before the decoder layers (the embedding, learned positions, OPT's
/// project_in), one decoder layer, and after them (the final norm, lm_head). The vision tower is left out.
struct construction_order {
  static constexpr int capacity = 16;
  parameter_request before[4]{}, layer[capacity]{}, after[4]{};
  int n_before = 0, n_layer = 0, n_after = 0;
};

constexpr construction_order construction_order_of(const transformer_config& m) {
  construction_order o;
  const auto add = [](parameter_request* run, int& n, int capacity, const parameter_request& r) {
    if (n == capacity) fail("a model with more kinds of module than the allocator's walk holds; report the model");
    run[n++] = r;
  };
  for_each_module(m, [&o, &add](const module_shape& s) {
    const parameter_request r{s.weight_elements(), s.bias, s.count};
    if (s.group == module_group::vision) return;
    if (s.in_every_layer()) add(o.layer, o.n_layer, construction_order::capacity, r);
    else if (s.group == module_group::final_norm || s.group == module_group::lm_head) add(o.after, o.n_after, 4, r);
    else add(o.before, o.n_before, 4, r);
  });
  return o;
}

/// Each request of a run, in bytes, `count` times a module. transformers 4's experts are built expert by expert, but
/// each of their linears holds expert_ffn x hidden elements: walked module by module, the large pool sees the same
/// sizes in the same order (their biases, far under 1 MiB, take small-pool blocks of their own rounded size).
template <class F>
constexpr void for_each_request(const parameter_request* run, int n, std::int64_t element_bytes, F&& f) {
  for (int i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < run[i].count; ++c) {
      f(checked_mul(run[i].weight, element_bytes, "a parameter's bytes"));
      if (run[i].bias > 0) f(checked_mul(run[i].bias, element_bytes, "a parameter's bytes"));
    }
}

/// The smallest large-pool request of a run (INT64_MAX without one): free blocks below it serve none of them.
constexpr std::int64_t smallest_large_request(const parameter_request* run, int n, std::int64_t element_bytes) {
  std::int64_t smallest = INT64_MAX;
  for_each_request(run, n, element_bytes, [&](std::int64_t b) {
    const std::int64_t size = caching_allocator::round_size(b);
    if (size > caching_allocator::small_size && size < smallest) smallest = size;
  });
  return smallest;
}
}  // namespace detail

/// Bytes the caching allocator's blocks hold above one parameter-shaped tensor per parameter of the language model,
/// requested in construction order into a fresh allocator (c10/cuda/CUDACachingAllocator.cpp; order:
/// for_each_module's, one decoder layer after another). Decoder layers repeat: once the allocator's free blocks at a
/// layer's start repeat an earlier layer's, the layers between repeat too, and whole repeats are counted without
/// replaying them.
constexpr bytes parameter_block_excess(const transformer_config& m, dtype d, bool expandable_segments = false) {
  using detail::checked_add, detail::checked_mul;
  const detail::construction_order o = detail::construction_order_of(m);
  const std::int64_t e = size_of(d).bits() / 8;
  caching_allocator::no_free_replay replay(expandable_segments);
  std::int64_t excess = 0;
  const auto serve = [&](std::int64_t b) { excess = checked_add(excess, replay.allocate(b) - b, "the allocator's blocks"); };
  const std::int64_t after_min = detail::smallest_large_request(o.after, o.n_after, e);
  const std::int64_t layer_min = detail::smallest_large_request(o.layer, o.n_layer, e);
  detail::for_each_request(o.before, o.n_before, e, serve);
  const std::int64_t L = m.layers;
  if (L > 0) replay.set_dead_below(layer_min < after_min ? layer_min : after_min);
  // Brent's cycle finding: the free blocks at a layer's start are compared with those saved at layer 2^k's; once
  // they match, the layers since repeat to the end and whole repeats are counted without replaying them.
  caching_allocator::no_free_replay saved = replay;
  std::int64_t saved_at = 0, saved_excess = excess, power = 1;
  bool repeating = false;
  for (std::int64_t i = 0; i < L; ++i) {
    if (!repeating && i > saved_at && replay.same_free_blocks(saved)) {
      const std::int64_t period = i - saved_at, repeats = (L - i) / period;
      excess = checked_add(excess, checked_mul(repeats, excess - saved_excess, "the allocator's blocks"));
      i += repeats * period;
      repeating = true;
      if (i == L) break;
    }
    if (!repeating && i - saved_at == power) {
      saved = replay;
      saved_at = i;
      saved_excess = excess;
      power *= 2;
    }
    detail::for_each_request(o.layer, o.n_layer, e, serve);
  }
  replay.set_dead_below(after_min);
  detail::for_each_request(o.after, o.n_after, e, serve);
  return bytes_of(excess);
}

}  // namespace zeromem
