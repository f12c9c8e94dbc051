// `attograd train sentiment`: trains the classifier on seed 002's sentences (or a user's TSV),
// reports train accuracy and the test sentences' probabilities, writes OUT/.
#pragma once

#include <string>
#include <vector>

namespace ag::sentiment {

struct SentimentOptions {
  std::string data;           // empty: seed 002's 50 sentences
  double val_fraction = 0.0;  // held out from `data` for validation
  int64_t dim = 16;
  int64_t epochs = 100;
  double lr = 1e-2;
  double weight_decay = 0.5;  // AdamW's decoupled weight decay (chosen on seeds 0-9: see task README)
  int64_t batch_size = 10;
  uint64_t seed = 0;
  std::string out = "runs/sentiment";
  std::string resume;  // an OUT folder to continue
  bool quiet = false;
};

struct PredictOptions {
  std::string checkpoint;          // a checkpoint written by `train sentiment`
  std::vector<std::string> texts;  // from the command line
  std::string file;                // or one text per line
  std::string explain;             // an SVG path: the first text's attention weights as a heatmap
};

// Returns the process exit code; throws ag::Error on bad input.
int train(const SentimentOptions& options);
// Prints "probability<TAB>label<TAB>text" per text.
int predict(const PredictOptions& options);

}  // namespace ag::sentiment
