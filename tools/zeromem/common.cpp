#include "common.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <ostream>
#include <stdexcept>

namespace zeromem::cli {
namespace {

// Runs a library parser as a CLI11 transform: its message becomes "--flag: message", and the text it accepted is
// replaced by the plain number CLI11 then stores.
CLI::Validator checked(std::function<std::string(const std::string&)> parse) {
  return CLI::Validator(
      [parse](std::string& text) -> std::string {
        try {
          text = parse(text);
          return {};
        } catch (const std::exception& e) {
          std::string m = e.what();
          const std::string prefix = "zeromem: ";
          return m.compare(0, prefix.size(), prefix) == 0 ? m.substr(prefix.size()) : m;
        }
      },
      "");
}

std::string range_text(std::int64_t lo, std::int64_t hi) {
  return "from " + std::to_string(lo) + " to " + (hi == detail::i64_max ? std::string("2^63 - 1") : std::to_string(hi));
}

}  // namespace

CLI::Option* integer_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help, std::int64_t lo,
                            std::int64_t hi) {
  return app.add_option(flag, target, help)->transform(checked([lo, hi](const std::string& s) {
    return std::to_string(parse_integer(s, "the value", lo, hi));
  }));
}

CLI::Option* tokens_option(CLI::App& app, const std::string& flag, std::int64_t& target, const std::string& help, std::int64_t lo,
                           std::int64_t hi) {
  return app.add_option(flag, target, help)->type_name("TOKENS")->transform(checked([lo, hi](const std::string& s) {
    const std::int64_t n = parse_tokens(s, "the token count");
    if (n < lo || n > hi) detail::fail("the token count must be " + range_text(lo, hi) + ", got " + detail::quoted(s));
    return std::to_string(n);
  }));
}

double parse_real(const std::string& s, double lo, double hi, bool hi_inclusive, bool lo_inclusive) {
  char* end = nullptr;
  const double v = s.empty() ? std::nan("") : std::strtod(s.c_str(), &end);
  const bool whole = !s.empty() && end == s.c_str() + s.size();
  if (!whole || !std::isfinite(v) || (lo_inclusive ? v < lo : v <= lo) || (hi_inclusive ? v > hi : v >= hi)) {
    char range[96];
    std::snprintf(range, sizeof range, "a number in %s%g, %g%s", lo_inclusive ? "[" : "(", lo, hi, hi_inclusive ? "]" : ")");
    detail::fail(std::string("the value must be ") + range + ", got " + detail::quoted(s));
  }
  return v;
}

CLI::Option* real_option(CLI::App& app, const std::string& flag, double& target, const std::string& help, double lo, double hi,
                         bool hi_inclusive, bool lo_inclusive) {
  return app.add_option(flag, target, help)->transform(checked([lo, hi, hi_inclusive, lo_inclusive](const std::string& s) {
    parse_real(s, lo, hi, hi_inclusive, lo_inclusive);
    return s;
  }));
}

bytes free_before_load(const char* what, bytes total, bytes cuda_context, bytes other_processes) {
  const bytes free = total - cuda_context - other_processes;
  if (free.count() > 0) return free;
  detail::fail(std::string("nothing is free on the GPU before ") + what + " loads: " + format_bytes(total, size_unit::GiB) +
               " less the CUDA context's " + format_bytes(cuda_context, size_unit::GiB) + " and the other processes' " +
               format_bytes(other_processes, size_unit::GiB) + "; lower --other-processes");
}

CLI::Option* share_or_size_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help) {
  return app.add_option(flag, target, help)->transform(checked([](const std::string& s) {
    if (!s.empty() && s.back() == '%') parse_real(s.substr(0, s.size() - 1), 0.0, 100.0, false);
    else parse_size(s, "the value");
    return s;
  }));
}

CLI::Option* text_option(CLI::App& app, const std::string& flag, std::string& target, const std::string& help) {
  return app.add_option(flag, target, help)->transform(checked([](const std::string& s) {
    if (s.empty()) detail::fail("the value cannot be empty; leave the flag out for its default");
    return s;
  }));
}

void add_device_flags(CLI::App& app, std::string& gpu, std::string& gpu_memory, const std::string& why) {
  const std::string names = detail::join_names(gpu_models, " | ", [](const gpu_model& g) { return g.name; });
  auto* g = text_option(app, "--gpu", gpu, names + ": " + why);
  auto* m = text_option(app, "--gpu-memory", gpu_memory, "any GPU by its capacity as PyTorch reports it (total_memory), e.g. 23.55GiB: " + why);
  g->excludes(m);
}

device_choice device_of(const std::string& gpu, const std::string& gpu_memory) {
  if (!gpu.empty()) {
    const gpu_model& g = find_gpu(gpu);
    return {std::string(g.name), g.capacity, std::string(g.source)};
  }
  if (gpu_memory.empty()) return {};
  const bytes capacity = parse_bytes(gpu_memory, "the GPU memory (--gpu-memory)");
  if (capacity.count() == 0) detail::fail("--gpu-memory must be more than 0 B");
  return {"the GPU", capacity, "--gpu-memory " + gpu_memory};
}

std::string nearest_option(const CLI::App& app, const std::string& given) {
  if (given.size() < 3 || given.compare(0, 2, "--") != 0) return {};
  const std::string word = given.substr(2, given.find('=') == std::string::npos ? std::string::npos : given.find('=') - 2);
  std::vector<std::string> names;
  for (const CLI::Option* o : app.get_options())
    for (const std::string& n : o->get_lnames()) names.push_back(n);
  if (std::string meant = detail::meant_name(names, [](const std::string& n) { return n; }, word); !meant.empty()) return "--" + meant;
  std::string within;  // --recompute-full: the option is the word's first part
  int within_count = 0;
  for (const std::string& n : names)
    if (word.size() > n.size() + 1 && word.compare(0, n.size(), n) == 0 && word[n.size()] == '-') {
      within = n;
      ++within_count;
    }
  if (within_count == 1) return "--" + within;
  // Edit distance counting a swap of neighbours as one edit (optimal string alignment): --modle is one from --model.
  const auto distance = [](const std::string& a, const std::string& b) {
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
    for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i)
      for (std::size_t j = 1; j <= b.size(); ++j) {
        d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
        if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    return d[a.size()][b.size()];
  };
  std::string best;
  std::size_t best_distance = word.size() / 3 + 1;  // within a third of the word
  for (const std::string& n : names)
    if (const std::size_t d = distance(word, n); d < best_distance) {
      best_distance = d;
      best = n;
    }
  return best.empty() ? std::string{} : "--" + best;
}

std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  while (!s.empty() && s.back() == ' ') s.pop_back();
  constexpr std::size_t longest = 400;  // CLI11 echoes unknown arguments whole
  if (s.size() > longest) s = s.substr(0, longest) + "... (" + std::to_string(s.size()) + " characters)";
  return s;
}

// Exact bytes, then the size in the largest decimal and binary units it reaches, so small terms read "32.77 kB"
// rather than "0.000 GB".
std::string bytes_row(const std::string& label, bytes b) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-30s %26s %14s %14s", label.c_str(), format_exact(b).c_str(), format_auto(b, false, 3).c_str(),
                format_auto(b, true, 3).c_str());
  return buf;
}

std::string table_head(const std::string& first_column) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-30s %26s %14s %14s\n", first_column.c_str(), "exact", "decimal", "binary");
  return buf;
}

void write_file(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (!f || !(f << text)) detail::fail("cannot write " + detail::quoted(path, 256));
}

json breakdown_json(const job_breakdown& job) {
  json terms = json::array();
  for (const memory_term& t : job.terms)
    terms.push_back({{"role", t.role}, {"term", t.term}, {"gpu_bytes", t.gpu.count()}, {"host_bytes", t.host.count()}});
  return {{"per_gpu", {{"total_bytes", job.gpu_total().count()}, {"capacity_bytes", job.gpu_capacity.count()},
                       {"headroom_bytes", job.gpu_headroom().count()}, {"fits", job.gpu_fits()}}},
          {"per_node_host",
           {{"total_bytes", job.host_total().count()}, {"capacity_bytes", job.host_capacity.count()},
            {"limit_bytes", job.host_capacity.count() != 0 ? job.host_limit().count() : 0},
            {"unexplained_bytes", job.unexplained_host.count()}, {"fits", job.host_fits()}}},
          {"terms", terms}};
}

svg_bar bar_of(const std::string& label, const job_breakdown& job) {
  svg_bar b{label, {}};
  for (const memory_term& t : job.terms)
    if (t.gpu.count() != 0) b.segments.push_back({t.role + ": " + t.term, t.gpu});
  return b;
}

void print_dominant(std::ostream& out, const job_breakdown& job) {
  const bytes total = job.gpu_total();
  for (const named_bytes& d : dominant_terms(job))
    out << "    " << d.name << ": " << format_bytes(d.value, size_unit::GiB) << " ("
        << static_cast<int>(100.0 * (total.count() > 0 ? d.value / total : 0.0) + 0.5) << "% of the GPU total)\n";
}

}  // namespace zeromem::cli
