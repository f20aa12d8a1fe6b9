// Forward-only peaks (no autograd): a derivation written out here for Llama-2-7B, and the errors. The random
// models checked op by op against PyTorch are in tests/oracle/run_forward_oracle.py.
#include <stdexcept>

#include "catch.hpp"
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
  // The last layer: token ids 65,536 + positions 32,768 + rotary 4,194,304 + embedding output and layer input 2H
  // + 31 layers' K and V (4,160,749,568) + the layer's 809,500,672.
  CHECK(e.layers_phase.count() == 65'536 + 32'768 + 4'194'304 + 134'217'728 + 4'160'749'568 + 809'500'672);
  // The output: 262,144,000 logits x (2 + 4 + 4) B beside the cache of all 32 layers and the token ids.
  CHECK(e.output_phase.count() == 2'621'440'000 + 4'294'967'296 + 65'536);
  CHECK(e.peak == e.weights + e.output_phase);

  // Without the cache the layers keep nothing of each other: the MLP frame is 2H + 3F.
  forward_only_config no_cache = f;
  no_cache.use_cache = false;
  const forward_only_estimate n = estimate_forward_only(m, no_cache, forward_weight_bytes(m, dtype::bf16));
  CHECK(n.layer_peak.count() == 134'217'728 + 541'065'216);
  CHECK(n.output_phase.count() == 2'621'440'000 + 65'536);

  // An NF4 reference: the linear weights at 4.127 bits (the figure test_cli.cpp derives: 3,865,591,808 B).
  CHECK(forward_weight_bytes(m, dtype::bf16, quantization::nf4).count() == 3'865'591'808);
}

TEST_CASE("forward only: models it does not model are refused", "[forward][errors]") {
  forward_only_config f{};
  f.seq_len = 128;
  CHECK_THROWS_WITH(estimate_forward_only(preset_config("mixtral-8x7b"), f, bytes{}), Catch::Contains("dense Llama-family"));
  CHECK_THROWS_WITH(estimate_forward_only(preset_config("gpt3-175b"), f, bytes{}), Catch::Contains("dense Llama-family"));
  f.seq_len = 0;
  CHECK_THROWS_AS(estimate_forward_only(preset_config("llama-2-7b"), f, bytes{}), std::invalid_argument);
}
