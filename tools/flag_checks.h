// One CLI11 validator per kind of flag value. Each reads the text itself (decimal only, the whole
// text, the full range of its type) and names what it expected, so no flag depends on how CLI11
// converts a value ("010" is octal 8 to it) or on library text.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>

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

}  // namespace ag::cli
