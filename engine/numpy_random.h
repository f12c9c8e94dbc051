// numpy's legacy np.random (RandomState) for an integer seed, bit for bit: the stream behind
// np.random.seed(s), np.random.randint and np.random.randn, so data that a seed or peer script
// generates with numpy can be generated here. tools/golden/numpy_random.py records the goldens.
#pragma once

#include <cstdint>
#include <optional>

#include "engine/mt19937.h"

namespace ag {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : engine_(seed) {}  // np.random.seed(seed)

  double random_sample();  // np.random.random_sample(): [0, 1) from 53 bits of two draws
  // np.random.randint(low, high): masked rejection sampling on 32-bit draws (ranges below 2^32).
  int64_t randint(int64_t low, int64_t high);
  double randn();  // np.random.randn(): the polar method, the second value of each pair kept for the next call

 private:
  Mt19937 engine_;
  std::optional<double> next_gauss_;
};

}  // namespace ag
