// Iteration over a broadcast result: for every output element, the offsets of the matching
// element in each input (stride 0 along broadcast dims).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>

#include "engine/kernels/parallel.h"
#include "engine/shape.h"

namespace ag {

// True if `from` broadcasts to exactly `to` (numpy rules, `to` unchanged).
inline bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const size_t lead = to.size() - from.size();
  for (size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

// If `in` (leading 1s aside) is the last dims of `out`, so that it repeats along out's other
// dims (a bias over rows), the number of its elements; otherwise 0.
inline int64_t trailing_block(const Shape& in, const Shape& out) {
  size_t first = 0;
  while (first < in.size() && in[first] == 1) ++first;
  const size_t dims = in.size() - first;
  if (dims > out.size() || !std::equal(in.begin() + first, in.end(), out.end() - dims)) return 0;
  return numel(in);
}

// Strides of `in` read as if broadcast to `out` (0 along dims where `in` has size 1 or none).
inline Shape broadcast_strides(const Shape& in, const Shape& out) {
  Shape strides(out.size(), 0);
  const Shape contiguous = contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) strides[lead + i] = in[i] == 1 ? 0 : contiguous[i];
  return strides;
}

// Calls body(out_offset, {in_offset...}) for every element of `out`, parallel over rows of the
// last dim.
template <size_t N, typename Body>
void for_each_broadcast(const Shape& out, const std::array<std::reference_wrapper<const Shape>, N>& in_shapes,
                        Body&& body) {
  const int64_t total = numel(out);
  bool same = true;
  for (const Shape& s : in_shapes) same = same && s == out;
  if (same) {  // no broadcasting: every input is read at the output's offset
    parallel_for(total, 1, [&](int64_t i) {
      std::array<int64_t, N> offsets;
      offsets.fill(i);
      body(i, offsets);
    });
    return;
  }
  std::array<Shape, N> strides;
  for (size_t k = 0; k < N; ++k) strides[k] = broadcast_strides(in_shapes[k].get(), out);
  const int64_t ndim = static_cast<int64_t>(out.size());
  const int64_t inner = ndim == 0 ? 1 : out.back();
  const int64_t rows = inner == 0 ? 0 : total / inner;
  parallel_for(rows, inner, [&](int64_t row) {
    std::array<int64_t, N> base{};
    int64_t rest = row;
    for (int64_t d = ndim - 2; d >= 0; --d) {
      const int64_t index = rest % out[d];
      rest /= out[d];
      for (size_t k = 0; k < N; ++k) base[k] += index * strides[k][d];
    }
    for (int64_t j = 0; j < inner; ++j) {
      std::array<int64_t, N> offsets;
      for (size_t k = 0; k < N; ++k) offsets[k] = base[k] + (ndim == 0 ? 0 : j * strides[k][ndim - 1]);
      body(row * inner + j, offsets);
    }
  });
}

}  // namespace ag
