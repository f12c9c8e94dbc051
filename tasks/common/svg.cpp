#include "tasks/common/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

#include "engine/error.h"
#include "tasks/common/text.h"

namespace ag::plot {

namespace {

constexpr const char* kPalette[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"};

std::string tick_label(double v) {
  if (v == 0) return "0";
  if (std::abs(v) >= 1e4 || std::abs(v) < 1e-3) return fmt::format("{:.1e}", v);
  return fmt::format("{:.4g}", v);
}

// The x axis' labels from y down: numbered ticks (x_step apart) over `count` positions, or else
// `names`, one per position, each of one or more lines. x_at(i) is the position i's x (from 1).
std::string x_tick_labels(const std::vector<std::string>& names, size_t count, double x_step, double y,
                          const std::function<double(double)>& x_at) {
  std::string svg;
  if (names.empty()) {
    for (double t : ticks(x_step, x_step * static_cast<double>(count), 8))
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", x_at(t / x_step), y,
                         tick_label(t));
  }
  for (size_t i = 0; i < names.size(); ++i) {
    const std::vector<std::string> lines = tasks::split_lines(names[i]);
    for (size_t k = 0; k < lines.size(); ++k)
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                         x_at(static_cast<double>(i + 1)), y + 14 * static_cast<double>(k), escape(lines[k]));
  }
  return svg;
}

}  // namespace

std::string header(double width, double height) {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n",
      width, height);
}

std::string escape(const std::string& text) {
  std::string out;
  for (char c : tasks::printable(text)) {  // XML forbids most control characters and bytes that are not UTF-8
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::vector<std::string> wrap(const std::string& text, size_t width) {
  const auto characters = [](const std::string& s) {
    return static_cast<size_t>(std::count_if(s.begin(), s.end(), [](char c) { return (c & 0xC0) != 0x80; }));
  };
  std::vector<std::string> lines;
  std::string line, word;
  std::istringstream words(text);
  while (words >> word) {
    if (!line.empty() && characters(line) + 1 + characters(word) > width) {
      lines.push_back(line);
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) lines.push_back(line);
  return lines;
}

std::vector<double> ticks(double low, double high, int approximate_count) {
  if (!(high > low)) return {low};
  const double raw = (high - low) / std::max(1, approximate_count);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * magnitude >= raw) {
      step = m * magnitude;
      break;
    }
  std::vector<double> out;
  for (double v = std::ceil(low / step) * step; v <= high + step * 1e-9; v += step) out.push_back(v);
  return out;
}

std::string line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                       const std::vector<Series>& series, double x_step, const std::vector<std::string>& x_names,
                       const std::string& caption) {
  const double width = 640, left = 70, right = 20, top = 60, plot_h = 310;
  double y_min = INFINITY, y_max = -INFINITY;
  size_t count = 1;
  for (const Series& s : series) {
    count = std::max(count, s.values.size());
    for (double v : s.values)
      if (std::isfinite(v)) y_min = std::min(y_min, v), y_max = std::max(y_max, v);
  }
  AG_CHECK(x_names.empty() || x_names.size() >= count, "line_chart: {} x names for {} positions", x_names.size(),
           count);
  count = std::max(count, x_names.size());
  if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
  if (y_max - y_min < 1e-12) y_max = y_min + 1;
  const double pad = 0.05 * (y_max - y_min);
  y_min = std::max(y_min - pad, y_min >= 0 ? 0.0 : -INFINITY);
  y_max += pad;
  // Under the plot: the ticks (or names, of one or two lines), the x label, then the caption.
  const bool two_line_names =
      std::any_of(x_names.begin(), x_names.end(), [](const std::string& n) { return n.find('\n') != n.npos; });
  const std::vector<std::string> caption_lines = wrap(caption, 84);
  const double ticks_y = top + plot_h + 18, x_label_y = ticks_y + (two_line_names ? 14 : 0) + 20;
  const double height = x_label_y + 18 * static_cast<double>(caption_lines.size()) + 12;
  const double plot_w = width - left - right;
  auto x_at = [&](double x) { return left + (count == 1 ? plot_w / 2 : (x - 1) / (count - 1) * plot_w); };
  auto y_at = [&](double y) { return top + (1 - (y - y_min) / (y_max - y_min)) * plot_h; };

  std::string svg = header(width, height);
  svg += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", width / 2,
                     escape(title));
  for (double t : ticks(y_min, y_max, 6)) {
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e0e0e0\"/>\n", left,
                       width - right, y_at(t));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 6, y_at(t) + 4,
                       tick_label(t));
  }
  svg += x_tick_labels(x_names, count, x_step, ticks_y, x_at);
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", left, top,
                     plot_w, plot_h);
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", left + plot_w / 2, x_label_y,
                     escape(x_label));
  for (size_t k = 0; k < caption_lines.size(); ++k)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#555\">{}</text>\n", width / 2,
                       x_label_y + 18 * static_cast<double>(k + 1), escape(caption_lines[k]));
  svg += fmt::format("<text x=\"16\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 16 {0})\">{1}</text>\n",
                     top + plot_h / 2, escape(y_label));
  double legend_x = left;
  for (size_t k = 0; k < series.size(); ++k) {
    const char* colour = kPalette[k % std::size(kPalette)];
    std::string points, dots;
    for (size_t i = 0; i < series[k].values.size(); ++i) {
      if (!std::isfinite(series[k].values[i])) continue;
      const double x = x_at(static_cast<double>(i + 1)), y = y_at(series[k].values[i]);
      points += fmt::format("{:.1f},{:.1f} ", x, y);
      if (!x_names.empty())
        dots += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"3.5\" fill=\"{}\"/>\n", x, y, colour);
    }
    svg += fmt::format("<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"2\" points=\"{}\"/>\n", colour, points) +
           dots;
    // The legend sits in a row between the title and the plot, where no line can cross it; each
    // entry takes the width of its name (about 7 px per character at the default font size).
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"42\" y2=\"42\" stroke=\"{2}\" stroke-width=\"3\"/>\n",
                       legend_x, legend_x + 20, colour);
    svg += fmt::format("<text x=\"{}\" y=\"46\">{}</text>\n", legend_x + 26, escape(series[k].name));
    legend_x += 26 + 7.5 * static_cast<double>(series[k].name.size()) + 24;
  }
  return svg + "</svg>\n";
}

std::string heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                    const std::vector<std::string>& column_labels, const std::vector<double>& values) {
  // Room for the longest labels (about 7 px per character; column labels run at 45°) and for the
  // title, wrapped to the grid's width.
  const auto longest = [](const std::vector<std::string>& labels) {
    size_t n = 0;
    for (const std::string& label : labels) n = std::max(n, label.size());
    return static_cast<double>(n);
  };
  const double cell = 44, left = std::max(130.0, 24 + 7 * longest(row_labels));
  const double grid_width = left + cell * column_labels.size() + 20 + 5 * longest(column_labels);
  const std::vector<std::string> title_lines =
      wrap(title, static_cast<size_t>(std::max(60.0, (grid_width - 40) / 7.5)));
  const double top = 30 + 20 * static_cast<double>(title_lines.size()) + 5 * longest(column_labels) + 16;
  const double width = std::max(grid_width, 40 + 7.5 * longest(title_lines));
  const double height = top + cell * row_labels.size() + 20;
  std::string svg = header(width, height);
  for (size_t k = 0; k < title_lines.size(); ++k)
    svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", width / 2,
                       22 + 20 * k, escape(title_lines[k]));
  for (size_t j = 0; j < column_labels.size(); ++j) {
    const double x = left + cell * (j + 0.5);
    svg += fmt::format("<text x=\"{0:.1f}\" y=\"{1}\" transform=\"rotate(-45 {0:.1f} {1})\">{2}</text>\n", x, top - 8,
                       escape(column_labels[j]));
  }
  for (size_t i = 0; i < row_labels.size(); ++i) {
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8,
                       top + cell * (i + 0.5) + 4, escape(row_labels[i]));
    for (size_t j = 0; j < column_labels.size(); ++j) {
      const double v = std::clamp(values[i * column_labels.size() + j], 0.0, 1.0);
      const int shade = static_cast<int>(std::lround(255 * (1 - v)));
      svg +=
          fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"rgb({},{},255)\" stroke=\"white\"/>\n",
                      left + cell * j, top + cell * i, cell, cell, shade, shade);
      svg += fmt::format(
          "<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\" font-size=\"10\" fill=\"{}\">{:.2f}</text>\n",
          left + cell * (j + 0.5), top + cell * (i + 0.5) + 4, v > 0.5 ? "white" : "black", v);
    }
  }
  return svg + "</svg>\n";
}

std::string bar_chart(const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<double>& values, const std::string& value_format) {
  AG_CHECK(labels.size() == values.size(), "bar_chart: {} labels for {} values", labels.size(), values.size());
  double longest = 0, largest = 0;
  for (const std::string& label : labels) longest = std::max(longest, static_cast<double>(label.size()));
  for (double v : values) {
    AG_CHECK(std::isfinite(v) && v >= 0, "bar_chart: the value {} is not a finite non-negative number", v);
    largest = std::max(largest, v);
  }
  const double width = 640, left = std::max(110.0, 24 + 7 * longest), top = 44, row = 22, bar_room = width - left - 90;
  std::string svg = header(width, top + row * static_cast<double>(labels.size()) + 16);
  svg += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n", width / 2,
                     escape(title));
  for (size_t k = 0; k < labels.size(); ++k) {
    const double y = top + row * static_cast<double>(k), length = largest > 0 ? values[k] / largest * bar_room : 0;
    svg +=
        fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text>\n", left - 8, y + 15, escape(labels[k]));
    svg += fmt::format("<rect x=\"{}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", left, y + 3,
                       length, row - 6, kPalette[0]);
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>\n", left + length + 6, y + 15,
                       escape(fmt::format(fmt::runtime(value_format), values[k])));
  }
  return svg + "</svg>\n";
}

std::string stack(const std::vector<std::string>& documents) {
  // Each document starts with header()'s tag, which holds its size.
  const auto attribute = [](const std::string& document, const std::string& name) {
    const std::string key = " " + name + "=\"";
    const size_t at = document.find(key), end = document.find('>');
    AG_CHECK(document.starts_with("<svg ") && at < end, "stack: a document without the {} of its <svg> tag", name);
    return std::stod(document.substr(at + key.size()));
  };
  double width = 0, height = 0;
  std::string body;
  for (const std::string& document : documents) {
    body += fmt::format("<svg x=\"0\" y=\"{}\"", height) + document.substr(4);
    width = std::max(width, attribute(document, "width"));
    height += attribute(document, "height");
  }
  return header(width, height) + body + "</svg>\n";
}

}  // namespace ag::plot
