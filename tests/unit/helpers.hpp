// Small helpers shared by the unit tests.
#pragma once

#include <cstdio>
#include <string>

#include "zeromem/core/units.hpp"

namespace zeromem::test {

/// b in GiB with two decimals and no unit, as logs and DeepSpeed's tables print it ("46.91").
inline std::string gib_2dp(bytes b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", to_gib(b));
  return buf;
}

}  // namespace zeromem::test
