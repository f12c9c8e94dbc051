#include "tasks/common/checkpoint_config.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "engine/error.h"
#include "tasks/common/text.h"

namespace ag::tasks {

namespace {

// The value at `key`, or nullptr when it is missing and there is a fallback; fails on a missing
// key without one, or when `accepts` refuses the value, naming `expected`.
template <typename Accepts>
const nlohmann::json* config_entry(const nlohmann::json& config, const std::string& key, const std::string& path,
                                   bool has_fallback, const char* expected, Accepts&& accepts) {
  const auto it = config.find(key);
  if (it == config.end()) {
    AG_CHECK(has_fallback, "{}: the checkpoint's config has no \"{}\" (expected {})", path, key, expected);
    return nullptr;
  }
  AG_CHECK(accepts(*it), "{}: the checkpoint's config has \"{}\": {}, expected {}", path, key,
           printable(it->dump().substr(0, 60)), expected);
  return &*it;
}

}  // namespace

std::string config_string(const nlohmann::json& config, const std::string& key, const std::string& path,
                          std::optional<std::string> fallback) {
  const nlohmann::json* value = config_entry(config, key, path, fallback.has_value(), "a string",
                                             [](const nlohmann::json& v) { return v.is_string(); });
  return value ? value->get<std::string>() : *fallback;
}

int64_t config_whole(const nlohmann::json& config, const std::string& key, const std::string& path,
                     std::optional<int64_t> fallback) {
  const nlohmann::json* value = config_entry(
      config, key, path, fallback.has_value(), "a whole number (at most 2^63 - 1)", [](const nlohmann::json& v) {
        return v.is_number_integer() &&
               (!v.is_number_unsigned() ||
                v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
      });
  return value ? value->get<int64_t>() : *fallback;
}

uint64_t config_unsigned(const nlohmann::json& config, const std::string& key, const std::string& path) {
  return config_entry(
             config, key, path, false, "a whole number in [0, 2^64)",
             [](const nlohmann::json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v >= 0); })
      ->get<uint64_t>();
}

double config_number(const nlohmann::json& config, const std::string& key, const std::string& path,
                     std::optional<double> fallback) {
  const nlohmann::json* value =
      config_entry(config, key, path, fallback.has_value(), "a finite number",
                   [](const nlohmann::json& v) { return v.is_number() && std::isfinite(v.get<double>()); });
  return value ? value->get<double>() : *fallback;
}

bool config_bool(const nlohmann::json& config, const std::string& key, const std::string& path) {
  return config_entry(config, key, path, false, "true or false", [](const nlohmann::json& v) { return v.is_boolean(); })
      ->get<bool>();
}

void check_checkpoint_task(const nlohmann::json& config, const std::string& task, const std::string& path) {
  const std::string found = config_string(config, "task", path);
  AG_CHECK(found == task, "{}: a checkpoint of task '{}', expected '{}'", path, printable(found), task);
}

void note_if_not_the_runs_data(const nlohmann::json& config, const std::string& path, const std::string& data) {
  const std::string recorded = config_string(config, "data_sha256", path, "");
  const std::string found = data_file_sha256(data);
  if (!recorded.empty() && recorded != found)
    fmt::print(stderr,
               "note: {} is not the data {} was trained on (its sha256 is {}, the run's {}): the figures below are "
               "not the run's\n",
               data, path, found, recorded);
}

}  // namespace ag::tasks
