// A step split by thread: its batch in parts, each part's forward and backward on a thread of its
// own, the parts' gradients summed once at the end (Note [a step split by thread], parts.cpp).
#pragma once

#include <functional>

namespace ag {

// Runs part(0), …, part(parts − 1) at once on the OpenMP threads (get_num_threads() of them; a part
// to each, or several in turn when there are fewer threads than parts), every op of a part on its
// thread alone. A part records and backwards a graph of its own: the gradients its backward leaves
// in a leaf go to the part's copy of that leaf, and once every part is done they are summed in part
// order and accumulated into the leaf's grad (its hooks run then, once). The same numbers for the
// same parts whatever the thread count. A part sees its caller's grad mode, autocast, anomaly mode
// and scope; the caller's profiler and observers see part 0 only. A part may not use a tensor
// whose graph was recorded before it began (an error: compute it in every part), and the first
// part to throw has its exception rethrown here after all parts have stopped. Throws if parts < 1.
// Not yet for parts that draw random numbers (dropout in training mode, randn): the parts would
// share the generator, and its draws would depend on the threads' timing. The Trainer's
// micro-batches (a BatchShardGuard's per-row streams) remain the way to split such a step.
void run_parts(int parts, const std::function<void(int part)>& part);

}  // namespace ag
