// expect: zeromem: give the parallel degrees once: in parallel(), or in states(), activations() and pipeline(), not both
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;

struct job {
  static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
  static constexpr training_states states() {
    training_states t{};
    t.zero = zero<3>::config();
    t.dp = 8;  // and again in parallel(): which one holds?
    return t;
  }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 1024;
    return a;
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr parallel_layout parallel() { return parallel_layout{data_parallel{8}}; }
  static constexpr bytes capacity() { return find_gpu("h100-80gb").capacity; }
};
}  // namespace

int main() {
#ifdef ZEROMEM_COMPILE_FAIL
  (void)job_gpu_bytes_v<job>;
#endif
  return 0;
}
