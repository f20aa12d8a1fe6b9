// Job breakdowns: a constexpr job checked against a capacity, and the runtime overheads as explicit terms.
#include "catch.hpp"
#include "zeromem/jobs/job.hpp"

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
