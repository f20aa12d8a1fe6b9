// 672 step configurations a preset, 16,128 for the 24 (kernel profiles x attention x recompute x seven setups x two
// sequence lengths and micro-batches), one line each: every term of every phase where the library estimates the step, its
// message where it rejects the configuration. What a refactoring or an optimization must leave identical; run by
// scripts/compare_estimates.sh.
#include "zeromem/zeromem.hpp"
#include <cstdio>
#include <exception>
#include <string>
using namespace zeromem;
int main() {
  for (const model_preset& mp : model_presets) {
    const transformer_config m = mp.config;
    for (int impl = 0; impl < 4; ++impl)
    for (int att = 0; att < 2; ++att)
    for (int rc = 0; rc < 3; ++rc)
    for (int mode = 0; mode < 7; ++mode)
    for (int extra = 0; extra < 4; ++extra) {
      training_states t{};
      activation_config a{};
      step_config s{};
      a.seq_len = (extra & 1) ? 1024 : 4096;
      a.micro_batch = (extra & 2) ? 2 : 1;
      a.impl = static_cast<implementation>(impl);
      a.attention = att ? attention_kind::eager : attention_kind::flash;
      a.recomputation = static_cast<recompute>(rc);
      if (mode == 1) { t.zero.stage = 3; t.dp = 8; }
      if (mode == 2) { s.fsdp_world = 8; t.dp = 8; t.recipe = recipe_of(precision::mixed_bf16); }
      if (mode == 3) { t.adapt.lora.rank = 16; t.adapt.lora.targets = 0xffff; t.adapt.lora.dropout = 0.05; }
      if (mode == 4) { t.gradient_accumulation_steps = 2; s.optimizer = optimizer_impl::forloop; }
      if (mode == 5) { a.autocast = true; t.recipe = recipe_of(precision::fp32); s.loss = loss_impl::fused; }
      if (mode == 6) { s.fsdp_world = 8; t.dp = 8; s.reshard_after_forward = false; a.dropout = 0.1; }
      try {
        const step_estimate e = estimate_step(m, t, a, s);
        std::printf("%s %d %d %d %d %d: %lld %d", std::string(mp.name).c_str(), impl, att, rc, mode, extra, (long long)e.peak.count(), (int)e.peak_phase);
        for (const step_terms* ph : {&e.forward, &e.backward, &e.optimizer_step})
          ph->for_each([](const char*, bytes b) { std::printf(" %lld", (long long)b.count()); });
        std::printf("\n");
      } catch (const std::exception& ex) {
        std::printf("%s %d %d %d %d %d: error %s\n", std::string(mp.name).c_str(), impl, att, rc, mode, extra, ex.what());
      }
    }
  }
}
