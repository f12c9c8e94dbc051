// The cost of a Jacobian both ways: jacfwd takes one JVP per input element, jacrev one VJP per
// output element, so for f: Rⁿ → Rᵐ the first wins when n ≪ m and the second when m ≪ n.
// f(x) = W₂ tanh(W₁ x + b₁) with a hidden width of 64, in f32; medians of --repeats timings each.
//   jacobian_cost [--repeats R] [n,m ...]   (default: 1000,1 1,1000)
#include <fmt/format.h>

#include <fstream>
#include <string>
#include <vector>

#include "engine/attograd.h"
#include "tools/timing.h"

namespace {

// The CPU's model name, as lscpu prints it (from /proc/cpuinfo).
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown";
}

void measure(int64_t n, int64_t m, int repeats) {
  constexpr int64_t kHidden = 64;
  ag::Generator gen(0);
  const ag::Tensor w1 = ag::mul(ag::randn({kHidden, n}, ag::DType::f32, gen), 1 / std::sqrt(double(n)));
  const ag::Tensor b1 = ag::randn({kHidden}, ag::DType::f32, gen);
  const ag::Tensor w2 = ag::mul(ag::randn({m, kHidden}, ag::DType::f32, gen), 1 / std::sqrt(double(kHidden)));
  const ag::TensorsFn f = [&](const std::vector<ag::Tensor>& x) {
    const ag::Tensor h = ag::tanh(ag::add(ag::matmul(w1, ag::reshape(x[0], {n, 1})), ag::reshape(b1, {kHidden, 1})));
    return std::vector<ag::Tensor>{ag::reshape(ag::matmul(w2, h), {m})};  // (m)
  };
  const ag::Tensor x = ag::randn({n}, ag::DType::f32, gen);
  ag::Jacobian forward, reverse;
  const double fwd = ag::cli::median_ms(repeats, [&] { forward = ag::jacfwd(f, {x}); });
  const double rev = ag::cli::median_ms(repeats, [&] { reverse = ag::jacrev(f, {x}); });
  const double diff = ag::max(ag::abs(ag::sub(forward[0][0], reverse[0][0]))).item();
  fmt::print("{:>6} {:>6} {:>8} {:>12.2f} {:>8} {:>12.2f} {:>10.1f}x {:>12.2e}\n", n, m, n, fwd, m, rev,
             std::max(fwd, rev) / std::min(fwd, rev), diff);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = 5;
  std::vector<std::pair<int64_t, int64_t>> sizes;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--repeats" && i + 1 < argc) {
        repeats = std::stoi(argv[++i]);
        AG_CHECK(repeats > 0, "--repeats: expected a positive count, got {}", repeats);
        continue;
      }
      const size_t comma = arg.find(',');
      AG_CHECK(comma != std::string::npos, "expected sizes as n,m (e.g. 1000,1), got '{}'", arg);
      sizes.emplace_back(std::stoll(arg.substr(0, comma)), std::stoll(arg.substr(comma + 1)));
      AG_CHECK(sizes.back().first > 0 && sizes.back().second > 0, "expected positive sizes, got '{}'", arg);
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "jacobian_cost: {}\n", e.what());
    return 2;
  }
  if (sizes.empty()) sizes = {{1000, 1}, {1, 1000}};
  fmt::print("CPU: {}; {} thread(s); f32; median of {} runs\n", cpu_model(), ag::get_num_threads(), repeats);
  fmt::print("{:>6} {:>6} {:>8} {:>12} {:>8} {:>12} {:>11} {:>12}\n", "n", "m", "JVPs", "jacfwd ms", "VJPs",
             "jacrev ms", "ratio", "max |diff|");
  for (const auto& [n, m] : sizes) measure(n, m, repeats);
  return 0;
}
