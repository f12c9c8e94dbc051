// The oneDNN fast path's plumbing: a per-thread cache of built primitives keyed by
// (op, shapes, strides, attributes), a creation counter, and execution on raw pointers.
// Primitive construction itself lives in dnnl_compat.h.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <utility>
#include <vector>

namespace ag::onednn {

struct Built;

// What a cached primitive is looked up by: an op code, then every dim, stride and attribute
// that changes the primitive (floats by their bits).
using Key = std::vector<int64_t>;

enum class Op : int64_t { matmul = 1, softmax, layer_norm_forward, matmul_bf16, linear };

class Primitive;

// The primitive for `key`, built by `make` the first time (counted by primitives_created).
// Null when oneDNN rejects the problem or would run a reference (`ref:`) implementation: the
// caller then runs its own kernel. Both outcomes are cached.
// `work` is the problem's size in element-operations. oneDNN fixes a primitive's thread count
// when it is built and opens a parallel region on every call; below kParallelGrain
// (engine/kernels/parallel.h), where that region costs more than the problem at 2 threads, the
// primitive is built for, and runs on, the calling thread alone; so is one asked for inside a
// parallel region (each thread running its share of a product, its own primitive and scratchpad).
// The thread count is part of the key, so a primitive built before set_num_threads() is not
// reused after it.
Primitive* cached(Key key, int64_t work, const std::function<Built()>& make);

// Runs p with the data pointers of its arguments, (DNNL_ARG_* id, pointer) in any order; ids the
// primitive does not take are ignored.
void execute(Primitive& p, std::initializer_list<std::pair<int, const void*>> data);

// Turns the fast path off (cached() returns null: every op runs its own loops) for this thread;
// the benchmarks compare both sides of each size threshold with it.
void set_enabled(bool enabled);

// How many primitives were built (or tried) since the process started.
int64_t primitives_created();

}  // namespace ag::onednn
