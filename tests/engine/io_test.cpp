// engine/io.h: what writing to each kind of path does (Note [output paths] in engine/io.cpp).
#include "engine/io.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

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

}  // namespace
}  // namespace ag
