// The step model's own terms, each against a derivation written out here (the measured steps are in
// test_calibration.cpp).
#include <cmath>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "catch.hpp"
#include "zeromem/model/hf_config.hpp"
#include "zeromem/zeromem.hpp"

using namespace zeromem;

namespace {
// Llama-2-7B: 6,738,415,616 parameters (its model card); 32 layers of 202,383,360; embedding and lm_head 32000 x 4096.
transformer_config llama2() { return find_preset("llama-2-7b").config; }

training_states pure_bf16() {
  training_states t{};
  t.recipe = recipe_of(precision::bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  return t;
}

activation_config sdpa(std::int64_t s, std::int64_t b, recompute r = recompute::none) {
  activation_config a{};
  a.seq_len = s;
  a.micro_batch = b;
  a.attention = attention_kind::flash;
  a.impl = implementation::hf;
  a.recomputation = r;
  return a;
}

// Rank 0 of an FSDP2 job over `ranks` (FULL_SHARD, or SHARD_GRAD_OP where reshard_after_forward is false), its
// data-parallel degree set to match.
step_estimate fsdp2_rank(const transformer_config& m, training_states t, const activation_config& a, std::int64_t ranks,
                         bool reshard_after_forward = true, step_config s = {}) {
  s.fsdp_world = ranks;
  s.reshard_after_forward = reshard_after_forward;
  t.dp = ranks;
  return estimate_step(m, t, a, s);
}

// The CPU step oracles' step (tests/oracle): pure bf16, eager attention in transformers' code on the CPU under torch 1,
// no cuBLAS workspaces.
step_estimate oracle_step(const transformer_config& m, std::int64_t s, std::int64_t b, recompute r, device_kind device = device_kind::cpu,
                          loss_impl loss = loss_impl::hf) {
  activation_config a = sdpa(s, b, r);
  a.attention = attention_kind::eager;
  a.device = device;
  a.torch_major = 1;
  step_config c{};
  c.blas_workspaces = bytes{};
  c.loss = loss;
  return estimate_step(m, pure_bf16(), a, c);
}

// A GPT-2 layout as its config.json gives it, without dropout or a cache (the family step oracle's GPT-2 steps).
transformer_config gpt2_layout(int hidden, int layers, int heads, int ffn, int vocab, int positions, const std::string& act) {
  return parse_hf_config(R"({"model_type": "gpt2", "n_embd": )" + std::to_string(hidden) + R"(, "n_layer": )" + std::to_string(layers) +
                         R"(, "n_head": )" + std::to_string(heads) + R"(, "n_inner": )" + std::to_string(ffn) + R"(, "vocab_size": )" +
                         std::to_string(vocab) + R"(, "n_positions": )" + std::to_string(positions) + R"(, "activation_function": ")" +
                         act + R"(", "use_cache": false, "attn_pdrop": 0.0, "resid_pdrop": 0.0, "embd_pdrop": 0.0})");
}
}  // namespace

TEST_CASE("step: ForCausalLMLoss holds 10 bytes per logit at the end of forward and 12 in backward", "[step]") {
  // Qwen2.5-1.5B, s 2048, b 4: n = 2048 x 4 x 151936 = 1,244,659,712 logits. Forward: bf16 logits (2n) +
  // logits.float() (4n) + log_softmax output (4n) = 12,446,597,120 B, beside the labels padded by one position
  // (int64: 8 x 4 x 2049 = 65,568 B) and shifted (8 x 4 x 2048 = 65,536 B). Backward starts with the saved
  // log_softmax (4n), nll_loss's gradient (4n) and log_softmax's gradient (4n) = 14,935,916,544 B, which is
  // the backward peak here (measured: 8n of gradients and 4n attributed to cross_entropy at the peak).
  const transformer_config qwen = find_preset("qwen2.5-1.5b").config;
  const step_estimate e = estimate_step(qwen, pure_bf16(), sdpa(2048, 4), step_config{});
  CHECK(e.forward.loss == bytes_of(12'446'597'120 + 65'568 + 65'536));
  CHECK(e.backward.loss == bytes_of(14'935'916'544));
  CHECK(e.peak_phase == step_phase::backward);
  // Fused linear-cross-entropy never holds the logits: dL/dhidden (2 x 2048 x 4 x 1536 = 25,165,824 B) and the
  // gradient of the tied lm_head weight (151936 x 1536 x 2 = 466,747,392 B) instead.
  step_config fused{};
  fused.loss = loss_impl::fused;
  CHECK(estimate_step(qwen, pure_bf16(), sdpa(2048, 4), fused).forward.loss == bytes_of(25'165'824 + 466'747'392));
}

TEST_CASE("step: under autocast the final norm's fp32 output stays beside the loss", "[step][amp]") {
  // Qwen2.5-1.5B under autocast, s 2048, b 4: the loss's tensors as in bf16 (the logits are lm_head's 16-bit output),
  // and the final norm's fp32 output, which lm_head keeps only as a 16-bit cast but the CausalLM forward holds
  // (outputs.last_hidden_state) until it returns: 4 x 2048 x 4 x 1536 = 50,331,648 B more at the loss's moment.
  const transformer_config qwen = find_preset("qwen2.5-1.5b").config;
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(2048, 4);
  a.autocast = true;
  const step_estimate e = estimate_step(qwen, amp, a, step_config{});
  CHECK(e.forward.loss == bytes_of(12'446'597'120 + 65'568 + 65'536 + 50'331'648));
  CHECK(e.backward.loss == bytes_of(14'935'916'544));  // gone once the forward has returned
}

TEST_CASE("step: AdamW's temporaries by implementation", "[step]") {
  // Pure bf16: states in bf16. foreach: one bf16 buffer per parameter, 6,738,415,616 x 2 = 13,476,831,232 B.
  // forloop: sqrt and quotient of one parameter, beside the previous parameter's denom (a local name alive until it
  // is reassigned). model.parameters(): embedding (131,072,000), each layer's q, k, v, o (16,777,216), gate, up, down
  // (45,088,768), two norms (4,096), then the final norm (4,096) and lm_head (131,072,000). Highest: lm_head's two
  // beside the final norm's denom, 2 x 131,072,000 + 4,096 = 262,148,096 elements, x 2 B = 524,296,192 B (the
  // embedding, first, has none before it: 262,144,000; embedding then q: 2 x 16,777,216 + 131,072,000 = 164,626,432;
  // gate then up: 3 x 45,088,768 = 135,266,304). The H100 anatomy of llama2-7b-bf16-sdpa-s2048-b1-ckpt-forloop
  // attributes exactly 524,296,192 B to adam.py _single_tensor_adam at the peak (tests/data/calibration).
  step_config s{};
  CHECK(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(13'476'831'232));
  s.optimizer = optimizer_impl::forloop;
  CHECK(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(524'296'192));
  s.optimizer = optimizer_impl::fused;
  CHECK(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(0));
  // AMP keeps fp32 states: the foreach buffer doubles, 6,738,415,616 x 4 B.
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(1024, 1);
  a.autocast = true;
  CHECK(estimate_step(llama2(), amp, a, step_config{}).optimizer_step.optimizer_temporaries == bytes_of(26'953'662'464));
}

TEST_CASE("step: the for-loop's previous denom beside the next parameter's sqrt and quotient", "[step]") {
  // A Llama-style model, hidden 512, ffn 4096, vocab 4000, 4 layers, untied, pure bf16, AdamW's for-loop. Parameters in
  // order: embedding 4000 x 512 = 2,048,000; per layer q, k, v, o 262,144 each, gate, up, down 2,097,152 each, two
  // norms 512; final norm 512; lm_head 2,048,000. _single_tensor_adam's `denom` of gate is alive while up's sqrt and
  // quotient are built: 2,097,152 + 2 x 2,097,152 = 6,291,456 elements, more than the embedding's 2 x 2,048,000 or
  // lm_head's 2 x 2,048,000 + 512: 6,291,456 x 2 B = 12,582,912 B (the step oracle measured this model's whole step
  // phase at 79,504,394 B above the resting states on the CPU, zeromem 79,504,384 B: tests/oracle/run_step_oracle.py).
  transformer_config m = llama2();
  m.hidden = 512;
  m.heads = m.kv_heads = 8;
  m.head_dim = 0;
  m.ffn = 4096;
  m.vocab = 4000;
  m.layers = 4;
  step_config s{};
  s.optimizer = optimizer_impl::forloop;
  CHECK(estimate_step(m, pure_bf16(), sdpa(128, 1), s).optimizer_step.optimizer_temporaries == bytes_of(12'582'912));
  // Through forloop_moment_elements directly: SGD with Nesterov momentum carries nothing (1 x up's 2,097,152), RMSprop
  // one avg beside one sqrt (2 x 2,097,152).
  CHECK(forloop_moment_elements(m, true, true, 1, 1, 0, 0, 0) == 2'097'152);
  CHECK(forloop_moment_elements(m, true, true, 1, 1, 1, 0, 0) == 4'194'304);
  // Frozen embeddings leave lm_head after the final norm: 2 x 2,048,000 + 512 against 3 x 2,097,152 still.
  CHECK(forloop_moment_elements(m, false, true, 1, 2, 1, 0, 0) == 6'291'456);
}

TEST_CASE("step: the tensors the optimizer steps under FSDP2 and DeepSpeed ZeRO", "[step]") {
  // Llama-2-7B's largest parameter is the embedding, 32000 x 4096 = 131,072,000 elements.
  step_config s{};
  s.optimizer = optimizer_impl::forloop;
  // FSDP2 over 8 ranks, pure bf16: the for-loop steps local shards, the embedding's dim-0 chunk 4000 x 4096 =
  // 16,384,000 elements; AdamW's sqrt and quotient in bf16 beside the previous shard's denom: the lm_head's chunk
  // after the final norm's (4096 / 8 = 512): (2 x 16,384,000 + 512) x 2 B = 65,537,024 B.
  training_states t = pure_bf16();
  t.dp = 8;
  s.fsdp_world = 8;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(65'537'024));
  s.fsdp_world = 0;
  // ZeRO-2 over 8 ranks, mixed bf16 (fp32 master and moments): the optimizer's one parameter is the flat fp32
  // partition, 6,738,415,616 / 8 = 842,301,952 elements, so foreach and the for-loop both see it whole:
  // foreach 1 x 4 B x 842,301,952 = 3,369,207,808 B; for-loop 2 x 4 B x 842,301,952 = 6,738,415,616 B.
  t.recipe = recipe_of(precision::mixed_bf16);
  t.zero.stage = 2;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(6'738'415'616));
  s.optimizer = optimizer_impl::foreach_kernels;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(3'369'207'808));
  // ZeRO-3 over 2 ranks: the partition, 3,369,207,808 elements, passes sub_group_size (10^9), and each
  // optimizer.step() sees one sub-group: foreach 4 B x 10^9 = 4,000,000,000 B; for-loop 2 x that.
  t.zero.stage = 3;
  t.dp = 2;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(4'000'000'000));
  s.optimizer = optimizer_impl::forloop;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(8'000'000'000));
  // Over 8 ranks the partition (842,301,952) is one sub-group: 2 x 4 B x 842,301,952.
  t.dp = 8;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(6'738'415'616));
  // sub_group_size 0: a parameter a sub-group (stage3.py _create_fp16_sub_groups), the largest the embedding's
  // partition, 131,072,000 / 8 = 16,384,000 elements: for-loop 2 x 4 B x 16,384,000 = 131,072,000 B, foreach half.
  t.zero.sub_group_size = 0;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(131'072'000));
  s.optimizer = optimizer_impl::foreach_kernels;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(65'536'000));
}

TEST_CASE("step: torch.optim.Adafactor's update tensor, one at a time by default, all at once with foreach", "[step]") {
  // _single_tensor_adafactor: var_estimate = row_var @ col_var is the size of the matrix it updates (then clamp_,
  // rsqrt_, mul_ in place). Pure bf16 Llama-2-7B: the largest tensor is the embedding, 32000 x 4096 = 131,072,000
  // elements; the for-loop's highest moment is q_proj's (16,777,216) beside the embedding's `update`, still named
  // until reassigned: (16,777,216 + 131,072,000) x 2 B = 295,698,432 B; foreach builds one per matrix at once: 6,738,415,616 x 2 = 13,476,831,232 B
  // (the vectors' grad * grad and clones are the same size as the vectors, counted once).
  // On CUDA the column norm torch.norm(grad, dim=-2) stages its partial sums (Reduce.cuh): for layer 0's q_proj, 4096
  // columns over 4096 rows, vec 4, a 32 x 4 block, 32 blocks of outputs, 1024 values a thread, min(ceil(2112 / 32) = 66,
  // 1024 / 16 = 64) = 64 blocks an output: 4 x 4096 x 64 x 128 + 4 x 32 = 134,217,856 B, beside the embedding's update
  // (131,072,000 x 2 B): 396,361,856 B, above var_estimate's moment.
  training_states t = pure_bf16();
  t.optimizer.kind = optimizer_kind::adafactor;
  step_config s{};
  s.optimizer = pytorch_default_impl(optimizer_kind::adafactor);
  CHECK(s.optimizer == optimizer_impl::forloop);
  CHECK(pytorch_default_impl(optimizer_kind::adamw) == optimizer_impl::foreach_kernels);
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(396'361'856));
  activation_config on_cpu = sdpa(1024, 1);
  on_cpu.device = device_kind::cpu;
  CHECK(estimate_step(llama2(), t, on_cpu, s).optimizer_step.optimizer_temporaries == bytes_of(295'698'432));
  s.optimizer = optimizer_impl::foreach_kernels;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(13'476'831'232));
  s.optimizer = optimizer_impl::fused;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("optimizer adafactor has no fused CUDA implementation"));
  // SGD keeps no temporaries (its foreach update is in place without weight decay: optim/sgd.py _multi_tensor_sgd).
  t.optimizer.kind = optimizer_kind::sgd_momentum;
  s.optimizer = optimizer_impl::foreach_kernels;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(0));
}

TEST_CASE("step: torch.optim.RMSprop and Adagrad, one state each, their update's temporaries by implementation", "[step]") {
  // Pure bf16 Llama-2-7B, 6,738,415,616 parameters; state in the parameters' dtype (zeros_like / full_like).
  // RMSprop (optim/rmsprop.py): square_avg, 13,476,831,232 B. _multi_tensor_rmsprop: avg = _foreach_sqrt(square_avgs)
  // (then _foreach_add_ and _foreach_addcdiv_ in place): one list of every parameter's size, 13,476,831,232 B.
  // _single_tensor_rmsprop: square_avg.sqrt() of one parameter at a time, beside the previous parameter's `avg` (alive
  // until reassigned): highest at q_proj after the embedding, (16,777,216 + 131,072,000) x 2 B = 295,698,432 B.
  // Adagrad (optim/adagrad.py): state['sum'], the same 13,476,831,232 B. _multi_tensor_adagrad: std = _foreach_sqrt(
  // state_sums) and numerator = _foreach_mul(grads, minus_clr), both alive for _foreach_addcdiv_: 2 x 13,476,831,232 B;
  // _single_tensor_adagrad: state_sum.sqrt().add_(eps), one tensor beside the previous `std`: the same 295,698,432 B.
  // Neither has a fused CUDA kernel.
  training_states t = pure_bf16();
  step_config s{};
  for (const optimizer_kind k : {optimizer_kind::rmsprop, optimizer_kind::adagrad}) {
    INFO(name(k));
    t.optimizer.kind = k;
    CHECK(optimizer_state_bytes(t.optimizer, t.recipe, elements_of(6'738'415'616)) == bytes_of(13'476'831'232));
    s.optimizer = optimizer_impl::foreach_kernels;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries ==
          bytes_of(13'476'831'232LL * (k == optimizer_kind::adagrad ? 2 : 1)));
    s.optimizer = optimizer_impl::forloop;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(295'698'432));
    s.optimizer = optimizer_impl::fused;
    CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("has no fused CUDA implementation"));
  }
  CHECK(parse_optimizer("rmsprop") == optimizer_kind::rmsprop);
  CHECK(pytorch_default_impl(optimizer_kind::adagrad) == optimizer_impl::foreach_kernels);
}

TEST_CASE("step: torch.optim.NAdam, RAdam and Adamax, two states each, their update's temporaries by implementation", "[step]") {
  // Pure bf16 Llama-2-7B, 6,738,415,616 parameters; two parameter-sized states each (exp_avg and exp_avg_sq; Adamax's
  // exp_avg and exp_inf) in the parameters' dtype: 2 x 13,476,831,232 = 26,953,662,464 B. foreach: one list of every
  // parameter's size (NAdam's and RAdam's _foreach_sqrt of the second moments, Adamax's _foreach_abs of the gradients),
  // 13,476,831,232 B. For-loop, the largest parameter (the embedding, 131,072,000 x 2 B = 262,144,000 B) times:
  // NAdam 2 (exp_avg_sq.div(bc2) and its sqrt), RAdam 4 (exp_avg / bc1, its product with lr, exp_avg_sq.sqrt() and the
  // adaptive rate divided by it), Adamax 1 (grad.abs()). NAdam's previous `denom` is alive beside its two: highest at
  // lm_head after the final norm, (2 x 131,072,000 + 4,096) x 2 B = 524,296,192 B. RAdam's previous
  // bias_corrected_exp_avg dies before its four; Adamax names no tensor. None has a fused CUDA kernel.
  training_states t = pure_bf16();
  step_config s{};
  const std::pair<optimizer_kind, std::int64_t> forloop[] = {
      {optimizer_kind::nadam, 524'296'192}, {optimizer_kind::radam, 262'144'000 * 4}, {optimizer_kind::adamax, 262'144'000}};
  for (const auto& [k, forloop_bytes] : forloop) {
    INFO(name(k));
    t.optimizer.kind = k;
    CHECK(optimizer_state_bytes(t.optimizer, t.recipe, elements_of(6'738'415'616)) == bytes_of(26'953'662'464));
    CHECK(pytorch_default_impl(k) == optimizer_impl::foreach_kernels);
    s.optimizer = optimizer_impl::foreach_kernels;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(13'476'831'232));
    s.optimizer = optimizer_impl::forloop;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(forloop_bytes));
    s.optimizer = optimizer_impl::fused;
    CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("has no fused CUDA implementation"));
  }
  CHECK(parse_optimizer("nadam") == optimizer_kind::nadam);
  CHECK(parse_optimizer("radam") == optimizer_kind::radam);
  CHECK(parse_optimizer("adamax") == optimizer_kind::adamax);
}

TEST_CASE("step: torch.optim.Adadelta and ASGD, their states and their update's temporaries by implementation", "[step]") {
  // Pure bf16 Llama-2-7B, 6,738,415,616 parameters (13,476,831,232 B in bf16); the largest parameter is the embedding,
  // 131,072,000 x 2 B = 262,144,000 B.
  // Adadelta keeps square_avg and acc_delta: 2 x 13,476,831,232 = 26,953,662,464 B. foreach: std and deltas, two lists
  // of every parameter's size (26,953,662,464 B); for-loop: the two per parameter, and the previous parameter's std
  // and delta until reassigned: both beside the new std. Highest at q_proj after the embedding: (16,777,216 + 2 x
  // 131,072,000) x 2 B = 557,842,432 B (the embedding's own two: 524,288,000 B).
  // ASGD keeps ax: 13,476,831,232 B. foreach: one list (intermediate, deleted before the next); for-loop: none, since
  // mu stays 1 until step t0 = 1e6 and the average is ax.copy_(param). Neither has a fused CUDA kernel.
  training_states t = pure_bf16();
  step_config s{};
  struct row {
    optimizer_kind kind;
    std::int64_t states, foreach_bytes, forloop_bytes;
  };
  const row rows[] = {{optimizer_kind::adadelta, 26'953'662'464LL, 26'953'662'464LL, 557'842'432},
                      {optimizer_kind::asgd, 13'476'831'232LL, 13'476'831'232LL, 0}};
  for (const row& r : rows) {
    INFO(name(r.kind));
    t.optimizer.kind = r.kind;
    CHECK(optimizer_state_bytes(t.optimizer, t.recipe, elements_of(6'738'415'616)) == bytes_of(r.states));
    CHECK(pytorch_default_impl(r.kind) == optimizer_impl::foreach_kernels);
    s.optimizer = optimizer_impl::foreach_kernels;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(r.foreach_bytes));
    s.optimizer = optimizer_impl::forloop;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(r.forloop_bytes));
    s.optimizer = optimizer_impl::fused;
    CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("has no fused CUDA implementation"));
  }
  CHECK(parse_optimizer("adadelta") == optimizer_kind::adadelta);
  CHECK(parse_optimizer("asgd") == optimizer_kind::asgd);
}

TEST_CASE("step: SGD with Nesterov momentum, in place under foreach, one tensor more in the for-loop", "[step]") {
  // Pure bf16 Llama-2-7B, the embedding the largest parameter (262,144,000 B in bf16). _multi_tensor_sgd adds the
  // buffers into the gradients in place: no temporary. _single_tensor_sgd's grad = grad.add(buf, alpha=momentum):
  // one tensor, 262,144,000 B; with a coupled decay the decayed gradient is alive as it is made: 2 x 262,144,000 B.
  training_states t = pure_bf16();
  t.optimizer.kind = optimizer_kind::sgd_momentum;
  t.optimizer.nesterov = true;
  step_config s{};
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(0));
  s.optimizer = optimizer_impl::forloop;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(262'144'000));
  t.optimizer.weight_decay = 0.01;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(524'288'000));
  // Nesterov momentum without a momentum is refused (torch.optim.SGD raises for it), as are other optimizers.
  t.optimizer.kind = optimizer_kind::sgd;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("use --optimizer sgd-momentum with --nesterov"));
  t.optimizer.kind = optimizer_kind::adamw;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("not adamw"));
}

TEST_CASE("step: torch.optim.Rprop, its two states and its update's temporaries by implementation", "[step]") {
  // Pure bf16 Llama-2-7B: 6,738,415,616 parameters (13,476,831,232 B in bf16); the largest is the embedding,
  // 131,072,000 elements (262,144,000 B in bf16).
  // Rprop keeps prev and step_size: 2 x 13,476,831,232 = 26,953,662,464 B.
  // foreach: the signs list (13,476,831,232 B) and, for the embedding, torch.where's result (262,144,000 B) and its
  // bool mask sign.eq(etaminus) (131,072,000 B): 13,870,047,232 B; grad_signs comes after `del signs`, one list again.
  // for-loop: sign, the gradient's clone and grad.sign() of the embedding: 3 x 262,144,000 = 786,432,000 B.
  training_states t = pure_bf16();
  t.optimizer.kind = optimizer_kind::rprop;
  CHECK(optimizer_state_bytes(t.optimizer, t.recipe, elements_of(6'738'415'616)) == bytes_of(26'953'662'464));
  CHECK(pytorch_default_impl(optimizer_kind::rprop) == optimizer_impl::foreach_kernels);
  step_config s{};
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(13'870'047'232));
  s.optimizer = optimizer_impl::forloop;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(786'432'000));
  s.optimizer = optimizer_impl::fused;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("has no fused CUDA implementation"));
  // torch.optim.Rprop takes no weight_decay: a decay is refused, not ignored.
  s.optimizer = optimizer_impl::foreach_kernels;
  t.optimizer.weight_decay = 0.01;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("rprop takes no weight decay"));
  // FSDP2 over 8 ranks: the list is the rank's shard, 842,301,952 x 2 B, and the embedding's chunk 16,384,000
  // elements: 1,684,603,904 + 16,384,000 x 3 = 1,733,755,904 B.
  t.optimizer.weight_decay = 0.0;
  t.dp = 8;
  s.fsdp_world = 8;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(1'733'755'904));
  CHECK(parse_optimizer("rprop") == optimizer_kind::rprop);
}

TEST_CASE("step: coupled weight decay's decayed gradients, by optimizer and implementation", "[step]") {
  // Pure bf16 Llama-2-7B (13,476,831,232 B of parameters; the embedding, the largest, 262,144,000 B), weight_decay 0.01.
  // SGD with momentum: torch._foreach_add(grads, params) is a new list alive through the momentum update (sgd.py
  // _multi_tensor_sgd), 13,476,831,232 B where the update had none; the for-loop's grad.add(param), 262,144,000 B.
  // Adam: the decayed list dies (del device_grads) before the sqrt list is built, so foreach stays one list; the
  // for-loop's decayed gradient lives beside sqrt and its quotient, 3 x 262,144,000 B. AdamW decays in place: nothing.
  training_states t = pure_bf16();
  t.optimizer.weight_decay = 0.01;
  step_config s{};
  // RMSprop: the decayed list is read by the addcdiv beside avg, + 13,476,831,232 B (for-loop: grad.add(param) beside
  // square_avg.sqrt(), 2 x 262,144,000 B). Adagrad: the decayed list becomes the numerator in place, so foreach stays at
  // std + numerator, 2 x 13,476,831,232 B; the for-loop's decayed gradient beside std, 2 x 262,144,000 B. Neither has a
  // fused CUDA kernel. NAdam: the decayed list is read again by the last addcdiv, beside the sqrt list: 2 lists; for-loop
  // 2 + 1 tensors. RAdam: the decayed list dies (del grouped_grads) before the buffer: 1 list; for-loop 4 + 1 once the
  // rectification applies. Adamax: the abs goes in place into the decayed list: 1 list; for-loop grad.add(param) beside
  // grad.abs(): 2. Adadelta: the decayed list beside std and deltas: 3 lists; for-loop 2 + 1. ASGD: the decayed list is
  // the intermediate: 1 list; for-loop 0 + 1. Adafactor decays in place: its own one (var_estimate) either way.
  struct row {
    optimizer_kind kind;
    std::int64_t foreach_bytes, forloop_bytes;
    bool fused_kernel;
  };
  // For-loop names alive into the next iteration (Adam's and NAdam's denom, RMSprop's avg, Adagrad's std, Adafactor's
  // update, Adadelta's std and delta) add the previous parameter's tensors: with E = 131,072,000 (embedding, lm_head),
  // Q = 16,777,216 (q_proj), N = 4,096 (the final norm before lm_head), in elements x 2 B: Adam and NAdam 3E + N
  // (786,440,192 B), AdamW, RMSprop and Adagrad 2E + N (524,296,192 B), Adadelta 3E + N (its early moment, old std and
  // delta beside the new std and the decayed gradient: 2E + 2Q, less), Adafactor E + Q (295,698,432 B, q_proj after the
  // embedding's update). SGD, RAdam (its carried tensor dies before its five), Adamax and ASGD carry none.
  const row rows[] = {{optimizer_kind::sgd_momentum, 13'476'831'232LL, 262'144'000, true},
                      {optimizer_kind::sgd, 13'476'831'232LL, 262'144'000, true},
                      {optimizer_kind::adam, 13'476'831'232LL, 786'440'192LL, true},
                      {optimizer_kind::adamw, 13'476'831'232LL, 524'296'192LL, true},
                      {optimizer_kind::rmsprop, 2 * 13'476'831'232LL, 524'296'192LL, false},
                      {optimizer_kind::adagrad, 2 * 13'476'831'232LL, 524'296'192LL, false},
                      {optimizer_kind::nadam, 2 * 13'476'831'232LL, 786'440'192LL, false},
                      {optimizer_kind::radam, 13'476'831'232LL, 5 * 262'144'000LL, false},
                      {optimizer_kind::adamax, 13'476'831'232LL, 2 * 262'144'000LL, false},
                      {optimizer_kind::adadelta, 3 * 13'476'831'232LL, 786'440'192LL, false},
                      {optimizer_kind::asgd, 13'476'831'232LL, 262'144'000LL, false},
                      {optimizer_kind::adafactor, 13'476'831'232LL, 396'361'856LL, false}};  // its column norm's staging (above)
  for (const row& r : rows) {
    INFO(name(r.kind));
    t.optimizer.kind = r.kind;
    s.optimizer = optimizer_impl::foreach_kernels;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(r.foreach_bytes));
    s.optimizer = optimizer_impl::forloop;
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(r.forloop_bytes));
    if (!r.fused_kernel) continue;
    s.optimizer = optimizer_impl::fused;  // the fused kernels decay inside
    CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes{});
  }
  // Without a decay SGD's update is all in place.
  t.optimizer = optimizer_spec{};
  t.optimizer.kind = optimizer_kind::sgd_momentum;
  s.optimizer = optimizer_impl::foreach_kernels;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes{});
  // The optimizers whose decay was not read are refused with it, and a negative decay is refused.
  t.optimizer.kind = optimizer_kind::lion;
  t.optimizer.weight_decay = 0.01;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("lion with a weight decay is not modelled"));
  t.optimizer.kind = optimizer_kind::adamw;
  t.optimizer.weight_decay = -1.0;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), s), Catch::Matchers::Contains("the weight decay must be a finite number >= 0"));
}

TEST_CASE("step: Gemma-2's final logit soft-cap keeps tanh's output through the loss", "[step]") {
  // Gemma2ForCausalLM: logits = tanh(logits / 30) * 30; tanh keeps its bf16 output, 2 B x 2048 tokens x 256,000 =
  // 1,048,576,000 B, alive at the end of forward and through the loss's backward.
  const transformer_config g = preset_config("gemma-2-2b");
  transformer_config uncapped = g;
  uncapped.final_logit_softcap = 0.0;
  const step_estimate e = estimate_step(g, pure_bf16(), sdpa(2048, 1), step_config{});
  const step_estimate u = estimate_step(uncapped, pure_bf16(), sdpa(2048, 1), step_config{});
  CHECK((e.forward.loss - u.forward.loss).count() == 1'048'576'000);
  CHECK((e.forward.total() - u.forward.total()).count() == 1'048'576'000);
  // Without it the forward's loss term is the bf16 logits, their fp32 copy and the fp32 log-softmax, 10 B a logit,
  // and the int64 labels padded (8 x 2049 = 16,392 B). At one sequence labels[..., 1:] is already contiguous (a size-1
  // dimension's stride is not compared), so .contiguous() copies nothing: shift_labels is a view of the padded labels.
  CHECK(u.forward.loss.count() == 10LL * 524'288'000 + 16'392);
  // Two sequences: the slice skips one label a row, and .contiguous() copies it (8 x 2 x 2048 = 32,768 B) beside the
  // padded labels (8 x 2 x 2049 = 32,784 B).
  const step_estimate u2 = estimate_step(uncapped, pure_bf16(), sdpa(2048, 2), step_config{});
  CHECK(u2.forward.loss.count() == 10LL * 2 * 524'288'000 + 32'784 + 32'768);
}

TEST_CASE("step: the backward walk over alternating sliding-window and full-attention layers", "[step]") {
  // Gemma-2-2B with LoRA (r = 8 on q_proj: the layers' gradients are small), checkpointed, SDPA at 4096 tokens, a
  // fused loss. Layer i
  // slides unless (i + 1) % 2 == 0; a sliding layer recomputed whole keeps 50,331,648 B more (its mask and repeated K
  // and V, "Gemma-2's sandwich norms and soft-capped attention"). Walking down from layer 25 (full attention) each layer
  // frees its 2 x 4096 x 2304 = 18,874,368 B checkpoint and leaves its adapters' gradients, so the highest moment is
  // layer 24's, the last sliding layer: the walk's ends alone (layers 25 and 0) would miss it. The layer is recomputed
  // whole beside its checkpoint: GemmaRMSNorm's x.float() copies the 16-bit input (the training-step oracle). Its
  // highest moment is its MLP's product node (the base frozen, no MLP adapter: the CPU step oracle's LoRA steps):
  // post_feedforward_layernorm, differentiated first, has freed its saved tensors (37,774,336 B, below), the frozen
  // down_proj freed nothing, and act(gate) * up makes two gradients beside its incoming one, 3 x 4096 x 9216 x 2 =
  // 226,492,416 B, with dL/d(residual) 18,874,368 B.
  const transformer_config g = preset_config("gemma-2-2b");
  training_states t = pure_bf16();
  t.adapt.lora.rank = 8;
  t.adapt.lora.targets = parse_lora_targets("q_proj");
  step_config fused_loss{};
  fused_loss.loss = loss_impl::fused;  // 256,000-token logits would otherwise set the peak at the loss
  const step_estimate e = estimate_step(g, t, sdpa(4096, 1, recompute::full), fused_loss);
  const bytes sliding_whole = layer_activation_bytes(g, sdpa(4096, 1), t.adapt, 0).total();
  const bytes full_whole = layer_activation_bytes(g, sdpa(4096, 1), t.adapt, 1).total();
  CHECK((sliding_whole - full_whole).count() == 50'331'648);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.recomputed.count() == sliding_whole.count() - 37'774'336);
  CHECK(e.backward.flowing.count() == 18'874'368 + 226'492'416);
  // Above it: 24 layers' checkpoints below and the 25th's being recomputed, layer 25's checkpoint freed, and the final
  // norm's saved tensors freed when its node ran (frozen under LoRA, GemmaRMSNorm keeps its fp32 input 4 x 4096 x 2304 =
  // 37,748,736 B, the fp32 rstd 4 x 4096 = 16,384 B and (1 + weight) in fp32 4 x 2304 = 9,216 B: 37,774,336 B), against
  // what the forward saved (the stage's tensors less the logits, which the fused loss never holds).
  const stage_activations forward_saved = first_stage_activations(g, sdpa(4096, 1, recompute::full), {}, t.adapt);
  CHECK(e.backward.activations.count() - (forward_saved.total - forward_saved.logits).count() == -18'874'368 - 37'774'336);
  // The forward's own peak is a checkpointed layer's forward (its working tensors beside the checkpoints), above them.
  CHECK(e.forward.activations > forward_saved.total - forward_saved.logits);
}

TEST_CASE("step: Qwen3's k_norm and q_norm differentiated at pow's node, in their projections' order", "[step]") {
  // The CPU step oracle's Qwen3 (seed 803's draw): hidden 512, 1 layer, 8 heads of 64, 8 KV heads, SwiGLU ffn 1024,
  // vocabulary 1000 untied, 32 tokens x 3 (sb = 96), bf16, eager, torch 1. Qwen3Attention runs q_proj, q_norm, k_proj,
  // k_norm, v_proj; backward reaches v_proj's node, then k_norm's. At k_norm's pow node (its allocator trace):
  //  - gradients: lm_head 512,000 + the final norm's 512 + the MLP's 3 x 524,288 + its norm's 512 + o_proj's and v_proj's
  //    2 x 262,144 + k_norm's 64 = 2,610,240 values x 2 B = 5,220,480 B;
  //  - kept: the token ids 8 x 96 = 768; the input norm's fp32 input and PyTorch 1's x^2 (8 x 96 x 512 = 393,216), rstd
  //    (4 x 96 = 384) and bf16 output cast (98,304); its output, kept by q_proj and k_proj (98,304); q_norm's 8 x 49,152 +
  //    2 x 49,152 + 4 x 768 = 494,592; k_norm's fp32 input 196,608: 1,282,176 B;
  //  - flowing: the residual's gradient and v_proj's input gradient (2 x 98,304), dL/dq (98,304) and five fp32 copies
  //    beside k_norm's input (5 x 196,608): 1,277,952 B.
  // 7,780,608 B above the resting states; the oracle measured 7,780,616 B (8 B more: a scalar), where zeromem read
  // 7,578,752 B (-2.59%) before.
  transformer_config m = detail::qwen3(512, 1, 8, 8, 1024, 1000, false);
  m.head_dim = 64;
  const step_estimate k = oracle_step(m, 32, 3, recompute::none);
  CHECK(k.peak_phase == step_phase::optimizer_step);
  CHECK(k.backward.gradients == bytes_of(5'220'480));
  CHECK(k.backward.activations == bytes_of(1'282'176));
  CHECK(k.backward.flowing == bytes_of(1'277'952));
  CHECK(k.backward.total() - k.backward.resting == bytes_of(7'780'608));
  // Sixteen heads (heads x d = 2h, Qwen3-0.6B's ratio): q_norm's six copies (4 x 96 x 1024 = 393,216 B each) stand
  // higher, after k_proj's node. Gradients: 512,000 + 512 + 1,572,864 + 512 + o_proj's 524,288 + v_proj's and k_proj's
  // 2 x 262,144 + the two head norms' 2 x 64 = 3,134,592 values x 2 B = 6,269,184 B; kept: 768 + the input norm's
  // 491,904 + its output 98,304 + q_norm's fp32 input 393,216 = 984,192 B; flowing: 2 x 98,304 + 5 x 393,216 =
  // 2,162,688 B. 9,416,064 B; measured 9,416,072 B, where zeromem read 8,614,016 B (-8.5%) before.
  m.heads = 16;
  const step_estimate q = oracle_step(m, 32, 3, recompute::none);
  CHECK(q.backward.gradients == bytes_of(6'269'184));
  CHECK(q.backward.activations == bytes_of(984'192));
  CHECK(q.backward.flowing == bytes_of(2'162'688));
  CHECK(q.backward.total() - q.backward.resting == bytes_of(9'416'064));
  // Gemma-3 norms after all three projections, in fp32: not walked so.
  transformer_config gemma = m;
  gemma.norm_scale_fp32 = true;
  CHECK(oracle_step(gemma, 32, 3, recompute::none).backward.flowing != bytes_of(2'162'688));
}

TEST_CASE("step: Qwen3-MoE's q_norm differentiated at pow's node, after the experts' gradients", "[step][moe]") {
  // An H200's Qwen3-MoE step (random-20261201-018): hidden 512, 2 layers, 32 heads of 128, 8 KV heads, 64 experts of
  // 1024, 8 a token, vocabulary 1024 untied, 256 tokens x 1, bf16, SDPA. The attention's nodes are a dense layer's, so
  // layer 0's q_norm node is reached once the whole MoE block is differentiated:
  //  - gradients: lm_head 524,288 + the final norm's 512 + layer 1's 105,940,224 (experts 64 x 3 x 512 x 1024 =
  //    100,663,296, router 32,768, two norms 1,024, q and o 2 x 2,097,152, k and v 2 x 524,288, q/k norms 256); layer 0's
  //    experts, router and post-attention norm 100,696,576, o_proj's 2,097,152, v_proj's and k_proj's 2 x 524,288 and the
  //    two head norms' 256: 210,307,584 values x 2 B = 420,615,168 B;
  //  - kept: the token ids 8 x 256 = 2,048; the input norm's fp32 input 524,288, rstd 1,024 and bf16 output 262,144; its
  //    output, kept by q_proj (262,144); q_norm's fp32 input 256 x 4096 x 4 = 4,194,304: 5,245,952 B;
  //  - flowing: the residual's gradient and the summed input gradients of k_proj and v_proj (2 x 262,144) and five fp32
  //    copies beside q_norm's input (5 x 4,194,304): 21,495,808 B.
  // With the resting states (212,929,536 parameters x 6 B = 1,277,577,216 B) and the allocator's 4,083 B, 1,724,938,227 B;
  // measured 1,724,940,288 B, where zeromem read 1,720,240,868 B (-0.27%) before MoE layers were walked to it.
  const transformer_config m = parse_hf_config(
      R"({"model_type": "qwen3_moe", "hidden_size": 512, "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
          "head_dim": 128, "intermediate_size": 1024, "moe_intermediate_size": 1024, "num_experts": 64, "num_experts_per_tok": 8,
          "norm_topk_prob": true, "vocab_size": 1024, "tie_word_embeddings": false, "use_cache": true})");
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(256, 1), s);
  CHECK(e.backward.resting == bytes_of(1'277'577'216));
  CHECK(e.backward.gradients == bytes_of(420'615'168));
  CHECK(e.backward.activations == bytes_of(5'245'952));
  CHECK(e.backward.flowing == bytes_of(21'495'808));
}

TEST_CASE("step: LoRA on the MLP with use_cache, the cache holds layer 0's K and V through the forward only", "[step][lora]") {
  // Layer 0 keeps nothing of its attention (its input needs no gradient), but config.json's use_cache builds a
  // DynamicCache that holds its K and V until the model's output is freed, after the loss: in the forward's terms, not the
  // backward's. Llama-2-7B (MHA, SDPA keeps the cache's own K and V in every other layer), s = 2048, b = 4:
  // 2 x 2 B x 8192 x 4096 = 134,217,728 B.
  transformer_config llama = preset_config("llama-2-7b");
  llama.use_cache = true;
  training_states t = pure_bf16();
  t.adapt.lora.rank = 16;
  t.adapt.lora.targets = parse_lora_targets("gate_proj,up_proj,down_proj");
  const step_estimate e = estimate_step(llama, t, sdpa(2048, 4), step_config{});
  CHECK(e.forward.kv_cache.count() == 134'217'728);
  CHECK(e.backward.kv_cache.count() == 0);
}

TEST_CASE("step: the optimizer step holds resting states, every gradient and the temporaries", "[step]") {
  // Pure bf16 AdamW: weights 2 + moments 4 B/param rest (40,430,493,696 B); gradients 2 B/param
  // (13,476,831,232 B); foreach buffer 13,476,831,232 B: 67,384,156,160 B (measured 67,384,165,888 B above a baseline
  // that already held the process's cuBLAS workspaces), and those two workspaces, 2 x 32 MiB = 67,108,864 B on an H100.
  const step_estimate e = estimate_step(llama2(), pure_bf16(), sdpa(2048, 1, recompute::full), step_config{});
  CHECK(e.optimizer_step.resting == bytes_of(40'430'493'696));
  CHECK(e.optimizer_step.gradients == bytes_of(13'476'831'232));
  CHECK(e.optimizer_step.blas_workspaces == bytes_of(67'108'864));
  CHECK(e.forward.blas_workspaces == e.optimizer_step.blas_workspaces);
  CHECK(e.backward.blas_workspaces == e.optimizer_step.blas_workspaces);
  CHECK(e.optimizer_step.total() == bytes_of(67'384'156'160 + 67'108'864));
  CHECK(e.peak == e.optimizer_step.total());
  CHECK(e.peak_phase == step_phase::optimizer_step);
  // The end of backward: every gradient and dL/d(embedding output), 2 x 2048 x 4096 = 16,777,216 B.
  step_config fused{};
  fused.optimizer = optimizer_impl::fused;
  const step_estimate f = estimate_step(llama2(), pure_bf16(), sdpa(2048, 1, recompute::full), fused);
  CHECK(f.peak_phase == step_phase::backward);
  CHECK(f.backward.total() == bytes_of(40'430'493'696 + 13'476'831'232 + 16'777'216 + 67'108'864));
  // An A100's workspaces (sm80, ":4096:2:16:8"): 2 x (2 x 4 MiB + 8 x 16 KiB) = 17,039,360 B; none without cuBLAS.
  fused.blas_workspaces = blas_workspaces_of(find_gpu("a100-80gb"), training_blas_handles);
  CHECK(fused.blas_workspaces == bytes_of(17'039'360));
  fused.blas_workspaces = bytes{};
  CHECK(estimate_step(llama2(), pure_bf16(), sdpa(2048, 1, recompute::full), fused).peak == bytes_of(40'430'493'696 + 13'476'831'232 + 16'777'216));
}

TEST_CASE("step: gradients alive from the start, kept between steps or accumulated", "[step][accumulation]") {
  // Llama-2-7B in pure bf16, SDPA, 2048 tokens, full recompute, fused AdamW (no optimizer temporaries). With
  // gradients set to None the backward's peak is its end: resting 40,430,493,696 B + every gradient 13,476,831,232 B
  // + dL/d(embedding output) 16,777,216 B (+ the two cuBLAS workspaces, 67,108,864 B, in every phase).
  step_config fresh{};
  fresh.optimizer = optimizer_impl::fused;
  const step_estimate none = estimate_step(llama2(), pure_bf16(), sdpa(2048, 1, recompute::full), fresh);
  CHECK(none.peak == bytes_of(40'430'493'696 + 13'476'831'232 + 16'777'216 + 67'108'864));
  CHECK(none.forward.gradients == bytes{});
  // zero_grad(set_to_none=False) keeps every gradient: the forward holds them beside its checkpoints (32 layer inputs
  // of 2 x 2048 x 4096 B = 536,870,912 B; outside the layers the token ids 16,384 B and the final RMSNorm's input
  // 16,777,216 B, fp32 copy 33,554,432 B, statistics 8,192 B and output 16,777,216 B: 67,133,440 B; the rotary cos
  // and sin, 2 x 2048 x 128 x 2 B = 1,048,576 B; the int64 position ids each checkpointed call holds, 8 x 2048 = 16,384 B,
  // SDPA passing no mask) and the loss (32000 x 2048 x (2 + 4 + 4) B = 655,360,000 B, the int64
  // labels padded, 8 x 2049 = 16,392 B, of which shift_labels is a view at one sequence), and the backward's highest moment is the loss's: the
  // checkpoints, 3 fp32 logits-sized tensors (32000 x 2048 x 12 B = 786,432,000 B) and every gradient.
  step_config kept = fresh;
  kept.keep_gradients = true;
  const step_estimate k = estimate_step(llama2(), pure_bf16(), sdpa(2048, 1, recompute::full), kept);
  CHECK(k.forward.gradients == bytes_of(13'476'831'232));
  CHECK(k.forward.total() ==
        bytes_of(40'430'493'696 + 67'108'864 + 13'476'831'232 + 536'870'912 + 67'133'440 + 1'048'576 + 16'384 + 655'360'000 + 16'392));
  CHECK(k.peak_phase == step_phase::backward);
  CHECK(k.peak == bytes_of(40'430'493'696 + 67'108'864 + 13'476'831'232 + 536'870'912 + 67'133'440 + 1'048'576 + 16'384 + 786'432'000));
  CHECK(k.optimizer_step.total() == none.optimizer_step.total());
  // A micro-batch after the first of a gradient accumulation is the same step.
  training_states accumulating = pure_bf16();
  accumulating.gradient_accumulation_steps = 4;
  const step_estimate acc = estimate_step(llama2(), accumulating, sdpa(2048, 1, recompute::full), fresh);
  CHECK(acc.peak == k.peak);
  CHECK(acc.forward.total() == k.forward.total());
  // FSDP2 over 8 ranks accumulates into the kept shards: 842,301,952 x 2 B = 1,684,603,904 B alive in forward.
  step_config sharded = fresh;
  sharded.fsdp_world = 8;
  training_states t8 = accumulating;
  t8.dp = 8;
  const step_estimate f8 = estimate_step(llama2(), t8, sdpa(2048, 1, recompute::full), sharded);
  CHECK(f8.forward.gradients == bytes_of(1'684'603'904));
  t8.gradient_accumulation_steps = 1;
  const step_estimate f8_first = estimate_step(llama2(), t8, sdpa(2048, 1, recompute::full), sharded);
  CHECK(f8_first.forward.gradients == bytes{});
  CHECK(f8.forward.total() - f8_first.forward.total() == bytes_of(1'684'603'904));
  // Its backward peaks in layer 30's MLP, layer 31's reduce-scatter input still alive. There, beside every kept
  // shard, the root's unsharded gradients: lm_head's and the final norm's, 32000 x 4096 x 2 + 4096 x 2 = 262,152,192 B,
  // added into the shards only in backward's final callback. The layer's new unsharded gate, up and down gradients and
  // its norm's are there too: 3 x 4096 x 11008 x 2 + 4096 x 2 = 270,540,800 B. The root's were left out before
  // (2026-11-29), so keeping gradients could lower an FSDP2 peak.
  CHECK(f8.peak_phase == step_phase::backward);
  CHECK(f8.backward.gradients == bytes_of(1'684'603'904LL + 262'152'192 + 270'540'800));
  CHECK(f8.peak > f8_first.peak);
}

TEST_CASE("step: a tied embedding's two gradients are summed out of place at the end of backward", "[step][tied]") {
  // Gemma-7B (google/gemma-7b config.json: 8,537,680,896 parameters, a 256,000 x 3072 embedding tied to lm_head), pure
  // bf16, SDPA, 2048 tokens, full recompute: measured on an H200 (h200-training-steps.json,
  // gemma7b-bf16-sdpa-s2048-b1-ckpt), backward's peak 71,447,194,112 B above a baseline with the cuBLAS workspaces.
  // There: the resting weights and AdamW's two bf16 moments (3 x 2 x 8,537,680,896 = 51,226,085,376 B), every other
  // gradient and lm_head's gradient of the shared weight held in autograd's input buffer (2 x 8,537,680,896 =
  // 17,075,361,792 B), the embedding's own (256,000 x 3072 x 2 = 1,572,864,000 B) and their sum, once dL/d(embedding
  // output) is freed: 71,447,175,168 B, 18,944 B under the measurement (before this term: -2.18%).
  const transformer_config gemma7b = find_preset("gemma-7b").config;
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(gemma7b, pure_bf16(), sdpa(2048, 1, recompute::full), s);
  CHECK(e.backward.resting == bytes_of(51'226'085'376));
  CHECK(e.backward.gradients == bytes_of(17'075'361'792 + 2 * 1'572'864'000LL));
  CHECK(e.backward.flowing == bytes{});
  CHECK(e.backward.total() == bytes_of(71'447'175'168));
  // Gradients kept from the previous step (zero_grad(set_to_none=False)), 512 tokens (the loss's moment, 512 x 256,000
  // x 12 = 1,572,864,000 B, then stays under the end's): the three tables beside the existing gradients.
  step_config kept = s;
  kept.keep_gradients = true;
  const step_estimate k = estimate_step(gemma7b, pure_bf16(), sdpa(512, 1, recompute::full), kept);
  CHECK(k.backward.gradients == bytes_of(17'075'361'792 + 3 * 1'572'864'000LL));
  CHECK(k.backward.flowing == bytes{});
}

TEST_CASE("step: the tied tables at the end of backward are the token table's, not the learned positions' or project_in's", "[step][tied]") {
  // GPT-2's layout (hidden 256, 4 heads, ffn 256, 2 layers, vocabulary 4,000, 61 positions, GELU), the CPU step oracle's
  // step (s 32, b 2, eager, pure bf16): wte 4,000 x 256 = 1,024,000 and wpe 61 x 256 = 15,616; a layer's ln_1 512,
  // c_attn 256 x 768 + 768 = 197,376, c_proj 65,792, ln_2 512, c_fc 65,792 and c_proj 65,792: 395,776, x 2 = 791,552;
  // ln_f 512: 1,831,680 parameters, 3,663,360 B of gradients. At the end: every gradient, lm_head's gradient of wte
  // waiting and the embedding's own, two more 4,000 x 256 x 2 = 2,048,000 B tables: 7,759,360 B above the resting states.
  // The profiler measured 7,759,880 B (520 B of scalars); wpe's gradient is made and kept by its own node (zeromem
  // counted two more position tables with them before: 7,821,824 B).
  const step_estimate g = oracle_step(gpt2_layout(256, 2, 4, 256, 4000, 61, "gelu"), 32, 2, recompute::none);
  CHECK(g.peak_phase == step_phase::backward);
  CHECK(g.backward.gradients == bytes_of(3'663'360 + 2 * 2'048'000));
  CHECK(g.backward.total() - g.backward.resting == bytes_of(7'759'360));
  // OPT's projected layout (hidden 256, 4 heads, ffn 640, 4 layers, vocabulary 8,192, word_embed_proj_dim 512, 2,048
  // positions), s 128, b 1: embed_tokens 8,192 x 512 = 4,194,304, embed_positions 2,050 x 256 = 524,800, project_in and
  // project_out 2 x 131,072; a layer's q, k, v, out_proj 4 x 65,792 = 263,168, fc1 164,480, fc2 164,096, two LayerNorms
  // 1,024: 592,768, x 4 = 2,371,072; the final LayerNorm 512: 7,352,832 parameters, project_out among them on the rank
  // (it was left out as a tied output layer's: 131,072 fewer). Resting: weights and AdamW's two bf16 moments, 6 B each:
  // 44,116,992 B. At the end: 14,705,664 B of gradients and two 8,192 x 512 x 2 = 8,388,608 B tables, 31,482,880 B; the
  // profiler measured 31,483,912 B (1,032 B of scalars).
  const transformer_config opt = parse_hf_config(
      R"({"model_type": "opt", "hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 4, "ffn_dim": 640,
          "vocab_size": 8192, "max_position_embeddings": 2048, "word_embed_proj_dim": 512, "use_cache": false, "dropout": 0.0})");
  const step_estimate o = oracle_step(opt, 128, 1, recompute::none);
  CHECK(o.backward.resting == bytes_of(44'116'992));
  CHECK(o.backward.gradients == bytes_of(14'705'664 + 2 * 8'388'608));
  CHECK(o.backward.total() - o.backward.resting == bytes_of(31'482'880));
  // The fused loss holds, from forward on, lm_head's input gradient (project_out's output: 128 x 512 x 2 = 131,072 B) and
  // its weight's, the tied token table's (8,388,608 B; project_in was counted with it before, 262,144 B more).
  CHECK(oracle_step(opt, 128, 1, recompute::none, device_kind::cpu, loss_impl::fused).forward.loss == bytes_of(131'072 + 8'388'608));
}

TEST_CASE("step: GPT-2's eager core is differentiated with its 16-bit probabilities and c_attn's whole output", "[step]") {
  // GPT-2's layout (hidden 128, 8 heads of 16, ffn 128, 2 layers, vocabulary 500 tied, 145 positions, ReLU), the CPU
  // step oracle's step under full recompute (s 128, b 1, eager, pure bf16). Layer 0 recomputed, its softmax's node:
  //  - recomputed: P (8 x 128 x 128 x 2 = 262,144 B, softmax's output, `.type` returned it), c_attn's output that the Q
  //    and K views keep through QK^T (128 x 384 x 2 = 98,304 B), ln_1's output (32,768 B) and its statistics (512 B);
  //  - flowing: dL/dP from P @ V's node and dL/d(scores) made here (2 x 262,144 B), dL/dV (32,768 B), the residual's
  //    gradient (32,768 B);
  //  - gradients: layer 1's (c_attn 98,304 + 768, three 128 x 128 linears 3 x (32,768 + 256), two LayerNorms 1,024),
  //    layer 0's MLP and c_proj (3 x (32,768 + 256)) and ln_2 (512), ln_f (512), and lm_head's of the tied table waiting
  //    (500 x 128 x 2 = 128,000 B): 427,264 B;
  //  - the checkpoint (32,768 B), the mask the checkpointed calls hold (1 x 1 x 128 x 128 x 2 = 32,768 B), the token ids
  //    and positions (2 x 1,024 B).
  // 1,478,400 B above the resting states; the profiler measured 1,478,410 B (zeromem read 1,051,904 B before, -28.8%).
  const step_estimate g = oracle_step(gpt2_layout(128, 2, 8, 128, 500, 145, "relu"), 128, 1, recompute::full);
  CHECK(g.peak_phase == step_phase::backward);
  CHECK(g.backward.recomputed == bytes_of(262'144 + 98'304 + 32'768 + 512));
  CHECK(g.backward.flowing == bytes_of(2 * 262'144 + 32'768 + 32'768));
  CHECK(g.backward.gradients == bytes_of(427'264));
  CHECK(g.backward.activations == bytes_of(2 * 32'768 + 2 * 1'024));
  CHECK(g.backward.total() - g.backward.resting == bytes_of(1'478'400));
}

TEST_CASE("step: a ReLU MLP's first linear output stands beside the ReLU's in forward, and its gradient beside ReLU's in backward", "[step]") {
  // OPT's layout without biases (hidden 512, 8 heads, ffn 4,096, 3 layers, vocabulary 500, 320 positions, pre-norm), the
  // family step oracle's step (s 256, b 3: 768 tokens; eager, pure bf16, no recompute). A layer keeps 22,026,240 B: two
  // LayerNorms' inputs with their bf16 statistics (2 x (786,432 + 2 x 1,536)), their outputs (the q/k/v input and fc1's,
  // 2 x 786,432), q, k, v and the attention output (4 x 786,432), the fp32 and bf16 probabilities (3 x 8 x 256 x 256 x
  // (4 + 2) = 9,437,184) and ReLU's output (768 x 4,096 x 2 = 6,291,456), which fc2 reads.
  const transformer_config opt = parse_hf_config(
      R"({"model_type": "opt", "hidden_size": 512, "num_hidden_layers": 3, "num_attention_heads": 8, "ffn_dim": 4096,
          "vocab_size": 500, "max_position_embeddings": 320, "do_layer_norm_before": true, "enable_bias": false,
          "word_embed_proj_dim": 512, "use_cache": false, "dropout": 0.0})");
  const step_estimate e = oracle_step(opt, 256, 3, recompute::none);
  // Forward, at the last layer's ReLU: the three layers' tensors (66,078,720 B), the token ids (6,144 B), the position
  // indices embed_positions keeps (position_ids + 2, 8 x 768 = 6,144 B), inputs_embeds and the position embeddings
  // (2 x 786,432 B), OPTDecoder's fp32 mask and int64 position_ids (4 x 768 + 8 x 768 = 9,216 B), the 3 x 1 x 256 x 256
  // bf16 causal mask (393,216 B), cache_position (8 x 256 = 2,048 B), and fc1's output, which relu does not keep
  // (6,291,456 B): 74,359,808 B. The loss's moment holds 71,519,256 B. The profiler measured 74,359,856 B (48 B of
  // scalars beside).
  CHECK(e.forward.total() - e.forward.resting ==
        bytes_of(66'078'720 + 6'144 + 6'144 + 2 * 786'432 + 9'216 + 393'216 + 2'048 + 6'291'456));
  // Backward, at the last layer's ReLU: fc2's node has run, but ReLU keeps the output it read; the node makes dL/d(fc1's
  // output) beside dL/d(ReLU's output) (2 x 6,291,456 B) and the residual's gradient (786,432 B), with lm_head's
  // (500 x 512 x 2), ln_f's (2 x 1,024) and fc2's (512 x 4,096 x 2) gradients, 4,708,352 B, and the layers' tensors,
  // token ids and position indices: 84,168,704 B. At fc2's node a c sb ffn fewer: 77,877,248 B (zeromem's peak before,
  // -7.48%). The profiler measured 84,168,760 B.
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gradients == bytes_of(512'000 + 2'048 + 4'194'304));
  CHECK(e.backward.flowing == bytes_of(2 * 6'291'456 + 786'432));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(66'078'720 + 6'144 + 6'144 + 4'708'352 + 2 * 6'291'456 + 786'432));
}

TEST_CASE("step: a residual dropout's mask is gone at down's node, where its gradient stands beside the residual's", "[step]") {
  // An H200 step (random-20261202-068: OPT, hidden 2048, ffn 4,096, 3 layers, 1,024-token vocabulary, dropout 0.1,
  // 2048 x 4 tokens, SDPA, full recompute) peaks in backward at layer 0's fc2 node. Against the same model without
  // dropout, two things differ there (sbh = 8192 x 2048 = 16,777,216):
  //  - the recomputed layer keeps two bool dropout masks (native_dropout's result1, sbh B each), but the MLP's
  //    dropout node ran before fc2's and released its mask (engine.cpp evaluate_function: release_variables): sbh more;
  //  - fc2's incoming gradient is the dropout node's output, a bf16 tensor of its own (2 sbh), while the residual's
  //    gradient waits in the input buffer of the residual path; without dropout the two are one tensor.
  // Measured 1,430,096,384 B; zeromem read 1,413,333,056 B (-1.17%) with the mask kept and one gradient.
  const auto opt = [](const char* dropout) {
    return parse_hf_config(std::string(R"({"model_type": "opt", "hidden_size": 2048, "num_hidden_layers": 3, "num_attention_heads": 32,
        "ffn_dim": 4096, "vocab_size": 1024, "max_position_embeddings": 2048, "do_layer_norm_before": true,
        "word_embed_proj_dim": 512, "use_cache": false, "dropout": )") + dropout + "}");
  };
  step_config c{};
  c.blas_workspaces = bytes{};
  const step_estimate with = estimate_step(opt("0.1"), pure_bf16(), sdpa(2048, 4, recompute::full), c);
  const step_estimate without = estimate_step(opt("0.0"), pure_bf16(), sdpa(2048, 4, recompute::full), c);
  CHECK(with.backward.recomputed - without.backward.recomputed == bytes_of(16'777'216));
  CHECK(with.backward.flowing - without.backward.flowing == bytes_of(2 * 16'777'216));
  CHECK(with.backward.gradients == without.backward.gradients);
}

TEST_CASE("step: lm_head's backward holds its weight's new gradient beside the logits' 16-bit gradient", "[step]") {
  // Llama-2-7B, pure bf16, SDPA, 128 tokens, full recompute, fused AdamW, gradients kept (accumulating): at lm_head's
  // backward every gradient (13,476,831,232 B) is alive, lm_head's new one (32000 x 4096 x 2 = 262,144,000 B) is made
  // beside the logits' gradient (32000 x 128 x 2 = 8,192,000 B) and dL/d(its input) (128 x 4096 x 2 = 1,048,576 B),
  // with every checkpoint (32 x 1,048,576 B), the token ids (8 x 128), the rotary tables (2 x 2 x 128 x 128), the
  // positions each checkpointed call holds (8 x 128) and the final RMSNorm's and lm_head's inputs (bf16 2 x 1,048,576,
  // fp32 copy 2,097,152, rstd 4 x 128). The loss's own moment holds 3 fp32 logits instead: 32000 x 128 x 12 =
  // 49,152,000 B, under the 271,384,576 B here.
  step_config s{};
  s.optimizer = optimizer_impl::fused;
  s.keep_gradients = true;
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(llama2(), pure_bf16(), sdpa(128, 1, recompute::full), s);
  // The head's gradients as zeromem counts them: lm_head's and the final norm's (4096 x 2 B, made right after it).
  CHECK(e.backward.gradients == bytes_of(13'476'831'232 + 262'144'000 + 8'192));
  CHECK(e.backward.loss == bytes_of(8'192'000));
  CHECK(e.backward.flowing == bytes_of(1'048'576));
  CHECK(e.backward.activations == bytes_of(32 * 1'048'576 + 1'024 + 65'536 + 1'024 + 2 * 1'048'576 + 2'097'152 + 512));
  // With the fused loss, lm_head's gradient was made in forward: no such moment.
  s.loss = loss_impl::fused;
  CHECK(estimate_step(llama2(), pure_bf16(), sdpa(128, 1, recompute::full), s).backward.loss != bytes_of(8'192'000));
}

TEST_CASE("step: under autocast lm_head's weight cast node makes its fp32 gradient after MmBackward0 has freed the casts", "[step][amp]") {
  // An H200 step (random-20261129-000): Llama, one layer of 4096 (32 heads, 4 KV heads, ffn 8192), a 50,304-token
  // vocabulary untied, AMP (fp32 weights, gradients and SGD's momentum; bf16 autocast), eager, 512 x 2 tokens, three
  // micro-batches (every fp32 gradient alive: 4 x 550,514,688 = 2,202,058,752 B). lm_head's backward:
  //  (A) MmBackward0: the logits' 16-bit gradient 2 x 1024 x 50,304 = 103,022,592, the weight cast's 16-bit gradient
  //      2 x 206,045,184 = 412,090,368 and the input cast's 2 x 1024 x 4096 = 8,388,608: 523,501,568 B;
  //  (B) the input's cast node, then the weight's: the fp32 weight gradient 4 x 206,045,184 = 824,180,736 and dL/d(input)
  //      in fp32 4 x 1024 x 4096 = 16,777,216, less the input cast MmBackward0 released, 8,388,608 (the weight cast it
  //      released is replaced by the 16-bit gradient, as large): 832,569,344 B, above (A).
  // Counted at (A)'s instant with fp32 gradients and the final norm's before (824,197,120 + 16,777,216 + 103,022,592),
  // the backward read 110,376,448 B over the measured 8,548,686,336 B (+1.29%).
  const transformer_config m = parse_hf_config(R"({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 1,
      "num_attention_heads": 32, "num_key_value_heads": 4, "intermediate_size": 8192, "vocab_size": 50304,
      "max_position_embeddings": 4096, "tie_word_embeddings": false, "use_cache": false})");
  training_states amp{};
  amp.recipe = recipe_of(precision::amp_bf16);
  amp.optimizer.kind = optimizer_kind::sgd_momentum;
  amp.gradient_accumulation_steps = 3;
  activation_config a = sdpa(512, 2);
  a.attention = attention_kind::eager;
  a.autocast = true;
  step_config s{};
  s.optimizer = pytorch_default_impl(optimizer_kind::sgd_momentum);
  const step_estimate e = estimate_step(m, amp, a, s);  // with the process's two cuBLAS workspaces, 2 x 32 MiB: a fresh process
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gradients == bytes_of(2'202'058'752LL + 824'180'736));
  CHECK(e.backward.flowing == bytes_of(16'777'216));
  CHECK(e.backward.loss == bytes{});
  CHECK(e.backward.activations == e.forward.activations - bytes_of(8'388'608));  // the forward's moment is the loss's
  CHECK(e.forward.loss.count() > 0);
  // Measured 8,548,686,336 B: 1,051,136 B (0.012%) above this moment.
  CHECK(e.backward.total().count() == 8'548'686'336LL - 1'051'136);
}

TEST_CASE("step: under autocast down's node makes its weight cast's 16-bit gradient, and the cast's node the fp32 one", "[step][amp]") {
  // Two H200 AMP steps with three micro-batches (every fp32 gradient alive), full recompute, SDPA, whose backward peaks
  // at the last layer's down_proj. down reads a 16-bit cast of its weight: (A) its node makes the cast's 16-bit
  // gradient beside dL/d(its input), the product's (c sb ffn), and its incoming gradient, the branch's cast (c sbh);
  // (B) once it has released its input and the weight cast and freed the incoming gradient, the cast's node makes the
  // fp32 gradient, the 16-bit one in the freed cast's place. B - A = 4hf - 2hf - 2 sb ffn - 2 sbh.
  //  - Llama (random-20261129-069): hidden 1536, ffn 4608, 4 layers, 2048 tokens: B - A = 14,155,776 - 18,874,368 -
  //    6,291,456 < 0: (A), down's 2 x 1536 x 4608 = 14,155,776 B beside the 4 x 130,561,536 B of fp32 gradients, with
  //    the residual's fp32 gradient 4 sbh = 12,582,912, the branch's cast 6,291,456 and the product's 18,874,368.
  //    Measured 2,455,874,560 B; counted with the fp32 gradient at (A), +0.53%.
  //  - Gemma-3 (random-20261129-013): hidden 2048, ffn 4096, 4 layers, 128 x 2 tokens, tied: B - A = 16,777,216 -
  //    2,097,152 - 1,048,576 > 0: (B), down's 4 x 2048 x 4096 = 33,554,432 B beside the 4 x 268,472,320 B of fp32
  //    gradients and lm_head's tied one waiting (4 x 8192 x 2048), with the residual's fp32 gradient 4 sbh = 2,097,152
  //    and the product's 2,097,152. Measured 3,518,864,896 B; +0.10% at (A) with the fp32 gradient. Its four layers
  //    all slide, so transformers 5.17 builds the local rotary pair alone (fp32 under autocast, 2 x 4 x 128 x 256 =
  //    262,144 B): counted with the global pair too, +0.007%.
  training_states amp{};
  amp.recipe = recipe_of(precision::amp_bf16);
  amp.gradient_accumulation_steps = 3;
  step_config s{};
  s.blas_workspaces = bytes{};  // the measured peaks are above a baseline that held them
  activation_config a = sdpa(2048, 1, recompute::full);
  a.autocast = true;
  const transformer_config llama = parse_hf_config(R"({"model_type": "llama", "hidden_size": 1536, "num_hidden_layers": 4,
      "num_attention_heads": 12, "num_key_value_heads": 1, "intermediate_size": 4608, "vocab_size": 8192,
      "max_position_embeddings": 4096, "tie_word_embeddings": false, "use_cache": true})");
  const step_estimate at_node = estimate_step(llama, amp, a, s);
  CHECK(at_node.backward.gradients == bytes_of(4 * 130'561'536LL + 14'155'776));
  CHECK(at_node.backward.flowing == bytes_of(12'582'912 + 6'291'456 + 18'874'368));
  CHECK(at_node.backward.total().count() == 2'455'874'560LL - 1'051'648);  // -0.043%
  const transformer_config gemma3 = parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 2048, "num_hidden_layers": 4,
      "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 256, "intermediate_size": 4096, "vocab_size": 8192,
      "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "sliding_window": 128, "sliding_window_pattern": 6,
      "max_position_embeddings": 32768, "rope_local_base_freq": 10000, "rope_theta": 1000000, "use_cache": false})");
  amp.optimizer.kind = optimizer_kind::adagrad;
  s.optimizer = pytorch_default_impl(optimizer_kind::adagrad);
  a.seq_len = 128;
  a.micro_batch = 2;
  const step_estimate at_cast = estimate_step(gemma3, amp, a, s);
  CHECK(at_cast.backward.gradients == bytes_of(4 * 268'472'320LL + 4 * 8192 * 2048 + 33'554'432));
  CHECK(at_cast.backward.flowing == bytes_of(2'097'152 + 2'097'152));
  CHECK(at_cast.backward.total().count() == 3'518'864'896LL - 3'584);  // -0.0001%
}

TEST_CASE("step: FSDP2 shards the resting states and gathers the root and one layer", "[step]") {
  // 8 ranks, pure bf16: 6,738,415,616 / 8 = 842,301,952 parameters per rank; weights 2 + moments 4 B each.
  step_config s{};
  s.fsdp_world = 8;
  training_states t = pure_bf16();
  t.dp = 8;
  const step_estimate e = estimate_step(llama2(), t, sdpa(2048, 1, recompute::full), s);
  CHECK(e.forward.resting == bytes_of(842'301'952LL * 6));
  // The root (embedding, final norm, lm_head: 2 x 131,072,000 + 4096) stays unsharded in bf16 through forward, and the
  // last layer's flat all-gather output (202,383,360 x 2 B) waits for the root's post-forward, after the loss.
  CHECK(e.forward.gathered == bytes_of((2 * 131'072'000LL + 4096) * 2 + 202'383'360LL * 2));
  // SHARD_GRAD_OP keeps all 32 layers unsharded (32 x 202,383,360 x 2 B) besides the root and that output.
  s.reshard_after_forward = false;
  const step_estimate g = estimate_step(llama2(), t, sdpa(2048, 1, recompute::full), s);
  CHECK(g.forward.gathered == bytes_of((2 * 131'072'000LL + 4096) * 2 + 33 * 202'383'360LL * 2));
  // One rank copies nothing out (wait_for_unshard's world_size == 1 branch): the root and the layers alone.
  s.fsdp_world = 1;
  t.dp = 1;
  const step_estimate one = estimate_step(llama2(), t, sdpa(2048, 1, recompute::full), s);
  CHECK(one.forward.gathered == bytes_of((2 * 131'072'000LL + 4096) * 2 + 32 * 202'383'360LL * 2));
}

TEST_CASE("step: FSDP2 frees a forward all-gather output only at the next copy-out, the last at the root's post-forward", "[step][moe]") {
  // random-20261203-037 (tests/data/calibration/h200-random-fsdp-steps-20261203.json): a one-layer Qwen2-MoE layout
  // (hidden 512, 8 heads, 2 KV heads, 4 experts of 512 and a shared expert of 512, top 1, vocabulary 32,000 untied),
  // SHARD_GRAD_OP over 32 ranks, fp32 parameters under MixedPrecisionPolicy(bf16, reduce fp32), s 512, b 1. Parameters:
  //   the root: embedding and lm_head 2 x 32,000 x 512 + the final norm 512 = 32,768,512;
  //   the layer: q 512 x 512 + 512, k and v 128 x 512 + 128 each, o 512 x 512 (656,128), two norms 1,024, the router
  //   4 x 512, experts 4 x (1,024 x 512 + 512 x 512) = 3,145,728, the shared expert 3 x 512 x 512 and its gate 512:
  //   4,591,872; FSDP2 pads the experts' dim 0 to 32 rows (_fsdp_param.py), 28 x 786,432 = 22,020,096 more.
  // In forward the gathered layer stays (no reshard after forward) and its flat all-gather output, the same padded
  // 26,611,968 elements, is kept in comm_ctx.all_gather_state until the root's post-forward: in bf16,
  //   32,768,512 x 2 + 2 x 26,611,968 x 2 = 65,537,024 + 106,447,872 = 171,984,896 B,
  // which puts the step's peak at the forward's loss: 438,763,320 B predicted, 442,460,672 B measured (−0.84%; −5.46%
  // in backward without that output).
  const transformer_config q = parse_hf_config(R"({"model_type": "qwen2_moe", "hidden_size": 512, "intermediate_size": 512,
      "num_attention_heads": 8, "num_key_value_heads": 2, "num_hidden_layers": 1, "vocab_size": 32000, "hidden_act": "silu",
      "rms_norm_eps": 1e-06, "max_position_embeddings": 8192, "tie_word_embeddings": false, "decoder_sparse_step": 1,
      "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts_per_tok": 1, "num_experts": 4,
      "norm_topk_prob": false, "use_sliding_window": false})");
  training_states t = pure_bf16();
  t.recipe = recipe_of(precision::mixed_bf16);
  const activation_config a = sdpa(512, 1);
  const step_estimate e = fsdp2_rank(q, t, a, 32, false);
  CHECK(e.forward.gathered == bytes_of(171'984'896));
  CHECK(e.peak_phase == step_phase::forward);
  CHECK(std::abs(static_cast<double>(e.peak.count()) / 442'460'672.0 - 1.0) < 0.01);
  // A loss taken from the returned logits (verl's log-probs) comes after the root's post-forward has freed that
  // output: the root and the layer at the loss, 65,537,024 + 53,223,936.
  step_config outside{};
  outside.loss_in_forward = false;
  CHECK(fsdp2_rank(q, t, a, 32, false, outside).forward.gathered == bytes_of(118'760'960));
  // FULL_SHARD: the layer is resharded after its forward, its all-gather output is not: 65,537,024 + 53,223,936.
  CHECK(fsdp2_rank(q, t, a, 32).forward.gathered == bytes_of(118'760'960));
}

TEST_CASE("step: FSDP2's backward peaks in layer 1, with layer 0 prefetched and layer 2's reduce-scatter input held", "[step]") {
  // Llama-2-7B, 8 ranks, pure bf16, full recompute, s 2048 (measured on an H100: tests/data/calibration,
  // fsdp-llama2-7b-w8-bf16-s2048-b1-ckpt, its peak inside a layer's backward at the post-attention RMSNorm).
  // Layer 0 prefetches nothing and the last layer has no reduce-scatter input waiting above it, so the walk's
  // linear part is layers 1 .. 30; here it rises towards layer 1, whose MLP norm's moment holds (bytes, bf16):
  //   gathered: the root (2 x 131,072,000 + 4096) x 2 = 524,296,192, layer 1 and the prefetched layer 0
  //             2 x 202,383,360 x 2 = 809,533,440: 1,333,829,632;
  //   communication: layer 2's reduce-scatter input, 202,383,360 x 2 = 404,766,720;
  //   gradients: the root's unsharded lm_head and final norm (131,072,000 + 4096) x 2 = 262,152,192, layers 2 .. 31's
  //              shards 30 x ceil(202,383,360 / 8) x 2 = 1,517,875,200, and layer 1's MLP and MLP-norm gradients
  //              (3 x 4096 x 11008 + 4096) x 2 = 270,540,800: 2,050,568,192.
  // Layer 1's end (all its gradients and its own reduce-scatter input) is lower only because FSDP2 reshards the layer
  // before that copy (_fsdp_param_group.py post_backward); counted unsharded there, it would be the peak instead.
  step_config s{};
  s.fsdp_world = 8;
  s.blas_workspaces = bytes{};
  training_states t = pure_bf16();
  t.dp = 8;
  const step_estimate e = estimate_step(llama2(), t, sdpa(2048, 1, recompute::full), s);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gathered == bytes_of(1'333'829'632));
  CHECK(e.backward.communication == bytes_of(404'766'720));
  CHECK(e.backward.gradients == bytes_of(2'050'568'192));
}

TEST_CASE("step: FSDP2's root holds a tied table's three gradients at the end, and reduces after resharding", "[step]") {
  // Two H200 ranks from random_steps.py's data-parallel draw (tests/data/calibration/h200-random-fsdp-steps-20261203.json).
  // (a) random-20261203-025: Gemma-3's layout, hidden 4096, 2 layers (4 heads of 256, 1 KV head, ffn 4096), vocabulary
  // 128,256 tied; SHARD_GRAD_OP over 2 ranks, pure bf16, s 256, b 2. Parameters: the embedding 128,256 x 4096 =
  // 525,336,576, the final norm 4096, two layers of 60,834,304. At the embedding's backward the rank holds, in bf16:
  //   gradients: the layers' shards 121,668,608 / 2 x 2 = 121,668,608 (the root's own shard is not made yet), the root's
  //              unsharded gradients (525,336,576 + 4096) x 2 = 1,050,681,344, lm_head's gradient waiting in the
  //              input buffer 1,050,673,152 and the sum of the two tables 1,050,673,152: 3,273,696,256;
  //   gathered: the root, 1,050,681,344; communication: layer 0's reduce-scatter input, 60,834,304 x 2 = 121,668,608.
  // With its resting states (323,504,640 x 2 x 3 = 1,941,027,840) and the process's cuBLAS workspaces (67,108,864) that
  // is 6,454,182,912 B; the H200 measured 6,454,193,152 B (zeromem read the root as untied: −24.4%).
  const transformer_config g = parse_hf_config(R"({"model_type": "gemma3_text", "hidden_size": 4096, "intermediate_size": 4096,
      "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256, "num_hidden_layers": 2, "vocab_size": 128256,
      "hidden_activation": "gelu_pytorch_tanh", "query_pre_attn_scalar": 256, "rms_norm_eps": 1e-06, "rope_theta": 1000000,
      "rope_local_base_freq": 10000, "sliding_window": 512, "sliding_window_pattern": 6, "max_position_embeddings": 32768})");
  const step_estimate tied = fsdp2_rank(g, pure_bf16(), sdpa(256, 2), 2, false);
  CHECK(tied.peak_phase == step_phase::backward);
  CHECK(tied.backward.gradients == bytes_of(3'273'696'256LL));
  CHECK(tied.backward.gathered == bytes_of(1'050'681'344LL));
  CHECK(tied.backward.communication == bytes_of(121'668'608));
  CHECK(tied.peak == bytes_of(6'454'182'912LL));
  // (b) random-20261203-026: Llama's layout, hidden 1024, 2 layers (16 heads, 2 KV heads, ffn 2048), vocabulary 151,936
  // untied; FULL_SHARD over 64 ranks, fp32 parameters under MixedPrecisionPolicy(bf16, reduce fp32), s 128, b 2. The
  // root (2 x 155,582,464 + 1024 = 311,165,952) is reduced in backward's final callback after it has resharded: its
  // bf16 gradients 622,331,904 beside its fp32 reduce-scatter input 1,244,663,808 and the layers' fp32 shards
  // 17,305,600 / 64 x 4 = 1,081,600, nothing gathered. The H200 measured 1,997,907,456 B (−28.5% before).
  const transformer_config l = parse_hf_config(R"({"model_type": "llama", "hidden_size": 1024, "intermediate_size": 2048,
      "num_attention_heads": 16, "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 151936, "hidden_act": "silu",
      "rms_norm_eps": 1e-05, "max_position_embeddings": 4096, "tie_word_embeddings": false})");
  training_states mixed = pure_bf16();
  mixed.recipe = recipe_of(precision::mixed_bf16);
  const step_estimate untied = fsdp2_rank(l, mixed, sdpa(128, 2), 64);
  CHECK(untied.backward.gradients == bytes_of(622'331'904 + 1'081'600));
  CHECK(untied.backward.communication == bytes_of(1'244'663'808LL));
  CHECK(untied.backward.gathered == bytes{});
}

TEST_CASE("step: FSDP2's gathered layer is walked to its attention input linear, whose weight gradient is made last", "[step]") {
  // random-20261203-017 (tests/data/calibration/h200-random-fsdp-steps-20261203.json): an OLMo layout, hidden 2048,
  // 2 layers (32 heads of 64, ffn 5440, non-parametric LayerNorms), vocabulary 1,024 tied; FULL_SHARD over 64 ranks,
  // pure bf16, SDPA, s 256, b 2 (512 tokens against 2048-wide layers). A layer holds 4 x 2048^2 + 3 x 2048 x 5440 =
  // 50,200,576 parameters (100,401,152 B in bf16), the tied table 1,024 x 2048 = 2,097,152. At layer 1's q_proj node
  // (MmBackward0, its weight's gradient made with its input kept) the rank holds:
  //   gradients: the tied table's from lm_head, waiting in the input buffer, 4,194,304, and all of layer 1's,
  //              100,401,152: 104,595,456;
  //   activations: layer 0's saved tensors (two fp32 LayerNorm inputs with their statistics 2 x 4,198,400, the norms'
  //              outputs, q, k, v, the attention output 6 x 2,097,152, SDPA's fp32 log-sum-exp 2 x 32 x 256 x 4 =
  //              65,536, the MLP's gate, up, act and product 4 x 512 x 5440 x 2 = 22,282,240: 43,327,488), the token ids
  //              4,096 and the rotary tables 131,072, and layer 1's input norm (4,198,400) and its output, the linear's
  //              kept input (2,097,152): 49,758,208;
  //   flowing: dL/d(residual), q_proj's incoming gradient, k's and v's input gradients summed, and the input gradient
  //              q_proj made, 4 x 512 x 2048 x 2 = 8,388,608;
  //   gathered: the root 4,194,304, layer 1 and the prefetched layer 0, 2 x 100,401,152: 204,996,608;
  // with the resting shards ceil(102,498,304 / 64) x 2 B x 3 = 9,609,216 and the cuBLAS workspaces 67,108,864:
  // 444,456,960 B. The H200 measured 449,441,280 B (−1.11%; −3.09% at layer 0's copy-out before this node was walked
  // under FSDP2).
  const transformer_config o = parse_hf_config(R"({"model_type": "olmo", "hidden_size": 2048, "intermediate_size": 5440,
      "num_attention_heads": 32, "num_key_value_heads": 32, "num_hidden_layers": 2, "vocab_size": 1024, "hidden_act": "silu",
      "max_position_embeddings": 2048, "tie_word_embeddings": true, "attention_bias": false, "clip_qkv": null})");
  const step_estimate e = fsdp2_rank(o, pure_bf16(), sdpa(256, 2), 64);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gradients == bytes_of(104'595'456));
  CHECK(e.backward.activations == bytes_of(49'758'208));
  CHECK(e.backward.flowing == bytes_of(8'388'608));
  CHECK(e.backward.gathered == bytes_of(204'996'608));
  CHECK(e.peak == bytes_of(444'456'960));
}

TEST_CASE("step: FSDP2 with alternating layers walks the next layer of layer 0's kind too", "[step]") {
  // Gemma-2-2B (google/gemma-2-2b config.json: hidden 2304, 26 layers, 8 heads of 256, 4 KV heads, ffn 9216, vocab
  // 256000 tied), 2 ranks, pure bf16, SDPA, full recompute, s 4096 = its sliding window, b 2, fused loss. Layers 0, 2,
  // 4, ... slide and, at s >= window, keep what the odd (full-attention) layers do not (attention_layout sdpa_mask):
  // SDPA's additive mask, 2 x 2 x 4096 x 4096 = 67,108,864, and K and V repeated from 4 to 8 heads, 2 x 16,777,216 more.
  // Layer 0 prefetches nothing, so the sliding layers' walk is linear from layer 2 = N on, and here layer 2's moment at
  // its post-feedforward norm (Gemma-2's first node differentiated) tops every other: against layer 1 (full attention)
  // it holds one checkpoint more (2 x 8192 x 2304 = 37,748,736) and the sliding extras (100,663,296), and one layer's
  // gradient shard less (ceil(77,865,984 / 2) x 2 = 77,865,984): +60,546,048 B. A layer holds 2 x (2304 x 2048 + 2304 x
  // 1024) + 2048 x 2304 + 2304 x 2048 + 3 x 2304 x 9216 + 4 x 2304 = 77,865,984 parameters.
  // With its 256,000-token tied table the end of backward is higher still: the layers' 26 shards 2,024,515,584, the
  // root unsharded (589,824,000 + 2304) x 2 = 1,179,652,608 and two more tables, lm_head's gradient waiting for the
  // embedding's and their sum, 2 x 1,179,648,000: 5,563,464,192 B of gradients. So the walk is read at a 1,024-token
  // vocabulary, where the root is 1024 x 2304 + 2304 = 2,361,600 parameters.
  transformer_config m = find_preset("gemma-2-2b").config;
  step_config s{};
  s.fsdp_world = 2;
  s.loss = loss_impl::fused;
  s.blas_workspaces = bytes{};
  const step_estimate whole = estimate_step(m, pure_bf16(), sdpa(4096, 2, recompute::full), s);
  CHECK(whole.backward.gradients == bytes_of(5'563'464'192LL));
  CHECK(whole.backward.gathered == bytes_of(1'179'652'608LL));
  m.vocab = 1024;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(4096, 2, recompute::full), s);
  CHECK(e.peak_phase == step_phase::backward);
  // Layers 3 .. 25's gradient shards, 23 x 77,865,984, the root's final norm, 2304 x 2, and lm_head's tied gradient,
  // 1024 x 2304 x 2.
  CHECK(e.backward.gradients == bytes_of(1'790'917'632 + 4'608 + 4'718'592));
  // Three checkpoints (layers 0, 1, 2), the token ids 8 x 8192, the rotary tables 2 x 2 x 4096 x 256 and the
  // checkpointed calls' position ids 8 x 4096 and the sliding layers' boolean mask, 4096 x 4096.
  CHECK(e.backward.activations == bytes_of(3 * 37'748'736 + 65'536 + 4'194'304 + 32'768 + 16'777'216));
  // The sliding layer recomputed whole but its post-feedforward norm. A full-attention layer keeps four norms, less
  // that one (GemmaRMSNorm: fp32 input and normalised tensor 2 x 4 x 8192 x 2304, rstd 4 x 8192, 1 + weight 4 x 2304:
  // 151,036,928 each), the norms' bf16 outputs read by q, k, v and by the MLP (37,748,736 each), q (2 x 8192 x 2048),
  // k and v (2 x 8192 x 1024 each), SDPA's log-sum-exp (4 x 8 x 4096 x 2) and output (2 x 8192 x 2048), and the MLP's
  // gate, up, act(gate) and product (4 x 2 x 8192 x 9216); the sliding layer adds its extras.
  const std::int64_t full_layer = 3 * 151'036'928 + 2 * 37'748'736 + 33'554'432 + 2 * 16'777'216 + 262'144 + 33'554'432 + 603'979'776;
  CHECK(e.backward.recomputed == bytes_of(full_layer + 67'108'864 + 2 * 16'777'216));
  // The root (2,361,600) and layers 2 and 3 unsharded in bf16; layer 3's reduce-scatter input.
  CHECK(e.backward.gathered == bytes_of((2'361'600 + 2 * 77'865'984) * 2));
  CHECK(e.backward.communication == bytes_of(77'865'984 * 2));
  // Resting: the rank's shard of 2,026,877,184 parameters (26 layers and the 2,361,600 of the root), 1,013,438,592,
  // as bf16 weights and AdamW's two bf16 moments; flowing: dL/d(residual) 2 x 8192 x 2304 and the norm's six fp32
  // copies of its input 6 x 4 x 8192 x 2304.
  CHECK(e.backward.resting == bytes_of(1'013'438'592LL * 2 * 3));
  CHECK(e.backward.flowing == bytes_of(37'748'736 + 452'984'832));
}

TEST_CASE("step: autocast keeps fp32 residuals, a cast per linear and the 16-bit weights", "[step][amp]") {
  // One Llama-2-7B layer under autocast, s b = 1024: each linear's bf16 weight (202,383,360 - 2 x 4096 norm
  // weights = 202,375,168 parameters, 2 B) and, for q, k, v, three bf16 casts of the fp32 norm output
  // (3 x 2 x 1024 x 4096 = 25,165,824 B).
  activation_config a = sdpa(1024, 1);
  a.autocast = true;
  const layer_activations l = layer_activation_bytes(llama2(), a);
  CHECK(l.autocast_weights == bytes_of(404'750'336));
  CHECK(l.attention_input == bytes_of(25'165'824));
  CHECK(l.mlp_input == bytes_of(16'777'216));  // gate and up
  // The norm keeps its fp32 input and fp32 normalised tensor (2 x 4 x 1024 x 4096) and rstd (4 x 1024).
  CHECK(l.attention_norm == bytes_of(33'554'432 + 4096));
  // Full recompute keeps the fp32 layer input.
  a.recomputation = recompute::full;
  CHECK(layer_activation_bytes(llama2(), a).layer_input == bytes_of(16'777'216));
}

TEST_CASE("step: under autocast and full recompute the forward holds autocast's cache of every layer's casts", "[step][amp]") {
  // autocast caches the bf16 cast of each fp32 weight that requires grad until the outermost region exits, after the
  // loss (aten/src/ATen/autocast_mode.cpp cached_cast, torch/amp/autocast_mode.py __exit__). Llama-2-7B: 32 layers of
  // 202,375,168 linear parameters (202,383,360 less two 4096-wide norms), 2 B each: 12,952,010,752 B.
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(1024, 1, recompute::full);
  a.autocast = true;
  const step_estimate e = estimate_step(llama2(), amp, a, step_config{});
  CHECK(e.forward.autocast_cache == bytes_of(12'952'010'752));
  CHECK(e.backward.autocast_cache == bytes_of(0));  // cleared before backward: the recomputed layer keeps its own casts
  CHECK(e.forward.total() - e.forward.autocast_cache ==
        e.forward.resting + e.forward.gradients + e.forward.activations + e.forward.loss + e.forward.blas_workspaces);
  // Without recompute autograd saves the same casts (layer_activations::autocast_weights): nothing more is held.
  activation_config kept = a;
  kept.recomputation = recompute::none;
  CHECK(estimate_step(llama2(), amp, kept, step_config{}).forward.autocast_cache == bytes_of(0));
  // bf16 weights are not cast.
  activation_config bf16 = sdpa(1024, 1, recompute::full);
  CHECK(estimate_step(llama2(), pure_bf16(), bf16, step_config{}).forward.autocast_cache == bytes_of(0));
  // FSDP2 gathers 16-bit parameters: nothing for autocast to cast.
  training_states sharded = amp;
  sharded.dp = 8;
  step_config fsdp{};
  fsdp.fsdp_world = 8;
  CHECK(estimate_step(llama2(), sharded, a, fsdp).forward.autocast_cache == bytes_of(0));
  // LoRA: the frozen base weights are cast at each use and not cached; the fp32 adapters are. Rank 16 on q and v:
  // (4096 x 16 + 16 x 4096) x 2 = 262,144 parameters a layer, x 32 layers x 2 B = 16,777,216 B.
  training_states lora = amp;
  lora.adapt.lora.rank = 16;
  lora.adapt.lora.targets = parse_lora_targets("q_proj,v_proj");
  CHECK(estimate_step(llama2(), lora, a, step_config{}).forward.autocast_cache == bytes_of(16'777'216));
}

TEST_CASE("step: GPT-2's gelu_new keeps five f-sized tensors and a model-dtype softmax", "[step]") {
  // gelu_new as tensor ops: fc1 output, tanh output, 0.5 x, 1 + tanh and the GELU output: 5 x 2 x s b f.
  transformer_config m = find_preset("gpt3-175b").config;
  m.layers = 2;
  m.gelu_tensor_ops = true;
  m.eager_softmax_fp32 = false;
  activation_config a = sdpa(128, 1);
  a.attention = attention_kind::eager;
  const layer_activations l = layer_activation_bytes(m, a);
  CHECK(l.mlp_hidden == bytes_of(5LL * 2 * 128 * m.ffn));
  CHECK(l.attention_scores == bytes_of(2LL * m.heads * 128 * 128));
}

TEST_CASE("step: the verdict compares reserved plus the CUDA context and modules with the card", "[step]") {
  step_config s{};
  // The default modules: 146 MiB, what a fresh process's first step held in 18 of the 21 measured (test_calibration.cpp).
  CHECK(s.cuda_modules == bytes_of(146LL << 20));
  s.cuda_context = bytes_of(1'000);
  s.cuda_modules = bytes_of(20);
  s.reserve_fraction = 0.5;
  const step_estimate e = estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s);
  CHECK(e.reserved.count() == e.peak.count() + e.peak.count() / 2);
  CHECK(e.device_used() == e.reserved + bytes_of(1'020));
  CHECK(verdict_of(e, e.device_used()).fits());
  CHECK(verdict_of(e, e.device_used()).margin() == bytes_of(0));
  CHECK_FALSE(verdict_of(e, e.device_used() - bytes_of(1)).fits());
}

TEST_CASE("step: a verdict is close where its margin, either way, is under 5% of the card", "[step]") {
  // 5% of a 2,000 B card is 100 B: needing 1,901 B leaves 99 B (close), 1,900 B leaves 100 B (not); 2,099 B is 99 B
  // over (close), 2,100 B 100 B over (not).
  CHECK(stated_accuracy == 0.05);
  CHECK(step_verdict{bytes_of(2'000), bytes_of(1'901)}.close());
  CHECK_FALSE(step_verdict{bytes_of(2'000), bytes_of(1'900)}.close());
  CHECK(step_verdict{bytes_of(2'000), bytes_of(2'099)}.close());
  CHECK_FALSE(step_verdict{bytes_of(2'000), bytes_of(2'100)}.close());
  CHECK(step_verdict{bytes_of(2'000), bytes_of(2'000)}.close());
}

TEST_CASE("step: bad step settings throw with the fix named", "[step]") {
  step_config s{};
  s.fsdp_world = -1;
  CHECK_THROWS_AS(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s), std::invalid_argument);
  s = {};
  s.reserve_fraction = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s), Catch::Contains("--reserve-fraction") ||
                                                                                    Catch::Contains("measured on your job"));
  s = {};
  s.cuda_context = bytes_of(-1);
  CHECK_THROWS_WITH(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s), Catch::Contains("--cuda-context"));
  s = {};
  s.cuda_modules = bytes_of(-1);
  CHECK_THROWS_WITH(estimate_step(llama2(), pure_bf16(), sdpa(1024, 1), s), Catch::Contains("pass --cuda-modules such as 146MiB, or 0B"));
  CHECK_THROWS_WITH(parse_optimizer_impl("adamw"), Catch::Contains("foreach"));
}

namespace {
// A job checked by the compiler: Llama-2-7B, pure bf16, full recompute, fused AdamW on an H100.
constexpr step_estimate compile_time_step(recompute r = recompute::full) {
  training_states t{};
  t.recipe = recipe_of(precision::bf16);
  activation_config a{};
  a.seq_len = 2048;
  a.attention = attention_kind::flash;
  a.impl = implementation::hf;
  a.recomputation = r;
  step_config s{};
  s.optimizer = optimizer_impl::fused;
  return estimate_step(preset_config("llama-2-7b"), t, a, s);
}
}  // namespace

TEST_CASE("step: the estimate is constexpr", "[step][static]") {
  static_assert(gpu_models[3].name == "h100-80gb", "gpu_models[3] is the H100 80GB");
  static_assert(verdict_of(compile_time_step(), gpu_models[3].capacity).fits(),
                "Llama-2-7B with fused AdamW and full recompute fits an H100");
  constexpr bytes peak = compile_time_step().peak;
  CHECK(peak == bytes_of(40'430'493'696 + 13'476'831'232 + 16'777'216 + 67'108'864));  // + two 32 MiB cuBLAS workspaces
  // Without recompute the estimate takes its other path (the layer's breakdowns are the stage's, not recomputed ones):
  // evaluated by the compiler it gives every phase what it gives at run time.
  constexpr step_estimate kept = compile_time_step(recompute::none);
  volatile int none = static_cast<int>(recompute::none);  // a value the compiler cannot fold
  const step_estimate run_time = compile_time_step(static_cast<recompute>(none));
  CHECK(kept.peak == run_time.peak);
  CHECK(kept.peak_phase == run_time.peak_phase);
  CHECK(kept.backward.total() == run_time.backward.total());
  CHECK(kept.forward.activations > compile_time_step().forward.activations);  // every layer's tensors, not checkpoints
}

TEST_CASE("DDP's all-reduce buckets hold one copy of the gradients through the whole step", "[step][ddp]") {
  // torch DistributedDataParallel's Reducer allocates its buckets (every gradient, in the parameters' dtype) when it
  // is built; autograd's gradients are copied into them. Llama-2-7B in pure bf16: 6,738,415,616 x 2 B = 13,476,831,232 B.
  const std::int64_t grads = 13'476'831'232;
  step_config single{}, ddp{}, view{};
  ddp.ddp = true;
  view.ddp = true;
  view.gradient_as_bucket_view = true;
  const activation_config a = sdpa(1024, 1, recompute::full);
  const step_estimate e1 = estimate_step(llama2(), pure_bf16(), a, single);
  const step_estimate ed = estimate_step(llama2(), pure_bf16(), a, ddp);
  const step_estimate ev = estimate_step(llama2(), pure_bf16(), a, view);
  // Forward: the buckets exist already (gradients do not, single or DDP).
  CHECK(ed.forward.total().count() - e1.forward.total().count() == grads);
  CHECK(ev.forward.total().count() - e1.forward.total().count() == grads);
  // Optimizer step: the default keeps the gradients and the buckets (2x); as bucket views the gradients are the buckets.
  CHECK(ed.optimizer_step.total().count() - e1.optimizer_step.total().count() == grads);
  CHECK(ev.optimizer_step.total() == e1.optimizer_step.total());
  CHECK(ed.optimizer_step.communication.count() == grads);
  CHECK(ev.optimizer_step.gradients.count() == 0);

  step_config both = ddp;
  both.fsdp_world = 8;
  CHECK_THROWS_WITH(estimate_step(llama2(), pure_bf16(), a, both), Catch::Contains("--ddp or --fsdp"));
  training_states z = pure_bf16();
  z.zero.stage = 2;
  z.dp = 8;
  CHECK_THROWS_WITH(estimate_step(llama2(), z, a, ddp), Catch::Contains("drop --ddp or --zero-stage"));
  step_config view_only{};
  view_only.gradient_as_bucket_view = true;
  CHECK_THROWS_WITH(estimate_step(llama2(), pure_bf16(), a, view_only), Catch::Contains("add --ddp"));
}

TEST_CASE("step: a vision tower's backward, after the decoder's and before the embedding's", "[step][vision]") {
  // Qwen2.5-VL-7B (8,292,166,656 parameters: embedding and lm_head 152064 x 3584 = 544,997,376 each, vision tower
  // 676,550,144 of which the merger 1280 + 5120^2 + 5120 + 5120 x 3584 + 3584 = 44,574,464, the patch embedding
  // 1280 x 1176 = 1,505,280 and 32 blocks of 19,702,200), mixed bf16 (14 B a parameter at rest, 2 B gradients), full
  // recompute, flash_attention_2, fused AdamW; one sequence of 4096 tokens, all of them image tokens: 16,384 patches.
  const transformer_config m = find_preset("qwen2.5-vl-7b").config;
  training_states t{};
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  activation_config a{};
  a.seq_len = 4096;
  a.image_tokens = 4096;
  a.attention = attention_kind::flash_attention_2;
  a.recomputation = recompute::full;
  step_config s{};
  s.optimizer = optimizer_impl::fused;
  const step_estimate e = estimate_step(m, t, a, s);
  // The tower's first block backward: every decoder and head gradient and the merger's (2 B each: all parameters but
  // the embedding and the tower, plus the merger), the tower's checkpoints (32 x 2,560 B a patch) and inputs (7,700 B),
  // one block recomputed whole beside its checkpoint (63,272 B a patch: Qwen2RMSNorm copies its 16-bit input to fp32),
  // dL/d(embedding output) 4096 x 3584 x 2 B waiting beside the
  // tower's two 16,384 x 1280 x 2 B gradients.
  const std::int64_t patches = 16'384;
  CHECK(detail::vision_merger_parameters(m.vision).count() == 44'574'464);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.resting.count() == 14 * 8'292'166'656LL);
  CHECK(e.backward.gradients.count() == 2 * (8'292'166'656LL - 544'997'376 - 676'550'144 + 44'574'464));
  CHECK(e.backward.activations.count() == patches * (32 * 2'560 + 7'700));
  CHECK(e.backward.recomputed.count() == patches * 63'272);
  CHECK(e.backward.flowing.count() == 4096LL * 3584 * 2 + 2LL * patches * 1280 * 2);
  CHECK(e.backward.loss.count() == 0);
  // The end of backward holds the pixel values (16,384 x 1176 x 4 B) beside every gradient.
  a.recomputation = recompute::none;
  const step_estimate plain = estimate_step(m, t, a, s);
  CHECK(plain.forward.activations.count() ==
        first_stage_activations(m, a).total.count() - first_stage_activations(m, a).logits.count());
  CHECK(first_stage_activations(m, a).vision.count() == patches * (32 * 63'272 + 15'364 + 7'700));
  // A frozen tower has no backward: the end decides, every trainable gradient (all parameters but the tower's, 2 B)
  // beside the pixel values (16,384 x 1176 x 4 B); the tower rests in bf16 only (2 B, the rest 14 B).
  t.adapt.freeze_vision = true;
  a.recomputation = recompute::full;
  const step_estimate frozen = estimate_step(m, t, a, s);
  CHECK(first_stage_activations(m, a, {}, t.adapt).vision.count() == patches * 4'704);
  CHECK(frozen.backward.resting.count() == 14 * (8'292'166'656LL - 676'550'144) + 2 * 676'550'144LL);
  CHECK(frozen.backward.gradients.count() == 2 * (8'292'166'656LL - 676'550'144));
  CHECK(frozen.backward.activations.count() == patches * 1176 * 4);
  CHECK(frozen.backward.recomputed.count() == 0);
  CHECK(frozen.backward.flowing.count() == 4096LL * 3584 * 2);
}

namespace {
// A Llama-family model whose MLP is wide beside its vocabulary: hidden 1024, 8 heads of 128 (no GQA), ffn 16384,
// vocabulary 1000, 4 layers; bf16, transformers' code, full recompute, one sequence.
transformer_config wide_mlp() { return detail::llama(1024, 4, 8, 8, 16384, 1000); }
}  // namespace

TEST_CASE("step: a checkpointed layer's forward keeps its MLP's working tensors above the loss's moment", "[step][recompute]") {
  // SDPA at 1024 tokens: H = 2 x 1024 x 1024 = 2,097,152 B, F = 2 x 1024 x 16384 = 33,554,432 B. A checkpointed layer
  // saves nothing; its highest point is the MLP's act(gate), up and their product (3F) beside the residual sum R1 and
  // the norm's output (2H): 104,857,600 B. Beside it: the four layers' checkpoints (4H = 8,388,608), the token ids and
  // the position row each checkpointed call holds (8 x 1024 each), the rotary cos and sin (2 x 1024 x 128 x 2 = 524,288):
  // 8,929,280 B. The loss's moment is lower: with the final norm's and lm_head's inputs (4sbh + 2sbh + 4sb + 2sbh =
  // 8,392,704) and 10 B a logit (10,240,000) plus the labels (8 x 1025 + 8 x 1024), 27,578,376 B.
  const transformer_config m = wide_mlp();
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(1024, 1, recompute::full), step_config{});
  CHECK(e.forward.activations.count() == 8'929'280 + 104'857'600);
  CHECK(e.forward.loss.count() == 0);
  CHECK(e.forward.largest() == "activations");
  // Without recompute the layers' saved tensors are the forward's: the loss's moment holds.
  const step_estimate none = estimate_step(m, pure_bf16(), sdpa(1024, 1), step_config{});
  CHECK(none.forward.loss.count() > 0);
}

TEST_CASE("step: the recomputed layer stands beside its checkpoint unless its first node keeps that tensor", "[step][recompute]") {
  // The wide MLP's backward peaks at its product differentiated: the layer recomputed whole but the product (F), freed
  // with down_proj's node. transformers' RMSNorm keeps x.to(fp32): in bf16 a copy of the input, so the recomputed layer
  // stands whole beside its checkpoint; in fp32 `to` returns x itself, the checkpoint (4 x 1024 x 1024 = 4,194,304 B),
  // counted once (the training-step oracle measures both).
  const transformer_config m = wide_mlp();
  const step_estimate bf16 = estimate_step(m, pure_bf16(), sdpa(1024, 1, recompute::full), step_config{});
  CHECK(bf16.backward.recomputed == layer_activation_bytes(m, sdpa(1024, 1)).total() - bytes_of(33'554'432));
  training_states fp32 = pure_bf16();
  fp32.recipe = recipe_of(precision::fp32);
  activation_config a32 = sdpa(1024, 1, recompute::full), whole32 = sdpa(1024, 1);
  a32.activation_dtype = whole32.activation_dtype = dtype::fp32;
  const step_estimate f32 = estimate_step(m, fp32, a32, step_config{});
  CHECK(f32.backward.recomputed == layer_activation_bytes(m, whole32).total() - bytes_of(67'108'864 + 4'194'304));
}

TEST_CASE("step: eager attention's core differentiated, three fp32 s x s tensors at softmax's node", "[step][recompute]") {
  // 4096 tokens, eager attention: A = 8 heads x 4096^2 = 134,217,728 scores. At softmax's node the residual's gradient
  // and V's (2 x 4096 x 1024 each) wait beside softmax's incoming and outgoing fp32 gradients (8A B): 1,090,519,040 B.
  // The layer recomputed holds its attention half without o_proj's input, P and V: the input norm's fp32 copy, its
  // 16-bit output, its rstd rows (4sbh + 2sbh + 4sb = 25,182,208), q_proj's input, q and k (3 x 8,388,608) and the
  // softmax's fp32 output (4A = 536,870,912): 587,218,944 B. At layer 0 (its layer's 109 MB of gradients outweigh a
  // checkpoint): lm_head's and the final norm's gradients (1000 x 1024 + 1024), the three layers' above (4 x 1024^2 +
  // 3 x 1024 x 16384 + 2 x 1024 each), and of this layer every MLP weight's, the post-attention norm's and o_proj's
  // (3 x 1024 x 16384 + 1024 + 1024^2), at 2 B.
  // On CUDA softmax_backward_cuda_out first forms grad * output (SoftMax.cu), a fourth fp32 s x s tensor: 4A B more
  // (an H200's Llama step, eager, at 2048 tokens: exact with it, −6.9% without).
  const transformer_config m = wide_mlp();
  activation_config a = sdpa(4096, 1, recompute::full);
  a.attention = attention_kind::eager;
  CHECK(estimate_step(m, pure_bf16(), a, step_config{}).backward.flowing.count() == 1'090'519'040 + 536'870'912);
  a.device = device_kind::cpu;  // what the CPU step oracle measures
  const step_estimate e = estimate_step(m, pure_bf16(), a, step_config{});
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing.count() == 1'090'519'040);
  CHECK(e.backward.recomputed.count() == 587'218'944);
  const std::int64_t layer_grads = 2 * (4LL * 1024 * 1024 + 3LL * 1024 * 16384 + 2 * 1024);
  CHECK(e.backward.gradients.count() == 2 * (1000LL * 1024 + 1024) + 3 * layer_grads + 2 * (3LL * 1024 * 16384 + 1024 + 1024 * 1024));
}

namespace {
// A GPT-NeoX (Pythia) layout: LayerNorms, a fused per-head qkv with biases, RoPE over whole heads, a biased GELU MLP, the
// two branches in parallel; hidden 1024, 8 heads of 128, 4 layers, vocabulary 1000 (untied, lm_head without bias).
transformer_config neox_like(std::int64_t ffn) {
  transformer_config m = detail::pythia(1024, 4, 8, 1000);
  m.ffn = ffn;
  return m;
}
}  // namespace

TEST_CASE("step: a non-gated MLP's second linear differentiated beside the recomputed layer", "[step][recompute]") {
  // SDPA at 1024 tokens, full recompute, ffn 16384: H = 2 x 1024 x 1024 = 2,097,152 B, F = 2 x 1024 x 16384 =
  // 33,554,432 B. fc2's AddmmBackward0 makes its input's gradient (F) beside dL/d(layer output) (H): 35,651,584 B, and
  // its weight's and bias's gradients beside the layer recomputed whole; the LayerNorm keeps the layer's input itself,
  // so the checkpoint is counted once. At layer 0 (three layers' gradients outweigh three checkpoints): lm_head
  // (1000 x 1024) and the final norm (2 x 1024): 1,026,048, three layers of qkv 1024 x 3072 + 3072, dense 1024^2 + 1024, fc1
  // 1024 x 16384 + 16384, fc2 16384 x 1024 + 1024 and two norms (4 x 1024): 37,774,336 each, and this layer's fc2
  // weight (16,777,216; its bias's gradient is summed only once the node has freed its input, a lower instant here),
  // at 2 B. The same in sequence (StarCoder2's, GPT-NeoX's use_parallel_residual false).
  // (The family step oracle measures both layouts within 0.02%.)
  // On CUDA fc1's bias gradient, the sum of its [1024, 16384] incoming gradient over the tokens, stages its partial sums
  // (Reduce.cuh: vec 4, a 32 x 4 block, 128 blocks of outputs, 256 values a thread, min(ceil(2112 / 128) = 17, 16) = 16
  // blocks an output): 4 x 16384 x 16 x 128 + 4 x 128 = 134,218,240 B beside fc1's node's H, H and F: fc1's moment tops
  // fc2's there (fc2's own sum, 1024 outputs, stages 8,388,640 B).
  activation_config cpu = sdpa(1024, 1, recompute::full);
  cpu.device = device_kind::cpu;
  for (const bool parallel : {true, false}) {
    transformer_config m = neox_like(16384);
    m.parallel_residual = parallel;
    const step_estimate cuda = estimate_step(m, pure_bf16(), sdpa(1024, 1, recompute::full), step_config{});
    CHECK(cuda.backward.flowing.count() == 2 * 2'097'152 + 33'554'432 + 134'218'240);
    const step_estimate e = estimate_step(m, pure_bf16(), cpu, step_config{});
    CHECK(e.backward.flowing.count() == 2'097'152 + 33'554'432);
    CHECK(e.backward.gradients.count() == 2 * (1'026'048 + 3 * 37'774'336LL + 16'777'216));
    activation_config whole = sdpa(1024, 1);
    whole.device = device_kind::cpu;
    CHECK(e.backward.recomputed == layer_activation_bytes(m, whole).total() - bytes_of(2'097'152));
  }
}

TEST_CASE("step: OLMo-2's MLP reads the residual stream, so up_proj's input gradient joins the residual's", "[step][recompute]") {
  // The CPU step oracle's seed-203 shape: OLMo-2's layout (post-branch norms only), hidden 256, 4 heads with 2 KV heads,
  // ffn 2048 (8 x hidden), 2 layers, vocabulary 1000, 32 tokens x 3, eager attention, full recompute, bf16 on the CPU.
  // The backward peaks at gate_proj's node (the MLP's last): beside it wait dL/d(gate output), c sb f = 2 x 96 x 2048
  // = 393,216 B, the input gradient it makes, c sbh = 2 x 96 x 256 = 49,152 B, and the residual's gradient, into which
  // up_proj's input gradient has been added in place (both are gradients of the residual stream, the MLP's input,
  // gathered in one input buffer): 393,216 + 2 x 49,152 = 491,520 B. A Llama layer's MLP reads its norm's output, whose
  // buffer holds up_proj's gradient apart from the residual's: three c sbh there. (Measured: zeromem was 48,624 B
  // above the oracle's 8,821,648 B backward with three; 528 B below it with two.)
  transformer_config m = detail::olmo2(256, 2, 4, 2048);
  m.kv_heads = 2;
  m.vocab = 1000;
  CHECK(oracle_step(m, 32, 3, recompute::full).backward.flowing.count() == 393'216 + 2 * 49'152);
}

TEST_CASE("step: the attention's input linear differentiated while it makes its weight's gradient, its input still kept", "[step][recompute]") {
  // The family step oracle's random GPT-NeoX step (seed 6): hidden 256, 4 heads of 64, ffn 256, 2 layers, vocabulary
  // 500, 32 tokens x 3, in parallel, full recompute, eager, bf16 on the CPU. Its backward peaks in layer 0's
  // query_key_value node, at the aten::mm of the weight's gradient: dL/d(qkv output) c sb 3h = 2 x 96 x 768 = 147,456 B,
  // the input gradient just made (c sbh = 49,152) and the residual's (49,152) flow; the recomputed layer keeps the
  // LayerNorm's statistics (2 x 96 x 2 = 384, bf16 on the CPU; its input is the checkpoint) and the node's input, the
  // norm's output (49,152), freed right after; every gradient but the embedding's (500 x 256) and this bias's (768)
  // exists: 2 x (1,048,064 - 128,000 - 768) = 1,838,592 B. (Measured 2,197,384 B above the resting states; this
  // moment 2,198,400 B, +0.05%; the end of backward, 2,145,280 B, had been taken: -2.37%.)
  transformer_config m = detail::pythia(256, 2, 4, 500);
  m.ffn = 256;
  m.rotary_dims = 64;
  const step_estimate e = oracle_step(m, 32, 3, recompute::full);
  CHECK(e.backward.flowing.count() == 147'456 + 2 * 49'152);
  CHECK(e.backward.recomputed.count() == 384 + 49'152);
  CHECK(e.backward.gradients.count() == 1'838'592);
  // On CUDA the bias's sum over 96 tokens stages nothing (Reduce.cuh: blocks of 32 x 4 threads, 96 / 4 = 24 values a
  // thread, under 256: each block reduces its own outputs), so the same instant is the moment, with the LayerNorm's
  // statistics in fp32 (768 B).
  const step_estimate cuda = oracle_step(m, 32, 3, recompute::full, device_kind::cuda);
  CHECK(cuda.backward.recomputed.count() == 768 + 49'152);
  CHECK(cuda.backward.flowing.count() == 147'456 + 2 * 49'152);
}

TEST_CASE("step: an attention input linear without a bias is differentiated with its input kept, layer 0's rotary tables gone", "[step]") {
  // The step oracle's random OLMo step (seed 211): LayerNorm without weights over an fp32 copy of its input, fp32 RoPE,
  // hidden 512, 8 heads of 64 over 1 key/value head, SwiGLU ffn 2048, 1 layer, vocabulary 500 (untied), 32 tokens x 3,
  // eager, bf16 on the CPU, no recompute. Its weights are large beside its 96 tokens, so the backward peaks in q_proj's
  // node (the last of q, k, v), at the aten::mm after its weight's gradient, with every gradient but the embedding's
  // made: lm_head 500 x 512, gate, up, down 3 x 512 x 2048, o_proj and q_proj 2 x 512^2, k_proj and v_proj 2 x 512 x
  // 64, at 2 B: 7,983,104 B. Flowing: dL/d(q_proj output) c sb heads d = 2 x 96 x 512 = 98,304, k's and v's input
  // gradients summed in the norm output's buffer, the one q_proj made and the residual's (3 x 98,304). Kept: the
  // norm's fp32 input (4 x 96 x 512 = 196,608) and statistics (2 x 4 x 96 = 768), q_proj's input, the norm's output
  // (98,304), the token ids (8 x 96 = 768); the fp32 rotary tables (2 x 4 x 32 x 64 = 16,384) went with the RoPE nodes
  // before. (Measured 8,672,776 B above the resting states; this moment 8,672,768 B; the o_proj moment had been
  // taken: -0.37%.)
  transformer_config m = detail::llama(512, 1, 8, 1, 2048, 500);
  m.norm = norm_kind::layernorm;
  m.norm_affine = false;
  m.norm_input_fp32 = m.rope_fp32 = true;
  const step_estimate e = oracle_step(m, 32, 3, recompute::none);
  CHECK(e.backward.gradients.count() == 7'983'104);
  CHECK(e.backward.flowing.count() == 98'304 + 3 * 98'304);
  CHECK(e.backward.activations.count() == 196'608 + 768 + 98'304 + 768);
}

TEST_CASE("step: under FSDP2 the attention input's node is read where the layer above is still reducing", "[step][fsdp]") {
  // Pythia-6.9B (GPT-NeoX: biased query_key_value, 4,096 wide, 32 heads, ffn 16,384) on rank 0 of 8 FSDP2 ranks
  // (FULL_SHARD, fp32 parameters, bf16 compute, fp32 reduce), 1,024 tokens. Below layer 31 the layer above's fp32
  // reduce-scatter input stays alive through the next layer's backward: its 201,379,840 parameters (query_key_value
  // 4,096 x 12,288 + 12,288, dense 4,096^2 + 4,096, the MLP's 2 x 4,096 x 16,384 + 16,384 + 4,096, two LayerNorms
  // 2 x 8,192) x 4 B = 805,519,360 B. The backward's peak is query_key_value's node in such a layer, once it has freed
  // its input: beside the residual's gradient (1,024 x 4,096 x 2 B = 8,388,608 B) wait dL/d(qkv output) (1,024 x 12,288
  // x 2 B = 25,165,824 B) and the input gradient it made (8,388,608 B), and its bias's sum stages on CUDA: 4 B x 12,288
  // outputs x 16 CTAs x 32 lanes x 4 (vectorized) + 4 B x 96 blocks = 100,663,680 B on an H100's 132 x 2,048 threads
  // (core/cuda_reduce.hpp). Read at layers 31 and 0 only, that moment had been missed.
  training_states t{};
  t.recipe = recipe_of(precision::mixed_bf16);
  const step_estimate e = fsdp2_rank(find_preset("pythia-6.9b").config, t, sdpa(1024, 1), 8);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.communication == bytes_of(805'519'360));
  CHECK(e.backward.flowing == bytes_of(8'388'608 + 25'165'824 + 8'388'608 + 100'663'680));
}

TEST_CASE("step: an attention input linear without a bias stages no sum on CUDA", "[step]") {
  // Phi-3's layout (fused qkv_proj, no biases) cut to 1 layer, hidden 3,072, 32 heads of 96, ffn 1,024, vocabulary 500
  // (untied), 1,024 tokens, pure bf16 AdamW (foreach) on an H100, no recompute. Only a bias's gradient is a sum over the
  // tokens (derivatives.yaml: addmm's bias; mm has none), so qkv_proj's node holds no CUDA reduction staging (75,497,760
  // B at these sizes had been counted, which put the backward at 592,015,648 B, above the step's real peak). Parameters:
  // 2 x 500 x 3,072 tables, qkv 3,072 x 9,216, o_proj 3,072^2, gate_up 3,072 x 2,048, down 1,024 x 3,072, three norms of
  // 3,072: 50,267,136. The peak is the optimizer step: weights and two bf16 moments (6 B each) 301,602,816 B, gradients
  // 100,534,272 B, foreach's parameter-sized temporaries 100,534,272 B and two 32 MiB cuBLAS workspaces, 569,780,224 B.
  transformer_config m = detail::phi3_mini(2047);
  m.ffn = 1024;
  m.layers = 1;
  m.vocab = 500;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(1024, 1), step_config{});
  CHECK(e.peak_phase == step_phase::optimizer_step);
  CHECK(e.peak == bytes_of(301'602'816 + 100'534'272 + 100'534'272 + 67'108'864));
  CHECK(e.backward.total() < e.peak);
}

TEST_CASE("step: a biased first linear is differentiated with its weight's gradient made and its input kept, its bias's not yet made", "[step][recompute]") {
  // The family step oracle's random StarCoder2 step (seed 17): LayerNorms, biases on every linear, GELU MLP, hidden 128,
  // 4 heads of 32 over 2 key/value heads, ffn 1024, 1 layer, vocabulary 500 (tied), 64 tokens, full recompute, eager,
  // bf16 on the CPU. The backward peaks in c_fc's AddmmBackward0 at the mm of its weight's gradient: its input, the
  // norm's output (c sbh = 16,384 B), is freed after it and only then is the bias's gradient (2,048 B) summed. Made:
  // the tied embedding's gradient from lm_head (500 x 128), the final norm's (256), c_proj's (1024 x 128 + 128) and
  // c_fc's weight (128 x 1024), at 2 B: 653,056 B. Flowing: dL/d(c_fc output) c sb ffn = 131,072, the input gradient
  // made and the residual's (2 x 16,384). (Measured 1,064,208 B above the resting states; this moment 1,064,192 B;
  // with the bias counted as made beside the kept input, +0.19%.)
  transformer_config m = detail::llama(128, 1, 4, 2, 1024, 500);
  m.mlp = mlp_kind::gelu;
  m.norm = norm_kind::layernorm;
  m.qkv_bias = m.attention_out_bias = m.mlp_bias = m.tied_embeddings = true;
  m.rotary_dims = 32;
  const step_estimate e = oracle_step(m, 64, 1, recompute::full);
  CHECK(e.backward.gradients.count() == 2 * (64'000 + 256 + 1024 * 128 + 128 + 128 * 1024));
  CHECK(e.backward.flowing.count() == 131'072 + 2 * 16'384);
  // The whole moment against the oracle's measurement (1,064,208 B above the resting states; 16 B of scalars apart).
  CHECK(std::llabs(e.backward.total().count() - e.forward.resting.count() - 1'064'208) <= 16);
}

TEST_CASE("step: behind one norm shared by both branches the MLP's first linear is differentiated as behind its own", "[step]") {
  // The family step oracle's random StableLM step in parallel (seed 4): one LayerNorm for both branches, hidden 512, 8
  // heads of 64, SwiGLU with ffn 4096, biased q, k, v, 2 layers, vocabulary 500 (untied), 64 tokens x 3, eager, bf16 on
  // the CPU, no recompute. The MLP branch is differentiated first; at gate_proj's node in layer 0 wait dL/d(gate output)
  // c sb f = 2 x 192 x 4096 = 1,572,864 B, the input gradient it makes, up_proj's in the shared norm output's buffer
  // and the residual's (3 x 2 x 192 x 512 = 589,824), beside lm_head's and the final norm's gradients (256,000 +
  // 1,024), layer 1's (shared norm 1,024, q, k, v 3 x (512^2 + 512), o_proj 512^2, gate, up, down 3 x 512 x 4096:
  // 7,342,592) and layer 0's MLP (6,291,456), at 2 B: 27,782,144 B. (Measured 31,719,952 B above the resting states
  // at that aten::mm, this moment 31,720,704 B; the end of backward had been taken: -2.69%.)
  transformer_config m = detail::llama(512, 2, 8, 8, 4096, 500);
  m.norm = norm_kind::layernorm;
  m.qkv_bias = m.parallel_residual = m.shared_layer_norm = true;
  m.rotary_dims = 16;
  const step_estimate e = oracle_step(m, 64, 3, recompute::none);
  CHECK(e.backward.flowing.count() == 1'572'864 + 589'824);
  CHECK(e.backward.gradients.count() == 27'782'144);
}

TEST_CASE("step: a checkpointed layer is recomputed without config.json's KV cache", "[step][recompute]") {
  // transformers drops the cache under gradient checkpointing (modeling_layers.py GradientCheckpointingLayer.__call__:
  // use_cache=False, past_key_values=None), so a layer's recomputation keeps what it keeps with use_cache false. Without
  // checkpointing the cache copies K and V, which attention then keeps: GPT-2 (c_attn's q, k, v views of one output),
  // hidden 256, 128 tokens x 2, bf16: 2 x 2 x 256 x 256 = 262,144 B more a layer.
  transformer_config cached = gpt2_layout(256, 2, 4, 1024, 500, 128, "gelu_new"), uncached = cached;
  cached.use_cache = true;
  CHECK((layer_activation_bytes(cached, sdpa(128, 2)).total() - layer_activation_bytes(uncached, sdpa(128, 2)).total()).count() == 262'144);
  const step_estimate with_cache = estimate_step(cached, pure_bf16(), sdpa(128, 2, recompute::full), step_config{});
  const step_estimate without = estimate_step(uncached, pure_bf16(), sdpa(128, 2, recompute::full), step_config{});
  CHECK(with_cache.backward.recomputed == without.backward.recomputed);
  CHECK(with_cache.backward.total() == without.backward.total());
  CHECK(with_cache.forward.total() == without.forward.total());
}

TEST_CASE("step: a biased second linear's node is read at two instants, its input kept or its bias's sum staged", "[step][recompute]") {
  // An H200 step (tests/data/calibration random-20261201-032): GPT-2's config.json with its defaults (dropout 0.1 on
  // the embeddings, the attention and both residual branches; use_cache true), hidden 4096, 6 layers, 32 heads, n_inner
  // 8192, gelu_new, vocabulary 1024, 1024 positions; 1024 tokens x 8, bf16, SDPA, full recompute, AdamW (foreach), the
  // process's cuBLAS workspaces held before the step. Measured backward peak: 7,913,859,072 B. sbh = 33,554,432,
  // sb ffn = 67,108,864. Its moment is layer 0's gelu_new product node:
  //  - resting: 813,973,504 parameters x (2 weights + 4 AdamW states) = 4,883,841,024 B;
  //  - gradients: layers 1-5 (5 x 134,262,784), layer 0's c_proj (8192 x 4096 + 4096), ln_f (8192) and the tied table's
  //    from lm_head, waiting (1024 x 4096), at 2 B: 1,418,149,888 B;
  //  - below layer 0: the token ids (8 sb = 65,536), the embedding's dropout mask (sbh = 33,554,432), the checkpoint
  //    (2 sbh = 67,108,864) and cache_position (8 x 1024): 100,737,024 B;
  //  - layer 0 recomputed without a cache: ln_1's statistics (65,536), c_attn's input (67,108,864), its q, k, v output
  //    (201,326,592), the log-sum-exp (32 x 8192 x 4 = 1,048,576), c_proj's input (67,108,864), the attention's residual
  //    mask (33,554,432), ln_2's input and statistics (67,174,400), c_fc's input (67,108,864), and gelu_new's x, tanh,
  //    0.5 x and 1 + tanh (4 x 134,217,728); its output and the MLP's mask freed by their nodes: 1,041,367,040 B;
  //  - flowing: dL/d(layer output), the product's incoming gradient and the two it makes: 67,108,864 + 3 x 134,217,728.
  // c_proj's node before it is below: at (A) its weight's gradient made beside its input (134,217,728), at (B) that
  // input freed and the bias's sum staged (138,412,160 B, core/cuda_reduce.hpp). Counting both at once read
  // 7,985,160,320 B (+0.90%); the cache's K and V copies in the recomputed layer, +2.60% before that.
  const transformer_config m = parse_hf_config(R"({"model_type": "gpt2", "n_embd": 4096, "n_layer": 6, "n_head": 32, "n_inner": 8192,
                                                  "n_positions": 1024, "vocab_size": 1024, "activation_function": "gelu_new", "use_cache": true})");
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(1024, 8, recompute::full), s);
  CHECK(e.backward.resting.count() == 4'883'841'024);
  CHECK(e.backward.gradients.count() == 2 * (5 * 134'262'784LL + 33'558'528 + 8192 + 4'194'304));
  CHECK(e.backward.activations.count() == 65'536 + 33'554'432 + 67'108'864 + 8192);
  CHECK(e.backward.recomputed.count() == 65'536 + 67'108'864 + 201'326'592 + 1'048'576 + 67'108'864 + 33'554'432 + 67'174'400 +
                                             67'108'864 + 4 * 134'217'728LL);
  CHECK(e.backward.flowing.count() == 67'108'864 + 3 * 134'217'728LL);
  CHECK(e.backward.total().count() == 7'913'857'024);  // measured 7,913,859,072 (-0.00003%)
}

TEST_CASE("step: GELU written as tensor ops ends with a product, differentiated like a gated MLP's", "[step][recompute]") {
  // gelu_new (and gelu_fast): 0.5 x * (1 + tanh(...)). After fc2's node its saved input, the GELU's output (F), is freed
  // and the product's MulBackward0 makes two F-sized gradients beside its incoming one: dL/d(layer output) H + 3F =
  // 2,097,152 + 3 x 33,554,432 = 102,760,448 B, above fc2's own moment (H + F beside that F). The gradients as at fc2's
  // node: 2 x (1,026,048 + 3 x 37,774,336 + 16,778,240) B; the layer recomputed but the checkpoint (H) and fc2's input.
  // (The family step oracle measures gelu_new and gelu_fast under recompute exactly; −5.0% / −14.8% before.)
  for (const bool fast : {false, true}) {
    transformer_config m = neox_like(16384);
    (fast ? m.gelu_fast_ops : m.gelu_tensor_ops) = true;
    const step_estimate e = estimate_step(m, pure_bf16(), sdpa(1024, 1, recompute::full), step_config{});
    CHECK(e.backward.flowing.count() == 2'097'152 + 3 * 33'554'432LL);
    CHECK(e.backward.gradients.count() == 2 * (1'026'048 + 3 * 37'774'336LL + 16'778'240));
    CHECK(e.backward.recomputed == layer_activation_bytes(m, sdpa(1024, 1)).total() - bytes_of(2'097'152 + 33'554'432));
  }
}

TEST_CASE("step: under autocast the walk holds fp32 residual gradients, gelu_new's fp32 product and the weight casts", "[step][recompute][amp]") {
  // The same layers under autocast (fp32 weights), on the CPU (no bias staging). The residual stream is fp32, so its
  // gradient is 4 x 1024 x 1024 = 4,194,304 B. gelu_new's product is fp32 (pow runs in fp32): its MulBackward0 holds the
  // fp32 gradient fc2's cast hands back and makes two fp32 gradients, the one of 0.5 x cast to 16 bits beside them:
  // (4 + 4 + 4 + 2) x 1024 x 16384 = 234,881,024 B. The branches are parallel (attn + mlp, then + residual): their
  // sum's gradient is one 16-bit cast of the residual's (2 x 1024 x 1024 = 2,097,152 B), which waits in the attention
  // branch's input buffer through the MLP's nodes. Gradients fp32: 4 x (1,026,048 + 3 x 37,774,336 + 16,778,240). The
  // layer recomputed but its fp32 checkpoint (4,194,304), fc2's saved 16-bit cast of the product (33,554,432) and fc2's
  // 16-bit weight cast, freed with its node: 2 x (16384 x 1024 + 1024) = 33,556,480 B.
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(1024, 1, recompute::full);
  a.autocast = true;
  a.device = device_kind::cpu;
  transformer_config m = neox_like(16384);
  m.gelu_tensor_ops = true;
  const step_estimate e = estimate_step(m, amp, a, step_config{});
  CHECK(e.backward.flowing.count() == 4'194'304 + 2'097'152 + 234'881'024);
  CHECK(e.backward.gradients.count() == 4 * (1'026'048 + 3 * 37'774'336LL + 16'778'240));
  activation_config whole = a;
  whole.recomputation = recompute::none;
  CHECK(e.backward.recomputed == layer_activation_bytes(m, whole).total() - bytes_of(4'194'304 + 33'554'432 + 33'556'480));
  // gelu_fast has no pow: its product stays 16-bit, and its node (the residual's 4,194,304 B, the cast 2,097,152 B and
  // 3 x 33,554,432 B, the product and fc2's cast gone, fc2's fp32 gradients made) is above fc2's, where the weight's
  // gradient is still its cast's, 16-bit (with fc2's fp32 gradients the two tied).
  m.gelu_tensor_ops = false;
  m.gelu_fast_ops = true;
  CHECK(estimate_step(m, amp, a, step_config{}).backward.flowing.count() == 4'194'304 + 2'097'152 + 3 * 33'554'432);
}

TEST_CASE("step: under autocast a parallel layer's attention branch waits with its 16-bit cast of the residual's gradient", "[step][amp]") {
  // An H200 step (random-20261130-048: Phi, hidden 2048, 32 heads, 2 KV heads, ffn 4096, 2 layers, 1,024-token
  // vocabulary, resid_pdrop 0.1, AMP, SDPA, 2048 x 4 tokens, no recompute) peaks in backward at layer 1's gelu_new
  // product node; sbh = 8192 x 2048 = 16,777,216, sb ffn = 8192 x 4096 = 33,554,432. PhiDecoderLayer sums
  // attn + mlp (both 16-bit) before adding the fp32 residual: that add's node hands the sum a 16-bit cast of the fp32
  // gradient (engine.cpp validate_outputs), and the sum's node passes that one tensor to both branches. The MLP branch
  // runs first; the attention's dropout node holds the cast in its input buffer until then. At the product's node:
  // the residual's fp32 gradient 4 sbh, the cast 2 sbh, and the product's fp32 incoming and two fp32 gradients with
  // one 16-bit cast, (4 + 4 + 4 + 2) sb ffn: 67,108,864 + 33,554,432 + 469,762,048 = 570,425,344 B. Measured
  // 2,592,708,608 B; zeromem read 2,559,187,968 B (-1.29%) without the cast, 33,520,640 B short.
  const transformer_config phi = parse_hf_config(R"({"model_type": "phi", "hidden_size": 2048, "num_attention_heads": 32,
      "num_key_value_heads": 2, "intermediate_size": 4096, "num_hidden_layers": 2, "vocab_size": 1024, "hidden_act": "gelu_new",
      "max_position_embeddings": 2048, "partial_rotary_factor": 0.25, "resid_pdrop": 0.1, "embd_pdrop": 0.0,
      "attention_dropout": 0.0, "tie_word_embeddings": false, "use_cache": false})");
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  amp.optimizer.kind = optimizer_kind::sgd;
  activation_config a = sdpa(2048, 4);
  a.autocast = true;
  const step_estimate e = estimate_step(phi, amp, a, step_config{});
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing.count() == 570'425'344);
  // The other two layouts, on the layers of the test above (GPT-NeoX's, exact GELU: fc2's node is the MLP's highest)
  // at 1024 tokens, full recompute, CPU. fc2's node makes its weight cast's 16-bit gradient; the cast's own node, after
  // fc2's input, its cast and its incoming gradient are freed, makes the fp32 one: 2 x 1024 x 16384 more against
  // 2 x 1024 x 16384 + 2 x 1024 x 1024 less, below.
  activation_config cpu = sdpa(1024, 1, recompute::full);
  cpu.autocast = true;
  cpu.device = device_kind::cpu;
  transformer_config neox = neox_like(16384);
  // StableLM's residual + attn + mlp (residual_added_first): the add of the residual to the attention's output runs
  // first and casts for the attention; the last add casts for the MLP, fc2's incoming gradient. At fc2's node the
  // residual's 4 x 1024 x 1024 = 4,194,304 B, two casts of 2,097,152 B and fc2's input gradient, 2 x 1024 x 16384 =
  // 33,554,432 B.
  neox.residual_added_first = true;
  CHECK(estimate_step(neox, amp, cpu, step_config{}).backward.flowing.count() == 4'194'304 + 2 * 2'097'152 + 33'554'432);
  // In sequence (x + attn, then + mlp) the MLP's cast is fc2's incoming gradient and nothing waits for the attention:
  // 4,194,304 + 2,097,152 + 33,554,432 B at fc2's node.
  neox.residual_added_first = neox.parallel_residual = false;
  CHECK(estimate_step(neox, amp, cpu, step_config{}).backward.flowing.count() == 4'194'304 + 2'097'152 + 33'554'432);
}

TEST_CASE("step: under autocast and full recompute the last checkpointed layer's eager softmax holds its fp32 input and output", "[step][recompute][amp]") {
  // An H200 step (random-20261127-021: OPT with its norms after the residual adds, hidden 2048, 16 heads, ffn 4096,
  // 3 layers, 1,024-token vocabulary, AMP, eager, full recompute, 2048 x 4 tokens). sbh = 16,777,216, A = 16 x 2048^2 x 4
  // = 268,435,456 scores. Under autocast QK^T is 16-bit, but the model's additive mask is fp32 and add promotes; softmax
  // runs in fp32: its fp32 input and output, 8 A. OPT's query is not rotated, so it is 16-bit, and
  // `softmax(...).to(query.dtype)` makes its 16-bit copy before attn_weights lets go of the fp32 input: 2 A more,
  // 10 A = 2,684,354,560 B. Beside them:
  //  - the stage without its output layer: three fp32 checkpoints 3 x 4 sbh = 201,326,592, the token ids and OPT's
  //    position ids 2 x 8 x 8192 = 131,072, and what each checkpointed call holds: the fp32 mask 4 x 4 x 2048^2 =
  //    67,108,864, position_ids and cache_position 8 x 8192 + 8 x 2048 = 81,920;
  //  - OPTDecoder's fp32 inputs_embeds and pos_embeds, 2 x 4 sbh = 134,217,728, and its fp32 mask of ones, 4 x 8192 =
  //    32,768;
  //  - q, k and v, 3 x 2 sbh = 100,663,296 (attention reads the layer input itself: no norm output).
  // The weight casts cached by then: two whole layers, 2 x 2 x (4 x (2048^2 + 2048) + 2 x 2048 x 4096 + 4096 + 2048) =
  // 134,275,072 B, and the last layer's q, k and v, 2 x 3 x (2048^2 + 2048) = 25,178,112 B; its out_proj, fc1 and fc2
  // are cast after its attention. With the resting states, fp32 weights and AdamW's two fp32 moments of the 107,026,432
  // parameters the H200 counted, 12 x 107,026,432 = 1,284,317,184 B: 4,631,687,168 B, as measured to the byte. The
  // forward read -58.8% at the loss's moment before this moment, -10.7% with 8 A beside the whole cache.
  const transformer_config opt = parse_hf_config(R"({"model_type": "opt", "hidden_size": 2048, "num_hidden_layers": 3,
      "num_attention_heads": 16, "ffn_dim": 4096, "vocab_size": 1024, "max_position_embeddings": 2048, "do_layer_norm_before": false,
      "word_embed_proj_dim": 2048, "dropout": 0.1, "attention_dropout": 0.0, "activation_function": "relu", "use_cache": false})");
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(2048, 4, recompute::full);
  a.attention = attention_kind::eager;
  a.autocast = true;
  const step_estimate e = estimate_step(opt, amp, a, step_config{});
  CHECK(e.forward.activations.count() == 201'326'592 + 131'072 + 67'108'864 + 81'920 + 134'217'728 + 32'768 + 100'663'296 + 2'684'354'560LL);
  CHECK(e.forward.autocast_cache.count() == 134'275'072 + 25'178'112);
  CHECK(e.forward.loss.count() == 0);
  CHECK(e.forward.resting.count() == 12 * 107'026'432LL);
  // The measured peak is above a baseline that held the process's cuBLAS workspaces already: the total without them.
  CHECK((e.forward.total() - e.forward.blas_workspaces).count() == 4'631'687'168LL);
  // SDPA computes no s x s scores: the forward keeps its moment at the loss.
  a.attention = attention_kind::flash;
  CHECK(estimate_step(opt, amp, a, step_config{}).forward.loss.count() > 0);
}

TEST_CASE("step: under autocast eager attention's core differentiated keeps the attention's weight casts but o_proj's", "[step][recompute][amp]") {
  // wide_mlp's layers under autocast, 4096 tokens, eager, on the CPU: sbh = 4,194,304, A = 8 x 4096^2 = 134,217,728.
  // At softmax's node the fp32 residual gradient (4 sbh), V's 16-bit one (2 sbh) and softmax's two fp32 gradients (8A):
  // 1,098,907,648 B. The layer recomputed holds the input norm's fp32 input and normalised tensor and its rstd
  // (8 sbh + 4 sb), the three 16-bit casts of its output q, k and v read (6 sbh), the 16-bit q and k QK^T keeps (4 sbh),
  // softmax's fp32 output (4A; P's 16-bit cast went with P @ V's node), and q, k and v's 16-bit weight casts
  // (3 x 2 x 1024^2; o_proj's went with its node), the fp32 checkpoint, which the norm keeps itself, counted once
  // (- 4 sbh): 14 x 4,194,304 + 16,384 + 536,870,912 + 6,291,456 = 601,899,008 B. Gradients at layer 0 in fp32:
  // 4 x (1000 x 1024 + 1024 + 3 x 54,528,000 + 3 x 1024 x 16384 + 1024 + 1024^2).
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(4096, 1, recompute::full);
  a.attention = attention_kind::eager;
  a.autocast = true;
  a.device = device_kind::cpu;
  const step_estimate e = estimate_step(wide_mlp(), amp, a, step_config{});
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing.count() == 1'098'907'648);
  CHECK(e.backward.recomputed.count() == 601'899'008);
  CHECK(e.backward.gradients.count() == 4 * (1000LL * 1024 + 1024 + 3 * 54'528'000LL + 3LL * 1024 * 16384 + 1024 + 1024 * 1024));
}

TEST_CASE("step: a biased attention input linear's node stages its bias gradient's sum on CUDA", "[step][recompute]") {
  // The H200's GPT-NeoX step (random-20261128-020): hidden 512, 8 heads of 64, ffn 512, 8 layers, vocabulary 1024,
  // 2048 tokens, bf16, full recompute. At layer 0's fused query_key_value node the bias gradient, the sum of the
  // [2048, 1536] incoming gradient over the tokens, stages in a 25,165,872 B buffer (the trace's block sizes,
  // 25,165,824 + 48) after the node has made its input's gradient and freed its saved input; beside it the residual's
  // gradient and the input gradient (2 x 2048 x 512 each) and the incoming one (2 x 2048 x 1536): 35,651,632 B.
  // Gradients: lm_head and the final norm (1024 x 512 + 1024) and eight layers of qkv 512 x 1536 + 1536, dense, fc1 and
  // fc2 512 x 512 + 512 each and four norm vectors of 512: 1,577,984, at 2 B (the input norm's 2,048 B among them).
  // The layer's recomputed tensors left: the input LayerNorm's mean and rstd (2 x 4 x 2048); its input is the checkpoint.
  transformer_config m = detail::pythia(512, 8, 8, 1024);
  m.ffn = 512;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(2048, 1, recompute::full), step_config{});
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing.count() == 35'651'632);
  CHECK(e.backward.gradients.count() == 2 * (1024LL * 512 + 1024 + 8 * 1'577'984LL));
  CHECK(e.backward.recomputed.count() == 16'384);
}

TEST_CASE("step: eager attention's core in LayerNorm layers, in parallel and behind one shared norm", "[step][recompute]") {
  // 4096 tokens, eager, full recompute, ffn 4096: A = 8 x 4096^2 = 134,217,728 scores. At softmax's node the residual's
  // gradient and V's (2 x 4096 x 1024 = 8,388,608 B each) wait beside the fp32 gradients (8A B): 1,090,519,040 B. The
  // MLP branch, made after attention, was differentiated first: at layer 0 the gradients of lm_head and the final norm
  // (1,026,048), three layers of 12,596,224 (qkv 3,148,800, dense 1,049,600, fc1 4,198,400, fc2 4,195,328, norms
  // 4,096) and this layer's fc1, fc2, post_attention_layernorm and dense (4,198,400 + 4,195,328 + 2,048 + 1,049,600),
  // at 2 B. One norm shared by both branches (Phi) is differentiated after attention: its gradients are not there yet
  // (and each layer has 2,048 parameters fewer), and the MLP branch's gradient of its output (8,388,608 B) waits for it.
  activation_config a = sdpa(4096, 1, recompute::full);
  a.attention = attention_kind::eager;
  const transformer_config neox = neox_like(4096);
  CHECK(estimate_step(neox, pure_bf16(), a, step_config{}).backward.flowing.count() == 1'090'519'040 + 536'870'912);  // CUDA's grad * output
  a.device = device_kind::cpu;  // the CPU step oracle's
  const step_estimate e = estimate_step(neox, pure_bf16(), a, step_config{});
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing.count() == 1'090'519'040);
  CHECK(e.backward.gradients.count() == 2 * (1'026'048 + 3 * 12'596'224LL + 4'198'400 + 4'195'328 + 2'048 + 1'049'600));
  transformer_config phi = neox;
  phi.shared_layer_norm = true;
  phi.fused_qkv = phi.qkv_per_head = false;  // Phi's separate q, k, v (the same parameters)
  const step_estimate shared = estimate_step(phi, pure_bf16(), a, step_config{});
  CHECK(shared.backward.flowing.count() == 1'090'519'040 + 8'388'608);
  CHECK(shared.backward.gradients.count() == 2 * (1'026'048 + 3 * 12'594'176LL + 4'198'400 + 4'195'328 + 1'049'600));
  // GPT-2's fused qkv without RoPE leaves Q and K views of the projection's output, which QK^T keeps after V's node has
  // run: the core is walked there too, the same gradients flowing and made (V's node frees nothing of the output; the
  // GPT-2 case above writes out what stays).
  transformer_config learned = neox;
  learned.positions = position_kind::learned;
  learned.rotary_dims = 0;
  learned.max_positions = 4096;
  const step_estimate views = estimate_step(learned, pure_bf16(), a, step_config{});
  CHECK(views.backward.flowing.count() == 1'090'519'040);
  CHECK(views.backward.gradients == e.backward.gradients);
}

TEST_CASE("step: transformers 5's experts are two 3D parameters a layer, stepped and sharded whole", "[step][moe]") {
  // Mixtral-8x7B's shape on two layers (the H200 calibration config): per layer q 4096 x 4096, k and v 1024 x 4096,
  // o 4096 x 4096, the router [8, 4096] = 32,768, gate_up_proj [8, 2 x 14336, 4096] = 939,524,096 and down_proj
  // [8, 4096, 14336] = 469,762,048, two norms of 4096; embedding and lm_head 32000 x 4096 = 131,072,000, the final norm
  // 4096: 3,164,688,384 parameters (the calibration's count).
  transformer_config m = find_preset("mixtral-8x7b").config;
  m.layers = 2;
  REQUIRE(count_parameters(m).total.count() == 3'164'688'384);
  // DeepSpeed's largest_layer sums a module's own parameters: the experts module holds both, 1,409,286,144.
  CHECK(count_parameters(m).largest_layer.count() == 1'409'286'144);
  CHECK(count_parameters(m).largest_tensor.count() == 939'524'096);
  step_config s{};
  s.optimizer = optimizer_impl::forloop;
  // The for-loop's AdamW, pure bf16: sqrt and quotient of gate_up_proj beside the router's denom, (2 x 939,524,096 +
  // 32,768) x 2 B = 3,758,161,920 B (down_proj's two beside gate_up_proj's denom: 2 x 939,524,096 elements, less).
  CHECK(estimate_step(m, pure_bf16(), sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(3'758'161'920));
  // transformers 4's nn.Linear per expert (14336 x 4096 = 58,720,256 each): lm_head's two beside the final norm's
  // denom, (2 x 131,072,000 + 4096) x 2 B = 524,296,192 B.
  transformer_config linears = m;
  linears.moe.stacked = false;
  CHECK(count_parameters(linears).largest_layer.count() == 131'072'000);
  CHECK(estimate_step(linears, pure_bf16(), sdpa(1024, 1), s).optimizer_step.optimizer_temporaries == bytes_of(524'296'192));
  // FSDP2 over 16 ranks chunks dim 0, the experts' E = 8, into one expert a rank (chunk 0's size; eight ranks pad an
  // empty chunk to it): per layer 3 x 14336 x 4096 = 176,160,768 elements, not half of it. The rest, 3,164,688,384 -
  // 2 x 1,409,286,144 = 346,116,096, splits evenly: 21,632,256. Shard 2 x 176,160,768 + 21,632,256 = 373,953,792
  // elements; pure bf16 weights and AdamW's two moments: 3 x 2 B x 373,953,792 = 2,243,722,752 B resting.
  training_states t = pure_bf16();
  t.dp = 16;
  s.fsdp_world = 16;
  const step_estimate e = estimate_step(m, t, sdpa(1024, 1), s);
  CHECK(e.optimizer_step.resting == bytes_of(2'243'722'752));
  // The for-loop over local chunks: gate_up_proj's one expert, 28672 x 4096 = 117,440,512, beside the router's chunk
  // (one of its 8 rows, 4096): (2 x 117,440,512 + 4096) x 2 B = 469,770,240 B.
  CHECK(e.optimizer_step.optimizer_temporaries == bytes_of(469'770'240));
  // The all-gather outputs are 16 x the padded chunk (_fsdp_collectives.py): a layer gathers 16 experts' rows of each
  // expert tensor, the eight real ones and eight of padding, (1,451,270,144 + 8 x 176,160,768) x 2 B = 5,721,112,576 B.
  // Under SHARD_GRAD_OP every layer stays gathered through forward, beside the root (embedding, final norm and lm_head:
  // (2 x 131,072,000 + 4096) x 2 B = 524,296,192 B) and the last layer's flat all-gather output, kept to the root's
  // post-forward.
  s.reshard_after_forward = false;
  CHECK(estimate_step(m, t, sdpa(1024, 1), s).forward.gathered == bytes_of(524'296'192 + 3 * 5'721'112'576LL));
  s.reshard_after_forward = true;
  // Over 8 ranks each holds one expert of each whether stacked or not: the even share, (3,164,688,384 / 8) x 6 B.
  t.dp = 8;
  s.fsdp_world = 8;
  CHECK(estimate_step(m, t, sdpa(1024, 1), s).optimizer_step.resting == bytes_of(3'164'688'384LL / 8 * 6));
}

TEST_CASE("step: FSDP2's layer 0 holds its all-gather output while copying it out, and one reduce-scatter input at a time", "[step][moe]") {
  // Mixtral's shape on two layers (3,164,688,384 parameters: the test above), 16 ranks, MixedPrecisionPolicy(bf16,
  // reduce fp32), SDPA, s 4096, b 1: measured on an H100 (h100-moe-steps.json, fsdp-mixtral2l-w16-mixed-s4096-b1), its
  // peak in layer 0's pre-backward. A gathered layer is 16 padded experts' rows a tensor, 1,451,270,144 + 8 x
  // 176,160,768 = 2,860,556,288 elements: 5,721,112,576 B in bf16, 11,442,225,152 B as fp32 reduce-scatter input.
  //   gathered: the root (2 x 131,072,000 + 4096) x 2 = 524,296,192, layer 0's storage and the all-gather output it is
  //             copied from (_fsdp_param_group.py wait_for_unshard), 2 x 5,721,112,576: 11,966,521,344 B (the
  //             measured anatomy: alloc_storage 6,245,474,304 B, the root and one layer);
  //   communication: layer 1's reduce-scatter input, held until layer 0's post-backward: 11,442,225,152 B (measured:
  //             17,878,681,600 B from _fsdp_collectives, with that all-gather output and layer 1's reduce-scatter output).
  // Layer 0's own reduce-scatter input is allocated only after layer 1's is released (post_backward:
  // `reduce_scatter_state = None` before foreach_reduce); counted beside it, layer 0's end was the predicted peak,
  // 31,912,371,200 B against the 30,405,310,464 B measured (+4.96%; now +0.10%).
  transformer_config m = find_preset("mixtral-8x7b").config;
  m.layers = 2;
  training_states t{};
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  t.dp = 16;
  step_config s{};
  s.fsdp_world = 16;
  const step_estimate e = estimate_step(m, t, sdpa(4096, 1), s);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gathered == bytes_of(11'966'521'344));
  CHECK(e.backward.communication == bytes_of(11'442'225'152));
  // Under full recompute the copy comes first (the pre-backward hook is on the layer's output), then the rerun: the
  // all-gather output (5,721,112,576 B) is the larger of the two, and no recomputed tensor stands beside it.
  const step_estimate r = estimate_step(m, t, sdpa(4096, 2, recompute::full), s);
  CHECK(r.backward.gathered == bytes_of(11'966'521'344));
  CHECK(r.backward.recomputed == bytes{});
}

TEST_CASE("step: transformers 5's experts differentiated, node by node, under full recompute", "[step][moe][recompute]") {
  // Mixtral's shape on two layers, pure bf16, SDPA, full recompute (measured on an H100: h100-moe-steps.json, the
  // backward phase of mixtral2l-bf16-sdpa-s*-ckpt). S = k sb routed rows, h = 4096, f = 14336, E = 8, two bytes each.
  // Layer 0's experts' backward is the phase's highest moment; layer 1's gradients, 1,451,270,144 x 2 = 2,902,540,288,
  // and lm_head's and the final norm's, (131,072,000 + 4096) x 2 = 262,152,192, are there: 3,164,692,480 B kept.
  transformer_config m = find_preset("mixtral-8x7b").config;
  m.layers = 2;
  step_config s{};
  s.blas_workspaces = bytes{};
  // s 4096, b 4: S = 2 x 16384 = 32768. act(gate) * up differentiated: its incoming gradient and the two it makes,
  // 3 x S x f x 2 = 3 x 939,524,096, beside dL/d(residual) 16384 x 4096 x 2 = 134,217,728; down_proj's gradient
  // E x h x f x 2 = 939,524,096 has appeared.
  const step_estimate wide = estimate_step(m, pure_bf16(), sdpa(4096, 4, recompute::full), s);
  CHECK(wide.backward.flowing == bytes_of(134'217'728 + 3 * 939'524'096LL));
  CHECK(wide.backward.gradients == bytes_of(3'164'692'480LL + 939'524'096));
  // s 2048, b 1: S = 4096. gate_up's grouped_mm differentiated: the cat of the halves' gradients (S x 2f x 2 =
  // 234,881,024) and dL/d(gather) (S x h x 2 = 33,554,432) beside dL/d(residual) 2048 x 4096 x 2 = 16,777,216;
  // gate_up_proj's gradient (2 x 939,524,096) beside down_proj's.
  const step_estimate narrow = estimate_step(m, pure_bf16(), sdpa(2048, 1, recompute::full), s);
  CHECK(narrow.backward.flowing == bytes_of(16'777'216 + 234'881'024 + 33'554'432));
  CHECK(narrow.backward.gradients == bytes_of(3'164'692'480LL + 3 * 939'524'096LL));
  // Qwen3-30B-A3B's shape on two layers (h 2048, f 768, 128 experts, top 8) with a 1024-token vocabulary
  // (configs/qwen3-moe-2layers-vocab1024, measured on an H100), s 4096, b 4: S = 8 x 16384 = 131072. Its router casts
  // the weights to bf16, so the routing weights' product differentiated first holds its bf16 incoming gradient and the
  // two bf16 gradients MulBackward0 makes (the weights' [S, 1] one is reduced only after the node), 3 x S x h x 2 =
  // 1,610,612,736 B, beside dL/d(residual) 16384 x 2048 x 2 = 67,108,864; nothing of layer 0 is made yet. (Mixtral's
  // fp32 weights would make those three fp32 and add the output's cast: 3 x S x h x 4 + S x h x 2 = 3,758,096,384 B.)
  transformer_config q = find_preset("qwen3-30b-a3b").config;
  q.layers = 2;
  q.vocab = 1024;
  const step_estimate routed = estimate_step(q, pure_bf16(), sdpa(4096, 4, recompute::full), s);
  CHECK(routed.backward.flowing == bytes_of(67'108'864 + 1'610'612'736LL));
  q.moe.weights_in_compute_dtype = false;
  CHECK(estimate_step(q, pure_bf16(), sdpa(4096, 4, recompute::full), s).backward.flowing == bytes_of(67'108'864 + 3'758'096'384LL));
  // At s 2048 (S = 65536) gate_up's grouped_mm is the highest instead (measured too): the cat of the halves' gradients
  // 2 x S x 768 x 2 = 201,326,592 and dL/d(gather) S x 2048 x 2 = 268,435,456 beside dL/d(residual) 8192 x 2048 x 2 =
  // 33,554,432, both projections' gradients made, 3 x 128 x 2048 x 768 x 2 = 1,207,959,552 B.
  q.moe.weights_in_compute_dtype = true;
  const step_estimate shorter = estimate_step(q, pure_bf16(), sdpa(2048, 4, recompute::full), s);
  CHECK(shorter.backward.flowing == bytes_of(33'554'432 + 201'326'592 + 268'435'456));
  CHECK(estimate_step(q, pure_bf16(), sdpa(4096, 4, recompute::full), s).backward.gradients + bytes_of(1'207'959'552) ==
        shorter.backward.gradients);
}

TEST_CASE("step: accumulating, an expert projection's new gradient stands at its own grouped_mm node", "[step][moe][accumulation]") {
  // Mixtral's shape on two layers as above, s 2048, b 1, full recompute (S = 4096 rows), gradients kept from an earlier
  // micro-batch. Every parameter's gradient is there from the start: layers 2 x 1,451,270,144, the embedding and
  // lm_head 2 x 32,000 x 4096, the final norm 4096: 3,164,688,384 x 2 = 6,329,376,768 B. gate_up's grouped_mm node makes
  // gate_up_proj's new gradient, 2 x 939,524,096 B, before its AccumulateGrad adds it in; down_proj's, made at its
  // own node, has been added in and freed by then. (An H200's OLMoE step over two micro-batches: the trace's grouped_mm
  // gradients at that moment, 503,316,480 B, are both expert gradients and gate_up's new one: −4.4% before.)
  transformer_config m = find_preset("mixtral-8x7b").config;
  m.layers = 2;
  step_config s{};
  s.blas_workspaces = bytes{};
  s.keep_gradients = true;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(2048, 1, recompute::full), s);
  CHECK(e.backward.gradients == bytes_of(6'329'376'768LL + 2 * 939'524'096LL));
  // The same rows flow as without accumulation: the cat of the halves' gradients, dL/d(gather) and dL/d(residual).
  CHECK(e.backward.flowing == bytes_of(16'777'216 + 234'881'024 + 33'554'432));
}

TEST_CASE("step: a checkpointed MoE layer's forward holds four [S, h] tensors before the k rows are summed", "[step][moe][recompute]") {
  // Qwen3-MoE's shape on two layers with a 1024-token vocabulary, bf16, SDPA, s 4096, b 4 (measured on an H100:
  // h100-moe-steps.json, qwen3moe2l-v1024-bf16-sdpa-s4096-b4-ckpt; the allocator trace at its forward peak held
  // moe.py's gathered rows, down's output, the weighted product and its reordered copy, 536,870,912 B each). S = 8 x
  // 16384 = 131072 rows of h = 2048: 536,870,912 B each in bf16, the weights bf16 (Qwen3MoeTopKRouter casts them).
  // Above the layer's input: R1 and the normed input (2 x 16384 x 2048 x 2 = 134,217,728), the router's logits
  // (16384 x 128 x 2 = 4,194,304) and the four: 2,285,895,680 B. (gate_up's output, act's and the product, 4 x S x 768
  // x 2 = 805,306,368, beside the gathered rows, are less.)
  transformer_config q = find_preset("qwen3-30b-a3b").config;
  q.layers = 2;
  q.vocab = 1024;
  forward_only_config f{};
  f.seq_len = 4096;
  f.micro_batch = 4;
  f.use_cache = false;
  CHECK(forward_layer_peak(q, f, 1) == bytes_of(134'217'728 + 4'194'304 + 4 * 536'870'912LL));
  // Mixtral's fp32 weights make the last two fp32: at s 2048, b 4 (S = 16384 rows of 4096) 2 x 134,217,728 + 2 x
  // 268,435,456 = 805,306,368, under gate_up's output, act's and the product beside the gathered rows, 134,217,728 +
  // 4 x 16384 x 14336 x 2 = 2,013,265,920 B; with R1, the normed input (2 x 8192 x 4096 x 2) and the logits (8192 x 8 x 2).
  transformer_config x = find_preset("mixtral-8x7b").config;
  x.layers = 2;
  f.seq_len = 2048;
  CHECK(forward_layer_peak(x, f, 1) == bytes_of(134'217'728 + 131'072 + 2'013'265'920LL));
}

namespace {
// Qwen1.5-MoE-A2.7B's shape on two layers with a 1024-token vocabulary (configs/qwen1.5-moe-2layers-vocab1024).
transformer_config qwen2_moe_two_layers() {
  transformer_config m = find_preset("qwen1.5-moe-a2.7b").config;
  m.layers = 2;
  m.vocab = 1024;
  return m;
}
step_config without_workspaces() {
  step_config s{};
  s.blas_workspaces = bytes{};
  return s;
}
}  // namespace

TEST_CASE("step: Qwen2-MoE's gated shared expert, differentiated before the routed experts", "[step][moe][recompute]") {
  // Qwen1.5-MoE-A2.7B's shape on two layers with a 1024-token vocabulary, bf16, SDPA, full recompute, s 4096, b 4:
  // sb = 16384, S = 4 x 16384 = 65536 routed rows, h 2048, f 1408, 60 experts. The block adds
  // sigmoid(shared_expert_gate(x)) * shared_expert(x) last, so autograd differentiates that product, the sigmoid and the
  // gate's linear before the routed experts: the shared expert's output and the sigmoid's are freed, dL/d(shared
  // expert output) waits for the shared expert's own nodes and dL/dx, the gate's input gradient, for x's other readers.
  // The routed nodes' highest is the routing-weight product's (bf16 weights): its incoming gradient and the two it
  // makes, 3 x S x h x 2 = 805,306,368 B (down's: S x f x 2 + 60 x h x f x 2 = 530,579,456 net; act(gate) * up's
  // 446,693,376; gate_up's 669,001,728), beside dL/d(residual) 16384 x 2048 x 2 = 67,108,864 and the two gradients
  // of the shared branch, 2 x 67,108,864.
  const transformer_config m = qwen2_moe_two_layers();
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(4096, 4, recompute::full), without_workspaces());
  CHECK(e.backward.flowing == bytes_of(3 * 67'108'864LL + 805'306'368));
  // Kept: layer 1's gradients 570,560,512 x 2 and lm_head's and the final norm's (1024 x 2048 + 2048) x 2; made: the
  // gate's 2048 x 2.
  CHECK(e.backward.gradients == bytes_of(1'141'121'024LL + 4'198'400 + 4096));
  // A checkpointed layer's forward: the shared expert runs first (3 x 16384 x 5632 x 2 = 553,648,128 at its product)
  // and keeps its output (67,108,864) through the routed experts: the router's logits (16384 x 60 x 2 = 1,966,080)
  // and the four [S, h] tensors before the k rows are summed (4 x 268,435,456), beside R1 and the normed input (2 x
  // 67,108,864): 1,277,034,496 B above the layer's input.
  forward_only_config f{};
  f.seq_len = 4096;
  f.micro_batch = 4;
  f.use_cache = false;
  CHECK(forward_layer_peak(m, f, 1) == bytes_of(2 * 67'108'864LL + 67'108'864 + 1'966'080 + 4 * 268'435'456LL));
  CHECK(forward_layer_modelled(m, attention_kind::flash, 4096, true));
}

TEST_CASE("step: without recompute, the last layer's routed experts hold two tensors autograd does not keep", "[step][moe]") {
  // Qwen1.5-MoE-A2.7B's shape on two layers with a 1024-token vocabulary, bf16, SDPA (as the test above).
  const transformer_config m = qwen2_moe_two_layers();
  const step_config s = without_workspaces();
  // s 2048 b 4: the last layer's routed experts hold the routing-weight product and its reordered
  // copy, which autograd keeps neither of, 2 x (4 x 8192) x 2048 x 2 (bf16 weights) = 268,435,456 B, beside every saved
  // tensor but the output layer's (not made yet): above the loss's moment with 1024 tokens of vocabulary.
  // The final norm's moment after it (step.hpp) is 81,920 B higher here: every saved tensor but the logits, with the
  // norm's input (8192 x 2048 x 2 = 33,554,432), its fp32 product (67,108,864), inputs_embeds (33,554,432) and
  // cache_position (8 x 2048), against the routed pair less the output layer's 134,283,264 B (4 sbh + 2 sbh + 4 sb kept by
  // the norm, lm_head's 2 sbh input). With eight experts a token the pair is 536,870,912 B and the higher.
  const activation_config plain = sdpa(2048, 4);
  const stage_activations st = first_stage_activations(m, plain);
  const step_estimate e2 = estimate_step(m, pure_bf16(), plain, s);
  CHECK(e2.forward.activations == st.total - st.logits + bytes_of(33'554'432LL + 67'108'864 + 33'554'432 + 16'384));
  CHECK(e2.forward.loss == bytes{});
  transformer_config m8 = m;
  m8.moe.top_k = 8;
  const stage_activations st8 = first_stage_activations(m8, plain);
  CHECK(estimate_step(m8, pure_bf16(), plain, s).forward.activations == st8.total - st8.logits - st8.output_layer + bytes_of(536'870'912));
  // Mixtral's fp32 weights make the pair fp32 (2 x 16384 x 4096 x 4 = 536,870,912 B at s 2048 b 4 with two experts a
  // token, 805,306,368 B with three) where Qwen's are bf16; with its 32,000-token vocabulary the loss's moment stays higher.
  transformer_config x = find_preset("mixtral-8x7b").config;
  x.layers = 2;
  CHECK(estimate_step(x, pure_bf16(), plain, s).forward.loss > bytes{});
  x.vocab = 1024;
  x.moe.top_k = 3;
  const stage_activations xs = first_stage_activations(x, plain);
  CHECK(estimate_step(x, pure_bf16(), plain, s).forward.activations == xs.total - xs.logits - xs.output_layer + bytes_of(805'306'368));
}

TEST_CASE("step: frozen experts differentiated under LoRA make no weight gradient and free less", "[step][moe][recompute]") {
  // Mixtral's shape on two layers with a 1024-token vocabulary, LoRA r 16 on q_proj and v_proj (the experts and the
  // router frozen), bf16, SDPA, full recompute, s 4096, b 4 (measured on an H100: h100-moe-steps.json,
  // mixtral2l-v1024-lora16-sdpa-s4096-b4-ckpt, its peak at act(gate) * up's node: 13,351,431,680 B). S = 32768 rows.
  // Frozen experts keep gate_up's output and act's (the activations' frozen experts), not the gather or the product,
  // and their grouped_mm nodes make no weight gradient: at act(gate) * up's node its incoming gradient and the two it
  // makes, 3 x S x 14336 x 2 = 2,818,572,288 B, beside dL/d(residual) 16384 x 4096 x 2 = 134,217,728 B; only down's
  // output (S x 4096 x 2) is gone, and no gradient but the adapters' has been made.
  transformer_config m = find_preset("mixtral-8x7b").config;
  m.layers = 2;
  m.vocab = 1024;
  training_states t = pure_bf16();
  t.adapt.lora.rank = 16;
  t.adapt.lora.targets = parse_lora_targets("q_proj,v_proj");
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(m, t, sdpa(4096, 4, recompute::full), s);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing == bytes_of(134'217'728 + 2'818'572'288LL));
}

TEST_CASE("step: accumulating, the down projection's new gradient stands at its own node", "[step][accumulation]") {
  // Llama-2-7B's layers with a 1000-token vocabulary (so that lm_head's moment is small), bf16, s 512, b 1, full
  // recompute, gradients kept (zero_grad(set_to_none=False), as in every micro-batch after the first). Parameters:
  // 6,738,415,616 - 2 x 31,000 x 4096 = 6,484,463,616; their bf16 gradients 12,968,927,232 B are there throughout.
  // The last layer's down_proj differentiated makes its weight's gradient, 4096 x 11008 x 2 = 90,177,536 B, before its
  // AccumulateGrad adds it in and frees it; with 512 tokens beside 4096 hidden this tops the gated product's moment
  // (3 x 512 x 11008 x 2 made, one of them freed), where down's gradient is already gone.
  transformer_config m = llama2();
  m.vocab = 1000;
  step_config s{};
  s.keep_gradients = true;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(512, 1, recompute::full), s);
  CHECK(e.backward.gradients == bytes_of(12'968'927'232LL + 90'177'536));
  // dL/d(layer output) 512 x 4096 x 2 and down's input gradient 512 x 11008 x 2.
  CHECK(e.backward.flowing == bytes_of(4'194'304 + 11'272'192));
}

namespace {
// A Llama-family layout of the step oracles' sizes.
transformer_config llama_layout(std::int64_t hidden, std::int64_t heads, std::int64_t kv_heads, std::int64_t layers, std::int64_t ffn,
                                std::int64_t vocab) {
  transformer_config m{};
  m.hidden = hidden;
  m.layers = layers;
  m.heads = heads;
  m.kv_heads = kv_heads;
  m.ffn = ffn;
  m.vocab = vocab;
  return m;
}
// The step oracle's few-token shapes: hidden 512, 8 heads, 4 KV heads, vocabulary 500.
transformer_config small_llama(std::int64_t layers, std::int64_t ffn) { return llama_layout(512, 8, 4, layers, ffn, 500); }
}  // namespace

TEST_CASE("step: SDPA's kernel differentiated in a LayerNorm layer holds dq, dk, dv and cuDNN's workspace", "[step][recompute]") {
  // The H200's StableLM step (random-20261129-040): hidden 768, 1 layer, 12 heads of 64, SwiGLU ffn 768, vocabulary
  // 1024 tied, 256 tokens x 2 (sb h = 393,216), bf16, SDPA, full recompute. Its trace's peak is the cuDNN kernel's
  // node: dq, dk, dv (3 x 786,432 B) and a 1,597,696 B workspace, beside dL/d(attention output) (786,432 B) and
  // dL/d(residual) (786,432 B). zeromem's workspace is the fp32 dq accumulator 4 x 512 x 768 = 1,572,864 and the fp32
  // row sums 4 x 2 x 12 x 256 = 24,576 (the trace's 256 B more are not explained): 786,432 x 5 + 1,597,440 =
  // 5,529,600 B flowing.
  const transformer_config m = parse_hf_config(R"({"model_type": "stablelm", "hidden_size": 768, "intermediate_size": 768,
      "num_attention_heads": 12, "num_key_value_heads": 12, "num_hidden_layers": 1, "vocab_size": 1024, "hidden_act": "silu",
      "layer_norm_eps": 1e-05, "max_position_embeddings": 4096, "partial_rotary_factor": 0.25, "qk_layernorm": false,
      "rope_theta": 10000, "tie_word_embeddings": true, "use_parallel_residual": false, "use_qkv_bias": true,
      "hidden_dropout": 0.0, "attention_dropout": 0.0})");
  activation_config a = sdpa(256, 2, recompute::full);
  a.device = device_kind::cuda;
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(m, pure_bf16(), a, s);  // (AdamW's step above it; the trace's ran SGD)
  CHECK(e.backward.flowing == bytes_of(5'529'600));
  // Made by then: the MLP's three 768 x 768 weights, its norm's weight and bias, o_proj's 768 x 768, the final norm's
  // two vectors and lm_head's (the tied embedding's) 1024 x 768: 3,148,800 at 2 B.
  CHECK(e.backward.gradients == bytes_of(6'297'600));
  // In RMSNorm layers the norms' moments stand above it: a Llama-style layer of the same shape peaks elsewhere.
  transformer_config rms = m;
  rms.norm = norm_kind::rmsnorm;
  CHECK(estimate_step(rms, pure_bf16(), a, s).backward.flowing != bytes_of(5'529'600));
}

TEST_CASE("step: a fused gate_up projection's product differentiated as the unfused one's", "[step][recompute]") {
  // Phi-3's MLP (modeling_phi3.py Phi3MLP: gate_up_proj, chunk, up * act(gate), down_proj) keeps what gate_proj and
  // up_proj do, its two halves views of one [sb, 2 ffn] output. At act(gate) * up's MulBackward0, down's node has run:
  // the product's gradient and the two it makes, 3 x 2 x 4096 x 2048 = 50,331,648 B, beside dL/d(residual) 2 x 4096 x
  // 512 = 4,194,304. Hidden 512, 1 layer, 8 heads (4 KV), ffn 2048, vocabulary 500, bf16, SDPA, 4096 tokens, full
  // recompute; gradients there: lm_head's and the final norm's (500 x 512 + 512) and down_proj's (512 x 2048), at 2 B.
  transformer_config m = small_llama(1, 2048);
  m.fused_gate_up = true;
  const step_estimate fused = estimate_step(m, pure_bf16(), sdpa(4096, 1, recompute::full), step_config{});
  CHECK(fused.backward.flowing == bytes_of(4'194'304 + 50'331'648));
  CHECK(fused.backward.gradients == bytes_of(2 * (256'000 + 512 + 1'048'576)));
  m.fused_gate_up = false;
  const step_estimate unfused = estimate_step(m, pure_bf16(), sdpa(4096, 1, recompute::full), step_config{});
  CHECK(unfused.backward.flowing == fused.backward.flowing);
  CHECK(unfused.backward.recomputed == fused.backward.recomputed);
}

TEST_CASE("step: a fused gate_up projection's own node, its incoming gradient joined by chunk's backward", "[step]") {
  // Phi-3's layout (modeling_phi3.py: qkv_proj, gate_up_proj, chunk(2)), hidden 256, 2 layers, 4 heads of 64 (2 KV),
  // ffn 2048, vocabulary 1000 untied, the CPU step oracle's step (s 64, b 2: 128 tokens; eager, pure bf16, no
  // recompute, oneDNN off). Its backward peaks at layer 0's gate_up_proj node (the profiler's live set):
  //  - flowing: chunk's backward (SplitBackward0) has joined the gate's and up's gradients into one tensor, 128 x 4096 x
  //    2 = 1,048,576 B, beside the input gradient the node makes and the residual's gradient (2 x 128 x 256 x 2);
  //  - gradients: layer 1's (qkv 512 x 256, o 256 x 256, gate_up 4096 x 256, down 256 x 2048, two norms 512: 1,769,984),
  //    layer 0's gate_up and down (1,048,576 + 524,288), lm_head's (1000 x 256) and the final norm's (256): 3,599,104 x 2 B;
  //  - activations: the profiler's live set there, 1,262,592 B, and the token ids (1,024 B).
  // zeromem left this node out for fused projections (−0.68% before, one c sbh: the moment read was the product's). The
  // profiler measured 9,641,488 B above the resting states, token ids included (16 B of scalars beside).
  const transformer_config m = parse_hf_config(
      R"({"model_type": "phi3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "intermediate_size": 2048, "vocab_size": 1000, "tie_word_embeddings": false, "use_cache": false})");
  const step_estimate e = oracle_step(m, 64, 2, recompute::none);
  CHECK(e.backward.flowing == bytes_of(1'048'576 + 2 * 65'536));
  CHECK(e.backward.gradients == bytes_of(2 * 3'599'104));
  CHECK(e.backward.activations == bytes_of(1'262'592 + 1'024));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(9'641'472));
}

TEST_CASE("step: the norms of a mixture-of-experts layer differentiated as a dense layer's", "[step][moe]") {
  // The H200's Mixtral step (random-20261130-019): hidden 2048, 2 layers, 16 heads of 128 (4 KV), 4 experts of 1408
  // (top 1), vocabulary 1024 untied, 128 tokens x 2 (sb h = 524,288), bf16, SDPA. Its trace's backward peaks at layer
  // 0's input norm differentiated, pow's node: its six fp32 copies 6 x 4 x 524,288 = 12,582,912 B beside dL/d(residual)
  // 2 x 524,288, every gradient there but the embedding's. Parameters: embedding and lm_head 2 x 1024 x 2048, per layer
  // q and o 2 x 2048^2, k and v 2 x 512 x 2048, experts 4 x 3 x 2048 x 1408, router 4 x 2048, two norms 2 x 2048,
  // and the final norm 2048: 94,398,464; less the embedding's 2,097,152, at 2 B.
  transformer_config m = detail::mixtral(2048, 2, 16, 4, 1408, 4, 1, 1024);
  m.tied_embeddings = false;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(128, 2), step_config{});
  CHECK(e.backward.flowing == bytes_of(1'048'576 + 12'582'912));
  CHECK(e.backward.gradients == bytes_of(2 * (94'398'464LL - 2'097'152)));
}

TEST_CASE("step: eager attention's core differentiated in a mixture-of-experts layer", "[step][moe]") {
  // The H200's Mixtral step (random-20261127-089): hidden 2048, 4 layers, 32 heads of 64 (MHA), 8 experts of 1024 (top
  // 8), vocabulary 50,304 untied, 2048 tokens, bf16, eager, on CUDA. Its backward peaks at the last layer's softmax
  // node, as a dense layer's (2f): dL/d(residual) and V's gradient (2 x 2048 x 2048 each) beside softmax's three fp32
  // s x s tensors, 3 x 4 x 32 x 2048^2: 1,627,389,952 B. Made by then: the experts (8 x 3 x 2048 x 1024), the router
  // (8 x 2048), the MLP's norm, o_proj (2048^2), the final norm and lm_head (50,304 x 2048): 157,569,024 at 2 B.
  transformer_config m = detail::mixtral(2048, 4, 32, 32, 1024, 8, 8, 50304);
  activation_config a = sdpa(2048, 1);
  a.attention = attention_kind::eager;
  const step_estimate e = estimate_step(m, pure_bf16(), a, step_config{});
  CHECK(e.backward.flowing == bytes_of(1'627'389'952));
  CHECK(e.backward.gradients == bytes_of(2 * 157'569'024LL));
}

TEST_CASE("step: without recompute the last layer's eager softmax can top the forward's loss", "[step]") {
  // The H200's Llama step (random-20261127-087): hidden 512, 6 layers, 4 heads of 128 (1 KV head), ffn 512, vocabulary
  // 1024 tied, 2048 tokens x 4, bf16, eager. A = 4 x 2048^2 x 4 = 67,108,864 scores; sb h = 4,194,304. A layer keeps
  // 536,936,448 B: its norms 2 x (4 + 2) sb h + 4 sb each, q, k, v (K and V repeated to 4 heads), the norms' outputs,
  // o_proj's and the MLP's inputs 2 sb h each, softmax's fp32 output and its 16-bit copy 6A, the MLP's four 2 sb ffn.
  // At the last layer's softmax what comes later is not there yet: the 16-bit copy 2A, o_proj's input, the MLP's norm,
  // input and hidden tensors (209,747,968 B); what autograd keeps none of is: the masked 16-bit scores 2A and their fp32
  // copy 4A, the 4 x 1 x 2048 x 2048 additive mask in bf16 (33,554,432), inputs_embeds and the layer's 16-bit input
  // (2 x 8,388,608). With the token ids 8 x 8192 and the rotary tables 2 x 2 x 2048 x 128:
  // 6 x 536,936,448 + 65,536 + 1,048,576 - 209,747,968 + 402,653,184 + 33,554,432 + 16,777,216 = 3,465,969,664 B.
  // The attention frame still holds the rotated q (2 x 8192 x 512 = 8,388,608), which matmul copies to fold batch and
  // heads, and the rotated K (2 x 8192 x 128 = 2,097,152) beside the copy of it that matmul keeps, and its own V of one
  // head (2,097,152) where the 4-head copy attention keeps (8,388,608) is made only by the second matmul; and
  // position_ids 8 x 2048: + 8,388,608 + 2,097,152 + 2,097,152 - 8,388,608 + 16,384 = 3,470,180,352 B (the trace's
  // forward peak above the resting states: 3,470,114,816 B; 3,465,969,664, -0.12%, without the frame).
  transformer_config m = detail::llama(512, 6, 4, 1, 512, 1024);
  m.tied_embeddings = true;
  activation_config a = sdpa(2048, 4);
  a.attention = attention_kind::eager;
  const step_estimate e = estimate_step(m, pure_bf16(), a, step_config{});
  CHECK(e.forward.activations == bytes_of(3'470'180'352LL));
  CHECK(e.forward.loss == bytes{});
  // Under full recompute the checkpointed forward's own moment stands instead; without the eager kernel, the loss's.
  a.attention = attention_kind::flash;
  CHECK(estimate_step(m, pure_bf16(), a, step_config{}).forward.loss.count() > 0);
}

TEST_CASE("step: LayerNorm layers' last eager softmax, beside what the attention frame still refers to", "[step]") {
  // The family step oracle's GPT-NeoX step: hidden 128, 8 heads of 16, ffn 256, 1 layer, vocabulary 500 untied, RoPE over
  // whole heads joined by torch.cat, in parallel, 256 tokens x 3 (sb h = 98,304), bf16, eager, on the CPU. The live
  // allocations at its forward's peak (PyTorch 1.13's profiler, each with the op that made it): softmax's fp32 copy of
  // its input and its output 2 x 6,291,456 (A = 8 x 256^2 x 3 = 1,572,864 scores), the masked bf16 scores 3,145,728,
  // query_key_value's output 589,824 (V is a view of it: all three heads' parts stay), the additive mask 3 x 256^2 x 2 =
  // 393,216, torch.cat's q and k 2 x 196,608, the embedding's output (which the LayerNorm keeps) and the LayerNorm's
  // output 2 x 196,608, cos and sin 2 x 8,192, the LayerNorm's mean and rstd 2 x 1,536, position_ids 8 x 256 and the
  // token ids 8 x 768: 17,525,760 B, and an 8-byte scalar. zeromem read the loss's moment for LayerNorm layers, and
  // 2 x 196,608 less of the frame for every layer kind (GPT-NeoX's at 500 tokens of vocabulary: -1.43%).
  transformer_config neox = detail::pythia(128, 1, 8, 500);
  neox.ffn = 256;
  neox.rotary_dims = 16;
  const step_estimate e = oracle_step(neox, 256, 3, recompute::none);
  CHECK(e.forward.total() - e.forward.resting == bytes_of(17'525'760));
  CHECK(e.forward.loss == bytes{});
  // Phi's frame (separate biased q, k, v over 4 KV heads, one shared LayerNorm, 2 layers, 256 tokens x 2): query_pass and
  // key_pass keep the projections' outputs, query_rot and key_rot their rotated parts, beside torch.cat's q and k and
  // repeat_kv's copies of K and V; the family step oracle measured 19,556,368 B above the resting states, two 8-byte
  // scalars of it unmodelled.
  transformer_config phi = detail::pythia(128, 2, 8, 500);
  phi.ffn = 256;
  phi.kv_heads = 4;
  phi.rotary_dims = 16;
  phi.fused_qkv = phi.qkv_per_head = false;
  phi.shared_layer_norm = true;
  phi.lm_head_bias = true;
  const step_estimate p = oracle_step(phi, 256, 2, recompute::none);
  CHECK(p.forward.total() - p.forward.resting == bytes_of(19'556'368 - 16));
}

TEST_CASE("step: with a KV cache, a LayerNorm layer's last eager softmax keeps the projections the frame still names", "[step]") {
  // The H200's StableLM step (random-20261202-009, torch 2.11.0+cu130, transformers 5.17.0): hidden 512, 1 layer, 8 heads
  // of 64, SwiGLU ffn 1536, vocabulary 1024 untied, RoPE on 16 of each head's 64 dimensions, use_cache true, 2048 tokens
  // x 1, bf16, eager. Its forward peaked at 388,182,016 B above what the process held before, on 27,308,032 B of weights
  // and AdamW states: 360,873,984 B above them, where the loss's moment is 268,664,840 (-25.6%).
  const auto config = [](double rotary) {
    return parse_hf_config(R"({"model_type": "stablelm", "hidden_size": 512, "intermediate_size": 1536, "num_attention_heads": 8,
        "num_key_value_heads": 8, "num_hidden_layers": 1, "vocab_size": 1024, "hidden_act": "silu", "layer_norm_eps": 1e-05,
        "max_position_embeddings": 4096, "qk_layernorm": false, "rope_theta": 10000, "tie_word_embeddings": false,
        "use_parallel_residual": false, "use_qkv_bias": true, "hidden_dropout": 0.0, "attention_dropout": 0.0, "use_cache": true,
        "partial_rotary_factor": )" + std::to_string(rotary) + "}");
  };
  activation_config a = sdpa(2048, 1);
  a.attention = attention_kind::eager;
  step_config s{};
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(config(0.25), pure_bf16(), a, s);
  CHECK(e.forward.loss == bytes{});  // the last layer's softmax, not the loss
  const double above = static_cast<double>((e.forward.total() - e.forward.resting).count());
  CHECK(above == Approx(360'873'984.0).epsilon(0.005));  // -0.29%
  // The cache rebinds key_states and value_states to its copies; query_pass and key_pass still hold q_proj's and k_proj's
  // outputs (2 x 2048 x 512 x 2 B), query_rot and key_rot the rotated parts (2 x 2048 x 8 x 16 x 2 B). RoPE on 32
  // dimensions widens the rotated parts by 2 x 2048 x 8 x 16 x 2 = 1,048,576 B and cos and sin (2048 x 32, bf16) by
  // 2 x 2048 x 16 x 2 = 131,072 B; nothing else at this moment depends on the fraction (torch.cat joins the parts).
  const step_estimate wider = estimate_step(config(0.5), pure_bf16(), a, s);
  CHECK(wider.forward.loss == bytes{});
  CHECK(wider.forward.activations - e.forward.activations == bytes_of(1'048'576 + 131'072));
}

TEST_CASE("step: OPT's last eager softmax in forward, without rotation, beside OPTDecoder's positions", "[step]") {
  // The H200's OPT step (random-20261129-001, torch 2.11.0+cu130, transformers 5.17.0): hidden 1024, 1 layer, 16 heads,
  // ffn 2688, vocabulary 8192 tied, LayerNorms after the residual adds (do_layer_norm_before false), dropout 0.1, 2048
  // tokens x 8, bf16, eager, Adafactor over 3 micro-batches (their gradients alive from the start). Its forward peaked
  // at 5,787,683,328 B; the loss's moment is 5,068,638,792 B (-12.4%).
  const transformer_config m = parse_hf_config(R"({"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 1,
      "num_attention_heads": 16, "ffn_dim": 2688, "vocab_size": 8192, "max_position_embeddings": 2048,
      "do_layer_norm_before": false, "dropout": 0.1, "attention_dropout": 0.0, "use_cache": false})");
  training_states t = pure_bf16();
  t.optimizer.kind = optimizer_kind::adafactor;
  t.gradient_accumulation_steps = 3;
  activation_config a = sdpa(2048, 8);
  a.attention = attention_kind::eager;
  step_config s{};
  s.optimizer = pytorch_default_impl(optimizer_kind::adafactor);
  s.blas_workspaces = bytes{};
  const step_estimate e = estimate_step(m, t, a, s);
  CHECK(e.forward.loss == bytes{});  // the last layer's softmax, not the loss
  CHECK(static_cast<double>(e.forward.total().count()) == Approx(5'787'683'328.0).epsilon(0.01));  // +0.55%
}

TEST_CASE("step: the final RMSNorm differentiated sets the backward where the vocabulary is small", "[step]") {
  // Hidden 512, 4 layers, 8 heads (4 KV), ffn 512, vocabulary 500 tied, bf16, SDPA, s 64, b 4 (sb h = 131,072). After
  // lm_head's node the loss's tensors and lm_head's input are gone; the final norm's backward at pow's node holds six
  // fp32 copies of its input, 6 x 4 x 131,072 = 3,145,728 B, against the loss's 12 B a logit (3 x 4 x 256 x 500 =
  // 1,536,000) and lm_head's moment. Gradients there: lm_head's (tied: the shared weight's, 500 x 512 x 2) and the final
  // norm's weight's (512 x 2).
  transformer_config m = small_llama(4, 512);
  m.tied_embeddings = true;
  const step_estimate e = estimate_step(m, pure_bf16(), sdpa(64, 4), step_config{});
  CHECK(e.backward.gradients == bytes_of(512'000 + 1'024));
  CHECK(e.backward.flowing == bytes_of(3'145'728));
  CHECK(e.backward.loss == bytes{});
  // Every saved tensor but the output layer's: the final norm's fp32 input 4 x 131,072, its normalised output 2 x
  // 131,072 and rstd 4 x 256, and lm_head's input 2 x 131,072.
  CHECK(e.backward.activations == e.forward.activations - bytes_of(524'288 + 262'144 + 1'024 + 262'144));
}

TEST_CASE("step: a norm's weight multiply in fp32 differentiated stages the weight's sum on CUDA", "[step][amp]") {
  // The H200's Qwen3 step under AMP (random-20261127-074): hidden 1536, 2 layers, 2 heads of 64, ffn 3072, vocabulary
  // 1024 untied, 1024 tokens x 4 (sb h = 6,291,456), gradients kept (a later micro-batch). Its trace's peak is the final
  // norm's weight * x_normed differentiated: two fp32 products (2 x 25,165,824 B) and the weight's sum over 4096 rows
  // staged in a 50,331,696 B buffer (Reduce.cuh: 1536 outputs, vec 4, a 32 x 4 block, 12 blocks of outputs, 1024
  // values a thread, max(min(ceil(2112 / 12) = 176, 64), 4) = 64 blocks an output: 4 x 1536 x 64 x 32 x 4 + 4 x 12),
  // beside the norm's fp32 input and normalised tensor (2 x 25,165,824), its rstd (4 x 4096) and the fp32 incoming
  // gradient (25,165,824): 176,177,200 B, where pow's six fp32 copies are 150,994,944.
  transformer_config m = detail::qwen3(1536, 2, 2, 2, 3072, 1024, false);
  m.head_dim = 64;
  training_states amp = pure_bf16();
  amp.recipe = recipe_of(precision::amp_bf16);
  activation_config a = sdpa(1024, 4);
  a.autocast = true;
  step_config s{};
  s.keep_gradients = true;
  const step_estimate e = estimate_step(m, amp, a, s);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing == bytes_of(176'177'200));
  CHECK(e.backward.loss == bytes{});
  // In bf16 the multiply's products are 16-bit (2 x 2 sb h), below pow's copies: the final norm's moment holds those.
  step_config bf16_step{};
  bf16_step.keep_gradients = true;
  const step_estimate b = estimate_step(m, pure_bf16(), sdpa(1024, 4), bf16_step);
  CHECK(b.backward.flowing != bytes_of(176'177'200));
  CHECK(b.backward.flowing.count() <= 150'994'944 + 2 * 6'291'456);
  // On the CPU the sum stages nothing: 20 sb h + 4 sb = 125,845,504 B, below pow's 150,994,944.
  a.device = device_kind::cpu;
  const step_estimate cpu = estimate_step(m, amp, a, s);
  CHECK(cpu.backward.flowing.count() < 176'177'200);
}

TEST_CASE("step: inside a checkpoint the norm's weight multiply has dropped the normalised tensor by the sum", "[step][recompute]") {
  // Gemma-style RMSNorm (x_normed * (1 + weight), in fp32 in bf16 too): hidden 512, 1 layer, 8 heads of 64 (4 KV), ffn
  // 512, vocabulary 500 untied, bf16, 4096 tokens x 8 (sb = 32,768, sb h = 16,777,216). The sum of the weight's gradient
  // over 32,768 rows: 512 outputs, vec 4, a 32 x 4 block, 4 blocks of outputs, 8192 values a thread, max(min(ceil(2112
  // / 4) = 528, 512), 32) = 512 blocks an output: 4 x 512 x 512 x 32 x 4 + 4 x 4 = 134,217,744 B.
  transformer_config m = small_llama(1, 512);
  m.head_dim = 64;
  m.norm_scale_fp32 = true;
  CHECK(cuda_sum_staging_bytes(512, 32'768) == 134'217'744);
  // Without recompute the final norm's node sets the backward: 20 sb h + 4 sb + the buffer = 469,893,136 B, above pow's
  // 24 sb h = 402,653,184; lm_head's and the final norm's gradients (500 x 512 + 512, x 2 B) are there.
  const step_estimate whole = estimate_step(m, pure_bf16(), sdpa(4096, 8), step_config{});
  CHECK(whole.backward.flowing == bytes_of(469'893'136));
  CHECK(whole.backward.gradients == bytes_of(513'024));
  // Under full recompute the MLP's norm's node does, after the MLP's gradients (3 x 512 x 512 x 2) and its norm
  // weight's: the checkpoint's normalised tensor went when the node unpacked it, 16 sb h + 4 sb + the buffer =
  // 402,784,272 B beside dL/d(residual), 2 sb h.
  const step_estimate ckpt = estimate_step(m, pure_bf16(), sdpa(4096, 8, recompute::full), step_config{});
  CHECK(ckpt.backward.flowing == bytes_of(33'554'432 + 402'784'272));
  CHECK(ckpt.backward.gradients == bytes_of(513'024 + 1'572'864 + 1'024));
}

TEST_CASE("step: layer 0's input norm differentiated tops the end of backward where tokens are few", "[step]") {
  // Hidden 512, 1 layer, 8 heads (4 KV), ffn 4096, vocabulary 500 (untied), bf16, SDPA, s 32, b 2, full recompute.
  // Parameters: embedding and lm_head 2 x 256,000, q and o 2 x 262,144, k and v 2 x 131,072, the MLP 3 x 2,097,152,
  // three norms 3 x 512: 7,591,424, their bf16 gradients 15,182,848 B. At the input norm's pow node every gradient
  // but the embedding's (512,000 B) is there, with dL/d(residual) 64 x 512 x 2 and the norm's six fp32 copies of its
  // input 6 x 4 x 64 x 512; the end of backward would hold the embedding's gradient instead of the copies.
  const step_estimate e = estimate_step(small_llama(1, 4096), pure_bf16(), sdpa(32, 2, recompute::full), step_config{});
  CHECK(e.backward.gradients == bytes_of(15'182'848 - 512'000));
  CHECK(e.backward.flowing == bytes_of(65'536 + 786'432));
  // The token ids 8 x 64, the rotary tables 2 x 2 x 32 x 64, the checkpointed call's position ids 8 x 32 and its input
  // 64 x 512 x 2, held to the layer's end.
  CHECK(e.backward.activations == bytes_of(512 + 8'192 + 256 + 65'536));
}

TEST_CASE("CUDA's reduction kernel stages a bias gradient's partial sums by the card's multiprocessors", "[step]") {
  // aten/src/ATen/native/cuda/Reduce.cuh setReduceConfig for a [rows, n] gradient summed over its rows, read by hand and
  // measured: the staging buffer plus the semaphores an H200's allocator trace held (step_anatomy.py, 2026-11-27).
  // OPT's fc1 bias, n 5440 over 4096 tokens: vec 4, 1360 outputs a lane's vector, a 32 x 4 block, 43 blocks of outputs,
  // 1024 values a thread; blocks an output max(min(ceil(132 x 16 / 43) = 50, 1024 / 16 = 64), 4) = 50:
  // 4 x 5440 x 50 x 128 = 139,264,000 B and 4 x 43 B of semaphores.
  CHECK(cuda_sum_staging_bytes(5440, 4096) == 139'264'000 + 172);
  // An RMSNorm weight's product (h 1536, 4096 tokens): 12 blocks of outputs, min(176, 64) = 64 an output.
  CHECK(cuda_sum_staging_bytes(1536, 4096) == 4LL * 1536 * 64 * 128 + 48);
  // Adafactor's column norms: down_proj [1536, 4096] (4096 outputs over 1536 rows, 384 values a thread: min(66, 24)
  // = 24) and a tied [8192, 1536] embedding (2048 values a thread: min(176, 128) = 128); GPT-NeoX's fused qkv bias
  // (1536 outputs over 2048 tokens: min(176, 32) = 32).
  CHECK(cuda_sum_staging_bytes(4096, 1536) == 50'331'648 + 128);
  CHECK(cuda_sum_staging_bytes(1536, 8192) == 100'663'296 + 48);
  CHECK(cuda_sum_staging_bytes(1536, 2048) == 25'165'824 + 48);
  // A 3D expert weight reduces its middle dimension, the same launch over E x C outputs: Mixtral-shaped experts (4 of
  // h 2048, f 1408), gate_up_proj [4, 2816, 2048]: 8192 outputs over 2816 rows, 64 blocks of outputs, 704 values a
  // thread, min(ceil(2112 / 64) = 33, 44) = 33 blocks an output, as the H200's trace held (138,412,288 B).
  CHECK(cuda_sum_staging_bytes(4 * 2048, 2816) == 138'412'032 + 256);
  // Fewer rows than a block's warps times 16 (64 here): each warp sums its own outputs, nothing staged; under 256
  // values a thread the blocks do not split an output either.
  CHECK(cuda_sum_staging_bytes(1536, 63) == 0);
  CHECK(cuda_sum_staging_bytes(1536, 1020) == 0);
  // An L40S (142 multiprocessors, 1536 threads each: 12 blocks of 128 each, target 1704) at OPT's shape: 43 blocks of
  // outputs, ceil(1704 / 43) = 40 an output.
  CHECK(cuda_sum_staging_bytes(5440, 4096, find_gpu("l40s").multiprocessors) == 4LL * 5440 * 40 * 128 + 172);
  // An odd width vectorises by 1: 5441 outputs, a 32 x 16 block (512 threads), 171 blocks of outputs; 4096 rows / 16 =
  // 256 values a thread; min(ceil(528 / 171) = 4, 16) = 4 an output: 4 x 5441 x 4 x 32 + 4 x 171.
  CHECK(cuda_sum_staging_bytes(5441, 4096) == 4LL * 5441 * 4 * 32 + 684);
  CHECK_THROWS_WITH(cuda_sum_staging_bytes(0, 4096), Catch::Contains("at least one output"));
  CHECK_THROWS_WITH(cuda_sum_staging_bytes(16, 16, cuda_multiprocessors{0, 2048}), Catch::Contains("multiProcessorCount"));
}

namespace {
// The CPU step oracle's LoRA steps (tests/oracle/run_step_oracle.py add_lora): its BASE shape, hidden 256, 4 heads of
// 64 (2 KV), ffn 512, vocabulary 1000, 64 tokens x 2, pure bf16 base, eager attention on the CPU under torch 1, PEFT's
// adapters in fp32 (rank 8 on q_proj and v_proj unless given), AdamW's for-loop.
step_estimate oracle_lora_step(const transformer_config& m, std::int64_t seq, std::int64_t rank, recompute r, const char* targets,
                               dtype adapters = dtype::fp32) {
  training_states t = pure_bf16();
  t.adapt.lora.rank = rank;
  t.adapt.lora.targets = parse_lora_targets(targets);
  t.adapt.lora.adapter_dtype = adapters;
  activation_config a{};
  a.seq_len = seq;
  a.micro_batch = 2;
  a.recomputation = r;
  a.attention = attention_kind::eager;
  a.device = device_kind::cpu;
  a.torch_major = 1;
  step_config c{};
  c.blas_workspaces = bytes{};
  c.optimizer = optimizer_impl::forloop;
  return estimate_step(m, t, a, c);
}
// The oracle's base shape: hidden 256, 4 heads over 2 KV heads, vocabulary 1000.
transformer_config oracle_layout(std::int64_t layers, std::int64_t ffn) { return llama_layout(256, 4, 2, layers, ffn, 1000); }
step_estimate oracle_lora_step(std::int64_t layers, std::int64_t seq, std::int64_t rank, recompute r,
                               const char* targets = "q_proj,v_proj", std::int64_t ffn = 512, dtype adapters = dtype::fp32) {
  return oracle_lora_step(oracle_layout(layers, ffn), seq, rank, r, targets, adapters);
}
// The oracle's OLMo-2 (post-branch norms, whole-projection q/k norms, fp32 norm weights and rotary tables) and Gemma-2
// and Gemma-3 (sandwich norms, (1 + weight) in fp32, the scaled embedding tied to the head, a window of 16 on layers
// 0 .. N - 2 of each N) at that shape, 2 layers.
transformer_config oracle_olmo2(std::int64_t ffn = 512) {
  transformer_config m = oracle_layout(2, ffn);
  m.qk_norm = m.qk_norm_whole = m.norm_weight_fp32 = m.post_norms = m.rope_fp32 = true;
  return m;
}
transformer_config oracle_gemma(bool gemma3, std::int64_t ffn = 512) {
  transformer_config m = oracle_layout(2, ffn);
  m.norm_scale_fp32 = m.tied_embeddings = m.sandwich_norms = true;
  m.scaled_embedding = !gemma3;  // Gemma-3 scales inside its embedding module (Gemma3TextScaledWordEmbedding), as gemma3_text
  m.attention_softcap = gemma3 ? 0.0 : 50.0;
  m.final_logit_softcap = gemma3 ? 0.0 : 30.0;
  m.sliding_window = 16;
  m.sliding_window_pattern = gemma3 ? 6 : 2;
  m.local_rope = m.qk_norm = gemma3;
  return m;
}
}  // namespace

TEST_CASE("step: LoRA's for-loop steps the adapters in order, lora_A before lora_B", "[step][lora]") {
  // Each layer's adapters as model.parameters() gives them: q's A (8 x 256) and B (256 x 8), v's A (8 x 256) and B
  // (128 x 8), fp32. AdamW's for-loop holds sqrt and its quotient of one tensor beside the previous tensor's denom: at
  // q's B, 2 x 2048 + 2048 = 6,144 elements x 4 B = 24,576 B (the largest tensor alone gave 16,384 B, -8,204 B against the
  // profiler's 24,588 B, 12 B of step scalars beside).
  CHECK(oracle_lora_step(2, 64, 8, recompute::none).optimizer_step.optimizer_temporaries == bytes_of(24'576));
}

TEST_CASE("step: a frozen output layer keeps no input, and the CausalLM frame holds it through the loss", "[step][lora]") {
  // LoRA freezes lm_head, which keeps no input; LlamaForCausalLM.forward holds outputs.last_hidden_state (128 x 256 x 2 =
  // 65,536 B) until the loss is computed. The forward's loss moment: bf16 logits 256,000 B, their fp32 copy and
  // log_softmax's output 2 x 512,000 B, the padded and shifted labels 8 x 2 x 65 + 8 x 128 = 2,064 B, and the final
  // hidden state. With 2 layers under full recompute the profiler measured 1,775,640 B above the resting states
  // (zeromem 1,710,096 B before, -65,544 B).
  const step_estimate e = oracle_lora_step(2, 64, 8, recompute::full);
  CHECK(e.forward.loss == bytes_of(256'000 + 2 * 512'000 + 2'064 + 65'536));
  CHECK(e.forward.total() - e.forward.resting == bytes_of(1'775'632));
}

TEST_CASE("step: LoRA's first layer keeps no rotated query where k_proj is not adapted", "[step][lora]") {
  // Without recompute the frozen embedding's output needs no gradient: in layer 0 the adapted q_proj's output does and
  // k_proj's does not, so eager attention's QK^T keeps K (for Q's gradient) and not Q (128 x 256 x 2 = 65,536 B). The
  // profiler measured the backward 4,652,088 B above the resting states (2 layers; zeromem read 4,717,568 B before).
  CHECK(oracle_lora_step(2, 64, 8, recompute::none).backward.total() - oracle_lora_step(2, 64, 8, recompute::none).backward.resting ==
        bytes_of(4'652'032));
}

TEST_CASE("step: LoRA beside a frozen MLP, the product's node in the recomputed layer", "[step][lora]") {
  // Full recompute, 256 tokens x 2 (sb = 512), rank 16 on q_proj and v_proj. The frozen down_proj keeps no input, so its
  // node frees nothing and makes no gradient; act(gate) * up's MulBackward0 makes the gradients of act(gate) and up beside
  // its incoming one: 3 x 512 x 512 x 2 = 1,572,864 B, with dL/d(residual) 512 x 256 x 2 = 262,144 B. The profiler's
  // backward peak there: 11,413,536 B above the resting states (zeromem 10,102,784 B before, -11.5%, reading the layer's
  // start).
  const step_estimate e = oracle_lora_step(2, 256, 16, recompute::full);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.flowing == bytes_of(1'572'864 + 262'144));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(11'413'504));
}

TEST_CASE("step: LoRA on the MLP alone, the first layer's attention half keeps nothing", "[step][lora]") {
  // Rank 8 on gate_proj, up_proj and down_proj, no recompute: layer 0's input needs no gradient (the frozen embedding's
  // output), nor do its frozen attention's outputs, so nothing there is kept: the input norm's fp32 input, its product and
  // rstd (2 x 131,072 + 512 B), the rotated Q and the repeated K and V (3 x 65,536 B), the fp32 and bf16 probabilities
  // (2 x 4 x 64 x 64 x 6 = 196,608 B), and the MLP's norm, whose input is the residual of two such tensors (262,656 B):
  // 918,528 B fewer than a layer with an attention adapter. The profiler measured 4,405,840 B above the resting states in
  // forward and 4,594,240 B in backward (64 B of scalars beside; zeromem read 918,528 B more before, +4.9% to +15.6% on
  // the oracle's random draws).
  const step_estimate e = oracle_lora_step(2, 64, 8, recompute::none, "gate_proj,up_proj,down_proj");
  CHECK(e.forward.total() - e.forward.resting == bytes_of(4'405'776));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(4'594'176));
}

TEST_CASE("step: LoRA on every linear under recompute peaks inside the rerun, at up_proj's adapter sum", "[step][lora]") {
  // Full recompute, rank 8 on every linear, 2 layers (sb = 128). Layer 0's rerun starts at down_proj's `* scaling` node
  // (the first that unpacks a saved tensor) and runs to that scalar; its highest moment is up_proj's adapter sum. The
  // profiler's live set there, layer 0's tensors: the fp32 casts of the two norms' inputs and of the q, k, v, o, gate and
  // up adapters' inputs (8 x 131,072 B), gate's output cast back to bf16 (131,072), the norms' fp32 x^2 (2 x 131,072)
  // and rstd (2 x 512), the rotated Q and the attention output (2 x 65,536), the fp32 and bf16 probabilities (131,072 +
  // 65,536), P @ V's output (65,536), R1 and the MLP norm's output (2 x 65,536), six rank-8 intermediates (6 x 4,096),
  // act(gate) (131,072), up's base output (131,072), and lora_B's scaled output, the fp32 sum and the CPU's fp32 copy of
  // the base output (3 x 262,144): 3,040,256 B. Waiting: dL/d(layer output) and down's base output's bf16 gradient (2 x
  // 65,536) and dL/d(sum) in fp32 (131,072). Layer 1's 14 adapter gradients: 131,072 B. The profiler measured 3,533,376 B
  // above the resting states (zeromem 2,750,976 B before, reading the layer whole: -22.1%).
  const step_estimate e = oracle_lora_step(2, 64, 8, recompute::full, "all-linear");
  CHECK(e.backward.recomputed == bytes_of(3'040'256));
  CHECK(e.backward.flowing == bytes_of(262'144));
  CHECK(e.backward.gradients == bytes_of(131'072));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(3'533'312));
}

TEST_CASE("step: an adapted down_proj differentiated, lora_A's node and the product's summed gradients", "[step][lora]") {
  // Full recompute, ffn 2048 (sb x ffn = 262,144 values), 2 layers. (A) fp32 adapters on down_proj alone: lora_A's node
  // makes the gradient of its fp32 input (1,048,576 B) beside dL/d(its output) (128 x 8 x 4 = 4,096 B), dL/d(layer output)
  // and the base output's bf16 gradient, which waits for the base linear's node, made earlier and so run later (2 x
  // 65,536 B); layer 0's rerun alive but lora_B's rank-8 input: the fp32 cast of the product (1,048,576), gate's and up's
  // outputs and act(gate) (3 x 524,288), the norms' fp32 inputs and x^2 (4 x 131,072) and rstd (2 x 512), the rotated Q
  // and the attention output (2 x 65,536), the probabilities (131,072 + 65,536) and P @ V (65,536): 3,539,968 B. The
  // profiler measured 4,971,024 B above the resting states (zeromem 4,831,744 B before, -2.80%).
  const step_estimate a = oracle_lora_step(2, 64, 8, recompute::full, "down_proj", 2048);
  CHECK(a.backward.flowing == bytes_of(1'048'576 + 4'096 + 2 * 65'536));
  CHECK(a.backward.recomputed == bytes_of(3'539'968));
  CHECK(a.backward.total() - a.backward.resting == bytes_of(4'971'008));
  // (B) bf16 adapters on gate_proj, up_proj and down_proj: lora_A kept the product itself, now freed; the base linear's
  // dL/d(product), the adapter path's and their sum (3 x 524,288 B) beside dL/d(layer output) (65,536 B); the rerun's
  // tensors: gate's and up's outputs and act(gate) (3 x 524,288), the norms' (4 x 131,072 + 2 x 512), the attention's
  // (2 x 65,536 + 131,072 + 65,536 + 65,536), the MLP norm's output that gate's and up's lora_A keep (65,536) and their
  // rank-8 intermediates (2 x 2,048): 2,561,024 B. Layer 1's six adapter gradients and layer 0's down_proj's (110,592 +
  // 36,864 B). The profiler measured 4,446,752 B with a tied head (zeromem 3,951,104 B before, -11.1%).
  const step_estimate b = oracle_lora_step(2, 64, 8, recompute::full, "gate_proj,up_proj,down_proj", 2048, dtype::bf16);
  CHECK(b.backward.flowing == bytes_of(3 * 524'288 + 65'536));
  CHECK(b.backward.recomputed == bytes_of(2'561'024));
  CHECK(b.backward.gradients == bytes_of(110'592 + 36'864));
}

TEST_CASE("step: LoRA on every linear without recompute, the forward's highest moment at the last layer's up_proj", "[step][lora]") {
  // No recompute, 3 layers, ffn 2048 beside a vocabulary of 1000: every earlier layer's saved tensors and the last
  // layer's up to its MLP (act(gate) among them) stand beside up_proj's adapter sum there: its base output (128 x 2048 x 2
  // = 524,288 B), the fp32 cast of its input (131,072 B), lora_A's rank-8 output (4,096 B), lora_B's scaled output, the
  // fp32 sum and the CPU's fp32 copy of the base output (3 x 1,048,576 B), above the loss's moment. The profiler measured
  // 15,192,248 B above the resting states, 23 scalars of 8 B among them (zeromem 14,430,224 B before, -5.0%).
  const step_estimate e = oracle_lora_step(3, 64, 8, recompute::none, "all-linear", 2048);
  CHECK(e.forward.activations == bytes_of(15'192'064));
  CHECK(e.forward.loss == bytes{});
  // Under the loss's moment it stands only where the layer's tensors outweigh the logits': at ffn 512 it does not.
  CHECK(oracle_lora_step(3, 64, 8, recompute::none, "all-linear").forward.loss > bytes{});
}

TEST_CASE("step: LoRA with few tokens beside the hidden size, the frozen final norm differentiated at pow's node", "[step][lora]") {
  // Hidden 512 over 8 heads of 64 (as many KV heads), ffn 512, 2 layers, 16 tokens x 2 (sb = 32), vocabulary 500, rank
  // 8 on q_proj and v_proj, no recompute. The final norm's pow node holds six fp32 copies of its input (6 x 32 x 512 x 4
  // = 393,216 B) beside every tensor the layers saved; no adapter gradient is made yet (the head is frozen). A layer
  // keeps its input norm's fp32 input, x^2 and rstd (2 x 65,536 + 128), q's and v's adapters (their inputs' fp32 casts
  // and rank-8 outputs, 2 x (65,536 + 1,024)), the rotated Q and K and V (3 x 32,768), the fp32 and bf16 probabilities
  // (16,384 + 8,192), the MLP norm's (131,200) and act(gate), its input and up's output (3 x 32,768): 616,704 B; layer 0
  // keeps neither its input norm's nor the rotated Q (163,968 B fewer). With the rotary tables (2 x 2 x 16 x 64) and
  // the token ids (256): 1,073,792 B. The profiler measured 1,467,064 B above the resting states, scalars of 8 B among
  // them (zeromem 1,396,992 B before, -4.78%, at the layers' moments).
  transformer_config m = small_llama(2, 512);
  m.kv_heads = 8;
  const step_estimate e = oracle_lora_step(m, 16, 8, recompute::none, "q_proj,v_proj");
  CHECK(e.backward.flowing == bytes_of(393'216));
  CHECK(e.backward.gradients == bytes{});
  CHECK(e.backward.activations == bytes_of(2 * 616'704 - 163'968 + 4'096 + 256));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(1'467'008));
}

TEST_CASE("step: LoRA's frozen final norm in forward, its cast and output alive though neither is kept", "[step][lora]") {
  // The shape above, forward. Its highest moment is the final norm's weight multiply: beside what the layers saved
  // (2 x 616,704 - 163,968), the rotary tables (4,096) and the token ids (256), 1,073,792 B, the frozen norm keeps its
  // fp32 input and x^2 (torch 1.13: 2 x 65,536) and rstd (128), while its bf16 cast of the normalised tensor (the
  // multiply's operand) and its output (lm_head's input) are alive, 2 x 32,768, though neither is kept; its input, the
  // last layer's output (32,768), the fp32 product x * rsqrt (65,536), inputs_embeds the model's frame names (32,768:
  // layer 0's norm copies it), the eager mask (2 x 16 x 16 x 2 = 1,024) and the position ids (128):
  // 1,073,792 + 131,200 + 65,536 + 32,768 + 65,536 + 32,768 + 1,152 = 1,402,752 B. The profiler measured 1,402,928 B,
  // the 176 B beyond being the variance (128 B) and six 8-byte scalars (zeromem 1,398,288 B before, -0.33%).
  transformer_config m = small_llama(2, 512);
  m.kv_heads = 8;
  const step_estimate e = oracle_lora_step(m, 16, 8, recompute::none, "q_proj,v_proj");
  CHECK(e.forward.total() - e.forward.resting == bytes_of(1'402'752));
  // OLMo-2 there: Olmo2RMSNorm multiplies its fp32 normalised tensor by the weight (4 x 32 x 512 = 65,536 B alive, not
  // kept), and layer 0's frozen q, k, v keep no residual, so inputs_embeds is the frame's alone. The profiler measured
  // 1,964,592 B, again 176 B above (zeromem 1,927,184 B before, -1.90%).
  transformer_config o = oracle_olmo2();
  o.hidden = 512;
  o.heads = o.kv_heads = 8;
  o.vocab = 500;
  const step_estimate olmo = oracle_lora_step(o, 16, 8, recompute::none, "q_proj,v_proj");
  CHECK(olmo.forward.total() - olmo.forward.resting == bytes_of(1'964'592 - 176));
}

TEST_CASE("step: LoRA in a post-norm layer under recompute, the frozen norm over the MLP's output differentiated first", "[step][lora]") {
  // OLMo-2 at the oracle's shape (sb = 128), rank 8 on gate_proj alone, full recompute. Layer 1's first node that unpacks
  // a saved tensor is post_feedforward_layernorm's weight multiply: the rerun runs the whole layer, its last saved tensors
  // that norm's. At pow's node the norm holds six fp32 copies (6 x 128 x 256 x 4 = 786,432 B), its x.to(fp32) among them,
  // beside dL/d(layer output) (65,536 B) and every tensor the rerun saved before the norm: q_norm's and k_norm's fp32
  // inputs, x^2 (torch 1's mean keeps its input) and rstd (2 x 131,072 + 512 and 2 x 65,536 + 512), the rotated Q and
  // the repeated K and V (3 x 65,536), the fp32 and bf16 probabilities (131,072 + 65,536), post_attention_layernorm's
  // (2 x 131,072 + 512), gate's adapter (its input's fp32 cast 131,072, lora_A's output 4,096), gate's output cast back,
  // act(gate) and up's output (3 x 131,072): 1,578,496 B. The frozen q, k and v keep nothing of the checkpoint. The
  // profiler measured 2,612,248 B above the resting states, three 8 B scalars among them (zeromem 2,088,448 B before,
  // -20.1%, reading the layer whole beside two gradients with the checkpoint taken out of it).
  const step_estimate e = oracle_lora_step(oracle_olmo2(), 64, 8, recompute::full, "gate_proj");
  CHECK(e.backward.flowing == bytes_of(65'536 + 786'432));
  CHECK(e.backward.recomputed == bytes_of(1'578'496));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(2'612'224));
  // Gemma-2's norm over the MLP's output, q_proj and v_proj adapted: the profiler measured 3,012,658 B (-13.1% before).
  const step_estimate g = oracle_lora_step(oracle_gemma(false), 64, 8, recompute::full, "q_proj,v_proj");
  CHECK(g.backward.flowing == bytes_of(65'536 + 786'432));
  CHECK(g.backward.total() - g.backward.resting == bytes_of(3'012'608));
}

TEST_CASE("step: LoRA in a post-norm layer, an adapted down_proj differentiated after the norm over its output", "[step][lora]") {
  // OLMo-2, ffn 2048, rank 8 on down_proj alone, full recompute. Layer 0's post_feedforward_layernorm has run its
  // node, its saved tensors gone; lora_A's node makes its fp32 input's gradient (128 x 2048 x 4 = 1,048,576 B) beside
  // dL/d(its output) (128 x 8 x 4 = 4,096 B), dL/d(layer output) and dL/d(down's output), the norm's input gradient cast
  // back (2 x 65,536 B). The profiler measured 5,118,992 B above the resting states (zeromem 4,193,792 B before, -18.1%).
  const step_estimate e = oracle_lora_step(oracle_olmo2(2048), 64, 8, recompute::full, "down_proj");
  CHECK(e.backward.flowing == bytes_of(1'048'576 + 4'096 + 2 * 65'536));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(5'118'976));
  // Without recompute, bf16 adapters: layer 0's input needs no gradient, so layer 0 keeps down's adapter's tensors alone
  // (the product lora_A reads and its rank-8 output): the profiler measured 5,845,040 B in forward (+44.9% before, which
  // counted OLMo-2's first layer whole).
  const step_estimate f = oracle_lora_step(oracle_olmo2(2048), 64, 8, recompute::none, "down_proj", dtype::bf16);
  CHECK(f.forward.total() - f.forward.resting == bytes_of(5'845'008));
}

TEST_CASE("step: under recompute, below Gemma-2's first full-attention layer no checkpointed call holds its mask", "[step][recompute]") {
  // Gemma-2 at the oracle's shape: layer 0 slides, layer 1 attends fully. Each checkpointed call holds its own kind's
  // eager mask (b x 1 x s x s bf16: 2 x 64 x 64 x 2 = 16,384 B) until its layer's backward; at layer 0, where the
  // backward peaks, layer 1's call is gone and the full-attention mask with it. What stays beside layer 0's tensors (the
  // profiler's live set there): layer 0's checkpoint, the scaled embedding (65,536 B), the sliding mask (16,384), the
  // bf16 rotary tables (2 x 8,192), the position ids (512) and the token ids (1,024): 99,840 B. The profiler measured
  // 5,011,490 B above the resting states (zeromem 5,026,304 B before, +0.30%); 1,570 B (0.03%) stay unexplained.
  const step_estimate e = oracle_step(oracle_gemma(false), 64, 2, recompute::full);
  CHECK(e.backward.activations == bytes_of(65'536 + 16'384 + 2 * 8'192 + 512 + 1'024));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(5'009'920));
}

TEST_CASE("step: where layers alternate, the model's forward builds both kinds' masks whatever layers it has, and only its layers' rotary pairs",
          "[step][recompute]") {
  // Gemma-3 at the oracle's shape with ffn 2048: 2 layers of a pattern of 6, so both slide. Under full recompute the
  // forward peaks in layer 1's checkpointed forward, where Gemma3TextModel.forward's causal_mask_mapping holds the
  // full-attention mask too (b x 1 x s x s bf16: 2 x 64 x 64 x 2 = 16,384 B), which no checkpointed call holds. Its
  // rotary pairs are built per layer kind present (transformers 5: `for layer_type in set(config.layer_types)`): the
  // local pair alone (bf16, 2 x 64 x 64 x 2 = 16,384 B), the one every call holds. The profiler measured 1,951,234 B
  // above the resting states (zeromem without that mask, -0.84%; 2,016,770 B with the embedding's lookup held beside
  // the scaled copy, as Gemma-2's frame holds it, where Gemma-3's module frees it).
  const step_estimate g = oracle_step(oracle_gemma(true, 2048), 64, 2, recompute::full);
  CHECK(g.forward.total() - g.forward.resting == bytes_of(1'951'232));
  // Its backward holds the sliding layers' mask alone (the profiler: 10,781,458 B).
  CHECK(g.backward.total() - g.backward.resting == bytes_of(10'780'928));
  // At one sequence the mask is half the pair (1 x 64 x 64 x 2 = 8,192 B against 16,384): the profiler measured
  // 984,064 B, where counting the global pair too reads +1.66%.
  const step_estimate g1 = oracle_step(oracle_gemma(true, 2048), 64, 1, recompute::full);
  CHECK(g1.forward.total() - g1.forward.resting == bytes_of(984'064));
  // OLMo-3 (OLMo-2's layers, a window on three layers in four), 2 layers, 128 tokens x 2, a vocabulary of 200, under
  // recompute: at layer 1's checkpointed forward Olmo3Model.forward holds the full-attention mask (2 x 128 x 128 x 2 =
  // 65,536 B) no call holds, and the sliding layers' fp32 pair alone (2 x 128 x 64 x 4 = 65,536 B).
  transformer_config olmo3 = oracle_olmo2();
  olmo3.vocab = 200;
  olmo3.sliding_window = 16;
  olmo3.sliding_window_pattern = 4;
  olmo3.local_rope = true;
  // The profiler measured 2,296,832 B, and 1,181,696 B at one sequence (mask 32,768 B; with the global pair counted
  // too, +5.55%).
  const step_estimate c = oracle_step(olmo3, 128, 2, recompute::full);
  CHECK(c.forward.total() - c.forward.resting == bytes_of(2'296'832));
  const step_estimate c1 = oracle_step(olmo3, 128, 1, recompute::full);
  CHECK(c1.forward.total() - c1.forward.resting == bytes_of(1'181'696));
}

TEST_CASE("step: under recompute, below Gemma-3's first full-attention layer no call holds the global rotary pair",
          "[step][recompute]") {
  // Gemma-3 at the oracle's shape, 7 layers: layer 5 attends fully, the others slide. Transformers 5 passes each layer
  // its own kind's pair, so only layer 5's checkpointed call holds the global pair (bf16 cos and sin, 2 x 64 x 64 x 2 =
  // 16,384 B), as it alone holds the full-attention mask (16,384 B); at layer 0, where the backward peaks, both are gone.
  // What stays beside layer 0's tensors: the scaled embedding (65,536 B), the sliding mask (16,384), the local pair
  // (16,384), the position ids (512) and the token ids (1,024). The profiler measured 11,449,362 B above the resting
  // states (zeromem with the global pair still held, +0.13%).
  transformer_config gemma3 = oracle_gemma(true);
  gemma3.layers = 7;
  const step_estimate e = oracle_step(gemma3, 64, 2, recompute::full);
  CHECK(e.backward.activations == bytes_of(65'536 + 16'384 + 16'384 + 512 + 1'024));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(11'447'808));
}

TEST_CASE("step: under recompute on a CPU, OLMo's fp32 rotation copies rotate_half(q) to fp32 before multiplying it by sin",
          "[step][recompute]") {
  // OLMo's layer (OlmoLayerNorm over an fp32 copy, no norm weights, fp32 rotary tables) at hidden 512, 8 heads and 4 KV
  // heads of 64, ffn 1024, one layer, 16 tokens x 1, bf16, full recompute. The forward peaks in the checkpointed
  // layer's rotation of q: the layer input (16 x 512 x 2 = 16,384 B), the normed input, q, k and v (16,384 + 16,384 +
  // 2 x 8,192), q * cos (fp32, 32,768), rotate_half(q) (16,384), its fp32 copy the CPU makes for the product (32,768)
  // and rotate_half(q) * sin (32,768), beside the fp32 cos and sin (2 x 4,096), the mask (512) and the position and
  // token ids (2 x 128). The profiler measured 189,184 B above the resting states (zeromem without the copy's
  // rotate_half(q), 172,800 B: -8.66%).
  transformer_config m = small_llama(1, 1024);
  m.norm = norm_kind::layernorm;
  m.norm_affine = false;
  m.norm_input_fp32 = m.rope_fp32 = true;
  const step_estimate e = oracle_step(m, 16, 1, recompute::full);
  CHECK(e.forward.total() - e.forward.resting ==
        bytes_of(16'384 + 16'384 + 16'384 + 2 * 8'192 + 32'768 + 16'384 + 32'768 + 32'768 + 2 * 4'096 + 512 + 2 * 128));
}

TEST_CASE("step: LoRA on the MLP alone in a one-layer model: no RoPE node keeps the rotary tables", "[step][lora]") {
  // Hidden 64, 4 heads, ffn 128, one layer, 128 tokens x 2, rank 8 on gate_proj, up_proj and down_proj, no recompute.
  // Nothing before the MLP needs a gradient, so q * cos and k * sin record no node and the bf16 cos and sin (2 x 2 x 128
  // x 16 = 8,192 B) are kept by nothing: the model's forward holds them to its return, before the logits. The profiler
  // measured 3,214,384 B in forward and 3,689,504 B in backward (zeromem 3,222,544 and 3,697,664 B before, +0.25% and
  // +0.22%: the tables, 8,160 B more than measured in both).
  const step_estimate e = oracle_lora_step(llama_layout(64, 4, 4, 1, 128, 1000), 128, 8, recompute::none, "gate_proj,up_proj,down_proj");
  CHECK(e.forward.total() - e.forward.resting == bytes_of(3'214'352));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(3'689'472));
}

TEST_CASE("step: LoRA under recompute, Gemma's rerun goes on through down_proj to its norm's tensors", "[step][lora]") {
  // Gemma-3 at the oracle's shape, rank 8 on every linear, full recompute. Layer 0's rerun starts at
  // post_feedforward_layernorm's multiply by (1 + weight), whose cast back's node made dL/d(its output) in fp32 (131,072
  // B) beside dL/d(layer output) (65,536 B), and runs to that norm's tensors. Its highest moment is down_proj's adapter
  // sum: the layer whole but that norm's four tensors (3,315,200 - 263,680 B; down's adapter's input cast and rank-8
  // output among them), R1 and the MLP norm's output (2 x 65,536), the product (131,072), down's base output (65,536),
  // lora_B's scaled output, the CPU's fp32 copy of the base output and the fp32 sum (3 x 131,072). The profiler measured
  // 4,200,008 B above the resting states (zeromem 3,782,144 B before, -10.0%), the local rotary pair alone built. The
  // frozen embedding's output is the leaf enable_input_require_grads makes, kept by its AccumulateGrad: Gemma-3's is
  // the scaled tensor (the hook sits on Gemma3TextScaledWordEmbedding), so no unscaled lookup is held (65,536 B more
  // measured where the oracle scaled outside the module).
  const step_estimate e = oracle_lora_step(oracle_gemma(true), 64, 8, recompute::full, "all-linear");
  CHECK(e.backward.flowing == bytes_of(65'536 + 131'072));
  CHECK(e.backward.recomputed == bytes_of(3'315'200 - 263'680 + 2 * 65'536 + 131'072 + 65'536 + 3 * 131'072));
  CHECK(e.backward.total() - e.backward.resting == bytes_of(4'199'936));
}

TEST_CASE("step: DeepSpeed ZeRO-3 holds what its module trace keeps gathered, by moment, and nothing in the optimizer step", "[step][zero3]") {
  // Llama-2-7B over 8 ranks, mixed bf16: resting states (2 + 4 + 8) B x 6,738,415,616 / 8 = 11,792,227,328 B in every
  // phase, without DeepSpeed's estimator term (4 B x the embedding's 131,072,000) beside them.
  training_states t{};
  t.zero.stage = 3;
  t.dp = 8;
  const step_estimate e = estimate_step(llama2(), t, sdpa(1024, 1), step_config{});
  CHECK(e.optimizer_step.resting == bytes_of(11'792'227'328));
  CHECK(e.forward.resting == bytes_of(11'792'227'328));
  CHECK(e.optimizer_step.gathered == bytes{});  // foreach's temporaries are above the persistent norms
  // A fused update has none, so the phase's highest moment is after it, where _post_step gathers the 65 persistent
  // norms again: 266,240 x 2 B = 532,480 B.
  step_config fused{};
  fused.optimizer = optimizer_impl::fused;
  const step_estimate after = estimate_step(llama2(), t, sdpa(1024, 1), fused);
  CHECK(after.optimizer_step.gathered == bytes_of(532'480));
  CHECK(after.optimizer_step.optimizer_temporaries == bytes{});
  // At 1024 tokens the forward's loss and the backward's start hold the turnaround's 502,280,192 elements (lm_head and
  // the final norm, layer 31, five modules of layer 30: test_job.cpp) in bf16, 1,004,560,384 B, and beside them the
  // persistent norms of layers 0-30 (stage3_param_persistence_threshold 1e5): 62 x 4,096 x 2 B = 507,904 B.
  CHECK(e.forward.gathered == bytes_of(1'004'560'384 + 507'904));
  CHECK(e.backward.gathered == bytes_of(1'004'560'384 + 507'904));
  // The gradient partitions are one flat buffer made when the optimizer is built, 2 B x 6,738,415,616 / 8 =
  // 1,684,603,904 B, alive in every phase: the forward holds it too, and the optimizer step nothing more.
  CHECK(e.forward.gradients == bytes_of(1'684'603'904));
  CHECK(e.backward.gradients == bytes_of(1'684'603'904));
  CHECK(e.optimizer_step.gradients == bytes_of(1'684'603'904));
  // stage3_max_reuse_distance 0: nothing is kept from the forward to the backward but the 65 persistent norms,
  // 266,240 x 2 B = 532,480 B; the backward loses the turnaround's modules, less the three norms among them
  // (3 x 4,096 x 2 B = 24,576 B).
  runtime_overheads o{};
  o.max_reuse_distance = 0;
  const step_estimate none = estimate_step(llama2(), t, sdpa(1024, 1), step_config{}, pipeline_config{}, o);
  CHECK(none.forward.gathered == bytes_of(532'480));
  CHECK(none.backward.total() == e.backward.total() - bytes_of(1'004'560'384 - 24'576));
  // Threshold 0 too: nothing at all.
  runtime_overheads bare = o;
  bare.param_persistence_threshold = 0;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), step_config{}, pipeline_config{}, bare).forward.gathered == bytes{});
  // At 16 tokens a value model with nothing kept peaks in backward at the embedding's backward: the table gathered for
  // it, 32,000 x 4,096 = 131,072,000 elements in bf16 (262,144,000 B), and its new whole bf16 gradient, as large,
  // before its hook copies it into the bucket, beside the buffer. Layer 0's moment holds less: one of its modules
  // (gate, up or down, 45,088,768 elements) and its gradient, 4 B x 45,088,768 = 180,355,072 B; the head's, the final
  // norm alone. (With lm_head, its moment is higher: the table-sized head gathered and its gradient, and the logits.)
  // The 65 persistent norms (532,480 B) stand beside the table.
  step_config critic{};
  critic.value_head = true;
  const step_estimate few = estimate_step(llama2(), t, sdpa(16, 1), critic, pipeline_config{}, o);
  CHECK(few.backward.gathered == bytes_of(262'144'000 + 532'480));
  CHECK(few.backward.gradients == bytes_of(1'684'603'904 + 262'144'000));
  // A negative distance is refused by the step itself, not taken as 0.
  o.max_reuse_distance = -1;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, sdpa(1024, 1), step_config{}, pipeline_config{}, o), Catch::Contains("max_reuse_distance cannot be negative"));
  // A value model (an RLHF critic): no lm_head in the trace, only the final norm (4,096) before the scalar head, so the
  // top layers are kept instead: 2 (202,379,264 + k 202,383,360 + 4,096) < 1e9 holds for k = 0 and 1, two whole layers;
  // the third from the top keeps down, up and gate (2 x 90,177,536 < 1e9 - 2 (2 x 202,383,360 + 4,096) = 190,458,368;
  // o would need 2 x 135,266,304). Beside them the persistent norms of layers 0-29, 30 x 2 x 4,096.
  step_config value{};
  value.value_head = true;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), value).forward.gathered ==
        bytes_of((4'096 + 2 * 202'383'360LL + 135'266'304 + 30 * 8'192) * 2));
}

TEST_CASE("step: under ZeRO-3 PEFT's adapters below the persistence threshold stay gathered at every moment", "[step][zero3][lora]") {
  // Llama-2-7B over 8 ranks, mixed bf16, LoRA r = 16 on q_proj and v_proj: each lora_A (16 x 4096) and lora_B
  // (4096 x 16) is 65,536 elements, at most 1e5, so DeepSpeed marks all 4 x 32 = 128 of them ds_persist:
  // 8,388,608 elements, 16,777,216 B in bf16 (the adapters' dtype beside an fp32 master copy). A threshold of 65,535
  // keeps the same base tensors (the norms, 4,096; every projection is above 1e5) and no adapter, so every moment
  // differs by exactly that.
  training_states t{};
  t.zero.stage = 3;
  t.dp = 8;
  t.adapt.lora.rank = 16;
  t.adapt.lora.targets = parse_lora_targets("q_proj,v_proj");
  runtime_overheads below{};
  below.param_persistence_threshold = 65'535;
  step_config fused{};
  fused.optimizer = optimizer_impl::fused;  // the optimizer step's highest moment is _post_step's gather
  const step_estimate e = estimate_step(llama2(), t, sdpa(1024, 1), fused);
  const step_estimate without = estimate_step(llama2(), t, sdpa(1024, 1), fused, pipeline_config{}, below);
  constexpr std::int64_t adapters = 4 * 65'536 * 32 * 2;
  static_assert(adapters == 16'777'216);
  CHECK(e.forward.gathered == without.forward.gathered + bytes_of(adapters));
  CHECK(e.backward.gathered == without.backward.gathered + bytes_of(adapters));
  CHECK(e.optimizer_step.gathered == without.optimizer_step.gathered + bytes_of(adapters));
  // After the update _post_step gathers the persistent tensors again: the 65 norms (266,240 elements) and the adapters.
  CHECK(e.optimizer_step.gathered == bytes_of(266'240 * 2 + adapters));
  // r = 32: each tensor is 131,072 elements, none persists; over 2 tensor-parallel ranks each is 65,536 on a rank, and
  // all persist again: 128 x 65,536 x 2 B, the same 16,777,216 B.
  t.adapt.lora.rank = 32;
  CHECK(estimate_step(llama2(), t, sdpa(1024, 1), fused).optimizer_step.gathered == bytes_of(266'240 * 2));
  activation_config split = sdpa(1024, 1);
  split.tp = 2;
  const step_estimate halves = estimate_step(llama2(), t, split, fused);
  const step_estimate halves_without = estimate_step(llama2(), t, split, fused, pipeline_config{}, below);
  CHECK(halves.forward.gathered == halves_without.forward.gathered + bytes_of(adapters));
}

TEST_CASE("step: DeepSpeed 0.16.x's ZeRO-3 backward keeps what it gathers, so the embedding's holds the whole model", "[step][zero3]") {
  // Llama-2-7B over 8 ranks under full recompute at 1024 tokens, the defect walked (step_config::
  // zero3_backward_keeps_gathered): the embedding's backward holds every parameter, 6,738,415,616 x 2 B, with every
  // gradient partition (1,684,603,904 B) and the embedding's new whole gradient (262,144,000 B), the activations gone.
  training_states t{};
  t.zero.stage = 3;
  t.dp = 8;
  activation_config a = sdpa(1024, 1);
  a.recomputation = recompute::full;
  step_config leak{};
  leak.zero3_backward_keeps_gathered = true;
  const step_estimate e = estimate_step(llama2(), t, a, leak);
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gathered == bytes_of(13'476'831'232));
  CHECK(e.backward.gradients == bytes_of(1'684'603'904 + 262'144'000));
  CHECK(e.backward.activations == bytes{});
  // Without the defect the same moment gathers the table alone.
  CHECK(estimate_step(llama2(), t, a, step_config{}).backward.gathered < bytes_of(13'476'831'232 / 4));
  // The defect is ZeRO-3's: elsewhere it is refused, not ignored.
  t.zero.stage = 2;
  CHECK_THROWS_WITH(estimate_step(llama2(), t, a, leak), Catch::Contains("is a ZeRO-3 defect"));
}

TEST_CASE("step: ZeRO-2 makes its gradient partition at the bucket's first reduction, and a new gradient is whole until its hook", "[step][zero3]") {
  // Llama-2-7B over 8 ranks, mixed bf16, at stage 2: the 16-bit partition is 2 B x 6,738,415,616 / 8 = 1,684,603,904 B,
  // held in the optimizer step whatever the bucket. The head hands the bucket lm_head's 32,000 x 4,096 = 131,072,000
  // and the final norm's 4,096 elements (131,076,096), each layer 4 x 4,096^2 + 3 x 4,096 x 11,008 + 2 x 4,096 =
  // 202,383,360.
  training_states t{};
  t.zero.stage = 2;
  t.dp = 8;
  runtime_overheads o{};
  const auto at = [&](std::int64_t tokens, std::int64_t bucket) {
    o.reduce_bucket_size = bucket;
    return estimate_step(llama2(), t, sdpa(tokens, 1), step_config{}, pipeline_config{}, o);
  };
  // reduce_bucket_size 5e8: 131,076,096 + 202,383,360 = 333,459,456 fit after layer 31, and layer 30's pass it
  // (535,842,816): the bucket is first reduced in layer 30, which holds the partition beside one module's whole new
  // gradient (gate, up or down: 4,096 x 11,008 x 2 B = 90,177,536 B); at 1024 tokens that is the backward's peak.
  const step_estimate five = at(1024, 500'000'000);
  CHECK(five.optimizer_step.gradients == bytes_of(1'684'603'904));
  CHECK(five.backward.gradients == bytes_of(1'684'603'904 + 90'177'536));
  // 3e8: reduced already in layer 31, one layer higher, so the partition stands beside layer 31's saved tensors too.
  const step_estimate three = at(1024, 300'000'000);
  CHECK(three.backward.gradients == bytes_of(1'684'603'904 + 90'177'536));
  CHECK(three.backward.activations > five.backward.activations);
  // 1e10, above the rank's 6,738,415,616 parameters: no reduction before the backward's end, no partition in it. At 64
  // tokens lm_head's moment is the highest: its new whole gradient, 131,072,000 x 2 B = 262,144,000 B, beside the
  // logits' gradient (64 x 32,000 x 2 B = 4,096,000 B).
  const step_estimate none = at(64, 10'000'000'000);
  CHECK(none.backward.gradients == bytes_of(262'144'000));
  CHECK(none.backward.loss == bytes_of(4'096'000));
  CHECK(none.optimizer_step.gradients == bytes_of(1'684'603'904));
}

TEST_CASE("step: ZeRO-2 reads the attention input's node at the layer where its partition appears", "[step][zero3]") {
  // Llama-2-7B's layout with a narrow MLP (intermediate 2,048), pure bf16 over 8 ranks at stage 2, 256 tokens, the 5e8
  // bucket. A layer holds 4 x 4,096^2 + 3 x 4,096 x 2,048 + 2 x 4,096 = 92,282,880 parameters; the head hands the bucket
  // 32,000 x 4,096 + 4,096 = 131,076,096. After layers 31, 30 and 29 it holds 407,924,736 <= 5e8; layer 28's pass it
  // (500,207,616), so layer 28 is the first to hold the 16-bit partition: 2 x (2 x 131,072,000 + 32 x 92,282,880 +
  // 4,096) / 8 = 803,800,064 B. There the attention input's node (q_proj's: the weight's gradient made, its input still
  // kept) holds the partition beside q_proj's whole new gradient (4,096^2 x 2 B = 33,554,432 B) and the gradients
  // flowing into it: the layer's output gradient (256 x 4,096 x 2 B = 2,097,152 B), q's (the same) and k's and v's
  // (2 x 2,097,152 B), 8,388,608 B in all. Read at layers 31 and 0 only, the backward missed it: the partition is not
  // there at 31, and at 0 the saved tensors of layers 1-28 are gone.
  transformer_config m = llama2();
  m.ffn = 2048;
  training_states t = pure_bf16();
  t.zero.stage = 2;
  t.dp = 8;
  const step_estimate e = estimate_step(m, t, sdpa(256, 1), step_config{});
  CHECK(e.optimizer_step.gradients == bytes_of(803'800'064));
  CHECK(e.peak_phase == step_phase::backward);
  CHECK(e.backward.gradients == bytes_of(803'800'064 + 33'554'432));
  CHECK(e.backward.flowing == bytes_of(8'388'608));
}

TEST_CASE("step: ZeRO-2's learned positions make a whole new table before their hook", "[step][zero3]") {
  // A GPT-2 layout, untied, 2 layers of 768, a vocabulary of 500 beside 8,192 positions, pure bf16 over 2 ranks at
  // stage 2, 16 tokens. The model's 21,236,736 parameters (2 layers x 7,087,872 + 8,192 x 768 positions + 2 x 500 x
  // 768 token tables + ln_f's 1,536) never fill the 5e8 bucket, so the partition is made after the backward, and its highest moment is the position embedding's: its new whole table, 8,192 x 768 x 2 B =
  // 12,582,912 B, above a layer's largest new gradient (768 x 3,072 x 2 B = 4,718,592 B) and the token table's (500 x
  // 768 x 2 B = 768,000 B).
  const transformer_config m = parse_hf_config(
      R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 2, "n_head": 12, "n_inner": 3072, "vocab_size": 500, "n_positions": 8192,
          "activation_function": "gelu_new", "tie_word_embeddings": false, "use_cache": false, "attn_pdrop": 0.0, "resid_pdrop": 0.0,
          "embd_pdrop": 0.0})");
  training_states t = pure_bf16();
  t.zero.stage = 2;
  t.dp = 2;
  const step_estimate e = estimate_step(m, t, sdpa(16, 1), step_config{});
  CHECK(e.backward.gradients == bytes_of(12'582'912));
}

TEST_CASE("step: at DeepSpeed stages 2-3 a gradient autograd has just made is whole, not a partition's share", "[step][zero3]") {
  // Gemma-7B (tied, 8,537,680,896 parameters, a 256,000 x 3,072 table: 786,432,000 elements, 1,572,864,000 B in bf16)
  // over 8 ranks at 16 tokens. The stages keep gradient partitions, 2 B x 8,537,680,896 / 8 = 2,134,420,224 B, which
  // stand for none of the table's three whole gradients at the end: lm_head's, waiting in the input buffer since the
  // head's backward, the embedding's new one and their sum, 3 x 1,572,864,000 B, before the hook reduces them.
  const transformer_config gemma = preset_config("gemma-7b");
  for (const int stage : {2, 3}) {
    INFO("stage " << stage);
    training_states t{};
    t.zero.stage = stage;
    t.dp = 8;
    const step_estimate e = estimate_step(gemma, t, sdpa(16, 1), step_config{});
    CHECK(e.peak_phase == step_phase::backward);
    CHECK(e.backward.gradients == bytes_of(2'134'420'224 + 3 * 1'572'864'000LL));
    // ZeRO-3 gathers the table again for the embedding's backward (the 7.75e9 elements between the two nodes are past 1e9),
    // beside the persistent norms: 28 x 2 + 1 of 3,072, 175,104 elements in bf16 (350,208 B).
    CHECK(e.backward.gathered == bytes_of(stage == 3 ? 1'572'864'000 + 350'208 : 0));
  }
}
