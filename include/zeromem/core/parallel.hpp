// Parallel degrees as types: a data-parallel degree is not a tensor-parallel one, and a layout names each degree it
// sets. No Boost, no I/O.
#pragma once

#include <cstdint>
#include <type_traits>

#include "zeromem/core/error.hpp"

namespace zeromem {

namespace detail {
struct data_parallel_tag {
  static constexpr const char* what = "the data-parallel degree (data_parallel)";
};
struct tensor_parallel_tag {
  static constexpr const char* what = "the tensor-parallel degree (tensor_parallel)";
};
struct pipeline_parallel_tag {
  static constexpr const char* what = "the pipeline-parallel degree (pipeline_parallel)";
};
struct context_parallel_tag {
  static constexpr const char* what = "the context-parallel degree (context_parallel)";
};
}  // namespace detail

/// One parallel degree, at least 1. Built only from a number (explicitly) or from the same kind of degree.
template <class Tag>
class parallel_degree {
 public:
  constexpr parallel_degree() = default;
  constexpr explicit parallel_degree(std::int64_t n) : value_(detail::require_positive(n, Tag::what)) {}
  template <class Other>
  constexpr parallel_degree(parallel_degree<Other> other) : value_(other.value()) {  // NOLINT: only to refuse
    static_assert(std::is_same_v<Other, Tag>,
                  "zeromem: one parallel degree cannot stand for another (data_parallel is not tensor_parallel); name the one you mean");
  }
  constexpr std::int64_t value() const { return value_; }

 private:
  std::int64_t value_ = 1;
};

using data_parallel = parallel_degree<detail::data_parallel_tag>;
using tensor_parallel = parallel_degree<detail::tensor_parallel_tag>;
using pipeline_parallel = parallel_degree<detail::pipeline_parallel_tag>;
using context_parallel = parallel_degree<detail::context_parallel_tag>;

namespace detail {
template <class T>
struct is_parallel_degree : std::false_type {};
template <class Tag>
struct is_parallel_degree<parallel_degree<Tag>> : std::true_type {};
template <class T, class... D>
constexpr int occurrences = (0 + ... + (std::is_same_v<T, D> ? 1 : 0));
}  // namespace detail

/// dp x tp x pp x cp GPUs, each degree named and given at most once, in any order; those not named are 1:
/// parallel_layout{tensor_parallel{2}, data_parallel{8}}.
class parallel_layout {
 public:
  constexpr parallel_layout() = default;
  template <class... D>
  constexpr explicit parallel_layout(D... degrees) {
    static_assert((detail::is_parallel_degree<D>::value && ...),
                  "zeromem: name each degree: parallel_layout{data_parallel{8}, tensor_parallel{2}}, not bare numbers");
    static_assert(((!detail::is_parallel_degree<D>::value || detail::occurrences<D, D...> == 1) && ...),
                  "zeromem: give each parallel degree once");
    (set(degrees), ...);
  }
  constexpr data_parallel dp() const { return dp_; }
  constexpr tensor_parallel tp() const { return tp_; }
  constexpr pipeline_parallel pp() const { return pp_; }
  constexpr context_parallel cp() const { return cp_; }
  /// The GPUs the layout spans: dp x tp x pp x cp.
  constexpr std::int64_t gpus() const {
    return detail::checked_mul(detail::checked_mul(dp_.value(), tp_.value()), detail::checked_mul(pp_.value(), cp_.value()));
  }

 private:
  constexpr void set(data_parallel d) { dp_ = d; }
  constexpr void set(tensor_parallel d) { tp_ = d; }
  constexpr void set(pipeline_parallel d) { pp_ = d; }
  constexpr void set(context_parallel d) { cp_ = d; }
  template <class T>
  constexpr void set(T) {}  // not a degree: the static_assert above has said so
  data_parallel dp_{};
  tensor_parallel tp_{};
  pipeline_parallel pp_{};
  context_parallel cp_{};
};

}  // namespace zeromem
