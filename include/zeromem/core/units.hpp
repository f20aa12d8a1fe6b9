// Typed quantities: element counts (parameters are elements), bytes, and bytes per element.
// Boost.Units checks the dimensions underneath; the named types below keep error messages short and
// reject mixed dimensions with a message that says what to write instead.
// This is the only zeromem header that includes Boost.Units.
#pragma once

#include <boost/units/base_dimension.hpp>
#include <boost/units/base_unit.hpp>
#include <boost/units/make_system.hpp>
#include <boost/units/physical_dimensions/information.hpp>
#include <boost/units/quantity.hpp>
#include <boost/units/unit.hpp>

#include <cstdint>
#include <type_traits>

#include "zeromem/core/error.hpp"
#include "zeromem/core/parse.hpp"

namespace zeromem {

namespace detail {
namespace bu = boost::units;

struct element_base_dimension : bu::base_dimension<element_base_dimension, 9101> {};
using element_dimension = element_base_dimension::dimension_type;

struct element_base_unit : bu::base_unit<element_base_unit, element_dimension, 9101> {
  static constexpr const char* name() { return "element"; }
  static constexpr const char* symbol() { return "elem"; }
};
// Boost's information::byte_base_unit is a scaled bit (so its prefixes print wrong for bytes);
// zeromem counts whole bytes, so here the byte itself is the base unit of the information dimension.
struct byte_base_unit : bu::base_unit<byte_base_unit, bu::information_dimension, 9102> {
  static constexpr const char* name() { return "byte"; }
  static constexpr const char* symbol() { return "B"; }
};

using system = bu::make_system<element_base_unit, byte_base_unit>::type;
using element_unit = bu::unit<element_dimension, system>;
using byte_unit = bu::unit<bu::information_dimension, system>;
using byte_per_element_unit = bu::divide_typeof_helper<byte_unit, element_unit>::type;
// elements x bytes/element must reduce to bytes: Boost proves it at compile time.
static_assert(std::is_same_v<bu::multiply_typeof_helper<element_unit, byte_per_element_unit>::type, byte_unit>,
              "zeromem: element x byte/element must be byte");
}  // namespace detail

class bytes;
class bytes_per_element;
constexpr bytes_per_element bits_per_element(std::int64_t bits);

/// A number of elements (parameters, activations, tokens x hidden...). Never negative.
class elements {
 public:
  using quantity_type = boost::units::quantity<detail::element_unit, std::int64_t>;

  constexpr elements() = default;
  template <class T>
  elements(T) {  // NOLINT: catches every raw number and every byte count to explain the fix
    static_assert(detail::always_false<T>,
                  "zeromem: this is not an element count; write elements_of(n) or a literal such as 7.5_Gparams");
  }

  constexpr std::int64_t count() const { return n_; }
  /// The Boost.Units quantity, for composing with other Boost.Units code.
  constexpr quantity_type quantity() const { return quantity_type::from_value(n_); }

  friend constexpr elements elements_of_checked(std::int64_t n);

  /// Counts are never negative, so a sum that does not overflow needs no sign check.
  friend constexpr elements operator+(elements a, elements b) {
    return elements(raw_tag{}, detail::checked_add(a.count(), b.count(), "an element sum"));
  }
  constexpr elements& operator+=(elements o) { return *this = *this + o; }

  friend constexpr bool operator==(elements a, elements b) { return a.count() == b.count(); }
  friend constexpr bool operator!=(elements a, elements b) { return a.count() != b.count(); }
  friend constexpr bool operator<(elements a, elements b) { return a.count() < b.count(); }
  friend constexpr bool operator<=(elements a, elements b) { return a.count() <= b.count(); }
  friend constexpr bool operator>(elements a, elements b) { return a.count() > b.count(); }
  friend constexpr bool operator>=(elements a, elements b) { return a.count() >= b.count(); }

 private:
  struct raw_tag {};
  constexpr elements(raw_tag, std::int64_t n) : n_(n) {}
  std::int64_t n_ = 0;  // stored raw so the type stays trivially copyable (Boost's quantity is not)
};

constexpr elements elements_of_checked(std::int64_t n) {
  if (n < 0) detail::fail_value("an element count cannot be negative", n, "pass n >= 0");
  return elements(elements::raw_tag{}, n);
}

/// Makes an element count from an integer. Rejects negative values and values beyond 64 bits.
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
constexpr elements elements_of(I n) {
  return elements_of_checked(detail::to_i64(n));
}
template <class F, std::enable_if_t<std::is_floating_point_v<F>, int> = 0>
elements elements_of(F) {
  static_assert(detail::always_false<F>,
                "zeromem: element counts are whole numbers; pass an integer, or use 7.5_Gparams / parse_elements(\"7.5B\")");
  return {};
}

/// An element count written as people write it ("7.5B", "350M", "7,615,616,512"; parse_count's rules), typed.
inline elements parse_elements(std::string_view text, const char* what = "an element count") {
  return elements_of_checked(parse_count(text, what));
}

/// A number of bytes. Signed, so that differences such as headroom can go below zero.
class bytes {
 public:
  using quantity_type = boost::units::quantity<detail::byte_unit, std::int64_t>;

  constexpr bytes() = default;
  template <class T>
  bytes(T) {  // NOLINT: catches every raw number and every element count to explain the fix
    static_assert(detail::always_false<T>,
                  "zeromem: this is not a byte count; write bytes_of(n) or a literal such as 80_GiB, or multiply "
                  "elements by a bytes_per_element");
  }

  constexpr std::int64_t count() const { return n_; }
  /// The Boost.Units quantity, for composing with other Boost.Units code.
  constexpr quantity_type quantity() const { return quantity_type::from_value(n_); }

  friend constexpr bytes bytes_of_checked(std::int64_t n);

  constexpr bytes& operator+=(bytes o) { return *this = *this + o; }
  constexpr bytes& operator-=(bytes o) { return *this = *this - o; }

  friend constexpr bytes operator+(bytes a, bytes b) {
    return bytes(raw_tag{}, detail::checked_add(a.count(), b.count(), "a byte sum"));
  }
  friend constexpr bytes operator-(bytes a, bytes b) {
    return bytes(raw_tag{}, detail::checked_sub(a.count(), b.count(), "a byte difference"));
  }
  friend constexpr bytes operator-(bytes a) { return bytes(raw_tag{}, detail::checked_sub(0, a.count())); }

  friend constexpr bool operator==(bytes a, bytes b) { return a.count() == b.count(); }
  friend constexpr bool operator!=(bytes a, bytes b) { return a.count() != b.count(); }
  friend constexpr bool operator<(bytes a, bytes b) { return a.count() < b.count(); }
  friend constexpr bool operator<=(bytes a, bytes b) { return a.count() <= b.count(); }
  friend constexpr bool operator>(bytes a, bytes b) { return a.count() > b.count(); }
  friend constexpr bool operator>=(bytes a, bytes b) { return a.count() >= b.count(); }

 private:
  struct raw_tag {};
  constexpr bytes(raw_tag, std::int64_t n) : n_(n) {}
  std::int64_t n_ = 0;  // stored raw so the type stays trivially copyable (Boost's quantity is not)
};

constexpr bytes bytes_of_checked(std::int64_t n) { return bytes(bytes::raw_tag{}, n); }

/// Makes a byte count from an integer.
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
constexpr bytes bytes_of(I n) {
  return bytes_of_checked(detail::to_i64(n));
}
template <class F, std::enable_if_t<std::is_floating_point_v<F>, int> = 0>
bytes bytes_of(F) {
  static_assert(detail::always_false<F>,
                "zeromem: byte counts are whole numbers; pass an integer, or a literal such as 79.35_GiB / parse_bytes(\"79.35GiB\")");
  return {};
}

/// A size written as people write it ("80GB", "79.35 GiB"; parse_size's rules), typed.
inline bytes parse_bytes(std::string_view text, const char* what = "a size") { return bytes_of_checked(parse_size(text, what)); }

/// Bytes per element: a non-negative whole number of bits per element (int4 is 0.5 B, Adam states 12 B).
class bytes_per_element {
 public:
  using quantity_type = boost::units::quantity<detail::byte_per_element_unit, double>;

  constexpr bytes_per_element() = default;
  template <class T>
  bytes_per_element(T) {  // NOLINT: catches every raw number to explain the fix
    static_assert(detail::always_false<T>,
                  "zeromem: this is not a size per element; write bytes_per_element_of(2) or bits_per_element(4)");
  }

  /// Exact size in bits (an integer by construction).
  constexpr std::int64_t bits() const { return bits_; }
  /// Size in bytes (exact: a multiple of 1/8).
  constexpr double value() const { return static_cast<double>(bits_) / 8.0; }
  constexpr quantity_type quantity() const { return quantity_type::from_value(value()); }

  friend constexpr bytes_per_element bits_per_element(std::int64_t bits);

  friend constexpr bytes_per_element operator+(bytes_per_element a, bytes_per_element b) {
    return bits_per_element(detail::checked_add(a.bits_, b.bits_));
  }
  friend constexpr bool operator==(bytes_per_element a, bytes_per_element b) { return a.bits_ == b.bits_; }
  friend constexpr bool operator!=(bytes_per_element a, bytes_per_element b) { return a.bits_ != b.bits_; }
  friend constexpr bool operator<(bytes_per_element a, bytes_per_element b) { return a.bits_ < b.bits_; }

 private:
  struct raw_tag {};
  constexpr bytes_per_element(raw_tag, std::int64_t bits) : bits_(bits) {}
  std::int64_t bits_ = 0;
};

/// Makes a size per element from a whole number of bits (4 for int4, 16 for bf16).
constexpr bytes_per_element bits_per_element(std::int64_t bits) {
  if (bits < 0) detail::fail_value("bits per element cannot be negative", bits, "pass >= 0");
  return bytes_per_element(bytes_per_element::raw_tag{}, bits);
}

/// Makes a size per element from a whole number of bytes (2 for bf16, 12 for mixed-precision Adam states).
template <class I, std::enable_if_t<std::is_integral_v<I> && !std::is_same_v<I, bool>, int> = 0>
constexpr bytes_per_element bytes_per_element_of(I n) {
  return bits_per_element(detail::checked_mul(detail::to_i64(n), 8, "bytes per element"));
}
template <class F, std::enable_if_t<std::is_floating_point_v<F>, int> = 0>
bytes_per_element bytes_per_element_of(F) {
  static_assert(detail::always_false<F>,
                "zeromem: fractional sizes per element are written in bits; use bits_per_element(4) for 0.5 B");
  return {};
}

// ---- arithmetic --------------------------------------------------------------------------------

constexpr elements operator-(elements a, elements b) {
  if (b > a) detail::fail("an element count cannot become negative; subtract a smaller count");
  return elements_of_checked(a.count() - b.count());
}

/// Storage of n elements at s bytes each, rounded up to whole bytes (n int4 values take ceil(n/2) B).
ZEROMEM_ALWAYS_INLINE constexpr bytes operator*(elements n, bytes_per_element s) {
  const std::int64_t bits = detail::checked_mul(n.count(), s.bits(), "elements x bytes per element");
  return bytes_of_checked(detail::ceil_div(bits, 8));
}
constexpr bytes operator*(bytes_per_element s, elements n) { return n * s; }

template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
constexpr elements operator*(elements a, I k) {
  return elements_of_checked(detail::checked_mul(a.count(), detail::to_i64(k), "an element count"));
}
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
constexpr elements operator*(I k, elements a) {
  return a * k;
}
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
constexpr bytes operator*(bytes a, I k) {
  return bytes_of_checked(detail::checked_mul(a.count(), detail::to_i64(k), "a byte count"));
}
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
constexpr bytes operator*(I k, bytes a) {
  return a * k;
}
template <class I, std::enable_if_t<std::is_integral_v<I>, int> = 0>
constexpr bytes_per_element operator*(bytes_per_element a, I k) {
  return bits_per_element(detail::checked_mul(a.bits(), detail::to_i64(k), "bytes per element"));
}

/// The ratio of two byte counts (for example used / capacity).
constexpr double operator/(bytes a, bytes b) {
  if (b.count() == 0) detail::fail("cannot divide by a zero byte count");
  return static_cast<double>(a.count()) / static_cast<double>(b.count());
}

/// The largest share when `total` is split over `parts` ranks as evenly as whole units allow: ceil(total/parts).
ZEROMEM_ALWAYS_INLINE constexpr bytes largest_share(bytes total, std::int64_t parts) {
  return bytes_of_checked(
      detail::ceil_div(total.count(), detail::require_positive(parts, "the number of shards"), detail::assume_valid));
}
ZEROMEM_ALWAYS_INLINE constexpr elements largest_share(elements total, std::int64_t parts) {
  return elements_of_checked(
      detail::ceil_div(total.count(), detail::require_positive(parts, "the number of shards"), detail::assume_valid));
}
/// The share of rank `rank` (0-based): the first total % parts ranks hold one unit more.
/// Summed over all ranks the shares equal `total` exactly.
constexpr bytes share_of_rank(bytes total, std::int64_t parts, std::int64_t rank) {
  detail::require_positive(parts, "the number of shards");
  if (rank < 0 || rank >= parts) detail::fail_value("rank out of range", rank, "pass 0 <= rank < parts");
  return bytes_of_checked(detail::quotient(total.count(), parts) + (rank < detail::remainder(total.count(), parts) ? 1 : 0));
}

// ---- rejected mixtures: each names the fix -----------------------------------------------------

#define ZEROMEM_REJECT_MIXED(OP, A, B, MSG)                             \
  template <class T = void>                                            \
  constexpr void operator OP(A, B) {                                   \
    static_assert(detail::always_false<T>, MSG);                       \
  }
ZEROMEM_REJECT_MIXED(+, bytes, elements,
                     "zeromem: cannot add bytes and elements; convert the elements first: n * size_of(dtype::bf16)")
ZEROMEM_REJECT_MIXED(+, elements, bytes,
                     "zeromem: cannot add elements and bytes; convert the elements first: n * size_of(dtype::bf16)")
ZEROMEM_REJECT_MIXED(-, bytes, elements,
                     "zeromem: cannot subtract elements from bytes; convert the elements first: n * size_of(dtype::bf16)")
ZEROMEM_REJECT_MIXED(-, elements, bytes,
                     "zeromem: cannot subtract bytes from elements; convert the elements first: n * size_of(dtype::bf16)")
ZEROMEM_REJECT_MIXED(==, bytes, elements, "zeromem: cannot compare bytes with elements; convert the elements first")
ZEROMEM_REJECT_MIXED(==, elements, bytes, "zeromem: cannot compare elements with bytes; convert the elements first")
ZEROMEM_REJECT_MIXED(<, bytes, elements, "zeromem: cannot compare bytes with elements; convert the elements first")
ZEROMEM_REJECT_MIXED(<, elements, bytes, "zeromem: cannot compare elements with bytes; convert the elements first")
ZEROMEM_REJECT_MIXED(*, bytes, bytes, "zeromem: bytes x bytes has no meaning here; multiply bytes by an integer count")
#undef ZEROMEM_REJECT_MIXED

// ---- sizes in decimal and binary units ---------------------------------------------------------

/// Units for printing. Decimal: kB = 1e3 B, MB = 1e6 B, GB = 1e9 B, TB = 1e12 B.
/// Binary: KiB = 2^10 B, MiB = 2^20 B, GiB = 2^30 B, TiB = 2^40 B.
enum class size_unit { B, kB, MB, GB, TB, KiB, MiB, GiB, TiB };

constexpr std::int64_t bytes_in(size_unit u) {
  switch (u) {
    case size_unit::B: return 1;
    case size_unit::kB: return 1'000;
    case size_unit::MB: return 1'000'000;
    case size_unit::GB: return 1'000'000'000;
    case size_unit::TB: return 1'000'000'000'000;
    case size_unit::KiB: return std::int64_t{1} << 10;
    case size_unit::MiB: return std::int64_t{1} << 20;
    case size_unit::GiB: return std::int64_t{1} << 30;
    case size_unit::TiB: return std::int64_t{1} << 40;
  }
  detail::fail("unknown size unit");
}

constexpr const char* symbol(size_unit u) {
  switch (u) {
    case size_unit::B: return "B";
    case size_unit::kB: return "kB";
    case size_unit::MB: return "MB";
    case size_unit::GB: return "GB";
    case size_unit::TB: return "TB";
    case size_unit::KiB: return "KiB";
    case size_unit::MiB: return "MiB";
    case size_unit::GiB: return "GiB";
    case size_unit::TiB: return "TiB";
  }
  detail::fail("unknown size unit");
}

/// b expressed in unit u, correctly rounded to the nearest double (one division of exact integers).
constexpr double in_units(bytes b, size_unit u) {
  return static_cast<double>(b.count()) / static_cast<double>(bytes_in(u));
}
constexpr double to_gb(bytes b) { return in_units(b, size_unit::GB); }
constexpr double to_gib(bytes b) { return in_units(b, size_unit::GiB); }
constexpr double to_mib(bytes b) { return in_units(b, size_unit::MiB); }

/// A size given in a unit, rounded to the nearest whole byte (79.35 GiB is 85,201,413,734 B).
constexpr bytes bytes_from(long double value, size_unit u) {
  if (!(value == value)) detail::fail("a size cannot be NaN; pass a number");
  const long double b = value * static_cast<long double>(bytes_in(u));
  if (b > static_cast<long double>(detail::i64_max) || b < static_cast<long double>(detail::i64_min))
    detail::fail_overflow("a size");
  const long double rounded = b < 0 ? b - 0.5L : b + 0.5L;
  return bytes_of_checked(static_cast<std::int64_t>(rounded));
}

// ---- literals ----------------------------------------------------------------------------------

namespace detail {
constexpr elements count_literal(long double v, long double scale) {
  const long double n = v * scale;
  if (n > static_cast<long double>(detail::i64_max)) detail::fail_overflow("a parameter-count literal");
  // A decimal literal such as 0.1 is not exact in binary: accept values within 1e-12 of a whole number.
  const auto whole = static_cast<std::int64_t>(n + 0.5L);
  const long double off = n - static_cast<long double>(whole);
  if (n < 0 || off > 1e-12L * n || -off > 1e-12L * n)
    detail::fail("a parameter-count literal must be a whole number of parameters; write more digits");
  return elements_of_checked(whole);
}
constexpr elements count_literal(unsigned long long v, std::int64_t scale) {
  if (v > static_cast<unsigned long long>(detail::i64_max / scale)) detail::fail_overflow("a parameter-count literal");
  return elements_of_checked(static_cast<std::int64_t>(v) * scale);
}
constexpr bytes size_literal(unsigned long long v, size_unit u) {
  if (v > static_cast<unsigned long long>(detail::i64_max / bytes_in(u))) detail::fail_overflow("a size literal");
  return bytes_of_checked(static_cast<std::int64_t>(v) * bytes_in(u));
}
}  // namespace detail

namespace literals {

// clang-format off
constexpr elements operator""_params(unsigned long long v) { return detail::count_literal(v, 1); }
constexpr elements operator""_Kparams(unsigned long long v) { return detail::count_literal(v, 1'000); }
constexpr elements operator""_Kparams(long double v) { return detail::count_literal(v, 1e3L); }
constexpr elements operator""_Mparams(unsigned long long v) { return detail::count_literal(v, 1'000'000); }
constexpr elements operator""_Mparams(long double v) { return detail::count_literal(v, 1e6L); }
constexpr elements operator""_Gparams(unsigned long long v) { return detail::count_literal(v, 1'000'000'000); }
constexpr elements operator""_Gparams(long double v) { return detail::count_literal(v, 1e9L); }
constexpr elements operator""_Tparams(unsigned long long v) { return detail::count_literal(v, 1'000'000'000'000); }
constexpr elements operator""_Tparams(long double v) { return detail::count_literal(v, 1e12L); }

constexpr bytes operator""_B(unsigned long long v) { return detail::size_literal(v, size_unit::B); }
constexpr bytes operator""_kB(unsigned long long v) { return detail::size_literal(v, size_unit::kB); }
constexpr bytes operator""_kB(long double v) { return bytes_from(v, size_unit::kB); }
constexpr bytes operator""_MB(unsigned long long v) { return detail::size_literal(v, size_unit::MB); }
constexpr bytes operator""_MB(long double v) { return bytes_from(v, size_unit::MB); }
constexpr bytes operator""_GB(unsigned long long v) { return detail::size_literal(v, size_unit::GB); }
constexpr bytes operator""_GB(long double v) { return bytes_from(v, size_unit::GB); }
constexpr bytes operator""_TB(unsigned long long v) { return detail::size_literal(v, size_unit::TB); }
constexpr bytes operator""_TB(long double v) { return bytes_from(v, size_unit::TB); }
constexpr bytes operator""_KiB(unsigned long long v) { return detail::size_literal(v, size_unit::KiB); }
constexpr bytes operator""_KiB(long double v) { return bytes_from(v, size_unit::KiB); }
constexpr bytes operator""_MiB(unsigned long long v) { return detail::size_literal(v, size_unit::MiB); }
constexpr bytes operator""_MiB(long double v) { return bytes_from(v, size_unit::MiB); }
constexpr bytes operator""_GiB(unsigned long long v) { return detail::size_literal(v, size_unit::GiB); }
constexpr bytes operator""_GiB(long double v) { return bytes_from(v, size_unit::GiB); }
constexpr bytes operator""_TiB(unsigned long long v) { return detail::size_literal(v, size_unit::TiB); }
constexpr bytes operator""_TiB(long double v) { return bytes_from(v, size_unit::TiB); }
// clang-format on
}  // namespace literals

}  // namespace zeromem
