// Dropout masks, many draws at once: Generator's splitmix64 is counter-based, so the draws of a
// row are independent and the loop vectorises (AVX-512, AVX2 clones), with the same bits as
// drawing them one by one with Generator::uniform().
#pragma once

#include <cstdint>

#include "engine/generator.h"
#include "engine/tensor.h"

namespace ag::kernels {

// out[i] = scale if draw i + 1 after `counter` (Generator::State::counter) is kept, else 0, where
// a draw is kept when its uniform() >= p. Done with integers: uniform() is k·2⁻⁵³ for the draw's
// top 53 bits k, and k·2⁻⁵³ >= p exactly when k >= ⌈p·2⁵³⌉.
void dropout_mask_row(uint64_t counter, double p, float scale, float* out, int64_t n);
void dropout_mask_row(uint64_t counter, double p, double scale, double* out, int64_t n);

}  // namespace ag::kernels

namespace ag {

// Dropout's scaled keep-mask: 1/(1-p) where kept, 0 where dropped (everywhere if p = 1), one
// draw from gen per element in row-major order (in a data-parallel step, per row from the row's
// own stream); with RngStyle::torch, PyTorch's bernoulli draws.
Tensor dropout_mask(const Shape& shape, DType dtype, double p, Generator& gen);

}  // namespace ag
