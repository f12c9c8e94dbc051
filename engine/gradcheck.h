// Gradient checking: analytic derivatives against central finite differences, element by element,
// in f64, or, for big inputs, along random directions: the VJP (backward, reverse mode), the JVP
// (forward mode, engine/forward_ad.h), and the two against each other (vᵀ(J d) = (Jᵀ v)ᵀ d).
#pragma once

#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "engine/registry.h"
#include "engine/tensor.h"

namespace ag {

// Which derivatives gradcheck checks: the VJP (backward), the JVP (forward mode), or both (and then
// each against the other).
enum class GradcheckMode { reverse, forward, both };

struct GradcheckOptions {
  GradcheckMode mode = GradcheckMode::both;
  Tolerance tolerance = {};
  // Inputs with more elements than this are checked along random directions instead.
  int64_t max_elements_exact = 4096;
  int directions = 4;  // random directions per input in fast mode
  int report_worst = 5;
  uint64_t seed = 0;  // for the output projection v and the directions u
};

struct ElementError {
  const char* derivative = "vjp";  // "vjp", "jvp", or "jvp·vjp" (the two against each other)
  int input = 0;                   // -1: all inputs at once (jvp·vjp)
  std::string index;               // "(1,2)", or "u3" for the third random direction
  double analytic = 0;
  double numeric = 0;
  double abs_error = 0;
  double rel_error = 0;  // abs_error / max(|analytic|, |numeric|), 0 where both vanish
};

struct GradcheckResult {
  bool ok = true;
  double max_abs_error = 0;
  double max_rel_error = 0;
  int64_t checked = 0;              // element (or direction) comparisons made
  std::vector<ElementError> worst;  // the largest violations first (or largest errors if none fail)
  std::string report() const;       // a readable table of the worst elements
};

// Checks fn at inputs (f64; the ones with requires_grad are checked). The scalar checked is
// L = Σ v ⊙ fn(inputs) with a fixed random v, so every output element takes part: its gradient
// (backward) and, in forward mode, vᵀ J e for each input element e (one JVP each), against
// (L(x + εe) − L(x − εe)) / 2ε; with both, also vᵀ (J d) against (Jᵀ v)ᵀ d for a random d.
GradcheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                          const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// Second order (torch.autograd.gradgradcheck): gradcheck of the first-order gradient
// G(inputs, u) = (uᵀ ∂fn/∂x for each input x that requires grad), flattened into one tensor,
// with u a fixed random grad_output that is itself checked as an input. So the backward of the
// backward is compared with finite differences of the backward, and in forward mode the JVP of the
// backward (forward-over-reverse, as ag::hvp computes) too.
GradcheckResult gradgradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                              const std::vector<Tensor>& inputs, const GradcheckOptions& options = {});

// The most input elements gradcheck_op takes: it runs the op twice per element.
inline constexpr int64_t kMaxGradcheckElements = 10'000;

// Throws ag::Error when `shapes` has the wrong number of inputs for the op or more than
// kMaxGradcheckElements elements in all (a size that overflows included).
void check_op_shapes(const OpEntry& op, const std::vector<Shape>& shapes);

// Draws inputs for one shape set of a registered op and checks it (check_op_shapes first): first
// order, or with second_order its gradgradcheck.
GradcheckResult gradcheck_op(const OpEntry& op, const std::vector<Shape>& shapes, const GradcheckOptions& options = {},
                             bool second_order = false);

// "reverse", "forward" or "both" (the --mode flag); throws on another word.
GradcheckMode parse_gradcheck_mode(const std::string& text);

// One row of a gradcheck table: an op at one shape set.
struct GradcheckRow {
  const OpEntry* op;
  std::vector<Shape> shapes;
};

// A row for every shape set of `op`.
std::vector<GradcheckRow> gradcheck_rows(const OpEntry& op);

struct GradcheckTableOptions {
  bool second_order = false;  // gradgradcheck instead of gradcheck
  GradcheckMode mode = GradcheckMode::both;
  bool verbose = false;  // the worst elements under every row, not only under failures
};

// The table `attograd gradcheck` prints: checks every row's shapes first (an error before anything
// is printed), then prints a header, one line per row (op, shapes, max abs and rel error, ok or
// FAIL) with the worst elements under a failure, and a count. A row whose op has no JVP (a dual
// reaching it throws fw::NoJvpError) reads "no JVP" with the reason, and is counted apart from the
// failures. Returns the number of failed rows.
int print_gradcheck_table(std::ostream& out, const std::vector<GradcheckRow>& rows,
                          const GradcheckTableOptions& options = {});

}  // namespace ag
