// The text report of a job breakdown: a string with every number labelled by its unit. No I/O.
#pragma once

#include <cstdio>
#include <string>

#include "zeromem/core/format.hpp"
#include "zeromem/jobs/job.hpp"

namespace zeromem {

inline std::string render_breakdown(const job_breakdown& job) {
  std::string out;
  char line[256];
  // Per-GPU figures in GiB (as PyTorch and the capacities are given), host RAM in GB (as free, Ray and the reports
  // give it); each table says which. A term's source goes on its own line, so the columns stay put.
  const auto row = [&](const memory_term& t) {
    std::snprintf(line, sizeof line, "    %-10s %-72s %12s\n", t.role.c_str(), t.term.c_str(), format_bytes(t.gpu, size_unit::GiB).c_str());
    out += line;
    if (!t.note.empty()) out += "    " + std::string(11, ' ') + "(source: " + t.note + ")\n";
  };
  out += "  per GPU (GiB = 2^30 B)\n";
  for (const memory_term& t : job.terms)
    if (t.gpu.count() != 0) row(t);
  std::snprintf(line, sizeof line, "    %-83s %12s of %s (%s headroom) -> %s\n", "total", format_bytes(job.gpu_total(), size_unit::GiB).c_str(),
                format_bytes(job.gpu_capacity, size_unit::GiB).c_str(), format_bytes(job.gpu_headroom(), size_unit::GiB).c_str(),
                job.gpu_fits() ? "fits" : "OUT OF MEMORY");
  out += line;
  if (job.host_total().count() != 0) {
    out += "  host RAM of the most loaded node (GB = 10^9 B)\n";
    for (const memory_term& t : job.terms)
      if (t.host.count() != 0) {
        std::snprintf(line, sizeof line, "    %-10s %-72s %12s\n", t.role.c_str(), t.term.c_str(), format_bytes(t.host, size_unit::GB).c_str());
        out += line;
      }
    if (job.unexplained_host.count() != 0) {
      std::snprintf(line, sizeof line, "    %-10s %-72s %12s\n", "?", "unexplained (reported minus modelled)",
                    format_bytes(job.unexplained_host, size_unit::GB).c_str());
      out += line;
    }
    std::snprintf(line, sizeof line, "    %-83s %12s", "total", format_bytes(job.host_total(), size_unit::GB).c_str());
    out += line;
    if (job.host_capacity.count() != 0) {
      std::snprintf(line, sizeof line, " of %s (limit %s at %.2f) -> %s", format_bytes(job.host_capacity, size_unit::GB).c_str(),
                    format_bytes(job.host_limit(), size_unit::GB).c_str(), job.host_threshold,
                    job.host_fits() ? "fits" : "OUT OF MEMORY");
      out += line;
    }
    out += "\n";
  }
  return out;
}

}  // namespace zeromem
