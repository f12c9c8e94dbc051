// ag::Error and the checking macro every public function uses on its arguments.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace ag {

// The one exception type attograd throws for bad input: the message names the op,
// the shapes/dtypes involved and what was expected.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace ag

// AG_CHECK(cond, "op: what went wrong {}", detail) throws ag::Error when cond is false.
#define AG_CHECK(cond, ...)               \
  do {                                    \
    if (!(cond)) ::ag::fail(__VA_ARGS__); \
  } while (0)
