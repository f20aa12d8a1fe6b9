// expect: zeromem: a typed element count knows its dtype's size; call .size() instead of multiplying
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  constexpr typed_elements<dtype::bf16> weights{elements_of(1000)};
  (void)weights;
#ifdef ZEROMEM_COMPILE_FAIL
  const bytes b = weights * size_of(dtype::fp32);  // the bf16 count priced at fp32's size
  (void)b;
#endif
  return 0;
}
