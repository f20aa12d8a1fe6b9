// Model states against the ZeRO paper, Megatron-LM's distributed-optimizer table, Transformer Math 101 and
// derivations written out here. Expected values never come from the code under test.
#include <stdexcept>

#include "catch.hpp"
#include "zeromem/training/model_states.hpp"

using namespace zeromem;
using namespace zeromem::literals;

namespace {
training_states zero_paper(int stage, std::int64_t dp) {
  training_states t{};
  t.params = 7.5_Gparams;
  t.recipe = recipe_of(precision::mixed_fp16);
  t.optimizer.kind = optimizer_kind::adam;
  t.zero.stage = stage;
  t.dp = dp;
  return t;
}
// bf16 mixed precision with AdamW (12 B of optimizer state per parameter), the usual offload setting.
training_states bf16_adamw(elements params, zero_config z, std::int64_t dp, std::int64_t gpus_per_node) {
  training_states t{};
  t.params = params;
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  t.zero = z;
  t.dp = dp;
  t.gpus_per_node = gpus_per_node;
  return t;
}
}  // namespace

TEST_CASE("ZeRO paper Figure 1: 7.5B parameters, K = 12, N_d = 64", "[model_states][published]") {
  // arXiv 1910.02054 Fig. 1: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB (GB = 1e9 B). Exact values:
  // stage 0: 16 x 7.5e9 = 120e9; stage 1: 4 x 7.5e9 + 12 x 7.5e9 / 64 = 30e9 + 1.40625e9;
  // stage 2: 2 x 7.5e9 + 14 x 7.5e9 / 64 = 15e9 + 1.640625e9; stage 3: 16 x 7.5e9 / 64 = 1.875e9.
  CHECK(estimate_model_states(zero_paper(0, 64)).gpu().count() == 120'000'000'000);
  CHECK(estimate_model_states(zero_paper(1, 64)).gpu().count() == 31'406'250'000);
  CHECK(estimate_model_states(zero_paper(2, 64)).gpu().count() == 16'640'625'000);
  CHECK(estimate_model_states(zero_paper(3, 64)).gpu().count() == 1'875'000'000);
  CHECK(to_gb(estimate_model_states(zero_paper(1, 64)).gpu()) == Approx(31.4).margin(0.05));
  CHECK(to_gb(estimate_model_states(zero_paper(2, 64)).gpu()) == Approx(16.6).margin(0.05));
}

TEST_CASE("ZeRO paper: with N_d = 1 every stage needs 120 GB", "[model_states][published]") {
  for (int stage = 0; stage <= 3; ++stage) CHECK(estimate_model_states(zero_paper(stage, 1)).gpu().count() == 120'000'000'000);
}

TEST_CASE("ZeRO paper groups: 2 + 2 + K bytes per parameter", "[model_states]") {
  const model_state_estimate e = estimate_model_states(zero_paper(0, 1));
  CHECK(e.weights_bytes().count() == 2 * 7'500'000'000);            // fp16 weights
  CHECK(e.gradients_bytes().count() == 2 * 7'500'000'000);          // fp16 gradients
  CHECK(e.optimizer_states_bytes().count() == 12 * 7'500'000'000);  // K = 4 master + 4 m + 4 v
}

TEST_CASE("Megatron-LM distributed optimizer bytes per parameter", "[model_states][published]") {
  // docs dist_optimizer.md: fp16/fp16: 20 | 4 + 16/d; bf16/fp32: 18 | 6 + 12/d; fp32/fp32: 16 | 8 + 8/d.
  // Psi = 1e9, d = 8: 20e9 | 6e9; 18e9 | 7.5e9; 16e9 | 9e9. The distributed optimizer shards like ZeRO-1.
  const auto per_gpu = [](precision_recipe r, int stage, std::int64_t dp) {
    training_states t{};
    t.params = 1_Gparams;
    t.recipe = r;
    t.optimizer.kind = optimizer_kind::adam;
    t.zero.stage = stage;
    t.dp = dp;
    return estimate_model_states(t).gpu().count();
  };
  precision_recipe fp16 = recipe_of(precision::mixed_fp16);
  fp16.fp32_gradient_copy = true;
  precision_recipe bf16 = recipe_of(precision::mixed_bf16);
  bf16.gradients = dtype::fp32;  // fp32 main grads
  const precision_recipe fp32 = recipe_of(precision::fp32);
  CHECK(per_gpu(fp16, 0, 8) == 20'000'000'000);
  CHECK(per_gpu(fp16, 1, 8) == 6'000'000'000);
  CHECK(per_gpu(bf16, 0, 8) == 18'000'000'000);
  CHECK(per_gpu(bf16, 1, 8) == 7'500'000'000);
  CHECK(per_gpu(fp32, 0, 8) == 16'000'000'000);
  CHECK(per_gpu(fp32, 1, 8) == 9'000'000'000);
}

TEST_CASE("optimizer state bytes per parameter (Transformer Math 101)", "[model_states][published]") {
  // EleutherAI Transformer Math 101: AdamW 12 B incl. fp32 master, 8-bit Adam 6 B (4 + 1 + 1),
  // SGD with momentum 8 B (4 + 4). Plain SGD keeps only the master. Lion keeps one moment: 4 + 4.
  const auto optimizer_bytes = [](optimizer_kind k, std::int64_t n) {
    training_states t{};
    t.params = elements_of(n);
    t.recipe = recipe_of(precision::mixed_bf16);
    t.optimizer.kind = k;
    return estimate_model_states(t).optimizer_states_bytes().count();
  };
  const std::int64_t n = 2048 * 1'000'000;  // a whole number of 2048-element quantization blocks
  CHECK(optimizer_bytes(optimizer_kind::adamw, n) == 12 * n);
  CHECK(optimizer_bytes(optimizer_kind::adam, n) == 12 * n);
  CHECK(optimizer_bytes(optimizer_kind::sgd_momentum, n) == 8 * n);
  CHECK(optimizer_bytes(optimizer_kind::sgd, n) == 4 * n);
  CHECK(optimizer_bytes(optimizer_kind::lion, n) == 8 * n);
  // 8-bit Adam: 6 B/param plus one fp32 absmax per 2048-block per moment: 2 x 4 / 2048 B/param.
  CHECK(optimizer_bytes(optimizer_kind::adam_8bit, n) == 6 * n + 2 * 4 * (n / 2048));
}

TEST_CASE("pure 16-bit training keeps optimizer states in the weights' dtype", "[model_states]") {
  // torch.optim.AdamW on bf16 parameters: weights 2 + gradients 2 + exp_avg 2 + exp_avg_sq 2 = 8 B/param.
  training_states t{};
  t.params = 1_Gparams;
  t.recipe = recipe_of(precision::bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  CHECK(estimate_model_states(t).gpu().count() == 8'000'000'000);
}

TEST_CASE("optimizer options that keep one more state: amsgrad, RMSprop's centered and momentum", "[model_states][optimizer]") {
  // torch.optim: Adam(amsgrad=True) keeps exp_avg, exp_avg_sq and max_exp_avg_sq; RMSprop keeps square_avg, plus
  // grad_avg when centered and momentum_buffer when momentum > 0. With the fp32 master (mixed bf16): 4 B each + 4 B.
  const std::int64_t n = 1'000'000'000;
  training_states t{};
  t.params = elements_of(n);
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  t.optimizer.amsgrad = true;
  CHECK(estimate_model_states(t).optimizer_states_bytes().count() == (4 + 3 * 4) * n);
  t.optimizer = optimizer_spec{};
  t.optimizer.kind = optimizer_kind::rmsprop;
  t.optimizer.centered = true;
  CHECK(estimate_model_states(t).optimizer_states_bytes().count() == (4 + 2 * 4) * n);
  t.optimizer.momentum_buffer = true;
  CHECK(estimate_model_states(t).optimizer_states_bytes().count() == (4 + 3 * 4) * n);
  // Each option belongs to its optimizer.
  t.optimizer.kind = optimizer_kind::adam;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("centered and momentum are options of rmsprop here, not adam"));
  t.optimizer = optimizer_spec{};
  t.optimizer.kind = optimizer_kind::sgd_momentum;
  t.optimizer.amsgrad = true;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("amsgrad is an option of adam and adamw, not sgd-momentum"));
}

TEST_CASE("Adafactor's factored second moment", "[model_states]") {
  // A 4096 x 11008 matrix keeps 4096 + 11008 = 15104 row and column statistics; a vector keeps all its values.
  CHECK(adafactor_factored_elements(4096, 11008).count() == 15104);
  CHECK(adafactor_factored_elements(4096, 0).count() == 4096);
  CHECK(adafactor_factored_elements(1, 4096).count() == 4096);
  training_states t{};
  t.params = elements_of(4096LL * 11008);
  t.recipe = recipe_of(precision::fp32);
  t.optimizer.kind = optimizer_kind::adafactor;
  t.optimizer.adafactor_factored = adafactor_factored_elements(4096, 11008);
  CHECK(estimate_model_states(t).per_rank.optimizer_moments.gpu.count() == 4 * 15104);
  // Without shapes: one square matrix as a lower bound, 2 x ceil(sqrt(n)) fp32 values.
  t.params = elements_of(1'000'000);
  t.optimizer.adafactor_factored = elements_of(0);
  CHECK(estimate_model_states(t).per_rank.optimizer_moments.gpu.count() == 4 * 2 * 1000);
  t.optimizer.adafactor_momentum = true;  // beta1 adds a full fp32 first moment
  CHECK(estimate_model_states(t).per_rank.optimizer_moments.gpu.count() == 4 * 2 * 1000 + 4 * 1'000'000);
}

TEST_CASE("CPU offload moves optimizer states to host RAM per node", "[model_states][offload]") {
  // ZeRO-3, params and optimizer on CPU, Psi = 8e9, 16 ranks on 2 nodes of 8: each rank holds 16-bit weights 2,
  // the 16-bit gradient partition 2 (stage3.py allocates grad_partitions_flat_buffer on the CPU when the optimizer
  // is offloaded), fp32 master 4, fp32 gradients 4 and Adam moments 8 bytes per parameter of its 8e9 / 16 = 5e8:
  // 20 x 5e8 = 10e9 B on the host, a node 8 x 10e9 = 80e9 B; the GPU holds none. (DeepSpeed's estimator
  // counts 18 B per parameter: it leaves out the 16-bit gradient partition.)
  training_states t = bf16_adamw(8_Gparams, zero<3, offload_params<devices::cpu>, offload_optimizer<devices::cpu>>::config(), 16, 8);
  model_state_estimate e = estimate_model_states(t);
  CHECK(e.gpu().count() == 0);
  CHECK(e.host_per_rank().count() == 10'000'000'000);
  CHECK(e.host_per_node().count() == 80'000'000'000);
  CHECK(e.host_pinned_per_node().count() == 0);  // DeepSpeed's pin_memory defaults to false
  CHECK(e.nvme_per_node().count() == 0);
  // With the largest layer (say 1e9 params) gathered on the GPU: weights 2 + gradients 2 bytes each.
  t.largest_layer = 1_Gparams;
  CHECK(estimate_model_states(t).gpu().count() == 4'000'000'000);
  // Optimizer only: the 16-bit weights shard stays on the GPU, 2 x 8e9 / 16 = 1e9, and the host loses it:
  // (2 + 4 + 4 + 8) x 5e8 = 9e9 per rank, 8 ranks per node.
  t.largest_layer = elements_of(0);
  t.zero = zero<3, offload_optimizer<devices::cpu>>::config();
  t.zero.optimizer.pin_memory = true;
  e = estimate_model_states(t);
  CHECK(e.gpu().count() == 1'000'000'000);
  CHECK(e.host_per_node().count() == 8 * 9'000'000'000);
  CHECK(e.host_pinned_per_node() == e.host_per_node());
}

TEST_CASE("ZeRO-2 with ZeRO-Offload keeps only 16-bit weights on the GPU", "[model_states][offload]") {
  // DeepSpeed's ZeRO-2 offload estimate is GPU 2P; the host holds 16 B/param over the ranks
  // (4 fp32 gradients + 4 master + 8 moments): P = 1e9, 4 ranks on one node -> 16e9 B per node.
  training_states t = bf16_adamw(1_Gparams, zero<2, offload_optimizer<devices::cpu>>::config(), 4, 4);
  t.optimizer.kind = optimizer_kind::adam;
  const model_state_estimate e = estimate_model_states(t);
  CHECK(e.gpu().count() == 2'000'000'000);
  CHECK(e.host_per_node().count() == 16'000'000'000);
}

TEST_CASE("ZeRO-1/2 CPU offload stages gradients in buffers of the largest layer", "[model_states][offload]") {
  // DeepSpeed stage_1_and_2.py with offload: temp_grad_buffer_for_gpu_offload (GPU) and
  // temp_grad_buffer_for_cpu_offload (host) hold largest_param_numel 16-bit elements each; with
  // gradient_accumulation_steps > 1, accumulated_grads_in_cpu holds every parameter of the rank's partition whole.
  // P = 1e9, largest layer 1e8, dp 4 (4 ranks per node), bf16 + AdamW, optimizer pinned on the CPU.
  training_states t = bf16_adamw(1_Gparams, zero<2, offload_optimizer<devices::cpu>>::config(), 4, 4);
  t.zero.optimizer.pin_memory = true;
  t.largest_layer = elements_of(100'000'000);
  // GPU: replicated weights 2 x 1e9 + staging 2 x 1e8 = 2.2e9.
  // Host per rank: fp32 gradients, master and moments (4 + 4 + 8) x 2.5e8 = 4e9, + staging 2e8 = 4.2e9.
  model_state_estimate e = estimate_model_states(t);
  CHECK(e.gpu().count() == 2'200'000'000);
  CHECK(e.per_rank.offload_staging.gpu.count() == 200'000'000);
  CHECK(e.host_per_rank().count() == 4'200'000'000);
  CHECK(e.host_pinned_per_node().count() == 4 * 4'200'000'000LL);
  // 4 micro-batches per step: + 2 B x min(1e9, 2.5e8 + 2 x 1e8) = 9e8 accumulation buffer -> 5.1e9 per rank.
  t.gradient_accumulation_steps = 4;
  e = estimate_model_states(t);
  CHECK(e.gpu().count() == 2'200'000'000);  // the GPU does not change
  CHECK(e.host_per_rank().count() == 5'100'000'000);
  CHECK(e.host_per_node().count() == 20'400'000'000);
  // One rank holds the whole model: the bound is the model itself, 2 B x 1e9; its partition is 1e9, so
  // fp32 gradients, master and moments are 16e9: 16e9 + 2e8 + 2e9 = 18.2e9.
  t.dp = 1;
  t.gpus_per_node = 1;
  CHECK(estimate_model_states(t).host_per_rank().count() == 18'200'000'000);
  // ZeRO-1 stages the same way (its 16-bit gradients stay whole on the GPU: 2e9 + 2e9 + 2e8).
  t.zero.stage = 1;
  CHECK(estimate_model_states(t).gpu().count() == 4'200'000'000);
  // Without the largest layer the staging buffers are left out and the accumulation buffer is the partition.
  t.zero.stage = 2;
  t.dp = 4;
  t.gpus_per_node = 4;
  t.largest_layer = elements_of(0);
  e = estimate_model_states(t);
  CHECK(e.per_rank.offload_staging.gpu.count() == 0);
  CHECK(e.per_rank.offload_staging.host.count() == 500'000'000);  // 2 B x 2.5e8
  // Stage 3 accumulates into its gradient partition instead: no staging term at any accumulation count.
  t.zero = zero<3, offload_optimizer<devices::cpu>>::config();
  t.largest_layer = elements_of(100'000'000);
  CHECK(estimate_model_states(t).per_rank.offload_staging.total().count() == 0);
  t.gradient_accumulation_steps = 0;
  CHECK_THROWS_WITH(estimate_model_states(t), "zeromem: gradient accumulation steps, got 0; it must be at least 1");
}

TEST_CASE("NVMe offload puts states on NVMe and pins swap buffers on the host", "[model_states][offload]") {
  // ZeRO-Infinity, P = 64e9 over 64 ranks (8 per node): per rank 1e9 params.
  // NVMe per rank: weights 2e9 + master 4e9 + fp32 gradients 4e9 (swapped out with the optimizer states)
  // + moments 8e9 = 18e9; per node 144e9.
  // Host per rank: 16-bit gradient partition 2e9 + swap buffers: optimizer 4 x min(1e9 sub-group, 1e9) x 4 B
  // = 16e9, parameters 5 x 1e8 x 2 B = 1e9. Per node 8 x 19e9 = 152e9, of which pinned (the swap buffers
  // only; pin_memory is off) 8 x 17e9 = 136e9.
  const model_state_estimate e =
      estimate_model_states(bf16_adamw(64_Gparams, zero<3, offload_params<devices::nvme>, offload_optimizer<devices::nvme>>::config(), 64, 8));
  CHECK(e.nvme_per_node().count() == 144'000'000'000);
  CHECK(e.host_per_node().count() == 152'000'000'000);
  CHECK(e.host_pinned_per_node().count() == 136'000'000'000);
  CHECK(e.gpu().count() == 0);
  // sub_group_size 0 closes a sub-group after each parameter (stage3.py _create_fp16_sub_groups), so the optimizer's
  // swap buffers hold the largest parameter's partition: a 2.56e9-element layer over 64 ranks is 4e7 elements,
  // 4 x 4e7 x 4 B = 6.4e8 B a rank instead of 16e9; pinned per node 8 x (0.64e9 + 1e9) = 13.12e9 B.
  training_states zero_sub_groups = bf16_adamw(64_Gparams, zero<3, offload_params<devices::nvme>, offload_optimizer<devices::nvme>>::config(), 64, 8);
  zero_sub_groups.zero.sub_group_size = 0;
  zero_sub_groups.largest_layer = elements_of(2'560'000'000);
  CHECK(estimate_model_states(zero_sub_groups).host_pinned_per_node().count() == 13'120'000'000);
  // A sub-group of 1e7 elements still holds that whole parameter partition: the same 4e7 elements.
  zero_sub_groups.zero.sub_group_size = 10'000'000;
  CHECK(estimate_model_states(zero_sub_groups).host_pinned_per_node().count() == 13'120'000'000);
}

TEST_CASE("FSDP strategies map onto ZeRO stages", "[model_states][fsdp]") {
  // 1e9 params, mixed bf16 AdamW (16 B/param), 16 ranks, 8 per node.
  const auto gpu = [](zero_config z) {
    training_states t{};
    t.params = 1_Gparams;
    t.zero = z;
    t.dp = 16;
    t.gpus_per_node = 8;
    return estimate_model_states(t).gpu().count();
  };
  CHECK(gpu(fsdp_config(fsdp_strategy::no_shard)) == 16'000'000'000);
  CHECK(gpu(fsdp_config(fsdp_strategy::shard_grad_op)) == 2'000'000'000 + 14'000'000'000 / 16);
  CHECK(gpu(fsdp_config(fsdp_strategy::full_shard)) == 16'000'000'000 / 16);
  CHECK(gpu(fsdp_config(fsdp_strategy::hybrid_shard, 8)) == 16'000'000'000 / 8);  // shards within a node only
  CHECK(gpu(fsdp_config(fsdp_strategy::hybrid_shard_zero2, 8)) == 2'000'000'000 + 14'000'000'000 / 8);
  CHECK(parse_fsdp_strategy("FULL_SHARD") == fsdp_strategy::full_shard);
  CHECK_THROWS_WITH(parse_fsdp_strategy("full"), Catch::Matchers::Contains("expected one of NO_SHARD"));
}

TEST_CASE("ZeRO++ hpZ adds a secondary weight partition within a node", "[model_states]") {
  // 8e9 params over 64 ranks, hpZ within 8: primary 16 x 8e9 / 64 = 2e9, secondary 2 x 8e9 / 8 = 2e9.
  training_states t{};
  t.params = 8_Gparams;
  t.zero.stage = 3;
  t.zero.hpz_partition = 8;
  t.dp = 64;
  const model_state_estimate e = estimate_model_states(t);
  CHECK(e.per_rank.hpz_secondary.gpu.count() == 2'000'000'000);
  CHECK(e.gpu().count() == 4'000'000'000);
}

TEST_CASE("invalid configurations throw with the fix", "[model_states][errors]") {
  training_states t{};
  t.params = 1_Gparams;
  t.zero.stage = 4;
  CHECK_THROWS_WITH(estimate_model_states(t), "zeromem: ZeRO stage must be 0, 1, 2 or 3, got 4; use stage 3 for full sharding");
  t.zero.stage = 2;
  t.zero.params.device = offload_device::cpu;
  CHECK_THROWS_WITH(estimate_model_states(t), "zeromem: parameter offload needs ZeRO stage 3, got 2; set stage 3 or turn parameter offload off");
  t.zero = zero_config{};
  t.zero.stage = 2;
  t.zero.optimizer.device = offload_device::nvme;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("NVMe needs ZeRO stage 3"));
  t.zero = zero_config{};
  t.dp = 0;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("data-parallel degree, got 0"));
  t.dp = 8;
  t.gpus_per_node = -1;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("GPUs per node, got -1"));
  t.gpus_per_node = 8;
  t.zero.shard_group = 3;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("shard group must divide"));
  t.zero.shard_group = 0;
  t.params = elements_of(0);
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("parameter count must be positive"));
  t.params = 1_Gparams;
  t.zero.stage = 1;
  t.zero.hpz_partition = 8;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("hpZ needs ZeRO stage 3"));
  t.zero.hpz_partition = 1;
  t.largest_layer = 2_Gparams;
  CHECK_THROWS_WITH(estimate_model_states(t), Catch::Matchers::Contains("largest layer cannot exceed"));
  t.largest_layer = elements_of(0);
  t.params = elements_of(std::int64_t{1} << 61);  // 2^61 params x 16 B overflows 64 bits
  CHECK_THROWS_AS(estimate_model_states(t), std::overflow_error);
}

TEST_CASE("the optimizer table is the one list: names parse back, help and errors list every row", "[model_states][optimizer]") {
  std::string names;
  for (const optimizer_traits& t : optimizer_table) {
    CHECK(parse_optimizer(t.name) == t.kind);
    CHECK(name(t.kind) == t.name);
    CHECK_FALSE(t.source.empty());
    CHECK(optimizer_names().find(std::string(t.name)) != std::string::npos);
    names += std::string(names.empty() ? "" : ", ") + std::string(t.name);
  }
  CHECK_THROWS_WITH(parse_optimizer("adabelief"), Catch::Matchers::Contains("expected one of " + names));
  // torch.optim's Muon and LBFGS are named with why they are not modelled, in any case or punctuation, and the list
  // to choose from; neither is a row, so no modelled name is taken for them (the message never guesses "did you mean").
  for (const char* unmodelled : {"muon", "Muon", "lbfgs", "LBFGS", "L-BFGS"}) {
    CHECK_THROWS_WITH(parse_optimizer(unmodelled), Catch::Matchers::Contains("is not modelled") && Catch::Matchers::Contains("choose one of " + names));
    CHECK_THROWS_WITH(parse_optimizer(unmodelled), !Catch::Matchers::Contains("did you mean"));
  }
  CHECK_THROWS_WITH(parse_optimizer("Muon"), Catch::Matchers::StartsWith("zeromem: optimizer 'Muon': torch.optim.Muon steps 2D matrices only"));
  for (const unmodelled_optimizer& u : unmodelled_optimizers)
    for (const optimizer_traits& t : optimizer_table) CHECK(u.name != t.name);
  // A row with parameter-sized moments costs moments x the optimizer dtype per parameter: mixed bf16 keeps them in
  // fp32, so Adam's two moments are 8 B and Lion's one 4 B per parameter (ZeRO paper K = 12 with the 4 B master).
  const precision_recipe mixed = recipe_of(precision::mixed_bf16);
  CHECK(optimizer_state_bytes(optimizer_spec{optimizer_kind::adamw}, mixed, 1000_params) == 8000_B);
  CHECK(optimizer_state_bytes(optimizer_spec{optimizer_kind::lion}, mixed, 1000_params) == 4000_B);
  CHECK(optimizer_state_bytes(optimizer_spec{optimizer_kind::sgd}, mixed, 1000_params) == 0_B);
}
