// The launch files of examples/jobs, compiled into the program (tools/CMakeLists.txt generates their table), so
// `zeromem scenario NAME` evaluates the same files a user runs with `zeromem job` wherever the program is.
#pragma once

#include <string>
#include <vector>

namespace zeromem::cli {

struct embedded_file {
  std::string name;  // the file name, such as orz-1.5b-ppo.args
  std::string text;
};

/// Every file of examples/jobs, by name.
const std::vector<embedded_file>& embedded_jobs();

}  // namespace zeromem::cli
