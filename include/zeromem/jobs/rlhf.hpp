// RLHF jobs as frameworks run them: roles (actor, critic, reference, reward) and rollout engines placed on GPU
// groups, evaluated phase by phase (rollout, experience making, training) on the most loaded GPU and in one
// node's host RAM, each phase with its verdict. Builds values and strings; does no I/O.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeromem/inference/forward.hpp"
#include "zeromem/jobs/job.hpp"
#include "zeromem/inference/kv_cache.hpp"
#include "zeromem/jobs/step.hpp"
#include "zeromem/inference/vllm.hpp"
#include "zeromem/inference/sglang.hpp"

namespace zeromem {

enum class rlhf_framework { openrlhf, verl };
enum class rlhf_phase { rollout, experience, training };

constexpr std::string_view name(rlhf_framework f) { return f == rlhf_framework::openrlhf ? "openrlhf" : "verl"; }
constexpr std::string_view name(rlhf_phase p) {
  return p == rlhf_phase::rollout ? "rollout" : p == rlhf_phase::experience ? "experience" : "training";
}

/// One model role. A trained role (actor, critic) has model states; a frozen one (reference, reward) weights only.
struct rlhf_role {
  bool present = false;
  transformer_config model{};
  bool trained = false;
  /// Critic and reward models: a scalar head replaces lm_head. Modelled as the backbone with no lm_head (the
  /// head's hidden + 1 parameters are left out) and no logits.
  bool value_model = false;
  bool fsdp = false;            // FSDP (verl, EasyR1) instead of DeepSpeed (OpenRLHF)
  int zero_stage = 0;           // DeepSpeed ZeRO stage; FSDP FULL_SHARD is 3, SHARD_GRAD_OP 2
  precision recipe = precision::mixed_bf16;  // trained roles; verl and EasyR1 keep fp32 parameters: amp_bf16
  dtype frozen_dtype = dtype::bf16;
  /// ZeRO-Offload (OpenRLHF --adam_offload): the optimizer states live in host RAM and the update runs there.
  bool adam_offload = false;
  /// Frozen roles: the parameters live in host RAM and are brought in one unit at a time (DeepSpeed offload_param
  /// for OpenRLHF --ref_reward_offload; FSDP CPUOffload(offload_params=True) for verl's reference).
  bool offload_params = false;
  /// Trained roles: states moved to host RAM outside their own phase and loaded back for it (verl param_offload /
  /// optimizer_offload, EasyR1 offload_params / offload_optimizer, OpenRLHF --deepspeed_enable_sleep).
  bool sleep_params = false;
  bool sleep_optimizer = false;
  bool gradient_checkpointing = false;
  std::int64_t gpus = 1;                 // ranks the role runs on (its data-parallel / shard group)
  std::int64_t train_micro_batch = 1;    // sequences in one training pass on one GPU
  std::int64_t forward_micro_batch = 1;  // sequences in one forward-only pass on one GPU
  /// Training passes per optimizer step on one GPU: above 1 their gradients accumulate, alive from the start of every
  /// pass after the first (step_config::keep_gradients).
  std::int64_t accumulation_steps = 1;
  /// This role's Ulysses sequence-parallel degree where it has its own (verl's critic.ulysses_sequence_parallel_size
  /// and reward_model's, each 1 by default, not the actor's); 0: the job's (rlhf_job::ulysses).
  std::int64_t ulysses = 0;
  /// Whether this role's passes remove padding where it decides so itself (verl's critic.model.use_remove_padding and
  /// reward_model's, EasyR1's worker.critic.padding_free); empty: the job's (rlhf_job::packing).
  std::optional<bool> packing;
  /// A trained role's LoRA adapters (PEFT get_peft_model): the base is frozen in the recipe's weight dtype and only
  /// the adapters have gradients and optimizer states.
  adaptation adapt{};
};

/// verl's LoRA weight sync at the start of each rollout (fsdp_workers.py rollout_mode -> fsdp_utils.py
/// collect_lora_params), with the actor loaded on its GPUs and the engine asleep.
struct lora_weight_sync {
  bool present = false;
  /// FSDP.summon_full_params over the whole actor (strategy fsdp without rollout.layered_summon): every parameter
  /// unsharded on each GPU in its storage dtype. Otherwise one decoder layer (layered_summon) or one tensor (FSDP2).
  bool whole_model = false;
  /// The sync sends the base too, through host RAM in each process (model.to("cpu") and param.cpu()): the first one
  /// with rollout.load_format dummy (vLLM starts without the base), every one at sleep level 2 (the engine discards it).
  bool base_through_host = false;
};

/// Which inference engine generates the rollouts.
enum class rollout_engine_kind { vllm, sglang };
constexpr std::string_view name(rollout_engine_kind k) { return k == rollout_engine_kind::vllm ? "vLLM" : "SGLang"; }

/// The rollout engines (vLLM or SGLang). Every engine spans `tp` GPUs.
struct rollout_engines {
  bool present = false;
  rollout_engine_kind kind = rollout_engine_kind::vllm;
  std::int64_t engines = 0;
  std::int64_t tp = 1;
  double gpu_memory_utilization = 0.9;
  vllm_semantics semantics = vllm_semantics::per_instance;
  bool refuse_if_free_below_budget = false;  // vLLM V1 (>= 0.8 by default)
  bool enforce_eager = true;                 // false: CUDA graphs are captured
  /// vLLM's CUDA graph memory on one GPU as vLLM logs it (zeromem does not derive it; 0: unknown). From 0.21.0 it is
  /// vLLM's estimate and comes out of the KV budget (`cuda_graphs_in_budget`); before, the graphs sit above it.
  bytes cuda_graphs{};
  bool cuda_graphs_in_budget = false;
  /// 0: stays awake and keeps its KV cache; 1: sleep level 1 (weights to host RAM, KV freed); 2: level 2 (both
  /// discarded; verl's free_cache_engine + offload_model_weights behave the same).
  int sleep_level = 0;
  /// The engine sizes its KV cache before the training models load (OpenRLHF creates vLLM engines first).
  bool sized_on_empty_gpu = true;
  std::int64_t block_size = 16;
  std::int64_t swap_space_gib = 0;           // vLLM V0's pinned CPU swap per GPU worker (EngineArgs.swap_space)
  vllm_batch_limits limits{};                // size the profiled activation peak (vllm_default_limits by version)
  /// SGLang: max_running_requests (verl passes rollout.max_num_seqs; 0: SGLang's default from the KV tokens) and
  /// the context length its req_to_token rows are sized for.
  std::int64_t max_running_requests = 0;
  std::int64_t context_len = 0;
  std::int64_t max_lora_rank = 0;            // vLLM enable_lora (max_loras 1); 0: off
};

struct rlhf_job {
  rlhf_framework framework = rlhf_framework::openrlhf;
  /// The trained and forward-only models' attention: flash-attn's kernels by default (OpenRLHF --ds.attn_implementation
  /// default flash_attention_2, openrlhf/cli/train_ppo_ray.py; verl override_config attn_implementation default
  /// flash_attention_2, verl/workers/fsdp_workers.py), transformers' SDPA when asked for.
  attention_kind attention = attention_kind::flash_attention_2;
  bytes gpu_capacity{};
  std::int64_t nodes = 1;
  std::int64_t gpus_per_node = 8;
  bytes host_capacity{};        // 0: host RAM not checked
  double host_threshold = 0.95; // Ray's memory monitor (RAY_memory_usage_threshold, default 0.95)
  rlhf_role actor, critic, reference, reward;
  rollout_engines rollout;
  bool colocate_all = false;           // every role and the engines share the actor's GPUs (each role on the first of them;
                                       // with colocate_critic_reward, those two on GPUs of their own)
  bool colocate_actor_ref = false;
  bool colocate_critic_reward = false;
  bool reward_own_pool = false;        // verl reward_model.enable_resource_pool: the reward model on GPUs of its own
  std::int64_t prompt_tokens = 0;      // maxima, as configured
  std::int64_t response_tokens = 0;
  std::int64_t max_tokens = 0;         // a cap on prompt + response (OpenRLHF >= 0.10.2 data.max_len); 0: none
  /// Real tokens of one sequence (prompt + response) on average; 0: the maxima. Only with packing does a shorter
  /// mean shrink a pass: padded batches are as long as their longest sequence.
  std::int64_t mean_tokens = 0;
  /// Image tokens in each sequence's prompt (vision-language models: Qwen2-VL, Qwen2.5-VL), each spatial_merge^2
  /// patches through the vision tower in training passes (vision_activation_bytes); 0: text only.
  std::int64_t image_tokens = 0;
  lora_weight_sync lora_sync{};        // verl with LoRA: the adapters (and first the base) sent to the engine
  /// verl with LoRA and a reference policy: the actor with its adapters disabled computes the reference log-probs
  /// (ray_trainer.py ref_in_actor); no reference model is built.
  bool reference_in_actor = false;
  bool packing = false;                // padding removed (OpenRLHF --packing_samples, verl use_remove_padding)
  std::int64_t ulysses = 1;            // Ulysses sequence parallelism: each GPU holds 1/ulysses of a pass's tokens (every role without its own, rlhf_role::ulysses)
  step_config step{};                  // loss, optimizer implementation, allocator, CUDA context per process
  known_defects defects{};
  runtime_overheads overheads{};
  /// Host RAM per node that a report shows beyond every modelled term: an explicit input, shown as its own line.
  bytes host_unmodelled{};
  /// Sequences one step generates (rollout batch x samples per prompt): the batch the step carries through Ray, in
  /// host RAM (driver_batch_terms, received_batch); 0: not modelled.
  std::int64_t step_sequences = 0;
  /// A driver process holds that batch and sends each worker its chunk through Ray's object store (verl's
  /// RayPPOTrainer; OpenRLHF's single controller from v0.7.1); before, each actor rank made its own experiences.
  bool batch_through_driver = true;
};

/// One phase on the most loaded GPU (gpu terms) and the most loaded node (host terms), with its verdict.
struct rlhf_phase_estimate {
  rlhf_phase phase = rlhf_phase::rollout;
  std::string gpus;      // the GPU group holding the peak, e.g. "actor+reference+critic+vLLM"
  std::string activity;  // what runs at the peak, e.g. "actor update"
  job_breakdown memory;
  /// Why the phase cannot run whatever its bytes (a vLLM engine that does not start); empty otherwise.
  std::string blocked;
  bool fits() const { return blocked.empty() && memory.fits(); }
  /// What stops the phase: the refusal, the largest GPU term, or the largest host term when only the host RAM is
  /// over its limit.
  std::string deciding_term() const {
    if (!blocked.empty()) return blocked;
    const bool host = memory.gpu_fits() && !memory.host_fits();
    const memory_term* best = nullptr;
    for (const memory_term& t : memory.terms)
      if (best == nullptr || (host ? t.host > best->host : t.gpu > best->gpu)) best = &t;
    if (host && memory.unexplained_host > (best == nullptr ? bytes{} : best->host)) return "host RAM not modelled (--host-unmodelled)";
    return best == nullptr ? std::string{} : best->role + " " + best->term + (host ? " (host RAM)" : "");
  }
};

struct rlhf_estimate {
  std::vector<rlhf_phase_estimate> phases;
  std::vector<std::string> notes;  // assumptions and what is not modelled
  std::int64_t gpus = 0;           // GPUs the job holds: every group's, colocated roles and engines counted once
  std::int64_t nodes = 0;          // nodes of gpus_per_node GPUs they need
  bool fits() const {
    return std::all_of(phases.begin(), phases.end(), [](const rlhf_phase_estimate& p) { return p.fits(); });
  }
  /// The first phase that does not fit, or nullptr.
  const rlhf_phase_estimate* first_failing() const {
    for (const rlhf_phase_estimate& p : phases)
      if (!p.fits()) return &p;
    return nullptr;
  }
};

namespace detail {

/// The backbone of a value model: no lm_head (modelled as tied: the embedding counted once) and no logits.
inline transformer_config value_backbone(transformer_config m) {
  m.tied_embeddings = true;
  m.lm_head_bias = false;
  return m;
}

/// The longest sequence the job allows: prompt + response maxima, within max_tokens when it is set.
inline std::int64_t longest_sequence(const rlhf_job& j) {
  const std::int64_t both = checked_sum(j.prompt_tokens, j.response_tokens);
  return j.max_tokens > 0 ? std::min(both, j.max_tokens) : both;
}

inline std::int64_t tokens_per_sequence(const rlhf_job& j) {
  const std::int64_t most = longest_sequence(j);
  return j.mean_tokens > 0 ? std::min(j.mean_tokens, most) : most;
}

/// The Ulysses degree role r runs its passes with: its own, or the job's.
inline std::int64_t ulysses_of(const rlhf_job& j, const rlhf_role& r) { return r.ulysses > 0 ? r.ulysses : j.ulysses; }
/// Whether role r's passes are packed (padding removed): its own choice, or the job's.
inline bool packing_of(const rlhf_job& j, const rlhf_role& r) { return r.packing.value_or(j.packing); }
/// The roles whose padding differs from the job's, for the tokens note: "; the critic's padded", say.
inline std::string own_padding_note(const rlhf_job& j) {
  std::string out;
  const std::pair<const rlhf_role*, const char*> roles[] = {{&j.actor, "actor"}, {&j.critic, "critic"}, {&j.reference, "reference"}, {&j.reward, "reward model"}};
  for (const auto& [r, name] : roles)
    if (r->present && packing_of(j, *r) != j.packing) out += std::string("; the ") + name + "'s " + (packing_of(j, *r) ? "packed" : "padded");
  return out;
}

/// A pass of `sequences` sequences on one GPU of role r: packed (one row of real tokens) or padded to the maxima,
/// each split over the role's Ulysses ranks.
inline activation_config pass_shape(const rlhf_job& j, const rlhf_role& r, std::int64_t sequences, bool checkpointing) {
  activation_config a{};
  const std::int64_t ulysses = ulysses_of(j, r);
  const bool packed = packing_of(j, r);
  if (packed) {
    a.seq_len = ceil_div(checked_mul(sequences, tokens_per_sequence(j)), ulysses);
    a.micro_batch = 1;
  } else {
    a.seq_len = ceil_div(longest_sequence(j), ulysses);
    a.micro_batch = sequences;
  }
  a.attention = j.attention;  // flash-attn or SDPA: no s^2 terms
  a.impl = implementation::hf;
  a.recomputation = checkpointing ? recompute::full : recompute::none;
  // The trainers run the model without a KV cache whatever its config.json says (verl dp_actor.py _forward_micro_batch:
  // use_cache=False; OpenRLHF's Actor sets config.use_cache = False), in training as in the no-grad passes.
  a.forward_cache = false;
  // A packed pass is one row of all its sequences; the image tokens come with each.
  if (j.actor.model.vision.blocks > 0) a.image_tokens = packed ? checked_mul(sequences, j.image_tokens) : j.image_tokens;
  return a;
}

inline training_states role_states(const rlhf_role& r, const transformer_config& m) {
  training_states t{};
  t.params = count_parameters(m).total;
  t.recipe = recipe_of(r.recipe);
  t.optimizer.kind = optimizer_kind::adamw;
  t.zero.stage = r.zero_stage;
  if (r.adam_offload) t.zero.optimizer = {offload_device::cpu, true};
  t.dp = r.gpus;
  t.gpus_per_node = r.gpus;
  t.largest_layer = needs_largest_layer(t.zero) ? count_parameters(m).largest_layer : elements{};
  t.adapt = r.adapt;
  if (t.adapt.any()) place_on_rank(t, m, count_parameters(m), 1, 1);  // adapters train, the base is frozen
  return t;
}

/// Terms of one GPU: its device memory and the host RAM of the processes that drive it. Each member adds its own.
struct group_view {
  job_breakdown* out;
  void gpu(const std::string& role, const std::string& term, bytes b, const std::string& note = {}) const {
    if (b.count() != 0) out->add(role, term, b, bytes{}, note);
  }
  void host(const std::string& role, const std::string& term, bytes per_rank, const std::string& note = {}) const {
    if (per_rank.count() != 0) out->add(role, term, bytes{}, per_rank, note);
  }
};

/// A trained role outside its update: resting states (gradients are freed between steps), on the GPU or, when it
/// sleeps, in host RAM.
inline void idle_trained(const group_view& v, const std::string& role, const rlhf_role& r) {
  const transformer_config m = r.value_model ? value_backbone(r.model) : r.model;
  const model_state_estimate e = estimate_model_states(role_states(r, m));
  const placement weights = e.per_rank.weights + e.per_rank.master_weights + e.per_rank.hpz_secondary + e.per_rank.frozen_weights;
  const placement states = e.per_rank.optimizer_moments;
  const placement buffers = e.per_rank.offload_staging + e.per_rank.swap_buffers;
  if (r.sleep_params) v.host(role, "weights (asleep in host RAM)", weights.gpu + weights.host);
  else {
    v.gpu(role, "weights", weights.gpu);
    v.host(role, "weights (offloaded)", weights.host);
  }
  if (r.sleep_optimizer) v.host(role, "optimizer states (asleep in host RAM)", states.gpu + states.host);
  else {
    v.gpu(role, "optimizer states", states.gpu);
    v.host(role, "optimizer states (offloaded)", states.host);
  }
  v.gpu(role, "offload buffers", buffers.gpu);
  v.host(role, "offload buffers (pinned)", buffers.host);
}

/// A frozen role outside its forward: its weights, sharded over the ZeRO-3/FSDP group or whole.
inline bytes frozen_weight_bytes(const rlhf_role& r) {
  const transformer_config m = r.value_model ? value_backbone(r.model) : r.model;
  const std::int64_t shard = r.zero_stage == 3 ? r.gpus : 1;
  return largest_share(count_parameters(m).total * size_of(r.frozen_dtype), shard);
}

inline void idle_frozen(const group_view& v, const std::string& role, const rlhf_role& r) {
  if (r.offload_params) v.host(role, "weights (offloaded)", frozen_weight_bytes(r));
  else v.gpu(role, "weights", frozen_weight_bytes(r));
}

inline void idle(const group_view& v, const std::string& role, const rlhf_role& r) {
  if (r.trained) idle_trained(v, role, r);
  else idle_frozen(v, role, r);
}

/// A role's forward-only pass (experience making): its states as when idle but loaded (trained roles sleeping
/// are woken for it), one unit gathered when sharded or offloaded, and the forward's own peak.
inline void forward_pass(const group_view& v, const std::string& role, rlhf_role r, const rlhf_job& j) {
  r.sleep_params = false;  // loaded to compute
  idle(v, role, r);
  transformer_config m = r.value_model ? value_backbone(r.model) : r.model;
  const vision_config tower = m.vision;
  m.vision = vision_config{};  // the decoder's forward below; the tower's own no-grad peak runs before it (rlhf notes)
  const parameter_counts c = count_parameters(m);
  if (r.zero_stage == 3 || r.offload_params)
    v.gpu(role, "gathered layer (16-bit)", c.largest_layer * size_of(dtype::bf16), "one unit gathered at a time");
  const activation_config a = pass_shape(j, r, r.forward_micro_batch, false);
  forward_only_config f{};
  f.attention = a.attention;
  f.seq_len = a.seq_len;
  f.micro_batch = a.micro_batch;
  f.blas_workspaces = bytes{};  // the group's processes hold them in every phase (gpu_group::blas_handles)
  f.use_cache = a.forward_cache;  // false: pass_shape's trainers run without a cache
  // Log-probs: verl and EasyR1 take them from bf16 logits with flash-attn's cross-entropy kernel, no fp32 copy
  // (verl/utils/torch_functional.py logprobs_from_logits); OpenRLHF is counted with log_softmax of fp32 logits.
  f.output = r.value_model                              ? forward_output::hidden_states
             : j.framework == rlhf_framework::verl ? forward_output::logits
                                                        : forward_output::log_probs;
  const forward_only_estimate e = estimate_forward_only(m, f, bytes{});
  v.gpu(role, "forward peak (" + std::to_string(r.forward_micro_batch) + " sequences, " + std::to_string(f.seq_len) + " x " +
                  std::to_string(f.micro_batch) + " tokens)",
        e.peak);
  // Image tokens: the pass's pixel values (fp32, 4 B x in_channels x temporal x patch^2 a patch) and the tower's output,
  // image_embeds (one out_hidden-wide 16-bit row per image token), both alive through the decoder's forward
  // (modeling_qwen2_5_vl.py Qwen2_5_VLModel.forward keeps image_embeds as a local after masked_scatter).
  const std::int64_t images = checked_mul(r.forward_micro_batch, j.image_tokens);
  if (tower.blocks > 0 && images > 0) {
    const std::int64_t patches = checked_mul(images, checked_mul(tower.spatial_merge, tower.spatial_merge));
    v.gpu(role, "image inputs (" + std::to_string(patches) + " patches: pixel values and image features)",
          pixel_value_bytes(tower, patches) + elements_of(checked_mul(images, tower.out_hidden)) * size_of(dtype::bf16));
  }
}

/// Whether a trained role's backward walks DeepSpeed 0.16.x's ZeRO-3 checkpointing defect (known_defects, DeepSpeed
/// issue #7116): DeepSpeed's own ZeRO-3 (not FSDP) with gradient checkpointing, on a release that has it.
inline bool walks_zero3_checkpointing_leak(const rlhf_job& j, const rlhf_role& r) {
  return j.defects.deepspeed_016_zero3_checkpointing_leak && r.present && r.trained && r.zero_stage == 3 && !r.fsdp &&
         r.gradient_checkpointing;
}

/// A trained role's update: every state on the GPU (sleeping states are loaded back), and the step model's
/// peak above them.
inline void update(const group_view& v, const std::string& role, const rlhf_role& r, const rlhf_job& j) {
  training_job t{};  // the role's update as one training job, evaluated as `zeromem estimate` evaluates one
  t.model = r.value_model ? value_backbone(r.model) : r.model;
  t.states = role_states(r, t.model);
  t.states.gradient_accumulation_steps = r.accumulation_steps;
  t.activations = pass_shape(j, r, r.train_micro_batch, r.gradient_checkpointing);
  if (t.model.vision.blocks == 0) t.activations.image_tokens = 0;  // a text critic beside a vision-language actor
  t.step = j.step;
  t.step.blas_workspaces = bytes{};  // the group's processes hold them in every phase (gpu_group::blas_handles)
  // The trainers take log-probs (and values) from the returned logits, after the model's forward (verl dp_actor.py
  // _forward_micro_batch: logprobs_from_logits; OpenRLHF Actor.forward: log_probs_from_logits).
  t.step.loss_in_forward = false;
  t.step.value_head = r.value_model;
  t.overheads = j.overheads;
  if (r.fsdp && r.zero_stage >= 2) {
    t.step.fsdp_world = r.gpus;
    t.step.reshard_after_forward = r.zero_stage == 3;
  }
  // DeepSpeed 0.16.x under ZeRO-3 with checkpointing releases nothing it gathers in backward (known_defects): the step
  // walks it (step_config::zero3_backward_keeps_gathered), so by the embedding's backward the whole model is gathered.
  const bool defect = walks_zero3_checkpointing_leak(j, r);
  t.step.zero3_backward_keeps_gathered = defect;
  const step_estimate e = estimate_step(t);
  step_phase peak_phase = e.peak_phase;
  if (r.value_model) {  // a scalar head: no logits; take the largest phase without them (the first on a tie)
    const auto without_loss = [&](step_phase p) {
      step_terms x = e.phase(p);
      x.loss = bytes{};
      return x.total();
    };
    peak_phase = step_phase::forward;
    for (const step_phase p : {step_phase::backward, step_phase::optimizer_step})
      if (without_loss(p) > without_loss(peak_phase)) peak_phase = p;
  }
  step_terms peak = e.phase(peak_phase);
  if (r.value_model) peak.loss = bytes{};
  const bool defect_row = defect && peak_phase == step_phase::backward;
  const std::string shape = std::to_string(r.train_micro_batch) + " sequences, " + std::to_string(t.activations.seq_len) + " x " +
                            std::to_string(t.activations.micro_batch) + " tokens";
  const std::string accumulated = r.accumulation_steps > 1 ? " (accumulated over " + std::to_string(r.accumulation_steps) + " passes)" : "";
  peak.for_each([&](const char* term, bytes b) {
    const std::string_view which(term);
    if (defect_row && which == "gathered_parameters")
      v.gpu(role, "gathered parameters kept through backward (DeepSpeed 0.16.x defect)", b,
            "DeepSpeed issue #7116 / PR #6726: every 16-bit parameter gathered in backward stays gathered");
    else
      v.gpu(role, std::string(term) + (which == "activations" ? " (" + shape + ")" : which == "gradients" ? accumulated : ""), b);
  });
  const model_state_estimate states = estimate_model_states(t.states);
  v.host(role, "offloaded states", states.host_per_rank());
}

/// The actor during verl's LoRA weight sync: its states loaded on the GPU (load_fsdp_model_to_gpu brings sleeping
/// parameters back), the parameters FSDP gathers in their storage dtype, and on the first sync with load_format
/// dummy the whole base copied to host RAM by each process (verl/utils/fsdp_utils.py collect_lora_params).
inline void lora_sync(const group_view& v, const std::string& role, rlhf_role r, const rlhf_job& j) {
  r.sleep_params = false;
  idle(v, role, r);
  const transformer_config& m = r.model;
  const parameter_counts c = count_parameters(m);
  const bytes_per_element storage = size_of(recipe_of(r.recipe).weights);
  const parameter_split split = split_parameters(m, c, r.adapt, recipe_of(r.recipe).weights);
  if (j.lora_sync.whole_model)
    v.gpu(role, "parameters gathered for the LoRA sync (summon_full_params, whole model)", (c.total + split.adapters.total) * storage);
  else
    v.gpu(role, "parameters gathered for the LoRA sync (one unit: layered_summon or FSDP2)",
          std::max({split.layer_trainable + split.layer_frozen, c.embedding, c.lm_head}) * storage);
  if (j.lora_sync.base_through_host) v.host(role, "base copied to host RAM for the LoRA sync", c.total * storage);
}

struct gpu_group {
  std::string label;
  std::vector<std::pair<std::string, const rlhf_role*>> roles;
  bool engine = false;
  std::int64_t gpus = 0;
  std::int64_t processes = 0;  // CUDA contexts per GPU
  std::int64_t blas_handles = 0;  // cuBLAS handles of the training processes: 2 where a role trains, 1 where it only runs forward
};

/// cuBLAS handles a role's process holds once it has run: forward and autograd's thread when it trains, the forward's
/// alone when it does not (gpus.hpp training_blas_handles). A rollout engine's are inside its own profiled peak.
inline std::int64_t blas_handles_of(const rlhf_role& r) { return r.trained ? training_blas_handles : 1; }

/// Which roles share which GPUs. OpenRLHF places each role (and the vLLM engines) on GPUs of its own unless
/// colocated (openrlhf/cli/train_ppo_ray.py: --colocate_actor_ref, --colocate_critic_reward, --colocate_all_models);
/// verl's hybrid engine puts actor, rollout and reference in one process and every role in one resource pool.
inline std::vector<gpu_group> gpu_groups(const rlhf_job& j) {
  const std::pair<std::string, const rlhf_role*> all[] = {
      {"actor", &j.actor}, {"critic", &j.critic}, {"reference", &j.reference}, {"reward", &j.reward}};
  std::vector<gpu_group> groups;
  // OpenRLHF with --colocate_critic_reward beside --colocate_all_models gives a critic and the reward model a
  // placement group of their own, the critic's GPUs (train_ppo_ray.py, v0.6.1 to v0.11.0: pg is replaced after the
  // actor's and reference's groups are made).
  const bool own_critic_reward = j.framework == rlhf_framework::openrlhf && j.colocate_all && j.colocate_critic_reward && j.critic.present;
  // verl's reward model on a resource pool of its own (reward_model.enable_resource_pool, trainer/main_ppo.py).
  const bool reward_apart = j.framework == rlhf_framework::verl && j.reward_own_pool && j.reward.present;
  if (j.colocate_all || j.framework == rlhf_framework::verl) {
    gpu_group g{"", {}, j.rollout.present, j.actor.gpus, 0};
    for (const auto& r : all)
      if (r.second->present && !(own_critic_reward && (r.second == &j.critic || r.second == &j.reward)) && !(reward_apart && r.second == &j.reward))
        g.roles.push_back(r);
    if (j.framework == rlhf_framework::verl) {  // actor+rollout+reference in one worker; critic and reward their own
      const bool reward_here = j.reward.present && !reward_apart;
      g.processes = 1 + (j.critic.present ? 1 : 0) + (reward_here ? 1 : 0);
      g.blas_handles = blas_handles_of(j.actor) + (j.critic.present ? blas_handles_of(j.critic) : 0) + (reward_here ? blas_handles_of(j.reward) : 0);
    } else {
      g.processes = static_cast<std::int64_t>(g.roles.size()) + (g.engine ? 1 : 0);
      for (const auto& r : g.roles) g.blas_handles += blas_handles_of(*r.second);
    }
    groups.push_back(g);
    if (reward_apart) groups.push_back({"", {all[3]}, false, j.reward.gpus, 1, blas_handles_of(j.reward)});
    if (own_critic_reward) {
      gpu_group cr{"", {}, false, j.critic.gpus, 0};
      for (const auto& r : {all[1], all[3]})
        if (r.second->present) {
          cr.roles.push_back(r);
          cr.processes += 1;
          cr.blas_handles += blas_handles_of(*r.second);
        }
      groups.push_back(cr);
    }
  } else {
    const auto add = [&](std::vector<std::pair<std::string, const rlhf_role*>> roles) {
      gpu_group g{"", {}, false, 0, 0};
      for (const auto& r : roles)
        if (r.second->present) g.roles.push_back(r);
      if (g.roles.empty()) return;
      g.gpus = g.roles.front().second->gpus;
      g.processes = static_cast<std::int64_t>(g.roles.size());
      for (const auto& r : g.roles) g.blas_handles += blas_handles_of(*r.second);
      groups.push_back(g);
    };
    if (j.colocate_actor_ref) add({all[0], all[2]});
    else {
      add({all[0]});
      add({all[2]});
    }
    if (j.colocate_critic_reward) add({all[1], all[3]});
    else {
      add({all[1]});
      add({all[3]});
    }
    if (j.rollout.present) groups.push_back({"", {}, true, checked_mul(j.rollout.engines, j.rollout.tp), 1, 0});
  }
  for (gpu_group& g : groups) {
    for (const auto& r : g.roles) g.label += (g.label.empty() ? "" : "+") + r.first;
    if (g.engine) g.label += (g.label.empty() ? "" : "+") + std::string(name(j.rollout.kind));
  }
  return groups;
}

/// One vLLM engine's memory on one of its GPUs, with `resident` bytes of other processes on that GPU when it
/// starts (0 when it is sized on an empty GPU).
inline vllm_sizing engine_memory(const rlhf_job& j, bytes resident) {
  vllm_engine_spec spec{};
  spec.model = j.actor.model;
  spec.tp = j.rollout.tp;
  spec.block_size = j.rollout.block_size;
  spec.limits = j.rollout.limits;
  spec.max_model_len = longest_sequence(j);  // OpenRLHF and verl: prompt + response maxima (OpenRLHF >= 0.10.2: max_len)
  spec.max_lora_rank = j.rollout.max_lora_rank;
  vllm_engine_config v{};
  v.total = j.gpu_capacity;
  v.gpu_memory_utilization = j.rollout.gpu_memory_utilization;
  v.semantics = j.rollout.semantics;
  v.non_torch = j.step.cuda_context;
  v.other_processes = j.rollout.sized_on_empty_gpu ? bytes{} : resident;
  v.refuse_if_free_below_budget = j.rollout.refuse_if_free_below_budget;
  v.cuda_graphs = j.rollout.cuda_graphs;
  v.cuda_graphs_in_budget = j.rollout.cuda_graphs_in_budget && !j.rollout.enforce_eager;
  return size_vllm_engine(spec, v);
}

/// The rollout engine's weights on one of its GPUs: the actor's, in bf16, split over the engine's tp ranks.
inline bytes engine_weights(const rlhf_job& j) {
  return largest_share(count_parameters(j.actor.model).total * size_of(dtype::bf16), j.rollout.tp);
}

/// One SGLang engine's pools on one of its GPUs: it measures the free memory after its own CUDA context, with
/// `resident` bytes of the training roles on the GPU when it is sized after them.
inline sglang_engine_memory sglang_memory(const rlhf_job& j, bytes resident) {
  const bytes free_before = j.gpu_capacity - j.step.cuda_context - (j.rollout.sized_on_empty_gpu ? bytes{} : resident);
  if (free_before.count() <= 0) {  // nothing free: it does not start
    sglang_engine_memory none{};
    none.rest = free_before;
    none.weights = engine_weights(j);
    return none;
  }
  return size_sglang_engine(j.actor.model, j.rollout.tp, free_before, j.rollout.gpu_memory_utilization, j.rollout.context_len,
                            j.rollout.max_running_requests);
}

/// The awake engine's GPU terms; returns why it does not start (empty when it does).
inline std::string engine_awake(const group_view& v, const rlhf_job& j, bytes resident) {
  if (j.rollout.kind == rollout_engine_kind::sglang) {
    const sglang_engine_memory e = sglang_memory(j, resident);
    v.gpu("SGLang", "weights (bf16)", e.weights);
    v.gpu("SGLang", "KV pool", e.kv_pool, std::to_string(e.kv_tokens) + " tokens");
    v.gpu("SGLang", "req_to_token pool", e.req_to_token,
          std::to_string(e.max_requests) + " requests x " + std::to_string(j.rollout.context_len + 4) + " int32 slots");
    return e.refusal();
  }
  const vllm_sizing e = engine_memory(j, resident);
  v.gpu("vLLM", "weights (bf16)", e.weights);
  v.gpu("vLLM", "LoRA slots (max_lora_rank " + std::to_string(j.rollout.max_lora_rank) + ")", e.lora_slots);
  v.gpu("vLLM", "activation peak (profiled)", e.profile.peak(),
        std::to_string(j.rollout.limits.max_num_batched_tokens) + " tokens, " + std::to_string(j.rollout.limits.max_num_seqs) + " sequences");
  v.gpu("vLLM", "KV cache", e.memory.kv_cache, std::to_string(e.memory.kv_blocks) + " blocks of " + std::to_string(j.rollout.block_size) + " tokens");
  v.gpu("vLLM", j.rollout.cuda_graphs_in_budget ? "CUDA graphs (estimate, in the budget)" : "CUDA graphs (above the budget)", j.rollout.cuda_graphs);
  v.host("vLLM", "swap space (pinned)", vllm_swap_space_bytes(j.rollout.swap_space_gib));
  return e.memory.refusal();
}

inline std::string engine_idle(const group_view& v, const rlhf_job& j, bytes resident) {
  if (j.rollout.sleep_level == 0) return engine_awake(v, j, resident);
  // vLLM allocates its LoRA slots while loading the model, under the weights tag that sleep level 1 offloads.
  const bytes slots = j.rollout.max_lora_rank > 0 ? vllm_lora_slot_elements(j.actor.model, j.rollout.tp, j.rollout.max_lora_rank) * size_of(dtype::bf16)
                                                  : bytes{};
  const bytes weights = engine_weights(j) + slots;
  // SGLang's release_memory_occupation(tags=["kv_cache", "weights"]) frees both (torch_memory_saver); verl's
  // hybrid engine reloads the weights from the actor when it resumes, so nothing stays on the host either.
  if (j.rollout.kind == rollout_engine_kind::sglang) return {};
  v.host("vLLM", "weights (asleep, level " + std::to_string(j.rollout.sleep_level) + ")", vllm_sleep_host_bytes(j.rollout.sleep_level, weights));
  // Sleep releases the weights and KV cache pools only; the CUDA graphs' pool stays on the GPU (vLLM PR #56373:
  // "Level-1 cuMem sleep releases weights and KV cache, but leaves graph executables and native CUDA graph pools").
  v.gpu("vLLM", "CUDA graphs (kept while asleep)", j.rollout.cuda_graphs);
  v.host("vLLM", "swap space (pinned)", vllm_swap_space_bytes(j.rollout.swap_space_gib));
  return {};  // whether it starts is decided in the rollout phase, where it is awake
}

inline void validate(const rlhf_job& j) {
  if (j.gpu_capacity.count() <= 0) fail("the GPU's memory is unknown; pass --gpu NAME (or a `# zeromem: --gpu NAME` line in the job file)");
  require_positive(j.nodes, "the number of nodes");
  require_positive(j.gpus_per_node, "the GPUs per node");
  if (!j.actor.present) fail("an RLHF job needs an actor model; give its path (OpenRLHF --pretrain, verl actor_rollout_ref.model.path)");
  require_positive(j.prompt_tokens, "the prompt length");
  require_positive(j.response_tokens, "the response length");
  if (j.max_tokens < 0) fail_value("the cap on prompt + response cannot be negative", j.max_tokens, "pass 0 for none");
  require_positive(j.ulysses, "the Ulysses sequence-parallel size");
  if (j.mean_tokens < 0) fail_value("the mean tokens per sequence cannot be negative", j.mean_tokens, "pass 0 for the maxima");
  if (j.image_tokens < 0 || j.image_tokens > j.prompt_tokens)
    fail_value("the image tokens per sequence are part of its prompt", j.image_tokens, "pass 0 to the prompt length");
  if (j.mean_tokens > 0 && j.image_tokens > j.mean_tokens)
    fail("the mean tokens per sequence (" + std::to_string(j.mean_tokens) + ") cannot be fewer than its " +
         std::to_string(j.image_tokens) + " image tokens (--image-tokens; default: the whole prompt); pass a mean of at least " +
         std::to_string(j.image_tokens) + " or fewer image tokens");
  if (j.image_tokens > 0 && j.ulysses > 1)
    fail("image tokens under Ulysses sequence parallelism are not modelled (how the ranks split the vision tower's patches); pass 0 image tokens");
  if (j.step_sequences < 0)
    fail_value("the sequences a step generates cannot be negative", j.step_sequences, "pass rollout batch x samples per prompt, or 0 to leave the batch out");
  for (const rlhf_role* r : {&j.actor, &j.critic, &j.reference, &j.reward})
    if (r->present) {
      require_positive(r->gpus, "a role's GPU count");
      require_positive(r->train_micro_batch, "the training micro-batch");
      require_positive(r->forward_micro_batch, "the forward micro-batch");
      if (r->zero_stage < 0 || r->zero_stage > 3) fail_value("ZeRO stage must be 0, 1, 2 or 3", r->zero_stage, "use 3 for full sharding");
      if (r->adapt.any() && !r->trained) fail("adapters (LoRA, frozen components) apply to trained roles; a frozen role has no adapters to train");
      if (r->ulysses < 0 || (r->ulysses > 0 && !divides(r->ulysses, r->gpus)))
        fail_value("a role's own Ulysses degree must divide its GPUs (a (GPUs / sp) x sp device mesh)", r->ulysses,
                   "pass a divisor of its GPUs, or 0 for the job's degree");
      if (j.image_tokens > 0 && ulysses_of(j, *r) > 1)
        fail("image tokens under Ulysses sequence parallelism are not modelled (how the ranks split the vision tower's patches); pass 0 image tokens");
    }
  if (j.lora_sync.present && !j.actor.adapt.lora_enabled()) fail("a LoRA weight sync needs LoRA adapters on the actor; set its LoRA rank");
  if (j.rollout.present) {
    require_positive(j.rollout.engines, "the number of rollout engines");
    require_positive(j.rollout.tp, "the rollout tensor-parallel size");
    if (j.rollout.kind == rollout_engine_kind::vllm) {
      require_positive(j.rollout.limits.max_num_batched_tokens, "the vLLM max_num_batched_tokens");
      require_positive(j.rollout.limits.max_num_seqs, "the vLLM max_num_seqs");
      if (j.rollout.cuda_graphs.count() < 0) fail("vLLM's CUDA graph memory cannot be negative");
      if (j.rollout.max_lora_rank != 0 && vllm_max_lora_rank(j.rollout.max_lora_rank) != j.rollout.max_lora_rank)
        fail_value("vLLM's max_lora_rank must be one of 1, 8, 16, 32, 64, 128, 256, 320, 512", j.rollout.max_lora_rank,
                   "round it up with vllm_max_lora_rank");
      if (j.rollout.enforce_eager && j.rollout.cuda_graphs.count() > 0)
        fail("CUDA graph memory is given but the engines run with enforce_eager, which captures none; drop one");
    } else {
      if (j.rollout.cuda_graphs.count() != 0) fail("CUDA graph memory is read for vLLM engines only; drop it for SGLang");
      if (j.rollout.max_lora_rank != 0) fail("LoRA slots are modelled for vLLM engines only; drop max_lora_rank for SGLang");
      require_positive(j.rollout.context_len, "the SGLang context length");
    }
  }
}

/// One sequence's entries in the batch a step carries through Ray, padded to the maxima (the trainers pad every
/// sequence to prompt + response maxima): its token fields, there from generation on, and all its fields, there from
/// the experience forwards on.
struct batch_entry {
  std::int64_t tokens = 0;
  std::int64_t all = 0;
};

inline batch_entry batch_entry_of(const rlhf_job& j) {
  const std::int64_t total = longest_sequence(j), response = std::min(j.response_tokens, total), prompt = total - response;
  // Reference log-probs: from the reference, or in verl with LoRA from the actor with its adapters off (ref_in_actor).
  const bool reference = j.reference.present || j.reference_in_actor;
  const std::int64_t with_roles = (reference ? 1 : 0) + (j.critic.present ? 1 : 0);
  if (j.framework == rlhf_framework::verl) {
    // verl/trainer/ppo/ray_trainer.py fit(): int64 input_ids, attention_mask, position_ids over the sequence, prompts,
    // responses, response_mask; fp32 per response token old_log_probs, token_level_scores, token_level_rewards,
    // advantages, returns, and ref_log_prob and values where those roles run.
    const std::int64_t tokens = checked_mul(8, checked_sum(checked_mul(3, total), prompt, checked_mul(2, response)));
    return {tokens, checked_sum(tokens, checked_mul(4 * (5 + with_roles), response))};
  }
  // openrlhf/trainer/ppo_utils/experience.py Experience: int64 sequences and attention_mask, a bool action_mask over the
  // response; fp32 per response token action_log_probs, returns, advantages, kl, and base_action_log_probs and values
  // where those roles run.
  const std::int64_t tokens = checked_sum(checked_mul(16, total), response);
  return {tokens, checked_sum(tokens, checked_mul(4 * (4 + with_roles), response))};
}

/// The step's batch in host RAM, per phase. Ray keeps objects above 100 KiB (task arguments, return values, ray.put)
/// in each node's shared-memory object store, which the memory monitor counts as used (MemTotal - MemAvailable,
/// src/ray/common/memory_monitor.cc). verl's driver and OpenRLHF's from v0.7.1 hold the batch and send each
/// data-parallel rank its chunk through the store (verl single_controller/ray/base.py: a DataProto argument per worker,
/// alive until the call returns; OpenRLHF launcher.py async_run_method_batch: ray.put per chunk); the ranks load a copy
/// (DataProto.__setstate__ torch.load; OpenRLHF replay_buffer.py append: experience.to_device("cpu")). Rollout: the
/// generated tokens come back through the store to the driver. Experience: the driver's batch grows to every field; a
/// forward pass's ranks receive the token fields. Training: verl sends the whole batch to one update at a time, alive
/// through it; OpenRLHF appends it to the actor's and the critic's replay buffers first (ppo_trainer.py: ray.get on
/// append before ppo_train), where it stays through training. Before v0.7.1 OpenRLHF's actor ranks made their
/// experiences and replay buffers themselves and sent the critic its copy. These are the driver's and the store's,
/// counted on the most loaded node (the driver's node is not known); the ranks' copies are received_batch's.
inline void driver_batch_terms(job_breakdown& node, const rlhf_job& j, rlhf_phase phase) {
  if (j.step_sequences == 0 || !j.batch_through_driver) return;
  const batch_entry e = batch_entry_of(j);
  const bytes tokens = bytes_of(checked_mul(j.step_sequences, e.tokens)), all = bytes_of(checked_mul(j.step_sequences, e.all));
  node.add("Ray", "experience batch (driver)", bytes{}, phase == rlhf_phase::rollout ? tokens : all);
  const bytes store = phase != rlhf_phase::training ? tokens : j.framework == rlhf_framework::verl ? all : bytes{};
  if (store.count() != 0) node.add("Ray", "experience batch (object store)", bytes{}, store);
}

/// One rank's copy of its chunk of the batch (driver_batch_terms): ceil(sequences / data-parallel ranks) sequences,
/// held by every Ulysses / ring-attention rank of its group.
inline void received_batch(const group_view& v, const std::string& role, const rlhf_role& r, const rlhf_job& j, rlhf_phase phase,
                           bool active) {
  if (j.step_sequences == 0 || phase == rlhf_phase::rollout) return;
  const batch_entry e = batch_entry_of(j);
  const std::int64_t sequences = ceil_div(j.step_sequences, std::max<std::int64_t>(1, r.gpus / ulysses_of(j, r)));
  if (j.framework == rlhf_framework::openrlhf && r.trained && (phase == rlhf_phase::training || !j.batch_through_driver))
    v.host(role, "replay buffer (its chunk of the batch)", bytes_of(checked_mul(sequences, e.all)));
  else if (active && j.batch_through_driver)
    v.host(role, "chunk of the batch received", bytes_of(checked_mul(sequences, phase == rlhf_phase::training ? e.all : e.tokens)));
}

}  // namespace detail

/// Every phase of one RLHF step. Each phase's GPU terms are those of its most loaded GPU at its most loaded moment;
/// its host terms are those of the most loaded node (the heaviest GPUs' processes that can share one node).
inline rlhf_estimate estimate_rlhf(const rlhf_job& j) {
  detail::validate(j);
  rlhf_estimate out{};
  const std::vector<detail::gpu_group> groups = detail::gpu_groups(j);
  for (const detail::gpu_group& g : groups) out.gpus = detail::checked_add(out.gpus, g.gpus);
  out.nodes = detail::ceil_div(out.gpus, j.gpus_per_node);
  for (rlhf_phase phase : {rlhf_phase::rollout, rlhf_phase::experience, rlhf_phase::training}) {
    rlhf_phase_estimate best{};
    best.phase = phase;
    std::string blocked;
    std::vector<std::pair<job_breakdown, std::int64_t>> host_per_gpu;  // each group's host terms of one of its GPUs, its GPUs
    for (const detail::gpu_group& g : groups) {
      // Candidate moments of this phase on this group: who is active.
      std::vector<std::pair<std::string, job_breakdown>> moments;
      const std::string sync = "actor:lora-sync";  // the actor's LoRA weight sync (rollout phase, verl)
      const auto moment = [&](const std::string& activity, const std::string& moment_of) {
        const std::string active = moment_of == sync ? "actor" : moment_of;
        job_breakdown b{};
        const detail::group_view v{&b};
        job_breakdown resident_only{};  // the other roles, as they rest while `active` runs
        const detail::group_view rest{&resident_only};
        for (const auto& role : g.roles)
          if (role.first != active) detail::idle(rest, role.first, *role.second);
        for (const memory_term& t : resident_only.terms) b.terms.push_back(t);
        for (const auto& role : g.roles) detail::received_batch(v, role.first, *role.second, j, phase, role.first == active);
        for (const auto& role : g.roles) {
          if (role.first != active) continue;
          if (moment_of == sync) detail::lora_sync(v, role.first, *role.second, j);
          else if (phase == rlhf_phase::training) detail::update(v, role.first, *role.second, j);
          else detail::forward_pass(v, role.first, *role.second, j);
        }
        if (g.engine) {
          const std::string refusal = active == "engine" ? detail::engine_awake(v, j, resident_only.gpu_total())
                                                       : detail::engine_idle(v, j, resident_only.gpu_total());
          if (!refusal.empty() && blocked.empty()) blocked = std::string(name(j.rollout.kind)) + " on " + g.label + ": " + refusal;
        }
        v.gpu("all", "CUDA contexts (" + std::to_string(g.processes) + (g.processes == 1 ? " process)" : " processes)"), j.step.cuda_context * g.processes);
        v.gpu("all", "cuBLAS workspaces (" + std::to_string(g.blas_handles) + (g.blas_handles == 1 ? " handle)" : " handles)"),
              bytes_of(j.step.blas_workspaces.count() / training_blas_handles) * g.blas_handles);
        moments.emplace_back(activity, std::move(b));
      };
      if (phase == rlhf_phase::rollout) {
        moment(g.engine ? "generation" : "idle", g.engine ? "engine" : "");
        const bool has_actor = std::any_of(g.roles.begin(), g.roles.end(), [](const auto& role) { return role.first == "actor"; });
        if (j.lora_sync.present && has_actor) moment("LoRA weight sync", sync);
      } else {
        bool any = false;
        for (const auto& role : g.roles) {
          if (phase == rlhf_phase::training && !role.second->trained) continue;
          moment(role.first + (phase == rlhf_phase::training ? " update" : " forward"), role.first);
          any = true;
        }
        if (!any) moment("idle", "");
      }
      const auto most = std::max_element(moments.begin(), moments.end(),
                                         [](const auto& a, const auto& b) { return a.second.gpu_total() < b.second.gpu_total(); });
      const auto most_host = std::max_element(moments.begin(), moments.end(),
                                              [](const auto& a, const auto& b) { return a.second.host_total() < b.second.host_total(); });
      job_breakdown one_gpu{};
      for (const memory_term& t : most_host->second.terms)
        if (t.host.count() != 0) one_gpu.terms.push_back(t);
      host_per_gpu.emplace_back(std::move(one_gpu), g.gpus);
      if (best.gpus.empty() || most->second.gpu_total() > best.memory.gpu_total()) {
        best.gpus = g.label;
        best.activity = most->first;
        best.memory = most->second;
      }
    }
    // The most loaded node. OpenRLHF asks Ray for one-GPU bundles packed onto nodes (launcher.py
    // RayActorGroup._initiate_actors: placement_group(bundles, strategy="PACK")), so any gpus_per_node of the job's
    // GPUs can share a node: the heaviest gpus_per_node GPUs bound every placement Ray can choose, and are the node
    // when the job fits on one node or its groups fill whole nodes. verl and colocated jobs are one group.
    std::stable_sort(host_per_gpu.begin(), host_per_gpu.end(),
                     [](const auto& a, const auto& b) { return a.first.host_total() > b.first.host_total(); });
    job_breakdown host_side{};
    std::int64_t free_slots = j.gpus_per_node;
    for (const auto& [terms, gpus] : host_per_gpu) {
      const std::int64_t here = std::min(gpus, free_slots);
      if (here == 0) break;
      free_slots -= here;
      for (const memory_term& t : terms.terms) host_side.terms.push_back({t.role, t.term, bytes{}, t.host * here, t.note});
    }
    // The phase: GPU terms of the most loaded GPU, host terms of the node.
    job_breakdown m{};
    for (const memory_term& t : best.memory.terms)
      if (t.gpu.count() != 0) m.terms.push_back({t.role, t.term, t.gpu, bytes{}, t.note});
    for (const memory_term& t : host_side.terms) m.terms.push_back({t.role, t.term, bytes{}, t.host, t.note});
    detail::driver_batch_terms(m, j, phase);
    m.gpu_capacity = j.gpu_capacity;
    m.host_capacity = j.host_capacity;
    m.host_threshold = j.host_threshold;
    m.unexplained_host = j.host_unmodelled;
    best.memory = std::move(m);
    best.blocked = std::move(blocked);
    out.phases.push_back(std::move(best));
  }
  out.notes.push_back("tokens per sequence: " + std::to_string(detail::tokens_per_sequence(j)) +
                      (j.mean_tokens > 0 ? " (assumed mean)"
                       : j.max_tokens > 0 && j.max_tokens < detail::checked_sum(j.prompt_tokens, j.response_tokens)
                           ? " (the max_len cap on prompt + response; pass --mean-tokens for real lengths)"
                           : " (prompt + response maxima; pass --mean-tokens for real lengths)") +
                      (j.packing ? ", packed" : ", padded to the maxima") + detail::own_padding_note(j));
  if (j.rollout.present && j.rollout.kind == rollout_engine_kind::sglang) {
    const sglang_engine_memory e = detail::sglang_memory(j, bytes{});
    std::string fraction = std::to_string(j.rollout.gpu_memory_utilization);  // 0.800000 -> 0.8
    fraction.erase(fraction.find_last_not_of('0') + 1);
    if (fraction.back() == '.') fraction.pop_back();
    out.notes.push_back("SGLang mem_fraction_static " + fraction +
                        ": KV pool = free before loading x fraction - weights; it leaves (1 - fraction) of the free memory for "
                        "activations and CUDA graphs, which are not modelled (on an empty GPU: " +
                        format_bytes(e.runtime_room, size_unit::GiB) + ")");
  } else if (j.rollout.present) {
    out.notes.push_back("vLLM " + std::string(name(j.rollout.semantics)) + " gpu_memory_utilization; profiled with " +
                        std::to_string(j.rollout.limits.max_num_batched_tokens) + " tokens and " +
                        std::to_string(j.rollout.limits.max_num_seqs) + " sequences");
    if (!j.rollout.enforce_eager && j.rollout.cuda_graphs.count() == 0)
      out.notes.push_back(std::string(j.rollout.cuda_graphs_in_budget
                                          ? "vLLM >= 0.21 takes its CUDA graph estimate out of the KV budget: the awake engine's GPU bytes "
                                            "hold the graphs whatever they take, inside its KV cache line"
                                          : "vLLM CUDA graphs (enforce_eager off) sit above the budget and are not modelled") +
                          (j.rollout.sleep_level > 0 ? "; they stay on the GPU while the engine sleeps" : "") +
                          ": pass --vllm-cuda-graphs with the graph memory vLLM logs");
  }
  if (j.actor.model.vision.blocks > 0)
    out.notes.push_back(j.image_tokens > 0 ? std::to_string(j.image_tokens) + " image tokens per sequence through the vision tower in training; "
                                             "its own no-grad peak in experience making, before the decoder's, is not modelled"
                                           : "no image tokens: the vision tower does not run (pass --image-tokens)");
  out.notes.push_back(j.step_sequences > 0 ? "not modelled: image tensors in the batch, dataloaders, "
                                              "per-process host memory of Ray workers and CUDA runtimes"
                                            : "not modelled: the batch in Ray's object store and the driver (step_sequences 0), dataloaders, "
                                              "per-process host memory of Ray workers and CUDA runtimes");
  return out;
}

}  // namespace zeromem
