// Activation memory against Korthikanti et al. 2022 Table 2, Megatron-LM's theoretical_memory_usage.py,
// and derivations written out here. The PyTorch oracle (tests/oracle) checks the implementation profiles.
#include <limits>

#include "catch.hpp"
#include "zeromem/training/activations.hpp"

using namespace zeromem;

namespace {
const transformer_config& gpt3() { return find_preset("gpt3-175b").config; }
activation_config gpt3_paper() {
  activation_config c{};
  c.seq_len = 2048;
  c.micro_batch = 1;
  c.tp = 8;
  c.dropout = 0.1;  // the paper's block has dropout
  c.impl = implementation::paper;
  c.attention = attention_kind::eager;  // the paper's block materialises the s^2 scores
  return c;
}
std::int64_t per_layer(const transformer_config& m, const activation_config& c) {
  return layer_activation_bytes(m, c).total().count();
}
}  // namespace

TEST_CASE("Korthikanti Table 2 for GPT-3 175B, bytes per layer", "[activations][published]") {
  activation_config c = gpt3_paper();
  CHECK(per_layer(gpt3(), c) == 578'813'952);  // tensor parallel: sbh(10 + 24/t + 5as/(ht))
  c.sequence_parallel = true;
  CHECK(per_layer(gpt3(), c) == 358'612'992);  // + sequence parallel: sbh(34 + 5as/h)/t
  c.recomputation = recompute::selective;
  CHECK(per_layer(gpt3(), c) == 106'954'752);  // + selective recompute: 34sbh/t
  c.sequence_parallel = false;
  CHECK(per_layer(gpt3(), c) == 327'155'712);  // tensor parallel + selective: sbh(10 + 24/t)
  c.recomputation = recompute::full;
  CHECK(per_layer(gpt3(), c) == 50'331'648);   // full recompute: 2sbh
}

TEST_CASE("no parallelism: sbh(34 + 5as/h)", "[activations]") {
  // s = 1024, b = 2, h = 2048, a = 16, GELU with f = 4h: sbh = 4,194,304; 5as/h = 40 -> 74 sbh.
  transformer_config m{};
  m.hidden = 2048; m.layers = 4; m.heads = 16; m.kv_heads = 16; m.ffn = 8192; m.vocab = 1000;
  m.mlp = mlp_kind::gelu; m.norm = norm_kind::layernorm;
  activation_config c{};
  c.seq_len = 1024; c.micro_batch = 2; c.dropout = 0.1; c.impl = implementation::paper; c.attention = attention_kind::eager;
  CHECK(per_layer(m, c) == 74LL * 4'194'304);
  c.dropout = 0.0;  // no masks (2 x 1 sbh) and P @ V keeps the softmax output itself: 32 sbh + 2as^2b
  CHECK(per_layer(m, c) == 32LL * 4'194'304 + 2LL * 16 * 1024 * 1024 * 2);
}

TEST_CASE("Megatron-LM's first pipeline stage for GPT-3 tp8 pp8", "[activations][published]") {
  // theoretical_memory_usage.py prints activation 9816.02 MiB = 10,292,838,400 B for tp 8, pp 8, b 1 with
  // sequence parallelism and selective recompute: 96 x 34sbh/t + 8sbp/t (token ids) + sbhp/t (embedding dropout).
  // zeromem keeps the int64 token ids on every tensor-parallel rank (the vocabulary-parallel embedding needs
  // them all), so it counts 8sbp, not 8sbp/t: 8 x 2048 x 8 = 131,072 instead of 16,384.
  activation_config c = gpt3_paper();
  c.sequence_parallel = true;
  c.recomputation = recompute::selective;
  const stage_activations st = first_stage_activations(gpt3(), c, pipeline_config{8, 1, 0});
  CHECK(st.layers_on_stage == 12);
  CHECK(st.microbatches_in_flight == 8);
  CHECK(st.total.count() == 10'292'838'400LL - 16'384 + 131'072);
  CHECK(to_mib(st.total - st.input_ids + bytes_of(16'384)) == Approx(9816.02).margin(0.005));
}

TEST_CASE("pipeline schedule factors", "[activations]") {
  activation_config c = gpt3_paper();
  c.sequence_parallel = true;
  c.recomputation = recompute::selective;
  const std::int64_t layer = 106'954'752;
  // Interleaved, p = 4, m = 2: 24 layers x 4 in flight x (1 + 3/8) = 132 layers' worth.
  const stage_activations inter = first_stage_activations(gpt3(), c, pipeline_config{4, 2, 0});
  CHECK(inter.layers.count() == layer * 132);
  // Fewer micro-batches than stages: only those are in flight (Megatron: min(1, m/p)).
  const stage_activations few = first_stage_activations(gpt3(), c, pipeline_config{8, 1, 3});
  CHECK(few.layers.count() == layer * 12 * 3);
  // p = 1 adds the output layer: final norm input and output-layer input 2sbh each, split by SP, and fp32
  // logits 4sbv/t with v = 50257 -> ceil(50257/8) = 6283 columns per rank.
  const stage_activations one = first_stage_activations(gpt3(), c, pipeline_config{1, 1, 0});
  CHECK(one.output_layer.count() == 4LL * 2048 * 12288 / 8);
  CHECK(one.logits.count() == 4LL * 2048 * 6283);
}

TEST_CASE("flash attention keeps no s^2 terms, only an fp32 log-sum-exp", "[activations]") {
  activation_config c = gpt3_paper();
  c.dropout = 0.0;
  c.attention = attention_kind::flash;
  const layer_activations l = layer_activation_bytes(gpt3(), c);
  CHECK(l.attention_scores.count() == 0);
  CHECK(l.attention_dropout.count() == 0);
  CHECK(l.attention_lse.count() == 4LL * (96 / 8) * 2048);  // 4 B x a/t x s x b
  // Context parallel 4 splits the sequence: every per-token term shrinks 4x (2048 / 4 = 512 tokens).
  activation_config cp = c;
  cp.cp = 4;
  CHECK(per_layer(gpt3(), cp) * 4 == per_layer(gpt3(), c));
}

TEST_CASE("GQA keeps K and V at the kv heads' size", "[activations]") {
  // Llama-3-70B, s = 4096, b = 1, flash, fused profile, no parallelism: K and V are 8 x 128 wide = 1024.
  activation_config c{};
  c.seq_len = 4096; c.attention = attention_kind::flash; c.impl = implementation::fused;
  const layer_activations l = layer_activation_bytes(find_preset("llama-3-70b").config, c);
  CHECK(l.query.count() == 2LL * 4096 * 8192);
  CHECK(l.key.count() == 2LL * 4096 * 1024);
  CHECK(l.value.count() == 2LL * 4096 * 1024);
  // Fused SwiGLU keeps [gate | up] and the product: 3 x 2 B x 4096 x 28672.
  CHECK(l.mlp_hidden.count() == 3LL * 2 * 4096 * 28672);
  // Fused RMSNorm: input 2sbh + fp32 rstd 4sb.
  CHECK(l.attention_norm.count() == 2LL * 4096 * 8192 + 4LL * 4096);
}

TEST_CASE("Hugging Face eager profile", "[activations]") {
  // Qwen2.5-7B, s = 1024, b = 1: RMSNorm keeps x in fp32 (4sbh), the cast normalised x (2sbh) and rstd (4sb);
  // PyTorch 1.x also keeps x^2 (4sbh). Softmax in fp32 (4 B) plus its bf16 copy (2 B) per score; K and V
  // repeated to 28 heads.
  activation_config c{};
  c.seq_len = 1024; c.impl = implementation::hf; c.attention = attention_kind::eager;
  const transformer_config& m = find_preset("qwen2.5-7b").config;
  const std::int64_t sbh = 1024LL * 3584;
  layer_activations l = layer_activation_bytes(m, c);
  CHECK(l.attention_norm.count() == 4 * sbh + 2 * sbh + 4 * 1024);
  CHECK(l.attention_scores.count() == 6LL * 28 * 1024 * 1024);
  CHECK(l.key.count() == 2 * sbh);
  c.torch_major = 1;
  l = layer_activation_bytes(m, c);
  CHECK(l.attention_norm.count() == 8 * sbh + 2 * sbh + 4 * 1024);
}

TEST_CASE("CPU kernels keep masks and LayerNorm statistics in the activation dtype", "[activations]") {
  transformer_config m{};
  m.hidden = 64; m.layers = 1; m.heads = 4; m.kv_heads = 4; m.ffn = 256; m.vocab = 10;
  m.mlp = mlp_kind::gelu; m.norm = norm_kind::layernorm;
  activation_config c{};
  c.seq_len = 8; c.dropout = 0.1; c.impl = implementation::eager; c.attention = attention_kind::eager; c.activation_dtype = dtype::fp32;
  c.device = device_kind::cpu;
  const layer_activations cpu = layer_activation_bytes(m, c);
  CHECK(cpu.attention_residual_mask.count() == 4 * 8 * 64);       // fp32 noise, not a 1-byte mask
  CHECK(cpu.attention_norm.count() == 4 * 8 * 64 + 2 * 4 * 8);    // input + mean and rstd in fp32
  c.device = device_kind::cuda;
  CHECK(layer_activation_bytes(m, c).attention_residual_mask.count() == 8 * 64);
}

TEST_CASE("invalid activation settings throw with the fix", "[activations][errors]") {
  activation_config c = gpt3_paper();
  c.tp = 5;
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("heads must divide evenly"));
  c = gpt3_paper();
  c.cp = 2;
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("context parallelism needs flash attention"));
  c = gpt3_paper();
  c.dropout = 1.0;
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("dropout probability must be in [0, 1)"));
  c.dropout = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("dropout probability"));
  c = gpt3_paper();
  c.seq_len = 0;
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("sequence length, got 0"));
  c = gpt3_paper();
  c.activation_dtype = dtype::int4;
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("activations cannot be int4"));
  c = gpt3_paper();
  CHECK_THROWS_WITH(first_stage_activations(gpt3(), c, pipeline_config{200, 1, 0}), Catch::Matchers::Contains("more stages than layers"));
}
