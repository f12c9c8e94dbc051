// `attograd train g2p`, `eval g2p` and `predict g2p`: grapheme-to-phoneme conversion with the
// encoder-decoder Transformer, on the CMU Pronouncing Dictionary (or any source<TAB>target file),
// with the PyTorch peer's data rules, split, recipe and metrics (../shared/peer/g2p_torch.py).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tasks/common/training.h"
#include "tasks/g2p/data.h"
#include "tasks/g2p/model.h"

namespace ag::g2p {

struct G2POptions {
  tasks::TrainingOptions training{.epochs = 20, .lr = 1e-3, .batch_size = 256, .seed = 0, .out = "runs/g2p"};
  std::string data;     // source<TAB>target lines; empty: CMUdict from the data cache
  bool stress = false;  // CMUdict: keep the stress digits
  std::string preset = "small";
  ModelConfig model = preset_config("small");  // sizes (vocabularies come from the data)
  double min_lr = 1e-5;                        // the cosine ends here at the last step
  double warmup_frac = 0.04;                   // of all steps, linear warm-up
  double label_smoothing = 0.1;
  double clip = 1.0;       // gradient norm; 0: none
  int64_t max_extra = 10;  // decoding: at most source length + this phonemes
  int64_t beam = 1;        // the test set's decoder (validation is always greedy)
  int64_t eval_batch_size = 512;
  double train_fraction = 1.0;  // smoke runs: this share of the training pairs
  int64_t eval_limit = 0;       // smoke runs: validate and test on this many evenly spaced words
  bool report = true;           // OUT/report.svg
};

// The settings of `train g2p`, one row each (settings.cpp): its flags, config.json, the resume rules;
// and the defaults of the sizes not given: `chosen`'s --preset's.
const std::vector<tasks::Setting<G2POptions>>& settings();
G2POptions preset_defaults(const G2POptions& chosen);

struct EvalOptions {
  std::string checkpoint;
  std::string data{};          // empty: the data the checkpoint was trained on
  std::string split = "test";  // test, val or train
  int64_t beam = 1;
  int64_t eval_batch_size = 512;
  int64_t confusions = 10;    // the most frequent phoneme confusions printed
  std::string report{};       // if set: report.svg of this split written there
  int64_t max_memory_mb = 0;  // decoding's estimated peak above this is refused (0: the memory available)
};

struct PredictOptions {
  std::string checkpoint;
  std::vector<std::string> words;
  std::string file;             // one word per line; no words and no file: stdin's lines as they come
  std::string format = "text";  // text or tsv (WORD<TAB>PHONEMES), json (an object a line)
  int64_t beam = 1;
  int64_t max_memory_mb = 0;  // as EvalOptions'
};

// The model a run trains and its checkpoints hold: options.model's sizes with the symbol tables',
// initialised from the run's seed. `train` and `first_step_loss` build it within the memory bound;
// `eval` and `predict` within the file's tensors (nn::build_from_config), then load them.
std::unique_ptr<G2PTransformer> build_model(const G2POptions& options, const Symbols& source, const Symbols& target);

// Each returns the process exit code; bad input throws ag::Error.
int train(const G2POptions& options);
int eval(const EvalOptions& options);
int predict(const PredictOptions& options);

// The loss of one training batch (the first --batch-size training pairs, dropout on), with the
// model that computed it: `graph g2p` draws and records this step.
using StepLoss = tasks::StepLoss<G2PTransformer>;
StepLoss first_step_loss(const G2POptions& options, const tasks::BeforeForward& before_forward = {});

// The peer's schedule: linear warm-up lr·(s+1)/W over W = max(1, round(warmup_frac·S)) steps, then a
// cosine from lr down to min_lr at step S - 1.
double learning_rate(int64_t step, int64_t total_steps, double lr, double min_lr, double warmup_frac);

}  // namespace ag::g2p
