// `zeromem job --explain`: the usual fixes of an RLHF launch, each an override of the launch file tried on the job.
#include <algorithm>
#include <charconv>
#include <cstdint>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "job.hpp"

namespace zeromem::cli {
namespace {
// An override's value as JSON: true/false (YAML's True/False too), an integer, a decimal, else the text as written.
json typed(const std::string& v) {
  if (v == "true" || v == "True") return true;
  if (v == "false" || v == "False") return false;
  std::int64_t i = 0;
  if (const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), i); ec == std::errc{} && end == v.data() + v.size() && !v.empty())
    return i;
  const bool decimal = !v.empty() && v.find_first_not_of("0123456789.") == std::string::npos && std::count(v.begin(), v.end(), '.') == 1 &&
                       v.front() != '.' && v.back() != '.';
  return decimal ? json(std::stod(v)) : json(v);
}
}  // namespace

std::vector<fix> suggest_fixes(const job_args& a, const job_reading& r, const rlhf_estimate& before) {
  const rlhf_job& j = r.job;
  const bool openrlhf = j.framework == rlhf_framework::openrlhf;
  const bool easyr1 = std::any_of(r.read.begin(), r.read.end(), [](const std::string& k) { return k.rfind("worker.", 0) == 0; });
  std::vector<std::vector<std::string>> groups;  // each group: alternatives from the mildest; the first that fits is shown
  const auto key = [&](const char* o, const char* v, const char* e) {
    return openrlhf ? detail::openrlhf_spelling(o, r.grouped_names) : std::string(easyr1 ? e : v);
  };
  // DeepSpeed 0.16.x's ZeRO-3 keeps what a checkpointed backward gathers (DeepSpeed issue #7116); 0.17 releases it.
  if (detail::walks_zero3_checkpointing_leak(j, j.actor) || detail::walks_zero3_checkpointing_leak(j, j.critic))
    groups.push_back({"--deepspeed-version 0.17.0"});
  if (j.rollout.present) {
    // Lower the utilization; when the engine does not start at all (no room left for its KV cache), raise it.
    const auto utilization = [&](int u) {
      return key("vllm_gpu_memory_utilization", "actor_rollout_ref.rollout.gpu_memory_utilization", "worker.rollout.gpu_memory_utilization") +
             "=" + std::to_string(u / 20) + "." + (u % 20 * 5 < 10 ? "0" : "") + std::to_string(u % 20 * 5);
    };
    const int now = static_cast<int>(j.rollout.gpu_memory_utilization * 20 + 1e-9);
    std::vector<std::string> g;
    for (int u = now - 1; u >= 2; --u) g.push_back(utilization(u));
    groups.push_back(g);
    if (std::any_of(before.phases.begin(), before.phases.end(), [](const rlhf_phase_estimate& p) { return !p.blocked.empty(); })) {
      std::vector<std::string> up;
      for (int u = now + 1; u <= 19; ++u) up.push_back(utilization(u));
      if (!up.empty()) groups.push_back(up);
    }
    // The rollout breaks: more tensor parallelism, each engine's weights and KV cache over more GPUs (up to a node's),
    // on the same GPUs (OpenRLHF: as many fewer engines; verl and EasyR1 make world / tp engines themselves).
    const bool rollout_breaks = std::any_of(before.phases.begin(), before.phases.end(), [](const rlhf_phase_estimate& p) {
      return !p.blocked.empty() || (p.phase == rlhf_phase::rollout && !p.fits());
    });
    if (rollout_breaks) {
      std::vector<std::string> wider;
      const std::int64_t engine_gpus = detail::checked_mul(j.rollout.engines, j.rollout.tp);
      for (std::int64_t tp = j.rollout.tp; tp <= j.gpus_per_node / 2;)  // doubled below, within the node (no overflow)
        if (tp *= 2; !openrlhf)
          wider.push_back(key("", "actor_rollout_ref.rollout.tensor_model_parallel_size", "worker.rollout.tensor_parallel_size") + "=" + std::to_string(tp));
        else if (engine_gpus % tp == 0)
          wider.push_back(key("vllm_tensor_parallel_size", "", "") + "=" + std::to_string(tp) + " " + key("vllm_num_engines", "", "") + "=" +
                          std::to_string(engine_gpus / tp));
      if (!wider.empty()) groups.push_back(wider);
    }
  }
  if (openrlhf && j.colocate_all) {
    if (j.rollout.present && j.rollout.sleep_level == 0) groups.push_back({key("vllm_enable_sleep", "", "") + "="});
    if (!j.actor.sleep_params) groups.push_back({key("deepspeed_enable_sleep", "", "") + "="});
  }
  if (openrlhf && !j.actor.adam_offload) groups.push_back({key("adam_offload", "", "") + "="});
  if (!openrlhf) {
    const std::string A = easyr1 ? "worker.actor.offload." : "actor_rollout_ref.actor.fsdp_config.";
    const std::string P = easyr1 ? "offload_params" : "param_offload", O = easyr1 ? "offload_optimizer" : "optimizer_offload";
    const char* flip[] = {"false", "true"};
    groups.push_back({A + P + "=" + flip[!j.actor.sleep_params]});
    groups.push_back({A + O + "=" + flip[!j.actor.sleep_optimizer]});
  }
  // verl LoRA: gather the actor layer by layer for the sync instead of whole (layered_summon needs the base preloaded).
  if (j.lora_sync.whole_model)
    groups.push_back({"actor_rollout_ref.rollout.layered_summon=True actor_rollout_ref.rollout.load_format=safetensors"});
  if (!j.actor.gradient_checkpointing)
    groups.push_back({key("gradient_checkpointing", "actor_rollout_ref.model.enable_gradient_checkpointing", "worker.actor.model.enable_gradient_checkpointing") +
                      (openrlhf ? "=" : "=true")});
  if (r.actor_token_budget > 0) {  // dynamic batches: a smaller token budget per pass, down to one sequence
    std::vector<std::string> g;
    for (std::int64_t t = r.actor_token_budget / 2; t >= detail::longest_sequence(j); t /= 2)
      g.push_back(r.token_budget_key + "=" + std::to_string(t));
    if (!g.empty()) groups.push_back(g);
  } else {
    std::vector<std::string> g;
    for (std::int64_t m = j.actor.train_micro_batch / 2; m >= 1; m /= 2) {
      if (openrlhf) g.push_back(key("micro_train_batch_size", "", "") + "=" + std::to_string(m));
      else if (easyr1) g.push_back("worker.actor.micro_batch_size_per_device_for_update=" + std::to_string(m));
      else if (m % r.micro_divisor == 0)  // verl: in the config's own key (job_reading::micro_key)
        g.push_back(r.micro_prefix + r.micro_key + "=" + std::to_string(m / r.micro_divisor * r.micro_scale));
    }
    if (!g.empty()) groups.push_back(g);
  }
  // Sizes halved together, a step at a time, each key down to its least valid size (job_reading::size_key).
  const auto halved = [](const std::vector<job_reading::size_key>& sizes) {
    std::vector<std::string> g;
    for (int halvings = 1; halvings < 63 && !sizes.empty(); ++halvings) {  // a shift below 64 bits
      std::string change;
      bool smaller = false;
      for (const job_reading::size_key& f : sizes) {
        const std::int64_t was = std::max(f.least, f.now >> (halvings - 1)), size = std::max(f.least, f.now >> halvings);
        smaller |= size < was;
        change += (change.empty() ? "" : " ") + f.key + "=" + std::to_string(size);
      }
      if (!smaller) break;
      g.push_back(change);
    }
    return g;
  };
  const auto breaks = [&](rlhf_phase phase) {
    return std::any_of(before.phases.begin(), before.phases.end(), [&](const rlhf_phase_estimate& p) { return p.phase == phase && !p.fits(); });
  };
  // Training breaks: verl's and EasyR1's critic update in its own keys (the actor's is above).
  if (breaks(rlhf_phase::training))
    if (std::vector<std::string> g = halved(r.critic_update_sizes); !g.empty()) groups.push_back(g);
  // Experience making breaks: its forward-only passes (log-probs, reference, values, rewards) halved together.
  if (breaks(rlhf_phase::experience))
    if (std::vector<std::string> g = halved(r.forward_sizes); !g.empty()) groups.push_back(g);
  // A change: key=value words (and --setting value pairs) separated by spaces.
  const auto words_of = [](const std::string& change) {
    std::vector<std::string> words;
    for (std::size_t from = 0; from < change.size();) {
      const std::size_t to = std::min(change.find(' ', from), change.size());
      words.push_back(change.substr(from, to - from));
      from = to + 1;
    }
    return words;
  };
  // As the user would write it. OpenRLHF: --key value (--flag for a bare flag); a setting as it is given.
  const auto shown_of = [&](const std::string& change) {
    std::string shown;
    for (const std::string& w : words_of(change))
      shown += (shown.empty() ? "" : " ") +
               (!openrlhf || w.find('=') == std::string::npos
                    ? w
                    : "--" + (w.back() == '=' ? w.substr(0, w.size() - 1) : w.substr(0, w.find('=')) + " " + w.substr(w.find('=') + 1)));
    return shown;
  };
  // What a change sets (fix::set): each key=value word, and a zeromem setting (--setting value) as it is given.
  const auto set_of = [&](const std::string& change) {
    json set = json::array();
    const std::vector<std::string> words = words_of(change);
    for (std::size_t i = 0; i < words.size(); ++i) {
      const std::string& w = words[i];
      const std::size_t eq = w.find('=');
      if (w.rfind("--", 0) == 0 && eq == std::string::npos && i + 1 < words.size()) set.push_back({{"setting", w}, {"value", typed(words[++i])}});
      else if (openrlhf) set.push_back({{"flag", "--" + w.substr(0, eq)}, {"value", eq + 1 == w.size() ? json(true) : typed(w.substr(eq + 1))}});
      else set.push_back({{"key", w.substr(0, eq)}, {"value", typed(w.substr(eq + 1))}});
    }
    return set;
  };
  // A change tried on the job: whether every phase then fits; none where it is not valid for the job (a micro-batch
  // the batch does not divide, ...).
  const auto attempt = [&](const std::string& change) -> std::optional<fix> {
    job_args tried = with_case_words(a, words_of(change));
    tried.explain = false;
    try {
      return fix{shown_of(change), estimate_rlhf(read_job(tried).job).fits(), {}, set_of(change)};
    } catch (const std::exception&) {
      return std::nullopt;
    }
  };
  std::vector<fix> out;
  for (const std::vector<std::string>& g : groups) {  // the first that fits, else the last valid one
    std::optional<fix> last;
    for (const std::string& o : g)
      if (const std::optional<fix> f = attempt(o)) {
        last = f;
        if (f->fits) break;
      }
    if (last) out.push_back(*last);
  }
  // More GPUs: the job's nodes times `factor` (verl's trainer.nnodes; OpenRLHF's every model's, which keeps the shapes
  // its colocations assert). OpenRLHF's engines grow with them only with every model colocated, where they must span
  // the actor's GPUs; on GPUs of their own more engines hold no less each.
  const auto more_gpus = [&](std::int64_t factor) {
    std::string more = key("actor_num_nodes", "trainer.nnodes", "trainer.nnodes") + "=" + std::to_string(detail::checked_mul(j.nodes, factor));
    if (openrlhf && j.colocate_all && j.rollout.present)
      more += " " + key("vllm_num_engines", "", "") + "=" + std::to_string(detail::checked_mul(j.rollout.engines, factor));
    for (const auto& [nodes_key, nodes] : r.other_nodes) more += " " + nodes_key + "=" + std::to_string(detail::checked_mul(nodes, factor));
    // OpenRLHF without dynamic batches: the GPUs must still divide train_batch_size x ring by micro x GPUs (DeepSpeed's
    // batch assertion). Where the passes do not split by `factor`, the same global batch in micro-batches as much
    // smaller, else a batch as much larger: each tried only if the ones before it are refused.
    std::vector<std::string> ways{more};
    const std::int64_t short_by = factor / std::gcd(j.actor.accumulation_steps, factor);
    if (openrlhf && r.actor_token_budget == 0 && short_by > 1) {
      if (j.actor.train_micro_batch % short_by == 0)
        ways.push_back(more + " " + key("micro_train_batch_size", "", "") + "=" + std::to_string(j.actor.train_micro_batch / short_by));
      const std::int64_t train_batch = detail::checked_product(j.actor.accumulation_steps, j.actor.train_micro_batch, j.actor.gpus) / j.ulysses;
      ways.push_back(more + " " + key("train_batch_size", "", "") + "=" + std::to_string(detail::checked_mul(train_batch, short_by)));
    }
    for (const std::string& w : ways)  // the first valid way, as written and as tried
      if (const std::optional<fix> f = attempt(w)) return std::optional<std::pair<std::string, fix>>{{w, *f}};
    return std::optional<std::pair<std::string, fix>>{};
  };
  // Twice the nodes, then four times, ...: the fewest (the actor on up to max_gpus GPUs) at which every phase fits;
  // where none does, twice the nodes, said not to fit.
  constexpr std::int64_t max_gpus = 16384;
  std::vector<std::string> more_ways;  // the first valid way at each factor, for the pairs below
  std::optional<fix> twice, fewest;
  for (std::int64_t factor = 2; j.actor.gpus <= max_gpus / factor; factor *= 2)
    if (const auto m = more_gpus(factor)) {
      more_ways.push_back(m->first);
      if (!twice) twice = m->second;
      if (m->second.fits) {
        fewest = m->second;
        break;
      }
    }
  if (fewest) out.push_back(*fewest);
  else if (twice) out.push_back(*twice);
  if (std::any_of(out.begin(), out.end(), [](const fix& f) { return f.fits; })) return out;
  // No change fits alone: the first two that fit together, else the first three. Mildest first: the kinds in the
  // list's order (a set ordered by its last kind, then the one before, ...), within each kind its alternatives in
  // order; only changes that set different keys. Sets of three stop after max_triples_tried (job.hpp).
  std::vector<std::vector<std::string>> kinds = groups;
  kinds.push_back(more_ways);
  const auto keys_of = [&](const std::string& change) {
    std::vector<std::string> keys;
    for (const std::string& w : words_of(change)) keys.push_back(w.substr(0, w.find('=')));
    return keys;
  };
  const auto overlap = [&](const std::string& x, const std::vector<std::string>& chosen) {
    const std::vector<std::string> kx = keys_of(x);
    return std::any_of(chosen.begin(), chosen.end(), [&](const std::string& y) {
      const std::vector<std::string> ky = keys_of(y);
      return std::any_of(kx.begin(), kx.end(), [&](const std::string& k) { return std::find(ky.begin(), ky.end(), k) != ky.end(); });
    });
  };
  for (std::size_t size = 2; size <= 3 && size <= kinds.size(); ++size) {
    std::size_t tries_left = size == 2 ? SIZE_MAX : max_triples_tried;
    std::vector<std::size_t> set(size);
    std::iota(set.begin(), set.end(), std::size_t{0});
    std::vector<std::string> chosen;
    // The alternatives of set[i], set[i + 1], ... after `chosen`: the first combination that fits.
    const auto pick = [&](const auto& self, std::size_t i) -> bool {
      if (i == size) {
        if (tries_left == 0) return false;
        --tries_left;
        std::string change;
        for (const std::string& c : chosen) change += (change.empty() ? "" : " ") + c;
        const std::optional<fix> f = attempt(change);
        if (!f || !f->fits) return false;
        std::vector<std::string> shown;
        for (const std::string& c : chosen) shown.push_back(shown_of(c));
        out.push_back({f->change, true, shown, f->set});
        return true;
      }
      for (const std::string& x : kinds[set[i]]) {
        if (overlap(x, chosen)) continue;
        chosen.push_back(x);
        const bool found = self(self, i + 1);
        chosen.pop_back();
        if (found) return true;
      }
      return false;
    };
    while (set.back() < kinds.size() && tries_left > 0) {
      if (pick(pick, 0)) return out;
      std::size_t i = 0;  // the next set in that order: raise the first index that can rise, lower the ones before it
      for (; i + 1 < size && set[i] + 1 == set[i + 1]; ++i) set[i] = i;
      ++set[i];
    }
  }
  return out;
}

}  // namespace zeromem::cli
