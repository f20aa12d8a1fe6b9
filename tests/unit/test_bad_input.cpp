// Every bad input gets one clear error: each case is a reproducer of a crash, hang, undefined behaviour or
// silent clamp found by a hostile run, named after what it guards.
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cli_runner.hpp"
#include "zeromem/model/hf_config.hpp"
#include "zeromem/zeromem.hpp"

namespace {
using result = zeromem::test::cli_result;
using zeromem::test::run_cli;
using zeromem::test::run;
// Rejected cleanly: exit 2, one short line on stderr starting "zeromem: " and containing `names`, no stdout.
void rejected(const std::vector<std::string>& args, const std::string& names) {
  const result r = run(args);
  std::string joined;
  for (const auto& a : args) joined += (a.size() > 60 ? a.substr(0, 60) + "..." : a) + " ";
  INFO("zeromem " << joined << "-> " << r.err);
  CHECK(r.code == 2);
  CHECK(r.out.empty());
  CHECK(r.err.rfind("zeromem: ", 0) == 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK(r.err.size() <= 500);
  CHECK(r.err.find(names) != std::string::npos);
}
const std::string i64_max = "9223372036854775807";
}  // namespace

TEST_CASE("integers past int64 are rejected with the value typed, never clamped", "[bad-input]") {
  rejected({"estimate", "--params", "7B", "--dp", "9223372036854775808"}, "'9223372036854775808'");
  rejected({"estimate", "--params", "7B", "--dp", "-9223372036854775809"}, "'-9223372036854775809'");
  rejected({"estimate", "--params", "7B", "--dp", "99999999999999999999999999"}, "--dp");
  rejected({"plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--top", "-1"}, "--top");
  rejected({"plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--top", "0"}, "from 1 to");
}

TEST_CASE("not-given sentinels cannot be typed: stage -5, seq-len 0, empty strings", "[bad-input]") {
  rejected({"estimate", "--params", "7B", "--zero-stage", "-5"}, "from 0 to 3");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "0"}, "--seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", ""}, "--seq-len");
  for (const char* flag : {"--dp", "--gpus-per-node", "--shard-group", "--hpz", "--grad-accum-steps", "--micro-batch", "--tp", "--cp",
                           "--pp", "--virtual-stages", "--microbatches", "--hidden", "--layers", "--heads", "--torch-version"})
    rejected({"estimate", "--params", "7B", flag, ""}, flag);
  for (const char* flag : {"--model", "--hf-config", "--precision", "--optimizer", "--fsdp", "--gpu", "--svg", "--params"})
    rejected({"estimate", flag, ""}, "cannot be empty");
  rejected({"kv", "--model", "llama-2-7b", "--tokens", "10", "--sequences", "0"}, "--sequences");
}

TEST_CASE("token counts read K as 1024: a 32K context is 32,768 tokens", "[bad-input]") {
  CHECK(zeromem::parse_tokens("32K") == 32'768);
  CHECK(zeromem::parse_tokens("128k") == 131'072);
  CHECK(zeromem::parse_tokens("1.5K") == 1'536);
  CHECK(zeromem::parse_tokens("1M") == 1'048'576);
  CHECK(zeromem::parse_tokens("4096") == 4'096);
  CHECK_THROWS_WITH(zeromem::parse_tokens("1.3K"), Catch::Contains("not a whole number"));
  CHECK_THROWS_WITH(zeromem::parse_tokens("32KB"), Catch::Contains("32K (32,768)"));
  const result r = run({"kv", "--model", "llama-2-7b", "--tokens", "32K"});
  REQUIRE(r.code == 0);
  CHECK(r.out.find("1 x 32,768 tokens") != std::string::npos);
}

TEST_CASE("parse_integer accepts exactly [lo, hi], INT64_MIN and INT64_MAX included", "[bad-input]") {
  CHECK(zeromem::parse_integer(i64_max, "x", 0, std::numeric_limits<std::int64_t>::max()) == std::numeric_limits<std::int64_t>::max());
  CHECK(zeromem::parse_integer("-9223372036854775808", "x", std::numeric_limits<std::int64_t>::min(), 0) ==
        std::numeric_limits<std::int64_t>::min());
  CHECK(zeromem::parse_integer("+7", "x", 1, 8) == 7);
  for (const char* bad : {"", " ", "-", "1e3", "3.0", "0x10", "9223372036854775808", "7 7", "9"})
    CHECK_THROWS_WITH(zeromem::parse_integer(bad, "x", 1, 8), Catch::Contains("x must be an integer from 1 to 8"));
  // A large power-of-two bound says which power it is; a small one or another number does not.
  CHECK_THROWS_WITH(zeromem::parse_integer("-1", "x", 0, std::int64_t{1} << 40), "zeromem: x must be an integer from 0 to 1099511627776 (2^40), got '-1'");
  CHECK_THROWS_WITH(zeromem::parse_integer("-1", "x", 0, 1'000'000), "zeromem: x must be an integer from 0 to 1000000, got '-1'");
  CHECK_THROWS_WITH(zeromem::parse_integer("-1", "x", 0, 1024), "zeromem: x must be an integer from 0 to 1024, got '-1'");
}

TEST_CASE("parse_size accepts every byte count up to INT64_MAX B", "[bad-input]") {
  CHECK(zeromem::parse_size(i64_max + "B") == std::numeric_limits<std::int64_t>::max());
  CHECK(zeromem::parse_size("9223372036854775800 B") == 9'223'372'036'854'775'800LL);
  CHECK_THROWS_AS(zeromem::parse_size("9223372036854775808B"), std::overflow_error);
}

TEST_CASE("a shape flag next to --model or --hf-config is an error, not ignored", "[bad-input]") {
  rejected({"estimate", "--model", "llama-2-7b", "--layers", "3", "--heads", "7"}, "--model excludes");
  rejected({"estimate", "--hf-config", ZEROMEM_FIXTURES_DIR "/hf/gpt2.json", "--vocab", "3"}, "--hf-config excludes");
  rejected({"kv", "--model", "llama-2-7b", "--layers", "3", "--tokens", "10"}, "--model excludes");
}

TEST_CASE("tensor parallelism must divide the heads whether or not activations are asked for", "[bad-input]") {
  rejected({"estimate", "--model", "llama-2-7b", "--tp", "64"}, "attention heads");
  rejected({"estimate", "--model", "llama-2-7b", "--tp", "1099511627776"}, "attention heads");
  rejected({"kv", "--heads", "32", "--tp", "3", "--layers", "2", "--hidden", "4096", "--tokens", "10"}, "attention heads");
  rejected({"kv", "--heads", "32", "--kv-heads", "5", "--layers", "2", "--hidden", "4096", "--tokens", "10"}, "key/value heads");
  // Library: the same rule in parameters_per_rank and kv_heads_per_rank (vLLM's QKVParallelLinear divide()).
  CHECK_THROWS_WITH(zeromem::parameters_per_rank(zeromem::preset_config("llama-2-7b"), 3, 1), Catch::Contains("attention heads"));
  CHECK_THROWS_WITH(zeromem::kv_heads_per_rank(zeromem::attention_shape{32, 8, 128}, 3), Catch::Contains("key/value heads"));
  CHECK(zeromem::kv_heads_per_rank(zeromem::attention_shape{32, 8, 128}, 16) == 1);  // tp a multiple of KV heads: replicated
}

TEST_CASE("more ranks sharing sharded states than parameters is an error", "[bad-input]") {
  rejected({"estimate", "--params", "7B", "--dp", "100000000000", "--zero-stage", "3"}, "more ranks than there are parameters");
  // Replicated (stage 0) is still fine: every rank holds the whole model.
  CHECK(run({"estimate", "--params", "7", "--dp", "8"}).code == 0);
}

TEST_CASE("optimizer offload at ZeRO stage 0 is rejected: DeepSpeed never reads it there", "[bad-input]") {
  rejected({"estimate", "--params", "7B", "--offload-optimizer", "cpu"}, "stage 1, 2 or 3");
  zeromem::zero_config z{};
  z.optimizer.device = zeromem::offload_device::cpu;
  CHECK_THROWS_WITH(zeromem::validate(z), Catch::Contains("stage 1, 2 or 3"));
  z.optimizer.device = static_cast<zeromem::offload_device>(7);
  z.stage = 1;
  CHECK_THROWS_WITH(zeromem::validate(z), Catch::Contains("none, cpu or nvme"));
}

TEST_CASE("ZeRO-3 over one rank says why it needs more than ZeRO-2", "[bad-input]") {
  const result r2 = run({"estimate", "--model", "llama-2-7b", "--dp", "1", "--zero-stage", "2", "--json"});
  const result r3 = run({"estimate", "--model", "llama-2-7b", "--dp", "1", "--zero-stage", "3"});
  REQUIRE(r2.code == 0);
  REQUIRE(r3.code == 0);
  CHECK(r3.out.find("ZeRO-3 over 1 rank shards nothing but still gathers the largest layer") != std::string::npos);
}

TEST_CASE("flags that need others are errors, not ignored", "[bad-input]") {
  rejected({"estimate", "--params", "7B", "--pin-memory"}, "--pin-memory");
  rejected({"estimate", "--model", "llama-2-7b", "--micro-batch", "4"}, "need --seq-len");
  // The activations' device, dtype, PyTorch version and KV cache, and the allocator's mode and reserve, shape only the
  // step's peak: without --seq-len they were once read by nothing, whatever their value (--device abc ran).
  rejected({"estimate", "--model", "llama-2-7b", "--device", "cpu"}, "need --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--device", "abc"}, "need --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--activation-dtype", "fp32"}, "need --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--torch-version", "1"}, "need --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--no-cache"}, "need --seq-len");
  rejected({"estimate", "--params", "7B", "--device", "cpu"}, "activation memory needs a model");
  rejected({"estimate", "--model", "llama-2-7b", "--allocator", "expandable"}, "add a model and --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--reserve-fraction", "0.2"}, "add a model and --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--virtual-stages", "2"}, "raise pp above 1");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--microbatches", "4"}, "pass --grad-accum-steps");
  CHECK(run({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--pp", "2", "--virtual-stages", "2", "--microbatches", "4"}).code == 0);
  rejected({"deepspeed", "zero3", "--params", "2B", "--largest-layer-params", "100M", "--pre-2024"}, "drop it or use zero2");
  // Their defaults given explicitly are not a change, and with --seq-len each is read.
  CHECK(run({"estimate", "--model", "llama-2-7b", "--device", "cuda", "--allocator", "default", "--torch-version", "2"}).code == 0);
  CHECK(run({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--device", "cpu", "--no-cache", "--allocator", "expandable"}).code == 0);
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--device", "abc"}, "unknown device 'abc'");
  rejected({"estimate", "--params", "7B", "--dropout", "nan"}, "--dropout");
  rejected({"estimate", "--params", "7B", "--reserve-fraction", "inf"}, "--reserve-fraction");
  rejected({"deepspeed", "zero2", "--params", "1B", "--additional-buffer-factor", "-1"}, "--additional-buffer-factor");
  rejected({"estimate", "--params", "7B", "--blas-workspaces", "64MiB"}, "add a model and --seq-len");
  rejected({"estimate", "--params", "7B", "--cuda-context", "1GB"}, "add a model and --seq-len");
  rejected({"estimate", "--params", "7B", "--cuda-modules", "146MiB"}, "add a model and --seq-len");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "1024", "--cuda-modules", "-1B"}, "the CUDA modules (--cuda-modules) cannot be negative");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--blas-workspaces", "64"}, "--blas-workspaces");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--blas-workspaces", "-1MiB"}, "--blas-workspaces");
}

// A sweep of the release CLI (every flag of estimate, plan, vllm, sglang, kv, deepspeed and job given a non-default value,
// the output compared with the run without it) found these printing the same bytes, read by nothing in that context.
TEST_CASE("flags that changed nothing where they were given are refused", "[bad-input]") {
  const std::vector<std::string> llama = {"estimate", "--model", "llama-2-7b"};
  const auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  // The adapters' dtype without adapters; with them it is read (the adapters' inputs are cast where it differs from the
  // compute dtype: activations.hpp).
  rejected(with(llama, {"--lora-dtype", "bf16"}), "add --lora-rank and --lora-targets");
  const std::vector<std::string> lora = with(llama, {"--lora-rank", "16", "--lora-targets", "q_proj,v_proj", "--seq-len", "512", "--json"});
  const result fp32 = run(lora), bf16 = run(with(lora, {"--lora-dtype", "bf16"}));
  REQUIRE(fp32.code == 0);
  REQUIRE(bf16.code == 0);
  CHECK(fp32.out != bf16.out);
  // LoRA freezes the whole base: freezing part of it again changed nothing.
  rejected(with(lora, {"--freeze", "embeddings"}), "LoRA freezes the whole base model");
  rejected({"estimate", "--model", "qwen2.5-vl-7b", "--lora-rank", "16", "--lora-targets", "q_proj,v_proj", "--freeze", "vision"},
           "--freeze vision: LoRA freezes the whole base model");
  CHECK(run(with(lora, {"--freeze", "all-but-adapters"})).code == 0);
  // The largest layer is read where ZeRO-3 gathers it or ZeRO-1/2's CPU offload stages it (needs_largest_layer).
  rejected(with(llama, {"--largest-layer-params", "100M"}), "drop it or pass --zero-stage 3");
  rejected(with(llama, {"--largest-layer-params", "100M", "--zero-stage", "2", "--dp", "8"}), "drop it or pass --zero-stage 3");
  CHECK(run(with(llama, {"--largest-layer-params", "100M", "--zero-stage", "3", "--dp", "8"})).code == 0);
  CHECK(run(with(llama, {"--largest-layer-params", "100M", "--zero-stage", "2", "--offload-optimizer", "cpu", "--dp", "8"})).code == 0);
  CHECK(run(with(llama, {"--largest-layer-params", "100M", "--fsdp", "FULL_SHARD", "--dp", "8"})).code == 0);
  // torch 1's RMSNorm and the forward's KV cache are transformers' code: another implementation read neither.
  const std::vector<std::string> step = with(llama, {"--seq-len", "512"});
  rejected(with(step, {"--implementation", "fused", "--torch-version", "1"}), "drop them for fused");
  rejected(with(step, {"--implementation", "eager", "--no-cache"}), "drop them for eager");
  CHECK(run(with(step, {"--implementation", "hf", "--torch-version", "1", "--no-cache"})).code == 0);
  // A forward-only pass has no optimizer, no adapters, no vision tower's pass and no training step's modules.
  const std::vector<std::string> forward = with(step, {"--forward-only"});
  rejected(with(forward, {"--amsgrad"}), "drop the optimizer's flags");
  rejected(with(forward, {"--weight-decay", "0.1"}), "drop the optimizer's flags");
  rejected(with(forward, {"--nesterov"}), "drop the optimizer's flags");
  rejected(with(forward, {"--lora-dtype", "bf16"}), "--lora-dtype");
  rejected(with(forward, {"--lora-dropout", "0.1"}), "--lora-dropout");
  rejected(with(forward, {"--image-tokens", "64"}), "drop --image-tokens");
  rejected(with(forward, {"--cuda-modules", "1GB"}), "--cuda-modules is measured for a training step");
  CHECK(run(with(forward, {"--cuda-context", "1GB"})).code == 0);
  // Ray's threshold applies to a node's host RAM: without --host-memory nothing reads it.
  const std::vector<std::string> job = {"job", ZEROMEM_EXAMPLES_DIR "/jobs/orz-1.5b-ppo.args"};
  rejected(with(job, {"--ray-threshold", "0.9"}), "add --host-memory");
  const result at_default = run(with(job, {"--host-memory", "760GB"})), at_90 = run(with(job, {"--host-memory", "760GB", "--ray-threshold", "0.9"}));
  REQUIRE(at_default.code == 0);
  REQUIRE(at_90.code == 0);
  // 0.95 x 760 GB = 722 GB (RAY_memory_usage_threshold's default), 0.9 x 760 GB = 684 GB.
  CHECK(at_default.out.find("of 722.00 GB (Ray's threshold)") != std::string::npos);
  CHECK(at_90.out.find("of 684.00 GB (Ray's threshold)") != std::string::npos);
  // The vLLM settings without vLLM engines (this launch has none; verl's SGLang rollout), and DeepSpeed's version where
  // FSDP trains.
  const std::string examples = ZEROMEM_EXAMPLES_DIR "/jobs/";
  rejected({"job", examples + "openrlhf-zero2-vs-zero3.args", "--vllm-version", "0.8.5"}, "this launch has no rollout engine");
  rejected({"job", examples + "openrlhf-zero2-vs-zero3.args", "--vllm-cuda-graphs", "1GiB"}, "this launch has no rollout engine");
  rejected({"job", examples + "verl-qwen2-7b-ppo-sglang.sh", "--vllm-version", "0.8.5"}, "this launch has SGLang engines");
  rejected({"job", examples + "verl-qwen2.5-3b-grpo-lora.sh", "--deepspeed-version", "0.16.4"}, "trains with FSDP");
  rejected({"job", examples + "easyr1-vl-7b-grpo.yaml", "--deepspeed-version", "0.16.4"}, "trains with FSDP");
  CHECK(run({"job", examples + "openrlhf-zero2-vs-zero3.args", "--deepspeed-version", "0.16.4"}).code == 0);
}

TEST_CASE("plan: --host-memory 0B, --top 0 and --svg with nothing fitting are errors", "[bad-input]") {
  rejected({"plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "128", "--host-memory", "0B"}, "--host-memory");
  rejected({"plan", "--model", "gpt3-175b", "--gpu", "l40s", "--gpus", "1", "--seq-len", "128", "--host-memory", "1GB", "--svg",
            "/tmp/zeromem-never.svg"},
           "nothing fits");
}

TEST_CASE("config.json: deep nesting, huge values and unbounded files give one short line", "[bad-input]") {
  const std::string deep = "{\"model_type\":\"llama\",\"hidden_size\":" + std::string(60'000, '[') + std::string(60'000, ']') + "}";
  CHECK_THROWS_WITH(zeromem::parse_hf_config(deep), Catch::Contains("nested deeper than 32 levels"));
  const std::string huge = "{\"model_type\":\"llama\",\"hidden_size\":\"" + std::string(30'000'000, 'x') + "\"}";
  try {
    zeromem::parse_hf_config(huge);
    FAIL("a string hidden_size was accepted");
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).size() < 300);
    CHECK(std::string(e.what()).find("30000002 characters") != std::string::npos);
  }
  rejected({"estimate", "--hf-config", "/dev/zero"}, "larger than 16 MiB");
  rejected({"estimate", "--hf-config", ZEROMEM_FIXTURES_DIR "/hf-bad/missing-field.json"}, "missing-field.json");
}

TEST_CASE("config.json arithmetic is overflow-checked: gpt2 4 x n_embd, qwen2_vl embed_dim x mlp_ratio", "[bad-input]") {
  CHECK_THROWS_AS(zeromem::parse_hf_config(R"({"model_type":"gpt2","n_embd":4611686018427387905,"n_layer":2,"n_head":1,
                                                    "vocab_size":10,"n_positions":5})"),
                  std::overflow_error);
  const std::string vl = R"({"model_type":"qwen2_vl","hidden_size":1536,"intermediate_size":8960,"num_hidden_layers":28,
    "num_attention_heads":12,"num_key_value_heads":2,"vocab_size":151936,
    "vision_config":{"depth":32,"embed_dim":EMBED,"num_heads":16,"mlp_ratio":RATIO}})";
  const auto with = [&](const std::string& embed, const std::string& ratio) {
    std::string s = vl;
    s.replace(s.find("EMBED"), 5, embed);
    s.replace(s.find("RATIO"), 5, ratio);
    return s;
  };
  CHECK_THROWS_AS(zeromem::parse_hf_config(with("4611686018427387905", "4")), std::overflow_error);
  CHECK_THROWS_WITH(zeromem::parse_hf_config(with("1280", "1e300")), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(zeromem::parse_hf_config(with("1280", "-2")), Catch::Contains("positive number"));
  // transformers Qwen2VLVisionBlock: mlp_hidden_dim = int(embed_dim * mlp_ratio) = int(1280 * 4.5) = 5760.
  CHECK(zeromem::parse_hf_config(with("1280", "4.5")).vision.mlp_hidden == 5760);
  CHECK(zeromem::parse_hf_config(with("1280", "4")).vision.mlp_hidden == 5120);
}

TEST_CASE("SVG axes stay bounded for any size", "[bad-input]") {
  using namespace zeromem;
  const std::string big = svg_stacked_bars("t", {{"a", {{"x", bytes_of(std::numeric_limits<std::int64_t>::max())}}}}, bytes{});
  CHECK(big.size() < 10'000);
  const result r = run({"estimate", "--params", "500T", "--svg", "/tmp/zeromem-500t.svg"});
  CHECK(r.code == 0);
}

TEST_CASE("library values are exceptions, not numbers, for impossible inputs", "[bad-input]") {
  using namespace zeromem;
  transformer_config vl = preset_config("qwen2.5-vl-7b");
  for (std::int64_t vision_config::*field : {&vision_config::patch, &vision_config::spatial_merge, &vision_config::in_channels,
                                             &vision_config::temporal_patch}) {
    transformer_config m = vl;
    m.vision.*field = field == &vision_config::spatial_merge ? 0 : -3;
    CHECK_THROWS_AS(count_parameters(m), std::invalid_argument);
  }
  transformer_config moe = preset_config("llama-2-7b");
  moe.moe.shared_experts = -1;
  CHECK_THROWS_WITH(count_parameters(moe), Catch::Contains("shared experts"));
  step_config s{};
  s.cuda_context = bytes_of(-1);
  CHECK_THROWS_AS(validate(s), std::invalid_argument);
  s = step_config{};
  s.blas_workspaces = bytes_of(-1);
  CHECK_THROWS_WITH(validate(s), Catch::Contains("--blas-workspaces"));
  CHECK_THROWS_WITH(cublas_workspace_bytes(0), Catch::Contains("compute capability"));
  forward_only_config f{};
  f.seq_len = 8;
  f.blas_workspaces = bytes_of(-1);
  CHECK_THROWS_WITH(estimate_forward_only(preset_config("llama-2-7b"), f, bytes{}), Catch::Contains("--blas-workspaces"));
  runtime_overheads o{};
  o.cuda_context = bytes_of(-1);
  CHECK_THROWS_AS(deepspeed_buffers(1, o), std::invalid_argument);
  CHECK_THROWS_WITH(deepspeed_buffers(7, runtime_overheads{}), Catch::Contains("ZeRO stage must be 0, 1, 2 or 3"));
  job_breakdown job{};
  CHECK_THROWS_WITH(job.add("actor", "weights", bytes_of(-5)), Catch::Contains("cannot be negative"));
  job.host_capacity = bytes_of(1'000'000);
  for (double threshold : {std::nan(""), 1e30, 0.0, -1.0}) {
    job.host_threshold = threshold;
    CHECK_THROWS_WITH(job.host_limit(), Catch::Contains("threshold must be in (0, 1]"));
  }
  job.host_capacity = bytes_of(std::numeric_limits<std::int64_t>::max());  // float rounds it up to 2^63
  job.host_threshold = 1.0;
  CHECK(job.host_limit() == job.host_capacity);
  CHECK(format_auto(bytes_of(std::numeric_limits<std::int64_t>::min())) == "-8388608.00 TiB");
}

TEST_CASE("error text never echoes unbounded input", "[bad-input]") {
  const std::string long_arg(100'000, 'x');
  rejected({"estimate", "--params", "7B", long_arg}, "characters");
  rejected({"estimate", "--params", long_arg}, "100000 characters");
  rejected({"estimate", "--model", long_arg}, "100000 characters");
  rejected({"estimate", "--params", "7B", "--precision", std::string("mixed\x01\nbf16")}, "'mixed??bf16'");
}

TEST_CASE("a rejected number is echoed as given: integers exactly, fractions without trailing zeros", "[bad-input]") {
  using zeromem::transformer_config;
  using Catch::Matchers::Contains;
  transformer_config m = zeromem::find_preset("llama-2-7b").config;
  m.vocab = std::numeric_limits<std::int64_t>::min();  // every digit of an int64, no rounding through a float
  CHECK_THROWS_WITH(zeromem::count_parameters(m), Contains("got -9223372036854775808;"));
  zeromem::activation_config a{};
  a.seq_len = 1024;
  a.dropout = 1.5;
  CHECK_THROWS_WITH(zeromem::validate(a, zeromem::find_preset("llama-2-7b").config), Contains("got 1.5;"));
  a.dropout = 2.0;
  CHECK_THROWS_WITH(zeromem::validate(a, zeromem::find_preset("llama-2-7b").config), Contains("got 2;"));
}

TEST_CASE("an unknown option is named first, with the option it most likely meant", "[bad-input][cli]") {
  // A prefix of exactly one option (--seq: --seq-len; --zero: --zero-stage).
  rejected({"estimate", "--model", "llama-2-7b", "--seq", "4096"}, "unknown option --seq; did you mean --seq-len?");
  rejected({"estimate", "--model", "llama-2-7b", "--zero", "3"}, "unknown option --zero; did you mean --zero-stage?");
  // One option begins it at a dash (--recompute-full: --recompute).
  rejected({"estimate", "--model", "llama-2-7b", "--recompute-full"}, "did you mean --recompute?");
  // Spelling: one edit (--micro-bach), two (--optimiser), a swap of neighbours as one (--modle), an underscore.
  rejected({"estimate", "--model", "llama-2-7b", "--micro-bach", "2"}, "did you mean --micro-batch?");
  rejected({"estimate", "--model", "llama-2-7b", "--optimiser", "adam"}, "did you mean --optimizer?");
  rejected({"estimate", "--hf_config", "config.json"}, "did you mean --hf-config?");
  // Before the required option it leaves missing: plan needs --model and --seq-len, and the user typed one wrong.
  rejected({"plan", "--modle", "llama-2-7b"}, "unknown option --modle; did you mean --model?");
  // Nothing close: the option alone, no guess (--lr is two edits from many two-letter options).
  const result far = run({"estimate", "--model", "llama-2-7b", "--lr", "3"});
  CHECK(far.code == 2);
  CHECK(far.err == "zeromem: unknown option --lr (see zeromem estimate --help)\n");
  // A one-value flag given twice names the flag and the fix, not CLI11's "At Most 1 required but received 2".
  const result twice = run({"estimate", "--model", "llama-2-7b", "--seq-len", "1024", "--dp", "4", "--dp", "8"});
  CHECK(twice.code == 2);
  CHECK(twice.err == "zeromem: --dp is given 2 times; pass it once (see zeromem estimate --help)\n");
  rejected({"plan", "--model", "llama-2-7b", "--gpu", "h100-80gb", "--seq-len", "1", "--seq-len", "2", "--seq-len", "3"},
           "--seq-len is given 3 times; pass it once");
  // A stray value is still CLI11's message, and a negative number is a value, not an option.
  rejected({"estimate", "--model", "llama-2-7b", "extra"}, "not expected: extra");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "-5"}, "cannot be negative");
}

TEST_CASE("a catalogued name typed with other case or punctuation, or cut short, gets the name it meant", "[bad-input]") {
  rejected({"estimate", "--model", "llama2-7b", "--seq-len", "1024"}, "unknown model 'llama2-7b' (did you mean llama-2-7b?); expected one of");
  rejected({"estimate", "--model", "Qwen2.5_7B", "--seq-len", "1024"}, "(did you mean qwen2.5-7b?)");
  rejected({"estimate", "--model", "qwen2.5-7b", "--seq-len", "1024", "--gpu", "h100"}, "unknown GPU 'h100' (did you mean h100-80gb?)");
  rejected({"estimate", "--model", "qwen2.5-7b", "--seq-len", "1024", "--optimizer", "AdamW"}, "(did you mean adamw?)");
  rejected({"estimate", "--model", "qwen2.5-7b", "--seq-len", "1024", "--optimizer", "adamw8bit"}, "unknown optimizer 'adamw8bit'; expected");
  rejected({"estimate", "--model", "qwen2.5-7b", "--seq-len", "1024", "--optimizer", "muon"},
           "optimizer 'muon': torch.optim.Muon steps 2D matrices only");
  // Two names begin with it (a100-40gb, a100-80gb): no guess, the list.
  const result a100 = run({"estimate", "--model", "qwen2.5-7b", "--seq-len", "1024", "--gpu", "a100"});
  CHECK(a100.err.find("did you mean") == std::string::npos);
  CHECK(a100.err.find("a100-40gb, a100-80gb") != std::string::npos);
  CHECK_THROWS_WITH(zeromem::find_preset("LLAMA-3-8B"), Catch::Matchers::Contains("(did you mean llama-3-8b?)"));
}

TEST_CASE("DeepSpeed's buffer flags are refused where no ZeRO buffer reads them", "[bad-input]") {
  const std::vector<std::string> step = {"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--dp", "8"};
  const auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };
  // Only the step's communication_buffers term reads them, at ZeRO stages 1-3 (job.hpp deepspeed_buffers).
  rejected(with(step, {"--overlap-comm", "on"}), "add --zero-stage 1, 2 or 3, or drop them");
  rejected(with(step, {"--reduce-bucket", "1M", "--zero-stage", "0"}), "add --zero-stage 1, 2 or 3, or drop them");
  rejected(with(step, {"--reduce-bucket", "1M", "--fsdp", "FULL_SHARD"}), "add --zero-stage 1, 2 or 3, or drop them");
  rejected({"estimate", "--params", "7B", "--zero-stage", "2", "--overlap-comm", "on"}, "add a model and --seq-len");
  rejected(with(step, {"--zero-stage", "2", "--prefetch-bucket", "1M"}), "drop it or pass --zero-stage 3");
  rejected({"estimate", "--model", "llama-2-7b", "--seq-len", "512", "--forward-only", "--reduce-bucket", "1M"},
           "drop --reduce-bucket, --prefetch-bucket and --overlap-comm");
  rejected(with(step, {"--zero-stage", "2", "--overlap-comm", "yes"}), "expected on or off");
  rejected(with(step, {"--zero-stage", "2", "--reduce-bucket", "-5"}), "cannot be negative");
  // ZeRO-3 holds its bucket and the bucket's reduce-scatter copy whatever overlap_comm says.
  rejected(with(step, {"--zero-stage", "3", "--overlap-comm", "off"}), "either way: drop it");
  CHECK(run(with(step, {"--zero-stage", "3", "--prefetch-bucket", "1M", "--reduce-bucket", "1M"})).code == 0);
  CHECK(run(with(step, {"--zero-stage", "1", "--reduce-bucket", "1M", "--overlap-comm", "on"})).code == 0);
}
