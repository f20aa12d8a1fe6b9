// expect: zeromem: this is not a byte count
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  bytes b = 3.0; (void)b;
#else
  const bytes a = 79.35_GiB;
  const bytes b = parse_bytes("79.35GiB");
  if (a != b) return 1;
#endif
  return 0;
}
