// The cost of a Jacobian both ways: jacfwd takes one JVP per input element, jacrev one VJP per
// output element, so for f: Rⁿ → Rᵐ the first wins when n ≪ m and the second when m ≪ n.
// f(x) = W₂ tanh(W₁ x + b₁) with a hidden width of 64, in f32; medians of --repeats timings each.
//   jacobian_cost [--repeats R] [n,m ...]   (default: 1000,1 1,1000)
#include <fmt/format.h>

#include <CLI/CLI.hpp>
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

// "n,m" as a pair of positive sizes; CLI11 reports the text it refused.
std::pair<int64_t, int64_t> size_pair(const std::string& text) {
  size_t end_n = 0, end_m = 0;
  const size_t comma = text.find(',');
  int64_t n = 0, m = 0;
  try {
    n = std::stoll(text.substr(0, comma), &end_n);
    m = comma == std::string::npos ? 0 : std::stoll(text.substr(comma + 1), &end_m);
  } catch (const std::exception&) {
  }
  if (comma == std::string::npos || end_n != comma || end_m != text.size() - comma - 1 || n <= 0 || m <= 0)
    throw CLI::ValidationError("sizes", "expected n,m with positive whole n and m (e.g. 1000,1), got '" + text + "'");
  return {n, m};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "The cost of a Jacobian of f: Rⁿ → Rᵐ (f(x) = W₂ tanh(W₁x + b₁), hidden width 64, f32) by "
      "jacfwd (one JVP per input element) and by jacrev (one VJP per output element), side by side"};
  int repeats = 5;
  std::vector<std::string> size_texts{"1000,1", "1,1000"};
  app.add_option("--repeats", repeats, "Timed runs of each; the median is printed")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  app.add_option("sizes", size_texts, "n,m pairs to measure")->capture_default_str();
  std::vector<std::pair<int64_t, int64_t>> sizes;
  try {
    app.parse(argc, argv);
    for (const std::string& text : size_texts) sizes.push_back(size_pair(text));
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints the help, or the error and a pointer to --help
    return code == 0 ? 0 : 2;      // a usage error exits 2, as attograd's do
  }
  fmt::print("CPU: {}; {} thread(s); f32; median of {} runs\n", cpu_model(), ag::get_num_threads(), repeats);
  fmt::print("{:>6} {:>6} {:>8} {:>12} {:>8} {:>12} {:>11} {:>12}\n", "n", "m", "JVPs", "jacfwd ms", "VJPs",
             "jacrev ms", "ratio", "max |diff|");
  for (const auto& [n, m] : sizes) measure(n, m, repeats);
  return 0;
}
