#include "tools/settings_flags.h"

#include "tools/flag_checks.h"

namespace ag::cli {

namespace {

CLI::Validator validator(const tasks::Accepts& accepts) {
  switch (accepts.kind) {
    case tasks::Accepts::whole:
      return whole_number(static_cast<int64_t>(accepts.min), static_cast<int64_t>(accepts.max));
    case tasks::Accepts::number:
      return number(accepts.min, accepts.max);
    case tasks::Accepts::positive:
      return kPositive;
    case tasks::Accepts::seed:
      return kSeed;
    case tasks::Accepts::choice:
      return CLI::IsMember(accepts.choices);
    default:
      return kPath;
  }
}

}  // namespace

CLI::Option* add_setting_flag(CLI::App* app, const std::string& flag, const std::string& help,
                              const tasks::Field& field, const tasks::Accepts& accepts) {
  if (const auto* on = std::get_if<bool*>(&field)) return app->add_flag(flag, **on, help);
  CLI::Option* option = std::visit([&](auto* value) { return app->add_option(flag, *value, help); }, field);
  option->check(validator(accepts));
  if (accepts.kind == tasks::Accepts::existing_file) option->check(CLI::ExistingFile);
  if (accepts.kind != tasks::Accepts::path && accepts.kind != tasks::Accepts::existing_file)
    option->capture_default_str();
  return option;
}

void copy_setting(const tasks::Field& to, const tasks::Field& from) {
  std::visit([&](auto* value) { *value = *std::get<decltype(value)>(from); }, to);
}

}  // namespace ag::cli
