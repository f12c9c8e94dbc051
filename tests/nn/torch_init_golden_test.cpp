// Initialisation in PyTorch's order (tools/golden/torch_init.py): each module built after
// ag::manual_seed(seed, RngStyle::torch) has PyTorch's initial weights bit for bit, and leaves the
// generator where PyTorch's constructor left it.
#include <gtest/gtest.h>

#include <functional>

#include "nn/layers.h"
#include "nn/transformer.h"
#include "seeds/seed003.h"
#include "seeds/seed004.h"
#include "tests/golden_util.h"

namespace ag::nn {
namespace {

namespace seed004 = seeds::seed004;

class TorchInit : public ::testing::Test {
 protected:
  void TearDown() override { manual_seed(0, RngStyle::attograd); }

  // Builds the module under torch.manual_seed(seed) and compares every parameter and the next draw.
  static void check(const std::string& name, uint64_t seed, const std::function<std::shared_ptr<Module>()>& build) {
    static const Golden golden("torch_init");
    manual_seed(seed, RngStyle::torch);
    const std::shared_ptr<Module> module = build();
    int compared = 0;
    for (const auto& [param_name, param] : module->named_parameters()) {
      EXPECT_EQ(param.to_vector(), golden[name + ".param." + param_name].to_vector()) << name << " " << param_name;
      ++compared;
    }
    int expected = 0;
    for (const auto& [key, t] : golden.tensors()) expected += key.rfind(name + ".param.", 0) == 0;
    EXPECT_EQ(compared, expected) << name << ": the module's parameters are not PyTorch's";
    EXPECT_EQ(rand({4}).to_vector(), golden[name + ".next"].to_vector()) << name << ": the generator's position";
  }
};

TEST_F(TorchInit, Linear) {
  check("linear", 123, [] { return std::make_shared<Linear>(5, 3); });
  check("linear_nobias", 7, [] { return std::make_shared<Linear>(4, 6, false); });
  check("linear_wide", 0, [] { return std::make_shared<Linear>(300, 20); });
}

TEST_F(TorchInit, Embedding) {
  check("embedding_small", 123, [] { return std::make_shared<Embedding>(3, 4); });
  check("embedding", 123, [] { return std::make_shared<Embedding>(6, 3); });
  check("embedding_padding", 5, [] { return std::make_shared<Embedding>(7, 4, 0); });
}

TEST_F(TorchInit, Sequential) {
  check("layernorm_then_linear", 3, [] {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{std::make_shared<LayerNorm>(Shape{4}),
                                                                                  std::make_shared<Linear>(4, 2)});
  });
  check("sequential", 0, [] {
    return std::make_shared<Sequential>(std::vector<std::shared_ptr<UnaryModule>>{
        std::make_shared<Linear>(4, 8), std::make_shared<ReLU>(), std::make_shared<Linear>(8, 2)});
  });
}

TEST_F(TorchInit, SeedAttentionClasses) {
  check("seed002_self_attention", 123, [] { return std::make_shared<seeds::SelfAttention>(16, 24, 24, 28); });
  check("seed003_v1", 123, [] { return std::make_shared<seeds::SelfAttention_v1>(3, 2); });
  check("seed003_v2", 789, [] { return std::make_shared<seeds::SelfAttention_v2>(3, 2); });
  check("seed003_causal", 123, [] { return std::make_shared<seeds::CausalAttention>(3, 2, 6, 0.0); });
  check("seed003_mha", 123, [] { return std::make_shared<seeds::MultiHeadAttention>(3, 2, 6, 0.0, 2); });
}

TEST_F(TorchInit, MultiheadAttentionAndTransformer) {
  check("multihead_attention", 11, [] { return std::make_shared<PackedMultiheadAttention>(8, 2); });
  check("transformer", 4, [] {
    return std::make_shared<Transformer>(TransformerOptions{.d_model = 8,
                                                            .nhead = 2,
                                                            .num_encoder_layers = 1,
                                                            .num_decoder_layers = 1,
                                                            .dim_feedforward = 16,
                                                            .dropout = 0.0});
  });
}

TEST_F(TorchInit, Seed004EncoderDecoder) {
  check("seed004_encdec", 23, [] {
    auto encoder = std::make_shared<seed004::EncoderSelfAttn>(3, 2, 10, 2);
    auto decoder = std::make_shared<seed004::DecoderSelfAttn>(3, 2, 10, 2);
    return std::make_shared<seed004::EncoderDecoderSelfAttn>(encoder, decoder, 2, 2);
  });
}

}  // namespace
}  // namespace ag::nn
