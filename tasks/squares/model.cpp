#include "tasks/squares/model.h"

#include "engine/ops/arithmetic.h"
#include "engine/ops/shape.h"
#include "seeds/seed004.h"
#include "tasks/squares/transformer.h"

namespace ag::squares {

namespace {

constexpr int64_t kFeatures = 2;

// Seed 004's model: its forward() switches on the mode (teacher forcing in training,
// autoregressive decoding in eval).
class SelfAttnModel : public SquaresModel {
 public:
  explicit SelfAttnModel(const ModelConfig& c) : model_(build(c)) {}
  nn::Module& module() override { return *model_; }
  Tensor teacher_forced(const Tensor& X) override { return (*model_)(X); }
  Tensor predict(const Tensor& source) override { return (*model_)(source); }

 private:
  // The encoder draws its initial weights before the decoder, as in the seed.
  static std::unique_ptr<seeds::seed004::EncoderDecoderSelfAttn> build(const ModelConfig& c) {
    auto encoder = std::make_shared<seeds::seed004::EncoderSelfAttn>(c.heads, c.d_model, c.ff_units, kFeatures);
    auto decoder = std::make_shared<seeds::seed004::DecoderSelfAttn>(c.heads, c.d_model, c.ff_units, kFeatures);
    return std::make_unique<seeds::seed004::EncoderDecoderSelfAttn>(encoder, decoder, kSourceLen, kTargetLen);
  }

  std::unique_ptr<seeds::seed004::EncoderDecoderSelfAttn> model_;
};

class TransformerModel : public SquaresModel {
 public:
  explicit TransformerModel(const ModelConfig& c)
      : model_(kFeatures,
               {.d_model = c.d_model,
                .nhead = c.heads,
                .num_encoder_layers = c.layers,
                .num_decoder_layers = c.layers,
                .dim_feedforward = c.ff_units,
                .dropout = c.dropout},
               kSourceLen + kTargetLen) {}
  nn::Module& module() override { return model_; }
  Tensor teacher_forced(const Tensor& X) override {
    return model_(slice(X, 1, 0, kSourceLen), slice(X, 1, kSourceLen - 1, kSourceLen + kTargetLen - 1));
  }
  Tensor predict(const Tensor& source) override { return model_.predict(source, kTargetLen); }

 private:
  SquaresTransformer model_;
};

}  // namespace

std::unique_ptr<SquaresModel> make_model(const ModelConfig& config) {
  AG_CHECK(config.heads >= 1 && config.d_model >= 1 && config.ff_units >= 1 && config.layers >= 1,
           "squares: heads, d_model, ff_units and layers must be at least 1, got {}, {}, {}, {}", config.heads,
           config.d_model, config.ff_units, config.layers);
  if (config.model == "selfattn") {
    AG_CHECK(config.layers == 1 && config.dropout == 0,
             "squares: layers and dropout are the transformer's settings; seed 004's selfattn model has one layer "
             "and no dropout (got layers {}, dropout {})",
             config.layers, config.dropout);
    return std::make_unique<SelfAttnModel>(config);
  }
  AG_CHECK(config.model == "transformer", "squares: unknown model '{}' (expected selfattn or transformer)",
           config.model);
  AG_CHECK(config.d_model % config.heads == 0, "squares: the transformer's d_model {} must be a multiple of heads {}",
           config.d_model, config.heads);
  AG_CHECK(config.dropout >= 0 && config.dropout < 1, "squares: dropout must be in [0, 1), got {}", config.dropout);
  return std::make_unique<TransformerModel>(config);
}

SourceTarget split(const Tensor& points) {
  return {slice(points, 1, 0, kSourceLen), slice(points, 1, kSourceLen, kSourceLen + kTargetLen)};
}

double values_per_square(const ModelConfig& m) {
  const double width = static_cast<double>(m.model == "transformer" ? m.d_model : m.heads * m.d_model);
  return 4 * static_cast<double>(m.layers) * 2 *
         (12 * width + static_cast<double>(m.ff_units) + 12 * static_cast<double>(m.heads));
}

}  // namespace ag::squares
