// safetensors I/O: round trips, the strict reader's rejections, atomic writes.
#include "engine/safetensors.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "engine/hash.h"
#include "engine/json.h"
#include "tests/test_util.h"

namespace ag {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// The 8-byte little-endian length, then the header, then the data.
std::string raw_file(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  const uint64_t length = header.size();
  std::memcpy(bytes.data(), &length, 8);
  return bytes + header + data;
}

TEST(Safetensors, RoundTripsEveryDtypeScalarsEmptyTensorsAndMetadata) {
  const TempDir dir;
  const fs::path path = dir / "all.safetensors";
  const NamedTensors tensors{
      {"f32", tensor({1.5, -2, 3.25, 1e-30, 7, 8}, {2, 3})},
      {"f64", tensor({0.1, 1e300}, {2}, DType::f64)},
      {"i64", full({3}, -(int64_t{1} << 40), DType::i64)},
      {"b8", tensor({1, 0, 1}, {3, 1}, DType::b8)},
      {"scalar", scalar(42)},
      {"empty", zeros({0})},
      {"empty_2d", zeros({2, 0, 3}, DType::f64)},
  };
  const std::map<std::string, std::string> metadata{{"format", "test"}, {"config", R"({"d": 16})"}, {"empty", ""}};
  save_safetensors(path, tensors, metadata);

  EXPECT_EQ(read_bytes(path).substr(8).find("{"), 0u);
  uint64_t header_length = 0;
  std::memcpy(&header_length, read_bytes(path).data(), 8);
  EXPECT_EQ(header_length % 8, 0u) << "the header is padded to a multiple of 8";
  const SafetensorsFile file = load_safetensors(path);
  EXPECT_EQ(file.metadata, metadata);
  ASSERT_EQ(file.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, expected] = tensors[i];
    const auto& [loaded_name, loaded] = file.tensors[i];
    EXPECT_EQ(loaded_name, name);
    EXPECT_EQ(loaded.shape(), expected.shape()) << name;
    EXPECT_EQ(loaded.dtype(), expected.dtype()) << name;
    EXPECT_EQ(loaded.to_vector(), expected.to_vector()) << name;
  }
}

TEST(Safetensors, WithoutMetadataHoldsOnlyTheChecksum) {
  const TempDir dir;
  const fs::path path = dir / "plain.safetensors";
  save_safetensors(path, {{"x", ones({2})}});
  EXPECT_NE(read_bytes(path).find("\"__metadata__\":{\"attograd_checksum\":\"xxh3_64:"), std::string::npos);
  EXPECT_TRUE(load_safetensors(path).metadata.empty()) << "the checksum is the format's, not the caller's";
}

// The header and data of a written file, and the header as the checksum covers it: canonical JSON
// (sorted keys, no padding) without the checksum. Returns the stored checksum.
std::string split_file(const std::string& bytes, std::string& canonical, std::string& data) {
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  const std::string stored = header["__metadata__"]["attograd_checksum"];
  header["__metadata__"].erase("attograd_checksum");
  canonical = header.dump();
  data = bytes.substr(8 + length);
  return stored;
}

// The stored checksum is XXH3-64 (xxhash's one-shot function here, the streaming one in the
// writer) of the canonical header followed by the data.
TEST(Safetensors, ChecksumIsXxh3OfTheCanonicalHeaderAndTheData) {
  const TempDir dir;
  const fs::path path = dir / "sum.safetensors";
  save_safetensors(path, {{"b", arange(0, 5, 1, DType::f64)}, {"a", ones({3, 2})}}, {{"note", "x"}});
  std::string canonical, data;
  const std::string stored = split_file(read_bytes(path), canonical, data);
  const std::string whole = canonical + data;
  EXPECT_EQ(stored, fmt::format("xxh3_64:{:016x}", XXH3_64bits(whole.data(), whole.size())));
}

// Files written before XXH3 (and tools/golden/golden.py's) carry FNV-1a 64: still verified.
TEST(Safetensors, ReadsAndVerifiesTheOlderFnvChecksum) {
  const TempDir dir;
  const fs::path path = dir / "old.safetensors";
  save_safetensors(path, {{"x", arange(0, 4, 1)}});
  std::string canonical, data;
  const std::string bytes = read_bytes(path), xxh3 = split_file(bytes, canonical, data);
  const std::string fnv = fmt::format("fnv1a64:{:016x}", fnv1a64(data, fnv1a64(canonical)));
  std::string old = bytes;
  old.replace(old.find(xxh3), xxh3.size(), fnv);  // the same length: the header length holds
  write_bytes(path, old);
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.to_vector(), (std::vector<double>{0, 1, 2, 3}));
  old[old.size() - 1] ^= 1;
  write_bytes(path, old);
  expect_error([&] { load_safetensors(path); }, {"corrupt", "fnv1a64:"});
  std::string unknown = bytes;
  unknown.replace(unknown.find(xxh3), 7, "md5sum:");
  write_bytes(path, unknown);
  expect_error([&] { load_safetensors(path); }, {"corrupt", "names no algorithm", "xxh3_64:"});
}

TEST(Safetensors, RefusesToWriteUndefinedRepeatedOrReservedNames) {
  const TempDir dir;
  const fs::path path = dir / "bad.safetensors";
  expect_error([&] { save_safetensors(path, {{"x", Tensor()}}); }, {"'x'", "undefined"});
  expect_error([&] { save_safetensors(path, {{"x", ones({1})}, {"x", ones({1})}}); }, {"'x'", "repeated"});
  expect_error([&] { save_safetensors(path, {{"__metadata__", ones({1})}}); }, {"reserved"});
  EXPECT_FALSE(fs::exists(path));
}

struct BadFile {
  std::string what;
  std::string bytes;
  std::vector<std::string> message;
};

std::vector<BadFile> bad_files() {
  const std::string good_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  const std::string eight(8, '\0');
  std::string huge_length(8, '\xff');
  return {
      {"empty file", "", {"0 bytes", "shorter than the 8-byte header length"}},
      {"3 bytes", "abc", {"3 bytes"}},
      {"header length past the end", raw_file("{}").substr(0, 9), {"header length 2 runs past the end"}},
      {"header length 2^64-1", huge_length + "{}", {"runs past the end"}},
      {"invalid JSON", raw_file(R"({"x":)"), {"not valid JSON"}},
      {"header not an object", raw_file("[1,2]"), {"not a JSON object"}},
      {"unknown dtype",
       raw_file(R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", eight),
       {"'x'", "dtype 'F16'", "expected one of F32, F64, I64, BOOL"}},
      {"offsets past the data",
       raw_file(R"({"x":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", eight),
       {"truncated", "its tensors need 16 data bytes, it has 8"}},
      {"offsets reversed",
       raw_file(R"({"x":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight),
       {"'x'", "[8, 0]"}},
      {"size does not match the shape",
       raw_file(R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight),
       {"'x'", "(3)", "needs 12 bytes", "span 8"}},
      {"overlapping data",
       raw_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                eight),
       {"tensors 'a' and 'b' share data bytes"}},
      {"a gap between tensors",
       raw_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                R"("b":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})",
                eight),
       {"a gap of 4 bytes", "before tensor 'b'"}},
      {"a gap before the first tensor",
       raw_file(R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight),
       {"a gap of 4 bytes", "before tensor 'x'"}},
      {"bytes after the last tensor",
       raw_file("{" + good_entry + "}", eight + "abc"),
       {"3 bytes after the last tensor that the header does not describe"}},
      {"a repeated name",
       raw_file("{" + good_entry + "," + good_entry + "}", eight),
       {"the header", "repeats the key \"x\""}},
      {"nested 65 levels",
       raw_file(R"({"__metadata__":{},"deep":)" + std::string(64, '[') + std::string(64, ']') + "}"),
       {"the header", "nests deeper than 64 levels"}},
      {"nested 200,000 levels",
       raw_file("{\"deep\":" + std::string(200'000, '[') + std::string(200'000, ']') + "}"),
       {"nests deeper than 64 levels"}},
      {"header length 0", std::string(8, '\0') + "{}", {"its header length is 0"}},
      {"a shape whose product wraps 2^64",
       raw_file(R"({"x":{"dtype":"F32","shape":[3,6148914691236517206],"data_offsets":[0,8]}})", eight),
       {"'x'", "(3,6148914691236517206)", "more elements than a tensor can hold"}},
      {"data_offsets near 2^64",
       raw_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551608,18446744073709551615]}})",
                eight),
       {"'x'", "needs 8 bytes, but data_offsets span 7"}},
      {"negative size",
       raw_file(R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight),
       {"'x'", "invalid size", "[-2]"}},
      {"fractional size",
       raw_file(R"({"x":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", eight),
       {"'x'", "invalid size"}},
      {"impossibly large shape",
       raw_file(R"({"x":{"dtype":"F32","shape":[1048576,1048576,1048576],"data_offsets":[0,8]}})", eight),
       {"'x'", "needs 4611686018427387904 bytes, but data_offsets span 8"}},
      {"missing data_offsets", raw_file(R"({"x":{"dtype":"F32","shape":[2]}})", eight), {"'x'", "data_offsets"}},
      {"non-integer offsets",
       raw_file(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":["0",8]}})", eight),
       {"'x'", "non-integer data_offsets"}},
      {"truncated data",
       raw_file("{" + good_entry + "}", eight).substr(0, 8 + 2 + good_entry.size() + 5),
       {"truncated", "its tensors need 8 data bytes, it has 5"}},
      {"BOOL byte other than 0 or 1",
       raw_file(R"({"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x07"),
       {"'m'", "not 0 or 1"}},
      {"metadata not an object", raw_file(R"({"__metadata__":[1]})"), {"__metadata__ is not an object"}},
      {"metadata value not a string", raw_file(R"({"__metadata__":{"version":1}})"), {"metadata 'version'"}},
  };
}

TEST(Safetensors, TheStrictReaderRejectsBadFilesSayingWhatIsWrong) {
  const TempDir dir;
  for (const BadFile& bad : bad_files()) {
    SCOPED_TRACE(bad.what);
    const fs::path path = dir / "bad.safetensors";
    write_bytes(path, bad.bytes);
    std::vector<std::string> parts = bad.message;
    parts.push_back(path.string());  // every message names the file
    expect_error([&] { load_safetensors(path); }, parts);
  }
}

TEST(Safetensors, MissingFilesAndDirectoriesAreErrors) {
  const TempDir dir;
  expect_error([&] { load_safetensors(dir / "absent.safetensors"); }, {"absent.safetensors", "cannot open"});
  EXPECT_NE(error_of([&] { load_safetensors(fs::path(dir)); }), "");
}

// A bit flipped anywhere in a good file's header must give a file that loads or an ag::Error:
// never a crash, never another exception.
TEST(Safetensors, BitFlipsInTheHeaderNeverCrashTheReader) {
  const TempDir dir;
  const fs::path good = dir / "good.safetensors";
  save_safetensors(good, {{"w", tensor({1, 2, 3, 4, 5, 6}, {2, 3})}, {"b", ones({3}, DType::f64)}}, {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  const fs::path flipped = dir / "flipped.safetensors";
  int rejected = 0;
  for (size_t at = 0; at < 8 + 64; ++at) {
    for (int bit : {0, 3, 6}) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
      write_bytes(flipped, damaged);
      rejected += error_of([&] { load_safetensors(flipped); }).empty() ? 0 : 1;
    }
  }
  EXPECT_GE(rejected, 8 * 3) << "every flip in the length bytes must at least be rejected";

  std::string damaged = bytes;
  damaged[8] ^= 0x01;  // '{' becomes 'z'
  write_bytes(flipped, damaged);
  expect_error([&] { load_safetensors(flipped); }, {"not valid JSON"});
}

// With the checksum attograd writes, no single flipped bit anywhere (length, header, padding,
// data) goes unnoticed: each one is an ag::Error, most of them saying "corrupt", or (a flip in
// the checksum's own key) the file loads as one without a checksum, which checkpoints refuse.
TEST(Safetensors, EveryFlippedBitOfAnAttogradFileIsRejected) {
  const TempDir dir;
  const fs::path good = dir / "good.safetensors";
  save_safetensors(good, {{"w", tensor({1, 2, 3, 4, 5, 6}, {2, 3})}, {"b", ones({3}, DType::f64)}}, {{"k", "v"}});
  const std::string bytes = read_bytes(good);
  size_t corrupt = 0;
  for (size_t at = 0; at < bytes.size(); ++at) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string damaged = bytes;
      damaged[at] = static_cast<char>(damaged[at] ^ (1 << bit));
      bool checksummed = true;
      const std::string error =
          error_of([&] { checksummed = parse_safetensors(damaged, "good.safetensors").checksummed; });
      ASSERT_TRUE(error != "" || !checksummed) << "byte " << at << " bit " << bit << " went unnoticed";
      corrupt += error.find("corrupt") != std::string::npos;
    }
  }
  const size_t data_bits = 8 * (6 * 4 + 3 * 8);
  EXPECT_GE(corrupt, data_bits) << "at least every flip in the data is reported as corruption";
}

TEST(Safetensors, FilesWithoutAChecksumStillLoad) {
  const std::string header = R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const float one = 1.0f;
  const SafetensorsFile file =
      parse_safetensors(raw_file(header, std::string(reinterpret_cast<const char*>(&one), 4)), "pytorch.safetensors");
  EXPECT_EQ(file.tensors.at(0).second.to_vector(), std::vector<double>{1});
  EXPECT_FALSE(file.checksummed);
}

TEST(Safetensors, NonRegularFilesAreRefusedWithoutOpeningThem) {
  const TempDir dir;
  const fs::path fifo = dir / "pipe.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error([&] { load_safetensors(fifo); }, {"pipe.safetensors", "not a regular file"});  // would block if opened
}

TEST(Safetensors, OverwriteReplacesTheFileWholeAndLeavesNoTemporary) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  save_safetensors(path, {{"x", ones({4})}});
  save_safetensors(path, {{"x", full({2}, 3)}});
  EXPECT_EQ(load_safetensors(path).tensors.at(0).second.to_vector(), (std::vector<double>{3, 3}));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1);
}

// A write that fails half-way (here: the file-size limit is hit, as a full disk would) leaves
// the old file byte for byte, and no temporary behind.
TEST(Safetensors, AFailedWriteLeavesTheOldFileIntact) {
  const TempDir dir;
  const fs::path path = dir / "model.safetensors";
  save_safetensors(path, {{"x", ones({4})}});
  const std::string old_bytes = read_bytes(path);

  rlimit previous{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &previous), 0);
  const auto previous_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = previous;
  small.rlim_cur = 4096;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const std::string error = error_of([&] { save_safetensors(path, {{"x", zeros({100000})}}); });
  ::setrlimit(RLIMIT_FSIZE, &previous);
  std::signal(SIGXFSZ, previous_handler);

  EXPECT_NE(error.find("write failed"), std::string::npos) << error;
  EXPECT_NE(error.find(path.string()), std::string::npos) << error;
  EXPECT_EQ(read_bytes(path), old_bytes);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left";
}

TEST(Safetensors, SavingOntoADirectoryFailsAndLeavesItAlone) {
  const TempDir dir;
  const fs::path target = dir / "taken";
  fs::create_directories(target / "inside");
  expect_error([&] { save_safetensors(target, {{"x", ones({2})}}); }, {"taken", "is a folder"});
  EXPECT_TRUE(fs::is_directory(target / "inside"));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 1) << "a temporary was left";
  expect_error(
      [&] {
        save_safetensors(dir / "no" / "such" / "dir.safetensors", {{"x", ones({2})}});
      },
      {"cannot write"});
}

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
