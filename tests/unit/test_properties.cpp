// Properties over many generated configurations (fixed seed, so failures reproduce).
#include <random>

#include "catch.hpp"
#include "zeromem/training/model_states.hpp"

using namespace zeromem;

namespace {
struct generator {
  std::mt19937_64 rng{20261122};
  std::int64_t pick(std::int64_t lo, std::int64_t hi) { return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng); }

  training_states config() {
    training_states t{};
    // Odd counts on purpose, so that shards are uneven.
    t.params = elements_of(pick(1, 400'000'000'000));
    const precision precisions[] = {precision::mixed_bf16, precision::mixed_fp16, precision::bf16, precision::fp16,
                                    precision::fp32};
    t.recipe = recipe_of(precisions[pick(0, 4)]);
    t.recipe.fp32_gradient_copy = pick(0, 1) == 1;
    const optimizer_kind kinds[] = {optimizer_kind::adam,      optimizer_kind::adamw,     optimizer_kind::sgd,
                                    optimizer_kind::sgd_momentum, optimizer_kind::adam_8bit, optimizer_kind::adafactor,
                                    optimizer_kind::lion};
    t.optimizer.kind = kinds[pick(0, 6)];
    t.zero.stage = static_cast<int>(pick(0, 3));
    t.gpus_per_node = std::int64_t{1} << pick(0, 3);
    t.dp = pick(1, 64) * (pick(0, 1) ? t.gpus_per_node : 1);
    return t;
  }
};
}  // namespace

TEST_CASE("per-GPU bytes never increase with the data-parallel degree", "[properties]") {
  generator g;
  for (int i = 0; i < 2000; ++i) {
    training_states t = g.config();
    const bytes before = estimate_model_states(t).gpu();
    t.dp += g.pick(1, 100);
    INFO("params " << t.params.count() << " stage " << t.zero.stage << " dp " << t.dp);
    CHECK(estimate_model_states(t).gpu() <= before);
  }
}

TEST_CASE("per-GPU bytes never increase with the ZeRO stage", "[properties]") {
  generator g;
  for (int i = 0; i < 2000; ++i) {
    training_states t = g.config();
    t.zero.stage = 0;
    bytes previous = estimate_model_states(t).gpu();
    for (int s = 1; s <= 3; ++s) {
      t.zero.stage = s;
      const bytes now = estimate_model_states(t).gpu();
      INFO("params " << t.params.count() << " stage " << s << " dp " << t.dp);
      CHECK(now <= previous);
      previous = now;
    }
  }
}

TEST_CASE("summed over ranks, sharded states equal the unsharded total exactly", "[properties]") {
  generator g;
  for (int i = 0; i < 300; ++i) {
    training_states t = g.config();
    t.dp = g.pick(1, 48);
    training_states whole = t;
    whole.dp = 1;
    whole.zero.stage = 0;
    const placement unsharded = estimate_model_states(whole).total_per_rank();
    placement summed{};
    for (std::int64_t r = 0; r < t.dp; ++r) summed = summed + estimate_model_states(t, r).total_per_rank();
    // Replicated terms appear dp times; subtract the (dp - 1) extra copies of what each stage replicates.
    const model_state_terms& one = estimate_model_states(whole).per_rank;
    bytes replicated{};
    if (t.zero.stage < 3) replicated += one.weights.gpu;
    if (t.zero.stage < 2) replicated += one.gradients.gpu;
    if (t.zero.stage < 1) replicated += one.master_weights.gpu + one.fp32_gradients.gpu + one.optimizer_moments.gpu;
    INFO("params " << t.params.count() << " stage " << t.zero.stage << " dp " << t.dp);
    CHECK(summed.gpu == unsharded.gpu + replicated * (t.dp - 1));
  }
}

TEST_CASE("offload moves bytes between devices without losing any", "[properties]") {
  generator g;
  for (int i = 0; i < 1000; ++i) {
    training_states t = g.config();
    t.zero.stage = 3;
    t.recipe.gradients = dtype::fp32;  // so CPU Adam's fp32 gradient copy is the size of the gradient partition
    const model_state_terms on_gpu = estimate_model_states(t).per_rank;
    t.zero.optimizer.device = g.pick(0, 1) ? offload_device::cpu : offload_device::nvme;
    t.zero.params.device = g.pick(0, 1) ? offload_device::cpu : offload_device::nvme;
    const model_state_terms off = estimate_model_states(t).per_rank;
    INFO("params " << t.params.count() << " dp " << t.dp);
    CHECK(off.weights.total() == on_gpu.weights.total());
    CHECK(off.master_weights.total() == on_gpu.master_weights.total());
    CHECK(off.optimizer_moments.total() == on_gpu.optimizer_moments.total());
    // The gradient partition moves to the host; CPU Adam adds its own fp32 copy there (stage3.py).
    CHECK(off.gradients.total() == on_gpu.gradients.total());
    CHECK(off.gradients.gpu.count() == 0);
    CHECK(off.fp32_gradients.total() == on_gpu.gradients.total());
    CHECK(off.weights.gpu.count() == 0);
    CHECK(off.optimizer_moments.gpu.count() == 0);
  }
}
