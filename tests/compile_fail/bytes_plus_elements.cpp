// expect: zeromem: cannot add bytes and elements
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
#ifdef ZEROMEM_COMPILE_FAIL
  (void)(bytes_of(1) + elements_of(1));
#endif
  return 0;
}
