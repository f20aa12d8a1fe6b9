// expect: zeromem: give each parallel degree once
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
#ifdef ZEROMEM_COMPILE_FAIL
  constexpr parallel_layout l{data_parallel{8}, tensor_parallel{2}, data_parallel{4}};
  (void)l;
#endif
  return 0;
}
