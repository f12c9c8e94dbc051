#include "tools/flag_checks.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <set>
#include <string_view>

#include "engine/error.h"
#include "tasks/common/text.h"

namespace ag::cli {

namespace {

// True if `text` is a decimal whole number (with an optional '-').
bool is_decimal(std::string_view text) {
  if (text.starts_with('-')) text.remove_prefix(1);
  return !text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos;
}

// Why a whole number with leading zeros is refused, or "" if it has none.
std::string leading_zero_note(std::string_view text) {
  const std::string_view sign = text.starts_with('-') ? "-" : "", digits = text.substr(sign.size());
  if (digits.size() < 2 || digits[0] != '0' || !is_decimal(digits)) return "";
  const size_t first = std::min(digits.find_first_not_of('0'), digits.size() - 1);
  return fmt::format(" (a leading 0 reads as octal in C and shells; write {}{})", sign, digits.substr(first));
}

// `text` as a finite decimal number (subnormals included), or NaN if it is not one.
double finite_decimal(const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789+-.eE") != std::string::npos) return NAN;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);  // ERANGE with a finite value: a subnormal, fine
  return end == text.c_str() + text.size() && std::isfinite(value) ? value : NAN;
}

}  // namespace

CLI::Validator whole_number(int64_t min, int64_t max) {
  const std::string expected = fmt::format("a decimal whole number in [{}, {}]", min, max);
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        int64_t value = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        const bool parsed = is_decimal(text) && error == std::errc() && end == text.data() + text.size();
        if (parsed && leading_zero_note(text).empty() && value >= min && value <= max) return "";
        return fmt::format("expected {}, got '{}'{}", expected, tasks::printable(text), leading_zero_note(text));
      },
      fmt::format("INT in [{}, {}]", min, max));
}

const CLI::Validator kCount = whole_number(1, 1000000);

const CLI::Validator kSeed(
    [](const std::string& text) -> std::string {
      uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (is_decimal(text) && text[0] != '-' && leading_zero_note(text).empty() && error == std::errc() &&
          end == text.data() + text.size())
        return "";
      return fmt::format("expected a seed: a decimal whole number in [0, 2^64 - 1 = {}], got '{}'{}",
                         std::numeric_limits<uint64_t>::max(), tasks::printable(text), leading_zero_note(text));
    },
    "SEED in [0, 2^64)");

CLI::Validator number(double min, double max) {
  return CLI::Validator(
      [=](const std::string& text) -> std::string {
        const double value = finite_decimal(text);
        if (value >= min && value <= max) return "";  // false for NaN
        return fmt::format("expected a finite decimal number in [{}, {}], got '{}'", min, max, tasks::printable(text));
      },
      fmt::format("NUMBER in [{}, {}]", min, max));
}

const CLI::Validator kPositive(
    [](const std::string& text) -> std::string {
      if (finite_decimal(text) > 0) return "";
      return fmt::format("expected a finite decimal number > 0, got '{}'", tasks::printable(text));
    },
    "NUMBER > 0");

const CLI::Validator kPath(
    [](const std::string& text) -> std::string {
      if (text.empty()) return "expected a path, got an empty string";
      try {
        tasks::decode_utf8(text, "the path");
      } catch (const Error&) {
        return fmt::format("expected a path in UTF-8, got '{}'", tasks::printable(text));
      }
      return "";
    },
    "PATH");

const CLI::Validator kText([](const std::string& text)
                               -> std::string { return text.empty() ? "expected a text, got an empty string" : ""; },
                           "TEXT");

namespace {

// The long flags (`--name`) of `app` and of every subcommand below it.
void collect_flags(CLI::App& app, std::set<std::string>& flags) {
  for (const CLI::Option* option : app.get_options())
    for (const std::string& name : option->get_lnames()) flags.insert("--" + name);
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) collect_flags(*sub, flags);
}

}  // namespace

void refuse_empty_values(CLI::App& app, int argc, const char* const* argv) {
  std::set<std::string> flags;
  collect_flags(app, flags);
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--") return;  // what follows is positional
    if (!arg.starts_with("--") || !arg.ends_with('=')) continue;
    const std::string flag(arg.substr(0, arg.size() - 1));
    if (flags.count(flag))
      throw CLI::ValidationError(flag, fmt::format("expected a value after '=', got none (write {}=VALUE)", flag));
  }
}

void check_heads_divide(int64_t heads, const std::string& heads_flag, int64_t width, const std::string& width_flag) {
  if (heads > 0 && width % heads == 0) return;
  throw UsageError(fmt::format("{} {} does not divide {} {}: the heads split the width evenly; choose a divisor of {}",
                               heads_flag, heads, width_flag, width, width));
}

void check_min_lr(double min_lr, double lr) {
  if (min_lr <= lr) return;
  throw UsageError(
      fmt::format("--min-lr {} is above --lr {}: the schedule decays from --lr down to --min-lr", min_lr, lr));
}

}  // namespace ag::cli
