// One program per reported scenario (shared/SCENARIOS.md): CMake builds this file once per scenario with
// ZEROMEM_SCENARIO set to the function in include/zeromem/scenarios.hpp that rebuilds it from zeromem's parts.
// Prints the configuration, the per-GPU and per-node breakdowns and the verdicts; exits 1 if a verdict
// disagrees with the report.
#include <cstdio>

#include "zeromem/zeromem.hpp"

#ifndef ZEROMEM_SCENARIO
#error "build with -DZEROMEM_SCENARIO=<scenario function>, e.g. orz_15b_ppo"
#endif

int main() {
  const zeromem::scenario s = zeromem::ZEROMEM_SCENARIO();
  std::fputs(zeromem::render_scenario(s).c_str(), stdout);
  for (const zeromem::scenario_case& c : s.cases)
    if (c.reported && c.job.fits() != c.reported_fits) return 1;
  return 0;
}
