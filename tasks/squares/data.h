// Seed 004's "noisy squares": the four corners of the square [-1, 1]², starting at a random corner
// and going round clockwise or counter-clockwise, each point with Gaussian noise. The seed draws
// from numpy's stream; by default this generator draws from ag::Generator, so the same seed gives
// other squares than numpy's (same distribution); with numpy_stream, numpy's squares exactly.
#pragma once

#include <array>
#include <vector>

#include "engine/tensor.h"

namespace ag::squares {

using Point = std::array<float, 2>;

struct Square {
  std::vector<Point> points;  // 4 corners in drawing order (2 to 4 with variable_len)
  int direction = 0;          // 1: in the order of the seed's basic corners, 0: reversed
};

struct SquaresSpec {
  int64_t n = 128;
  uint64_t seed = 13;
  double noise = 0.1;         // std of the noise added to every coordinate
  bool variable_len = false;  // keep only the first 2, 3 or 4 corners (uniformly)
  bool numpy_stream = false;  // draw from numpy's legacy RandomState seeded with `seed`, as the seed does
};

// The seed's generate_sequences: per square a starting corner, (a length), a direction, then the
// noise of its points, drawn in the seed's order (all bases, all lengths, all directions, noise).
std::vector<Square> generate_squares(const SquaresSpec& spec);

// The points of the squares at `rows` as an (N, L, 2) f32 tensor; all must have L points.
Tensor points_tensor(const std::vector<Square>& squares, const std::vector<int64_t>& rows);
// All of them, in order.
Tensor points_tensor(const std::vector<Square>& squares);

}  // namespace ag::squares
