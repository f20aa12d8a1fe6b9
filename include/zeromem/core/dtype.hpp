// Element types: fp32, bf16, fp16, fp8 (e4m3, e5m2), int8 and int4, as compile-time tags with constexpr
// sizes and as a run-time enum parsed from strings.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "zeromem/core/error.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

enum class dtype : unsigned char { fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8, int4 };

inline constexpr std::array<dtype, 7> all_dtypes{dtype::fp32,     dtype::bf16,     dtype::fp16, dtype::fp8_e4m3,
                                                  dtype::fp8_e5m2, dtype::int8,     dtype::int4};

/// Storage bits per element (IEEE 754 binary32/binary16, bfloat16, OCP FP8 E4M3/E5M2, int8, packed int4).
ZEROMEM_ALWAYS_INLINE constexpr int bit_width(dtype d) {
  switch (d) {
    case dtype::fp32: return 32;
    case dtype::bf16:
    case dtype::fp16: return 16;
    case dtype::fp8_e4m3:
    case dtype::fp8_e5m2:
    case dtype::int8: return 8;
    case dtype::int4: return 4;
  }
  detail::fail("unknown dtype");
}

constexpr std::string_view name(dtype d) {
  switch (d) {
    case dtype::fp32: return "fp32";
    case dtype::bf16: return "bf16";
    case dtype::fp16: return "fp16";
    case dtype::fp8_e4m3: return "fp8_e4m3";
    case dtype::fp8_e5m2: return "fp8_e5m2";
    case dtype::int8: return "int8";
    case dtype::int4: return "int4";
  }
  detail::fail("unknown dtype");
}

ZEROMEM_ALWAYS_INLINE constexpr bytes_per_element size_of(dtype d) { return bits_per_element(bit_width(d)); }

/// Parses a dtype name: the names above, plus PyTorch's spellings (float32, bfloat16, float16, half,
/// float8_e4m3fn, float8_e5m2). Throws std::invalid_argument listing the accepted names.
inline dtype parse_dtype(std::string_view s) {
  struct alias {
    std::string_view text;
    dtype value;
  };
  static constexpr alias aliases[] = {
      {"fp32", dtype::fp32},         {"float32", dtype::fp32},         {"float", dtype::fp32},
      {"bf16", dtype::bf16},         {"bfloat16", dtype::bf16},        {"fp16", dtype::fp16},
      {"float16", dtype::fp16},      {"half", dtype::fp16},            {"fp8_e4m3", dtype::fp8_e4m3},
      {"float8_e4m3fn", dtype::fp8_e4m3}, {"fp8_e5m2", dtype::fp8_e5m2}, {"float8_e5m2", dtype::fp8_e5m2},
      {"int8", dtype::int8},         {"int4", dtype::int4}};
  for (const auto& a : aliases)
    if (a.text == s) return a.value;
  detail::fail("unknown dtype " + detail::quoted(s) +
               "; expected one of fp32, bf16, fp16, fp8_e4m3, fp8_e5m2, int8, int4");
}

/// Compile-time dtype tags: fp32_t::bits, fp32_t::size (a bytes_per_element), fp32_t::value (the enum).
template <dtype D>
struct dtype_tag {
  static constexpr dtype value = D;
  static constexpr int bits = bit_width(D);
  static constexpr bytes_per_element size = bits_per_element(bit_width(D));
};
using fp32_t = dtype_tag<dtype::fp32>;
using bf16_t = dtype_tag<dtype::bf16>;
using fp16_t = dtype_tag<dtype::fp16>;
using fp8_e4m3_t = dtype_tag<dtype::fp8_e4m3>;
using fp8_e5m2_t = dtype_tag<dtype::fp8_e5m2>;
using int8_t_tag = dtype_tag<dtype::int8>;
using int4_t_tag = dtype_tag<dtype::int4>;

/// A count of elements stored in dtype D. It turns into bytes only through D (`bytes()`), so a bf16 count cannot be
/// priced at fp32's size, and counts of two dtypes do not mix.
template <dtype D>
class typed_elements {
 public:
  static constexpr dtype type = D;
  constexpr typed_elements() = default;
  constexpr explicit typed_elements(elements n) : n_(n) {}
  template <dtype E>
  constexpr typed_elements(typed_elements<E> other) : n_(other.count()) {  // NOLINT: only to refuse
    static_assert(E == D, "zeromem: elements of one dtype are not elements of another; build a new count in the target dtype");
  }
  constexpr elements count() const { return n_; }
  /// D's size times the count (sub-byte types rounded up to whole bytes, as their packed storage is).
  constexpr bytes size() const { return n_ * dtype_tag<D>::size; }
  friend constexpr typed_elements operator+(typed_elements a, typed_elements b) { return typed_elements(a.n_ + b.n_); }
  template <class S>
  friend constexpr bytes operator*(typed_elements, S) {
    static_assert(detail::always_false<S>, "zeromem: a typed element count knows its dtype's size; call .size() instead of multiplying");
    return bytes{};
  }

 private:
  elements n_{};
};

}  // namespace zeromem
