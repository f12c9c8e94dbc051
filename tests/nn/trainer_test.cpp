// nn::Trainer on a problem small enough to follow by hand: y = w·x fitted to y = 2x by full-batch
// SGD, where each step shrinks w - 2 by a known factor; a resume from the checkpoint the Trainer
// wrote continues bit for bit; a checkpoint of another task is refused.
#include "nn/trainer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "engine/io.h"
#include "engine/ops.h"
#include "nn/layers.h"
#include "tests/test_util.h"

namespace ag::nn {
namespace {

const std::vector<double> kX = {1, 2, 3, 4};  // mean of x² = 7.5

// MSE of w·x against 2x over the examples at `rows`.
class LineTask : public TrainTask {
 public:
  explicit LineTask(Linear& model) : model_(model) {}
  int64_t train_size() const override { return static_cast<int64_t>(kX.size()); }
  Tensor loss(const std::vector<int64_t>& rows) override {
    std::vector<double> x, y;
    for (int64_t row : rows) {
      x.push_back(kX[static_cast<size_t>(row)]);
      y.push_back(2 * kX[static_cast<size_t>(row)]);
    }
    const int64_t n = static_cast<int64_t>(rows.size());
    return mse_loss(model_(tensor(x, {n, 1})), tensor(y, {n, 1}));
  }
  MetricSums evaluate(const dist::Shard& shard) override {
    const int64_t n = train_size(), first = shard.begin(n), rows = shard.end(n) - first;
    std::vector<int64_t> mine(static_cast<size_t>(rows));
    for (int64_t i = 0; i < rows; ++i) mine[static_cast<size_t>(i)] = first + i;
    if (rows == 0) return {{"val_loss", {0, 0}}};
    return {{"val_loss", {loss(mine).item() * static_cast<double>(rows), static_cast<double>(rows)}}};
  }

 private:
  Linear& model_;
};

// The run's files, kept in memory for the tests to read back.
class MemoryFiles : public RunFiles {
 public:
  void write(RunFile file, const std::string& bytes) override { files_[file] = bytes; }
  bool sync() override { return true; }
  std::string where() const override { return "memory"; }
  std::string where(RunFile) const override { return "memory"; }
  const std::string& operator[](RunFile file) const { return files_.at(file); }

 private:
  std::map<RunFile, std::string> files_;
};

// A run's last checkpoint as the program reads it back: from the file last.safetensors.
Checkpoint read_last(const MemoryFiles& files, const TempDir& dir) {
  const std::string path = (dir / "last.safetensors").string();
  write_file_atomically(path, files[RunFile::last_checkpoint]);
  return read_checkpoint(path);
}

// The Trainer's options for these runs: no progress bar; no files and config empty unless given.
TrainerOptions line_options(int64_t epochs, int64_t batch_size, RunFiles* files = nullptr,
                            const std::string& task = "line") {
  TrainerOptions options;
  options.epochs = epochs;
  options.batch_size = batch_size;
  options.seed = 7;
  options.files = files;
  options.progress = false;
  options.config = {{"task", task}};
  return options;
}

struct LineRun {
  Linear model{1, 1, /*bias=*/false};
  SGD optimizer{model.parameters(), 0.01};
  LineTask task{model};
  LineRun() {
    const NoGradGuard no_grad;
    model.weight.fill_(0);
  }
  float w() const { return model.weight.data<float>()[0]; }
};

TEST(Trainer, FullBatchSgdFollowsTheClosedForm) {
  // dL/dw = 2 (w - 2) mean(x²) = 15 (w - 2): with lr 0.01 each step multiplies w - 2 by 0.85, so
  // from w = 0, w_k = 2 - 2·0.85^k, and epoch k's train loss (before its step) is 7.5 (w_{k-1} - 2)².
  LineRun run;
  const std::vector<EpochRecord> history = Trainer(run.model, run.optimizer, run.task, line_options(3, 4)).fit();
  ASSERT_EQ(history.size(), 3u);
  for (int k = 1; k <= 3; ++k) {
    const double before = 2 - 2 * std::pow(0.85, k - 1), after = 2 - 2 * std::pow(0.85, k);
    const auto& record = history[static_cast<size_t>(k - 1)];
    EXPECT_EQ(record.epoch, k);
    EXPECT_NEAR(record.train_loss, 7.5 * (before - 2) * (before - 2), 1e-5 * 30) << "epoch " << k;
    EXPECT_NEAR(record.metrics.at("val_loss"), 7.5 * (after - 2) * (after - 2), 1e-5 * 30) << "epoch " << k;
  }
  EXPECT_NEAR(run.w(), 2 - 2 * std::pow(0.85, 3), 1e-6);
}

TEST(Trainer, ResumeFromItsCheckpointEqualsAnUninterruptedRun) {
  // Batches of 2 in a seeded shuffle: the order matters, so the resume must restore the generator.
  const TempDir dir;
  MemoryFiles a, b;
  LineRun straight;
  const std::vector<EpochRecord> all =
      Trainer(straight.model, straight.optimizer, straight.task, line_options(4, 2, &a)).fit();
  LineRun first;
  Trainer(first.model, first.optimizer, first.task, line_options(2, 2, &b)).fit();
  LineRun rest;
  Trainer resumed(rest.model, rest.optimizer, rest.task, line_options(4, 2, &b));
  resumed.resume(read_last(b, dir));
  const std::vector<EpochRecord> history = resumed.fit();
  ASSERT_EQ(history.size(), all.size());
  for (size_t i = 0; i < all.size(); ++i) EXPECT_EQ(history[i].train_loss, all[i].train_loss) << "epoch " << i + 1;
  EXPECT_EQ(rest.w(), straight.w());
  EXPECT_NE(rest.w(), first.w());
  EXPECT_EQ(b[RunFile::metrics], a[RunFile::metrics]);
  EXPECT_EQ(b[RunFile::config], a[RunFile::config]);
}

TEST(Trainer, RefusesAnotherTasksCheckpoint) {
  const TempDir dir;
  MemoryFiles run;
  LineRun first;
  Trainer(first.model, first.optimizer, first.task, line_options(1, 4, &run)).fit();
  LineRun other;
  Trainer trainer(other.model, other.optimizer, other.task, line_options(2, 4, nullptr, "curve"));
  expect_error([&] { trainer.resume(read_last(run, dir)); },
               {"last.safetensors", "cannot resume", "task is \"line\"", "\"curve\""});
}

}  // namespace
}  // namespace ag::nn
