// Data files compiled into the program (by tasks/embed_files.cmake, listed in
// tasks/CMakeLists.txt), so `attograd` runs from any folder without the source tree.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ag::tasks {

struct EmbeddedFile {
  std::string name;  // its path under tasks/, e.g. "sentiment/train.tsv"
  std::string_view bytes;
};

extern const std::vector<EmbeddedFile> kEmbeddedFiles;

// The bytes of the embedded file `name`; an error naming the embedded files if there is none.
std::string_view embedded_file(const std::string& name);

}  // namespace ag::tasks
