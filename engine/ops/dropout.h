// Dropout (dropout.cpp): in training, zeroes each element with probability p and scales the rest
// by 1/(1-p); in eval, the identity.
#pragma once

#include "engine/tensor.h"

namespace ag {

// by 1/(1-p); in eval, the identity.
Tensor dropout(const Tensor& x, double p, bool training, Generator& gen = default_generator());

}  // namespace ag
