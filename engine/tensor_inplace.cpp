// Tensor's in-place writes (zero_, fill_, copy_, add_, mul_): never recorded, each bumps the version.
#include <algorithm>
#include <cstring>

#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/kernels/parallel.h"
#include "engine/tensor.h"

namespace ag {

void Tensor::check_writable(std::string_view op) const {
  AG_CHECK(defined(), "{}: the tensor is undefined", op);
  AG_CHECK(!(grad_enabled() && requires_grad()),
           "{}: in-place writes to a tensor that requires grad are not recorded; use an out-of-place op, or write "
           "under NoGradGuard (as optimizers do){}",
           op, is_leaf() ? "" : " to a detached copy");
}

Tensor& Tensor::zero_() { return fill_(0); }

Tensor& Tensor::fill_(double value) {
  check_writable("fill_");
  dispatch_any(dtype(), [&]<typename T>() { std::fill_n(data<T>(), numel(), static_cast<T>(value)); });
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::copy_(const Tensor& source) {
  check_writable("copy_");
  AG_CHECK(source.defined() && source.shape() == shape(), "copy_: source of shape {} into a tensor of shape {}",
           source.defined() ? shape_str(source.shape()) : "undefined", shape_str(shape()));
  if (source.dtype() == dtype()) {
    std::memmove(raw_data(), source.raw_data(), numel() * dtype_size(dtype()));
  } else if (source.dtype() == DType::f32 && dtype() == DType::bf16) {
    convert_f32_to_bf16(source.data<float>(), data<BFloat16>(), numel());
  } else if (source.dtype() == DType::bf16 && dtype() == DType::f32) {
    convert_bf16_to_f32(source.data<BFloat16>(), data<float>(), numel());
  } else {
    dispatch_any(dtype(), [&]<typename To>() {
      dispatch_any(source.dtype(), [&]<typename From>() {
        To* out = data<To>();
        const From* in = source.data<From>();
        const int64_t n = numel();
        for (int64_t i = 0; i < n; ++i) out[i] = static_cast<To>(in[i]);  // to b8: v != 0
      });
    });
  }
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  check_writable("add_");
  AG_CHECK(other.defined() && other.shape() == shape() && other.dtype() == dtype(),
           "add_: expected a tensor of shape {} and dtype {}, got {} {}", shape_str(shape()), dtype_name(dtype()),
           other.defined() ? shape_str(other.shape()) : "undefined", other.defined() ? dtype_name(other.dtype()) : "");
  dispatch_floating(dtype(), "add_", [&]<typename T>() {
    T* out = data<T>();
    const T* in = other.data<T>();
    const T a = static_cast<T>(alpha);
    parallel_for_ranges(numel(), 2, [&](int64_t begin, int64_t end) {  // each element on its own
      for (int64_t i = begin; i < end; ++i) out[i] += a * in[i];
    });
  });
  ++impl_->storage->version;
  return *this;
}

Tensor& Tensor::mul_(double factor) {
  check_writable("mul_");
  dispatch_floating(dtype(), "mul_", [&]<typename T>() {
    T* out = data<T>();
    for (int64_t i = 0, n = numel(); i < n; ++i) out[i] *= static_cast<T>(factor);
  });
  ++impl_->storage->version;
  return *this;
}

}  // namespace ag
