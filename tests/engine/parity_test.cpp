// The differential suite against PyTorch (issue 15). tools/golden/parity.py draws random cases for
// every registered op (random shapes, attributes, masks with ±inf fills, chains whose gradients
// meet) and stores PyTorch 1.13's inputs, outputs and gradients of Σ out ⊙ w in f64, plus its f32
// results where attograd runs f32 on oneDNN. Every case is replayed here:
//   f64: |attograd - torch| ≤ 1e-10 · max(|torch|, 1e-3 · the tensor's largest magnitude);
//   f32: attograd's error against torch's f64, measured the same way, ≤ 4 × torch f32's own.
// NaN must meet NaN and ±inf the same infinity. A registered op without cases fails the suite,
// unless its registry entry says why PyTorch has nothing to compare it with (differs_from_pytorch).
// A "first_order" case compares an op's first-order gradient made with create_graph, and the
// gradients of that: the second order. A "jvp" case compares the tangent forward mode gives another
// case's output with torch.autograd.forward_ad's (of a first_order case: forward-over-reverse).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/forward_ad.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/dropout.h"
#include "engine/ops/index.h"
#include "engine/ops/loss.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "engine/registry.h"
#include "engine/safetensors.h"

namespace ag {
namespace {

using json = nlohmann::json;
using Inputs = std::vector<Tensor>;
using Call = std::function<Tensor(const Inputs&, const json&)>;

double number(const json& j) { return j.is_string() ? std::stod(j.get<std::string>()) : j.get<double>(); }
std::vector<int64_t> ints(const json& j) { return j.get<std::vector<int64_t>>(); }

Reduction reduction(const json& j) {
  const std::string r = j.get<std::string>();
  return r == "none" ? Reduction::none : r == "sum" ? Reduction::sum : Reduction::mean;
}

// The registry's form of split/chunk: each piece scaled by its position, then put back together.
Tensor scaled_cat(std::vector<Tensor> pieces, int64_t dim) {
  for (size_t k = 0; k < pieces.size(); ++k) pieces[k] = mul(pieces[k], static_cast<double>(k + 1));
  return cat(pieces, dim);
}

AttentionKernel kernel(const json& a) {
  const std::string k = a.value("kernel", "automatic");
  return k == "streaming"       ? AttentionKernel::streaming
         : k == "materialising" ? AttentionKernel::materialising
                                : AttentionKernel::automatic;
}

Tensor sdpa(const Inputs& in, const json& a) {
  AttentionOptions o{.is_causal = a["causal"].get<bool>(),
                     .masked_rows = a["zero_rows"].get<bool>() ? MaskedRows::zero : MaskedRows::nan,
                     .kernel = kernel(a)};
  size_t next = 3;
  if (a["attn_mask"].get<std::string>() != "none") o.attn_mask = in[next++];
  if (a["padding"].get<bool>()) o.key_padding_mask = in[next++];
  return scaled_dot_product_attention(in[0], in[1], in[2], o).output;
}

// One step of a chain: ["u", name, a, 0] or ["b", name, a, b] over the pool of values so far.
Tensor chain_step(const json& step, const std::vector<Tensor>& pool) {
  const std::string name = step[1].get<std::string>();
  const Tensor& x = pool[step[2].get<size_t>()];
  const Tensor& y = pool[step[3].get<size_t>()];
  if (name == "add") return add(x, y);
  if (name == "sub") return sub(x, y);
  if (name == "mul") return mul(x, y);
  if (name == "tanh") return tanh(x);
  if (name == "sigmoid") return sigmoid(x);
  if (name == "exp_neg_sq") return exp(neg(mul(x, x)));
  if (name == "neg") return neg(x);
  if (name == "softmax") return softmax(x, -1);
  if (name == "log_softmax") return log_softmax(x, -1);
  if (name == "gelu") return gelu(x);
  if (name == "sum_keepdim") return sum(x, {-1}, true);
  if (name == "mean0") return mean(x, {0}, true);
  if (name == "transpose_mm") return mul(matmul(matmul(x, x, false, true), x), 0.25);
  throw Error("parity: unknown chain step " + name);
}

Tensor chain(const Inputs& in, const json& a) {
  std::vector<Tensor> pool = in;
  for (const json& step : a["steps"]) pool.push_back(chain_step(step, pool));
  return pool.back();
}

const std::map<std::string, Call>& calls();

// A call's first-order gradient as a function (parity.py's first_order): the gradients of
// Σ out ⊙ u, u the last input, with respect to the call's inputs that require grad, made with
// create_graph, flattened and joined; the replay's backward then gives the second order.
Tensor first_order(const Inputs& in, const json& a) {
  const Inputs inputs(in.begin(), in.end() - 1);
  const Tensor out = calls().at(a["of"])(inputs, a);
  std::vector<Tensor> wrt, flat;
  for (const Tensor& t : inputs)
    if (t.requires_grad()) wrt.push_back(t);
  for (const Tensor& g : grad({out}, wrt, {in.back()}, /*create_graph=*/true)) flat.push_back(flatten(g));
  return cat(flat, 0);
}

// A case's call as the case of a "jvp" case makes it (a["of"], with a["attrs"]).
Tensor call_of(const Inputs& in, const json& a) {
  const std::string of = a["of"];
  return of == "registry" ? Registry::global().find(a["op"]).fn(in) : calls().at(of)(in, a["attrs"]);
}

// A call's JVP (parity.py's jvp_of): the tangent of its output by forward mode, the inputs after the
// call's own being the tangents of those a["tangent_of"] lists (which require grad as a["requires"]
// says, so that a first_order call's gradients carry tangents: forward-over-reverse).
Tensor jvp(const Inputs& in, const json& a) {
  const size_t n = a["inputs"];
  const std::vector<bool> requiring = a["requires"];
  Inputs primals(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
  const fw::DualLevel level;
  size_t next = n;
  for (const size_t j : a["tangent_of"].get<std::vector<size_t>>())
    primals[j] = fw::make_dual(primals[j].detach().requires_grad_(requiring[j]), in[next++]);
  const Tensor out = call_of(primals, a);
  const Tensor tangent = fw::tangent_of(out);
  return tangent.defined() ? tangent.detach() : zeros_like(out);
}

// The calls with random attributes; "registry" runs the registry entry as it is.
const std::map<std::string, Call>& calls() {
  static const std::map<std::string, Call> table = {
      {"add_scalar", [](const Inputs& in, const json& a) { return add(in[0], number(a["s"])); }},
      {"mul_scalar", [](const Inputs& in, const json& a) { return mul(in[0], number(a["s"])); }},
      {"rdiv_scalar", [](const Inputs& in, const json& a) { return div(number(a["s"]), in[0]); }},
      {"pow", [](const Inputs& in, const json& a) { return pow(in[0], number(a["p"])); }},
      {"clamp", [](const Inputs& in, const json& a) { return clamp(in[0], number(a["min"]), number(a["max"])); }},
      {"sum_dims", [](const Inputs& in, const json& a) { return sum(in[0], ints(a["dims"]), a["keepdim"]); }},
      {"mean_dims", [](const Inputs& in, const json& a) { return mean(in[0], ints(a["dims"]), a["keepdim"]); }},
      {"max_dim", [](const Inputs& in, const json& a) { return max(in[0], a["dim"], a["keepdim"]); }},
      {"min_dim", [](const Inputs& in, const json& a) { return min(in[0], a["dim"], a["keepdim"]); }},
      {"broadcast_to", [](const Inputs& in, const json& a) { return broadcast_to(in[0], ints(a["shape"])); }},
      {"sum_to", [](const Inputs& in, const json& a) { return sum_to(in[0], ints(a["shape"])); }},
      {"reshape", [](const Inputs& in, const json& a) { return reshape(in[0], ints(a["shape"])); }},
      {"flatten", [](const Inputs& in, const json& a) { return flatten(in[0], a["start"], a["end"]); }},
      {"unsqueeze", [](const Inputs& in, const json& a) { return unsqueeze(in[0], a["dim"]); }},
      {"transpose", [](const Inputs& in, const json& a) { return transpose(in[0], a["dim0"], a["dim1"]); }},
      {"permute", [](const Inputs& in, const json& a) { return permute(in[0], ints(a["dims"])); }},
      {"cat", [](const Inputs& in, const json& a) { return cat(in, a["dim"]); }},
      {"stack", [](const Inputs& in, const json& a) { return stack(in, a["dim"]); }},
      {"split",
       [](const Inputs& in, const json& a) { return scaled_cat(split(in[0], a["size"], a["dim"]), a["dim"]); }},
      {"chunk",
       [](const Inputs& in, const json& a) { return scaled_cat(chunk(in[0], a["chunks"], a["dim"]), a["dim"]); }},
      {"slice",
       [](const Inputs& in, const json& a) { return slice(in[0], a["dim"], a["start"], a["end"], a["step"]); }},
      {"narrow", [](const Inputs& in, const json& a) { return narrow(in[0], a["dim"], a["start"], a["length"]); }},
      {"index_select", [](const Inputs& in, const json& a) { return index_select(in[0], a["dim"], in[1]); }},
      {"embedding",
       [](const Inputs& in, const json& a) {
         const json& pad = a["padding_idx"];
         return embedding(in[0], in[1], pad.is_null() ? std::nullopt : std::optional<int64_t>(pad.get<int64_t>()));
       }},
      {"masked_fill", [](const Inputs& in, const json& a) { return masked_fill(in[0], in[1], number(a["value"])); }},
      {"triu", [](const Inputs& in, const json& a) { return triu(in[0], a["diagonal"]); }},
      {"tril", [](const Inputs& in, const json& a) { return tril(in[0], a["diagonal"]); }},
      {"matmul", [](const Inputs& in, const json& a) { return matmul(in[0], in[1], a["ta"], a["tb"]); }},
      {"softmax",
       [](const Inputs& in, const json& a) {
         return a["log"].get<bool>() ? log_softmax(in[0], a["dim"]) : softmax(in[0], a["dim"]);
       }},
      {"layer_norm",
       [](const Inputs& in, const json& a) {
         const int64_t k = a["normalized"];
         const Shape normalized(in[0].shape().end() - k, in[0].shape().end());
         return layer_norm(in[0], normalized, in.size() > 1 ? in[1] : Tensor(), in.size() > 2 ? in[2] : Tensor(),
                           number(a["eps"]));
       }},
      {"mse_loss", [](const Inputs& in, const json& a) { return mse_loss(in[0], in[1], reduction(a["reduction"])); }},
      {"bce_with_logits",
       [](const Inputs& in, const json& a) {
         return binary_cross_entropy_with_logits(in[0], in[1], reduction(a["reduction"]));
       }},
      {"cross_entropy",
       [](const Inputs& in, const json& a) {
         return cross_entropy(in[0], in[1], a["ignore_index"], reduction(a["reduction"]),
                              a.value("label_smoothing", 0.0));
       }},
      {"sdpa", sdpa},
      {"dropout",
       [](const Inputs& in, const json& a) { return dropout(in[0], number(a["p"]), a["training"].get<bool>()); }},
      {"chain", chain},
      {"first_order", first_order},
      {"jvp", jvp},
  };
  return table;
}

// The error of `actual` against the f64 reference, relative to max(|ref|, 1e-3 · max |ref|); NaN
// where they disagree on which elements are NaN or infinite (or their shapes differ).
double relative_error(const Tensor& actual, const Tensor& reference) {
  if (!actual.defined() || actual.shape() != reference.shape()) return NAN;
  const std::vector<double> a = actual.to_vector(), e = reference.to_vector();
  double largest = 0;
  for (double v : e)
    if (std::isfinite(v)) largest = std::max(largest, std::abs(v));
  const double floor = std::max(1e-3 * largest, 1e-300);
  double worst = 0;
  for (size_t i = 0; i < e.size(); ++i) {
    if (std::isnan(e[i]) || std::isinf(e[i])) {
      if (!(std::isnan(e[i]) ? std::isnan(a[i]) : a[i] == e[i])) return NAN;
      continue;
    }
    worst = std::max(worst, std::abs(a[i] - e[i]) / std::max(std::abs(e[i]), floor));
    if (std::isnan(a[i])) return NAN;
  }
  return worst;
}

struct Golden {
  std::map<std::string, Tensor> tensors;
  json cases;
  const Tensor& operator[](const std::string& key) const {
    auto it = tensors.find(key);
    if (it == tensors.end()) throw Error("parity: the golden file has no tensor '" + key + "'");
    return it->second;
  }
};

const Golden& golden() {
  static const Golden g = [] {
    const SafetensorsFile file =
        load_safetensors(std::string(ATTOGRAD_SOURCE_DIR) + "/tests/golden/parity.safetensors");
    Golden out;
    for (const auto& [name, t] : file.tensors) out.tensors[name] = t;
    out.cases = json::parse(file.metadata.at("cases"));
    return out;
  }();
  return g;
}

// The case's output and the gradients of Σ out ⊙ w for its differentiable inputs, in `dtype`.
std::vector<Tensor> replay(size_t n, const json& c, DType dtype) {
  const std::string prefix = std::to_string(n) + ".";
  const std::vector<bool> grads = c["grads"];
  Inputs in;
  for (size_t j = 0; j < grads.size(); ++j) {
    Tensor t = golden()[prefix + "in" + std::to_string(j)];
    if (is_floating(t.dtype())) t = clone(to(t, dtype));
    if (grads[j]) t.requires_grad_();
    in.push_back(t);
  }
  const std::string call = c["call"];
  const Tensor out = call == "registry" ? Registry::global().find(c["op"]).fn(in) : calls().at(call)(in, c["attrs"]);
  std::vector<Tensor> results{out.detach()};
  if (out.requires_grad()) out.backward(to(golden()[prefix + "w"], dtype));
  for (size_t j = 0; j < grads.size(); ++j)
    if (grads[j]) results.push_back(in[j].grad().defined() ? in[j].grad() : zeros(in[j].shape(), dtype));
  return results;
}

// The references of replay's results: "out", then "grad<j>" (f64) or "out32", "grad32_<j>".
std::vector<Tensor> references(size_t n, const json& c, bool f32) {
  const std::string prefix = std::to_string(n) + ".";
  std::vector<Tensor> refs{golden()[prefix + (f32 ? "out32" : "out")]};
  const std::vector<bool> grads = c["grads"];
  for (size_t j = 0; j < grads.size(); ++j)
    if (grads[j]) refs.push_back(golden()[prefix + (f32 ? "grad32_" : "grad") + std::to_string(j)]);
  return refs;
}

std::string what(size_t k) { return k == 0 ? "output" : "gradient " + std::to_string(k - 1); }

struct Worst {
  double error = 0;
  std::string where;
  void update(double e, const std::string& at) {
    if (e > error) error = e, where = at;
  }
};

TEST(Parity, EveryCaseAgreesWithPyTorchInF64) {
  const json& cases = golden().cases;
  constexpr double kTolerance = 1e-10;
  std::set<std::string> ops;
  Worst worst;
  std::map<std::string, double> worst_by_op;
  int failures = 0;
  for (size_t n = 0; n < cases.size(); ++n) {
    const json& c = cases[n];
    ops.insert(c["op"].get<std::string>());
    const std::string label =
        "case " + std::to_string(n) + " (" + c["op"].get<std::string>() + ", " + c["attrs"].dump() + ")";
    std::vector<Tensor> got;
    try {
      got = replay(n, c, DType::f64);
    } catch (const std::exception& e) {
      ADD_FAILURE() << label << " threw: " << e.what();
      ++failures;
      continue;
    }
    const std::vector<Tensor> refs = references(n, c, false);
    for (size_t k = 0; k < refs.size(); ++k) {
      const double e = relative_error(got[k], refs[k]);
      const bool ok = e <= kTolerance;
      if (!ok && ++failures <= 40) ADD_FAILURE() << label << ": " << what(k) << " relative error " << e;
      worst.update(std::isnan(e) ? INFINITY : e, label + " " + what(k));
      double& w = worst_by_op[c["op"]];
      w = std::max(w, std::isnan(e) ? INFINITY : e);
    }
  }
  EXPECT_EQ(failures, 0);
  std::printf("parity f64: %zu cases over %zu ops, %d failures; worst relative error %.3g at %s\n", cases.size(),
              ops.size(), failures, worst.error, worst.where.c_str());
  std::vector<std::pair<double, std::string>> ranked;
  for (const auto& [op, e] : worst_by_op) ranked.emplace_back(e, op);
  std::sort(ranked.rbegin(), ranked.rend());
  std::printf("parity f64: the 8 worst ops:");
  for (size_t i = 0; i < std::min<size_t>(8, ranked.size()); ++i)
    std::printf(" %s %.2g%s", ranked[i].second.c_str(), ranked[i].first, i + 1 < 8 ? "," : "\n");
}

TEST(Parity, F32IsWithinFourTimesPyTorchsOwnF32Error) {
  const json& cases = golden().cases;
  constexpr double kF32Floor = 0x1p-24;                    // half an f32 ulp: PyTorch may be exact by luck
  std::map<std::string, std::pair<double, double>> table;  // op → (attograd, torch) worst errors
  int count = 0;
  for (size_t n = 0; n < cases.size(); ++n) {
    const json& c = cases[n];
    if (!c["f32"].get<bool>()) continue;
    ++count;
    const std::vector<Tensor> got = replay(n, c, DType::f32);
    const std::vector<Tensor> exact = references(n, c, false), torch32 = references(n, c, true);
    for (size_t k = 0; k < exact.size(); ++k) {
      const double ours = relative_error(got[k], exact[k]), theirs = relative_error(torch32[k], exact[k]);
      EXPECT_LE(ours, 4 * std::max(theirs, kF32Floor))
          << "case " << n << " (" << c["op"].get<std::string>() << ") " << what(k) << ": attograd f32 error " << ours
          << ", PyTorch f32 error " << theirs;
      auto& [a, t] = table[c["op"].get<std::string>() + (k == 0 ? "" : " (gradients)")];
      a = std::max(a, ours);
      t = std::max(t, theirs);
    }
  }
  std::printf("parity f32: %d cases; worst relative error against f64, attograd vs PyTorch:\n", count);
  std::printf("| op | attograd f32 | PyTorch f32 |\n|---|---|---|\n");
  for (const auto& [op, e] : table) std::printf("| %s | %.1e | %.1e |\n", op.c_str(), e.first, e.second);
}

TEST(Parity, EveryRegisteredOpHasCasesOrAReason) {
  std::set<std::string> covered;
  for (const json& c : golden().cases) covered.insert(c["op"].get<std::string>());
  std::printf("parity: deliberate differences from PyTorch, from the registry:\n");
  for (const OpEntry& entry : Registry::global().ops()) {
    EXPECT_TRUE(covered.count(entry.name) > 0 || !entry.differs_from_pytorch.empty())
        << "registered op '" << entry.name << "' has no parity cases: add them to tools/golden/parity.py";
    if (!entry.differs_from_pytorch.empty())
      std::printf("  %s: %s\n", entry.name.c_str(), entry.differs_from_pytorch.c_str());
  }
  for (const std::string& op : covered) {
    if (op != "chain") {
      EXPECT_NO_THROW(Registry::global().find(op)) << "parity cases for an unregistered op " << op;
    }
  }
  std::printf("parity: %zu registered ops, %zu with cases\n", Registry::global().ops().size(),
              covered.size() - covered.count("chain"));
}

}  // namespace
}  // namespace ag
