// The G2P task's model, decoding and schedule (the data and metrics: g2p_data_test.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numbers>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/kernels/bf16.h"
#include "engine/ops/shape.h"
#include "engine/threads.h"
#include "nn/checkpoint.h"
#include "tasks/g2p/data.h"
#include "tasks/g2p/decode.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/model.h"
#include "tasks/g2p/task.h"
#include "tests/reversal_pairs.h"
#include "tests/test_util.h"

namespace ag::g2p {
namespace {

Tensor ids(const Shape& shape, std::initializer_list<double> values) { return tensor(values, shape, DType::i64); }

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to_vector(), y = b.to_vector();
  EXPECT_EQ(x.size(), y.size());
  double worst = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) worst = std::max(worst, std::abs(x[i] - y[i]));
  return worst;
}

ModelConfig tiny_config() {
  return {.source_vocab = 9,
          .target_vocab = 12,
          .transformer = {.d_model = 16,
                          .nhead = 2,
                          .num_encoder_layers = 2,
                          .num_decoder_layers = 2,
                          .dim_feedforward = 32,
                          .dropout = 0.1},
          .max_len = 64};
}

// Words of 1–7 symbols from 1..8, drawn from a seeded generator.
std::vector<Ids> random_sources(int64_t count, uint64_t seed) {
  Generator gen(seed);
  std::vector<Ids> sources;
  for (int64_t i = 0; i < count; ++i) {
    Ids word(static_cast<size_t>(gen.randint(1, 8)));
    for (int64_t& id : word) id = gen.randint(1, 9);
    sources.push_back(word);
  }
  return sources;
}

// Untrained weights decode to near-ties that any rounding could flip; sharpen them so decoding
// has clear winners, as a trained model's.
std::unique_ptr<G2PTransformer> sharpened_model(uint64_t seed) {
  Generator gen(seed);
  auto model = std::make_unique<G2PTransformer>(tiny_config(), gen);
  NoGradGuard no_grad;
  model->out->weight.mul_(8.0);
  // As trained models never do, the untrained one would pick <pad> and <bos>, which greedy decoding
  // takes (the peer's rule) and beam search never does.
  model->out->bias.set({kPad}, -1e4);
  model->out->bias.set({kBos}, -1e4);
  model->eval();
  return model;
}

TEST(G2PSchedule, WarmsUpLinearlyThenFollowsTheCosineToTheFloor) {
  // The peer's cosine_lr with S = 100 steps, W = round(0.04 · 100) = 4.
  EXPECT_DOUBLE_EQ(learning_rate(0, 100, 1e-3, 1e-5, 0.04), 1e-3 / 4);
  EXPECT_DOUBLE_EQ(learning_rate(3, 100, 1e-3, 1e-5, 0.04), 1e-3);
  EXPECT_DOUBLE_EQ(learning_rate(4, 100, 1e-3, 1e-5, 0.04), 1e-3);  // progress 0: the peak
  const double middle = 1e-5 + (1e-3 - 1e-5) * 0.5 * (1 + std::cos(std::numbers::pi * 47.0 / 95.0));
  EXPECT_DOUBLE_EQ(learning_rate(51, 100, 1e-3, 1e-5, 0.04), middle);
  EXPECT_DOUBLE_EQ(learning_rate(99, 100, 1e-3, 1e-5, 0.04), 1e-5);  // the last step: the floor
  EXPECT_DOUBLE_EQ(learning_rate(0, 10, 1e-3, 1e-5, 0.04), 1e-3);    // W = max(1, round(0.4)) = 1
}

TEST(G2PModel, PaddingChangesNoWordsLogits) {
  // A word's logits alone and inside a padded batch with longer words: the key-padding masks of the
  // encoder, the decoder's self-attention and the cross-attention hide every pad.
  const auto owner = sharpened_model(3);
  G2PTransformer& model = *owner;
  NoGradGuard no_grad;
  const Tensor alone = model.forward(ids({1, 3}, {4, 2, 7}), ids({1, 2}, {kBos, 5}));
  const Tensor batch =
      model.forward(ids({2, 5}, {4, 2, 7, 0, 0, 1, 3, 3, 8, 6}), ids({2, 4}, {kBos, 5, 0, 0, kBos, 4, 9, 10}));
  const Tensor row = slice(slice(batch, 0, 0, 1), 1, 0, 2);  // (1, 2, V)
  EXPECT_LT(max_abs_diff(alone, row), 1e-5);
}

TEST(G2PModel, ThePresetsBuildFromTheirCheckpointsWithinTheMemoryBudget) {
  // A checkpoint's model is built under an AllocationBudget tied to the tensors it holds; the
  // initialisation's temporaries (each matrix drawn by Linear, the Transformer's and the peer's
  // xavier_uniform_) must not count against it once freed.
  const TempDir temp;
  const std::string path = (temp / "small.safetensors").string();
  ModelConfig config = preset_config("small");
  config.source_vocab = 28;
  config.target_vocab = 42;
  G2PTransformer model(config);
  EXPECT_EQ(model.num_parameters(), 940586);  // the peer's count for the small preset
  nn::save(path, model, "{}");
  const nn::Checkpoint checkpoint = nn::read_checkpoint(path);
  EXPECT_NO_THROW(nn::build_from_config(checkpoint, path, [&] { return std::make_unique<G2PTransformer>(config); }));
}

// 70 words: the cache's 70 rows shrink to 64 and 32 as words finish (Stepper's kRowQuantum), finished
// rows decoded beside the live ones until then.
TEST(G2PDecode, CachedDecodingEqualsRecomputationTokenForToken) {
  const auto owner = sharpened_model(5);
  G2PTransformer& model = *owner;
  const std::vector<Ids> sources = random_sources(70, 11);
  for (const int64_t beam : {1, 3}) {
    const std::vector<Ids> cached = decode_batch(model, sources, {.beam = beam, .max_extra = 4});
    const std::vector<Ids> recomputed =
        decode_batch(model, sources, {.beam = beam, .max_extra = 4, .use_cache = false});
    EXPECT_EQ(cached, recomputed) << "beam " << beam;
    int64_t tokens = 0;
    for (const Ids& ids : cached) tokens += static_cast<int64_t>(ids.size());
    EXPECT_GT(tokens, 70) << "the outputs should not be all empty";
  }
}

// Pronouncer's scores (teacher forcing over a whole output) against the cached decoder's own
// step-by-step logits: each greedy token's log-probability, the largest at its position, and the end's.
TEST(G2PDecode, OutputLogProbabilitiesAreTheStepByStepDecodersOwn) {
  const auto owner = sharpened_model(7);
  G2PTransformer& model = *owner;
  const std::vector<Ids> sources = random_sources(6, 13);
  const std::vector<Ids> outputs = decode_batch(model, sources, {.max_extra = 4});
  const std::vector<std::vector<double>> scores = output_log_probabilities(model, sources, outputs);
  NoGradGuard no_grad;
  for (size_t w = 0; w < sources.size(); ++w) {
    Tensor source = zeros({1, static_cast<int64_t>(sources[w].size())}, DType::i64);
    std::copy(sources[w].begin(), sources[w].end(), source.data<int64_t>());
    nn::DecoderCache cache = model.start_decoding(model.encode(source), source);
    ASSERT_EQ(scores[w].size(), outputs[w].size() + 1);
    double last = kBos;
    for (size_t t = 0; t <= outputs[w].size(); ++t) {
      const std::vector<double> logits = model.decode_step(ids({1}, {last}), cache).to_vector();  // (1, V)
      const double top = *std::max_element(logits.begin(), logits.end());
      double sum = 0;
      for (const double x : logits) sum += std::exp(x - top);
      const int64_t token = t < outputs[w].size() ? outputs[w][t] : kEos;
      EXPECT_NEAR(scores[w][t], logits[static_cast<size_t>(token)] - top - std::log(sum), 1e-5) << w << " " << t;
      if (t < outputs[w].size()) {
        EXPECT_EQ(std::max_element(logits.begin(), logits.end()) - logits.begin(), token) << "greedy's choice";
      }
      last = static_cast<double>(token);
    }
  }
}

TEST(G2PDecode, BeamOfOneEqualsGreedy) {
  const auto owner = sharpened_model(7);
  G2PTransformer& model = *owner;
  const std::vector<Ids> sources = random_sources(40, 13);
  EXPECT_EQ(decode_batch(model, sources, {.beam = 1, .max_extra = 4, .beam_search = true}),
            decode_batch(model, sources, {.beam = 1, .max_extra = 4}));
}

TEST(G2PDecode, BatchesAndOrderDoNotChangeTheResult) {
  const auto owner = sharpened_model(9);
  G2PTransformer& model = *owner;
  const std::vector<Ids> sources = random_sources(30, 17);
  std::vector<Ids> one_by_one;
  for (const Ids& s : sources) one_by_one.push_back(decode_batch(model, {s}, {.max_extra = 4})[0]);
  EXPECT_EQ(decode_all(model, sources, {.max_extra = 4}, 7), one_by_one);
}

// With two threads decode_all gives whole batches to two workers (the second with a copy of the
// model), each on one OpenMP thread: the same outputs as one thread, greedy and beam, in f32 and
// under autocast; progress counted up to every word; no draw from the default generator; the
// caller's thread count back; and a failing batch's error rethrown on the caller's thread.
TEST(G2PDecode, TwoThreadsDecodeAsOne) {
  const auto owner = sharpened_model(9);
  G2PTransformer& model = *owner;
  const std::vector<Ids> sources = random_sources(61, 23);
  const int threads = get_num_threads();
  for (const bool bf16 : {false, true}) {
    if (bf16 && !cpu_has_avx512_bf16()) continue;  // autocast needs AVX512_BF16
    const AutocastGuard autocast(bf16);
    for (const int64_t beam : {1, 3}) {
      set_num_threads(1);
      const std::vector<Ids> one = decode_all(model, sources, {.beam = beam, .max_extra = 4}, 8);
      set_num_threads(2);
      const uint64_t before = default_generator().state().counter;
      std::vector<int64_t> progress;
      const std::vector<Ids> two =
          decode_all(model, sources, {.beam = beam, .max_extra = 4}, 8, [&](int64_t n) { progress.push_back(n); });
      EXPECT_EQ(two, one) << "beam " << beam << (bf16 ? " bf16" : " f32");
      EXPECT_EQ(default_generator().state().counter, before);
      EXPECT_EQ(get_num_threads(), 2);
      ASSERT_EQ(progress.size(), 8u);
      EXPECT_TRUE(std::is_sorted(progress.begin(), progress.end()));
      EXPECT_EQ(progress.back(), 61);
    }
  }
  std::vector<Ids> too_long = sources;
  too_long.push_back(Ids(70, 1));  // sorted last: the last batch fails
  set_num_threads(2);
  expect_error([&] { decode_all(model, too_long, {.max_extra = 4}, 8); }, {"70 tokens", "64 positions"});
  EXPECT_EQ(get_num_threads(), 2);
  set_num_threads(threads);
}

TEST(G2PDecode, StopsAtTheLengthLimit) {
  const auto owner = sharpened_model(9);
  G2PTransformer& model = *owner;
  for (const Ids& out : decode_batch(model, random_sources(30, 19), {.beam = 2, .max_extra = 0}))
    EXPECT_LE(out.size(), 7u);
  const std::vector<Ids> sources = random_sources(30, 19);
  const std::vector<Ids> outputs = decode_batch(model, sources, {.max_extra = 2});
  for (size_t i = 0; i < sources.size(); ++i) EXPECT_LE(outputs[i].size(), sources[i].size() + 2);
}

// A tiny model learns to spell 3–6 letter strings backwards (every string of a 4-letter alphabet:
// 5,440; the hash split holds 10% out for test): the whole pipeline, from a TSV file to test WER.
TEST(G2PTrain, ATinyModelLearnsToReverseStrings) {
  const TempDir temp;
  const std::string dir = static_cast<const std::filesystem::path&>(temp).string();
  const std::string data = dir + "/reverse.tsv";
  std::vector<std::string> words;
  const std::string letters = "abcd";
  for (int length = 3; length <= 6; ++length) {
    int64_t count = 1;
    for (int i = 0; i < length; ++i) count *= 4;
    for (int64_t code = 0; code < count; ++code) {
      std::string& word = words.emplace_back();
      for (int64_t c = code, i = 0; i < length; ++i, c /= 4) word += letters[static_cast<size_t>(c % 4)];
    }
  }
  write_reversal_pairs(data, words);
  G2POptions options;
  options.data = data;
  options.training.out = dir + "/run";
  options.training.epochs = 20;
  options.training.batch_size = 64;
  options.training.lr = 3e-3;
  options.training.quiet = true;
  options.model = {.transformer = {.d_model = 32,
                                   .nhead = 2,
                                   .num_encoder_layers = 1,
                                   .num_decoder_layers = 1,
                                   .dim_feedforward = 64,
                                   .dropout = 0.0}};
  options.warmup_frac = 0.05;
  options.report = false;
  const int threads = get_num_threads();
  set_num_threads(1);  // ctest runs two suites at once: one thread each is faster than four on two cores
  const int status = train(options);
  set_num_threads(threads);
  ASSERT_EQ(status, 0);
  // The best epoch's validation WER, as the Trainer recorded it.
  std::ifstream metrics(options.training.out + "/metrics.csv");
  std::string header, line, last;
  std::getline(metrics, header);
  double best_wer = 100;
  const auto column = [&](const std::string& name) {
    size_t index = 0, start = 0;
    for (size_t end; (end = header.find(',', start)) != std::string::npos; start = end + 1, ++index)
      if (header.substr(start, end - start) == name) return index;
    return index;
  };
  const size_t wer = column("val_wer");
  while (std::getline(metrics, line)) {
    size_t start = 0;
    for (size_t i = 0; i < wer; ++i) start = line.find(',', start) + 1;
    best_wer = std::min(best_wer, std::stod(line.substr(start)));
  }
  EXPECT_EQ(best_wer, 0.0) << "the model should reverse every validation string";
}

}  // namespace
}  // namespace ag::g2p
