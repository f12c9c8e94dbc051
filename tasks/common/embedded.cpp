#include "tasks/common/embedded.h"

#include "engine/error.h"

namespace ag::tasks {

std::string_view embedded_file(const std::string& name) {
  std::string names;
  for (const EmbeddedFile& file : kEmbeddedFiles) {
    if (file.name == name) return file.bytes;
    names += (names.empty() ? "" : ", ") + file.name;
  }
  fail("no embedded file '{}' (embedded: {})", name, names);
}

}  // namespace ag::tasks
