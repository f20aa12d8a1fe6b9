// libFuzzer target: the DeepSpeed config reader must either return what it read or throw zeromem's errors.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "zeromem/engines/deepspeed_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zeromem::deepspeed_config c = zeromem::parse_deepspeed_config(text);
    // What it read is in range: a stage 0-3, counts of at least 1 where DeepSpeed asks for them.
    if (c.zero_stage.is_set() && (c.zero_stage.value < 0 || c.zero_stage.value > 3)) __builtin_trap();
    if (c.micro_batch.is_set() && c.micro_batch.value < 1) __builtin_trap();
  } catch (const std::invalid_argument&) {
  }
  return 0;  // any other exception, crash, leak or undefined behaviour is a finding
}
