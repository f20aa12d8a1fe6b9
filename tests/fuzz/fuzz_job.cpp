// libFuzzer target: a launch file as `zeromem job FILE` reads it. The first byte picks the kind: 'y' or 'Y' a verl/EasyR1
// YAML config, anything else an OpenRLHF argument file or a shell script with a verl command line; an upper-case letter
// adds --json. The rest is the file's text. Every input must end in exit code 0, or 2 with one line on stderr.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>
#include <unistd.h>

#include "cli.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const char kind = static_cast<char>(data[0]);
  const bool yaml = kind == 'y' || kind == 'Y', json = kind >= 'A' && kind <= 'Z';
  // Two files per process, rewritten for each input: the reader takes a path, and its extension says YAML or not.
  // Removed when the process exits.
  struct temporary_files {
    std::string stem = (std::filesystem::temp_directory_path() / ("zeromem-fuzz-job-" + std::to_string(::getpid()))).string();
    ~temporary_files() {
      std::error_code ignored;
      std::filesystem::remove(stem + ".yaml", ignored);
      std::filesystem::remove(stem + ".args", ignored);
    }
  };
  static const temporary_files files;
  const std::string file = files.stem + (yaml ? ".yaml" : ".args");
  {
    std::ofstream f(file, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data + 1), static_cast<std::streamsize>(size - 1));
  }
  std::ostringstream out, err;
  const int code = zeromem::cli::run(json ? std::vector<std::string>{"job", file, "--json"} : std::vector<std::string>{"job", file}, out, err);
  if (code != 0 && code != 2) std::abort();
  if (code == 2 && (err.str().empty() || err.str().find('\n') != err.str().size() - 1)) std::abort();  // one line
  return 0;
}
