// Forward mode (torch.autograd.forward_ad): dual tensors carry a tangent beside their value, and
// every op computes its output's tangent as it runs (a Jacobian–vector product), with no tape.
//
//   ag::fw::DualLevel level;
//   ag::Tensor x = ag::fw::make_dual(primal, tangent);
//   ag::Tensor y = f(x);
//   ag::Tensor jv = ag::fw::unpack_dual(y).tangent;  // J_f(primal) · tangent
//
// An op states its JVP beside its VJP (JvpFn, given to record()); an op that gives none gets the
// one its VJP implies: the VJP is linear in the gradient g, so J·t = ∂/∂g ⟨VJPᵀ(g), t⟩, one
// reverse pass through the VJP's own recorded ops (Note [the JVP from the VJP] in forward_ad.cpp).
// An op whose VJP cannot be differentiated names itself in an ag::Error when a dual reaches it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "engine/error.h"
#include "engine/tensor.h"

namespace ag {

struct BackwardContext;
using BackwardFn = std::function<std::vector<Tensor>(const BackwardContext&)>;

namespace fw {

// A dual reached an op that cannot give its output a tangent (the message names the op and why).
class NoJvpError : public Error {
 public:
  using Error::Error;
};

namespace detail {
extern constinit thread_local uint64_t current_level;  // 0: no level is active
}  // namespace detail

// True while a DualLevel lives on this thread: the one test the ops pay when none does.
inline bool level_active() { return detail::current_level != 0; }

// The scope of forward-mode tangents. Tangents made under it are dropped when it ends (a tensor's
// tangent belongs to one level). One level at a time per thread.
class DualLevel {
 public:
  DualLevel();
  ~DualLevel();
  DualLevel(const DualLevel&) = delete;
  DualLevel& operator=(const DualLevel&) = delete;
};

// Suspends the active level (if any) while it lives: ops carry no tangents.
class SuspendLevel {
 public:
  SuspendLevel();
  ~SuspendLevel();
  SuspendLevel(const SuspendLevel&) = delete;
  SuspendLevel& operator=(const SuspendLevel&) = delete;

 private:
  uint64_t previous_;
};

// A dual tensor: an alias of `primal` (its reverse-mode graph kept) whose tangent is `tangent`
// (the same shape and dtype, floating). Needs an active DualLevel.
Tensor make_dual(const Tensor& primal, const Tensor& tangent);

struct Unpacked {
  Tensor primal;   // an alias of the dual without its tangent (its reverse-mode graph kept)
  Tensor tangent;  // undefined where the tensor carries none at the active level
};
Unpacked unpack_dual(const Tensor& dual);

// The tangent `t` carries at the active level; undefined if none.
Tensor tangent_of(const Tensor& t);
bool carries_tangent(std::span<const Tensor> tensors);

// What an op's JVP receives: per input its tangent (zeros where the input carries none, undefined
// where the input is undefined or not floating), the tensors its node saves, and its output.
struct JvpContext {
  const std::vector<Tensor>& tangents;
  std::span<const Tensor> saved;
  const Tensor& out;
};
// Returns the output's tangent, of the output's shape.
using JvpFn = std::function<Tensor(const JvpContext&)>;

// The tangent of `out`, computed by `jvp`, or, if it is empty, from `backward`
// (Note [the JVP from the VJP]). Throws, naming the op, if neither can give one.
Tensor output_tangent(std::string_view op, const Tensor& out, std::span<const Tensor> inputs,
                      std::span<const Tensor> saved, const BackwardFn& backward, const JvpFn& jvp);

// Sets t's tangent at the active level (checked against t's shape and dtype, naming `op`).
void set_tangent(const Tensor& t, const Tensor& tangent, std::string_view op);

// A new handle on x's memory with x's tangent and no graph (detach() drops the tangent, as PyTorch's).
Tensor alias_keeping_tangent(const Tensor& x);

}  // namespace fw
}  // namespace ag
