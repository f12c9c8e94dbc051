// tasks::RunDir as the writer of a run folder's files: nothing before --out is claimed; after, the
// Trainer's files and the task's plots land in the claimed folder under their fixed names, and a
// name that would leave the folder is refused.
#include "tasks/common/run_dir.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace ag::tasks {
namespace {

const nlohmann::json kConfig = {{"task", "squares"}};

TEST(RunDir, WritesNothingBeforeItClaimsAFolder) {
  RunDir run;
  expect_error([&] { run.write("losses.svg", "<svg/>"); }, {"no --out was claimed", "losses.svg"});
  expect_error([&] { run.write(nn::RunFile::metrics, "epoch\n"); }, {"no --out was claimed", "metrics.csv"});
}

TEST(RunDir, WritesTheTrainersFilesAndThePlotsIntoTheClaimedFolder) {
  const TempDir dir;
  const std::string out = (dir / "run").string();
  RunDir run;
  run.claim(out, kConfig);
  run.write(nn::RunFile::config, "{}\n");
  run.write(nn::RunFile::metrics, "epoch,train_loss\n1,0.5\n");
  run.write(nn::RunFile::last_checkpoint, "last");
  run.write(nn::RunFile::best_checkpoint, "best");
  run.write("losses.svg", "<svg/>");
  EXPECT_TRUE(run.sync());
  EXPECT_EQ(run.where(), out);
  EXPECT_EQ(run.where(nn::RunFile::best_checkpoint), out + "/best.safetensors");
  EXPECT_EQ(read_bytes(dir / "run" / "config.json"), "{}\n");
  EXPECT_EQ(read_bytes(dir / "run" / "metrics.csv"), "epoch,train_loss\n1,0.5\n");
  EXPECT_EQ(read_bytes(dir / "run" / "last.safetensors"), "last");
  EXPECT_EQ(read_bytes(dir / "run" / "best.safetensors"), "best");
  EXPECT_EQ(read_bytes(dir / "run" / "losses.svg"), "<svg/>");
}

TEST(RunDir, RefusesANameThatLeavesTheFolder) {
  const TempDir dir;
  RunDir run;
  run.claim((dir / "run").string(), kConfig);
  expect_error([&] { run.write("../losses.svg", "<svg/>"); }, {"'../losses.svg' is not a file name"});
  expect_error([&] { run.write("", "<svg/>"); }, {"'' is not a file name"});
  EXPECT_FALSE(std::filesystem::exists(dir / "losses.svg"));
}

}  // namespace
}  // namespace ag::tasks
