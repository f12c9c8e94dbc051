// Helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

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

// The message of the ag::Error that f throws, or "" if it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Elementwise |actual - expected| <= tolerance; prints OK / NOT OK with the max diff (llm.c's habit).
inline void expect_near(const Tensor& actual, const std::vector<double>& expected, double tolerance) {
  const std::vector<double> values = actual.to_vector();
  ASSERT_EQ(values.size(), expected.size());
  double worst = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_NEAR(values[i], expected[i], tolerance) << "at " << i;
    worst = std::max(worst, std::abs(values[i] - expected[i]));
  }
  std::printf("%s max diff %.3g\n", worst <= tolerance ? "OK" : "NOT OK", worst);
}

}  // namespace ag
