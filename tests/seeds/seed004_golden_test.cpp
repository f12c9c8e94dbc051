// Seed 004's encoder-decoder classes against PyTorch (tools/golden/seq2seq.py, the seed's classes
// verbatim): outputs, attention weights, gradients of every parameter and input, print(model).
#include <gtest/gtest.h>

#include <functional>
#include <map>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/attention.h"
#include "engine/ops/reduce.h"
#include "seeds/seed004.h"
#include "tests/golden_util.h"

namespace ag::seeds::seed004 {
namespace {

using Inputs = std::map<std::string, Tensor>;

// Golden data "seq2seq_<name>": loads its weights into `module`, gives `run` its inputs (as
// leaves needing gradients) and masks, backpropagates Σ out ⊙ probe when the output has a graph,
// and compares output, gradients and the printout. Returns the golden file for further checks.
Golden check_against_golden(nn::Module& module, const std::string& name,
                            const std::function<Tensor(const Inputs&)>& run) {
  Golden golden("seq2seq_" + name);
  const Inputs inputs = load_golden_into(module, golden);
  Tensor out = run(inputs);
  expect_close(out, golden["out"], name + " output");
  EXPECT_EQ(module.str(), golden.metadata().at("module"));
  if (!out.requires_grad()) return golden;  // eval-mode predict: PyTorch's output has no graph either
  sum(mul(out, golden["probe"])).backward();
  for (const auto& [key, t] : inputs)
    if (golden.has("grad.x." + key)) expect_close(t.grad(), golden["grad.x." + key], name + " gradient of " + key);
  for (const auto& [param_name, param] : module.named_parameters()) {
    if (golden.has("grad.param." + param_name))
      expect_close(param.grad(), golden["grad.param." + param_name], name + " gradient of " + param_name);
    else
      EXPECT_FALSE(param.grad().defined()) << name << ": PyTorch gives " << param_name << " no gradient";
  }
  return golden;
}

TEST(GoldenSeq2Seq, AttentionWithProjectedValuesAndMask) {
  Attention attn(4, 2, true);
  Golden golden = check_against_golden(attn, "attention", [&](const Inputs& in) {
    attn.init_keys(in.at("keys"));
    return attn(in.at("query"), in.at("mask"));
  });
  expect_close(attn.alphas(), golden["alphas"], "attention alphas");
}

TEST(GoldenSeq2Seq, AttentionWithUnprojectedValues) {
  Attention attn(3, 2);
  check_against_golden(attn, "attention_plain", [&](const Inputs& in) {
    attn.init_keys(in.at("query"));
    return attn(in.at("query"));
  });
}

TEST(GoldenSeq2Seq, MultiHeadCrossAttention) {
  MultiHeadAttention mha(3, 4, 2);
  Golden golden = check_against_golden(mha, "mha", [&](const Inputs& in) {
    mha.init_keys(in.at("keys"));
    return mha(in.at("query"), in.at("mask"));
  });
  expect_close(mha.alphas(), golden["alphas"], "mha alphas");
}

TEST(GoldenSeq2Seq, EncoderWithSourceMask) {
  EncoderSelfAttn encoder(3, 2, 10, 2);
  check_against_golden(encoder, "encoder", [&](const Inputs& in) { return encoder(in.at("query"), in.at("mask")); });
}

TEST(GoldenSeq2Seq, DecoderWithSourceAndTargetMasks) {
  DecoderSelfAttn decoder(3, 2, 10, 2);
  Golden golden = check_against_golden(decoder, "decoder", [&](const Inputs& in) {
    decoder.init_keys(in.at("states"));
    return decoder(in.at("query"), in.at("source_mask"), in.at("target_mask"));
  });
  expect_close(decoder.self_attn_heads->alphas(), golden["self_alphas"], "decoder self-attention alphas");
  expect_close(decoder.cross_attn_heads->alphas(), golden["cross_alphas"], "decoder cross-attention alphas");
}

std::shared_ptr<EncoderDecoderSelfAttn> seed_model() {
  return std::make_shared<EncoderDecoderSelfAttn>(std::make_shared<EncoderSelfAttn>(3, 2, 10, 2),
                                                  std::make_shared<DecoderSelfAttn>(3, 2, 10, 2), 2, 2);
}

TEST(GoldenSeq2Seq, EncoderDecoderTrainModeTeacherForcing) {
  auto model = seed_model();
  model->train();
  check_against_golden(*model, "encdec_train", [&](const Inputs& in) { return (*model)(in.at("X")); });
}

TEST(GoldenSeq2Seq, EncoderDecoderEvalModePredicts) {
  auto model = seed_model();
  model->eval();
  check_against_golden(*model, "encdec_eval", [&](const Inputs& in) {
    Tensor out = (*model)(in.at("X"));
    EXPECT_FALSE(out.requires_grad()) << "predict detaches its outputs, as the seed does";
    return out;
  });
}

}  // namespace
}  // namespace ag::seeds::seed004
