// Decoding a batch of words: greedy, or beam search length-normalised as the peer's. The encoder
// runs once per batch; with a cache (the default) the decoder runs one new position per step
// (nn::DecoderCache), and rows whose word is finished leave the batch.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "tasks/g2p/metrics.h"
#include "tasks/g2p/model.h"

namespace ag::g2p {

struct DecodeOptions {
  int64_t beam = 1;          // 1: greedy
  int64_t max_extra = 10;    // at most (source length + max_extra) output tokens
  bool use_cache = true;     // false: re-run the decoder over the whole prefix each step (the reference)
  bool beam_search = false;  // run the beam search even at beam 1 (which must then equal greedy)
};

// The output ids of each source (ids without padding), <eos> and what follows left out.
std::vector<Ids> decode_batch(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& options);

// Every source, in batches of at most batch_size sorted by (length, ids) so a batch pads little;
// the results in the sources' order. `done` (if set) hears how many are decoded so far. With more
// than one thread (ag::get_num_threads()), decoding_workers() threads each decode whole batches on
// one thread of their own, with a copy of the model: a batch's ops are too small to split between
// threads well (2 threads ran greedy decoding 1.3× as fast as 1). Each batch is thus decoded on
// one thread whatever the setting, so the outputs do not depend on it.
std::vector<Ids> decode_all(G2PTransformer& model, const std::vector<Ids>& sources, const DecodeOptions& options,
                            int64_t batch_size, const std::function<void(int64_t)>& done = {});
// The threads decode_all decodes `words` words with, in batches of batch_size.
int64_t decoding_workers(int64_t words, int64_t batch_size);

// The last decoder layer's cross-attention (mean over heads) while the model reads `output` after
// `source` (teacher forcing in eval mode): rows = output tokens, columns = source tokens.
std::vector<std::vector<double>> cross_attention(G2PTransformer& model, const Ids& source, const Ids& output);

// Each output's tokens' natural log-probabilities under the model (teacher forcing in eval mode):
// one per output token, then the log-probability of <eos> after the last; outputs[i] follows sources[i].
std::vector<std::vector<double>> output_log_probabilities(G2PTransformer& model, const std::vector<Ids>& sources,
                                                          const std::vector<Ids>& outputs);

}  // namespace ag::g2p
