// SVG charts as strings: a stacked bar per GPU (terms by colour, capacity line) and memory against a swept
// variable. Every bar segment and point carries its value in GiB as text. No I/O.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "zeromem/core/format.hpp"
#include "zeromem/core/units.hpp"

namespace zeromem {

struct svg_segment {
  std::string name;
  bytes value;
};
struct svg_bar {
  std::string label;
  std::vector<svg_segment> segments;
};
struct svg_point {
  std::string x;
  bytes value;
};

namespace detail {
inline std::string xml_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}
inline std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}
inline const char* palette(std::size_t i) {  // Tableau 20, pairs split so neighbours differ
  static const char* colours[] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1",
                                  "#ff9da7", "#9c755f", "#bab0ac", "#a0cbe8", "#ffbe7d", "#ff9d9a", "#86bcb6",
                                  "#8cd17d", "#f1ce63", "#d4a6c8", "#fabfd2", "#d7b5a6", "#79706e"};
  return colours[i % (sizeof colours / sizeof colours[0])];
}
// Splits text into lines of at most `width` characters at spaces.
inline std::vector<std::string> wrap(const std::string& text, std::size_t width) {
  std::vector<std::string> lines;
  std::string line, word;
  const auto flush_word = [&]() {
    if (word.empty()) return;
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
    word.clear();
  };
  for (char c : text) {
    if (c == ' ') flush_word();
    else word += c;
  }
  flush_word();
  if (!line.empty()) lines.push_back(line);
  return lines;
}
inline std::string text_lines(double x, double y, const std::string& text, std::size_t width, const char* extra,
                              double line_height = 13) {
  std::string out;
  double dy = 0;
  for (const std::string& l : wrap(text, width)) {
    out += "<text x=\"" + fmt("%.1f", x) + "\" y=\"" + fmt("%.1f", y + dy) + "\" text-anchor=\"middle\" " + extra + ">" + xml_escape(l) + "</text>\n";
    dy += line_height;
  }
  return out;
}
inline std::string svg_header(double w, double h, const std::string& title) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + fmt("%.0f", w) +
         "\" height=\"" + fmt("%.0f", h) + "\" viewBox=\"0 0 " + fmt("%.0f", w) + " " + fmt("%.0f", h) +
         "\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" +
         text_lines(w / 2, 20, title, static_cast<std::size_t>(w / 9), "font-size=\"15\"", 19);
}
// The y axis in GiB: ticks at round steps up to `top`.
inline std::string y_axis(double x0, double y0, double height, double top_gib) {
  std::string out;
  // A round step (1, 2 or 5 x 10^k GiB) giving at most 8 intervals, whatever the size: the tick count is bounded.
  double step = 0;
  for (double base = 1; step == 0; base *= 10)
    for (double m : {1.0, 2.0, 5.0})
      if (step == 0 && top_gib / (m * base) <= 8) step = m * base;
  for (int i = 0; i <= 9 && i * step <= top_gib + 1e-9 * top_gib; ++i) {
    const double v = i * step;
    const double y = y0 - height * v / top_gib;
    out += "<line x1=\"" + fmt("%.1f", x0 - 4) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", x0) + "\" y2=\"" + fmt("%.1f", y) +
           "\" stroke=\"black\"/><text x=\"" + fmt("%.1f", x0 - 8) + "\" y=\"" + fmt("%.1f", y + 4) + "\" text-anchor=\"end\">" +
           fmt("%.0f", v) + "</text>\n";
  }
  out += "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y0) + "\" x2=\"" + fmt("%.1f", x0) + "\" y2=\"" +
         fmt("%.1f", y0 - height) + "\" stroke=\"black\"/>\n";
  out += "<text transform=\"translate(18," + fmt("%.1f", y0 - height / 2) + ") rotate(-90)\" text-anchor=\"middle\">GiB (2^30 B)</text>\n";
  return out;
}
inline std::string capacity_line(double x0, double x1, double y, bytes capacity) {
  return "<line x1=\"" + fmt("%.1f", x0) + "\" y1=\"" + fmt("%.1f", y) + "\" x2=\"" + fmt("%.1f", x1) + "\" y2=\"" + fmt("%.1f", y) +
         "\" stroke=\"red\" stroke-dasharray=\"6,4\" stroke-width=\"2\"/><text x=\"" + fmt("%.1f", x1) + "\" y=\"" + fmt("%.1f", y - 6) +
         "\" text-anchor=\"end\" fill=\"red\">capacity " + format_bytes(capacity, size_unit::GiB) + "</text>\n";
}
}  // namespace detail

/// One stacked bar per GPU (or case); segments in GiB; a dashed capacity line when capacity > 0.
inline std::string svg_stacked_bars(const std::string& title, const std::vector<svg_bar>& bars, bytes capacity) {
  if (bars.empty()) detail::fail("a chart needs at least one bar");
  std::vector<std::string> names;  // legend, in first-seen order
  double top = to_gib(capacity);
  for (const svg_bar& b : bars) {
    bytes total{};
    for (const svg_segment& s : b.segments) {
      if (s.value.count() < 0) detail::fail("a chart segment cannot be negative");
      total += s.value;
      if (s.value.count() > 0 && std::find(names.begin(), names.end(), s.name) == names.end()) names.push_back(s.name);
    }
    top = std::max(top, to_gib(total));
  }
  top = top <= 0 ? 1 : top * 1.1;
  const double bar_w = 80, gap = 70, x0 = 70, y0 = 440, height = 360;
  const double legend_x = x0 + static_cast<double>(bars.size()) * (bar_w + gap) + 20;
  std::size_t longest = 0;
  for (const std::string& n : names) longest = std::max(longest, n.size());
  // 7 px per character bounds 12 px sans-serif text (rendered by librsvg: tests/cli/check_svg.py), so no label is cut.
  const double width = std::max(640.0, legend_x + 18 + 7 * static_cast<double>(longest) + 10);
  const double total_height = std::max(520.0, 70 + 18 * static_cast<double>(names.size()));
  std::string out = detail::svg_header(width, total_height, title) + detail::y_axis(x0, y0, height, top);
  for (std::size_t i = 0; i < bars.size(); ++i) {
    const double x = x0 + gap / 2 + static_cast<double>(i) * (bar_w + gap);
    double y = y0;
    bytes total{};
    for (const svg_segment& s : bars[i].segments) {
      if (s.value.count() == 0) continue;
      const double h = height * to_gib(s.value) / top;
      const std::size_t colour = static_cast<std::size_t>(std::find(names.begin(), names.end(), s.name) - names.begin());
      out += "<rect x=\"" + detail::fmt("%.1f", x) + "\" y=\"" + detail::fmt("%.2f", y - h) + "\" width=\"" + detail::fmt("%.0f", bar_w) +
             "\" height=\"" + detail::fmt("%.2f", h) + "\" fill=\"" + detail::palette(colour) + "\"><title>" +
             detail::xml_escape(s.name + ": " + format_bytes(s.value, size_unit::GiB)) + "</title></rect>\n";
      y -= h;
      total += s.value;
    }
    out += "<text x=\"" + detail::fmt("%.1f", x + bar_w / 2) + "\" y=\"" + detail::fmt("%.1f", y - 6) + "\" text-anchor=\"middle\">" +
           format_bytes(total, size_unit::GiB) + "</text>\n";
    out += detail::text_lines(x + bar_w / 2, y0 + 16, bars[i].label, 22, "font-size=\"10\"");
  }
  if (capacity.count() > 0) out += detail::capacity_line(x0, legend_x - 10, y0 - height * to_gib(capacity) / top, capacity);
  for (std::size_t i = 0; i < names.size(); ++i) {
    const double y = 64 + 18 * static_cast<double>(i);
    out += "<rect x=\"" + detail::fmt("%.0f", legend_x) + "\" y=\"" + detail::fmt("%.0f", y - 10) + "\" width=\"12\" height=\"12\" fill=\"" +
           detail::palette(i) + "\"/><text x=\"" + detail::fmt("%.0f", legend_x + 18) + "\" y=\"" + detail::fmt("%.0f", y) + "\">" +
           detail::xml_escape(names[i]) + "</text>\n";
  }
  return out + "</svg>\n";
}

/// Memory against a swept variable: one point per value, labelled in GiB; a dashed capacity line.
inline std::string svg_line(const std::string& title, const std::string& x_label, const std::vector<svg_point>& points, bytes capacity) {
  if (points.empty()) detail::fail("a chart needs at least one point");
  double top = to_gib(capacity);
  for (const svg_point& p : points) top = std::max(top, to_gib(p.value));
  top = top <= 0 ? 1 : top * 1.1;
  const double x0 = 70, y0 = 440, height = 360, step = 90;
  const double width = std::max(640.0, x0 + step * static_cast<double>(points.size()) + 60);
  std::string out = detail::svg_header(width, 500, title) + detail::y_axis(x0, y0, height, top);
  std::string path;
  for (std::size_t i = 0; i < points.size(); ++i) {
    const double x = x0 + step * (static_cast<double>(i) + 0.5);
    const double y = y0 - height * to_gib(points[i].value) / top;
    path += (i == 0 ? "M" : " L") + detail::fmt("%.1f", x) + "," + detail::fmt("%.1f", y);
    out += "<circle cx=\"" + detail::fmt("%.1f", x) + "\" cy=\"" + detail::fmt("%.1f", y) + "\" r=\"4\" fill=\"#4e79a7\"/>\n";
    out += "<text x=\"" + detail::fmt("%.1f", x) + "\" y=\"" + detail::fmt("%.1f", y - 10) + "\" text-anchor=\"middle\" font-size=\"10\">" +
           format_bytes(points[i].value, size_unit::GiB) + "</text>\n";
    out += "<text x=\"" + detail::fmt("%.1f", x) + "\" y=\"" + detail::fmt("%.1f", y0 + 18) + "\" text-anchor=\"middle\">" +
           detail::xml_escape(points[i].x) + "</text>\n";
  }
  out += "<path d=\"" + path + "\" fill=\"none\" stroke=\"#4e79a7\" stroke-width=\"2\"/>\n";
  out += "<text x=\"" + detail::fmt("%.1f", x0 + step * static_cast<double>(points.size()) / 2) + "\" y=\"" + detail::fmt("%.1f", y0 + 40) +
         "\" text-anchor=\"middle\">" + detail::xml_escape(x_label) + "</text>\n";
  if (capacity.count() > 0) out += detail::capacity_line(x0, width - 10, y0 - height * to_gib(capacity) / top, capacity);
  return out + "</svg>\n";
}

}  // namespace zeromem
