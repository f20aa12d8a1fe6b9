// expect: zeromem: say which state is offloaded: zero<3, offload_optimizer<cpu>> or zero<3, offload_params<nvme>>
// zero<2, offload_device::cpu> once meant parameter offload, which nobody would guess: a bare device is refused.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::devices;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero<2, offload_device::cpu>::config();
#endif
  return 0;
}
