// Fuzz target: the `attograd` program run for real on fuzzed files. The input is
//   [command: 1 byte][checkpoint length: 4 bytes, little-endian][checkpoint][data file]
// written into a fresh temporary folder; the command byte picks one of eval/predict/sample/train
// below (tiny models, one thread), pointed at those files. Any exit code is fine; a crash, a
// sanitizer report, a hang, unbounded memory or an exception escaping `run` is not. Under
// libFuzzer a structure-aware mutator changes the checkpoint (safetensors_mutator.h) half the time.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/safetensors_mutator.h"
#include "tools/commands.h"

namespace {

constexpr size_t kPrefix = 5;  // command byte, checkpoint length

struct Input {
  unsigned command;
  std::string_view checkpoint, data;
};

Input split_input(const uint8_t* bytes, size_t size) {
  const std::string_view all(reinterpret_cast<const char*>(bytes), size);
  uint32_t length = 0;
  std::memcpy(&length, bytes + 1, 4);
  const size_t checkpoint = std::min<size_t>(length, size - kPrefix);
  return {bytes[0], all.substr(kPrefix, checkpoint), all.substr(kPrefix + checkpoint)};
}

std::vector<std::string> command_line(unsigned command, const std::string& dir) {
  const std::string ckpt = dir + "/run/last.safetensors", data = dir + "/data.txt", out = dir + "/out";
  const std::vector<std::vector<std::string>> commands = {
      {"eval", "sentiment", "--checkpoint", ckpt, "--data", data},
      {"predict", "sentiment", "--checkpoint", ckpt, "--file", data},
      {"eval", "squares", "--checkpoint", ckpt, "--n", "4"},
      {"eval", "charlm", "--checkpoint", ckpt, "--data", data},
      {"sample", "--checkpoint", ckpt, "--tokens", "4", "--prompt", "a"},
      {"train", "sentiment", "--data", data, "--epochs", "1", "--dim", "4", "--out", out, "--quiet"},
      {"train", "sentiment", "--resume", dir + "/run", "--epochs", "2", "--dim", "4", "--out", out, "--quiet"},
      {"train", "charlm", "--data", data, "--iters", "2", "--eval-interval", "1", "--block-size", "8", "--layers", "1",
       "--heads", "1", "--width", "8", "--out", out, "--quiet"},
  };
  std::vector<std::string> args = {"attograd", "--threads", "1"};
  const std::vector<std::string>& chosen = commands[command % commands.size()];
  args.insert(args.end(), chosen.begin(), chosen.end());
  return args;
}

void write(const std::string& path, std::string_view bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* bytes, size_t size) {
  if (size < kPrefix) return 0;
  const Input input = split_input(bytes, size);
  std::string dir = (std::filesystem::temp_directory_path() / "attograd-fuzz-XXXXXX").string();
  if (::mkdtemp(dir.data()) == nullptr) return 0;
  std::filesystem::create_directory(dir + "/run");
  write(dir + "/run/last.safetensors", input.checkpoint);
  write(dir + "/data.txt", input.data);
  std::vector<std::string> args = command_line(input.command, dir);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ag::cli::run(static_cast<int>(args.size()), argv.data(), ag::cli::Mode::run);
  std::filesystem::remove_all(dir);
  return 0;
}

#ifdef ATTOGRAD_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

// Half the time the checkpoint, structurally; else libFuzzer's own mutation of the whole input.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* bytes, size_t size, size_t max_size, unsigned int seed) {
  if (size >= kPrefix && seed % 2 == 0) {
    const Input input = split_input(bytes, size);
    const std::optional<std::string> checkpoint = fuzz::SafetensorsMutator(seed).mutate(input.checkpoint);
    if (checkpoint && kPrefix + checkpoint->size() + input.data.size() <= max_size) {
      const std::string data(input.data);
      const auto length = static_cast<uint32_t>(checkpoint->size());
      std::memcpy(bytes + 1, &length, 4);
      std::memcpy(bytes + kPrefix, checkpoint->data(), checkpoint->size());
      std::memcpy(bytes + kPrefix + checkpoint->size(), data.data(), data.size());
      return kPrefix + checkpoint->size() + data.size();
    }
  }
  return LLVMFuzzerMutate(bytes, size, max_size);
}
#endif
