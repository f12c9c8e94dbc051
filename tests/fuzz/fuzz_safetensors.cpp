// Fuzz target: the safetensors reader on arbitrary bytes. A file it accepts or an ag::Error are
// fine; a crash, a sanitizer report, a hang or any other exception is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/error.h"
#include "engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ag::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  } catch (const ag::Error&) {
  }
  return 0;
}
