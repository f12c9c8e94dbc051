// `attograd bench attention`: times seed 003's causal multi-head attention block (W_query,
// W_key, W_value without bias, heads, causal mask, softmax(scores / √head_dim), out_proj with
// bias; loss = output.sum()) forward, and forward + backward, as ../shared/peer/attn_bench_torch.py
// does for PyTorch: x requires grad, gradients are reset every iteration, medians over --iters.
// `attograd bench transformer`: the peer's Transformer training step (d_model 256, 8 heads, 2+2
// layers, feed-forward 1024, no dropout; B = 16, S = T = 64; causal target mask; MSE; Adam).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "engine/attograd.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "tools/commands.h"

namespace ag::cli {

namespace {

struct BenchArgs {
  std::string workload;
  std::string shape = "1,6,16,2";
  int iters = 20;
  bool json = false;
};

struct Block {
  int64_t B, T, d, h;
  Tensor x, w_query, w_key, w_value, w_out, b_out;
};

Block make_block(const Shape& s) {
  AG_CHECK(s.size() == 4 && s[0] > 0 && s[1] > 0 && s[2] > 0 && s[3] > 0 && s[2] % s[3] == 0,
           "bench attention: expected --shape B,T,d,h with positive sizes and h dividing d, got {}", shape_str(s));
  Generator gen(0);
  const double bound = 1 / std::sqrt(static_cast<double>(s[2]));  // nn.Linear's init range
  auto weight = [&](Shape shape) { return add(mul(rand(shape, DType::f32, gen), 2 * bound), -bound).requires_grad_(); };
  Block b{s[0], s[1], s[2], s[3], randn({s[0], s[1], s[2]}, DType::f32, gen).requires_grad_(), {}, {}, {}, {}, {}};
  b.w_query = weight({b.d, b.d});
  b.w_key = weight({b.d, b.d});
  b.w_value = weight({b.d, b.d});
  b.w_out = weight({b.d, b.d});
  b.b_out = weight({b.d});
  return b;
}

// x (B, T, d) → the block's output (B, T, d).
Tensor forward(const Block& b) {
  const int64_t hd = b.d / b.h;
  auto heads = [&](const Tensor& w) {  // x @ wᵀ, split into heads: (B, h, T, hd)
    return transpose(reshape(matmul(b.x, w, false, true), {b.B, b.T, b.h, hd}), 1, 2);
  };
  const Tensor context =
      scaled_dot_product_attention(heads(b.w_query), heads(b.w_key), heads(b.w_value), {.is_causal = true})
          .output;                                                           // (B, h, T, hd)
  const Tensor merged = reshape(transpose(context, 1, 2), {b.B, b.T, b.d});  // (B, T, d)
  return add(matmul(merged, b.w_out, false, true), b.b_out);                 // (B, T, d)
}

// Median and min of `iters` timings of f, in ms, after a warm-up.
std::pair<double, double> time_ms(const std::function<void()>& f, int iters) {
  for (int i = 0; i < std::max(3, iters / 4); ++i) f();
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return {times[times.size() / 2], times.front()};
}

int run_attention(const BenchArgs& args) {
  std::string text = args.shape;
  std::replace(text.begin(), text.end(), ',', 'x');
  const Block b = make_block(parse_shape(text));
  const int iters = b.T <= 6 ? args.iters * 10 : args.iters;  // as the peer: more for the tiny shapes
  const auto [fwd, fwd_min] = time_ms(
      [&] {
        NoGradGuard no_grad;
        forward(b);
      },
      iters);
  const std::vector<Tensor> params = {b.x, b.w_query, b.w_key, b.w_value, b.w_out, b.b_out};
  const auto [fwdbwd, fwdbwd_min] = time_ms(
      [&] {
        for (const Tensor& p : params) p.set_grad({});
        sum(forward(b)).backward();
      },
      iters);
  const std::string name = fmt::format("mha_causal_{}x{}x{}x{}", b.B, b.T, b.d, b.h);
  if (args.json) {
    fmt::print(R"({{"name": "{}", "shape": [{}, {}, {}, {}], "threads": {}, "fwd_ms": {:.5f}, "fwdbwd_ms": {:.5f}}})"
               "\n",
               name, b.B, b.T, b.d, b.h, get_num_threads(), fwd, fwdbwd);
  } else {
    fmt::print("{} threads={} iters={}: fwd median {:.4f} ms (min {:.4f}), fwd+bwd median {:.4f} ms (min {:.4f})\n",
               name, get_num_threads(), iters, fwd, fwd_min, fwdbwd, fwdbwd_min);
  }
  return 0;
}

int run_transformer(const BenchArgs& args) {
  manual_seed(0);
  nn::Transformer model({.d_model = 256,
                         .nhead = 8,
                         .num_encoder_layers = 2,
                         .num_decoder_layers = 2,
                         .dim_feedforward = 1024,
                         .dropout = 0.0});
  nn::Adam optimizer(model.parameters(), {.lr = 1e-4});
  const Tensor src = randn({16, 64, 256}), tgt = randn({16, 64, 256}), target = randn({16, 64, 256});
  nn::TransformerMasks masks;
  masks.tgt_mask = causal_mask(64);
  const auto [step, step_min] = time_ms(
      [&] {
        optimizer.zero_grad();
        mse_loss(model(src, tgt, masks), target).backward();
        optimizer.step();
      },
      args.iters);
  if (args.json) {
    fmt::print(R"({{"name": "transformer_step", "threads": {}, "step_ms": {:.5f}}})"
               "\n",
               get_num_threads(), step);
  } else {
    fmt::print("transformer_step threads={} iters={}: train step median {:.3f} ms (min {:.3f})\n", get_num_threads(),
               args.iters, step, step_min);
  }
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time a whole workload (medians; see tools/bench/ for the kernels)");
  cmd->add_option("workload", args->workload, "What to time: attention (the block) or transformer (a training step)")
      ->required()
      ->check(CLI::IsMember({"attention", "transformer"}));
  cmd->add_option("--shape", args->shape, "attention: B,T,d,h: batch, tokens, model width, heads")
      ->capture_default_str();
  cmd->add_option("--iters", args->iters, "Timed iterations (x10 for T <= 6)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "One JSON object: name, shape, threads, fwd_ms, fwdbwd_ms");
  return {cmd, [args] { return args->workload == "attention" ? run_attention(*args) : run_transformer(*args); }};
}

}  // namespace ag::cli
