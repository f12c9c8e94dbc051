#include "nn/checkpoint.h"

#include <algorithm>
#include <atomic>
#include <cmath>

#include "engine/io.h"
#include "engine/json.h"
#include "engine/ops/arithmetic.h"
#include "engine/safetensors.h"

namespace ag::nn {

namespace {

std::atomic<int64_t> checkpoint_files_read{0};
std::atomic<int64_t> checkpoint_configs_parsed{0};

bool starts_with_prefix(const std::string& name) { return name.rfind(kOptimizerPrefix, 0) == 0; }

const std::string* find_metadata(const Checkpoint& checkpoint, const std::string& key) {
  auto it = checkpoint.metadata.find(key);
  return it == checkpoint.metadata.end() ? nullptr : &it->second;
}

void check_format(const std::string& path, Checkpoint& checkpoint) {
  const std::string* format = find_metadata(checkpoint, "format");
  AG_CHECK(format && *format == kCheckpointFormat,
           "{}: not an attograd checkpoint: metadata format is '{}', expected '{}'", path, format ? *format : "(none)",
           kCheckpointFormat);
  const std::string* version = find_metadata(checkpoint, "format_version");
  AG_CHECK(version && *version == kCheckpointFormatVersion,
           "{}: checkpoint format_version '{}' is not supported; this build reads version {}", path,
           version ? *version : "(none)", kCheckpointFormatVersion);
  // attograd always writes the checksum, so a checkpoint without one has lost it to damage.
  AG_CHECK(checkpoint.checksummed, "{}: the file is corrupt: an attograd checkpoint without its checksum", path);
  const std::string* config = find_metadata(checkpoint, "config");
  AG_CHECK(config, "{}: the checkpoint's config is missing", path);
  checkpoint.settings = parse_json(*config, fmt::format("{}: the checkpoint's config", path));
  ++checkpoint_configs_parsed;
  AG_CHECK(checkpoint.settings.is_object(), "{}: the checkpoint's config is not a JSON object", path);
  const bool has_type = find_metadata(checkpoint, "optimizer") != nullptr;
  AG_CHECK(has_type == !checkpoint.optimizer.empty(),
           "{}: the metadata {} an optimizer type but the file has {} 'optimizer.' tensors", path,
           has_type ? "names" : "does not name", checkpoint.optimizer.empty() ? "no" : "some");
}

// Refuses a tensor holding a NaN or an infinity, naming it and the first such element.
void check_finite(const std::string& path, const NamedTensors& tensors) {
  const std::string non_finite = first_non_finite(tensors);
  AG_CHECK(non_finite.empty(), "{}: {}: the weights are not usable (a diverged run?)", path, non_finite);
}

// Runs `load` and puts the path in front of its error.
template <typename F>
void with_path(const std::string& path, F&& load) {
  try {
    load();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
}

}  // namespace

std::string first_non_finite(const NamedTensors& tensors) {
  for (const auto& named : tensors) {  // not a structured binding: clang 14 cannot capture those
    const std::string& name = named.first;
    // Every bf16 value is an f32 one: widened, a bf16 tensor is checked as an f32 tensor.
    const Tensor tensor = named.second.dtype() == DType::bf16 ? to(named.second, DType::f32) : named.second;
    if (!is_floating(tensor.dtype())) continue;
    std::string found;
    dispatch_floating(tensor.dtype(), "checkpoint", [&]<typename T>() {
      const T* values = tensor.data<T>();
      for (int64_t i = 0, n = tensor.numel(); i < n && found.empty(); ++i)
        if (!std::isfinite(values[i]))
          found = fmt::format("tensor '{}' holds {} (element {} of shape {})", name, static_cast<double>(values[i]), i,
                              shape_str(tensor.shape()));
    });
    if (!found.empty()) return found;
  }
  return "";
}

std::string checkpoint_bytes(const Module& module, const std::string& config, const Optimizer* optimizer,
                             const std::map<std::string, std::string>& metadata) {
  AG_CHECK(nlohmann::json::accept(config), "checkpoint: config is not valid JSON: {}", config);
  std::map<std::string, std::string> header = metadata;
  for (const char* reserved : {"format", "format_version", "config", "optimizer", kModelFileKey})
    AG_CHECK(!header.contains(reserved), "checkpoint: metadata key '{}' is reserved", reserved);
  header.emplace("format", kCheckpointFormat);
  header.emplace("format_version", kCheckpointFormatVersion);
  header.emplace("config", config);
  NamedTensors tensors = module.state_dict();
  for (const auto& [name, _] : tensors)
    AG_CHECK(!starts_with_prefix(name), "checkpoint: model tensor '{}' collides with the optimizer prefix", name);
  if (optimizer) {
    header.emplace("optimizer", optimizer->type_name());
    for (const auto& [name, tensor] : optimizer->state_dict())
      tensors.emplace_back(fmt::format("{}{}", kOptimizerPrefix, name), tensor);
  }
  const std::string non_finite = first_non_finite(tensors);
  AG_CHECK(non_finite.empty(), "checkpoint: {}: a checkpoint holding it could not be loaded, so none is written",
           non_finite);
  return safetensors_bytes(tensors, header);
}

void save(const std::string& path, const Module& module, const std::string& config, const Optimizer* optimizer,
          const std::map<std::string, std::string>& metadata) {
  write_file_atomically(path, checkpoint_bytes(module, config, optimizer, metadata));
}

std::string model_file_bytes(const Checkpoint& checkpoint, DType dtype) {
  const std::string& path = checkpoint.path;
  AG_CHECK(dtype == DType::f32 || dtype == DType::bf16, "model file: dtype {}: expected f32 or bf16",
           dtype_name(dtype));
  AG_CHECK(!checkpoint.is_model_file(), "{}: is a model file already; a model file is made from a run's checkpoint",
           path);
  check_finite(path, checkpoint.model);
  NamedTensors tensors;
  for (const auto& [name, tensor] : checkpoint.model)
    tensors.emplace_back(name, is_floating(tensor.dtype()) ? to(tensor, dtype) : tensor);
  const std::string rounded = first_non_finite(tensors);
  AG_CHECK(rounded.empty(), "{}: {} once rounded to {}: a value beyond its range", path, rounded, dtype_name(dtype));
  std::map<std::string, std::string> metadata = checkpoint.metadata;
  nlohmann::json origin = {{"from", path}, {"dtype", dtype_name(dtype)}};
  if (const std::string* epoch = find_metadata(checkpoint, "epoch")) origin["epoch"] = *epoch;
  for (const char* key : kResumeMetadata) metadata.erase(key);
  metadata.erase("optimizer");
  metadata[kModelFileKey] = origin.dump();
  return safetensors_bytes(tensors, metadata);
}

namespace {

Checkpoint checkpoint_of(SafetensorsFile file, const std::string& path) {
  ++checkpoint_files_read;
  Checkpoint checkpoint;
  checkpoint.path = path;
  checkpoint.checksummed = file.checksummed;
  checkpoint.metadata = std::move(file.metadata);
  for (auto& [name, tensor] : file.tensors) {
    if (starts_with_prefix(name))
      checkpoint.optimizer.emplace_back(name.substr(std::string(kOptimizerPrefix).size()), std::move(tensor));
    else
      checkpoint.model.emplace_back(std::move(name), std::move(tensor));
  }
  check_format(path, checkpoint);
  return checkpoint;
}

}  // namespace

Checkpoint read_checkpoint(const std::string& path) { return checkpoint_of(load_safetensors(path), path); }

Checkpoint parse_checkpoint(std::string_view bytes, const std::string& path) {
  return checkpoint_of(parse_safetensors(bytes, path), path);
}

size_t model_memory_budget(const Checkpoint& checkpoint) {
  constexpr size_t kMargin = 4;                  // a parameter's initialisation may take a few temporaries
  constexpr size_t kBuffers = size_t{16} << 20;  // masks, positional tables: unsaved, bounded by the config
  size_t stored = 0;
  for (const auto& [_, tensor] : checkpoint.model) {
    // A model file's bf16 tensor loads into an f32 one.
    const size_t element = dtype_size(tensor.dtype() == DType::bf16 ? DType::f32 : tensor.dtype());
    stored += std::max<size_t>(64, static_cast<size_t>(tensor.numel()) * element);
  }
  return kMargin * stored + kBuffers;
}

int64_t checkpoints_read() { return checkpoint_files_read; }

int64_t configs_parsed() { return checkpoint_configs_parsed; }

Checkpoint load(const std::string& path, Module& module, Optimizer* optimizer) {
  Checkpoint checkpoint = read_checkpoint(path);
  load(checkpoint, module, optimizer);
  return checkpoint;
}

namespace {

// A model file's tensors as the module holds them: each bf16 one of the module's shape widened to
// the module's floating dtype (exactly); the rest as stored, for load_state_dict's strict check to
// name as the file has them.
NamedTensors in_module_dtypes(const NamedTensors& stored, const Module& module) {
  std::map<std::string, Tensor> own;
  for (const auto& [name, tensor] : module.state_dict()) own.emplace(name, tensor);
  NamedTensors tensors;
  for (const auto& [name, tensor] : stored) {
    const auto it = own.find(name);
    const bool widen = tensor.dtype() == DType::bf16 && it != own.end() && is_floating(it->second.dtype()) &&
                       tensor.shape() == it->second.shape();
    tensors.emplace_back(name, widen ? to(tensor, it->second.dtype()) : tensor);
  }
  return tensors;
}

}  // namespace

void load(const Checkpoint& checkpoint, Module& module, Optimizer* optimizer) {
  const std::string& path = checkpoint.path;
  AG_CHECK(
      !optimizer || !checkpoint.is_model_file(),
      "{}: is a model file (exported, no optimizer state); training continues from a run folder's last.safetensors",
      path);
  if (optimizer) {
    const std::string* saved = find_metadata(checkpoint, "optimizer");
    AG_CHECK(saved && *saved == optimizer->type_name(), "{}: the checkpoint holds {} state, expected {} state", path,
             saved ? *saved : "no optimizer", optimizer->type_name());
  }
  check_finite(path, checkpoint.model);
  check_finite(path, checkpoint.optimizer);
  with_path(path, [&] {
    module.load_state_dict(checkpoint.is_model_file() ? in_module_dtypes(checkpoint.model, module) : checkpoint.model);
  });
  if (optimizer) with_path(path, [&] { optimizer->load_state_dict(checkpoint.optimizer); });
}

}  // namespace ag::nn
