// A separate program that reads a config.json through the optional component (zeromem::hf_config).
#include <zeromem/model/hf_config.hpp>

#include <cstdio>

int main() {
  // GPT-2 small's config.json fields: 124,439,808 parameters (transformers num_parameters()).
  const zeromem::transformer_config m = zeromem::parse_hf_config(
      R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024})");
  const long long n = zeromem::count_parameters(m).total.count();
  std::printf("zeromem hf_config consumer: GPT-2 %lld parameters\n", n);
  return n == 124'439'808 ? 0 : 1;
}
