// expect: zeromem: each state has one place; name offload_optimizer<...> and offload_params<...> at most once each
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::devices;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero<3, offload_optimizer<cpu>, offload_optimizer<nvme>>::config();
#endif
  return 0;
}
