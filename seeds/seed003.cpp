#include "seeds/seed003.h"

#include "engine/error.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/shape.h"

namespace ag::seeds {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.shape()) : "undefined"; }

// x must be (T, d_in) or (B, T, d_in); min_dims = 3 for the classes that need the batch dim.
void check_input(const std::string& module, const Tensor& x, int64_t d_in, int64_t min_dims) {
  const char* expected = min_dims == 3 ? "(B, T, d_in)" : "(T, d_in) or (B, T, d_in)";
  AG_CHECK(x.defined() && x.dim() >= min_dims && x.dim() <= 3 && x.size(-1) == d_in,
           "{}: expected input {} with d_in = {}, got shape {}", module, expected, d_in, shape_of(x));
}

// key_padding_mask is undefined, or b8 of x's shape without the last dim (true = padding).
void check_key_padding_mask(const std::string& module, const Tensor& x, const Tensor& key_padding_mask) {
  if (!key_padding_mask.defined()) return;
  const Shape expected(x.shape().begin(), x.shape().end() - 1);
  AG_CHECK(key_padding_mask.dtype() == DType::b8 && key_padding_mask.shape() == expected,
           "{}: expected a b8 key_padding_mask of shape {} (the input {} without d_in; true = padding), got {} {}",
           module, shape_str(expected), shape_str(x.shape()), dtype_name(key_padding_mask.dtype()),
           shape_str(key_padding_mask.shape()));
}

// true where a or b is true (b8, broadcast); either may be undefined.
Tensor either(const Tensor& a, const Tensor& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return gt(add(to(a, DType::f32), to(b, DType::f32)), 0.5);
}

// The seed's self.mask.bool()[:num_tokens, :num_tokens]: the registered f32 triu(ones, 1) cut to
// T tokens, true where a query would see its future.
Tensor causal_part(const std::string& module, const Tensor& mask, int64_t tokens) {
  AG_CHECK(tokens <= mask.size(0), "{}: the input has {} tokens, more than context_length = {}", module, tokens,
           mask.size(0));
  return gt(slice(slice(mask, 0, 0, tokens), 1, 0, tokens), 0.0);  // (T, T)
}

// (T, d) → (1, 1, T, d); (B, T, d) → (B, 1, T, d); (B, H, T, d) stays.
Tensor as_heads(const Tensor& x) {
  if (x.dim() == 4) return x;
  return x.dim() == 2 ? reshape(x, {1, 1, x.size(0), x.size(1)}) : unsqueeze(x, 1);
}

// context = dropout(softmax(queries keysᵀ / √d_k, hidden keys masked)) values through the fused
// op, with the module's policy for fully masked rows (Note [fully masked rows] in engine/ops/attention.h).
// hidden is b8, true = hidden, broadcast to the scores (…, T, T); undefined: none. The weights
// (after dropout, as PyTorch's need_weights) are kept in `kept`. dropout may be null; it draws
// its mask from the module's generator in the same order as the Dropout module would.
Tensor attend(const Tensor& queries, const Tensor& keys, const Tensor& values, const Tensor& hidden,
              nn::Dropout* dropout, MaskedRows masked_rows, Tensor& kept) {
  AttentionOptions o{.need_weights = true, .masked_rows = masked_rows};
  if (hidden.defined()) {
    const Tensor by_head = hidden.dim() == 3 && queries.dim() == 3 ? unsqueeze(hidden, 1) : hidden;
    o.attn_mask = logical_not(by_head);  // sdpa's b8 attn_mask: true = takes part
  }
  const bool drops = dropout != nullptr && dropout->is_training() && dropout->p > 0;
  if (drops) o.dropout_p = dropout->p;
  const Attention a = scaled_dot_product_attention(as_heads(queries), as_heads(keys), as_heads(values), o,
                                                   drops ? dropout->generator() : default_generator());
  Shape weights_shape = queries.shape();
  weights_shape.back() = keys.size(-2);
  kept = reshape(a.weights, weights_shape);  // (…, T, T)
  Shape out_shape = queries.shape();
  out_shape.back() = values.size(-1);
  return reshape(a.output, out_shape);  // (…, T, d_v)
}

// (…, T) key padding → (…, 1, T): one row of hidden keys shared by every query.
Tensor padded_keys(const Tensor& key_padding_mask) {
  return key_padding_mask.defined() ? unsqueeze(key_padding_mask, -2) : Tensor();
}

Tensor causal_buffer(int64_t context_length) { return triu(ones({context_length, context_length}), 1); }

}  // namespace

SelfAttention::SelfAttention(int64_t d_in, int64_t d_q, int64_t d_k, int64_t d_v, Generator& gen) {
  AG_CHECK(d_in > 0 && d_q > 0 && d_k > 0 && d_v > 0,
           "SelfAttention: expected positive sizes, got d_in={} d_q={} d_k={} d_v={}", d_in, d_q, d_k, d_v);
  AG_CHECK(d_q == d_k, "SelfAttention: queries and keys are multiplied, so d_q must equal d_k; got d_q={} d_k={}", d_q,
           d_k);
  W_q = register_parameter("W_q", randn({d_q, d_in}, DType::f32, gen));
  W_k = register_parameter("W_k", randn({d_k, d_in}, DType::f32, gen));
  W_v = register_parameter("W_v", randn({d_v, d_in}, DType::f32, gen));
}

Tensor SelfAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  check_input(type_name(), x, W_q.size(1), 2);
  check_key_padding_mask(type_name(), x, key_padding_mask);
  const Tensor queries = matmul(x, W_q, false, true);  // (…, T, d_q)
  const Tensor keys = matmul(x, W_k, false, true);     // (…, T, d_k)
  const Tensor values = matmul(x, W_v, false, true);   // (…, T, d_v)
  return attend(queries, keys, values, padded_keys(key_padding_mask), nullptr, masked_rows, last_attention_weights);
}

SelfAttention_v1::SelfAttention_v1(int64_t d_in, int64_t d_out, Generator& gen) {
  AG_CHECK(d_in > 0 && d_out > 0, "SelfAttention_v1: expected positive sizes, got d_in={} d_out={}", d_in, d_out);
  w_query = register_parameter("w_query", rand({d_in, d_out}, DType::f32, gen));
  w_key = register_parameter("w_key", rand({d_in, d_out}, DType::f32, gen));
  w_value = register_parameter("w_value", rand({d_in, d_out}, DType::f32, gen));
}

Tensor SelfAttention_v1::forward(const Tensor& x, const Tensor& key_padding_mask) {
  check_input(type_name(), x, w_query.size(0), 2);
  check_key_padding_mask(type_name(), x, key_padding_mask);
  const Tensor keys = matmul(x, w_key);       // (…, T, d_out)
  const Tensor values = matmul(x, w_value);   // (…, T, d_out)
  const Tensor queries = matmul(x, w_query);  // (…, T, d_out)
  return attend(queries, keys, values, padded_keys(key_padding_mask), nullptr, masked_rows, last_attention_weights);
}

SelfAttention_v2::SelfAttention_v2(int64_t d_in, int64_t d_out, bool qkv_bias, Generator& gen) {
  w_query = register_module("w_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  w_key = register_module("w_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  w_value = register_module("w_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
}

Tensor SelfAttention_v2::forward(const Tensor& x, const Tensor& key_padding_mask) {
  check_input(type_name(), x, w_query->weight.size(1), 2);
  check_key_padding_mask(type_name(), x, key_padding_mask);
  const Tensor keys = (*w_key)(x);       // (…, T, d_out)
  const Tensor queries = (*w_query)(x);  // (…, T, d_out)
  const Tensor values = (*w_value)(x);   // (…, T, d_out)
  return attend(queries, keys, values, padded_keys(key_padding_mask), nullptr, masked_rows, last_attention_weights);
}

CausalAttention::CausalAttention(int64_t d_in, int64_t d_out, int64_t context_length, double p, bool qkv_bias,
                                 Generator& gen) {
  AG_CHECK(context_length > 0, "CausalAttention: expected a positive context_length, got {}", context_length);
  w_query = register_module("w_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  w_key = register_module("w_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  w_value = register_module("w_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, gen));
  mask = register_buffer("mask", causal_buffer(context_length));
}

Tensor CausalAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  check_input(type_name(), x, w_query->weight.size(1), 3);
  check_key_padding_mask(type_name(), x, key_padding_mask);
  const Tensor keys = (*w_key)(x);       // (B, T, d_out)
  const Tensor queries = (*w_query)(x);  // (B, T, d_out)
  const Tensor values = (*w_value)(x);   // (B, T, d_out)
  // The seed computes this mask and drops it (masked_fill's result is unused): not causal.
  const Tensor hidden =
      either(causal_part(type_name(), mask, x.size(1)), padded_keys(key_padding_mask));  // (T, T) or (B, T, T)
  return attend(queries, keys, values, hidden, dropout.get(), masked_rows, last_attention_weights);
}

MultiHeadAttention::MultiHeadAttention(int64_t d_in, int64_t d_out, int64_t context_length, double p, int64_t num_heads,
                                       bool qkv_bias, Generator& gen)
    : num_heads(num_heads), head_dim(num_heads > 0 ? d_out / num_heads : 0) {
  AG_CHECK(num_heads > 0 && d_out % num_heads == 0,
           "MultiHeadAttention: d_out must be divisible by num_heads, got d_out={} num_heads={}", d_out, num_heads);
  AG_CHECK(context_length > 0, "MultiHeadAttention: expected a positive context_length, got {}", context_length);
  W_query = register_module("W_query", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  W_key = register_module("W_key", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  W_value = register_module("W_value", std::make_shared<nn::Linear>(d_in, d_out, qkv_bias, gen));
  out_proj = register_module("out_proj", std::make_shared<nn::Linear>(d_out, d_out, true, gen));
  dropout = register_module("dropout", std::make_shared<nn::Dropout>(p, gen));
  mask = register_buffer("mask", causal_buffer(context_length));
}

Tensor MultiHeadAttention::forward(const Tensor& x, const Tensor& key_padding_mask) {
  check_input(type_name(), x, W_query->weight.size(1), 3);
  check_key_padding_mask(type_name(), x, key_padding_mask);
  const int64_t batch = x.size(0), tokens = x.size(1);
  // (B, T, d_out) → (B, T, H, head_dim) → (B, H, T, head_dim)
  auto split_heads = [&](const Tensor& t) { return transpose(reshape(t, {batch, tokens, num_heads, head_dim}), 1, 2); };
  const Tensor keys = split_heads((*W_key)(x));       // (B, H, T, head_dim)
  const Tensor queries = split_heads((*W_query)(x));  // (B, H, T, head_dim)
  const Tensor values = split_heads((*W_value)(x));   // (B, H, T, head_dim)
  const Tensor padded = key_padding_mask.defined() ? reshape(key_padding_mask, {batch, 1, 1, tokens}) : Tensor();
  const Tensor hidden = either(causal_part(type_name(), mask, tokens), padded);  // (T, T) or (B, 1, T, T)
  const Tensor context =
      attend(queries, keys, values, hidden, dropout.get(), masked_rows, last_attention_weights);  // (B, H, T, hd)
  const Tensor heads = reshape(transpose(context, 1, 2), {batch, tokens, num_heads * head_dim});  // (B, T, d_out)
  return (*out_proj)(heads);
}

Tensor seed003_inputs(DType dtype) {
  return tensor({0.43, 0.15, 0.89,   // Your
                 0.55, 0.87, 0.66,   // journey
                 0.57, 0.85, 0.64,   // starts
                 0.22, 0.58, 0.33,   // with
                 0.77, 0.25, 0.10,   // one
                 0.05, 0.80, 0.55},  // step
                {6, 3}, dtype);
}

}  // namespace ag::seeds
