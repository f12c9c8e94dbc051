// Normalisation (norm.cpp): layer_norm over the trailing dims given by normalized_shape.
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {}, const Tensor& bias = {},
                  double eps = 1e-5);

}  // namespace ag
