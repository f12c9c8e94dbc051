// `attograd walkthrough`'s printout (walkthrough.h): seed 003's worked self-attention example,
// step by step, computed by the engine: the six-token input, q/k/v, scores, scaled softmax,
// context; the causal mask; the multi-head split of its toy example; then backward from
// context.sum(), every intermediate's gradient checked against finite differences. The only
// numbers typed in are the inputs and the weights as the seed prints them (rounded to 4 decimals:
// results agree with its printout to about 2e-4). Everything runs in f64.
#include "seeds/walkthrough.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/autograd.h"
#include "engine/error.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "seeds/printed_values.h"
#include "seeds/seed003.h"
#include "seeds/seed_attention.h"

namespace ag::seeds {

namespace {

Tensor matrix(const std::vector<double>& values, int64_t rows, int64_t cols) {
  return tensor(values, {rows, cols}, DType::f64);
}

// W_query, W_key, W_value (3, 2) as the seed prints them after torch.manual_seed(123).
struct SeedWeights {
  Tensor query = matrix({0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665}, 3, 2);
  Tensor key = matrix({0.1366, 0.1025, 0.1841, 0.7264, 0.3153, 0.6871}, 3, 2);
  Tensor value = matrix({0.0756, 0.1966, 0.3164, 0.4017, 0.1186, 0.8274}, 3, 2);
};

void show(const std::string& name, const Tensor& t) { fmt::print("{} =\n{}\n", name, t.str()); }

Tensor row(const Tensor& t, int64_t i) { return squeeze(slice(t, 0, i, i + 1), 0); }

double max_abs_difference(const Tensor& a, const Tensor& b) {
  NoGradGuard no_grad;
  return max(abs(sub(a, b))).item();
}

std::string verdict(double max_diff, double tolerance) {
  return fmt::format("{} (max |difference| {:.2e})", max_diff <= tolerance ? "OK" : "NOT OK", max_diff);
}

// Part 1: self-attention with trainable weights (the seed's cells 5-16).
void single_head(const Tensor& x, const SeedWeights& w) {
  fmt::print("== 1. Self-attention over \"Your journey starts with one step\" ==\n");
  show("inputs (6, 3)", x);
  show("W_query", w.query);
  show("W_key", w.key);
  show("W_value", w.value);
  const Tensor queries = matmul(x, w.query);  // (6, 2)
  const Tensor keys = matmul(x, w.key);       // (6, 2)
  const Tensor values = matmul(x, w.value);   // (6, 2)
  show("query_2 = inputs[1] @ W_query", row(queries, 1));
  show("key_2", row(keys, 1));
  show("value_2", row(values, 1));
  const Tensor scores = matmul(queries, keys, false, true);  // (6, 6)
  show("attn_scores = queries @ keys.T", scores);
  const double d_k = static_cast<double>(keys.size(1));
  const Tensor weights = softmax(mul(scores, 1 / std::sqrt(d_k)), -1);  // (6, 6)
  show("attn_weights_2 = softmax(attn_scores_2 / sqrt(d_k)), d_k = 2", row(weights, 1));
  const Tensor context = matmul(weights, values);  // (6, 2)
  show("context_vec_2 = attn_weights_2 @ values", row(context, 1));
  show("context (all tokens, SelfAttention_v1)", context);

  fmt::print("\n== 2. Causal attention: token i sees tokens 0..i ==\n");
  const Tensor masked = masked_fill(scores, causal_mask(6), -INFINITY);
  show("masked = attn_scores.masked_fill(triu(ones, 1), -inf)", masked);
  const Tensor causal_weights = softmax(mul(masked, 1 / std::sqrt(d_k)), -1);
  show("attn_weights = softmax(masked / sqrt(d_k))", causal_weights);
  // The seed's first attempt: mask the full softmax, then renormalise each row. Same weights.
  const Tensor masked_simple = mul(weights, tril(ones({6, 6}, DType::f64)));
  const Tensor renormalised = div(masked_simple, sum(masked_simple, {1}, true));
  fmt::print("softmax of the masked scores = renormalised masked softmax: {}\n",
             verdict(max_abs_difference(causal_weights, renormalised), 1e-12));
}

// Part 3: the multi-head toy example with weight splits (cells 34-60): 2 heads of dim 3.
void multi_head_toy() {
  fmt::print("\n== 3. Multi-head attention by splitting the weights: b, num_tokens, d_in = 1, 3, 6 ==\n");
  const Tensor x = tensor({1, 2, 3, 4, 5, 6, 6, 5, 4, 3, 2, 1, 1, 1, 1, 1, 1, 1}, {1, 3, 6}, DType::f64);
  // The seed's wq, wk, wv (6, 6), as it prints them.
  // clang-format off
  const Tensor wq = matrix({ 0.6323, -0.2366,  1.2455,  0.3465,  1.2458,  0.3229,
                             0.6571, -0.2378, -0.5311, -0.2610, -1.4819, -1.6418,
                            -0.2990,  0.4216,  0.2114, -0.0271, -0.5682,  0.6937,
                            -1.1291, -1.0102,  0.6946,  0.1094,  0.5130, -0.8669,
                             0.3480,  0.2593,  0.4412,  1.0017, -0.3913, -0.2878,
                             0.2484,  0.2846, -0.3386, -0.6164,  1.2722,  0.5754}, 6, 6);
  const Tensor wk = matrix({-0.3703,  0.5431, -0.0372, -0.4406,  0.4103, -0.1773,
                             1.5993, -0.2777, -1.1909, -0.4301,  0.6927, -1.3304,
                             1.2470, -0.1872, -0.1670,  1.4302,  1.2927,  0.4822,
                            -0.0984, -0.8983,  0.3334, -0.6312,  0.1022, -1.0715,
                            -0.7647, -0.1734,  0.6305,  1.0155,  0.8474,  0.1454,
                            -1.5085, -0.4529,  0.0997, -0.1084,  0.8046,  0.3459}, 6, 6);
  const Tensor wv = matrix({ 1.6395,  1.1234, -0.1001,  0.5021, -1.0590,  0.1412,
                            -0.4271,  0.5681,  0.4164, -1.2534,  1.3061,  0.3610,
                            -0.2824, -0.4314,  1.2358,  0.1181, -1.2467,  0.1893,
                             1.3440,  0.1487, -0.6174,  0.8890, -0.3282,  1.4662,
                             0.1814, -0.4761, -0.0402,  0.7326,  0.7654, -0.1080,
                            -0.8974,  0.6786,  0.5602, -0.2443, -0.4883,  1.3996}, 6, 6);
  // clang-format on
  show("x", x);
  const Tensor keys = matmul(x, wk);     // (1, 3, 6)
  const Tensor queries = matmul(x, wq);  // (1, 3, 6)
  const Tensor values = matmul(x, wv);   // (1, 3, 6)
  show("calc_keys = x @ wk", keys);
  show("calc_queries = x @ wq", queries);
  show("calc_values = x @ wv", values);
  // (b, num_tokens, d_out) → (b, num_tokens, num_heads, head_dim) → (b, num_heads, num_tokens, head_dim)
  auto split_heads = [](const Tensor& t) { return transpose(reshape(t, {1, 3, 2, 3}), 1, 2); };  // (1, 2, 3, 3)
  const Tensor keys_grp = split_heads(keys);
  const Tensor queries_grp = split_heads(queries);
  const Tensor values_grp = split_heads(values);
  show("keys_grp = calc_keys.view(1, 3, 2, 3).transpose(1, 2)", keys_grp);
  const Tensor scores = matmul(queries_grp, keys_grp, false, true);  // (1, 2, 3, 3)
  show("attn_score = queries_grp @ keys_grp.transpose(2, 3)", scores);
  const Tensor masked = masked_fill(scores, causal_mask(3), -INFINITY);
  show("attn_score.masked_fill(triu(ones(3, 3), 1), -inf)", masked);
  const Tensor weights = softmax(mul(masked, 1 / std::sqrt(3.0)), -1);  // (1, 2, 3, 3)
  show("attn_weights = softmax(attn_score / sqrt(head_dim)) (the seed also applied dropout(0.5) here: left out)",
       weights);
  const Tensor context = matmul(weights, values_grp);  // (1, 2, 3, 3)
  show("context_vec = attn_weights @ values_grp", context);
  show("heads combined: context_vec.transpose(1, 2).view(1, 3, 6)", reshape(transpose(context, 1, 2), {1, 3, 6}));
  const Tensor fused = scaled_dot_product_attention(queries_grp, keys_grp, values_grp, {.is_causal = true}).output;
  fmt::print("the same through the fused scaled_dot_product_attention: {}\n",
             verdict(max_abs_difference(context, fused), 1e-12));
}

// Part 4: backward from context.sum() through part 1's steps. A step either is an input (no
// compute) or is computed from the steps before it.
struct Step {
  std::string name;
  std::function<Tensor(const std::vector<Tensor>&)> compute;
};

std::vector<Step> attention_steps() {
  const double scale = 1 / std::sqrt(2.0);  // 1 / sqrt(d_k)
  return {{"inputs", nullptr},
          {"W_query", nullptr},
          {"W_key", nullptr},
          {"W_value", nullptr},
          {"queries = inputs @ W_query", [](const auto& s) { return matmul(s[0], s[1]); }},
          {"keys = inputs @ W_key", [](const auto& s) { return matmul(s[0], s[2]); }},
          {"values = inputs @ W_value", [](const auto& s) { return matmul(s[0], s[3]); }},
          {"attn_scores = queries @ keys.T", [](const auto& s) { return matmul(s[4], s[5], false, true); }},
          {"scaled = attn_scores / sqrt(d_k)", [scale](const auto& s) { return mul(s[7], scale); }},
          {"attn_weights = softmax(scaled)", [](const auto& s) { return softmax(s[8], -1); }},
          {"context = attn_weights @ values", [](const auto& s) { return matmul(s[9], s[6]); }}};
}

// Recomputes every step after `from` from the ones before it; returns context.sum().
double loss_from(const std::vector<Step>& steps, std::vector<Tensor> values, size_t from) {
  for (size_t i = from + 1; i < steps.size(); ++i)
    if (steps[i].compute) values[i] = steps[i].compute(values);
  return sum(values.back()).item();
}

// d context.sum() / d step, element by element: (L(step + ε) − L(step − ε)) / 2ε.
Tensor numeric_gradient(const std::vector<Step>& steps, const std::vector<Tensor>& values, size_t step) {
  NoGradGuard no_grad;
  const double eps = 1e-6;
  std::vector<Tensor> nudged;
  for (const Tensor& v : values) nudged.push_back(v.detach());
  Tensor gradient = zeros(values[step].shape(), DType::f64);
  for (int64_t e = 0; e < values[step].numel(); ++e) {
    nudged[step] = clone(values[step].detach());
    double* data = nudged[step].data<double>();
    data[e] += eps;
    const double plus = loss_from(steps, nudged, step);
    data[e] -= 2 * eps;
    const double minus = loss_from(steps, nudged, step);
    gradient.data<double>()[e] = (plus - minus) / (2 * eps);
  }
  return gradient;
}

void backward_checked() {
  fmt::print("\n== 4. Backward from context.sum(), each gradient against finite differences ==\n");
  const std::vector<Step> steps = attention_steps();
  const SeedAttentionStep step = seed_attention_step();
  step.loss.backward();
  for (size_t i = steps.size(); i-- > 0;) {  // in the order backward reaches them
    const Tensor analytic = step.values[i].grad();
    show("d context.sum() / d " + steps[i].name, analytic.detach());
    fmt::print("finite differences: {}\n",
               verdict(max_abs_difference(analytic, numeric_gradient(steps, step.values, i)), 1e-6));
  }
}

}  // namespace

SeedAttentionStep seed_attention_step(const std::function<void(const NamedTensors& leaves)>& before_forward) {
  const std::vector<Step> steps = attention_steps();
  const SeedWeights w;
  SeedAttentionStep step{{clone(seed003_inputs(DType::f64)).requires_grad_(), clone(w.query).requires_grad_(),
                          clone(w.key).requires_grad_(), clone(w.value).requires_grad_()},
                         {},
                         {}};
  for (const Step& s : steps) step.names.push_back(s.name);
  if (before_forward) {
    NamedTensors leaves;
    for (size_t i = 0; i < step.values.size(); ++i) leaves.emplace_back(step.names[i], step.values[i]);
    before_forward(leaves);
  }
  for (size_t i = step.values.size(); i < steps.size(); ++i) {
    const ScopeGuard scope(steps[i].name.substr(0, steps[i].name.find(" = ")));  // "queries"
    step.values.push_back(steps[i].compute(step.values));
    step.values.back().retain_grad();
  }
  step.loss = sum(step.values.back());
  return step;
}

ParameterNames seed_attention_leaf_names(const SeedAttentionStep& step) {
  ParameterNames names;
  for (size_t i = 0; i < step.values.size() && step.values[i].is_leaf(); ++i)
    names.emplace(step.values[i].impl(), step.names[i]);
  return names;
}

std::vector<Tensor> seed_context(const std::vector<Tensor>& leaves) {
  const std::vector<Step> steps = attention_steps();
  std::vector<Tensor> values = leaves;
  for (size_t i = values.size(); i < steps.size(); ++i) values.push_back(steps[i].compute(values));
  return {values.back()};
}

namespace {

// What each notebook prints that the walkthrough does not compare, and why.
const std::map<std::string, std::string>& not_compared() {
  static const std::map<std::string, std::string> notes = {
      {"000", "In[55]'s 4 rows of 28 (its cell's code is cut off in the notebook: `contex`)"},
      {"003",
       "In[13]'s variances (numpy, unseeded); the toy example In[34]-In[60] (typed-in weights, its dropout "
       "unseeded: plain `walkthrough` follows it)"},
      {"002", "nothing: every number it prints is listed above"},
      {"004",
       "the training run's losses and plots (figures, no printed numbers; `train squares --rng torch` "
       "follows that run)"},
  };
  return notes;
}

// Each notebook's printed outputs with ours (walkthrough_000.cpp … _004.cpp).
const std::map<std::string, std::function<std::vector<PrintedCheck>()>>& notebooks() {
  static const std::map<std::string, std::function<std::vector<PrintedCheck>()>> all = {
      {"000", notebook_000}, {"002", notebook_002}, {"003", notebook_003}, {"004", notebook_004}};
  return all;
}

}  // namespace

int walkthrough() {
  const Tensor x = seed003_inputs(DType::f64);
  const SeedWeights weights;
  single_head(x, weights);
  multi_head_toy();
  backward_checked();
  return 0;
}

std::vector<std::string> notebook_names() {
  std::vector<std::string> names;
  for (const auto& [name, checks] : notebooks()) names.push_back(name);
  return names;
}

int walkthrough_notebook(const std::string& notebook) {
  const auto found = notebooks().find(notebook);
  AG_CHECK(found != notebooks().end(), "walkthrough: no seed notebook '{}', expected one of {}", notebook,
           fmt::join(notebook_names(), ", "));
  walk(notebook, found->second());
  fmt::print("not compared: {}\n", not_compared().at(notebook));
  return 0;
}

}  // namespace ag::seeds
