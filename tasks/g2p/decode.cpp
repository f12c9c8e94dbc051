#include "tasks/g2p/decode.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "engine/autocast.h"
#include "engine/autograd.h"
#include "engine/ops/index.h"
#include "engine/ops/shape.h"
#include "engine/threads.h"
#include "tasks/g2p/data.h"

namespace ag::g2p {

namespace {

// Rows of ids padded with kPad to the longest → (N, L) i64.
Tensor padded(const std::vector<Ids>& rows) {
  size_t width = 1;
  for (const Ids& r : rows) width = std::max(width, r.size());
  Tensor out = zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, DType::i64);
  int64_t* p = out.data<int64_t>();
  for (size_t i = 0; i < rows.size(); ++i) std::copy(rows[i].begin(), rows[i].end(), p + i * width);
  return out;
}

Tensor ids_tensor(const Ids& ids) {
  Tensor out = empty({static_cast<int64_t>(ids.size())}, DType::i64);
  std::copy(ids.begin(), ids.end(), out.data<int64_t>());
  return out;
}

// Decodes position by position; `next` gets each live row's logits (rows, V) as f32/f64 values
// and the step. Either from the cache or by re-running the prefix. Logits that are not finite (a model
// whose weights overflow) are an error: no token can be chosen from them.
//
// The cache's rows come in multiples of kRowQuantum (the live rows, and rows whose word is done, or
// copies of the last live row, computed and ignored): the products then meet a few row counts, whose
// oneDNN primitives are made once, instead of one per count of live rows (873 made while decoding the
// 12,433 test words). So a finished row keeps its place until the live rows fit a smaller multiple,
// and only then, or when beam search repeats a row, is the cache compacted (DecoderCache::select).
// A row's numbers do not depend on the others': the outputs are those of a cache of live rows alone.
class Stepper {
 public:
  static constexpr int64_t kRowQuantum = 32;

  Stepper(G2PTransformer& model, const std::vector<Ids>& sources, bool use_cache)
      : model_(model), use_cache_(use_cache), source_(padded(sources)) {
    if (use_cache_) cache_ = model.start_decoding(model.encode(source_), source_);  // memory (N, S, D) once
    rows_.resize(sources.size());
    std::iota(rows_.begin(), rows_.end(), 0);
    places_ = rows_;
    prefixes_.assign(sources.size(), Ids{kBos});
  }

  // Keeps these live rows (indices into the current rows, repeats allowed), each then extended by
  // one token; returns the next logits (rows, V) as doubles.
  std::vector<double> step(const std::vector<int64_t>& keep, const Ids& tokens) {
    std::vector<int64_t> rows, places;
    std::vector<Ids> prefixes;
    for (size_t i = 0; i < keep.size(); ++i) {
      rows.push_back(rows_[static_cast<size_t>(keep[i])]);
      places.push_back(places_[static_cast<size_t>(keep[i])]);
      prefixes.push_back(prefixes_[static_cast<size_t>(keep[i])]);
      prefixes.back().push_back(tokens[i]);
    }
    rows_ = std::move(rows);
    places_ = std::move(places);
    prefixes_ = std::move(prefixes);
    return logits(tokens);
  }

  // The first step's logits: every row after <bos>.
  std::vector<double> first() { return logits(Ids(rows_.size(), kBos)); }

 private:
  std::vector<double> logits(const Ids& tokens) {
    std::vector<double> values = use_cache_ ? cached_logits(tokens) : recomputed_logits();
    const auto bad = std::find_if(values.begin(), values.end(), [](double x) { return !std::isfinite(x); });
    AG_CHECK(bad == values.end(),
             "g2p decode: the model's logits are not finite ({} at output position {}): its weights overflow the "
             "computation, so it has no pronunciation to give; retrain, or use a checkpoint of an earlier epoch",
             std::isnan(*bad) ? "NaN"
             : *bad > 0       ? "+Inf"
                              : "-Inf",
             prefixes_.empty() ? 0 : prefixes_.front().size());
    return values;
  }

  // The live rows' next logits from the cache, each row's token fed at its place.
  std::vector<double> cached_logits(const Ids& tokens) {
    NoGradGuard no_grad;
    const auto live = static_cast<int64_t>(places_.size());
    const int64_t wanted = (live + kRowQuantum - 1) / kRowQuantum * kRowQuantum;
    std::vector<int64_t> sorted = places_;
    std::sort(sorted.begin(), sorted.end());
    if (wanted < cache_.batch() || std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      std::vector<int64_t> kept = places_;  // the live rows first, then copies of the last
      kept.resize(static_cast<size_t>(wanted), places_.back());
      cache_.select(ids_tensor(kept));
      std::iota(places_.begin(), places_.end(), 0);
    }
    Ids fed(static_cast<size_t>(cache_.batch()), kPad);  // a finished row's token: anything valid
    for (size_t i = 0; i < places_.size(); ++i) fed[static_cast<size_t>(places_[i])] = tokens[i];
    const std::vector<double> all = model_.decode_step(ids_tensor(fed), cache_).to_vector();  // (cache rows, V)
    const int64_t V = model_.config.target_vocab;
    std::vector<double> values;
    values.reserve(static_cast<size_t>(live * V));
    for (const int64_t place : places_)
      values.insert(values.end(), all.begin() + place * V, all.begin() + (place + 1) * V);
    return values;
  }

  // The reference: the whole prefix again, through the teacher-forcing forward.
  std::vector<double> recomputed_logits() {
    NoGradGuard no_grad;
    const Tensor source = index_select(source_, 0, ids_tensor(rows_));
    const Tensor prefix = padded(prefixes_);            // (rows, t + 1): all one length
    const Tensor all = model_.forward(source, prefix);  // (rows, t + 1, V)
    const int64_t t = prefix.size(1);
    return squeeze(slice(all, 1, t - 1, t), 1).to_vector();
  }

  G2PTransformer& model_;
  bool use_cache_;
  Tensor source_;
  nn::DecoderCache cache_;
  std::vector<int64_t> rows_;    // the word of each live row
  std::vector<int64_t> places_;  // the cache row of each live row
  std::vector<Ids> prefixes_;    // <bos> and the tokens so far, per live row
};

int64_t first_max(const double* row, int64_t n) { return std::max_element(row, row + n) - row; }

std::vector<Ids> greedy(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& o) {
  const int64_t V = model.config.target_vocab;
  std::vector<Ids> out(sources.size());
  Stepper stepper(model, sources, o.use_cache);
  std::vector<int64_t> words(sources.size());  // the word of each live row
  std::iota(words.begin(), words.end(), 0);
  std::vector<double> logits = stepper.first();
  for (int64_t t = 0; !words.empty(); ++t) {
    std::vector<int64_t> keep, live_words;
    Ids tokens;
    for (size_t r = 0; r < words.size(); ++r) {
      const auto w = static_cast<size_t>(words[r]);
      const int64_t token = first_max(logits.data() + r * V, V);
      if (token == kEos || token == kPad) continue;  // the peer's strip_output ends at either
      out[w].push_back(token);
      if (t + 1 >= static_cast<int64_t>(sources[w].size()) + o.max_extra) continue;
      keep.push_back(static_cast<int64_t>(r));
      live_words.push_back(words[r]);
      tokens.push_back(token);
    }
    words = std::move(live_words);
    if (!words.empty()) logits = stepper.step(keep, tokens);
  }
  return out;
}

struct Hypothesis {
  double score;  // the sum of log-probabilities so far
  int64_t row;   // its live row
};

// log_softmax of a row, with <pad> and <bos> never chosen (the peer's beam search).
std::vector<double> log_probabilities(const double* row, int64_t V) {
  const double m = *std::max_element(row, row + V);
  double sum = 0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - m);
  std::vector<double> out(row, row + V);
  for (double& x : out) x = x - m - std::log(sum);
  out[kPad] = out[kBos] = -INFINITY;
  return out;
}

// A word's finished hypothesis: its tokens and their log-probability over its length (with <eos>).
struct Finished {
  double normalised;
  Ids tokens;
};

// A possible next hypothesis: live hypothesis `hyp` of a word extended by `token`.
struct Candidate {
  double score;
  int64_t hyp, token;
};

// The best 2K extensions of a word's live hypotheses (each row's logits in `logits`, V per row), by
// score (the lower hypothesis and token first on ties).
std::vector<Candidate> best_candidates(const std::vector<Hypothesis>& hyps, const std::vector<double>& logits,
                                       int64_t V, int64_t K) {
  std::vector<Candidate> candidates;
  for (size_t h = 0; h < hyps.size(); ++h) {
    const std::vector<double> logp = log_probabilities(logits.data() + hyps[h].row * V, V);
    for (int64_t v = 0; v < V; ++v)
      if (logp[static_cast<size_t>(v)] > -INFINITY)
        candidates.push_back({hyps[h].score + logp[static_cast<size_t>(v)], static_cast<int64_t>(h), v});
  }
  const size_t top = std::min(candidates.size(), static_cast<size_t>(2 * K));
  std::partial_sort(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(top), candidates.end(),
                    [](const Candidate& a, const Candidate& b) {
                      return a.score > b.score ||
                             (a.score == b.score && a.hyp * 1000 + a.token < b.hyp * 1000 + b.token);
                    });
  candidates.resize(top);
  return candidates;
}

// The tokens of the finished hypothesis with the best normalised score (none: no tokens).
Ids best_finished(const std::vector<Finished>& done) {
  const auto best = std::max_element(done.begin(), done.end(), [](const Finished& a, const Finished& b) {
    return a.normalised < b.normalised;  // the first of equal bests, as Python's max
  });
  return best != done.end() ? best->tokens : Ids{};
}

std::vector<Ids> beam_search(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& o) {
  const int64_t V = model.config.target_vocab, K = o.beam;
  std::vector<std::vector<Finished>> finished(sources.size());
  Stepper stepper(model, sources, o.use_cache);
  // Live hypotheses per live word; a word starts with one (the peer's -inf scores for the others).
  std::vector<int64_t> words(sources.size());
  std::iota(words.begin(), words.end(), 0);
  std::vector<std::vector<Hypothesis>> live(sources.size());
  std::vector<Ids> row_tokens(sources.size());  // per live row, its tokens so far
  for (size_t w = 0; w < sources.size(); ++w) live[w] = {{0.0, static_cast<int64_t>(w)}};
  std::vector<double> logits = stepper.first();
  for (int64_t t = 0; !words.empty(); ++t) {
    std::vector<int64_t> keep, next_words;
    Ids next_tokens;
    std::vector<Ids> next_row_tokens;
    for (const int64_t w : words) {
      const auto& hyps = live[static_cast<size_t>(w)];
      const std::vector<Candidate> candidates = best_candidates(hyps, logits, V, K);
      std::vector<Hypothesis> next;
      std::vector<std::pair<int64_t, int64_t>> extended;  // (row, token) of each next hypothesis
      auto& done = finished[static_cast<size_t>(w)];
      for (size_t i = 0; i < candidates.size() && static_cast<int64_t>(next.size()) < K; ++i) {
        const Candidate& c = candidates[i];
        const int64_t row = hyps[static_cast<size_t>(c.hyp)].row;
        if (c.token == kEos) {
          done.push_back({c.score / static_cast<double>(t + 1), row_tokens[static_cast<size_t>(row)]});
        } else {
          next.push_back({c.score, row});
          extended.push_back({row, c.token});
        }
      }
      const bool at_limit = t + 1 >= static_cast<int64_t>(sources[static_cast<size_t>(w)].size()) + o.max_extra;
      if (static_cast<int64_t>(done.size()) >= K) continue;
      if (at_limit) {
        for (size_t i = 0; i < next.size(); ++i) {
          Ids tokens = row_tokens[static_cast<size_t>(extended[i].first)];
          tokens.push_back(extended[i].second);
          done.push_back({next[i].score / static_cast<double>(t + 1), std::move(tokens)});
        }
        continue;
      }
      std::vector<Hypothesis> kept;
      for (size_t i = 0; i < next.size(); ++i) {
        kept.push_back({next[i].score, static_cast<int64_t>(keep.size())});
        keep.push_back(extended[i].first);
        next_tokens.push_back(extended[i].second);
        Ids tokens = row_tokens[static_cast<size_t>(extended[i].first)];
        tokens.push_back(extended[i].second);
        next_row_tokens.push_back(std::move(tokens));
      }
      live[static_cast<size_t>(w)] = std::move(kept);
      next_words.push_back(w);
    }
    words = std::move(next_words);
    row_tokens = std::move(next_row_tokens);
    if (!words.empty()) logits = stepper.step(keep, next_tokens);
  }
  std::vector<Ids> out(sources.size());
  for (size_t w = 0; w < sources.size(); ++w) out[w] = best_finished(finished[w]);
  return out;
}

}  // namespace

std::vector<Ids> decode_batch(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& o) {
  AG_CHECK(o.beam >= 1 && o.max_extra >= 0, "g2p decode: expected beam ≥ 1 and max_extra ≥ 0, got {} and {}", o.beam,
           o.max_extra);
  if (sources.empty()) return {};
  for (const Ids& s : sources)
    AG_CHECK(!s.empty() && static_cast<int64_t>(s.size()) <= model.config.max_len &&
                 static_cast<int64_t>(s.size()) + o.max_extra < model.config.max_len,
             "g2p decode: a source of {} tokens (+ {} extra) does not fit the model's {} positions", s.size(),
             o.max_extra, model.config.max_len);
  NoGradGuard no_grad;
  return o.beam == 1 && !o.beam_search ? greedy(model, sources, o) : beam_search(model, sources, o);
}

int64_t decoding_workers(int64_t words, int64_t batch_size) {
  const int64_t batches = batch_size < 1 ? 0 : (words + batch_size - 1) / batch_size;
  return std::max<int64_t>(1, std::min<int64_t>(get_num_threads(), batches));
}

namespace {

// A copy of the model for another thread: modules of its own (an attention module keeps its last
// weights), the parameters' values, the same mode. It draws (its initialisation, overwritten, and
// any dropout) from a generator of its own, so the process's generators are untouched.
struct Replica {
  explicit Replica(G2PTransformer& model) : model(model.config, generator) {
    this->model.load_state_dict(model.state_dict());
    this->model.train(model.is_training());
  }
  Generator generator{0};
  G2PTransformer model;
};

// Batches [0, count) to `workers` threads, each taking the next undecoded batch: decode(model, b)
// runs with the calling thread's autocast setting, one OpenMP thread, and the caller's model on the
// calling thread (copies on the others). The first error, in batch order, is rethrown once all stop.
void decode_concurrently(G2PTransformer& model, int64_t count, int64_t workers,
                         const std::function<void(G2PTransformer&, int64_t)>& decode) {
  const bool bf16 = autocast_enabled();
  std::atomic<int64_t> next{0};
  std::vector<std::exception_ptr> failures(static_cast<size_t>(count));
  std::atomic<bool> failed{false};
  const auto work = [&](G2PTransformer& own) {
    const AutocastGuard autocast(bf16);
    for (int64_t b; !failed && (b = next++) < count;) try {
        decode(own, b);
      } catch (...) {
        failures[static_cast<size_t>(b)] = std::current_exception();
        failed = true;
      }
  };
  std::vector<std::unique_ptr<Replica>> copies;
  for (int64_t w = 1; w < workers; ++w) copies.push_back(std::make_unique<Replica>(model));
  struct ThreadsBack {  // this thread's setting, restored however the workers end
    int threads;
    ~ThreadsBack() { set_num_threads(threads); }
  } back{get_num_threads()};
  set_num_threads(1);
  {
    std::vector<std::jthread> others;
    for (auto& copy : copies)
      others.emplace_back([&work, &copy] {
        set_num_threads(1);
        work(copy->model);
      });
    work(model);
  }
  for (const std::exception_ptr& failure : failures)
    if (failure) std::rethrow_exception(failure);
}

}  // namespace

std::vector<Ids> decode_all(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& options,
                            int64_t batch_size, const std::function<void(int64_t)>& done) {
  AG_CHECK(batch_size >= 1, "g2p decode: expected a batch size ≥ 1, got {}", batch_size);
  std::vector<size_t> order(sources.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sources[a].size() != sources[b].size() ? sources[a].size() < sources[b].size() : sources[a] < sources[b];
  });
  const auto words = static_cast<int64_t>(sources.size());
  std::vector<Ids> out(sources.size());
  std::mutex progress;
  int64_t decoded = 0;
  const auto decode = [&](G2PTransformer& own, int64_t b) {
    const size_t first = static_cast<size_t>(b * batch_size);
    const size_t last = std::min(order.size(), first + static_cast<size_t>(batch_size));
    std::vector<Ids> batch;
    for (size_t i = first; i < last; ++i) batch.push_back(sources[order[i]]);
    std::vector<Ids> results = decode_batch(own, batch, options);
    for (size_t i = first; i < last; ++i) out[order[i]] = std::move(results[i - first]);
    const std::lock_guard<std::mutex> lock(progress);
    decoded += static_cast<int64_t>(last - first);
    if (done) done(decoded);
  };
  const int64_t batches = (words + batch_size - 1) / batch_size;
  const int64_t workers = decoding_workers(words, batch_size);
  if (workers == 1) {
    for (int64_t b = 0; b < batches; ++b) decode(model, b);
    return out;
  }
  decode_concurrently(model, batches, workers, decode);
  return out;
}

std::vector<std::vector<double>> cross_attention(G2PTransformer& model, const Ids& source, const Ids& output) {
  NoGradGuard no_grad;
  Ids input = {kBos};
  input.insert(input.end(), output.begin(), output.end());
  const bool training = model.is_training();
  model.eval();  // the attention keeps its weights in eval mode
  model.forward(padded({source}), padded({input}));
  model.train(training);
  const Tensor weights = model.transformer->decoder->layers->operator[](model.config.transformer.num_decoder_layers - 1)
                             .multihead_attn->attention_weights();  // (1, H, T, S)
  const int64_t H = weights.size(1), T = weights.size(2), S = weights.size(3);
  const std::vector<double> w = weights.to_vector();
  std::vector<std::vector<double>> rows(static_cast<size_t>(output.size()), std::vector<double>(S, 0.0));
  for (int64_t h = 0; h < H; ++h)
    for (size_t t = 0; t < output.size() && static_cast<int64_t>(t) < T; ++t)
      for (int64_t s = 0; s < S; ++s) rows[t][s] += w[(h * T + t) * S + s] / static_cast<double>(H);
  return rows;
}

std::vector<std::vector<double>> output_log_probabilities(G2PTransformer& model, const std::vector<Ids>& sources,
                                                          const std::vector<Ids>& outputs) {
  NoGradGuard no_grad;
  std::vector<Ids> inputs;  // <bos> and the output
  for (const Ids& output : outputs) {
    inputs.push_back({kBos});
    inputs.back().insert(inputs.back().end(), output.begin(), output.end());
  }
  const Tensor logits = model.forward(padded(sources), padded(inputs));  // (N, T + 1, V)
  const int64_t T = logits.size(1), V = logits.size(2);
  const std::vector<double> values = logits.to_vector();
  std::vector<std::vector<double>> out(outputs.size());
  for (size_t n = 0; n < outputs.size(); ++n)
    for (size_t t = 0; t <= outputs[n].size(); ++t) {
      const int64_t token = t < outputs[n].size() ? outputs[n][t] : kEos;
      const size_t row = (n * static_cast<size_t>(T) + t) * static_cast<size_t>(V);
      out[n].push_back(log_probabilities(values.data() + row, V)[static_cast<size_t>(token)]);
    }
  return out;
}

}  // namespace ag::g2p
