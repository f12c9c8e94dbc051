#include "engine/registry.h"

#include <algorithm>
#include <cmath>

namespace ag {

Tensor draw(const Shape& shape, const Domain& domain, Generator& gen, DType dtype) {
  std::vector<double> values;
  values.reserve(static_cast<size_t>(numel(shape)));
  auto near = [&](double v, double other) { return std::abs(v - other) < domain.kink_margin; };
  while (static_cast<int64_t>(values.size()) < numel(shape)) {
    const double v = domain.low + (domain.high - domain.low) * gen.uniform();
    if (std::any_of(domain.kinks.begin(), domain.kinks.end(), [&](double k) { return near(v, k); })) continue;
    if (domain.distinct && std::any_of(values.begin(), values.end(), [&](double o) { return near(v, o); })) continue;
    values.push_back(v);
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

void Registry::add(OpEntry entry) {
  AG_CHECK(std::none_of(ops_.begin(), ops_.end(), [&](const OpEntry& e) { return e.name == entry.name; }),
           "registry: op '{}' is registered twice", entry.name);
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

const Registry& Registry::global() {
  static const Registry registry = [] {
    Registry r;
    register_elementwise_ops(r);
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
    return r;
  }();
  return registry;
}

}  // namespace ag
