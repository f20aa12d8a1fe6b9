// A separate program that reads a config.json and a DeepSpeed config through the optional component (zeromem::hf_config).
#include <zeromem/engines/deepspeed_config.hpp>
#include <zeromem/model/hf_config.hpp>

#include <cstdio>

int main() {
  // GPT-2 small's config.json fields: 124,439,808 parameters (transformers num_parameters()).
  const zeromem::transformer_config m = zeromem::parse_hf_config(
      R"({"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257, "n_positions": 1024})");
  const long long n = zeromem::count_parameters(m).total.count();
  // A ZeRO-3 config with the optimizer offloaded: the stage and the device as written.
  const zeromem::deepspeed_config ds =
      zeromem::parse_deepspeed_config(R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}}})");
  std::printf("zeromem hf_config consumer: GPT-2 %lld parameters; DeepSpeed ZeRO stage %d\n", n, ds.zero_stage.value);
  return n == 124'439'808 && ds.zero_stage.value == 3 && ds.offload_optimizer.value == zeromem::offload_device::cpu ? 0 : 1;
}
