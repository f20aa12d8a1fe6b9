// libFuzzer target: the config.json reader must either return a valid model or throw zeromem's errors.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "zeromem/model/hf_config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    const zeromem::transformer_config m = zeromem::parse_hf_config(text);
    (void)zeromem::count_parameters(m);
  } catch (const std::invalid_argument&) {
  } catch (const std::overflow_error&) {
  }
  return 0;  // any other exception, crash, leak or undefined behaviour is a finding
}
