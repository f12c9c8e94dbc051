// A user's op outside the engine: softplus(x) = log(1 + eˣ), computed stably as
// max(x, 0) + log(1 + e^(−|x|)) (the naive form overflows to inf for x ≳ 89 in f32), recorded with
// its derivative σ(x), then gradchecked in f64. Exit 0 when all holds.
#include <attograd/attograd.h>

#include <cmath>
#include <cstdio>

ag::Tensor softplus(const ag::Tensor& x) {
  ag::Tensor out;
  {
    ag::NoGradGuard no_grad;  // the forward's own ops record nothing: the node below is its graph
    out = ag::add(ag::relu(x), ag::log(ag::add(ag::exp(ag::neg(ag::abs(x))), 1.0)));
  }
  ag::record(out, "SoftplusBackward", {x}, {x}, [](const ag::BackwardContext& c) {
    // out = log(1 + exp(x))  →  dx = g · σ(x)
    return std::vector<ag::Tensor>{ag::mul(c.grad, ag::sigmoid(c.saved[0]))};
  });
  return out;
}

int main() {
  const ag::Tensor big = softplus(ag::tensor({100.0, -100.0, 0.0}, {3}, ag::DType::f32));
  const std::vector<double> values = big.to_vector();
  const bool stable =
      values[0] == 100.0 && values[1] >= 0 && values[1] < 1e-40 && std::abs(values[2] - std::log(2.0)) < 1e-6;
  std::printf("softplus(100, -100, 0) in f32 = %g, %g, %g: %s\n", values[0], values[1], values[2],
              stable ? "finite and right" : "WRONG");

  ag::Generator gen(1);
  const ag::Tensor x = ag::mul(ag::randn({3, 4}, ag::DType::f64, gen), 4.0).requires_grad_();
  const auto fn = [](const std::vector<ag::Tensor>& in) { return softplus(in[0]); };
  const ag::GradcheckResult first = ag::gradcheck(fn, {x});
  const ag::GradcheckResult second = ag::gradgradcheck(fn, {x});
  std::printf("gradcheck softplus (3,4) f64: %s, max relative error %.2e over %lld elements\n",
              first.ok ? "ok" : "FAILED", first.max_rel_error, static_cast<long long>(first.checked));
  std::printf("gradgradcheck softplus (3,4) f64: %s, max relative error %.2e\n", second.ok ? "ok" : "FAILED",
              second.max_rel_error);
  if (!first.ok) std::printf("%s\n", first.report().c_str());
  if (!second.ok) std::printf("%s\n", second.report().c_str());
  return stable && first.ok && second.ok ? 0 : 1;
}
