// Seed 003's attention step as `attograd walkthrough` part 4 runs it (f64): context.sum() from the
// six-token inputs and the printed W_query, W_key, W_value. `graph walkthrough` draws its graph and
// step page from the same function, so the page shows the numbers the walkthrough prints.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/graph.h"
#include "engine/tensor.h"

namespace ag::seeds {

struct SeedAttentionStep {
  // inputs, W_query, W_key, W_value (leaves that require grad), then each step computed from those
  // before it (queries … context), every one with retain_grad; names[i] says what values[i] is
  // ("queries = inputs @ W_query").
  std::vector<Tensor> values;
  std::vector<std::string> names;
  Tensor loss;  // context.sum(), its backward not yet run
};

// Each computed step runs under a module scope named after it ("queries", "attn_weights"), so the
// graph draws one cluster per step.
// `before_forward`, if given, is called with the four leaves by name before the steps are computed.
SeedAttentionStep seed_attention_step(const std::function<void(const NamedTensors& leaves)>& before_forward = {});
// The four leaves by name (inputs, W_query, W_key, W_value), as the graph labels parameters.
ParameterNames seed_attention_leaf_names(const SeedAttentionStep& step);
// The context (6, 2) as a function of the four leaves: the same steps, run on the values a function
// transform (jacfwd, jacrev) passes in.
std::vector<Tensor> seed_context(const std::vector<Tensor>& leaves);

}  // namespace ag::seeds
