#include "engine/forward_ad.h"

#include <algorithm>

#include "engine/autograd.h"
#include "engine/inspect.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/reduce.h"

namespace ag::fw {

namespace detail {
constinit thread_local uint64_t current_level = 0;
}  // namespace detail

namespace {
thread_local uint64_t levels_made = 0;  // level ids are never reused: a stale tangent stays stale
}  // namespace

DualLevel::DualLevel() {
  AG_CHECK(detail::current_level == 0,
           "DualLevel: a forward-AD level is already active on this thread; nested levels are not supported");
  detail::current_level = ++levels_made;
}
DualLevel::~DualLevel() { detail::current_level = 0; }

SuspendLevel::SuspendLevel() : previous_(detail::current_level) { detail::current_level = 0; }
SuspendLevel::~SuspendLevel() { detail::current_level = previous_; }

Tensor tangent_of(const Tensor& t) {
  if (!level_active() || !t.defined()) return {};
  const TensorImpl* impl = t.impl();
  return impl->tangent_level == detail::current_level ? impl->tangent : Tensor();
}

bool carries_tangent(std::span<const Tensor> tensors) {
  return std::any_of(tensors.begin(), tensors.end(), [](const Tensor& t) { return tangent_of(t).defined(); });
}

void set_tangent(const Tensor& t, const Tensor& tangent, std::string_view op) {
  AG_CHECK(tangent.defined() && tangent.shape() == t.shape() && tangent.dtype() == t.dtype(),
           "{}: the tangent has shape {} {}, but the tensor has shape {} {}", op,
           tangent.defined() ? shape_str(tangent.shape()) : "(undefined)",
           tangent.defined() ? dtype_name(tangent.dtype()) : "", shape_str(t.shape()), dtype_name(t.dtype()));
  t.impl()->tangent = tangent.detach();
  t.impl()->tangent_level = detail::current_level;
}

Tensor alias_keeping_tangent(const Tensor& x) {
  Tensor alias = x.detach();
  alias.impl()->tangent = x.impl()->tangent;
  alias.impl()->tangent_level = x.impl()->tangent_level;
  return alias;
}

namespace {

// An alias of x whose reverse-mode gradient flows to x (an identity node), with no tangent.
Tensor differentiable_alias(const Tensor& x, const char* node) {
  Tensor alias = x.detach();
  const SuspendLevel suspend;  // the caller sets the alias's tangent itself
  record(alias, {node, {.formula = "out = x  →  dx = g"}}, {x}, {},
         [](const BackwardContext& c) { return std::vector<Tensor>{c.grad}; });
  return alias;
}

}  // namespace

Tensor make_dual(const Tensor& primal, const Tensor& tangent) {
  AG_CHECK(level_active(), "make_dual: no forward-AD level is active; create an ag::fw::DualLevel first");
  AG_CHECK(primal.defined() && is_floating(primal.dtype()), "make_dual: expected a floating primal, got {}",
           primal.defined() ? dtype_name(primal.dtype()) : "an undefined tensor");
  Tensor dual = differentiable_alias(primal, "MakeDualBackward");
  set_tangent(dual, tangent, "make_dual");
  return dual;
}

Unpacked unpack_dual(const Tensor& dual) {
  AG_CHECK(dual.defined(), "unpack_dual: the tensor is undefined");
  return {differentiable_alias(dual, "UnpackDualBackward"), tangent_of(dual)};
}

// Note [the JVP from the VJP]
// An op's VJP maps the output's gradient g to the inputs' gradients Jᵢᵀ g, linearly in g. So for
// input tangents tᵢ, s(g) = Σᵢ ⟨Jᵢᵀ g, tᵢ⟩ = ⟨g, Σᵢ Jᵢ tᵢ⟩ and the output's tangent Σᵢ Jᵢ tᵢ is ∂s/∂g:
// one run of the VJP on a g that requires grad, at the op's values (the level suspended, nothing
// saved carrying a graph), and one reverse pass through the VJP's own ops. Every VJP of the engine
// is written in recorded engine ops (its second order is checked), so every op has a JVP; an op
// whose VJP is not (a user's Function with a raw loop) is named in the error. It costs about one
// backward and one double backward of the op: ops on a hot forward-mode path state theirs instead.
namespace {

// Per input: its tangent; where it carries none, zeros (or undefined with `zeros_for_none` false),
// undefined where it cannot carry one.
std::vector<Tensor> input_tangents(std::span<const Tensor> inputs, bool zeros_for_none) {
  std::vector<Tensor> tangents;
  tangents.reserve(inputs.size());
  for (const Tensor& input : inputs) {
    const Tensor t = tangent_of(input);
    const bool floating = input.defined() && is_floating(input.dtype());
    tangents.push_back(t.defined() || !floating || !zeros_for_none ? t : zeros_like(input));
  }
  return tangents;
}

// Σᵢ ⟨gradᵢ, tᵢ⟩ over the inputs with a tangent and a gradient; undefined if there are none.
Tensor pairing(const std::vector<Tensor>& grads, const std::vector<Tensor>& tangents) {
  Tensor s;
  for (size_t i = 0; i < grads.size() && i < tangents.size(); ++i) {
    if (!grads[i].defined() || !tangents[i].defined()) continue;
    const Tensor term = sum(mul(grads[i], tangents[i]));
    s = s.defined() ? add(s, term) : term;
  }
  return s;
}

// Note [the JVP from the VJP]: the level is suspended by the caller.
Tensor tangent_from_vjp(std::string_view op, const Tensor& out, std::span<const Tensor> inputs,
                        std::span<const Tensor> saved, const BackwardFn& backward,
                        const std::vector<Tensor>& tangents) {
  const GradModeGuard grad_mode(true);
  const Tensor g = zeros_like(out).requires_grad_();
  std::vector<Tensor> values;  // what the node saved, as constants
  for (const Tensor& t : saved) values.push_back(t.defined() ? t.detach() : t);
  const auto wanted = std::make_shared<Node>();
  std::vector<std::shared_ptr<Node>> needs;
  std::vector<InputMeta> metas;
  for (size_t i = 0; i < inputs.size(); ++i) {
    needs.push_back(tangents[i].defined() ? wanted : nullptr);
    metas.push_back(inputs[i].defined() ? InputMeta{inputs[i].shape(), inputs[i].dtype()} : InputMeta{});
  }
  const auto vjp = [&](const Tensor& at) { return backward(BackwardContext{at, values, NeedsGrad(needs), metas}); };
  const Tensor s = pairing(vjp(g), tangents);
  if (!s.defined()) return zeros_like(out);  // no input with a tangent reaches the output
  if (!s.requires_grad()) {
    // A VJP that does not depend on g is zero (it is linear in g: pow's at p = 0), or it is not recorded.
    AG_CHECK(pairing(vjp(ones_like(out)), tangents).item() == 0,
             "{}: has no JVP: its VJP is not written in recorded engine ops, so forward mode cannot derive one "
             "from it; give the op a jvp",
             op);
    return zeros_like(out);
  }
  const Tensor t = grad({s}, {g}, {}, /*create_graph=*/false, /*allow_unused=*/true)[0];
  return t.defined() ? t : zeros_like(out);
}

}  // namespace

Tensor output_tangent(std::string_view op, const Tensor& out, std::span<const Tensor> inputs,
                      std::span<const Tensor> saved, const BackwardFn& backward, const JvpFn& jvp) {
  const std::vector<Tensor> tangents = input_tangents(inputs, static_cast<bool>(jvp));
  const SuspendLevel suspend;    // the JVP's own ops carry no tangents
  const ObserversPaused unseen;  // nor are they recorded, traced or profiled as the program's
  try {
    Tensor t =
        jvp ? jvp(JvpContext{tangents, saved, out}) : tangent_from_vjp(op, out, inputs, saved, backward, tangents);
    AG_CHECK(t.defined() && t.shape() == out.shape() && t.dtype() == out.dtype(),
             "{}: its JVP returned a tangent of shape {} {}, but the output has shape {} {}", op,
             t.defined() ? shape_str(t.shape()) : "(undefined)", t.defined() ? dtype_name(t.dtype()) : "",
             shape_str(out.shape()), dtype_name(out.dtype()));
    return t;
  } catch (const Error& e) {
    throw NoJvpError(fmt::format("forward AD: no tangent for {}: {}", op, e.what()));
  }
}

}  // namespace ag::fw
