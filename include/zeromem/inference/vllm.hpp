// What a vLLM engine takes from a GPU under gpu_memory_utilization, which has meant three things across
// versions (docs/references.md §4), and what sleep mode and swap space put in host RAM.
#pragma once

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "zeromem/core/dtype.hpp"
#include "zeromem/core/error.hpp"
#include "zeromem/core/format.hpp"
#include "zeromem/inference/kv_cache.hpp"
#include "zeromem/model/model.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

enum class vllm_semantics {
  /// vLLM >= 0.6.4 and V1: a per-instance budget. KV = util x total - (weights + profiled activation peak
  /// + non-torch memory) of this instance (vllm/worker/worker.py determine_num_available_blocks).
  per_instance,
  /// vLLM 0.6.0-0.6.3 (and early V1): memory held by anything on the GPU, other processes included,
  /// counts against the cap: vLLM + everything else <= util x total (vLLM PR #9505 describes the change).
  global_cap,
  /// verl's patched vLLM 0.6.3: KV = (free memory after profiling) x util.
  verl_free_fraction,
};

constexpr std::string_view name(vllm_semantics s) {
  switch (s) {
    case vllm_semantics::per_instance: return "per-instance";
    case vllm_semantics::global_cap: return "global-cap";
    case vllm_semantics::verl_free_fraction: return "verl-free-fraction";
  }
  detail::fail("unknown vLLM semantics");
}

struct vllm_engine_config {
  bytes total{};                        // the GPU's total memory as PyTorch reports it
  double gpu_memory_utilization = 0.9;  // vLLM default
  vllm_semantics semantics = vllm_semantics::per_instance;
  bytes weights{};                      // this engine's weights on one GPU
  bytes activation_peak{};              // peak of the profiling forward pass
  bytes non_torch{};                    // CUDA context, NCCL buffers: memory outside PyTorch's allocator
  bytes other_processes{};              // memory held on the GPU by others when the engine starts
  /// CUDA graph memory; 0 with enforce_eager. Outside the budget (captured after the KV cache is sized) unless
  /// `cuda_graphs_in_budget`.
  bytes cuda_graphs{};
  /// vLLM >= 0.21.0 estimates the graphs while profiling and takes them out of the KV budget (vllm/v1/worker/gpu_worker.py
  /// determine_available_memory: requested - non-KV - cudagraph_memory_estimate_applied; VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS).
  bool cuda_graphs_in_budget = false;
  bytes kv_block{};                     // bytes of one KV block on one GPU (kv_bytes_per_block)
  /// V1 refuses to start when free memory is below util x total (vLLM v1 worker request_memory).
  bool refuse_if_free_below_budget = false;
};

/// Whether the engine starts: it needs room for one KV block, and V1 needs util x total free at start.
enum class vllm_start { starts, no_kv_room, refuses_low_free_memory };

struct vllm_engine_memory {
  bytes budget{};          // util x total (per_instance, global_cap) or util x free-after-profiling (verl)
  bytes kv_room{};         // what the budget leaves for the KV cache; negative when the engine does not fit
  bytes kv_cache{};        // whole blocks
  std::int64_t kv_blocks = 0;
  bytes gpu_held{};        // what the engine holds awake: weights + KV + non-torch + CUDA graphs
                           // (+ the profiled activation peak, which generation steps reach again). With the graphs in
                           // the budget this is the budget (less part of a block) whatever the graphs take.
  vllm_start start = vllm_start::starts;
  /// Why the engine does not start, naming the fix; empty when it starts.
  std::string refusal() const {
    switch (start) {
      case vllm_start::starts: return {};
      case vllm_start::no_kv_room:
        return "no memory is left for the KV cache (" + format_bytes(kv_room, size_unit::GiB) +
               "); raise gpu_memory_utilization, use more tensor parallelism or a smaller model";
      case vllm_start::refuses_low_free_memory:
        return "vLLM V1 refuses to start: free memory is below gpu_memory_utilization x total " + format_bytes(budget, size_unit::GiB) +
               "; lower gpu_memory_utilization or free the GPU first";
    }
    return {};
  }
};

/// Sizes the KV cache the way each vLLM version does; `start` says whether the engine starts at all. Throws only
/// for invalid input.
constexpr vllm_engine_memory try_vllm_engine(const vllm_engine_config& c) {
  if (!(c.gpu_memory_utilization > 0.0 && c.gpu_memory_utilization <= 1.0))
    detail::fail_value("gpu_memory_utilization must be in (0, 1]", c.gpu_memory_utilization,
                       "pass a fraction such as 0.9");
  if (c.total.count() <= 0) detail::fail("the GPU's total memory must be positive; pass --gpu or --gpu-memory");
  if (c.kv_block.count() <= 0) detail::fail("the KV block size in bytes must be positive");
  if (c.weights.count() < 0 || c.activation_peak.count() < 0 || c.non_torch.count() < 0 || c.other_processes.count() < 0 ||
      c.cuda_graphs.count() < 0)
    detail::fail("memory terms of a vLLM engine cannot be negative");
  if (c.cuda_graphs_in_budget && c.semantics != vllm_semantics::per_instance)
    detail::fail("the CUDA graph estimate (vLLM >= 0.21) takes from a per-instance budget only; drop it for vLLM before 0.6.4");
  const auto fraction = [&](bytes b) {  // round down: vLLM's int(total * util)
    return bytes_of_checked(static_cast<std::int64_t>(static_cast<long double>(b.count()) * c.gpu_memory_utilization));
  };
  const bytes used_by_engine = c.weights + c.activation_peak + c.non_torch + (c.cuda_graphs_in_budget ? c.cuda_graphs : bytes{});
  vllm_engine_memory r{};
  bytes kv{};
  switch (c.semantics) {
    case vllm_semantics::per_instance:
      r.budget = fraction(c.total);
      kv = r.budget - used_by_engine;
      if (c.refuse_if_free_below_budget && c.total - c.other_processes < r.budget) r.start = vllm_start::refuses_low_free_memory;
      break;
    case vllm_semantics::global_cap:
      r.budget = fraction(c.total);
      kv = r.budget - used_by_engine - c.other_processes;
      break;
    case vllm_semantics::verl_free_fraction:
      r.budget = fraction(c.total - c.other_processes - used_by_engine);
      kv = r.budget;
      break;
  }
  r.kv_room = kv;
  if (r.start == vllm_start::starts && kv.count() < c.kv_block.count()) r.start = vllm_start::no_kv_room;
  if (r.start == vllm_start::starts) {
    r.kv_blocks = kv.count() / c.kv_block.count();  // vLLM: int(available // cache_block_size)
    r.kv_cache = c.kv_block * r.kv_blocks;
  }
  r.gpu_held = c.weights + c.activation_peak + c.non_torch + c.cuda_graphs + r.kv_cache;
  return r;
}

/// As try_vllm_engine, but an engine that does not start is an error naming the fix.
inline vllm_engine_memory vllm_engine(const vllm_engine_config& c) {
  vllm_engine_memory r = try_vllm_engine(c);
  if (r.start != vllm_start::starts) detail::fail(r.refusal());
  return r;
}

/// Sequences of `tokens` tokens the KV cache holds at once: each takes ceil(tokens / block_size) whole blocks
/// (vLLM's block manager allocates whole blocks per sequence).
constexpr std::int64_t vllm_concurrent_sequences(std::int64_t kv_blocks, std::int64_t block_size, std::int64_t tokens) {
  if (kv_blocks < 0) detail::fail_value("the number of KV blocks cannot be negative", kv_blocks, "pass >= 0");
  detail::require_positive(block_size, "the KV block size");
  detail::require_positive(tokens, "the tokens per sequence");
  return kv_blocks / detail::ceil_div(tokens, block_size);
}

/// Sleep mode (vLLM >= 0.7.3, LLM.sleep): level 1 offloads the weights to host RAM and discards the KV cache;
/// level 2 discards both. Returns the host RAM a sleeping engine holds.
constexpr bytes vllm_sleep_host_bytes(int level, bytes weights) {
  if (level == 1) return weights;
  if (level == 2) return bytes{};
  detail::fail_value("vLLM sleep level must be 1 or 2", level, "pass 1 (keep weights on the host) or 2");
}

/// V0 swap space: swap_space GiB of pinned host RAM per GPU (vLLM EngineArgs.swap_space, default 4).
constexpr bytes vllm_swap_space_bytes(std::int64_t swap_space_gib = 4) {
  if (swap_space_gib < 0) detail::fail_value("swap_space cannot be negative", swap_space_gib, "pass GiB >= 0");
  return bytes_of(detail::checked_mul(swap_space_gib, std::int64_t{1} << 30));
}

// ---- one engine from its model and launch arguments ---------------------------------------------------------

/// What a vLLM version means by gpu_memory_utilization, and what it does at start (docs/references.md §4).
struct vllm_version_traits {
  vllm_semantics semantics = vllm_semantics::per_instance;
  bool v1 = false;                          // V1 engine by default (vLLM >= 0.8.0)
  bool refuse_if_free_below_budget = false;  // V1 request_memory
  std::int64_t swap_space_gib = 0;           // V0 EngineArgs.swap_space default 4; V1 has no CPU swap
  /// VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS is on by default from 0.21.0 (vllm/envs.py: "Enabled by default as of
  /// v0.21.0"): the CUDA graphs come out of the KV budget instead of sitting above it.
  bool cuda_graphs_in_budget = false;
};

/// `version` as major x 10^6 + minor x 10^3 + patch (0.6.3 = 6'003). `verl_patched`: verl's own copy of vLLM 0.6.3.
constexpr vllm_version_traits vllm_traits(std::int64_t version, bool verl_patched) {
  if (version <= 0) detail::fail_value("the vLLM version must be positive", version, "pass a version such as 0.8.5");
  vllm_version_traits t{};
  if (version < 6'004) t.semantics = verl_patched ? vllm_semantics::verl_free_fraction : vllm_semantics::global_cap;  // PR #9505
  t.v1 = version >= 8'000;
  t.refuse_if_free_below_budget = t.v1;
  t.swap_space_gib = t.v1 ? 0 : 4;
  t.cuda_graphs_in_budget = version >= 21'000;
  return t;
}

/// The two scheduler limits that size vLLM's profiling pass: tokens in one forward pass, sequences sampled at once.
struct vllm_batch_limits {
  std::int64_t max_num_batched_tokens = 0;
  std::int64_t max_num_seqs = 0;
};

/// Whether a GPU name is an H100 or H200, which vLLM V1 gives larger batch defaults (a device-name check, PR #12369).
constexpr bool h100_or_h200(std::string_view gpu) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  for (std::size_t i = 0; i + 4 <= gpu.size(); ++i)
    if (lower(gpu[i]) == 'h' && (gpu[i + 1] == '1' || gpu[i + 1] == '2') && gpu[i + 2] == '0' && gpu[i + 3] == '0') return true;
  return false;
}

/// vLLM's defaults for the offline LLM class (what RLHF frameworks create), by version and GPU:
/// V0: 256 sequences; max(max_model_len, 2048) tokens, or with chunked prefill (on by default above 32K context)
///     2048 tokens (512 before 0.6.5, PR #10544) (vllm/config.py SchedulerConfig, EngineArgs.create_engine_config).
/// V1: 8192 tokens, 16384 on H100/H200 (PR #12369); 1024 sequences, 256 from 0.8.4 except on H100/H200 (PR #16158).
constexpr vllm_batch_limits vllm_default_limits(std::int64_t version, bool h100_or_h200, std::int64_t max_model_len) {
  detail::require_positive(max_model_len, "the maximum model length");
  vllm_batch_limits l{};
  if (!vllm_traits(version, false).v1) {
    l.max_num_seqs = 256;
    if (max_model_len > 32'768) l.max_num_batched_tokens = version >= 6'005 ? 2048 : 512;
    else l.max_num_batched_tokens = std::max<std::int64_t>(max_model_len, 2048);
  } else {
    l.max_num_batched_tokens = h100_or_h200 ? 16'384 : 8'192;
    l.max_num_seqs = (h100_or_h200 || version < 8'004) ? 1024 : 256;
  }
  return l;
}

/// The peak of vLLM's profiling pass (worker profile_run: max_num_seqs sequences sharing max_num_batched_tokens
/// tokens, then one sampling step with top_k = vocab - 1 and top_p = 0.99) on one GPU, in two moments.
struct vllm_profile_peak {
  /// Inside one decoder layer, tensors alive at its widest point: residual, normed input, the op's intermediates,
  /// its output and the tensor-parallel all-reduce's output (vllm/model_executor/models/llama.py LlamaMLP,
  /// LlamaAttention; fused_moe.py fused_experts intermediate caches 1-3 for MoE).
  bytes layer{};
  /// Sampling: the step's hidden states, the 16-bit logits [seqs x vocab] and 38 B per (sequence, vocab entry) of
  /// fp32/int64/bool tensors alive in _apply_top_k_top_p (vllm/model_executor/layers/sampler.py: fp32 logits 4,
  /// sorted 4, sort indices 8, top-k mask 1, softmax 4, cumsum 4, top-p mask 1, inverse indices 8, re-gathered 4).
  bytes sampler{};
  constexpr bytes peak() const { return std::max(layer, sampler); }
};

constexpr vllm_profile_peak vllm_profile(const transformer_config& m, std::int64_t tp, vllm_batch_limits l, dtype compute = dtype::bf16) {
  validate(m);
  detail::require_positive(tp, "the vLLM tensor-parallel size");
  detail::require_positive(l.max_num_batched_tokens, "max_num_batched_tokens");
  detail::require_positive(l.max_num_seqs, "max_num_seqs");
  detail::require_heads_split(m.heads, tp, "tensor_parallel_size");  // vLLM's ModelConfig.verify_with_parallel_config
  using detail::ceil_div;
  using detail::checked_mul;
  using detail::checked_sum;
  const std::int64_t h = m.hidden, d = m.head_size();
  const std::int64_t q = ceil_div(checked_mul(m.heads, d), tp);
  const std::int64_t kv = checked_mul(kv_heads_per_rank(attention_shape_of(m), tp), d);
  // Per token, elements: attention = residual + normed + qkv + attention output + o_proj output + all-reduce output.
  const std::int64_t attention = checked_sum(checked_mul(4, h), checked_mul(2, q), checked_mul(2, kv));
  std::int64_t mlp = 0;
  if (m.moe.experts > 0) {  // gate_up cache (2f), activation cache (f), down cache (h) per routed expert
    const std::int64_t f = ceil_div(m.moe.expert_ffn, tp);
    mlp = checked_sum(checked_mul(4, h), checked_mul(m.moe.top_k, checked_sum(checked_mul(3, f), h)));
    if (m.moe.shared_experts > 0) {
      // The shared experts run before the routed ones and their output (h, reduce_results=False) stays alive through
      // fused_experts until the sum (vllm/model_executor/models/qwen2_moe.py Qwen2MoeSparseMoeBlock with
      // SharedFusedMoE; shared_output first in vLLM <= 0.10). Their own moment, Qwen2MoeMLP.forward: residual,
      // normed input, gate_up (2 fs/tp, still bound) and the activation (fs/tp) beside down_proj's output.
      const std::int64_t fs = ceil_div(checked_mul(m.moe.shared_experts, m.moe.expert_ffn), tp);
      mlp = std::max(checked_sum(mlp, h), checked_sum(checked_mul(3, h), checked_mul(3, fs)));
    }
  } else {  // SwiGLU: gate_up (2f) + activation (f); GELU: fc1 (f) + activation (f)
    const std::int64_t f = ceil_div(m.ffn, tp);
    mlp = checked_sum(checked_mul(4, h), checked_mul(m.mlp == mlp_kind::swiglu ? 3 : 2, f));
  }
  const std::int64_t seqs = std::min(l.max_num_seqs, l.max_num_batched_tokens);  // each dummy sequence has >= 1 token
  const bytes_per_element act = size_of(compute);
  vllm_profile_peak p{};
  p.layer = elements_of(checked_mul(l.max_num_batched_tokens, std::max(attention, mlp))) * act;
  const std::int64_t logits = checked_mul(seqs, m.vocab);
  p.sampler = elements_of(checked_sum(checked_mul(l.max_num_batched_tokens, h), logits)) * act +
              bytes_of(checked_mul(38, logits));
  return p;
}

/// vLLM's max_lora_rank for an adapter of rank `rank`: the smallest allowed value at or above it (vllm/config/lora.py
/// MaxLoRARanks = 1, 8, 16, 32, 64, 128, 256, 320, 512; verl rounds up so, vllm_rollout/utils.py get_vllm_max_lora_rank).
constexpr std::int64_t vllm_max_lora_rank(std::int64_t rank) {
  detail::require_positive(rank, "the LoRA rank");
  for (std::int64_t allowed : {1, 8, 16, 32, 64, 128, 256, 320, 512})
    if (rank <= allowed) return allowed;
  detail::fail_value("vLLM serves LoRA ranks up to 512", rank, "use a LoRA rank of at most 512");
}

/// Elements of the LoRA slots an engine with enable_lora allocates on one tensor-parallel rank when it loads the model,
/// whatever adapter it later serves: max_loras slots of max_lora_rank for every decoder linear layer
/// (vllm/lora/layers/base_linear.py create_lora_weights: lora_a [max_loras, 1, r, input], lora_b [max_loras, 1, output, r];
/// column-parallel layers keep the whole input and their output shard, row-parallel ones their input shard and the
/// whole output; q/k/v are three slices of qkv_proj, gate and up two of gate_up_proj). Per layer and slot:
/// r x (7h + (2q + 3f) / tp + 2 kv-per-rank). The embedding and lm_head slots are not counted.
constexpr elements vllm_lora_slot_elements(const transformer_config& m, std::int64_t tp, std::int64_t max_lora_rank, std::int64_t max_loras = 1) {
  validate(m);
  detail::require_positive(tp, "the vLLM tensor-parallel size");
  detail::require_positive(max_loras, "max_loras");
  if (m.moe.experts > 0 || m.mlp != mlp_kind::swiglu)
    detail::fail("vLLM LoRA slots are modelled for dense SwiGLU decoders (Llama, Qwen, Mistral); this model is not one");
  using detail::ceil_div, detail::checked_mul, detail::checked_sum;
  const std::int64_t d = m.head_size();
  const std::int64_t q = ceil_div(checked_mul(m.heads, d), tp);
  const std::int64_t kv = checked_mul(kv_heads_per_rank(attention_shape_of(m), tp), d);
  const std::int64_t f = ceil_div(m.ffn, tp);
  const std::int64_t per_rank_unit = checked_sum(checked_mul(7, m.hidden), checked_mul(2, q), checked_mul(2, kv), checked_mul(3, f));
  return elements_of(checked_mul(checked_mul(checked_mul(max_lora_rank, per_rank_unit), m.layers), max_loras));
}

/// One engine as launched: the model, its tensor parallelism, dtypes, block size, batch limits and context length.
struct vllm_engine_spec {
  transformer_config model{};
  std::int64_t tp = 1;
  dtype weights = dtype::bf16;
  dtype kv_dtype = dtype::bf16;
  std::int64_t block_size = 16;
  vllm_batch_limits limits{};
  std::int64_t max_model_len = 0;
  std::int64_t max_lora_rank = 0;  // enable_lora with max_loras = 1; 0: LoRA off
};

struct vllm_sizing {
  bytes weights{};         // this GPU's share of the weights
  bytes lora_slots{};      // enable_lora's slots, loaded with the weights (inside the budget)
  vllm_profile_peak profile{};
  bytes kv_block{};
  vllm_engine_memory memory{};
  std::int64_t kv_tokens = 0;             // blocks x block size
  std::int64_t blocks_per_sequence = 0;   // a max_model_len sequence, whole blocks
  std::int64_t full_length_sequences = 0; // max_model_len sequences the cache holds at once
  /// vLLM's "maximum concurrency": KV tokens / max_model_len (V0 executor_base.py initialize_cache).
  double concurrency = 0.0;
};

/// Sizes one engine: its weights, profiled activation peak and KV block from `s`; the rest of `c` (total memory,
/// utilization, semantics, non-torch memory, other processes, CUDA graphs, V1 refusal) as given.
constexpr vllm_sizing size_vllm_engine(const vllm_engine_spec& s, vllm_engine_config c) {
  detail::require_positive(s.max_model_len, "the maximum model length");
  vllm_sizing r{};
  r.weights = largest_share(count_parameters(s.model).total * size_of(s.weights), s.tp);
  // lora_dtype "auto" is the model's dtype (vllm/config/lora.py).
  if (s.max_lora_rank > 0) r.lora_slots = vllm_lora_slot_elements(s.model, s.tp, s.max_lora_rank) * size_of(s.weights);
  r.profile = vllm_profile(s.model, s.tp, s.limits, s.weights);
  kv_cache_config kv{};
  kv.kv_dtype = s.kv_dtype;
  kv.tp = s.tp;
  kv.block_size = s.block_size;
  r.kv_block = kv_bytes_per_block(s.model, kv);
  c.weights = r.weights + r.lora_slots;
  c.activation_peak = r.profile.peak();
  c.kv_block = r.kv_block;
  r.memory = try_vllm_engine(c);
  r.kv_tokens = detail::checked_mul(r.memory.kv_blocks, s.block_size);
  r.blocks_per_sequence = kv_blocks_for(s.max_model_len, kv);
  r.full_length_sequences = r.memory.kv_blocks / r.blocks_per_sequence;
  r.concurrency = static_cast<double>(r.kv_tokens) / static_cast<double>(s.max_model_len);
  return r;
}

}  // namespace zeromem
