// KV cache and vLLM engine sizing against docs/references.md §4 and derivations written out here.
#include <cstdio>
#include <string>

#include "catch.hpp"
#include "helpers.hpp"
#include "zeromem/kv_cache.hpp"
#include "zeromem/vllm.hpp"

using namespace zeromem;
using namespace zeromem::literals;

namespace {
transformer_config qwen25_32b() {  // Qwen2.5-32B model card: 64 layers, 40 query heads, 8 KV heads, head dim 128
  transformer_config m{};
  m.hidden = 5120; m.layers = 64; m.heads = 40; m.kv_heads = 8; m.ffn = 27648; m.vocab = 152064; m.qkv_bias = true;
  return m;
}
using test::gib_2dp;
}  // namespace

TEST_CASE("KV bytes per token", "[kv][published]") {
  // Llama-2-7B fp16: 2 x 32 layers x 32 heads x 128 x 2 B = 524,288 B (0.5 MiB); 4096 tokens = 2 GiB.
  const transformer_config& llama = find_preset("llama-2-7b").config;
  kv_cache_config c{};
  c.kv_dtype = dtype::fp16;
  CHECK(kv_bytes_per_token(llama, c).count() == 524'288);
  CHECK(kv_cache_bytes(llama, c, 1, 4096) == 2_GiB);
  // fp8 halves it.
  c.kv_dtype = dtype::fp8_e4m3;
  CHECK(kv_bytes_per_token(llama, c).count() == 262'144);
  // Qwen2.5-32B over 2 GPUs: 4 KV heads each: 2 x 64 x 4 x 128 x 2 B = 131,072 B; a 16-token block 2 MiB.
  kv_cache_config tp2{};
  tp2.tp = 2;
  CHECK(kv_bytes_per_token(qwen25_32b(), tp2).count() == 131'072);
  CHECK(kv_bytes_per_block(qwen25_32b(), tp2) == 2_MiB);
  // More ranks than KV heads: each rank keeps one replicated head (Qwen2.5-1.5B has 2 KV heads; tp 4).
  kv_cache_config tp4{};
  tp4.tp = 4;
  CHECK(kv_heads_per_rank(find_preset("qwen2.5-1.5b").config, 4) == 1);
  CHECK(kv_bytes_per_token(find_preset("qwen2.5-1.5b").config, tp4).count() == 2 * 28 * 1 * 128 * 2);
}

TEST_CASE("paged blocks round each sequence up", "[kv]") {
  kv_cache_config c{};
  c.block_size = 256;
  CHECK(kv_blocks_for(0, c) == 0);
  CHECK(kv_blocks_for(1, c) == 1);
  CHECK(kv_blocks_for(256, c) == 1);
  CHECK(kv_blocks_for(257, c) == 2);
  CHECK_THROWS_WITH(kv_blocks_for(-1, c), Catch::Matchers::Contains("token count cannot be negative"));
  c.block_size = 0;
  CHECK_THROWS_WITH(kv_blocks_for(1, c), Catch::Matchers::Contains("KV block size"));
}

TEST_CASE("vLLM per-instance budget: the published profiling log", "[vllm][published]") {
  // vLLM issue #15815 (L40S, 44.42 GiB, util 0.90, Qwen2.5-32B TP2): budget 39.98 GiB, weights 30.71,
  // non-torch 0.30, activations 1.26 -> KV 7.71 GiB -> 3947 blocks. From the printed (two-decimal) inputs:
  // 0.9 x 44.42 = 39.978 GiB; KV = 39.978 - 32.27 = 7.708 GiB = 3946.5 blocks of 2 MiB -> 3946. The log's 3947
  // came from unrounded inputs; each printed input carries +-0.005 GiB, +-2.56 blocks.
  vllm_engine_config c{};
  c.total = 44.42_GiB;
  c.gpu_memory_utilization = 0.90;
  c.weights = 30.71_GiB;
  c.non_torch = 0.30_GiB;
  c.activation_peak = 1.26_GiB;
  kv_cache_config tp2{};
  tp2.tp = 2;
  c.kv_block = kv_bytes_per_block(qwen25_32b(), tp2);
  const vllm_engine_memory e = vllm_engine(c);
  CHECK(gib_2dp(e.budget) == "39.98");
  CHECK(gib_2dp(e.kv_cache) == "7.71");
  CHECK(e.kv_blocks == 3946);
}

TEST_CASE("the three meanings of gpu_memory_utilization", "[vllm]") {
  // 80 GiB GPU, 20 GiB held by another process, weights 10, activations 2, non-torch 1, blocks of 1 MiB, util 0.5.
  vllm_engine_config c{};
  c.total = 80_GiB;
  c.gpu_memory_utilization = 0.5;
  c.other_processes = 20_GiB;
  c.weights = 10_GiB;
  c.activation_peak = 2_GiB;
  c.non_torch = 1_GiB;
  c.kv_block = 1_MiB;
  // per instance: 40 - 13 = 27 GiB, whatever else is on the GPU.
  c.semantics = vllm_semantics::per_instance;
  CHECK(vllm_engine(c).kv_cache == 27_GiB);
  // global cap: 40 - 13 - 20 = 7 GiB.
  c.semantics = vllm_semantics::global_cap;
  CHECK(vllm_engine(c).kv_cache == 7_GiB);
  // verl: (80 - 20 - 13) x 0.5 = 23.5 GiB.
  c.semantics = vllm_semantics::verl_free_fraction;
  CHECK(vllm_engine(c).kv_cache == 23_GiB + 512_MiB);
  // CUDA graphs sit outside the budget but on the GPU.
  c.semantics = vllm_semantics::per_instance;
  c.cuda_graphs = 2464_MiB;  // Yi-34B TP4, vLLM issue #7553
  CHECK(vllm_engine(c).gpu_held == 10_GiB + 2_GiB + 1_GiB + 2464_MiB + 27_GiB);
}

TEST_CASE("vLLM refusals and bad input", "[vllm][errors]") {
  vllm_engine_config c{};
  c.total = 80_GiB;
  c.kv_block = 1_MiB;
  c.weights = 75_GiB;
  c.gpu_memory_utilization = 0.9;  // 72 GiB budget < 75 GiB of weights
  CHECK_THROWS_WITH(vllm_engine(c), Catch::Matchers::Contains("no memory is left for the KV cache"));
  c.weights = 10_GiB;
  c.other_processes = 20_GiB;      // 60 GiB free < 72 GiB budget
  c.refuse_if_free_below_budget = true;
  CHECK_THROWS_WITH(vllm_engine(c), Catch::Matchers::Contains("vLLM V1 refuses to start"));
  c.gpu_memory_utilization = 0.0;
  CHECK_THROWS_WITH(vllm_engine(c), Catch::Matchers::Contains("gpu_memory_utilization must be in (0, 1]"));
  c.gpu_memory_utilization = 1.5;
  CHECK_THROWS_WITH(vllm_engine(c), Catch::Matchers::Contains("gpu_memory_utilization must be in (0, 1]"));
  CHECK_THROWS_WITH(vllm_sleep_host_bytes(3, 1_GiB), Catch::Matchers::Contains("sleep level must be 1 or 2"));
  CHECK(vllm_sleep_host_bytes(1, 15_GiB) == 15_GiB);  // level 1 keeps the weights in host RAM
  CHECK(vllm_sleep_host_bytes(2, 15_GiB) == 0_B);
  CHECK(vllm_swap_space_bytes() == 4_GiB);           // V0 default swap_space
}

TEST_CASE("concurrent sequences a KV cache holds", "[vllm]") {
  // 3946 blocks of 16 tokens; sequences of 1000 tokens take 63 blocks each -> 62 sequences.
  CHECK(vllm_concurrent_sequences(3946, 16, 1000) == 62);
  CHECK(vllm_concurrent_sequences(3946, 16, 16) == 3946);
  CHECK_THROWS_WITH(vllm_concurrent_sequences(10, 16, 0), Catch::Matchers::Contains("tokens per sequence"));
}
