// The 32-bit Mersenne Twister (Matsumoto & Nishimura 1998), seeded with init_genrand: the engine
// under PyTorch's CPU generator and numpy's legacy RandomState (for an integer seed), so both
// streams can be replayed. The same output as std::mt19937, with the state laid out to be copied.
#pragma once

#include <array>
#include <cstdint>

namespace ag {

class Mt19937 {
 public:
  explicit Mt19937(uint32_t seed = 5489) { seed_with(seed); }

  void seed_with(uint32_t seed) {
    state_[0] = seed;
    for (int j = 1; j < kStateSize; ++j)
      state_[j] = 1812433253u * (state_[j - 1] ^ (state_[j - 1] >> 30)) + static_cast<uint32_t>(j);
    next_ = kStateSize;
  }

  uint32_t operator()() {
    if (next_ == kStateSize) twist();
    uint32_t y = state_[next_++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680;
    y ^= (y << 15) & 0xefc60000;
    return y ^ (y >> 18);
  }

 private:
  void twist() {
    constexpr int kShift = 397;
    constexpr uint32_t kMatrix = 0x9908b0df, kUpper = 0x80000000, kLower = 0x7fffffff;
    for (int i = 0; i < kStateSize; ++i) {
      const uint32_t y = (state_[i] & kUpper) | (state_[(i + 1) % kStateSize] & kLower);
      state_[i] = state_[(i + kShift) % kStateSize] ^ (y >> 1) ^ ((y & 1) ? kMatrix : 0);
    }
    next_ = 0;
  }

  static constexpr int kStateSize = 624;
  std::array<uint32_t, kStateSize> state_{};
  int next_ = kStateSize;
};

}  // namespace ag
