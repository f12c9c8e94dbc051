// Losses (loss.cpp): each one fused forward kernel with a backward in engine ops.
#pragma once

#include "engine/options.h"
#include "engine/tensor.h"

namespace ag {

Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);
// Numerically stable: max(x,0) - x·y + log(1 + exp(-|x|)).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        Reduction reduction = Reduction::mean);
// logits (N, C) and i64 targets (N); targets equal to ignore_index add nothing, and the mean is
// over the others. label_smoothing ε in [0, 1] as PyTorch's: the target distribution is 1 - ε at the
// target plus ε / C on every class.
Tensor cross_entropy(const Tensor& logits, const Tensor& target, int64_t ignore_index = -100,
                     Reduction reduction = Reduction::mean, double label_smoothing = 0.0);

}  // namespace ag
