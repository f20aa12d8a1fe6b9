// `zeromem estimate`: the flags, the job they describe, and its report.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"

namespace zeromem::cli {

struct estimate_args {
  // model states
  std::string params;
  std::string precision_name = "mixed-bf16";
  std::string optimizer_name = "adamw";
  double weight_decay = 0.0;  // torch.optim's weight_decay
  bool amsgrad = false, rmsprop_centered = false, rmsprop_momentum = false, nesterov = false;
  std::int64_t zero_stage = -1;  // -1: not given (the flag accepts 0 to 3 only)
  std::string fsdp;
  std::int64_t dp = 1;
  std::int64_t gpus_per_node = 8;
  std::int64_t shard_group = 0;  // 0: not given (the flag accepts 1 and up)
  std::int64_t hpz = 1;
  std::string offload_optimizer = "none";
  std::string offload_params = "none";
  bool pin_memory = false;
  bool fp32_grad_copy = false;
  std::string main_grads;
  std::string largest_layer;
  std::int64_t grad_accum_steps = 1;
  // DeepSpeed ZeRO's buffers (zero_optimization); empty: DeepSpeed's defaults
  std::string reduce_bucket, prefetch_bucket, overlap_comm;
  std::string max_reuse_distance;  // ZeRO-3's stage3_max_reuse_distance (zero3_retained_parameters); empty: 1e9
  std::string param_persistence_threshold;  // ZeRO-3's stage3_param_persistence_threshold (zero3_retained::persistent); empty: 1e5
  std::string deepspeed_version;   // 0.16.x: ZeRO-3 with recompute keeps what its backward gathers (known_defects)
  // --deepspeed-config: the file, emptied once its keys are written into the flags (with_deepspeed_config); then
  // deepspeed_file names it and deepspeed_read lists the keys read, each with its value as applied.
  std::string deepspeed_config, deepspeed_file;
  std::vector<std::pair<std::string, std::string>> deepspeed_read;
  std::set<std::string> given_flags;  // the flags on the command line, to check them against the config
  // ZeRO-3's sub-groups and NVMe swap buffers, from a DeepSpeed config only (-1 / 0: DeepSpeed's defaults, zero_config)
  std::int64_t sub_group_size = -1, optimizer_buffer_count = 0, param_buffer_count = 0, param_buffer_size = 0;
  model_flags model;
  // what trains
  std::int64_t lora_rank = 0;  // 0: not given
  std::string lora_targets;
  double lora_dropout = 0.0;
  std::string lora_dtype{name(lora_config{}.adapter_dtype)};
  std::string quantize{name(adaptation{}.quantize)};
  bool no_double_quant = false;
  bool paged_optimizer = false;
  std::string freeze;
  // activations
  std::int64_t seq_len = 0;  // 0: not given
  std::int64_t micro_batch = 1;
  std::int64_t image_tokens = 0;  // of each sequence's --seq-len tokens (vision models)
  std::int64_t tp = 1, cp = 1, pp = 1, virtual_stages = 1, microbatches = 0;
  bool sp = false;
  std::string recompute_name = "none";
  std::string attention_name{name(activation_config{}.attention)};  // the library's default
  double dropout = 0.0;
  bool dropout_given = false;  // --dropout replaces config.json's dropouts
  std::string implementation_name{name(activation_config{}.impl)};
  std::string device_name = "cuda";
  std::string activation_dtype;  // default: the precision's compute dtype
  std::int64_t torch_major = 2;
  // the step model
  std::string loss = "hf";
  std::string optimizer_impl;  // empty: PyTorch's default for the optimizer (pytorch_default_impl)
  std::string allocator = "default";
  bool ddp = false;
  // forward only (a reference or reward model, a log-prob pass)
  bool forward_only = false;
  std::string forward_output{name(forward_only_config{}.output)};
  bool no_cache = false;
  bool gradient_as_bucket_view = false;
  std::string cuda_context;
  std::string cuda_modules;
  std::string blas_workspaces;
  bool keep_grads = false;
  double reserve_fraction = 0.0;
  std::string host_memory;  // one node's host RAM (per_node_host's verdict; --explain keeps its fixes within it)
  std::string nvme_capacity;  // one node's NVMe (per_node_nvme's verdict; likewise)
  std::string gpu;
  std::string gpu_memory;
  bool explain = false;
  std::string svg;
  bool json = false;
};

/// The job the flags describe (the library's training_job, which plan and the RLHF roles evaluate too), and what
/// the flags left out: a model (--params alone gives model states only) and the activations (no --seq-len).
struct estimate_inputs {
  training_job job{};
  bool has_model = false;
  parameter_counts counts{};
  bool has_activations = false;
};

void add_estimate_flags(CLI::App& app, estimate_args& a);
/// --deepspeed-config: the flags with the config's keys written in (a flag the config sets too must agree; "auto" takes
/// the flag, as Hugging Face Trainer fills it); the same flags without a config (estimate_deepspeed.cpp).
estimate_args with_deepspeed_config(const estimate_args& a);
/// --quantize and --no-double-quant, as the model's reader and the adaptation take them; throws std::invalid_argument
/// for --no-double-quant without nf4.
hf_quantization quantization_of(const estimate_args& a);
/// --host-memory: one node's host RAM, none where not given; throws std::invalid_argument for a size it cannot read.
std::optional<bytes> host_capacity_of(const estimate_args& a);
/// --nvme-capacity: one node's NVMe, none where not given; likewise.
std::optional<bytes> nvme_capacity_of(const estimate_args& a);
/// Validates the flags together and builds the job; throws std::invalid_argument naming the flag.
estimate_inputs to_inputs(const estimate_args& a);
int run_estimate(const estimate_args& a, std::ostream& out);
/// --forward-only: the forward-only model and its verdict (estimate_forward.cpp).
int run_forward_only(const estimate_args& a, std::ostream& out);
/// The text report: the step's peak and verdict (with --seq-len), the job, then per-GPU, host and NVMe tables.
void print_estimate(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e,
                    const stage_activations* act, const step_estimate* step, const device_choice& device);
/// One flag a fix sets, to `value` (a switch's "true" / "false": false drops it); where the DeepSpeed config sets the
/// flag's key, the change is made there, the key set to `config_value` (JSON text), since a flag that disagrees with
/// the config is refused.
struct fix_setting {
  std::string flag;
  std::string value;
  bool is_switch = false;
  std::string config_key;
  std::string config_value;
};
/// With --deepspeed-config: the config sets `key` to a value of its own ("auto" is filled from the flag, as Hugging Face
/// Trainer fills it), so a change to it is made in the config (estimate_fix.cpp).
bool set_by_config(const estimate_args& a, const std::string& key);
/// Where the config's train_batch_size is a number: whether the accumulation is derived from it after the change from
/// `before` to `after` (the micro-batch and dp given, the accumulation not; runtime/config.py _set_batch_related_parameters).
bool accumulation_derived(const estimate_args& before, const estimate_args& after);
/// What the change from `before` to `after` sets: each flag whose value it changes, in the config where the config sets it.
std::vector<fix_setting> settings_of(const estimate_args& before, const estimate_args& after);
/// A fix --explain names: what kind ("change", "two changes", "three changes", "gpus", "gpus with a change"), each
/// change as it prints it, every flag the fix sets (with the accumulation that keeps a config's train_batch_size), and
/// the verdict with them (JSON `fixes[]`).
struct explained_fix {
  std::string kind;
  std::vector<std::string> changes;
  std::vector<fix_setting> settings;
  step_verdict verdict;
};
/// --explain for the step (estimate_explain.cpp): the terms of its peak, the verdict, and the smallest change (or two
/// or three changes, or more GPUs) to the command line `a` that makes it fit; each fix named added to `fixes`.
void explain_step(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const step_estimate& e, const device_choice& device,
                  std::vector<explained_fix>& fixes);
/// --explain: the step's (explain_step), or without --seq-len the model states' dominant terms and verdict.
void explain_estimate(std::ostream& out, const estimate_args& a, const estimate_inputs& in, const model_state_estimate& e,
                      const step_estimate* step, const device_choice& device, std::vector<explained_fix>& fixes);

}  // namespace zeromem::cli
