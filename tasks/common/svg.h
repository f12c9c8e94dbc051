// Small SVG charts for training results: loss curves and attention heatmaps. Each returns the
// whole document as text; write it with ag::write_file_atomically.
#pragma once

#include <string>
#include <vector>

namespace ag::plot {

struct Series {
  std::string name;
  std::vector<double> values;  // y at x = x_step, 2·x_step, …; non-finite values are skipped
};

// Lines over a shared x axis (epochs; or iterations, x_step apart), with axes, ticks and a legend.
// `x_names` (if given, one per x position) replace the numbered ticks: each is written under its
// position, a '\n' starting a second line, and every point is drawn as a dot too (a point between
// two gaps would draw no line). `caption`, if given, is wrapped under the chart.
std::string line_chart(const std::string& title, const std::string& x_label, const std::string& y_label,
                       const std::vector<Series>& series, double x_step = 1,
                       const std::vector<std::string>& x_names = {}, const std::string& caption = {});

// A row-major matrix of values in [0, 1] as coloured cells, labelled on both axes, each cell
// printed with its value.
std::string heatmap(const std::string& title, const std::vector<std::string>& row_labels,
                    const std::vector<std::string>& column_labels, const std::vector<double>& values);

// Horizontal bars, one per label, each with its value printed at its end (`value_format`, a fmt
// format for one double, e.g. "{:.0f}"); values must be finite and non-negative.
std::string bar_chart(const std::string& title, const std::vector<std::string>& labels,
                      const std::vector<double>& values, const std::string& value_format = "{:.4g}");

// Documents made by the functions above, one below the other in one document (as nested <svg>s).
std::string stack(const std::vector<std::string>& documents);

// The opening <svg> tag of a width × height document on a white background (close with </svg>).
std::string header(double width, double height);

// Escapes text for use inside SVG elements and attributes; control bytes and bytes that are not
// UTF-8, which XML forbids, are shown as \xNN (tasks::printable).
std::string escape(const std::string& text);

// Text cut into lines of at most `width` characters (UTF-8 sequences count as one) at spaces; a
// longer word gets a line of its own.
std::vector<std::string> wrap(const std::string& text, size_t width);

// Nice round tick positions covering [low, high].
std::vector<double> ticks(double low, double high, int approximate_count);

}  // namespace ag::plot
