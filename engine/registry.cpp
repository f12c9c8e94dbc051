#include "engine/registry.h"

#include <algorithm>
#include <cmath>

namespace ag {

namespace {

bool near_a_kink(const Domain& domain, double low, double high) {
  return std::any_of(domain.kinks.begin(), domain.kinks.end(),
                     [&](double k) { return k > low - domain.kink_margin && k < high + domain.kink_margin; });
}

// `count` values at least kink_margin apart and from every kink, by construction (drawing and
// rejecting close ones can take forever when they must nearly fill the domain): the domain is cut
// into slots kink_margin wide or wider, `count` slots away from kinks are chosen at random, and
// each gets a value whose distance to the next slot is at least kink_margin.
std::vector<double> draw_distinct(int64_t count, const Domain& domain, Generator& gen) {
  const auto slots = static_cast<int64_t>(std::floor((domain.high - domain.low) / domain.kink_margin));
  const double width = (domain.high - domain.low) / static_cast<double>(slots);
  std::vector<double> starts;
  for (int64_t i = 0; i < slots; ++i) {
    const double start = domain.low + static_cast<double>(i) * width;
    if (!near_a_kink(domain, start, start + width)) starts.push_back(start);
  }
  AG_CHECK(count <= static_cast<int64_t>(starts.size()),
           "cannot draw {} values at least {} apart in [{}, {}] away from the kinks: at most {} fit (smaller shapes?)",
           count, domain.kink_margin, domain.low, domain.high, starts.size());
  std::vector<double> values;
  for (int64_t i = 0; i < count; ++i) {  // a partial Fisher-Yates shuffle of the slots
    const auto pick = i + static_cast<int64_t>(gen.uniform() * static_cast<double>(starts.size() - i));
    std::swap(starts[i], starts[std::min<int64_t>(pick, static_cast<int64_t>(starts.size()) - 1)]);
    values.push_back(starts[i] + (width - domain.kink_margin) * gen.uniform());
  }
  return values;
}

}  // namespace

Tensor draw(const Shape& shape, const Domain& domain, Generator& gen, DType dtype) {
  const int64_t count = empty(shape, dtype).numel();  // throws first if it would not fit in memory
  if (domain.distinct) return tensor(draw_distinct(count, domain, gen), shape, dtype);
  std::vector<double> values;
  while (static_cast<int64_t>(values.size()) < count) {
    const double v = domain.low + (domain.high - domain.low) * gen.uniform();
    if (!near_a_kink(domain, v, v)) values.push_back(v);
  }
  return tensor(values, shape, dtype);
}

InputMaker real_inputs(Domain domain) {
  return [domain](const std::vector<Shape>& shapes, Generator& gen, DType dtype) {
    std::vector<Tensor> inputs;
    for (const Shape& shape : shapes) inputs.push_back(draw(shape, domain, gen, dtype).requires_grad_());
    return inputs;
  };
}

void UnaryRegistrar::add(std::string name, std::function<Tensor(const Tensor&)> op, Domain domain,
                         std::string torch) const {
  registry_.add({.name = std::move(name),
                 .fn = [op = std::move(op)](const auto& in) { return op(in[0]); },
                 .make_inputs = real_inputs(domain),
                 .shape_sets = shapes,
                 .torch = {std::move(torch), {domain}}});
}

void Registry::add(OpEntry entry) {
  AG_CHECK(std::none_of(ops_.begin(), ops_.end(), [&](const OpEntry& e) { return e.name == entry.name; }),
           "registry: op '{}' is registered twice", entry.name);
  AG_CHECK(!entry.name.empty(), "registry: an op without a name");
  AG_CHECK(entry.fn && entry.make_inputs,
           "registry: op '{}' needs both fn and make_inputs (real_inputs() for one "
           "floating input per shape)",
           entry.name);
  AG_CHECK(!entry.shape_sets.empty(), "registry: op '{}' has no shape sets", entry.name);
  ops_.push_back(std::move(entry));
}

const OpEntry& Registry::find(const std::string& name) const {
  for (const OpEntry& entry : ops_)
    if (entry.name == name) return entry;
  std::string names;
  for (const OpEntry& entry : ops_) names += (names.empty() ? "" : ", ") + entry.name;
  fail("registry: no op named '{}'; registered ops: {}", name, names);
}

namespace {

Registry& global_registry() {
  static Registry registry = [] {
    Registry r;
    register_arithmetic_ops(r);
    register_pointwise_ops(r);
    register_reduce_ops(r);
    register_shape_ops(r);
    register_index_ops(r);
    register_mask_ops(r);
    register_matmul_ops(r);
    register_softmax_ops(r);
    register_dropout_ops(r);
    register_norm_ops(r);
    register_loss_ops(r);
    register_attention_ops(r);
    register_packed_attention_ops(r);
    return r;
  }();
  return registry;
}

}  // namespace

const Registry& Registry::global() { return global_registry(); }

void register_op(OpEntry entry) { global_registry().add(std::move(entry)); }

}  // namespace ag
