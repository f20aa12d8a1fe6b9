// YAML launch configs as dotted keys (job_yaml.hpp).
#include "job_yaml.hpp"

#include <yaml-cpp/yaml.h>

#include <map>
#include <optional>

#include "zeromem/core/error.hpp"

namespace zeromem::cli {

bool is_yaml(const std::string& path) {
  const auto ends = [&](const std::string& e) { return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0; };
  return ends(".yaml") || ends(".yml");
}

namespace {

void flatten(const YAML::Node& n, const std::string& prefix, config_pairs& out) {
  if (n.IsMap()) {
    for (const auto& kv : n) flatten(kv.second, prefix.empty() ? kv.first.as<std::string>() : prefix + "." + kv.first.as<std::string>(), out);
  } else if (n.IsScalar()) {
    out.emplace_back(prefix, n.as<std::string>());
  } else if (n.IsNull()) {
    out.emplace_back(prefix, "null");
  } else {
    YAML::Emitter e;
    e << YAML::Flow << n;
    out.emplace_back(prefix, e.c_str());
  }
}

}  // namespace

config_pairs yaml_keys(const std::string& text, const std::string& file) {
  config_pairs kv;
  try {
    flatten(YAML::Load(text), "", kv);
  } catch (const YAML::Exception& e) {
    detail::fail("cannot read the YAML in " + detail::quoted(file) + ": " + e.what());
  }
  return kv;
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
