// Fuzz target: the safetensors reader on arbitrary bytes. A file it accepts or an ag::Error are
// fine; a crash, a sanitizer report, a hang or any other exception is a finding. Under libFuzzer
// a structure-aware mutator (safetensors_mutator.h) makes half the mutations.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "engine/error.h"
#include "engine/safetensors.h"
#include "tests/fuzz/safetensors_mutator.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ag::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.safetensors");
  } catch (const ag::Error&) {
  }
  return 0;
}

#ifdef ATTOGRAD_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  if (seed % 2 == 0) {
    const std::optional<std::string> mutated =
        fuzz::SafetensorsMutator(seed).mutate(std::string_view(reinterpret_cast<const char*>(data), size));
    if (mutated && mutated->size() <= max_size) {
      std::memcpy(data, mutated->data(), mutated->size());
      return mutated->size();
    }
  }
  return LLVMFuzzerMutate(data, size, max_size);
}
#endif
