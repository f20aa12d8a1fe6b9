// Sizes up to the 64-bit limit: every estimate returns a non-negative byte count or throws a zeromem error.
// The sanitizer configuration of scripts/test.sh builds this with -fsanitize=undefined and
// -fno-sanitize-recover, so a signed overflow anywhere on these paths fails the run there.
#include <random>
#include <stdexcept>

#include "catch.hpp"
#include "zeromem/zeromem.hpp"

using namespace zeromem;

namespace {
struct extreme_generator {
  std::mt19937_64 rng{20261122};
  int max_bits;
  std::int64_t power(int bits) { return std::int64_t{1} << std::uniform_int_distribution<int>(0, bits < max_bits ? bits : max_bits)(rng); }
  bool coin() { return (rng() & 1) != 0; }
  template <class E>
  E pick(int n) { return static_cast<E>(std::uniform_int_distribution<int>(0, n - 1)(rng)); }

  transformer_config model() {
    transformer_config m{};
    m.heads = power(12);
    m.kv_heads = std::max<std::int64_t>(1, m.heads >> std::uniform_int_distribution<int>(0, 3)(rng));
    m.hidden = m.heads * power(50);
    m.layers = power(40);
    m.ffn = power(60);
    m.vocab = power(62);
    m.mlp = coin() ? mlp_kind::gelu : mlp_kind::swiglu;
    m.norm = coin() ? norm_kind::layernorm : norm_kind::rmsnorm;
    m.fused_qkv = coin();
    m.tied_embeddings = coin();
    m.qkv_bias = coin();
    if (coin()) {
      m.positions = position_kind::learned;
      m.max_positions = power(62);
    }
    if (coin()) {
      m.moe.experts = power(20);
      m.moe.top_k = 1;
      m.moe.expert_ffn = power(50);
      m.moe.shared_experts = power(10);
    }
    if (coin()) {
      m.vision.blocks = power(30);
      m.vision.hidden = power(40);
      m.vision.mlp_hidden = power(40);
      m.vision.heads = 1;
      m.vision.out_hidden = power(40);
      m.vision.patch = power(20);
      m.vision.spatial_merge = power(20);
    }
    return m;
  }
  activation_config activations() {
    activation_config a{};
    a.seq_len = power(62);
    a.micro_batch = power(40);
    a.tp = power(3);
    a.sequence_parallel = coin();
    a.attention = coin() ? attention_kind::flash : attention_kind::eager;
    a.impl = pick<implementation>(4);
    a.recomputation = pick<recompute>(3);
    a.dropout = coin() ? 0.1 : 0.0;
    a.device = coin() ? device_kind::cpu : device_kind::cuda;
    a.activation_dtype = coin() ? dtype::fp32 : dtype::bf16;
    return a;
  }
  pipeline_config pipeline() {
    pipeline_config p{};
    p.pp = power(3);
    p.virtual_stages = power(62);
    p.microbatches = power(62);
    return p;
  }
  training_states states() {
    training_states t{};
    t.dp = power(62);
    t.zero.stage = pick<int>(4);
    t.zero.optimizer.device = pick<offload_device>(3);
    if (t.zero.stage == 3) t.zero.params.device = pick<offload_device>(3);
    t.recipe.fp32_gradient_copy = coin();
    t.optimizer.kind = pick<optimizer_kind>(7);
    return t;
  }
};

// Runs f; returns 1 when it produced a value, 0 when it threw one of zeromem's two error types.
template <class F>
int returns_or_throws_cleanly(F&& f) {
  try {
    const bytes b = f();
    CHECK(b.count() >= 0);
    return 1;
  } catch (const std::overflow_error& e) {
    CHECK(std::string(e.what()).rfind("zeromem: ", 0) == 0);
  } catch (const std::invalid_argument& e) {
    CHECK(std::string(e.what()).rfind("zeromem: ", 0) == 0);
  }
  return 0;
}
}  // namespace

TEST_CASE("sizes up to 2^62: estimates return or throw a zeromem error, never overflow silently", "[extremes]") {
  // From sizes near 2^62 (nearly every estimate overflows) down to ordinary ones (most succeed), so that both the
  // throwing and the returning paths run.
  for (int max_bits : {62, 50, 40, 30, 20}) {
    extreme_generator g{std::mt19937_64{static_cast<std::uint64_t>(max_bits)}, max_bits};
    int returned = 0;
    for (int i = 0; i < 4000; ++i) {
      const transformer_config m = g.model();
      const activation_config a = g.activations();
      const pipeline_config p = g.pipeline();
      const training_states t = g.states();
      returned += returns_or_throws_cleanly([&] { return training_gpu_bytes(m, t, a, p); });
      returned += returns_or_throws_cleanly([&] { return adafactor_second_moment_elements(m) * size_of(dtype::fp32); });
      returned += returns_or_throws_cleanly([&] { return count_parameters(m).total * size_of(dtype::bf16); });
      kv_cache_config kv{};
      kv.block_size = g.power(10);
      returned += returns_or_throws_cleanly([&] { return kv_cache_bytes(m, kv, g.power(30), g.power(62)); });
    }
    INFO("max bits " << max_bits);
    CHECK(returned > 0);
  }
}

TEST_CASE("an activation one bit beyond 64 bits throws overflow_error", "[extremes]") {
  // Llama-2-7B dimensions with s = 2^50 tokens: s b h = 2^50 x 4096 = 2^62 elements fits in int64; the bf16
  // layer input takes 2 x 2^62 = 2^63 B, one past INT64_MAX (2^63 - 1).
  activation_config a{};
  a.seq_len = std::int64_t{1} << 50;
  a.recomputation = recompute::full;
  CHECK_THROWS_AS(layer_activation_bytes(find_preset("llama-2-7b").config, a), std::overflow_error);
  a.seq_len = std::int64_t{1} << 49;  // 2^62 B: fits
  CHECK(layer_activation_bytes(find_preset("llama-2-7b").config, a).total().count() == std::int64_t{1} << 62);
}
