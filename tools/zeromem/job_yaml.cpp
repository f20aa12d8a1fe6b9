// YAML launch configs as dotted keys (job_yaml.hpp).
#include "job_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "zeromem/core/error.hpp"

namespace zeromem::cli {

bool is_yaml(const std::string& path) {
  const auto ends = [&](const std::string& e) { return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0; };
  return ends(".yaml") || ends(".yml");
}

namespace {

// Aliases make a YAML file a graph: an anchor referred to inside itself (`a: &a {b: *a}`) would be walked forever, and
// aliases of aliases expand a few lines into billions of nodes. The walk refuses a map that contains itself and stops
// past this many nodes (a verl config has a few hundred).
constexpr std::size_t max_yaml_nodes = 100'000;

// A plain (unquoted) `<<` key: YAML 1.1's merge key. A quoted "<<" is an ordinary key.
bool is_merge_key(const YAML::Node& key) { return key.IsScalar() && key.Tag() == "?" && key.Scalar() == "<<"; }

struct yaml_walk {
  const std::string& file;
  config_pairs out{};
  std::vector<YAML::Node> maps{};  // the maps enclosing the node walked
  std::size_t nodes = 0;

  // A map's entries with YAML's merge key (`<<: *defaults`, or a list of aliases) applied, as PyYAML applies it for
  // OmegaConf, through which verl and EasyR1 read their configs (constructor.py flatten_mapping); yaml-cpp leaves it
  // a key named "<<". The merged maps' entries join the map's own, shallowly: its own keys win, and among merged maps
  // the earlier one; merges inside a merged map count as its own entries.
  std::vector<std::pair<std::string, YAML::Node>> entries(const YAML::Node& map, const std::string& prefix) {
    std::vector<std::pair<std::string, YAML::Node>> own, merged;
    for (const auto& kv : map) {
      if (++nodes > max_yaml_nodes)
        detail::fail("the YAML in " + detail::quoted(file) + " expands to more than " + std::to_string(max_yaml_nodes) +
                     " nodes (aliases of aliases); a launch config has hundreds");
      if (!is_merge_key(kv.first)) {
        own.emplace_back(kv.first.as<std::string>(), kv.second);
        continue;
      }
      const std::string where = prefix.empty() ? "the top level" : detail::quoted(prefix);
      const std::vector<YAML::Node> sources = kv.second.IsSequence() ? std::vector<YAML::Node>(kv.second.begin(), kv.second.end())
                                                                      : std::vector<YAML::Node>{kv.second};
      for (const YAML::Node& m : sources) {
        if (!m.IsMap())
          detail::fail("the YAML in " + detail::quoted(file) + " merges (<<) a value that is not a map into " + where +
                       "; merge an anchored map (<<: *name) or a list of them");
        if (m.is(map) || std::any_of(maps.begin(), maps.end(), [&](const YAML::Node& e) { return e.is(m); }))
          detail::fail("the YAML in " + detail::quoted(file) + " merges a map into itself at " + where +
                       " (an alias of an enclosing anchor); a launch config is a tree");
        maps.push_back(m);
        for (auto& e : entries(m, prefix)) merged.push_back(std::move(e));
        maps.pop_back();
      }
    }
    if (merged.empty()) return own;
    std::set<std::string> taken;
    for (const auto& e : own) taken.insert(e.first);
    std::vector<std::pair<std::string, YAML::Node>> all;
    for (auto& e : merged)
      if (taken.insert(e.first).second) all.push_back(std::move(e));
    for (auto& e : own) all.push_back(std::move(e));
    return all;
  }

  void flatten(const YAML::Node& n, const std::string& prefix) {
    if (++nodes > max_yaml_nodes)
      detail::fail("the YAML in " + detail::quoted(file) + " expands to more than " + std::to_string(max_yaml_nodes) +
                   " nodes (aliases of aliases); a launch config has hundreds");
    if (n.IsMap()) {
      for (const YAML::Node& enclosing : maps)
        if (enclosing.is(n))
          detail::fail("the YAML in " + detail::quoted(file) + " refers to a map inside itself at " + detail::quoted(prefix) +
                       " (an alias of an enclosing anchor); a launch config is a tree");
      maps.push_back(n);
      for (const auto& [key, value] : entries(n, prefix))
        flatten(value, prefix.empty() ? key : prefix + "." + key);
      maps.pop_back();
    } else if (n.IsScalar()) {
      out.emplace_back(prefix, n.as<std::string>());
    } else if (n.IsNull()) {
      out.emplace_back(prefix, "null");
    } else {  // a sequence, as one value (the emitter writes a node met twice as an alias)
      YAML::Emitter e;
      e << YAML::Flow << n;
      out.emplace_back(prefix, e.c_str());
    }
  }
};

}  // namespace

config_pairs yaml_keys(const std::string& text, const std::string& file) {
  yaml_walk walk{file};
  try {
    walk.flatten(YAML::Load(text), "");
  } catch (const YAML::Exception& e) {
    detail::fail("cannot read the YAML in " + detail::quoted(file) + ": " + e.what());
  }
  return std::move(walk.out);
}

void resolve_interpolations(config_pairs& kv) {
  std::map<std::string, std::string> by_key(kv.begin(), kv.end());
  for (auto& p : kv) {
    for (int depth = 0; depth < 8 && p.second.size() > 3 && p.second.rfind("${", 0) == 0 && p.second.back() == '}'; ++depth) {
      std::string target = p.second.substr(2, p.second.size() - 3);
      std::optional<std::string> fallback;  // ${oc.select:key,default}: the key's value, or the default without it
      if (target.rfind("oc.select:", 0) == 0) {
        target.erase(0, 10);
        const std::size_t comma = target.find(',');
        if (comma != std::string::npos) {
          fallback = target.substr(comma + 1);
          target.erase(comma);
        }
      }
      const auto it = by_key.find(target);
      if (it == by_key.end() && !fallback) detail::fail(p.first + " refers to " + detail::quoted(target) + ", which the config does not have");
      p.second = it != by_key.end() ? it->second : *fallback;
    }
  }
}

}  // namespace zeromem::cli
