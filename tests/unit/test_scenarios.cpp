// The five reported scenarios: verdicts agree with the reports, and the numbers behind them are checked
// against derivations written out here.
#include <sstream>

#include "catch.hpp"
#include "zeromem/report.hpp"
#include "zeromem/scenarios.hpp"

using namespace zeromem;
using namespace zeromem::literals;

TEST_CASE("every scenario's verdicts agree with the reports", "[scenarios]") {
  for (const std::string& name : scenario_names()) {
    const scenario s = find_scenario(name);
    REQUIRE_FALSE(s.cases.empty());
    int reported = 0;
    for (const scenario_case& c : s.cases) {
      if (!c.reported) continue;
      ++reported;
      INFO(name << ": " << c.label << " -> GPU " << to_gib(c.job.gpu_total()) << " GiB, host " << to_gb(c.job.host_total()) << " GB");
      CHECK(c.job.fits() == c.reported_fits);
    }
    // Every scenario with a report has at least a failing and a fixed case; zero2-vs-zero3 has no report.
    if (name != "openrlhf-zero2-vs-zero3") CHECK(reported >= 2);
    CHECK(render_scenario(s).find("DISAGREES") == std::string::npos);
  }
  CHECK_THROWS_WITH(find_scenario("gpt-oom"), Catch::Matchers::Contains("unknown scenario 'gpt-oom'; expected one of"));
}

TEST_CASE("openrlhf-70b-ppo: the defect holds the whole 16-bit model", "[scenarios]") {
  // 70,553,706,496 parameters x 2 B = 141,107,412,992 B on every GPU, whatever the node count.
  for (std::int64_t nodes : {1, 2, 4, 8, 16}) {
    const job_breakdown j = openrlhf_70b_actor(nodes, true);
    bool found = false;
    for (const memory_term& t : j.terms)
      if (t.term.find("DeepSpeed 0.16.x defect") != std::string::npos) {
        CHECK(t.gpu.count() == 141'107'412'992LL);
        found = true;
      }
    CHECK(found);
    CHECK_FALSE(j.gpu_fits());
  }
  // Healthy: the ZeRO-3 shard of 16-bit weights on 32 GPUs is 2 x 70,553,706,496 / 32 = 4,409,606,656 B.
  const job_breakdown healthy = openrlhf_70b_actor(4, false);
  CHECK(healthy.terms[0].term == "weights");
  CHECK(healthy.terms[0].gpu.count() == 4'409'606'656LL);
  CHECK(healthy.gpu_fits());
  CHECK(openrlhf_70b_actor(4, false, 4).gpu_fits());  // still fits with micro-batch 4
}

TEST_CASE("openrlhf-zero2-vs-zero3: ZeRO-2 floors at three 16-bit models, ZeRO-3 falls as 1/N", "[scenarios]") {
  // ZeRO-2 on N GPUs: actor 2P + 14P/N, reference and reward 2P each; ZeRO-3: 16P/N + 2P/N + 2P/N plus the
  // gathered largest layer (the 32000 x 4096 embedding, 4 B each). Plus one CUDA context. P = 6,738,415,616.
  const std::int64_t P = 6'738'415'616;
  const bytes ctx = runtime_overheads{}.cuda_context;
  CHECK(openrlhf_7b_states(2, 64).gpu_total() == bytes_of(2 * P + (14 * P + 63) / 64 + 4 * P) + ctx);
  CHECK(openrlhf_7b_states(3, 64).gpu_total() == bytes_of((16 * P + 63) / 64 + 2 * ((2 * P + 63) / 64) + 4 * 131'072'000LL) + ctx);
  for (std::int64_t n : {1, 2, 4, 8, 16, 32})
    CHECK(openrlhf_7b_states(2, 2 * n).gpu_total() <= openrlhf_7b_states(2, n).gpu_total());
}

TEST_CASE("orz-1.5b-ppo: vLLM's KV cache sized for an empty GPU", "[scenarios]") {
  // util 0.85 x 79.35 GiB (85,201,413,734 B) = 72,421,201,673 B (int of the product) minus weights 3,087,428,608 B
  // and the 0.30 GiB context 322,122,547 B = 69,011,650,518 B of KV; a 256-token block of Qwen2.5-1.5B is
  // 2 x 28 x 2 x 128 x 2 x 256 = 7,340,032 B -> 9402 blocks.
  const job_breakdown j = orz_15b(0.85);
  CHECK(j.terms[1].term == "KV cache");
  CHECK(j.terms[1].note == "9402 blocks of 256 tokens");
  CHECK(j.terms[1].gpu.count() == 9402LL * 7'340'032);
  CHECK_FALSE(j.gpu_fits());
  CHECK(orz_15b(0.5).gpu_fits());
}

TEST_CASE("easyr1-vl-7b-grpo: modelled host RAM and the unexplained remainder", "[scenarios]") {
  // fp32 parameters 4 B + AdamW moments 8 B + offloaded reference 2 B + 4 sleeping engines x 2 B = 22 B per
  // parameter: 8,292,166,656 x 22 = 182,427,666,432 B; the report's 726.33 GB leaves 543,902,333,568 B unexplained.
  const job_breakdown modelled = easyr1_vl_7b(true, bytes{});
  CHECK(modelled.host_total().count() == 182'427'666'432LL);
  const scenario s = easyr1_vl_7b_grpo();
  CHECK(s.cases[0].job.unexplained_host.count() == 726'330'000'000LL - 182'427'666'432LL);
  CHECK(s.cases[0].job.host_total().count() == 726'330'000'000LL);
  CHECK_FALSE(s.cases[0].job.host_fits());  // 726.33 GB > 0.95 x 760 GB = 722 GB
  CHECK(s.cases[1].job.host_fits());
  CHECK(s.cases[1].job.gpu_fits());
}

TEST_CASE("logic-rl-7b-grpo: the tokens per sequence that reproduce all four reports", "[scenarios]") {
  // Per token: 28 checkpointed layer inputs (2 x 3584 B each) + one recomputed layer + 8 B x 152,064 vocabulary.
  const logic_rl_costs k = logic_rl_costs_for(8);
  const std::int64_t checkpoints = 28LL * 2 * 3584;
  CHECK(k.per_token.count() > checkpoints + 8LL * 152'064);
  const token_range r = logic_rl_token_range(8);
  CHECK(r.lowest_failing_64 < r.highest_fitting_48);
  // Inside the range all four verdicts hold; at the 2448-token maximum 32 sequences would not fit.
  for (std::int64_t t : {r.lowest_failing_64 + 1, r.highest_fitting_48}) {
    CHECK_FALSE(logic_rl_case(64, t, 8).gpu_fits());
    CHECK(logic_rl_case(48, t, 8).gpu_fits());
    CHECK(logic_rl_case(32, t, 8).gpu_fits());
  }
  CHECK_FALSE(logic_rl_case(32, 2448, 8).gpu_fits());
}

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
  // DeepSpeed buffers: ZeRO-2 with overlap_comm: 2 x 5e8 x 2 B = 2e9 B; ZeRO-3 adds the 5e7-element prefetch bucket.
  CHECK(deepspeed_buffers(2, runtime_overheads{}) == 2_GB);
  CHECK(deepspeed_buffers(3, runtime_overheads{}) == 2_GB + 100_MB);
  CHECK(deepspeed_buffers(0, runtime_overheads{}) == 0_B);
  // ZeRO-3's healthy gathered bound: 2 B x min(1e9, P): 2 GB for a 70B model, 2 B x P for a 300M one.
  CHECK(zero3_live_parameter_bound(runtime_overheads{}, 70_Gparams) == 2_GB);
  CHECK(zero3_live_parameter_bound(runtime_overheads{}, 300_Mparams) == 600_MB);
}

TEST_CASE("a scenario's report keeps one unit per table: GiB per GPU, GB per node's host RAM", "[scenario][first-contact]") {
  for (const std::string& name : scenario_names()) {
    INFO(name);
    const std::string text = render_scenario(find_scenario(name));
    std::istringstream lines(text);
    enum { none, gpu, host } table = none;
    int gpu_rows = 0;
    for (std::string line; std::getline(lines, line);) {
      if (line.rfind("  per GPU (GiB = 2^30 B)", 0) == 0) { table = gpu; continue; }
      if (line.rfind("  per node host RAM (GB = 10^9 B)", 0) == 0) { table = host; continue; }
      if (line.rfind("    ", 0) != 0) { table = none; continue; }
      if (line.find("(source: ") != std::string::npos) continue;
      INFO(line);
      if (table == gpu) {
        ++gpu_rows;
        CHECK(line.find(" GiB") != std::string::npos);
        CHECK(line.find(" GB") == std::string::npos);
      }
      if (table == host && line.find(" GB") != std::string::npos) CHECK(line.find("GiB") == std::string::npos);
    }
    CHECK(gpu_rows > 0);
  }
  // Findings about a GPU speak its table's unit: the 70B defect's 141,107,412,992 B is 131.42 GiB, as in the table.
  const scenario s = openrlhf_70b_ppo();
  CHECK(s.findings.front().find("131.42 GiB") != std::string::npos);
  CHECK(render_scenario(s).find("131.42 GiB") != std::string::npos);
}
