#include "engine/torch_generator.h"

#include <bit>
#include <cmath>
#include <numbers>

#include "engine/error.h"

namespace ag {

namespace {

constexpr float kMinNormal = 0x1p-126f;

// avx_mathfun.h's log256_ps for one lane (Cephes' logf), with the fused multiply-adds GCC forms
// from its intrinsics when PyTorch builds the AVX2 kernels with -mfma.
float cephes_log(float x) {
  if (x <= 0) return std::numeric_limits<float>::quiet_NaN();
  x = std::max(x, kMinNormal);
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  float e = static_cast<float>(static_cast<int32_t>(bits >> 23) - 0x7f) + 1.0f;
  x = std::bit_cast<float>((bits & ~0x7f800000u) | std::bit_cast<uint32_t>(0.5f));  // mantissa in [0.5, 1)
  const bool below = x < 0.707106781186547524f;
  const float tmp = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + tmp;
  const float z = x * x;
  float y = 7.0376836292E-2f;
  for (float p : {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f})
    y = std::fma(y, x, p);
  y = y * x;
  y = std::fma(y, z, e * -2.12194440e-4f);
  y = std::fma(-z, 0.5f, y);
  return std::fma(e, 0.693359375f, x + y);
}

// avx_mathfun.h's sincos256_ps for one lane (Cephes' sinf/cosf with its range reduction).
void cephes_sincos(float x, float& sine, float& cosine) {
  const bool negative = std::signbit(x);
  x = std::fabs(x);
  int32_t j = static_cast<int32_t>(x * 1.27323954473516f);  // 4/π, truncated
  j = (j + 1) & ~1;
  const float y = static_cast<float>(j);
  const bool swap_sin = (j & 4) != 0;
  const bool swapped = (j & 2) != 0;  // the octants where sine and cosine take each other's polynomial
  const bool swap_cos = ((j - 2) & 4) == 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const float z = x * x;
  float c = 2.443315711809948E-005f;
  c = std::fma(c, z, -1.388731625493765E-003f);
  c = std::fma(c, z, 4.166664568298827E-002f);
  c = std::fma(c * z, z, -(z * 0.5f));
  c = c + 1.0f;
  float s = -1.9515295891E-4f;
  s = std::fma(s, z, 8.3321608736E-3f);
  s = std::fma(s, z, -1.6666654611E-1f);
  s = s * z;
  s = std::fma(s, x, x);
  const float sin_abs = swapped ? c : s;
  const float cos_abs = swapped ? s : c;
  sine = (negative != swap_sin) ? -sin_abs : sin_abs;
  cosine = swap_cos ? -cos_abs : cos_abs;
}

}  // namespace

void TorchGenerator::manual_seed(uint64_t seed) {
  engine_.seed_with(static_cast<uint32_t>(seed));
  next_normal_.reset();
}

uint64_t TorchGenerator::random64() {
  const uint64_t high = random();
  return (high << 32) | random();
}

void TorchGenerator::fill_uniform(float* out, int64_t n, float from, float to) {
  const float width = to - from;
  for (int64_t i = 0; i < n; ++i) {
    const float x = static_cast<float>(random() & 0xFFFFFF) * 0x1p-24f;
    out[i] = std::fma(x, width, from);
  }
}

void TorchGenerator::fill_uniform(double* out, int64_t n, double from, double to) {
  const double width = to - from;
  for (int64_t i = 0; i < n; ++i) {
    const double x = static_cast<double>(random64() & ((uint64_t{1} << 53) - 1)) * 0x1p-53;
    out[i] = std::fma(x, width, from);
  }
}

double TorchGenerator::normal() {
  if (next_normal_) {
    const double cached = *next_normal_;
    next_normal_.reset();
    return cached;
  }
  double u[2];
  fill_uniform(u, 2, 0.0, 1.0);
  const double radius = std::sqrt(-2.0 * std::log(1.0 - u[1]));
  const double theta = 2.0 * std::numbers::pi * u[0];
  next_normal_ = radius * std::sin(theta);
  return radius * std::cos(theta);
}

// normal_fill_16_AVX2: 16 uniforms become 16 normals, u1 from the first 8 and u2 from the last 8.
void TorchGenerator::fill_normal_blocks(float* out, int64_t n, float mean, float std) {
  const auto block = [&](float* data) {
    for (int j = 0; j < 8; ++j) {
      const float radius = std::sqrt(-2.0f * cephes_log(1.0f - data[j]));
      const float theta = static_cast<float>(2.0f * std::numbers::pi) * data[j + 8];
      float sine, cosine;
      cephes_sincos(theta, sine, cosine);
      data[j] = std::fma(radius * cosine, std, mean);
      data[j + 8] = std::fma(radius * sine, std, mean);
    }
  };
  fill_uniform(out, n, 0.0f, 1.0f);
  for (int64_t i = 0; i + 16 <= n; i += 16) block(out + i);
  if (n % 16 == 0) return;
  fill_uniform(out + n - 16, 16, 0.0f, 1.0f);  // the tail: the last 16 drawn again
  block(out + n - 16);
}

// normal_fill_16 (the f64 kernel): the same blocks with libm's log, cos and sin in double.
template <class T>
void TorchGenerator::fill_normal_blocks_scalar(T* out, int64_t n, T mean, T std) {
  const auto block = [&](T* data) {
    for (int j = 0; j < 8; ++j) {
      const T radius = std::sqrt(-2 * std::log(1 - data[j]));
      const T theta = 2.0 * std::numbers::pi * data[j + 8];
      data[j] = std::fma(radius * std::cos(theta), std, mean);
      data[j + 8] = std::fma(radius * std::sin(theta), std, mean);
    }
  };
  fill_uniform(out, n, T{0}, T{1});
  for (int64_t i = 0; i + 16 <= n; i += 16) block(out + i);
  if (n % 16 == 0) return;
  fill_uniform(out + n - 16, 16, T{0}, T{1});
  block(out + n - 16);
}

void TorchGenerator::fill_normal(float* out, int64_t n, float mean, float std) {
  if (n >= 16) return fill_normal_blocks(out, n, mean, std);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(std::fma(normal(), double{std}, double{mean}));
}

void TorchGenerator::fill_normal(double* out, int64_t n, double mean, double std) {
  if (n >= 16) return fill_normal_blocks_scalar(out, n, mean, std);
  for (int64_t i = 0; i < n; ++i) out[i] = std::fma(normal(), std, mean);
}

void TorchGenerator::fill_randint(int64_t* out, int64_t n, int64_t low, int64_t high) {
  AG_CHECK(low < high, "randint: expected low < high, got low={} high={}", low, high);
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const bool wide = range >= (uint64_t{1} << 32);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t bits = wide ? random64() : random();
    out[i] = static_cast<int64_t>(bits % range + static_cast<uint64_t>(low));
  }
}

void TorchGenerator::fill_bernoulli(bool* out, int64_t n, double p) {
  AG_CHECK(p >= 0 && p <= 1, "bernoulli: expected 0 <= p <= 1, got {}", p);
  for (int64_t i = 0; i < n; ++i) {
    double u;
    fill_uniform(&u, 1, 0.0, 1.0);
    out[i] = u < p;
  }
}

std::vector<int64_t> TorchGenerator::randperm(int64_t n) {
  AG_CHECK(n >= 0, "randperm: expected n >= 0, got {}", n);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const auto z = static_cast<int64_t>(random() % static_cast<uint64_t>(n - i));
    std::swap(order[i], order[i + z]);
  }
  return order;
}

int64_t TorchGenerator::random_int64() { return static_cast<int64_t>(random64() % (uint64_t{1} << 63)); }

// torch 1.13's DataLoader iterator draws its _base_seed, then RandomSampler yields randperm(n) and
// draws one more randperm(n) for its tail of num_samples % n = 0 elements.
std::vector<int64_t> TorchGenerator::data_loader_epoch(int64_t n) {
  random_int64();
  std::vector<int64_t> order = randperm(n);
  randperm(n);
  return order;
}

}  // namespace ag
