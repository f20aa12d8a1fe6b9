// RLHF jobs as launched: the five reported cases through `zeromem job`, terms derived by hand, and the readers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "zeromem/jobs/rlhf_config.hpp"
#include "zeromem/model/hf_config.hpp"

namespace {
using zeromem::test::run_cli;
using zeromem::test::run_cli_json;

const std::string jobs = std::string(ZEROMEM_EXAMPLES_DIR) + "/jobs/";

nlohmann::json job(const std::string& file, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"job", jobs + file, "--json"};
  args.insert(args.end(), extra.begin(), extra.end());
  return run_cli_json(args);
}

const nlohmann::json& phase(const nlohmann::json& j, const std::string& name) {
  for (const auto& p : j["phases"])
    if (p["phase"] == name) return p;
  FAIL("no phase " << name);
  return j;
}

// The fix --explain shows whose change starts so ("" where none), and whether it says that change fits.
using shown = std::pair<std::string, bool>;
shown offered(const nlohmann::json& j, const std::string& start) {
  for (const auto& f : j["fixes"])
    if (f["change"].get<std::string>().rfind(start, 0) == 0) return {f["change"].get<std::string>(), f["fits"].get<bool>()};
  return {std::string(), false};
}

// Host bytes of a phase's terms whose name starts so, whichever role holds them.
std::int64_t host(const nlohmann::json& p, const std::string& prefix) {
  std::int64_t sum = 0;
  for (const auto& t : p["terms"])
    if (t["term"].get<std::string>().rfind(prefix, 0) == 0) sum += t["host_bytes"].get<std::int64_t>();
  return sum;
}

// What a launch file's `# zeromem:` line would give: the GPU and the vLLM version.
zeromem::job_settings settings(const char* gpu, const char* vllm) {
  zeromem::job_settings s{};
  s.gpu = gpu;
  s.vllm_version = vllm;
  return s;
}

std::int64_t term(const nlohmann::json& p, const std::string& role, const std::string& prefix, const char* device = "gpu_bytes") {
  for (const auto& t : p["terms"])
    if (t["role"] == role && t["term"].get<std::string>().rfind(prefix, 0) == 0) return t[device].get<std::int64_t>();
  FAIL("no term " << role << " " << prefix);
  return 0;
}
}  // namespace

TEST_CASE("orz-1.5b-ppo: utilization 0.85 breaks the rollout, 0.5 fits (ORZ issue #24)", "[rlhf][scenario]") {
  const nlohmann::json bad = job("orz-1.5b-ppo.args");
  CHECK_FALSE(bad["fits"].get<bool>());
  CHECK(bad["first_failing_phase"] == "rollout");
  CHECK(phase(bad, "rollout")["deciding_term"] == "vLLM KV cache");
  // vLLM 0.6.5 per-instance budget on an empty A100 80GB (79.35 GiB = 85,201,346,150 B as the table rounds it):
  // KV = floor(0.85 x total) - bf16 weights (2 x 1,543,714,304) - profiled activation peak - non-torch
  // (650,969,088), in whole blocks of 16 tokens x 28 layers x (K + V) x 2 KV heads x 128 dims x 2 B = 458,752 B.
  // The profile (V0 defaults: 256 sequences, max(512 + 512, 2048) = 2048 tokens) peaks in the sampler:
  // 2 B x (2048 tokens x 1536 hidden + 256 x 151,936 logits) + 38 B x 256 x 151,936 = 1,562,116,096 B, above the
  // widest layer moment, 2048 x (4 x 1536 + 3 x 8960) x 2 B = 135,266,304 B.
  const std::int64_t total = zeromem::find_gpu("a100-80gb").capacity.count();
  const std::int64_t profile = 2 * (2048LL * 1536 + 256LL * 151'936) + 38 * 256LL * 151'936;
  CHECK(term(phase(bad, "rollout"), "vLLM", "activation peak") == profile);
  const std::int64_t kv_room =
      static_cast<std::int64_t>(static_cast<long double>(total) * 0.85L) - 2 * 1'543'714'304LL - profile - 650'969'088LL;
  CHECK(term(phase(bad, "rollout"), "vLLM", "KV cache") == kv_room / 458'752 * 458'752);
  // The reference under ZeRO-3 over 4 GPUs: bf16 weights / 4.
  CHECK(term(phase(bad, "rollout"), "reference", "weights") == 1'543'714'304LL * 2 / 4);
  // An engine with no room for one KV block does not start: a verdict naming it, not an error.
  const nlohmann::json starved = job("orz-1.5b-ppo.args", {"vllm_gpu_memory_utilization=0.05"});
  CHECK_FALSE(starved["fits"].get<bool>());
  CHECK(starved["first_failing_phase"] == "rollout");
  CHECK(phase(starved, "rollout")["deciding_term"].get<std::string>().find("no memory is left for the KV cache") != std::string::npos);
  const nlohmann::json fixed = job("orz-1.5b-ppo.args", {"vllm_gpu_memory_utilization=0.5"});
  CHECK(fixed["fits"].get<bool>());
  for (const auto& p : fixed["phases"]) CHECK(p["per_gpu"]["peak_bytes"].get<std::int64_t>() <= total);
}

TEST_CASE("cuBLAS workspaces per process: two where a role trains, one where it only runs forward", "[rlhf]") {
  // ORZ colocates actor and critic (each trains: forward's thread and autograd's) and the reference (forward only) on
  // every A100 (sm80): 5 handles x (2 x 4 MiB + 8 x 16 KiB) = 5 x 8,519,680 = 42,598,400 B in every phase. vLLM's
  // own sits inside its profiled peak.
  const nlohmann::json orz = job("orz-1.5b-ppo.args");
  for (const auto& p : orz["phases"]) CHECK(term(p, "all", "cuBLAS workspaces (5 handles)") == 42'598'400);
  // verl's hybrid worker runs actor, rollout and reference in one process: 2 handles. On an H100 (sm90), 32 MiB each.
  const nlohmann::json verl = job("logic-rl-7b-grpo.yaml", {"--gpu", "h100-80gb"});
  for (const auto& p : verl["phases"]) CHECK(term(p, "all", "cuBLAS workspaces (2 handles)") == 67'108'864);
}

TEST_CASE("a trained role's passes per optimizer step accumulate gradients that are alive from each pass's start", "[rlhf][accumulation]") {
  // verl's example: ppo_mini_batch_size 256 over ppo_micro_batch_size 16 (both x rollout.n / dp) = 16 passes
  // (dp_actor.py gradient_accumulation). The actor's fp32 gradient shards (FSDP over 8 GPUs, Qwen2-7B's 7,615,616,512
  // parameters: 951,952,064 x 4 B = 3,807,808,256 B) are alive from the start of each pass after the first.
  const nlohmann::json verl = job("verl-qwen2-7b-ppo.sh");
  CHECK(term(phase(verl, "training"), "actor", "gradients (accumulated over 16 passes)") == 3'807'808'256);
  // One pass per step (the mini-batch is the micro-batch): no gradients before the pass.
  const nlohmann::json one = job("verl-qwen2-7b-ppo.sh", {"actor_rollout_ref.actor.ppo_micro_batch_size=256"});
  for (const auto& t : phase(one, "training")["terms"]) CHECK(t["term"].get<std::string>().find("accumulated") == std::string::npos);
  // EasyR1: global_batch_size 128 x rollout.n 5 / 8 devices over micro_batch_size_per_device_for_update 4 = 20 passes.
  const nlohmann::json easyr1 = job("easyr1-vl-7b-grpo.yaml");
  CHECK(term(phase(easyr1, "training"), "actor", "gradients (accumulated over 20 passes)") > 0);
}

TEST_CASE("the step's batch in host RAM: the driver's, its chunks in Ray's object store, the ranks' copies", "[rlhf][host]") {
  // verl's PPO example: 1024 sequences of 1024 + 512 tokens, padded. Per sequence, int64 input_ids, attention_mask and
  // position_ids over 1536 tokens, prompts over 1024, responses and response_mask over 512: 8 x (3 x 1536 + 1024 + 2 x 512)
  // = 53,248 B; from the experience forwards on, seven fp32 per response token (old_log_probs, ref_log_prob, values,
  // token_level_scores, token_level_rewards, advantages, returns): + 28 x 512 = 67,584 B. The 8 ranks on the one node
  // hold 128 sequences each: the whole batch.
  const nlohmann::json verl = job("verl-qwen2-7b-ppo.sh");
  const std::int64_t tokens = 1024LL * 53'248, all = 1024LL * 67'584;
  CHECK(host(phase(verl, "rollout"), "experience batch (driver)") == tokens);
  CHECK(host(phase(verl, "rollout"), "experience batch (object store)") == tokens);
  CHECK(host(phase(verl, "rollout"), "chunk of the batch received") == 0);
  CHECK(host(phase(verl, "experience"), "experience batch (driver)") == all);
  CHECK(host(phase(verl, "experience"), "experience batch (object store)") == tokens);
  CHECK(host(phase(verl, "experience"), "chunk of the batch received") == tokens);
  for (const char* what : {"experience batch (driver)", "experience batch (object store)", "chunk of the batch received"})
    CHECK(host(phase(verl, "training"), what) == all);
  // Without a critic (GRPO): no values, six fp32 per response token, 53,248 + 24 x 512.
  const nlohmann::json grpo = job("verl-qwen2-7b-ppo.sh", {"algorithm.adv_estimator=grpo"});
  CHECK(host(phase(grpo, "training"), "experience batch (driver)") == 1024LL * (53'248 + 24 * 512));
  // verl's LoRA example: the actor with its adapters off gives the reference log-probs (ref_in_actor), no critic: 16
  // prompts x 5 of 512 + 1024 tokens, 8 x (3 x 1536 + 512 + 2 x 1024) = 57,344 B, + 24 x 1024 = 81,920 B a sequence.
  CHECK(host(phase(job("verl-qwen2.5-3b-grpo-lora.sh"), "training"), "experience batch (driver)") == 80LL * 81'920);
  // Ulysses over 2: 4 data-parallel groups of 256 sequences, each held by both ranks of its group.
  const nlohmann::json sp = job("verl-qwen2-7b-ppo.sh", {"actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"});
  CHECK(host(phase(sp, "training"), "chunk of the batch received") == 8 * 256LL * 67'584);
  // OpenRLHF from v0.7.1 (grouped arguments: v0.10.2): data.max_len 2048 caps prompt + response, the response up to it.
  // Experience: int64 sequences and attention_mask (16 x 2048) and a bool action_mask (2048) = 34,816 B; with
  // action_log_probs, base_action_log_probs, values, returns, advantages, kl: + 24 x 2048 = 83,968 B. Training: the
  // driver's and the actor's and the critic's replay buffers (8 ranks each, colocated); the object store is empty again.
  const nlohmann::json grouped = job("openrlhf-llama3-8b-hybrid-grouped.args");
  CHECK(host(phase(grouped, "experience"), "experience batch (object store)") == 1024LL * 34'816);
  CHECK(host(phase(grouped, "training"), "experience batch (driver)") == 1024LL * 83'968);
  CHECK(host(phase(grouped, "training"), "replay buffer") == 2 * 1024LL * 83'968);
  CHECK(host(phase(grouped, "training"), "experience batch (object store)") == 0);
  // Before v0.7.1 each actor rank made its experiences: no driver, the replay buffers from the experience phase on.
  // 1024 + 1024 tokens: 16 x 2048 + 1024 = 33,792 B, + 24 x 1024 = 58,368 B. The actor's 8 ranks fill the most loaded
  // node; the critic's 8 are on another.
  const nlohmann::json old = job("openrlhf-llama3-70b-ppo.args");
  CHECK(host(phase(old, "rollout"), "experience batch") == 0);
  CHECK(host(phase(old, "experience"), "replay buffer") == 1024LL * 58'368);
  CHECK(host(phase(old, "training"), "replay buffer") == 1024LL * 58'368);
  // Colocated, actor and critic share each GPU, so the node holds both (the reference on the actor's 8 GPUs, as
  // OpenRLHF asserts for a colocated reference).
  const nlohmann::json together =
      job("openrlhf-llama3-70b-ppo.args", {"colocate_all_models=true", "ref_num_gpus_per_node=8", "--openrlhf-version", "0.7.0"});
  CHECK(host(phase(together, "training"), "replay buffer") == 2 * 1024LL * 58'368);
}

TEST_CASE("logic-rl-7b-grpo: train_batch_size x rollout.n per GPU decides, as in all four reports (Logic-RL issue #8)", "[rlhf][scenario]") {
  const std::string f = "logic-rl-7b-grpo.yaml";
  const nlohmann::json b8n32 = job(f);  // the file as reported: 8 x 32
  CHECK_FALSE(b8n32["fits"].get<bool>());
  CHECK(b8n32["first_failing_phase"] == "training");
  // verl (Jan 2025) normalizes ppo_micro_batch_size 64 // 4 GPUs x n 32 = 512, capped by the 8 x 32 / 4 = 64
  // sequences a GPU holds; packed at the assumed 520 tokens: one pass of 33,280 tokens.
  CHECK(phase(b8n32, "training")["terms"].dump().find("activations (64 sequences, 33280 x 1 tokens)") != std::string::npos);
  CHECK(job(f, {"data.train_batch_size=4", "actor_rollout_ref.rollout.n=32"})["fits"].get<bool>());
  CHECK_FALSE(job(f, {"data.train_batch_size=4", "actor_rollout_ref.rollout.n=64"})["fits"].get<bool>());
  CHECK(job(f, {"data.train_batch_size=4", "actor_rollout_ref.rollout.n=48", "--gpu", "h100-80gb"})["fits"].get<bool>());
  // The update loads every offloaded state back: fp32 parameters and gradients and two fp32 moments, sharded by 4.
  CHECK(term(phase(b8n32, "training"), "actor", "resting_states") == 7'615'616'512LL * 12 / 4);
  // At the configured maxima (400 + 2048 tokens) even 32 sequences per GPU would not fit: the lengths were shorter.
  CHECK_FALSE(job(f, {"data.train_batch_size=4", "actor_rollout_ref.rollout.n=32", "--mean-tokens", "2448"})["fits"].get<bool>());
}

TEST_CASE("verl's batch normalization by release: global sizes / ranks x rollout.n before v0.2, mini-batch x n / ranks and "
          "micro-batches / ranks from v0.2, whose two assertions are one-line errors, and the critic's own sizes", "[rlhf]") {
  // Logic-RL's file: 4 GPUs, train_batch_size 8, rollout.n 32 (8 x 32 / 4 = 64 sequences a GPU holds), ppo_mini_batch_size
  // 256, global ppo_micro_batch_size 64, log_prob_micro_batch_size 160 for the rollout and the reference.
  const std::string f = "logic-rl-7b-grpo.yaml";
  const auto shape_of = [](const nlohmann::json& j, const std::string& phase_name, const std::string& prefix) {
    const std::string terms = phase(j, phase_name)["terms"].dump();
    const std::size_t at = terms.find(prefix);
    return at == std::string::npos ? std::string() : terms.substr(at, terms.find(')', at) - at + 1);
  };
  // Before v0.2 (fsdp_workers.py at 9f734014): log-prob micro 160 // 4 x 32 = 1280 and train micro 64 // 4 x 32 = 512,
  // both capped at the 64 sequences a GPU holds; the release is listed as assumed.
  const nlohmann::json before = job(f);
  CHECK(shape_of(before, "experience", "forward peak (") == "forward peak (64 sequences, 33280 x 1 tokens)");
  CHECK(shape_of(before, "training", "activations (") == "activations (64 sequences, 33280 x 1 tokens)");
  CHECK(before["config"]["assumed"].dump().find("verl's batch normalization before v0.2") != std::string::npos);
  // v0.2 (6e003c0b): log-prob micro 160 // 4 = 40; train micro 64 // 4 = 16 within a mini-batch of 256 x 32 // 4 = 2048
  // (more than the 64 held: one mini-batch), 64 / 16 = 4 passes; the smaller passes fit where v0.1's did not.
  const nlohmann::json v02 = job(f, {"--verl-version", "0.2.0"});
  CHECK(shape_of(v02, "experience", "forward peak (") == "forward peak (40 sequences, 20800 x 1 tokens)");
  CHECK(shape_of(v02, "training", "activations (") == "activations (16 sequences, 8320 x 1 tokens)");
  CHECK(shape_of(v02, "training", "gradients (") == "gradients (accumulated over 4 passes)");
  CHECK(v02["fits"].get<bool>());
  CHECK_FALSE(before["fits"].get<bool>());
  // Sizes per GPU are read as given in both: no assumption listed.
  const nlohmann::json per_gpu = job(f, {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8",
                                         "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8", "actor_rollout_ref.actor.ppo_mini_batch_size=128"});
  CHECK(per_gpu["config"]["assumed"].dump().find("batch normalization") == std::string::npos);
  CHECK(shape_of(per_gpu, "training", "activations (") == "activations (8 sequences, 4160 x 1 tokens)");
  // v0.2's __init__ asserts a mini-batch of at least one sequence and a micro-batch that divides it.
  // (verl's LoRA example, 2 GPUs, per-GPU micro-batch keys: _validate_config has nothing to say about them.)
  const zeromem::test::cli_result empty = run_cli({"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "--verl-version", "0.2.0",
                                                   "actor_rollout_ref.actor.ppo_mini_batch_size=1", "actor_rollout_ref.rollout.n=1"});
  CHECK(empty.code == 2);
  CHECK(empty.err.find("ppo_mini_batch_size 1 x rollout.n 1 gives no sequence to each of 2 data-parallel ranks, which verl asserts") != std::string::npos);
  // The critic (PPO, 8 GPUs, train batch 1024 x n 4 = 512 sequences a GPU): its global micro-batch 16 // 8 = 2 in every
  // release, its forward's the same unless forward_micro_batch_size(_per_gpu) is given, its mini-batch (the actor's
  // 256 unless its own) 256 // 8 = 32 before v0.4.0 and 256 x 4 // 8 = 128 from it: 16 and 64 passes of 2.
  zeromem::job_settings s = settings("a100-80gb", "0.6.3");
  const std::vector<std::pair<std::string, std::string>> ppo{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                             {"critic.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                             {"trainer.n_gpus_per_node", "8"},
                                                             {"data.train_batch_size", "1024"},
                                                             {"actor_rollout_ref.rollout.n", "4"},
                                                             {"critic.ppo_micro_batch_size", "16"},
                                                             {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4"},
                                                             {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "4"},
                                                             {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "4"}};
  const zeromem::job_reading v01 = zeromem::read_verl(ppo, s);
  CHECK(v01.job.critic.train_micro_batch == 2);
  CHECK(v01.job.critic.forward_micro_batch == 2);
  CHECK(v01.job.critic.accumulation_steps == 16);
  CHECK(nlohmann::json(v01.assumed).dump().find("verl's critic mini-batch before v0.4.0") != std::string::npos);
  s.verl_version = "0.4.0";
  const zeromem::job_reading v04 = zeromem::read_verl(ppo, s);
  CHECK(v04.job.critic.train_micro_batch == 2);
  CHECK(v04.job.critic.accumulation_steps == 64);
  auto forward_given = ppo;
  forward_given.push_back({"critic.forward_micro_batch_size_per_gpu", "6"});
  CHECK(zeromem::read_verl(forward_given, s).job.critic.forward_micro_batch == 6);
  forward_given.back() = {"critic.forward_micro_batch_size", "80"};  // 80 // 8
  CHECK(zeromem::read_verl(forward_given, s).job.critic.forward_micro_batch == 10);
  // verl's LoRA example sets the *_per_gpu sizes only: mini-batch 16 x n 5 // 2 GPUs = 40, which 16 does not divide.
  const zeromem::test::cli_result uneven =
      run_cli({"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "--verl-version", "0.2.0", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=16"});
  CHECK(uneven.code == 2);
  CHECK(uneven.err.find("ppo_mini_batch_size 40 (x rollout.n / ranks) is not a multiple of the micro-batch 16") != std::string::npos);
  CHECK(uneven.err.find('\n') == uneven.err.size() - 1);
}

TEST_CASE("verl from v0.2 checks its batch sizes before it starts: what it refuses is a one-line error with its reason", "[rlhf][bad-input]") {
  // Logic-RL's file at v0.2: 4 GPUs, 8 x 32 sequences, global micro-batch keys only (ppo_micro_batch_size 64 divides
  // the mini-batch 256 and 64 >= 4 GPUs), use_remove_padding on. It runs; each change below is refused.
  const std::string f = jobs + "logic-rl-7b-grpo.yaml", A = "actor_rollout_ref.actor.";
  CHECK(run_cli({"job", f, "--verl-version", "0.2.0"}).code == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      // 3 x 1 sequences over 4 GPUs (ray_trainer.py _validate_config: real_train_batch_size % n_gpus == 0).
      {{"data.train_batch_size=3", "actor_rollout_ref.rollout.n=1"},
       "data.train_batch_size x actor_rollout_ref.rollout.n = 3 is not a multiple of the 4 GPUs, which verl asserts"},
      // A global and a per-GPU micro-batch together (check_mutually_exclusive).
      {{A + "ppo_micro_batch_size_per_gpu=8"}, A + "ppo_micro_batch_size and " + A + "ppo_micro_batch_size_per_gpu are both set, which verl refuses"},
      // 48 does not divide 256; 2 divides it but 2 sequences cannot reach 4 GPUs (checked before the workers normalize
      // the sizes, where 2 // 4 = 0 a GPU would fail next).
      {{A + "ppo_micro_batch_size=48"}, "ppo_micro_batch_size 48 must divide " + A + "ppo_mini_batch_size 256"},
      {{A + "ppo_micro_batch_size=2"}, "ppo_micro_batch_size 2 must divide " + A + "ppo_mini_batch_size 256 and, times the Ulysses degree 1, reach the 4 GPUs"},
      // Ulysses without remove-padding.
      {{A + "ulysses_sequence_parallel_size=2", "actor_rollout_ref.model.use_remove_padding=False"},
       A + "ulysses_sequence_parallel_size 2 needs actor_rollout_ref.model.use_remove_padding=True, which verl asserts"}};
  for (const auto& [overrides, message] : refused) {
    std::vector<std::string> args{"job", f, "--verl-version", "0.2.0"};
    args.insert(args.end(), overrides.begin(), overrides.end());
    INFO(overrides.front());
    const zeromem::test::cli_result r = run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
    // Before v0.2 verl checked none of it (ray_trainer.py at 9f734014 has no _validate_config): read as given.
    args.erase(args.begin() + 2, args.begin() + 4);
    if (overrides.front().find("ppo_micro_batch_size_per_gpu") == std::string::npos) CHECK(run_cli(args).code == 0);
  }
  // The critic's sizes alike (verl's PPO example, 8 GPUs; its critic.ppo_mini_batch_size interpolates the actor's 256).
  const zeromem::test::cli_result critic =
      run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "--verl-version", "0.2.0", "critic.ppo_micro_batch_size=4"});
  CHECK(critic.code == 2);
  CHECK(critic.err.find("critic.ppo_micro_batch_size 4 must divide critic.ppo_mini_batch_size 256 and, times the Ulysses degree 1, reach the 8 GPUs") !=
        std::string::npos);
  CHECK(run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "--verl-version", "0.2.0"}).code == 0);
  // From v0.3.0 (4d27461d) a step's prompts must fill a mini-batch, the actor's and the critic's: 128 prompts against
  // the mini-batch of 256, and a critic mini-batch of 2048 against 1024, are refused there and read at v0.2.
  const std::string ppo = jobs + "verl-qwen2-7b-ppo.sh";
  const std::vector<std::pair<std::vector<std::string>, std::string>> below_mini{
      {{"data.train_batch_size=128"}, "data.train_batch_size 128 is below " + A + "ppo_mini_batch_size 256, which verl asserts from v0.3.0"},
      {{"critic.ppo_mini_batch_size=2048"}, "data.train_batch_size 1024 is below critic.ppo_mini_batch_size 2048, which verl asserts from v0.3.0"}};
  for (const auto& [overrides, message] : below_mini) {
    std::vector<std::string> args{"job", ppo, "--verl-version", "0.3.0"};
    args.insert(args.end(), overrides.begin(), overrides.end());
    const zeromem::test::cli_result r = run_cli(args);
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    args[3] = "0.2.0";
    CHECK(run_cli(args).code == 0);
  }
  CHECK(run_cli({"job", ppo, "--verl-version", "0.3.0", "data.train_batch_size=256"}).code == 0);
  // The critic's Ulysses degree needs its own use_remove_padding (the example sets it).
  const zeromem::test::cli_result critic_sp =
      run_cli({"job", ppo, "--verl-version", "0.2.0", "critic.ulysses_sequence_parallel_size=2", "critic.model.use_remove_padding=False"});
  CHECK(critic_sp.code == 2);
  CHECK(critic_sp.err.find("critic.ulysses_sequence_parallel_size 2 needs critic.model.use_remove_padding=True, which verl asserts") != std::string::npos);
  // v0.1 has no *_per_gpu keys (they came with v0.2), and Hydra refuses a key the config lacks.
  const zeromem::test::cli_result v01 = run_cli({"job", ppo, "--verl-version", "0.1.0", "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4"});
  CHECK(v01.code == 2);
  CHECK(v01.err == "zeromem: actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu is verl's from v0.2, and verl 0.1.0 refuses it; set "
                   "actor_rollout_ref.rollout.log_prob_micro_batch_size (global, divided by the ranks) instead\n");
  // --explain writes a smaller micro-batch in the config's own key: Logic-RL's global ppo_micro_batch_size before
  // v0.2, where 32 sequences a GPU are 32 / n 32 x 4 ranks = 4 (there is no per-GPU key yet); from v0.2 the per-GPU
  // key with the global one set to null (verl refuses both; OmegaConf reads null as unset).
  const auto micro_fix = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"job", f, "--json", "--explain"});
    const nlohmann::json explained = run_cli_json(args);
    for (const auto& fix : explained["fixes"])
      if (fix["change"].get<std::string>().find("ppo_micro_batch_size") != std::string::npos) return fix["change"].get<std::string>();
    return std::string();
  };
  CHECK(micro_fix({}) == A + "ppo_micro_batch_size=4");
  CHECK(micro_fix({"--verl-version", "0.2.0", A + "ppo_micro_batch_size=256"}) == A + "ppo_micro_batch_size=null " + A + "ppo_micro_batch_size_per_gpu=32");
  CHECK(job("logic-rl-7b-grpo.yaml", {"--verl-version", "0.2.0", A + "ppo_micro_batch_size=null", A + "ppo_micro_batch_size_per_gpu=32"})["fits"].get<bool>());
  // A per-GPU micro-batch of 0, and no micro-batch key at all (v0.2's ppo_trainer.yaml has no default for either).
  const std::string lora = jobs + "verl-qwen2.5-3b-grpo-lora.sh";
  CHECK(run_cli({"job", lora, "--verl-version", "0.2.0", A + "ppo_micro_batch_size_per_gpu=0"}).err.find("is 0 sequences, which verl refuses") !=
        std::string::npos);
  zeromem::job_settings s = settings("a100-80gb", "0.6.3");
  s.verl_version = "0.2.0";
  CHECK_THROWS_WITH(zeromem::read_verl({{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"}}, s),
                    Catch::Contains("neither " + A + "ppo_micro_batch_size nor " + A + "ppo_micro_batch_size_per_gpu is set, which verl refuses"));
  // The reference's keys are not required (later releases build it only with a KL term), but both together are refused.
  std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                        {A + "ppo_micro_batch_size_per_gpu", "4"},
                                                        {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "4"},
                                                        {"algorithm.adv_estimator", "grpo"}};
  CHECK_NOTHROW(zeromem::read_verl(keys, s));
  keys.insert(keys.end(), {{"actor_rollout_ref.ref.log_prob_micro_batch_size", "32"}, {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "4"}});
  CHECK_THROWS_WITH(zeromem::read_verl(keys, s), Catch::Contains("actor_rollout_ref.ref.log_prob_micro_batch_size and "
                                                                 "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu are both set"));
}

TEST_CASE("job --explain: each fix's JSON `set` says what it sets, in the launch file's own keys, typed", "[rlhf][explain]") {
  // The words of each change, as --explain prints them: OpenRLHF's arguments (a bare switch true), verl's and EasyR1's
  // dotted keys, numbers and booleans as JSON numbers and booleans; a fix of several changes sets each of them.
  const auto set_of = [](const nlohmann::json& j, const std::string& change) {
    for (const auto& f : j["fixes"])
      if (f["change"] == change) return f["set"];
    FAIL("no fix " << change);
    return nlohmann::json();
  };
  const nlohmann::json orz = run_cli_json({"job", jobs + "orz-1.5b-ppo.args", "--json", "--explain"});
  CHECK(set_of(orz, "--vllm_gpu_memory_utilization 0.80") == nlohmann::json::parse(R"([{"flag": "--vllm_gpu_memory_utilization", "value": 0.8}])"));
  CHECK(set_of(orz, "--adam_offload") == nlohmann::json::parse(R"([{"flag": "--adam_offload", "value": true}])"));
  CHECK(set_of(orz, "--vllm_tensor_parallel_size 4 --vllm_num_engines 1") ==
        nlohmann::json::parse(R"([{"flag": "--vllm_tensor_parallel_size", "value": 4}, {"flag": "--vllm_num_engines", "value": 1}])"));
  const nlohmann::json grouped = run_cli_json({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "--gpu", "l40s", "--json", "--explain"});
  CHECK(set_of(grouped, "--ds.adam_offload") == nlohmann::json::parse(R"([{"flag": "--ds.adam_offload", "value": true}])"));
  CHECK(set_of(grouped, "--train.max_tokens_per_gpu 8192") == nlohmann::json::parse(R"([{"flag": "--train.max_tokens_per_gpu", "value": 8192}])"));
  const nlohmann::json verl = run_cli_json({"job", jobs + "logic-rl-7b-grpo.yaml", "--json", "--explain"});
  CHECK(set_of(verl, "actor_rollout_ref.actor.fsdp_config.param_offload=false") ==
        nlohmann::json::parse(R"([{"key": "actor_rollout_ref.actor.fsdp_config.param_offload", "value": false}])"));
  CHECK(set_of(verl, "actor_rollout_ref.actor.ppo_micro_batch_size=4") ==
        nlohmann::json::parse(R"([{"key": "actor_rollout_ref.actor.ppo_micro_batch_size", "value": 4}])"));
  const nlohmann::json easyr1 = run_cli_json({"job", jobs + "easyr1-vl-7b-grpo.yaml", "--json", "--explain"});
  CHECK(set_of(easyr1, "worker.rollout.gpu_memory_utilization=0.10") ==
        nlohmann::json::parse(R"([{"key": "worker.rollout.gpu_memory_utilization", "value": 0.1}])"));
  // Applied as a program would apply them (each key=value, each flag and value), they give the fix's verdict.
  for (const auto& f : easyr1["fixes"]) {
    std::vector<std::string> overrides;
    for (const auto& s : f["set"]) {
      const nlohmann::json& v = s["value"];
      overrides.push_back(s["key"].get<std::string>() + "=" + (v.is_string() ? v.get<std::string>() : v.dump()));
    }
    INFO(f.dump());
    CHECK(job("easyr1-vl-7b-grpo.yaml", overrides)["fits"] == f["fits"]);
  }
}

TEST_CASE("openrlhf-70b-ppo: DeepSpeed 0.16.x fails the actor's backward at any node count, 0.15.0 fits", "[rlhf][scenario]") {
  const nlohmann::json bad = job("openrlhf-70b-ppo.args");
  CHECK(bad["first_failing_phase"] == "training");
  // The critic's 16 GPUs are the most loaded: the defect keeps its whole 16-bit model gathered, a value model without
  // the 128,256 x 8,192 output layer: (70,553,706,496 - 1,050,673,152) x 2 B.
  CHECK(term(phase(bad, "training"), "critic", "gathered parameters kept") == (70'553'706'496LL - 1'050'673'152LL) * 2);
  // With the critic on as many GPUs as the actor, the actor's are: its whole model, 70,553,706,496 x 2 B.
  const nlohmann::json actor = job("openrlhf-70b-ppo.args", {"critic_num_nodes=8"});
  CHECK_FALSE(actor["fits"].get<bool>());
  CHECK(term(phase(actor, "training"), "actor", "gathered parameters kept") == 70'553'706'496LL * 2);
  CHECK_FALSE(job("openrlhf-70b-ppo.args", {"actor_num_nodes=8"})["fits"].get<bool>());
  CHECK(job("openrlhf-70b-ppo.args", {"--deepspeed-version", "0.15.0"})["fits"].get<bool>());
  // --explain tries a release without the defect first, as a setting, and says it fits; so does the job given it.
  const nlohmann::json explained = run_cli_json({"job", jobs + "openrlhf-70b-ppo.args", "--json", "--explain"});
  REQUIRE(!explained["fixes"].empty());
  CHECK(explained["fixes"][0]["change"] == "--deepspeed-version 0.17.0");
  CHECK(explained["fixes"][0]["fits"] == true);
  CHECK(explained["fixes"][0]["set"] == nlohmann::json::parse(R"([{"setting": "--deepspeed-version", "value": "0.17.0"}])"));
  CHECK(job("openrlhf-70b-ppo.args", {"--deepspeed-version", "0.17.0"})["fits"].get<bool>());
  // A ZeRO-3 job that fails without the defect (orz-1.5b-ppo, its vLLM cache) is not offered the change.
  const nlohmann::json orz = run_cli_json({"job", jobs + "orz-1.5b-ppo.args", "--json", "--explain"});
  REQUIRE(!orz["fixes"].empty());
  for (const auto& fix : orz["fixes"]) CHECK(fix["change"].get<std::string>().find("--deepspeed-version") == std::string::npos);
}

TEST_CASE("the DeepSpeed 0.16.x defect is walked by the step: the whole model at the embedding's backward, no activations beside it", "[rlhf][scenario]") {
  // Under the defect every 16-bit parameter gathered in backward stays gathered, so by the embedding's backward the
  // whole model is, when the activations and the loss are gone: the peak is that moment, with the embedding's new
  // whole gradient (128,256 x 8,192 x 2 B = 2,101,346,304 B, before its hook copies it into the bucket).
  const nlohmann::json result = job("openrlhf-70b-ppo.args", {"critic_num_nodes=8"});
  const nlohmann::json& training = phase(result, "training");
  std::int64_t whole = 0, gathered = 0, activations = 0, loss = 0;
  for (const auto& t : training["terms"]) {
    const std::string name = t["term"].get<std::string>();
    const std::int64_t b = t["gpu_bytes"].get<std::int64_t>();
    if (name.rfind("gathered parameters kept through backward", 0) == 0) whole += b;
    if (name.rfind("gathered_parameters", 0) == 0) gathered += b;
    if (name.rfind("activations", 0) == 0) activations += b;
    if (name.rfind("loss", 0) == 0) loss += b;
  }
  CHECK(whole == 70'553'706'496LL * 2);
  CHECK(gathered == 0);
  CHECK(activations == 0);
  CHECK(loss == 0);
  // the actor's Adam is offloaded, so its GPU holds no gradient partition: the embedding's new gradient alone
  CHECK(term(training, "actor", "gradients") == 2'101'346'304LL);
}

TEST_CASE("host RAM is the most loaded node's: roles on GPUs of their own are placed on nodes, not summed", "[rlhf][scenario]") {
  // openrlhf-70b-ppo: actor 4 x 8, critic 2 x 8, reference 1 x 8, reward 1 x 8, vLLM 2 engines x 4 GPUs = 72 GPUs:
  // the 9 nodes of 8 GPUs the report ran on.
  const nlohmann::json j = job("openrlhf-70b-ppo.args");
  CHECK(j["gpus"] == 72);
  CHECK(j["nodes"] == 9);
  CHECK(j["gpus_per_node"] == 8);
  // Training: the critic (Llama-3-70B without lm_head: 70,553,706,496 - 128,256 x 8,192 = 69,503,033,344
  // parameters) runs ZeRO-3 over 16 GPUs with Adam offloaded: each rank keeps 1/16 of its bf16 gradients (2 B),
  // fp32 master weights and gradients (4 + 4 B) and Adam's moments (8 B) in host RAM = 18 B x 4,343,939,584.
  // Its 8 GPUs on one node are the heaviest any placement can put there; the actor's ranks (16 B of a smaller
  // share) and vLLM's swap are on other nodes. The old sum of every group on one node was 977.38 GB.
  // Each critic rank also keeps its replay buffer: 128 prompts x 4 samples / 16 ranks = 32 sequences of 58,368 B
  // (1024 + 1024 tokens: 16 x 2048 + 1024 + 24 x 1024; the step's batch test derives it).
  const std::int64_t critic_rank = 18 * (69'503'033'344LL / 16) + 32 * 58'368;
  CHECK(phase(j, "training")["per_node_host"]["total_bytes"].get<std::int64_t>() == 8 * critic_rank);
  // Nodes of 16 GPUs hold all 16 critic ranks.
  CHECK(phase(job("openrlhf-70b-ppo.args", {"--node-gpus", "16"}), "training")["per_node_host"]["total_bytes"].get<std::int64_t>() ==
        16 * critic_rank);
  // One group on one node (verl) is unchanged: every GPU of the node.
  CHECK(job("logic-rl-7b-grpo.yaml")["nodes"] == 1);
}

TEST_CASE("openrlhf-zero2-vs-zero3: ZeRO-2 keeps replicated 16-bit models, ZeRO-3 falls with the GPU count", "[rlhf][scenario]") {
  const auto peak = [](const std::string& stage, const std::string& gpus) {
    const nlohmann::json j = job("openrlhf-zero2-vs-zero3.args", {"zero_stage=" + stage, "actor_num_gpus_per_node=" + gpus,
                                                                  "ref_num_gpus_per_node=" + gpus, "critic_num_gpus_per_node=" + gpus,
                                                                  "reward_num_gpus_per_node=" + gpus});
    return phase(j, "rollout")["per_gpu"]["peak_bytes"].get<std::int64_t>();
  };
  const std::int64_t bf16_7b = 6'738'415'616LL * 2;
  // Resting, under ZeRO-2, the actor and reference GPUs keep two whole 16-bit models however many GPUs there are.
  CHECK(peak("2", "2") > peak("2", "8"));
  CHECK(peak("2", "8") >= 2 * bf16_7b);
  CHECK(peak("3", "8") < peak("3", "4"));
  CHECK(peak("3", "4") < peak("3", "2"));
  CHECK(peak("3", "8") < peak("2", "8"));
  // Term by term on 8 GPUs, P = 6,738,415,616: under ZeRO-2 the actor keeps its 16-bit weights whole (2P) beside its
  // fp32 master shard (4P / 8); the Adam moments are sharded (8P / 8); the reference runs unsharded (stage 0, 2P).
  // Under ZeRO-3 the reference is sharded too: 2P / 8.
  const std::int64_t P = 6'738'415'616;
  const nlohmann::json z2 = job("openrlhf-zero2-vs-zero3.args");
  CHECK(term(phase(z2, "rollout"), "actor", "weights") == 2 * P + 4 * P / 8);
  CHECK(term(phase(z2, "rollout"), "actor", "optimizer states") == 8 * P / 8);
  CHECK(term(phase(z2, "rollout"), "reference", "weights") == 2 * P);
  CHECK(term(phase(job("openrlhf-zero2-vs-zero3.args", {"zero_stage=3"}), "rollout"), "reference", "weights") == 2 * P / 8);
}

TEST_CASE("easyr1-vl-7b-grpo: host RAM over Ray's 0.95 with both offloads on, under it with them off (EasyR1 issue #59)", "[rlhf][scenario]") {
  const nlohmann::json bad = job("easyr1-vl-7b-grpo.yaml");
  CHECK_FALSE(bad["fits"].get<bool>());
  const nlohmann::json& worst = phase(bad, bad["first_failing_phase"].get<std::string>());
  CHECK(worst["per_gpu"]["fits"].get<bool>());
  CHECK_FALSE(worst["per_node_host"]["fits"].get<bool>());
  // The report: 726.33 GB of 760 GB. Modelled terms plus the stated unmodelled part give it back.
  CHECK(worst["per_node_host"]["total_bytes"].get<std::int64_t>() == 726'330'000'000LL);
  // Ray's threshold (memory_monitor.cc GetMemoryThreshold: (int64_t)(total * usage_threshold), a float product): float
  // 760e9 is 11,596,680 x 2^16 = 760,000,020,480; 0.95f is 15,938,355 x 2^-24; their product 722,000,010,396.09 rounds
  // to the float grid of 2^16 in [2^39, 2^40): 11,016,846 x 65,536 = 722,000,019,456 B, not 0.95 x 760e9.
  CHECK(worst["per_node_host"]["limit_bytes"].get<std::int64_t>() == 722'000'019'456LL);
  // The sleeping actor's fp32 parameters: 8,292,166,656 x 4 B / 8 per rank, x 8 ranks on the node.
  CHECK(term(worst, "actor", "weights (asleep", "host_bytes") == 8'292'166'656LL * 4);
  CHECK(term(worst, "actor", "optimizer states (asleep", "host_bytes") == 8'292'166'656LL * 8);
  const nlohmann::json fixed =
      job("easyr1-vl-7b-grpo.yaml", {"worker.actor.offload.offload_params=false", "worker.actor.offload.offload_optimizer=false"});
  CHECK(fixed["fits"].get<bool>());
}

TEST_CASE("easyr1-vl-7b-grpo: image tokens through the vision tower, freeze_vision_tower", "[rlhf][vision]") {
  // By default every prompt token may be an image token (the dataset drops prompts whose expanded image tokens pass
  // max_prompt_length, 1024): a packed update pass of 4 sequences holds 4096 image tokens = 16,384 patches, each kept
  // by the checkpointed tower as 32 block inputs x 2,560 B + the merger's 15,364 B + the inputs' 7,700 B = 104,984 B
  // (test_activations.cpp "the Qwen2.5-VL vision tower's saved tensors"); --image-tokens 0 leaves the tower out.
  const nlohmann::json images = job("easyr1-vl-7b-grpo.yaml");
  const nlohmann::json text = job("easyr1-vl-7b-grpo.yaml", {"--image-tokens", "0"});
  const std::string activations = "activations (4 sequences";
  CHECK(term(phase(images, "training"), "actor", activations) - term(phase(text, "training"), "actor", activations) == 16'384LL * 104'984);
  CHECK(std::find(images["config"]["assumed"].begin(), images["config"]["assumed"].end(),
                  "image tokens per sequence: the whole prompt (1024), the most the dataset lets through; pass --image-tokens for your images") !=
        images["config"]["assumed"].end());
  // Experience making (16 sequences a pass): the pixel values, 65,536 patches x 1176 x 4 B, and the tower's output,
  // 16,384 image tokens x 3584 x 2 B, alive through the decoder's forward.
  CHECK(term(phase(images, "experience"), "actor", "image inputs") == 65'536LL * 1176 * 4 + 16'384LL * 3584 * 2);
  // --image-tokens 100: 4 x 100 x 4 = 1,600 patches.
  const nlohmann::json some = job("easyr1-vl-7b-grpo.yaml", {"--image-tokens", "100"});
  CHECK(term(phase(some, "training"), "actor", activations) - term(phase(text, "training"), "actor", activations) == 1'600LL * 104'984);
  // freeze_vision_tower: the tower's 676,550,144 parameters keep no Adam moments (8 B, sharded over 8) or fp32
  // gradients (4 B over 8), and it saves nothing: only the pixel values, 16,384 x 1176 x 4 B, stay beside the decoder's.
  const nlohmann::json frozen = job("easyr1-vl-7b-grpo.yaml", {"worker.actor.model.freeze_vision_tower=true"});
  CHECK(term(phase(images, "training"), "actor", "resting_states") - term(phase(frozen, "training"), "actor", "resting_states") ==
        676'550'144LL * 8 / 8);
  CHECK(term(phase(images, "training"), "actor", "gradients") - term(phase(frozen, "training"), "actor", "gradients") == 676'550'144LL * 4 / 8);
  CHECK(term(phase(frozen, "training"), "actor", activations) - term(phase(text, "training"), "actor", activations) == 16'384LL * 1176 * 4);
  // A text critic beside a vision-language actor reads the images' tokens as text: only the actor runs the tower.
  const nlohmann::json ppo = job("verl-qwen2-7b-ppo.sh", {"actor_rollout_ref.model.path=Qwen/Qwen2.5-VL-7B-Instruct"});
  CHECK(ppo["phases"].size() == 3);
  CHECK(term(phase(ppo, "training"), "critic", "weights") == term(phase(job("verl-qwen2-7b-ppo.sh"), "training"), "critic", "weights"));
  // Misuse: more image tokens than the prompt holds, image tokens for a text model.
  CHECK(run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "--image-tokens", "2000"}).err ==
        "zeromem: the image tokens per sequence are part of its prompt, got 2000; pass 0 to the prompt length\n");
  // A mean sequence shorter than its images (EasyR1's prompt of 1024 tokens, all image tokens by default).
  CHECK(run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "--mean-tokens", "100"}).err ==
        "zeromem: the mean tokens per sequence (100) cannot be fewer than its 1024 image tokens (--image-tokens; default: the "
        "whole prompt); pass a mean of at least 1024 or fewer image tokens\n");
  CHECK(run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "--mean-tokens", "100", "--image-tokens", "64"}).code == 0);
  CHECK(run_cli({"job", jobs + "logic-rl-7b-grpo.yaml", "--image-tokens", "10"}).err ==
        "zeromem: --image-tokens: the actor has no vision tower (Qwen2-VL, Qwen2.5-VL); drop --image-tokens\n");
}

TEST_CASE("published example launches read without unknown keys and give a verdict", "[rlhf]") {
  for (const char* f : {"openrlhf-llama3-8b-ppo.args", "openrlhf-llama3-70b-ppo.args", "openrlhf-llama3-8b-hybrid.args",
                        "openrlhf-llama3-8b-hybrid-grouped.args", "verl-qwen2-7b-ppo.sh", "verl-qwen2-7b-ppo-sglang.sh"}) {
    INFO(f);
    const nlohmann::json j = job(f);
    CHECK(j["config"]["unknown"].empty());
    CHECK(j["phases"].size() == 3);
    for (const auto& p : j["phases"]) {
      CHECK(p["per_gpu"]["peak_bytes"].get<std::int64_t>() > 0);
      CHECK(p.contains("fits"));
    }
  }
  // OpenRLHF 0.6.0's hybrid engine: --colocate_all_models turns both sleep modes on, so the rollout holds no optimizer states.
  const nlohmann::json h = job("openrlhf-llama3-8b-hybrid.args");
  CHECK(phase(h, "rollout")["terms"].dump().find("optimizer states (asleep") != std::string::npos);
  // verl's example: the critic is a value model (PPO's gae), sharded with the actor over 8 GPUs.
  const nlohmann::json v = job("verl-qwen2-7b-ppo.sh");
  CHECK(phase(v, "training")["gpus"] == "actor+critic+reference+vLLM");
  // verl's SGLang example (verl 0.5.0, no KL term: no reference): the engine is sized last, after actor and critic are
  // resident (ray_trainer.py init_workers builds the rollout at the end), and the rollout phase holds SGLang's pools beside them.
  const nlohmann::json sg = job("verl-qwen2-7b-ppo-sglang.sh");
  CHECK(phase(sg, "rollout")["gpus"] == "actor+critic+SGLang");
  CHECK(term(phase(sg, "rollout"), "SGLang", "KV pool") > 0);
  CHECK(term(phase(sg, "rollout"), "critic", "optimizer states") > 0);
}

TEST_CASE("an OpenRLHF job with Pythia's GPT-NeoX layers sizes its experience pass (it stopped at a refusal)", "[rlhf]") {
  // ORZ's launch with EleutherAI/pythia-1b as actor and critic: 2 sequences of 512 + 512 tokens a pass, OpenRLHF's
  // log-probs (log_softmax of fp32 logits). The pass peaks at the output: token ids 8 x 2048 = 16,384 B beside the bf16
  // logits, their fp32 copy and its log-softmax, (2 + 4 + 4) x 2048 x 50,304 = 1,030,225,920 B (the layers' moment,
  // test_forward.cpp's 83,886,080 B layer among about 101 MB, is far below).
  const nlohmann::json j = job("orz-1.5b-ppo.args", {"pretrain=EleutherAI/pythia-1b", "critic_pretrain=EleutherAI/pythia-1b"});
  CHECK(term(phase(j, "experience"), "actor", "forward peak (2 sequences, 1024 x 2 tokens)") == 16'384 + 1'030'225'920LL);
}

TEST_CASE("an OpenRLHF job with StableLM's layers sizes its experience pass (it stopped at a refusal)", "[rlhf][hf]") {
  // ORZ's launch with stablelm-2-1_6b's config.json as actor and critic: 2 sequences of 512 + 512 tokens a pass, log-probs
  // of fp32 logits. The pass peaks at the output: token ids 8 x 2048 = 16,384 B beside the bf16 logits, their fp32 copy
  // and its log-softmax, (2 + 4 + 4) x 2048 x 100,352 = 2,055,208,960 B (test_forward.cpp writes out the layer's frames).
  const std::string config = std::string(ZEROMEM_FIXTURES_DIR) + "/hf/stablelm-2-1.6b.json";
  const nlohmann::json j = job("orz-1.5b-ppo.args", {"pretrain=" + config, "critic_pretrain=" + config});
  CHECK(term(phase(j, "experience"), "actor", "forward peak (2 sequences, 1024 x 2 tokens)") == 16'384 + 2'055'208'960LL);
}

TEST_CASE("an OpenRLHF job with OPT's layers sizes its experience pass (it stopped at a refusal)", "[rlhf][hf]") {
  // DeepSpeed-Chat's usual actor, facebook/opt-1.3b, in ORZ's launch: the pass peaks at the output, token ids 16,384 B
  // beside the bf16 logits, their fp32 copy and its log-softmax, (2 + 4 + 4) x 2048 x 50,272 = 1,029,570,560 B
  // (test_forward.cpp writes out the layer's frames and OPTDecoder's positions).
  const std::string config = std::string(ZEROMEM_FIXTURES_DIR) + "/hf/opt-1.3b.json";
  const nlohmann::json j = job("orz-1.5b-ppo.args", {"pretrain=" + config, "critic_pretrain=" + config});
  CHECK(term(phase(j, "experience"), "actor", "forward peak (2 sequences, 1024 x 2 tokens)") == 16'384 + 1'029'570'560LL);
}

TEST_CASE("OpenRLHF's grouped arguments (v0.10.2 on) read as their flat twins, with the defaults of their version", "[rlhf]") {
  // OpenRLHF's hybrid-engine example at v0.11.0: data.max_len 2048 caps prompt + response; train.dynamic_batch_enable
  // packs passes of at most train.max_tokens_per_gpu 16,384 tokens. Training: train.batch_size 128 over 8 ranks = 16
  // sequences per rank; 16,384 / 2,048 = 8 fit a pass, so 2 passes of 8. Experience: 1,024 x 1 samples, 8 per pass =
  // 128 passes (a multiple of the 8 ranks) of 8.
  const nlohmann::json g = job("openrlhf-llama3-8b-hybrid-grouped.args");
  CHECK(phase(g, "training")["terms"].dump().find("activations (8 sequences, 16384 x 1 tokens)") != std::string::npos);
  CHECK(phase(g, "experience")["terms"].dump().find("forward peak (8 sequences, 16384 x 1 tokens)") != std::string::npos);
  // A budget of 4,096 tokens: 2 per pass, 8 passes of 2 in training; 512 passes (a multiple of 8) of 2 in experience.
  const nlohmann::json small = job("openrlhf-llama3-8b-hybrid-grouped.args", {"train.max_tokens_per_gpu=4096"});
  CHECK(phase(small, "training")["terms"].dump().find("(2 sequences, 4096 x 1 tokens)") != std::string::npos);
  CHECK(phase(small, "experience")["terms"].dump().find("(2 sequences, 4096 x 1 tokens)") != std::string::npos);
  // A budget below one sequence still holds one (first fit opens a pass for it); the rollout budget follows it.
  CHECK(phase(job("openrlhf-llama3-8b-hybrid-grouped.args", {"train.max_tokens_per_gpu=1000"}), "experience")["terms"].dump().find(
            "forward peak (1 sequences, 2048 x 1 tokens)") != std::string::npos);
  // --explain speaks the launch's names: under dynamic batches the token budget, not the micro-batch, sets a pass.
  const zeromem::test::cli_result explained =
      run_cli({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "--gpu", "a100-40gb", "--explain"});
  CHECK(explained.code == 0);
  CHECK(explained.out.find("--train.max_tokens_per_gpu 8192 -> fits") != std::string::npos);
  // Offloading Adam fits, 0.51 GiB under the card, beside ZeRO-3's reduce bucket and the bucket's reduce-scatter copy
  // (5e8 x 2 B each; job.hpp deepspeed_buffers). At the actor's loss ZeRO-3 holds lm_head gathered (128,256 x 4,096 x
  // 2 B = 1.05 GB; zero3_retained_parameters: the final norm and the layers are released, lm_head's reuse passing 1e9),
  // and no gradient of it yet; DeepSpeed's estimator term counted 4 B x 525,336,576 there, 0.98 GiB more, and said
  // 0.47 GiB over.
  CHECK(explained.out.find("--ds.adam_offload -> fits") != std::string::npos);
  CHECK(explained.out.find("micro_train_batch_size") == std::string::npos);
  // More GPUs for a colocated job means more engines too, and as many more nodes for every model: OpenRLHF asserts
  // that the engines span the actor's GPUs and that the reference has the actor's shape. The fewest nodes that fit,
  // doubling: four times the job's; twice does not fit.
  CHECK(explained.out.find("--actor.num_nodes 4 --vllm.num_engines 16 --ref.num_nodes 4 --critic.num_nodes 4 --reward.num_nodes 4 -> fits") !=
        std::string::npos);
  CHECK(run_cli_json({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "--gpu", "a100-40gb", "actor.num_nodes=4", "vllm.num_engines=16",
                      "ref.num_nodes=4", "critic.num_nodes=4", "reward.num_nodes=4", "--json"})["fits"]
            .get<bool>());
  CHECK_FALSE(run_cli_json({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "--gpu", "a100-40gb", "actor.num_nodes=2", "vllm.num_engines=8",
                            "ref.num_nodes=2", "critic.num_nodes=2", "reward.num_nodes=2", "--json"})["fits"]
                  .get<bool>());
  const zeromem::test::cli_result ref_shape = run_cli({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "ref.num_gpus_per_node=4"});
  CHECK(ref_shape.code == 2);
  CHECK(ref_shape.err == "zeromem: with --train.colocate_all the ref model takes the actor's shape, which OpenRLHF asserts: --ref.num_nodes 1 x "
                         "--ref.num_gpus_per_node 4 against --actor.num_nodes 1 x --actor.num_gpus_per_node 8; give both the same\n");
  const zeromem::test::cli_result unequal = run_cli({"job", jobs + "openrlhf-llama3-8b-hybrid-grouped.args", "vllm.num_engines=2"});
  CHECK(unequal.code == 2);
  CHECK(unequal.err.find("--vllm.num_engines x --vllm.tensor_parallel_size = 4, --actor.num_nodes x --actor.num_gpus_per_node = 8") !=
        std::string::npos);
  // The same job in flat names (v0.10.1 spelled it so) reads the same, term for term.
  zeromem::job_settings s = settings("a100-80gb", "0.27.1");
  s.openrlhf_version = "0.10.1";
  const std::vector<std::string> common = {"--actor_num_nodes", "1", "--actor_num_gpus_per_node", "8", "--ref_num_nodes", "1",
                                           "--ref_num_gpus_per_node", "8", "--vllm_num_engines", "4", "--vllm_tensor_parallel_size", "2",
                                           "--colocate_all_models", "--pretrain", "meta-llama/Llama-3.1-8B", "--zero_stage", "3",
                                           "--max_len", "4096", "--max_new_tokens", "1024", "--gradient_checkpointing",
                                           "--use_dynamic_batch", "--train_max_tokens_per_gpu", "12288", "--train_batch_size", "64"};
  std::vector<std::string> grouped = {"--actor.num_nodes", "1", "--actor.num_gpus_per_node", "8", "--ref.num_nodes", "1",
                                      "--ref.num_gpus_per_node", "8", "--vllm.num_engines", "4", "--vllm.tensor_parallel_size", "2",
                                      "--train.colocate_all", "--actor.model_name_or_path", "meta-llama/Llama-3.1-8B", "--ds.zero_stage", "3",
                                      "--data.max_len", "4096", "--rollout.max_new_tokens", "1024", "--actor.gradient_checkpointing_enable",
                                      "--train.dynamic_batch_enable", "--train.max_tokens_per_gpu", "12288", "--train.batch_size", "64"};
  const zeromem::rlhf_estimate flat_estimate = zeromem::estimate_rlhf(zeromem::read_openrlhf(common, s).job);
  s.openrlhf_version.clear();
  const zeromem::job_reading grouped_reading = zeromem::read_openrlhf(grouped, s);
  CHECK(grouped_reading.unknown.empty());
  const zeromem::rlhf_estimate grouped_estimate = zeromem::estimate_rlhf(grouped_reading.job);
  REQUIRE(flat_estimate.phases.size() == grouped_estimate.phases.size());
  for (std::size_t i = 0; i < flat_estimate.phases.size(); ++i) {
    CHECK(flat_estimate.phases[i].memory.gpu_total() == grouped_estimate.phases[i].memory.gpu_total());
    CHECK(flat_estimate.phases[i].memory.host_total() == grouped_estimate.phases[i].memory.host_total());
  }
  // Dynamic batches of 12,288 tokens hold 3 sequences of 4,096: training 64 / 8 ranks = 8 per rank in 3 passes of
  // 3. Experience: 1,024 samples (v0.10 defaults: rollout batch 1,024, 1 sample) need 342 passes, which OpenRLHF
  // floors to a multiple of the 8 ranks, 336: passes of up to 4 sequences, above the budget.
  // Attention: flash-attn by default (--ds.attn_implementation flash_attention_2); sdpa is transformers' SDPA, except
  // that packing forces flash_attention_2 (train_ppo_ray.py).
  CHECK(grouped_reading.job.attention == zeromem::attention_kind::flash_attention_2);
  std::vector<std::string> sdpa = common;
  sdpa.erase(std::find(sdpa.begin(), sdpa.end(), "--use_dynamic_batch"));
  sdpa.insert(sdpa.end(), {"--attn_implementation", "sdpa"});
  s.openrlhf_version = "0.10.1";
  CHECK(zeromem::read_openrlhf(sdpa, s).job.attention == zeromem::attention_kind::flash);
  CHECK(zeromem::read_openrlhf(common, s).job.attention == zeromem::attention_kind::flash_attention_2);
  s.openrlhf_version.clear();
  CHECK(grouped_reading.job.actor.train_micro_batch == 3);
  CHECK(grouped_reading.job.actor.forward_micro_batch == 4);
  CHECK(grouped_reading.job.packing);
  // v0.10.x defaults (their train_ppo_ray.py): vLLM at 0.95, bf16, max_len 4096 for vLLM.
  CHECK(grouped_reading.job.rollout.gpu_memory_utilization == 0.95);
  CHECK(grouped_reading.job.actor.recipe == zeromem::precision::mixed_bf16);
  CHECK(zeromem::detail::longest_sequence(grouped_reading.job) == 4096);
  // No reference model without a KL penalty (algo.kl.init_coef 0; train_ppo_ray.py creates none).
  grouped.insert(grouped.end(), {"--algo.kl.init_coef", "0"});
  CHECK_FALSE(zeromem::read_openrlhf(grouped, s).job.reference.present);
  // overlap_comm reaches DeepSpeed's config only with the flag (deepspeed_utils.py get_train_ds_config); without it
  // DeepSpeed's default holds: at stage 2 off, one 5e8-element reduce bucket of 2 B elements, 1e9 B, and two with the
  // flag. Stage 3 holds its bucket, the bucket's reduce-scatter copy and the 5e7 prefetch bucket, 2.1e9 B.
  CHECK(grouped_reading.job.overheads.overlap_comm == zeromem::overlap_comm_setting::deepspeed_default);
  CHECK(zeromem::deepspeed_buffers(3, grouped_reading.job.overheads).count() == 2'100'000'000);
  CHECK(zeromem::deepspeed_buffers(2, grouped_reading.job.overheads).count() == 1'000'000'000);
  std::vector<std::string> overlapped = grouped;
  overlapped.push_back("--ds.overlap_comm");
  const zeromem::runtime_overheads on = zeromem::read_openrlhf(overlapped, s).job.overheads;
  CHECK(on.overlap_comm == zeromem::overlap_comm_setting::on);
  CHECK(zeromem::deepspeed_buffers(2, on).count() == 2'000'000'000);
  // A flat launch without a version takes v0.6.0's defaults and says which it took.
  const zeromem::job_reading old = zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--bf16"}, s);
  CHECK(old.job.actor.train_micro_batch == 4);
  CHECK(old.job.actor.forward_micro_batch == 8);
  CHECK(zeromem::detail::longest_sequence(old.job) == 2048);
  CHECK(nlohmann::json(old.assumed).dump().find("--micro_train_batch_size 4 (OpenRLHF's default before 0.10.0") != std::string::npos);
  // Ring attention runs on packed samples only: from v0.8.4 ring_attn_size > 1 turns packing on (train_ppo_ray.py);
  // before, an unpacked batch takes the plain path and every GPU holds whole sequences (models/actor.py).
  std::vector<std::string> ring = grouped;
  ring.insert(ring.end(), {"--ds.ring_attn_size", "2"});
  const zeromem::job_reading ring_new = zeromem::read_openrlhf(ring, s);
  CHECK(ring_new.job.packing);
  CHECK(ring_new.job.ulysses == 2);
  s.openrlhf_version = "0.6.0";
  const zeromem::job_reading ring_old =
      zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--bf16", "--ring_attn_size", "2"}, s);
  CHECK_FALSE(ring_old.job.packing);
  CHECK(ring_old.job.ulysses == 1);
  s.openrlhf_version.clear();
  // One launch, one kind of names; errors name the key and its grouped spelling.
  std::vector<std::string> mixed = grouped;
  mixed.insert(mixed.end(), {"--zero_stage", "2"});
  CHECK_THROWS_WITH(zeromem::read_openrlhf(mixed, s), Catch::Contains("--zero_stage") && Catch::Contains("--ds.zero_stage"));
  s.openrlhf_version = "0.9.0";
  CHECK_THROWS_WITH(zeromem::read_openrlhf(grouped, s), Catch::Contains("v0.10.2"));
  s.openrlhf_version.clear();
  for (const std::vector<std::string>& extra : std::vector<std::vector<std::string>>{
           {"--ds.param_dtype", "fp8"}, {"--actor.optim", "muon"}, {"--train.async_enable"}, {"--ds.attn_implementation", "eager"},
           {"--ds.tensor_parallel_size", "2"}, {"--algo.kl.init_coef", "-1"}}) {
    std::vector<std::string> bad = grouped;
    bad.insert(bad.end(), extra.begin(), extra.end());
    CHECK_THROWS_WITH(zeromem::read_openrlhf(bad, s), Catch::Contains(extra.front().substr(2)));
  }
}

TEST_CASE("the trained models' optimizer kernels by framework: DeepSpeed's FusedAdam, EasyR1's fused, verl's foreach", "[rlhf]") {
  zeromem::job_settings s = settings("a100-80gb", "0.8.5");
  s.openrlhf_version = "0.6.1";
  // OpenRLHF hands AdamW to DeepSpeed, which builds FusedAdam (in place).
  CHECK(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--bf16"}, s).job.step.optimizer == zeromem::optimizer_impl::fused);
  s.openrlhf_version.clear();
  // EasyR1: optim.strategy adamw is torch.optim.AdamW(fused=True); AnyPrecisionAdamW (adamw_bf16) is refused.
  using keys = std::vector<std::pair<std::string, std::string>>;
  const keys easyr1{{"worker.actor.model.model_path", "Qwen/Qwen2.5-7B-Instruct"}, {"worker.rollout.n", "5"}};
  CHECK(zeromem::read_verl(easyr1, s).job.step.optimizer == zeromem::optimizer_impl::fused);
  keys bf16_states = easyr1;
  bf16_states.push_back({"worker.actor.optim.strategy", "adamw_bf16"});
  CHECK_THROWS_WITH(zeromem::read_verl(bf16_states, s), Catch::Contains("worker.actor.optim.strategy") && Catch::Contains("use adamw"));
  // verl: torch.optim.AdamW with PyTorch's default on CUDA, foreach.
  const keys verl{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"}, {"actor_rollout_ref.rollout.n", "5"}};
  CHECK(zeromem::read_verl(verl, s).job.step.optimizer == zeromem::optimizer_impl::foreach_kernels);
}

TEST_CASE("job --explain names a change that makes every phase fit", "[rlhf]") {
  const nlohmann::json j = job("orz-1.5b-ppo.args", {"--explain"});
  bool utilization = false;
  for (const auto& f : j["fixes"])
    if (f["change"].get<std::string>().rfind("--vllm_gpu_memory_utilization", 0) == 0) utilization = f["fits"].get<bool>();
  CHECK(utilization);
  // More GPUs: twice the nodes (and engines, every model colocated; every model's nodes with the actor's, which
  // OpenRLHF asserts for the reference) would give train batch 8 to micro 2 x 8 GPUs, which DeepSpeed refuses; the
  // same batch in micro-batches of 1 is offered instead.
  std::vector<std::string> changes;
  for (const auto& f : j["fixes"]) changes.push_back(f["change"].get<std::string>());
  CHECK(std::find(changes.begin(), changes.end(), "--actor_num_nodes 2 --vllm_num_engines 8 --ref_num_nodes 2 --critic_num_nodes 2 --micro_train_batch_size 1") !=
        changes.end());
  CHECK(run_cli({"job", jobs + "orz-1.5b-ppo.args", "actor_num_nodes=2", "vllm_num_engines=8", "ref_num_nodes=2", "critic_num_nodes=2"}).err.find("which DeepSpeed asserts") !=
        std::string::npos);
  // A micro-batch of 1 cannot be halved: the batch doubles (4 = 1 x 4 GPUs x 1 pass; 8 GPUs take 8).
  const nlohmann::json micro1 = job("orz-1.5b-ppo.args", {"micro_train_batch_size=1", "train_batch_size=4", "--explain"});
  bool doubled = false;
  for (const auto& f : micro1["fixes"])
    doubled |= f["change"].get<std::string>() == "--actor_num_nodes 2 --vllm_num_engines 8 --ref_num_nodes 2 --critic_num_nodes 2 --train_batch_size 8";
  CHECK(doubled);
  const zeromem::test::cli_result text = run_cli({"job", jobs + "orz-1.5b-ppo.args", "--explain"});
  CHECK(text.out.find("Explain") != std::string::npos);
  // The fewest nodes, doubling: Logic-RL's GRPO on 40 GB A100s fits on four nodes, not on two.
  const nlohmann::json logic = job("logic-rl-7b-grpo.yaml", {"--gpu", "a100-40gb", "--explain"});
  bool four = false;
  for (const auto& f : logic["fixes"]) four |= f["change"] == "trainer.nnodes=4" && f["fits"].get<bool>();
  CHECK(four);
  CHECK_FALSE(job("logic-rl-7b-grpo.yaml", {"--gpu", "a100-40gb", "trainer.nnodes=2"})["fits"].get<bool>());
  CHECK(job("logic-rl-7b-grpo.yaml", {"--gpu", "a100-40gb", "trainer.nnodes=4"})["fits"].get<bool>());
  // Where no number of nodes fits, twice them is shown, said not to: under DeepSpeed 0.16.x the 70B critic's backward
  // keeps its whole 16-bit model gathered on every GPU, however many there are: 2 B x 69.5e9 = 139.0 GB (Llama-3-70B's
  // 70.55e9 parameters less its 1.05e9 lm_head, 128,256 x 8,192), above the 80 GB card alone.
  const nlohmann::json seventy = job("openrlhf-70b-ppo.args", {"--explain"});
  bool twice = false;
  for (const auto& f : seventy["fixes"])
    twice |= f["change"] == "--actor_num_nodes 8 --ref_num_nodes 2 --critic_num_nodes 4 --reward_num_nodes 2" && !f["fits"].get<bool>();
  CHECK(twice);
}

TEST_CASE("job --explain names two changes that fit together where none fits alone", "[rlhf]") {
  // OpenRLHF's Llama-3-8B example on 40 GB A100s breaks in experience making (32 packed sequences a forward) and in
  // training (the update's micro-batch of 16): each phase's micro-batch alone leaves the other breaking.
  const nlohmann::json j = job("openrlhf-llama3-8b-ppo.args", {"--gpu", "a100-40gb", "--explain"});
  for (const auto& f : j["fixes"]) CHECK((f.contains("together") || !f["fits"].get<bool>()));
  const nlohmann::json& pair = j["fixes"].back();
  REQUIRE(pair.contains("together"));
  CHECK(pair["together"] == nlohmann::json::array({"--micro_train_batch_size 4", "--micro_rollout_batch_size 8"}));
  CHECK(pair["change"] == "--micro_train_batch_size 4 --micro_rollout_batch_size 8");
  CHECK(pair["fits"].get<bool>());
  const auto fits = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"--gpu", "a100-40gb"});
    return job("openrlhf-llama3-8b-ppo.args", overrides)["fits"].get<bool>();
  };
  CHECK(fits({"micro_train_batch_size=4", "micro_rollout_batch_size=8"}));
  CHECK_FALSE(fits({"micro_train_batch_size=4"}));
  CHECK_FALSE(fits({"micro_rollout_batch_size=8"}));
  // The mildest first: the update's micro-batch of 8 fits with no forward size the list offers.
  CHECK_FALSE(fits({"micro_train_batch_size=8", "micro_rollout_batch_size=1"}));
  const zeromem::test::cli_result text = run_cli({"job", jobs + "openrlhf-llama3-8b-ppo.args", "--gpu", "a100-40gb", "--explain"});
  CHECK(text.out.find("  no change fits alone; two that fit together: --micro_train_batch_size 4 and --micro_rollout_batch_size 8 -> fits\n") !=
        std::string::npos);
  // The rollout's tensor parallelism, on the same GPUs: OpenRLHF's Llama-3-70B PPO on 48 GB L40S cards holds 65.71 GiB
  // of vLLM weights a GPU at tp 2 (no room for a KV cache) and, under DeepSpeed 0.16.x, a critic whose backward keeps
  // its whole model. tp 4 in 2 engines (the same 8 GPUs) and DeepSpeed 0.17.0 fit together; neither alone.
  const nlohmann::json seventy = job("openrlhf-llama3-70b-ppo.args", {"--gpu", "l40s", "--explain"});
  CHECK(seventy["first_failing_phase"] == "rollout");
  const nlohmann::json& wider = seventy["fixes"].back();
  REQUIRE(wider.contains("together"));
  CHECK(wider["together"] == nlohmann::json::array({"--deepspeed-version 0.17.0", "--vllm_tensor_parallel_size 4 --vllm_num_engines 2"}));
  const auto seventy_fits = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"--gpu", "l40s"});
    return job("openrlhf-llama3-70b-ppo.args", overrides)["fits"].get<bool>();
  };
  CHECK(seventy_fits({"--deepspeed-version", "0.17.0", "vllm_tensor_parallel_size=4", "vllm_num_engines=2"}));
  CHECK_FALSE(seventy_fits({"--deepspeed-version", "0.17.0"}));
  CHECK_FALSE(seventy_fits({"vllm_tensor_parallel_size=4", "vllm_num_engines=2"}));
  // Where a change fits alone no pair is looked for.
  const nlohmann::json orz = job("orz-1.5b-ppo.args", {"--explain"});
  for (const auto& f : orz["fixes"]) CHECK_FALSE(f.contains("together"));
}

TEST_CASE("job --explain names three changes that fit together where no change or pair does", "[rlhf]") {
  // OpenRLHF's Llama-3-70B PPO on 40 GB A100s breaks three ways, each mended by one change only:
  // - the rollout: tp 2 leaves vLLM no room for a KV cache (tp 4 in 2 engines does, on the same 8 GPUs);
  // - training: under DeepSpeed 0.16.x the critic's backward keeps its whole model gathered (0.17.0 releases it);
  // - experience: the reference's weights on 4 GPUs, 2 B x 70.55e9 / 4 = 35.28e9 B = 32.85 GiB, leave too little for a
  //   forward of 2 packed sequences of 2,048 tokens (4,096 a pass; 2,048 with --micro_rollout_batch_size 1).
  const nlohmann::json j = job("openrlhf-llama3-70b-ppo.args", {"--gpu", "a100-40gb", "--explain"});
  for (const auto& f : j["fixes"]) CHECK((f.contains("together") || !f["fits"].get<bool>()));
  const nlohmann::json& three = j["fixes"].back();
  REQUIRE(three.contains("together"));
  CHECK(three["together"] ==
        nlohmann::json::array({"--deepspeed-version 0.17.0", "--vllm_tensor_parallel_size 4 --vllm_num_engines 2", "--micro_rollout_batch_size 1"}));
  CHECK(three["fits"].get<bool>());
  const auto fits = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"--gpu", "a100-40gb"});
    return job("openrlhf-llama3-70b-ppo.args", overrides)["fits"].get<bool>();
  };
  const std::vector<std::string> version{"--deepspeed-version", "0.17.0"}, wider{"vllm_tensor_parallel_size=4", "vllm_num_engines=2"},
      forward{"micro_rollout_batch_size=1"};
  const auto joined = [](std::vector<std::string> x, const std::vector<std::string>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  CHECK(fits(joined(joined(version, wider), forward)));
  CHECK_FALSE(fits(joined(version, wider)));
  CHECK_FALSE(fits(joined(version, forward)));
  CHECK_FALSE(fits(joined(wider, forward)));
  const zeromem::test::cli_result text = run_cli({"job", jobs + "openrlhf-llama3-70b-ppo.args", "--gpu", "a100-40gb", "--explain"});
  CHECK(text.out.find("  no change or pair fits; three that fit together: --deepspeed-version 0.17.0, --vllm_tensor_parallel_size 4 "
                      "--vllm_num_engines 2 and --micro_rollout_batch_size 1 -> fits\n") != std::string::npos);
  // Where nothing up to three fits (the 8B example's responses of 131,072 tokens on L40S cards), the text says so.
  const zeromem::test::cli_result none =
      run_cli({"job", jobs + "openrlhf-llama3-8b-ppo.args", "--gpu", "l40s", "--explain", "generate_max_len=131072"});
  const std::size_t explained = none.out.find("\nExplain:");
  REQUIRE(explained != std::string::npos);
  CHECK(none.out.find("-> fits", explained) == std::string::npos);
  CHECK(none.out.find("  none fits alone, nor two together, nor three (up to 4096 sets of three tried)\n") != std::string::npos);
}

TEST_CASE("job --explain halves verl's critic update where training breaks", "[rlhf]") {
  const auto fits = [](const std::vector<std::string>& overrides) {
    std::vector<std::string> o{"--gpu", "h100-80gb"};
    o.insert(o.end(), overrides.begin(), overrides.end());
    return job("verl-qwen2-7b-ppo.sh", o)["fits"].get<bool>();
  };
  // A global critic.ppo_micro_batch_size of 256 over the critic's 8 ranks asks 32 sequences a GPU, the GPU's whole
  // share (32 x 1536 = 49,152 tokens a pass); the actor's micro-batch does not touch it. Halved: 128, 64 break, 32 (4
  // a GPU) fits.
  const nlohmann::json global = job("verl-qwen2-7b-ppo.sh", {"--gpu", "h100-80gb", "critic.ppo_micro_batch_size=256", "--explain"});
  CHECK(global["first_failing_phase"] == "training");
  CHECK(term(phase(global, "training"), "critic", "activations (32 sequences, 49152 x 1 tokens)") > 0);
  CHECK(offered(global, "critic.") == shown{"critic.ppo_micro_batch_size=32", true});
  CHECK(fits({"critic.ppo_micro_batch_size=32"}));
  CHECK_FALSE(fits({"critic.ppo_micro_batch_size=64"}));
  // Per GPU (32 -> 4), and the token budget under dynamic batches (131,072 -> 4,096; 8,192 breaks).
  CHECK(offered(job("verl-qwen2-7b-ppo.sh", {"--gpu", "h100-80gb", "critic.ppo_micro_batch_size=null", "critic.ppo_micro_batch_size_per_gpu=32",
                                             "--explain"}),
                "critic.") == shown{"critic.ppo_micro_batch_size_per_gpu=4", true});
  const std::vector<std::string> dynamic{"actor_rollout_ref.actor.use_dynamic_bsz=True", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=3072"};
  const auto with = [&](const std::string& budget) {
    std::vector<std::string> o = dynamic;
    o.push_back(budget);
    return o;
  };
  std::vector<std::string> asked = with("critic.ppo_max_token_len_per_gpu=131072");
  asked.insert(asked.begin(), {"--gpu", "h100-80gb"});
  asked.push_back("--explain");
  CHECK(offered(job("verl-qwen2-7b-ppo.sh", asked), "critic.") == shown{"critic.ppo_max_token_len_per_gpu=4096", true});
  CHECK(fits(with("critic.ppo_max_token_len_per_gpu=4096")));
  CHECK_FALSE(fits(with("critic.ppo_max_token_len_per_gpu=8192")));
}

TEST_CASE("job --explain halves experience making's forward passes where that phase breaks", "[rlhf]") {
  // OpenRLHF's own Llama-3-8B example breaks in experience making: its forwards take --micro_rollout_batch_size 32
  // packed sequences of 1024 prompt + 1024 response tokens, 65,536 tokens a pass. Half of them fit.
  const nlohmann::json openrlhf = job("openrlhf-llama3-8b-ppo.args", {"--explain"});
  CHECK(openrlhf["first_failing_phase"] == "experience");
  CHECK(term(phase(openrlhf, "experience"), "actor", "forward peak (32 sequences, 65536 x 1 tokens)") > 0);
  CHECK(offered(openrlhf, "--micro_rollout_batch_size") == shown{"--micro_rollout_batch_size 16", true});
  const nlohmann::json halved = job("openrlhf-llama3-8b-ppo.args", {"micro_rollout_batch_size=16"});
  CHECK(halved["fits"].get<bool>());
  // Its most loaded GPU in experience making is now a vLLM engine's (idle, 71.41 GiB), not the actor's.
  CHECK(phase(halved, "experience")["activity"] == "idle");
  CHECK(phase(halved, "experience")["per_gpu"]["peak_bytes"].get<std::int64_t>() <
        phase(openrlhf, "experience")["per_gpu"]["peak_bytes"].get<std::int64_t>());
  // With --use_dynamic_batch the forwards take --rollout_max_tokens_per_gpu tokens a pass: 131,072 (64 sequences of
  // 2048) break, 65,536 still do (the term above), 32,768 fit.
  const nlohmann::json openrlhf_dynamic = job("openrlhf-llama3-8b-ppo.args", {"use_dynamic_batch=", "rollout_max_tokens_per_gpu=131072", "--explain"});
  CHECK(term(phase(openrlhf_dynamic, "experience"), "actor", "forward peak (64 sequences, 131072 x 1 tokens)") > 0);
  CHECK(offered(openrlhf_dynamic, "--rollout_max_tokens_per_gpu") == shown{"--rollout_max_tokens_per_gpu 32768", true});
  // verl: the rollout's and reference's log-prob forwards and the critic's value forward, halved together in the keys
  // the config uses. Global keys (divided by the 8 ranks), 1024 -> 512:
  const std::string rollout = "actor_rollout_ref.rollout.", ref = "actor_rollout_ref.ref.";
  const nlohmann::json global = job("verl-qwen2-7b-ppo.sh", {rollout + "log_prob_micro_batch_size=1024", ref + "log_prob_micro_batch_size=1024",
                                                             "critic.forward_micro_batch_size=1024", "--explain"});
  CHECK(global["first_failing_phase"] == "experience");
  CHECK(offered(global, rollout + "log_prob") ==
        shown{rollout + "log_prob_micro_batch_size=512 " + ref + "log_prob_micro_batch_size=512 critic.forward_micro_batch_size=512", true});
  CHECK(job("verl-qwen2-7b-ppo.sh", {rollout + "log_prob_micro_batch_size=512", ref + "log_prob_micro_batch_size=512", "critic.forward_micro_batch_size=512"})
            ["fits"]
                .get<bool>());
  // Per GPU (the global keys nulled), 128 -> 64 sequences a GPU:
  const nlohmann::json per_gpu =
      job("verl-qwen2-7b-ppo.sh", {rollout + "log_prob_micro_batch_size=null", rollout + "log_prob_micro_batch_size_per_gpu=128",
                                   ref + "log_prob_micro_batch_size=null", ref + "log_prob_micro_batch_size_per_gpu=128",
                                   "critic.forward_micro_batch_size_per_gpu=128", "--explain"});
  CHECK(offered(per_gpu, rollout + "log_prob") == shown{rollout + "log_prob_micro_batch_size_per_gpu=64 " + ref +
                                                             "log_prob_micro_batch_size_per_gpu=64 critic.forward_micro_batch_size_per_gpu=64",
                                                         true});
  // Dynamic batches: the token budgets, down to one sequence (1024 + 512 tokens) where nothing smaller makes every
  // phase fit (the critic's update still breaks):
  const nlohmann::json dynamic =
      job("verl-qwen2-7b-ppo.sh", {"actor_rollout_ref.actor.use_dynamic_bsz=True", rollout + "log_prob_max_token_len_per_gpu=262144",
                                   ref + "log_prob_max_token_len_per_gpu=262144", "critic.forward_max_token_len_per_gpu=262144", "--explain"});
  CHECK(offered(dynamic, rollout + "log_prob") == shown{rollout + "log_prob_max_token_len_per_gpu=1536 " + ref +
                                                             "log_prob_max_token_len_per_gpu=1536 critic.forward_max_token_len_per_gpu=1536",
                                                         false});
  // The reward model's forward (RewardModelWorker.compute_rm_score) in its own key: 256 sequences a GPU asked, 128 the
  // GPU's share of the batch, 128 x (1024 + 3072) tokens a pass break experience making; with 64 it fits. Without the
  // reward model's key the same halving does not.
  const std::vector<std::string> reward{"reward_model.enable=True", "reward_model.model.path=Qwen/Qwen2.5-7B",
                                        "reward_model.micro_batch_size_per_gpu=256", "data.max_response_length=3072",
                                        "actor_rollout_ref.actor.ppo_micro_batch_size=4", "critic.ppo_micro_batch_size=4", "--gpu", "h100-80gb"};
  const auto with = [](std::vector<std::string> x, const std::vector<std::string>& y) {
    x.insert(x.end(), y.begin(), y.end());
    return x;
  };
  const nlohmann::json rewarded = job("verl-qwen2-7b-ppo.sh", with(reward, {"--explain"}));
  CHECK(rewarded["first_failing_phase"] == "experience");
  CHECK(term(phase(rewarded, "experience"), "reward", "forward peak (128 sequences, 4096 x 128 tokens)") > 0);
  const std::string halves = rollout + "log_prob_micro_batch_size=8 " + ref + "log_prob_micro_batch_size=8 critic.forward_micro_batch_size_per_gpu=1";
  CHECK(offered(rewarded, rollout + "log_prob") == shown{halves + " reward_model.micro_batch_size_per_gpu=64", true});
  CHECK(job("verl-qwen2-7b-ppo.sh", with(reward, {rollout + "log_prob_micro_batch_size=8", ref + "log_prob_micro_batch_size=8",
                                                  "critic.forward_micro_batch_size_per_gpu=1", "reward_model.micro_batch_size_per_gpu=64"}))["fits"]
            .get<bool>());
  CHECK_FALSE(job("verl-qwen2-7b-ppo.sh", with(reward, {rollout + "log_prob_micro_batch_size=8", ref + "log_prob_micro_batch_size=8",
                                                        "critic.forward_micro_batch_size_per_gpu=1"}))["fits"]
                  .get<bool>());
  // EasyR1's _for_experience key: the Qwen2.5-VL job breaks in experience making on host RAM, which no forward's size
  // changes; halved down to one sequence, it is offered and said not to fit.
  const std::string experience = "worker.actor.micro_batch_size_per_device_for_experience";
  CHECK(offered(job("easyr1-vl-7b-grpo.yaml", {"--explain"}), experience) == shown{experience + "=1", false});
  // Where experience making fits, its sizes are not offered: ORZ breaks in the rollout, Logic-RL in training.
  CHECK(offered(job("orz-1.5b-ppo.args", {"--explain"}), "--micro_rollout_batch_size").first.empty());
  CHECK(offered(job("logic-rl-7b-grpo.yaml", {"--explain"}), rollout + "log_prob").first.empty());
}

TEST_CASE("vLLM's CUDA graphs in a job: above the budget before 0.21, inside it from 0.21", "[rlhf][vllm]") {
  // openrlhf-llama3-8b-ppo (vLLM 0.7.2, enforce_eager off): the rollout's peak is a vLLM GPU; graphs given as vLLM
  // logs them add to it one for one.
  const nlohmann::json base = job("openrlhf-llama3-8b-ppo.args");
  const nlohmann::json above = job("openrlhf-llama3-8b-ppo.args", {"--vllm-cuda-graphs", "2464MiB"});
  const auto peak = [](const nlohmann::json& j) { return phase(j, "rollout")["per_gpu"]["peak_bytes"].get<std::int64_t>(); };
  CHECK(peak(above) - peak(base) == 2464LL << 20);
  CHECK(term(phase(above, "rollout"), "vLLM", "CUDA graphs (above the budget)") == 2464LL << 20);
  // The same launch on vLLM 0.21.0: the estimate comes out of the KV cache, the GPU's peak stays within a block.
  const nlohmann::json in21 = job("openrlhf-llama3-8b-ppo.args", {"--vllm-version", "0.21.0"});
  const nlohmann::json inside = job("openrlhf-llama3-8b-ppo.args", {"--vllm-version", "0.21.0", "--vllm-cuda-graphs", "2464MiB"});
  CHECK(term(phase(inside, "rollout"), "vLLM", "CUDA graphs (estimate, in the budget)") == 2464LL << 20);
  const std::int64_t kv_drop = term(phase(in21, "rollout"), "vLLM", "KV cache") - term(phase(inside, "rollout"), "vLLM", "KV cache");
  // Llama-3-8B blocks: 16 tokens x 32 layers x 2 x 8 KV heads / 2 ranks x 128 x 2 B = 1,048,576 B; 2464 MiB = 2464 blocks.
  CHECK(kv_drop == 2464LL << 20);
  CHECK(peak(inside) == peak(in21));
  // A sleeping engine keeps its graphs: sleep releases the weights' and KV cache's pools only (vLLM PR #56373). verl's
  // engine sleeps (level 1) through experience and training: both phases rise by the graphs, one for one.
  const std::vector<std::string> graphs_on{"actor_rollout_ref.rollout.enforce_eager=False"};
  std::vector<std::string> graphs_given = graphs_on;
  graphs_given.insert(graphs_given.end(), {"--vllm-cuda-graphs", "1GiB"});
  const nlohmann::json awake_only = job("verl-qwen2.5-3b-grpo-lora.sh", graphs_on);
  const nlohmann::json kept = job("verl-qwen2.5-3b-grpo-lora.sh", graphs_given);
  for (const char* name : {"experience", "training"}) {
    INFO(name);
    CHECK(phase(kept, name)["per_gpu"]["peak_bytes"].get<std::int64_t>() - phase(awake_only, name)["per_gpu"]["peak_bytes"].get<std::int64_t>() ==
          1LL << 30);
    CHECK(term(phase(kept, name), "vLLM", "CUDA graphs (kept while asleep)") == 1LL << 30);
  }
  CHECK(awake_only["notes"].dump().find("stay on the GPU while the engine sleeps") != std::string::npos);
  // Given graphs contradict enforce_eager, and SGLang has none to give.
  const zeromem::test::cli_result eager = run_cli({"job", jobs + "orz-1.5b-ppo.args", "--vllm-cuda-graphs", "1GiB"});
  CHECK(eager.code == 2);
  CHECK(eager.err.find("enforce_eager") != std::string::npos);
  const zeromem::test::cli_result sglang = run_cli({"job", jobs + "verl-qwen2-7b-ppo-sglang.sh", "--vllm-cuda-graphs", "1GiB"});
  CHECK(sglang.code == 2);
  CHECK(sglang.err.find("SGLang") != std::string::npos);
}

TEST_CASE("verl with LoRA: adapters train over a frozen fp32 base, no reference model, vLLM's slots, the weight sync", "[rlhf][lora]") {
  // verl's run_qwen2_5-3b_gsm8k_grpo_lora.sh: Qwen2.5-3B (3,085,938,688 parameters), rank 64 on all linear layers,
  // FSDP over 2 GPUs. Adapters per layer: q 64 x (2048 + 2048) = 262,144, k and v 64 x (2048 + 256) = 147,456 each,
  // o 262,144, gate, up and down 64 x (2048 + 11008) = 835,584 each: 3,325,952; x 36 layers = 119,734,272.
  const nlohmann::json j = job("verl-qwen2.5-3b-grpo-lora.sh");
  CHECK(j["config"]["unknown"].empty());
  const nlohmann::json& rollout = phase(j, "rollout");
  // The actor's resting weights on each GPU: the fp32 base and fp32 adapters, half each: 4 x (3,085,938,688 +
  // 119,734,272) / 2. Adam keeps 8 B per adapter parameter only: 8 x 119,734,272 / 2.
  CHECK(term(rollout, "actor", "weights") == 6'411'345'920LL);
  CHECK(term(rollout, "actor", "optimizer states") == 478'937'088LL);
  // vLLM: max_lora_rank 64 slots, bf16: 76,382,208 elements x 2 B (test_inference derives the elements).
  CHECK(term(rollout, "vLLM", "LoRA slots") == 152'764'416LL);
  // The reference is the actor without adapters (ref_in_actor): no reference model anywhere.
  for (const auto& p : j["phases"])
    for (const auto& t : p["terms"]) CHECK(t["role"] != "reference");
  CHECK(j["config"]["assumed"].dump().find("ref_in_actor") != std::string::npos);

  // The sync moment (library): the actor loaded, plus what FSDP gathers in fp32.
  zeromem::job_settings s = settings("h100-80gb", "0.9.1");
  const auto read = [&](const std::string& layered) {
    return zeromem::read_verl({{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-3B-Instruct"}, {"trainer.n_gpus_per_node", "2"},
                               {"algorithm.adv_estimator", "grpo"}, {"actor_rollout_ref.model.lora_rank", "64"},
                               {"actor_rollout_ref.rollout.load_format", "safetensors"},
                               {"actor_rollout_ref.rollout.layered_summon", layered}}, s).job;
  };
  const auto gathered = [](const zeromem::rlhf_job& rj) {
    zeromem::job_breakdown b{};
    zeromem::detail::lora_sync(zeromem::detail::group_view{&b}, "actor", rj.actor, rj);
    for (const auto& t : b.terms)
      if (t.term.rfind("parameters gathered", 0) == 0) return t.gpu.count();
    return std::int64_t{-1};
  };
  // summon_full_params of the whole model: 4 x (3,085,938,688 + 119,734,272) on each GPU.
  CHECK(gathered(read("False")) == 12'822'691'840LL);
  // layered_summon: the largest unit, the tied embedding (311,164,928 > a layer's 77,076,992 + 3,325,952), in fp32.
  CHECK(gathered(read("True")) == 4 * 311'164'928LL);
  // load_format dummy: the first sync copies the fp32 base to host RAM in each process: 4 x 3,085,938,688 x 2 GPUs.
  const nlohmann::json dummy = job("verl-qwen2.5-3b-grpo-lora.sh", {"actor_rollout_ref.rollout.layered_summon=False",
                                                                    "actor_rollout_ref.rollout.load_format=dummy"});
  CHECK(term(phase(dummy, "rollout"), "actor", "base copied to host RAM", "host_bytes") == 2 * 12'343'754'752LL);
  // verl v0.6.0 with vLLM >= 0.8.5 sleeps at level 2 unless layered_summon (third_party/vllm VLLM_SLEEP_LEVEL): the
  // engine keeps nothing in host RAM asleep, and every sync sends the base through host RAM again (PR #3541).
  const nlohmann::json level2 = job("verl-qwen2.5-3b-grpo-lora.sh", {"actor_rollout_ref.rollout.layered_summon=False", "--verl-version", "0.6.0"});
  for (const auto& t : phase(level2, "experience")["terms"])
    if (t["term"].get<std::string>().find("batch") == std::string::npos) CHECK(t["host_bytes"] == 0);
  CHECK(term(phase(level2, "rollout"), "actor", "base copied to host RAM", "host_bytes") == 2 * 12'343'754'752LL);
  CHECK(job("verl-qwen2.5-3b-grpo-lora.sh", {"--verl-version", "0.6.0"})["phases"].dump().find("asleep, level 1") != std::string::npos);
  // Adapters on q and v only: 64 x (4096 + 2304) x 36 = 14,745,600; Adam 8 B each over 2 GPUs.
  CHECK(term(phase(job("verl-qwen2.5-3b-grpo-lora.sh", {"actor_rollout_ref.model.target_modules=[q_proj,v_proj]"}), "rollout"), "actor",
             "optimizer states") == 8 * 14'745'600LL / 2);
  // What verl refuses or zeromem does not model: one line naming the key.
  const std::vector<std::pair<std::string, std::string>> refused{
      {"actor_rollout_ref.rollout.load_format=dummy", "layered_summon"},
      {"actor_rollout_ref.model.exclude_modules=[o_proj]", "exclude_modules"},
      {"actor_rollout_ref.rollout.name=sglang", "vLLM only"},
      {"+actor_rollout_ref.model.lora.rank=16", "Megatron-Bridge"},
      {"+critic.model.lora_rank=16", "critic.model.lora_rank"},
      {"actor_rollout_ref.model.target_modules=[q_proj,attn]", "unknown LoRA target"},
  };
  for (const auto& [override, words] : refused) {
    INFO(override);
    const zeromem::test::cli_result bad = run_cli({"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", override});
    CHECK(bad.code == 2);
    CHECK(bad.err.find(words) != std::string::npos);
    CHECK(bad.err.find('\n') == bad.err.size() - 1);
  }
  // Qwen2.5-7B with LoRA on two 40 GiB GPUs, parameters offloaded between phases, the sync without layered_summon:
  // the whole actor gathered in fp32, 4 x (7,615,616,512 + adapters) > 28 GiB, breaks the rollout; --explain finds
  // the layer-by-layer gather, which fits.
  const nlohmann::json whole = job("verl-qwen2.5-3b-grpo-lora.sh",
                                   {"actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "actor_rollout_ref.rollout.gpu_memory_utilization=0.3",
                                    "actor_rollout_ref.actor.fsdp_config.param_offload=True", "actor_rollout_ref.rollout.layered_summon=False",
                                    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "--gpu", "a100-40gb", "--mean-tokens", "256", "--explain"});
  CHECK(phase(whole, "rollout")["activity"] == "LoRA weight sync");
  CHECK_FALSE(phase(whole, "rollout")["fits"].get<bool>());
  CHECK(term(phase(whole, "rollout"), "actor", "parameters gathered for the LoRA sync (summon_full_params") > 4 * 7'615'616'512LL);
  bool layered = false;
  for (const auto& f : whole["fixes"])
    if (f["change"].get<std::string>().rfind("actor_rollout_ref.rollout.layered_summon=True", 0) == 0) layered = f["fits"].get<bool>();
  CHECK(layered);
  const zeromem::test::cli_result adapter_only =
      run_cli({"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "actor_rollout_ref.model.lora_rank=0", "+actor_rollout_ref.model.lora_adapter_path=/a"});
  CHECK(adapter_only.code == 2);
  CHECK(adapter_only.err.find("lora_rank") != std::string::npos);
}

TEST_CASE("verl builds a reference policy only with a KL term from v0.4.0 and always before, EasyR1 none with disable_kl", "[rlhf]") {
  const std::string f = "verl-qwen2-7b-ppo.sh", A = "actor_rollout_ref.actor.";
  // verl's PPO example sets neither algorithm.use_kl_in_reward nor actor.use_kl_loss. From v0.4.0 (072fc9fe,
  // need_reference_policy) no reference: the training phase holds actor, critic and vLLM, and each of the 1024
  // sequences carries six fp32 per response token, not seven (no ref_log_prob): 53,248 + 24 x 512 B.
  const nlohmann::json v04 = job(f, {"--verl-version", "0.4.0"});
  CHECK(phase(v04, "training")["gpus"] == "actor+critic+vLLM");
  CHECK(host(phase(v04, "training"), "experience batch (driver)") == 1024LL * (53'248 + 24 * 512));
  // Either KL term brings it back, with its log-probs: 53,248 + 28 x 512 B.
  for (const std::string& kl : {A + "use_kl_loss=True", std::string("algorithm.use_kl_in_reward=True")}) {
    INFO(kl);
    const nlohmann::json with_kl = job(f, {"--verl-version", "0.4.0", kl});
    CHECK(phase(with_kl, "training")["gpus"] == "actor+critic+reference+vLLM");
    CHECK(host(phase(with_kl, "training"), "experience batch (driver)") == 1024LL * (53'248 + 28 * 512));
  }
  // Before v0.4.0 the reference is always built (the in-reward KL penalty); without a version it is too, and said so.
  const nlohmann::json v03 = job(f, {"--verl-version", "0.3.0"});
  CHECK(phase(v03, "training")["gpus"] == "actor+critic+reference+vLLM");
  CHECK(v03["config"]["assumed"].dump().find("reference policy") == std::string::npos);
  const nlohmann::json unknown = job(f);
  CHECK(phase(unknown, "training")["gpus"] == "actor+critic+reference+vLLM");
  CHECK(unknown["config"]["assumed"].dump().find("in-reward KL penalty verl applies before v0.4.0") != std::string::npos);
  CHECK(job(f, {A + "use_kl_loss=True"})["config"]["assumed"].dump().find("in-reward KL penalty") == std::string::npos);
  // LoRA without a KL term from v0.4.0: the actor computes no reference log-probs either (ref_in_actor needs a
  // reference policy): 16 prompts x 5 of 57,344 + 20 x 1024 B, against 81,920 B with the KL loss (the example's).
  const nlohmann::json lora = job("verl-qwen2.5-3b-grpo-lora.sh", {"--verl-version", "0.6.0", A + "use_kl_loss=False"});
  CHECK(host(phase(lora, "training"), "experience batch (driver)") == 80LL * (57'344 + 20 * 1024));
  CHECK(lora["config"]["assumed"].dump().find("ref_in_actor") == std::string::npos);
  CHECK(host(phase(job("verl-qwen2.5-3b-grpo-lora.sh", {"--verl-version", "0.6.0"}), "training"), "experience batch (driver)") ==
        80LL * 81'920);
  // EasyR1: algorithm.disable_kl (FSDPWorker: _has_ref = False).
  CHECK(phase(job("easyr1-vl-7b-grpo.yaml"), "training")["gpus"] == "actor+reference+vLLM");
  CHECK(phase(job("easyr1-vl-7b-grpo.yaml", {"algorithm.disable_kl=true"}), "training")["gpus"] == "actor+vLLM");
}

TEST_CASE("verl releases: rollout defaults by --verl-version (enforce_eager, max_num_seqs, LoRA ranks)", "[rlhf]") {
  // Without a version zeromem takes verl's defaults before v0.6.0 and says so.
  const nlohmann::json before = job("verl-qwen2.5-3b-grpo-lora.sh");
  CHECK(before["config"]["assumed"].dump().find("enforce_eager True (verl's default before v0.6.0") != std::string::npos);
  // From v0.6.0 (verl ff6978c1, beb62461): CUDA graphs are captured by default and rollout.max_num_seqs reaches vLLM.
  const nlohmann::json v6 = job("verl-qwen2.5-3b-grpo-lora.sh", {"--verl-version", "0.6.0", "actor_rollout_ref.rollout.max_num_seqs=64"});
  CHECK(v6["notes"].dump().find("vLLM CUDA graphs (enforce_eager off)") != std::string::npos);
  // vLLM's profile with 64 sequences of Qwen2.5-3B at tp 2: sampling (8192 x 2048 + 64 x 151,936) x 2 B + 38 B x 64 x
  // 151,936 = 422,510,592 B, above the widest layer moment 8192 x (4 x 2048 + 3 x 5504) x 2 B = 404,750,336 B.
  CHECK(term(phase(v6, "rollout"), "vLLM", "activation peak") == 422'510'592LL);
  // Before v0.6.0 the key does not reach vLLM: its own default (1024 on an H100) applies, and the reading says so.
  const nlohmann::json ignored = job("verl-qwen2.5-3b-grpo-lora.sh", {"actor_rollout_ref.rollout.max_num_seqs=64"});
  CHECK(term(phase(ignored, "rollout"), "vLLM", "activation peak") > 422'510'592LL);
  CHECK(ignored["config"]["assumed"].dump().find("max_num_seqs not passed to vLLM") != std::string::npos);
  // LoRA ranks: verl 0.7.0 rounds 48 up to vLLM's 64 (slots of rank 64: 152,764,416 B, test_inference derives them);
  // before, it passes 48, which vLLM refuses.
  CHECK(term(phase(job("verl-qwen2.5-3b-grpo-lora.sh", {"--verl-version", "0.7.0", "actor_rollout_ref.model.lora_rank=48"}), "rollout"), "vLLM",
             "LoRA slots (max_lora_rank 64)") == 152'764'416LL);
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused{
      {{"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "--verl-version", "0.6.0", "actor_rollout_ref.model.lora_rank=48"}, "before 0.7.0"},
      {{"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "--openrlhf-version", "0.6.0"}, "--openrlhf-version is for OpenRLHF"},
      {{"job", jobs + "orz-1.5b-ppo.args", "--verl-version", "0.6.0"}, "--verl-version is for verl"},
      {{"job", jobs + "easyr1-vl-7b-grpo.yaml", "--verl-version", "0.6.0"}, "EasyR1"},
      {{"job", jobs + "verl-qwen2.5-3b-grpo-lora.sh", "--verl-version", "six"}, "--verl-version"},
  };
  for (const auto& [args, words] : refused) {
    INFO(words);
    const zeromem::test::cli_result bad = run_cli(args);
    CHECK(bad.code == 2);
    CHECK(bad.err.find(words) != std::string::npos);
  }
}

TEST_CASE("launch files: shell words, zeromem lines, overrides and errors that name the key", "[rlhf][bad-input]") {
  const zeromem::command_line c = zeromem::split_command_line(
      "# zeromem: --gpu h100-80gb\npython3 -m x \\\n  --a 'b c' --d=\"e\" # trailing\n--f \\$g\n");
  CHECK(c.directives == std::vector<std::string>{"--gpu h100-80gb"});
  CHECK(c.words == std::vector<std::string>{"python3", "-m", "x", "--a", "b c", "--d=e", "--f", "$g"});
  zeromem::job_settings s{};
  s.gpu = "h100-80gb";
  // Unknown keys are reported, known keys without a memory effect are listed as ignored.
  const zeromem::job_reading r = zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--seed", "1", "--frobnicate", "2"}, s);
  CHECK(r.unknown == std::vector<std::string>{"frobnicate"});
  CHECK(r.ignored == std::vector<std::string>{"seed"});
  CHECK(r.job.critic.present);  // gae's critic defaults to the actor's path without a reward model
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--zero_stage", "x"}, s), Catch::Contains("zero_stage"));
  // Each error names the key as it is written: OpenRLHF's with its "--", verl's dotted; lengths of 0 at the key.
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--zero_stage", "5"}, s),
                    "zeromem: --zero_stage must be 0, 1, 2 or 3, got 5");
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--critic_num_nodes", "-2"}, s),
                    "zeromem: --critic_num_nodes must be an integer from 0 to 1099511627776 (2^40), got '-2'");
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--generate_max_len", "0"}, s),
                    "zeromem: --generate_max_len is 0; it must be at least 1");
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--flash_attn", "maybe"}, s),
                    "zeromem: --flash_attn must be true or false, not 'maybe'");
  CHECK(run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "data.max_response_length=0"}).err ==
        "zeromem: data.max_response_length is 0; it must be at least 1\n");
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "acme/unknown-13b"}, s), Catch::Contains("--pretrain"));
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--lora_rank", "8"}, s), Catch::Contains("--lora_rank"));
  // A step that generates nothing is an error naming both keys, not a batch silently left out.
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B", "--rollout_batch_size", "0"}, s),
                    Catch::Contains("--rollout_batch_size x --n_samples_per_prompt is 0"));
  CHECK(run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "actor_rollout_ref.rollout.n=0"}).err.find("actor_rollout_ref.rollout.n is 0") !=
        std::string::npos);
  CHECK_THROWS_WITH(zeromem::read_verl({{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B"}, {"actor_rollout_ref.rollout.gpu_memory_utilization", "1.5"}}, s),
                    Catch::Contains("gpu_memory_utilization"));
  CHECK_THROWS_WITH(zeromem::read_verl({{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B"}}, s), Catch::Contains("--vllm-version"));
  zeromem::job_settings no_gpu{};
  CHECK_THROWS_WITH(zeromem::read_openrlhf({"--pretrain", "Qwen/Qwen2.5-7B"}, no_gpu), Catch::Contains("--gpu"));
  // A model's config.json where the launch file goes: said as such, with where each file belongs.
  const zeromem::test::cli_result model_file = run_cli({"job", ZEROMEM_FIXTURES_DIR "/hf/gpt2.json"});
  CHECK(model_file.code == 2);
  CHECK(model_file.err.find("is a model's config.json, not a launch file; pass it to zeromem estimate --hf-config, and give job an "
                            "OpenRLHF argument file or a verl/EasyR1 YAML config\n") != std::string::npos);
  // The CLI: one line on stderr, exit 2.
  const zeromem::test::cli_result bad = run_cli({"job", jobs + "logic-rl-7b-grpo.yaml", "data.train_batch_size=many"});
  CHECK(bad.code == 2);
  CHECK(bad.err.find("data.train_batch_size") != std::string::npos);
  CHECK(bad.err.find('\n') == bad.err.size() - 1);
  CHECK(run_cli({"job", jobs + "logic-rl-7b-grpo.yaml", "novalue"}).code == 2);
  CHECK(run_cli({"job", jobs + "no-such-file.yaml"}).code == 2);
  // Hydra's +key=value works on a verl launch line as on a YAML file; a bare word is an error naming it.
  CHECK(job("verl-qwen2-7b-ppo.sh", {"+actor_rollout_ref.rollout.n=2"})["config"]["read"].dump().find("actor_rollout_ref.rollout.n") !=
        std::string::npos);
  const zeromem::test::cli_result bare = run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "=2"});
  CHECK(bare.code == 2);
  CHECK(bare.err.find("'=2'") != std::string::npos);
  // The node's GPUs: at least one, and only where the launch file does not say them (verl's trainer.n_gpus_per_node).
  for (const char* n : {"0", "-8", "eight"}) {
    const zeromem::test::cli_result refused = run_cli({"job", jobs + "orz-1.5b-ppo.args", "--node-gpus", n});
    CHECK(refused.code == 2);
    CHECK(refused.err.find("--node-gpus") != std::string::npos);
    CHECK(refused.err.find('\n') == refused.err.size() - 1);
  }
  const zeromem::test::cli_result verl_nodes = run_cli({"job", jobs + "logic-rl-7b-grpo.yaml", "--node-gpus", "8"});
  CHECK(verl_nodes.code == 2);
  CHECK(verl_nodes.err.find("trainer.n_gpus_per_node") != std::string::npos);
}

TEST_CASE("launch files: nodes, GPUs, parallel degrees and micro-batches of 0, degrees that do not divide the GPUs, and YAML "
          "aliases that loop or explode are one-line errors (fuzz_job found the division by zero)", "[rlhf][bad-input]") {
  // verl's file runs on 1 node of 8 GPUs. verl builds a (world / sp) x sp device mesh for Ulysses (fsdp_workers.py) and
  // asserts world_size % infer_tp == 0 for the rollout (_build_rollout): 3 and 16 divide neither.
  const std::string verl = jobs + "verl-qwen2-7b-ppo.sh", ulysses = "actor_rollout_ref.actor.ulysses_sequence_parallel_size",
                    rollout_tp = "actor_rollout_ref.rollout.tensor_model_parallel_size";
  const std::vector<std::pair<std::string, std::string>> refused{
      {"trainer.nnodes=0", "trainer.nnodes is 0; it must be at least 1"},
      {"trainer.n_gpus_per_node=0", "trainer.n_gpus_per_node is 0; it must be at least 1"},
      {ulysses + "=0", ulysses + " is 0; it must be at least 1"},
      {ulysses + "=3", ulysses + " 3 does not divide the 8 GPUs"},
      {ulysses + "=16", ulysses + " 16 does not divide the 8 GPUs"},
      {rollout_tp + "=0", rollout_tp + " is 0; it must be at least 1"},
      {rollout_tp + "=16", rollout_tp + " 16 does not divide the 8 GPUs"}};
  for (const auto& [override, message] : refused) {
    INFO(override);
    const zeromem::test::cli_result r = run_cli({"job", verl, override});
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
  CHECK(run_cli({"job", verl, ulysses + "=2"}).code == 0);
  // EasyR1's keys, as the fuzzer's input had it.
  const zeromem::test::cli_result easyr1 = run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "worker.actor.ulysses_sequence_parallel_size=0"});
  CHECK(easyr1.code == 2);
  CHECK(easyr1.err.find("worker.actor.ulysses_sequence_parallel_size is 0") != std::string::npos);
  // YAML aliases: a map that contains itself recursed until the stack overflowed (SIGSEGV), and nine levels of nine
  // aliases each walked 9^9 = 387,420,489 leaves; both are one-line errors now. An alias inside a sequence is one value.
  const std::vector<std::pair<std::string, std::string>> graphs{
      {"a: &a {b: *a}\n", "refers to a map inside itself at 'a.b'"},
      {"x: 1\na: &a {b: {c: *a}}\n", "refers to a map inside itself at 'a.b.c'"},
      {[] {
         std::string y = "a0: &a0 {k0: x, k1: x, k2: x, k3: x, k4: x, k5: x, k6: x, k7: x, k8: x}\n";
         for (int i = 1; i <= 9; ++i) {
           y += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " {";
           for (int k = 0; k < 9; ++k) y += (k ? ", k" : "k") + std::to_string(k) + ": *a" + std::to_string(i - 1);
           y += "}\n";
         }
         return y;
       }(),
       "expands to more than 100000 nodes"}};
  const std::string yaml = (std::filesystem::temp_directory_path() / "zeromem-aliases.yaml").string();
  for (const auto& [text, message] : graphs) {
    std::ofstream(yaml) << text;
    const zeromem::test::cli_result r = run_cli({"job", yaml, "--gpu", "h100-80gb"});
    INFO(text);
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
  std::ofstream(yaml) << "a: &a [ {b: *a} ]\n";
  CHECK(run_cli({"job", yaml, "--gpu", "h100-80gb"}).err.find("the config has no actor_rollout_ref.model.path") != std::string::npos);
  // OpenRLHF's micro-batches divide the passes, and ring_attn_size the ranks of dynamic batches: named as flags.
  for (const char* flag : {"micro_train_batch_size", "micro_rollout_batch_size", "ring_attn_size"}) {
    const zeromem::test::cli_result r = run_cli({"job", jobs + "openrlhf-llama3-8b-ppo.args", "use_dynamic_batch=", std::string(flag) + "=0"});
    CHECK(r.code == 2);
    CHECK(r.err.find("--" + std::string(flag) + " is 0; it must be at least 1") != std::string::npos);
  }
}

TEST_CASE("OpenRLHF 0.4.0 to 0.7.0 check the roles' GPUs, ZeRO-3's engines and the rollout batch at start, by release", "[rlhf][bad-input]") {
  // train_ppo_ray.py _validate_args (v0.4.0-v0.7.0; gone in v0.7.1). The example: actor, critic, reference and reward
  // on 2 GPUs each, 2 vLLM engines, ZeRO-3, rollout_batch_size 1024: it starts under every release.
  const std::string f = jobs + "openrlhf-llama3-8b-ppo.args";
  for (const char* v : {"0.4.0", "0.5.0", "0.5.7", "0.5.8", "0.6.0", "0.7.0", "0.7.1"}) CHECK(run_cli({"job", f, "--openrlhf-version", v}).code == 0);
  struct refusal {
    std::vector<std::string> overrides;
    std::string release, message;  // message empty: it starts
  };
  // 3 actor GPUs (96 = 16 x 3 x 2 keeps DeepSpeed's batch assertion): not a power of 2 up to v0.5.7; from v0.5.8 the
  // critic's 2 GPUs must divide them; from v0.7.1 nothing is asserted.
  const std::vector<std::string> three{"actor_num_gpus_per_node=3", "ref_num_gpus_per_node=3", "train_batch_size=96"};
  const std::vector<refusal> cases{
      {three, "0.5.7", "the actor's 3 GPUs are not a power of 2, which OpenRLHF 0.5.7 asserts"},
      {three, "0.5.8", "the critic's 2 GPUs do not divide the actor's 3, which OpenRLHF 0.5.8 asserts"},
      {three, "0.7.1", ""},
      // The critic's GPUs divide the actor's (4 do not divide 2), in every release that checks.
      {{"critic_num_gpus_per_node=4", "reward_num_gpus_per_node=4"}, "0.4.0", "the critic's 4 GPUs do not divide the actor's 2, which OpenRLHF 0.4.0 asserts"},
      {{"critic_num_gpus_per_node=4", "reward_num_gpus_per_node=4"}, "0.7.1", ""},
      // Only where a critic trains (not under REINFORCE, from v0.5.1).
      {{"critic_num_gpus_per_node=4", "advantage_estimator=reinforce"}, "0.5.1", ""},
      // A critic of 3 GPUs is no power of 2 (checked up to v0.5.7, before whether it divides the actor's).
      {{"critic_num_gpus_per_node=3", "reward_num_gpus_per_node=3", "train_batch_size=96"}, "0.5.7",
       "the critic's 3 GPUs (--critic_num_nodes x --critic_num_gpus_per_node) are not a power of 2, which OpenRLHF 0.5.7 asserts"},
      // ZeRO-3 needs vLLM engines (without packed samples, which need them first).
      {{"vllm_num_engines=0", "packing_samples=false"}, "0.7.0", "ZeRO-3 without vLLM engines, which OpenRLHF 0.7.0 asserts"},
      {{"vllm_num_engines=0", "packing_samples=false"}, "0.7.1", ""},
      // Engines against the actor's GPUs: at most as many (v0.4.6-v0.5.0), dividing them (v0.5.8-v0.5.9), either dividing
      // the other (v0.6.0-v0.7.0).
      {{"vllm_num_engines=3"}, "0.5.0", "--vllm_num_engines 3 is more than the actor's 2 GPUs, which OpenRLHF 0.5.0 asserts"},
      {{"vllm_num_engines=3"}, "0.4.5", ""},
      {{"vllm_num_engines=4"}, "0.5.8", "--vllm_num_engines 4 does not divide the actor's 2 GPUs, which OpenRLHF 0.5.8 asserts"},
      {{"vllm_num_engines=4"}, "0.6.0", ""},
      {{"vllm_num_engines=3"}, "0.6.0", "--vllm_num_engines 3 and the actor's GPUs do not divide one another: the actor has 2 GPUs"},
      // The rollout batch a multiple of the actor's GPUs (v0.5.8-v0.7.0).
      {{"rollout_batch_size=1023"}, "0.5.8", "--rollout_batch_size 1023 is not a multiple of the actor's 2 GPUs, which OpenRLHF 0.5.8 asserts"},
      {{"rollout_batch_size=1023"}, "0.5.7", ""}};
  for (const refusal& c : cases) {
    std::vector<std::string> args{"job", f, "--openrlhf-version", c.release};
    args.insert(args.end(), c.overrides.begin(), c.overrides.end());
    INFO(c.release << " " << c.overrides.front());
    const zeromem::test::cli_result r = run_cli(args);
    if (c.message.empty()) {
      CHECK(r.code == 0);
      continue;
    }
    CHECK(r.code == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
  // Without --openrlhf-version nothing release-bound is asserted.
  CHECK(run_cli({"job", f, "rollout_batch_size=1023"}).code == 0);
}

TEST_CASE("YAML merge keys (<<) merge as OmegaConf's PyYAML merges them: own keys win, then the earlier map", "[rlhf]") {
  std::ifstream in(jobs + "logic-rl-7b-grpo.yaml");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto replaced = [&text](const std::string& from, const std::string& to) {
    std::string t = text;
    const std::size_t at = t.find(from);
    REQUIRE(at != std::string::npos);
    t.replace(at, from.size(), to);
    return t;
  };
  const std::string yaml = (std::filesystem::temp_directory_path() / "zeromem-merge.yaml").string();
  const auto read = [&yaml](const std::string& t, std::vector<std::string> extra = {}) {
    std::ofstream(yaml) << t;
    std::vector<std::string> args{"job", yaml, "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_cli_json(args);
  };
  // Logic-RL's ref and rollout share log_prob_micro_batch_size 160: written once, anchored in ref, merged into rollout.
  const std::string ref = "  ref:\n    log_prob_micro_batch_size: 160\n", rollout = "  rollout:\n    name: vllm\n";
  const std::string rollout_160 = "    log_prob_micro_batch_size: 160\n    n: 32\n";
  const std::string shared = replaced(ref, "  ref:\n    <<: &log_prob {log_prob_micro_batch_size: 160}\n");
  const std::string merged = [&] {
    std::string t = shared;
    t.replace(t.find(rollout), rollout.size(), "  rollout:\n    <<: *log_prob\n    name: vllm\n");
    t.replace(t.find(rollout_160), rollout_160.size(), "    n: 32\n");
    return t;
  }();
  const nlohmann::json as_written = read(text), as_merged = read(merged);
  CHECK(as_merged["config"]["unknown"].empty());
  CHECK(as_merged["phases"] == as_written["phases"]);
  // The map's own key wins over the merged one: rollout's 1 (normalized, 1 x 32 / 4 = 8 sequences a pass, against the
  // 64 a GPU holds) reads as the override does, and not as 160 does.
  std::string own = merged;
  own.replace(own.find("    <<: *log_prob\n"), 18, "    <<: *log_prob\n    log_prob_micro_batch_size: 1\n");
  CHECK(read(own)["phases"] == read(text, {"actor_rollout_ref.rollout.log_prob_micro_batch_size=1"})["phases"]);
  CHECK(read(own)["phases"] != as_written["phases"]);
  // Of a list of merged maps the earlier wins.
  std::string listed = merged;
  listed.replace(listed.find("    <<: *log_prob\n"), 18, "    <<: [{log_prob_micro_batch_size: 1}, *log_prob]\n");
  CHECK(read(listed)["phases"] == read(own)["phases"]);
  // A quoted "<<" is an ordinary key, unknown to verl; merging a scalar is a one-line error.
  std::string quoted = text;
  quoted.replace(quoted.find(rollout), rollout.size(), "  rollout:\n    \"<<\": 1\n    name: vllm\n");
  CHECK(read(quoted)["config"]["unknown"].dump().find("actor_rollout_ref.rollout.<<") != std::string::npos);
  std::ofstream(yaml) << replaced(rollout, "  rollout:\n    <<: 1\n    name: vllm\n");
  const zeromem::test::cli_result scalar = run_cli({"job", yaml});
  CHECK(scalar.code == 2);
  CHECK(scalar.err.find("merges (<<) a value that is not a map into 'actor_rollout_ref.rollout'") != std::string::npos);
  std::ofstream(yaml) << "x: 1\n<<: 5\n";
  CHECK(run_cli({"job", yaml}).err.find("merges (<<) a value that is not a map into the top level;") != std::string::npos);
  std::ofstream(yaml) << "a: &a {b: 1}\nc: &c {<<: *c}\n";
  CHECK(run_cli({"job", yaml}).err.find("merges a map into itself at 'c'") != std::string::npos);
}

TEST_CASE("OpenRLHF launches that DeepSpeed or OpenRLHF stop at start are refused as they refuse them: a train batch DeepSpeed's "
          "batch assertion rejects, packed samples without vLLM, a role of 0 GPUs, fewer sample batches than actor processes",
          "[rlhf][bad-input]") {
  // The example: actor and reference on 2 GPUs, critic and reward on 2, --micro_train_batch_size 16, --train_batch_size
  // 128, packed samples, 2 vLLM engines. Each role's DeepSpeed config carries train_batch_size x ring and the
  // micro-batch; DeepSpeed sets gradient_accumulation_steps = train // micro // world and asserts train == micro x
  // steps x world (runtime/config.py _batch_assertion): 48 = 16 x 1 x 2 + 16 is refused, 96 = 16 x 3 x 2 runs.
  const std::string f = jobs + "openrlhf-llama3-8b-ppo.args", assertion = ", which DeepSpeed asserts (train_batch_size == micro_batch_per_gpu x";
  // Each: the overrides, and what the one line says (the last part, for some, apart).
  const std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>> refused{
      {{"train_batch_size=48"}, {"--train_batch_size 48 is not a multiple of --micro_train_batch_size 16 x the actor's 2 GPUs = 32" + assertion}},
      {{"train_batch_size=0"}, {"--train_batch_size is 0; it must be at least 1"}},
      // 128 / (16 x 3) is not whole: the critic's engine (and the reward's beside it) stops.
      {{"critic_num_gpus_per_node=3", "reward_num_gpus_per_node=3"},
       {"--train_batch_size 128 is not a multiple of --micro_train_batch_size 16 x the critic's 3 GPUs = 48"}},
      // Colocated with the reward model the critic takes its shape (train_ppo_ray.py asserts it before any engine).
      {{"critic_num_gpus_per_node=3"}, {"with --colocate_critic_reward the reward model takes the critic's shape, which OpenRLHF asserts"}},
      {{"ref_num_nodes=2"}, {"with --colocate_actor_ref the ref model takes the actor's shape", "--ref_num_nodes 2 x --ref_num_gpus_per_node 2"}},
      // Ring attention multiplies the engine's batch: 40 x 2 = 80 is not a multiple of 32; 16 x 2 = 32 would be.
      {{"ring_attn_size=2", "train_batch_size=40"},
       {"--train_batch_size 40 x --ring_attn_size 2 is not a multiple of --micro_train_batch_size 16 x the actor's 2 GPUs = 32" + assertion,
        "; make it a multiple of 16 or change --micro_train_batch_size"}},
      // Dynamic batches give the trained engines micro-batch 1 and one step, but the frozen ones keep the batch.
      {{"use_dynamic_batch=", "train_batch_size=48"}, {"the ref's 2 GPUs = 32"}},
      {{"vllm_num_engines=0"}, {"--packing_samples needs vLLM engines, which OpenRLHF asserts (\"Only support `--packing_samples` with vLLM.\")"}},
      {{"ref_num_gpus_per_node=0"}, {"--ref_num_gpus_per_node is 0; it must be at least 1"}},
      {{"actor_num_nodes=0"}, {"--actor_num_nodes is 0; it must be at least 1"}},
      // Only the actor (no KL, no critic, a remote reward): 48 fails without --pretrain_data, which doubles its batch
      // before v0.7.1 (get_ds_train_config: "ptx loss (backward twice)"; 96 = 16 x 3 x 2), and from v0.7.1 with it.
      {{"init_kl_coef=0", "advantage_estimator=reinforce", "remote_rm_url=x", "train_batch_size=48"}, {"the actor's 2 GPUs = 32"}},
      {{"init_kl_coef=0", "advantage_estimator=reinforce", "remote_rm_url=x", "train_batch_size=48", "pretrain_data=x", "--openrlhf-version",
        "0.7.1"},
       {"--train_batch_size 48 is not a multiple"}}};
  for (const auto& [overrides, message] : refused) {
    std::vector<std::string> args{"job", f};
    args.insert(args.end(), overrides.begin(), overrides.end());
    INFO(overrides.back());
    const zeromem::test::cli_result r = run_cli(args);
    CHECK(r.code == 2);
    for (const std::string& part : message) CHECK(r.err.find(part) != std::string::npos);
    CHECK(r.err.find('\n') == r.err.size() - 1);
  }
  for (const std::vector<std::string>& runs : std::vector<std::vector<std::string>>{
           {"train_batch_size=96"},
           {"ring_attn_size=2", "train_batch_size=48"},
           {"init_kl_coef=0", "advantage_estimator=reinforce", "remote_rm_url=x", "train_batch_size=48", "pretrain_data=x"}}) {
    std::vector<std::string> args{"job", f};
    args.insert(args.end(), runs.begin(), runs.end());
    INFO(runs.back());
    CHECK(run_cli(args).code == 0);
  }
  // From v0.7.2 train_ppo_ray.py asserts a micro-batch of samples for each actor process: 1 x 1 // 1 = 1 for 2 GPUs
  // is refused there, not in v0.7.1; 1 x 2 // 1 = 2 runs.
  const std::vector<std::string> one_sample{"job", f, "rollout_batch_size=1", "micro_rollout_batch_size=1", "--openrlhf-version"};
  const auto with_version = [&](std::vector<std::string> args, const char* v) {
    args.push_back(v);
    return run_cli(args);
  };
  const zeromem::test::cli_result too_few = with_version(one_sample, "0.7.2");
  CHECK(too_few.code == 2);
  CHECK(too_few.err.find("--rollout_batch_size x --n_samples_per_prompt = 1 makes 1 micro-batches of --micro_rollout_batch_size 1, fewer than "
                         "the 2 actor processes, which OpenRLHF asserts") != std::string::npos);
  CHECK(with_version(one_sample, "0.7.1").code == 0);
  std::vector<std::string> two_samples = one_sample;
  two_samples.insert(two_samples.begin() + 2, "n_samples_per_prompt=2");
  CHECK(with_version(two_samples, "0.7.2").code == 0);
  // Ring attention and dynamic batches turn packing on (train_ppo_ray.py) in a launch that does not ask for it.
  const std::string unpacked = jobs + "openrlhf-zero2-vs-zero3.args";
  CHECK(run_cli({"job", unpacked, "vllm_num_engines=0"}).code == 0);
  CHECK(run_cli({"job", unpacked, "vllm_num_engines=0", "ring_attn_size=2"}).err.find("--packing_samples (on with --ring_attn_size 2) needs vLLM engines") !=
        std::string::npos);
  CHECK(run_cli({"job", unpacked, "vllm_num_engines=0", "use_dynamic_batch="}).err.find("--packing_samples (on with --use_dynamic_batch) needs vLLM") !=
        std::string::npos);
}

TEST_CASE("a launch file states its title and its cases, and malformed case lines are errors naming the line", "[rlhf][bad-input]") {
  const zeromem::launch_header h = zeromem::read_launch_header(
      "# A job on 8 GPUs, with a title over\n# two lines. Assumed: nothing.\n# zeromem: --gpu h100-80gb\n"
      "# zeromem case: as launched | reported: out of memory\n"
      "# zeromem case: smaller | reported: fits | micro_train_batch_size=1 --vllm-version '0.6.5'\n"
      "python3 -m openrlhf.cli.train_ppo_ray --pretrain x\n# a later comment, not the description\n"
      "# zeromem case: unreported | reported: none\n");
  CHECK(h.title == "A job on 8 GPUs, with a title over two lines.");
  CHECK(h.description == std::vector<std::string>{"A job on 8 GPUs, with a title over", "two lines. Assumed: nothing."});
  REQUIRE(h.cases.size() == 3);
  CHECK(h.cases[0].label == "as launched");
  CHECK(h.cases[0].reported_fits == false);
  CHECK(h.cases[0].words.empty());
  CHECK(h.cases[1].reported_fits == true);
  CHECK(h.cases[1].words == std::vector<std::string>{"micro_train_batch_size=1", "--vllm-version", "0.6.5"});
  CHECK_FALSE(h.cases[2].reported_fits.has_value());
  CHECK_THROWS_WITH(zeromem::read_launch_header("# zeromem case: no verdict\n"), Catch::Contains("'# zeromem case: no verdict'"));
  CHECK_THROWS_WITH(zeromem::read_launch_header("# zeromem case: x | reported: oom\n"), Catch::Contains("write fits, out of memory or none"));
  CHECK_THROWS_WITH(zeromem::read_launch_header("# zeromem case:  | reported: fits\n"), Catch::Contains("is not `# zeromem case: LABEL"));
  // `zeromem scenario FILE` evaluates a file of the user's; a case's words are checked like the command line's.
  const std::string mine = std::string(ZEROMEM_EXAMPLES_DIR) + "/jobs/orz-1.5b-ppo.args";
  CHECK(run_cli({"scenario", mine}).out.find("(agrees)") != std::string::npos);
  const zeromem::test::cli_result none = run_cli({"scenario", std::string(ZEROMEM_FIXTURES_DIR) + "/hf/gpt2.json"});
  CHECK(none.code == 2);
  CHECK(none.err.find("states no cases") != std::string::npos);
  const std::string bad = (std::filesystem::temp_directory_path() / "zeromem-bad-case.args").string();
  std::ofstream(bad) << "# zeromem: --gpu a100-80gb\n# zeromem case: x | reported: fits | --bogus 1\n"
                        "python3 -m openrlhf.cli.train_ppo_ray --pretrain Qwen/Qwen2.5-1.5B\n";
  const zeromem::test::cli_result bogus = run_cli({"scenario", bad});
  CHECK(bogus.code == 2);
  CHECK(bogus.err.find("the case has '--bogus'; it takes --gpu, --host-memory") != std::string::npos);
  std::filesystem::remove(bad);
}

TEST_CASE("verl's use_dynamic_bsz: passes of at most max_token_len tokens, balanced (seqlen_balancing.py)", "[rlhf]") {
  // Logic-RL's file: 8 prompts x n 32 over 4 GPUs = 64 sequences per GPU, 520 tokens each (the file's assumed mean);
  // the mini-batch (256 / 4 x 32) holds all 64. Budget 8192: ceil(64 x 520 / 8192) = 5 passes, balanced: ceil(64 / 5)
  // = 13 sequences, 6,760 packed tokens, in the update and (the rollout's budget defaults to the actor's) in the
  // log-prob pass.
  const std::string f = "logic-rl-7b-grpo.yaml";
  const std::vector<std::string> dynamic{"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192"};
  const nlohmann::json j = job(f, dynamic);
  CHECK(phase(j, "training")["terms"].dump().find("activations (13 sequences, 6760 x 1 tokens)") != std::string::npos);
  CHECK(phase(j, "experience")["terms"].dump().find("forward peak (13 sequences, 6760 x 1 tokens)") != std::string::npos);
  // OmegaConf's ${oc.select:key,default} resolves to the default when the key is absent: a 4096-token log-prob budget
  // gives ceil(64 x 520 / 4096) = 9 passes of ceil(64 / 9) = 8 sequences, 4,160 tokens.
  std::vector<std::string> selected = dynamic;
  selected.push_back("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=${oc.select:no.such.key,4096}");
  CHECK(phase(job(f, selected), "experience")["terms"].dump().find("forward peak (8 sequences, 4160 x 1 tokens)") != std::string::npos);
  // A budget of 65,536 holds all 64 sequences in one pass (33,280 tokens), as the reported failing 8 x 32; --explain
  // halves the budget: 32,768 gives ceil(33,280 / 32,768) = 2 passes of 32 sequences, which fit as 4 x 32 did.
  const nlohmann::json wide = job(f, {"actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=65536", "--explain"});
  CHECK_FALSE(wide["fits"].get<bool>());
  bool halved = false;
  for (const auto& fix : wide["fixes"])
    if (fix["change"] == "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=32768") halved = fix["fits"].get<bool>();
  CHECK(halved);
  // verl asserts that a budget holds one sequence of the maxima (400 + 2048 tokens).
  const zeromem::test::cli_result small =
      run_cli({"job", jobs + f, "actor_rollout_ref.actor.use_dynamic_bsz=true", "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=2000"});
  CHECK(small.code == 2);
  CHECK(small.err.find("ppo_max_token_len_per_gpu x ulysses_sequence_parallel_size = 2000 tokens is below one sequence of") != std::string::npos);
  CHECK(small.err.find("= 2448") != std::string::npos);
}

TEST_CASE("verl's critic and reward model run on meshes of their own Ulysses degree, 1 by default, not the actor's, and the reward "
          "model's passes are its own micro-batch", "[rlhf]") {
  // ppo_trainer.yaml (v0.2 on): critic.ulysses_sequence_parallel_size: 1 and reward_model's: 1; the reference's follows
  // the actor's. CriticWorker.__init__ builds a (8 / sp) x sp mesh and normalizes its sizes by its own ranks.
  // The example's critic with ppo_micro_batch_size_per_gpu 8, packed sequences of 1024 + 512 tokens, the actor over 2:
  // - critic sp 1 (its default): 8 x 1536 = 12,288 tokens in one row; the mini-batch 256 (the actor's, as the critic
  //   sets none) / 8 ranks = 32 sequences, 32 / 8 = 4 passes (release unknown: without rollout.n 1's factor, equal);
  // - critic sp 2: 8 x 1536 / 2 = 6,144 tokens; 256 / 4 ranks = 64 sequences, 8 passes.
  const std::vector<std::string> base{"actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "critic.ppo_micro_batch_size=null",
                                      "critic.ppo_micro_batch_size_per_gpu=8"};
  const nlohmann::json own = job("verl-qwen2-7b-ppo.sh", base);
  const std::string own_terms = phase(own, "training")["terms"].dump();
  CHECK(phase(own, "training")["activity"] == "critic update");
  CHECK(own_terms.find("activations (8 sequences, 12288 x 1 tokens)") != std::string::npos);
  CHECK(own_terms.find("gradients (accumulated over 4 passes)") != std::string::npos);
  CHECK_FALSE(own["fits"].get<bool>());  // 12,288 tokens of a 7B critic without checkpointing: about 73 GiB of activations
  std::vector<std::string> two = base;
  two.push_back("critic.ulysses_sequence_parallel_size=2");
  const std::string two_terms = phase(job("verl-qwen2-7b-ppo.sh", two), "training")["terms"].dump();
  CHECK(two_terms.find("activations (8 sequences, 6144 x 1 tokens)") != std::string::npos);
  CHECK(two_terms.find("gradients (accumulated over 8 passes)") != std::string::npos);
  // The actor's passes are as before: 4 sequences (16 / (8 / 2) ranks) of 1536 tokens over 2 ranks.
  CHECK(phase(job("verl-qwen2-7b-ppo.sh", {"actor_rollout_ref.actor.ulysses_sequence_parallel_size=2"}), "training")["terms"].dump().find(
            "activations (4 sequences, 3072 x 1 tokens)") != std::string::npos);
  // Its own degree must divide the GPUs as the actor's does, and EasyR1's name for it (ulysses_size) is read too,
  // refused beside the older name (the example sets ulysses_sequence_parallel_size: 1; null unsets it).
  const zeromem::test::cli_result odd = run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "critic.ulysses_sequence_parallel_size=3"});
  CHECK(odd.code == 2);
  CHECK(odd.err.find("critic.ulysses_sequence_parallel_size 3 does not divide the 8 GPUs") != std::string::npos);
  const zeromem::test::cli_result easyr1_zero = run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "worker.actor.ulysses_sequence_parallel_size=null", "worker.actor.ulysses_size=0"});
  CHECK(easyr1_zero.code == 2);
  CHECK(easyr1_zero.err.find("worker.actor.ulysses_size is 0") != std::string::npos);
  const zeromem::test::cli_result both =
      run_cli({"job", jobs + "easyr1-vl-7b-grpo.yaml", "worker.actor.ulysses_size=1", "worker.actor.ulysses_sequence_parallel_size=1"});
  CHECK(both.code == 2);
  CHECK(both.err.find("worker.actor.ulysses_size and worker.actor.ulysses_sequence_parallel_size are both set") != std::string::npos);
  // The reward model's dynamic passes: its budget 32,768 tokens x its own sp 1 (RewardModelWorker.compute_rm_score),
  // over 1024 / 8 = 128 sequences a GPU: ceil(128 x 1536 / 32,768) = 6 passes of ceil(128 / 6) = 22 sequences, 33,792
  // tokens, whatever the actor's degree (2 here; read with it, 256 sequences a GPU in ceil(256 x 1536 / 65,536) = 6
  // passes of 43, 33,024 tokens over 2 ranks).
  // (Its padding removed, as the actor's: reward_model.model.use_remove_padding is False by default.)
  std::vector<std::string> reward{"actor_rollout_ref.actor.ulysses_sequence_parallel_size=2", "reward_model.enable=true",
                                  "reward_model.model.path=Qwen/Qwen2-7B-Instruct", "reward_model.model.use_remove_padding=True",
                                  "reward_model.use_dynamic_bsz=true"};
  const auto reward_pass = [](const nlohmann::json& j) {  // the reward model's forward term, in whichever phase shows it
    for (const auto& p : j["phases"])
      for (const auto& t : p["terms"])
        if (t["role"] == "reward" && t["term"].get<std::string>().rfind("forward peak", 0) == 0) return t["term"].get<std::string>();
    return std::string("none");
  };
  CHECK(reward_pass(job("verl-qwen2-7b-ppo.sh", reward)) == "forward peak (22 sequences, 33792 x 1 tokens)");
  // Without dynamic batches its own micro-batch, not the reference's: micro_batch_size_per_gpu as given, or the global
  // micro_batch_size // 8 GPUs (RewardModelWorker divides by the world size); neither or both is refused, as verl
  // refuses them from v0.2; v0.1 defaults micro_batch_size to 64 (64 // 8 = 8 sequences).
  reward.pop_back();
  const std::string verl = jobs + "verl-qwen2-7b-ppo.sh";
  std::vector<std::string> per_gpu = reward, global = reward;
  per_gpu.push_back("reward_model.micro_batch_size_per_gpu=32");
  global.push_back("reward_model.micro_batch_size=64");
  CHECK(reward_pass(job("verl-qwen2-7b-ppo.sh", per_gpu)) == "forward peak (32 sequences, 49152 x 1 tokens)");
  CHECK(reward_pass(job("verl-qwen2-7b-ppo.sh", global)) == "forward peak (8 sequences, 12288 x 1 tokens)");
  std::vector<std::string> v01 = reward;
  v01.insert(v01.end(), {"--verl-version", "0.1.0"});
  CHECK(reward_pass(job("verl-qwen2-7b-ppo.sh", v01)) == "forward peak (8 sequences, 12288 x 1 tokens)");
  std::vector<std::string> neither{"job", verl};
  neither.insert(neither.end(), reward.begin(), reward.end());
  const zeromem::test::cli_result none = run_cli(neither);
  CHECK(none.code == 2);
  CHECK(none.err.find("neither reward_model.micro_batch_size nor reward_model.micro_batch_size_per_gpu is set") != std::string::npos);
  std::vector<std::string> both_keys = neither;
  both_keys.insert(both_keys.end(), {"reward_model.micro_batch_size=64", "reward_model.micro_batch_size_per_gpu=8"});
  CHECK(run_cli(both_keys).err.find("reward_model.micro_batch_size and reward_model.micro_batch_size_per_gpu are both set") != std::string::npos);
  // Library: the degree read into the role; one that does not divide the role's GPUs is refused with the fix.
  zeromem::job_settings s = settings("a100-80gb", "0.6.3");
  const std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                              {"actor_rollout_ref.actor.ulysses_sequence_parallel_size", "2"},
                                                              {"actor_rollout_ref.model.use_remove_padding", "true"}};
  zeromem::rlhf_job j = zeromem::read_verl(keys, s).job;
  CHECK(j.ulysses == 2);
  CHECK(j.critic.ulysses == 1);
  CHECK(zeromem::estimate_rlhf(j).phases.size() == 3);
  j.critic.ulysses = 3;
  CHECK_THROWS_WITH(zeromem::estimate_rlhf(j), Catch::Contains("a role's own Ulysses degree must divide its GPUs") && Catch::Contains("or 0 for the job's degree"));
}

TEST_CASE("rlhf: a role's update runs its model without a KV cache, whatever its config.json says", "[rlhf]") {
  // verl's _forward_micro_batch passes use_cache=False and OpenRLHF's Actor sets config.use_cache = False, in the
  // update as in the no-grad passes. Phi-3-mini's config.json sets use_cache; with a cache its fused qkv_proj's V would
  // be the cache's copy (c sbh) and without one a view of the whole output (3 c sbh), so a cache counted in the update
  // would move the actor's peak: with 16 sequences a pass, its update is the job's peak and read 6.4 GB lower with it.
  // Without checkpointing, every phase's GPU bytes are those of the same model with use_cache false.
  zeromem::job_settings s = settings("a100-80gb", "0.6.3");
  const std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"}};
  zeromem::rlhf_job j = zeromem::read_verl(keys, s).job;
  j.actor.model = zeromem::read_hf_config(ZEROMEM_FIXTURES_DIR "/hf/phi-3-mini-4k.json");
  j.actor.gradient_checkpointing = false;
  j.actor.train_micro_batch = 16;
  REQUIRE(j.actor.model.use_cache);
  const zeromem::rlhf_estimate cached = zeromem::estimate_rlhf(j);
  j.actor.model.use_cache = false;
  const zeromem::rlhf_estimate uncached = zeromem::estimate_rlhf(j);
  REQUIRE(cached.phases.size() == uncached.phases.size());
  for (std::size_t i = 0; i < cached.phases.size(); ++i) CHECK(cached.phases[i].memory.gpu_total() == uncached.phases[i].memory.gpu_total());
  CHECK(cached.phases.back().activity == "actor update");
  // The library's training job with the cache on (the default) keeps the copy instead: its forward is 2 c sbh a layer lower.
  zeromem::activation_config a{};
  a.seq_len = 2048;
  zeromem::transformer_config phi3 = j.actor.model;
  phi3.use_cache = true;
  const std::int64_t with_cache = zeromem::layer_activation_bytes(phi3, a).total().count();
  a.forward_cache = false;
  CHECK(zeromem::layer_activation_bytes(phi3, a).total().count() - with_cache == 2LL * 2 * 2048 * 3072);
}

TEST_CASE("verl removes padding by role and release: the actor's from v0.7.0 by default, the critic's and the reward model's only "
          "when their own key says so", "[rlhf]") {
  // verl's PPO example at an assumed mean of 600 tokens: the actor's passes packed (use_remove_padding=True), 16 // 8 =
  // 2 sequences in one row of 2 x 600 = 1,200 tokens; the critic told to keep its padding runs its 2 sequences as 2 rows
  // of the maxima, 1024 + 512 = 1,536 tokens each, and its update is the training phase's peak.
  const nlohmann::json padded = job("verl-qwen2-7b-ppo.sh", {"critic.model.use_remove_padding=False", "--mean-tokens", "600"});
  const nlohmann::json& training = phase(padded, "training");
  CHECK(training["activity"] == "critic update");
  CHECK(training["terms"].dump().find("activations (2 sequences, 1536 x 2 tokens)") != std::string::npos);
  CHECK(nlohmann::json(padded["notes"]).dump().find("tokens per sequence: 600 (assumed mean), packed; the critic's padded") != std::string::npos);
  CHECK(phase(job("verl-qwen2-7b-ppo.sh", {"--mean-tokens", "600"}), "training")["terms"].dump().find("activations (2 sequences, 1200 x 1 tokens)") !=
        std::string::npos);
  // The reward model keeps its padding unless its own key removes it: 64 // 8 = 8 rows of 1,536 tokens.
  const nlohmann::json rm = job("verl-qwen2-7b-ppo.sh", {"reward_model.enable=true", "reward_model.model.path=Qwen/Qwen2-7B-Instruct",
                                                         "reward_model.micro_batch_size=64"});
  bool reward_padded = false;
  for (const auto& p : rm["phases"])
    for (const auto& t : p["terms"]) reward_padded |= t["role"] == "reward" && t["term"] == "forward peak (8 sequences, 1536 x 8 tokens)";
  CHECK(reward_padded);
  // actor_rollout_ref.model.use_remove_padding defaults to False before v0.7.0 and True from it (config/model/
  // hf_model.yaml, 561752996); unknown, False, listed as assumed.
  zeromem::job_settings s = settings("a100-80gb", "0.8.5");
  const std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                              {"critic.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                              {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4"},
                                                              {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "4"},
                                                              {"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "4"},
                                                              {"critic.ppo_micro_batch_size_per_gpu", "4"}};
  const zeromem::job_reading unknown = zeromem::read_verl(keys, s);
  CHECK_FALSE(unknown.job.packing);
  CHECK(nlohmann::json(unknown.assumed).dump().find("actor_rollout_ref.model.use_remove_padding False (verl's default before v0.7.0") != std::string::npos);
  s.verl_version = "0.6.1";
  CHECK_FALSE(zeromem::read_verl(keys, s).job.packing);
  s.verl_version = "0.7.0";
  const zeromem::job_reading v07 = zeromem::read_verl(keys, s);
  CHECK(v07.job.packing);
  CHECK(v07.job.critic.packing == std::optional<bool>(false));  // critic.model.use_remove_padding: false in v0.7.0 too
  CHECK(nlohmann::json(v07.assumed).dump().find("use_remove_padding") == std::string::npos);
  // EasyR1: worker.actor.padding_free True, worker.critic.padding_free False (workers/critic/config.py).
  const nlohmann::json easyr1 = job("easyr1-vl-7b-grpo.yaml", {"algorithm.adv_estimator=gae"});
  CHECK(nlohmann::json(easyr1["notes"]).dump().find("packed; the critic's padded") != std::string::npos);
}

TEST_CASE("EasyR1's critic passes are its own micro-batches, not the actor's", "[rlhf]") {
  // workers/critic/config.py CriticConfig: micro_batch_size_per_device_for_update 4, _for_experience 16 (the actor's
  // defaults too). 512 prompts x n 5 over 8 GPUs: 320 sequences a GPU, so neither is capped.
  zeromem::job_settings s = settings("a100-80gb", "0.7.3");
  std::vector<std::pair<std::string, std::string>> keys{{"worker.actor.model.model_path", "Qwen/Qwen2.5-7B-Instruct"},
                                                        {"algorithm.adv_estimator", "gae"},
                                                        {"data.rollout_batch_size", "512"},
                                                        {"worker.rollout.n", "5"},
                                                        {"worker.actor.micro_batch_size_per_device_for_update", "8"}};
  const zeromem::rlhf_job defaults = zeromem::read_verl(keys, s).job;
  CHECK(defaults.actor.train_micro_batch == 8);
  CHECK(defaults.critic.train_micro_batch == 4);
  CHECK(defaults.critic.forward_micro_batch == 16);
  keys.push_back({"worker.critic.micro_batch_size_per_device_for_update", "2"});
  keys.push_back({"worker.critic.micro_batch_size_per_device_for_experience", "6"});
  const zeromem::rlhf_job own = zeromem::read_verl(keys, s).job;
  CHECK(own.critic.train_micro_batch == 2);
  CHECK(own.critic.forward_micro_batch == 6);
  CHECK(own.actor.train_micro_batch == 8);
}

TEST_CASE("verl's reward model: a resource pool of its own, and the reward loop refused", "[rlhf]") {
  // trainer/main_ppo.py (v0.6.0 on): reward_model.enable_resource_pool maps Role.RewardModel to a pool of
  // reward_model.nnodes x n_gpus_per_node GPUs; RewardModelWorker divides micro_batch_size by its own world. verl's PPO
  // example on 8 GPUs with the reward model on 4 more: 12 GPUs on 2 nodes of 8, 64 // 4 = 16 sequences a pass (8 on the
  // shared pool), and the shared GPUs hold two processes (actor with rollout and reference, critic), not three.
  const std::vector<std::string> rm{"reward_model.enable=true", "reward_model.model.path=Qwen/Qwen2-7B-Instruct",
                                    "reward_model.micro_batch_size=64"};
  std::vector<std::string> pool = rm;
  pool.insert(pool.end(), {"reward_model.enable_resource_pool=true", "reward_model.nnodes=1", "reward_model.n_gpus_per_node=4"});
  const nlohmann::json apart = job("verl-qwen2-7b-ppo.sh", pool);
  CHECK(apart["gpus"] == 12);
  CHECK(apart["nodes"] == 2);
  CHECK(phase(apart, "experience")["gpus"] == "actor+critic+reference+vLLM");
  CHECK(term(phase(apart, "training"), "all", "CUDA contexts (2 processes)") > 0);
  CHECK(job("verl-qwen2-7b-ppo.sh", rm)["gpus"] == 8);
  zeromem::job_settings s = settings("a100-80gb", "0.8.5");
  s.verl_version = "0.6.1";
  std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                        {"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "4"},
                                                        {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "4"},
                                                        {"critic.ppo_micro_batch_size_per_gpu", "4"},
                                                        {"reward_model.enable", "true"},
                                                        {"reward_model.micro_batch_size", "64"},
                                                        {"reward_model.enable_resource_pool", "true"},
                                                        {"reward_model.nnodes", "1"},
                                                        {"reward_model.n_gpus_per_node", "4"}};
  const zeromem::rlhf_job j = zeromem::read_verl(keys, s).job;
  CHECK(j.reward_own_pool);
  CHECK(j.reward.gpus == 4);
  CHECK(j.reward.forward_micro_batch == 16);
  // nnodes defaults to 0, which verl raises on; the key is not in v0.5's config.
  keys.erase(std::remove_if(keys.begin(), keys.end(), [](const auto& kv) { return kv.first == "reward_model.nnodes"; }), keys.end());
  CHECK_THROWS_WITH(zeromem::read_verl(keys, s), Catch::Contains("needs reward_model.nnodes and reward_model.n_gpus_per_node above 0"));
  s.verl_version = "0.5.0";
  CHECK_THROWS_WITH(zeromem::read_verl(keys, s), Catch::Contains("reward_model.enable_resource_pool is verl's from v0.6.0"));
  // From v0.7.0 reward_model.use_reward_loop (True by default) serves the model through rollout servers: refused, with
  // the key that restores the worker; unknown releases read the worker and say so.
  const zeromem::test::cli_result loop = run_cli({"job", jobs + "verl-qwen2-7b-ppo.sh", "reward_model.enable=true", "reward_model.micro_batch_size=64",
                                                  "--verl-version", "0.7.0"});
  CHECK(loop.code == 2);
  CHECK(loop.err.find("set reward_model.use_reward_loop=False for the FSDP reward model worker") != std::string::npos);
  std::vector<std::string> worker = rm;
  worker.insert(worker.end(), {"reward_model.use_reward_loop=False", "--verl-version", "0.7.0"});
  CHECK(job("verl-qwen2-7b-ppo.sh", worker)["gpus"] == 8);
  CHECK(job("verl-qwen2-7b-ppo.sh", rm)["config"]["assumed"].dump().find("the reward model as an FSDP worker (verl before v0.7.0") !=
        std::string::npos);
}

TEST_CASE("EasyR1's dynamic batching: a pass holds its micro-batch x the padded width in real tokens", "[rlhf]") {
  // dp_actor.py / dp_critic.py: max_token_len = micro_batch_size_per_device_for_update (or _for_experience) x
  // input_ids.size(-1), split by rearrange_micro_batches into min(N, ceil(N x tokens / max_token_len)) balanced passes.
  // 512 prompts x n 5 over 8 GPUs = 320 sequences a GPU, 128 x 5 / 8 = 80 a mini-batch, 1024 + 1024 = 2048 tokens wide.
  // At a mean of 512 tokens: the update's budget 4 x 2048 = 8192 tokens takes 80 x 512 = 40,960 in 5 passes of 16
  // sequences; the experience's 16 x 2048 = 32,768 takes 320 x 512 = 163,840 in 5 passes of 64.
  zeromem::job_settings s = settings("a100-80gb", "0.7.3");
  s.mean_tokens = 512;
  std::vector<std::pair<std::string, std::string>> keys{{"worker.actor.model.model_path", "Qwen/Qwen2.5-7B-Instruct"},
                                                        {"algorithm.adv_estimator", "gae"},
                                                        {"data.rollout_batch_size", "512"},
                                                        {"data.max_prompt_length", "1024"},
                                                        {"data.max_response_length", "1024"},
                                                        {"worker.rollout.n", "5"}};
  const zeromem::job_reading dynamic = zeromem::read_verl(keys, s);
  CHECK(dynamic.job.actor.train_micro_batch == 16);
  CHECK(dynamic.job.actor.forward_micro_batch == 64);
  CHECK(dynamic.job.reference.forward_micro_batch == 64);  // workers/config.py: the reference follows the actor
  CHECK(dynamic.job.critic.train_micro_batch == 16);
  CHECK(dynamic.job.critic.forward_micro_batch == 64);
  const auto assumes = [](const zeromem::job_reading& r, const std::string& what) {
    return std::any_of(r.assumed.begin(), r.assumed.end(), [&](const std::string& a) { return a.find(what) != std::string::npos; });
  };
  CHECK(assumes(dynamic, "worker.actor.dynamic_batching True (EasyR1's default from v0.3.2"));
  CHECK(assumes(dynamic, "worker.critic.dynamic_batching True"));
  // Turned off: the fixed micro-batches, 4 and 16 (CriticConfig's and ActorConfig's defaults).
  std::vector<std::pair<std::string, std::string>> fixed_keys = keys;
  fixed_keys.insert(fixed_keys.end(), {{"worker.actor.dynamic_batching", "false"}, {"worker.critic.dynamic_batching", "false"}});
  const zeromem::job_reading fixed = zeromem::read_verl(fixed_keys, s);
  CHECK(fixed.job.actor.train_micro_batch == 4);
  CHECK(fixed.job.actor.forward_micro_batch == 16);
  CHECK(fixed.job.critic.train_micro_batch == 4);
  CHECK(fixed.job.critic.forward_micro_batch == 16);
  CHECK_FALSE(assumes(fixed, "dynamic_batching"));
  // At the maxima every sequence fills its share of the budget: the same passes, and nothing assumed.
  s.mean_tokens = 0;
  const zeromem::job_reading full = zeromem::read_verl(keys, s);
  CHECK(full.job.actor.train_micro_batch == 4);
  CHECK(full.job.critic.forward_micro_batch == 16);
  CHECK_FALSE(assumes(full, "dynamic_batching"));
}

TEST_CASE("Gradient checkpointing by default: EasyR1 always, verl from v0.2, not in verl v0.1", "[rlhf]") {
  // EasyR1 workers/actor/config.py ModelConfig.enable_gradient_checkpointing = True (the critic's ModelConfig too);
  // verl ppo_trainer.yaml: False for the actor and the critic at v0.1, True from v0.2 (9fca71d2c).
  zeromem::job_settings s = settings("a100-80gb", "0.7.3");
  const zeromem::rlhf_job easy =
      zeromem::read_verl({{"worker.actor.model.model_path", "Qwen/Qwen2.5-7B-Instruct"}, {"algorithm.adv_estimator", "gae"}}, s).job;
  CHECK(easy.actor.gradient_checkpointing);
  CHECK(easy.critic.gradient_checkpointing);
  const std::string A = "actor_rollout_ref.actor.";
  const std::vector<std::pair<std::string, std::string>> keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"},
                                                              {A + "ppo_micro_batch_size_per_gpu", "4"},
                                                              {"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "4"},
                                                              {"critic.ppo_micro_batch_size_per_gpu", "4"}};
  s.verl_version = "0.2.0";
  const zeromem::rlhf_job v02 = zeromem::read_verl(keys, s).job;
  CHECK(v02.actor.gradient_checkpointing);
  CHECK(v02.critic.gradient_checkpointing);
  s.verl_version = "0.1.0";
  std::vector<std::pair<std::string, std::string>> v01_keys{{"actor_rollout_ref.model.path", "Qwen/Qwen2.5-7B-Instruct"}};
  const zeromem::rlhf_job v01 = zeromem::read_verl(v01_keys, s).job;
  CHECK_FALSE(v01.actor.gradient_checkpointing);
  CHECK_FALSE(v01.critic.gradient_checkpointing);
  // The release unknown: v0.1's default, listed as assumed; a key given is read as given.
  s.verl_version.clear();
  const zeromem::job_reading unknown = zeromem::read_verl(v01_keys, s);
  CHECK_FALSE(unknown.job.actor.gradient_checkpointing);
  CHECK(std::find(unknown.assumed.begin(), unknown.assumed.end(),
                  "actor_rollout_ref.model.enable_gradient_checkpointing False (verl's default in v0.1; True from v0.2; pass --verl-version)") !=
        unknown.assumed.end());
  v01_keys.push_back({"critic.model.enable_gradient_checkpointing", "True"});
  CHECK(zeromem::read_verl(v01_keys, s).job.critic.gradient_checkpointing);
}

TEST_CASE("OpenRLHF under --colocate_all_models: the critic keeps its own shape on the first of the actor's GPUs", "[rlhf]") {
  // train_ppo_ray.py hands the actor's placement group to the critic's and reward model's groups, and launcher.py puts
  // rank i on bundle i: a critic of 2 GPUs shards its states over its 2 ranks on GPUs 0-1 of the actor's 8. The
  // hybrid example with a Gemma-2-9B critic (9,241,705,984 parameters, tied; its value backbone the same) on 2 GPUs:
  // its update is the training phase's peak, with bf16 gradients under ZeRO-3 of 2 B x 9,241,705,984 / 2 =
  // 9,241,705,984 B a rank (spread over the actor's 8 it would be a quarter of that, and the actor's update the peak).
  const std::vector<std::string> gemma{"critic_pretrain=gemma-2-9b"};
  std::vector<std::string> two = gemma;
  two.push_back("critic_num_gpus_per_node=2");
  const nlohmann::json on_two = job("openrlhf-llama3-8b-hybrid.args", two);
  const nlohmann::json& training = phase(on_two, "training");
  CHECK(training["activity"] == "critic update");
  CHECK(term(training, "critic", "gradients") == 9'241'705'984LL);
  CHECK(phase(job("openrlhf-llama3-8b-hybrid.args", gemma), "training")["activity"] == "actor update");
  // More ranks than the actor's GPUs have no bundle to go to.
  const zeromem::test::cli_result wide = run_cli({"job", jobs + "openrlhf-llama3-8b-hybrid.args", "critic_num_nodes=2"});
  CHECK(wide.code == 2);
  CHECK(wide.err.find("with --colocate_all_models the critic's 16 GPUs (--critic_num_nodes x --critic_num_gpus_per_node) exceed the actor's 8") !=
        std::string::npos);
  const zeromem::test::cli_result wide_reward = run_cli({"job", jobs + "openrlhf-llama3-8b-hybrid.args", "reward_num_nodes=2"});
  CHECK(wide_reward.code == 2);
  CHECK(wide_reward.err.find("the reward's 16 GPUs") != std::string::npos);
}

TEST_CASE("OpenRLHF under --colocate_all_models with --colocate_critic_reward: critic and reward on GPUs of their own", "[rlhf]") {
  // train_ppo_ray.py (v0.6.1 to v0.11.0) builds the actor's and reference's groups on the actor's placement group, then
  // replaces it with a new one of the critic's GPUs for the critic and the reward model. The hybrid example with a
  // Gemma-2-9B critic and the reward model on 2 GPUs each: 8 + 2 = 10 GPUs, the critic's update on its own group of
  // two processes, its bf16 gradients under ZeRO-3 2 B x 9,241,705,984 / 2 = 9,241,705,984 B a rank.
  const nlohmann::json own = job("openrlhf-llama3-8b-hybrid.args", {"colocate_critic_reward=", "critic_pretrain=gemma-2-9b",
                                                                     "critic_num_gpus_per_node=2", "reward_num_gpus_per_node=2"});
  CHECK(own["gpus"] == 10);
  const nlohmann::json& training = phase(own, "training");
  CHECK(training["gpus"] == "critic+reward");
  CHECK(training["activity"] == "critic update");
  CHECK(term(training, "critic", "gradients") == 9'241'705'984LL);
  CHECK(term(training, "all", "CUDA contexts (2 processes)") > 0);
  CHECK(phase(own, "rollout")["gpus"] == "actor+reference+vLLM");
  // Their placement group is not the actor's: more of their ranks than the actor's GPUs is no longer refused (OpenRLHF
  // 0.8.0, whose launch checks do not tie the critic's GPUs to the actor's): 8 + 16 = 24 GPUs on 3 nodes of 8.
  const nlohmann::json wide = job("openrlhf-llama3-8b-hybrid.args",
                                  {"colocate_critic_reward=", "critic_num_nodes=2", "reward_num_nodes=2", "--openrlhf-version", "0.8.0"});
  CHECK(wide["gpus"] == 24);
  CHECK(wide["nodes"] == 3);
}

TEST_CASE("verl with rollout.name=sglang: SGLang's KV pool, req_to_token rows and release on sleep", "[rlhf][sglang]") {
  // Logic-RL's file on A100 80GB (79.35 GiB = 85,201,413,734 B), rollout tp 1, gpu_memory_utilization 0.6 passed as
  // mem_fraction_static. The actor sleeps in host RAM and the reference is offloaded, so SGLang finds the card less
  // its CUDA context free: 85,201,413,734 - 650,969,088 = 84,550,444,646 B. Qwen2.5-7B weights 15,231,233,024 B.
  // rest = (84,550,444,646 - 15,231,233,024) - 0.4 x 84,550,444,646 = 69,319,211,622 - 33,820,177,858.4
  //      = 35,499,033,763.6 -> 35,499,033,763 B; 57,344 B per token: 619,053 tokens (619,053 x 57,344 =
  // 35,499,032,576); pool (619,053 + 1) x 57,344 = 35,499,089,920 B. max_num_seqs (verl's rollout.yaml: 256)
  // requests x (400 + 2048 + 4) int32: 256 x 2,452 x 4 = 2,510,848 B.
  const nlohmann::json j = job("logic-rl-7b-grpo.yaml", {"actor_rollout_ref.rollout.name=sglang"});
  const nlohmann::json& rollout = phase(j, "rollout");
  CHECK(term(rollout, "SGLang", "weights (bf16)") == 15'231'233'024LL);
  CHECK(term(rollout, "SGLang", "KV pool") == 35'499'089'920LL);
  CHECK(term(rollout, "SGLang", "req_to_token pool") == 2'510'848LL);
  CHECK(rollout["gpus"].get<std::string>().find("SGLang") != std::string::npos);
  // Asleep (free_cache_engine, the default) it holds nothing: no SGLang term in the training phase, on GPU or host.
  CHECK(phase(j, "training")["terms"].dump().find("SGLang") == std::string::npos);
  // max_num_seqs=1024: 1024 x 2,452 x 4 = 10,043,392 B.
  CHECK(term(phase(job("logic-rl-7b-grpo.yaml", {"actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.max_num_seqs=1024"}), "rollout"),
             "SGLang", "req_to_token pool") == 10'043'392LL);
  // mem_fraction_static 0.15: 0.15 x 84,550,444,646 < 15,231,233,024 B of weights, so SGLang refuses to start.
  const nlohmann::json low = job("logic-rl-7b-grpo.yaml", {"actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.gpu_memory_utilization=0.15"});
  CHECK_FALSE(phase(low, "rollout")["fits"].get<bool>());
  CHECK(phase(low, "rollout").dump().find("increase --mem-fraction-static") != std::string::npos);
  // --explain raises the fraction for an engine that does not start: 0.20 x 84,550,444,646 = 16,910,088,929 B > the
  // weights (a 4-prompt batch, so that training fits too).
  const nlohmann::json raised = job("logic-rl-7b-grpo.yaml", {"actor_rollout_ref.rollout.name=sglang", "actor_rollout_ref.rollout.gpu_memory_utilization=0.15",
                                                             "data.train_batch_size=4", "--explain"});
  bool fits_at_020 = false;
  for (const auto& fix : raised["fixes"])
    if (fix["change"] == "actor_rollout_ref.rollout.gpu_memory_utilization=0.20") fits_at_020 = fix["fits"].get<bool>();
  CHECK(fits_at_020);
  // Engines that are not modelled are errors naming the key.
  const zeromem::test::cli_result other = run_cli({"job", jobs + "logic-rl-7b-grpo.yaml", "actor_rollout_ref.rollout.name=hf"});
  CHECK(other.code == 2);
  CHECK(other.err.find("actor_rollout_ref.rollout.name 'hf' is not modelled; use vllm or sglang") != std::string::npos);
}

TEST_CASE("a launch file's model path may be a local model directory or its config.json: the same job as the preset", "[rlhf][hf]") {
  // ORZ's file names Qwen/Qwen2.5-1.5B, which zeromem matches to the qwen2.5-1.5b preset; the published config.json
  // of that model (tests/data/calibration/configs/qwen2.5-1.5b) describes the same architecture, so the three readings
  // must give the same phases byte for byte.
  const std::string published = std::string(ZEROMEM_EXAMPLES_DIR) + "/jobs/orz-1.5b-ppo.args";
  std::ifstream in(published);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto with_model = [&](const std::string& path, const std::string& file_name) {
    std::string t = text;
    for (std::size_t at = t.find("Qwen/Qwen2.5-1.5B"); at != std::string::npos; at = t.find("Qwen/Qwen2.5-1.5B", at + path.size()))
      t.replace(at, std::string("Qwen/Qwen2.5-1.5B").size(), path);
    const std::string file = (std::filesystem::temp_directory_path() / file_name).string();
    std::ofstream(file) << t;
    return file;
  };
  // Under a name no preset starts with, so that only its config.json can say what it is.
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "zeromem-my-finetune";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(ZEROMEM_DATA_DIR) + "/calibration/configs/qwen2.5-1.5b/config.json", dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string by_dir = with_model(dir.string(), "zeromem-orz-by-dir.args"),
                    by_file = with_model((dir / "config.json").string(), "zeromem-orz-by-file.args");
  const nlohmann::json preset = run_cli_json({"job", published}), directory = run_cli_json({"job", by_dir}),
                       config = run_cli_json({"job", by_file});
  CHECK(directory["phases"] == preset["phases"]);
  CHECK(config["phases"] == preset["phases"]);
  CHECK(directory["fits"] == preset["fits"]);
  // Without its config.json the directory is a path zeromem cannot place: one clear error.
  std::filesystem::remove(dir / "config.json");
  const zeromem::test::cli_result unknown = run_cli({"job", by_dir});
  CHECK(unknown.code == 2);
  CHECK(unknown.err.find("cannot tell the architecture of '" + dir.string() + "' (--pretrain); point it to a directory with config.json") !=
        std::string::npos);
  std::filesystem::remove_all(dir);
  std::filesystem::remove(by_dir);
  std::filesystem::remove(by_file);
}
