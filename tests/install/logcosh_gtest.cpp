// logcosh under GoogleTest, with the assertions attograd installs.
#include <attograd/engine/testing/gradcheck_gtest.h>

#include "logcosh.h"

namespace {

ag::Tensor logcosh_of_first(const std::vector<ag::Tensor>& in) { return logcosh(in[0]); }

TEST(LogCosh, GradientsMatchFiniteDifferences) {
  ag::Generator gen(7);
  const ag::Tensor x = (ag::randn({4, 5}, ag::DType::f64, gen) * 3.0).requires_grad_();
  EXPECT_GRADCHECK(logcosh_of_first, {x});
  EXPECT_GRADGRADCHECK(logcosh_of_first, {x});
}

TEST(LogCosh, GradientIsTanh) {
  const ag::Tensor x = ag::tensor({0.5, -30.0}, {2}, ag::DType::f64).requires_grad_();
  ag::sum(logcosh(x)).backward();
  EXPECT_NEAR(x.grad().to_vector()[0], 0.46211715726000974, 1e-15);  // tanh(0.5)
  EXPECT_EQ(x.grad().to_vector()[1], -1.0);
}

}  // namespace
