// The step model against real training steps measured on an H100 (tests/data/calibration): every case is
// asked through the `zeromem estimate` command line as a user would, and its peak must be within 3% of the
// measured torch.cuda.max_memory_allocated(), its verdict the same as what happened on the card.
#include <nlohmann/json.hpp>

#include <cctype>
#include <cstdint>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cli.hpp"
#include "zeromem/jobs/step.hpp"

namespace {

using json = nlohmann::json;
const std::string calibration_dir = std::string(ZEROMEM_DATA_DIR) + "/calibration/";

json load_file(const std::string& path) {
  std::ifstream f(path);
  INFO(path);
  REQUIRE(f.good());
  return json::parse(f);
}
json load_calibration() { return load_file(calibration_dir + "h100-training-steps.json"); }

// Every measurement file in the calibration directory (measured_on plus any of the phases / anatomy / fsdp_rank0
// sections), so that steps measured later in the same shape (tools/validate/gpu/calibration) are checked as soon as
// their file is added, with their configs under configs/<config>/config.json.
std::vector<std::string> calibration_files() {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(calibration_dir))
    if (e.is_regular_file() && e.path().extension() == ".json") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// Whether a case's baseline already held the process's cuBLAS workspaces. measure_hf.py and peak_anatomy.py run
// their cases one after another in one process and measure each above memory_allocated() before its model is built:
// the two workspaces the first case's step allocated (gpus.hpp cublas_workspace_bytes) stay allocated, so every later
// case's baseline holds them. fsdp_fake.py runs one case per process: each of its cases allocates them above its base.
// A case that recorded its baseline (`base_bytes`, what was allocated before its model was built) says it itself.
bool workspaces_in_baseline(const json& d, const char* section, const json& c) {
  if (c.contains("base_bytes")) return c["base_bytes"].get<long long>() > 0;
  return std::string(section) != "fsdp_rank0" && &c != &d[section][0];
}

// A case's config.json: configs/<config>/ in the calibration directory, or, for random_steps.py's draws, the config
// the case carries (config_json), written to the build's temporary directory. ctest runs test cases as parallel
// processes that write the same files: each writes a file of its own and renames it into place (atomic on POSIX),
// so no reader ever opens a half-written one.
std::string config_file_of(const json& c) {
  if (!c.contains("config_json")) return calibration_dir + "configs/" + c["config"].get<std::string>() + "/config.json";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zeromem-calibration-configs";
  std::filesystem::create_directories(dir);
  const std::filesystem::path path = dir / (c["config"].get<std::string>() + ".json");
  const std::filesystem::path own = dir / (c["config"].get<std::string>() + ".json." + std::to_string(std::random_device{}()));
  {
    std::ofstream out(own);
    out << c["config_json"].dump();
  }
  std::filesystem::rename(own, path);
  return path.string();
}

// The flags a user would pass for one measured case; `baseline_held` asks for the step above a baseline that
// already held the workspaces (what the measuring process saw), not a fresh process's. `on`: the file's measured_on;
// an H100 80GB is --gpu h100-80gb, another card its measured total and CUDA context.
std::vector<std::string> flags_of(const json& c, bool baseline_held, const json& on = json::object()) {
  const bool fsdp = c.contains("world");
  // The scripts write "bf16" or "amp" (fp32 weights under bf16 autocast); any other value is zeromem's own name.
  std::string precision = c.value("precision", "bf16");
  if (precision == "amp") precision = "amp-bf16";
  if (fsdp && c["mixed"].get<bool>()) precision = "mixed-bf16";  // FSDP2 MixedPrecisionPolicy(bf16, reduce fp32)
  const std::string device = on.value("device", "NVIDIA H100 80GB HBM3");
  std::vector<std::string> gpu{"--gpu", "h100-80gb"};
  if (device != "NVIDIA H100 80GB HBM3")
    gpu = {"--gpu-memory", std::to_string(on.at("device_total_bytes").get<long long>()) + "B", "--cuda-context",
           std::to_string(on.at("cuda_context_bytes").get<long long>()) + "B"};
  std::vector<std::string> a{"estimate",     "--hf-config", config_file_of(c),
                             "--seq-len",    std::to_string(c["seq"].get<long long>()),
                             "--micro-batch", std::to_string(c["micro_batch"].get<long long>()),
                             "--precision",  precision,
                             "--attention",  c.value("attention", "sdpa"),  // transformers' attn_implementation, as measured
                             "--implementation", "hf",
                             "--json"};
  a.insert(a.end(), gpu.begin(), gpu.end());
  if (c["checkpointing"].get<bool>()) a.insert(a.end(), {"--recompute", "full"});
  std::string impl = "foreach";
  if (c.contains("optimizer")) impl = c["optimizer"].get<std::string>();
  if (impl == "lora") {  // peak_anatomy.py: LoraConfig(r=16, lora_alpha=32, target_modules=["q_proj", "v_proj"]), AdamW foreach
    a.insert(a.end(), {"--lora-rank", "16", "--lora-targets", "q_proj,v_proj"});
    impl = "foreach";
  }
  if (impl == "lora-all") {  // LoraConfig(r=16, lora_alpha=32, lora_dropout=0.05, target_modules="all-linear")
    a.insert(a.end(), {"--lora-rank", "16", "--lora-targets", "all-linear", "--lora-dropout", "0.05"});
    impl = "foreach";
  }
  // measure_hf.py: another torch.optim optimizer ("algorithm"), in PyTorch's default implementation; a file that names
  // it in "optimizer" instead (sgd, adafactor, ...) is read the same way, with foreach false as the for-loop.
  const bool named_impl = impl == "foreach" || impl == "fused" || impl == "forloop";
  std::string algorithm = c.contains("algorithm") ? c["algorithm"].get<std::string>() : named_impl ? std::string{} : impl;
  if (c.contains("foreach") && !c["foreach"].get<bool>()) impl = "forloop";
  for (char& ch : algorithm) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));  // torch.optim's SGD, AdamW
  if (!algorithm.empty()) {
    a.insert(a.end(), {"--optimizer", algorithm});
    if (impl == "forloop") a.insert(a.end(), {"--optimizer-impl", "forloop"});
  } else {
    a.insert(a.end(), {"--optimizer-impl", impl});
  }
  if (fsdp && c["mode"] == "ddp")  // fsdp_fake.py: DistributedDataParallel over the same fake group
    a.insert(a.end(), {"--ddp", "--dp", std::to_string(c["world"].get<long long>())});
  else if (fsdp)
    a.insert(a.end(), {"--fsdp", c["mode"] == "full" ? "FULL_SHARD" : "SHARD_GRAD_OP", "--dp", std::to_string(c["world"].get<long long>())});
  if (c.value("alloc_conf", "").find("expandable_segments:True") != std::string::npos) a.insert(a.end(), {"--allocator", "expandable"});
  // measure_hf.py: k micro-batches before each opt.step(), gradients kept between them.
  if (c.value("accumulation_steps", 1) > 1) a.insert(a.end(), {"--grad-accum-steps", std::to_string(c["accumulation_steps"].get<long long>())});
  if (baseline_held) a.insert(a.end(), {"--blas-workspaces", "0B"});
  return a;
}

json estimate(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = zeromem::cli::run(args, out, err);
  INFO(err.str());
  REQUIRE(code == 0);
  return json::parse(out.str());
}

}  // namespace

TEST_CASE("calibration: the measured device total is the h100-80gb capacity", "[calibration]") {
  const json d = load_calibration();
  const json j = estimate({"estimate", "--params", "7B", "--gpu", "h100-80gb", "--json"});
  CHECK(j["verdict"]["capacity_bytes"].get<long long>() == d["measured_on"]["device_total_bytes"].get<long long>());
  // The H200's too: every H200 file here measured the same total (150,109,880,320 B), and --gpu h200 is it.
  const json h200 = estimate({"estimate", "--params", "7B", "--gpu", "h200", "--json"});
  for (const std::string& file : calibration_files()) {
    const json on = load_file(file)["measured_on"];
    INFO(file);
    if (on.value("device", "") == "NVIDIA H200")
      CHECK(h200["verdict"]["capacity_bytes"].get<long long>() == on["device_total_bytes"].get<long long>());
  }
}

namespace {
// Checks every case of one measurement file: the verdict equal to what happened, the peak within 3% where the step
// ran. Returns how many cases it checked.
int check_measurement_file(const std::string& file) {
  const json d = load_file(file);
  REQUIRE(d.contains("measured_on"));
  int checked = 0;
  for (const char* section : {"phases", "anatomy", "fsdp_rank0"}) {
    if (!d.contains(section)) continue;
    for (const json& c : d[section]) {
      const std::vector<std::string> args = flags_of(c, workspaces_in_baseline(d, section, c), d["measured_on"]);
      std::string joined;
      for (const std::string& s : args) joined += s + " ";
      INFO(file << " " << section << " " << c["name"].get<std::string>() << ": zeromem " << joined);
      const json j = estimate(args);
      const double predicted = j["per_gpu"]["peak_bytes"].get<double>();
      const double measured = c["peak"].get<double>();
      const bool ran_out = c["oom"].get<bool>();
      CHECK(j["verdict"]["fits"].get<bool>() == !ran_out);
      // An out-of-memory step stopped at whatever was allocated when it failed: only the verdict is comparable.
      if (!ran_out) {
        INFO("predicted " << predicted << " B, measured " << measured << " B");
        // A case a mechanism zeromem does not model sets (its "unmodelled" names it and the error) is held outside
        // 3%, so that the note goes when the mechanism comes (docs/validation.md lists them).
        if (c.contains("unmodelled")) {
          INFO("unmodelled: " << c["unmodelled"].get<std::string>());
          CHECK(std::abs(predicted / measured - 1.0) > 0.03);
        } else {
          CHECK(std::abs(predicted / measured - 1.0) <= 0.03);
        }
      }
      ++checked;
    }
  }
  return checked;
}
}  // namespace

TEST_CASE("calibration: every measured step's peak within 3%, every verdict right", "[calibration]") {
  const std::vector<std::string> files = calibration_files();
  REQUIRE(std::count(files.begin(), files.end(), calibration_dir + "h100-training-steps.json") == 1);
  REQUIRE(std::count(files.begin(), files.end(), calibration_dir + "h200-training-steps.json") == 1);
  REQUIRE(std::count(files.begin(), files.end(), calibration_dir + "h100-moe-steps.json") == 1);
  REQUIRE(std::count(files.begin(), files.end(), calibration_dir + "h200-random-steps-20261128.json") == 1);
  for (const std::string& file : files) {
    const int checked = check_measurement_file(file);
    INFO(file);
    CHECK(checked > 0);  // every file here holds measured steps
    if (file == calibration_dir + "h100-training-steps.json") CHECK(checked == 25);
    if (file == calibration_dir + "h200-training-steps.json") CHECK(checked == 57);  // measured 2026-11-26 (docs/validation.md)
    if (file == calibration_dir + "h100-moe-steps.json") CHECK(checked == 16);       // mixtures of experts, 2026-11-26
    if (file == calibration_dir + "h200-moe-steps.json") CHECK(checked == 4);        // Qwen2-MoE and OLMoE, 2026-11-27
    if (file == calibration_dir + "h200-random-steps-20261127.json") CHECK(checked == 89);  // random_steps.py's draws
    if (file == calibration_dir + "h200-random-steps-20261128.json") CHECK(checked == 89);
    if (file == calibration_dir + "h200-random-steps-20261129.json") CHECK(checked == 90);
    if (file == calibration_dir + "h200-random-steps-20261130.json") CHECK(checked == 89);
    if (file == calibration_dir + "h200-random-steps-20261201.json") CHECK(checked == 90);  // drawn 2026-11-28
    if (file == calibration_dir + "h200-random-steps-20261202.json") CHECK(checked == 90);
    if (file == calibration_dir + "h200-random-fsdp-steps-20261203.json") CHECK(checked == 46);  // FSDP2 and DDP ranks
  }
}

TEST_CASE("calibration: the driver's use beyond the context and the reserved bytes after a step is the modules' default", "[calibration]") {
  // used_driver (cudaMemGetInfo total - free after the step) - max_memory_reserved() - cuda_context_bytes: what the
  // step's kernel modules and library handles hold outside the allocator. In a fresh process (the case its process ran
  // first) it is step_config's default in all but four steps; a process that ran more models holds more.
  const std::int64_t modules = zeromem::step_config{}.cuda_modules.count();
  int fresh = 0, at_default = 0, below = 0;
  std::int64_t least = INT64_MAX, most = 0;
  for (const std::string& file : calibration_files()) {
    const json d = load_file(file);
    const std::int64_t context = d["measured_on"]["cuda_context_bytes"].get<std::int64_t>();
    for (const char* section : {"phases", "anatomy"}) {
      if (!d.contains(section)) continue;
      for (const json& c : d[section]) {
        if (!c.contains("used_driver") || !c.contains("reserved")) continue;
        const std::int64_t held = c["used_driver"].get<std::int64_t>() - c["reserved"].get<std::int64_t>() - context;
        least = std::min(least, held);
        most = std::max(most, held);
        if (workspaces_in_baseline(d, section, c)) continue;  // not its process's first case
        ++fresh;
        at_default += held == modules;
        below += held < modules;
      }
    }
  }
  CHECK(modules == 153'092'096);  // 146 MiB
  CHECK(fresh == 23);
  CHECK(at_default == 19);
  CHECK(below == 2);  // 130 MiB: the H200's 20261129 draw's first case (SGD with momentum) and 20261202's (eager Gemma-2)
  CHECK(least == 136'314'880);
  CHECK(most == 186'646'528);  // 178 MiB
}

TEST_CASE("calibration: a measured case's fields read as the flags a user would pass", "[calibration]") {
  // The scripts' own shapes (measure_hf.py, peak_anatomy.py, fsdp_fake.py) and a torch.optim optimizer named in the
  // "optimizer" field, as a later file in the same shape may write it: the same flags as its "algorithm" field.
  const json base = {{"name", "x"}, {"config", "qwen2.5-1.5b"}, {"precision", "bf16"}, {"attention", "sdpa"}, {"seq", 1024},
                     {"micro_batch", 1}, {"checkpointing", false}};
  const auto has = [](const std::vector<std::string>& a, const std::vector<std::string>& seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
  };
  json named = base;
  named["optimizer"] = "SGD";
  json algorithm = base;
  algorithm["algorithm"] = "sgd";
  CHECK(has(flags_of(named, false), {"--optimizer", "sgd"}));
  CHECK(flags_of(named, false) == flags_of(algorithm, false));
  json forloop = named;
  forloop["foreach"] = false;
  CHECK(has(flags_of(forloop, false), {"--optimizer-impl", "forloop"}));
  json fused = base;
  fused["optimizer"] = "fused";
  CHECK(has(flags_of(fused, false), {"--optimizer-impl", "fused"}));
  json lora = base;
  lora["optimizer"] = "lora";
  CHECK(has(flags_of(lora, false), {"--lora-targets", "q_proj,v_proj"}));
  CHECK(has(flags_of(lora, false), {"--optimizer-impl", "foreach"}));
  json amp = base;
  amp["precision"] = "amp";
  CHECK(has(flags_of(amp, true), {"--precision", "amp-bf16"}));
  CHECK(has(flags_of(amp, true), {"--blas-workspaces", "0B"}));
  // Each runs.
  for (const json& c : {named, forloop, fused, lora, amp}) CHECK(estimate(flags_of(c, false))["per_gpu"]["peak_bytes"].get<long long>() > 0);
}

TEST_CASE("calibration: a measuring process's first case holds the two cuBLAS workspaces above its baseline", "[calibration]") {
  // Qwen2.5-1.5B in bf16 rests at weights + two AdamW moments whatever the step's shape; the first case of each
  // process (phases and anatomy alike) rests 66,716,160 B above the second, whose baseline already held what the first
  // step allocated for good. Two handles (forward's thread, autograd's) x 32 MiB on an H100 (sm90):
  // 2 x 32 x 2^20 = 67,108,864 B, 0.59% above the measured difference (the rest: the allocator's 512-byte rounding
  // of the blocks each case's optimizer state lands in).
  const json d = load_calibration();
  const json& first = d["phases"][0];
  const json& second = d["phases"][1];
  REQUIRE(first["config"] == second["config"]);
  REQUIRE(first["precision"] == second["precision"]);
  const json j = estimate({"estimate", "--hf-config", calibration_dir + "configs/qwen2.5-1.5b/config.json", "--seq-len", "2048",
                           "--precision", "bf16", "--gpu", "h100-80gb", "--json"});
  CHECK(j["per_gpu"]["blas_workspaces_bytes"].get<long long>() == 67'108'864);
  for (const json* c : {&first, &d["anatomy"][0]}) {
    const double excess = (*c)["states"].get<double>() - second["states"].get<double>();
    INFO((*c)["name"].get<std::string>() << ": " << excess << " B above the second case's resting states");
    CHECK(std::abs(excess / 67'108'864.0 - 1.0) <= 0.01);
  }
}

TEST_CASE("calibration: each phase of the measured single-GPU steps within 3%", "[calibration]") {
  // Hand-picked steps only: random_steps.py's draws ("drawn_by") are held to their peak and verdict, as the held-out
  // steps are; their phases' errors are listed in docs/validation.md (small models, where the caching allocator's
  // rounding and transients outside the peak's phase weigh more).
  for (const std::string& file : calibration_files()) {
    const json d = load_file(file);
    if (!d.contains("phases") || d["measured_on"].contains("drawn_by")) continue;
    for (const json& c : d["phases"]) {
      if (c["oom"].get<bool>()) continue;
      INFO(file << " " << c["name"].get<std::string>());
      const json p = estimate(flags_of(c, workspaces_in_baseline(d, "phases", c), d["measured_on"]))["phases"];
      CHECK(std::abs(p["forward"]["peak_bytes"].get<double>() / c["peak_forward"].get<double>() - 1.0) <= 0.03);
      CHECK(std::abs(p["backward"]["peak_bytes"].get<double>() / c["peak_backward"].get<double>() - 1.0) <= 0.03);
      CHECK(std::abs(p["optimizer_step"]["peak_bytes"].get<double>() / c["peak_step"].get<double>() - 1.0) <= 0.03);
    }
  }
}

TEST_CASE("calibration: a checkpointed layer's forward sets three drawn steps' forward phase (GPT-2, GPT-NeoX, Phi)", "[calibration]") {
  // H200 steps under full recompute whose forward phase a layer's no-grad frames set (forward_layer_peak), read
  // -2.19%, -2.01% and -3.29% while those families' layers were not walked. GPT-2's block holds its dropout copies and
  // masks (config.json's 0.1 defaults, model.train()) and GPT2Model's inputs_embeds and position_embeds.
  const std::map<std::string, double> within = {{"random-20261129-074-gpt2-bf16-eager-s1024-b1-ckpt", 0.001},
                                                {"random-20261129-055-gpt_neox-bf16-sdpa-s2048-b1-ckpt", 0.01},
                                                {"random-20261127-003-phi-bf16-sdpa-s128-b1-ckpt", 0.015}};
  int found = 0;
  for (const std::string& file : calibration_files()) {
    const json d = load_file(file);
    if (!d.contains("phases")) continue;  // a file of FSDP2 ranks only
    for (const json& c : d["phases"]) {
      const auto it = within.find(c["name"].get<std::string>());
      if (it == within.end()) continue;
      ++found;
      INFO(it->first);
      const json p = estimate(flags_of(c, workspaces_in_baseline(d, "phases", c), d["measured_on"]))["phases"];
      CHECK(std::abs(p["forward"]["peak_bytes"].get<double>() / c["peak_forward"].get<double>() - 1.0) <= it->second);
    }
  }
  CHECK(found == 3);
}

namespace {
// Each named single-GPU step's phase ("forward", "backward") against its measurement, within the relative error given
// for it; returns how many of the names were found.
int check_phases(const std::string& phase, const std::map<std::string, double>& within) {
  int found = 0;
  for (const std::string& file : calibration_files()) {
    const json d = load_file(file);
    if (!d.contains("phases")) continue;  // a file of FSDP2 ranks only
    for (const json& c : d["phases"]) {
      const auto named = within.find(c["name"].get<std::string>());
      if (named == within.end()) continue;
      ++found;
      INFO(named->first);
      const json p = estimate(flags_of(c, workspaces_in_baseline(d, "phases", c), d["measured_on"]))["phases"];
      CHECK(std::abs(p[phase]["peak_bytes"].get<double>() / c["peak_" + phase].get<double>() - 1.0) <= named->second);
    }
  }
  return found;
}
}  // namespace

TEST_CASE("calibration: Qwen3's head norms set two drawn steps' backward phase", "[calibration]") {
  // H200 Qwen3 steps (hidden 1024, 32 heads of 128 and 4 KV heads, checkpointed and accumulating over 3; 16 heads of 128
  // and 8 KV heads, eager, 128 tokens x 2) whose backward phase q_norm's pow node sets (heads x d = 4h and 2h): -2.54%
  // and -0.22% before that moment was walked. In both the optimizer step sets the peak, which did not move.
  CHECK(check_phases("backward", {{"random-20261129-003-qwen3-bf16-sdpa-s4096-b1-ckpt-accum3-adagrad", 0.0001},
                                  {"random-20261202-084-qwen3-bf16-eager-s128-b2-adam", 0.0001}}) == 2);
}

TEST_CASE("calibration: Qwen3-MoE's head norms set three drawn steps' backward phase", "[calibration][moe]") {
  // H200 Qwen3-MoE steps, SDPA, without recompute, whose predicted backward phase is now a head norm's pow node, reached
  // once the MoE block is differentiated: -0.27% -> -0.0001% (2 layers, 32 heads of 128 over hidden 512, 64 experts),
  // -0.68% -> +0.10% (1 layer, 8 heads of 128 over 1024, 4 experts; 65,194 B over, not explained) and -0.81% -> -0.42%
  // (3 layers, 16 heads of 64 over 512, 32 experts; 879,958 B under, not explained). In all three the optimizer step
  // sets the peak.
  CHECK(check_phases("backward", {{"random-20261201-018-qwen3_moe-bf16-sdpa-s256-b1", 0.0001},
                                  {"random-20261130-081-qwen3_moe-bf16-sdpa-s256-b1-adafactor", 0.001},
                                  {"random-20261129-068-qwen3_moe-bf16-sdpa-s512-b1-adafactor", 0.005}}) == 3);
}

TEST_CASE("calibration: the final norm's fp32 product sets drawn steps' forward phase", "[calibration]") {
  // H200 steps without recompute whose vocabulary is small beside the hidden size: the forward's highest moment is the
  // final RMSNorm's fp32 product beside its input and inputs_embeds, before the logits exist. Before that moment was
  // read: Gemma-3 -0.999%, Gemma -0.238%, OLMoE -0.545%, Qwen3-MoE -0.372%, Gemma-2 -1.450%, Mixtral -0.590%.
  CHECK(check_phases("forward", {{"random-20261127-070-gemma3_text-bf16-sdpa-s512-b8-adagrad", 0.0001},
                                 {"random-20261128-026-gemma-bf16-sdpa-s256-b4-nadam", 0.0001},
                                 {"random-20261129-002-olmoe-bf16-sdpa-s4096-b4-accum2-adamax", 0.0001},
                                 {"random-20261202-010-qwen3_moe-bf16-sdpa-s2048-b1-sgd-momentum", 0.0001},
                                 {"random-20261130-082-gemma2-bf16-sdpa-s1024-b4-adam", 0.002},
                                 {"random-20261130-019-mixtral-bf16-sdpa-s128-b2-adafactor", 0.001}}) == 6);
}

TEST_CASE("calibration: the optimizer's temporaries are the blocks its frame allocated", "[calibration]") {
  // The anatomy groups the blocks alive at the peak by the Python frame that allocated them: foreach AdamW's
  // buffer is attributed to adam.py _multi_tensor_adam, forloop's to _single_tensor_adam; fused has none, and
  // its peak moves to the end of backward.
  const json d = load_calibration();
  int checked = 0;
  for (const json& c : d["anatomy"]) {
    const std::string impl = c["optimizer"].get<std::string>();
    long long allocated_by_optimizer = 0;
    for (const json& frame : c["live_at_peak"])
      if (frame[0].get<std::string>().find("_tensor_adam") != std::string::npos) allocated_by_optimizer += frame[1].get<long long>();
    const json j = estimate(flags_of(c, workspaces_in_baseline(d, "anatomy", c)));
    const double predicted = j["phases"]["optimizer_step"]["terms"]["optimizer_temporaries_bytes"].get<double>();
    INFO(c["name"].get<std::string>() << ": predicted " << predicted << " B, the optimizer's frame " << allocated_by_optimizer << " B");
    if (impl == "fused") {
      CHECK(predicted == 0.0);
      CHECK(j["per_gpu"]["peak_phase"] == "backward");
    } else if (allocated_by_optimizer > 0) {
      CHECK(std::abs(predicted / static_cast<double>(allocated_by_optimizer) - 1.0) <= 0.001);
      // The for-loop's frame holds lm_head's sqrt and quotient and the final norm's denom, named until reassigned:
      // (2 x 131,072,000 + 4,096) x 2 B = 524,296,192 B, to the byte.
      if (impl == "forloop") CHECK(predicted == static_cast<double>(allocated_by_optimizer));
      CHECK(j["per_gpu"]["peak_phase"] == "optimizer_step");
      ++checked;
    }
  }
  CHECK(checked == 3);  // Llama-2-7B foreach and forloop, Llama-3-8B foreach
}

TEST_CASE("calibration: the measured LoRA step, as PEFT counted it and as the GPU held it", "[calibration][lora]") {
  // llama2-7b-lora16-sdpa-s4096-b2-ckpt: Llama-2-7B in bf16, PEFT LoRA r = 16 on q_proj and v_proj, gradient
  // checkpointing, AdamW (foreach) over the adapters only.
  const json d = load_calibration();
  int found = 0;
  for (const json& c : d["anatomy"]) {
    if (c["optimizer"] != "lora") continue;
    ++found;
    const json j = estimate(flags_of(c, workspaces_in_baseline(d, "anatomy", c)));
    // The script's own counts: sum(p.numel()) over the PEFT model, and over the parameters that require grad.
    CHECK(j["model"]["adapter_params"].get<long long>() == c["trainable"].get<long long>());
    CHECK(j["model"]["trainable_params"].get<long long>() == c["trainable"].get<long long>());
    CHECK(j["model"]["all_params_with_adapters"].get<long long>() == c["params"].get<long long>());
    // What stays allocated between steps (memory_allocated after a step, minus before the model): the frozen bf16 base,
    // the fp32 adapters and their two fp32 moments. The measurement also holds the token ids (2 x 4096 int64 = 65,536 B)
    // and a few 512-byte blocks, so the two agree within 0.001%.
    const double resting = j["phases"]["optimizer_step"]["terms"]["resting_states_bytes"].get<double>();
    INFO("predicted resting " << resting << " B, measured " << c["states"].get<double>() << " B");
    CHECK(std::abs(resting / c["states"].get<double>() - 1.0) <= 1e-5);
    // The peak is the loss's backward: 3 fp32 logits-sized tensors above the checkpoints (anatomy: cross_entropy 1.05 GB
    // plus the 2.10 GB allocated from C++).
    CHECK(j["per_gpu"]["peak_phase"] == "backward");
    CHECK(j["per_gpu"]["peak_term"] == "loss");
    CHECK(std::abs(j["per_gpu"]["peak_bytes"].get<double>() / c["peak"].get<double>() - 1.0) <= 0.001);
  }
  CHECK(found == 1);
}
