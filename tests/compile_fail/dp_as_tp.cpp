// expect: zeromem: one parallel degree cannot stand for another (data_parallel is not tensor_parallel)
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  constexpr data_parallel dp{8};
  (void)dp;
#ifdef ZEROMEM_COMPILE_FAIL
  constexpr tensor_parallel tp = dp;
  (void)tp;
#endif
  return 0;
}
