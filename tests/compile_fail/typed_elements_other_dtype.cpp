// expect: zeromem: elements of one dtype are not elements of another; build a new count in the target dtype
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  constexpr typed_elements<dtype::bf16> weights{elements_of(1000)};
  (void)weights;
#ifdef ZEROMEM_COMPILE_FAIL
  constexpr typed_elements<dtype::fp32> master = weights;  // priced at 4 B instead of 2 B
  (void)master;
#endif
  return 0;
}
