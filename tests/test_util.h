// Helpers shared by the test suites.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace ag {

// A fresh, empty directory for one test, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("attograd_{}_{}_{}", test->test_suite_name(), test->name(), ::getpid());
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  operator const std::filesystem::path&() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// A file's bytes, and writing bytes to a file (plainly: the test's own fixtures).
inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

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
