#include "engine/step_record.h"

#include <algorithm>
#include <cmath>

#include "engine/forward_ad.h"

namespace ag {

namespace {

// Counts of the finite values in kHistogramBins equal bins over [min, max].
std::vector<int64_t> histogram_of(const std::vector<double>& values, double min, double max) {
  std::vector<int64_t> counts(ValueSummary::kHistogramBins, 0);
  const double width = (max - min) / ValueSummary::kHistogramBins;
  for (double v : values) {
    if (!std::isfinite(v)) continue;
    const auto bin = width > 0 ? static_cast<int64_t>((v - min) / width) : 0;
    ++counts[static_cast<size_t>(std::clamp<int64_t>(bin, 0, ValueSummary::kHistogramBins - 1))];
  }
  return counts;
}

double seconds_between(std::chrono::steady_clock::time_point start, std::chrono::steady_clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

// What a saved tensor is to its node: its output, one of its inputs, or something the op made.
std::string saved_role(const Tensor& saved, const Tensor& output, std::span<const Tensor> inputs) {
  if (saved.impl() == output.impl()) return "output";
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i].defined() && saved.impl() == inputs[i].impl()) return fmt::format("input {}", i);
  return "other";
}

}  // namespace

ValueSummary summarize(const Tensor& t) {
  ValueSummary s;
  if (!t.defined()) return s;
  s.shape = t.shape();
  s.dtype = t.dtype();
  s.numel = t.numel();
  const std::vector<double> values = t.to_vector();
  double sum = 0, squares = 0;
  int64_t finite = 0;
  s.min = INFINITY;
  s.max = -INFINITY;
  for (double v : values) {
    if (std::isnan(v)) ++s.nan_count;
    if (std::isinf(v)) ++s.inf_count;
    if (!std::isfinite(v)) continue;
    ++finite;
    sum += v;
    squares += v * v;
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
  }
  if (finite == 0) s.min = s.max = 0;
  s.mean = finite > 0 ? sum / static_cast<double>(finite) : 0;
  s.norm = std::sqrt(squares);
  const int64_t kept = s.numel <= ValueSummary::kWholeValues ? s.numel : ValueSummary::kFirstValues;
  s.values.assign(values.begin(), values.begin() + kept);
  if (kept < s.numel) s.histogram = histogram_of(values, s.min, s.max);
  return s;
}

StepRecorder::StepRecorder()
    : previous_forward_(set_forward_observer(this)),
      previous_backward_(set_backward_observer(this)),
      last_record_(std::chrono::steady_clock::now()) {}

StepRecorder::~StepRecorder() {
  set_forward_observer(previous_forward_);
  set_backward_observer(previous_backward_);
}

const ForwardRecord* StepRecorder::forward(const Node& node) const {
  auto it = forward_.find(&node);
  return it == forward_.end() ? nullptr : &it->second;
}

const ValueSummary* StepRecorder::leaf_value(const Node& node) const {
  auto it = leaf_values_.find(&node);
  return it == leaf_values_.end() ? nullptr : &it->second;
}

const ValueSummary* StepRecorder::leaf_grad(const Node& node) const {
  auto it = leaf_grads_.find(&node);
  return it == leaf_grads_.end() ? nullptr : &it->second;
}

const ValueSummary* StepRecorder::leaf_tangent(const Node& node) const {
  auto it = leaf_tangents_.find(&node);
  return it == leaf_tangents_.end() ? nullptr : &it->second;
}

void StepRecorder::node_recorded(const Node& node, const Tensor& output, std::span<const Tensor> inputs) {
  const auto now = std::chrono::steady_clock::now();
  ForwardRecord record{summarize(output), {}, {}, seconds_between(last_record_, now)};
  if (const Tensor tangent = fw::tangent_of(output); tangent.defined()) record.tangent = summarize(tangent);
  for (const Tensor& input : inputs)
    if (input.defined() && input.is_leaf() && !tangents_read_.contains(input.impl()))
      if (const Tensor tangent = fw::tangent_of(input); tangent.defined())
        tangents_read_[input.impl()] = summarize(tangent);
  for (const SavedTensor& saved : node.saved) {
    if (!saved.data.defined()) continue;
    const Tensor& data = saved.output_of.expired() ? saved.data : output;  // the output is kept as an alias
    record.saved.push_back({saved_role(data, output, inputs), data.shape(), data.dtype(),
                            data.numel() * static_cast<int64_t>(dtype_size(data.dtype()))});
  }
  forward_[&node] = std::move(record);
  last_record_ = std::chrono::steady_clock::now();  // the summary's own time is not the next op's
}

void StepRecorder::walk_started(const Node& root) {
  walking_ = !walk_recorded_;
  if (!walking_) return;
  graph_ = capture_graph(root, names_);
  for (const GraphNode& n : graph_.nodes)
    if (n.is_leaf())
      if (std::shared_ptr<TensorImpl> leaf = n.node->leaf.lock()) {
        leaf_values_[n.node] = summarize(Tensor(leaf));
        if (auto read = tangents_read_.find(leaf.get()); read != tangents_read_.end())
          leaf_tangents_[n.node] = read->second;
      }
}

void StepRecorder::node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) {
  if (!walking_) return;
  BackwardRecord record{&node, summarize(grad), {}, seconds};
  for (size_t i = 0; i < grads.size(); ++i) {
    const bool sent = grads[i].defined() && node.next[i] != nullptr;
    record.sent.push_back(sent ? std::optional(summarize(grads[i])) : std::nullopt);
  }
  backward_.push_back(std::move(record));
}

void StepRecorder::gradients_met(const Node&, const Node&) {}  // the page adds up what each node received

void StepRecorder::walk_finished() {
  if (!walking_) return;
  for (const GraphNode& n : graph_.nodes)
    if (n.is_leaf())
      if (std::shared_ptr<TensorImpl> leaf = n.node->leaf.lock(); leaf && leaf->grad.defined())
        leaf_grads_[n.node] = summarize(leaf->grad);
  walking_ = false;
  walk_recorded_ = true;
}

}  // namespace ag
