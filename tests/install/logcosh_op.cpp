// logcosh, a custom op, in a program of its own: stable in f32, registered and gradchecked to
// first and second order through the table `attograd gradcheck` prints; and a Function that
// returns its input keeps the user's leaf a leaf. Exit 0 when all holds.
#include <cstdio>
#include <iostream>

#include "logcosh.h"

namespace {

bool stable_in_f32() {
  const std::vector<double> values = logcosh(ag::tensor({100.0, -100.0, 0.0}, {3})).to_vector();
  const double expected = 100.0 - std::log(2.0);  // cosh(±100) itself overflows f32
  const bool right =
      std::abs(values[0] - expected) < 1e-4 && std::abs(values[1] - expected) < 1e-4 && std::abs(values[2]) < 1e-6;
  std::printf("logcosh(100, -100, 0) in f32 = %.5f, %.5f, %g: %s\n", values[0], values[1], values[2],
              right ? "finite and right" : "WRONG");
  return right;
}

bool gradchecked() {
  register_logcosh();
  const auto rows = ag::gradcheck_rows(ag::Registry::global().find("logcosh"));
  const int first = ag::print_gradcheck_table(std::cout, rows);
  const int second = ag::print_gradcheck_table(std::cout, rows, {.second_order = true});
  return first == 0 && second == 0;
}

bool pass_through_keeps_the_leaf() {
  const ag::Tensor x = ag::tensor({1.0, -2.0}, {2}).requires_grad_();
  const ag::Tensor y = PassThrough::apply(x);
  ag::sum(y * ag::tensor({3.0, 4.0}, {2})).backward();
  const std::vector<double> grad = x.grad().to_vector();
  const bool right = x.is_leaf() && x.grad_fn() == nullptr && y.grad_fn() != nullptr && grad[0] == 3 && grad[1] == 4;
  std::printf("pass-through Function: x %s a leaf, y's node %s, x.grad = (%g, %g): %s\n", x.is_leaf() ? "is" : "is NOT",
              y.grad_fn() ? std::string(y.grad_fn()->name).c_str() : "missing", grad[0], grad[1],
              right ? "right" : "WRONG");
  return right;
}

}  // namespace

int main() {
  const bool stable = stable_in_f32();
  const bool checked = gradchecked();
  const bool aliasing = pass_through_keeps_the_leaf();
  return stable && checked && aliasing ? 0 : 1;
}
