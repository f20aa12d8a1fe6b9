// expect: zeromem: give a job's card once: gpu() (a gpu_model from find_gpu) or capacity() (its total bytes)
// Compiles without ZEROMEM_COMPILE_FAIL (normal build); with it, must fail with the message above.
// A job type naming its card and also its bytes: which one does the verdict compare with?
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;
using namespace zeromem::literals;

struct job {
  static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
  static constexpr training_states states() {
    training_states t{};
    t.zero = zero<3>::config();
    return t;
  }
  static constexpr parallel_layout parallel() { return parallel_layout{data_parallel{8}}; }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 1024;
    return a;
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr gpu_model gpu() { return find_gpu("h100-80gb"); }
#ifdef ZEROMEM_COMPILE_FAIL
  static constexpr bytes capacity() { return 80_GB; }
#endif
};
}  // namespace

int main() { return job_verdict_v<job>.fits() ? 0 : 1; }
