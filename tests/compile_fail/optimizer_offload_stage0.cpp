// expect: zeromem: optimizer offload needs ZeRO stage 1, 2 or 3
// DeepSpeed never reads offload_optimizer at stage 0 (engine.py _do_optimizer_sanity_check), so zeromem refuses it.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::devices;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero<0, offload_optimizer<cpu>>::config();
#endif
  return 0;
}
