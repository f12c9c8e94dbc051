// Typed reads of a checkpoint's config (its JSON object of settings). A missing key or a value of
// the wrong type or range fails naming the file, the key and the value, e.g.
// `runs/s/last.safetensors: the checkpoint's config has "dim": "64", expected a whole number`,
// never with the JSON library's own text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace ag::tasks {

// Each reads `key` from `config` (read from the checkpoint `path`); `fallback`, when given, is the
// value of a missing key.
std::string config_string(const nlohmann::json& config, const std::string& key, const std::string& path,
                          std::optional<std::string> fallback = {});
int64_t config_whole(const nlohmann::json& config, const std::string& key, const std::string& path,
                     std::optional<int64_t> fallback = {});
uint64_t config_unsigned(const nlohmann::json& config, const std::string& key, const std::string& path);
double config_number(const nlohmann::json& config, const std::string& key, const std::string& path,
                     std::optional<double> fallback = {});
bool config_bool(const nlohmann::json& config, const std::string& key, const std::string& path);

// Refuses a checkpoint whose config's "task" is not `task`.
void check_checkpoint_task(const nlohmann::json& config, const std::string& task, const std::string& path);

// Before an evaluation's figures: a note on stderr when the data read (read_data_file) from `data`
// is not what the run of the checkpoint `path` recorded (its config's data_sha256; nothing when the
// run recorded none), naming the file, both digests, and that the figures are not the run's.
void note_if_not_the_runs_data(const nlohmann::json& config, const std::string& path, const std::string& data);

}  // namespace ag::tasks
