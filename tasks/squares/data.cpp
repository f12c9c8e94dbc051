#include "tasks/squares/data.h"

#include <functional>
#include <numeric>

#include "engine/error.h"
#include "engine/generator.h"
#include "engine/numpy_random.h"

namespace ag::squares {

namespace {

constexpr std::array<Point, 4> kBasicCorners = {{{-1, -1}, {-1, 1}, {1, 1}, {1, -1}}};

// Where the draws come from: randint(low, high) and a standard normal.
struct Draws {
  std::function<int64_t(int64_t, int64_t)> randint;
  std::function<double()> normal;
};

std::vector<Square> draw_squares(const SquaresSpec& spec, const Draws& gen) {
  const auto n = static_cast<size_t>(spec.n);
  std::vector<int64_t> bases(n), lengths(n, 4), directions(n);
  for (int64_t& b : bases) b = gen.randint(0, 4);
  if (spec.variable_len)
    for (int64_t& l : lengths) l = gen.randint(2, 5);
  for (int64_t& d : directions) d = gen.randint(0, 2);
  std::vector<Square> squares(n);
  for (size_t s = 0; s < n; ++s) {
    squares[s].direction = static_cast<int>(directions[s]);
    for (int64_t i = 0; i < lengths[s]; ++i) {
      // Corners b, b+1, b+2, b+3 (mod 4), reversed when the direction is 0.
      const int64_t corner = (bases[s] + (directions[s] == 1 ? i : 3 - i)) % 4;
      const Point& c = kBasicCorners[corner];
      const auto x = static_cast<float>(c[0] + gen.normal() * spec.noise);
      const auto y = static_cast<float>(c[1] + gen.normal() * spec.noise);
      squares[s].points.push_back({x, y});
    }
  }
  return squares;
}

}  // namespace

std::vector<Square> generate_squares(const SquaresSpec& spec) {
  AG_CHECK(spec.n >= 1, "squares: n must be at least 1, got {}", spec.n);
  AG_CHECK(spec.noise >= 0 && std::isfinite(spec.noise), "squares: noise must be finite and ≥ 0, got {}", spec.noise);
  if (spec.numpy_stream) {
    AG_CHECK(spec.seed <= 0xFFFFFFFFu, "squares: numpy's seed must be below 2^32, got {}", spec.seed);
    NumpyRandomState numpy(static_cast<uint32_t>(spec.seed));
    return draw_squares(
        spec, {[&](int64_t low, int64_t high) { return numpy.randint(low, high); }, [&] { return numpy.randn(); }});
  }
  Generator gen(spec.seed);
  return draw_squares(
      spec, {[&](int64_t low, int64_t high) { return gen.randint(low, high); }, [&] { return gen.normal(); }});
}

Tensor points_tensor(const std::vector<Square>& squares, const std::vector<int64_t>& rows) {
  AG_CHECK(!rows.empty(), "squares: no rows to put into a tensor");
  const size_t length = squares.at(rows[0]).points.size();
  std::vector<double> values;
  values.reserve(rows.size() * length * 2);
  for (int64_t row : rows) {
    const Square& square = squares.at(row);
    AG_CHECK(square.points.size() == length, "squares: square {} has {} points, expected {} like the others", row,
             square.points.size(), length);
    for (const Point& p : square.points) values.insert(values.end(), p.begin(), p.end());
  }
  return tensor(values, {static_cast<int64_t>(rows.size()), static_cast<int64_t>(length), 2});
}

Tensor points_tensor(const std::vector<Square>& squares) {
  std::vector<int64_t> rows(squares.size());
  std::iota(rows.begin(), rows.end(), 0);
  return points_tensor(squares, rows);
}

}  // namespace ag::squares
