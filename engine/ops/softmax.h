// softmax and log_softmax over one dim (softmax.cpp).
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace ag
