// PyTorch's CPU generator, bit for bit (torch 1.13 on an AVX2 machine): the mt19937 stream that
// torch.manual_seed starts, and each distribution drawn the way ATen's CPU kernels draw it, so a
// program seeded like a PyTorch script gets PyTorch's numbers. tools/golden/torch_generator.py
// records the goldens that tests/engine/torch_generator_test.cpp compares with.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "engine/mt19937.h"

namespace ag {

class TorchGenerator {
 public:
  static constexpr uint64_t kDefaultSeed = 67280421310721;  // c10::detail::default_rng_seed_val
  explicit TorchGenerator(uint64_t seed = kDefaultSeed) { manual_seed(seed); }

  // torch.manual_seed: mt19937 seeded with the seed's low 32 bits; the cached normal is dropped.
  void manual_seed(uint64_t seed);
  uint32_t random() { return engine_(); }  // one mt19937 draw
  uint64_t random64();                     // two draws, the first one the high half

  // tensor.uniform_(from, to): f32 from 24 bits of one draw, f64 from 53 bits of random64.
  void fill_uniform(float* out, int64_t n, float from, float to);
  void fill_uniform(double* out, int64_t n, double from, double to);
  // tensor.normal_(mean, std): Box-Muller over blocks of 16 from 16 elements on (f32 with the
  // AVX2 kernel's polynomials), the scalar path in double (with its cached second value) below.
  void fill_normal(float* out, int64_t n, float mean, float std);
  void fill_normal(double* out, int64_t n, double mean, double std);
  // torch.randint(low, high): a 32-bit draw modulo the range, 64-bit from a range of 2^32 on.
  void fill_randint(int64_t* out, int64_t n, int64_t low, int64_t high);
  // tensor.bernoulli_(p) (nn.Dropout keeps an element where this is true, p = 1 - dropout p):
  // a 53-bit uniform below p.
  void fill_bernoulli(bool* out, int64_t n, double p);
  // torch.randperm(n): Fisher-Yates from the front, a 32-bit draw modulo what is left.
  std::vector<int64_t> randperm(int64_t n);
  // torch.empty((), dtype=torch.int64).random_(): 63 random bits (DataLoader's per-epoch seed).
  int64_t random_int64();
  // The order of one epoch of DataLoader(dataset of n, shuffle=True, generator=this).
  std::vector<int64_t> data_loader_epoch(int64_t n);
  double normal();  // one value of the scalar path: N(0, 1) in double

 private:
  void fill_normal_blocks(float* out, int64_t n, float mean, float std);
  template <class T>
  void fill_normal_blocks_scalar(T* out, int64_t n, T mean, T std);

  Mt19937 engine_;
  std::optional<double> next_normal_;
};

}  // namespace ag
