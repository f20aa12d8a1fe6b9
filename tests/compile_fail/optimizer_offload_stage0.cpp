// expect: zeromem: optimizer offload needs ZeRO stage 1, 2 or 3
// DeepSpeed never reads offload_optimizer at stage 0 (engine.py _do_optimizer_sanity_check), so zeromem refuses it.
#include "zeromem/zeromem.hpp"

int main() {
  using zeromem::offload_device;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zeromem::zero<0, offload_device::none, offload_device::cpu>::config();
#endif
  return 0;
}
