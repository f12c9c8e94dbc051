// A resume reads the run's last.safetensors once, through the whole program: the CLI carries the
// settings over from the run folder's checkpoint, the run folder checks the config against the
// settings table and the Trainer continues from that same checkpoint (nn::checkpoints_read counts
// the reads); the run folder reads best.safetensors once too, before training. Each checkpoint's
// config is parsed once (nn::configs_parsed), and a new run parses none and reads no checkpoint back.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "nn/checkpoint.h"
#include "tests/reversal_pairs.h"
#include "tests/test_util.h"
#include "tools/commands.h"

namespace {

using ag::TempDir;
using ag::write_reversal_pairs;

int run_program(std::vector<std::string> args) {
  args.insert(args.begin(), "attograd");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  return ag::cli::run(static_cast<int>(argv.size()), argv.data());
}

struct TaskRun {
  std::string task;
  std::vector<std::string> first, resume;  // flags of the first run and of the resume
};

void PrintTo(const TaskRun& run, std::ostream* out) { *out << run.task; }

class ResumeReads : public ::testing::TestWithParam<TaskRun> {};

// The first run's arguments, into DIR/run, with the data files it reads made in DIR.
std::vector<std::string> first_run(const TaskRun& run, const TempDir& dir) {
  std::ofstream text(dir / "text.txt");
  for (int line = 0; line < 10; ++line) text << "the whale and the sea, the ship and the sea; call me ishmael.\n";
  text.close();
  write_reversal_pairs((dir / "pairs.tsv").string(),
                       {"cat", "dog", "bird", "fish", "horse", "mouse", "tiger", "zebra", "camel", "eagle"});
  std::vector<std::string> args = {"train", run.task, "--quiet", "--out", (dir / "run").string()};
  for (const std::string& flag : run.first)
    args.push_back(flag.starts_with("DIR/") ? (dir / flag.substr(4)).string() : flag);
  return args;
}

TEST_P(ResumeReads, LastCheckpointOnce) {
  const TaskRun& run = GetParam();
  const TempDir dir;
  const std::string out = (dir / "run").string();
  ASSERT_EQ(run_program(first_run(run, dir)), 0);
  const int64_t before = ag::nn::checkpoints_read(), parsed = ag::nn::configs_parsed();
  std::vector<std::string> resume = {"train", run.task, "--quiet", "--resume", out};
  resume.insert(resume.end(), run.resume.begin(), run.resume.end());
  ASSERT_EQ(run_program(resume), 0);
  // last.safetensors once, and best.safetensors once, checked before training (the end of a run uses
  // its model, kept in memory, as g2p's test report does a best epoch of this process).
  EXPECT_EQ(ag::nn::checkpoints_read() - before, 2);
  // Each checkpoint's config is parsed once, when it is read; the run's own config is a value.
  EXPECT_EQ(ag::nn::configs_parsed() - parsed, 2);
}

TEST_P(ResumeReads, NewRunParsesNoConfig) {
  const TempDir dir;
  const std::vector<std::string> args = first_run(GetParam(), dir);
  const int64_t read = ag::nn::checkpoints_read(), parsed = ag::nn::configs_parsed();
  ASSERT_EQ(run_program(args), 0);
  // Written every epoch, read back never: not best.safetensors for the end's report either.
  EXPECT_EQ(ag::nn::checkpoints_read() - read, 0);
  EXPECT_EQ(ag::nn::configs_parsed() - parsed, 0);
}

INSTANTIATE_TEST_SUITE_P(
    Tasks, ResumeReads,
    ::testing::Values(TaskRun{"sentiment", {"--epochs", "1"}, {"--epochs", "2"}},
                      TaskRun{"squares", {"--epochs", "1"}, {"--epochs", "2"}},
                      TaskRun{"charlm",
                              {"--data", "DIR/text.txt", "--iters", "2", "--eval-interval", "1", "--block-size", "8",
                               "--layers", "1", "--width", "8", "--heads", "2", "--batch-size", "2"},
                              {"--iters", "3"}},
                      TaskRun{"g2p",
                              {"--data", "DIR/pairs.tsv", "--epochs", "1", "--d-model", "16", "--heads", "2",
                               "--enc-layers", "1", "--dec-layers", "1", "--ff", "32", "--batch-size", "4"},
                              {"--epochs", "2"}}),
    [](const ::testing::TestParamInfo<TaskRun>& info) { return info.param.task; });

}  // namespace
