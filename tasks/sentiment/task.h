// `attograd train sentiment`: trains the classifier on seed 002's sentences (or a user's TSV),
// reports train accuracy and the test sentences' probabilities, writes OUT/. With --dataset uci:
// on the UCI corpus's 3,000 review sentences (hash split), reporting held-out test accuracy.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tasks/common/training.h"
#include "tasks/sentiment/model.h"

namespace ag::sentiment {

struct SentimentOptions {
  tasks::TrainingOptions training{.epochs = 100, .lr = 1e-2, .batch_size = 10, .seed = 0, .out = "runs/sentiment"};
  std::string dataset = "seed";  // "seed": seed 002's 50 sentences, or `data`; "uci": the UCI corpus
  std::string data;              // a TSV file instead of seed 002's sentences
  double val_fraction = 0.0;     // held out from `data` for validation
  int64_t dim = 16;
  int64_t heads = 0;          // 0: SelfAttention; N: MultiHeadAttention with N heads
  double weight_decay = 0.5;  // AdamW's decoupled weight decay (chosen on seeds 0-9: see task README)
  double dropout = 0;         // on the embeddings
  int64_t min_count = 1;      // the times a word must occur in the training texts to be in the vocabulary
  // "shuffled": each batch a run of the shuffled sentences; "length": of sentences of similar
  // length, the batches in a shuffled order (batches_by_length: far less padding)
  std::string batching = "shuffled";
  // "constant", or "cosine": each step's lr falls from lr to 0 along a half cosine over the run
  std::string lr_schedule = "constant";
};

// --dataset uci's defaults, RESULTS.md §8's recipe: 20 epochs of AdamW (weight decay 0.01),
// batches of 32, width 64, into runs/sentiment-uci; and, chosen on validation accuracy
// (tasks/README.md), batches by length, dropout 0.7 on the embeddings, and lr 2e-3 on a cosine
// schedule (the peer: a constant 1e-3).
// The settings of `train sentiment`, one row each (settings.cpp): its flags, config.json, the resume
// rules; and the defaults of what was not given: --dataset uci's recipe when it is chosen.
const std::vector<tasks::Setting<SentimentOptions>>& settings();
SentimentOptions dataset_defaults(const SentimentOptions& chosen);

struct PredictOptions {
  std::string checkpoint;          // a checkpoint written by `train sentiment`
  std::vector<std::string> texts;  // from the command line
  std::string file;                // or one text per line
  std::string explain;             // an SVG path: the first text's attention weights as a heatmap
};

struct EvalOptions {
  std::string checkpoint;        // a checkpoint written by `train sentiment`
  std::string data;              // label<TAB>text lines; empty: seed 002's five test sentences
  std::string dataset = "seed";  // "uci": the UCI corpus's `split` instead
  std::string split = "test";    // train, val or test
};

// The classifier a run trains and its checkpoints hold: the options' sizes with the vocabulary's,
// initialised from the run's seed. `train` and `first_step_loss` build it within the memory bound;
// `eval` and `predict` within the file's tensors (nn::build_from_config), then load them.
std::unique_ptr<SentimentClassifier> build_model(const SentimentOptions& options, int64_t vocab_size);

// Returns the process exit code; throws ag::Error on bad input.
int train(const SentimentOptions& options);

// The loss of `train`'s first step (on the first batch_size training sentences), with the model
// that made it: what `attograd graph sentiment` exports.
using StepLoss = tasks::StepLoss<SentimentClassifier>;
StepLoss first_step_loss(const SentimentOptions& options, const tasks::BeforeForward& before_forward = {});
// Prints "probability<TAB>label<TAB>text" per text.
int predict(const PredictOptions& options);
// Prints the accuracy and BCE loss on labelled sentences; on the UCI corpus also the report (per
// source, the confusion matrix, the reference points).
int eval(const EvalOptions& options);

}  // namespace ag::sentiment
