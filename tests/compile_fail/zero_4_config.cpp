// expect: zeromem: ZeRO stage must be 0, 1, 2 or 3; use zero<3>
// The README's claim: zero<4>::config() does not compile (it once compiled and threw at run time).
#include "zeromem/zeromem.hpp"

int main() {
#ifdef ZEROMEM_COMPILE_FAIL
  constexpr zeromem::zero_config z = zeromem::zero<4>::config();
  (void)z;
#endif
  return 0;
}
