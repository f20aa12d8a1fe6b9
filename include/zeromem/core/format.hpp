// Text for sizes and counts, always with a unit. Builds strings; does no I/O.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "zeromem/core/units.hpp"

namespace zeromem {

/// "46.91 GiB": the size in one unit with a fixed number of decimals and the unit's symbol.
inline std::string format_bytes(bytes b, size_unit u, int decimals = 2) {
  if (decimals < 0 || decimals > 12) detail::fail_value("decimals out of range", decimals, "pass 0 to 12");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", decimals, in_units(b, u), symbol(u));
  return buf;
}

/// "7,500,000,000": an integer with thousands separators.
inline std::string format_count(std::int64_t n) {
  std::string digits = std::to_string(n);
  const std::size_t first = (n < 0) ? 1 : 0;
  for (std::size_t i = digits.size(); i > first + 3; i -= 3) digits.insert(i - 3, ",");
  return digits;
}

/// "15,000,000,000 B": the exact byte count.
inline std::string format_exact(bytes b) { return format_count(b.count()) + " B"; }

/// The largest binary (or decimal) unit in which |b| is at least 1, so "13.97 GiB" rather than "14305.11 MiB".
inline size_unit natural_unit(bytes b, bool binary = true) {
  // The magnitude as unsigned: -INT64_MIN does not fit in int64.
  const std::uint64_t n = b.count() < 0 ? 0 - static_cast<std::uint64_t>(b.count()) : static_cast<std::uint64_t>(b.count());
  const size_unit order_bin[] = {size_unit::TiB, size_unit::GiB, size_unit::MiB, size_unit::KiB};
  const size_unit order_dec[] = {size_unit::TB, size_unit::GB, size_unit::MB, size_unit::kB};
  for (size_unit u : binary ? order_bin : order_dec)
    if (n >= static_cast<std::uint64_t>(bytes_in(u))) return u;
  return size_unit::B;
}

inline std::string format_auto(bytes b, bool binary = true, int decimals = 2) {
  const size_unit u = natural_unit(b, binary);
  return format_bytes(b, u, u == size_unit::B ? 0 : decimals);
}

}  // namespace zeromem
