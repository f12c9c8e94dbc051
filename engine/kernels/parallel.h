// OpenMP helpers for the reference kernels: parallel over an outer loop, static schedule
// (so each index is computed by the same code path whatever the timing: deterministic for a
// fixed thread count), and no parallel region at all when the work is small.
#pragma once

#include <omp.h>

#include <cstdint>

namespace ag {

// Below this many element-operations a parallel region costs more than it saves.
inline constexpr int64_t kParallelGrain = 32768;

// Calls body(i) for i in [0, count). cost_per_item: rough element-operations per index.
template <typename Body>
void parallel_for(int64_t count, int64_t cost_per_item, Body&& body) {
  if (count * cost_per_item < kParallelGrain || count < 2) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < count; ++i) body(i);
}

// Where thread `thread` of `threads` starts its share of [0, count): an even split, each boundary
// but the last rounded down to a multiple of `multiple`; share_start(count, threads, threads) = count.
inline int64_t share_start(int64_t count, int64_t thread, int64_t threads, int64_t multiple = 1) {
  return thread == threads ? count : count * thread / threads / multiple * multiple;
}

// Calls body(begin, end) on contiguous ranges that cover [0, count): one range per thread, or
// [0, count) itself when the work is small. For loops that carry state from one index to the
// next (an odometer over a multi-index) instead of recomputing it per index.
template <typename Body>
void parallel_for_ranges(int64_t count, int64_t cost_per_item, Body&& body) {
  if (count * cost_per_item < kParallelGrain || count < 2) {
    if (count > 0) body(int64_t{0}, count);
    return;
  }
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), thread = omp_get_thread_num();
    const int64_t begin = share_start(count, thread, threads), end = share_start(count, thread + 1, threads);
    if (begin < end) body(begin, end);
  }
}

}  // namespace ag
