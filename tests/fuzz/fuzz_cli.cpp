// libFuzzer target: the command line, one argument per input line. Every input must end in exit code 0 or 2.
// --svg FILE (and --svg=FILE) writes to /dev/null whatever FILE the fuzzer made: the chart is still drawn and written,
// but no input can create or overwrite a file in the working directory or anywhere else.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (text.find("--hf-config") != std::string::npos) return 0;  // file reading is fuzzed by fuzz_hf_config
  std::vector<std::string> args;
  std::string::size_type start = 0;
  while (start <= text.size()) {
    const auto end = text.find('\n', start);
    args.push_back(text.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--svg" && i + 1 < args.size() && args[i + 1].rfind("--", 0) != 0) args[++i] = "/dev/null";  // "--x": an option
    else if (args[i].rfind("--svg=", 0) == 0) args[i] = "--svg=/dev/null";
  }
  std::ostringstream out, err;
  const int code = zeromem::cli::run(args, out, err);
  if (code != 0 && code != 2) std::abort();
  if (code == 2 && (err.str().empty() || err.str().find('\n') != err.str().size() - 1)) std::abort();  // one line
  return 0;
}
