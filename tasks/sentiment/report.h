// The held-out report of the UCI sentiment run (`train sentiment --dataset uci` at the end, and
// `eval sentiment --dataset uci`): accuracy overall and per source beside RESULTS.md §8's
// reference points, the confusion matrix, and report.svg (per-source accuracy bars with the
// reference points, and the misclassified sentences the model was most sure about).
#pragma once

#include <string>
#include <vector>

#include "tasks/sentiment/data.h"

namespace ag::sentiment {

// Labelled sentences and the probability the model gave each of being positive.
struct Predictions {
  std::vector<Example> examples;
  std::vector<double> probabilities;
};

// The share of right predictions among the examples of `source` ("" for all of them).
double accuracy(const Predictions& predictions, const std::string& source = "");

// Prints the accuracy per source beside the reference points, and the confusion matrix, of the
// sentences of `split_name` ("test").
void print_report(const Predictions& predictions, const std::string& split_name);

// The misclassified examples' indices, the most confident first (at most `count`).
std::vector<size_t> most_confident_mistakes(const Predictions& predictions, size_t count);

// report.svg: the accuracy bars with the reference points, and the ten most confident mistakes.
std::string report_svg(const Predictions& predictions, const std::string& title);

}  // namespace ag::sentiment
