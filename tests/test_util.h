// Helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "engine/error.h"

namespace ag {

// Runs f, expects it to throw ag::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const std::string& part : parts)
      EXPECT_NE(message.find(part), std::string::npos) << "message lacks '" << part << "': " << message;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-ag::Error exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw; expected an error mentioning '" << (parts.empty() ? "" : parts[0]) << "'";
}

}  // namespace ag
