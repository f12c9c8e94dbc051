// Fuzz target: the `attograd` command line. The input is split at '\n' into arguments and parsed
// by every subcommand's flags and checks (ag::cli::Mode::parse_only: nothing runs, no file is
// written). Any exit code is fine; a crash, a sanitizer report or an exception escaping is not.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tools/commands.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> args = {"attograd"};
  std::string current;
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == '\n') {
      args.push_back(current);
      current.clear();
    } else {
      current += static_cast<char>(data[i]);
    }
  }
  args.push_back(current);
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  ag::cli::run(static_cast<int>(args.size()), argv.data(), ag::cli::Mode::parse_only);
  return 0;
}
