#include "tasks/sentiment/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "tasks/common/svg.h"
#include "tasks/sentiment/uci.h"

namespace ag::sentiment {

namespace {

// RESULTS.md §8: the PyTorch peer on the same hash split (test accuracy, mean of seeds 0-4), and
// the accuracy the npm package `sentiment` reports for its own lexicon on each file (no overall).
struct Reference {
  const char* name;
  const char* colour;
  double overall, amazon, imdb, yelp;
  double on(const std::string& source) const {
    return source == "amazon" ? amazon : source == "imdb" ? imdb : source == "yelp" ? yelp : overall;
  }
};
constexpr Reference kReferences[] = {
    {"PyTorch peer, attention", "#d62728", 0.8116, 0.8385, 0.7865, 0.8042},
    {"PyTorch peer, bag of words", "#2ca02c", 0.8280, 0.8606, 0.8292, 0.7895},
    {"npm sentiment's lexicon", "#ff7f0e", NAN, 0.726, 0.765, 0.696},
};

// "" (overall), then each source.
std::vector<std::string> groups() {
  std::vector<std::string> out = {""};
  out.insert(out.end(), uci::kSources.begin(), uci::kSources.end());
  return out;
}

bool predicted_positive(const Predictions& p, size_t i) { return p.probabilities[i] > 0.5; }

bool right(const Predictions& p, size_t i) { return predicted_positive(p, i) == (p.examples[i].label == 1); }

std::string percent(double share) { return std::isnan(share) ? "–" : fmt::format("{:.2f}%", 100 * share); }

}  // namespace

double accuracy(const Predictions& predictions, const std::string& source) {
  int64_t correct = 0;
  for (size_t i = 0; i < predictions.examples.size(); ++i)
    correct += (source.empty() || predictions.examples[i].source == source) && right(predictions, i);
  return static_cast<double>(correct) /
         static_cast<double>(std::max<int64_t>(1, count_from(predictions.examples, source)));
}

void print_report(const Predictions& predictions, const std::string& split_name) {
  fmt::print("{} accuracy, beside RESULTS.md's reference points (PyTorch peer on the same split, mean of 5 seeds):\n",
             split_name);
  fmt::print("  {:<16} {:>9}", "", "attograd");
  for (const Reference& r : kReferences) fmt::print("  {:>26}", r.name);
  fmt::print("\n");
  for (const std::string& source : groups()) {
    const std::string name =
        fmt::format("{} ({})", source.empty() ? "overall" : source, count_from(predictions.examples, source));
    fmt::print("  {:<16} {:>9}", name, percent(accuracy(predictions, source)));
    for (const Reference& r : kReferences) fmt::print("  {:>26}", percent(r.on(source)));
    fmt::print("\n");
  }
  int64_t cells[2][2] = {};  // [true][predicted]
  for (size_t i = 0; i < predictions.examples.size(); ++i)
    ++cells[predictions.examples[i].label][predicted_positive(predictions, i)];
  fmt::print("confusion matrix ({}; rows: true label, columns: predicted):\n", split_name);
  fmt::print("  {:<10} {:>9} {:>9}\n", "", "negative", "positive");
  fmt::print("  {:<10} {:>9} {:>9}\n", "negative", cells[0][0], cells[0][1]);
  fmt::print("  {:<10} {:>9} {:>9}\n", "positive", cells[1][0], cells[1][1]);
}

std::vector<size_t> most_confident_mistakes(const Predictions& predictions, size_t count) {
  std::vector<size_t> mistakes;
  for (size_t i = 0; i < predictions.examples.size(); ++i)
    if (!right(predictions, i)) mistakes.push_back(i);
  const auto confidence = [&](size_t i) { return std::abs(predictions.probabilities[i] - 0.5); };
  std::stable_sort(mistakes.begin(), mistakes.end(), [&](size_t a, size_t b) { return confidence(a) > confidence(b); });
  mistakes.resize(std::min(count, mistakes.size()));
  return mistakes;
}

namespace {

constexpr double kWidth = 980, kLeft = 70, kBarsTop = 80, kBarsHeight = 260, kLow = 0.5, kHigh = 1.0;

double bar_y(double share) { return kBarsTop + (1 - (share - kLow) / (kHigh - kLow)) * kBarsHeight; }

// The accuracy bars, one per group, with each reference point as a coloured mark across its bar.
std::string accuracy_bars(const Predictions& predictions) {
  std::string svg;
  double legend_x = kLeft;
  const auto legend = [&](const std::string& name, const std::string& mark) {
    svg += mark + fmt::format("<text x=\"{}\" y=\"60\">{}</text>\n", legend_x + 26, plot::escape(name));
    legend_x += 26 + 7 * static_cast<double>(name.size()) + 24;
  };
  legend("attograd (this run)",
         fmt::format("<rect x=\"{}\" y=\"50\" width=\"20\" height=\"12\" fill=\"#1f77b4\"/>\n", legend_x));
  for (const Reference& r : kReferences)
    legend(r.name, fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"56\" y2=\"56\" stroke=\"{2}\" stroke-width=\"3\"/>\n",
                               legend_x, legend_x + 20, r.colour));
  for (double t : plot::ticks(kLow, kHigh, 5)) {
    svg += fmt::format("<line x1=\"{0}\" x2=\"{1}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"#e0e0e0\"/>\n", kLeft,
                       kWidth - 20, bar_y(t));
    svg += fmt::format("<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{:.0f}%</text>\n", kLeft - 6, bar_y(t) + 4,
                       100 * t);
  }
  const std::vector<std::string> names = groups();
  const double slot = (kWidth - 20 - kLeft) / static_cast<double>(names.size());
  for (size_t g = 0; g < names.size(); ++g) {
    const double centre = kLeft + slot * (static_cast<double>(g) + 0.5);
    const double share = accuracy(predictions, names[g]);
    svg += fmt::format("<rect x=\"{:.1f}\" y=\"{:.1f}\" width=\"60\" height=\"{:.1f}\" fill=\"#1f77b4\"/>\n",
                       centre - 30, bar_y(share), bar_y(kLow) - bar_y(share));
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"end\" font-weight=\"bold\">{}</text>\n",
                       centre - 36, bar_y(share) + 4, percent(share));
    for (const Reference& r : kReferences) {
      if (std::isnan(r.on(names[g]))) continue;
      svg += fmt::format(
          "<line x1=\"{0:.1f}\" x2=\"{1:.1f}\" y1=\"{2:.1f}\" y2=\"{2:.1f}\" stroke=\"{3}\" stroke-width=\"3\"/>\n",
          centre - 40, centre + 40, bar_y(r.on(names[g])), r.colour);
      svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"10\" fill=\"{}\">{:.1f}</text>\n", centre + 44,
                         bar_y(r.on(names[g])) + 3, r.colour, 100 * r.on(names[g]));
    }
    const std::string label = names[g].empty() ? "overall" : names[g];
    svg += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"middle\">{} ({} sentences)</text>\n", centre,
                       kBarsTop + kBarsHeight + 18, label, count_from(predictions.examples, names[g]));
  }
  svg += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>\n", kLeft,
                     kBarsTop, kWidth - 20 - kLeft, kBarsHeight);
  return svg;
}

// The mistakes as lines of text from y down; returns the y below them.
double mistake_list(const Predictions& predictions, double y, std::string& svg) {
  std::vector<size_t> mistakes = most_confident_mistakes(predictions, predictions.examples.size());
  const size_t all = mistakes.size();
  mistakes.resize(std::min<size_t>(all, 10));
  svg += fmt::format(
      "<text x=\"20\" y=\"{}\" font-size=\"14\">The {} misclassified sentences the model was most "
      "sure about (of {} misclassified)</text>\n",
      y, mistakes.size(), all);
  y += 24;
  for (size_t i : mistakes) {
    const Example& e = predictions.examples[i];
    const double p = predictions.probabilities[i];
    svg += fmt::format("<text x=\"20\" y=\"{}\" font-weight=\"bold\">P(positive) = {:.3f}, labelled {} ({})</text>\n",
                       y, p, e.label ? "positive" : "negative", e.source);
    for (const std::string& line : plot::wrap(e.text, 130)) {
      y += 16;
      svg += fmt::format("<text x=\"40\" y=\"{}\">{}</text>\n", y, plot::escape(line));
    }
    y += 24;
  }
  return y;
}

}  // namespace

std::string report_svg(const Predictions& predictions, const std::string& title) {
  std::string body = fmt::format("<text x=\"{}\" y=\"26\" text-anchor=\"middle\" font-size=\"15\">{}</text>\n",
                                 kWidth / 2, plot::escape(title));
  body += accuracy_bars(predictions);
  const double height = mistake_list(predictions, kBarsTop + kBarsHeight + 60, body);
  return plot::header(kWidth, height) + body + "</svg>\n";
}

}  // namespace ag::sentiment
