#include "engine/json.h"

#include <set>
#include <vector>

#include "engine/error.h"

namespace ag {

std::string json_error_text(const std::exception& error) {
  const std::string_view text = error.what();
  const size_t code_end = text.rfind("] ", text.find(' '));  // the code has no space in it
  return std::string(
      text.rfind("[json.exception.", 0) == 0 && code_end != std::string_view::npos ? text.substr(code_end + 2) : text);
}

nlohmann::json parse_json(std::string_view text, const std::string& source) {
  std::vector<std::set<std::string>> keys;  // of each object being read, outermost first
  const nlohmann::json::parser_callback_t check = [&](int depth, nlohmann::json::parse_event_t event,
                                                      nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    if (event == Event::object_start || event == Event::array_start) {
      // depth is the parent's: the new level is depth + 1.
      AG_CHECK(depth < kMaxJsonDepth, "{}: the JSON nests deeper than {} levels", source, kMaxJsonDepth);
      if (event == Event::object_start) keys.emplace_back();
    } else if (event == Event::object_end) {
      keys.pop_back();
    } else if (event == Event::key) {
      AG_CHECK(keys.back().insert(parsed.get<std::string>()).second,
               "{}: the JSON repeats the key \"{}\" in one object", source, parsed.get<std::string>());
    }
    return true;
  };
  try {
    return nlohmann::json::parse(text, check);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", source, json_error_text(e));
  }
}

}  // namespace ag
