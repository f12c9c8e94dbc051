// Matrix products (matmul.cpp): 2-D, and batched N-D with broadcast batch dims like torch.matmul
// (1-D operands are promoted as in torch.matmul). The flags transpose the last two dims of an
// operand without a copy.
#pragma once

#include "engine/tensor.h"

namespace ag {

Tensor matmul(const Tensor& a, const Tensor& b, bool transpose_a = false, bool transpose_b = false);

}  // namespace ag
