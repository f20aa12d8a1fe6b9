// A DeepSpeed config read as DeepSpeed reads it (zeromem/engines/deepspeed_config.hpp), and `estimate --deepspeed-config`
// against the same job written as flags. The configs: transformers' documented ZeRO-3 config (docs/source/en/deepspeed.md,
// every value "auto" that the Trainer fills; examples/deepspeed) and a ZeRO-2 config with every value written (fixtures).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cli_runner.hpp"
#include "zeromem/engines/deepspeed_config.hpp"

using namespace zeromem;
using zeromem::test::run_cli;
using zeromem::test::run_cli_json;

namespace {
const std::string hf_zero3 = ZEROMEM_EXAMPLES_DIR "/deepspeed/zero3-offload-auto.json";
const std::string zero2 = ZEROMEM_FIXTURES_DIR "/deepspeed/zero2-written.json";

std::string refusal(const std::string& text) {
  try {
    parse_deepspeed_config(text);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

using zeromem::test::plus;

nlohmann::json without_config(nlohmann::json j) {
  j["inputs"].erase("deepspeed_config");
  return j;
}
}  // namespace

TEST_CASE("a DeepSpeed config's keys: set, \"auto\" and absent", "[deepspeed_config]") {
  const deepspeed_config c = read_deepspeed_config(hf_zero3);
  CHECK(c.zero_stage.is_set());
  CHECK(c.zero_stage.value == 3);
  CHECK(c.offload_optimizer.value == offload_device::cpu);
  CHECK(c.offload_param.value == offload_device::cpu);
  CHECK(c.pin_optimizer.value);
  CHECK(c.bf16.is_auto());
  CHECK(c.fp16.is_auto());
  CHECK(c.micro_batch.is_auto());
  CHECK(c.reduce_bucket.is_auto());
  CHECK(c.prefetch_bucket.is_auto());
  CHECK(c.overlap_comm.value);
  CHECK(c.sub_group_size.value == 1'000'000'000);  // written 1e9: pydantic's int takes a whole float
  // 0 is DeepSpeed's too (Field(ge=0)): a parameter a sub-group, as axolotl's zero3_bf16_cpuoffload_all.json writes it.
  const deepspeed_config zero = parse_deepspeed_config(R"({"zero_optimization": {"stage": 3, "sub_group_size": 0}})");
  CHECK(zero.sub_group_size.is_set());
  CHECK(zero.sub_group_size.value == 0);
  CHECK(c.optimizer.value == optimizer_kind::adamw);
  CHECK(c.weight_decay.is_auto());
  CHECK(c.hpz.given == deepspeed_key<std::int64_t>::state::absent);
  CHECK(c.max_reuse_distance.value == 1'000'000'000);
  CHECK(parse_deepspeed_config(R"({"zero_optimization": {"max_reuse_distance": "auto"}})").max_reuse_distance.is_auto());
  CHECK(c.param_persistence.is_auto());
  // The threshold under either name (zero/config.py: the field, alias stage3_param_persistence_threshold).
  CHECK(parse_deepspeed_config(R"({"zero_optimization": {"param_persistence_threshold": 0}})").param_persistence.value == 0);
  CHECK(parse_deepspeed_config(R"({"zero_optimization": {"stage3_param_persistence_threshold": 1e4}})").param_persistence.value == 10'000);

  // "Adam" is AdamW unless adam_w_mode is false (engine.py _configure_basic_optimizer); type names are case-insensitive.
  CHECK(parse_deepspeed_config(R"({"optimizer": {"type": "Adam"}})").optimizer.value == optimizer_kind::adamw);
  CHECK(parse_deepspeed_config(R"({"optimizer": {"type": "adam", "params": {"adam_w_mode": false}}})").optimizer.value == optimizer_kind::adam);
  CHECK(parse_deepspeed_config(R"({"optimizer": {"type": "LION"}})").optimizer.value == optimizer_kind::lion);
  // The old forms: a boolean zero_optimization is stage 1 (read_zero_config_deprecated), cpu_offload the optimizer on
  // the CPU, "bfloat16" the bf16 section.
  CHECK(parse_deepspeed_config(R"({"zero_optimization": true})").zero_stage.value == 1);
  CHECK(parse_deepspeed_config(R"({"zero_optimization": {"stage": 2, "cpu_offload": true}})").offload_optimizer.value == offload_device::cpu);
  CHECK(parse_deepspeed_config(R"({"bfloat16": {"enabled": true}})").bf16.value);
  // Offload at a stage that does not read it changes nothing, and says so.
  const deepspeed_config stage0 = parse_deepspeed_config(R"({"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}})");
  CHECK_FALSE(stage0.offload_optimizer.is_set());
  REQUIRE(stage0.notes.size() == 1);
  CHECK(stage0.notes[0].find("not read at stage 0") != std::string::npos);
  const deepspeed_config checkpointing = parse_deepspeed_config(R"({"activation_checkpointing": {"partition_activations": true}})");
  REQUIRE(checkpointing.notes.size() == 1);
  CHECK(checkpointing.notes[0].find("pass --recompute full") != std::string::npos);
}

TEST_CASE("a DeepSpeed config zeromem cannot model, or DeepSpeed would refuse, is refused by key", "[deepspeed_config][bad_input]") {
  CHECK(refusal("{").find("DeepSpeed config: not valid JSON") != std::string::npos);
  // A number past a double's range is nlohmann's out_of_range, not a parse_error (found by fuzz_deepspeed_config).
  CHECK(refusal(R"({"train_batch_size": 3e4444})").find("DeepSpeed config: not valid JSON") != std::string::npos);
  CHECK(refusal("[1]").find("the top level must be a JSON object") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"stage": 4}})").find("stage must be 0, 1, 2 or 3") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"reduce_bucket_size": 2.5e8}})").find("reduce_bucket_size must be a whole number") == std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"reduce_bucket_size": 0.5}})").find("reduce_bucket_size must be a whole number") != std::string::npos);
  CHECK(refusal(R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})").find("cannot be simultaneously enabled") != std::string::npos);
  CHECK(refusal(R"({"optimizer": {"type": "OneBitAdam"}})").find("optimizer.type '\"OneBitAdam\"' is not modelled") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"contiguous_gradients": false}})").find("contiguous_gradients 'false' is not modelled") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"offload_optimizer": {"device": "cpu", "ratio": 0.3}}})").find("ratio '0.3' is not modelled") !=
        std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"zero_quantized_weights": true}})").find("qwZ") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"stage3_param_persistence_threshold": -1}})")
            .find("stage3_param_persistence_threshold must be a whole number of at least 0") != std::string::npos);
  // A cap on the persistent tensors' sum is refused; DeepSpeed's default, sys.maxsize, is no cap.
  CHECK(refusal(R"({"zero_optimization": {"stage3_model_persistence_threshold": 1000000}})")
            .find("stage3_model_persistence_threshold '1000000' is not modelled (a cap on the persistent parameters)") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"model_persistence_threshold": 9223372036854775807}})") == "accepted");
  CHECK(refusal(R"({"bf16": {"enabled": true}, "data_types": {"grad_accum_dtype": "fp32"}})").find("BF16_Optimizer") != std::string::npos);
  CHECK(refusal(R"({"zero_optimization": {"offload_optimizer": {"device": "disk"}}})").find("device must be") != std::string::npos);
  CHECK(refusal(R"({"train_micro_batch_size_per_gpu": 0})").find("at least 1") != std::string::npos);
  CHECK(refusal(R"({"amp": {"enabled": true}})").find("Apex AMP") != std::string::npos);
  // The defaults themselves are accepted.
  CHECK(refusal(R"({"zero_optimization": {"contiguous_gradients": true, "mics_shard_size": -1}, "bf16": {"enabled": true},
                    "data_types": {"grad_accum_dtype": "bf16"}})") == "accepted");
}

TEST_CASE("estimate --deepspeed-config is the same job as its keys written as flags", "[deepspeed_config][cli]") {
  // zero2-written.json: train_batch_size 64 = micro-batch 4 x accumulation 2 x dp, so dp 8 (runtime/config.py
  // _set_batch_related_parameters); bf16; AdamW with weight_decay 0.1; the optimizer on the CPU, pinned by DeepSpeed's
  // default since v0.19.5; reduce_bucket_size 2e8 with overlap_comm.
  const nlohmann::json from_config = run_cli_json({"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--deepspeed-config", zero2});
  const nlohmann::json from_flags = run_cli_json({"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--zero-stage", "2", "--dp", "8",
                                                  "--micro-batch", "4", "--grad-accum-steps", "2", "--precision", "mixed-bf16", "--weight-decay",
                                                  "0.1", "--offload-optimizer", "cpu", "--pin-memory", "--reduce-bucket", "2e8", "--overlap-comm", "on"});
  CHECK(without_config(from_config) == from_flags);
  CHECK(from_config["inputs"]["dp"] == 8);
  // ZeRO-2 with overlap_comm holds two reduce buckets (stage_1_and_2.py backward): 2 x 2e8 elements x 2 B = 8e8 B.
  CHECK(from_config["phases"]["backward"]["terms"]["communication_buffers_bytes"] == 800'000'000);
  CHECK(from_config["per_node_host"]["pinned_bytes"] == from_config["per_node_host"]["total_bytes"]);
  CHECK(from_config["inputs"]["deepspeed_config"]["read"].size() == 11);

  // Without a model the config's states alone: the micro-batch enters the batch arithmetic (dp 8), not the job.
  const nlohmann::json states = run_cli_json({"estimate", "--params", "7B", "--deepspeed-config", zero2});
  CHECK(without_config(states) == run_cli_json({"estimate", "--params", "7B", "--zero-stage", "2", "--dp", "8", "--grad-accum-steps", "2",
                                                "--precision", "mixed-bf16", "--offload-optimizer", "cpu", "--pin-memory"}));

  // transformers' ZeRO-3 config under the Trainer's "auto": the precision and micro-batch from the flags, the buckets
  // from hidden 4096 (trainer_config_finalize): reduce 4096^2 = 16,777,216 and prefetch int(0.9 x 4096^2) = 15,099,494
  // elements; backward holds two reduce buckets and the prefetch bucket, 2 B each: 67,108,864 + 30,198,988 = 97,307,852 B.
  // The persistence threshold 10 x 4096 = 40,960.
  const std::vector<std::string> zero3{"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--dp", "8", "--precision", "mixed-bf16"};
  const nlohmann::json auto3 = run_cli_json(plus(zero3, {"--micro-batch", "2", "--deepspeed-config", hf_zero3}));
  CHECK(auto3["phases"]["backward"]["terms"]["communication_buffers_bytes"] == 97'307'852);
  CHECK(without_config(auto3) == run_cli_json(plus(zero3, {"--micro-batch", "2", "--zero-stage", "3", "--offload-optimizer", "cpu",
                                                           "--offload-params", "cpu", "--pin-memory", "--reduce-bucket", "16777216",
                                                           "--prefetch-bucket", "15099494", "--param-persistence-threshold", "40960"})));
  CHECK(auto3["inputs"]["param_persistence_threshold"] == 40'960);
}

TEST_CASE("estimate --deepspeed-config: the optimizer DeepSpeed builds, and absent keys at DeepSpeed's defaults", "[deepspeed_config][cli]") {
  const auto with_config = [](const std::string& text, std::vector<std::string> extra = {}) {
    const std::string path = "zeromem-test-ds-config.json";
    {
      std::ofstream(path) << text;
    }
    return run_cli_json(plus({"estimate", "--model", "qwen2.5-1.5b", "--seq-len", "1024", "--deepspeed-config", path}, extra));
  };
  // Neither bf16 nor fp16: DeepSpeed trains in fp32; no zero_optimization: stage 0.
  const nlohmann::json plain = with_config(R"({"train_micro_batch_size_per_gpu": 1})");
  CHECK(plain["inputs"]["weights_dtype"] == "fp32");
  CHECK(plain["inputs"]["zero_stage"] == 0);
  // No optimizer section: DeepSpeed wraps the client's optimizer (engine.py _configure_optimizer), torch.optim's AdamW,
  // foreach on CUDA; DeepSpeed's own AdamW is FusedAdam; torch_adam asks for torch.optim's.
  CHECK(plain["inputs"]["optimizer_impl"] == "foreach");
  CHECK(with_config(R"({"bf16": {"enabled": true}, "optimizer": {"type": "AdamW"}})")["inputs"]["optimizer_impl"] == "fused");
  CHECK(with_config(R"({"bf16": {"enabled": true}, "optimizer": {"type": "AdamW", "params": {"torch_adam": true}}})")["inputs"]["optimizer_impl"] ==
        "foreach");
  // ZeRO-2 with overlap_comm unset: one reduce bucket, 5e8 x 2 B (zero/config.py overlap_comm_valid).
  const nlohmann::json z2 = with_config(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}})", {"--dp", "4"});
  CHECK(z2["phases"]["backward"]["terms"]["communication_buffers_bytes"] == 1'000'000'000);
  // ZeRO-3's stage3_max_reuse_distance: 0 keeps nothing gathered from the forward to the backward, as the flag does;
  // "auto" is dropped by DeepSpeed (config_utils.py DeepSpeedConfigModel), so its default 1e9 applies, as without it.
  const std::vector<std::string> z3{"--dp", "4", "--zero-stage", "3", "--precision", "mixed-bf16", "--optimizer-impl", "foreach"};
  const nlohmann::json reuse0 = with_config(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0}})",
                                            {"--dp", "4"});
  CHECK(reuse0["inputs"]["max_reuse_distance"] == 0);
  // Nothing but the persistent tensors (DeepSpeed's default 1e5): Qwen2.5-1.5B's norms (2 x 1,536 a layer) and q, k,
  // v biases (1,536 + 256 + 256) over 28 layers, and the final norm's 1,536: 144,896 elements in bf16.
  CHECK(reuse0["phases"]["forward"]["terms"]["gathered_parameters_bytes"] == 2 * (28 * (2 * 1'536 + 1'536 + 256 + 256) + 1'536));
  CHECK(reuse0["inputs"]["param_persistence_threshold"] == 100'000);
  // Threshold 0 from the config, as the flag: nothing gathered at all.
  const nlohmann::json none0 = with_config(
      R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "stage3_max_reuse_distance": 0, "stage3_param_persistence_threshold": 0}})",
      {"--dp", "4"});
  CHECK(none0["phases"]["forward"]["terms"]["gathered_parameters_bytes"] == 0);
  CHECK(without_config(none0) == run_cli_json(plus({"estimate", "--model", "qwen2.5-1.5b", "--seq-len", "1024", "--max-reuse-distance", "0",
                                                    "--param-persistence-threshold", "0"},
                                                   z3)));
  CHECK(without_config(reuse0) == run_cli_json(plus({"estimate", "--model", "qwen2.5-1.5b", "--seq-len", "1024", "--max-reuse-distance", "0"}, z3)));
  const nlohmann::json reuse_auto =
      with_config(R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3, "stage3_max_reuse_distance": "auto"}})", {"--dp", "4"});
  CHECK(reuse_auto["inputs"]["max_reuse_distance"] == 1'000'000'000);
  CHECK(without_config(reuse_auto) == run_cli_json(plus({"estimate", "--model", "qwen2.5-1.5b", "--seq-len", "1024"}, z3)));
  std::remove("zeromem-test-ds-config.json");
}

TEST_CASE("estimate --deepspeed-config refuses a flag that disagrees with it, and \"auto\" without the flag that fills it",
          "[deepspeed_config][cli][bad_input]") {
  const auto rejected = [](const std::vector<std::string>& args, const std::string& words) {
    const auto r = run_cli(args);
    INFO(r.err);
    CHECK(r.code == 2);
    CHECK(r.err.find(words) != std::string::npos);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  };
  const std::vector<std::string> base{"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--deepspeed-config"};
  rejected(plus(base, {zero2, "--zero-stage", "3"}), "--zero-stage 3 disagrees with the DeepSpeed config's zero_optimization.stage 2");
  rejected(plus(base, {zero2, "--dp", "4"}), "Check batch related parameters");
  rejected(plus(base, {zero2, "--reduce-bucket", "5e8"}), "--reduce-bucket 5e8 disagrees");
  rejected(plus(base, {hf_zero3, "--micro-batch", "2", "--precision", "mixed-bf16", "--max-reuse-distance", "0"}),
           "--max-reuse-distance 0 disagrees with the DeepSpeed config's zero_optimization.stage3_max_reuse_distance 1000000000");
  rejected({"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--zero-stage", "2", "--max-reuse-distance", "0"},
           "--max-reuse-distance is ZeRO-3's stage3_max_reuse_distance; drop it or pass --zero-stage 3");
  rejected({"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--zero-stage", "2", "--param-persistence-threshold", "0"},
           "--param-persistence-threshold is ZeRO-3's stage3_param_persistence_threshold; drop it or pass --zero-stage 3");
  rejected({"estimate", "--model", "llama-3-8b", "--zero-stage", "3", "--dp", "8", "--param-persistence-threshold", "0"},
           "--param-persistence-threshold sets what ZeRO-3 keeps gathered in the step; add a model and --seq-len");
  rejected({"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--zero-stage", "3", "--dp", "8", "--param-persistence-threshold", "-1"},
           "the persistence threshold (--param-persistence-threshold)");
  rejected(plus(base, {zero2, "--precision", "amp-bf16"}), "--precision amp-bf16 disagrees");
  rejected(plus(base, {zero2, "--fsdp", "FULL_SHARD"}), "describes a DeepSpeed job");
  rejected(plus(base, {hf_zero3, "--micro-batch", "2"}), "bf16.enabled is \"auto\"");
  rejected(plus(base, {hf_zero3, "--precision", "mixed-bf16"}), "train_micro_batch_size_per_gpu is \"auto\"");
  rejected(plus(base, {"/nonexistent/ds.json"}), "cannot read DeepSpeed config");
  rejected(plus(base, {ZEROMEM_FIXTURES_DIR "/hf/phi-2.json"}), "a model's config.json (model_type), not a DeepSpeed config");
}

TEST_CASE("estimate --explain with --deepspeed-config names the config's key to change", "[deepspeed_config][cli][explain]") {
  // Llama-3-8B under ZeRO-1 over 8 ranks on an A100 40GB: 47.50 GiB as configured; ZeRO-2 (the first change that fits)
  // is the config's zero_optimization.stage, so the change is named there, the flag beside it.
  const std::string path = "zeromem-test-ds-explain.json";
  {
    std::ofstream(path) << R"({"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2, "bf16": {"enabled": true},
                             "zero_optimization": {"stage": 1, "overlap_comm": true}})";
  }
  const auto r = run_cli({"estimate", "--model", "llama-3-8b", "--seq-len", "2048", "--dp", "8", "--gpu", "a100-40gb", "--recompute", "full",
                          "--loss", "fused", "--explain", "--deepspeed-config", path});
  std::remove(path.c_str());
  INFO(r.err);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("smallest change that fits: zero_optimization.stage 2 in 'zeromem-test-ds-explain.json' (--zero-stage 2)") != std::string::npos);
}

namespace {
// The config `text` written to `path`, with the estimate's flags (`--deepspeed-config path` added).
std::vector<std::string> with_written_config(const std::string& path, const std::string& text, const std::vector<std::string>& flags) {
  std::ofstream(path) << text;
  return plus(flags, {"--deepspeed-config", path});
}
}  // namespace

TEST_CASE("estimate --explain keeps the DeepSpeed config's train_batch_size: a halved micro-batch doubles the accumulation",
          "[deepspeed_config][cli][explain]") {
  // Qwen2.5-7B at 4096 x 8 under ZeRO-2 over 8 ranks on an A100 40GB, the config pinning train_batch_size 64 = 8 x 1 x 8.
  // DeepSpeed refuses micro-batch 4 with accumulation 1 on 8 ranks (runtime/config.py _batch_assertion: 4 x 1 x 8 is 32,
  // not 64), so the named micro-batch comes with accumulation 2, both in the config, and the fix's bytes are those of
  // the config so written.
  const std::string path = "zeromem-test-ds-batch.json";
  const std::vector<std::string> job{"estimate", "--model", "qwen2.5-7b", "--seq-len", "4096", "--dp", "8", "--gpu", "a100-40gb"};
  const std::string pinned = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
                                 "train_batch_size": 64, "train_micro_batch_size_per_gpu": 8, "gradient_accumulation_steps": 1})";
  const auto r = run_cli(with_written_config(path, pinned, plus(job, {"--explain"})));
  REQUIRE(r.code == 0);
  CHECK(r.out.find("three changes that fit together: --loss fused, --recompute full and train_micro_batch_size_per_gpu 4 in "
                   "'zeromem-test-ds-batch.json' (--micro-batch 4) -> ") != std::string::npos);
  CHECK(r.out.find("\n    with gradient_accumulation_steps 2 in 'zeromem-test-ds-batch.json' (--grad-accum-steps 2), keeping the config's "
                   "train_batch_size 64\n") != std::string::npos);
  const nlohmann::json fix = run_cli_json(with_written_config(path, pinned, plus(job, {"--explain", "--json"})))["fixes"].at(0);
  CHECK(fix["set"] == nlohmann::json::parse(R"([{"flag": "--loss", "value": "fused"}, {"flag": "--recompute", "value": "full"},
      {"config": "zeromem-test-ds-batch.json", "key": "train_micro_batch_size_per_gpu", "value": 4, "flag": "--micro-batch"},
      {"config": "zeromem-test-ds-batch.json", "key": "gradient_accumulation_steps", "value": 2, "flag": "--grad-accum-steps"}])"));
  const std::vector<std::string> fixed = plus(job, {"--loss", "fused", "--recompute", "full", "--json"});
  const nlohmann::json applied = run_cli_json(with_written_config(path, R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
      "train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})", fixed));
  CHECK(applied["verdict"]["fits"] == true);
  CHECK(fix["needed_bytes"] == applied["verdict"]["needed_bytes"]);
  CHECK(fix["margin_bytes"] == applied["verdict"]["margin_bytes"]);
  const auto alone = run_cli(with_written_config(path, R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
      "train_batch_size": 64, "train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 1})", fixed));
  CHECK(alone.code == 2);
  CHECK(alone.err.find("train_batch_size 64 is not micro-batch x gradient accumulation x data-parallel ranks (4 x 1 x 8)") != std::string::npos);
  // With the accumulation absent DeepSpeed derives it: the micro-batch alone is the change, and the text says so.
  const std::string derived = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2},
                                  "train_batch_size": 64, "train_micro_batch_size_per_gpu": 8})";
  const auto d = run_cli(with_written_config(path, derived, plus(job, {"--explain"})));
  CHECK(d.out.find("\n    DeepSpeed derives gradient accumulation 2 from the config's train_batch_size 64\n") != std::string::npos);
  CHECK(run_cli_json(with_written_config(path, derived, plus(job, {"--explain", "--json"})))["fixes"].at(0)["set"].size() == 3);
  // "auto", which Hugging Face Trainer fills from --per_device_train_batch_size: the flag is the change, not the config.
  const std::string filled = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "train_batch_size": "auto",
                                 "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"})";
  const std::vector<std::string> by_flag = plus(job, {"--micro-batch", "8"});
  const auto f = run_cli(with_written_config(path, filled, plus(by_flag, {"--explain"})));
  CHECK(f.out.find("three changes that fit together: --loss fused, --recompute full and --micro-batch 4 -> ") != std::string::npos);
  CHECK(f.out.find("gradient accumulation") == std::string::npos);
  const nlohmann::json auto_fix = run_cli_json(with_written_config(path, filled, plus(by_flag, {"--explain", "--json"})))["fixes"].at(0);
  CHECK(auto_fix["set"].back() == nlohmann::json::parse(R"({"flag": "--micro-batch", "value": "4"})"));
  CHECK(auto_fix["needed_bytes"] ==
        run_cli_json(with_written_config(path, filled, plus(fixed, {"--micro-batch", "4"})))["verdict"]["needed_bytes"]);
  std::remove(path.c_str());
}

TEST_CASE("estimate --explain's GPU count keeps the config's train_batch_size, with dp derived from it", "[deepspeed_config][cli][explain]") {
  // Llama-3-8B under ZeRO-3, train_batch_size 32 = 1 x 4 x dp, so dp 8 is derived; on 12 GiB twice and four times the
  // ranks take the accumulation to 2 and 1, and eight times would need 0.5: the fewest that fit are 32, accumulation 1.
  // (Nodes of 64 GiB of host RAM leave out ZeRO-Offload, which would hold 134.62 GiB a node.)
  const std::string path = "zeromem-test-ds-dp.json";
  const std::vector<std::string> job{"estimate", "--model", "llama-3-8b", "--seq-len", "4096", "--recompute", "full", "--loss", "fused",
                                     "--gpu-memory", "12GiB", "--host-memory", "64GiB"};
  const std::string config = R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
                                 "train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 4})";
  const auto r = run_cli(with_written_config(path, config, plus(job, {"--explain"})));
  CHECK(r.out.find("  the fewest GPUs that fit: --dp 32 (32 GPUs) -> ") != std::string::npos);
  CHECK(r.out.find("\n    with gradient_accumulation_steps 1 in 'zeromem-test-ds-dp.json' (--grad-accum-steps 1), keeping the config's "
                   "train_batch_size 32\n") != std::string::npos);
  const nlohmann::json fix = run_cli_json(with_written_config(path, config, plus(job, {"--explain", "--json"})))["fixes"].at(0);
  CHECK(fix["set"] == nlohmann::json::parse(R"([{"config": "zeromem-test-ds-dp.json", "key": "gradient_accumulation_steps", "value": 1,
                                                  "flag": "--grad-accum-steps"}, {"flag": "--dp", "value": "32"}])"));
  const nlohmann::json applied = run_cli_json(with_written_config(path, R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
      "train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1})", plus(job, {"--dp", "32", "--json"})));
  CHECK(applied["verdict"]["fits"] == true);
  CHECK(fix["needed_bytes"] == applied["verdict"]["needed_bytes"]);
  const nlohmann::json sixteen = run_cli_json(with_written_config(path, R"({"bf16": {"enabled": true}, "zero_optimization": {"stage": 3},
      "train_batch_size": 32, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2})", plus(job, {"--dp", "16", "--json"})));
  CHECK(sixteen["verdict"]["fits"] == false);
  std::remove(path.c_str());
}

TEST_CASE("estimate --deepspeed-version 0.16.x walks ZeRO-3's checkpointing defect: the whole model by the embedding's backward",
          "[deepspeed_config][cli][zero3]") {
  using zeromem::test::run_cli;
  const std::vector<std::string> base{"estimate", "--model", "llama-2-7b", "--zero-stage", "3", "--dp", "8", "--seq-len", "1024",
                                      "--attention", "flash_attention_2", "--recompute", "full"};
  // DeepSpeed issue #7116: the backward releases nothing it gathers, so the embedding's backward holds every one of
  // Llama-2-7B's 6,738,415,616 parameters in bf16, 13,476,831,232 B.
  const nlohmann::json leak = run_cli_json(plus(base, {"--deepspeed-version", "0.16.4"}));
  CHECK(leak["inputs"]["zero3_backward_keeps_gathered"] == true);
  CHECK(leak["per_gpu"]["peak_phase"] == "backward");
  CHECK(leak["phases"]["backward"]["terms"]["gathered_parameters_bytes"].get<std::int64_t>() == 13'476'831'232LL);
  // 0.15.0 and 0.17.0 release them, as does 0.16.4 without recompute: the same as no version given.
  const nlohmann::json healthy = run_cli_json(base);
  CHECK(healthy["inputs"]["zero3_backward_keeps_gathered"] == false);
  for (const char* v : {"0.15.0", "0.17.0"}) CHECK(run_cli_json(plus(base, {"--deepspeed-version", v}))["per_gpu"] == healthy["per_gpu"]);
  const std::vector<std::string> stored{"estimate", "--model", "llama-2-7b", "--zero-stage", "3", "--dp", "8", "--seq-len", "1024"};
  CHECK(run_cli_json(plus(stored, {"--deepspeed-version", "0.16.4"}))["per_gpu"] == run_cli_json(stored)["per_gpu"]);
  // --explain on a GPU of 30 GB: the defect's step (13,476,831,232 B gathered beside 11.79 GB of resting states) does not
  // fit, and the first change tried is the release that fixes it.
  const auto explained = run_cli(plus(base, {"--deepspeed-version", "0.16.4", "--gpu-memory", "30GB", "--explain"}));
  CHECK(explained.code == 0);
  CHECK(explained.out.find("-> OUT OF MEMORY") != std::string::npos);
  CHECK(explained.out.find("smallest change that fits: --deepspeed-version 0.17.0") != std::string::npos);
  // Without the defect there is nothing to upgrade: the change is not offered.
  const auto plain = run_cli(plus(base, {"--gpu-memory", "16GB", "--explain"}));
  CHECK(plain.out.find("--deepspeed-version") == std::string::npos);
  // Refused: a version that is not one, FSDP, and no step to change.
  const auto refused = [](const std::vector<std::string>& args, const std::string& words) {
    const auto r = run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.err.find(words) != std::string::npos);
  };
  refused(plus(base, {"--deepspeed-version", "sixteen"}), "the DeepSpeed version (--deepspeed-version)");
  refused({"estimate", "--model", "llama-2-7b", "--fsdp", "FULL_SHARD", "--dp", "8", "--seq-len", "1024", "--deepspeed-version", "0.16.4"},
          "--deepspeed-version names DeepSpeed's release; pass --zero-stage for a DeepSpeed job");
  refused({"estimate", "--model", "llama-2-7b", "--seq-len", "1024", "--deepspeed-version", "0.16.4"},
          "--deepspeed-version names DeepSpeed's release; pass --zero-stage for a DeepSpeed job");
  refused({"estimate", "--model", "llama-2-7b", "--zero-stage", "3", "--dp", "8", "--deepspeed-version", "0.16.4"},
          "--deepspeed-version changes what the step keeps gathered; add a model and --seq-len");
}
