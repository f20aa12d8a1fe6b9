// What `zeromem job` and `zeromem scenario` share: a launch file read into an rlhf_job (with overrides and settings)
// and one phase printed or written as JSON. One reading path for both, so a scenario is a launch file and its cases.
#pragma once

#include <cstddef>
#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common.hpp"
#include "zeromem/jobs/rlhf_config.hpp"

namespace zeromem::cli {

struct job_args {
  std::string file;                 // the path, or the embedded file's name
  std::optional<std::string> text;  // the file's text when it is not read from `file` (an embedded launch file)
  std::vector<std::string> overrides;
  std::map<std::string, std::string> settings;  // --gpu and the other job settings given on the command line
  bool json = false;
  bool explain = false;
};

/// The settings a launch file cannot carry: flag, help.
struct setting_flag {
  const char* flag;
  const char* help;
};
extern const std::vector<setting_flag> job_setting_flags;

/// The job the file (or its text) describes, with the overrides and settings of `a`.
job_reading read_job(const job_args& a);
/// `a` with the words of a case (`zeromem case:` line) added: `--setting value` pairs and key=value overrides.
job_args with_case_words(job_args a, const std::vector<std::string>& words);

json phase_json(const rlhf_phase_estimate& p);
void print_phase(std::ostream& out, const rlhf_phase_estimate& p);

struct fix {
  std::string change;  // as the user would write it
  bool fits = false;
  std::vector<std::string> together;  // two or three changes: each as the user would write it (change holds them all)
  /// What the change sets, for a program to apply: {"key", "value"} (a verl or EasyR1 key), {"flag", "value"} (an OpenRLHF
  /// argument; a bare switch true) or {"setting", "value"} (a zeromem setting such as --deepspeed-version), the value typed.
  json set = json::array();
};

/// The most sets of three changes suggest_fixes tries where no single change or pair fits.
inline constexpr std::size_t max_triples_tried = 4096;

/// The usual fixes of a job that does not fit, each an override of the launch file tried on it (job_explain.cpp):
/// the first of each kind that makes every phase fit, else the last valid one; where none fits, the first pair (else three) that does.
std::vector<fix> suggest_fixes(const job_args& a, const job_reading& r, const rlhf_estimate& before);

}  // namespace zeromem::cli
