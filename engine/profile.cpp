#include "engine/profile.h"

#include <sys/resource.h>

#include <algorithm>

#include "engine/autograd.h"
#include "engine/kernels/onednn.h"
#include "engine/storage.h"

namespace ag {

namespace {

long minor_page_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// The inner dimension K of out = a @ b from the stored shapes: a is (…, M, K) or, transposed,
// (…, K, M), and out (…, M, N); a 1-D a is (K).
int64_t inner_dim(const Shape& a, const Shape& out) {
  if (a.size() == 1) return a[0];
  const int64_t m = out.size() >= 2 ? out[out.size() - 2] : 1;
  return a[a.size() - 2] == m ? a.back() : a[a.size() - 2];
}

// The FLOPs of one forward of a product node (2 per multiply-add), from its inputs' shapes and its
// output's: matmul, linear (x, weight, bias, and linear_add's residual) and attention (q, k, v, or the packed
// projections). 0 for every other op.
double forward_flops(std::string_view name, const std::vector<Shape>& in, const Shape& out) {
  const auto out_numel = static_cast<double>(numel(out));
  if (name == "MatmulBackward" && in.size() == 2) return 2 * out_numel * static_cast<double>(inner_dim(in[0], out));
  if ((name == "LinearBackward" || name == "LinearReluDropoutBackward" || name == "LinearAddBackward") &&
      in.size() >= 2)
    return 2 * out_numel * static_cast<double>(in[1].back());
  if (name == "ScaledDotProductAttentionBackward" && in.size() == 3 && in[0].size() == 4) {
    const double scores = static_cast<double>(in[0][0] * in[0][1] * in[0][2] * in[1][2]);  // B·H·T·S
    return 2 * scores * static_cast<double>(in[0][3] + in[2][3]);                          // q kᵀ and W v
  }
  // The packed projections, qkv (N, L, 3E) or q (N, T, E) and kv (N, S, 2E): over the H heads of E/H,
  // q kᵀ and W v take N·T·S·E multiply-adds each, whatever H.
  if (name == "PackedAttentionBackward" && (in.size() == 1 || in.size() == 2) && in.front().size() == 3 &&
      in.back().size() == 3) {
    const Shape &q = in.front(), &kv = in.back();
    const int64_t E = in.size() == 1 ? q[2] / 3 : q[2];
    return 2 * static_cast<double>(q[0] * q[1] * kv[1]) * static_cast<double>(2 * E);
  }
  return 0;
}

double bytes_of(const Tensor& t) {
  return t.defined() ? static_cast<double>(t.numel() * static_cast<int64_t>(dtype_size(t.dtype()))) : 0;
}

}  // namespace

Profiler::Profiler()
    : page_faults_at_start_(minor_page_faults()),
      primitives_at_start_(onednn::primitives_created()),
      previous_forward_(set_forward_observer(this)),
      previous_backward_(set_backward_observer(this)) {
  settle();
}

Profiler::~Profiler() {
  set_forward_observer(previous_forward_);
  set_backward_observer(previous_backward_);
}

void Profiler::settle() {
  last_ = std::chrono::steady_clock::now();
  allocated_at_last_ = bytes_allocated_on_this_thread();
}

Profiler::Row& Profiler::charge(const std::string& op, double flops, double bytes_out) {
  const auto now = std::chrono::steady_clock::now();
  Row& row = rows_[op];
  row.op = op;
  ++row.calls;
  row.seconds += std::chrono::duration<double>(now - last_).count();
  row.flops += flops;
  row.bytes_out += bytes_out;
  row.bytes_allocated += static_cast<double>(bytes_allocated_on_this_thread() - allocated_at_last_);
  last_ = now;
  allocated_at_last_ = bytes_allocated_on_this_thread();
  return row;
}

void Profiler::node_recorded(const Node& node, const Tensor& output, std::span<const Tensor> inputs) {
  std::vector<Shape> shapes;
  for (const Tensor& t : inputs) shapes.push_back(t.defined() ? t.shape() : Shape{});
  std::string op(node.name);
  if (op.ends_with("Backward")) op.resize(op.size() - 8);  // the forward of "MatmulBackward": "Matmul"
  charge(op, forward_flops(node.name, shapes, output.shape()), bytes_of(output));
}

void Profiler::walk_started(const Node&) { charge("(before the backward walk)", 0, 0); }

void Profiler::node_ran(const Node& node, const Tensor&, std::span<const Tensor> grads, double seconds) {
  // The time since the last event, less the node's own: summing where paths met, scheduling.
  const double between = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_).count() - seconds;
  std::vector<Shape> shapes;
  for (const InputMeta& input : node.inputs) shapes.push_back(input.shape);
  double written = 0;
  for (const Tensor& g : grads) written += bytes_of(g);
  Row& row = charge(std::string(node.name), 2 * forward_flops(node.name, shapes, node.shape), written);
  row.seconds -= between;
  Row& walk = rows_["(backward walk: sums where paths meet)"];
  walk.op = "(backward walk: sums where paths meet)";
  walk.seconds += between;
}

void Profiler::walk_finished() { charge("(backward walk: sums where paths meet)", 0, 0); }

std::vector<Profiler::Row> Profiler::rows() const {
  std::vector<Row> rows;
  for (const auto& [op, row] : rows_) rows.push_back(row);
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.seconds > b.seconds; });
  return rows;
}

std::string Profiler::table(int64_t steps) const {
  const std::vector<Row> sorted = rows();
  double total = 0, flops = 0;
  for (const Row& row : sorted) total += row.seconds, flops += row.flops;
  const double per_step = 1.0 / static_cast<double>(std::max<int64_t>(steps, 1));
  std::string text = fmt::format("{:<40} {:>7} {:>7} {:>10} {:>8} {:>8} {:>10}\n", "op (forward; backward nodes)",
                                 "self %", "calls", "ms/step", "GFLOP/s", "GB/s", "MB alloc");
  for (const Row& row : sorted) {
    const double seconds = std::max(row.seconds, 1e-12);
    text += fmt::format("{:<40} {:>6.1f}% {:>7} {:>10.3f} {:>8} {:>8.1f} {:>10.1f}\n", row.op,
                        100 * row.seconds / std::max(total, 1e-12), row.calls / std::max<int64_t>(steps, 1),
                        1e3 * row.seconds * per_step,
                        row.flops > 0 ? fmt::format("{:.1f}", row.flops / seconds / 1e9) : "-",
                        row.bytes_out / seconds / 1e9, row.bytes_allocated * per_step / 1e6);
  }
  text += fmt::format("{:<40} {:>6.1f}% {:>7} {:>10.3f} {:>8.1f}\n", "total", 100.0, "", 1e3 * total * per_step,
                      flops / std::max(total, 1e-12) / 1e9);
  text +=
      fmt::format("page faults per step: {:.0f} (minor, the whole process); oneDNN primitives built per step: {:.1f}\n",
                  static_cast<double>(minor_page_faults() - page_faults_at_start_) * per_step,
                  static_cast<double>(onednn::primitives_created() - primitives_at_start_) * per_step);
  return text;
}

}  // namespace ag
