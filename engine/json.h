// JSON from files and flags (safetensors headers, checkpoint configs, data files): parsed with a
// bound on nesting and no repeated keys, so a hostile file cannot exhaust the stack (copying or
// printing a nlohmann value recurses once per level) or say two things about one name; errors
// are ag::Error naming the source, without the library's exception codes.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace ag {

inline constexpr int kMaxJsonDepth = 64;  // arrays and objects nested in each other

// Parses `text`; throws ag::Error "<source>: <what is wrong>" when it is not JSON, nests deeper
// than kMaxJsonDepth or repeats a key within one object.
nlohmann::json parse_json(std::string_view text, const std::string& source);

// A nlohmann exception's message without its "[json.exception.type_error.302] " code, for
// messages to users.
std::string json_error_text(const std::exception& error);

}  // namespace ag
