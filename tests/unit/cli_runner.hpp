// The zeromem program run in-process by the unit tests: exit code, stdout and stderr of one invocation.
#pragma once

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "catch.hpp"
#include "cli.hpp"

namespace zeromem::test {

struct cli_result {
  int code;
  std::string out, err;
};

inline cli_result run_cli(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = zeromem::cli::run(args, out, err);
  return {code, out.str(), err.str()};
}

/// Runs with --json appended; the run must succeed.
inline nlohmann::json run_cli_json(std::vector<std::string> args) {
  args.push_back("--json");
  const cli_result r = run_cli(args);
  INFO(r.err);
  REQUIRE(r.code == 0);
  return nlohmann::json::parse(r.out);
}

/// The short names the CLI tests call them by.
inline cli_result run(const std::vector<std::string>& args) { return run_cli(args); }
inline nlohmann::json run_json(const std::vector<std::string>& args) { return run_cli_json(args); }
/// `args` with `extra` appended.
inline std::vector<std::string> plus(std::vector<std::string> args, const std::vector<std::string>& extra) {
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

}  // namespace zeromem::test
