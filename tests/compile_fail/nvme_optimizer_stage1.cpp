// expect: zeromem: optimizer offload to NVMe needs ZeRO stage 3
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::devices;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)zero<1, offload_optimizer<nvme>>::config();
#endif
  return 0;
}
