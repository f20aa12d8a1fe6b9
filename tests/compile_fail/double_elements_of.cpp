// expect: zeromem: element counts are whole numbers; pass an integer, or use 7.5_Gparams / parse_elements(
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above (cut before the
// quoted "7.5B", which clang prints escaped). Without it, the
// fixes the message names compile, typed as what they replace.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)elements_of(7.5e9);
#else
  const elements a = 7.5_Gparams;
  const elements b = parse_elements("7.5B");
  if (a != b) return 1;
#endif
  return 0;
}
