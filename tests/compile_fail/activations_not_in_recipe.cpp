// expect: zeromem: a job's activations() compute in its recipe's dtype; return with_recipe(a, states().recipe)
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
// An AMP job (fp32 weights, bf16 autocast) whose activations say neither: `zeromem estimate --precision amp-bf16`
// runs its activations under autocast, so a job type must say so too rather than be evaluated as another job.
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;

struct amp_job {
  static constexpr transformer_config model() { return preset_config("qwen2.5-1.5b"); }
  static constexpr training_states states() {
    training_states t{};
    t.recipe = recipe_of(precision::amp_bf16);
    return t;
  }
  static constexpr activation_config at_1024_tokens() {
    activation_config a{};
    a.seq_len = 1024;
    return a;
  }
#ifdef ZEROMEM_COMPILE_FAIL
  static constexpr activation_config activations() { return at_1024_tokens(); }
#else
  static constexpr activation_config activations() { return with_recipe(at_1024_tokens(), states().recipe); }
#endif
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr bytes capacity() { return find_gpu("h100-80gb").capacity; }
};
}  // namespace

int main() { return job_step_v<amp_job>.peak.count() > 0 ? 0 : 1; }
