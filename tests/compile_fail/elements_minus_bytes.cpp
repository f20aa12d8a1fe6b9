// expect: zeromem: cannot subtract bytes from elements
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)(elements_of(1) - 1_KiB);
#endif
  return 0;
}
