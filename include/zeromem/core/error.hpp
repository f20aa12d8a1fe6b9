// Error reporting shared by every layer: run-time misuse throws std::invalid_argument, arithmetic that would
// leave 64 bits throws std::overflow_error. Messages start with "zeromem: " and name the fix.
// The helpers are not constexpr on purpose: reaching one during constant evaluation is a compile error,
// so a constexpr misuse fails to compile and a run-time misuse throws, from the same line of code.
#pragma once

#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>

namespace zeromem {
namespace detail {

template <class...>
inline constexpr bool always_false = false;

// The failure paths are cold: compilers place the code that builds and throws a message away from the checks, which
// then cost a predicted branch each, and the checks' callers stay small in the instruction cache.
#if defined(__GNUC__) || defined(__clang__)
#define ZEROMEM_COLD __attribute__((cold))
#define ZEROMEM_RARELY(x) __builtin_expect(!!(x), 0)
#define ZEROMEM_USUALLY(x) __builtin_expect(!!(x), 1)
#define ZEROMEM_NOINLINE __attribute__((noinline))
#else
#define ZEROMEM_COLD
#define ZEROMEM_RARELY(x) (x)
#define ZEROMEM_USUALLY(x) (x)
#define ZEROMEM_NOINLINE
#endif

[[noreturn]] ZEROMEM_COLD inline void fail(const std::string& message) { throw std::invalid_argument("zeromem: " + message); }
// A literal message: no std::string is built where the check is, which keeps checks small enough to inline.
[[noreturn]] ZEROMEM_COLD inline void fail(const char* message) { fail(std::string(message)); }

// Input echoed in a message, in quotes and bounded: at most `shown` characters of it (48; a file path 256), then
// how long it was, with control characters shown as '?', so an error is one short line whatever was typed or read.
inline std::string quoted(std::string_view text, std::size_t shown = 48) {
  std::string out = "'";
  for (std::size_t i = 0; i < text.size() && i < shown; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    out += c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c);
  }
  out += "'";
  if (text.size() > shown) out += " (" + std::to_string(text.size()) + " characters, first " + std::to_string(shown) + " shown)";
  return out;
}

[[noreturn]] ZEROMEM_COLD inline void fail_value_text(const char* what, const std::string& value, const char* fix) {
  fail(std::string(what) + ", got " + value + "; " + fix);
}
// "what, got value; fix": integers exactly, other numbers without trailing zeros. A template, so that a check passes
// its value as it is (a conversion to long double at every check would make each one larger).
template <class T>
[[noreturn]] ZEROMEM_COLD inline void fail_value(const char* what, T value, const char* fix) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>, "zeromem: fail_value reports a number");
  if constexpr (std::is_integral_v<T>) {
    fail_value_text(what, std::to_string(value), fix);
  } else {
    std::string v = std::to_string(static_cast<long double>(value));
    // to_string prints six decimals; trim them for whole numbers.
    if (auto dot = v.find('.'); dot != std::string::npos) {
      v.erase(v.find_last_not_of('0') + 1);
      if (!v.empty() && v.back() == '.') v.pop_back();
    }
    fail_value_text(what, v, fix);
  }
}

[[noreturn]] ZEROMEM_COLD inline void fail_overflow(const char* what) {
  throw std::overflow_error(std::string("zeromem: ") + what +
                            " overflows the 64-bit byte range; check the sizes (a unit slip such as bytes for GB?)");
}

inline constexpr std::int64_t i64_max = std::numeric_limits<std::int64_t>::max();
inline constexpr std::int64_t i64_min = std::numeric_limits<std::int64_t>::min();

// Overflow-checked arithmetic: the compilers' builtins where they exist (one flag test), a portable fallback
// elsewhere (which divides, so it is slower).
#if defined(__GNUC__) || defined(__clang__)
#define ZEROMEM_HAS_OVERFLOW_BUILTINS 1
#endif

// For a callback of a module walk and the small sums of a step's terms: inlined where they are called, their
// arguments stay in registers instead of making a round trip through a struct in memory (whose loads stall when they
// read back what was just stored). Compilers otherwise leave them out of line in large functions.
#if defined(__GNUC__) || defined(__clang__)
#define ZEROMEM_ALWAYS_INLINE __attribute__((always_inline))
#else
#define ZEROMEM_ALWAYS_INLINE
#endif

constexpr std::int64_t checked_add(std::int64_t a, std::int64_t b, const char* what = "a sum") {
#ifdef ZEROMEM_HAS_OVERFLOW_BUILTINS
  std::int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) fail_overflow(what);
  return r;
#else
  if ((b > 0 && a > i64_max - b) || (b < 0 && a < i64_min - b)) fail_overflow(what);
  return a + b;
#endif
}

constexpr std::int64_t checked_sub(std::int64_t a, std::int64_t b, const char* what = "a difference") {
#ifdef ZEROMEM_HAS_OVERFLOW_BUILTINS
  std::int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) fail_overflow(what);
  return r;
#else
  if ((b < 0 && a > i64_max + b) || (b > 0 && a < i64_min + b)) fail_overflow(what);
  return a - b;
#endif
}

constexpr std::int64_t checked_mul(std::int64_t a, std::int64_t b, const char* what = "a product") {
#ifdef ZEROMEM_HAS_OVERFLOW_BUILTINS
  std::int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) fail_overflow(what);
  return r;
#else
  if (a != 0 && b != 0) {
    const bool overflow = a > 0 ? (b > 0 ? a > i64_max / b : b < i64_min / a)
                                : (b > 0 ? a < i64_min / b : b < i64_max / a);
    if (overflow) fail_overflow(what);
  }
  return a * b;
#endif
}

// a x b, or the largest int64 where that overflows (for a count compared with a bound); a and b non-negative.
constexpr std::int64_t saturating_product(std::int64_t a, std::int64_t b) {
#ifdef ZEROMEM_HAS_OVERFLOW_BUILTINS
  std::int64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? i64_max : r;
#else
  return b != 0 && a > i64_max / b ? i64_max : a * b;
#endif
}

// Sums and products of several terms, each step overflow-checked.
template <class... I>
constexpr std::int64_t checked_sum(std::int64_t a, std::int64_t b, I... rest) {
  const std::int64_t s = checked_add(a, b, "a sum of sizes");
  if constexpr (sizeof...(rest) == 0) return s;
  else return checked_sum(s, rest...);
}
template <class... I>
constexpr std::int64_t checked_product(std::int64_t a, std::int64_t b, I... rest) {
  const std::int64_t p = checked_mul(a, b, "a product of sizes");
  if constexpr (sizeof...(rest) == 0) return p;
  else return checked_product(p, rest...);
}

// Passed by callers that validated their inputs already, so that layers calling layers validate once.
struct assume_valid_t {};
inline constexpr assume_valid_t assume_valid{};

// Division by run-time degrees and head counts, which are nearly always powers of two: for those a shift and a
// mask replace the 64-bit divide (tens of cycles) with identical results; anything else divides. The most common
// degree, 1, returns first (221 of a step estimate's 3,867 instructions, callgrind).
constexpr bool is_power_of_two(std::int64_t b) { return b > 0 && (b & (b - 1)) == 0; }
constexpr int log2_of_power_of_two(std::int64_t b) {
#ifdef ZEROMEM_HAS_OVERFLOW_BUILTINS
  return __builtin_ctzll(static_cast<unsigned long long>(b));
#else
  int k = 0;
  while ((b >> k) != 1) ++k;
  return k;
#endif
}
// a / b and a % b for b > 0, as C++ defines them (truncating toward zero).
ZEROMEM_ALWAYS_INLINE constexpr std::int64_t quotient(std::int64_t a, std::int64_t b) {
  if (b == 1) return a;
  return ZEROMEM_USUALLY(a >= 0 && is_power_of_two(b)) ? a >> log2_of_power_of_two(b) : a / b;
}
ZEROMEM_ALWAYS_INLINE constexpr std::int64_t remainder(std::int64_t a, std::int64_t b) {
  if (b == 1) return 0;
  return ZEROMEM_USUALLY(a >= 0 && is_power_of_two(b)) ? a & (b - 1) : a % b;
}
constexpr bool divides(std::int64_t b, std::int64_t a) { return remainder(a, b) == 0; }

// Ceiling of a / b (any sign of a), without overflow; b must be positive.
// (One test of b for the quotient and the remainder together: calling both tested it twice.)
ZEROMEM_ALWAYS_INLINE constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b, assume_valid_t) {
  if (b == 1) return a;
  if (ZEROMEM_USUALLY(a >= 0 && is_power_of_two(b))) return (a >> log2_of_power_of_two(b)) + ((a & (b - 1)) != 0 ? 1 : 0);
  const std::int64_t q = a / b;
  return (a % b != 0 && a > 0) ? q + 1 : q;
}
ZEROMEM_ALWAYS_INLINE constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  if (b <= 0) fail_value("a divisor must be positive", b, "pass a degree of at least 1");
  return ceil_div(a, b, assume_valid_t{});
}

// Converts any integer to int64, rejecting values that do not fit.
template <class I>
constexpr std::int64_t to_i64(I n) {
  static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>, "zeromem: expected an integer");
  if constexpr (std::is_unsigned_v<I>) {
    if (n > static_cast<std::make_unsigned_t<std::int64_t>>(i64_max)) fail_overflow("an integer argument");
  }
  return static_cast<std::int64_t>(n);
}

// The names of a catalogue for a message or help text: "a, b, c".
template <class Range, class NameOf>
std::string join_names(const Range& items, const char* separator, NameOf name_of) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : separator) + std::string(name_of(item));
  return out;
}

// A name in lower case, and without '-', '_', '.' and ' ' where drop_punctuation: what two spellings of one
// name share (Llama2-7B and llama-2-7b, L-BFGS and lbfgs).
inline std::string folded(std::string_view s, bool drop_punctuation) {
  std::string out;
  for (char c : s) {
    if (drop_punctuation && (c == '-' || c == '_' || c == '.' || c == ' ')) continue;
    out += c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

// The catalogue's name a typed one most likely meant: the same name in other case or punctuation (llama2-7b for
// llama-2-7b), else the one name it begins (h100 for h100-80gb); empty otherwise.
template <class Range, class NameOf>
std::string meant_name(const Range& items, NameOf name_of, std::string_view text) {
  const std::string loose = folded(text, true), lower = folded(text, false);
  if (loose.empty()) return {};
  std::string begun;
  int begun_count = 0;
  for (const auto& item : items) {
    const std::string n(name_of(item));
    if (folded(n, true) == loose) return n;
    if (n.size() > lower.size() && folded(n, false).compare(0, lower.size(), lower) == 0) {
      begun = n;
      ++begun_count;
    }
  }
  return begun_count == 1 ? begun : std::string{};
}

// " (did you mean x?)" with meant_name's x; empty where there is none.
template <class Range, class NameOf>
std::string did_you_mean(const Range& items, NameOf name_of, std::string_view text) {
  const std::string meant = meant_name(items, name_of, text);
  return meant.empty() ? std::string{} : " (did you mean " + meant + "?)";
}

// "the 32 attention heads must divide evenly over tp 3; pick a tp that divides 32": both numbers named, so that
// the message says which is which.
[[noreturn]] ZEROMEM_COLD inline void fail_split(const char* what, std::int64_t count, std::int64_t tp, const char* tp_name) {
  const std::string n = std::to_string(count);
  fail("the " + n + " " + what + " must divide evenly over " + tp_name + " " + std::to_string(tp) + "; pick a " + tp_name +
       " that divides " + n);
}

// Tensor parallelism over attention heads (Megatron-LM arguments.py: num_attention_heads % tp == 0; vLLM
// ModelConfig.verify_with_parallel_config). `tp_name` is the flag's word: "tp", or vLLM's "tensor_parallel_size".
constexpr void require_heads_split(std::int64_t heads, std::int64_t tp, const char* tp_name = "tp") {
  if (!divides(tp, heads)) fail_split("attention heads", heads, tp, tp_name);
}

// Tensor parallelism over key/value heads: vLLM's QKVParallelLinear and Megatron-LM's num_query_groups both divide
// one by the other (replicating heads when tp exceeds them).
[[noreturn]] ZEROMEM_COLD inline void fail_kv_split(std::int64_t kv_heads, std::int64_t tp) {
  const std::string n = std::to_string(kv_heads);
  fail("tp " + std::to_string(tp) + " neither divides the " + n + " key/value heads nor is a multiple of them; pick a tp that divides " +
       n + " or a multiple of " + n);
}
constexpr void require_kv_heads_split(std::int64_t kv_heads, std::int64_t tp) {
  if (!divides(tp, kv_heads) && !divides(kv_heads, tp)) fail_kv_split(kv_heads, tp);
}

// Parses an enum from its name(): the value whose name(v) equals text, or a clear error listing the names.
template <class E, std::size_t N>
E parse_named(std::string_view text, const E (&values)[N], const char* what) {
  for (E v : values)
    if (name(v) == text) return v;
  const auto name_of = [](E v) { return name(v); };
  fail("unknown " + std::string(what) + " " + quoted(text) + did_you_mean(values, name_of, text) + "; expected one of " +
       join_names(values, ", ", name_of));
}

// A positive degree (data-parallel size, GPUs per node, ...): rejects zero and negatives by name.
constexpr std::int64_t require_positive(std::int64_t n, const char* what) {
  if (n <= 0) fail_value(what, n, "it must be at least 1");
  return n;
}

}  // namespace detail
}  // namespace zeromem
