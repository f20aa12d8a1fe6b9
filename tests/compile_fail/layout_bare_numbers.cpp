// expect: zeromem: name each degree: parallel_layout{data_parallel{8}, tensor_parallel{2}}, not bare numbers
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
#ifdef ZEROMEM_COMPILE_FAIL
  constexpr parallel_layout l{8, 2};  // which is dp, which tp?
  (void)l;
#endif
  return 0;
}
