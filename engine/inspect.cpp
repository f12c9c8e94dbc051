#include "engine/inspect.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ostream>

namespace ag {

namespace {
thread_local std::shared_ptr<const std::string> scope_path;
thread_local uint64_t node_sequence = 0;
thread_local bool anomaly_mode = false;
thread_local ForwardObserver* recording_observer = nullptr;
thread_local BackwardObserver* observer = nullptr;
}  // namespace

// --- Scopes ---------------------------------------------------------------------------------

ScopeGuard::ScopeGuard(std::string_view name) {
  if (name.empty()) return;
  previous_ = scope_path;
  scope_path =
      std::make_shared<const std::string>(previous_ ? *previous_ + "." + std::string(name) : std::string(name));
  pushed_ = true;
}

ScopeGuard::~ScopeGuard() {
  if (pushed_) scope_path = std::move(previous_);
}

const std::shared_ptr<const std::string>& current_scope() { return scope_path; }

std::string scope_of(const Node& node) { return node.scope ? *node.scope : "(root)"; }

std::string op_of(const Node& node) {
  if (!node.backward) return "leaf";  // AccumulateGrad, the one node with no backward (any name could be a Function's)
  std::string_view name = node.name;
  constexpr std::string_view suffix = "Backward";
  if (name.size() > suffix.size() && name.ends_with(suffix)) name.remove_suffix(suffix.size());
  std::string op;
  for (size_t i = 0; i < name.size(); ++i) {
    const auto c = static_cast<unsigned char>(name[i]);
    if (std::isupper(c) && i > 0) op += '_';
    op += static_cast<char>(std::tolower(c));
  }
  return node.properties.bf16 ? op + "[bf16]" : op;
}

uint64_t next_node_sequence() { return node_sequence++; }

void continue_node_sequence(uint64_t first) { node_sequence = std::max(node_sequence, first); }

// --- Anomaly mode ---------------------------------------------------------------------------

DetectAnomalyGuard::DetectAnomalyGuard(bool enabled) : previous_(anomaly_mode) { anomaly_mode = enabled; }
DetectAnomalyGuard::~DetectAnomalyGuard() { anomaly_mode = previous_; }

bool anomaly_detection_enabled() { return anomaly_mode; }

namespace {

// The first NaN or Inf of a floating tensor: its flat index and what it is; index -1 if none.
struct NonFinite {
  int64_t index = -1;
  const char* what = "";
};

enum class Look { nan, inf, either };

template <typename T>
NonFinite first_non_finite(const T* data, int64_t n, Look look) {
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(data[i]) && look != Look::inf) return {i, "NaN"};
    if (std::isinf(data[i]) && look != Look::nan) return {i, "Inf"};
  }
  return {};
}

NonFinite first_non_finite(const Tensor& t, Look look = Look::either) {
  if (!t.defined()) return {};
  if (t.dtype() == DType::f32) return first_non_finite(t.data<float>(), t.numel(), look);
  if (t.dtype() == DType::f64) return first_non_finite(t.data<double>(), t.numel(), look);
  return {};
}

// Did the op make an Inf itself? Not if an input already held one (it only passed it on), nor if it
// writes Inf on purpose (masked_fill, whose fill value -inf is how attention hides keys).
bool may_create_inf(const Node& node, std::span<const Tensor> inputs) {
  if (node.properties.writes_inf) return false;
  for (const Tensor& input : inputs)
    if (first_non_finite(input, Look::inf).index >= 0) return false;
  return true;
}

std::string input_shapes(const Node& node) {
  std::string shapes;
  for (const InputMeta& input : node.inputs) shapes += (shapes.empty() ? "" : ", ") + shape_str(input.shape);
  return shapes.empty() ? "none" : shapes;
}

}  // namespace

// "(16,2,2) finite, (2,2) holding NaN": where the non-finite values came from.
std::string describe_inputs(std::span<const Tensor> inputs) {
  std::string text;
  for (const Tensor& input : inputs) {
    if (!input.defined()) continue;
    const NonFinite bad = first_non_finite(input);
    text += (text.empty() ? "" : ", ") + shape_str(input.shape()) +
            (bad.index < 0 ? std::string(" finite") : std::string(" holding ") + bad.what);
  }
  return text.empty() ? "none" : text;
}

void check_forward_anomaly(const Node& node, const Tensor& output, std::span<const Tensor> inputs) {
  NonFinite bad = first_non_finite(output, Look::nan);
  if (bad.index < 0 && may_create_inf(node, inputs)) bad = first_non_finite(output, Look::inf);
  AG_CHECK(bad.index < 0,
           "anomaly detected in forward: {} in module scope {} produced {} at element {} of its output {}; its "
           "inputs: {}",
           op_of(node), scope_of(node), bad.what, bad.index, shape_str(output.shape()), describe_inputs(inputs));
}

void check_backward_anomaly(const Node& node, std::span<const Tensor> grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const NonFinite bad = first_non_finite(grads[i]);
    AG_CHECK(bad.index < 0,
             "anomaly detected in backward: the backward of {} (created in forward in module scope {}, inputs: {}) "
             "returned {} at element {} of the gradient for input {} {}",
             op_of(node), scope_of(node), input_shapes(node), bad.what, bad.index, i, shape_str(grads[i].shape()));
  }
}

// --- Forward observers ----------------------------------------------------------------------

ForwardObserver* set_forward_observer(ForwardObserver* next) {
  ForwardObserver* previous = recording_observer;
  recording_observer = next;
  return previous;
}

ForwardObserver* forward_observer() { return recording_observer; }

// --- Backward observers ---------------------------------------------------------------------

BackwardObserver* set_backward_observer(BackwardObserver* next) {
  BackwardObserver* previous = observer;
  observer = next;
  return previous;
}

BackwardObserver* backward_observer() { return observer; }

namespace {
template <typename T>
double sum_of_squares(const T* data, int64_t n) {
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(data[i]) * static_cast<double>(data[i]);
  return sum;
}
}  // namespace

double norm_of(const Tensor& t) {
  if (!t.defined()) return 0;
  AG_CHECK(is_floating(t.dtype()), "norm_of: expected a floating tensor, got {}", dtype_name(t.dtype()));
  return std::sqrt(t.dtype() == DType::f32 ? sum_of_squares(t.data<float>(), t.numel())
                                           : sum_of_squares(t.data<double>(), t.numel()));
}

BackwardTrace::BackwardTrace(std::ostream* out, int walks, ParameterNames names)
    : out_(out), walks_left_(walks), names_(std::move(names)), previous_(set_backward_observer(this)) {}

BackwardTrace::~BackwardTrace() {
  if (installed_) set_backward_observer(previous_);
}

int BackwardTrace::id_of(const Node& node) const {
  auto it = ids_.find(&node);
  return it == ids_.end() ? -1 : it->second;
}

void BackwardTrace::walk_started(const Node& root) {
  const Graph graph = capture_graph(root, names_);
  ids_ = graph.ids;
  walk_first_entry_ = entries_.size();
  if (out_ != nullptr)
    *out_ << fmt::format("backward trace: {} nodes from %{} {} (ids as in `attograd graph --format text`)\n",
                         graph.nodes.size(), id_of(root), op_of(root))
          << fmt::format("{:>5}  {:<28} {:<40} {:>10}  {:<30} {:>9}\n", "node", "op", "scope", "|grad in|",
                         "|grads out| per input", "time µs");
  walk_start_ = std::chrono::steady_clock::now();
}

void BackwardTrace::node_ran(const Node& node, const Tensor& grad, std::span<const Tensor> grads, double seconds) {
  Entry entry{id_of(node), op_of(node), scope_of(node), norm_of(grad), {}, seconds};
  if (node.backward == nullptr) {
    std::shared_ptr<TensorImpl> leaf = node.leaf.lock();
    auto name = leaf ? names_.find(leaf.get()) : names_.end();
    if (name != names_.end()) entry.scope = name->second;  // a parameter: its name says where it lives
  }
  std::string sent;
  for (size_t i = 0; i < grads.size(); ++i) {
    const bool defined = grads[i].defined() && node.next[i] != nullptr;
    entry.sent_norms.push_back(defined ? norm_of(grads[i]) : -1);
    sent += (i ? ", " : "") + (defined ? fmt::format("{:.3e}", entry.sent_norms.back()) : std::string("-"));
  }
  if (out_ != nullptr)
    *out_ << fmt::format("{:>5}  {:<28} {:<40} {:>10.3e}  {:<30} {:>9.1f}\n", fmt::format("%{}", entry.id), entry.op,
                         entry.scope, entry.grad_norm, grads.empty() ? "(accumulated into .grad)" : "[" + sent + "]",
                         seconds * 1e6);
  entries_.push_back(std::move(entry));
}

void BackwardTrace::gradients_met(const Node& from, const Node& into) {
  if (out_ != nullptr)
    *out_ << fmt::format("{:>5}  paths meet: the gradient from %{} is added to what %{} {} already received\n", "",
                         id_of(from), id_of(into), op_of(into));
}

void BackwardTrace::walk_finished() {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - walk_start_).count();
  walk_seconds_ += seconds;
  if (out_ != nullptr) *out_ << summary_of(walk_first_entry_, entries_.size(), seconds);
  if (walks_left_ > 0 && --walks_left_ == 0) {
    set_backward_observer(previous_);
    installed_ = false;
  }
}

std::string BackwardTrace::summary() const { return summary_of(0, entries_.size(), walk_seconds_); }

std::string BackwardTrace::summary_of(size_t begin, size_t end, double walk_seconds) const {
  struct Total {
    int count = 0;
    double seconds = 0;
  };
  std::map<std::string, Total> by_op;
  for (size_t i = begin; i < end; ++i) {
    by_op[entries_[i].op].count++;
    by_op[entries_[i].op].seconds += entries_[i].seconds;
  }
  std::vector<std::pair<std::string, Total>> rows(by_op.begin(), by_op.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double nodes_seconds = 0;
  for (const auto& row : rows) nodes_seconds += row.second.seconds;
  std::string text = fmt::format(
      "backward summary: {} nodes ran in {:.1f} µs of the {:.1f} µs walk (the rest: scheduling, summing where "
      "paths meet, tracing)\n{:<28} {:>6} {:>10} {:>8}\n",
      end - begin, nodes_seconds * 1e6, walk_seconds * 1e6, "op", "count", "time µs", "share");
  for (const auto& [op, total] : rows)
    text += fmt::format("{:<28} {:>6} {:>10.1f} {:>7.1f}%\n", op, total.count, total.seconds * 1e6,
                        nodes_seconds > 0 ? 100 * total.seconds / nodes_seconds : 0.0);
  return text;
}

}  // namespace ag
