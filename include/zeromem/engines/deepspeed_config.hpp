// Reads a DeepSpeed config (the JSON given to deepspeed.initialize, or to Hugging Face TrainingArguments(deepspeed=...))
// into what zeromem models of it: ZeRO's stage, offload and buffers, the precision, the batch, the optimizer. Part of
// the optional hf_config component (nlohmann/json). Each key is read as DeepSpeed reads it, its source named where it
// is read; keys that change memory in ways zeromem does not model are refused, so nothing is silently dropped.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "zeromem/core/error.hpp"
#include "zeromem/model/hf_config.hpp"
#include "zeromem/training/recipe.hpp"
#include "zeromem/training/sharding.hpp"

namespace zeromem {

/// One key of a DeepSpeed config: absent (DeepSpeed's default applies), "auto" (Hugging Face Trainer and Accelerate
/// fill it from their own arguments before DeepSpeed reads the config), or a value.
template <class T>
struct deepspeed_key {
  enum class state { absent, automatic, set };
  state given = state::absent;
  T value{};
  constexpr bool is_set() const { return given == state::set; }
  constexpr bool is_auto() const { return given == state::automatic; }
};

/// What a DeepSpeed config sets that zeromem models. Absent keys keep DeepSpeed's defaults, which the caller applies
/// (deepspeed/runtime/zero/config.py DeepSpeedZeroConfig, zero/offload_config.py, runtime/config.py).
struct deepspeed_config {
  deepspeed_key<int> zero_stage;                             // zero_optimization.stage (default 0)
  deepspeed_key<offload_device> offload_optimizer;           // zero_optimization.offload_optimizer.device
  deepspeed_key<offload_device> offload_param;               // zero_optimization.offload_param.device
  deepspeed_key<bool> pin_optimizer, pin_param;              // offload_*.pin_memory
  deepspeed_key<bool> bf16, fp16;                            // bf16.enabled, fp16.enabled (default false)
  deepspeed_key<std::int64_t> micro_batch;                   // train_micro_batch_size_per_gpu
  deepspeed_key<std::int64_t> grad_accum;                    // gradient_accumulation_steps
  deepspeed_key<std::int64_t> train_batch;                   // train_batch_size
  deepspeed_key<std::int64_t> reduce_bucket;                 // zero_optimization.reduce_bucket_size (default 5e8)
  deepspeed_key<std::int64_t> prefetch_bucket;               // zero_optimization.stage3_prefetch_bucket_size (5e7)
  deepspeed_key<bool> overlap_comm;                          // zero_optimization.overlap_comm
  deepspeed_key<std::int64_t> max_reuse_distance;            // zero_optimization.stage3_max_reuse_distance (default 1e9)
  deepspeed_key<std::int64_t> param_persistence;             // zero_optimization.stage3_param_persistence_threshold (1e5)
  deepspeed_key<std::int64_t> hpz;                           // zero_optimization.zero_hpz_partition_size (default 1)
  // NVMe swap buffers pinned in host RAM (zero_config's fields of the same names).
  deepspeed_key<std::int64_t> sub_group_size;                // zero_optimization.sub_group_size (default 1e9)
  deepspeed_key<std::int64_t> optimizer_buffer_count;        // offload_optimizer.buffer_count (default 4)
  deepspeed_key<std::int64_t> param_buffer_count;            // offload_param.buffer_count (default 5)
  deepspeed_key<std::int64_t> param_buffer_size;             // offload_param.buffer_size (default 1e8)
  deepspeed_key<optimizer_kind> optimizer;                   // optimizer.type (absent: the client's optimizer)
  deepspeed_key<double> weight_decay;                        // optimizer.params.weight_decay
  bool torch_adam = false;                                   // optimizer.params.torch_adam: torch.optim's Adam/AdamW
  /// Keys read whose values DeepSpeed ignores here (offload at a stage that does not read it), in words.
  std::vector<std::string> notes;
};

namespace detail::ds {

using json = nlohmann::json;

[[noreturn]] inline void fail_config(const std::string& what) { detail::fail("DeepSpeed config: " + what); }

// The JSON helpers config.json's reader has: a value as an error shows it, and a key with null read as absent.
using detail::hf::find;
using detail::hf::shown;

inline bool is_auto(const json& v) { return v.is_string() && v.get<std::string>() == "auto"; }

// A key's value: absent or null -> absent; "auto" -> automatic; else `read` converts it (and refuses bad values).
template <class T, class Read>
deepspeed_key<T> key_of(const json& j, const char* key, Read read) {
  deepspeed_key<T> k{};
  const json* v = find(j, key);
  if (v == nullptr) return k;
  if (is_auto(*v)) {
    k.given = deepspeed_key<T>::state::automatic;
    return k;
  }
  k.given = deepspeed_key<T>::state::set;
  k.value = read(*v);
  return k;
}

inline bool boolean(const json& v, const std::string& key) {
  if (!v.is_boolean()) fail_config(key + " must be true, false or \"auto\", got " + shown(v));
  return v.get<bool>();
}

// DeepSpeed's integer fields accept JSON numbers written as floats (5e8): pydantic's int coerces whole floats.
inline std::int64_t count(const json& v, const std::string& key, std::int64_t lowest) {
  if (v.is_number_integer() && v.get<std::int64_t>() >= lowest) return v.get<std::int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (d >= static_cast<double>(lowest) && d < 9.2e18 && d == static_cast<double>(static_cast<std::int64_t>(d)))
      return static_cast<std::int64_t>(d);
  }
  fail_config(key + " must be a whole number of at least " + std::to_string(lowest) + " (or \"auto\"), got " + shown(v));
}

inline const json& section(const json& j, const char* key) {
  static const json empty = json::object();
  const json* v = find(j, key);
  if (v == nullptr) return empty;
  if (!v->is_object()) fail_config(std::string(key) + " must be an object, got " + shown(*v));
  return *v;
}

// A key zeromem does not model, refused when present with anything but its default: `fix` says what to do.
inline void refuse_unless(const json& j, const char* key, const std::string& where, const json& default_value, const char* why) {
  const json* v = find(j, key);
  if (v == nullptr || is_auto(*v) || *v == default_value) return;
  fail_config(where + key + " " + shown(*v) + " is not modelled (" + why + "); remove it, or leave it at " + default_value.dump());
}

// offload_optimizer / offload_param: device (default "none") and pin_memory (default true since DeepSpeed v0.19.5,
// PR #8207: zero/offload_config.py; false before). The deprecated booleans map as zero/config.py's new_param_fn does.
inline void read_offload(const json& zero, const char* key, const char* deprecated, deepspeed_key<offload_device>& device,
                         deepspeed_key<bool>& pin) {
  const std::string where = std::string("zero_optimization.") + key + ".";
  const json& o = section(zero, key);
  device = key_of<offload_device>(o, "device", [&](const json& v) {
    if (!v.is_string()) fail_config(where + "device must be \"none\", \"cpu\" or \"nvme\", got " + shown(v));
    const std::string s = v.get<std::string>();
    if (s == "none") return offload_device::none;
    if (s == "cpu") return offload_device::cpu;
    if (s == "nvme") return offload_device::nvme;
    fail_config(where + "device must be \"none\", \"cpu\" or \"nvme\", got " + shown(v));
  });
  pin = key_of<bool>(o, "pin_memory", [&](const json& v) { return boolean(v, where + "pin_memory"); });
  refuse_unless(o, "ratio", where, 1.0, "a partial offload keeps part of the optimizer on the GPU");
  if (const json* old = find(zero, deprecated); old != nullptr) {
    if (!o.empty()) fail_config(std::string("zero_optimization.") + deprecated + " and zero_optimization." + key + " are both given; keep " + key);
    if (boolean(*old, std::string("zero_optimization.") + deprecated)) {
      device.given = deepspeed_key<offload_device>::state::set;
      device.value = offload_device::cpu;
    }
  }
}

// optimizer.type as DeepSpeed builds it (deepspeed/runtime/engine.py _configure_basic_optimizer): "Adam" is AdamW
// unless params.adam_w_mode is false; the names are case-insensitive (runtime/config.py lowercases DEEPSPEED_OPTIMIZERS).
inline void read_optimizer(const json& j, deepspeed_config& c) {
  const json& o = section(j, "optimizer");
  if (o.empty()) return;
  const json& params = section(o, "params");
  c.optimizer = key_of<optimizer_kind>(o, "type", [&](const json& v) {
    if (!v.is_string()) fail_config("optimizer.type must be a string such as \"AdamW\", got " + shown(v));
    std::string s = v.get<std::string>();
    for (char& ch : s) ch = static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
    if (s == "adam") {
      const json* mode = find(params, "adam_w_mode");
      return mode == nullptr || boolean(*mode, "optimizer.params.adam_w_mode") ? optimizer_kind::adamw : optimizer_kind::adam;
    }
    if (s == "adamw") return optimizer_kind::adamw;
    if (s == "adagrad") return optimizer_kind::adagrad;
    if (s == "lion") return optimizer_kind::lion;
    fail_config("optimizer.type " + shown(v) +
                " is not modelled; zeromem reads Adam, AdamW, Adagrad and Lion: remove the optimizer section and pass --optimizer");
  });
  if (c.optimizer.is_auto()) fail_config("optimizer.type \"auto\" names no optimizer; write one, such as \"AdamW\"");
  c.weight_decay = key_of<double>(params, "weight_decay", [](const json& v) {
    if (!v.is_number() || !(v.get<double>() >= 0.0) || v.get<double>() > 1e300)
      fail_config("optimizer.params.weight_decay must be a number of at least 0, got " + shown(v));
    return v.get<double>();
  });
  const json* torch_adam = find(params, "torch_adam");
  c.torch_adam = torch_adam != nullptr && boolean(*torch_adam, "optimizer.params.torch_adam");
}

// bf16 (or its old name "bfloat16", runtime/precision_config.py get_bfloat16_config) and fp16: enabled, and the bf16
// options that change the model states (bf16 master weights and optimizer states), which zeromem does not model.
inline void read_precision(const json& j, deepspeed_config& c) {
  const json& bf16 = j.contains("bf16") ? section(j, "bf16") : section(j, "bfloat16");
  c.bf16 = key_of<bool>(bf16, "enabled", [](const json& v) { return boolean(v, "bf16.enabled"); });
  refuse_unless(bf16, "bf16_master_weights_and_grads", "bf16.", false, "16-bit master weights and gradients");
  refuse_unless(bf16, "bf16_optimizer_states", "bf16.", false, "16-bit optimizer states");
  const json& fp16 = section(j, "fp16");
  c.fp16 = key_of<bool>(fp16, "enabled", [](const json& v) { return boolean(v, "fp16.enabled"); });
  if (c.bf16.is_set() && c.bf16.value && c.fp16.is_set() && c.fp16.value)  // runtime/config.py
    fail_config("bfloat16 and fp16 modes cannot be simultaneously enabled (DeepSpeed's own check); enable one");
  refuse_unless(section(j, "amp"), "enabled", "amp.", false, "Apex AMP");
  refuse_unless(section(j, "torch_autocast"), "enabled", "torch_autocast.", false, "DeepSpeed's torch autocast");
}

}  // namespace detail::ds

/// Parses a DeepSpeed config's JSON text. Throws std::invalid_argument ("zeromem: DeepSpeed config: ...") for text
/// that is not JSON, a value DeepSpeed would refuse, or a key zeromem does not model.
inline deepspeed_config parse_deepspeed_config(const std::string& text) {
  using namespace detail::ds;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number past a double's range
    fail_config(std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail_config("the top level must be a JSON object, got " + shown(j));
  if (j.contains("model_type")) fail_config("this is a model's config.json (model_type), not a DeepSpeed config; pass it to --hf-config");
  deepspeed_config c{};
  // zero_optimization: an object, or the old boolean form (true: stage 1; zero/config.py read_zero_config_deprecated).
  const auto zero_it = j.find("zero_optimization");
  if (zero_it != j.end() && zero_it->is_boolean()) {
    c.zero_stage = {deepspeed_key<int>::state::set, zero_it->get<bool>() ? 1 : 0};
  } else {
    const json& zero = section(j, "zero_optimization");
    c.zero_stage = key_of<int>(zero, "stage", [](const json& v) {
      if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > 3)
        fail_config("zero_optimization.stage must be 0, 1, 2 or 3, got " + shown(v));
      return static_cast<int>(v.get<std::int64_t>());
    });
    read_offload(zero, "offload_optimizer", "cpu_offload", c.offload_optimizer, c.pin_optimizer);
    read_offload(zero, "offload_param", "cpu_offload_param", c.offload_param, c.pin_param);
    c.reduce_bucket = key_of<std::int64_t>(zero, "reduce_bucket_size", [](const json& v) { return count(v, "zero_optimization.reduce_bucket_size", 0); });
    const char* prefetch = zero.contains("stage3_prefetch_bucket_size") ? "stage3_prefetch_bucket_size" : "prefetch_bucket_size";
    c.prefetch_bucket = key_of<std::int64_t>(zero, prefetch, [&](const json& v) { return count(v, std::string("zero_optimization.") + prefetch, 0); });
    c.overlap_comm = key_of<bool>(zero, "overlap_comm", [](const json& v) { return boolean(v, "zero_optimization.overlap_comm"); });
    const char* reuse = zero.contains("stage3_max_reuse_distance") ? "stage3_max_reuse_distance" : "max_reuse_distance";
    c.max_reuse_distance = key_of<std::int64_t>(zero, reuse, [&](const json& v) { return count(v, std::string("zero_optimization.") + reuse, 0); });
    const char* persistence = zero.contains("stage3_param_persistence_threshold") ? "stage3_param_persistence_threshold" : "param_persistence_threshold";
    c.param_persistence =
        key_of<std::int64_t>(zero, persistence, [&](const json& v) { return count(v, std::string("zero_optimization.") + persistence, 0); });
    c.hpz = key_of<std::int64_t>(zero, "zero_hpz_partition_size", [](const json& v) { return count(v, "zero_optimization.zero_hpz_partition_size", 1); });
    c.sub_group_size = key_of<std::int64_t>(zero, "sub_group_size", [](const json& v) { return count(v, "zero_optimization.sub_group_size", 0); });
    const json& opt = section(zero, "offload_optimizer");
    const json& param = section(zero, "offload_param");
    c.optimizer_buffer_count =
        key_of<std::int64_t>(opt, "buffer_count", [](const json& v) { return count(v, "zero_optimization.offload_optimizer.buffer_count", 1); });
    c.param_buffer_count =
        key_of<std::int64_t>(param, "buffer_count", [](const json& v) { return count(v, "zero_optimization.offload_param.buffer_count", 1); });
    c.param_buffer_size =
        key_of<std::int64_t>(param, "buffer_size", [](const json& v) { return count(v, "zero_optimization.offload_param.buffer_size", 1); });
    // Options that change the memory in ways zeromem does not model (zero/config.py).
    refuse_unless(zero, "zero_quantized_weights", "zero_optimization.", false, "ZeRO++ qwZ int8 weights");
    refuse_unless(zero, "zero_quantized_gradients", "zero_optimization.", false, "ZeRO++ qgZ int4 gradients");
    refuse_unless(zero, "mics_shard_size", "zero_optimization.", -1, "MiCS sub-groups");
    refuse_unless(zero, "contiguous_gradients", "zero_optimization.", true, "gradients outside the contiguous buffer");
    // zero/config.py model_persistence_threshold (default sys.maxsize): a cap on the persistent tensors' sum, filled in
    // named_parameters order (parameter_offload.py mark_persistent_parameters).
    for (const char* cap : {"stage3_model_persistence_threshold", "model_persistence_threshold"})
      refuse_unless(zero, cap, "zero_optimization.", std::numeric_limits<std::int64_t>::max(), "a cap on the persistent parameters");
    if (find(zero, "zenflow") != nullptr) fail_config("zero_optimization.zenflow is not modelled (ZenFlow); remove it");
  }
  read_precision(j, c);
  const auto batch = [&](const char* key) {
    return key_of<std::int64_t>(j, key, [key](const json& v) { return count(v, key, 1); });
  };
  c.micro_batch = batch("train_micro_batch_size_per_gpu");
  c.grad_accum = batch("gradient_accumulation_steps");
  c.train_batch = batch("train_batch_size");
  read_optimizer(j, c);
  // data_types.grad_accum_dtype other than the model's dtype: BF16_Optimizer, or an fp32 gradient copy at stage 2-3
  // (deepspeed/runtime/engine.py _do_optimizer_sanity_check), neither modelled here.
  const json& types = section(j, "data_types");
  if (const json* it = find(types, "grad_accum_dtype"); it != nullptr && !is_auto(*it)) {
    if (!it->is_string()) fail_config("data_types.grad_accum_dtype must be \"fp32\", \"fp16\" or \"bf16\", got " + shown(*it));
    const std::string d = it->get<std::string>();
    const bool bf16 = c.bf16.is_set() && c.bf16.value, fp16 = c.fp16.is_set() && c.fp16.value;
    const bool model_dtype = (d == "bf16" && bf16) || (d == "fp16" && fp16) || (d == "fp32" && !bf16 && !fp16);
    if (!model_dtype)
      fail_config("data_types.grad_accum_dtype " + shown(*it) +
                  " differs from the model's dtype: DeepSpeed then accumulates gradients in a dtype of their own (at stage 1, "
                  "BF16_Optimizer), which is not modelled; remove it");
  }
  // DeepSpeed's activation checkpointing runs only in models that call deepspeed.checkpointing (Megatron-DeepSpeed);
  // transformers' models checkpoint with their own gradient_checkpointing (runtime/activation_checkpointing/config.py).
  if (find(j, "activation_checkpointing") != nullptr)
    c.notes.push_back("activation_checkpointing applies to models that call deepspeed.checkpointing; for transformers' gradient "
                      "checkpointing pass --recompute full");
  const int stage = c.zero_stage.is_set() ? c.zero_stage.value : 0;
  // DeepSpeed reads offload_optimizer at stages 1-3 and offload_param at stage 3 only (runtime/engine.py
  // _do_optimizer_sanity_check: no ZeRO optimizer at stage 0; zero/offload_config.py: offload_param "Valid only with
  // stage 3"); where it does not, the key changes nothing.
  if (c.zero_stage.is_set() && stage == 0 && c.offload_optimizer.is_set() && c.offload_optimizer.value != offload_device::none) {
    c.notes.push_back("zero_optimization.offload_optimizer is not read at stage 0 (no ZeRO optimizer)");
    c.offload_optimizer = {};
  }
  if (c.zero_stage.is_set() && stage < 3 && c.offload_param.is_set() && c.offload_param.value != offload_device::none) {
    c.notes.push_back("zero_optimization.offload_param is read at stage 3 only");
    c.offload_param = {};
  }
  return c;
}

/// Reads and parses a DeepSpeed config file (at most 16 MiB), naming the file in its errors.
inline deepspeed_config read_deepspeed_config(const std::string& path) {
  const std::string text = detail::read_small_file(path, "DeepSpeed config");
  try {
    return parse_deepspeed_config(text);
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what(), prefix = "zeromem: DeepSpeed config: ";
    if (m.compare(0, prefix.size(), prefix) != 0) throw;
    detail::fail("DeepSpeed config " + detail::quoted(path, 256) + ": " + m.substr(prefix.size()));
  }
}

}  // namespace zeromem
