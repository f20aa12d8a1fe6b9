// expect: zeromem: offload_optimizer<none> / offload_params<none> is no offload; leave the placement out
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::devices;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero<3, offload_params<offload_device::none>>::config();
#endif
  return 0;
}
