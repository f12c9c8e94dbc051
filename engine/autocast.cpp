#include "engine/autocast.h"

#include <unordered_map>

#include "engine/kernels/bf16.h"
#include "engine/ops/arithmetic.h"

namespace ag {

namespace {

thread_local int autocast_depth = 0;

// A weight's bf16 copy and the version it was made from.
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  uint64_t version = 0;
  Tensor copy;
};
thread_local std::unordered_map<const TensorImpl*, CachedCast> cast_cache;  // cleared by the outermost guard

}  // namespace

AutocastGuard::AutocastGuard(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  AG_CHECK(cpu_has_avx512_bf16(),
           "bf16 mixed precision needs a CPU with AVX512_BF16 (lscpu flag avx512_bf16), which this CPU lacks: "
           "emulated bf16 products would be slower than f32; use f32 precision here");
  ++autocast_depth;
}

AutocastGuard::~AutocastGuard() {
  if (enabled_ && --autocast_depth == 0) cast_cache.clear();
}

bool autocast_enabled() { return autocast_depth > 0; }

bool autocast_products(const Tensor& a, const Tensor& b) {
  return autocast_depth > 0 && a.dtype() == DType::f32 && b.dtype() == DType::f32;
}

Tensor autocast_operand(const Tensor& x) {
  if (!(x.is_leaf() && x.requires_grad()) || autocast_depth == 0) return to(x, DType::bf16);
  CachedCast& entry = cast_cache[x.impl()];
  if (entry.source.lock() != x.impl_ptr() || entry.version != x.version() || !entry.copy.defined() ||
      entry.copy.shape() != x.shape())
    entry = {x.impl_ptr(), x.version(), to(x, DType::bf16)};
  return entry.copy;
}

}  // namespace ag
