#include "engine/parts.h"

#include <omp.h>

#include <algorithm>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/inspect.h"
#include "engine/ops/arithmetic.h"
#include "engine/threads.h"

namespace ag {

// Note [a step split by thread]
// With two threads splitting every op, what one thread writes the other reads in the next op, and
// on a machine whose two CPUs share no cache each such cache line crosses between them at a few
// hundred nanoseconds (tools/bench/README.md "A Zen 5 host": two MPI ranks, each on half the batch,
// trained charlm ~10% faster than one process's two threads). Split by parts instead, a thread
// reads what it wrote itself from the first op to the last, and the threads meet once, to sum the
// weights' gradients. No node may be shared: the walk keeps its scratch in the nodes, and a leaf's
// AccumulateGrad node is one per leaf, so each part accumulates into copies of the leaves
// (PartLeaves, autograd.h), and a graph recorded before the parts is refused.

namespace {

// What a part's thread takes from the caller's: the thread-local settings its ops read.
struct CallerState {
  bool grad_mode = grad_enabled();
  bool autocast = autocast_enabled();
  bool anomaly = anomaly_detection_enabled();
  std::shared_ptr<const std::string> scope = current_scope();
  std::vector<std::pair<Tensor, Tensor>> weight_bf16_copies = kept_weight_bf16_copies();  // none without autocast
  uint64_t first_sequence = next_node_sequence();
};

// On a thread other than the caller's, the caller's settings while it lives.
class CallerStateOnThisThread {
 public:
  explicit CallerStateOnThisThread(const CallerState& caller, bool caller_thread) {
    if (caller_thread) return;
    grad_mode_.emplace(caller.grad_mode);
    autocast_.emplace(caller.autocast);
    for (const auto& [weight, copy] : caller.weight_bf16_copies) keep_weight_bf16_copy(weight, copy);
    anomaly_.emplace(caller.anomaly);
    if (caller.scope) scope_.emplace(*caller.scope);
  }

 private:
  std::optional<GradModeGuard> grad_mode_;
  std::optional<AutocastGuard> autocast_;
  std::optional<DetectAnomalyGuard> anomaly_;
  std::optional<ScopeGuard> scope_;
};

void run_part(const std::function<void(int)>& part, int index, PartLeaves& leaves, std::exception_ptr& error) {
  PartLeaves* const previous = set_part_leaves(&leaves);
  try {
    part(index);
  } catch (...) {
    error = std::current_exception();
  }
  set_part_leaves(previous);
}

// Each leaf's gradient: the parts' in part order, summed, then accumulated as a backward would.
void accumulate_parts(std::vector<PartLeaves>& parts) {
  std::vector<std::pair<Tensor, Tensor>> sums;  // (leaf, its gradient summed so far), in order of first use
  std::unordered_map<const TensorImpl*, size_t> sum_of;
  for (PartLeaves& part : parts) {
    for (auto& [leaf, copy] : part.leaves) {
      Tensor grad = std::move(copy.impl()->grad);
      if (!grad.defined()) continue;
      const auto [found, added] = sum_of.try_emplace(leaf.impl(), sums.size());
      if (added) {
        sums.emplace_back(leaf, std::move(grad));
      } else {
        Tensor& sum = sums[found->second].second;
        sum = add(sum, grad);
      }
    }
  }
  for (auto& [leaf, sum] : sums) accumulate_gradient(leaf, std::move(sum));
}

}  // namespace

void run_parts(int parts, const std::function<void(int part)>& part) {
  AG_CHECK(parts >= 1, "run_parts: expected at least 1 part, got {}", parts);
  AG_CHECK(!fw::level_active(), "run_parts: a forward-mode level is active; its tangents live on the calling thread");
  const CallerState caller;
  std::vector<PartLeaves> leaves(static_cast<size_t>(parts));
  std::vector<std::exception_ptr> errors(static_cast<size_t>(parts));
  for (PartLeaves& part_leaves : leaves) part_leaves.first_sequence = caller.first_sequence;
#pragma omp parallel num_threads(std::min(parts, get_num_threads()))
  {
    const int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    omp_set_num_threads(1);  // this thread's ops, oneDNN's too, on this thread alone
    const CallerStateOnThisThread state(caller, thread == 0);
    continue_node_sequence(caller.first_sequence);
    for (int index = thread; index < parts; index += threads) run_part(part, index, leaves[index], errors[index]);
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  accumulate_parts(leaves);
}

}  // namespace ag
