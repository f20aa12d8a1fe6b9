// expect: zeromem: cannot compare bytes with elements
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)(80_GB < 7.5_Gparams);
#endif
  return 0;
}
