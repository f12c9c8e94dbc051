// OUT/predictions.svg: a grid of squares, each with its two given corners, the true last two and
// the model's prediction of them.
#pragma once

#include <string>

#include "engine/tensor.h"

namespace ag::squares {

// source, target and predicted (N, 2, 2); draws the first min(N, count) squares, 4 per row.
std::string predictions_svg(const std::string& title, const Tensor& source, const Tensor& target,
                            const Tensor& predicted, int64_t count = 12);

}  // namespace ag::squares
