#include "nn/gpt.h"

#include <cmath>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/dropout.h"
#include "engine/ops/matmul.h"
#include "engine/ops/pointwise.h"
#include "engine/ops/shape.h"

namespace ag::nn {

namespace {

// nanoGPT's `transformer` (an nn.ModuleDict): it only names its children.
class ModuleDict : public Module {
 public:
  template <typename M>
  std::shared_ptr<M> add(const std::string& name, std::shared_ptr<M> module) {
    return register_module(name, std::move(module));
  }
  std::string type_name() const override { return "ModuleDict"; }
  bool is_container() const override { return true; }
};

// lm_head: a bias-free Linear whose weight is another module's tensor (weight tying).
class TiedLinear : public Module {
 public:
  explicit TiedLinear(const Tensor& weight) { register_parameter("weight", weight); }
  std::string type_name() const override { return "Linear"; }
};

// Overwrites a parameter with N(0, std) draws.
void init_normal(const Tensor& param, double std, Generator& gen) {
  NoGradGuard no_grad;
  Tensor(param).copy_(mul(randn(param.shape(), param.dtype(), gen), std));
}

void init_linear(Linear& linear, double std, Generator& gen) {
  init_normal(linear.weight, std, gen);
  NoGradGuard no_grad;
  if (linear.bias.defined()) Tensor(linear.bias).zero_();
}

double residual_std(const GPTConfig& config) { return 0.02 / std::sqrt(2.0 * static_cast<double>(config.n_layer)); }

}  // namespace

CausalSelfAttention::CausalSelfAttention(const GPTConfig& config, Generator& gen)
    : n_head(config.n_head), dropout(config.dropout) {
  c_attn = register_module("c_attn", std::make_shared<Linear>(config.n_embd, 3 * config.n_embd, config.bias, gen));
  c_proj = register_module("c_proj", std::make_shared<Linear>(config.n_embd, config.n_embd, config.bias, gen));
  init_linear(*c_attn, 0.02, gen);
  init_linear(*c_proj, residual_std(config), gen);
}

namespace {

// residual + dropout(c_proj(h)), or without a residual dropout(c_proj(h)): the add in c_proj's product
// where dropout is inactive (eval, p = 0), the same numbers as the add after it.
Tensor project_and_add(Linear& c_proj, const Tensor& h, const Tensor& residual, double p, bool training) {
  if (!residual.defined()) return ag::dropout(c_proj(h), p, training);
  if (!training || p == 0) return c_proj.forward_add(h, residual);
  return add(residual, ag::dropout(c_proj(h), p, training));
}

}  // namespace

Tensor CausalSelfAttention::forward(const Tensor& x, Tensor* cached_keys, Tensor* cached_values,
                                    const Tensor& residual) {
  return call([&] {
    const double p = is_training() ? dropout : 0.0;
    // q, k, v = c_attn(x).split(C, dim=2), each in heads (B, nh, T, hs): packed_self_attention splits them
    const Tensor qkv = (*c_attn)(x);  // (B, T, 3C)
    const Tensor merged =             // (B, T, C)
        cached_keys
            ? merge_heads(attend_cached(qkv, *cached_keys, *cached_values, p))  // (B, nh, T, hs) → (B, T, C)
            : packed_self_attention(qkv, n_head, {.is_causal = true, .dropout_p = p, .merge_heads = true}).output;
    return project_and_add(*c_proj, merged, residual, dropout, is_training());
  });
}

Tensor CausalSelfAttention::attend_cached(const Tensor& qkv, Tensor& cached_keys, Tensor& cached_values,
                                          double p) const {
  const int64_t B = qkv.size(0), T = qkv.size(1), hs = qkv.size(2) / 3 / n_head;
  const Tensor heads = permute(reshape(qkv, {B, T, 3, n_head, hs}), {2, 0, 3, 1, 4});  // (3, B, nh, T, hs)
  const std::vector<Tensor> q_k_v = chunk(heads, 3, 0);                                // 3 × (1, B, nh, T, hs)
  const Tensor q = squeeze(q_k_v[0], 0);                                               // (B, nh, T, hs)
  Tensor k = squeeze(q_k_v[1], 0);                                                     // (B, nh, T, hs)
  Tensor v = squeeze(q_k_v[2], 0);                                                     // (B, nh, T, hs)
  bool causal = true;
  if (cached_keys.defined()) {  // one new query against every earlier key: nothing to mask
    AG_CHECK(T == 1, "CausalSelfAttention: a filled cache takes one token at a time, got {}", T);
    k = cat_keeping_bf16_copy({cached_keys, k}, 2);  // (B, nh, S + 1, hs)
    v = cat_keeping_bf16_copy({cached_values, v}, 2);
    causal = false;
  }
  cached_keys = k;
  cached_values = v;
  return scaled_dot_product_attention(q, k, v, {.is_causal = causal, .dropout_p = p}).output;  // (B, nh, T, hs)
}

MLP::MLP(const GPTConfig& config, Generator& gen) : dropout(config.dropout) {
  c_fc = register_module("c_fc", std::make_shared<Linear>(config.n_embd, 4 * config.n_embd, config.bias, gen));
  c_proj = register_module("c_proj", std::make_shared<Linear>(4 * config.n_embd, config.n_embd, config.bias, gen));
  init_linear(*c_fc, 0.02, gen);
  init_linear(*c_proj, residual_std(config), gen);
}

Tensor MLP::forward(const Tensor& x) { return output(x, Tensor()); }

Tensor MLP::forward_add(const Tensor& x, const Tensor& residual) {
  return call([&] { return output(x, residual); });
}

Tensor MLP::output(const Tensor& x, const Tensor& residual) {
  const Tensor hidden = c_fc->forward_activated(x, Activation::gelu);  // gelu(c_fc(x)): one op, one backward pass
  return project_and_add(*c_proj, hidden, residual, dropout, is_training());
}

Block::Block(const GPTConfig& config, Generator& gen) {
  ln_1 = register_module("ln_1", std::make_shared<LayerNorm>(Shape{config.n_embd}, 1e-5, true, config.bias));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(config, gen));
  ln_2 = register_module("ln_2", std::make_shared<LayerNorm>(Shape{config.n_embd}, 1e-5, true, config.bias));
  mlp = register_module("mlp", std::make_shared<MLP>(config, gen));
}

Tensor Block::forward(const Tensor& x, Tensor* cached_keys, Tensor* cached_values) {
  return call([&] {
    // x + attn(ln_1(x)), then + mlp(ln_2(·)): each add in its c_proj's product where it can be
    const Tensor after_attention = attn->forward((*ln_1)(x), cached_keys, cached_values, x);  // (B, T, C)
    return mlp->forward_add((*ln_2)(after_attention), after_attention);
  });
}

GPT::GPT(const GPTConfig& config_, Generator& gen) : config(config_) {
  AG_CHECK(
      config.vocab_size > 0 && config.block_size > 0 && config.n_layer > 0 && config.n_head > 0 && config.n_embd > 0,
      "GPT: expected positive sizes, got vocab_size {}, block_size {}, n_layer {}, n_head {}, n_embd {}",
      config.vocab_size, config.block_size, config.n_layer, config.n_head, config.n_embd);
  AG_CHECK(config.n_embd % config.n_head == 0, "GPT: n_embd {} is not a multiple of n_head {}", config.n_embd,
           config.n_head);
  AG_CHECK(config.dropout >= 0 && config.dropout < 1, "GPT: dropout must be in [0, 1), got {}", config.dropout);
  auto transformer = register_module("transformer", std::make_shared<ModuleDict>());
  wte = transformer->add("wte", std::make_shared<Embedding>(config.vocab_size, config.n_embd, std::nullopt, gen));
  wpe = transformer->add("wpe", std::make_shared<Embedding>(config.block_size, config.n_embd, std::nullopt, gen));
  init_normal(wte->weight, 0.02, gen);
  init_normal(wpe->weight, 0.02, gen);
  h = transformer->add("h", std::make_shared<ModuleList<Block>>());
  for (int64_t i = 0; i < config.n_layer; ++i) h->push_back(std::make_shared<Block>(config, gen));
  ln_f = transformer->add("ln_f", std::make_shared<LayerNorm>(Shape{config.n_embd}, 1e-5, true, config.bias));
  register_module("lm_head", std::make_shared<TiedLinear>(wte->weight));
}

std::string GPT::extra_repr() const {
  return fmt::format("vocab_size={}, block_size={}, n_layer={}, n_head={}, n_embd={}", config.vocab_size,
                     config.block_size, config.n_layer, config.n_head, config.n_embd);
}

Tensor GPT::embed(const Tensor& idx, int64_t first_position) {
  AG_CHECK(idx.defined() && idx.dim() == 2 && idx.dtype() == DType::i64,
           "GPT: expected token ids as an i64 (B, T) tensor, got {}",
           idx.defined() ? fmt::format("{} of shape {}", dtype_name(idx.dtype()), shape_str(idx.shape())) : "none");
  const int64_t T = idx.size(1);
  AG_CHECK(first_position + T <= config.block_size, "GPT: positions {}..{} exceed the block size {}", first_position,
           first_position + T - 1, config.block_size);
  const Tensor positions = arange(static_cast<double>(first_position), static_cast<double>(first_position + T), 1,
                                  DType::i64);           // (T)
  const Tensor x = add((*wte)(idx), (*wpe)(positions));  // (B, T, C) + (T, C)
  return ag::dropout(x, config.dropout, is_training());  // (B, T, C)
}

Tensor GPT::head(const Tensor& x) {
  return matmul((*ln_f)(x), wte->weight, false, true);  // lm_head(ln_f(x)): (B, T, C) @ (V, C)ᵀ → (B, T, V)
}

Tensor GPT::forward(const Tensor& idx) {
  return call([&] {
    Tensor x = embed(idx, 0);  // (B, T, C)
    for (auto& block : *h) x = block->forward(x);
    return head(x);  // (B, T, V)
  });
}

Tensor GPT::forward_cached(const Tensor& idx, KVCache& cache) {
  NoGradGuard no_grad;
  const int64_t start = cache.length();
  cache.keys.resize(h->size());
  cache.values.resize(h->size());
  Tensor x = embed(idx, start);  // (B, T, C)
  for (size_t l = 0; l < h->size(); ++l) x = (*h)[l].forward(x, &cache.keys[l], &cache.values[l]);
  const int64_t T = idx.size(1);
  return squeeze(head(slice(x, 1, T - 1, T)), 1);  // the last position's logits, (B, V)
}

}  // namespace ag::nn
