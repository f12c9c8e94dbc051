// Wall-clock timing for the commands and tools that print times (bench, walkthrough --jacobian,
// jacobian_cost): one helper, so every figure is taken the same way.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace ag::cli {

// The wall times of `runs` calls of f, in ms, ascending (the fastest first, the median at runs / 2).
inline std::vector<double> sorted_times_ms(int runs, const std::function<void()>& f) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times;
}

inline double median_ms(int runs, const std::function<void()>& f) { return sorted_times_ms(runs, f)[runs / 2]; }

}  // namespace ag::cli
