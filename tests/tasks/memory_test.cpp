// Resident memory stays flat over a long training loop: nothing accumulates per step (graphs,
// saved tensors, gradients, optimizer state, cached primitives). Its own executable because under
// AddressSanitizer it turns the quarantine off (freed memory would otherwise stay resident).
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/loss.h"
#include "nn/optim.h"
#include "tasks/common/embedded.h"
#include "tasks/sentiment/data.h"
#include "tasks/sentiment/model.h"

// Read by the ASan runtime only (in other builds nothing calls it); ASAN_OPTIONS still wins.
extern "C" const char* __asan_default_options() { return "quarantine_size_mb=0"; }

namespace ag::sentiment {
namespace {

double resident_megabytes() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

TEST(Memory, ResidentMemoryIsFlatOver1000TrainingSteps) {
  const std::vector<Example> examples =
      parse_tsv(std::string(tasks::embedded_file("sentiment/train.tsv")), "sentiment/train.tsv");
  const Vocabulary vocab(examples);
  manual_seed(0);
  SentimentClassifier model({.vocab_size = vocab.size(), .dim = 16, .heads = 2});
  nn::AdamW optimizer(model.parameters(), {.lr = 1e-2, .weight_decay = 0.5});
  constexpr int kSteps = 1000, kWarmUp = 100, kBatch = 10;
  double after_warm_up = 0, highest = 0;
  for (int step = 1; step <= kSteps; ++step) {
    std::vector<std::string> texts;
    std::vector<double> labels;
    for (int i = 0; i < kBatch; ++i) {
      const Example& e = examples[(step * kBatch + i) % examples.size()];
      texts.push_back(e.text);
      labels.push_back(e.label);
    }
    auto [indices, padding] = vocab.encode(texts);
    model.train();
    optimizer.zero_grad();
    Tensor loss = binary_cross_entropy_with_logits(model.forward(indices, padding), tensor(labels, {kBatch}));
    loss.backward();
    optimizer.step();
    if (step % 5 == 0) {  // an evaluation, as the Trainer does after each epoch
      NoGradGuard no_grad;
      model.eval();
      model.forward(indices, padding);
    }
    const double rss = resident_megabytes();
    if (step == kWarmUp) after_warm_up = rss;
    if (step >= kWarmUp) highest = std::max(highest, rss);
  }
  const double growth = highest - after_warm_up;
  std::printf("RSS after %d steps %.2f MB, highest until step %d %.2f MB: growth %.3f MB\n", kWarmUp, after_warm_up,
              kSteps, highest, growth);
  EXPECT_LT(growth, 1.0) << "resident memory grew by " << growth << " MB over " << kSteps - kWarmUp << " steps";
}

}  // namespace
}  // namespace ag::sentiment
