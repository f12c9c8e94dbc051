// Normalisation (norm.cpp): layer_norm over the trailing dims given by normalized_shape, and its
// backward as an op of its own.
#pragma once

#include <array>

#include "engine/tensor.h"

namespace ag {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

// x's statistics over the normalised dims, as layer_norm's forward computed them (x's shape with
// those dims 1): the mean and the biased variance, without eps.
struct LayerNormStatistics {
  Tensor mean, variance;
};

// The gradients of out = layer_norm(x, normalized_shape, weight, bias, eps) for the gradient `grad`
// at out (PyTorch's native_layer_norm_backward): input (x's shape), weight and bias
// (normalized_shape), each where `wanted` says so, undefined elsewhere. One fused pass, and
// differentiable again: the statistics are x's, and the derivatives w.r.t. x go through them.
struct LayerNormGradients {
  Tensor input, weight, bias;
};
LayerNormGradients layer_norm_backward(const Tensor& grad, const Tensor& x, const LayerNormStatistics& statistics,
                                       const Tensor& weight, const Shape& normalized_shape, double eps = 1e-5,
                                       std::array<bool, 3> wanted = {true, true, true});

}  // namespace ag
