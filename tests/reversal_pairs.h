// Reversal pairs for the g2p tests, made by the one generator, tests/tools/reversal_pairs.sh.
#pragma once

#include <fmt/format.h>
#include <sys/wait.h>

#include <cstdio>
#include <string>
#include <vector>

#include "engine/error.h"

namespace ag {

// Writes `words` as `word<TAB>D R O W` lines into `path`.
inline void write_reversal_pairs(const std::string& path, const std::vector<std::string>& words) {
  const std::string command = fmt::format("bash '{}/tests/tools/reversal_pairs.sh' > '{}'", ATTOGRAD_SOURCE_DIR, path);
  FILE* pipe = ::popen(command.c_str(), "w");
  AG_CHECK(pipe != nullptr, "cannot run {}", command);
  for (const std::string& word : words) std::fputs((word + "\n").c_str(), pipe);
  const int status = ::pclose(pipe);
  AG_CHECK(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0, "{} failed", command);
}

}  // namespace ag
