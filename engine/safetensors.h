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

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

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

// The one writer of every file attograd makes (Note [output paths] in safetensors.cpp). What `path`
// is decides what happens:
// - a new name or a regular file: replaced by `bytes` atomically: written to a new temporary file
//   beside it (created exclusively, so a symlink planted there is never followed), then renamed over
//   it, so a reader, or a crash of this process at any instant, sees the old file or the new one,
//   never a part (a crash may leave a `path.tmp.XXXXXX`: nothing reads it);
// - a symlink: followed; its final target is replaced atomically as above, the link stays;
// - a character device, a FIFO, `-` (standard output), or the file this process's standard output
//   or error is (`/dev/stdout` redirected to a file): streamed into, never replaced; a FIFO that no
//   process reads is refused rather than waited for;
// - a folder, a block device, a socket, a symlink loop or into a missing folder: refused, untouched.
// Durability::synced (the default) also fsyncs a replaced file and its folder before returning;
// Durability::deferred does not (a training run writes checkpoints every epoch, and an fsync costs
// milliseconds: it calls sync_to_disk once at the end).
enum class Durability { synced, deferred };
void write_file_atomically(const std::string& path, const std::string& bytes,
                           Durability durability = Durability::synced);

// Creates a new empty file `stem`.XXXXXX (mkstemp: exclusively, never through a planted symlink)
// and returns its path: a temporary file for another program to write (graph's `dot -o`).
std::string create_temporary_file(const std::string& stem);

// Creates the folder `dir` (and its parents) for a run's files, or accepts it if it exists;
// throws naming `dir` when it is not a folder or cannot be created.
void create_output_folder(const std::string& dir);

// fsyncs each existing file of `paths` and the folders holding them, so a power cut cannot lose
// them. False if one could not be synced (it does not throw: it also runs while an error unwinds).
bool sync_to_disk(const std::vector<std::string>& paths);

}  // namespace ag
