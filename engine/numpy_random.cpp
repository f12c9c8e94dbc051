#include "engine/numpy_random.h"

#include <cmath>

#include "engine/error.h"

namespace ag {

double NumpyRandomState::random_sample() {
  const uint32_t high = engine_() >> 5, low = engine_() >> 6;
  return (high * 67108864.0 + low) / 9007199254740992.0;
}

int64_t NumpyRandomState::randint(int64_t low, int64_t high) {
  AG_CHECK(low < high && static_cast<uint64_t>(high) - static_cast<uint64_t>(low) <= 0xFFFFFFFFu,
           "numpy randint: expected low < high and a range below 2^32, got low={} high={}", low, high);
  const auto largest = static_cast<uint32_t>(high - low - 1);  // the draw's largest value
  if (largest == 0) return low;                                // numpy draws nothing then
  uint32_t mask = largest;                                     // the smallest all-ones mask covering it
  for (int shift = 1; shift < 32; shift *= 2) mask |= mask >> shift;
  uint32_t value = engine_() & mask;
  while (value > largest) value = engine_() & mask;
  return low + value;
}

double NumpyRandomState::randn() {
  if (next_gauss_) {
    const double cached = *next_gauss_;
    next_gauss_.reset();
    return cached;
  }
  double x1, x2, r2;
  do {
    x1 = 2.0 * random_sample() - 1.0;
    x2 = 2.0 * random_sample() - 1.0;
    r2 = x1 * x1 + x2 * x2;
  } while (r2 >= 1.0 || r2 == 0.0);
  const double f = std::sqrt(-2.0 * std::log(r2) / r2);
  next_gauss_ = f * x1;
  return f * x2;
}

}  // namespace ag
