// Forward-only peaks (no autograd): a derivation written out here for Llama-2-7B, and the errors. The random
// models checked op by op against PyTorch are in tests/oracle/run_forward_oracle.py.
#include <stdexcept>

#include "catch.hpp"
#include "zeromem/model/hf_config.hpp"
#include "zeromem/zeromem.hpp"

using namespace zeromem;

TEST_CASE("forward only: Llama-2-7B reference log-probs, term by term", "[forward]") {
  // bf16, 2 sequences of 4096 tokens, SDPA, transformers' default use_cache. sbh = 33,554,432, sb = 8192;
  // H = Q = K = 2 sbh = 67,108,864 B (MHA); F = 2 x 8192 x 11008 = 180,355,072 B.
  const transformer_config m = preset_config("llama-2-7b");
  forward_only_config f{};
  f.seq_len = 4096;
  f.micro_batch = 2;
  f.output = forward_output::log_probs;
  // The layer: the MLP frame holds R1, the cached K and V, the normed input and act, up and their product:
  // 4H + 3F = 268,435,456 + 541,065,216 (the attention frame peaks at 8H = 536,870,912 B during k's RoPE).
  CHECK(forward_layer_peak(m, f).count() == 809'500'672);
  const forward_only_estimate e = estimate_forward_only(m, f, forward_weight_bytes(m, dtype::bf16));
  CHECK(e.weights.count() == 13'476'831'232);
  // The last layer: token ids 65,536 + positions 32,768 + rotary cos and sin 2 x 2 x 4096 x 128 = 2,097,152 (one row,
  // position_ids = cache_position.unsqueeze(0), broadcast over the batch) + embedding output and layer input 2H
  // + 31 layers' K and V (4,160,749,568) + the layer's 809,500,672.
  CHECK(e.layers_phase.count() == 65'536 + 32'768 + 2'097'152 + 134'217'728 + 4'160'749'568 + 809'500'672);
  // The output: 262,144,000 logits x (2 + 4 + 4) B beside the cache of all 32 layers and the token ids.
  CHECK(e.output_phase.count() == 2'621'440'000 + 4'294'967'296 + 65'536);
  // With the one cuBLAS workspace the forward's thread holds: 32 MiB on an H100 by default.
  CHECK(e.blas_workspaces.count() == 32 * 1'048'576);
  CHECK(e.peak == e.weights + bytes_of(33'554'432) + e.output_phase);

  // Without the cache the layers keep nothing of each other: the MLP frame is 2H + 3F.
  forward_only_config no_cache = f;
  no_cache.use_cache = false;
  const forward_only_estimate n = estimate_forward_only(m, no_cache, forward_weight_bytes(m, dtype::bf16));
  CHECK(n.layer_peak.count() == 134'217'728 + 541'065'216);
  CHECK(n.output_phase.count() == 2'621'440'000 + 65'536);

  // An NF4 reference: the linear weights at 4.127 bits (the figure test_cli.cpp derives: 3,865,591,808 B).
  CHECK(forward_weight_bytes(m, dtype::bf16, quantization::nf4).count() == 3'865'591'808);
}

TEST_CASE("forward only: Gemma's norm and scaled embedding", "[forward]") {
  // Gemma-2B's attention (8 heads and 1 KV head of 256, hidden 2048) with q_norm / k_norm and an 8-wide MLP, so that a
  // norm sets the layer's peak; bf16, one sequence of 1024 tokens, SDPA, no cache. H = Q = 2 x 1024 x 2048 = 4,194,304 B.
  transformer_config m = preset_config("gemma-2b");
  m.qk_norm = true;
  m.ffn = 8;
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // q_norm over 8 x 1024 = 8192 rows of 256 beside the normed input and q_proj's output (H + Q). GemmaRMSNorm: x.float()
  // and x.pow(2) (8 x 2,097,152 B) with the mean (4 B a row, 32,768), or later the fp32 normalised tensor, its product
  // with (1 + weight) (8 x 2,097,152 B) and that vector (4 x 256 = 1,024): 16,777,216 + 32,768.
  CHECK(forward_layer_peak(m, f).count() == 4'194'304LL + 4'194'304 + 16'777'216 + 32'768);
  // LlamaRMSNorm instead: the fp32 copy, x * rsqrt beside it, the variance and rsqrt rows (8 B a row): + 65,536.
  transformer_config llama_norm = m;
  llama_norm.norm_scale_fp32 = false;
  CHECK(forward_layer_peak(llama_norm, f).count() == 4'194'304LL + 4'194'304 + 16'777'216 + 65'536);
  // GemmaModel keeps inputs_embeds referenced beside the scaled copy it passes to layer 0: with one layer, one more H
  // than LlamaModel, whose layer 0 takes inputs_embeds itself.
  m.layers = 1;
  transformer_config unscaled = m;
  unscaled.scaled_embedding = false;
  const bytes w{};
  CHECK(estimate_forward_only(m, f, w).layers_phase.count() - estimate_forward_only(unscaled, f, w).layers_phase.count() == 4'194'304);
}

TEST_CASE("forward only: Gemma-3 builds a rotary pair for each kind of layer it has", "[forward]") {
  // transformers 5 Gemma3TextModel.forward makes position_embeddings for `set(config.layer_types)`: Gemma-3-1B (a
  // full-attention layer every 6 of 26) both pairs, five layers (all sliding) the local pair alone. bf16, one sequence
  // of 1024 tokens, eager, no cache: each pair is cos and sin, 2 x 2 x 1024 x 256 = 1,048,576 B, held beside every
  // layer; the layers themselves (the last of each kind, no cache) are the same either way.
  const transformer_config gemma3 = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/gemma-3-1b.json");
  transformer_config sliding_only = gemma3;
  sliding_only.layers = 5;
  forward_only_config f{};
  f.seq_len = 1024;
  f.attention = attention_kind::eager;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  const bytes w{};
  CHECK(estimate_forward_only(gemma3, f, w).layers_phase.count() - estimate_forward_only(sliding_only, f, w).layers_phase.count() ==
        1'048'576);
}

TEST_CASE("forward only: OLMo-2's fp32 rotation, whole-projection norms and post-norms", "[forward]") {
  // OLMo-2-0425-1B (16 heads and 16 KV heads of 128, hidden 2048) with an 8-wide MLP, so that attention sets the layer's
  // peak; bf16, one sequence of 1024 tokens, SDPA, the cache on. H = Q = K = 2 x 1024 x 2048 = 4,194,304 B, 2,097,152
  // values each.
  transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmo-2-0425-1b.json");
  m.ffn = 8;
  forward_only_config f{};
  f.seq_len = 1024;
  f.output = forward_output::hidden_states;
  // The attention reads the layer input itself (no normed copy). OlmoRotaryEmbedding's cos and sin are fp32, so while k
  // rotates: q, k and v (12,582,912), q_embed in fp32 (8,388,608), k * cos, rotate_half(k) * sin and their sum in fp32
  // (3 x 8,388,608): 46,137,344 B.
  CHECK(forward_layer_peak(m, f).count() == 12'582'912 + 8'388'608 + 3 * 8'388'608);
  // In bf16 the rotation is smaller (12,582,912 + 4,194,304 + 12,582,912 = 29,360,128), and post_feedforward_layernorm
  // sets the peak: the cache's K and V (8,388,608), the residual sum R1 and the MLP output (2 x 4,194,304) and
  // Olmo2RMSNorm over 2,097,152 values of 1024 rows: the fp32 normalised tensor and its product with the weight
  // (16,777,216), the variance (4,096) and the product's bf16 cast (4,194,304): 37,752,832 B.
  transformer_config bf16_rope = m;
  bf16_rope.rope_fp32 = false;
  CHECK(forward_layer_peak(bf16_rope, f).count() == 8'388'608 + 2 * 4'194'304 + 16'777'216 + 4'096 + 4'194'304);
}

TEST_CASE("forward only: OLMo's OlmoLayerNorm over an fp32 copy", "[forward]") {
  // OlmoLayerNorm over 1024 rows of 2048 (2,097,152 values): in bf16 x.to(fp32) (8,388,608 B) beside native_layer_norm's
  // fp32 output (8,388,608) and its mean and rstd (8 x 1024 = 8,192), then the output beside its bf16 cast (8,388,608 +
  // 4,194,304): max(16,785,408, 12,582,912). In fp32 no copy: the output, mean and rstd, 8,396,800 B.
  const transformer_config m = read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/olmo-1b-hf.json");
  CHECK(detail::forward_norm_peak(m, 2, 1024, 2048) == 16'785'408);
  CHECK(detail::forward_norm_peak(m, 4, 1024, 2048) == 8'396'800);
  // OLMo-1B-hf's layer (16 heads and 16 KV heads of 128) with an 8-wide MLP, bf16, one sequence of 1024 tokens, SDPA, no
  // cache: H = Q = K = 4,194,304 B. Attention sets the peak while k rotates with the fp32 tables: the normed input (H),
  // q, k and v (3H), q_embed in fp32 (8,388,608), k * cos, rotate_half(k) * sin and their sum in fp32 (3 x 8,388,608):
  // 50,331,648 B.
  transformer_config narrow = m;
  narrow.ffn = 8;
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  CHECK(forward_layer_peak(narrow, f).count() == 4'194'304 + 12'582'912 + 8'388'608 + 3 * 8'388'608);
  // On a CPU, rotate_half(k) * sin first copies its bf16 operand to fp32 (TensorIterator's CPU promotion; CUDA casts in
  // the kernel): k * cos, rotate_half(k) (4,194,304), its fp32 copy and the product (3 x 8,388,608) beside the rest,
  // 54,525,952 B.
  f.device = device_kind::cpu;
  CHECK(forward_layer_peak(narrow, f).count() == 4'194'304 + 12'582'912 + 8'388'608 + 3 * 8'388'608 + 4'194'304);
  f.device = device_kind::cuda;
  // The whole model is estimated, not refused (a LayerNorm without an fp32 copy still is).
  CHECK(estimate_forward_only(m, f, forward_weight_bytes(m, dtype::bf16)).weights.count() == 2 * 1'176'764'416LL);
  transformer_config bf16_layernorm = m;
  bf16_layernorm.norm_input_fp32 = false;
  CHECK_THROWS_WITH(estimate_forward_only(bf16_layernorm, f, bytes{}), Catch::Contains("Llama-family"));
}

TEST_CASE("forward only: SmolLM3's NoPE layers skip the rotation, and the rotary tables are built", "[forward]") {
  // A one-layer toy (hidden 32, one head and one KV head of 32, MLP 11), bf16, 2 sequences of 4 tokens, eager attention,
  // no cache: sb = 8, H = Q = K = 2 x 8 x 32 = 512 B, F = 176 B, A = 32 scores (64 B). q, k and v beside the normed
  // input: Y + Q + 2K = 2,048 B.
  transformer_config m{};
  m.hidden = 32; m.layers = 1; m.heads = m.kv_heads = 1; m.ffn = 11; m.vocab = 60;
  forward_only_config f{};
  f.seq_len = 4; f.micro_batch = 2; f.attention = attention_kind::eager; f.use_cache = false;
  f.output = forward_output::hidden_states;
  // With RoPE the peak is k's rotation beside q_embed: 2,048 + 512 + 3 x 512 = 4,096 B.
  CHECK(forward_layer_peak(m, f).count() == 4'096);
  // A NoPE layer (SmolLM3Attention, use_rope 0) keeps q and k as views of the projections; with one head every batched
  // matmul folds them as views and transpose().contiguous() returns the output itself (the oracle's op trace shows no
  // copy), so the peak is o_proj's output beside the attention output, the 64 B of probabilities and the 2,048:
  // 2,048 + 64 + 512 + 512 = 3,136 B.
  m.nope_period = 1;
  CHECK_FALSE(rope_layer(m, 0));
  CHECK(forward_layer_peak(m, f).count() == 3'136);
  // The same with 3 sequences of one token and a head of 64 wider than the hidden size of 8 (found by the forward
  // oracle, seed 7): sb = 3, H = Y = 48 B, Q = K = 2 x 3 x 64 = 384 B, A = 3 scores (6 B), the cache keeps K and V.
  // q, k and v beside the normed input: 48 + 384 + 768 = 1,200 B. P @ V adds only its output (no K or V copy: one head
  // means repeat_kv returns them, n_rep = 1), and o_proj's output comes beside it: 1,200 + 6 + 384 + 48 = 1,638 B, what
  // the oracle measures for the layer (zeromem said 1,974 B when it copied V for the batch).
  transformer_config narrow{};
  narrow.hidden = 8; narrow.layers = 4; narrow.heads = narrow.kv_heads = 1; narrow.head_dim = 64; narrow.ffn = 9; narrow.vocab = 55;
  narrow.nope_period = 1;
  forward_only_config g{};
  g.seq_len = 1; g.micro_batch = 3; g.attention = attention_kind::eager; g.use_cache = true;
  g.output = forward_output::hidden_states;
  CHECK(forward_layer_peak(narrow, g).count() == 1'638);
  // The tables are one row for the batch (position_ids = cache_position.unsqueeze(0)): building them
  // (LlamaRotaryEmbedding.forward) takes fp32 positions 4 x 4 = 16, freqs 4 x 4 x 16 = 256, emb 512, fp32 cos and sin
  // 1,024 and their bf16 casts 512: 2,320 B. With 2 sequences the layer is higher: token ids 64, positions 32, the
  // eager mask 2 x 2 x 4 x 4 = 64, the bf16 tables 512, the embedding output 512 and the layer's 3,136 = 4,320 B.
  f.blas_workspaces = bytes{};  // on the CPU, as the oracle measures it
  const forward_only_estimate e = estimate_forward_only(m, f, bytes{});
  CHECK(e.layers_phase.count() == 64 + 32 + 64 + 512 + 512 + 3'136);
  CHECK(e.peak == e.layers_phase);
  // One sequence: the layer holds 1,568 B (half of the above), beside the tables (512) and the embedding output (256):
  // 2,336 B, under building the tables beside the embedding output: 256 + 2,320 = 2,576 B, above token ids 32,
  // positions 32 and the mask 2 x 1 x 4 x 4 = 32 (the oracle measures such short, narrow models exactly).
  f.micro_batch = 1;
  CHECK(forward_layer_peak(m, f).count() == 1'568);
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 32 + 32 + 32 + 256 + 16 + 256 + 512 + 1'024 + 512);
}

TEST_CASE("forward only: Granite's divided logits, and fp32 log-probs without an upcast copy", "[forward]") {
  // Llama-2-7B's shape, 2 sequences of 4096 tokens: n = 8192 x 32000 = 262,144,000 logits; H = 67,108,864 B in bf16.
  const transformer_config llama = preset_config("llama-2-7b");
  transformer_config granite = llama;
  granite.scaled_logits = granite.scaled_residual = true;
  forward_only_config f{};
  f.seq_len = 4096; f.micro_batch = 2; f.output = forward_output::logits;
  const bytes w = forward_weight_bytes(llama, dtype::bf16);
  // GraniteForCausalLM: logits / logits_scaling beside lm_head's output (2 x 524,288,000 B), beside the last hidden
  // state, all 32 layers' K and V (4,294,967,296 B) and the token ids (65,536 B); Llama holds one logits tensor.
  CHECK(estimate_forward_only(granite, f, w).output_phase.count() == 65'536 + 4'294'967'296LL + 67'108'864 + 2 * 524'288'000LL);
  CHECK(estimate_forward_only(llama, f, w).output_phase.count() == 65'536 + 4'294'967'296LL + 67'108'864 + 524'288'000LL);
  // In fp32, log_softmax(logits.float()) upcasts nothing (Tensor.to returns self): logits and their log-softmax,
  // 8 B a logit (2,097,152,000 B), beside the fp32 cache (8,589,934,592 B) and the token ids.
  f.compute = dtype::fp32;
  f.output = forward_output::log_probs;
  CHECK(estimate_forward_only(llama, f, forward_weight_bytes(llama, dtype::fp32)).output_phase.count() ==
        65'536 + 8'589'934'592LL + 2'097'152'000LL);
}

TEST_CASE("forward only: transformers 5's routed experts (Mixtral-8x7B), term by term", "[forward][moe]") {
  // bf16, one sequence of 1024 tokens, SDPA, no cache, reference log-probs. sb = 1024, h = 4096, 32 heads of 128, 8 kv
  // heads; 8 experts of 14,336, top 2, routing weights in fp32 (Mixtral's router does not cast them).
  // H = Q = 2 x 1024 x 4096 = 8,388,608 B; K = 2 x 1024 x 1024 = 2,097,152 B.
  const transformer_config m = preset_config("mixtral-8x7b");
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::log_probs;
  // The experts (integrations/moe.py grouped_mm_experts_forward) over S = 2 x 1024 = 2048 routed rows: the router's
  // logits 2 x 1024 x 8 = 16,384 B, then the larger of the gathered rows (2 S h = 16,777,216) with gate_up's output,
  // act's and their product (4 x 2 S f = 4 x 58,720,256), 251,658,240 B, and the four [S, h] tensors before the sum,
  // two of them fp32 (2 x 16,777,216 + 2 x 4 S h = 100,663,296); beside R1 and the normed input (2H): 268,451,840 B.
  // (The attention frame's highest, q's rotation: Y + Q + 2K + 3 x 2 x 4,194,304 = 46,137,344 B.)
  // The H100's and H200's MoE steps under recompute hold the same frames in a checkpointed layer's forward (0.26%).
  CHECK(forward_layer_peak(m, f).count() == 16'777'216 + 16'384 + 251'658'240);
  const forward_only_estimate e = estimate_forward_only(m, f, forward_weight_bytes(m, dtype::bf16));
  // Token ids 8,192 + positions 8,192 + rotary cos and sin 2 x 2 x 1024 x 128 = 524,288 + the embedding output and
  // the layer input (2H) + the layer's 268,451,840 B.
  CHECK(e.layers_phase.count() == 8'192 + 8'192 + 524'288 + 16'777'216 + 268'451'840);
  // The output: 32,768,000 logits x (2 + 4 + 4) B beside the token ids: above the layers.
  CHECK(e.output_phase.count() == 327'680'000 + 8'192);
  CHECK(e.peak == e.weights + e.blas_workspaces + e.output_phase);
  // Mixtral-8x7B's 46,702,792,704 parameters in bf16.
  CHECK(e.weights.count() == 2 * 46'702'792'704LL);
}

TEST_CASE("forward only: Phi-3's fused projections and torch.cat rotation, term by term", "[forward]") {
  // Phi-3-mini-4k: h 3072, 32 heads of 96 (MHA), ffn 8192, 32 layers, vocabulary 32,064; bf16, one sequence of 1024
  // tokens, SDPA, no cache, reference log-probs. H = Q = K = 2 x 1024 x 3072 = 6,291,456 B; F = 2 x 1024 x 8192 =
  // 16,777,216 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "phi3", "hidden_size": 3072, "num_hidden_layers": 32,
      "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 8192, "vocab_size": 32064,
      "max_position_embeddings": 4096, "sliding_window": 2047, "tie_word_embeddings": false})");
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::log_probs;
  // Attention (Phi3Attention.forward): the normed input Y and the qkv output (Q + 2K = 18,874,368) stay to the frame's
  // end, q, k and v views of it; k's rotation beside q_embed: Y + qkv + Q + 3K = 50,331,648 B (q's: Y + qkv + 3Q =
  // 44,040,192); SDPA's output copied by transpose().contiguous() beside q_embed and k_embed: the same 50,331,648.
  // The MLP (Phi3MLP.forward): R1 and the normed input (2H) beside gate_up's output 2F, act(gate) F and the product F:
  // 12,582,912 + 67,108,864 = 79,691,776 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 12'582'912 + 4 * 16'777'216);
  const forward_only_estimate e = estimate_forward_only(m, f, forward_weight_bytes(m, dtype::bf16));
  // Token ids 8,192 + positions 8,192 + rotary cos and sin 2 x 2 x 1024 x 96 = 393,216 + the embedding output and the
  // layer input (2H) + the layer.
  CHECK(e.layers_phase.count() == 8'192 + 8'192 + 393'216 + 12'582'912 + 79'691'776);
  // The output: 32,833,536 logits x (2 + 4 + 4) B beside the token ids.
  CHECK(e.output_phase.count() == 328'335'360 + 8'192);
  CHECK(e.weights.count() == 2 * 3'821'079'552LL);  // Phi-3-mini's parameters in bf16
  // Phi-4-mini's partial rotation (partial_rotary_factor 0.75: 72 of 96 values) narrows the tables to 2 x 2 x 1024 x 72.
  transformer_config partial = m;
  partial.rotary_dims = 72;
  CHECK(estimate_forward_only(partial, f, bytes{}).layers_phase.count() == 8'192 + 8'192 + 294'912 + 12'582'912 + 79'691'776);
}

TEST_CASE("forward only: GPT-NeoX's per-head projection, partial rotation and parallel MLP, term by term", "[forward]") {
  // Pythia-1B: h 2048, 8 heads of 256, ffn 8192, rotary_pct 0.25 (64 of 256 values), parallel branches, exact GELU;
  // bf16, one sequence of 2048 tokens, no cache. H = Q = K = 2 x 2048 x 2048 = 8,388,608 B; F = 2 x 2048 x 8192 =
  // 33,554,432 B; the rotated parts R = 2 x 2048 x 8 x 64 = 2,097,152 B.
  const transformer_config m = preset_config("pythia-1b");
  forward_only_config f{};
  f.seq_len = 2048;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // Attention (modular_gpt_neox.py): input_layernorm's output Y and query_key_value's output (3Q) to the frame's end;
  // apply_rotary_pos_emb joins q's rotated part to its passed part (a new Q) and then k's beside it: Y + 3Q + 2Q + R =
  // 52,428,800 B; SDPA's output and its transposed copy beside q_embed and k_embed: Y + 5Q + 2Q = 67,108,864 B.
  // The MLP over post_attention_layernorm(x), beside the attention output: the two H and dense_h_to_4h's and GELU's
  // outputs (2F): 16,777,216 + 67,108,864 = 83,886,080 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 83'886'080);
  // Eager attention: the scores (2 x 8 x 2048^2 = 67,108,864 B) beside softmax's fp32 copy and output (2 x 134,217,728)
  // and what the rotation left (Y + 5Q = 50,331,648): 385,875,968 B, above the MLP's 83,886,080 + 67,108,864 (the
  // probabilities stay bound in the layer's frame).
  forward_only_config eager = f;
  eager.attention = attention_kind::eager;
  CHECK(forward_layer_peak(m, eager).count() == 50'331'648 + 67'108'864 + 268'435'456);
  // Sequential branches (use_parallel_residual false) and gelu_fast's tensor ops (GPT-NeoX-20B's activation: four
  // tensors of the MLP width beside its input): R1 and ln2's output beside 5F = 16,777,216 + 167,772,160 B.
  transformer_config sequential = m;
  sequential.parallel_residual = false;
  sequential.gelu_fast_ops = true;
  CHECK(forward_layer_peak(sequential, f).count() == 16'777'216 + 167'772'160);
  // The model: token ids 16,384 + positions 16,384 + rotary cos and sin 2 x 2 x 2048 x 64 = 524,288 + the embedding
  // output and the layer input (2H) + the layer; a LayerNorm's statistics are fp32 on CUDA.
  const forward_only_estimate e = estimate_forward_only(m, f, bytes{});
  CHECK(e.layers_phase.count() == 16'384 + 16'384 + 524'288 + 16'777'216 + 83'886'080);
  CHECK(detail::forward_norm_peak(m, 2, 2048, 2048, device_kind::cuda) == 8'388'608 + 2 * 2048 * 4);
  CHECK(detail::forward_norm_peak(m, 2, 2048, 2048, device_kind::cpu) == 8'388'608 + 2 * 2048 * 2);
}

TEST_CASE("forward only: GPT-2's block, learned positions and train-mode dropout, term by term", "[forward]") {
  // GPT-2 XL: h 1600, 25 heads of 64, ffn 6400, gelu_new, 1024 positions, GPT2Config's dropouts (0.1 each); bf16, one
  // sequence of 1024 tokens, no cache. H = Q = 2 x 1024 x 1600 = 3,276,800 B; F = 2 x 1024 x 6400 = 13,107,200 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "gpt2", "n_embd": 1600, "n_layer": 48, "n_head": 25,
      "vocab_size": 50257, "n_positions": 1024})");
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // SDPA (modeling_gpt2.py GPT2Block): ln_1's Y and c_attn's output (3Q) through attention (16,486,400 B at most: the
  // kernel's output, its contiguous copy, c_proj's); then the attention output, R1 and ln_2's output beside c_fc's
  // output and gelu_new's three temporaries: 3H + 4F = 9,830,400 + 52,428,800 = 62,259,200 B, the block's highest.
  CHECK(forward_layer_peak(m, f).count() == 62'259'200);
  // The model: token ids 8,192 + positions 8,192 + wpe's one row of positions (2 x 1024 x 1600 = 3,276,800) +
  // inputs_embeds and the block's input (2H, layer 0 too: their sum is a new tensor) + the block.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 8'192 + 8'192 + 3'276'800 + 6'553'600 + 62'259'200);
  // Eager attention (b = 1: q, k and v fold as views): the scores divided by sqrt(d), then masked, then softmax in bf16
  // (A = 25 x 1024^2 = 26,214,400; two score tensors of 52,428,800 B) beside Y and c_attn's output: 117,964,800 B.
  f.attention = attention_kind::eager;
  CHECK(forward_layer_peak(m, f).count() == 13'107'200 + 2 * 52'428'800);
  // Under model.train() (a checkpointed block's forward in training) attn_dropout's copy of the probabilities and its
  // 1-byte CUDA mask join them: + 26,214,400 B.
  f.train_dropout = true;
  CHECK(forward_layer_peak(m, f).count() == 13'107'200 + 2 * 52'428'800 + 26'214'400);
  // resid_dropout's copy of c_proj's output and its mask (2H + 1,638,400 B beside Y and c_attn's output) set the block
  // where the MLP is narrow (n_inner 8) under SDPA: 13,107,200 + 6,553,600 + 1,638,400 = 21,299,200 B, where SDPA's
  // output and its contiguous copy (or c_proj's) hold 19,660,800 B without dropout.
  transformer_config narrow = m;
  narrow.ffn = 8;
  forward_only_config sdpa = f;
  sdpa.attention = attention_kind::flash;
  sdpa.train_dropout = false;
  CHECK(forward_layer_peak(narrow, sdpa).count() == 19'660'800);
  sdpa.train_dropout = true;
  CHECK(forward_layer_peak(narrow, sdpa).count() == 21'299'200);
  // Eager at 64 tokens (A = 25 x 64^2 = 102,400 values, cA = 204,800 B; H = Q = 204,800 B): without dropout the
  // transposed output's copy (or c_proj's) beside Y, c_attn's output and the probabilities, 819,200 + 204,800 +
  // 409,600 = 1,433,600 B; under model.train() resid_dropout's copy of c_proj's output and its mask (2H + 102,400)
  // beside the same, 1,536,000 B, above attn_dropout's 819,200 + 2cA + A = 1,331,200 B.
  forward_only_config short_eager = f;
  short_eager.seq_len = 64;
  short_eager.train_dropout = false;
  CHECK(forward_layer_peak(narrow, short_eager).count() == 1'433'600);
  short_eager.train_dropout = true;
  CHECK(forward_layer_peak(narrow, short_eager).count() == 1'536'000);
  // A sequence longer than the position table is refused, as in training.
  forward_only_config too_long = f;
  too_long.seq_len = 1025;
  CHECK_THROWS_AS(estimate_forward_only(m, too_long, bytes{}), std::invalid_argument);
}

TEST_CASE("forward only: Phi's shared norm, kept rotated parts and gelu_new, term by term", "[forward]") {
  // Phi-2: h 2560, 32 heads of 80 (MHA), ffn 10240, partial_rotary_factor 0.4 (32 of 80 values), gelu_new; bf16, one
  // sequence of 2048 tokens, SDPA, no cache. H = Q = K = 2 x 2048 x 2560 = 10,485,760 B; F = 2 x 2048 x 10240 =
  // 41,943,040 B; the rotated parts R = 2 x 2048 x 32 x 32 = 4,194,304 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "phi", "hidden_size": 2560, "num_hidden_layers": 32,
      "num_attention_heads": 32, "intermediate_size": 10240, "vocab_size": 51200, "partial_rotary_factor": 0.4,
      "hidden_act": "gelu_new"})");
  forward_only_config f{};
  f.seq_len = 2048;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // Attention (PhiAttention.forward): Y and q, k, v (4H) to the frame's end, q's and k's rotated parts (2R, kept by
  // query_rot and key_rot) and the torch.cat results (2Q): 71,303,168 B; SDPA's output and its transposed copy beside
  // them: 92,274,688 B. The MLP over Y beside the attention output: fc1's output and gelu_new's three temporaries (4F):
  // 20,971,520 + 167,772,160 = 188,743,680 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 188'743'680);
  // Exact GELU (one kernel): fc1's and act's outputs beside Y and the attention output, 2H + 2F = 104,857,600 B, still
  // above the attention frame's 92,274,688 B.
  transformer_config exact = m;
  exact.gelu_tensor_ops = false;
  CHECK(forward_layer_peak(exact, f).count() == 20'971'520 + 83'886'080);
  // Token ids 16,384 + positions 16,384 + rotary cos and sin 2 x 2 x 2048 x 32 = 262,144 + 2H + the layer.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 16'384 + 16'384 + 262'144 + 20'971'520 + 188'743'680);
}

TEST_CASE("forward only: StarCoder2's LayerNorms and GELU MLP in Llama's frames, term by term", "[forward]") {
  // StarCoder2-3B: h 3072, 24 heads and 2 kv heads of 128, ffn 12288; bf16, one sequence of 1024 tokens, SDPA, no cache.
  // H = Q = 2 x 1024 x 3072 = 6,291,456 B; K = 2 x 1024 x 256 = 524,288 B; F = 2 x 1024 x 12288 = 25,165,824 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "starcoder2", "hidden_size": 3072, "num_hidden_layers": 30,
      "num_attention_heads": 24, "num_key_value_heads": 2, "intermediate_size": 12288, "vocab_size": 49152})");
  forward_only_config f{};
  f.seq_len = 1024;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // Attention (Llama's frames): q's rotation, its two products and their sum beside Y, q, k and v: 13,631,488 + 3Q =
  // 32,505,856 B. The MLP (Starcoder2MLP: c_fc, one tanh-GELU kernel, c_proj) beside R1 and the normed input: 2H + 2F =
  // 12,582,912 + 50,331,648 = 62,914,560 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 62'914'560);
  // gelu_new's tensor ops hold three tensors of the MLP's width beside c_fc's output: 2H + 4F.
  transformer_config tensor_ops = m;
  tensor_ops.gelu_tensor_ops = true;
  CHECK(forward_layer_peak(tensor_ops, f).count() == 12'582'912 + 100'663'296);
  // Token ids 8,192 + positions 8,192 + rotary cos and sin 2 x 2 x 1024 x 128 = 524,288 + 2H + the layer.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 8'192 + 8'192 + 524'288 + 12'582'912 + 62'914'560);
}

TEST_CASE("forward only: StableLM's layer, Phi's attention frame with Y and the attention output held, term by term", "[forward]") {
  // StableLM-2-1.6B: h 2048, 32 heads of 64 (MHA), ffn 5632, partial_rotary_factor 0.25 (16 of 64 values), q, k, v
  // biases, LayerNorms in sequence; bf16, one sequence of 2048 tokens, SDPA, with the cache. H = Q = K = 2 x 2048 x 2048
  // = 8,388,608 B; F = 2 x 2048 x 5632 = 23,068,672 B; the rotated parts R = 2 x 2048 x 32 x 16 = 2,097,152 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "stablelm", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 5632, "vocab_size": 100352,
      "partial_rotary_factor": 0.25, "use_qkv_bias": true})");
  forward_only_config f{};
  f.seq_len = 2048;
  f.output = forward_output::hidden_states;
  // Attention (StableLmSdpaAttention, Phi's frame): Y, q, k, v (4H), query_rot and key_rot (2R), torch.cat's q and k
  // (2H) = 54,525,952 B; the cache's copies of K and V beside them, or SDPA's output and its transposed copy: + 2H =
  // 71,303,168 B. StableLmDecoderLayer keeps Y and the attention output to its end, beside the cache (4H): R1,
  // post_attention_layernorm's output and the MLP's act(gate), up and product (3F): 6H + 3F = 50,331,648 + 69,206,016 =
  // 119,537,664 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 119'537'664);
  // use_parallel_residual: one norm, the MLP over Y beside Y, the attention output and the cache: 4H + 3F.
  const transformer_config parallel = parse_hf_config(R"({"model_type": "stablelm", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 32, "num_key_value_heads": 32, "intermediate_size": 5632, "vocab_size": 100352,
      "partial_rotary_factor": 0.25, "use_qkv_bias": true, "use_parallel_residual": true})");
  CHECK(forward_layer_peak(parallel, f).count() == 33'554'432 + 69'206'016);
  // Without the cache the MLP stands beside 4H (Y, the attention output, R1 and the norm's output): 4H + 3F.
  f.use_cache = false;
  CHECK(forward_layer_peak(m, f).count() == 33'554'432 + 69'206'016);
  // Token ids 16,384 + positions 16,384 + rotary cos and sin 2 x 2 x 2048 x 16 = 131,072 + the layer input and
  // inputs_embeds (2H) + the layer.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 16'384 + 16'384 + 131'072 + 16'777'216 + 33'554'432 + 69'206'016);
}

TEST_CASE("forward only: OPT's layer and OPTDecoder's positions, one row a sequence, term by term", "[forward]") {
  // OPT-1.3B: h 2048, 32 heads of 64, ffn 8192, LayerNorms before the branches, ReLU; bf16, one sequence of 2048
  // tokens, SDPA, no cache. H = Q = 2 x 2048 x 2048 = 8,388,608 B; F = 2 x 2048 x 8192 = 33,554,432 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "opt", "hidden_size": 2048, "num_hidden_layers": 24,
      "num_attention_heads": 32, "ffn_dim": 8192, "vocab_size": 50272, "max_position_embeddings": 2048})");
  forward_only_config f{};
  f.seq_len = 2048;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // Attention (OPTAttention): Y, q_proj's output times the scaling, k and v (4H); SDPA's output and its transposed copy,
  // or the copy and out_proj's output: 6H = 50,331,648 B. The MLP beside R1 (the residual, bound to the layer's end):
  // fc1's output and ReLU's (2F): H + 2F = 75,497,472 B, the layer's highest.
  CHECK(forward_layer_peak(m, f).count() == 8'388'608 + 67'108'864);
  // OPTDecoder: token ids 16,384 + cache_position 16,384 + its fp32 mask of ones 4 x 2048 = 8,192 and the int64
  // position_ids 8 x 2048 = 16,384 + pos_embeds (one row a sequence, H) + inputs_embeds and the layer input (2H) + the layer.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 16'384 + 16'384 + 8'192 + 16'384 + 8'388'608 + 16'777'216 + 75'497'472);
  // Two sequences: the positions are two rows (2 x H, not one), as the mask and position_ids are.
  f.micro_batch = 2;
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() ==
        32'768 + 16'384 + 16'384 + 32'768 + 16'777'216 + 33'554'432 + (16'777'216 + 134'217'728));
  // OPT-350M: h 1024, 16 heads, ffn 4096, each LayerNorm after its residual add, no final norm, a 512-wide embedding
  // (project_in, project_out). One sequence: H = 4,194,304 B, F = 16,777,216 B; attention reads the layer input itself
  // (3Q, then the copy and out_proj's output: 5H); the MLP reads Y1, the residual: H + 2F = 37,748,736 B.
  const transformer_config small = parse_hf_config(R"({"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 24,
      "num_attention_heads": 16, "ffn_dim": 4096, "vocab_size": 50272, "max_position_embeddings": 2048,
      "do_layer_norm_before": false, "word_embed_proj_dim": 512})");
  f.micro_batch = 1;
  CHECK(forward_layer_peak(small, f).count() == 4'194'304 + 33'554'432);
  // project_out's 512-wide output is the last hidden state: 2 x 2048 x 512 = 2,097,152 B beside the logits,
  // 2 x 2048 x 50,272 = 205,914,112 B, and the token ids.
  f.output = forward_output::logits;
  CHECK(estimate_forward_only(small, f, bytes{}).output_phase.count() == 16'384 + 2'097'152 + 205'914'112);
}

TEST_CASE("forward only: SDPA over the sliding-window mask, once the sequence reaches the window, term by term", "[forward]") {
  // A small Mistral: h 256, 4 heads and 2 kv heads of 64, ffn 512, sliding_window 512, 2 layers; bf16, 2 sequences of
  // 2048 tokens, SDPA, no cache. H = Q = 2 x 4096 x 256 = 2,097,152 B; K = 1,048,576 B.
  const transformer_config m = parse_hf_config(R"({"model_type": "mistral", "hidden_size": 256, "num_hidden_layers": 2,
      "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 512, "vocab_size": 1000, "sliding_window": 512})");
  forward_only_config f{};
  f.seq_len = 2048;
  f.micro_batch = 2;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  // With the mask, sdpa_attention_forward repeats K and V to the 4 heads (2Q) beside Y, q_embed, k_embed and v (H + Q
  // + 2K): 10,485,760 B. PyTorch's SDPA makes the additive mask over the batch, 2 x 2 x 2048 x 2048 = 16,777,216 B
  // (2048 a multiple of 8: not padded); the memory-efficient kernel's output Q and its log-sum-exp, 4 x 4 heads x 2048
  // (rows padded to 32) x 2 = 65,536 B: 29,425,664 B, the layer's highest (its MLP's moment is 16,777,216 B).
  CHECK(forward_layer_peak(m, f).count() == 10'485'760 + 16'777'216 + 2'097'152 + 65'536);
  // The model holds the boolean mask once, 1 x 1 x 2048 x 2048 B expanded to the batch: token ids 32,768 + positions
  // 16,384 + the mask 4,194,304 + cos and sin 2 x 2 x 2048 x 64 = 524,288 + inputs_embeds and the layer input (2H) +
  // the layer.
  CHECK(estimate_forward_only(m, f, bytes{}).layers_phase.count() == 32'768 + 16'384 + 4'194'304 + 524'288 + 4'194'304 + 29'425'664);
  // 2047 tokens, one short of a multiple of 8: the additive mask (2 x 2 x 2047 x 2047 = 16,760,836 B) and its copy padded to
  // 2048 columns (2 x 2 x 2047 x 2048 = 16,769,024 B) at once, before the kernel.
  f.seq_len = 2047;
  const std::int64_t H = 2 * 2 * 2047 * 256, K = H / 2;
  CHECK(forward_layer_peak(m, f).count() == (H + H + 2 * K + 2 * H) + 16'760'836 + 16'769'024);
}

TEST_CASE("forward only: models it does not model are refused", "[forward][errors]") {
  forward_only_config f{};
  f.seq_len = 128;
  transformer_config linears = preset_config("mixtral-8x7b");
  linears.moe.stacked = false;  // transformers 4's nn.Linear per expert: its loop over experts is not modelled
  CHECK_THROWS_WITH(estimate_forward_only(linears, f, bytes{}), Catch::Contains("Llama-family"));
  CHECK_THROWS_WITH(estimate_forward_only(preset_config("gpt3-175b"), f, bytes{}), Catch::Contains("Llama-family"));
  f.seq_len = 0;
  CHECK_THROWS_AS(estimate_forward_only(preset_config("llama-2-7b"), f, bytes{}), std::invalid_argument);
}

TEST_CASE("forward only: PEFT's LoRA adapters in a layer's forward, each adapted linear's moment", "[forward][lora]") {
  // Llama-2-7B's layer, bf16, one sequence of 4096 tokens, SDPA, no cache: H = 2 x 4096 x 4096 = 33,554,432 B,
  // F = 2 x 4096 x 11008 = 90,177,536 B. Without adapters the MLP frame sets the peak: 2H + 3F = 337,641,472 B.
  const transformer_config m = preset_config("llama-2-7b");
  forward_only_config f{};
  f.seq_len = 4096;
  f.use_cache = false;
  f.output = forward_output::hidden_states;
  CHECK(forward_layer_peak(m, f).count() == 337'641'472);
  // fp32 adapters of rank 16 on gate_proj (PEFT's Linear.forward, tuners/lora/layer.py), beside R1 and the MLP's input
  // (2H): the base output R = F, x cast to fp32 (4 x 4096 x 4096 = 67,108,864), then lora_B's fp32 output and its scaled
  // copy, or the scaled copy and the fp32 sum (2 x 4 x 4096 x 11008 = 360,710,144): 2H + F + 67,108,864 + 360,710,144.
  f.lora.rank = 16;
  f.lora.targets = bit(lora_module::gate_proj);
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 67'108'864 + 360'710'144);
  // up_proj runs beside act(gate)'s output, one F more; down_proj's moment is lower (beside the product F: R = H, the
  // input cast 4 x 4096 x 11008 = 180,355,072, lora_B's output and the sum 2 x 67,108,864).
  f.lora.targets = bit(lora_module::gate_proj) | bit(lora_module::up_proj) | bit(lora_module::down_proj);
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 90'177'536 + 67'108'864 + 360'710'144);
  // down_proj alone: beside 2H and the product F, R = H, the input cast 4 x 4096 x 11008 = 180,355,072 and lora_B's
  // output with its scaled copy (2 x 4 x 4096 x 4096 = 134,217,728).
  f.lora.targets = bit(lora_module::down_proj);
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 33'554'432 + 180'355'072 + 134'217'728);
  // lora_dropout 0.1 runs under model.train() only: its fp32 output beside native_dropout's bool mask (180,355,072 +
  // 45,088,768) tops lora_B's moment there.
  f.lora.dropout = 0.1;
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 33'554'432 + 180'355'072 + 134'217'728);
  f.train_dropout = true;
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 33'554'432 + 180'355'072 + 180'355'072 + 45'088'768);
  // On a CPU the mask is a noise tensor in the input's dtype, and the add copies the bf16 base output to fp32 first
  // (TensorIterator's CPU promotion): gate_proj's sum moment holds lora_B's scaled output, the sum and that copy
  // (3 x 180,355,072) beside R and the cast input.
  f.train_dropout = false;
  f.device = device_kind::cpu;
  f.lora.targets = bit(lora_module::gate_proj);
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 90'177'536 + 67'108'864 + 3 * 180'355'072LL);
  // bf16 adapters: no cast, no promotion; lora_B's output and its scaled copy (2F) beside R: 2H + 3F, the base's peak.
  f.device = device_kind::cuda;
  f.lora.adapter_dtype = dtype::bf16;
  CHECK(forward_layer_peak(m, f).count() == 337'641'472);
  f.lora.targets = bit(lora_module::up_proj);
  CHECK(forward_layer_peak(m, f).count() == 67'108'864LL + 4 * 90'177'536LL);
}

TEST_CASE("forward only: the adapter sum's dtype is PyTorch's type promotion of the base output and the adapter", "[forward][lora]") {
  // c10/core/ScalarType.h promoteTypes: same types stay; bf16 + fp32 and fp16 + fp32 are fp32; fp16 + bf16 is fp32.
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::bf16, dtype::bf16) == 2);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::fp16, dtype::fp16) == 2);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::fp32, dtype::fp32) == 4);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::bf16, dtype::fp32) == 4);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::fp32, dtype::bf16) == 4);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::fp16, dtype::bf16) == 4);
  STATIC_REQUIRE(detail::lora_sum_bytes(dtype::bf16, dtype::fp16) == 4);
}

TEST_CASE("forward only: LoRA where a layer's adapters are not modelled is refused, naming what is", "[forward][lora]") {
  forward_only_config f{};
  f.seq_len = 128;
  f.lora.rank = 8;
  f.lora.targets = bit(lora_module::qkv);
  const transformer_config phi3 = preset_config("phi-3-mini");
  CHECK_FALSE(forward_lora_modelled(phi3, f.lora));
  CHECK_THROWS_WITH(forward_layer_peak(phi3, f), Catch::Contains("separate q, k and v projections"));
  const transformer_config llama = preset_config("llama-2-7b");
  f.lora.targets = bit(lora_module::all_linear);
  CHECK(forward_lora_modelled(llama, f.lora));
  CHECK_THROWS_WITH(estimate_forward_only(llama, [&] { forward_only_config g = f; g.lora.rank = -1; return g; }(), bytes{}),
                    Catch::Contains("the LoRA rank cannot be negative"));
}
