// Activation memory against Korthikanti et al. 2022 Table 2, Megatron-LM's theoretical_memory_usage.py,
// and derivations written out here. The PyTorch oracle (tests/oracle) checks the implementation profiles.
#include <limits>

#include "catch.hpp"
#include "zeromem/model/hf_config.hpp"
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
// transformers' defaults: its modeling code's kernels (hf) with SDPA, b = 1, bf16.
activation_config hf_sdpa(std::int64_t seq_len) {
  activation_config c{};
  c.seq_len = seq_len; c.impl = implementation::hf; c.attention = attention_kind::flash;
  return c;
}
// The calibration's LoRA: PEFT r = 16 on q_proj and v_proj (peak_anatomy.py), adapters in PEFT's default fp32.
adaptation peft_qv_r16() {
  adaptation a{};
  a.lora.rank = 16;
  a.lora.targets = bit(lora_module::q_proj) | bit(lora_module::v_proj);
  return a;
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
  // them all), so it counts 8sbp, not 8sbp/t: 8 x 2048 x 8 = 131,072 instead of 16,384. It also counts the int64
  // position ids the learned position embedding keeps, which the formula leaves out: one row of s a micro-batch
  // (get_ltor_masks_and_position_ids: arange(s).unsqueeze(0).expand_as(data)), 8 x 2048 x 8 = 131,072.
  activation_config c = gpt3_paper();
  c.sequence_parallel = true;
  c.recomputation = recompute::selective;
  const stage_activations st = first_stage_activations(gpt3(), c, pipeline_config{8, 1, 0});
  CHECK(st.layers_on_stage == 12);
  CHECK(st.microbatches_in_flight == 8);
  CHECK(st.position_ids.count() == 131'072);
  CHECK(st.total.count() == 10'292'838'400LL - 16'384 + 131'072 + 131'072);
  CHECK(to_mib(st.total - st.input_ids - st.position_ids + bytes_of(16'384)) == Approx(9816.02).margin(0.005));
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

TEST_CASE("SDPA in fp32 runs the memory-efficient kernel: its log-sum-exp rows padded to 32", "[activations]") {
  // FlashAttention takes fp16 / bf16 only (sdp_utils.cpp: sm80_flash_dtypes), so fp32 SDPA runs the memory-efficient
  // kernel, whose logsumexp is b x heads x ceil(s / 32) * 32 fp32 (attention.cu: kAlignLSE 32). Llama-2-7B, s = 1000,
  // b = 2: 4 B x 32 heads x 1024 x 2 = 262,144 B in fp32; bf16's flash kernel keeps 4 B x 32 x 1000 x 2 = 256,000 B.
  activation_config c{};
  c.seq_len = 1000; c.micro_batch = 2; c.impl = implementation::hf; c.attention = attention_kind::flash;
  const transformer_config& m = find_preset("llama-2-7b").config;
  CHECK(layer_activation_bytes(m, c).attention_lse.count() == 256'000);
  c.activation_dtype = dtype::fp32;
  CHECK(layer_activation_bytes(m, c).attention_lse.count() == 262'144);
  c.seq_len = 1024;  // a multiple of 32 pads nothing: 4 x 32 x 1024 x 2
  CHECK(layer_activation_bytes(m, c).attention_lse.count() == 262'144);
  // flash-attn's kernels take fp16 / bf16 only: refused with the fix.
  c.attention = attention_kind::flash_attention_2;
  CHECK_THROWS_WITH(layer_activation_bytes(m, c), Catch::Contains("fp16 and bf16 only") && Catch::Contains("--attention sdpa"));
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

TEST_CASE("SDPA with transformers' sliding-window mask", "[activations]") {
  // Mistral-7B-v0.1 (sliding_window 4096: transformers skips the mask only while kv_length < 4096), s = 4096, b = 1,
  // bf16, SDPA. With the mask, K and V are repeated from 8 to 32 heads of 128 (use_gqa_in_sdpa needs no mask):
  // 2 tensors x 24 more heads x 128 x 2 B x 4096 tokens = 50,331,648 B; the additive bf16 mask SDPA builds from the
  // boolean one, 1 x 1 x 4096 x 4096 x 2 B = 33,554,432 B, kept by the memory-efficient kernel. Per layer: 83,886,080 B.
  activation_config c{};
  c.seq_len = 4096; c.impl = implementation::hf; c.attention = attention_kind::flash;
  transformer_config windowed = find_preset("mistral-7b").config, full = windowed;
  REQUIRE(windowed.sliding_window == 4096);
  full.sliding_window = 0;
  const layer_activations w = layer_activation_bytes(windowed, c), f = layer_activation_bytes(full, c);
  CHECK(w.key.count() == 2LL * 4096 * 32 * 128);
  CHECK(w.value.count() == 2LL * 4096 * 32 * 128);
  CHECK(w.attention_mask.count() == 33'554'432);
  CHECK(f.attention_mask.count() == 0);
  CHECK(w.total().count() - f.total().count() == 83'886'080);
  // One token short of the window: no mask, nothing repeated.
  c.seq_len = 4095;
  CHECK(per_layer(windowed, c) == per_layer(full, c));
  // Two sequences of 4100 tokens: the mask is 2 x 4100 x 4104 (its rows padded to a multiple of 8) x 2 B, and the
  // log-sum-exp rows are padded to 4128 (a multiple of 32): 4 B x 32 heads x 4128 x 2.
  c.seq_len = 4100; c.micro_batch = 2;
  const layer_activations odd = layer_activation_bytes(windowed, c);
  CHECK(odd.attention_mask.count() == 2LL * 2 * 4100 * 4104);
  CHECK(odd.attention_lse.count() == 4LL * 32 * 4128 * 2);
  // Gradient checkpointing keeps the layer input only; the recomputed layer keeps the mask again.
  c.recomputation = recompute::full;
  CHECK(layer_activation_bytes(windowed, c).attention_mask.count() == 0);
}

TEST_CASE("Gemma's RMSNorm keeps its normalised tensor in fp32", "[activations]") {
  // Gemma-2B (hidden 2048, 8 heads and 1 KV head of 256, intermediate 16384), s = 2048, b = 1, bf16, SDPA, PyTorch 2.
  // GemmaRMSNorm (modeling_gemma.py): x.float() kept by pow, 4sbh = 16,777,216; rsqrt per row, 4sb = 8,192;
  // x * rsqrt in fp32, kept by the multiply with (1 + weight.float()), 4sbh = 16,777,216; and that (1 + weight)
  // vector, 4h = 8,192: 33,570,816 per norm. LlamaRMSNorm would keep the normalised tensor cast to bf16 (2sbh) and no
  // vector: 25,174,016.
  // The rest of the layer: q_proj's input 2sbh = 8,388,608; Q 2 x 2048 x 8 x 256 = 8,388,608; K and V (one head)
  // 2 x 2048 x 256 = 1,048,576 each; SDPA's log-sum-exp 4 x 8 x 2048 = 65,536; o_proj's input 8,388,608; gate and
  // up's input 8,388,608; gate, act(gate), up and their product 4 x 2 x 2048 x 16384 = 268,435,456.
  activation_config c{};
  c.seq_len = 2048; c.impl = implementation::hf; c.attention = attention_kind::flash;
  const transformer_config gemma = find_preset("gemma-2b").config;
  transformer_config llama_norm = gemma;
  llama_norm.norm_scale_fp32 = false;
  const layer_activations l = layer_activation_bytes(gemma, c);
  CHECK(l.attention_norm.count() == 33'570'816);
  CHECK(l.mlp_norm.count() == 33'570'816);
  CHECK(layer_activation_bytes(llama_norm, c).attention_norm.count() == 25'174'016);
  CHECK(l.total().count() == 2LL * 33'570'816 + 4 * 8'388'608 + 2 * 1'048'576 + 65'536 + 268'435'456);
  // The final norm likewise: +2sbh + 4h over Llama's.
  CHECK(first_stage_activations(gemma, c).output_layer.count() - first_stage_activations(llama_norm, c).output_layer.count() ==
        2LL * 2048 * 2048 + 4 * 2048);
  // Frozen under LoRA, the normalised tensor is not kept; (1 + weight) still is (the multiply's other input needs it).
  adaptation lora{};
  lora.lora.rank = 8;
  lora.lora.targets = parse_lora_targets("q_proj");
  CHECK(layer_activation_bytes(gemma, c, lora).mlp_norm.count() == 16'777'216 + 8'192 + 8'192);
  // Under autocast x is the fp32 residual and the normalised tensor is fp32 for both: the vector is the difference.
  c.autocast = true;
  CHECK(layer_activation_bytes(gemma, c).attention_norm.count() - layer_activation_bytes(llama_norm, c).attention_norm.count() == 4 * 2048);
}

TEST_CASE("Gemma-2's sandwich norms and soft-capped attention", "[activations]") {
  // Gemma-2-2B (hidden 2304, 8 heads and 4 KV heads of 256), s = 2048, b = 1, bf16. sbh = 4,718,592.
  // post_attention_layernorm and post_feedforward_layernorm are GemmaRMSNorms over the o_proj and down_proj outputs:
  // each 4sbh fp32 copy + 4sbh fp32 normalised + 4sb rstd + 4h (1 + weight) = 18,874,368 x 2 + 8,192 + 9,216.
  activation_config c{};
  c.seq_len = 2048; c.impl = implementation::hf; c.attention = attention_kind::flash;
  const transformer_config g = preset_config("gemma-2-2b");
  const layer_activations sdpa = layer_activation_bytes(g, c);
  CHECK(sdpa.branch_norms.count() == 2 * (2LL * 18'874'368 + 8'192 + 9'216));
  CHECK(sdpa.attention_norm.count() == 2LL * 18'874'368 + 8'192 + 9'216);  // the input norm keeps the same
  CHECK(sdpa.attention_scores.count() == 0);  // SDPA: no soft-cap in its kernel (transformers passes softcap to eager only)
  // Eager: softmax(dtype=float32) keeps its fp32 output and P @ V its bf16 copy, 6 B per score; the soft-cap's tanh keeps
  // its bf16 output, 2 B more: 8 B x 8 heads x 2048^2 = 268,435,456 B against 201,326,592 B.
  c.attention = attention_kind::eager;
  CHECK(layer_activation_bytes(g, c).attention_scores.count() == 268'435'456);
  transformer_config uncapped = g;
  uncapped.attention_softcap = 0.0;
  CHECK(layer_activation_bytes(uncapped, c).attention_scores.count() == 201'326'592);
  // Full recompute keeps the layer input only, as for any layer.
  c.recomputation = recompute::full;
  CHECK(layer_activation_bytes(g, c).branch_norms.count() == 0);
  // Every other layer slides over 4096 tokens (layer i slides unless (i + 1) % 2 == 0): with SDPA at 4096 tokens the
  // sliding layers get transformers' mask and the full-attention ones none. A sliding layer keeps K and V repeated from 4
  // to 8 heads, 2 x 4 x 256 x 2 B x 4096 = 16,777,216 B more, and the additive mask, 4096 x 4096 x 2 B = 33,554,432 B:
  // 50,331,648 B. The 26 layers are 13 of each.
  c.recomputation = recompute::none;
  c.attention = attention_kind::flash;
  c.seq_len = 4096;
  const layer_activations sliding = layer_activation_bytes(g, c, {}, 0), full = layer_activation_bytes(g, c, {}, 1);
  CHECK((sliding.total() - full.total()).count() == 50'331'648);
  CHECK(sliding.attention_mask.count() == 33'554'432);
  CHECK(full.attention_mask.count() == 0);
  CHECK(layer_activation_bytes(g, c, {}, 25).total() == full.total());
  const stage_activations stage = first_stage_activations(g, c);
  CHECK(stage.full_attention_layers == 13);
  CHECK(stage.layers == sliding.total() * 13 + full.total() * 13);
  CHECK_THROWS_WITH(layer_activation_bytes(g, c, {}, 26), Catch::Matchers::Contains("the layer index must be in [0, layers)"));
  // Below the window, and under eager attention (the mask is added, never kept), the layers are alike.
  c.seq_len = 4095;
  CHECK(first_stage_activations(g, c).full_attention_layers == 0);
  c.seq_len = 4096;
  c.attention = attention_kind::eager;
  CHECK(first_stage_activations(g, c).full_attention_layers == 0);
}

TEST_CASE("Gemma-3's five sliding layers to one", "[activations]") {
  // Gemma-3-1B (4 heads and 1 KV head of 256, hidden 1152, window 512, full attention at layers 5, 11, 17, 23), bf16,
  // SDPA, one sequence of 4096 tokens. A sliding layer keeps the additive mask, 4096 x 4096 x 2 B = 33,554,432 B; its K
  // and V stay views (one KV head), so that is the difference. q_norm and k_norm are GemmaRMSNorms over each head:
  // per head row of 256 the fp32 copy and normalised tensor (2 x 4 x 256), the rstd 4 B; and each (1 + weight), 4 x 256.
  activation_config c{};
  c.seq_len = 4096; c.impl = implementation::hf; c.attention = attention_kind::flash;
  const transformer_config g = preset_config("gemma-3-1b");
  const layer_activations sliding = layer_activation_bytes(g, c, {}, 0), full = layer_activation_bytes(g, c, {}, 5);
  CHECK((sliding.total() - full.total()).count() == 33'554'432);
  const std::int64_t q_rows = 4096LL * 4, k_rows = 4096;
  CHECK(full.query.count() == 2 * 4096LL * 1024 + q_rows * (8 * 256 + 4) + 4 * 256);
  CHECK(full.key.count() == 2 * 4096LL * 256 + k_rows * (8 * 256 + 4) + 4 * 256);
  const stage_activations stage = first_stage_activations(g, c);
  CHECK(stage.full_attention_layers == 4);
  CHECK(stage.layers == sliding.total() * 22 + full.total() * 4);
}

TEST_CASE("flash-attn (attn_implementation flash_attention_2) takes the window in its kernel", "[activations]") {
  // Mistral-7B-v0.1 at 4096 tokens: SDPA keeps transformers' mask and K, V repeated to 32 heads ("SDPA with
  // transformers' sliding-window mask", +83,886,080 B); flash-attn gets window_size and the 8 KV heads as they are, so
  // the layer keeps what a model without a window keeps, the fp32 log-sum-exp unpadded (4 B x 32 heads x 4096).
  activation_config c{};
  c.seq_len = 4096; c.impl = implementation::hf; c.attention = attention_kind::flash_attention_2;
  const transformer_config windowed = preset_config("mistral-7b");
  transformer_config full = windowed;
  full.sliding_window = 0;
  const layer_activations fa2 = layer_activation_bytes(windowed, c);
  CHECK(fa2.attention_mask.count() == 0);
  CHECK(fa2.key.count() == 2LL * 4096 * 8 * 128);
  CHECK(fa2.attention_lse.count() == 4LL * 32 * 4096);
  c.attention = attention_kind::flash;
  CHECK(fa2.total() == layer_activation_bytes(full, c).total());
  CHECK((layer_activation_bytes(windowed, c).total() - fa2.total()).count() == 83'886'080);
  CHECK(parse_attention("fa2") == attention_kind::flash_attention_2);
  CHECK(name(attention_kind::flash_attention_2) == "fa2");
}

TEST_CASE("attention takes transformers' attn_implementation names too", "[activations]") {
  // modeling_utils.py: attn_implementation "eager", "sdpa" (torch's scaled_dot_product_attention) or
  // "flash_attention_2" (the flash-attn package); what a user copies from a training script must be understood.
  CHECK(parse_attention("sdpa") == attention_kind::flash);
  CHECK(parse_attention("flash") == attention_kind::flash);
  CHECK(parse_attention("flash_attention_2") == attention_kind::flash_attention_2);
  CHECK(parse_attention("eager") == attention_kind::eager);
  CHECK_THROWS_WITH(parse_attention("flex_attention"), Catch::Contains("'flex_attention'") && Catch::Contains("sdpa") &&
                                                           Catch::Contains("flash_attention_2"));
  CHECK_THROWS_WITH(parse_attention("SDPA"), Catch::Contains("expected one of eager, flash, fa2"));
}

TEST_CASE("a fused qkv projection keeps its whole output when attention keeps a view of it", "[activations]") {
  // Phi-3-mini: qkv_proj gives 3 x 3072 per token; RoPE rotates q and k into new tensors, v stays a view. SDPA keeps
  // that view, so the whole output stays: 3 x 2 B x 3072 per token, where Llama's layout keeps V alone (2 B x 3072).
  // s = 1024 (below the 2047 window), b = 2: 3 x 2 x 1024 x 2 x 3072 = 37,748,736 B against 12,582,912 B.
  activation_config c{};
  c.seq_len = 1024; c.micro_batch = 2; c.impl = implementation::hf; c.attention = attention_kind::flash;
  transformer_config phi3 = find_preset("phi-3-mini").config, unfused = phi3;
  unfused.fused_qkv = unfused.fused_gate_up = false;
  const layer_activations l = layer_activation_bytes(phi3, c);
  CHECK(l.query.count() == 2LL * 2048 * 3072);
  CHECK(l.key.count() == 2LL * 2048 * 3072);
  CHECK(l.value.count() == 37'748'736);
  CHECK(layer_activation_bytes(unfused, c).value.count() == 12'582'912);
  // gate_up_proj's output, chunked into gate and up, keeps what separate gate and up keep: gate_up (2f), SiLU(gate)
  // and the product, f = 8192 each: 4 x 2 B x 2048 x 8192.
  CHECK(l.mlp_hidden.count() == 4LL * 2 * 2048 * 8192);
  CHECK(l.mlp_hidden == layer_activation_bytes(unfused, c).mlp_hidden);
  // With config.json's use_cache (no checkpointing) DynamicLayer.update copies K and V: V no longer holds qkv_proj's output.
  phi3.use_cache = true;
  CHECK(layer_activation_bytes(phi3, c).value.count() == 12'582'912);
  // Eager attention folds the batch for its matmuls: with b = 2 it keeps a copy of V; with b = 1 a view again.
  phi3.use_cache = false;
  c.attention = attention_kind::eager;
  CHECK(layer_activation_bytes(phi3, c).value.count() == 12'582'912);
  c.micro_batch = 1;
  CHECK(layer_activation_bytes(phi3, c).value.count() == 3LL * 2 * 1024 * 3072);
}

TEST_CASE("a training forward's KV cache, beyond what attention keeps", "[activations]") {
  // transformers copies K and V into a DynamicCache (use_cache, no checkpointing). With SDPA and no mask attention keeps
  // those copies themselves: nothing more. With eager attention and GQA it keeps repeat_kv's copies, and the cache's
  // K and V (8 heads of 128, 2 B, s = 2048) stay until the output is freed: 2 x 2 x 2048 x 1024 = 8,388,608 B a layer.
  activation_config c{};
  c.seq_len = 2048; c.impl = implementation::hf; c.attention = attention_kind::flash;
  transformer_config m = find_preset("llama-3-8b").config;
  CHECK(forward_kv_cache_bytes(m, c).count() == 0);  // use_cache false
  m.use_cache = true;
  CHECK(forward_kv_cache_bytes(m, c).count() == 0);  // SDPA keeps the cache's tensors
  c.attention = attention_kind::eager;
  CHECK(forward_kv_cache_bytes(m, c).count() == 8'388'608);
  c.recomputation = recompute::full;  // gradient checkpointing: transformers turns use_cache off
  CHECK(forward_kv_cache_bytes(m, c).count() == 0);
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
  CHECK_THROWS_WITH(per_layer(gpt3(), c), Catch::Matchers::Contains("the 96 attention heads must divide evenly over tp 5; pick a tp that divides 96"));
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
  // Interleaving needs more than one stage (Megatron-LM runs one stage without pipelining and drops the virtual size).
  CHECK_THROWS_WITH(first_stage_activations(gpt3(), c, pipeline_config{1, 2, 0}),
                    Catch::Matchers::Contains("virtual pipeline stages need a pipeline; raise pp above 1"));
  CHECK(first_stage_activations(gpt3(), c, pipeline_config{2, 2, 0}).total > bytes{});
}

TEST_CASE("config.json's dropouts, site by site", "[activations]") {
  // GPT-2 small (GPT2Config: attn_pdrop, resid_pdrop, embd_pdrop, 0.1 each when absent), s = 1024, b = 1, bf16,
  // eager attention: the probabilities' dropout keeps a 1-byte mask and the 2-byte dropped copy P @ V keeps,
  // 3 x 12 heads x 1024^2 = 37,748,736 B; each residual branch a 1-byte mask of sbh = 786,432 B; the embeddings one
  // more mask of 786,432 B on the stage. Per layer: 37,748,736 + 2 x 786,432 = 39,321,600 B more than without.
  transformer_config gpt2 = find_preset("gpt3-175b").config;  // GPT-style block; GPT-2 small's shapes below
  gpt2.hidden = 768; gpt2.layers = 12; gpt2.heads = gpt2.kv_heads = 12; gpt2.ffn = 3072; gpt2.vocab = 50257; gpt2.max_positions = 1024;
  gpt2.attention_dropout = gpt2.residual_dropout = gpt2.embedding_dropout = 0.1;
  gpt2.eager_softmax_fp32 = false;  // GPT-2's eager attention runs its softmax in the model's dtype
  transformer_config none = gpt2;
  none.attention_dropout = none.residual_dropout = none.embedding_dropout = 0.0;
  activation_config c{};
  c.seq_len = 1024; c.impl = implementation::hf; c.attention = attention_kind::eager;
  CHECK(per_layer(gpt2, c) - per_layer(none, c) == 39'321'600);
  CHECK(first_stage_activations(gpt2, c).embedding_dropout.count() == 786'432);
  CHECK(first_stage_activations(none, c).embedding_dropout.count() == 0);
  // SDPA's dropout keeps only its RNG state: the residual masks remain.
  c.attention = attention_kind::flash;
  CHECK(per_layer(gpt2, c) - per_layer(none, c) == 2 * 786'432);
  // Llama's attention_dropout acts on the probabilities alone: nothing under SDPA; under eager, softmax(dtype=float32)
  // keeps its fp32 output either way, and P @ V keeps the 2-byte dropped-out copy instead of the 2-byte .to(bf16) cast,
  // which dropout reads and does not keep: the 1-byte mask is all that is added (Llama-2-7B, s = 1024: 32 heads x
  // 1024^2 = 33,554,432 B; the PyTorch oracle's GPT-NeoX blocks measured it), no residual masks.
  transformer_config llama = find_preset("llama-2-7b").config, dropped = llama;
  dropped.attention_dropout = 0.1;
  CHECK(per_layer(dropped, c) == per_layer(llama, c));
  c.attention = attention_kind::eager;
  CHECK(per_layer(dropped, c) - per_layer(llama, c) == 33'554'432);
  CHECK(layer_activation_bytes(dropped, c).attention_scores.count() == 4LL * 33'554'432);  // the fp32 softmax output
  CHECK(layer_activation_bytes(dropped, c).attention_residual_mask.count() == 0);
  dropped.attention_dropout = 1.0;
  CHECK_THROWS_WITH(layer_activation_bytes(dropped, c), Catch::Matchers::Contains("dropout probability must be in [0, 1)"));
}

TEST_CASE("the paper's profiles keep Q, K and V as separate tensors even for a fused projection", "[activations]") {
  // GPT-3's preset has one qkv projection; the paper's block counts "attention over values: 2sbh" for V whatever the
  // batch: s = 2048, b = 2, tp 8 -> 2 B x 2 x 2048 x 12288 / 8.
  activation_config c = gpt3_paper();
  c.micro_batch = 2;
  CHECK(layer_activation_bytes(gpt3(), c).value.count() == 2LL * 2 * 2048 * 12288 / 8);
  c.attention = attention_kind::flash;
  CHECK(layer_activation_bytes(gpt3(), c).value.count() == 2LL * 2 * 2048 * 12288 / 8);
}

TEST_CASE("parallel attention and MLP: GPT-NeoX's two LayerNorms and Phi's one", "[activations]") {
  // Pythia-1B (hidden 2048, 8 heads of 256, intermediate 8192), s = 2048, b = 1, bf16, SDPA, config.json use_cache true.
  // sbh = 4,194,304; 2sbh = 8,388,608. input_layernorm keeps the layer input 8,388,608 + fp32 mean and rstd 16,384;
  // post_attention_layernorm reads the same input, which autograd keeps once: only its mean and rstd, 16,384. q, k, v
  // (RoPE's concatenations and the cache's copies) and the query_key_value and dense inputs 5 x 8,388,608; log-sum-exp
  // 4 x 8 x 2048 = 65,536; dense_h_to_4h's input 8,388,608; GELU's input and output 2 x 2 x 2048 x 8192 = 67,108,864.
  // RoPE's torch.cat leaves Q head-major, so SDPA's own output (kept by it) is not the tensor dense keeps: 8,388,608 more.
  // 8,404,992 + 7 x 8,388,608 + 65,536 + 16,384 + 67,108,864 = 134,316,032 B.
  activation_config c = hf_sdpa(2048);
  const transformer_config pythia = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/pythia-1b.json");
  const layer_activations l = layer_activation_bytes(pythia, c);
  CHECK(l.attention_norm.count() == 8'404'992);
  CHECK(l.mlp_norm.count() == 16'384);
  CHECK(l.mlp_input.count() == 8'388'608);
  CHECK(l.attention_kernel_output.count() == 8'388'608);
  CHECK(l.total().count() == 134'316'032);
  // final_layer_norm keeps its input and fp32 mean and rstd, embed_out its input: 8,388,608 + 16,384 + 8,388,608.
  CHECK(first_stage_activations(pythia, c).output_layer.count() == 16'793'600);
  // In sequence (use_parallel_residual false) the second LayerNorm reads attention output + input, a new tensor it keeps.
  transformer_config sequential = pythia;
  sequential.parallel_residual = false;
  CHECK((layer_activation_bytes(sequential, c).total() - l.total()).count() == 8'388'608);
  // GPT-NeoX-20B's gelu_fast on this shape: FastGELUActivation's ops keep x, 0.044715x, 1 + 0.044715x^2, x * 0.7978845608,
  // tanh's output, 1 + tanh and 0.5x, and dense_4h_to_h keeps the output: 8 x 2 x 2048 x 8192 = 268,435,456 B where one
  // GELU kernel keeps 67,108,864: 134,316,032 - 67,108,864 + 268,435,456 = 335,642,624 B.
  transformer_config fast = pythia;
  fast.gelu_fast_ops = true;
  CHECK(layer_activation_bytes(fast, c).mlp_hidden.count() == 268'435'456);
  CHECK(layer_activation_bytes(fast, c).total().count() == 335'642'624);
  // Phi-2 (hidden 2560, 32 heads of 80, intermediate 10240, gelu_new, resid_pdrop 0.1), s = 2048, b = 1: sbh = 5,242,880.
  // One LayerNorm: 10,485,760 + 16,384; its output is read by q, k, v and fc1 and kept once, 10,485,760; Q, K, V and the
  // dense input 4 x 10,485,760; log-sum-exp 4 x 32 x 2048 = 262,144; two 1-byte residual dropout masks 10,485,760;
  // gelu_new's four kept tensors and fc2's input 5 x 2 x 2048 x 10240 = 209,715,200. No second norm, no second input.
  // Partial RoPE's torch.cat: SDPA's own head-major output beside dense's copy, 10,485,760.
  // 10,502,144 + 6 x 10,485,760 + 262,144 + 10,485,760 + 209,715,200 = 293,879,808 B.
  const transformer_config phi = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/phi-2.json");
  const layer_activations p = layer_activation_bytes(phi, c);
  CHECK(p.mlp_norm.count() == 0);
  CHECK(p.mlp_input.count() == 0);
  CHECK(p.attention_input.count() == 10'485'760);
  CHECK(p.mlp_hidden.count() == 209'715'200);
  CHECK(p.total().count() == 293'879'808);
  // Under autocast each linear casts the fp32 norm output itself: q, k, v and fc1 keep four casts.
  c.autocast = true;
  const layer_activations amp = layer_activation_bytes(phi, c);
  CHECK(amp.attention_input.count() == 3 * 10'485'760);
  CHECK(amp.mlp_input.count() == 10'485'760);
}

TEST_CASE("OPT's ReLU keeps the tensor fc2 reads", "[activations]") {
  // OPT-1.3B (hidden 2048, 32 heads of 64, ffn 8192, dropout 0.1), s = 2048, b = 1, bf16, SDPA, use_cache true.
  // sbh = 4,194,304. Two LayerNorms 2 x (8,388,608 + 16,384); q, k, v and out_proj's inputs: the attention input,
  // scaled Q, the cache's K and V copies, the attention output, 5 x 8,388,608; log-sum-exp 4 x 32 x 2048 = 262,144;
  // fc1's input 8,388,608; ReLU's output, which fc2 reads, 2 x 2048 x 8192 = 33,554,432; two 1-byte dropout masks
  // 2 x 4,194,304. 16,809,984 + 41,943,040 + 262,144 + 8,388,608 + 33,554,432 + 8,388,608 = 109,346,816 B.
  activation_config c = hf_sdpa(2048);
  const transformer_config opt = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-1.3b.json");
  const layer_activations l = layer_activation_bytes(opt, c);
  CHECK(l.mlp_hidden.count() == 33'554'432);
  CHECK(l.total().count() == 109'346'816);
  // GELU would keep fc1's output too: one more 2 x 2048 x 8192.
  transformer_config gelu = opt;
  gelu.mlp = mlp_kind::gelu;
  CHECK((layer_activation_bytes(gelu, c).total() - l.total()).count() == 33'554'432);
}

TEST_CASE("OLMo-2's post-norms and whole-projection q_norm / k_norm", "[activations]") {
  // OLMo-2-0425-1B (hidden 2048, 16 heads of 128, 16 KV heads, intermediate 8192), s = 2048, b = 1, bf16, SDPA,
  // use_cache true. sbh = 4,194,304; 2sbh = 8,388,608. No norm before attention: q, k, v keep the layer input itself,
  // 8,388,608. q_norm over the whole q_proj output (Olmo2RMSNorm): its fp32 copy 4 x 2048 x 2048 = 16,777,216, the fp32
  // normalised tensor the weight multiply keeps, 16,777,216, and rstd 4 x 2048 = 8,192: 33,562,624, and k_norm the
  // same; Q and K after RoPE and the cache's V, 3 x 8,388,608; log-sum-exp 4 x 16 x 2048 = 131,072; o_proj's input
  // 8,388,608; gate and up keep the residual sum, 8,388,608; SwiGLU's four tensors 4 x 2 x 2048 x 8192 = 134,217,728;
  // post_attention_layernorm and post_feedforward_layernorm over o_proj's and down_proj's outputs, 2 x 33,562,624.
  // 8,388,608 + 2 x 33,562,624 + 3 x 8,388,608 + 131,072 + 2 x 8,388,608 + 134,217,728 + 2 x 33,562,624 = 318,930,944 B.
  activation_config c = hf_sdpa(2048);
  const transformer_config olmo = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmo-2-0425-1b.json");
  const layer_activations l = layer_activation_bytes(olmo, c);
  CHECK(l.attention_norm.count() == 0);
  CHECK(l.mlp_norm.count() == 0);
  CHECK(l.attention_input.count() == 8'388'608);
  CHECK(l.query.count() == 8'388'608 + 33'562'624);
  CHECK(l.key.count() == 8'388'608 + 33'562'624);
  CHECK(l.branch_norms.count() == 2 * 33'562'624);
  CHECK(l.total().count() == 318'930'944);
  // The final norm is an Olmo2RMSNorm too: 33,562,624 for its fp32 copy, normalised tensor and rstd, and lm_head's input.
  CHECK(first_stage_activations(olmo, c).output_layer.count() == 33'562'624 + 8'388'608);
  // Qwen3's per-head norms over the same values keep one rstd per head row: 16 x 2048 x 4 = 131,072 each, not 8,192;
  // and Llama's RMSNorm keeps the normalised tensor cast back to bf16 (2 B a value instead of 4).
  transformer_config per_head = olmo;
  per_head.qk_norm_whole = false;
  CHECK((layer_activation_bytes(per_head, c).query - l.query).count() == 131'072 - 8'192);
  transformer_config llama_norm = olmo;
  llama_norm.norm_weight_fp32 = false;
  CHECK((l.branch_norms - layer_activation_bytes(llama_norm, c).branch_norms).count() == 2 * 2 * 2048 * 2048);
  // Under autocast the residual stream is fp32 and q, k and v each keep their own 16-bit cast of it.
  c.autocast = true;
  CHECK(layer_activation_bytes(olmo, c).attention_input.count() == 3 * 8'388'608);
  // Tensor parallelism splits the projections a whole-projection norm reads: refused, with the fix.
  c = hf_sdpa(2048);
  c.tp = 2;
  CHECK_THROWS_WITH(layer_activation_bytes(olmo, c), Catch::Matchers::Contains("use tp 1"));
}

TEST_CASE("the rotary cos and sin every rotating layer keeps, one row for the batch", "[activations]") {
  // LlamaModel.forward: position_ids = cache_position.unsqueeze(0) (one row), so cos and sin are 1 x s x d, cast to the
  // hidden states' dtype; q * cos keeps them for backward. Llama-2-7B (d = 128), s 4096, b 2, bf16: 2 x 2 B x 4096 x
  // 128 = 2,097,152 B, whatever the batch.
  const transformer_config llama = preset_config("llama-2-7b");
  activation_config c = hf_sdpa(4096);
  c.micro_batch = 2;
  const stage_activations st = first_stage_activations(llama, c);
  CHECK(st.rotary_tables.count() == 2'097'152);
  CHECK(st.total == st.layers + st.input_ids + st.rotary_tables + st.output_layer + st.logits);
  c.micro_batch = 1;
  CHECK(first_stage_activations(llama, c).rotary_tables.count() == 2'097'152);
  // Under autocast the hidden states are fp32, and so are the tables: 4,194,304 B. Megatron's profile (paper) has none.
  c.autocast = true;
  CHECK(first_stage_activations(llama, c).rotary_tables.count() == 4'194'304);
  c.autocast = false;
  activation_config paper = c;
  paper.impl = implementation::paper;
  CHECK(first_stage_activations(llama, paper).rotary_tables.count() == 0);
  // Every layer skipping RoPE (a NoPE period of 1) keeps none; one layer in four skipping it keeps them all.
  transformer_config nope = llama;
  nope.nope_period = 1;
  CHECK(first_stage_activations(nope, c).rotary_tables.count() == 0);
  nope.nope_period = 4;
  CHECK(first_stage_activations(nope, c).rotary_tables.count() == 2'097'152);
  // OLMo's stay fp32 (OlmoRotaryEmbedding): OLMo-1B-hf (d = 128) at 2048 tokens, 2 x 4 x 2048 x 128 = 2,097,152 B.
  CHECK(first_stage_activations(read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmo-1b-hf.json"), hf_sdpa(2048)).rotary_tables.count() ==
        2'097'152);
  // Partial RoPE: Pythia-1B's tables are 64 wide (rotary_pct 0.25 of 256): 2 x 2 x 2048 x 64 = 524,288 B.
  CHECK(first_stage_activations(read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/pythia-1b.json"), hf_sdpa(2048)).rotary_tables.count() == 524'288);
  // Gemma-3-1B (d = 256, a full-attention layer every 6 of 26) uses the global and the local pair: 2 x 2 x 2 x 2048 x 256
  // = 4,194,304 B. Five layers all slide: the local pair only, 2,097,152 B. Transformers 5 builds a pair for each layer
  // kind the model has (Gemma3TextModel.forward: set(config.layer_types)) and hands each layer its own kind's, so a
  // checkpointed call holds that one pair too.
  const transformer_config gemma3 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gemma-3-1b.json");
  CHECK(first_stage_activations(gemma3, hf_sdpa(2048)).rotary_tables.count() == 4'194'304);
  transformer_config sliding_only = gemma3;
  sliding_only.layers = 5;
  CHECK(first_stage_activations(sliding_only, hf_sdpa(2048)).rotary_tables.count() == 2'097'152);
  activation_config checkpointed = hf_sdpa(2048);
  checkpointed.recomputation = recompute::full;
  CHECK(first_stage_activations(sliding_only, checkpointed).rotary_tables.count() == 2'097'152);
  CHECK(first_stage_activations(gemma3, checkpointed).rotary_tables.count() == 4'194'304);
  checkpointed.recomputation = recompute::selective;
  CHECK(first_stage_activations(sliding_only, checkpointed).rotary_tables.count() == 2'097'152);
  // Learned positions (GPT-2) have none.
  CHECK(first_stage_activations(read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gpt2.json"), hf_sdpa(1024)).rotary_tables.count() == 0);
}

TEST_CASE("a learned position embedding keeps its int64 position ids", "[activations]") {
  // derivatives.yaml embedding: the weight's gradient reads `indices`, saved from forward to the embedding's node.
  // GPT-2 (wpe over position_ids = cache_position.unsqueeze(0)): one row of s int64, 8 x 1024 = 8,192 B, whatever b.
  const transformer_config gpt2 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gpt2.json");
  activation_config c = hf_sdpa(1024);
  c.micro_batch = 4;
  CHECK(first_stage_activations(gpt2, c).position_ids.count() == 8'192);
  // OPT (OPTLearnedPositionalEmbedding: position_ids + offset, a new b x s tensor): 8 x 4 x 1024 = 32,768 B.
  const transformer_config opt = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-1.3b.json");
  CHECK(first_stage_activations(opt, c).position_ids.count() == 32'768);
  // The per-micro-batch size both use (the stage and the backward's moment at the embedding's node).
  CHECK(learned_position_id_bytes(gpt2, 1024, 4) == 8'192);
  CHECK(learned_position_id_bytes(opt, 1024, 4) == 32'768);
  // Both are in the stage's total: the total less every other term is the ids.
  const stage_activations st = first_stage_activations(opt, c);
  CHECK((st.total - st.layers - st.input_ids - st.rotary_tables - st.checkpoint_arguments - st.embedding_dropout - st.embedding_projection -
         st.output_layer - st.logits - st.vision)
            .count() == 32'768);
  // Under full recompute GPT-2's row is cache_position's storage, which each checkpointed call holds (checkpoint_arguments
  // counts it, 8 s = 8,192 B, beside the b x 1 x s x s eager masks here none: SDPA): not twice. OPT's decoder also passes
  // its b x s position_ids to every layer: the checkpoints hold 8 s + 8 s b = 8,192 + 32,768 = 40,960 B, beside the
  // embedding's own ids.
  activation_config checkpointed = c;
  checkpointed.recomputation = recompute::full;
  CHECK(first_stage_activations(gpt2, checkpointed).position_ids.count() == 0);
  CHECK(first_stage_activations(gpt2, checkpointed).checkpoint_arguments.count() == 8'192);
  CHECK(first_stage_activations(opt, checkpointed).position_ids.count() == 32'768);
  CHECK(first_stage_activations(opt, checkpointed).checkpoint_arguments.count() == 40'960);
  // A frozen table (LoRA's base, --freeze-embeddings) keeps no ids; rotary positions have none.
  adaptation frozen{};
  frozen.freeze_embeddings = true;
  CHECK(first_stage_activations(opt, c, {}, frozen).position_ids.count() == 0);
  CHECK(first_stage_activations(read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/qwen2.5-1.5b.json"), c).position_ids.count() == 0);
}

TEST_CASE("OLMo's OlmoLayerNorm keeps an fp32 copy of its input", "[activations]") {
  // OLMo-1B-hf (hidden 2048, 16 heads of 128, 16 KV heads, intermediate 8192), s = 2048, b = 1, bf16, SDPA, use_cache
  // true. sbh = 4,194,304; 2sbh = 8,388,608. Each OlmoLayerNorm runs F.layer_norm on x.to(torch.float32): it keeps that
  // fp32 copy, 4 x 4,194,304 = 16,777,216, and fp32 mean and rstd, 2 x 4 x 2048 = 16,384: 16,793,600, twice. q, k, v
  // keep the cast-back output, 8,388,608; Q and K after RoPE and the cache's V, 3 x 8,388,608; log-sum-exp 4 x 16 x 2048
  // = 131,072; o_proj's input 8,388,608; gate and up's input 8,388,608; SwiGLU's four tensors 4 x 2 x 2048 x 8192 =
  // 134,217,728. 2 x 16,793,600 + 6 x 8,388,608 + 131,072 + 134,217,728 = 218,267,648 B.
  activation_config c = hf_sdpa(2048);
  const transformer_config olmo = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmo-1b-hf.json");
  const layer_activations l = layer_activation_bytes(olmo, c);
  CHECK(l.attention_norm.count() == 16'793'600);
  CHECK(l.mlp_norm.count() == 16'793'600);
  CHECK(l.attention_input.count() == 8'388'608);
  CHECK(l.total().count() == 218'267'648);
  // The final norm is an OlmoLayerNorm too (16,793,600), beside lm_head's input (8,388,608).
  CHECK(first_stage_activations(olmo, c).output_layer.count() == 16'793'600 + 8'388'608);
  // A LayerNorm on the bf16 input keeps that input instead: 2 B a value, 2 x 8,388,608 less over the two norms.
  transformer_config bf16_norm = olmo;
  bf16_norm.norm_input_fp32 = false;
  CHECK((l.total() - layer_activation_bytes(bf16_norm, c).total()).count() == 2 * 8'388'608);
  // Under autocast the residual stream is already fp32: the same fp32 input either way.
  c.autocast = true;
  CHECK(layer_activation_bytes(olmo, c).attention_norm == layer_activation_bytes(bf16_norm, c).attention_norm);
  // clip_qkv (say 8.0): q, k and v clamped in place, each kept once more for clamp's backward (torch's
  // derivatives.yaml: clamp_backward(grad, self, ...) on an in-place op keeps a clone of self): 3 x 8,388,608 more.
  c.autocast = false;
  transformer_config clipped = olmo;
  clipped.clip_qkv = true;
  CHECK(layer_activation_bytes(clipped, c).total().count() == 218'267'648 + 3 * 8'388'608);
  // The fp32 copy is OLMo's norm; a norm other than a LayerNorm is refused.
  transformer_config rms = olmo;
  rms.norm = norm_kind::rmsnorm;
  CHECK_THROWS_WITH(validate(rms), Catch::Matchers::Contains("pass norm layernorm"));
}

TEST_CASE("StableLM's LayerNorm layer with a SwiGLU MLP, in sequence or in parallel", "[activations]") {
  // stablelm-2-1_6b (hidden 2048, 32 heads of 64, 32 KV heads, intermediate 5632, qkv biases), s = 2048, b = 1, bf16,
  // SDPA, use_cache true. sbh = 4,194,304; 2sbh = 8,388,608. Two LayerNorms, each its bf16 input and fp32 mean and rstd:
  // 2 x (8,388,608 + 16,384); the q, k, v input, o_proj's input and gate / up's input 3 x 8,388,608; Q and K after the
  // partial RoPE (torch.cat of the rotated and passed parts) and the cache's V 3 x 8,388,608; log-sum-exp 4 x 32 x 2048
  // = 262,144; SwiGLU's four tensors 4 x 2 x 2048 x 5632 = 92,274,688; SDPA's own output, head-major beside o_proj's
  // copy because torch.cat made Q, 8,388,608. 16,809,984 + 58,720,256 + 262,144 + 92,274,688 = 168,067,072 B. With
  // use_parallel_residual one norm feeds both branches and q, k, v, gate and up read one tensor:
  // 8,404,992 + 6 x 8,388,608 + 262,144 + 92,274,688 = 151,273,472 B.
  const activation_config c = hf_sdpa(2048);
  transformer_config slm = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/stablelm-2-1.6b.json");
  CHECK(layer_activation_bytes(slm, c).total().count() == 168'067'072);
  slm.parallel_residual = slm.shared_layer_norm = true;
  const layer_activations parallel = layer_activation_bytes(slm, c);
  CHECK(parallel.mlp_norm.count() == 0);
  CHECK(parallel.mlp_input.count() == 0);
  CHECK(parallel.total().count() == 151'273'472);
}

TEST_CASE("StarCoder2's pre-norm LayerNorm layer with GQA and a biased GELU MLP", "[activations]") {
  // Starcoder2Config's default shape (hidden 3072, 24 heads and 2 KV heads of 128, intermediate 12288), s = 2048, b = 1,
  // bf16, SDPA, use_cache true, no dropout. sbh = 6,291,456; 2sbh = 12,582,912. Two LayerNorms, each its input and fp32
  // mean and rstd: 2 x (12,582,912 + 16,384); the q, k, v input, Q, o_proj's input and c_fc's input 4 x 12,582,912; K
  // and V at 2 heads 2 x 2 x 2048 x 256 = 2,097,152; log-sum-exp 4 x 24 x 2048 = 196,608; GELU's input and output
  // 2 x 2 x 2048 x 12288 = 100,663,296. 25,198,592 + 50,331,648 + 2,097,152 + 196,608 + 100,663,296 = 178,487,296 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "starcoder2", "hidden_size": 3072, "num_hidden_layers": 30,
    "num_attention_heads": 24, "intermediate_size": 12288, "vocab_size": 49152})");
  const layer_activations l = layer_activation_bytes(m, hf_sdpa(2048));
  CHECK(l.attention_norm.count() == 12'599'296);
  CHECK(l.key.count() == 1'048'576);
  CHECK(l.mlp_hidden.count() == 100'663'296);
  CHECK(l.total().count() == 178'487'296);
}

TEST_CASE("Granite's scalar multipliers keep nothing for backward", "[activations]") {
  // residual + branch * residual_multiplier and logits / logits_scaling: autograd's MulBackward0 / DivBackward0 keep
  // the Python scalar only, so a Granite layer keeps Llama's bytes (the oracle's granite blocks measure this).
  const transformer_config llama = find_preset("llama-2-7b").config;
  transformer_config granite = llama;
  granite.scaled_residual = granite.scaled_logits = true;
  activation_config c{};
  c.seq_len = 2048; c.impl = implementation::hf;
  CHECK(layer_activation_bytes(granite, c).total() == layer_activation_bytes(llama, c).total());
  CHECK(layer_activation_bytes(granite, c).total().count() > 0);
}

TEST_CASE("a sequence longer than the learned positions is refused", "[bad-input]") {
  // GPT2Model looks up wpe(position_ids) for positions 0 .. s - 1: n_positions 1024 rows allow 1024 tokens.
  // OPTLearnedPositionalEmbedding holds max_position_embeddings + 2 rows and adds 2 to every position: 2048 tokens.
  const transformer_config gpt2 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gpt2.json");
  const transformer_config opt = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-1.3b.json");
  CHECK(opt.position_offset == 2);
  activation_config c{};
  c.seq_len = 1024;
  CHECK_NOTHROW(validate(c, gpt2));
  c.seq_len = 1025;
  CHECK_THROWS_WITH(validate(c, gpt2), "zeromem: the sequence is longer than the model's 1024 learned positions, got 1025 tokens; use "
                                       "at most 1024 (config.json n_positions / max_position_embeddings)");
  c.seq_len = 2048;
  CHECK_NOTHROW(validate(c, opt));
  c.seq_len = 2049;
  CHECK_THROWS_WITH(validate(c, opt), Catch::Matchers::Contains("2048 learned positions, got 2049 tokens"));
  // RoPE has no table: any length is a length.
  c.seq_len = 1 << 20;
  CHECK_NOTHROW(validate(c, read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/qwen2.5-1.5b.json")));
  // The offset itself is checked.
  transformer_config bad = gpt2;
  bad.position_offset = bad.max_positions;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("pass 0 (OPT: 2)"));
}

TEST_CASE("under full recompute each checkpointed layer call holds its mask and position ids", "[activations]") {
  // transformers' GradientCheckpointingLayer runs checkpoint(partial(layer, **kwargs), hidden_states): the keyword
  // arguments live until the layer's backward. Llama-2-7B, 2048 tokens, bf16, eager: the (1, 1, 2048, 2048) additive
  // mask, 2 x 2048 x 2048 = 8,388,608 B, and the int64 position ids (one row), 8 x 2048 = 16,384 B: 8,404,992 B.
  const transformer_config llama = preset_config("llama-2-7b");
  activation_config c = hf_sdpa(2048);
  c.recomputation = recompute::full;
  c.attention = attention_kind::eager;
  const stage_activations st = first_stage_activations(llama, c);
  CHECK(st.checkpoint_arguments.count() == 8'404'992);
  CHECK(st.total == st.layers + st.input_ids + st.rotary_tables + st.checkpoint_arguments + st.output_layer + st.logits);
  // SDPA passes no mask for a causal batch without padding: the position ids alone. Without recompute: nothing held.
  // Under autocast the mask is made in inputs_embeds' dtype (masking_utils.py create_causal_mask), fp32 from the fp32
  // embedding: 4 x 2048 x 2048 + 16,384 = 16,793,600 B. (H200 steps under AMP, eager, full recompute: Phi at 512 x 4
  // read backward -0.806% and forward -0.894% with a 16-bit mask, +0.006% and -0.001% with it.)
  activation_config amp = c;
  amp.autocast = true;
  CHECK(first_stage_activations(llama, amp).checkpoint_arguments.count() == 16'793'600);
  c.attention = hf_sdpa(2048).attention;
  CHECK(first_stage_activations(llama, c).checkpoint_arguments.count() == 16'384);
  c.recomputation = recompute::none;
  CHECK(first_stage_activations(llama, c).checkpoint_arguments.count() == 0);
  // Gemma-2-2B (sliding and full-attention layers alternate) holds both masks: 2 x 2 x 2048 x 2048 + 16,384 = 16,793,600 B.
  // Two sequences of 1,024 tokens: masks of (2, 1, 1024, 1024), 2 x 2 B x 2 x 1024 x 1024 = 8,388,608 B, one row of
  // positions, 8 x 1024 = 8,192 B.
  activation_config g = c;
  g.recomputation = recompute::full;
  g.attention = attention_kind::eager;
  CHECK(first_stage_activations(preset_config("gemma-2-2b"), g).checkpoint_arguments.count() == 16'793'600);
  g.seq_len = 1024;
  g.micro_batch = 2;
  CHECK(first_stage_activations(preset_config("gemma-2-2b"), g).checkpoint_arguments.count() == 8'388'608 + 8'192);
  // Under SDPA the full-attention layers get no mask; the sliding layers' is built once the sequence reaches the window
  // (Gemma-2-2B: 4096): and_masks(causal, sliding_window) over the positions only, a (1, 1, s, s) bool tensor expanded
  // to the batch. Two sequences of 4096: 4096 x 4096 x 1 B + 8 x 4096 = 16,809,984 B; of 4095 tokens, no mask.
  g.attention = hf_sdpa(4096).attention;
  g.seq_len = 4096;
  CHECK(first_stage_activations(preset_config("gemma-2-2b"), g).checkpoint_arguments.count() == 16'777'216 + 32'768);
  g.seq_len = 4095;
  CHECK(first_stage_activations(preset_config("gemma-2-2b"), g).checkpoint_arguments.count() == 8 * 4095);
  // Mistral-7B-v0.1 (every layer slides, window 4096): the same one mask.
  g.seq_len = 4096;
  CHECK(first_stage_activations(preset_config("mistral-7b"), g).checkpoint_arguments.count() == 16'777'216 + 32'768);
}

TEST_CASE("OPT-350M's norms after the residual adds and its projected embedding", "[activations]") {
  // opt-350m (hidden 1024, 16 heads of 64, ffn 4096, dropout 0.1, word_embed_proj_dim 512), s = 2048, b = 1, bf16, SDPA,
  // use_cache true. a sbh = 4,194,304. The layer keeps what a pre-norm OPT layer keeps, read at other places: the layer
  // input (q, k, v's), self_attn_layer_norm's input (the first residual sum) and final_layer_norm's (the second), each
  // with fp32 mean and rstd (2 x (4,194,304 + 16,384)); fc1's input (the first norm's output), the scaled Q, the cache's K
  // and V and out_proj's input: 6 x 4,194,304 with the layer input; log-sum-exp 4 x 16 x 2048 = 131,072; two 1-byte
  // dropout masks 2 x 2,097,152; ReLU's output, fc2's input, 2 x 2048 x 4096 = 16,777,216: 54,689,792 B.
  const activation_config c = hf_sdpa(2048);
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-350m.json");
  CHECK(layer_activation_bytes(m, c).total().count() == 54'689'792);
  // project_in keeps the token embedding output, 2 x 2048 x 512 = 2,097,152; at the output, no final LayerNorm:
  // project_out keeps the last hidden state (4,194,304) and lm_head project_out's output (2,097,152); logits 4 x 2048 x
  // 50272 = 411,828,224.
  const stage_activations st = first_stage_activations(m, c);
  CHECK(st.embedding_projection.count() == 2'097'152);
  CHECK(st.output_layer.count() == 4'194'304 + 2'097'152);
  CHECK(st.logits.count() == 411'828'224);
  CHECK(st.position_ids.count() == 8 * 2048);  // position_ids + 2, b x s int64
  CHECK(st.total == st.layers + st.input_ids + st.position_ids + st.embedding_projection + st.output_layer + st.logits);
  // Frozen embeddings keep no project_in input; LoRA keeps neither projection's input nor lm_head's.
  adaptation frozen{};
  frozen.freeze_embeddings = true;
  CHECK(first_stage_activations(m, c, {}, frozen).embedding_projection.count() == 0);
  CHECK(first_stage_activations(m, c, {}, frozen).output_layer.count() == 4'194'304);  // project_out still trains
  // Under autocast project_in keeps a 16-bit cast of its fp32 input and of its weight (1024 x 512 x 2 = 1,048,576).
  activation_config amp = c;
  amp.autocast = true;
  CHECK(first_stage_activations(m, amp).embedding_projection.count() == 2'097'152 + 1'048'576);
}

namespace {
// One sequence of seq_len tokens, image_tokens of them images, bf16, flash-attn (EasyR1's and verl's kernel).
activation_config image_pass(std::int64_t seq_len, std::int64_t image_tokens) {
  activation_config c{};
  c.seq_len = seq_len;
  c.image_tokens = image_tokens;
  c.attention = attention_kind::flash_attention_2;
  return c;
}
}  // namespace

TEST_CASE("the Qwen2.5-VL vision tower's saved tensors, block by block, from modeling_qwen2_5_vl.py", "[activations][vision]") {
  // Qwen2.5-VL-7B's tower: C = 1280, F = 3420, H = 16 heads of d = 80, P = 3 x 2 x 14 x 14 = 1176 values a patch, merge
  // 2 x 2. 1000 image tokens in one sequence = 4000 patches; bf16 (a = 2). Per patch:
  //  block, flash_attention_2: two Qwen2RMSNorms 2 x (4C + aC + 4) = 15,368; qkv input, qkv output (3), rotated q and
  //   k, attention output, MLP input: 8aC = 20,480; fp32 log-sum-exp 4H = 64; SwiGLU gate, SiLU, up, product
  //   4aF = 27,360: 63,272 B. SDPA (per window, then concatenated): + aC = 65,832 B.
  //  merger: ln_q 4C + aC + 4 = 7,684, its output, fc1's output and GELU's output 3aC = 7,680: 15,364 B.
  //  inputs: pixel values 4P = 4,704, their bf16 cast 2P = 2,352, cos and sin 2 x 4d = 640, window_index and
  //   reverse_indices 2 x 8 / 4 = 4: 7,700 B.
  const transformer_config m = find_preset("qwen2.5-vl-7b").config;
  activation_config c = image_pass(1024, 1000);
  const vision_activations v = vision_activation_bytes(m, c);
  CHECK(v.patches == 4000);
  CHECK(v.per_block.count() == 4000LL * 63'272);
  CHECK(v.blocks.count() == 32LL * 4000 * 63'272);
  CHECK(v.merger.count() == 4000LL * 15'364);
  CHECK(v.inputs.count() == 4000LL * 7'700);
  CHECK(v.recomputed.count() == 0);
  c.attention = attention_kind::flash;
  CHECK(vision_activation_bytes(m, c).per_block.count() == 4000LL * 65'832);
  // Full recompute: each block keeps its input aC = 2,560 B a patch; one block is recomputed whole during backward,
  // 63,272 B a patch beside its checkpoint (Qwen2RMSNorm's x.to(fp32) is a copy of the 16-bit input, not the input).
  c.attention = attention_kind::flash_attention_2;
  c.recomputation = recompute::full;
  c.micro_batch = 2;  // 8000 patches
  const vision_activations ckpt = vision_activation_bytes(m, c);
  CHECK(ckpt.per_block.count() == 8000LL * 2'560);
  CHECK(ckpt.recomputed.count() == 8000LL * 63'272);
  CHECK(ckpt.merger.count() == 8000LL * 15'364);
  // The whole of it is in the first stage's activations.
  CHECK(first_stage_activations(m, c).vision.count() == 8000LL * (32 * 2'560 + 15'364 + 7'700));
  // A frozen tower (--freeze vision; LoRA on the decoder's q_proj / v_proj only) keeps nothing: the pixel values alone.
  adaptation frozen{};
  frozen.freeze_vision = true;
  CHECK(vision_activation_bytes(m, c, frozen).total().count() == 8000LL * 4'704);
  adaptation lora{};
  lora.lora.rank = 16;
  lora.lora.targets = bit(lora_module::q_proj) | bit(lora_module::v_proj);
  CHECK(vision_activation_bytes(m, c, lora).total().count() == 8000LL * 4'704);
  lora.lora.targets |= bit(lora_module::qkv);  // the tower's qkv adapted: not modelled
  CHECK_THROWS_WITH(vision_activation_bytes(m, c, lora),
                    "zeromem: LoRA adapters in the vision tower with image tokens are not modelled; exclude the vision modules from the targets");
  // Misuse.
  c.image_tokens = 1025;
  CHECK_THROWS_WITH(vision_activation_bytes(m, c),
                    "zeromem: the image tokens are part of the sequence and cannot outnumber its tokens, got 1025; pass at most the sequence length");
  c.image_tokens = 8;
  c.attention = attention_kind::eager;
  CHECK_THROWS_AS(vision_activation_bytes(m, c), std::invalid_argument);
  c.attention = attention_kind::flash;
  c.recomputation = recompute::selective;
  CHECK_THROWS_AS(vision_activation_bytes(m, c), std::invalid_argument);
}

TEST_CASE("the Qwen2-VL vision tower: LayerNorms, QuickGELU as tensor ops, no windows", "[activations][vision]") {
  // Qwen2-VL-7B's tower (config.json vision_config: embed_dim 1280, mlp_ratio 4, 16 heads, hidden_act quick_gelu).
  // Per patch, bf16, flash_attention_2: two nn.LayerNorms 2 x (aC + 8) = 5,136; 8aC = 20,480; 4H = 64; fc1's output,
  // sigmoid(1.702 x) and the product 3aF = 30,720 (F = 5120): 56,400 B. Merger: ln_q aC + 8 and 3aC: 10,248 B.
  // Inputs: 4P + 2P + 2 x 4d = 7,696 B (no window indices).
  const transformer_config m = parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 3584, "num_hidden_layers": 28,
    "num_attention_heads": 28, "num_key_value_heads": 4, "intermediate_size": 18944, "vocab_size": 152064,
    "vision_config": {"depth": 32, "embed_dim": 1280, "mlp_ratio": 4, "num_heads": 16, "hidden_size": 3584, "hidden_act": "quick_gelu"}})");
  const vision_activations v = vision_activation_bytes(m, image_pass(600, 500));
  CHECK(v.patches == 2000);
  CHECK(v.per_block.count() == 2000LL * 56'400);
  CHECK(v.merger.count() == 2000LL * 10'248);
  CHECK(v.inputs.count() == 2000LL * 7'696);
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "qwen2_vl", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "vision_config": {"depth": 2, "embed_dim": 32, "num_heads": 2, "hidden_act": "gelu"}})"),
                    "zeromem: config.json: field 'vision_config.hidden_act' must be \"quick_gelu\" for model_type 'qwen2_vl', got '\"gelu\"'");
}

TEST_CASE("SDPA's own output beside the output projection's copy: head-major queries from torch.cat", "[activations][sdpa]") {
  // Pythia-1B (GPT-NeoX: rotated and passed parts joined by torch.cat), s = 2048, b = 8, bf16 SDPA on CUDA. The flash
  // kernel's output follows the head-major query, so transformers' transpose(1, 2).contiguous() copies it: the kernel
  // keeps its output and the output projection keeps the copy, a sb x heads x d each: 2 x 2048 x 8 x 2048 = 67,108,864 B.
  // Measured on an H200 (tests/data/calibration/h200-training-steps.json, pythia1b-bf16-sdpa-s2048-b8): the forward
  // peak sat 1,073,760,704 B = 16 layers x 67,108,864 B + 18,880 B above zeromem's before this term.
  const transformer_config pythia = find_preset("pythia-1b").config;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 8;
  const layer_activations l = layer_activation_bytes(pythia, c);
  CHECK(l.attention_output.count() == 67'108'864);
  CHECK(l.attention_kernel_output.count() == 67'108'864);
  // Not where no copy is made: Llama's elementwise rotation keeps the projection's token-major strides; eager attention
  // keeps P and V, not P @ V; in fp32 the memory-efficient kernel writes a token-major output; CPU runs are not modelled.
  transformer_config no_cat = pythia;
  no_cat.rope_concat = false;
  CHECK(layer_activation_bytes(no_cat, c).attention_kernel_output.count() == 0);
  CHECK(layer_activation_bytes(find_preset("qwen2.5-1.5b").config, c).attention_kernel_output.count() == 0);
  activation_config other = c;
  other.attention = attention_kind::eager;
  CHECK(layer_activation_bytes(pythia, other).attention_kernel_output.count() == 0);
  other = c;
  other.activation_dtype = dtype::fp32;
  CHECK(layer_activation_bytes(pythia, other).attention_kernel_output.count() == 0);
  other = c;
  other.device = device_kind::cpu;
  CHECK(layer_activation_bytes(pythia, other).attention_kernel_output.count() == 0);
  // config.json: the four families whose apply_rotary_pos_emb concatenates (Phi-3 even at factor 1).
  for (const char* type : {"gpt_neox", "phi", "stablelm", "phi3"}) {
    const std::string json = std::string(R"({"model_type": ")") + type +
                             R"(", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 4, "intermediate_size": 512, "vocab_size": 1000})";
    INFO(type);
    CHECK(parse_hf_config(json).rope_concat);
  }
  CHECK_FALSE(parse_hf_config(R"({"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 512, "vocab_size": 1000})").rope_concat);
}

TEST_CASE("LoRA: fp32 adapters keep their own casts, and SDPA keeps its output for a frozen output projection", "[activations][lora]") {
  // Llama-2-7B, s = 2048, b = 4 (sb = 8192, h = 4096), bf16 SDPA, PEFT r = 16 on q_proj and v_proj in fp32 (get_peft_model's
  // autocast_adapter_dtype). Each adapter casts its input to fp32 (tuners_utils.py _cast_input_dtype) and lora_A keeps
  // that cast: 4 x 8192 x 4096 = 134,217,728 B each; lora_B keeps lora_A's fp32 output, 4 x 8192 x 16 = 524,288 B each.
  // The frozen q, k, v projections keep nothing, and o_proj, frozen, neither: SDPA keeps its output, 2 x 8192 x 4096 =
  // 67,108,864 B. Measured on an H200 (h200-training-steps.json, llama2-7b-lora16-sdpa-s2048-b4, 32 layers):
  // _cast_input_dtype 8,589,934,592 B = 32 x 2 x 134,217,728; sdpa_attention_forward 2,181,038,592 B = 32 x (67,108,864
  // + the 1,048,576 B log-sum-exp).
  const transformer_config llama = find_preset("llama-2-7b").config;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 4;
  adaptation lora = peft_qv_r16();
  layer_activations l = layer_activation_bytes(llama, c, lora);
  CHECK(l.lora.count() == 2 * (134'217'728 + 524'288));
  CHECK(l.attention_input.count() == 0);
  CHECK(l.attention_output.count() == 0);
  CHECK(l.attention_kernel_output.count() == 67'108'864);
  // Adapters in the base's bf16: no cast; lora_A keeps the shared input, once (2 x 8192 x 4096), and bf16 intermediates.
  lora.lora.adapter_dtype = dtype::bf16;
  l = layer_activation_bytes(llama, c, lora);
  CHECK(l.lora.count() == 2 * 2 * 8192 * 16);
  CHECK(l.attention_input.count() == 67'108'864);
  CHECK(l.attention_kernel_output.count() == 67'108'864);
  // o_proj adapted in bf16: its lora_A keeps SDPA's output itself, one tensor.
  lora.lora.targets |= bit(lora_module::o_proj);
  l = layer_activation_bytes(llama, c, lora);
  CHECK(l.attention_output.count() == 67'108'864);
  CHECK(l.attention_kernel_output.count() == 0);
  // ... in fp32: its own cast (4 x 8192 x 4096) beside SDPA's output.
  lora.lora.adapter_dtype = dtype::fp32;
  l = layer_activation_bytes(llama, c, lora);
  CHECK(l.attention_output.count() == 0);
  CHECK(l.attention_kernel_output.count() == 67'108'864);
  CHECK(l.lora.count() == 3 * (134'217'728 + 524'288));
  // With LoRA dropout the fp32 cast is dropped out: a 1-byte mask and the fp32 dropped copy per adapter.
  lora.lora.dropout = 0.1;
  CHECK(layer_activation_bytes(llama, c, lora).lora.count() == 3 * (5LL * 8192 * 4096 + 524'288));
  // Eager attention keeps P and V, not its output: a frozen o_proj leaves nothing of it.
  c.attention = attention_kind::eager;
  lora.lora.targets = bit(lora_module::q_proj);
  CHECK(layer_activation_bytes(llama, c, lora).attention_kernel_output.count() == 0);
}

TEST_CASE("autocast: the forward's KV cache holds fp32 K and V beside attention's 16-bit casts", "[activations][amp]") {
  // Pythia-1B (use_cache true), s = 2048, b = 4, amp-bf16. K leaves RoPE fp32 (the tables take the fp32 hidden's dtype)
  // and the cache concatenates onto empty tensors of K's dtype, so K and V are cached in fp32: 2 x 4 x 2048 x 4 x 8 heads
  // x 256 = 134,217,728 B a layer. Measured on an H200 (h200-training-steps.json, pythia1b-amp-sdpa-s2048-b4):
  // cache_utils.py update's two lines held 1,073,741,824 B each at the peak, 16 layers x 67,108,864 B.
  transformer_config pythia = find_preset("pythia-1b").config;
  pythia.use_cache = true;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 4;
  c.autocast = true;
  CHECK(forward_kv_cache_bytes(pythia, c).count() == 134'217'728);
  // In bf16 attention keeps the cached copies themselves (MHA, nothing repeated): nothing beside them.
  c.autocast = false;
  CHECK(forward_kv_cache_bytes(pythia, c).count() == 0);
  // OLMo's rotation casts q and k back to the input's dtype.
  c.autocast = true;
  pythia.rope_fp32 = true;
  CHECK(forward_kv_cache_bytes(pythia, c).count() == 0);
}

TEST_CASE("autocast: gelu_new's pow runs in fp32, and three of the five tensors it keeps are fp32", "[activations][amp]") {
  // GPT-2 (gelu_new written as tensor ops), s = 1024, b = 8: sb f = 8192 x 3072 per layer. In bf16 five 2-byte tensors
  // a hidden element (x for pow, tanh's output, 1 + tanh, 0.5 x, the output c_proj keeps). Under autocast torch.pow is
  // on the fp32 list (autocast_mode.cpp), so pow keeps its fp32 cast of x and the sum, tanh and 1 + tanh are fp32:
  // 4 + 4 + 4 + 2 + 2 (c_proj keeps its own 16-bit cast of the fp32 output) = 16 B against 10, 6 sb f more a layer.
  // Measured on an H200 (h200-random-steps-20261128.json, GPT-2 with n_embd 256 and n_inner 1024 under AMP at s 1024, b 8):
  // the forward's saved tensors 303,812,608 B above the bf16 count before, 6 layers x 6 x 8192 x 1024 = 301,989,888 B.
  const transformer_config gpt2 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gpt2.json");
  REQUIRE(gpt2.gelu_tensor_ops);
  activation_config c = hf_sdpa(1024);
  c.micro_batch = 8;
  const bytes bf16 = layer_activation_bytes(gpt2, c).mlp_hidden;
  c.autocast = true;
  CHECK((layer_activation_bytes(gpt2, c).mlp_hidden - bf16).count() == 6LL * 8192 * 3072);
}

TEST_CASE("MoE: each expert keeps its gathered tokens and its output before the routing weights", "[activations][moe]") {
  // Mixtral-8x7B (hidden 4096, expert intermediate 14336, top-2 of 8), s = 4096, b = 4: sb = 16,384. Each token passes two
  // experts. transformers 5's grouped_mm_experts_forward (integrations/moe.py, the default): SwiGLU's four tensors
  // 4 x 2 x 16,384 x (2 x 14,336) = 3,758,096,384 B (gate_up_out, kept by SiLU through its gate view, SiLU's output
  // and up kept by the product, the product kept by the second grouped_mm); per routed choice the sorted gather kept
  // by the first grouped_mm and the second's output kept by the multiply with the routing weights, 2 x 2 x (2 x 16,384
  // x 4096) = 536,870,912 B; the k outputs of a token are summed (view + sum), which keeps nothing. The small tensors,
  // per token: softmax's fp32 output 4 x 8, topk's int64 indices 8 x 2, the renormalisation's divisor 4 and input 4 x
  // 2, and per routed choice the int64 token index, the sort's permutation and its inverse and the fp32 weight
  // 2 x (8 + 8 + 8 + 4): 116 B, 1,900,544 B a layer, and the two grouped_mm's int32 offsets over the experts, 4 x 8 B.
  // Measured on an H200 (h200-training-steps.json,
  // mixtral2l-bf16-sdpa-s4096-b4, two layers): the forward sat 1,077,613,568 B = 2 x (536,870,912 + 1,935,872) above
  // zeromem's without these terms; 35,296 B a layer (2 B a token) stays unexplained.
  const transformer_config mixtral = find_preset("mixtral-8x7b").config;
  REQUIRE(mixtral.moe.stacked);
  activation_config c = hf_sdpa(4096);
  c.micro_batch = 4;
  const std::int64_t router = 16'384LL * (4 * 8 + 8 * 2 + 4 + 4 * 2 + 28 * 2);
  CHECK(router == 1'900'544);
  CHECK(layer_activation_bytes(mixtral, c).mlp_hidden.count() == 3'758'096'384LL + 536'870'912 + router + 32);
  // grouped_mm is not autocast-enabled: what it keeps under autocast is not read, and said so.
  c.autocast = true;
  CHECK_THROWS_WITH(layer_activation_bytes(mixtral, c), Catch::Contains("--expert-linears"));
  // LoRA on attention only: the experts are frozen, so the first grouped_mm keeps no gather (its weight needs no
  // gradient) and of SwiGLU's tensors three stay (gate_up_out and SiLU's output, kept by SiLU and the product; the
  // second grouped_mm's frozen weight reads no input). The routing weights still need a gradient, through the frozen
  // router from the layer's input (the adapters before it make it need one): the multiply keeps each output, and the
  // small tensors stay.
  c.autocast = false;
  adaptation lora{};
  lora.lora.rank = 8;
  lora.lora.targets = bit(lora_module::q_proj);
  CHECK(layer_activation_bytes(mixtral, c, lora).mlp_hidden.count() == 3LL * 2 * 16'384 * 2 * 14'336 + 2 * 134'217'728LL + router + 32);
  // transformers 4's loop (modeling_mixtral.py MixtralSparseMoeBlock.forward, --expert-linears): index_add_ keeps its
  // source too, three a·sbh per routed choice, 3 x 268,435,456 B; per routed choice torch.where's two int64 indices and
  // the weight cast to bf16, 2 x (16 + 2): 16,384 x (32 + 16 + 4 + 8 + 36) = 1,572,864 B.
  transformer_config linears = mixtral;
  linears.moe.stacked = false;
  const std::int64_t loop_router = 16'384LL * (4 * 8 + 8 * 2 + 4 + 4 * 2 + 18 * 2);
  CHECK(loop_router == 1'572'864);
  CHECK(layer_activation_bytes(linears, c).mlp_hidden.count() == 3'758'096'384LL + 3 * 268'435'456LL + loop_router);
  // Under autocast the gathered tokens are fp32 and w1 and w3 each keep a 16-bit cast, w2's 16-bit output is kept by
  // the multiply, and the weights stay fp32 (cast to the fp32 hidden dtype), so the product index_add_ keeps is fp32:
  // 3 x 268,435,456 + 2 x (4 x 16,384 x 4096) B, and each routed choice's gathered weight is 4 B: 16,384 x (32 + 16 +
  // 4 + 8 + 40) = 1,638,400 B.
  c.autocast = true;
  CHECK(layer_activation_bytes(linears, c).mlp_hidden.count() == 3'758'096'384LL + 3 * 268'435'456LL + 2 * 4 * 67'108'864LL + 1'638'400);
  // Qwen3-30B-A3B runs the same experts (Qwen3MoeExperts is MixtralExperts), 8 of 128 experts of 768, hidden 2048,
  // s = 4096, b = 1: SwiGLU's four tensors 4 x 2 x 4096 x (8 x 768) = 201,326,592 B, the gather and output of each
  // routed choice 2 x 8 x (2 x 4096 x 2048) = 268,435,456 B, and the small tensors 4096 x (4 x 128 + 8 x 8 + 4 + 4 x 8 +
  // 26 x 8) = 3,358,720 B (norm_topk_prob's renormalisation is Mixtral's; the weight each routed choice keeps is bf16,
  // 2 B, where Mixtral's is fp32: Qwen3MoeTopKRouter casts it, router_top_value.to(router_logits.dtype)), and the
  // offsets 4 x 128 = 512 B.
  c.autocast = false;
  c.micro_batch = 1;
  transformer_config qwen3_moe = find_preset("qwen3-30b-a3b").config;
  CHECK(layer_activation_bytes(qwen3_moe, c).mlp_hidden.count() == 201'326'592LL + 268'435'456 + 3'358'720 + 512);
  // norm_topk_prob false (Qwen3MoeConfig's default): no renormalisation, 4 + 4 x 8 B a token fewer.
  qwen3_moe.moe.renormalized = false;
  CHECK(layer_activation_bytes(qwen3_moe, c).mlp_hidden.count() == 201'326'592LL + 268'435'456 + 3'358'720 + 512 - 4096 * 36);
  // Qwen1.5-MoE-A2.7B (qwen2_moe), s = 4096, b = 1: 4 of 60 experts of 1408 and a shared expert of 5632 (four widths),
  // hidden 2048, norm_topk_prob false. SwiGLU's four tensors over the routed rows and the shared expert, 4 x 2 x 4096 x
  // (4 x 1408 + 5632) = 369,098,752 B; each routed choice's gather and output 2 x 4 x (2 x 4096 x 2048) = 134,217,728 B;
  // per token the router's 4 x 60 + 4 x (8 + 26) = 376 B and the gated product's two operands, the shared expert's
  // output and the sigmoid's (2 x 2048 + 2 x 1) = 4,098 B: 4096 x 4,474 = 18,325,504 B; the offsets 4 x 60 = 240 B.
  // (The MoE oracle holds Qwen2-MoE blocks to the byte: tests/oracle/run_moe_oracle.py.)
  const transformer_config qwen2_moe = find_preset("qwen1.5-moe-a2.7b").config;
  CHECK(layer_activation_bytes(qwen2_moe, c).mlp_hidden.count() == 369'098'752LL + 134'217'728 + 18'325'504 + 240);
}

TEST_CASE("LoRA under full recompute: a scaled or summed embedding output is a leaf kept to the end of backward", "[activations][lora]") {
  // enable_input_require_grads makes the frozen embedding's output a leaf that requires grad; GemmaModel multiplies it
  // by sqrt(hidden) into layer 0's input, and that multiply's node reaches the leaf's AccumulateGrad, which holds it.
  // Gemma-2B, s = 4096, b = 1, bf16: 2 x 4096 x 2048 = 16,777,216 B. The CPU step oracle's Gemma and Granite LoRA steps
  // under checkpointing read one c sbh short before (forward -3.56%, backward -2.88% at its base shape).
  const transformer_config gemma = find_preset("gemma-2b").config;
  activation_config c = hf_sdpa(4096);
  c.recomputation = recompute::full;
  const adaptation lora = peft_qv_r16();
  const stage_activations st = first_stage_activations(gemma, c, {}, lora);
  CHECK(st.embedding_output.count() == 16'777'216);
  CHECK(st.total - st.layers - st.input_ids - st.position_ids - st.rotary_tables - st.checkpoint_arguments - st.embedding_dropout -
            st.embedding_projection - st.output_layer - st.logits - st.vision ==
        bytes_of(16'777'216));
  // Not without recompute (no hook), not with the embedding trained (no leaf: it has a grad_fn), not where layer 0 reads
  // the embedding's output itself (Llama: it is the first checkpoint, counted there).
  activation_config none = c;
  none.recomputation = recompute::none;
  CHECK(first_stage_activations(gemma, none, {}, lora).embedding_output.count() == 0);
  CHECK(first_stage_activations(gemma, c).embedding_output.count() == 0);
  CHECK(first_stage_activations(find_preset("llama-2-7b").config, c, {}, lora).embedding_output.count() == 0);
  // The same shape with Granite's embedding_multiplier in place of Gemma's normalizer: the same 16,777,216 B.
  transformer_config granite = gemma;
  granite.scaled_embedding = false;
  granite.embedding_multiplier = true;
  CHECK(first_stage_activations(granite, c, {}, lora).embedding_output.count() == 16'777'216);
}

TEST_CASE("LoRA without recompute: the first layer's input needs no gradient", "[activations][lora]") {
  // The embedding is frozen and enable_input_require_grads runs only with gradient checkpointing, so layer 0's input
  // does not require grad. Llama-2-7B, s = 2048, b = 4, r = 16 on q_proj and v_proj: its input RMSNorm keeps nothing,
  // neither the fp32 copy (4 x 8192 x 4096 = 134,217,728 B) nor rstd (4 x 8192 = 32,768 B). Measured on an H200
  // (llama2-7b-lora16-sdpa-s2048-b4): 134,215,168 B below zeromem's before this term.
  const transformer_config llama = find_preset("llama-2-7b").config;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 4;
  adaptation lora = peft_qv_r16();
  stage_activations st = first_stage_activations(llama, c, {}, lora);
  CHECK(st.first_layer_unkept.count() == 134'217'728 + 32'768);
  CHECK(st.layers.count() == st.per_layer.total().count() * 32 - (134'217'728 + 32'768));
  // Phi-2 (parallel branches behind one LayerNorm), s = 2048, b = 4, the same targets: the LayerNorm's input and
  // statistics (2 x 8192 x 2560 + 2 x 4 x 8192 = 42,008,576 B), the whole MLP branch, frozen and reading a tensor without
  // grad (fc1's output and gelu_new's three, 4 x 2 x 8192 x 10240 = 671,088,640 B), and its residual dropout mask
  // (8192 x 2560 = 20,971,520 B): 734,068,736 B. Measured: 732,984,832 B (phi2-lora16-sdpa-s2048-b4).
  const transformer_config phi = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/phi-2.json");
  CHECK(first_stage_activations(phi, c, {}, lora).first_layer_unkept.count() == 734'068'736);
  // Qwen2.5-1.5B on every linear with dropout 0.05: the RMSNorm (4 x 8192 x 1536 + 4 x 8192 = 50,364,416 B) and the
  // 1-byte dropout masks of q, k and v over its output (3 x 8192 x 1536 = 37,748,736 B): 88,113,152 B. Measured:
  // 86,115,840 B (qwen1.5b-loraall16-sdpa-s2048-b4).
  const transformer_config qwen = find_preset("qwen2.5-1.5b").config;
  adaptation all{};
  all.lora.rank = 16;
  all.lora.targets = bit(lora_module::all_linear);
  all.lora.dropout = 0.05;
  CHECK(first_stage_activations(qwen, c, {}, all).first_layer_unkept.count() == 50'364'416 + 37'748'736);
  // Selective recompute recomputes inside each layer and is no gradient checkpointing in transformers: the same
  // 134,250,496 B are taken off (before 2026-11-29 they were not, and selective read above no recompute).
  c.recomputation = recompute::selective;
  CHECK(first_stage_activations(llama, c, {}, lora).first_layer_unkept.count() == 134'217'728 + 32'768);
  // Under full recompute (enable_input_require_grads), without LoRA, or adapting only up_proj of a sequential layer
  // (not modelled), nothing is taken off.
  c.recomputation = recompute::full;
  CHECK(first_stage_activations(llama, c, {}, lora).first_layer_unkept.count() == 0);
  c.recomputation = recompute::none;
  CHECK(first_stage_activations(llama, c).first_layer_unkept.count() == 0);
  lora.lora.targets = bit(lora_module::up_proj);
  CHECK(first_stage_activations(llama, c, {}, lora).first_layer_unkept.count() == 0);
  // down_proj alone: nothing before it needs a gradient, so layer 0 keeps down's adapter only. fp32 adapters: lora_A's
  // fp32 cast of the product (4 x 8192 x 11008 = 360,710,144 B) and lora_B's rank-r input (4 x 8192 x 16 = 524,288 B);
  // bf16 adapters: the product itself, which lora_A keeps (2 x 8192 x 11008 = 180,355,072 B), and 2 x 8192 x 16 =
  // 262,144 B. (A LoRA probe of the CPU step oracle on down_proj, ffn 2048: forward +40.0% before, exact with it.)
  lora.lora.targets = bit(lora_module::down_proj);
  const stage_activations down = first_stage_activations(llama, c, {}, lora);
  CHECK(down.per_layer.total().count() - down.first_layer_unkept.count() == 360'710'144 + 524'288);
  lora.lora.adapter_dtype = dtype::bf16;
  const stage_activations down_bf16 = first_stage_activations(llama, c, {}, lora);
  CHECK(down_bf16.per_layer.total().count() - down_bf16.first_layer_unkept.count() == 180'355'072 + 262'144);
}

TEST_CASE("LoRA without recompute: Qwen3's k_norm in the first layer keeps nothing where k_proj is not adapted", "[activations][lora]") {
  // Layer 0's input needs no gradient; with q_proj and v_proj adapted, nothing on K's path does either, so k_norm (an
  // RMSNorm over each key head's 128 values) keeps nothing. Qwen3-8B, s = 2048, b = 4 (sb = 8192), SDPA: the input norm
  // (4 x 8192 x 4096 + 4 x 8192 = 134,250,496 B, as Llama's) and k_norm's fp32 input and rstd over 8192 x 8 rows of 128
  // (4 x 8,388,608 + 4 x 65,536 = 33,816,576 B).
  const transformer_config qwen3 = find_preset("qwen3-8b").config;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 4;
  const adaptation qv = peft_qv_r16();
  CHECK(first_stage_activations(qwen3, c, {}, qv).first_layer_unkept.count() == 134'250'496 + 33'816'576);
  // Eager attention: QK^T keeps K for Q's gradient and not the rotated Q (2 x 8192 x 32 x 128 = 67,108,864 B); q_norm's
  // tensors, before RoPE, stay.
  c.attention = attention_kind::eager;
  CHECK(first_stage_activations(qwen3, c, {}, qv).first_layer_unkept.count() == 134'250'496 + 33'816'576 + 67'108'864);
  // With k_proj adapted too, K's path needs its gradient: only the input norm is taken off.
  adaptation qkvo = qv;
  qkvo.lora.targets = parse_lora_targets("q_proj,k_proj,v_proj,o_proj");
  CHECK(first_stage_activations(qwen3, c, {}, qkvo).first_layer_unkept.count() == 134'250'496);
}

TEST_CASE("LoRA without recompute: OLMo-2's whole-projection k_norm in the first layer keeps nothing either", "[activations][lora]") {
  // OLMo-2's layer has no input norm (its q, k and v read the layer input) and normalises each token's whole k_proj
  // output (Olmo2Attention: k_norm over kv x d values). With q_proj and v_proj adapted, nothing on K's path needs a
  // gradient in layer 0: k_norm keeps nothing. OLMo-2-13B (40 KV heads of 128, 5120 values a token), s = 2048, b = 1,
  // SDPA: its fp32 input and rstd, 4 x 2048 x 5120 + 4 x 2048 = 41,951,232 B.
  const transformer_config olmo2 = find_preset("olmo-2-13b").config;
  REQUIRE(olmo2.qk_norm_whole);
  activation_config c = hf_sdpa(2048);
  const adaptation qv = peft_qv_r16();
  CHECK(first_stage_activations(olmo2, c, {}, qv).first_layer_unkept.count() == 41'951'232);
  // Eager attention: nor the rotated Q, 2 x 2048 x 40 x 128 = 20,971,520 B (the CPU step oracle's OLMo-2 q, v case at
  // its base shape: +3.65% forward before, k_norm's 131,584 B and the rotated Q's 65,536 B).
  c.attention = attention_kind::eager;
  CHECK(first_stage_activations(olmo2, c, {}, qv).first_layer_unkept.count() == 41'951'232 + 20'971'520);
  // With k_proj adapted too, every projection's path needs its gradient, and OLMo-2 has no input norm to take off.
  adaptation qkvo = qv;
  qkvo.lora.targets = parse_lora_targets("q_proj,k_proj,v_proj,o_proj");
  CHECK(first_stage_activations(olmo2, c, {}, qkvo).first_layer_unkept.count() == 0);
}

TEST_CASE("LoRA without recompute: Gemma-2's soft-capped eager scores keep no rotated Q in the first layer either", "[activations][lora]") {
  // Gemma-2's eager attention (modeling_gemma2.py eager_attention_forward): matmul(Q, K^T) * scaling, then / softcap, tanh,
  // * softcap. The matmul keeps Q only for K's gradient; the scalings by Python floats keep nothing and tanh keeps its own
  // output. With q_proj and v_proj adapted and k_proj not, layer 0 keeps no rotated Q, as Llama's does. Gemma-2-9B (16 heads
  // of 256), s = 2048, b = 1: 2 B x 2048 x 16 x 256 = 16,777,216 B more than with k_proj adapted too, where only the input
  // norm is taken off (the CPU step oracle's LoRA draw on q_proj and v_proj, seed 803: +0.53% forward, +0.51% backward before).
  const transformer_config gemma2 = find_preset("gemma-2-9b").config;
  REQUIRE(gemma2.attention_softcap == 50.0);
  activation_config c = hf_sdpa(2048);
  c.attention = attention_kind::eager;
  adaptation qkvo = peft_qv_r16();
  qkvo.lora.targets = parse_lora_targets("q_proj,k_proj,v_proj,o_proj");
  CHECK((first_stage_activations(gemma2, c, {}, peft_qv_r16()).first_layer_unkept - first_stage_activations(gemma2, c, {}, qkvo).first_layer_unkept)
            .count() == 16'777'216);
}

TEST_CASE("LoRA without recompute: a training forward's KV cache still holds the first layer's K and V", "[activations][lora]") {
  // config.json's use_cache builds a DynamicCache in a training forward without checkpointing (modeling_llama.py
  // LlamaModel.forward), and SDPA without a mask keeps the cache's own K and V (cache_utils.py DynamicLayer.update). The MLP
  // adapted alone, layer 0's attention keeps nothing for backward, but the cache holds its K and V until the model's output
  // is freed. Llama-2-7B (MHA), s = 2048, b = 4: 2 x 2 B x 8192 x 32 heads x 128 = 134,217,728 B.
  transformer_config llama = find_preset("llama-2-7b").config;
  llama.use_cache = true;
  activation_config c = hf_sdpa(2048);
  c.micro_batch = 4;
  adaptation mlp{};
  mlp.lora.rank = 16;
  mlp.lora.targets = bit(lora_module::gate_proj) | bit(lora_module::up_proj) | bit(lora_module::down_proj);
  const stage_activations st = first_stage_activations(llama, c, {}, mlp);
  CHECK(st.first_layer_cache_held.count() == 134'217'728);
  CHECK(st.first_layer_unkept.count() > st.first_layer_cache_held.count());  // still among what backward does not see
  // Llama-3-8B (GQA, 8 key/value heads of 128): 2 x 2 B x 8192 x 8 x 128 = 33,554,432 B.
  transformer_config llama3 = find_preset("llama-3-8b").config;
  llama3.use_cache = true;
  CHECK(first_stage_activations(llama3, c, {}, mlp).first_layer_cache_held.count() == 33'554'432);
  // Eager attention with GQA keeps repeat_kv's copies, and the cache's own are counted apart on every layer
  // (forward_kv_cache_bytes); without use_cache, or under full recompute (no cache), nothing is held here.
  activation_config eager = c;
  eager.attention = attention_kind::eager;
  CHECK(forward_kv_cache_bytes(llama3, eager).count() == 33'554'432);
  CHECK(first_stage_activations(llama3, eager, {}, mlp).first_layer_cache_held.count() == 0);
  CHECK(first_stage_activations(find_preset("llama-2-7b").config, c, {}, mlp).first_layer_cache_held.count() == 0);
  c.recomputation = recompute::full;
  CHECK(first_stage_activations(llama, c, {}, mlp).first_layer_cache_held.count() == 0);
}
