// The five reported out-of-memory cases (shared/SCENARIOS.md), rebuilt from zeromem's own parts. Each
// scenario gives cases (the reported configuration and the fix) with their breakdowns and verdicts, and says
// what it cannot explain instead of tuning a constant. Builds values and strings; does no I/O.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zeromem/format.hpp"
#include "zeromem/job.hpp"
#include "zeromem/kv_cache.hpp"
#include "zeromem/vllm.hpp"

namespace zeromem {

struct scenario_case {
  std::string label;
  bool reported_fits = false;  // what the report says happened
  job_breakdown job;
  bool reported = true;        // false: no report covers this case; only zeromem's verdict is shown
};

struct scenario {
  std::string name;
  std::string title;
  std::vector<std::string> configuration;  // one line each
  std::vector<scenario_case> cases;
  std::vector<std::string> findings;       // what the numbers show, and what is left unexplained
};

namespace detail {
inline std::string gib(bytes b) { return format_bytes(b, size_unit::GiB); }
inline std::string gb(bytes b) { return format_bytes(b, size_unit::GB); }

inline training_states trained(elements params, int stage, std::int64_t dp, std::int64_t gpus_per_node,
                               offload_device optimizer, elements largest_layer) {
  training_states t{};
  t.params = params;
  t.recipe = recipe_of(precision::mixed_bf16);
  t.optimizer.kind = optimizer_kind::adamw;
  t.zero.stage = stage;
  t.zero.optimizer = {optimizer, optimizer != offload_device::none};
  t.dp = dp;
  t.gpus_per_node = gpus_per_node;
  t.largest_layer = needs_largest_layer(t.zero) ? largest_layer : elements{};
  return t;
}
}  // namespace detail

// ---- openrlhf-70b-ppo ------------------------------------------------------------------------------

/// OpenRLHF PPO on Llama-3-70B: the actor under ZeRO-3 with Adam on the CPU, gradient checkpointing, on
/// `nodes` x 8 A800 80GB. DeepSpeed 0.16.x keeps every gathered parameter during backward.
inline job_breakdown openrlhf_70b_actor(std::int64_t nodes, bool deepspeed_016, std::int64_t micro_batch = 1) {
  const transformer_config& m = find_preset("llama-3-70b").config;
  const parameter_counts c = count_parameters(m);
  job_breakdown job{};
  job.gpu_capacity = find_gpu("a100-80gb").capacity;
  const runtime_overheads o{};
  known_defects defects{};
  defects.deepspeed_016_zero3_checkpointing_leak = deepspeed_016;
  const training_states t = detail::trained(c.total, 3, nodes * 8, 8, offload_device::cpu, c.largest_layer);
  add_model_states(job, "actor", t);
  if (defects.deepspeed_016_zero3_checkpointing_leak)
    job.add("actor", "gathered parameters kept through backward (DeepSpeed 0.16.x defect)",
            c.total * size_of(dtype::bf16), bytes{}, "DeepSpeed issue #7116 / PR #6726");
  job.add("actor", "DeepSpeed buffers (reduce bucket x2, prefetch)", deepspeed_buffers(3, o));
  activation_config a{};
  a.seq_len = 2048;  // prompt_max_len 1024 + generate_max_len 1024
  a.micro_batch = micro_batch;
  a.recomputation = recompute::full;  // gradient checkpointing
  a.attention = attention_kind::flash;
  a.impl = implementation::hf;
  add_activations(job, "actor", m, a);
  job.add("actor", "CUDA context", o.cuda_context);
  return job;
}

inline scenario openrlhf_70b_ppo() {
  scenario s{};
  s.name = "openrlhf-70b-ppo";
  s.title = "OpenRLHF, PPO on Llama-3-70B: ZeRO-3 actor, Adam on CPU, gradient checkpointing";
  s.configuration = {"actor: Llama-3-70B (70,553,706,496 parameters), ZeRO-3 over nodes x 8 A800 80GB, bf16, Adam offloaded to CPU",
                     "sequences of 1024 + 1024 tokens, micro-batch 1 (assumed; not in the report), flash attention, full recompute",
                     "DeepSpeed 0.15.0 (healthy) vs 0.16.x (gathered ZeRO-3 parameters not released under checkpointing)"};
  s.cases.push_back({"DeepSpeed 0.16.x, 4 nodes (reported)", false, openrlhf_70b_actor(4, true)});
  s.cases.push_back({"DeepSpeed 0.16.x, 8 nodes (more nodes: reported not to help)", false, openrlhf_70b_actor(8, true)});
  s.cases.push_back({"DeepSpeed 0.15.0, 4 nodes (reported fix)", true, openrlhf_70b_actor(4, false)});
  const bytes leak = count_parameters(find_preset("llama-3-70b").config).total * size_of(dtype::bf16);
  s.findings = {"the defect keeps the whole 16-bit model, " + detail::gib(leak) + ", on every GPU during backward: more than the " +
                    detail::gib(s.cases[0].job.gpu_capacity) + " an A800 80GB holds, and a number that does not shrink with more nodes",
                "healthy ZeRO-3 releases gathered parameters to stay under stage3_max_live_parameters: at most " +
                    detail::gib(zero3_live_parameter_bound(runtime_overheads{}, count_parameters(find_preset("llama-3-70b").config).total)) +
                    " at once; it needs " + detail::gib(s.cases[2].job.gpu_total()) + " per GPU on 4 nodes"};
  return s;
}

// ---- openrlhf-zero2-vs-zero3 -----------------------------------------------------------------------

/// OpenRLHF with a 7B actor on `gpus` GPUs: under ZeRO-2 the reference and reward models run unsharded
/// (stage 0); under ZeRO-3 they are sharded too. Model states and CUDA context only.
inline job_breakdown openrlhf_7b_states(int stage, std::int64_t gpus) {
  const transformer_config& m = find_preset("llama-2-7b").config;
  const parameter_counts c = count_parameters(m);
  job_breakdown job{};
  job.gpu_capacity = find_gpu("a100-80gb").capacity;
  add_model_states(job, "actor", detail::trained(c.total, stage, gpus, gpus < 8 ? gpus : 8, offload_device::none, c.largest_layer));
  const std::int64_t frozen_shard = stage == 3 ? gpus : 1;
  add_frozen_weights(job, "reference", c.total, frozen_shard, 8, false);
  add_frozen_weights(job, "reward", c.total, frozen_shard, 8, false);
  job.add("all", "CUDA context", runtime_overheads{}.cuda_context);
  return job;
}

inline scenario openrlhf_zero2_vs_zero3() {
  scenario s{};
  s.name = "openrlhf-zero2-vs-zero3";
  s.title = "OpenRLHF: per-GPU memory against the actor's GPU count, ZeRO-2 vs ZeRO-3 (7B actor, reference, reward)";
  s.configuration = {"actor Llama-2-7B (6,738,415,616 parameters), mixed bf16 AdamW on the GPU; reference and reward 7B in bf16",
                     "ZeRO-2: actor optimizer states and gradients sharded; reference and reward whole on every GPU",
                     "ZeRO-3: everything sharded over the actor's GPUs; model states only (no activations)"};
  for (std::int64_t g : {1, 2, 4, 8, 16, 32, 64}) {
    for (int stage : {2, 3}) {
      s.cases.push_back({"ZeRO-" + std::to_string(stage) + ", " + std::to_string(g) + " GPUs", false, openrlhf_7b_states(stage, g), false});
    }
  }
  const bytes floor2 = count_parameters(find_preset("llama-2-7b").config).total * size_of(dtype::bf16) * 3;
  s.findings = {"ZeRO-2 falls towards a floor of three replicated 16-bit models (actor, reference, reward): " + detail::gib(floor2) +
                " per GPU however many GPUs; ZeRO-3 keeps falling as 1/N",
                "this scenario has no failure report of its own: the verdicts are zeromem's, shown for the trend"};
  return s;
}

// ---- orz-1.5b-ppo ----------------------------------------------------------------------------------

/// Open-Reasoner-Zero, PPO on Qwen2.5-1.5B: policy, critic, reference and one vLLM engine on each of 4 A100 80GB.
inline job_breakdown orz_15b(double gpu_memory_utilization) {
  const transformer_config& m = find_preset("qwen2.5-1.5b").config;
  const parameter_counts c = count_parameters(m);
  const runtime_overheads o{};
  job_breakdown job{};
  job.gpu_capacity = find_gpu("a100-80gb").capacity;
  // vLLM 0.6.5 (per-instance budget) sizes its KV cache on an empty GPU, is offloaded, and comes back with the
  // same KV cache next to the DeepSpeed states. Tensor parallel 1, eager (no CUDA graphs), block size 256.
  vllm_engine_config v{};
  v.total = job.gpu_capacity;
  v.gpu_memory_utilization = gpu_memory_utilization;
  v.semantics = vllm_semantics::per_instance;
  v.weights = c.total * size_of(dtype::bf16);
  v.non_torch = o.cuda_context;
  v.activation_peak = bytes{};  // not modelled: see the findings
  kv_cache_config kv{};
  kv.block_size = 256;
  v.kv_block = kv_bytes_per_block(m, kv);
  const vllm_engine_memory e = vllm_engine(v);
  job.add("vLLM", "weights (bf16)", v.weights);
  job.add("vLLM", "KV cache", e.kv_cache, bytes{}, std::to_string(e.kv_blocks) + " blocks of 256 tokens");
  job.add("vLLM", "CUDA context (non-torch)", v.non_torch);
  // DeepSpeed ZeRO-3 over the 4 GPUs, bf16, Adam on the GPU.
  add_model_states(job, "policy", detail::trained(c.total, 3, 4, 4, offload_device::none, c.largest_layer));
  job.add("policy", "DeepSpeed buffers", deepspeed_buffers(3, o));
  job.add("policy", "CUDA context", o.cuda_context);
  // The critic: the backbone without an output layer (tied here, so the same count) and a 1-output value head.
  const elements critic = c.total + elements_of(m.hidden);
  add_model_states(job, "critic", detail::trained(critic, 3, 4, 4, offload_device::none, c.largest_layer));
  job.add("critic", "DeepSpeed buffers", deepspeed_buffers(3, o));
  job.add("critic", "CUDA context", o.cuda_context);
  add_frozen_weights(job, "reference", c.total, 4, 4, false);
  job.add("reference", "CUDA context", o.cuda_context);
  return job;
}

inline scenario orz_15b_ppo() {
  scenario s{};
  s.name = "orz-1.5b-ppo";
  s.title = "Open-Reasoner-Zero, PPO on Qwen2.5-1.5B, everything colocated on 4 A100 80GB";
  s.configuration = {"policy and critic (ZeRO-3 over 4 GPUs, bf16, AdamW on the GPU), reference (bf16, ZeRO-3), one vLLM engine per GPU",
                     "vLLM 0.6.5: KV cache sized on an empty GPU (per-instance budget), offloaded, reloaded next to the DeepSpeed states",
                     "failure at model load; the report: 'total capacity of 79.35 GiB of which 278.19 MiB is free ... 66.85 GiB is allocated by PyTorch'"};
  s.cases.push_back({"gpu_memory_utilization 0.85 (reported)", false, orz_15b(0.85)});
  s.cases.push_back({"gpu_memory_utilization 0.5 (reported fix)", true, orz_15b(0.5)});
  const job_breakdown& bad = s.cases[0].job;
  const bytes vllm_torch = bad.terms[0].gpu + bad.terms[1].gpu;  // weights + KV: what vLLM's PyTorch allocator holds
  const bytes reported = bytes_from(66.85L, size_unit::GiB);
  bytes at_load = bad.gpu_total();  // at model load, no layer is gathered and the buckets may not exist yet
  for (const memory_term& t : bad.terms)
    if (t.term == "gathered_layer" || t.term == "DeepSpeed buffers") at_load -= t.gpu;
  s.findings = {"vLLM sized its KV cache for an empty GPU; with the DeepSpeed states beside it the GPU needs " + detail::gib(bad.gpu_total()) +
                    " of 79.35 GiB; without gathered layers and DeepSpeed buffers (perhaps not yet allocated at model load) "
                    "still " + detail::gib(at_load),
                "the report's 66.85 GiB allocated by PyTorch matches vLLM's weights + KV cache: zeromem gives " + detail::gib(vllm_torch) +
                    ", " + detail::gib(vllm_torch - reported) +
                    " more; vLLM's profiled activation peak, which zeromem leaves at 0 here, shrinks the KV cache by its size "
                    "and would account for a difference of this kind, but the report does not give it"};
  return s;
}

// ---- easyr1-vl-7b-grpo -----------------------------------------------------------------------------

/// EasyR1, GRPO on Qwen2.5-VL-7B, one node of 8 A100 40GB and 760 GB of host RAM. `offload` turns FSDP's
/// offload_params and offload_optimizer on (the reported run) or off (the fix).
inline job_breakdown easyr1_vl_7b(bool offload, bytes unexplained_host) {
  const transformer_config& m = find_preset("qwen2.5-vl-7b").config;
  const parameter_counts c = count_parameters(m);
  const runtime_overheads o{};
  job_breakdown job{};
  job.gpu_capacity = find_gpu("a100-40gb").capacity;
  job.host_capacity = bytes_of(760'000'000'000LL);
  job.host_threshold = 0.95;
  // The actor in fp32 under FSDP FULL_SHARD over 8 GPUs, AdamW: parameters and both moments fp32.
  const bytes params = largest_share(c.total * size_of(dtype::fp32), 8);
  const bytes adam = largest_share(c.total * (size_of(dtype::fp32) * 2), 8);
  if (offload) {
    job.add("actor", "fp32 parameters (offload_params)", bytes{}, params * 8);
    job.add("actor", "AdamW moments (offload_optimizer)", bytes{}, adam * 8);
  } else {
    job.add("actor", "fp32 parameters", params);
    job.add("actor", "AdamW moments", adam);
  }
  add_frozen_weights(job, "reference", c.total, 8, 8, /*offloaded=*/true);
  // vLLM, tensor parallel 2, sleep level 1: while asleep each engine keeps its bf16 weights in host RAM.
  const std::int64_t engines = 8 / 2;
  job.add("vLLM", "bf16 weights of 4 sleeping engines (level 1)", bytes{},
          vllm_sleep_host_bytes(1, c.total * size_of(dtype::bf16)) * engines);
  // Awake during rollout: 0.6 x 40 GiB per GPU, per-instance budget (weights, activations, KV inside it).
  job.add("vLLM", "gpu_memory_utilization 0.6 x 40 GiB (rollout)", bytes_from(0.6L * 40, size_unit::GiB));
  job.add("all", "CUDA context", o.cuda_context);
  job.unexplained_host = unexplained_host;
  return job;
}

inline bytes easyr1_reported_host() { return bytes_from(726.33L, size_unit::GB); }

inline scenario easyr1_vl_7b_grpo() {
  scenario s{};
  s.name = "easyr1-vl-7b-grpo";
  s.title = "EasyR1, GRPO on Qwen2.5-VL-7B: host RAM against Ray's 95% threshold (1 node, 8 x A100 40GB, 760 GB)";
  s.configuration = {"actor Qwen2.5-VL-7B (8,292,166,656 parameters) in fp32 under FSDP, AdamW; reference offloaded (bf16)",
                     "vLLM tensor parallel 2, gpu_memory_utilization 0.6, sleep level 1; rollout n 5, 1024 + 1024 tokens",
                     "failure: Ray OutOfMemoryError, node memory 726.33 GB / 760.00 GB (0.9557) over the 0.95 threshold"};
  const job_breakdown modelled = easyr1_vl_7b(true, bytes{});
  const bytes unexplained = easyr1_reported_host() - modelled.host_total();
  s.cases.push_back({"offload_params + offload_optimizer on (reported)", false, easyr1_vl_7b(true, unexplained)});
  s.cases.push_back({"both offloads off (reported fix)", true, easyr1_vl_7b(false, unexplained)});
  s.findings = {"modelled host RAM: " + detail::gb(modelled.host_total()) + " of the reported 726.33 GB; " + detail::gb(unexplained) +
                    " (" + std::to_string(static_cast<int>(100 * (unexplained / easyr1_reported_host()))) +
                    "%) is not explained by any modelled component (per-process host memory of Ray workers, "
                    "PyTorch and CUDA runtimes, pinned staging buffers, dataloaders)",
                "the verdicts assume that unexplained part stays the same with the offloads off: turning them off moves " +
                    detail::gb(modelled.host_total() - easyr1_vl_7b(false, bytes{}).host_total()) +
                    " of fp32 parameters and moments from host RAM to the GPUs, under Ray's limit of " + detail::gb(modelled.host_limit())};
  return s;
}

// ---- logic-rl-7b-grpo ------------------------------------------------------------------------------

/// Bytes per token that one forward/backward of Logic-RL's actor (verl, FSDP, everything offloaded,
/// gradient checkpointing, padding removed) keeps at its peak: the checkpointed layer inputs, one layer being
/// recomputed, and `vocab_bytes` bytes per vocabulary entry of logits-sized tensors.
struct logic_rl_costs {
  bytes per_token{};
  bytes resident{};  // per GPU, independent of the batch: the largest gathered FSDP unit, CUDA context
};

inline logic_rl_costs logic_rl_costs_for(std::int64_t vocab_bytes) {
  const transformer_config& m = find_preset("qwen2.5-7b").config;
  const parameter_counts c = count_parameters(m);
  activation_config a{};
  a.seq_len = 1;  // per token (flash attention: no s^2 terms, so everything is linear in tokens)
  a.attention = attention_kind::flash;
  a.impl = implementation::hf;
  a.recomputation = recompute::full;
  const bytes checkpoints = layer_activation_bytes(m, a).total() * m.layers;  // layer inputs, 2h each
  a.recomputation = recompute::none;
  const bytes recomputed_layer = layer_activation_bytes(m, a).total();        // one layer rebuilt in backward
  logic_rl_costs k{};
  k.per_token = checkpoints + recomputed_layer + elements_of(m.vocab) * bytes_per_element_of(vocab_bytes);
  k.resident = c.embedding * size_of(dtype::bf16) + runtime_overheads{}.cuda_context;  // largest FSDP unit gathered
  return k;
}

inline job_breakdown logic_rl_case(std::int64_t sequences_per_gpu, std::int64_t tokens_per_sequence, std::int64_t vocab_bytes) {
  const logic_rl_costs k = logic_rl_costs_for(vocab_bytes);
  job_breakdown job{};
  job.gpu_capacity = find_gpu("a100-80gb").capacity;
  job.add("actor", "largest FSDP unit gathered (embedding, bf16) + CUDA context", k.resident);
  job.add("actor", "checkpoints, one recomputed layer, logits-sized tensors",
          k.per_token * detail::checked_mul(sequences_per_gpu, tokens_per_sequence), bytes{},
          std::to_string(sequences_per_gpu) + " sequences x " + std::to_string(tokens_per_sequence) + " tokens");
  return job;
}

/// The range of mean tokens per sequence for which 48 sequences per GPU fit and 64 do not.
struct token_range {
  std::int64_t lowest_failing_64 = 0;  // 64 sequences of more than this many tokens do not fit
  std::int64_t highest_fitting_48 = 0; // 48 sequences of up to this many tokens fit
};
inline token_range logic_rl_token_range(std::int64_t vocab_bytes) {
  const logic_rl_costs k = logic_rl_costs_for(vocab_bytes);
  const std::int64_t room = (find_gpu("a100-80gb").capacity - k.resident).count();
  return {room / (64 * k.per_token.count()), room / (48 * k.per_token.count())};
}

inline scenario logic_rl_7b_grpo() {
  scenario s{};
  s.name = "logic-rl-7b-grpo";
  s.title = "Logic-RL (verl), GRPO on Qwen2.5-7B-Instruct-1M: sequences per GPU against full-vocabulary logits";
  s.configuration = {"verl, FSDP with actor parameters, gradients and optimizer offloaded to CPU; gradient checkpointing; padding removed",
                     "prompts up to 400 tokens, responses up to 2048; one pass holds train_batch_size x rollout.n / 4 sequences per GPU",
                     "logits-sized tensors per token: bf16 logits (2 B), fp32 log-softmax (4 B), softmax for the entropy (2 B) = 8 B x 152,064"};
  const std::int64_t vb = 8;
  const token_range r = logic_rl_token_range(vb);
  const std::int64_t t = (r.lowest_failing_64 + r.highest_fitting_48) / 2 + 1;
  s.cases.push_back({"train_batch_size 8, rollout.n 32: 64 sequences per GPU (reported OOM)", false, logic_rl_case(64, t, vb)});
  s.cases.push_back({"train_batch_size 4, rollout.n 32: 32 sequences per GPU (reported fine)", true, logic_rl_case(32, t, vb)});
  s.cases.push_back({"train_batch_size 4, rollout.n 64: 64 sequences per GPU (reported OOM)", false, logic_rl_case(64, t, vb)});
  // The 48-sequence report ran on an H100 (about 79.1-79.2 GiB usable); the case uses the A100's 79.35 GiB.
  s.cases.push_back({"train_batch_size 4, rollout.n 48: 48 sequences per GPU (reported fine, H100)", true, logic_rl_case(48, t, vb)});
  const logic_rl_costs k = logic_rl_costs_for(vb);
  const token_range r6 = logic_rl_token_range(6);
  s.findings = {"per token: " + std::to_string(k.per_token.count()) + " B, of which logits-sized tensors " +
                    std::to_string(152064 * vb) + " B: the vocabulary dominates, so lowering ppo_micro_batch_size (which verl "
                    "overrides) cannot help",
                "all four reports hold when sequences average between " + std::to_string(r.lowest_failing_64 + 1) + " and " +
                    std::to_string(r.highest_fitting_48) + " tokens (prompt + response); the cases use " + std::to_string(t),
                "at the maximum 2448 tokens even 32 sequences would need " + detail::gib(logic_rl_case(32, 2448, vb).gpu_total()) +
                    ", contradicting the report that 32 fit: responses were far shorter than the 2048 limit",
                "with 6 B per vocabulary entry instead (no bf16 softmax kept) the range is " + std::to_string(r6.lowest_failing_64 + 1) +
                    "-" + std::to_string(r6.highest_fitting_48) + " tokens; the reports cannot separate the two assumptions"};
  return s;
}

inline std::vector<std::string> scenario_names() {
  return {"orz-1.5b-ppo", "logic-rl-7b-grpo", "openrlhf-70b-ppo", "openrlhf-zero2-vs-zero3", "easyr1-vl-7b-grpo"};
}

inline scenario find_scenario(const std::string& name) {
  if (name == "orz-1.5b-ppo") return orz_15b_ppo();
  if (name == "logic-rl-7b-grpo") return logic_rl_7b_grpo();
  if (name == "openrlhf-70b-ppo") return openrlhf_70b_ppo();
  if (name == "openrlhf-zero2-vs-zero3") return openrlhf_zero2_vs_zero3();
  if (name == "easyr1-vl-7b-grpo") return easyr1_vl_7b_grpo();
  detail::fail("unknown scenario " + detail::quoted(name) + "; expected one of " +
               detail::join_names(scenario_names(), ", ", [](const std::string& n) { return n; }));
}

}  // namespace zeromem
