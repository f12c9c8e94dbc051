// Checkpoints: a model's state_dict, optionally an optimizer's state, and metadata in one
// safetensors file. Model tensors keep their state_dict names, so the file loads into the
// equivalent PyTorch module (skip the "optimizer." entries); optimizer tensors are
// "optimizer.<name of Optimizer::state_dict>". `__metadata__` holds "format"
// ("attograd-checkpoint"), "format_version" ("1"), "config" (the model configuration as JSON
// text), "optimizer" (its type, when saved) and the caller's own string entries.
//
// A model file (`attograd export`, model_file_bytes) is the same format for use, not for training:
// the model tensors (f32, or bf16 to halve the file), the config and the caller's entries (symbol
// tables, vocabulary), without the optimizer's state and the Trainer's resume entries, and with
// "model_file" saying where it came from. Everything that reads a checkpoint for a model reads it too.
#pragma once

#include <array>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "nn/module.h"
#include "nn/optim.h"

namespace ag::nn {

inline constexpr const char* kCheckpointFormat = "attograd-checkpoint";
inline constexpr const char* kCheckpointFormatVersion = "1";
inline constexpr const char* kOptimizerPrefix = "optimizer.";
// The metadata key that makes a checkpoint a model file: JSON {"from": the checkpoint's path,
// "epoch": its epoch (when it had one), "dtype": "f32" or "bf16"}.
inline constexpr const char* kModelFileKey = "model_file";
// What the Trainer stores for a resume (nn/trainer_files.cpp, nn/trainer.cpp): a model file leaves it out.
inline constexpr std::array<const char*, 6> kResumeMetadata = {"epoch",       "history",    "shuffle_rng",
                                                               "default_rng", "epoch_step", "epoch_loss_sum"};

struct Checkpoint {
  std::string path;                             // the file it was read from (named in errors)
  bool checksummed = false;                     // as attograd writes them: required by read_checkpoint
  NamedTensors model;                           // by state_dict name
  NamedTensors optimizer;                       // names without the prefix; empty if none was saved
  std::map<std::string, std::string> metadata;  // all of __metadata__
  nlohmann::json settings;                      // the config, parsed once when the file was read: an object
  const std::string& config() const { return metadata.at("config"); }
  bool is_model_file() const { return metadata.contains(kModelFileKey); }
};

// The first tensor holding a NaN or an infinity, named with the element ("tensor 'w' holds nan
// (element 3 of shape (2,4))"), or "" when all are finite. bf16 tensors are checked too.
std::string first_non_finite(const NamedTensors& tensors);

// The checkpoint file's bytes. `config` must be valid JSON; `metadata` may not use the reserved
// keys above; every floating tensor must be finite (a checkpoint that could not be loaded is never
// written; the Trainer checks first and reports divergence). The Trainer writes one
// set of bytes to last and best.
std::string checkpoint_bytes(const Module& module, const std::string& config, const Optimizer* optimizer = nullptr,
                             const std::map<std::string, std::string>& metadata = {});
// Writes checkpoint_bytes atomically (temporary file, then rename): a crash leaves the old file or the new one.
void save(const std::string& path, const Module& module, const std::string& config,
          const Optimizer* optimizer = nullptr, const std::map<std::string, std::string>& metadata = {});

// A model file's bytes from a checkpoint read with read_checkpoint: its model tensors as `dtype`
// (f32: each f32 tensor bit for bit; bf16: each floating tensor rounded to nearest even), its config
// and caller's entries; no optimizer state, no kResumeMetadata; kModelFileKey added. Refuses a model
// file (export reads a run's checkpoint), a dtype other than f32 and bf16, and a NaN or infinity,
// in the checkpoint or made by rounding (a value beyond bf16's range), naming the file and tensor.
std::string model_file_bytes(const Checkpoint& checkpoint, DType dtype);

// Reads and checks a checkpoint without a model: for its config, before building the model.
// Rejects a file that is not an attograd checkpoint of a supported format version, or one whose
// checksum is missing or does not match its content (a damaged file).
Checkpoint read_checkpoint(const std::string& path);
// The same checks on a checkpoint file's bytes, read by the caller (to copy them whole); `path` names
// them in errors. Counted as a checkpoint read.
Checkpoint parse_checkpoint(std::string_view bytes, const std::string& path);
// How many checkpoint files this process has read (read_checkpoint, load): a resume reads its
// last.safetensors once (tests/tools/resume_reads_test.cpp counts).
int64_t checkpoints_read();
// How many checkpoint configs this process has parsed: each once, when its file is read; a run's own
// config is a value (TrainerOptions::config) until it is written (tests/tools/resume_reads_test.cpp).
int64_t configs_parsed();

// Builds the model a checkpoint's config describes with `build()`, allowed no more tensor memory
// than the model tensors the file holds (times a margin for initialisation's temporaries, plus
// room for buffers a state_dict does not save): a config that asks for more heads, layers or
// width than the file stores fails at once, naming the file, before the memory is spent. The
// strict load afterwards checks each shape.
size_t model_memory_budget(const Checkpoint& checkpoint);
template <typename Build>
auto build_from_config(const Checkpoint& checkpoint, const std::string& path, Build&& build) {
  AllocationBudget budget(model_memory_budget(checkpoint),
                          "the config describes a larger model than the tensors the file holds");
  try {
    return build();
  } catch (const Error& e) {
    fail("{}: the checkpoint's config does not describe the model it holds (damaged or edited?): {}", path, e.what());
  }
}

// Loads the model's tensors (strictly: missing, unexpected or wrong-shape entries are an error
// naming them) and, if `optimizer` is given, its state, which the file must hold for an
// optimizer of the same type (a model file holds none: refused, saying so). A model file's bf16
// tensors load into the module's floating tensors, widened exactly (weights with bf16's precision). A NaN or infinite
// value in any tensor is refused with its name, for eval and sampling (it would give NaN outputs) as for --resume (it
// would give NaN losses). Returns the checkpoint (its metadata, config).
Checkpoint load(const std::string& path, Module& module, Optimizer* optimizer = nullptr);
// The same from a checkpoint already read (a resume's, read once by the run folder).
void load(const Checkpoint& checkpoint, Module& module, Optimizer* optimizer = nullptr);

}  // namespace ag::nn
