// Compile-time tests: this file compiling is the test. Every static_assert evaluates zeromem's arithmetic in a
// constant expression; expected values are written out by hand.
#include "zeromem/zeromem.hpp"

namespace {
using namespace zeromem;
using namespace zeromem::literals;

// Units and literals.
static_assert((7.5_Gparams).count() == 7'500'000'000);
static_assert((80_GiB).count() == 80LL * 1024 * 1024 * 1024);
static_assert((80_GB).count() == 80'000'000'000);
static_assert(to_gb(80_GB) == 80.0);
static_assert(to_gib(1_TiB) == 1024.0);
static_assert((1_GiB - 1_GB).count() == 73'741'824);
static_assert((elements_of(3) * size_of(dtype::int4)).count() == 2);  // 12 bits -> 2 bytes
static_assert(largest_share(bytes_of(10), 4) == bytes_of(3));
static_assert(share_of_rank(bytes_of(10), 4, 3) == bytes_of(2));
static_assert(bytes_from(1.5L, size_unit::KiB) == bytes_of(1536));

// dtypes.
static_assert(bit_width(dtype::fp8_e5m2) == 8);
static_assert(bf16_t::size == bytes_per_element_of(2));
static_assert(name(dtype::int4) == "int4");

// Recipes.
static_assert(recipe_of(precision::mixed_bf16).optimizer_dtype() == dtype::fp32);
static_assert(recipe_of(precision::bf16).optimizer_dtype() == dtype::bf16);

// ZeRO paper, evaluated by the compiler: 7.5e9 params, K = 12, N_d = 64.
constexpr training_states zero_paper(int stage) {
  training_states t{};
  t.params = 7.5_Gparams;
  t.recipe = recipe_of(precision::mixed_fp16);
  t.optimizer.kind = optimizer_kind::adam;
  t.zero.stage = stage;
  t.dp = 64;
  return t;
}
static_assert(estimate_model_states(zero_paper(0)).gpu() == 120_GB);
static_assert(estimate_model_states(zero_paper(1)).gpu() == bytes_of(31'406'250'000));
static_assert(estimate_model_states(zero_paper(2)).gpu() == bytes_of(16'640'625'000));
static_assert(estimate_model_states(zero_paper(3)).gpu() == bytes_of(1'875'000'000));

// Typed ZeRO configuration.
static_assert(zero<3, offload_params<devices::cpu>, offload_optimizer<devices::cpu>>::config().params.device == offload_device::cpu);
// Placements are named and order-free: the optimizer's placement never moves the parameters, and the other way round.
static_assert(zero<2, offload_optimizer<devices::cpu>>::optimizer == offload_device::cpu);
static_assert(zero<2, offload_optimizer<devices::cpu>>::params == offload_device::none);
static_assert(zero<3, offload_optimizer<devices::nvme>, offload_params<devices::cpu>>::params == offload_device::cpu);
static_assert(zero<3, offload_optimizer<devices::nvme>, offload_params<devices::cpu>>::optimizer == offload_device::nvme);
static_assert(zero<3, offload_params<devices::cpu>, offload_optimizer<devices::nvme>>::config().optimizer.device == offload_device::nvme);
static_assert(zero<1>::params == offload_device::none && zero<1>::optimizer == offload_device::none);

// A dtype-typed count turns into bytes through its dtype only: 10 bf16 values are 20 B, 10 fp32 values 40 B, and
// 10 int4 values pack into 5 B.
static_assert(typed_elements<dtype::bf16>{elements_of(10)}.size() == 20_B);
static_assert(typed_elements<dtype::fp32>{elements_of(10)}.size() == 40_B);
static_assert(typed_elements<dtype::int4>{elements_of(10)}.size() == 5_B);
static_assert((typed_elements<dtype::bf16>{elements_of(6)} + typed_elements<dtype::bf16>{elements_of(4)}).size() == 20_B);

// Parallel degrees as types: named, in any order, the rest 1; the layout's degrees land where the job keeps them.
static_assert(parallel_layout{tensor_parallel{2}, data_parallel{8}}.gpus() == 16);
static_assert(parallel_layout{data_parallel{8}, tensor_parallel{2}}.tp().value() == 2);
static_assert(parallel_layout{pipeline_parallel{4}}.dp().value() == 1);
static_assert(parallel_layout{}.gpus() == 1);
static_assert(with_layout(training_states{}, parallel_layout{data_parallel{8}, tensor_parallel{2}}).dp == 8);
static_assert(with_layout(activation_config{}, parallel_layout{context_parallel{2}, tensor_parallel{4}}).cp == 2);
static_assert(with_layout(pipeline_config{}, parallel_layout{pipeline_parallel{4}}).pp == 4);
static_assert(find_gpu("H100-80GB").capacity == bytes_of(85'017'493'504));

// A job whose degrees come from its layout costs what the same job with the degrees in its parts costs.
struct layout_job {
  static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
  static constexpr training_states states() {
    training_states t{};
    t.zero = zero<3>::config();
    return t;
  }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = 4096;
    a.recomputation = recompute::full;
    return a;
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr parallel_layout parallel() { return parallel_layout{data_parallel{4}, tensor_parallel{2}}; }
  static constexpr bytes capacity() { return find_gpu("h100-80gb").capacity; }
};
struct fields_job : layout_job {
  static constexpr training_states states() { return with_layout(layout_job::states(), parallel_layout{data_parallel{4}}); }
  static constexpr activation_config activations() {
    activation_config a = layout_job::activations();
    a.tp = 2;
    return a;
  }
};
struct one_gpu : layout_job {
  static constexpr parallel_layout parallel() { return parallel_layout{}; }
};
static_assert(job_gpu_bytes_v<layout_job> == training_gpu_bytes(layout_job::model(), fields_job::states(), fields_job::activations()));
static_assert(job_gpu_bytes_v<layout_job> < job_gpu_bytes_v<one_gpu>);
static_assert(assert_fits<layout_job>::headroom > 0_B);
// A job type fits by its step (estimate_step over the training_job its parts describe), as `zeromem estimate` decides.
constexpr step_config deepspeed_fused_adam() {  // what a ZeRO job steps with unless its step() says otherwise
  step_config s{};
  s.optimizer = optimizer_impl::fused;
  return s;
}
static_assert(job_step_v<layout_job>.peak ==
              estimate_step(layout_job::model(), fields_job::states(), fields_job::activations(), deepspeed_fused_adam()).peak);
static_assert(assert_fits<layout_job>::headroom == layout_job::capacity() - job_step_v<layout_job>.device_used());
static_assert(job_step_v<layout_job>.peak < job_step_v<one_gpu>.peak);
static_assert(zero_stage<2>::value == 2);

// DeepSpeed parity in a constant expression: T0_3B, no offload, zero_init: GPU 4L + int(18P).
static_assert(deepspeed::estimate_zero3(2'783'959'040, 65'798'144, deepspeed::cluster{1, 1}, false, false, true).gpu ==
              bytes_of(263'192'576 + 50'111'262'720));
static_assert(deepspeed::estimate_zero2(1'000'000'000, deepspeed::cluster{4, 1}, false).gpu == bytes_of(6'500'000'000));

// vLLM's LoRA slots in a constant expression: max_lora_rank rounds up to vLLM's ranks; Llama-3-8B at r 32, tp 1 holds
// 32 x (7 x 4096 + 2 x 4096 + 2 x 1024 + 3 x 14336) x 32 layers = 83,886,080 elements.
static_assert(vllm_max_lora_rank(33) == 64);
static_assert(vllm_lora_slot_elements(preset_config("llama-3-8b"), 1, 32) == elements_of(83'886'080));
}  // namespace

int main() { return 0; }
