#include "engine/autocast.h"

#include <unordered_map>

#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/index.h"
#include "engine/ops/shape.h"

namespace ag {

namespace {

thread_local int autocast_depth = 0;

// A tensor's bf16 copy and the version it was made from: held for a weight (a leaf that requires
// grad), which every step's forward reads again; only watched for an activation, whose copy lives
// as long as the nodes that saved it (the projections of one input share it, not keep it).
struct CachedCast {
  std::weak_ptr<TensorImpl> source;
  uint64_t version = 0;
  Tensor held;
  std::weak_ptr<TensorImpl> watched;
};
thread_local std::unordered_map<const TensorImpl*, CachedCast> cast_cache;  // cleared by the outermost guard
thread_local size_t entries_at_last_sweep = 0;

// Drops the entries whose source or copy is gone, whenever the cache has doubled since the last sweep.
void sweep_cast_cache() {
  if (cast_cache.size() < 2 * entries_at_last_sweep + 64) return;
  std::erase_if(cast_cache, [](const auto& entry) {
    return entry.second.source.expired() || (!entry.second.held.defined() && entry.second.watched.expired());
  });
  entries_at_last_sweep = cast_cache.size();
}

}  // namespace

AutocastGuard::AutocastGuard(bool enabled) : enabled_(enabled) {
  if (!enabled_) return;
  AG_CHECK(cpu_has_avx512_bf16(),
           "bf16 mixed precision needs a CPU with AVX512_BF16 (lscpu flag avx512_bf16), which this CPU lacks: "
           "emulated bf16 products would be slower than f32; use f32 precision here");
  ++autocast_depth;
}

AutocastGuard::~AutocastGuard() {
  if (enabled_ && --autocast_depth == 0) {
    cast_cache.clear();
    entries_at_last_sweep = 0;
  }
}

bool autocast_enabled() { return autocast_depth > 0; }

bool autocast_products(const Tensor& a, const Tensor& b) {
  return autocast_depth > 0 && a.dtype() == DType::f32 && b.dtype() == DType::f32;
}

void attach_bf16_copy(const Tensor& x, const Tensor& copy) {
  AG_CHECK(x.dtype() == DType::f32 && copy.dtype() == DType::bf16 && copy.shape() == x.shape(),
           "attach_bf16_copy: expected an f32 tensor and a bf16 copy of its shape, got {} {} and {} {}",
           dtype_name(x.dtype()), shape_str(x.shape()), dtype_name(copy.dtype()), shape_str(copy.shape()));
  TensorImpl& impl = *x.impl();
  impl.bf16_copy = copy.impl_ptr();
  impl.bf16_copy_version = x.version();
}

Tensor weight_bf16_copy_to_fill(const Tensor& x) {
  if (autocast_depth == 0 || x.dtype() != DType::f32 || !x.is_leaf() || !x.requires_grad()) return {};
  const auto found = cast_cache.find(x.impl());
  if (found == cast_cache.end() || found->second.source.lock() != x.impl_ptr()) return {};
  const Tensor& held = found->second.held;
  if (!held.defined() || held.shape() != x.shape()) return {};
  // A node of a graph still alive may have saved the old copy (or a view of it): then a new one.
  const bool only_the_cache_holds = held.impl_ptr().use_count() == 1 && held.impl()->storage.use_count() == 1;
  return only_the_cache_holds ? held : empty(x.shape(), DType::bf16);
}

void keep_weight_bf16_copy(const Tensor& x, const Tensor& copy) {
  AG_CHECK(x.dtype() == DType::f32 && copy.dtype() == DType::bf16 && copy.shape() == x.shape(),
           "keep_weight_bf16_copy: expected an f32 weight and a bf16 copy of its shape, got {} {} and {} {}",
           dtype_name(x.dtype()), shape_str(x.shape()), dtype_name(copy.dtype()), shape_str(copy.shape()));
  cast_cache[x.impl()] = {x.impl_ptr(), x.version(), copy, {}};
}

std::vector<std::pair<Tensor, Tensor>> kept_weight_bf16_copies() {
  std::vector<std::pair<Tensor, Tensor>> kept;
  for (const auto& [impl, entry] : cast_cache) {
    const Tensor weight(entry.source.lock());
    if (weight.defined() && entry.held.defined() && entry.version == weight.version())
      kept.emplace_back(weight, entry.held);
  }
  return kept;
}

namespace {

bool keeps_bf16_copies(const Tensor& x) { return autocast_depth > 0 && !grad_enabled() && x.dtype() == DType::f32; }

}  // namespace

Tensor cat_keeping_bf16_copy(const std::vector<Tensor>& parts, int64_t dim) {
  Tensor out = cat(parts, dim);
  if (!keeps_bf16_copies(out)) return out;
  std::vector<Tensor> copies;
  for (const Tensor& part : parts) copies.push_back(autocast_operand(part));
  attach_bf16_copy(out, cat(copies, dim));
  return out;
}

Tensor index_select_keeping_bf16_copy(const Tensor& x, int64_t dim, const Tensor& index) {
  Tensor out = index_select(x, dim, index);
  if (keeps_bf16_copies(out)) attach_bf16_copy(out, index_select(autocast_operand(x), dim, index));
  return out;
}

Tensor autocast_operand(const Tensor& x) {
  if (autocast_depth == 0) return to(x, DType::bf16);
  const bool weight = x.is_leaf() && x.requires_grad();
  const TensorImpl& impl = *x.impl();
  if (!weight && impl.bf16_copy && impl.bf16_copy_version == x.version()) return Tensor(impl.bf16_copy);
  // Without grad mode no node keeps an activation's copy alive, so the tensor itself keeps it.
  if (!weight && keeps_bf16_copies(x)) {
    Tensor copy = to(x, DType::bf16);
    attach_bf16_copy(x, copy);
    return copy;
  }
  CachedCast& entry = cast_cache[x.impl()];
  if (entry.source.lock() == x.impl_ptr() && entry.version == x.version()) {
    if (entry.held.defined() && entry.held.shape() == x.shape()) return entry.held;
    if (std::shared_ptr<TensorImpl> copy = entry.watched.lock(); copy && !weight) return Tensor(std::move(copy));
  }
  Tensor copy = to(x, DType::bf16);
  entry = {x.impl_ptr(), x.version(), weight ? copy : Tensor(), weight ? nullptr : copy.impl_ptr()};
  sweep_cast_cache();
  return copy;
}

}  // namespace ag
