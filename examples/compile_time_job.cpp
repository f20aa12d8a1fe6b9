// A training job declared as types and checked by the compiler against an 80 GB GPU: its step's peak (forward,
// backward, optimizer step), the CUDA context and the step's modules against the card's total, as `zeromem estimate
// --gpu a100-80gb` decides. The compile-fail test tests/compile_fail/job_does_not_fit.cpp is the same job on 1 GPU,
// which must not compile.
#include <cstdio>
#include <string>

#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;
using namespace zeromem::literals;

// Llama-2-7B, mixed bf16 AdamW (DeepSpeed's fused Adam under ZeRO), ZeRO-3 over 8 GPUs, 4096-token sequences, flash
// attention, full recompute, on an A100 80GB named from the GPU table (its capacity and cuBLAS workspaces). The
// degrees come from parallel(), each named: data_parallel{8} cannot be passed where tensor_parallel is meant. The
// same job on the command line: zeromem estimate --model llama-2-7b --zero-stage 3 --dp 8 --seq-len 4096
// --attention flash --recompute full --implementation fused --gpu a100-80gb
struct llama7b_zero3_on_8 {
  static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
  static constexpr training_states states() {
    training_states t{};
    t.zero = zero<3>::config();
    return t;
  }
  static constexpr parallel_layout parallel() { return parallel_layout{data_parallel{8}}; }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 4096;
    a.attention = attention_kind::flash;
    a.recomputation = recompute::full;
    a.impl = implementation::fused;
    return a;
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr gpu_model gpu() { return find_gpu("a100-80gb"); }
};

constexpr bytes headroom = assert_fits<llama7b_zero3_on_8>::headroom;  // does not compile if it does not fit
constexpr step_estimate step = job_step_v<llama7b_zero3_on_8>;
static_assert(step.device_used() <= find_gpu("a100-80gb").capacity);
}  // namespace

int main() {
  std::printf("Llama-2-7B, ZeRO-3 over 8 GPUs, 4096 tokens: peak %s per GPU in %s (%s used with the CUDA context), %s "
              "headroom on an A100 80GB (checked at compile time)\n",
              format_bytes(step.peak, size_unit::GB).c_str(), std::string(name(step.peak_phase)).c_str(),
              format_bytes(step.device_used(), size_unit::GB).c_str(), format_bytes(headroom, size_unit::GB).c_str());
  return 0;
}
