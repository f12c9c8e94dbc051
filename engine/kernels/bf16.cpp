// The conversions as plain integer loops that GCC vectorises (16 lanes on AVX-512). Not
// vcvtne2ps2bf16: that instruction flushes subnormal inputs to zero, where PyTorch keeps them.
#include "engine/kernels/bf16.h"

#include "engine/kernels/parallel.h"

namespace ag {

namespace {

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void to_bf16_range(const float* in, uint16_t* out,
                                                                                       int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_from_f32(in[i]);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void to_bf16_rows(const float* __restrict in,
                                                                                      int64_t in_stride,
                                                                                      uint16_t* __restrict out,
                                                                                      int64_t out_stride, int64_t rows,
                                                                                      int64_t cols) {
  for (int64_t r = 0; r < rows; ++r, in += in_stride, out += out_stride)
    for (int64_t i = 0; i < cols; ++i) out[i] = bf16_bits_from_f32(in[i]);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void to_f32_range(const uint16_t* in, float* out,
                                                                                      int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f32_from_bf16_bits(in[i]);
}

[[gnu::target_clones("arch=x86-64-v4", "arch=haswell", "default")]] void product_to_bf16_range(const float* a,
                                                                                               const float* b,
                                                                                               uint16_t* out,
                                                                                               int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = bf16_bits_from_f32(a[i] * b[i]);
}

constexpr int64_t kChunk = 4096;  // elements per parallel work item

}  // namespace

void round_to_bf16(const float* in, BFloat16* out, int64_t n) {
  to_bf16_range(in, reinterpret_cast<uint16_t*>(out), n);
}

void round_rows_to_bf16(const float* in, int64_t in_stride, BFloat16* out, int64_t out_stride, int64_t rows,
                        int64_t cols) {
  to_bf16_rows(in, in_stride, reinterpret_cast<uint16_t*>(out), out_stride, rows, cols);
}

void convert_f32_to_bf16(const float* in, BFloat16* out, int64_t n) {
  auto* bits = reinterpret_cast<uint16_t*>(out);
  parallel_for((n + kChunk - 1) / kChunk, kChunk, [&](int64_t c) {
    const int64_t first = c * kChunk;
    to_bf16_range(in + first, bits + first, std::min(kChunk, n - first));
  });
}

void convert_bf16_to_f32(const BFloat16* in, float* out, int64_t n) {
  const auto* bits = reinterpret_cast<const uint16_t*>(in);
  parallel_for((n + kChunk - 1) / kChunk, kChunk, [&](int64_t c) {
    const int64_t first = c * kChunk;
    to_f32_range(bits + first, out + first, std::min(kChunk, n - first));
  });
}

bool cpu_has_avx512_bf16() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16");
  }();
  return has;
}

Tensor rounded_product(const Tensor& a, const Tensor& b) {
  AG_CHECK(a.dtype() == DType::f32 && b.dtype() == DType::f32 && a.shape() == b.shape(),
           "rounded_product: expected two f32 tensors of one shape, got {} {} and {} {}", dtype_name(a.dtype()),
           shape_str(a.shape()), dtype_name(b.dtype()), shape_str(b.shape()));
  Tensor out = empty(a.shape(), DType::bf16);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  auto* bits = reinterpret_cast<uint16_t*>(out.data<BFloat16>());
  const int64_t n = a.numel();
  parallel_for((n + kChunk - 1) / kChunk, kChunk, [&](int64_t c) {
    const int64_t first = c * kChunk, count = std::min(kChunk, n - first);
    product_to_bf16_range(pa + first, pb + first, bits + first, count);
  });
  return out;
}

Tensor converted(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = empty(x.shape(), dtype);
  out.copy_(x.detach());
  return out;
}

}  // namespace ag
