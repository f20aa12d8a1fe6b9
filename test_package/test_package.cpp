#include <zeromem/zeromem.hpp>

#include <cstdio>

int main() {
  using namespace zeromem::literals;
  // 16 B/param for mixed-precision Adam (ZeRO paper): 1e9 params -> 16e9 B on one GPU.
  zeromem::training_states t{};
  t.params = 1_Gparams;
  const auto e = zeromem::estimate_model_states(t);
  std::printf("zeromem %s: %s\n", zeromem::version_string, zeromem::format_bytes(e.gpu(), zeromem::size_unit::GB).c_str());
  return e.gpu() == 16_GB ? 0 : 1;
}
