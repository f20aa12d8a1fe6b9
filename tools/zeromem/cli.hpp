// The zeromem command-line program as a function, so tests can run it in-process.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

namespace zeromem::cli {

/// Runs `zeromem ARGS...` (args excludes the program name). Returns the exit code: 0 on success,
/// 2 on bad input (after printing one line to err).
int run(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace zeromem::cli
