// One CLI11 validator per kind of flag value. Each reads the text itself (decimal only, the whole
// text, the full range of its type) and names what it expected, so no flag depends on how CLI11
// converts a value ("010" is octal 8 to it) or on library text.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>

#include "engine/error.h"

namespace ag::cli {

// A decimal whole number in [min, max]: no sign on 0, no leading zeros ("010" reads as octal
// elsewhere), no hex, no exponent.
CLI::Validator whole_number(int64_t min, int64_t max);
// A count of steps, epochs, examples: a whole number in [1, 1000000].
extern const CLI::Validator kCount;
// A seed: a decimal whole number in [0, 2^64).
extern const CLI::Validator kSeed;
// A finite decimal number in [min, max] (subnormals included: 1e-320 is a number > 0).
CLI::Validator number(double min, double max);
// A finite number > 0.
extern const CLI::Validator kPositive;
// A path: not empty, valid UTF-8 (it is stored in config.json and named in messages).
extern const CLI::Validator kPath;
// A text to work on: not empty (an empty --prompt gives the model nothing to continue).
extern const CLI::Validator kText;

// Refuses `--flag=` with nothing after the '=' (a flag of `app` or of any of its subcommands), before
// CLI11 parses: it would take the next argument as the value (`--lr= --out x` sets --lr to "--out")
// or end with a message about a missing argument. Throws CLI::ValidationError naming the flag (exit 2).
void refuse_empty_values(CLI::App& app, int argc, const char* const* argv);

// Flags that contradict each other once the defaults and a resumed run's carried-over values are
// in, found by a command before any work: the program prints the message and exits 2, as for a
// flag CLI11 refuses.
class UsageError : public Error {
 public:
  using Error::Error;
};
// Refuses `heads` that do not divide `width` (attention splits the width among the heads), naming
// both flags and values.
void check_heads_divide(int64_t heads, const std::string& heads_flag, int64_t width, const std::string& width_flag);
// Refuses a --min-lr above --lr (a schedule that decays from --lr down to --min-lr), naming both.
void check_min_lr(double min_lr, double lr);

}  // namespace ag::cli
