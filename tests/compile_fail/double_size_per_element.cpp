// expect: zeromem: fractional sizes per element are written in bits
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)bytes_per_element_of(0.5);
#endif
  return 0;
}
