// `train squares`' settings, one row each (tasks/common/settings.h); the sizes and --lr default to
// the chosen --model's, --seed to the peer's with --rng torch.
#include "tasks/squares/task.h"

namespace ag::squares {

ModelConfig default_model_config(const std::string& model) {
  if (model == "transformer") return {.model = model, .heads = 2, .d_model = 16, .ff_units = 32, .layers = 1};
  return {.model = model};
}

double default_lr(const std::string& model) { return model == "transformer" ? 3e-3 : 1e-2; }

const std::vector<tasks::Setting<SquaresOptions>>& settings() {
  using O = SquaresOptions;
  using tasks::Accepts;
  const ModelConfig transformer = default_model_config("transformer");
  const auto size_help = [&](const std::string& what, int64_t transformer_default) {
    return fmt::format("{} (transformer: {})", what, transformer_default);
  };
  const Accepts size{Accepts::whole, 1, 4096};
  static const std::vector<tasks::Setting<O>> table = [&] {
    std::vector<tasks::Setting<O>> rows =
        tasks::lift_training<O>(tasks::common_settings("Adam learning rate (transformer: 0.003)"));
    const std::vector<tasks::Setting<O>> own = {
        {"model",
         "--model",
         "selfattn: seed 004's EncoderDecoderSelfAttn; transformer: encoder-decoder with positional encoding",
         [](O& o) { return &o.model.model; },
         {Accepts::choice, 0, 0, {"selfattn", "transformer"}}},
        {"heads", "--heads", size_help("Attention heads", transformer.heads), [](O& o) { return &o.model.heads; },
         size},
        {"d_model", "--d-model", size_help("Model width", transformer.d_model), [](O& o) { return &o.model.d_model; },
         size},
        {"ff_units", "--ff-units", size_help("Feed-forward width", transformer.ff_units),
         [](O& o) { return &o.model.ff_units; }, size},
        {"layers", "--layers", size_help("Transformer: encoder and decoder layers each", transformer.layers),
         [](O& o) { return &o.model.layers; }, size},
        {"dropout",
         "--dropout",
         "Transformer: dropout",
         [](O& o) { return &o.model.dropout; },
         {Accepts::number, 0, 0.9}},
        {"source_len", "", "the task (2 corners given)"},
        {"target_len", "", "the task (2 corners predicted)"},
        {"optimizer", "", "the task (always Adam)"},
        {"train_data", "", "the task (128 squares, seed 13)"},
        {"test_data", "", "the task (128 squares, seed 19)"},
        {"rng",
         "--rng",
         "attograd: attograd's generator; torch: follow the PyTorch peer step for step (numpy's squares, PyTorch's "
         "initial weights after manual_seed(23) and its DataLoader shuffle; --seed defaults to 42)",
         [](O& o) { return &o.rng; },
         {Accepts::choice, 0, 0, {"attograd", "torch"}},
         tasks::OnResume::carried_over,
         "",
         [](const O& o) { return o.rng == "torch"; }}};  // absent for attograd's, as before --rng existed
    rows.insert(rows.end(), own.begin(), own.end());
    return rows;
  }();
  return table;
}

SquaresOptions model_defaults(const SquaresOptions& chosen) {
  SquaresOptions defaults = chosen;
  defaults.model = default_model_config(chosen.model.model);
  defaults.training.lr = default_lr(chosen.model.model);
  if (chosen.rng == "torch") defaults.training.seed = kTorchSetSeed;
  return defaults;
}

}  // namespace ag::squares
