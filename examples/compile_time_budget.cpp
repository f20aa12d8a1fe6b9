// A memory budget checked by the compiler: this file does not compile if the configuration stops fitting.
#include <cstdio>

#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;
using namespace zeromem::literals;

constexpr training_states llama_7b_on_8_gpus() {
  training_states t{};
  t.params = 6'738'415'616_params;  // Llama-2-7B
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  t.zero = zero<3>::config();
  t.dp = 8;
  t.gpus_per_node = 8;
  return t;
}

constexpr model_state_estimate states = estimate_model_states(llama_7b_on_8_gpus());
static_assert(states.gpu() <= 80_GB, "Llama-2-7B model states under ZeRO-3 on 8 GPUs must fit an 80 GB GPU");
static_assert(states.gpu() == bytes_of(16 * 6'738'415'616LL / 8), "16 B/param split over 8 ranks");
}  // namespace

int main() {
  std::printf("Llama-2-7B, mixed bf16 AdamW, ZeRO-3 over 8 GPUs: %s of model states per GPU (checked at compile time)\n",
              format_bytes(states.gpu(), size_unit::GiB).c_str());
  return 0;
}
