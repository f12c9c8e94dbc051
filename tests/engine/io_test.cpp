// engine/io.h: what writing to each kind of path does (Note [output paths] in engine/io.cpp), and
// that no output replaces an input (Note [inputs are not outputs] in engine/io.h).
#include "engine/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "engine/safetensors.h"
#include "engine/tensor.h"
#include "tests/test_util.h"

namespace ag {
namespace {

namespace fs = std::filesystem;

// Note [output paths]: a symlink's target is replaced, the link stays.
TEST(OutputPaths, ASymlinkIsFollowedAndItsTargetReplacedAtomically) {
  const TempDir dir;
  fs::create_directories(dir / "real");
  write_bytes(dir / "real" / "file.txt", "old");
  fs::create_symlink("real/file.txt", dir / "link.txt");
  write_file_atomically(dir / "link.txt", "new");
  EXPECT_TRUE(fs::is_symlink(dir / "link.txt"));
  EXPECT_EQ(read_bytes(dir / "real" / "file.txt"), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(dir / "real"), fs::directory_iterator()), 1) << "a temporary was left";
  fs::create_symlink("real/new.txt", dir / "to-new.txt");  // a symlink to a file not made yet, as `>` makes it
  write_file_atomically(dir / "to-new.txt", "made");
  EXPECT_EQ(read_bytes(dir / "real" / "new.txt"), "made");
  EXPECT_TRUE(fs::is_symlink(dir / "to-new.txt"));
}

TEST(OutputPaths, AFifoIsStreamedIntoNotReplaced) {
  const TempDir dir;
  const fs::path fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // No reader: refused at once, not waited for.
  expect_error([&] { write_file_atomically(fifo, "lost"); }, {"pipe", "is a FIFO that no process reads"});
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  write_file_atomically(fifo, "through the pipe");
  char received[64] = {};
  EXPECT_EQ(::read(reader, received, sizeof received), 16);
  ::close(reader);
  EXPECT_EQ(std::string(received), "through the pipe");
  struct stat status {};
  ASSERT_EQ(::lstat(fifo.c_str(), &status), 0);
  EXPECT_TRUE(S_ISFIFO(status.st_mode)) << "the FIFO was replaced";
}

TEST(OutputPaths, ACharacterDeviceIsWrittenIntoAndStays) {
  const TempDir dir;
  fs::create_symlink("/dev/null", dir / "null");  // a symlink to the real device: written, never replaced
  write_file_atomically(dir / "null", "discarded");
  struct stat status {};
  ASSERT_EQ(::stat("/dev/null", &status), 0);
  EXPECT_TRUE(S_ISCHR(status.st_mode));
  EXPECT_TRUE(fs::is_symlink(dir / "null"));
}

TEST(OutputPaths, FoldersLoopsAndSymlinksIntoMissingFoldersAreRefusedUntouched) {
  const TempDir dir;
  fs::create_symlink("nowhere/file", dir / "dangling");
  expect_error([&] { write_file_atomically(dir / "dangling", "x"); }, {"dangling", "whose folder does not exist"});
  EXPECT_TRUE(fs::is_symlink(dir / "dangling"));
  fs::create_symlink("loop-b", dir / "loop-a");
  fs::create_symlink("loop-a", dir / "loop-b");
  expect_error([&] { write_file_atomically(dir / "loop-a", "x"); }, {"loop-a", "symbolic links"});
  fs::create_directories(dir / "folder");
  fs::create_symlink("folder", dir / "folder-link");
  expect_error([&] { write_file_atomically(dir / "folder-link", "x"); }, {"folder-link", "is a folder"});
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 5) << "a temporary was left";
  expect_error([&] { write_file_atomically("", "x"); }, {"empty name"});
}

// Note [inputs are not outputs]: the input by its own path, a hard link, a symlink and a `..` path
// is refused, naming the output and the input, and stays as it was; another file is written.
TEST(InputsAreNotOutputs, AnInputByAnyPathIsRefusedAndStays) {
  const TempDir dir;
  fs::create_directories(dir / "sub");
  write_bytes(dir / "in.txt", "input");
  note_input(dir / "in.txt");
  fs::create_hard_link(dir / "in.txt", dir / "hard.txt");
  fs::create_symlink("in.txt", dir / "soft.txt");
  for (const fs::path& output : {dir / "in.txt", dir / "hard.txt", dir / "soft.txt", dir / "sub" / ".." / "in.txt"}) {
    expect_error([&] { write_file_atomically(output, "output"); },
                 {output.string() + ": is the same file as " + (dir / "in.txt").string(), "an input of this command"});
    expect_error([&] { check_not_an_input(output); }, {"is the same file as"});
  }
  EXPECT_EQ(read_bytes(dir / "in.txt"), "input");
  EXPECT_TRUE(fs::is_symlink(dir / "soft.txt"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 4) << "a temporary was left";
  write_file_atomically(dir / "out.txt", "output");
  EXPECT_EQ(read_bytes(dir / "out.txt"), "output");
}

// An input is a file from outside as it is now: not one this process wrote, not one replaced since it
// was read (its inode is another file's now), not one forgotten.
TEST(InputsAreNotOutputs, OwnFilesReplacedAndForgottenInputsAreNotInputs) {
  const TempDir dir;
  write_file_atomically(dir / "own.txt", "written here");
  note_input(dir / "own.txt");
  write_file_atomically(dir / "own.txt", "again");
  write_bytes(dir / "replaced.txt", "old");
  note_input(dir / "replaced.txt");
  write_bytes(dir / "other.txt", "new");
  fs::rename(dir / "other.txt", dir / "replaced.txt");
  write_file_atomically(dir / "replaced.txt", "newer");
  write_bytes(dir / "forgotten.txt", "old");
  note_input(dir / "forgotten.txt");
  forget_input(dir / "forgotten.txt");
  write_file_atomically(dir / "forgotten.txt", "new");
  EXPECT_EQ(read_bytes(dir / "forgotten.txt"), "new");
  note_input(dir / "missing.txt");  // nothing to note: neither a new name nor a device is an input
  note_input("/dev/null");
  write_file_atomically("/dev/null", "discarded");
}

// The checkpoint reader notes what it reads: saving over it is refused.
TEST(InputsAreNotOutputs, ACheckpointReadIsAnInput) {
  const TempDir dir;
  const NamedTensors tensors = {{"w", ones({2})}};
  write_bytes(dir / "model.safetensors", safetensors_bytes(tensors));
  load_safetensors(dir / "model.safetensors");
  expect_error([&] { save_safetensors(dir / "model.safetensors", tensors); },
               {"model.safetensors: is the same file as"});
}

}  // namespace
}  // namespace ag
