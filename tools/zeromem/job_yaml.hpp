// YAML launch configs (verl, EasyR1) as dotted keys, for `zeromem job`. yaml-cpp stays behind this header.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace zeromem::cli {

using config_pairs = std::vector<std::pair<std::string, std::string>>;

/// The path names a YAML file (.yaml, .yml).
bool is_yaml(const std::string& path);
/// The YAML document `text` (read from `file`) as dotted keys with scalar values; a sequence becomes its flow
/// text ("[a, b]"). Throws naming the file when the YAML does not parse.
config_pairs yaml_keys(const std::string& text, const std::string& file);
/// OmegaConf interpolations of whole values, `${data.max_prompt_length}` and `${oc.select:key,default}`, resolved
/// against the other keys.
void resolve_interpolations(config_pairs& kv);

}  // namespace zeromem::cli
