// `attograd bench attention`: times seed 003's causal multi-head attention block (W_query,
// W_key, W_value without bias, heads, causal mask, softmax(scores / √head_dim), out_proj with
// bias; loss = output.sum()) forward, and forward + backward, as ../shared/peer/attn_bench_torch.py
// does for PyTorch: x requires grad, gradients are reset every iteration, medians over --iters.
// `attograd bench transformer`: the peer's Transformer training step (d_model 256, 8 heads, 2+2
// layers, feed-forward 1024, no dropout; B = 16, S = T = 64; causal target mask; MSE; Adam).
// Both print the achieved GFLOP/s beside the time and the process's peak resident memory; with
// --precision bf16 they run under ag::AutocastGuard (bf16 products, f32 results).
// `attograd bench cpus`: how far apart the first two CPUs this process may run on are, as the round
// trip of a cache line between them (Note [near and far CPUs]).
//
// Note [counting FLOPs]: a workload's FLOPs are counted once, here, from its shapes: 2 per
// multiply-add of its matrix products and nothing else (softmax, masks, bias, layer norm and the
// optimizer are not counted). Attention's two products (q @ kᵀ, weights @ v) count as dense
// (T, S) products even when causal, as the materialising kernel computes them: the streaming one
// skips the blocks above the diagonal, and the time it saves shows as a higher rate. A backward
// counts twice its forward (two products per forward product; the streaming kernel's recomputed
// q @ kᵀ is not counted).
#include <fmt/format.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "engine/attograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/loss.h"
#include "engine/ops/mask.h"
#include "engine/ops/matmul.h"
#include "engine/ops/reduce.h"
#include "engine/ops/shape.h"
#include "engine/parts.h"
#include "engine/profile.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "tasks/common/memory.h"
#include "tools/commands.h"
#include "tools/timing.h"

namespace ag::cli {

namespace {

struct BenchArgs {
  std::string workload;
  std::string shape = "1,6,16,2";
  std::string kernel = "automatic";
  std::string precision = "f32";
  int iters = 20;
  int profile = 0;  // transformer: steps profiled by op after the timed ones
  int parts = 1;    // transformer: the batch in this many parts, run at once by thread (ag::run_parts)
  bool json = false;
};

// Note [counting FLOPs]: 2 per multiply-add, forward + backward = 3 × forward.
constexpr double kForwardAndBackward = 3;

// q, k, v and out projections (B·T, d) @ (d, d), and the dense attention products.
double attention_block_forward_flops(double B, double T, double d) {
  return 4 * 2 * B * T * d * d + 2 * 2 * B * T * T * d;
}

// nn::Transformer (d_model d, feed-forward ff, `encoders` + `decoders` layers) on B sequences of
// S source and T target tokens: per layer the attention blocks (self; a decoder's cross attention
// too, over S keys) and the two feed-forward products.
double transformer_forward_flops(double B, double S, double T, double d, double ff, int encoders, int decoders) {
  const double encoder = attention_block_forward_flops(B, S, d) + 2 * 2 * B * S * d * ff;
  const double cross = 4 * 2 * B * T * d * d + 2 * 2 * B * T * S * d;  // (q, out over T; k, v over S: as many)
  const double decoder = attention_block_forward_flops(B, T, d) + cross + 2 * 2 * B * T * d * ff;
  return encoders * encoder + decoders * decoder;
}

double gflops_per_s(double flops, double ms) { return flops / (ms * 1e6); }

double peak_resident_mb() { return tasks::peak_resident_bytes() / (1024 * 1024); }

AttentionKernel parse_kernel(const std::string& name) {
  if (name == "streaming") return AttentionKernel::streaming;
  if (name == "materialising") return AttentionKernel::materialising;
  return AttentionKernel::automatic;
}

struct Block {
  int64_t B, T, d, h;
  Tensor x, w_query, w_key, w_value, w_out, b_out;
  AttentionKernel kernel = AttentionKernel::automatic;
};

// "B,T,d,h" → {B, T, d, h}: positive sizes, h dividing d.
Shape parse_attention_shape(const std::string& text) {
  std::string sizes = text;
  std::replace(sizes.begin(), sizes.end(), ',', 'x');
  Shape s;
  try {
    s = parse_shape(sizes);
  } catch (const Error&) {
  }
  AG_CHECK(s.size() == 4 && s[0] > 0 && s[1] > 0 && s[2] > 0 && s[3] > 0 && s[2] % s[3] == 0,
           "--shape: expected B,T,d,h with positive sizes and h dividing d, got '{}'", text);
  const auto fits = [](const Shape& shape) {  // numel's count, without its message about a shape
    int64_t n = 1;
    return std::none_of(shape.begin(), shape.end(), [&](int64_t size) { return __builtin_mul_overflow(n, size, &n); });
  };
  AG_CHECK(fits({s[0], s[1], s[2]}) && fits({s[0], s[3], s[1], s[1]}),
           "--shape: B,T,d,h = {}: the block's tensors would have more elements than a tensor can hold (2^63 - 1: "
           "the input B*T*d and the attention weights B*h*T*T)",
           text);
  return s;
}

Block make_block(const Shape& s) {
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
  const Tensor context = scaled_dot_product_attention(heads(b.w_query), heads(b.w_key), heads(b.w_value),
                                                      {.is_causal = true, .kernel = b.kernel})
                             .output;                                        // (B, h, T, hd)
  const Tensor merged = reshape(transpose(context, 1, 2), {b.B, b.T, b.d});  // (B, T, d)
  return add(matmul(merged, b.w_out, false, true), b.b_out);                 // (B, T, d)
}

// Median and min of `iters` timings of f, in ms, after a warm-up.
std::pair<double, double> time_ms(const std::function<void()>& f, int iters) {
  for (int i = 0; i < std::max(3, iters / 4); ++i) f();
  const std::vector<double> times = sorted_times_ms(iters, f);
  return {times[times.size() / 2], times.front()};
}

int run_attention(const BenchArgs& args) {
  Block b = make_block(parse_attention_shape(args.shape));
  b.kernel = parse_kernel(args.kernel);
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
  const double flops = attention_block_forward_flops(b.B, b.T, b.d);  // Note [counting FLOPs]
  const double fwd_rate = gflops_per_s(flops, fwd), fwdbwd_rate = gflops_per_s(kForwardAndBackward * flops, fwdbwd);
  if (args.json) {
    fmt::print(R"({{"name": "{}", "shape": [{}, {}, {}, {}], "threads": {}, "kernel": "{}", "precision": "{}", )"
               R"("fwd_ms": {:.5f}, )"
               R"("fwdbwd_ms": {:.5f}, "fwd_gflops": {:.4f}, "fwdbwd_gflops": {:.4f}, "fwd_gflop_per_s": {:.2f}, )"
               R"("fwdbwd_gflop_per_s": {:.2f}, "peak_rss_mb": {:.1f}}})"
               "\n",
               name, b.B, b.T, b.d, b.h, get_num_threads(), args.kernel, args.precision, fwd, fwdbwd, flops / 1e9,
               kForwardAndBackward * flops / 1e9, fwd_rate, fwdbwd_rate, peak_resident_mb());
  } else {
    fmt::print(
        "{} threads={} iters={} kernel={} precision={}: fwd median {:.4f} ms (min {:.4f}) {:.1f} GFLOP/s, fwd+bwd "
        "median {:.4f} ms (min {:.4f}) {:.1f} GFLOP/s; peak resident {:.0f} MB\n",
        name, get_num_threads(), iters, args.kernel, args.precision, fwd, fwd_min, fwd_rate, fwdbwd, fwdbwd_min,
        fwdbwd_rate, peak_resident_mb());
  }
  return 0;
}

int run_transformer(const BenchArgs& args) {
  manual_seed(0);
  const nn::TransformerOptions o{.d_model = 256,
                                 .nhead = 8,
                                 .num_encoder_layers = 2,
                                 .num_decoder_layers = 2,
                                 .dim_feedforward = 1024,
                                 .dropout = 0.0};
  constexpr int64_t kBatch = 16, kTokens = 64;  // S = T
  nn::Transformer model(o);
  nn::Adam optimizer(model.parameters(), {.lr = 1e-4});
  const Tensor src = randn({kBatch, kTokens, o.d_model}), tgt = randn({kBatch, kTokens, o.d_model}),
               target = randn({kBatch, kTokens, o.d_model});
  nn::TransformerMasks masks;
  masks.tgt_mask = causal_mask(kTokens);
  // The forward and backward of the whole batch, or of its parts on their threads, each part's
  // mean loss weighted by its share of the batch (the same gradient).
  const auto forward_and_backward = [&] {
    if (args.parts == 1) return mse_loss(model(src, tgt, masks), target).backward();
    run_parts(args.parts, [&](int part) {
      const int64_t begin = kBatch * part / args.parts, end = kBatch * (part + 1) / args.parts;
      const Tensor loss =
          mse_loss(model(slice(src, 0, begin, end), slice(tgt, 0, begin, end), masks), slice(target, 0, begin, end));
      mul(loss, static_cast<double>(end - begin) / kBatch).backward();
    });
  };
  const auto [step, step_min] = time_ms(
      [&] {
        optimizer.zero_grad();
        forward_and_backward();
        optimizer.step();
      },
      args.iters);
  std::string profile;
  if (args.profile > 0) {
    Profiler profiler;
    for (int i = 0; i < args.profile; ++i) {
      profiler.section("(optimizer: zero_grad)", [&] { optimizer.zero_grad(); });
      forward_and_backward();
      profiler.section("(optimizer: Adam step)", [&] { optimizer.step(); });
    }
    profile = fmt::format(
        "where a step's time goes, by op ({} steps after the timed ones{}):\n{}", args.profile,
        args.parts == 1 ? "" : "; part 0's ops alone: the wait for the other parts and their sum are outside it",
        profiler.table(args.profile));
  }
  const double flops =
      kForwardAndBackward * transformer_forward_flops(kBatch, kTokens, kTokens, o.d_model, o.dim_feedforward,
                                                      o.num_encoder_layers, o.num_decoder_layers);
  if (args.json) {
    fmt::print(R"({{"name": "transformer_step", "threads": {}, "parts": {}, "precision": "{}", "step_ms": {:.5f}, )"
               R"("step_gflops": {:.4f}, "step_gflop_per_s": {:.2f}, "peak_rss_mb": {:.1f}}})"
               "\n",
               get_num_threads(), args.parts, args.precision, step, flops / 1e9, gflops_per_s(flops, step),
               peak_resident_mb());
    fmt::print(stderr, "{}", profile);
  } else {
    fmt::print(
        "transformer_step threads={} parts={} iters={} precision={}: train step median {:.3f} ms (min {:.3f}) {:.1f} "
        "GFLOP/s; peak resident {:.0f} MB\n",
        get_num_threads(), args.parts, args.iters, args.precision, step, step_min, gflops_per_s(flops, step),
        peak_resident_mb());
    fmt::print("{}", profile);
  }
  return 0;
}

// Note [near and far CPUs]
// A virtual machine's two vCPUs may sit on cores that share a cache or on cores that do not, and the
// host moves them between the two now and then: on this project's 2-vCPU EPYC a cache line's round
// trip between them reads about 100 ns in some minutes and 380 ns in others. Where they sit far
// apart, every value one thread writes and the other reads crosses between caches, and a 2-thread
// step slows (a bf16 Transformer step 32.4 → 37.8 ms, medians, tools/bench/README.md "Near and far CPUs").
// The compare scripts print this round trip beside each run, so a reader can tell the two apart.

// Pins the calling thread to `cpu`; false where the process may not run there.
bool pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0;
}

// The first two CPUs this process may run on, or fewer.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE && cpus.size() < 2; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  return cpus;
}

// ns per round trip of one cache line between CPUs a and b: a thread on each hands a flag back and
// forth `trips` times. Fails where a thread cannot be pinned, or where the round takes over a
// second: the two threads do not run at once (a CPU quota of one CPU), and the round would crawl.
double round_trip_ns(int a, int b, int trips) {
  enum : int { kTheirs = 1, kOurs = 0, kStop = -1 };  // whose turn the flag says it is
  alignas(64) std::atomic<int> flag{kOurs};
  std::atomic<bool> pinned{false};
  std::thread other([&] {
    pinned = pin_to(b);
    for (int i = 0; i < trips; ++i) {
      int seen;
      while ((seen = flag.load(std::memory_order_acquire)) == kOurs) {
      }
      if (seen == kStop) return;
      flag.store(kOurs, std::memory_order_release);
    }
  });
  const bool pinned_here = pin_to(a);
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + std::chrono::seconds(1);
  int done = 0;
  for (; done < trips; ++done) {
    flag.store(kTheirs, std::memory_order_release);
    while (flag.load(std::memory_order_acquire) != kOurs) {
    }
    if (done % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
  }
  const std::chrono::duration<double, std::nano> elapsed = std::chrono::steady_clock::now() - start;
  flag.store(kStop, std::memory_order_release);
  other.join();
  AG_CHECK(pinned_here && pinned, "bench cpus: could not pin a thread to CPU {} and one to CPU {}", a, b);
  AG_CHECK(done == trips,
           "bench cpus: {} round trips took over a second: the threads on CPUs {} and {} do not run at once "
           "(a CPU quota of one CPU?)",
           done, a, b);
  return elapsed.count() / trips;
}

int run_cpus(const BenchArgs& args) {
  const std::vector<int> cpus = allowed_cpus();
  if (cpus.size() < 2) {
    fmt::print(stderr, "bench cpus: this process may run on {} CPU(s); the round trip needs two\n", cpus.size());
    return 1;
  }
  constexpr int kTrips = 100000;
  std::vector<double> rounds;
  for (int i = 0; i < args.iters; ++i) rounds.push_back(round_trip_ns(cpus[0], cpus[1], kTrips));
  std::sort(rounds.begin(), rounds.end());
  const double median = rounds[rounds.size() / 2];
  if (args.json)
    fmt::print(R"({{"name": "cpus", "cpus": [{}, {}], "rounds": {}, "round_trip_ns": {:.1f}}})"
               "\n",
               cpus[0], cpus[1], args.iters, median);
  else
    fmt::print("cpus {} and {}: a cache line's round trip {:.1f} ns (median of {} rounds of {} trips)\n", cpus[0],
               cpus[1], median, args.iters, kTrips);
  return 0;
}

}  // namespace

Command add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time a whole workload (medians; see tools/bench/ for the kernels)");
  cmd->add_option("workload", args->workload,
                  "What to time: attention (the block), transformer (a training step) or cpus (a cache line's "
                  "round trip between the first two CPUs: are they near or far apart?)")
      ->required()
      ->check(CLI::IsMember({"attention", "transformer", "cpus"}));
  CLI::Option* shape = cmd->add_option("--shape", args->shape, "attention: B,T,d,h: batch, tokens, model width, heads")
                           ->capture_default_str();
  cmd->add_option("--iters", args->iters, "Timed iterations (x10 for T <= 6; cpus: rounds of 100000 trips)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  CLI::Option* kernel =
      cmd->add_option("--kernel", args->kernel,
                      "attention: the op's kernel (Note [streaming attention] in engine/ops/attention.h)")
          ->check(CLI::IsMember({"automatic", "streaming", "materialising"}))
          ->capture_default_str();
  cmd->add_option("--precision", args->precision,
                  "f32, or bf16: the products with bf16 operands (ag::AutocastGuard; CPUs with AVX512_BF16)")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  CLI::Option* profile =
      cmd->add_option("--profile", args->profile,
                      "transformer: after the timed steps, profile N more and print where the time goes by op "
                      "(self time share, calls, ms, GFLOP/s, GB/s, MB allocated per step; stderr with --json)")
          ->check(CLI::Range(1, 1000));
  CLI::Option* parts =
      cmd->add_option("--parts", args->parts,
                      "transformer: split the batch (16 sequences) in N parts, each part's forward and backward on "
                      "a thread of its own, the gradients summed once (ag::run_parts); 1: every op split by thread")
          ->check(CLI::Range(1, 16))
          ->capture_default_str();
  cmd->add_flag("--json", args->json,
                "One JSON object: name, shape, threads, kernel, times (ms), GFLOP, GFLOP/s, peak_rss_mb");
  CLI::Option* precision = cmd->get_option("--precision");
  cmd->callback([args, shape, kernel, profile, precision, parts] {  // usage errors (exit 2) before any work
    if (args->workload != "attention" && shape->count() + kernel->count() > 0)
      throw CLI::ValidationError("--shape and --kernel",
                                 fmt::format("apply to `bench attention` only, not to `bench {}`", args->workload));
    if (args->workload != "transformer" && profile->count() > 0)
      throw CLI::ValidationError("--profile", "applies to `bench transformer` only");
    if (args->workload != "transformer" && parts->count() > 0)
      throw CLI::ValidationError("--parts", "applies to `bench transformer` only");
    if (args->workload == "cpus" && precision->count() > 0)
      throw CLI::ValidationError("--precision", "does not apply to `bench cpus`, which times no arithmetic");
    if (args->workload == "cpus" && args->iters > 100)
      throw CLI::ValidationError("--iters", fmt::format("bench cpus takes at most 100 rounds, got {}", args->iters));
    try {
      parse_attention_shape(args->shape);
    } catch (const Error& e) {
      throw CLI::ValidationError(e.what());
    }
  });
  return {cmd, [args] {
            const AutocastGuard autocast(args->precision == "bf16");
            if (args->workload == "cpus") return run_cpus(*args);
            return args->workload == "attention" ? run_attention(*args) : run_transformer(*args);
          }};
}

}  // namespace ag::cli
