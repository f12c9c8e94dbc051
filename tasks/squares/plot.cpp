#include "tasks/squares/plot.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/error.h"
#include "tasks/common/svg.h"

namespace ag::squares {

namespace {

constexpr double kPanel = 170;   // px per square's panel
constexpr double kExtent = 1.6;  // the panel shows [-kExtent, kExtent]²
constexpr int64_t kColumns = 4;
constexpr double kTop = 56;  // title and legend
constexpr const char* kGiven = "#1f77b4";
constexpr const char* kTrue = "#2ca02c";
constexpr const char* kPredicted = "#d62728";

struct Panel {
  double left, top;
  double x(double v) const { return left + (v + kExtent) / (2 * kExtent) * kPanel; }
  double y(double v) const { return top + (kExtent - v) / (2 * kExtent) * kPanel; }
};

std::string dot(double x, double y, const char* colour, bool filled, const std::string& label) {
  return fmt::format(
      "<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"5\" fill=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" font-size=\"10\">{}</text>\n",
      x, y, filled ? colour : "none", colour, x + 7, y - 5, colour, label);
}

std::string cross(double x, double y, const char* colour, const std::string& label) {
  return fmt::format(
      "<path d=\"M{0:.1f} {1:.1f}l8 8m0 -8l-8 8\" transform=\"translate(-4 -4)\" stroke=\"{2}\" "
      "stroke-width=\"2.5\"/><text x=\"{3:.1f}\" y=\"{4:.1f}\" fill=\"{2}\" font-size=\"10\">{5}</text>\n",
      x, y, colour, x + 7, y + 13, label);
}

// Corners in drawing order joined by a line: the path the model should continue.
std::string path(const Panel& p, const std::vector<std::array<double, 2>>& points, const char* colour,
                 const char* dash) {
  std::string d;
  for (const auto& [x, y] : points) d += fmt::format("{}{:.1f} {:.1f}", d.empty() ? "M" : " L", p.x(x), p.y(y));
  return fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.2\" stroke-dasharray=\"{}\"/>\n", d,
                     colour, dash);
}

std::array<double, 2> point(const Tensor& t, int64_t n, int64_t i) { return {t.at({n, i, 0}), t.at({n, i, 1})}; }

std::string panel(const Panel& p, const Tensor& source, const Tensor& target, const Tensor& predicted, int64_t n) {
  std::string svg = fmt::format(
      "<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#ccc\"/>\n"
      "<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#666\" font-size=\"10\">#{}</text>\n",
      p.left, p.top, kPanel, kPanel, p.left + 4, p.top + 12, n);
  const auto given0 = point(source, n, 0), given1 = point(source, n, 1);
  svg += path(p, {given0, given1, point(target, n, 0), point(target, n, 1)}, kTrue, "4 3");
  svg += path(p, {given1, point(predicted, n, 0), point(predicted, n, 1)}, kPredicted, "none");
  svg += dot(p.x(given0[0]), p.y(given0[1]), kGiven, true, "1");
  svg += dot(p.x(given1[0]), p.y(given1[1]), kGiven, true, "2");
  for (int64_t i = 0; i < 2; ++i) {
    const auto truth = point(target, n, i), guess = point(predicted, n, i);
    svg += dot(p.x(truth[0]), p.y(truth[1]), kTrue, false, std::to_string(i + 3));
    svg += cross(p.x(guess[0]), p.y(guess[1]), kPredicted, std::to_string(i + 3));
  }
  return svg;
}

std::string legend(double y) {
  std::string svg;
  double x = 10;
  for (const auto& [colour, name] : {std::pair{kGiven, "given corners 1, 2"}, std::pair{kTrue, "true corners 3, 4"},
                                     std::pair{kPredicted, "predicted 3, 4"}}) {
    svg += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n", x + 5,
                       y - 4, colour, x + 14, y, name);
    x += 160;
  }
  return svg;
}

}  // namespace

std::string predictions_svg(const std::string& title, const Tensor& source, const Tensor& target,
                            const Tensor& predicted, int64_t count) {
  for (const Tensor* t : {&source, &target, &predicted})
    AG_CHECK(t->dim() == 3 && t->size(0) == source.size(0) && t->size(1) == 2 && t->size(2) == 2,
             "predictions_svg: expected source, target and predicted of shape (N, 2, 2), got {}",
             shape_str(t->shape()));
  const int64_t shown = std::min(count, source.size(0));
  const int64_t rows = (shown + kColumns - 1) / kColumns;
  std::string svg = plot::header(kColumns * kPanel + 20, kTop + static_cast<double>(rows) * (kPanel + 10) + 10);
  svg += fmt::format("<text x=\"10\" y=\"20\" font-size=\"14\">{}</text>\n", plot::escape(title));
  svg += legend(44);
  for (int64_t n = 0; n < shown; ++n) {
    const Panel p{10 + static_cast<double>(n % kColumns) * kPanel,
                  kTop + static_cast<double>(n / kColumns) * (kPanel + 10)};
    svg += panel(p, source, target, predicted, n);
  }
  return svg + "</svg>\n";
}

}  // namespace ag::squares
