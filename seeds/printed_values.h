// `attograd walkthrough --notebook N`: a seed notebook's printed numbers beside ours, with a verdict
// per number (the same to the printed digits / within one unit of the last printed digit / differs)
// and the counts at the end.
#pragma once

#include <string>
#include <vector>

#include "engine/tensor.h"

namespace ag::seeds {

// One printed output: the cell, what it shows, the notebook's text ("tensor([ 8.5808, ...])",
// copied verbatim) and our tensor, whose elements are compared with its numbers in order.
struct PrintedCheck {
  std::string cell;
  std::string what;
  std::string printed;
  Tensor ours;              // undefined: the numbers cannot be reproduced (see reason)
  std::string reason = {};  // why a number may differ, where it is known
};

enum class Verdict { exact, within_one_unit, differs, not_reproducible };

// The numbers a notebook output shows: fixed ("-0.4800", "2."), scientific ("3.3559e-01") or
// "-inf"; integers without a point (sizes, indices) are not among them.
std::vector<std::string> printed_numbers(const std::string& text);
// exact: `value` printed as `token` is reads the same; within_one_unit: of the token's last digit.
Verdict verdict_of(double value, const std::string& token);

struct Tally {
  int exact = 0, within_one_unit = 0, differs = 0, not_reproducible = 0;
};
// Prints one line per number and the counts; returns the counts.
Tally walk(const std::string& notebook, const std::vector<PrintedCheck>& checks);

// a (m, k) @ b (k, n) in f32 the way PyTorch's matmul (OpenBLAS's kernels) sums at the seeds' sizes:
// one fused multiply-add after another along k. The notebooks' fourth decimals depend on it.
Tensor torch_matmul(const Tensor& a, const Tensor& b);

// The seeds' printed outputs with ours (walkthrough_000.cpp, _002.cpp, _003.cpp, _004.cpp).
std::vector<PrintedCheck> notebook_000();
std::vector<PrintedCheck> notebook_002();
std::vector<PrintedCheck> notebook_003();
std::vector<PrintedCheck> notebook_004();

}  // namespace ag::seeds
