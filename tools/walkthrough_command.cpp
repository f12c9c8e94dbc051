// `attograd walkthrough`: its flags, and the Jacobian of seed 003's attention step by forward and
// by reverse mode (--jacobian). What the walkthrough prints of each seed notebook is the seeds
// library's (seeds/walkthrough.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "engine/functional.h"
#include "engine/inspect.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "seeds/seed_attention.h"
#include "seeds/walkthrough.h"
#include "tools/commands.h"
#include "tools/flag_checks.h"
#include "tools/timing.h"

namespace ag::cli {

namespace {

// `walkthrough --notebook 003 --jacobian`: the Jacobian of the context (6, 2) with respect to the
// four leaves (36 elements) both ways — forward mode, one JVP per input element; reverse mode, one
// forward and one VJP per output element — their agreement and their times.
int print_seed_jacobian() {
  const seeds::SeedAttentionStep step = seeds::seed_attention_step();
  const std::vector<Tensor> leaves(step.values.begin(), step.values.begin() + 4);
  int64_t inputs = 0;
  for (const Tensor& leaf : leaves) inputs += leaf.numel();
  const int64_t outputs = step.values.back().numel();
  Jacobian forward, reverse;
  const double forward_ms = median_ms(5, [&] { forward = jacfwd(seeds::seed_context, leaves); });
  const double reverse_ms = median_ms(5, [&] { reverse = jacrev(seeds::seed_context, leaves); });
  double largest = 0;
  for (size_t i = 0; i < leaves.size(); ++i)
    largest = std::max(largest, max(abs(sub(forward[0][i], reverse[0][i]))).item());
  fmt::print("Jacobian of context {} with respect to inputs {}, W_query, W_key, W_value {}: {} x {} entries (f64)\n",
             shape_str(step.values.back().shape()), shape_str(leaves[0].shape()), shape_str(leaves[1].shape()), outputs,
             inputs);
  fmt::print("  jacfwd (forward mode): {:3} JVPs, one per input element    {:8.3f} ms (median of 5)\n", inputs,
             forward_ms);
  fmt::print("  jacrev (reverse mode): {:3} VJPs, one per output element   {:8.3f} ms (median of 5)\n", outputs,
             reverse_ms);
  fmt::print("  largest |jacfwd - jacrev|: {:.3g}\n", largest);
  fmt::print("  d context[0,0] / d inputs (6, 3):\n{}\n",
             reshape(slice(slice(forward[0][0], 0, 0, 1), 1, 0, 1), leaves[0].shape()).str());
  return largest < 1e-12 ? 0 : 1;
}

}  // namespace

Command add_walkthrough_command(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "walkthrough",
      "Seed 003's self-attention example step by step, with its gradients checked by finite differences; "
      "--notebook 000|002|003|004: every number that seed notebook prints beside ours, with verdicts and counts");
  auto notebook = std::make_shared<std::string>();
  cmd->add_option("--notebook", *notebook, "Which seed notebook's printed numbers to compare with ours")
      ->check(CLI::IsMember(seeds::notebook_names()));
  auto jacobian = std::make_shared<bool>(false);
  cmd->add_flag("--jacobian", *jacobian,
                "With --notebook 003: the Jacobian of its attention's context with respect to its inputs and "
                "weights, by forward mode (one JVP per input element) and by reverse mode (one VJP per output "
                "element): their agreement, counts and times");
  return {cmd, [notebook, jacobian] {
            if (*jacobian) {
              if (*notebook != "003")
                throw UsageError(
                    fmt::format("walkthrough --jacobian: expected --notebook 003 (seed 003's attention), got {}",
                                notebook->empty() ? "no --notebook" : "--notebook " + *notebook));
              return print_seed_jacobian();
            }
            return notebook->empty() ? seeds::walkthrough() : seeds::walkthrough_notebook(*notebook);
          }};
}

}  // namespace ag::cli
