// Parameter counts against the publishers' figures and hand derivations.
#include <algorithm>
#include <cstdlib>
#include <string>

#include "catch.hpp"
#include "zeromem/model/adapters.hpp"
#include "zeromem/model/hf_config.hpp"
#include "zeromem/model/model.hpp"

using namespace zeromem;

TEST_CASE("presets reproduce the publishers' parameter counts", "[model][published]") {
  // Publishers that round: the exact count, derived module by module in the named test, rounds to their figure.
  struct rounded_count {
    const char* name;
    std::int64_t exact;
    const char* derived_in;
  };
  const rounded_count rounded[] = {
      {"qwen3-8b", 8'190'735'360LL, "Qwen3's q_norm and k_norm"},                                    // card: 8.2B
      {"qwen2.5-3b", 3'085'938'688LL, "Qwen2.5-1.5B and 3B component by component"},                 // card: 3.09B
      {"phi-3-mini", 3'821'079'552LL, "Phi-3-mini's fused projections, written out"},                // report: 3.8B
      {"qwen3-30b-a3b", 30'532'122'624LL, "Qwen3-30B-A3B's experts, written out"},                   // card: 30.5B
      {"olmoe-1b-7b", 6'919'161'856LL, "OLMoE-1B-7B's experts and whole-projection q_norm / k_norm"},  // paper: 6.9B
      {"qwen1.5-moe-a2.7b", 14'315'784'192LL, "Qwen1.5-MoE-A2.7B's shared expert and its gate"},     // card: 14.3B
      {"gemma-3-1b", 999'885'952LL, "Gemma-3's text model, written out"},  // report: 302M embedding + 698M non-embedding
  };
  for (const model_preset& p : model_presets) {
    INFO(p.name << " (" << p.source << ")");
    const std::int64_t counted = count_parameters(p.config).total.count();
    const auto r = std::find_if(std::begin(rounded), std::end(rounded), [&](const rounded_count& c) { return p.name == c.name; });
    if (p.published_precision == 1) {
      CHECK(counted == p.published_total);
    } else if (r != std::end(rounded)) {
      INFO("derived in \"" << r->derived_in << "\"");
      CHECK(counted == r->exact);
      CHECK(std::abs(p.published_total - counted) <= p.published_precision / 2);
    } else if (p.name == "gemma-2-2b" || p.name == "gemma-2-9b") {
      // The Gemma 2 report counts the embedding with 256,128 rows as well: 128 x hidden more than config.json's (derived
      // in "Gemma-2's parameters and what it keeps, written out").
      CHECK(counted == (p.name == "gemma-2-2b" ? 2'614'341'888LL : 9'241'705'984LL));
      CHECK(p.published_total - counted == 128 * p.config.hidden);
    } else if (p.name == "gemma-2b") {
      // The Gemma report counts the embedding with 256,128 rows; config.json's vocab_size is 256,000: 128 x 2048 =
      // 262,144 fewer, all of the difference (derived in "Gemma's parameters, written out").
      CHECK(counted == 2'506'172'416LL);
      CHECK(p.published_total - counted == 128 * 2048);
    } else {
      // GPT-3: the paper's 175.0B vs 174,604,259,328 from its architecture, 395,740,672 (0.23%) unexplained.
      CHECK(p.name == "gpt3-175b");
      CHECK(p.published_total - counted == 395'740'672);
    }
  }
}

TEST_CASE("Qwen2.5-1.5B and 3B component by component", "[model]") {
  // Qwen2 text models (tied embeddings, q/k/v biases, 2 KV heads of 128):
  // 1.5B: embedding 151936 x 1536 = 233,373,696; attention q 1536x1536+1536, k and v 1536x256+256, o 1536x1536 =
  //   5,507,072; SwiGLU 3 x 1536 x 8960 = 41,287,680; two RMSNorms 3,072; layer 46,797,824; x 28 + final norm 1,536.
  // 3B: embedding 151936 x 2048 = 311,164,928; attention q 2048x2048+2048 = 4,196,352, k and v 2048x256+256 = 524,544
  //   each, o 2048x2048 = 4,194,304: 9,439,744; SwiGLU 3 x 2048 x 11008 = 67,633,152; two RMSNorms 4,096; layer
  //   77,076,992; x 36 + final norm 2,048 = 3,085,938,688 (its card: 3.09B, 2.77B without embeddings).
  struct expected {
    const char* name;
    std::int64_t embedding, attention, mlp, norms, layer, layers, final_norm;
  };
  for (const expected& e : {expected{"qwen2.5-1.5b", 233'373'696, 5'507'072, 41'287'680, 3'072, 46'797'824, 28, 1'536},
                            expected{"qwen2.5-3b", 311'164'928, 9'439'744, 67'633'152, 4'096, 77'076'992, 36, 2'048}}) {
    INFO(e.name);
    const parameter_counts c = count_parameters(find_preset(e.name).config);
    CHECK(c.embedding.count() == e.embedding);
    CHECK(c.attention.count() == e.attention);
    CHECK(c.mlp.count() == e.mlp);
    CHECK(c.norms.count() == e.norms);
    CHECK(c.layer.count() == e.layer);
    CHECK(c.lm_head.count() == 0);  // tied: no output matrix
    CHECK(c.total.count() == e.embedding + e.layers * e.layer + e.final_norm);
    CHECK(c.largest_layer.count() == e.embedding);  // the embedding is the largest module
  }
  CHECK(count_parameters(find_preset("qwen2.5-3b").config).total.count() == 3'085'938'688);
  CHECK(count_parameters(find_preset("qwen2.5-3b").config).total.count() - 311'164'928 == 2'774'773'760);  // "2.77B"
}

TEST_CASE("Qwen2.5-VL-7B vision tower", "[model][published]") {
  // docs/references.md §7: 676,550,144 = 32 blocks x 19,702,200 + Conv3d 3x2x14x14x1280 = 1,505,280
  // + merger 1280 + (5120x5120 + 5120) + (5120x3584 + 3584) = 44,574,464.
  const parameter_counts c = count_parameters(find_preset("qwen2.5-vl-7b").config);
  CHECK(c.vision.count() == 676'550'144);
  CHECK(c.language_model.count() == 7'615'616'512);
  CHECK(c.total.count() == 8'292'166'656);
}

TEST_CASE("GPT-3 175B by the formula 12Lh^2 + 13Lh + (V + P)h + 2h", "[model]") {
  // 12 x 96 x 12288^2 = 173,946,175,488; 13 x 96 x 12288 = 15,335,424;
  // (50257 + 2048) x 12288 = 642,723,840; final LayerNorm 24,576.
  CHECK(count_parameters(find_preset("gpt3-175b").config).total.count() ==
        173'946'175'488LL + 15'335'424 + 642'723'840 + 24'576);
}

TEST_CASE("largest layer as DeepSpeed counts it", "[model]") {
  // Llama-2-7B: the embedding (and the untied lm_head), 32000 x 4096 = 131,072,000.
  CHECK(count_parameters(find_preset("llama-2-7b").config).largest_layer.count() == 131'072'000);
  // A GELU model with a small vocabulary: fc1 with bias, 256 x 1024 + 1024 = 263,168.
  transformer_config m{};
  m.hidden = 256; m.layers = 2; m.heads = 4; m.kv_heads = 4; m.ffn = 1024; m.vocab = 100;
  m.mlp = mlp_kind::gelu; m.mlp_bias = true;
  CHECK(count_parameters(m).largest_layer.count() == 263'168);
}

TEST_CASE("mixture of experts counts every expert and the router", "[model]") {
  // 8 experts of SwiGLU 3 x 64 x 128 = 24,576 each, router 64 x 8 = 512: 197,120 per layer MLP.
  transformer_config m{};
  m.hidden = 64; m.layers = 1; m.heads = 4; m.kv_heads = 4; m.ffn = 256; m.vocab = 10;
  m.moe.experts = 8; m.moe.top_k = 2; m.moe.expert_ffn = 128;
  CHECK(count_parameters(m).mlp.count() == 8 * 24'576 + 512);
}

TEST_CASE("parameters per tensor- and pipeline-parallel rank", "[model]") {
  // GPT-3, tp 8, pp 8 (Megatron's most loaded shard): first stage 12 layers x 1,812,099,072 plus word and
  // position embeddings 617,558,016 + 25,165,824 = 22,387,912,704, over 8 ranks = 2,798,489,088.
  const stage_parameters s = parameters_per_rank(find_preset("gpt3-175b").config, 8, 8);
  CHECK(s.first_stage.count() == 2'798'489'088);
  // Last stage: 12 layers + final LayerNorm 24,576 + a copy of the tied embedding 617,558,016.
  CHECK(s.last_stage.count() == (12 * 1'812'099'072LL + 24'576 + 617'558'016) / 8);
  CHECK(s.most_loaded == s.first_stage);
  CHECK(parameters_per_rank(find_preset("llama-2-7b").config, 1, 1).most_loaded.count() == 6'738'415'616);
  CHECK_THROWS_WITH(parameters_per_rank(find_preset("llama-2-7b").config, 1, 64), Catch::Matchers::Contains("more stages than layers"));
}

TEST_CASE("Hugging Face config.json fixtures", "[model][hf]") {
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  CHECK(count_parameters(read_hf_config(dir + "qwen2.5-1.5b.json")).total.count() == 1'543'714'304);
  CHECK(count_parameters(read_hf_config(dir + "qwen2.5-7b.json")).total.count() == 7'615'616'512);
  CHECK(count_parameters(read_hf_config(dir + "llama-3-70b.json")).total.count() == 70'553'706'496);
  CHECK(count_parameters(read_hf_config(dir + "qwen2.5-vl-7b.json")).total.count() == 8'292'166'656);
  CHECK(count_parameters(read_hf_config(dir + "mistral-7b.json")).total.count() == 7'241'732'096);  // Mistral-7B-v0.1
  CHECK(count_parameters(read_hf_config(dir + "gpt2.json")).total.count() == 124'439'808);         // GPT-2 small
  // GPT2Config's dropouts default to 0.1 (attn_pdrop, resid_pdrop, embd_pdrop); the calibration's GPT-2 XL sets 0.0.
  const transformer_config gpt2 = read_hf_config(dir + "gpt2.json");
  CHECK(gpt2.attention_dropout == 0.1);
  CHECK(gpt2.residual_dropout == 0.1);
  CHECK(gpt2.embedding_dropout == 0.1);
  const transformer_config xl = read_hf_config(ZEROMEM_DATA_DIR "/calibration/configs/gpt2-xl/config.json");
  CHECK(xl.attention_dropout + xl.residual_dropout + xl.embedding_dropout == 0.0);
  CHECK_FALSE(xl.use_cache);
  CHECK(read_hf_config(dir + "phi-3-mini-4k.json").use_cache);
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 32,
    "vocab_size": 100, "attn_pdrop": 1.5})"), Catch::Matchers::Contains("'attn_pdrop' must be a probability in [0, 1)"));
  // Mixtral-8x7B-v0.1: model.safetensors.index.json total_size 93,405,585,408 B of bf16 = 46,702,792,704 parameters.
  const transformer_config mixtral = read_hf_config(dir + "mixtral-8x7b.json");
  CHECK(count_parameters(mixtral).total.count() == 46'702'792'704);
  CHECK(mixtral.moe.experts == 8);
  CHECK(mixtral.moe.top_k == 2);
}

TEST_CASE("Qwen3-30B-A3B's experts, written out", "[model][hf][published]") {
  // Qwen/Qwen3-30B-A3B config.json: hidden 2048, 48 layers, 32 heads of 128 (head_dim given; 2048 / 32 would be 64),
  // 4 KV heads, 128 experts of moe_intermediate_size 768, 8 a token, vocab 151936, untied. modular_qwen3_moe.py:
  // q 2048 x 4096 = 8,388,608; k and v 2048 x 512 = 1,048,576 each; o 4096 x 2048 = 8,388,608; q_norm and k_norm
  // 2 x 128; two RMSNorms 2 x 2048; the router 2048 x 128 = 262,144; the experts 128 x 3 x 2048 x 768 = 603,979,776:
  // 623,120,640 a layer, x 48 = 29,909,790,720; embedding and lm_head 2 x 151,936 x 2048 = 622,329,856; final norm
  // 2048: 30,532,122,624 (its model card: 30.5B). Active, 8 experts of 128: 48 x (623,120,640 - 120 x 4,718,592) +
  // 622,331,904 = 3,353,032,704 (its model card: 3.3B activated).
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/qwen3-30b-a3b.json");
  const parameter_counts c = count_parameters(m);
  CHECK(c.total.count() == 30'532'122'624);
  CHECK(c.layer.count() == 623'120'640);
  CHECK(c.mlp.count() == 603'979'776 + 262'144);
  CHECK(c.total.count() - 48LL * 120 * 3 * 2048 * 768 == 3'353'032'704);
  CHECK(m.head_size() == 128);
  CHECK(m.moe.experts == 128);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.renormalized);  // norm_topk_prob true
  CHECK(m.qk_norm);
  CHECK(count_parameters(preset_config("qwen3-30b-a3b")).total == c.total);
  // Layers the parser does not model are refused by name.
  const std::string base = R"({"model_type": "qwen3_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, )";
  CHECK(count_parameters(parse_hf_config(base + R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32})")).mlp.count() ==
        4 * 3 * 64 * 32 + 64 * 4);
  CHECK_THROWS_WITH(parse_hf_config(base + R"("decoder_sparse_step": 2})"), Catch::Matchers::Contains("decoder_sparse_step other than 1"));
  CHECK_THROWS_WITH(parse_hf_config(base + R"("mlp_only_layers": [0]})"), Catch::Matchers::Contains("field 'mlp_only_layers' holds '[0]'"));
  CHECK_THROWS_WITH(parse_hf_config(base + R"("use_sliding_window": true})"), Catch::Matchers::Contains("use_sliding_window true"));
}

TEST_CASE("Qwen1.5-MoE-A2.7B's shared expert and its gate, written out", "[model][hf][published]") {
  // Qwen/Qwen1.5-MoE-A2.7B config.json (model_type qwen2_moe): hidden 2048, 24 layers, 16 heads of 128, 16 KV heads,
  // 60 experts of moe_intermediate_size 1408, 4 a token, shared_expert_intermediate_size 5632, vocab 151936, untied.
  // modular_qwen2_moe.py: q, k, v 3 x (2048 x 2048 + 2048 bias) = 12,589,056; o 2048 x 2048 = 4,194,304; two RMSNorms
  // 4,096; the router 60 x 2048 = 122,880; the experts 60 x 3 x 2048 x 1408 = 519,045,120; the shared expert
  // 3 x 2048 x 5632 = 34,603,008 and its gate 2048 x 1: 570,560,512 a layer, x 24 = 13,693,452,288; embedding and
  // lm_head 2 x 151,936 x 2048 = 622,329,856; final norm 2048: 14,315,784,192 (its model card: 14.3B in total).
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/qwen1.5-moe-a2.7b.json");
  const parameter_counts c = count_parameters(m);
  CHECK(c.layer.count() == 570'560'512);
  CHECK(c.total.count() == 14'315'784'192LL);
  CHECK(c.mlp.count() == 122'880 + 519'045'120 + 34'603'008 + 2048);
  CHECK(m.moe.experts == 60);
  CHECK(m.moe.top_k == 4);
  CHECK(m.moe.shared_experts == 4);  // 5632 = 4 x 1408: one SwiGLU of four expert widths
  CHECK(m.moe.shared_expert_gate);
  CHECK_FALSE(m.moe.renormalized);   // norm_topk_prob false
  CHECK(m.moe.weights_in_compute_dtype);
  CHECK(m.qkv_bias);
  CHECK_FALSE(m.attention_out_bias);
  CHECK(count_parameters(preset_config("qwen1.5-moe-a2.7b")).total == c.total);
  const std::string base = R"({"model_type": "qwen2_moe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32, )";
  // 4 experts 4 x 3 x 64 x 32, the router 64 x 4, a shared expert of 96 = 3 widths 3 x 64 x 96 and its gate 64.
  CHECK(count_parameters(parse_hf_config(base + R"("shared_expert_intermediate_size": 96})")).mlp.count() ==
        4 * 3 * 64 * 32 + 64 * 4 + 3 * 64 * 96 + 64);
  CHECK_THROWS_WITH(parse_hf_config(base + R"("shared_expert_intermediate_size": 100})"),
                    Catch::Matchers::Contains("shared_expert_intermediate_size 100 is not a multiple of moe_intermediate_size 32"));
  CHECK_THROWS_WITH(parse_hf_config(base + R"("decoder_sparse_step": 2})"), Catch::Matchers::Contains("decoder_sparse_step other than 1"));
  CHECK_THROWS_WITH(parse_hf_config(base + R"("mlp_only_layers": [1]})"), Catch::Matchers::Contains("field 'mlp_only_layers' holds '[1]'"));
  CHECK_NOTHROW(parse_hf_config(base + R"("mlp_only_layers": null})"));  // Qwen2MoeConfig: None means []
  CHECK_THROWS_WITH(parse_hf_config(base + R"("use_sliding_window": true})"), Catch::Matchers::Contains("use_sliding_window true"));
  // qkv_bias false (the config's field; default true) drops the three biases: 3 x 64 fewer a layer.
  CHECK(count_parameters(parse_hf_config(base + R"("qkv_bias": false})")).layer.count() + 3 * 64 ==
        count_parameters(parse_hf_config(base + R"("qkv_bias": true})")).layer.count());
}

TEST_CASE("OLMoE-1B-7B's experts and whole-projection q_norm / k_norm, written out", "[model][hf][published]") {
  // allenai/OLMoE-1B-7B-0924 config.json (model_type olmoe): hidden 2048, 16 layers, 16 heads of 128, 16 KV heads, 64
  // experts of intermediate_size 1024, 8 a token, vocab 50304, untied, clip_qkv null. modular_olmoe.py: q, k, v, o
  // 4 x 2048 x 2048 = 16,777,216; q_norm and k_norm over the whole projections 2 x 2048; two RMSNorms 2 x 2048; the router
  // 64 x 2048 = 131,072; the experts 64 x 3 x 2048 x 1024 = 402,653,184: 419,569,664 a layer, x 16 = 6,713,114,624;
  // embedding and lm_head 2 x 50304 x 2048 = 206,045,184; final norm 2048: 6,919,161,856 (Muennighoff et al. 2024,
  // arXiv 2409.02060, OLMoE-1B-7B: 6.9B total). Active, 8 of 64 experts: 6,919,161,856 - 16 x 56 x 3 x 2048 x 1024 =
  // 1,282,017,280 (1.3B active).
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmoe-1b-7b-0924.json");
  const parameter_counts c = count_parameters(m);
  CHECK(c.layer.count() == 419'569'664);
  CHECK(c.total.count() == 6'919'161'856LL);
  CHECK(c.total.count() - 16LL * 56 * 3 * 2048 * 1024 == 1'282'017'280LL);
  CHECK(m.qk_norm);
  CHECK(m.qk_norm_whole);
  CHECK_FALSE(m.post_norms);        // LlamaDecoderLayer's pre-norms, unlike OLMo-2
  CHECK_FALSE(m.norm_weight_fp32);  // OlmoeRMSNorm is LlamaRMSNorm
  CHECK_FALSE(m.clip_qkv);
  CHECK(m.moe.experts == 64);
  CHECK(m.moe.top_k == 8);
  CHECK(m.moe.expert_ffn == 1024);
  CHECK_FALSE(m.moe.renormalized);
  CHECK(m.moe.weights_in_compute_dtype);  // OlmoeTopKRouter is Qwen2MoeTopKRouter
  CHECK(count_parameters(preset_config("olmoe-1b-7b")).total == c.total);
  const std::string base = R"({"model_type": "olmoe", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 32, "vocab_size": 100, )";
  CHECK(parse_hf_config(base + R"("clip_qkv": 8.0})").clip_qkv);
  CHECK_THROWS_WITH(parse_hf_config(base + R"("clip_qkv": -1})"), Catch::Matchers::Contains("field 'clip_qkv' must be a positive number or null"));
  // The class defaults: 64 experts, 8 a token; q, k, v, o 4 x 64 x 64, the whole-projection norms 2 x 64, two RMSNorms,
  // the router 64 x 64 and the experts 64 x 3 x 64 x 32.
  CHECK(count_parameters(parse_hf_config(base + R"("attention_dropout": 0.0})")).layer.count() == 4 * 64 * 64 + 2 * 64 + 2 * 64 + 64 * 64 + 64 * 3 * 64 * 32);
}

TEST_CASE("Phi-3-mini's fused projections, written out", "[model][hf][published]") {
  // microsoft/Phi-3-mini-4k-instruct config.json: hidden 3072, 32 layers, 32 heads of 96 (no GQA), intermediate 8192,
  // vocab 32064, untied, sliding_window 2047. modeling_phi3.py: qkv_proj 3072 -> 3 x 3072 = 28,311,552; o_proj
  // 3072 x 3072 = 9,437,184; gate_up_proj 3072 -> 2 x 8192 = 50,331,648; down_proj 8192 x 3072 = 25,165,824; two
  // RMSNorms 6,144: 113,252,352 per layer; x 32 = 3,624,075,264; embedding and lm_head 2 x 32064 x 3072 =
  // 197,001,216; final norm 3,072: 3,821,079,552 (Abdin et al. 2024, arXiv 2404.14219: 3.8B).
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/phi-3-mini-4k.json");
  CHECK(m.fused_qkv);
  CHECK(m.fused_gate_up);
  CHECK(m.sliding_window == 2047);
  CHECK(count_parameters(m).layer.count() == 113'252'352);
  CHECK(count_parameters(m).total.count() == 3'821'079'552LL);
  CHECK(count_parameters(m).largest_layer.count() == 98'500'608);  // the embedding (and lm_head); gate_up_proj's 50,331,648 is a layer's largest
  // LoRA on the fused modules: r x (in + out) each, rank 8: qkv_proj 8 x (3072 + 9216) = 98,304; gate_up_proj
  // 8 x (3072 + 16384) = 155,648.
  lora_config l{};
  l.rank = 8;
  l.targets = parse_lora_targets("qkv_proj,gate_up_proj");
  CHECK(count_lora_parameters(m, l).per_layer.count() == 98'304 + 155'648);
  l.targets = parse_lora_targets("gate_proj");
  CHECK_THROWS_WITH(count_lora_parameters(m, l), Catch::Matchers::Contains("gate_up_proj, down_proj"));
}

TEST_CASE("Gemma's parameters, written out", "[model][hf][published]") {
  // google/gemma-2b config.json: hidden 2048, 18 layers, 8 query heads and 1 KV head of 256, intermediate 16384,
  // vocab 256000, tied (GemmaConfig's default). q 2048 x 2048 = 4,194,304; k and v 2048 x 256 = 524,288 each; o
  // 2048 x 2048; gate, up, down 3 x 2048 x 16384 = 100,663,296; two norms 4,096: 110,104,576 per layer; x 18 +
  // final norm 2,048 = 1,981,884,416, the Gemma report's non-embedding count (arXiv 2403.08295 Table 2); embedding
  // 256000 x 2048 = 524,288,000.
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  const transformer_config g2 = read_hf_config(dir + "gemma-2b.json");
  CHECK(g2.head_size() == 256);
  CHECK(g2.tied_embeddings);
  CHECK(g2.norm_scale_fp32);
  CHECK(g2.scaled_embedding);
  CHECK(count_parameters(g2).layer.count() == 110'104'576);
  CHECK(count_parameters(g2).total.count() - count_parameters(g2).embedding.count() == 1'981'884'416);
  CHECK(count_parameters(g2).total.count() == 1'981'884'416LL + 524'288'000);
  // google/gemma-7b: hidden 3072, 28 layers, 16 heads of 256 (q, k, v 3072 -> 4096, o 4096 -> 3072: 4 x 12,582,912 =
  // 50,331,648), MLP 3 x 3072 x 24576 = 226,492,416, norms 6,144: 276,830,208 per layer; x 28 + 3,072 =
  // 7,751,248,896 (the report's non-embedding count); + 256000 x 3072 = 786,432,000 -> 8,537,680,896, its
  // model.safetensors.index.json total_size 17,075,361,792 B of bf16 / 2 B.
  const transformer_config g7 = read_hf_config(dir + "gemma-7b.json");
  CHECK(count_parameters(g7).layer.count() == 276'830'208);
  CHECK(count_parameters(g7).total.count() == 7'751'248'896LL + 786'432'000);
  CHECK(g7.heads * g7.head_size() == 4096);  // wider than hidden 3072
  // hidden_activation (else hidden_act) must be a one-kernel activation; the tensor-op GELUs are refused by key.
  const std::string gemma = R"({"model_type": "gemma", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  CHECK(parse_hf_config(gemma + "}").head_size() == 256);  // GemmaConfig's head_dim default
  CHECK_NOTHROW(parse_hf_config(gemma + R"(, "hidden_act": "gelu", "hidden_activation": "gelu_pytorch_tanh"})"));
  CHECK_THROWS_WITH(parse_hf_config(gemma + R"(, "hidden_activation": "gelu_new"})"),
                    Catch::Matchers::Contains(R"(field 'hidden_activation' must be an activation zeromem models in a gated MLP ("silu", "swish", "gelu", "gelu_pytorch_tanh"), got '"gelu_new"')"));
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "hidden_act": "relu"})"), Catch::Matchers::Contains("field 'hidden_act'"));
}

TEST_CASE("Gemma-2's parameters and what it keeps, written out", "[model][hf][published]") {
  // google/gemma-2-2b config.json: hidden 2304, 26 layers, 8 query and 4 KV heads of 256, intermediate 9216, vocab
  // 256000, tied. q 2304 x 2048 = 4,718,592; k and v 2304 x 1024 = 2,359,296 each; o 2048 x 2304 = 4,718,592; MLP
  // 3 x 2304 x 9216 = 63,700,992; four norms 9,216 (input, post-attention, pre- and post-feedforward): 77,865,984 per
  // layer; x 26 + final norm 2,304 = 2,024,517,888, the Gemma 2 report's non-embedding count (arXiv 2408.00118
  // Table 1); + 256000 x 2304 = 589,824,000 -> 2,614,341,888.
  const transformer_config g = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gemma-2-2b.json");
  CHECK(g.sandwich_norms);
  CHECK(count_parameters(g).norms.count() == 4 * 2304);
  CHECK(count_parameters(g).layer.count() == 77'865'984);
  CHECK(count_parameters(g).total.count() == 2'024'517'888LL + 589'824'000);
  CHECK(g.attention_softcap == 50.0);
  CHECK(g.final_logit_softcap == 30.0);
  CHECK(g.sliding_window == 4096);
  CHECK(g.sliding_window_pattern == 2);
  CHECK_FALSE(g.use_cache);  // config.json says true; Gemma2Model builds no cache while training
  // Gemma-2-9B: hidden 3584, 42 layers, 16/8 heads of 256, intermediate 14336: attention 2 x 3584 x 4096 + 2 x 3584 x
  // 2048 = 44,040,192, MLP 154,140,672, norms 14,336: 198,195,200 per layer; x 42 + 3,584 = 8,324,201,984 (the report's).
  CHECK(count_parameters(preset_config("gemma-2-9b")).layer.count() == 198'195'200);
  CHECK(count_parameters(preset_config("gemma-2-9b")).total.count() - 256000LL * 3584 == 8'324'201'984LL);
  // Soft-caps: null turns one off; anything but a positive number is refused by key.
  const std::string small = R"({"model_type": "gemma2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  CHECK(parse_hf_config(small + R"(, "final_logit_softcapping": null})").final_logit_softcap == 0.0);
  CHECK(parse_hf_config(small + R"(, "sliding_window": null})").sliding_window_pattern == 0);
  CHECK_THROWS_WITH(parse_hf_config(small + R"(, "attn_logit_softcapping": -1})"),
                    Catch::Matchers::Contains("field 'attn_logit_softcapping' must be a positive number or null"));
}

TEST_CASE("Gemma-3's text model, written out", "[model][hf][published]") {
  // google/gemma-3-1b-pt config.json: hidden 1152, 26 layers, 4 query heads and 1 KV head of 256, intermediate 6912,
  // vocab 262144, tied. q 1152 x 1024 = 1,179,648; k and v 1152 x 256 = 294,912 each; o 1024 x 1152 = 1,179,648;
  // q_norm and k_norm 2 x 256; MLP 3 x 1152 x 6912 = 23,887,872; four norms 4,608: 26,842,112 per layer; x 26 + final
  // norm 1,152 = 697,896,064 ("698M", arXiv 2503.19786 Table 1); embedding 262144 x 1152 = 301,989,888 ("302M").
  const transformer_config g = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gemma-3-1b.json");
  CHECK(count_parameters(g).layer.count() == 26'842'112);
  CHECK(count_parameters(g).total.count() == 697'896'064LL + 301'989'888);
  CHECK(g.qk_norm);
  CHECK(g.norm_scale_fp32);
  CHECK(g.sandwich_norms);
  CHECK_FALSE(g.scaled_embedding);  // Gemma3TextScaledWordEmbedding scales inside the embedding module
  CHECK(g.attention_softcap == 0.0);
  CHECK(g.final_logit_softcap == 0.0);
  CHECK(g.sliding_window == 512);
  CHECK(g.sliding_window_pattern == 6);
  CHECK_FALSE(g.use_cache);
  // Layers 5, 11, 17 and 23 have full attention, the other 22 slide.
  std::int64_t full = 0;
  for (std::int64_t i = 0; i < g.layers; ++i) full += full_attention_layer(g, i) ? 1 : 0;
  CHECK(full == 4);
  CHECK(full_attention_layer(g, 5));
  CHECK_FALSE(full_attention_layer(g, 6));
  // transformers 5 writes layer_types instead: the same period is read back; any other arrangement is refused.
  std::string types;
  for (std::int64_t i = 0; i < 26; ++i) types += std::string(i ? ", " : "") + ((i + 1) % 6 == 0 ? R"("full_attention")" : R"("sliding_attention")");
  const std::string small = R"({"model_type": "gemma3_text", "hidden_size": 64, "num_hidden_layers": 26, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "sliding_window": 512, "layer_types": [)";
  CHECK(parse_hf_config(small + types + "]}").sliding_window_pattern == 6);
  std::string odd = types;
  odd.replace(0, std::string(R"("sliding_attention")").size(), R"("full_attention")");
  CHECK_THROWS_WITH(parse_hf_config(small + odd + "]}"), Catch::Matchers::Contains("field 'layer_types' is not every N-th layer full attention"));
  CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": "gemma3", "text_config": {}})"), Catch::Matchers::Contains("model_type gemma3_text"));
}

TEST_CASE("config.json's sliding_window, by configuration class", "[model][hf]") {
  // MistralConfig defaults sliding_window to 4096 when the key is absent; null means full attention.
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  CHECK(read_hf_config(dir + "mistral-7b.json").sliding_window == 4096);
  const std::string mistral = R"({"model_type": "mistral", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  CHECK(parse_hf_config(mistral + R"(, "sliding_window": null})").sliding_window == 0);
  CHECK(parse_hf_config(mistral + R"(, "sliding_window": 1024})").sliding_window == 1024);
  CHECK(read_hf_config(dir + "mixtral-8x7b.json").sliding_window == 0);
  CHECK(read_hf_config(dir + "qwen2.5-7b.json").sliding_window == 0);  // use_sliding_window false: ignored
  const std::string qwen = R"({"model_type": "qwen2", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100, "sliding_window": 32, "use_sliding_window": true})";
  CHECK_THROWS_WITH(parse_hf_config(qwen), Catch::Matchers::Contains("use_sliding_window true"));
  CHECK_THROWS_WITH(parse_hf_config(mistral + R"(, "sliding_window": -1})"), Catch::Matchers::Contains("'sliding_window' must be a positive integer"));
}

TEST_CASE("Qwen3's q_norm and k_norm, written out", "[model][hf][published]") {
  // Qwen3-8B config.json: hidden 4096, 36 layers, 32 query and 8 KV heads of head_dim 128, intermediate 12288, vocab
  // 151936, untied, no attention bias. Per layer: q and o 4096 x 4096 = 16,777,216 each; k and v 4096 x 1024 =
  // 4,194,304 each; q_norm and k_norm 128 each; SwiGLU 3 x 4096 x 12288 = 150,994,944; two RMSNorms 8,192:
  // 192,946,432. x 36 = 6,946,071,552; embedding and output layer 2 x 151936 x 4096 = 1,244,659,712; final norm
  // 4,096: 8,190,735,360 (the model card: 8.2B).
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/qwen3-8b.json");
  CHECK(m.qk_norm);
  CHECK(m.head_size() == 128);
  CHECK(count_parameters(m).layer.count() == 192'946'432);
  CHECK(count_parameters(m).total.count() == 8'190'735'360LL);
  CHECK(count_parameters(find_preset("qwen3-8b").config).total.count() == 8'190'735'360LL);
  // Adafactor keeps both 128-value norms whole: per layer 2 x (4096 + 4096) + 2 x (1024 + 4096) + 256 + 3 x (12288 +
  // 4096) + 8192 = 16,384 + 10,240 + 256 + 49,152 + 8,192 = 84,224; x 36 = 3,032,064; + 2 x (151936 + 4096) + 4096
  // = 3,348,224.
  CHECK(adafactor_second_moment_elements(m).count() == 3'348'224);
}

TEST_CASE("Mixtral's parameters, written out", "[model][published]") {
  // Per layer: attention q, o 4096^2 each + k, v 4096 x 1024 each = 41,943,040; 8 experts x 3 x 4096 x 14336
  // = 1,409,286,144; router 4096 x 8 = 32,768; two RMSNorms 8,192 -> 1,451,270,144. x 32 layers
  // = 46,440,644,608; + embedding and lm_head 2 x 32000 x 4096 = 262,144,000; + final norm 4,096.
  const parameter_counts c = count_parameters(preset_config("mixtral-8x7b"));
  CHECK(c.layer.count() == 1'451'270'144);
  CHECK(c.total.count() == 46'440'644'608 + 262'144'000 + 4'096);
  // Active per token (2 of 8 experts): 46,702,792,704 - 32 x 6 x 176,160,768 = 12,879,925,248, Mistral AI's "12.9B".
  CHECK(c.total.count() - 32LL * 6 * 3 * 4096 * 14336 == 12'879'925'248);
}

TEST_CASE("a model's directory reads as its config.json, as AutoConfig.from_pretrained(directory) does", "[model][hf]") {
  const std::string dir = std::string(ZEROMEM_DATA_DIR) + "/calibration/configs/qwen2.5-7b";
  // Qwen2.5-7B: 7,615,616,512 parameters (Qwen's model card: 7.61B), whether the file or its directory is named.
  CHECK(count_parameters(read_hf_config(dir + "/config.json")).total.count() == 7'615'616'512);
  CHECK(count_parameters(read_hf_config(dir)).total.count() == 7'615'616'512);
  CHECK(count_parameters(read_hf_config(dir + "/")).total.count() == 7'615'616'512);
}

TEST_CASE("bad config.json files are rejected with the reason", "[model][hf][errors]") {
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf-bad/";
  CHECK_THROWS_WITH(read_hf_config(dir + "truncated.json"), Catch::Matchers::Contains("not valid JSON"));
  CHECK_THROWS_WITH(read_hf_config(dir + "unsupported.json"), Catch::Matchers::Contains("unsupported model_type 'bert'"));
  CHECK_THROWS_WITH(read_hf_config(dir + "missing-field.json"), Catch::Matchers::Contains("missing field 'intermediate_size'"));
  CHECK_THROWS_WITH(read_hf_config(dir + "wrong-type.json"), Catch::Matchers::Contains("'hidden_size' must be a positive integer"));
  CHECK_THROWS_WITH(read_hf_config(dir + "not-object.json"), Catch::Matchers::Contains("expected a JSON object"));
  CHECK_THROWS_WITH(read_hf_config(dir + "inconsistent.json"), Catch::Matchers::Contains("multiple of the heads"));
  CHECK_THROWS_WITH(read_hf_config(dir + "no-such-file.json"),
                    Catch::Matchers::Contains("cannot read config.json") &&
                        Catch::Matchers::Contains("no such file; pass a model's config.json or its directory"));
  // A Hub id that is no local path: the message says that nothing is downloaded and how to fetch the file.
  CHECK_THROWS_WITH(read_hf_config("meta-llama/Llama-3.2-1B"),
                    Catch::Matchers::EndsWith("zeromem reads a local file and downloads nothing: save the model's config.json "
                                              "(huggingface-cli download meta-llama/Llama-3.2-1B config.json) and pass its path"));
  // An unsupported family names the way around it: the model's shape.
  CHECK_THROWS_WITH(read_hf_config(dir + "unsupported.json"), Catch::Matchers::Contains("describe the model by its shape instead"));
  CHECK_THROWS_WITH(parse_hf_config("{}"), Catch::Matchers::Contains("missing field 'model_type'") &&
                                               Catch::Matchers::EndsWith("pass the model's config.json"));
  // A directory without a config.json (this one holds only bad files of other names) is named, with the fix.
  CHECK_THROWS_WITH(read_hf_config(dir), Catch::Matchers::Contains("holds no config.json; pass a model's directory or its config.json"));
  CHECK_THROWS_WITH(parse_hf_config(""), Catch::Matchers::StartsWith("zeromem: config.json: not valid JSON"));
  // Every model type the error and --hf-config's help list is one the parser reads: given no fields, each asks for one.
  const std::string types(supported_model_types);
  for (std::size_t at = 0; at < types.size();) {
    const std::size_t end = std::min(types.find(", ", at), types.size());
    const std::string type = types.substr(at, end - at);
    INFO(type);
    CHECK_THROWS_WITH(parse_hf_config(R"({"model_type": ")" + type + R"("})"), Catch::Matchers::Contains("missing"));
    at = end + 2;
  }
}

TEST_CASE("invalid architectures throw with the fix", "[model][errors]") {
  transformer_config m = find_preset("llama-2-7b").config;
  m.kv_heads = 5;
  CHECK_THROWS_WITH(count_parameters(m), Catch::Matchers::Contains("multiple of the key/value heads"));
  m = find_preset("llama-2-7b").config;
  m.vocab = 0;
  CHECK_THROWS_WITH(count_parameters(m), Catch::Matchers::Contains("the vocabulary size, got 0"));
  CHECK_THROWS_WITH(find_preset("gpt-5"), Catch::Matchers::Contains("unknown model 'gpt-5'; expected one of qwen2.5-1.5b"));
}

TEST_CASE("Adafactor's factored second moment from a model's shapes", "[model]") {
  // GPT-2 small by hand: per layer c_attn 768 x 2304 -> 3072 + bias 2304; c_proj 1536 + 768; c_fc 3840 + 3072;
  // c_proj 3840 + 768; two LayerNorms 4 x 768 = 3072: 22,272 per layer, x 12 = 267,264; wte 50257 + 768;
  // wpe 1024 + 768; ln_f 1536 (tied output layer): 321,617.
  const transformer_config gpt2 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gpt2.json");
  CHECK(adafactor_second_moment_elements(gpt2).count() == 321'617);
  // Llama-2-7B: per layer q, k, v, o 4 x (4096 + 4096) = 32,768, SwiGLU 3 x (11008 + 4096) = 45,312, two RMSNorms
  // 8,192: 86,272; x 32 = 2,760,704; embedding and output layer 2 x (32000 + 4096) = 72,192; final norm 4,096:
  // 2,836,992.
  CHECK(adafactor_second_moment_elements(find_preset("llama-2-7b").config).count() == 2'836'992);
}

TEST_CASE("Adafactor over a vision tower: the Conv3d patch embed is factored as shape[:-1] and shape[:-2] + shape[-1:]", "[model]") {
  // Qwen2.5-VL-7B by hand. Text, per layer: q 3584 + 3584 + bias 3584 = 10,752; k and v 512 + 3584 + 512 = 4,608
  // each; o 7,168; gate and up 18944 + 3584 = 22,528 each, down 22,528; two RMSNorms 7,168: 101,888, x 28 =
  // 2,852,864; embedding and output layer 2 x (152064 + 3584) = 311,296; final norm 3,584: 3,167,744.
  // Vision, per block: qkv 3840 + 1280 + 3840 = 8,960; proj 3 x 1280 = 3,840; gate and up 3420 + 1280 + 3420 =
  // 8,120 each; down 1280 + 3420 + 1280 = 5,980; two RMSNorms 2,560: 37,580, x 32 = 1,202,560.
  // Patch embed [1280, 3, 2, 14, 14]: rows 1280*3*2*14 = 107,520, columns 1280*3*2 * 14 = 107,520: 215,040.
  // Merger: norm 1,280; Linear(5120, 5120) 3 x 5120 = 15,360; Linear(5120, 3584) 3584 + 5120 + 3584 = 12,288.
  // Vision 1,446,528; total 4,614,272.
  CHECK(adafactor_second_moment_elements(find_preset("qwen2.5-vl-7b").config).count() == 4'614'272);
}

TEST_CASE("one walk over the modules: what count_parameters sums and what LoRA adapts", "[model]") {
  // Llama-2-7B per layer, by hand: q, k, v, o 4096 x 4096; gate, up 4096 -> 11008, down 11008 -> 4096; two
  // RMSNorms of 4096; embedding and output layer 32000 x 4096; final norm 4096.
  const transformer_config m = find_preset("llama-2-7b").config;
  int linears = 0, tables = 0, norms = 0;
  std::int64_t layer = 0;
  for_each_module(m, [&](const module_shape& s) {
    if (s.linear) ++linears;
    else if (s.matrix) ++tables;
    else ++norms;
    if (s.in_every_layer()) layer += s.elements() * s.count;
  });
  CHECK(linears == 7);
  CHECK(tables == 2);
  CHECK(norms == 2);
  CHECK(layer == 4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096);
  CHECK(count_parameters(m).layer.count() == layer);
  // The output layer is not an nn.Linear to LoRA (PEFT's all-linear leaves it out): for_each_linear skips it.
  int linear_modules = 0;
  for_each_linear(m, [&](const linear_shape&) { ++linear_modules; });
  CHECK(linear_modules == 7);
}

TEST_CASE("GPT-NeoX (Pythia) and Phi parameters, written out", "[model][hf][published]") {
  // EleutherAI/pythia-1b config.json: hidden 2048, 16 layers, 8 heads, intermediate 8192, vocab 50304, untied, parallel
  // attention and MLP. Two LayerNorms 4 x 2048 = 8,192; query_key_value 2048 x 6144 + 6144 = 12,589,056; dense 2048^2 +
  // 2048 = 4,196,352; dense_h_to_4h 2048 x 8192 + 8192 = 16,785,408; dense_4h_to_h 8192 x 2048 + 2048 = 16,779,264:
  // 50,358,272 per layer; x 16 + final LayerNorm 4,096 = 805,736,448 (Biderman et al. 2023 Table 1, non-embedding);
  // embed_in and embed_out 2 x 50304 x 2048 = 206,045,184 -> 1,011,781,632.
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  const transformer_config p = read_hf_config(dir + "pythia-1b.json");
  CHECK(p.parallel_residual);
  CHECK_FALSE(p.shared_layer_norm);
  CHECK(p.fused_qkv);
  CHECK(p.norm == norm_kind::layernorm);
  CHECK(p.mlp == mlp_kind::gelu);
  CHECK_FALSE(p.gelu_tensor_ops);  // hidden_act "gelu": one kernel
  CHECK(p.use_cache);
  const parameter_counts pc = count_parameters(p);
  CHECK(pc.layer.count() == 50'358'272);
  CHECK(pc.norms.count() == 8'192);
  CHECK(pc.total.count() - pc.embedding.count() - pc.lm_head.count() == 805'736'448);
  CHECK(pc.total.count() == 1'011'781'632);
  CHECK(count_parameters(p).total == count_parameters(preset_config("pythia-1b")).total);
  // microsoft/phi-2 config.json: hidden 2560, 32 layers, 32 heads, intermediate 10240, vocab 51200, one LayerNorm a layer
  // 5,120; q, k, v, dense 4 x (2560^2 + 2560) = 26,224,640; fc1 2560 x 10240 + 10240 = 26,224,640; fc2 10240 x 2560 +
  // 2560 = 26,216,960: 78,671,360 per layer; x 32 = 2,517,483,520; final LayerNorm 5,120; embed_tokens 51200 x 2560 =
  // 131,072,000; lm_head the same + its 51,200-element bias: 2,779,683,840 ("2.7 billion parameters", the model card).
  const transformer_config phi = read_hf_config(dir + "phi-2.json");
  CHECK(phi.parallel_residual);
  CHECK(phi.shared_layer_norm);
  CHECK_FALSE(phi.residual_added_first);  // attn_outputs + feed_forward_hidden_states + residual
  CHECK(phi.lm_head_bias);
  CHECK_FALSE(phi.fused_qkv);
  CHECK(phi.gelu_tensor_ops);  // gelu_new
  CHECK(phi.residual_dropout == 0.1);
  const parameter_counts phc = count_parameters(phi);
  CHECK(phc.layer.count() == 78'671'360);
  CHECK(phc.lm_head.count() == 131'072'000 + 51'200);
  CHECK(phc.total.count() == 2'779'683'840LL);
  // hidden_act must be one zeromem models for these MLPs; qk_layernorm is refused; defaults follow the classes.
  const std::string neox = R"({"model_type": "gpt_neox", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  CHECK(parse_hf_config(neox + "}").parallel_residual);  // GPTNeoXConfig(use_parallel_residual=True)
  CHECK_FALSE(parse_hf_config(neox + "}").residual_added_first);  // mlp_output + attn_output + hidden_states
  CHECK_FALSE(parse_hf_config(neox + R"(, "use_parallel_residual": false})").parallel_residual);
  CHECK(parse_hf_config(neox + R"(, "attention_bias": false})").qkv_bias == false);
  CHECK(parse_hf_config(neox + R"(, "hidden_dropout": 0.1})").residual_dropout == 0.1);
  CHECK_THROWS_WITH(parse_hf_config(neox + R"(, "hidden_act": "quick_gelu"})"),
                    Catch::Matchers::Contains(R"(field 'hidden_act' must be "gelu", "gelu_new" or "gelu_fast" for model_type 'gpt_neox', got '"quick_gelu"')"));
  // EleutherAI/gpt-neox-20b config.json: hidden 6144, 44 layers, 64 heads, intermediate 24576, vocab 50432, hidden_act
  // gelu_fast, rotary_pct 0.25, untied. query_key_value 6144 x 18432 + 18432 = 113,264,640; dense 6144^2 + 6144 =
  // 37,754,880; dense_h_to_4h 6144 x 24576 + 24576 = 151,019,520; dense_4h_to_h 24576 x 6144 + 6144 = 151,001,088; two
  // LayerNorms 24,576: 453,064,704 a layer; x 44 = 19,934,846,976; embed_in and embed_out 2 x 50432 x 6144 =
  // 619,708,416; final LayerNorm 12,288: 20,554,567,680, the model card's "Number of parameters".
  const transformer_config neox20b = parse_hf_config(R"({"model_type": "gpt_neox", "hidden_size": 6144, "num_hidden_layers": 44,
    "num_attention_heads": 64, "intermediate_size": 24576, "vocab_size": 50432, "hidden_act": "gelu_fast", "rotary_pct": 0.25})");
  CHECK(neox20b.gelu_fast_ops);
  CHECK_FALSE(neox20b.gelu_tensor_ops);
  CHECK(count_parameters(neox20b).layer.count() == 453'064'704);
  CHECK(count_parameters(neox20b).total.count() == 20'554'567'680LL);
  const std::string phi_small = R"({"model_type": "phi", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  CHECK(parse_hf_config(phi_small + "}").gelu_tensor_ops);  // PhiConfig(hidden_act="gelu_new")
  CHECK(parse_hf_config(phi_small + R"(, "num_key_value_heads": 2})").kv_heads == 2);
  CHECK_THROWS_WITH(parse_hf_config(phi_small + R"(, "qk_layernorm": true})"),
                    Catch::Matchers::Contains("qk_layernorm true (LayerNorms on q and k) is not modelled for model_type 'phi'; set it false"));
  // The library refuses what it does not model, naming the fix.
  transformer_config bad = p;
  bad.norm = norm_kind::rmsnorm;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("parallel attention and MLP branches are modelled with LayerNorm"));
  bad = p;
  bad.parallel_residual = false;
  bad.shared_layer_norm = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("set parallel_residual too"));
  bad.shared_layer_norm = false;
  bad.residual_added_first = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("the residual added before the parallel branches' sum needs parallel branches; set parallel_residual too"));
  bad = phi;
  bad.tied_embeddings = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("an output-layer bias is modelled on an untied output layer"));
}

TEST_CASE("OPT's parameters, written out", "[model][hf]") {
  // facebook/opt-1.3b config.json: hidden 2048, 24 layers, 32 heads, ffn_dim 8192, vocab 50272, 2048 positions, tied.
  // Two LayerNorms 8,192; q, k, v, out_proj 4 x (2048^2 + 2048) = 16,785,408; fc1 2048 x 8192 + 8192 = 16,785,408; fc2
  // 8192 x 2048 + 2048 = 16,779,264: 50,358,272 per layer, x 24 = 1,208,598,528; embed_tokens 50272 x 2048 =
  // 102,957,056; embed_positions (2048 + 2) x 2048 = 4,198,400 (OPTLearnedPositionalEmbedding's offset of 2); final
  // LayerNorm 4,096: 1,315,758,080.
  const transformer_config o = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-1.3b.json");
  CHECK(o.mlp == mlp_kind::relu);
  CHECK(o.positions == position_kind::learned);
  CHECK(o.max_positions == 2050);
  CHECK(o.tied_embeddings);
  CHECK(o.residual_dropout == 0.1);
  CHECK(o.embedding_dropout == 0.0);
  const parameter_counts c = count_parameters(o);
  CHECK(c.layer.count() == 50'358'272);
  CHECK(c.position_embedding.count() == 4'198'400);
  CHECK(c.total.count() == 1'315'758'080LL);
  // Other activations and layerdrop are refused by key.
  const std::string opt = R"({"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "ffn_dim": 128, "vocab_size": 100, "max_position_embeddings": 64)";
  CHECK(parse_hf_config(opt + "}").residual_dropout == 0.1);  // OPTConfig(dropout=0.1)
  CHECK(parse_hf_config(opt + R"(, "do_layer_norm_before": false})").post_residual_norms);
  CHECK(parse_hf_config(opt + R"(, "word_embed_proj_dim": 32})").embedding_width == 32);
  CHECK(parse_hf_config(opt + R"(, "word_embed_proj_dim": 64})").embedding_width == 0);  // the hidden size: no projections
  CHECK_THROWS_WITH(parse_hf_config(opt + R"(, "activation_function": "gelu"})"),
                    Catch::Matchers::Contains(R"(field 'activation_function' must be "relu" for model_type 'opt', got '"gelu"')"));
  CHECK_THROWS_WITH(parse_hf_config(opt + R"(, "layerdrop": 0.1})"), Catch::Matchers::Contains("layerdrop > 0"));
  // layer_norm_elementwise_affine false: nn.LayerNorm(elementwise_affine=False) holds no weight or bias. OPT-1.3B loses
  // its two norms a layer, 24 x 2 x 2 x 2048 = 196,608, and the final norm's 4,096: 1,315,557,376.
  transformer_config plain = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-1.3b.json");
  CHECK(plain.norm_affine);
  plain.norm_affine = false;
  CHECK(count_parameters(plain).total.count() == 1'315'557'376LL);
  CHECK(count_parameters(plain).norms.count() == 0);
  CHECK_FALSE(parse_hf_config(opt + R"(, "layer_norm_elementwise_affine": false})").norm_affine);
}

TEST_CASE("OLMo's and StableLM's parameters, written out", "[model][hf]") {
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  // allenai/OLMo-1B-hf (OLMo paper, Groeneveld et al. 2024, arXiv 2402.00838 Table 1: 2048 wide, 16 layers, 16 heads,
  // weight tying): hidden 2048, intermediate 8192, vocab 50304, tied, attention_bias false. OlmoLayerNorm holds no
  // parameters. q, k, v, o 4 x 2048^2 = 16,777,216; SwiGLU 3 x 2048 x 8192 = 50,331,648: 67,108,864 a layer; x 16 =
  // 1,073,741,824; the tied embedding 50304 x 2048 = 103,022,592: 1,176,764,416 ("1B").
  const transformer_config olmo = read_hf_config(dir + "olmo-1b-hf.json");
  CHECK(olmo.norm == norm_kind::layernorm);
  CHECK_FALSE(olmo.norm_affine);
  CHECK(olmo.norm_input_fp32);
  CHECK(olmo.rope_fp32);
  CHECK(olmo.tied_embeddings);
  CHECK(olmo.use_cache);
  CHECK_FALSE(olmo.qkv_bias);
  const parameter_counts oc = count_parameters(olmo);
  CHECK(oc.layer.count() == 67'108'864);
  CHECK(oc.norms.count() == 0);
  CHECK(oc.final_norm.count() == 0);
  CHECK(oc.total.count() == 1'176'764'416LL);
  // OLMo-7B-hf's shape (4096 wide, 32 layers, 11008 MLP, untied): 4 x 4096^2 + 3 x 4096 x 11008 = 202,375,168 a layer;
  // x 32 = 6,476,005,376; embed_tokens and lm_head 2 x 50304 x 4096 = 412,090,368: 6,888,095,744.
  const std::string olmo7b = R"({"model_type": "olmo", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "intermediate_size": 11008, "vocab_size": 50304)";
  CHECK(count_parameters(parse_hf_config(olmo7b + "}")).total.count() == 6'888'095'744LL);
  CHECK_FALSE(parse_hf_config(olmo7b + R"(, "clip_qkv": null})").clip_qkv);
  CHECK(parse_hf_config(olmo7b + R"(, "clip_qkv": 8.0})").clip_qkv);
  CHECK_THROWS_WITH(parse_hf_config(olmo7b + R"(, "clip_qkv": "8"})"),
                    Catch::Matchers::Contains(R"(field 'clip_qkv' must be a positive number or null, got '"8"')"));
  // stabilityai/stablelm-2-1_6b: hidden 2048, 24 layers, 32 heads and 32 KV heads, intermediate 5632, vocab 100352,
  // use_qkv_bias, untied. q, k, v 3 x (2048^2 + 2048) = 12,589,056; o_proj 2048^2 = 4,194,304; SwiGLU 3 x 2048 x 5632 =
  // 34,603,008; two LayerNorms 2 x 2 x 2048 = 8,192: 51,394,560 a layer; x 24 = 1,233,469,440; embed_tokens and lm_head
  // 2 x 100352 x 2048 = 411,041,792; the final LayerNorm 4,096: 1,644,515,328.
  const transformer_config slm = read_hf_config(dir + "stablelm-2-1.6b.json");
  CHECK(slm.norm == norm_kind::layernorm);
  CHECK(slm.mlp == mlp_kind::swiglu);
  CHECK(slm.qkv_bias);
  CHECK_FALSE(slm.attention_out_bias);
  CHECK_FALSE(slm.parallel_residual);
  CHECK(slm.head_size() == 64);
  const parameter_counts sc = count_parameters(slm);
  CHECK(sc.layer.count() == 51'394'560);
  CHECK(sc.total.count() == 1'644'515'328LL);
  // use_parallel_residual: one input_layernorm feeds both branches (StableLmDecoderLayer: post_attention_layernorm None).
  const std::string stablelm = R"({"model_type": "stablelm", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 32,
    "intermediate_size": 5632, "vocab_size": 100352, "use_qkv_bias": true)";
  const transformer_config parallel = parse_hf_config(stablelm + R"(, "use_parallel_residual": true})");
  CHECK(parallel.parallel_residual);
  CHECK(parallel.shared_layer_norm);
  CHECK(parallel.residual_added_first);  // residual + self_attn_output + mlp_output
  CHECK(count_parameters(parallel).layer.count() == 51'394'560 - 4'096);
  // StableLmConfig's num_key_value_heads defaults to 32 whatever the heads; GQA, qk_layernorm and hidden_dropout are
  // refused by key.
  CHECK(parse_hf_config(stablelm + "}").kv_heads == 32);
  CHECK_THROWS_WITH(parse_hf_config(stablelm + R"(, "num_key_value_heads": 8})"), Catch::Matchers::Contains("num_key_value_heads"));
  CHECK_THROWS_WITH(parse_hf_config(stablelm + R"(, "qk_layernorm": true})"), Catch::Matchers::Contains("qk_layernorm true"));
  CHECK_THROWS_WITH(parse_hf_config(stablelm + R"(, "hidden_dropout": 0.1})"), Catch::Matchers::Contains("hidden_dropout > 0"));
  CHECK_THROWS_WITH(parse_hf_config(stablelm + R"(, "hidden_act": "gelu_new"})"), Catch::Matchers::Contains("hidden_act"));
}

TEST_CASE("partial RoPE: the head dimensions config.json rotates", "[model][hf]") {
  // int(head_dim x factor), as transformers' _compute_default_rope_parameters: Pythia-1B's rotary_pct 0.25 of 2048 / 8 =
  // 256 -> 64; Phi-2's partial_rotary_factor 0.4 of 2560 / 32 = 80 -> 32; stablelm-2-1_6b's 0.25 of 2048 / 32 = 64 ->
  // 16; Phi-3-mini rotates whole heads (0: the whole head).
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  CHECK(read_hf_config(dir + "pythia-1b.json").rotary_dims == 64);
  CHECK(read_hf_config(dir + "phi-2.json").rotary_dims == 32);
  CHECK(read_hf_config(dir + "stablelm-2-1.6b.json").rotary_dims == 16);
  CHECK(read_hf_config(dir + "phi-3-mini-4k.json").rotary_dims == 0);
  CHECK(read_hf_config(dir + "llama-3-70b.json").rotary_dims == 0);
  CHECK(read_hf_config(dir + "pythia-1b.json").rotary_width() == 64);
  CHECK(read_hf_config(dir + "llama-3-70b.json").rotary_width() == 128);
  // The class defaults when the field is absent (GPTNeoXConfig rotary_pct 0.25, PhiConfig 0.5, StableLmConfig 0.25),
  // and transformers 5's rope_parameters.partial_rotary_factor.
  const std::string neox = R"({"model_type": "gpt_neox", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 2048, "vocab_size": 1000)";
  CHECK(parse_hf_config(neox + "}").rotary_dims == 32);  // 128 x 0.25
  CHECK(parse_hf_config(neox + R"(, "rotary_pct": 1.0})").rotary_dims == 0);
  CHECK(parse_hf_config(neox + R"(, "rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}})").rotary_dims == 64);
  const std::string phi = R"({"model_type": "phi", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 4,
      "intermediate_size": 2048, "vocab_size": 1000)";
  CHECK(parse_hf_config(phi + "}").rotary_dims == 64);  // 128 x 0.5
  CHECK(parse_hf_config(phi + R"(, "partial_rotary_factor": 0.75})").rotary_dims == 96);
  // A fraction outside (0, 1], or one that rotates nothing, is refused with the field's name.
  CHECK_THROWS_WITH(parse_hf_config(neox + R"(, "rotary_pct": 1.5})"), Catch::Matchers::Contains("'rotary_pct' must be a fraction"));
  CHECK_THROWS_WITH(parse_hf_config(phi + R"(, "partial_rotary_factor": "half"})"), Catch::Matchers::Contains("'partial_rotary_factor'"));
  CHECK_THROWS_WITH(parse_hf_config(neox + R"(, "rope_parameters": {"partial_rotary_factor": 0}})"),
                    Catch::Matchers::Contains("'rope_parameters.partial_rotary_factor' must be a fraction"));
  CHECK_THROWS_WITH(parse_hf_config(neox + R"(, "rotary_pct": 0.001})"), Catch::Matchers::Contains("rotates no dimension"));
  // Described directly: between 1 and the head dimension, with rotary positions.
  transformer_config m = read_hf_config(dir + "pythia-1b.json");
  m.rotary_dims = 257;
  CHECK_THROWS_WITH(validate(m), Catch::Matchers::Contains("pass 0 when RoPE rotates whole heads"));
  m.rotary_dims = -1;
  CHECK_THROWS_WITH(validate(m), Catch::Matchers::Contains("pass 0 when RoPE rotates whole heads"));
}

TEST_CASE("OLMo-2's parameters, written out", "[model][hf][published]") {
  // allenai/OLMo-2-1124-13B config.json: hidden 5120, 40 layers, 40 heads and 40 KV heads of 128, intermediate 13824,
  // vocab 100352, untied. q, k, v, o 4 x 5120^2 = 104,857,600; q_norm and k_norm over the whole projections 2 x 5120 =
  // 10,240; SwiGLU 3 x 5120 x 13824 = 212,336,640; post_attention_layernorm and post_feedforward_layernorm 10,240:
  // 317,214,720 per layer; x 40 = 12,688,588,800; embed_tokens and lm_head 2 x 100352 x 5120 = 1,027,604,480; final norm
  // 5,120: 13,716,198,400 = its model.safetensors.index.json total_size 54,864,793,600 B / 4 B (fp32).
  const std::string dir = ZEROMEM_FIXTURES_DIR "/hf/";
  const transformer_config m = read_hf_config(dir + "olmo-2-1124-13b.json");
  CHECK(m.post_norms);
  CHECK(m.qk_norm);
  CHECK(m.qk_norm_whole);
  CHECK(m.norm_weight_fp32);
  CHECK_FALSE(m.sandwich_norms);
  CHECK(m.use_cache);
  const parameter_counts c = count_parameters(m);
  CHECK(c.layer.count() == 317'214'720);
  CHECK(c.attention.count() == 104'857'600 + 10'240);
  CHECK(c.norms.count() == 10'240);
  CHECK(c.total.count() == 54'864'793'600LL / 4);
  CHECK(count_parameters(preset_config("olmo-2-13b")).total == c.total);
  // OLMo-2-0425-1B: hidden 2048, 16 layers, 16 heads, intermediate 8192. 4 x 2048^2 = 16,777,216 + 4,096 +
  // 3 x 2048 x 8192 = 50,331,648 + 4,096 = 67,117,056 per layer; x 16 = 1,073,872,896; + 2 x 100352 x 2048 =
  // 411,041,792 + 2,048 = 1,484,916,736.
  CHECK(count_parameters(read_hf_config(dir + "olmo-2-0425-1b.json")).total.count() == 1'484'916'736LL);
  // Olmo3Config: OLMo-2's layer, sliding_window 4096 by default on three layers in four (layer_types' default puts
  // full_attention where (i + 1) % 4 == 0); null: every layer full.
  const std::string olmo3 = R"({"model_type": "olmo3", "hidden_size": 64, "num_hidden_layers": 8, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  const transformer_config o3 = parse_hf_config(olmo3 + "}");
  CHECK(o3.post_norms);
  CHECK(o3.sliding_window == 4096);
  CHECK(o3.sliding_window_pattern == 4);
  CHECK(full_attention_layer(o3, 3));
  CHECK(full_attention_layer(o3, 7));
  CHECK_FALSE(full_attention_layer(o3, 4));
  CHECK(parse_hf_config(olmo3 + R"(, "sliding_window": null})").sliding_window == 0);
  CHECK(parse_hf_config(olmo3 + R"(, "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention",
    "sliding_attention", "full_attention", "sliding_attention", "full_attention"]})").sliding_window_pattern == 2);
  // The library refuses combinations it does not model, naming the fix.
  transformer_config bad = m;
  bad.sandwich_norms = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("post-norm layers (OLMo-2) have neither pre-norms"));
  bad = m;
  bad.qk_norm = false;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("set qk_norm too"));
  bad = m;
  bad.norm = norm_kind::layernorm;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("multiplies its weight in fp32 (OLMo-2's) is an RMSNorm"));
}

TEST_CASE("StarCoder2's parameters, written out", "[model][hf]") {
  // Starcoder2Config's defaults (configuration_starcoder2.py): hidden 3072, 30 layers, 24 heads and 2 KV heads of 128,
  // intermediate 12288, vocab 49152, use_bias, tied. q and o 3072^2 + 3072 = 9,440,256 each; k and v 3072 x 256 + 256 =
  // 786,688 each; c_fc 3072 x 12288 + 12288 = 37,761,024; c_proj 12288 x 3072 + 3072 = 37,751,808; two LayerNorms
  // 12,288: 95,979,008 per layer; x 30 = 2,879,370,240; embed_tokens 49152 x 3072 = 150,994,944; final LayerNorm
  // 6,144: 3,030,371,328.
  const std::string sc = R"({"model_type": "starcoder2", "hidden_size": 3072, "num_hidden_layers": 30, "num_attention_heads": 24,
    "intermediate_size": 12288, "vocab_size": 49152)";
  const transformer_config m = parse_hf_config(sc + "}");
  CHECK(m.kv_heads == 2);  // Starcoder2Config(num_key_value_heads=2)
  CHECK(m.tied_embeddings);
  CHECK(m.norm == norm_kind::layernorm);
  CHECK(m.mlp == mlp_kind::gelu);
  CHECK_FALSE(m.gelu_tensor_ops);  // gelu_pytorch_tanh: one kernel
  CHECK(m.sliding_window == 0);
  const parameter_counts c = count_parameters(m);
  CHECK(c.layer.count() == 95'979'008);
  CHECK(c.total.count() == 3'030'371'328LL);
  // use_bias false drops every linear's bias: 2 x 3072 + 2 x 256 + 12288 + 3072 = 22,016 a layer.
  CHECK(count_parameters(parse_hf_config(sc + R"(, "use_bias": false})")).layer.count() == 95'979'008 - 22'016);
  CHECK(parse_hf_config(sc + R"(, "residual_dropout": 0.1, "embedding_dropout": 0.1})").residual_dropout == 0.1);
  CHECK(parse_hf_config(sc + R"(, "sliding_window": 4096})").sliding_window == 4096);
  CHECK(parse_hf_config(sc + R"(, "hidden_act": "gelu_new"})").gelu_tensor_ops);
  CHECK_THROWS_WITH(parse_hf_config(sc + R"(, "hidden_act": "relu"})"),
                    Catch::Matchers::Contains(R"(field 'hidden_act' must be "gelu_pytorch_tanh", "gelu" or "gelu_new" for model_type 'starcoder2')"));
}

TEST_CASE("SmolLM3's parameters and NoPE layers, written out", "[model][hf]") {
  // SmolLM3Config's defaults (modular_smollm3.py), HuggingFaceTB/SmolLM3-3B's shape: hidden 2048, 36 layers, 16 heads and
  // 4 KV heads of 128, intermediate 11008, vocab 128256, tied, no biases. q and o 2048^2 = 4,194,304 each; k and v
  // 2048 x 512 = 1,048,576 each; gate, up, down 3 x 2048 x 11008 = 67,633,152; two RMSNorms 4,096: 78,123,008 per layer;
  // x 36 = 2,812,428,288; embed_tokens 128256 x 2048 = 262,668,288; final norm 2,048: 3,075,098,624.
  const std::string smol = R"({"model_type": "smollm3", "hidden_size": 2048, "num_hidden_layers": 36, "num_attention_heads": 16,
    "num_key_value_heads": 4, "intermediate_size": 11008, "vocab_size": 128256)";
  const transformer_config m = parse_hf_config(smol + "}");
  CHECK(m.tied_embeddings);  // SmolLM3Config(tie_word_embeddings=True)
  const parameter_counts c = count_parameters(m);
  CHECK(c.layer.count() == 78'123'008);
  CHECK(c.total.count() == 3'075'098'624LL);
  // no_rope_layers by default: int((i + 1) % no_rope_layer_interval != 0), interval 4: layers 3, 7, ... skip RoPE.
  CHECK(m.nope_period == 4);
  CHECK(rope_layer(m, 0));
  CHECK(rope_layer(m, 2));
  CHECK_FALSE(rope_layer(m, 3));
  CHECK_FALSE(rope_layer(m, 35));
  CHECK(parse_hf_config(smol + R"(, "no_rope_layer_interval": 3})").nope_period == 3);
  // An explicit list in the same period (the released config.json lists it), or every layer rotating.
  std::string list = "[", ones = "[";
  for (int i = 0; i < 36; ++i) {
    list += std::string(i ? ", " : "") + ((i + 1) % 4 == 0 ? "0" : "1");
    ones += std::string(i ? ", " : "") + "1";
  }
  CHECK(parse_hf_config(smol + R"(, "no_rope_layers": )" + list + "]}").nope_period == 4);
  CHECK(parse_hf_config(smol + R"(, "no_rope_layers": )" + ones + "]}").nope_period == 0);
  // Any other arrangement, a short list, or a window on the NoPE layers is refused by name.
  CHECK_THROWS_WITH(parse_hf_config(smol + R"(, "no_rope_layers": [0, 1, 1]})"), Catch::Matchers::Contains("field 'no_rope_layers' must list"));
  std::string odd = list;
  odd[1] = '0';  // layer 0 NoPE too: periods 1 and 4 mixed
  CHECK_THROWS_WITH(parse_hf_config(smol + R"(, "no_rope_layers": )" + odd + "]}"), Catch::Matchers::Contains("not every N-th layer without RoPE"));
  CHECK_THROWS_WITH(parse_hf_config(smol + R"(, "use_sliding_window": true, "sliding_window": 4096})"),
                    Catch::Matchers::Contains("on the NoPE layers only"));
  transformer_config learned = preset_config("gpt3-175b");
  learned.nope_period = 4;
  CHECK_THROWS_WITH(validate(learned), Catch::Matchers::Contains("layers without RoPE need rotary positions"));
}

TEST_CASE("Granite's config: Llama's layer with scalar multipliers", "[model][hf]") {
  // GraniteConfig's defaults (configuration_granite.py) are Llama-2-7B's shape: vocab 32000, hidden 4096, intermediate
  // 11008, 32 layers of 32 heads, untied, no biases, so the count is Llama-2-7B's published 6,738,415,616.
  const std::string granite = R"({"model_type": "granite", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
    "intermediate_size": 11008, "vocab_size": 32000, "embedding_multiplier": 12.0, "logits_scaling": 16.0,
    "residual_multiplier": 0.22, "attention_multiplier": 0.0078125)";
  const transformer_config m = parse_hf_config(granite + "}");
  CHECK(count_parameters(m).total.count() == 6'738'415'616LL);
  CHECK(count_parameters(m).total == count_parameters(preset_config("llama-2-7b")).total);
  CHECK(m.scaled_residual);
  CHECK(m.scaled_logits);
  CHECK_FALSE(m.tied_embeddings);
  CHECK(count_parameters(parse_hf_config(granite + R"(, "attention_bias": true})")).layer.count() ==
        count_parameters(m).layer.count() + 4 * 4096);
  transformer_config bad = m;
  bad.post_norms = true;
  bad.qk_norm = bad.qk_norm_whole = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("scaled residual branch (Granite's) is modelled on Llama's pre-norm layer"));
}

TEST_CASE("config.json's quantization_config: bitsandbytes' NF4 and 8-bit are matched with the base's quantization, others refused", "[model][hf]") {
  // A prequantized checkpoint's config.json carries what from_pretrained loads it with (BitsAndBytesConfig.to_dict():
  // quant_method "bitsandbytes", load_in_4bit, bnb_4bit_quant_type, bnb_4bit_use_double_quant, ...). Read as if
  // unquantized, its 4-bit weights would count 16-bit: the base's quantization must say the same or it is refused.
  const std::string llama = R"({"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
    "intermediate_size": 128, "vocab_size": 100)";
  const std::string nf4 = llama + R"(, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true,
    "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true, "bnb_4bit_compute_dtype": "bfloat16"}})";
  const hf_quantization qlora{quantization::nf4, true};
  CHECK(count_parameters(parse_hf_config(nf4, qlora)).total == count_parameters(parse_hf_config(llama + "}")).total);
  CHECK_THROWS_WITH(parse_hf_config(nf4), Catch::Matchers::Contains("quantization_config stores the weights in bitsandbytes NF4 with "
                                                                    "double quantization, but the base is modelled as unquantized weights: "
                                                                    "model it so (--quantize nf4; adaptation::quantize)"));
  CHECK_THROWS_WITH(parse_hf_config(nf4, hf_quantization{quantization::nf4, false}), Catch::Matchers::Contains("without double quantization"));
  // bnb_4bit_use_double_quant is false by default (BitsAndBytesConfig), and the fix then names --no-double-quant.
  const std::string single = llama + R"(, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true, "bnb_4bit_quant_type": "nf4"}})";
  CHECK_NOTHROW(parse_hf_config(single, hf_quantization{quantization::nf4, false}));
  CHECK_THROWS_WITH(parse_hf_config(single, qlora), Catch::Matchers::Contains("(--quantize nf4 --no-double-quant;"));
  const std::string int8 = llama + R"(, "quantization_config": {"quant_method": "bitsandbytes", "load_in_8bit": true}})";
  CHECK_NOTHROW(parse_hf_config(int8, hf_quantization{quantization::int8, true}));
  CHECK_THROWS_WITH(parse_hf_config(int8, qlora), Catch::Matchers::Contains("(--quantize int8;"));
  // No quantization_config (or null): the weights as stored, quantized or not as they load (QLoRA's runtime quantization).
  CHECK_NOTHROW(parse_hf_config(llama + "}", qlora));
  CHECK_NOTHROW(parse_hf_config(llama + R"(, "quantization_config": null})"));
  // What is not modelled is refused by name: 4-bit fp4 (BitsAndBytesConfig's default type), other methods, a bad field.
  CHECK_THROWS_WITH(parse_hf_config(llama + R"(, "quantization_config": {"quant_method": "bitsandbytes", "load_in_4bit": true}})", qlora),
                    Catch::Matchers::Contains("4-bit fp4"));
  CHECK_THROWS_WITH(parse_hf_config(llama + R"(, "quantization_config": {"quant_method": "awq", "bits": 4}})", qlora),
                    Catch::Matchers::Contains(R"(quant_method '"awq"' is not modelled)"));
  CHECK_THROWS_WITH(parse_hf_config(llama + R"(, "quantization_config": {"bits": 4}})"), Catch::Matchers::Contains("quant_method missing"));
  CHECK_THROWS_WITH(parse_hf_config(llama + R"(, "quantization_config": {"quant_method": "bitsandbytes"}})"),
                    Catch::Matchers::Contains("exactly one of load_in_4bit and load_in_8bit"));
  CHECK_THROWS_WITH(parse_hf_config(llama + R"(, "quantization_config": 4})"), Catch::Matchers::Contains("must be an object"));
}

TEST_CASE("GPT-2's activation_function is read, and what is not modelled is refused by key", "[model][hf]") {
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 64, "n_layer": 2, "n_head": 4, "vocab_size": 100, "n_positions": 128)";
  const transformer_config base = parse_hf_config(gpt2 + "}");  // GPT2Config(activation_function="gelu_new")
  CHECK(base.gelu_tensor_ops);
  CHECK(base.mlp == mlp_kind::gelu);
  const transformer_config one_kernel = parse_hf_config(gpt2 + R"(, "activation_function": "gelu"})");
  CHECK_FALSE(one_kernel.gelu_tensor_ops);
  CHECK_FALSE(one_kernel.gelu_fast_ops);
  CHECK(parse_hf_config(gpt2 + R"(, "activation_function": "gelu_fast"})").gelu_fast_ops);
  CHECK(parse_hf_config(gpt2 + R"(, "activation_function": "relu"})").mlp == mlp_kind::relu);
  // quick_gelu (x * sigmoid(1.702 x)) keeps other tensors: refused, as it was silently read as one GELU kernel before.
  CHECK_THROWS_WITH(parse_hf_config(gpt2 + R"(, "activation_function": "quick_gelu"})"),
                    Catch::Matchers::Contains(R"(field 'activation_function' must be "gelu_new", "gelu_fast", "gelu", "gelu_pytorch_tanh", )"
                                              R"("silu", "swish" or "relu" for model_type 'gpt2', got '"quick_gelu"')"));
  CHECK_THROWS_WITH(parse_hf_config(gpt2 + R"(, "activation_function": 3})"), Catch::Matchers::Contains("got '3'"));
  CHECK_THROWS_WITH(parse_hf_config(gpt2 + R"(, "reorder_and_upcast_attn": true})"), Catch::Matchers::Contains("reorder_and_upcast_attn true"));
  CHECK_FALSE(parse_hf_config(gpt2 + R"(, "reorder_and_upcast_attn": false})").gelu_fast_ops);
}

TEST_CASE("OPT-350M's projected embedding and post-residual norms, written out", "[model][hf]") {
  // facebook/opt-350m config.json: hidden 1024, 24 layers, 16 heads, ffn_dim 4096, vocab 50272, 2048 positions,
  // word_embed_proj_dim 512, do_layer_norm_before false, tied. embed_tokens 50272 x 512 = 25,739,264; embed_positions
  // 2050 x 1024 = 2,099,200; project_in 512 x 1024 and project_out 1024 x 512, no bias, 2 x 524,288; per layer q, k, v,
  // out_proj 4 x (1024^2 + 1024) = 4,198,400, fc1 1024 x 4096 + 4096 = 4,198,400, fc2 4096 x 1024 + 1024 = 4,195,328, two
  // LayerNorms 4,096: 12,596,224; x 24 = 302,309,376; no final LayerNorm; lm_head tied: 331,196,416 ("350M").
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/opt-350m.json");
  CHECK(m.post_residual_norms);
  CHECK(m.embedding_width == 512);
  CHECK(m.projected_embedding());
  CHECK(m.token_width() == 512);
  const parameter_counts c = count_parameters(m);
  CHECK(c.embedding.count() == 25'739'264 + 524'288);
  CHECK(c.lm_head.count() == 524'288);
  CHECK(c.final_norm.count() == 0);
  CHECK(c.layer.count() == 12'596'224);
  CHECK(c.total.count() == 331'196'416);
  // One rank holds them all, project_out among them though the output layer is tied; over 2 tensor-parallel ranks half.
  CHECK(parameters_per_rank(m, 1, 1).most_loaded.count() == 331'196'416);
  CHECK(parameters_per_rank(m, 2, 1).most_loaded.count() == 165'598'208);
  // Untied, the output layer is vocab x 512.
  transformer_config untied = m;
  untied.tied_embeddings = false;
  CHECK(count_parameters(untied).lm_head.count() == 524'288 + 25'739'264);
  // The layouts are checked: norms after the residual adds are LayerNorm layers in sequence.
  transformer_config bad = m;
  bad.parallel_residual = true;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("LayerNorm layers in sequence"));
  bad = m;
  bad.embedding_width = -1;
  CHECK_THROWS_WITH(validate(bad), Catch::Matchers::Contains("the embedding width cannot be negative"));
  // PEFT's all-linear would adapt project_in and project_out, which zeromem does not: refused.
  lora_config lora{};
  lora.rank = 8;
  lora.targets = bit(lora_module::all_linear);
  CHECK_THROWS_WITH(count_lora_parameters(m, lora), Catch::Matchers::Contains("name the target modules instead"));
  lora.targets = bit(lora_module::q_proj) | bit(lora_module::v_proj);
  CHECK(count_lora_parameters(m, lora).total.count() == 24LL * 2 * 8 * (1024 + 1024));
}
