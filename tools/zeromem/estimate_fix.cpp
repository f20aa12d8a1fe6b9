// What a fix `estimate --explain` names sets: each flag it changes, or the DeepSpeed config's key where the config sets
// it, and whether the config's batch derives the accumulation after it.
#include <string>
#include <string_view>
#include <vector>

#include "estimate.hpp"

namespace zeromem::cli {

namespace {

// The flags a change may set, each with the DeepSpeed config's key where a config may set it (there the change is
// made in the config: a flag that disagrees with the config is refused).
struct settable {
  const char* flag;
  const char* config_key;  // nullptr: the command line only
  std::string (*word)(const estimate_args&);  // the flag's value; "true" / "false" for a switch
  bool is_switch;
};
std::string yes_no(bool on) { return on ? "true" : "false"; }
constexpr settable settables[] = {
    {"--deepspeed-version", nullptr, [](const estimate_args& a) { return a.deepspeed_version; }, false},
    {"--allocator", nullptr, [](const estimate_args& a) { return a.allocator; }, false},
    {"--optimizer-impl", nullptr, [](const estimate_args& a) { return a.optimizer_impl; }, false},
    {"--loss", nullptr, [](const estimate_args& a) { return a.loss; }, false},
    {"--overlap-comm", "zero_optimization.overlap_comm", [](const estimate_args& a) { return a.overlap_comm; }, false},
    {"--gradient-as-bucket-view", nullptr, [](const estimate_args& a) { return yes_no(a.gradient_as_bucket_view); }, true},
    {"--recompute", nullptr, [](const estimate_args& a) { return a.recompute_name; }, false},
    {"--paged-optimizer", nullptr, [](const estimate_args& a) { return yes_no(a.paged_optimizer); }, true},
    {"--quantize", nullptr, [](const estimate_args& a) { return a.quantize; }, false},
    {"--micro-batch", "train_micro_batch_size_per_gpu", [](const estimate_args& a) { return std::to_string(a.micro_batch); }, false},
    {"--grad-accum-steps", "gradient_accumulation_steps", [](const estimate_args& a) { return std::to_string(a.grad_accum_steps); }, false},
    {"--zero-stage", "zero_optimization.stage", [](const estimate_args& a) { return std::to_string(a.zero_stage); }, false},
    {"--offload-optimizer", "zero_optimization.offload_optimizer.device", [](const estimate_args& a) { return a.offload_optimizer; }, false},
    {"--offload-params", "zero_optimization.offload_param.device", [](const estimate_args& a) { return a.offload_params; }, false},
    {"--dp", nullptr, [](const estimate_args& a) { return std::to_string(a.dp); }, false},
    {"--shard-group", nullptr, [](const estimate_args& a) { return std::to_string(a.shard_group); }, false},
    {"--fsdp", nullptr, [](const estimate_args& a) { return a.fsdp; }, false},
    {"--ddp", nullptr, [](const estimate_args& a) { return yes_no(a.ddp); }, true},
};

}  // namespace

// The config sets `key` to a value of its own ("auto" is filled from the flag, as Hugging Face Trainer fills it).
bool set_by_config(const estimate_args& a, const std::string& key) {
  for (const auto& [read, value] : a.deepspeed_read)
    if (read == key) return value.rfind("auto", 0) != 0;
  return false;
}

// Where the config's train_batch_size is a number, DeepSpeed derives the one of micro-batch, accumulation and dp that
// is not given from the other two (runtime/config.py _set_batch_related_parameters), as with_deepspeed_config does.
// After a fix, the accumulation is derived there when the micro-batch and dp are given and it is not.
bool accumulation_derived(const estimate_args& before, const estimate_args& after) {
  const auto given = [&](const char* flag) { return before.given_flags.count(flag) > 0; };
  const bool micro = set_by_config(before, "train_micro_batch_size_per_gpu") || given("--micro-batch") || after.micro_batch != before.micro_batch;
  const bool dp = given("--dp") || after.dp != before.dp;
  return micro && dp && !set_by_config(before, "gradient_accumulation_steps") && !given("--grad-accum-steps");
}

// What the changes set, as the command line (or the config) would say it: each flag whose value they change.
std::vector<fix_setting> settings_of(const estimate_args& before, const estimate_args& after) {
  std::vector<fix_setting> out;
  for (const settable& s : settables) {
    const std::string was = s.word(before), now = s.word(after);
    if (was == now || (s.flag == std::string_view{"--grad-accum-steps"} && accumulation_derived(before, after))) continue;
    fix_setting f{s.flag, now, s.is_switch, {}, {}};
    if (s.config_key != nullptr && set_by_config(before, s.config_key)) {
      f.config_key = s.config_key;
      const bool number = now.find_first_not_of("0123456789") == std::string::npos;
      f.config_value = now == "on" ? "true" : now == "off" ? "false" : number ? now : "\"" + now + "\"";
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace zeromem::cli
