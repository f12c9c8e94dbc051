// layer_norm without recording: the forward over (rows, cols) and its backward, dx, dw and db in one
// call. The forward's f32 rows up to a measured length run on oneDNN, the rest on reference loops;
// the backward is one pass of our own over x and g.
#pragma once

#include <array>
#include <cstdint>

#include "engine/tensor.h"

namespace ag {

// The (rows, cols) problem, its affine parts and eps: everything a layer_norm primitive depends on.
struct NormProblem {
  int64_t rows, cols;
  bool scale, shift;
  double eps;
};

struct LayerNormForward {
  Tensor out;             // x's shape
  Tensor mean, variance;  // stat_shape (x's with the normalised dims 1); the variance is biased, without eps
};
LayerNormForward layer_norm_forward(const NormProblem& p, const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Shape& stat_shape);

// {dx (x's shape), dw (cols), db (cols)} of out = x̂ w + b for the gradient g at out, each where `wanted`
// (undefined elsewhere), from x's mean and variance as layer_norm_forward gave them.
std::array<Tensor, 3> layer_norm_backward_data(const NormProblem& p, const Tensor& g, const Tensor& x,
                                               const Tensor& weight, const Tensor& mean, const Tensor& variance,
                                               std::array<bool, 3> wanted);

}  // namespace ag
