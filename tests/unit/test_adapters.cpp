// Parameter-efficient training: LoRA adapter counts, frozen parameters, a quantized base, a paged optimizer.
// Each expected value is a published figure (PEFT's print_trainable_parameters, the LoRA and QLoRA papers) or a
// derivation written out here.
#include <cmath>
#include <stdexcept>

#include "catch.hpp"
#include "zeromem/zeromem.hpp"

using namespace zeromem;

namespace {

lora_config lora(std::int64_t r, const char* targets, dtype d = dtype::fp32) {
  lora_config c{};
  c.rank = r;
  c.targets = parse_lora_targets(targets);
  c.adapter_dtype = d;
  return c;
}

// LLaMA-65B and -33B (Touvron et al. 2023, Table 2: dimension 8192 / 6656, heads 64 / 52, layers 80 / 60; FFN
// 22016 / 17920 and vocabulary 32000 from the Hugging Face configs of huggyllama/llama-65b and -30b).
transformer_config llama1(std::int64_t h, std::int64_t layers, std::int64_t heads, std::int64_t ffn) {
  transformer_config m{};
  m.hidden = h; m.layers = layers; m.heads = heads; m.kv_heads = heads; m.ffn = ffn; m.vocab = 32000;
  return m;
}

}  // namespace

// constexpr: an adapter count is usable in a static_assert. 32 layers x 2 modules x 8 x (4096 + 4096).
static_assert(count_lora_parameters(preset_config("llama-2-7b"), lora_config{8, 1 | 4, 0.0, dtype::fp32}).total ==
              elements_of(4'194'304));

TEST_CASE("lora: PEFT's trainable-parameter counts for the preset models", "[lora]") {
  // PEFT's documented example for meta-llama/Llama-2-7b-hf with LoraConfig(r=8, target_modules=["q_proj", "v_proj"]):
  // "trainable params: 4,194,304 || all params: 6,742,609,920 || trainable%: 0.0622".
  const transformer_config llama2 = preset_config("llama-2-7b");
  const lora_counts q_v = count_lora_parameters(llama2, lora(8, "q_proj,v_proj"));
  CHECK(q_v.total.count() == 4'194'304);
  CHECK((count_parameters(llama2).total + q_v.total).count() == 6'742'609'920);
  CHECK(100.0 * static_cast<double>(q_v.total.count()) / 6'742'609'920.0 == Approx(0.0622).margin(0.00005));

  // Llama-3-8B, r = 16 on the seven projections (or "all-linear"): "trainable params: 41,943,040 || all params:
  // 8,072,204,288 || trainable%: 0.5196". Per layer: q and o 16 (4096 + 4096) each, k and v 16 (4096 + 1024) each,
  // gate, up and down 16 (4096 + 14336) each: 2 x 131,072 + 2 x 81,920 + 3 x 294,912 = 1,310,720; x 32 layers.
  const transformer_config llama3 = preset_config("llama-3-8b");
  const lora_counts seven = count_lora_parameters(llama3, lora(16, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj"));
  CHECK(seven.per_layer.count() == 1'310'720);
  CHECK(seven.total.count() == 41'943'040);
  CHECK((count_parameters(llama3).total + seven.total).count() == 8'072'204'288);
  CHECK(count_lora_parameters(llama3, lora(16, "all-linear")).total == seven.total);  // lm_head is not a target
  CHECK(seven.largest_tensor.count() == 16 * 14'336);  // lora_B of gate/up, lora_A of down

  // Qwen2.5-7B (h 3584, 4 kv heads of 128, ffn 18944, 28 layers), r = 8 on q_proj and v_proj:
  // 28 x 8 x ((3584 + 3584) + (3584 + 512)) = 2,523,136.
  CHECK(count_lora_parameters(preset_config("qwen2.5-7b"), lora(8, "q_proj,v_proj")).total.count() == 2'523'136);
}

TEST_CASE("lora: the LoRA paper's GPT-3 175B figures", "[lora]") {
  // Hu et al. 2021 (arXiv 2106.09685) §4.2: "with r = 4 and only the query and value projection matrices being
  // adapted, the checkpoint size is reduced by roughly 10,000x (from 350GB to 35MB)" and "we reduce the VRAM
  // consumption during training from 1.2TB to 350GB". 96 layers x 2 x 4 x (12288 + 12288) = 18,874,368 adapter
  // parameters (on the fused qkv module of the preset, as slices: loralib MergedLinear).
  const transformer_config gpt3 = preset_config("gpt3-175b");
  const lora_counts c = count_lora_parameters(gpt3, lora(4, "q_proj,v_proj"));
  CHECK(c.total.count() == 18'874'368);
  // Its largest adapter tensor is one slice's: lora_A 4 x 12288 or lora_B 12288 x 4 = 49,152, not the fused
  // module's 36864 x 4 = 147,456 (q and v are adapted as slices; k and the MLP not at all).
  CHECK(c.largest_tensor.count() == 49'152);
  // In fp16: 37,748,736 B = 36.0 MiB, which the paper rounds to "35MB" (within 8%).
  CHECK(to_gb(c.total * size_of(dtype::fp16)) / 0.035 == Approx(1.0).margin(0.08));

  // Training VRAM: the frozen fp16 weights plus the adapters with their gradients and Adam moments. The paper's
  // 350 GB is the fp16 model (175e9 x 2 B); zeromem's GPT-3 has 174,604,259,328 parameters (test_model.cpp).
  training_states t{};
  t.recipe = recipe_of(precision::fp16);
  t.adapt.lora = lora(4, "q_proj,v_proj");
  t = states_on_rank(gpt3, count_parameters(gpt3), t, 1, 1);
  CHECK(t.params.count() == 18'874'368);
  CHECK(t.frozen.count() == 174'604'259'328);
  const bytes states = estimate_model_states(t).gpu();
  // 349,208,518,656 B frozen + 18,874,368 x (4 + 4 + 8) B of fp32 adapters, gradients and moments.
  CHECK(states.count() == 349'208'518'656 + 18'874'368 * 16);
  CHECK(to_gb(states) / 350.0 == Approx(1.0).margin(0.01));
  // The 1.2 TB of full fine-tuning is not reproduced: the paper does not state the recipe behind it
  // (docs/formulas.md): 16 B per parameter with fp32 master weights and Adam gives 2.79 TB, 8 B gives 1.40 TB.
}

TEST_CASE("lora: the for-loop optimizer meets a fused qkv module's adapted slices as their own tensors", "[lora]") {
  // Two consecutive tensors at once (current 1, carried 1). GPT-3's q and v slices at r = 8: lora_A 8 x 12288 and
  // lora_B 12288 x 8, 98,304 each, two of them 196,608. Taken as the whole qkv module (their parameters, 2 x 8 x
  // (12288 + 12288), equal 8 x (12288 + 36864)), lora_B would be 36,864 x 8 = 294,912 beside the next lora_A: 393,216.
  CHECK(lora_forloop_moment_elements(preset_config("gpt3-175b"), lora(8, "q_proj,v_proj"), 1, 1, 1, 0, 0) == 196'608);
  // Llama-2-7B's separate q_proj and v_proj at r = 8: 32,768 each, 65,536 for two.
  CHECK(lora_forloop_moment_elements(preset_config("llama-2-7b"), lora(8, "q_proj,v_proj"), 1, 1, 1, 0, 0) == 65'536);
}

TEST_CASE("lora: the adapters DeepSpeed ZeRO-3 keeps gathered, tensor by tensor against the persistence threshold", "[lora][zero3]") {
  // Llama-3-8B, r = 16 on the seven projections, threshold 1e5: q's and o's lora_A and lora_B, 16 x 4096 = 65,536
  // each; k's and v's lora_A 65,536 and lora_B 1024 x 16 = 16,384; gate's and up's lora_A 65,536 (their lora_B,
  // 14336 x 16 = 229,376, is above); down's lora_B 65,536 (its lora_A above). Per layer: 2 x 131,072 + 2 x 81,920 +
  // 3 x 65,536 = 622,592 of the 1,310,720.
  const transformer_config llama3 = preset_config("llama-3-8b");
  const lora_config seven = lora(16, "q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj");
  CHECK(persistent_lora_elements(llama3, seven, 100'000).per_layer == elements_of(622'592));
  CHECK(persistent_lora_elements(llama3, seven, 100'000).vision == elements{});
  // Over 2 tensor-parallel ranks each tensor halves, 229,376 to 114,688, still above: 311,296. Over 4 (57,344) every
  // tensor is below: the layer's 1,310,720 / 4 = 327,680.
  CHECK(persistent_lora_elements(llama3, seven, 100'000, 2).per_layer == elements_of(311'296));
  CHECK(persistent_lora_elements(llama3, seven, 100'000, 4).per_layer == elements_of(327'680));
  // The threshold is inclusive (ds_numel <= threshold): at 65,535 only k's and v's lora_B remain, 2 x 16,384.
  CHECK(persistent_lora_elements(llama3, seven, 65'536).per_layer == elements_of(622'592));
  CHECK(persistent_lora_elements(llama3, seven, 65'535).per_layer == elements_of(32'768));
  CHECK(persistent_lora_elements(llama3, seven, 0).per_layer == elements{});
  // GPT-3's fused qkv, adapted as q and v slices: r = 8 gives 8 x 12288 = 98,304 a tensor, all four kept (393,216); r = 16
  // none (196,608 each).
  const transformer_config gpt3 = preset_config("gpt3-175b");
  CHECK(persistent_lora_elements(gpt3, lora(8, "q_proj,v_proj"), 100'000).per_layer == elements_of(393'216));
  CHECK(persistent_lora_elements(gpt3, lora(16, "q_proj,v_proj"), 100'000).per_layer == elements{});
  // Qwen2.5-VL-7B, r = 16 on gate_proj: the vision tower's blocks have one too (1280 -> 3420), both tensors below, 32 x
  // 16 x (1280 + 3420) = 2,406,400; the text layers' lora_A is 16 x 3584 = 57,344, their lora_B 18944 x 16 above.
  const lora_persistent vl = persistent_lora_elements(preset_config("qwen2.5-vl-7b"), lora(16, "gate_proj"), 100'000);
  CHECK(vl.vision == elements_of(2'406'400));
  CHECK(vl.per_layer == elements_of(57'344));
  // Bad input names the fix.
  CHECK_THROWS_WITH(persistent_lora_elements(llama3, seven, -1), Catch::Contains("cannot be negative") && Catch::Contains("1e5"));
  CHECK_THROWS_WITH(persistent_lora_elements(llama3, seven, 100'000, 0), Catch::Contains("tensor-parallel degree"));
  CHECK_THROWS_WITH(persistent_lora_elements(llama3, lora(16, "fc1"), 100'000), Catch::Contains("no fc1 module"));
}

TEST_CASE("lora: targets the model does not have, and bad LoRA settings, are one-line errors", "[lora][errors]") {
  const transformer_config llama2 = preset_config("llama-2-7b");
  CHECK_THROWS_WITH(parse_lora_targets("q_proj,w1"), Catch::Contains("unknown LoRA target 'w1'") && Catch::Contains("all-linear"));
  CHECK_THROWS_WITH(count_lora_parameters(llama2, lora(8, "fc1")), Catch::Contains("no fc1 module") && Catch::Contains("gate_proj"));
  CHECK_THROWS_WITH(count_lora_parameters(llama2, lora(8, "qkv")), Catch::Contains("no qkv module"));
  CHECK_THROWS_WITH(count_lora_parameters(llama2, lora_config{8, 0, 0.0, dtype::fp32}), Catch::Contains("--lora-targets"));
  CHECK_THROWS_WITH(count_lora_parameters(llama2, lora_config{0, 1, 0.0, dtype::fp32}), Catch::Contains("--lora-rank"));
  CHECK_THROWS_WITH(count_lora_parameters(llama2, lora(8, "q_proj", dtype::int8)), Catch::Contains("fp32, bf16 or fp16"));
  adaptation quantized_only{};
  quantized_only.quantize = quantization::nf4;
  CHECK_THROWS_WITH(split_parameters(llama2, count_parameters(llama2), quantized_only, dtype::bf16), Catch::Contains("--lora-rank"));
}

TEST_CASE("qlora: NF4 storage with and without double quantization, and int8", "[lora][qlora]") {
  // QLoRA §3: blocks of 64 weights with an fp32 absmax cost 32/64 = 0.5 bit per parameter; double quantization
  // stores 8-bit absmaxes with one fp32 constant per 256 blocks: 8/64 + 32/(64 x 256) = 0.127 bit.
  // One 4096 x 4096 matrix (16,777,216 weights, 262,144 blocks of 64):
  //   4-bit data 8,388,608 B; double-quantized constants 262,144 + 4 x 1024 = 266,240 B; plain 4 x 262,144 B.
  CHECK(quantized_weight_bytes(4096, 4096, quantization::nf4, true).count() == 8'388'608 + 266'240);
  CHECK(quantized_weight_bytes(4096, 4096, quantization::nf4, false).count() == 8'388'608 + 1'048'576);
  const double bits_dq = 8.0 * static_cast<double>(quantized_weight_bytes(4096, 4096, quantization::nf4, true).count()) / 16'777'216.0;
  CHECK(bits_dq - 4.0 == Approx(0.127).margin(0.0005));
  const double bits_plain = 8.0 * static_cast<double>(quantized_weight_bytes(4096, 4096, quantization::nf4, false).count()) / 16'777'216.0;
  CHECK(bits_plain - 4.0 == Approx(0.5));
  // LLM.int8(): one byte per weight and one fp32 scale per output row (bitsandbytes Int8Params CB, SCB).
  CHECK(quantized_weight_bytes(4096, 11008, quantization::int8, false).count() == 4096LL * 11008 + 4 * 11008);

  // Llama-2-7B with an NF4 base: its 32 x (4 x 4096^2 + 3 x 4096 x 11008) linear weights are quantized; norms,
  // embedding and lm_head stay bf16. 4096^2: 8,654,848 B (above); 4096 x 11008 = 45,088,768 weights: 22,544,384 B
  // of data, 704,512 blocks -> 704,512 + 4 x 2752 = 715,520 B of constants.
  adaptation q{};
  q.lora = lora(16, "q_proj,v_proj");
  q.quantize = quantization::nf4;
  const transformer_config llama2 = preset_config("llama-2-7b");
  const parameter_split s = split_parameters(llama2, count_parameters(llama2), q, dtype::bf16);
  const std::int64_t layer_linears = 4 * 8'654'848 + 3 * (22'544'384 + 715'520);
  const std::int64_t layer_norms = 2 * 4096 * 2;
  CHECK(s.layer_frozen_bytes.count() == layer_linears + layer_norms);
  CHECK(s.embedding_frozen_bytes.count() == 32000LL * 4096 * 2);
  CHECK(s.head_frozen_bytes.count() == (32000LL * 4096 + 4096) * 2);
  // The 16-bit copy of the largest quantized weight (4096 x 11008) dequantized for its matmul.
  CHECK(s.dequantized_weight.count() == 4096LL * 11008 * 2);
}

TEST_CASE("qlora: the paper's 65B in 48 GB and 33B in 24 GB, under qlora.py's settings", "[lora][qlora]") {
  // Dettmers et al. 2023 (arXiv 2305.14314), abstract: "finetune a 65B parameter model on a single 48GB GPU"; §1:
  // Guanaco 33B "can be trained on a single consumer GPU" (24 GB). The settings are those of the paper's code
  // (artidoro/qlora scripts/finetune_guanaco_65b.sh and _33b.sh, qlora.py): NF4 with double quantization, LoRA
  // r = 64 on every linear layer but lm_head with dropout 0.05, LoRA layers cast to bf16, paged_adamw_32bit,
  // gradient checkpointing, 4 sequences of at most 16 + 512 tokens.
  const auto peak = [](const transformer_config& m) {
    training_states t{};
    t.recipe = recipe_of(precision::bf16);
    t.adapt.lora = lora(64, "all-linear", dtype::bf16);
    t.adapt.lora.dropout = 0.05;
    t.adapt.quantize = quantization::nf4;
    t.adapt.paged_optimizer = true;
    activation_config a{};
    a.seq_len = 528;
    a.micro_batch = 4;
    a.recomputation = recompute::full;
    return estimate_step(m, t, a, step_config{});
  };
  const transformer_config llama65 = llama1(8192, 80, 64, 22016), llama33 = llama1(6656, 60, 52, 17920);
  // The architectures: 65,285,660,672 and 32,528,943,616 parameters (Table 2 prints 65.2B and 32.5B).
  CHECK(count_parameters(llama65).total.count() == 65'285'660'672);
  CHECK(count_parameters(llama33).total.count() == 32'528'943'616);
  const step_estimate e65 = peak(llama65), e33 = peak(llama33);
  CHECK(e65.device_used() < bytes_of(48'000'000'000));
  CHECK(e33.device_used() < bytes_of(24'000'000'000));
  // Not by a wide margin: the quantized base alone is 34.5 GB and 17.4 GB.
  CHECK(e65.device_used() > bytes_of(36'000'000'000));
  CHECK(e33.device_used() > bytes_of(18'000'000'000));
  // QLoRA §1: "regular 16-bit finetuning of a LLaMA 65B parameter model requires more than 780 GB of GPU memory":
  // 16-bit weights and gradients with 32-bit Adam states, 2 + 2 + 8 = 12 B per parameter = 783.4 GB.
  training_states full{};
  full.params = count_parameters(llama65).total;
  full.recipe = recipe_of(precision::bf16);
  full.adapt.paged_optimizer = true;  // 32-bit states for 16-bit weights, as bitsandbytes' 32-bit optimizers keep them
  const model_state_estimate f = estimate_model_states(full);
  CHECK((f.gpu() + f.host_per_rank()).count() == 65'285'660'672LL * 12);
  CHECK(to_gb(f.gpu() + f.host_per_rank()) > 780.0);
}

TEST_CASE("lora: model states of a LoRA job, term by term", "[lora]") {
  // Llama-2-7B bf16, r = 16 on q and v: 8,388,608 fp32 adapters (PEFT's autocast_adapter_dtype) with fp32 gradients
  // and two fp32 Adam moments; the frozen base 6,738,415,616 x 2 B.
  const transformer_config m = preset_config("llama-2-7b");
  training_states t{};
  t.recipe = recipe_of(precision::bf16);
  t.adapt.lora = lora(16, "q_proj,v_proj");
  t = states_on_rank(m, count_parameters(m), t, 1, 1);
  const model_state_estimate e = estimate_model_states(t);
  CHECK(e.per_rank.frozen_weights.gpu.count() == 13'476'831'232);
  CHECK(e.per_rank.weights.gpu.count() == 8'388'608 * 4);
  CHECK(e.per_rank.gradients.gpu.count() == 8'388'608 * 4);
  CHECK(e.per_rank.optimizer_moments.gpu.count() == 8'388'608 * 8);
  CHECK(e.per_rank.master_weights.gpu.count() == 0);

  // Under a mixed recipe (DeepSpeed bf16) the adapters follow it: 16-bit working copy and gradients, fp32 master.
  training_states mixed = t;
  mixed.recipe = recipe_of(precision::mixed_bf16);
  const model_state_estimate em = estimate_model_states(mixed);
  CHECK(em.per_rank.weights.gpu.count() == 8'388'608 * 2);
  CHECK(em.per_rank.master_weights.gpu.count() == 8'388'608 * 4);

  // ZeRO-3 over 8 ranks shards the frozen weights with the rest.
  training_states z3 = t;
  z3.dp = 8;
  z3.zero.stage = 3;
  CHECK(estimate_model_states(z3).per_rank.frozen_weights.gpu.count() == 13'476'831'232 / 8);
  // It gathers the largest layer (the 32000 x 4096 embedding) whole, without a gradient: the base is frozen.
  z3.largest_layer = elements_of(131'072'000);
  CHECK(estimate_model_states(z3).per_rank.gathered_layer.gpu.count() == 131'072'000LL * 2);

  // A paged optimizer: the 32-bit moments live in host RAM (unified memory the driver evicts), none on the GPU.
  training_states paged = t;
  paged.adapt.paged_optimizer = true;
  const model_state_estimate ep = estimate_model_states(paged);
  CHECK(ep.per_rank.optimizer_moments.gpu.count() == 0);
  CHECK(ep.per_rank.optimizer_moments.host.count() == 8'388'608 * 8);
  paged.zero.stage = 2;
  paged.zero.optimizer.device = offload_device::cpu;
  CHECK_THROWS_WITH(estimate_model_states(paged), Catch::Contains("--paged-optimizer"));
}

TEST_CASE("freeze: a frozen vision tower or embedding keeps its weights and nothing else", "[lora][freeze]") {
  // Qwen2.5-VL-7B: 8,292,166,656 parameters, of which the vision tower 676,550,144 (test_model.cpp). Frozen, the
  // tower costs 2 B per parameter in bf16 instead of the recipe's 2 + 2 + 4 + 8 (mixed bf16 AdamW).
  const transformer_config m = preset_config("qwen2.5-vl-7b");
  const parameter_counts c = count_parameters(m);
  training_states t{};
  t.recipe = recipe_of(precision::mixed_bf16);
  t.adapt.freeze_vision = true;
  t = states_on_rank(m, c, t, 1, 1);
  CHECK(t.frozen == c.vision);
  CHECK(t.params == c.total - c.vision);
  CHECK(t.frozen_weights == c.vision * size_of(dtype::bf16));
  const model_state_estimate e = estimate_model_states(t);
  CHECK(e.gpu() == (c.total - c.vision) * bytes_per_element_of(16) + c.vision * size_of(dtype::bf16));

  adaptation no_tower{};
  no_tower.freeze_vision = true;
  CHECK_THROWS_WITH(split_parameters(preset_config("llama-2-7b"), count_parameters(preset_config("llama-2-7b")), no_tower, dtype::bf16),
                    Catch::Contains("no vision tower"));
}

TEST_CASE("paged optimizer: no states on the GPU under FSDP2 either", "[lora][fsdp]") {
  // Llama-2-7B bf16, r = 16 on q and v, FSDP2 over 8 ranks. Resting per rank: the 8,388,608 fp32 adapters / 8 =
  // 1,048,576 x 4 B, their two fp32 moments 1,048,576 x 8 B, and the bf16 base 13,476,831,232 B / 8.
  const transformer_config m = preset_config("llama-2-7b");
  training_states t{};
  t.recipe = recipe_of(precision::bf16);
  t.adapt.lora.rank = 16;
  t.adapt.lora.targets = parse_lora_targets("q_proj,v_proj");
  t.dp = 8;
  t.zero.stage = 3;
  activation_config a{};
  a.seq_len = 1024;
  a.recomputation = recompute::full;
  step_config s{};
  s.fsdp_world = 8;
  CHECK(estimate_step(m, t, a, s).optimizer_step.resting.count() == 1'048'576LL * 4 + 1'048'576LL * 8 + 13'476'831'232LL / 8);
  t.adapt.paged_optimizer = true;
  CHECK(estimate_step(m, t, a, s).optimizer_step.resting.count() == 1'048'576LL * 4 + 13'476'831'232LL / 8);
}
