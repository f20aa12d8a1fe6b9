// expect: zeromem: the job does not fit its GPU
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
// Llama-2-7B with mixed bf16 AdamW on one GPU needs 16 B x 6.74e9 = 107.8 GB of model states alone.
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;
using namespace zeromem::literals;

struct llama7b_on_one_gpu {
  static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
  static constexpr training_states states() { return training_states{}; }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 4096;
    a.attention = attention_kind::flash;
    a.recomputation = recompute::full;
    return a;
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr bytes capacity() { return 80_GB; }
};
}  // namespace

int main() {
#ifdef ZEROMEM_COMPILE_FAIL
  (void)assert_fits<llama7b_on_one_gpu>::headroom;
#endif
  return 0;
}
