// safetensors files: an 8-byte little-endian header length, a JSON header (per tensor: dtype,
// shape, data_offsets; optional "__metadata__" of string → string) padded with spaces to a
// multiple of 8, then the raw little-endian data. Written to a temporary file and renamed into
// place, so a crash never leaves a half-written file; read strictly, so a damaged file is
// rejected with a message saying what is wrong.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace ag {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensors tensors;  // in the order of their data in the file
  std::map<std::string, std::string> metadata;
};

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);

// Writes `bytes` to path through a temporary file in the same folder, flushed and renamed.
void write_file_atomically(const std::string& path, const std::string& bytes);

}  // namespace ag
