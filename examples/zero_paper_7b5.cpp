// The ZeRO paper's running example (arXiv 1910.02054, Fig. 1 and Table 1): a 7.5B-parameter model trained
// with mixed-precision Adam on 64 data-parallel GPUs, under each ZeRO stage, and with ZeRO-Offload.
#include <cstdio>

#include "zeromem/zeromem.hpp"

int main() {
  using namespace zeromem;
  using namespace zeromem::literals;
  using namespace zeromem::devices;  // cpu, nvme

  training_states t{};
  t.params = 7.5_Gparams;
  t.recipe = recipe_of(precision::mixed_fp16);
  t.optimizer.kind = optimizer_kind::adam;
  t.dp = 64;
  t.gpus_per_node = 8;

  std::printf("7.5B parameters, mixed-precision Adam (K = 12 B/param), 64 data-parallel GPUs, 8 per node\n\n");
  std::printf("%-26s %14s %14s %14s %14s %14s\n", "configuration", "weights", "gradients", "optimizer", "per GPU",
              "host per node");
  const auto row = [](const char* label, const model_state_estimate& e) {
    const model_state_terms& m = e.per_rank;
    std::printf("%-26s %14s %14s %14s %14s %14s\n", label, format_bytes(m.weights.gpu, size_unit::GB).c_str(),
                format_bytes(m.gradients.gpu + m.fp32_gradients.gpu, size_unit::GB).c_str(),
                format_bytes(m.master_weights.gpu + m.optimizer_moments.gpu, size_unit::GB).c_str(),
                format_bytes(e.gpu(), size_unit::GB).c_str(), format_bytes(e.host_per_node(), size_unit::GB).c_str());
  };
  for (int stage = 0; stage <= 3; ++stage) {
    t.zero = zero_config{};
    t.zero.stage = stage;
    char label[32];
    std::snprintf(label, sizeof label, "ZeRO stage %d", stage);
    row(label, estimate_model_states(t));
  }
  t.zero = zero<2, offload_optimizer<cpu>>::config();
  row("ZeRO-2 + optimizer on CPU", estimate_model_states(t));
  t.zero = zero<3, offload_params<cpu>, offload_optimizer<cpu>>::config();
  row("ZeRO-3 + params, optim CPU", estimate_model_states(t));
  std::printf("\nGB = 1e9 B. The paper's Figure 1 gives 120, 31.4, 16.6 and 1.9 GB for stages 0-3.\n");
  return 0;
}
