#include "seeds/printed_values.h"

#include <fmt/format.h>

#include <cmath>
#include <regex>

#include "engine/error.h"

namespace ag::seeds {

std::vector<std::string> printed_numbers(const std::string& text) {
  static const std::regex number(R"(-?(\d+\.\d*(e[-+]\d+)?|inf))");
  std::vector<std::string> numbers;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), number); it != std::sregex_iterator(); ++it)
    numbers.push_back(it->str());
  return numbers;
}

namespace {

int decimals_of(const std::string& token) {
  const size_t dot = token.find('.'), e = token.find('e');
  return static_cast<int>((e == std::string::npos ? token.size() : e) - dot - 1);
}

bool scientific(const std::string& token) { return token.find('e') != std::string::npos; }

// `value` with `extra` more decimals than `token` shows, in its notation.
std::string printed_like(double value, const std::string& token, int extra = 0) {
  if (!std::isfinite(value) || token.find('.') == std::string::npos) return fmt::format("{}", value);
  const int decimals = decimals_of(token) + extra;
  return scientific(token) ? fmt::format("{:.{}e}", value, decimals) : fmt::format("{:.{}f}", value, decimals);
}

// One unit of the token's last digit.
double last_unit(const std::string& token) {
  const int exponent = scientific(token) ? std::stoi(token.substr(token.find('e') + 1)) : 0;
  return std::pow(10.0, exponent - decimals_of(token));
}

constexpr const char* kVerdictNames[] = {"exact", "within one unit", "DIFFERS", "not reproducible"};

int& count_of(Tally& tally, Verdict v) {
  switch (v) {
    case Verdict::exact:
      return tally.exact;
    case Verdict::within_one_unit:
      return tally.within_one_unit;
    case Verdict::differs:
      return tally.differs;
    case Verdict::not_reproducible:
      break;
  }
  return tally.not_reproducible;
}

}  // namespace

Verdict verdict_of(double value, const std::string& token) {
  const double printed = std::stod(token);
  if (std::isinf(printed)) return value == printed ? Verdict::exact : Verdict::differs;
  if (std::stod(printed_like(value, token)) == printed) return Verdict::exact;  // "-0.0000" reads as 0 too
  if (std::abs(value - printed) <= last_unit(token) * (1 + 1e-9)) return Verdict::within_one_unit;
  return Verdict::differs;
}

Tensor torch_matmul(const Tensor& a, const Tensor& b) {
  const int64_t m = a.size(0), k = a.size(1), n = b.size(1);
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  std::vector<double> out(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t t = 0; t < k; ++t)
        sum = std::fma(static_cast<float>(x[i * k + t]), static_cast<float>(y[t * n + j]), sum);
      out[i * n + j] = sum;
    }
  return tensor(out, {m, n});
}

Tally walk(const std::string& notebook, const std::vector<PrintedCheck>& checks) {
  Tally tally;
  for (const PrintedCheck& check : checks) {
    const std::vector<std::string> numbers = printed_numbers(check.printed);
    const std::vector<double> values =
        check.ours.defined() ? check.ours.to_vector() : std::vector<double>(numbers.size(), NAN);
    AG_CHECK(numbers.size() == values.size(), "walkthrough: {} {} prints {} numbers, ours has {}", check.cell,
             check.what, numbers.size(), values.size());
    for (size_t i = 0; i < numbers.size(); ++i) {
      const Verdict v = check.ours.defined() ? verdict_of(values[i], numbers[i]) : Verdict::not_reproducible;
      ++count_of(tally, v);
      const bool explain = v >= Verdict::differs && !check.reason.empty();
      fmt::print("{:<8} {:<22} printed {:>12}  ours {:>14}  {}{}\n", check.cell, fmt::format("{}[{}]", check.what, i),
                 numbers[i], check.ours.defined() ? printed_like(values[i], numbers[i], 2) : "-",
                 kVerdictNames[static_cast<int>(v)], explain ? " (" + check.reason + ")" : "");
    }
  }
  fmt::print(
      "notebook {}: {} printed numbers: {} reproduced exactly, {} within one unit of the last digit, {} differ, {} not "
      "reproducible\n",
      notebook, tally.exact + tally.within_one_unit + tally.differs + tally.not_reproducible, tally.exact,
      tally.within_one_unit, tally.differs, tally.not_reproducible);
  return tally;
}

}  // namespace ag::seeds
