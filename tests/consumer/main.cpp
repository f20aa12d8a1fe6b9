// A separate program that uses an installed (or embedded) zeromem.
#include <zeromem/zeromem.hpp>

#include <cstdio>

int main() {
  using namespace zeromem::literals;
  zeromem::training_states t{};
  t.params = 7.5_Gparams;
  t.recipe = zeromem::recipe_of(zeromem::precision::mixed_fp16);
  t.optimizer.kind = zeromem::optimizer_kind::adam;
  t.zero.stage = 3;
  t.dp = 64;
  // ZeRO paper: 16 x 7.5e9 / 64 = 1.875e9 B.
  const auto e = zeromem::estimate_model_states(t);
  std::printf("zeromem %s consumer: %s per GPU\n", zeromem::version_string,
              zeromem::format_exact(e.gpu()).c_str());
  return e.gpu().count() == 1'875'000'000 ? 0 : 1;
}
