// Google Benchmark for attograd's kernels and per-op overhead (never a timed test).
//   cmake -S . -B build-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTOGRAD_BENCH=ON
//   ninja -C build-bench kernels_bench && OMP_NUM_THREADS=2 build-bench/tools/bench/kernels_bench
// Matmul reports GFLOP/s; BM_*_OneDnnOff runs the same op with oneDNN disabled (the loops), which
// is how the size thresholds were chosen.
#include <benchmark/benchmark.h>

#include <dnnl.hpp>

#include "engine/attograd.h"
#include "engine/kernels/dnnl_compat.h"
#include "engine/kernels/matmul.h"
#include "engine/kernels/onednn.h"
#include "engine/kernels/softmax.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/matmul.h"
#include "engine/ops/norm.h"
#include "engine/ops/softmax.h"

namespace ag {
namespace {

// ---- per-op overhead: a 4-element add with requires_grad, forward plus its share of backward.
void BM_AddOverhead(benchmark::State& state) {
  const int chain = 100;
  const Tensor x = randn({4}).requires_grad_();
  const Tensor c = randn({4});
  const Tensor seed = ones({4});
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < chain; ++i) y = add(y, c);
    y.backward(seed);
    x.set_grad({});
  }
  state.SetItemsProcessed(state.iterations() * chain);  // items/s = ops/s
  state.counters["ns_per_op"] = benchmark::Counter(static_cast<double>(state.iterations() * chain),
                                                   benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_AddOverhead);

void BM_AddForwardNoGrad(benchmark::State& state) {
  const Tensor x = randn({4}), c = randn({4});
  for (auto _ : state) benchmark::DoNotOptimize(add(x, c));
}
BENCHMARK(BM_AddForwardNoGrad);

// ---- matmul: GFLOP/s through ag::matmul (oneDNN underneath above the threshold).
void run_matmul(benchmark::State& state, Shape a_shape, Shape b_shape) {
  const Tensor a = randn(a_shape), b = randn(b_shape);
  for (auto _ : state) benchmark::DoNotOptimize(matmul(a, b));
  const double flops = 2.0 * numel(a_shape) * b_shape.back();  // 2·M·K·N (× batch)
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  run_matmul(state, {n, n}, {n, n});
}
BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime();

void BM_MatmulBatched(benchmark::State& state) { run_matmul(state, {64, 128, 64}, {64, 64, 128}); }
BENCHMARK(BM_MatmulBatched)->UseRealTime();

// Around the threshold: n³ multiply-adds, oneDNN on and off.
void BM_MatmulSmall(benchmark::State& state) {
  onednn::set_enabled(state.range(1) != 0);
  const int64_t n = state.range(0);
  run_matmul(state, {n, n}, {n, n});
  onednn::set_enabled(true);
}
BENCHMARK(BM_MatmulSmall)->ArgsProduct({{8, 16, 20, 24, 32, 48}, {0, 1}})->ArgNames({"n", "onednn"});

// The attention block's own products: batch × (M×K @ K×N), oneDNN on and off.
void BM_MatmulAttentionShapes(benchmark::State& state) {
  onednn::set_enabled(state.range(4) != 0);
  const int64_t batch = state.range(0), m = state.range(1), k = state.range(2), n = state.range(3);
  run_matmul(state, {batch, m, k}, {batch, k, n});
  onednn::set_enabled(true);
}
BENCHMARK(BM_MatmulAttentionShapes)
    ->ArgsProduct({{1}, {64}, {6}, {6}, {0, 1}})
    ->ArgsProduct({{1}, {6}, {64}, {6}, {0, 1}})
    ->ArgsProduct({{48}, {4}, {2}, {4}, {0, 1}})
    ->ArgsProduct({{48}, {4}, {4}, {2}, {0, 1}})
    ->ArgsProduct({{2}, {6}, {8}, {6}, {0, 1}})
    ->ArgsProduct({{1}, {6}, {16}, {16}, {0, 1}})
    ->ArgNames({"batch", "m", "k", "n", "onednn"});

// ---- softmax forward and backward.
void BM_SoftmaxForward(benchmark::State& state) {
  onednn::set_enabled(state.range(2) != 0);
  const Tensor x = randn({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(softmax_forward(x, -1, false));
  onednn::set_enabled(true);
}
BENCHMARK(BM_SoftmaxForward)
    ->ArgsProduct({{12, 64, 256, 8192}, {6, 16, 128}, {0, 1}})
    ->ArgNames({"rows", "cols", "onednn"})
    ->UseRealTime();

// Attention's softmax under autocast: the weights and their bf16 operand in one pass on the calling
// thread (softmax_rows_in_place_with_bf16), against softmax_forward followed by the rounding.
void BM_SoftmaxRowsWithBf16(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = state.range(1);
  const Tensor x = randn({rows, cols});
  Tensor y = empty({rows, cols}), operand = empty({rows, cols}, DType::bf16);
  for (auto _ : state) {
    std::copy_n(x.data<float>(), rows * cols, y.data<float>());
    softmax_rows_in_place_with_bf16(y.data<float>(), nullptr, operand.data<BFloat16>(), rows, cols);
    benchmark::DoNotOptimize(operand.data<BFloat16>());
  }
}
BENCHMARK(BM_SoftmaxRowsWithBf16)->Args({3072, 64})->Args({14336, 14})->ArgNames({"rows", "cols"})->UseRealTime();

void BM_SoftmaxThenBf16(benchmark::State& state) {
  const Tensor x = randn({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(to(softmax_forward(x, -1, false), DType::bf16));
}
BENCHMARK(BM_SoftmaxThenBf16)->Args({3072, 64})->Args({14336, 14})->ArgNames({"rows", "cols"})->UseRealTime();

void BM_SoftmaxBackward(benchmark::State& state) {
  const Tensor y = softmax(randn({state.range(0), state.range(1)}), -1), g = randn({state.range(0), state.range(1)});
  for (auto _ : state) benchmark::DoNotOptimize(softmax_backward_data(y, g, -1));
}
BENCHMARK(BM_SoftmaxBackward)->Args({8192, 128})->Args({12, 6})->ArgNames({"rows", "cols"})->UseRealTime();

// oneDNN 2.6's own softmax backward, the one the fused kernel replaces (peer measurement: the
// primitive is built directly here, outside the engine).
void BM_SoftmaxBackwardOneDnn(benchmark::State& state) {
  using dnnl::memory;
  const memory::desc md = onednn::f32_desc({state.range(0), state.range(1)});
  const auto& engine = onednn::cpu_engine();
  const dnnl::softmax_forward::primitive_desc hint(
      dnnl::softmax_forward::desc(dnnl::prop_kind::forward_training, md, 1), engine);
  const dnnl::softmax_backward::primitive_desc pd(dnnl::softmax_backward::desc(md, md, 1), engine, hint);
  const dnnl::softmax_backward backward(pd);
  const Tensor y = softmax(randn({state.range(0), state.range(1)}), -1), g = randn(y.shape()), dx = empty(y.shape());
  memory my(md, engine, y.raw_data()), mg(md, engine, g.raw_data()), mdx(md, engine, dx.raw_data());
  dnnl::stream stream(engine);
  for (auto _ : state) {
    backward.execute(stream, {{DNNL_ARG_DST, my}, {DNNL_ARG_DIFF_DST, mg}, {DNNL_ARG_DIFF_SRC, mdx}});
    stream.wait();
  }
  state.SetLabel(pd.impl_info_str());
}
BENCHMARK(BM_SoftmaxBackwardOneDnn)->Args({8192, 128})->Args({12, 6})->ArgNames({"rows", "cols"})->UseRealTime();

// ---- layer_norm forward + backward over the last dim, with weight and bias.
void BM_LayerNorm(benchmark::State& state) {
  onednn::set_enabled(state.range(2) != 0);
  const int64_t rows = state.range(0), cols = state.range(1);
  const Tensor x = randn({rows, cols}).requires_grad_(), w = ones({cols}).requires_grad_(),
               b = zeros({cols}).requires_grad_(), g = randn({rows, cols});
  for (auto _ : state) {
    layer_norm(x, {cols}, w, b).backward(g);
    for (const Tensor* t : {&x, &w, &b}) t->set_grad({});
  }
  onednn::set_enabled(true);
}
BENCHMARK(BM_LayerNorm)
    ->ArgsProduct({{6, 32, 1024}, {16, 128, 256}, {0, 1}})
    ->ArgNames({"rows", "cols", "onednn"})
    ->UseRealTime();

}  // namespace
}  // namespace ag

BENCHMARK_MAIN();
