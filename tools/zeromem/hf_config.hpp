// Reads a Hugging Face config.json into a transformer_config (Llama, Mistral, Qwen2, Qwen2.5-VL, GPT-2).
#pragma once

#include <string>

#include "zeromem/model.hpp"

namespace zeromem::cli {

/// Parses config.json text. Throws std::invalid_argument ("zeromem: config.json: ...") for malformed JSON,
/// an unsupported model_type, or a missing or mistyped field.
transformer_config parse_hf_config(const std::string& json_text);

/// Reads and parses a config.json file.
transformer_config read_hf_config(const std::string& path);

}  // namespace zeromem::cli
