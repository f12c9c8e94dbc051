// GoogleTest assertions for gradients (header-only; link GTest yourself):
//
//   EXPECT_GRADCHECK(fn, {x, w});      // ag::gradcheck(fn, {x, w}) passes
//   ASSERT_GRADGRADCHECK(fn, inputs);  // ag::gradgradcheck, stopping the test on failure
//
// fn takes a const std::vector<ag::Tensor>& and returns a Tensor (a named lambda: a comma inside
// a macro argument splits it); the inputs are a braced list or a vector, f64 where they require
// grad. A failure prints GradcheckResult::report(): the worst elements with their analytic and
// numeric values. For other tolerances, EXPECT_TRUE(ag::testing::passes("my check",
// ag::gradcheck(fn, inputs, options))).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/gradcheck.h"

namespace ag::testing {

// Success if the check passed; otherwise a failure whose message is its report.
inline ::testing::AssertionResult passes(const std::string& check, const GradcheckResult& result) {
  if (result.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << check << " failed: " << result.report();
}

// The predicates of the macros below (gtest passes each argument's source text first).
inline ::testing::AssertionResult gradcheck_passes(const char* fn_text, const char*, const OpFunction& fn,
                                                   const std::vector<Tensor>& inputs) {
  return passes(std::string("gradcheck of ") + fn_text, gradcheck(fn, inputs));
}
inline ::testing::AssertionResult gradgradcheck_passes(const char* fn_text, const char*, const OpFunction& fn,
                                                       const std::vector<Tensor>& inputs) {
  return passes(std::string("gradgradcheck of ") + fn_text, gradgradcheck(fn, inputs));
}

}  // namespace ag::testing

#define EXPECT_GRADCHECK(fn, ...) \
  EXPECT_PRED_FORMAT2(::ag::testing::gradcheck_passes, fn, (std::vector<::ag::Tensor>(__VA_ARGS__)))
#define ASSERT_GRADCHECK(fn, ...) \
  ASSERT_PRED_FORMAT2(::ag::testing::gradcheck_passes, fn, (std::vector<::ag::Tensor>(__VA_ARGS__)))
#define EXPECT_GRADGRADCHECK(fn, ...) \
  EXPECT_PRED_FORMAT2(::ag::testing::gradgradcheck_passes, fn, (std::vector<::ag::Tensor>(__VA_ARGS__)))
#define ASSERT_GRADGRADCHECK(fn, ...) \
  ASSERT_PRED_FORMAT2(::ag::testing::gradgradcheck_passes, fn, (std::vector<::ag::Tensor>(__VA_ARGS__)))
