// Exact parsing of human-written counts ("7.5B", "350M", "1T", "7.5e9", "7,615,616,512") and sizes
// ("80GiB", "79.35 GiB", "1TB"). Decimal digits are read as integers, so 7.5B is exactly 7,500,000,000.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "zeromem/core/error.hpp"

namespace zeromem {

namespace detail {
struct decimal {
  std::int64_t digits = 0;  // all significant digits as one integer
  int exponent = 0;         // value = digits * 10^exponent
};

// Reads [digits][.digits][e[+-]digits] from the front of s; commas and underscores between digits are skipped.
inline decimal read_decimal(std::string_view& s, std::string_view original, const char* what,
                            const char* examples = "7.5B, 350M or 7.5e9") {
  decimal d{};
  bool any = false, dot = false;
  std::size_t i = 0;
  auto bad = [&]() { fail("cannot read " + std::string(what) + " " + detail::quoted(original) + "; write it like " + examples); };
  for (; i < s.size(); ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') {
      if (d.digits > (i64_max - (c - '0')) / 10) fail_overflow(what);
      d.digits = d.digits * 10 + (c - '0');
      if (dot) --d.exponent;
      any = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else if ((c == ',' || c == '_') && any && !dot) {
      continue;
    } else {
      break;
    }
  }
  if (!any) bad();
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    bool neg = false;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    int e = 0;
    bool edigits = false;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      if (e > 400) fail_overflow(what);
      e = e * 10 + (s[i] - '0');
      edigits = true;
    }
    if (!edigits) bad();
    d.exponent += neg ? -e : e;
  }
  s.remove_prefix(i);
  return d;
}

// digits * 10^exponent * scale, which must be a whole number.
inline std::int64_t whole_value(decimal d, std::int64_t scale, std::string_view original, const char* what) {
  std::int64_t v = checked_mul(d.digits, scale, what);
  for (; d.exponent > 0; --d.exponent) v = checked_mul(v, 10, what);
  for (; d.exponent < 0; ++d.exponent) {
    if (v % 10 != 0)
      fail(std::string(what) + " " + detail::quoted(original) + " is not a whole number; write it exactly");
    v /= 10;
  }
  return v;
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
}  // namespace detail

/// A count with an optional decimal suffix: K = 1e3, M = 1e6, B or G = 1e9, T = 1e12 (case-insensitive).
/// Throws std::invalid_argument for text that is not a non-negative whole number.
inline std::int64_t parse_count(std::string_view text, const char* what = "a count") {
  std::string_view s = detail::trim(text);
  if (!s.empty() && s.front() == '-') detail::fail(std::string(what) + " cannot be negative, got " + detail::quoted(text));
  const detail::decimal d = detail::read_decimal(s, text, what);
  std::int64_t scale = 1;
  if (s.size() == 1) {
    switch (s.front()) {
      case 'k': case 'K': scale = 1'000; break;
      case 'm': case 'M': scale = 1'000'000; break;
      case 'b': case 'B': case 'g': case 'G': scale = 1'000'000'000; break;
      case 't': case 'T': scale = 1'000'000'000'000; break;
      default:
        detail::fail("unknown suffix in " + std::string(what) + " " + detail::quoted(text) + "; use K, M, B or T");
    }
  } else if (!s.empty()) {
    detail::fail("cannot read " + std::string(what) + " " + detail::quoted(text) + "; write it like 7.5B, 350M or 7.5e9");
  }
  return detail::whole_value(d, scale, text, what);
}

/// An integer flag or field within [lo, hi], written as plain decimal digits with an optional sign. Anything
/// else (empty text, "3.5", "1e3", a value outside the range, however many digits) throws one message naming
/// `what` and the range, so no value is ever clamped or read as "not given".
inline std::int64_t parse_integer(std::string_view text, const char* what, std::int64_t lo, std::int64_t hi) {
  const auto range = [&]() {
    std::string top = hi == detail::i64_max ? std::string("9223372036854775807 (2^63 - 1)") : std::to_string(hi);
    if (hi >= (std::int64_t{1} << 20) && (hi & (hi - 1)) == 0) {  // a large power of two: say which
      int k = 0;
      for (std::int64_t v = hi; v > 1; v >>= 1) ++k;
      top += " (2^" + std::to_string(k) + ")";
    }
    return std::string(what) + " must be an integer from " + std::to_string(lo) + " to " + top;
  };
  std::string_view s = detail::trim(text);
  const bool negative = !s.empty() && s.front() == '-';
  if (!s.empty() && (s.front() == '-' || s.front() == '+')) s.remove_prefix(1);
  if (s.empty()) detail::fail(range() + ", got " + detail::quoted(text));
  std::int64_t v = 0;  // accumulated negatively: -(2^63) is representable, 2^63 is not
  for (char c : s) {
    if (c < '0' || c > '9') detail::fail(range() + ", got " + detail::quoted(text));
    const int digit = c - '0';
    if (v < (detail::i64_min + digit) / 10) detail::fail(range() + ", got " + detail::quoted(text));
    v = v * 10 - digit;
  }
  if (!negative && v == detail::i64_min) detail::fail(range() + ", got " + detail::quoted(text));
  const std::int64_t value = negative ? v : -v;
  if (value < lo || value > hi) detail::fail(range() + ", got " + detail::quoted(text));
  return value;
}

/// A token count: 4096, 32K (= 32,768: context lengths count in powers of two, K = 2^10, M = 2^20), 1.5K.
/// Throws std::invalid_argument for text that is not a whole number of tokens.
inline std::int64_t parse_tokens(std::string_view text, const char* what = "a token count") {
  std::string_view s = detail::trim(text);
  if (!s.empty() && s.front() == '-') detail::fail(std::string(what) + " cannot be negative, got " + detail::quoted(text));
  const detail::decimal d = detail::read_decimal(s, text, what, "4096, 32K (32,768) or 1M (1,048,576)");
  std::int64_t scale = 1;
  if (s == "k" || s == "K") scale = std::int64_t{1} << 10;
  else if (s == "m" || s == "M") scale = std::int64_t{1} << 20;
  else if (!s.empty())
    detail::fail("cannot read " + std::string(what) + " " + detail::quoted(text) + "; write it like 4096, 32K (32,768) or 1M (1,048,576)");
  return detail::whole_value(d, scale, text, what);
}

/// A size with a unit: B, kB, MB, GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2). A unit is
/// required: "80" alone is ambiguous. Fractional sizes round to the nearest byte (79.35GiB).
inline std::int64_t parse_size(std::string_view text, const char* what = "a size") {
  std::string_view s = detail::trim(text);
  if (!s.empty() && s.front() == '-') detail::fail(std::string(what) + " cannot be negative, got " + detail::quoted(text));
  detail::decimal d = detail::read_decimal(s, text, what);
  s = detail::trim(s);
  struct unit {
    std::string_view symbol;
    std::int64_t scale;
  };
  static constexpr unit units[] = {{"B", 1},
                                   {"kB", 1'000},         {"KB", 1'000},
                                   {"MB", 1'000'000},     {"GB", 1'000'000'000},
                                   {"TB", 1'000'000'000'000},
                                   {"KiB", std::int64_t{1} << 10}, {"MiB", std::int64_t{1} << 20},
                                   {"GiB", std::int64_t{1} << 30}, {"TiB", std::int64_t{1} << 40}};
  for (const unit& u : units) {
    if (s != u.symbol) continue;
    // Round digits * 10^exponent * scale to the nearest byte, exactly.
    std::int64_t v = detail::checked_mul(d.digits, u.scale, what);
    for (; d.exponent > 0; --d.exponent) v = detail::checked_mul(v, 10, what);
    for (; d.exponent < 0; ++d.exponent) v = v / 10 + (d.exponent == -1 && v % 10 >= 5 ? 1 : 0);
    return v;
  }
  detail::fail("cannot read " + std::string(what) + " '" + std::string(text) +
               "'; give a unit: B, kB, MB, GB, TB (powers of 10) or KiB, MiB, GiB, TiB (powers of 2)");
}

}  // namespace zeromem
