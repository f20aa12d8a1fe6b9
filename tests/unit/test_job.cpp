// Job breakdowns: a constexpr job checked against a capacity, and the runtime overheads as explicit terms.
#include <cmath>
#include <cstdint>

#include "catch.hpp"
#include "zeromem/jobs/job.hpp"
#include "zeromem/jobs/step.hpp"

using namespace zeromem;
using namespace zeromem::literals;

TEST_CASE("training_gpu_bytes is a constant expression", "[job]") {
  // Llama-2-7B, ZeRO-3 over 8: 16 x 6,738,415,616 / 8 = 13,476,831,232 B of states, plus the gathered embedding
  // (4 B x 131,072,000), activations, buffers and a context.
  struct job {
    static constexpr transformer_config model() { return preset_config("llama-2-7b"); }
    static constexpr training_states states() {
      training_states t{};
      t.zero = zero<3>::config();
      t.dp = 8;
      return t;
    }
    static constexpr activation_config activations() {
      activation_config a{};
      a.seq_len = 1024;
      a.attention = attention_kind::flash;
      a.recomputation = recompute::full;
      return a;
    }
    static constexpr pipeline_config pipeline() { return {}; }
    static constexpr bytes capacity() { return 80_GB; }
  };
  STATIC_REQUIRE(job_gpu_bytes_v<job> > bytes_of(13'476'831'232LL + 524'288'000));
  STATIC_REQUIRE(assert_fits<job>::headroom > 0_B);
}

namespace {
// Two steps measured on the GPU (tests/data/calibration), declared as job types: pure bf16 AdamW (foreach, PyTorch's
// default on CUDA), transformers' code with SDPA and full recompute (gradient checkpointing).
template <std::int64_t Seq, std::int64_t MicroBatch>
struct measured_bf16_step {
  static constexpr training_states states() {
    training_states t{};
    t.recipe = recipe_of(precision::bf16);
    return t;
  }
  static constexpr activation_config activations() {
    activation_config a{};
    a.seq_len = Seq;
    a.micro_batch = MicroBatch;
    a.impl = implementation::hf;
    a.recomputation = recompute::full;
    return with_recipe(a, states().recipe);
  }
  static constexpr pipeline_config pipeline() { return {}; }
  static constexpr bytes capacity() { return find_gpu("h100-80gb").capacity; }
};
// h100-training-steps.json, anatomy `llama3-8b-bf16-sdpa-s1024-b1-ckpt`: max_memory_allocated 80,302,622,208 B; it
// ran, the driver reporting 82,890,784,768 of 85,017,493,504 B used.
struct llama3_8b_on_h100 : measured_bf16_step<1024, 1> {
  static constexpr transformer_config model() { return preset_config("llama-3-8b"); }
};
// h200-training-steps.json, `qwen3-8b-bf16-sdpa-s4096-b4-ckpt` (torch 2.11, the H100's software): max_memory_allocated
// 84,391,532,544 B. On an H100 that peak with the CUDA context (650,969,088 B) and the step's modules (153,092,096 B)
// is 85,195,593,728 B, above the card's 85,017,493,504 B total, so the step cannot run there.
struct qwen3_8b_on_h100 : measured_bf16_step<4096, 4> {
  static constexpr transformer_config model() { return preset_config("qwen3-8b"); }
};
constexpr double error_vs(bytes predicted, std::int64_t measured) {
  return static_cast<double>(predicted.count()) / static_cast<double>(measured) - 1.0;
}
}  // namespace

TEST_CASE("a job type fits by its step's peak, as the measured steps did", "[job][step]") {
  // The peak of each is the optimizer step: every gradient beside foreach AdamW's parameter-sized sqrt buffer.
  STATIC_REQUIRE(job_step_v<llama3_8b_on_h100>.peak_phase == step_phase::optimizer_step);
  CHECK(std::abs(error_vs(job_step_v<llama3_8b_on_h100>.peak, 80'302'622'208)) < 0.03);
  CHECK(std::abs(error_vs(job_step_v<qwen3_8b_on_h100>.peak, 84'391'532'544)) < 0.03);
  // The measured verdicts: Llama-3-8B ran on the H100; Qwen3-8B's peak does not fit one.
  STATIC_REQUIRE(job_verdict_v<llama3_8b_on_h100>.fits());
  STATIC_REQUIRE(assert_fits<llama3_8b_on_h100>::headroom > 0_B);
  STATIC_REQUIRE(!job_verdict_v<qwen3_8b_on_h100>.fits());
  // The sum of the terms (training_gpu_bytes), which assert_fits compared before: 19% under Llama-3-8B's measured
  // peak, and it called the Qwen3-8B step fitting (tests/compile_fail/step_does_not_fit.cpp).
  CHECK(error_vs(job_gpu_bytes_v<llama3_8b_on_h100>, 80'302'622'208) < -0.15);
  STATIC_REQUIRE(job_gpu_bytes_v<qwen3_8b_on_h100> < qwen3_8b_on_h100::capacity());
  // The verdict's bytes: the step's peak, the CUDA context and the modules, against the card's total.
  STATIC_REQUIRE(job_verdict_v<llama3_8b_on_h100>.needed == job_step_v<llama3_8b_on_h100>.peak + bytes_of(650'969'088 + 153'092'096));
  STATIC_REQUIRE(job_verdict_v<llama3_8b_on_h100>.capacity == bytes_of(85'017'493'504));
}

TEST_CASE("runtime overheads are explicit terms", "[job]") {
  job_breakdown job{};
  job.gpu_capacity = 80_GB;
  job.add("actor", "weights", 10_GB);
  runtime_overheads o{};
  o.allocator_reserve_fraction = 0.1;
  o.framework_extra = 1_GB;
  add_allocator_reserve(job, o);
  CHECK(job.gpu_total() == 10_GB + 1_GB + 1_GB);  // 10% of 10 GB, then 1 GB of extras
  o.allocator_reserve_fraction = 1.5;
  CHECK_THROWS_WITH(add_allocator_reserve(job, o), Catch::Matchers::Contains("allocator reserve fraction must be in [0, 1)"));
  // DeepSpeed buffers, its defaults: overlap_comm unset is on at stage 3 only (zero/config.py overlap_comm_valid), so
  // ZeRO-1 and ZeRO-2 hold one reduce bucket, 5e8 x 2 B = 1e9 B. ZeRO-3 holds its bucket and the bucket's flattened
  // copy while it is reduced (coalesced_collectives.py reduce_scatter_coalesced), 2e9 B, plus the 5e7-element prefetch
  // bucket, 1e8 B.
  CHECK(deepspeed_buffers(1, runtime_overheads{}) == 1_GB);
  CHECK(deepspeed_buffers(2, runtime_overheads{}) == 1_GB);
  CHECK(deepspeed_buffers(3, runtime_overheads{}) == 2_GB + 100_MB);
  CHECK(deepspeed_buffers(0, runtime_overheads{}) == 0_B);
  // Set in the config, overlap_comm doubles ZeRO-1/2's bucket (stage_1_and_2.py backward, buf_1): 2e9 B. ZeRO-3's two
  // are there with it off too.
  runtime_overheads set{};
  set.overlap_comm = overlap_comm_setting::on;
  CHECK(deepspeed_buffers(2, set) == 2_GB);
  CHECK(deepspeed_buffers(1, set) == 2_GB);
  set.overlap_comm = overlap_comm_setting::off;
  CHECK(deepspeed_buffers(3, set) == 2_GB + 100_MB);
  STATIC_REQUIRE(!overlaps_comm(runtime_overheads{}, 2));
  STATIC_REQUIRE(overlaps_comm(runtime_overheads{}, 3));
  // ZeRO-3's healthy gathered bound: 2 B x min(1e9, P): 2 GB for a 70B model, 2 B x P for a 300M one.
  CHECK(zero3_live_parameter_bound(runtime_overheads{}, 70_Gparams) == 2_GB);
  CHECK(zero3_live_parameter_bound(runtime_overheads{}, 300_Mparams) == 600_MB);
}

namespace {
/// Llama-2-7B's layout cut down: hidden 256, 4 heads, ffn 512, vocab 1000, 2 layers.
transformer_config tiny_llama() {
  transformer_config small = preset_config("llama-2-7b");
  small.hidden = 256;
  small.heads = small.kv_heads = 4;
  small.ffn = 512;
  small.vocab = 1000;
  small.layers = 2;
  small.head_dim = 0;
  return small;
}
}  // namespace

TEST_CASE("ZeRO-3 keeps gathered what the module trace uses again within stage3_max_reuse_distance", "[job][zero3]") {
  // Llama-2-7B on one rank (partitioned_param_coordinator.py __params_to_release), derived by hand from its shapes:
  // q, k, v, o 4096 x 4096 = 16,777,216 each; gate, up, down 4096 x 11008 = 45,088,768 each; two norms of 4096:
  // a layer 67,108,864 + 135,266,304 + 8,192 = 202,383,360. Head: lm_head 32000 x 4096 = 131,072,000 + the final norm.
  const transformer_config llama = preset_config("llama-2-7b");
  // The walk alone: no persistent tensors (threshold 0; DeepSpeed's default 1e5 is the next test case's).
  const zero3_retained r = zero3_retained_parameters(llama, 32, 1, true, 1'000'000'000, 0);
  CHECK(r.layer == elements_of(202'383'360));
  CHECK(r.largest_module == elements_of(45'088'768));
  CHECK(r.head == elements_of(131'076'096));
  // The top layer: 2 (202,383,360 - 4,096 + 131,076,096) = 666,910,720 < 1e9, whole; the next adds 2 x 202,383,360:
  // 1,071,677,440, not whole.
  CHECK(r.whole_layers == 1);
  // Its modules from the last, against 1e9 - 2 (202,383,360 + 131,076,096) = 333,081,088: down (nothing after it),
  // up (2 x 45,088,768), gate (2 x 90,177,536), o (2 x 135,266,304 = 270,532,608), v (2 x 152,043,520 = 304,087,040)
  // are kept; k (2 x 168,820,736 = 337,641,472) is not.
  CHECK(r.partial == elements_of(3 * 45'088'768 + 2 * 16'777'216));
  CHECK(r.root == 0_params);
  CHECK(r.turnaround() == elements_of(131'076'096 + 202'383'360 + 168'820'736));
  // While the top layer is differentiated: itself and the partial layer below it; in that layer, what it kept; further
  // down, one module (gate, up or down) at a time.
  CHECK(r.at_layer(31, 32) == elements_of(202'383'360 + 168'820'736));
  CHECK(r.at_layer(30, 32) == elements_of(168'820'736));
  CHECK(r.at_layer(0, 32) == elements_of(45'088'768));
  CHECK(r.at_output_layer() == r.turnaround());
  // Where the backward releases nothing it gathers (DeepSpeed 0.16.x): the head (131,072,000 + 4,096), every layer
  // from i up, and below them what the forward kept. At the top layer that is the turnaround; at layer 30 two whole
  // layers; at layer 0 all 32, every parameter but the embedding's 131,072,000 (6,738,415,616 in all).
  CHECK(r.final_norm == elements_of(4'096));
  CHECK(r.embeddings == elements_of(131'072'000));
  CHECK(r.at_layer_unreleased(31, 32) == r.turnaround());
  CHECK(r.at_layer_unreleased(30, 32) == elements_of(131'076'096 + 2 * 202'383'360));
  CHECK(r.at_layer_unreleased(0, 32) == elements_of(6'738'415'616 - 131'072'000));

  // Distance 0: nothing is kept, and lm_head is gathered again for its backward.
  const zero3_retained none = zero3_retained_parameters(llama, 32, 1, true, 0, 0);
  CHECK(none.turnaround() == 0_params);
  CHECK(none.at_output_layer() == elements_of(131'072'000));

  // Llama-3-70B: lm_head (128256 x 8192 = 1,050,673,152 elements) is used again at once; the final norm, with lm_head
  // twice after it, is not kept, nor any layer.
  const zero3_retained big = zero3_retained_parameters(preset_config("llama-3-70b"), 80, 1, true, 1'000'000'000, 0);
  CHECK(big.whole_layers == 0);
  CHECK(big.partial == 0_params);
  CHECK(big.turnaround() == elements_of(1'050'673'152));

  // A small model: hidden 256, 4 heads, ffn 512, vocab 1000, 2 layers. q, k, v, o 65,536 each; gate, up, down 131,072
  // each; norms 2 x 256: a layer 655,872. Untied: lm_head 256,000 + final norm 256 = 256,256.
  transformer_config small = tiny_llama();
  const zero3_retained all = zero3_retained_parameters(small, 2, 1, true, 1'000'000'000, 0);
  CHECK(all.whole_layers == 2);
  // 2 x (2 x 655,872 + 256,256) = 3,136,000 < 1e9: the embedding (1000 x 256) stays from its forward to its backward.
  CHECK(all.root == elements_of(256'000));
  CHECK(all.turnaround() == elements_of(256'256 + 2 * 655'872 + 256'000));
  CHECK(all.at_layer(0, 2) == elements_of(655'872 + 256'000));
  // Tied, distance 2,000,000: the top layer is whole (2 (655,616 + 256,256) = 1,823,744); the one below keeps down
  // only (budget 2,000,000 - 2 (655,872 + 256,256) = 175,744; up would need 2 x 131,072 = 262,144). The table (the
  // lm_head weight) is used again at the embedding's backward after 2 x 655,872 + 256 = 1,312,000 < 2,000,000.
  small.tied_embeddings = true;
  const zero3_retained tied = zero3_retained_parameters(small, 2, 1, true, 2'000'000, 0);
  CHECK(tied.whole_layers == 1);
  CHECK(tied.partial == elements_of(131'072));
  CHECK(tied.root == 0_params);
  CHECK(tied.table_in_backward == elements_of(256'000));
  CHECK(tied.turnaround() == elements_of(256'256 + 655'872 + 131'072));
  CHECK(tied.at_layer(1, 2) == elements_of(655'872 + 131'072 + 256'000));
  CHECK(tied.at_layer(0, 2) == elements_of(131'072 + 256'000));

  // Mixtral-8x7B as transformers 5 holds it: a layer is q, o 16,777,216; k, v 4096 x 1024 = 4,194,304; the router
  // 8 x 4096 = 32,768; one experts module, gate_up_proj 8 x 28,672 x 4,096 = 939,524,096 and down_proj 8 x 4,096 x
  // 14,336 = 469,762,048 together 1,409,286,144; norms 8,192: 1,451,270,144. No layer is whole (2 x 1,451,270,144 > 1e9);
  // against 1e9 - 2 x (131,072,000 + 4,096) = 737,847,808 the top layer's experts module (nothing after it) is kept,
  // and the router before it is not (2 x 1,409,286,144 above the budget).
  transformer_config mixtral = preset_config("mixtral-8x7b");
  const zero3_retained moe = zero3_retained_parameters(mixtral, 32, 1, true, 1'000'000'000, 0);
  CHECK(moe.layer == elements_of(1'451'270'144));
  CHECK(moe.largest_module == elements_of(1'409'286'144));
  CHECK(moe.whole_layers == 0);
  CHECK(moe.partial == elements_of(1'409'286'144));
  CHECK(moe.turnaround() == elements_of(131'076'096 + 1'409'286'144));
  // transformers 4's expert linears (gate, up, down of 14,336 x 4,096 = 58,720,256, 8 of each), the router after
  // them: the router (32,768) is kept, then the last down_proj copies t while 2 (32,768 + t x 58,720,256) <
  // 737,847,808: t = 0 .. 6, seven of the eight.
  mixtral.moe.stacked = false;
  const zero3_retained linears = zero3_retained_parameters(mixtral, 32, 1, true, 1'000'000'000, 0);
  CHECK(linears.largest_module == elements_of(58'720'256));
  CHECK(linears.partial == elements_of(32'768 + 7 * 58'720'256));

  CHECK_THROWS_WITH(zero3_retained_parameters(llama, 32, 1, true, -1), Catch::Contains("stage3_max_reuse_distance cannot be negative"));
  CHECK_THROWS_WITH(zero3_retained_parameters(llama, 33, 1, true, 1), Catch::Contains("the stage's layers"));
  runtime_overheads o{};
  o.max_reuse_distance = -1;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("max_reuse_distance cannot be negative"));
}

TEST_CASE("ZeRO-3 keeps tensors of at most stage3_param_persistence_threshold elements gathered", "[job][zero3]") {
  // parameter_offload.py mark_persistent_parameters: ds_numel <= the threshold (DeepSpeed's default 1e5) marks a tensor
  // ds_persist, and __params_to_release never releases it; the walk still counts it in its distances.
  // Llama-2-7B on one rank: only the norms are persistent, 32 x 2 + 1 = 65 of 4,096: 266,240 elements.
  const transformer_config llama = preset_config("llama-2-7b");
  const zero3_retained r = zero3_retained_parameters(llama, 32, 1, true, 1'000'000'000);
  CHECK(r.persistent == elements_of(266'240));
  CHECK(r.whole_layers == 1);  // the walk is the threshold-0 one: the previous test case
  CHECK(r.partial == elements_of(3 * 45'088'768 + 2 * 16'777'216));
  // The turnaround kept lm_head, the final norm and layer 31 whole (its two norms), 502,280,192 elements; the 62 norms
  // of layers 0-30 are gathered beside them: + 253,952.
  CHECK(r.turnaround() == elements_of(502'280'192 + 62 * 4'096));
  // Layer 30's backward: its kept modules (168,820,736, no norm among them) and every norm.
  CHECK(r.at_layer(30, 32) == elements_of(168'820'736 + 266'240));
  CHECK(r.at_layer(0, 32) == elements_of(45'088'768 + 266'240));
  // The embedding's backward gathers the table (32,000 x 4,096) beside them.
  CHECK(r.at_embeddings(false) == elements_of(131'072'000 + 266'240));
  // Where nothing is released the norms are in the layers already: 6,738,415,616 - 131,072,000 as before.
  CHECK(r.at_layer_unreleased(0, 32) == elements_of(6'738'415'616 - 131'072'000));
  // Hugging Face Trainer's "auto", 10 x 4,096 = 40,960, marks the same tensors.
  CHECK(zero3_retained_parameters(llama, 32, 1, true, 1'000'000'000, 40'960).persistent == elements_of(266'240));

  // The small model of the previous case (hidden 256, ffn 512, vocab 1000, 2 layers): q, k, v, o of 65,536 are
  // persistent, gate, up, down of 131,072 are not, nor lm_head's or the table's 256,000. A layer: 4 x 65,536 + 2 x 256
  // = 262,656; with the final norm 2 x 262,656 + 256 = 525,568.
  transformer_config small = tiny_llama();
  const zero3_retained none = zero3_retained_parameters(small, 2, 1, true, 0);  // distance 0: nothing kept by the walk
  CHECK(none.persistent == elements_of(525'568));
  CHECK(none.turnaround() == elements_of(525'568));
  CHECK(none.at_output_layer() == elements_of(525'568 + 256'000));
  CHECK(none.at_layer(0, 2) == elements_of(525'568 + 131'072));  // gate, up or down, the largest module
  CHECK(none.at_embeddings(false) == elements_of(525'568 + 256'000));
  // Tied, distance 2,000,000 (the walk of the previous case: the top layer whole, down below it, the table kept for
  // the embedding's backward): the top layer's 655,872 - 262,656 = 393,216 non-persistent elements, down's 131,072,
  // the table 256,000 and the final norm's 256, which is persistent: 525,568 + 256,000 + 393,216 + 131,072.
  small.tied_embeddings = true;
  const zero3_retained tied = zero3_retained_parameters(small, 2, 1, true, 2'000'000);
  CHECK(tied.turnaround() == elements_of(525'568 + 256'000 + 393'216 + 131'072));
  CHECK(tied.at_layer(0, 2) == elements_of(525'568 + 131'072 + 256'000));
  // Two tensor-parallel ranks: each tensor's half. q, k, v, o 32,768, gate, up, down 65,536 and the norms' 128 are all
  // persistent: 2 x (4 x 32,768 + 3 x 65,536 + 2 x 128) + 128 = 656,000; a layer gathers nothing more.
  small.tied_embeddings = false;
  const zero3_retained halves = zero3_retained_parameters(small, 2, 2, true, 0);
  CHECK(halves.persistent == elements_of(656'000));
  CHECK(halves.resident.layer == 0_params);
  CHECK(halves.at_layer(0, 2) == elements_of(656'000));
  // Threshold 0: none.
  CHECK(zero3_retained_parameters(small, 2, 1, true, 0, 0).persistent == 0_params);
  CHECK_THROWS_WITH(zero3_retained_parameters(small, 2, 1, true, 0, -1), Catch::Contains("stage3_param_persistence_threshold cannot be negative"));
  runtime_overheads o{};
  o.param_persistence_threshold = -1;
  CHECK_THROWS_WITH(validate(o), Catch::Contains("param_persistence_threshold cannot be negative"));
}
