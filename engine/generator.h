// A seeded random source whose sequence is the same on every platform: splitmix64 bits,
// uniform floats from the top mantissa bits, normals by Box-Muller. (std::*_distribution
// output differs between standard libraries, so none is used.)
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ag {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) { manual_seed(seed); }

  void manual_seed(uint64_t seed) {
    state_ = seed;
    has_spare_normal_ = false;
  }
  uint64_t next_u64();
  double uniform();                            // [0, 1), 53 random bits
  double normal();                             // mean 0, std 1
  int64_t randint(int64_t low, int64_t high);  // [low, high), unbiased

  // The whole state, for checkpoints; set_state(state()) resumes the same sequence.
  struct State {
    uint64_t counter;
    bool has_spare_normal;
    double spare_normal;
  };
  State state() const { return {state_, has_spare_normal_, spare_normal_}; }
  void set_state(const State& s) {
    state_ = s.counter;
    has_spare_normal_ = s.has_spare_normal;
    spare_normal_ = s.spare_normal;
  }

 private:
  uint64_t state_ = 0;
  bool has_spare_normal_ = false;
  double spare_normal_ = 0.0;
};

// Puts `items` in a uniformly random order (Fisher-Yates, drawing randint from the last item down).
template <class T>
void shuffle(std::vector<T>& items, Generator& gen) {
  for (auto i = static_cast<int64_t>(items.size()) - 1; i > 0; --i) std::swap(items[i], items[gen.randint(0, i + 1)]);
}

// The process-wide generator used when a factory is not given one.
Generator& default_generator();
void manual_seed(uint64_t seed);

}  // namespace ag
