#include "tasks/common/settings.h"

#include <fmt/format.h>

#include <algorithm>

#include "engine/error.h"
#include "tasks/common/checkpoint_config.h"
#include "tasks/common/text.h"

namespace ag::tasks {

namespace {

// What a value out of `accepts` is told it should have been.
std::string expected(const Accepts& accepts) {
  switch (accepts.kind) {
    case Accepts::whole:
      return fmt::format("a whole number in [{}, {}]", accepts.min, accepts.max);
    case Accepts::number:
      return fmt::format("a number in [{}, {}]", accepts.min, accepts.max);
    case Accepts::positive:
      return "a number > 0";
    case Accepts::choice:
      return fmt::format("one of {}", fmt::join(accepts.choices, ", "));
    default:
      return "a path";
  }
}

bool accepted(const Accepts& accepts, const nlohmann::json& value) {
  switch (accepts.kind) {
    case Accepts::whole:
    case Accepts::number:
      return value.get<double>() >= accepts.min && value.get<double>() <= accepts.max;
    case Accepts::positive:
      return value.get<double>() > 0;
    case Accepts::choice:
      return std::count(accepts.choices.begin(), accepts.choices.end(), value.get<std::string>()) > 0;
    default:
      return true;
  }
}

}  // namespace

void read_setting(const nlohmann::json& config, const std::string& key, const Field& field, const std::string& path,
                  const Accepts* accepts) {
  std::visit(
      [&](auto* value) {
        using T = std::remove_pointer_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::string>) *value = config_string(config, key, path);
        if constexpr (std::is_same_v<T, int64_t>) *value = config_whole(config, key, path);
        if constexpr (std::is_same_v<T, uint64_t>) *value = config_unsigned(config, key, path);
        if constexpr (std::is_same_v<T, double>) *value = config_number(config, key, path);
        if constexpr (std::is_same_v<T, bool>) *value = config_bool(config, key, path);
      },
      field);
  const nlohmann::json read = setting_json(field);
  AG_CHECK(!accepts || accepted(*accepts, read), "{}: the checkpoint's config has \"{}\": {}, expected {}", path, key,
           printable(read.dump().substr(0, 60)), expected(*accepts));
}

nlohmann::json setting_json(const Field& field) {
  return std::visit([](auto* value) { return nlohmann::json(*value); }, field);
}

}  // namespace ag::tasks
