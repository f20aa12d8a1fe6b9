// The planner and explanations: every configuration it keeps fits, the ranking follows its stated objective,
// and the numbers agree with the estimate functions they come from.
#include <algorithm>
#include <limits>

#include "catch.hpp"
#include "zeromem/jobs/plan.hpp"
#include "zeromem/report/svg.hpp"

using namespace zeromem;
using namespace zeromem::literals;

namespace {
plan_request request(const char* model, std::int64_t nodes) {
  plan_request r{};
  r.model = preset_config(model);
  r.gpu_capacity = find_gpu("a100-80gb").capacity;
  r.gpus_per_node = 8;
  r.nodes = nodes;
  r.seq_len = 4096;
  r.max_results = 1000;
  return r;
}
}  // namespace

TEST_CASE("GPU capacities", "[plan]") {
  CHECK(find_gpu("a100-80gb").capacity.count() == 85'201'413'734);  // 79.35 x 2^30, rounded
  CHECK(find_gpu("l40s").capacity == bytes_from(44.42L, size_unit::GiB));
  CHECK_THROWS_WITH(find_gpu("v100"), Catch::Matchers::Contains("unknown GPU 'v100'; expected one of a100-40gb"));
}

TEST_CASE("plan keeps only fitting configurations, ranked by its objective", "[plan]") {
  for (auto [model, nodes] : {std::pair{"llama-2-7b", 1}, std::pair{"llama-3-70b", 4}}) {
    const plan_request r = request(model, nodes);
    const plan_result p = plan(r);
    INFO(model);
    CHECK(p.evaluated > 500);  // hundreds of configurations
    REQUIRE(p.fitting > 0);
    REQUIRE(!p.configs.empty());
    for (std::size_t i = 0; i < p.configs.size(); ++i) {
      const plan_config& c = p.configs[i];
      CHECK(c.gpu <= r.gpu_capacity);
      CHECK(c.dp * c.tp * c.pp == 8 * nodes);
      CHECK(evaluate(r, c).gpu == c.gpu);  // the same numbers as evaluating it again
      if (i > 0) CHECK_FALSE(detail::better(c, p.configs[i - 1]));
    }
    // The best needs no offload and no recomputation: a 7B model on 8 A100s, and a 70B on 32, both do.
    CHECK(p.configs.front().offloaded_per_node.count() == 0);
    CHECK(p.configs.front().recomputation == recompute::none);
  }
  // Llama-2-7B's best: ZeRO-3 over 8 GPUs, no model parallelism, the largest micro-batch that fits.
  const plan_config best = plan(request("llama-2-7b", 1)).configs.front();
  CHECK(best.stage == 3);
  CHECK(best.dp == 8);
  CHECK(best.tp == 1);
  CHECK(best.pp == 1);
  plan_config bigger = best;
  bigger.micro_batch *= 2;
  CHECK(evaluate(request("llama-2-7b", 1), bigger).gpu > find_gpu("a100-80gb").capacity);
}

TEST_CASE("plan honours host memory, headroom and the global batch", "[plan]") {
  plan_request r = request("llama-3-70b", 1);  // 70B on one node: needs offload
  r.host_memory = 2_TB;
  const plan_result offload = plan(r);
  REQUIRE(!offload.configs.empty());
  for (const plan_config& c : offload.configs) CHECK(c.offloaded_per_node <= 2_TB);
  r.host_memory = 100_GB;  // too little for 12+ B/param of 70B on the host
  for (const plan_config& c : plan(r).configs) CHECK(c.offloaded_per_node <= 100_GB);
  r = request("llama-2-7b", 1);
  r.min_headroom = 20_GiB;
  for (const plan_config& c : plan(r).configs) CHECK(c.headroom >= 20_GiB);
  r = request("llama-2-7b", 1);
  r.global_batch = 24;
  for (const plan_config& c : plan(r).configs) {
    CHECK(24 % (c.dp * c.micro_batch) == 0);
    CHECK(c.accumulation_steps == 24 / (c.dp * c.micro_batch));  // each configuration's micro-batches per step
  }
  r.seq_len = 0;
  CHECK_THROWS_WITH(plan(r), Catch::Matchers::Contains("sequence length, got 0"));
}

TEST_CASE("plan tries ZeRO-Infinity's NVMe offload only where the request gives NVMe, ranked after host RAM", "[plan][offload]") {
  // Llama-3-70B (P = 70,553,706,496) on one node of 8 A100-40GB with 512 GB of host RAM: the optimizer on the CPU
  // needs 16 B x P = 1,128,859,303,936 B of it (fp32 master, gradient copy and two moments), so nothing fits there.
  plan_request r = request("llama-3-70b", 1);
  r.gpu_capacity = find_gpu("a100-40gb").capacity;
  r.host_memory = 512_GB;
  const plan_result none = plan(r);
  CHECK(none.fitting == 0);
  r.max_micro_batch = 1;
  const std::int64_t without = plan(r).evaluated;
  r.nvme_capacity = 3840_GB;
  const plan_result nvme = plan(r);
  // Per layout 3 more ZeRO options (stage 3 with the optimizer on NVMe; the parameters on the GPU, CPU or NVMe), each
  // at micro-batch 1 and 2 recompute levels; the 10 layouts of 8 GPUs: 640 / 5 micro-batches + 10 x 3 x 2 = 188.
  CHECK(without == 128);
  CHECK(nvme.evaluated == without + 10 * 3 * 2);
  REQUIRE(nvme.fitting > 0);
  const std::int64_t P = 70'553'706'496;
  // Per node (8 ranks): the optimizer's 16 B x P on NVMe; host RAM keeps the 16-bit gradient partition (2 B x P; stage3.py
  // grad_partitions_flat_buffer on the optimizer's device) and 4 optimizer swap buffers of one 10^9-element fp32
  // sub-group a rank (8 x 4 x 4 x 10^9 B); parameters on NVMe add 2 B x P there and 5 x 10^8 x 2 B of swap buffers a rank.
  // Exact without pipeline stages; with them a node is counted as 8 of its most loaded stage's ranks, so it holds more.
  const std::int64_t host_swap = 8LL * 4 * 4'000'000'000LL, param_swap = 8LL * 5 * 100'000'000LL * 2;
  bool params_on_cpu = false, params_on_nvme = false;
  for (const plan_config& c : nvme.configs) {
    INFO(c.dp << " " << c.tp << " " << c.pp << " " << name(c.params_offload));
    CHECK(c.optimizer_offload == offload_device::nvme);  // nothing else fits in 512 GB
    CHECK(c.offloaded_per_node <= 512_GB);
    CHECK(c.nvme_per_node <= 3840_GB);
    CHECK(c.nvme_per_node.count() >= 16 * P);
    if (c.pp > 1) continue;
    if (c.params_offload == offload_device::none) {
      CHECK(c.nvme_per_node.count() == 16 * P);
      CHECK(c.offloaded_per_node.count() == 2 * P + host_swap);
    } else if (c.params_offload == offload_device::cpu) {
      params_on_cpu = true;
      CHECK(c.nvme_per_node.count() == 16 * P);
      CHECK(c.offloaded_per_node.count() == 4 * P + host_swap);
    } else {
      params_on_nvme = true;
      CHECK(c.nvme_per_node.count() == 18 * P);
      CHECK(c.offloaded_per_node.count() == 2 * P + host_swap + param_swap);
    }
  }
  CHECK(params_on_cpu);
  CHECK(params_on_nvme);
  // Less NVMe than 16 B x P fits none; 1.2 TB holds the optimizer but not the parameters besides it (18 B x P).
  r.nvme_capacity = 1100_GB;
  CHECK(plan(r).fitting == 0);
  r.nvme_capacity = 1200_GB;
  const plan_result some = plan(r);
  REQUIRE(some.fitting > 0);
  for (const plan_config& c : some.configs) CHECK(c.params_offload != offload_device::nvme);
  // With room on the host, the CPU's offload ranks first and NVMe rows only after every row without it.
  r.host_memory = 2_TB;
  const plan_result both = plan(r);
  REQUIRE(both.configs.size() > 2);
  CHECK(both.configs.front().optimizer_offload == offload_device::cpu);
  bool seen_nvme = false;
  for (const plan_config& c : both.configs) {
    if (seen_nvme) CHECK(c.nvme_per_node.count() > 0);
    seen_nvme = seen_nvme || c.nvme_per_node.count() > 0;
  }
  CHECK(seen_nvme);
  r.nvme_capacity = bytes_of(-1);
  CHECK_THROWS_WITH(plan(r), Catch::Matchers::Contains("the NVMe capacity cannot be negative; pass 0 for no NVMe offload"));
  // single_changes offers ZeRO-Infinity only with NVMe given.
  r = request("llama-3-70b", 1);
  r.gpu_capacity = find_gpu("a100-40gb").capacity;
  plan_config c{};
  c.stage = 3;
  c.dp = 8;
  c = evaluate(r, c);
  const auto offers_nvme = [](const std::vector<suggestion>& s) {
    return std::any_of(s.begin(), s.end(), [](const suggestion& x) { return x.change.find("NVMe") != std::string::npos; });
  };
  CHECK_FALSE(offers_nvme(single_changes(r, c)));
  r.nvme_capacity = 3840_GB;
  const std::vector<suggestion> s = single_changes(r, c);
  CHECK(offers_nvme(s));
  CHECK(s.back().change == "ZeRO-3 with parameters and optimizer on NVMe (ZeRO-Infinity)");
}

TEST_CASE("single changes suggest the cheapest fix first", "[plan]") {
  // Llama-2-7B, ZeRO-1 over 8, micro-batch 4, no recompute: does not fit; recomputation comes first. Megatron-LM's
  // kernels offer selective recompute before full; transformers' (the default) checkpoint whole layers only.
  for (const implementation impl : {implementation::fused, implementation::hf}) {
    plan_request r = request("llama-2-7b", 1);
    r.impl = impl;
    plan_config c{};
    c.stage = 1;
    c.dp = 8;
    c.micro_batch = 4;
    c = evaluate(r, c);
    INFO(name(impl));
    REQUIRE(c.headroom.count() < 0);
    const std::vector<suggestion> s = single_changes(r, c);
    REQUIRE(!s.empty());
    CHECK(s.front().change == (impl == implementation::fused ? "selective recompute" : "full recompute (gradient checkpointing)"));
    bool any_fits = false, selective = false;
    for (const suggestion& x : s) {
      any_fits = any_fits || x.fits;
      selective = selective || x.change == "selective recompute";
    }
    CHECK(any_fits);
    CHECK(selective == (impl == implementation::fused));
  }
}

TEST_CASE("plan sweeps selective recompute only where the job's code offers it", "[plan][first-contact]") {
  // transformers' gradient_checkpointing_enable checkpoints whole decoder layers: a plan for its kernels (the default)
  // ranks no configuration a transformers user cannot set. Megatron-LM's kernels under eager attention, where the
  // s^2 scores are what selective recompute drops, do get such rows.
  plan_request r = request("llama-2-7b", 1);
  r.attention = attention_kind::eager;
  r.seq_len = 16384;
  const plan_result hf = plan(r);
  REQUIRE(hf.fitting > 0);
  for (const plan_config& c : hf.configs) CHECK(c.recomputation != recompute::selective);
  r.impl = implementation::fused;
  const plan_result megatron = plan(r);
  bool selective = false;
  for (const plan_config& c : megatron.configs) selective = selective || c.recomputation == recompute::selective;
  CHECK(selective);
  CHECK(megatron.evaluated > hf.evaluated);  // the selective rows are evaluated, not only left out of the ranking
}

TEST_CASE("dominant terms are the largest, largest first", "[plan]") {
  job_breakdown job{};
  job.add("a", "small", 1_GiB);
  job.add("a", "large", 10_GiB);
  job.add("b", "middle", 5_GiB);
  job.add("b", "tiny", 1_MiB);
  const std::vector<named_bytes> d = dominant_terms(job, 2);
  REQUIRE(d.size() == 2);
  CHECK(d[0].name == "a large");
  CHECK(d[1].name == "b middle");
}

TEST_CASE("SVG charts carry their numbers and escape text", "[svg]") {
  const std::string bars = svg_stacked_bars("a <title> & more", {{"GPU 0", {{"weights", 10_GiB}, {"KV cache", 5_GiB}}}}, 80_GiB);
  CHECK(bars.rfind("<?xml", 0) == 0);
  CHECK(bars.find("</svg>") != std::string::npos);
  CHECK(bars.find("15.00 GiB") != std::string::npos);       // the bar's total
  CHECK(bars.find("capacity 80.00 GiB") != std::string::npos);
  CHECK(bars.find("a &lt;title&gt; &amp; more") != std::string::npos);
  const std::string line = svg_line("t", "micro-batch", {{"1", 2_GiB}, {"2", 4_GiB}}, 80_GiB);
  CHECK(line.find("4.00 GiB") != std::string::npos);
  CHECK_THROWS_WITH(svg_stacked_bars("t", {}, 80_GiB), Catch::Matchers::Contains("at least one bar"));
}

TEST_CASE("plan: dp x micro-batch past 2^63 is skipped, not a division by zero", "[plan][reliability]") {
  // 2^62 GPUs with a global batch of 1: every dp > 1 fails the divisibility test without forming dp x micro.
  plan_request r{};
  r.model = find_preset("llama-2-7b").config;
  r.gpu_capacity = find_gpu("h100-80gb").capacity;
  r.gpus_per_node = 4'611'686'018'427'387'904LL;
  r.seq_len = 128;
  r.global_batch = 1;
  CHECK(plan(r).evaluated == 0);
}

TEST_CASE("plan: the largest micro-batch may be INT64_MAX without the doubling overflowing", "[plan][reliability]") {
  plan_request r{};
  r.model = find_preset("llama-2-7b").config;
  r.gpu_capacity = find_gpu("h100-80gb").capacity;
  r.gpus_per_node = 1;
  r.seq_len = 128;
  r.global_batch = 1;
  r.max_micro_batch = std::numeric_limits<std::int64_t>::max();
  // dp 1, tp 1, pp 1, micro 1 only (the global batch is 1). At dp 1 stages 1-3 without offload shard nothing and
  // are skipped, and so is stage 1 with offload (stage 2 is the same engine holding less), leaving 4 ZeRO options
  // (stage 0; stages 2 and 3 with the optimizer offloaded; stage 3 with both offloaded) x 2 recompute settings
  // (transformers' kernels, the default: none or full).
  const plan_result p = plan(r);
  CHECK(p.evaluated == 4 * 2);
}

TEST_CASE("plan: evaluate rejects dp 0 and micro-batch 0 with the fix named", "[plan][reliability]") {
  plan_request r{};
  r.model = find_preset("llama-2-7b").config;
  r.gpu_capacity = find_gpu("h100-80gb").capacity;
  r.seq_len = 128;
  plan_config c{};
  c.dp = 0;
  CHECK_THROWS_WITH(evaluate(r, c), Catch::Contains("data-parallel degree"));
  c.dp = 1;
  c.micro_batch = 0;
  CHECK_THROWS_WITH(evaluate(r, c), Catch::Contains("micro-batch"));
}

TEST_CASE("plan: by default a configuration leaves 5% of the GPU free", "[plan][first-contact]") {
  plan_request r = request("qwen2.5-7b", 1);
  // 5% of the A100 80GB's 85,201,413,734 B is 4,260,070,686.7 B, rounded up.
  CHECK(required_headroom_of(r).count() == 4'260'070'687);
  const plan_result p = plan(r);
  REQUIRE(!p.configs.empty());
  for (const plan_config& c : p.configs) CHECK(c.headroom.count() >= 4'260'070'687);
  r.min_headroom = 10_GiB;  // the larger of the two holds
  CHECK(required_headroom_of(r) == 10_GiB);
  r.min_headroom = bytes{};
  r.min_headroom_fraction = 0.0;  // opt out: whatever fits, fits
  CHECK(plan(r).fitting > p.fitting);
  r.min_headroom_fraction = 1.0;
  CHECK_THROWS_WITH(plan(r), Catch::Matchers::Contains("minimum headroom fraction must be in [0, 1)"));
}

TEST_CASE("plan: no two choices hold the same memory for more cost", "[plan][first-contact]") {
  // Under flash attention selective recompute has no s^2 tensors to drop: it would repeat the no-recompute row.
  // At dp 1, ZeRO-1 and ZeRO-2 with the optimizer offloaded are one engine; stage 2 never holds more.
  for (const char* model : {"llama-2-7b", "qwen2.5-7b", "qwen2.5-1.5b"}) {
    plan_request r = request(model, 1);
    r.gpus_per_node = 1;
    r.min_headroom_fraction = 0.0;
    const plan_result p = plan(r);
    INFO(model);
    for (std::size_t i = 0; i < p.configs.size(); ++i) {
      CHECK_FALSE((p.configs[i].dp == 1 && p.configs[i].stage == 1));
      for (std::size_t k = 0; k < i; ++k) {
        plan_config a = p.configs[i], b = p.configs[k];
        a.recomputation = b.recomputation;
        const bool same_but_recompute = a.stage == b.stage && a.optimizer_offload == b.optimizer_offload &&
                                        a.params_offload == b.params_offload && a.micro_batch == b.micro_batch && a.tp == b.tp &&
                                        a.pp == b.pp && a.gpu == b.gpu;
        CHECK_FALSE(same_but_recompute);
      }
    }
    for (const std::int64_t micro : {1, 2, 4})
      for (const recompute rc : {recompute::none, recompute::selective, recompute::full}) {
        plan_config one{};
        one.stage = 1;
        one.optimizer_offload = offload_device::cpu;
        one.micro_batch = micro;
        one.recomputation = rc;
        plan_config two = one;
        two.stage = 2;
        one = evaluate(r, one);
        two = evaluate(r, two);
        CHECK(two.gpu <= one.gpu);
        CHECK(two.offloaded_per_node == one.offloaded_per_node);
      }
  }
}

TEST_CASE("plan --allow-lora: LoRA and QLoRA ranked after full training, chosen where only they fit", "[plan][lora]") {
  // Llama-3-70B on one H100 with 100 GB of host RAM. Full training cannot fit: even ZeRO-3 with everything on the
  // CPU keeps 70.55e9 x (4 + 8) B of fp32 master weights and moments = 847 GB in host RAM. LoRA on a bf16 base
  // cannot either: the frozen base alone is 70,553,706,496 x 2 B = 141.1 GB, above the card's 85.0 GB, and with
  // its parameters offloaded it takes the same 141.1 GB of host RAM. QLoRA's NF4 base (about 37 GB) fits.
  plan_request r{};
  r.model = preset_config("llama-3-70b");
  r.gpu_capacity = find_gpu("h100-80gb").capacity;
  r.gpus_per_node = 1;
  r.seq_len = 4096;
  r.host_memory = bytes_of(100'000'000'000);
  r.max_results = 1000;
  CHECK(plan(r).fitting == 0);
  r.allow_lora = true;
  const plan_result p = plan(r);
  REQUIRE(p.fitting > 0);
  for (const plan_config& c : p.configs) {
    CHECK(c.training == plan_training::qlora);
    CHECK(c.tp == 1);
    CHECK(c.gpu + c.headroom == r.gpu_capacity);
  }

  // Qwen2.5-7B on 8 H100s: full training fits, so it ranks first; the LoRA and QLoRA configurations follow it.
  plan_request small = r;
  small.model = preset_config("qwen2.5-7b");
  small.gpus_per_node = 8;
  small.host_memory = bytes{};
  const plan_result q = plan(small);
  REQUIRE(q.configs.size() > 2);
  CHECK(q.configs.front().training == plan_training::full);
  CHECK(q.configs.back().training != plan_training::full);
  for (std::size_t i = 1; i < q.configs.size(); ++i) CHECK(q.configs[i - 1].training <= q.configs[i].training);
}

TEST_CASE("plan keeps OLMo-2 at tp 1, where its whole-projection q/k norms are modelled", "[plan]") {
  // activations.hpp refuses tp > 1 for q_norm / k_norm over the whole projection; plan must not offer it (nor fail on it).
  const plan_result p = plan(request("olmo-2-13b", 1));
  REQUIRE(p.fitting > 0);
  for (const plan_config& c : p.configs) CHECK(c.tp == 1);
  // A Llama model of the same shape is offered tensor parallelism.
  plan_request llama = request("olmo-2-13b", 1);
  llama.model.qk_norm = llama.model.qk_norm_whole = llama.model.norm_weight_fp32 = llama.model.post_norms = false;
  bool some_tp = false;
  for (const plan_config& c : plan(llama).configs) some_tp = some_tp || c.tp > 1;
  CHECK(some_tp);
}

// plan walks the model's modules once a sweep, and DeepSpeed ZeRO-3's trace once for each tp and pp (step_walk reads
// nothing else a sweep varies); each configuration it returns must hold what evaluating it alone, which walks at
// every call, gives. A card too large to fill keeps every configuration that differs from its cheaper recompute.
TEST_CASE("plan: the walks a sweep keeps give each configuration's own step", "[plan]") {
  for (const char* model : {"llama-3-70b", "mixtral-8x7b", "qwen2.5-7b", "gemma-2-9b"}) {
    for (const bool critic : {false, true}) {
      plan_request r = request(model, 4);
      r.gpu_capacity = bytes_of(std::int64_t{1} << 60);
      r.min_headroom_fraction = 0.0;
      r.nvme_capacity = bytes_of(3'840'000'000'000LL);
      r.allow_lora = !critic && r.model.moe.experts == 0;  // all-linear LoRA of 3D experts is refused
      r.global_batch = critic ? 256 : 0;
      r.step.value_head = critic;
      r.max_results = 1'000'000;
      const plan_result p = plan(r);
      INFO(model << (critic ? ", value head, global batch 256" : ", LoRA and QLoRA where modelled"));
      REQUIRE(p.fitting == static_cast<std::int64_t>(p.configs.size()));
      CHECK(p.fitting > 400);
      bool zero3_pipelines = false;
      for (const plan_config& c : p.configs) {
        const plan_config alone = evaluate(r, c);
        zero3_pipelines = zero3_pipelines || (c.stage == 3 && c.pp > 1);
        REQUIRE(alone.gpu == c.gpu);
        REQUIRE(alone.offloaded_per_node == c.offloaded_per_node);
        REQUIRE(alone.nvme_per_node == c.nvme_per_node);
      }
      CHECK(zero3_pipelines);
    }
  }
}
