// safetensors files: an 8-byte little-endian header length, a JSON header (per tensor: dtype,
// shape, data_offsets; optional "__metadata__" of string → string) padded with spaces to a
// multiple of 8, then the raw little-endian data. Written to a temporary file and renamed into
// place, so a crash never leaves a half-written file; read strictly, so a damaged file is
// rejected with a message saying what is wrong. attograd stores a checksum of the header and the
// data in `__metadata__` ("attograd_checksum": XXH3-64; FNV-1a 64 is still read) and verifies it when present, so a
// flipped bit is caught too; files of other writers (PyTorch) carry none and load as before.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "engine/tensor.h"

namespace ag {

struct SafetensorsFile {
  NamedTensors tensors;                         // in the order of their data in the file
  std::map<std::string, std::string> metadata;  // without attograd's checksum
  bool checksummed = false;                     // it carried attograd's checksum (and it matched)
};

// The file's bytes (with attograd's checksum in __metadata__); save_safetensors writes them.
std::string safetensors_bytes(const NamedTensors& tensors, const std::map<std::string, std::string>& metadata = {});
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const std::map<std::string, std::string>& metadata = {});
SafetensorsFile load_safetensors(const std::string& path);
// The same from the file's bytes; `source` names them in errors.
SafetensorsFile parse_safetensors(std::string_view bytes, const std::string& source);

}  // namespace ag
