// expect: zeromem: ZeRO stage must be 0, 1, 2 or 3
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero_stage<4>::value;
#endif
  return 0;
}
