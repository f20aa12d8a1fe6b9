// expect: zeromem: the job does not fit its GPU
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
// Qwen3-8B in pure bf16 with foreach AdamW and full recompute at 4096 x 4 tokens peaked at 84,391,532,544 B allocated
// on an H200 (tests/data/calibration/h200-training-steps.json); with the CUDA context and the step's modules that is
// above an H100's 85,017,493,504 B. The sum of the job's terms (job_gpu_bytes_v, 81.2 GB) called it fitting.
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;

struct qwen3_8b_on_one_h100 {
  static constexpr transformer_config model() { return preset_config("qwen3-8b"); }
  static constexpr training_states states() {
    training_states t{};
    t.recipe = recipe_of(precision::bf16);
    return t;
  }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 4096;
    a.micro_batch = 4;
    a.impl = implementation::hf;
    a.recomputation = recompute::full;
    return with_recipe(a, states().recipe);
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr bytes capacity() { return find_gpu("h100-80gb").capacity; }
};
static_assert(job_gpu_bytes_v<qwen3_8b_on_one_h100> < qwen3_8b_on_one_h100::capacity(), "the sum of its terms fits");
}  // namespace

int main() {
#ifdef ZEROMEM_COMPILE_FAIL
  (void)assert_fits<qwen3_8b_on_one_h100>::headroom;
#endif
  return 0;
}
