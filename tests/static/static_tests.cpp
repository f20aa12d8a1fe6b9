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
static_assert(zero_stage<2>::value == 2);

// DeepSpeed parity in a constant expression: T0_3B, no offload, zero_init: GPU 4L + int(18P).
static_assert(deepspeed::estimate_zero3(2'783'959'040, 65'798'144, deepspeed::cluster{1, 1}, false, false, true).gpu ==
              bytes_of(263'192'576 + 50'111'262'720));
static_assert(deepspeed::estimate_zero2(1'000'000'000, deepspeed::cluster{4, 1}, false).gpu == bytes_of(6'500'000'000));
}  // namespace

int main() { return 0; }
