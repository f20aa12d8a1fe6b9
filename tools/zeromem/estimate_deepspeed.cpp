// `zeromem estimate --deepspeed-config ds.json`: the config's keys written into the flags they set, so that the job is
// evaluated exactly as the same flags would be. A flag the config also sets must agree with it; "auto" takes the flag,
// as Hugging Face Trainer fills it from its own arguments (transformers integrations/deepspeed.py trainer_config_process).
#include "zeromem/engines/deepspeed_config.hpp"

#include "estimate.hpp"

namespace zeromem::cli {
namespace {

struct merge {
  estimate_args& a;
  std::vector<std::pair<std::string, std::string>>& read;

  bool given(const char* flag) const { return a.given_flags.count(flag) > 0; }
  // The config sets `key` to `value`, which `flag` would set to `flag_value`: refused when the flag was given too and differs.
  void agree(const char* flag, const std::string& flag_value, const std::string& key, const std::string& value) const {
    if (given(flag) && flag_value != value)
      detail::fail(std::string(flag) + " " + flag_value + " disagrees with the DeepSpeed config's " + key + " " + value +
                   "; drop the flag or change the config");
  }
  // The same for an element count, which the flag may write as 1e9 where the config has 1000000000.
  void agree_elements(const char* flag, const std::string& flag_value, const std::string& key, std::int64_t value) const {
    if (given(flag) && parse_elements(flag_value, flag).count() != value)
      detail::fail(std::string(flag) + " " + flag_value + " disagrees with the DeepSpeed config's " + key + " " + std::to_string(value) +
                   "; drop the flag or change the config");
  }
  void note(const std::string& key, const std::string& value) const { read.emplace_back(key, value); }
};

std::string text_of(std::int64_t v) { return std::to_string(v); }
std::string text_of(bool v) { return v ? "true" : "false"; }

// "auto" needs the flag that fills it; `fill` names the Trainer's argument.
void require_flag(const merge& m, const char* flag, const std::string& key, const char* fill) {
  if (!m.given(flag))
    detail::fail("the DeepSpeed config's " + key + " is \"auto\", which Hugging Face Trainer fills from " + fill + "; pass " + flag);
}

void merge_precision(merge& m, const deepspeed_config& c) {
  if (c.bf16.is_auto() || c.fp16.is_auto()) {
    require_flag(m, "--precision", c.bf16.is_auto() ? "bf16.enabled" : "fp16.enabled", "--bf16 / --fp16 (mixed-bf16, mixed-fp16 or fp32)");
    m.note(c.bf16.is_auto() ? "bf16.enabled" : "fp16.enabled", "auto: --precision " + m.a.precision_name);
    return;
  }
  // DeepSpeed's bf16 and fp16 modes keep fp32 master weights and optimizer states (runtime/bf16_optimizer.py,
  // zero/stage_1_and_2.py single_partition_of_fp32_groups); with neither the job trains in fp32.
  const bool bf16 = c.bf16.is_set() && c.bf16.value, fp16 = c.fp16.is_set() && c.fp16.value;
  const std::string precision = bf16 ? "mixed-bf16" : fp16 ? "mixed-fp16" : "fp32";
  m.agree("--precision", m.a.precision_name, bf16 ? "bf16.enabled" : fp16 ? "fp16.enabled" : "precision (neither bf16 nor fp16 enabled)",
          bf16 || fp16 ? "true (" + precision + ")" : precision);
  m.a.precision_name = precision;
  m.note(bf16 ? "bf16.enabled" : fp16 ? "fp16.enabled" : "bf16.enabled, fp16.enabled", bf16 || fp16 ? "true (mixed precision)" : "false (fp32)");
}

void merge_offload(merge& m, const deepspeed_config& c) {
  bool pin = false, offloaded = false;
  const auto one = [&](const char* flag, const char* key, const deepspeed_key<offload_device>& d, const deepspeed_key<bool>& p,
                       std::string& target) {
    if (!d.is_set()) return;
    m.agree(flag, target, std::string("zero_optimization.") + key + ".device", std::string(name(d.value)));
    target = std::string(name(d.value));
    m.note(std::string("zero_optimization.") + key + ".device", target);
    if (d.value == offload_device::none) return;
    // pin_memory: true by default since DeepSpeed v0.19.5 (PR #8207, zero/offload_config.py); false before it.
    const bool pinned = p.is_set() ? p.value : true;
    m.note(std::string("zero_optimization.") + key + ".pin_memory",
           p.is_set() ? text_of(p.value) : "true (DeepSpeed's default since v0.19.5; write false for older versions)");
    if (offloaded && pinned != pin)
      detail::fail("the DeepSpeed config pins one offloaded state and not the other; zeromem's --pin-memory takes both alike");
    pin = pinned;
    offloaded = true;
  };
  one("--offload-optimizer", "offload_optimizer", c.offload_optimizer, c.pin_optimizer, m.a.offload_optimizer);
  one("--offload-params", "offload_param", c.offload_param, c.pin_param, m.a.offload_params);
  if (!offloaded) return;
  if (m.a.pin_memory && !pin) detail::fail("--pin-memory disagrees with the DeepSpeed config's pin_memory false; drop one");
  m.a.pin_memory = pin;
}

// DeepSpeed's batch: train_batch_size = micro-batch x gradient accumulation x data-parallel ranks, the missing one
// derived from the others (runtime/config.py _set_batch_related_parameters and _batch_assertion).
void merge_batch(merge& m, const deepspeed_config& c) {
  estimate_args& a = m.a;
  // The micro-batch sizes activations only: without --seq-len it enters the batch arithmetic, not the job.
  std::int64_t micro_batch = a.micro_batch;
  if (c.micro_batch.is_set()) {
    m.agree("--micro-batch", text_of(a.micro_batch), "train_micro_batch_size_per_gpu", text_of(c.micro_batch.value));
    micro_batch = c.micro_batch.value;
    m.note("train_micro_batch_size_per_gpu", text_of(micro_batch));
  } else if (c.micro_batch.is_auto() && a.seq_len != 0) {
    require_flag(m, "--micro-batch", "train_micro_batch_size_per_gpu", "--per_device_train_batch_size");
    m.note("train_micro_batch_size_per_gpu", "auto: --micro-batch " + text_of(a.micro_batch));
  }
  if (c.grad_accum.is_set()) {
    m.agree("--grad-accum-steps", text_of(a.grad_accum_steps), "gradient_accumulation_steps", text_of(c.grad_accum.value));
    a.grad_accum_steps = c.grad_accum.value;
    m.note("gradient_accumulation_steps", text_of(a.grad_accum_steps));
  } else if (c.grad_accum.is_auto()) {  // the Trainer's --gradient_accumulation_steps, 1 by default as --grad-accum-steps
    m.note("gradient_accumulation_steps", "auto: --grad-accum-steps " + text_of(a.grad_accum_steps));
  }
  if (a.seq_len != 0) a.micro_batch = micro_batch;
  if (!c.train_batch.is_set()) return;
  const std::int64_t total = c.train_batch.value;
  const bool micro = c.micro_batch.is_set() || m.given("--micro-batch"), accum = c.grad_accum.is_set() || m.given("--grad-accum-steps");
  if (!m.given("--dp")) {
    if (!micro || !accum)
      detail::fail("the DeepSpeed config's train_batch_size " + text_of(total) + " is split over the data-parallel ranks; pass --dp");
    const std::int64_t per_rank = detail::checked_mul(micro_batch, a.grad_accum_steps, "micro-batch x gradient accumulation");
    if (total % per_rank != 0)
      detail::fail("the DeepSpeed config's train_batch_size " + text_of(total) + " is not a multiple of micro-batch x gradient accumulation " +
                   text_of(per_rank) + "; fix the config");
    a.dp = total / per_rank;
  } else if (!micro) {
    micro_batch = total / a.dp / a.grad_accum_steps;
    if (a.seq_len != 0) a.micro_batch = micro_batch;
  } else if (!accum) {
    a.grad_accum_steps = total / a.dp / micro_batch;
  }
  if (micro_batch < 1 || a.grad_accum_steps < 1 ||
      total != detail::checked_mul(detail::checked_mul(micro_batch, a.grad_accum_steps, "the batch"), a.dp, "the batch"))
    detail::fail("Check batch related parameters: the DeepSpeed config's train_batch_size " + text_of(total) +
                 " is not micro-batch x gradient accumulation x data-parallel ranks (" + text_of(micro_batch) + " x " +
                 text_of(a.grad_accum_steps) + " x " + text_of(a.dp) + "); fix the config or the flags");
  m.note("train_batch_size", text_of(total) + " = " + text_of(micro_batch) + " x " + text_of(a.grad_accum_steps) + " x dp " + text_of(a.dp));
}

// The buffers: read where DeepSpeed allocates them (stage 1-3; the prefetch bucket at stage 3; overlap_comm sizes
// ZeRO-1/2 only) and only for the step's peak. "auto" is Hugging Face Trainer's (transformers integrations/deepspeed.py
// trainer_config_finalize): reduce_bucket_size hidden^2, stage3_prefetch_bucket_size int(0.9 x hidden^2),
// stage3_param_persistence_threshold 10 x hidden.
void merge_buffers(merge& m, const deepspeed_config& c, int stage) {
  estimate_args& a = m.a;
  if (stage == 0 || a.seq_len == 0) return;
  std::int64_t hidden = 0;
  const auto hidden_size = [&] {
    if (hidden == 0) {
      if (!a.model.given()) detail::fail("the DeepSpeed config's \"auto\" sizes follow the model's hidden size: give a model");
      hidden = model_of(a.model, quantization_of(a)).hidden;
    }
    return hidden;
  };
  // A count the config sets: the flag's value, refused where the flag was given too and differs.
  const auto from_config = [&](const char* flag, const char* key, const deepspeed_key<std::int64_t>& k, std::string& target) {
    if (!k.is_set()) return false;
    m.agree_elements(flag, target, key, k.value);
    target = text_of(k.value);
    m.note(key, target);
    return true;
  };
  const auto bucket = [&](const char* flag, const char* key, const deepspeed_key<std::int64_t>& k, std::string& target, double scale) {
    if (!from_config(flag, key, k, target) && k.is_auto() && !m.given(flag)) {
      const std::int64_t h2 = detail::checked_mul(hidden_size(), hidden_size(), "hidden x hidden");
      target = text_of(scale == 1.0 ? h2 : static_cast<std::int64_t>(scale * static_cast<double>(h2)));
      m.note(key, "auto: " + target + " (Hugging Face Trainer's " + (scale == 1.0 ? "hidden^2" : "0.9 x hidden^2") + ")");
    }
  };
  bucket("--reduce-bucket", "zero_optimization.reduce_bucket_size", c.reduce_bucket, a.reduce_bucket, 1.0);
  if (stage != 3) {
    if (c.overlap_comm.is_set()) {
      const std::string v = c.overlap_comm.value ? "on" : "off";
      m.agree("--overlap-comm", a.overlap_comm, "zero_optimization.overlap_comm", v);
      a.overlap_comm = v;
      m.note("zero_optimization.overlap_comm", text_of(c.overlap_comm.value));
    }
    return;
  }
  bucket("--prefetch-bucket", "zero_optimization.stage3_prefetch_bucket_size", c.prefetch_bucket, a.prefetch_bucket, 0.9);
  const char* reuse = "zero_optimization.stage3_max_reuse_distance";
  if (!from_config("--max-reuse-distance", reuse, c.max_reuse_distance, a.max_reuse_distance) && c.max_reuse_distance.is_auto() &&
      !m.given("--max-reuse-distance"))
    // Hugging Face Trainer fills no "auto" here (trainer_config_finalize), and DeepSpeed drops "auto" values before it
    // reads the config (runtime/config_utils.py DeepSpeedConfigModel.__init__): its default applies.
    m.note(reuse, "auto: DeepSpeed's default " + text_of(runtime_overheads{}.max_reuse_distance));
  // Hugging Face Trainer fills this "auto" with 10 x hidden (trainer_config_finalize).
  const char* persistence = "zero_optimization.stage3_param_persistence_threshold";
  if (!from_config("--param-persistence-threshold", persistence, c.param_persistence, a.param_persistence_threshold) &&
      c.param_persistence.is_auto() && !m.given("--param-persistence-threshold")) {
    a.param_persistence_threshold = text_of(detail::checked_mul(10, hidden_size(), "10 x hidden"));
    m.note(persistence, "auto: " + a.param_persistence_threshold + " (Hugging Face Trainer's 10 x hidden)");
  }
}

void merge_optimizer(merge& m, const deepspeed_config& c) {
  estimate_args& a = m.a;
  if (c.optimizer.is_set()) {
    const std::string kind{name(c.optimizer.value)};
    m.agree("--optimizer", a.optimizer_name, "optimizer.type", kind);
    a.optimizer_name = kind;
    m.note("optimizer.type", kind);
  } else if (a.seq_len != 0 && !m.given("--optimizer-impl") && a.offload_optimizer == "none") {
    // No optimizer section: DeepSpeed wraps the client's optimizer (runtime/engine.py _configure_optimizer), taken as
    // torch.optim's with its default implementation rather than DeepSpeed's FusedAdam.
    a.optimizer_impl = std::string(name(pytorch_default_impl(parse_optimizer(a.optimizer_name))));
    m.note("optimizer", "absent: the client's torch.optim." + a.optimizer_name + ", --optimizer-impl " + a.optimizer_impl);
  }
  if (c.weight_decay.is_set() && a.seq_len != 0) {  // the decay's temporaries are the step's (estimate_args.cpp)
    if (m.given("--weight-decay") && a.weight_decay != c.weight_decay.value)
      detail::fail("--weight-decay " + json(a.weight_decay).dump() + " disagrees with the DeepSpeed config's optimizer.params.weight_decay " +
                   json(c.weight_decay.value).dump() + "; drop the flag or change the config");
    a.weight_decay = c.weight_decay.value;
    m.note("optimizer.params.weight_decay", json(a.weight_decay).dump());
  }
  // torch_adam: torch.optim.Adam / AdamW in place of FusedAdam (engine.py _configure_basic_optimizer), its default
  // implementation foreach on CUDA; on a CPU-offloaded optimizer no temporaries reach the GPU.
  if (c.torch_adam && a.seq_len != 0 && !m.given("--optimizer-impl") && a.offload_optimizer == "none") {
    a.optimizer_impl = "foreach";
    m.note("optimizer.params.torch_adam", "true: torch.optim, --optimizer-impl foreach");
  }
}

}  // namespace

estimate_args with_deepspeed_config(const estimate_args& given) {
  estimate_args a = given;
  if (a.deepspeed_config.empty()) return a;
  if (!a.fsdp.empty() || a.ddp) detail::fail("--deepspeed-config describes a DeepSpeed job; drop --fsdp and --ddp");
  const deepspeed_config c = read_deepspeed_config(a.deepspeed_config);
  a.deepspeed_read.clear();
  merge m{a, a.deepspeed_read};
  // zero_optimization.stage, DeepSpeed's default 0 when absent (zero/config.py DeepSpeedZeroConfig.stage).
  if (a.forward_only) detail::fail("--deepspeed-config describes a training job; drop --forward-only or the config");
  // "auto" is filled by the Trainer for batch, precision and buckets only; DeepSpeed drops it (runtime/config_utils.py).
  if (c.zero_stage.is_auto())
    detail::fail("the DeepSpeed config's zero_optimization.stage is \"auto\", which nothing fills (DeepSpeed reads it as 0); write the stage");
  {
    const int stage = c.zero_stage.is_set() ? c.zero_stage.value : 0;
    m.agree("--zero-stage", text_of(a.zero_stage), "zero_optimization.stage", text_of(std::int64_t{stage}));
    a.zero_stage = stage;
    m.note("zero_optimization.stage", c.zero_stage.is_set() ? text_of(std::int64_t{stage}) : "0 (absent: DeepSpeed's default)");
  }
  if (c.hpz.is_set()) {
    m.agree("--hpz", text_of(a.hpz), "zero_optimization.zero_hpz_partition_size", text_of(c.hpz.value));
    a.hpz = c.hpz.value;
    m.note("zero_optimization.zero_hpz_partition_size", text_of(a.hpz));
  }
  // NVMe swap buffers (model_states.hpp: pinned host RAM), read as DeepSpeed's swappers take them.
  const auto swap = [&](const char* key, const deepspeed_key<std::int64_t>& k, std::int64_t& target) {
    if (!k.is_set()) return;
    target = k.value;
    m.note(key, text_of(k.value));
  };
  swap("zero_optimization.sub_group_size", c.sub_group_size, a.sub_group_size);
  swap("zero_optimization.offload_optimizer.buffer_count", c.optimizer_buffer_count, a.optimizer_buffer_count);
  swap("zero_optimization.offload_param.buffer_count", c.param_buffer_count, a.param_buffer_count);
  swap("zero_optimization.offload_param.buffer_size", c.param_buffer_size, a.param_buffer_size);
  merge_precision(m, c);
  merge_offload(m, c);
  merge_batch(m, c);
  merge_buffers(m, c, static_cast<int>(a.zero_stage));
  merge_optimizer(m, c);
  for (const std::string& n : c.notes) m.note("ignored", n);
  a.deepspeed_config.clear();  // merged: the flags now say what the config said
  a.deepspeed_file = given.deepspeed_config;
  return a;
}

}  // namespace zeromem::cli
