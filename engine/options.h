// The ops' option types, apart from the ops: a header that only stores a choice (an nn layer's
// GeluApproximation, a loss's Reduction) includes this and not the family, so adding an op to
// the family does not rebuild it. Kernels read them too (a loss kernel's Reduction), so they sit
// at the engine's level, below both ops/ and kernels/.
#pragma once

namespace ag {

enum class GeluApproximation { none, tanh };  // none: x·Φ(x) with erf; tanh: the GPT-2 form

enum class Reduction { none, mean, sum };

// The activation a fused product applies to its result (linear's epilogue); gelu is GELU's erf
// form, x·Φ(x).
enum class Activation { none, relu, gelu };

// What a query whose keys are all masked gets: Note [fully masked rows] in engine/ops/attention.h.
enum class MaskedRows { nan, zero };

// How scaled_dot_product_attention computes: Note [streaming attention] in engine/ops/attention.h.
enum class AttentionKernel { automatic, streaming, materialising };

}  // namespace ag
