// Seed 004 (the encoder-decoder self-attention of "Deep Learning with PyTorch Step-by-Step"):
// every number its cells print, from its torch.manual_seed(11) encoder and torch.manual_seed(13)
// decoder, built by the library's seed 004 classes with PyTorch's generator (RngStyle::torch).
// The printed blocks below are the notebook's outputs, copied verbatim.
#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/mask.h"
#include "engine/ops/shape.h"
#include "seeds/printed_values.h"
#include "seeds/seed004.h"

namespace ag::seeds {

namespace {

constexpr const char* kEncoderStates = R"(tensor([[[-0.0498,  0.2193],
         [-0.0642,  0.2258]]], grad_fn=<AddBackward0>))";

constexpr const char* kAlphas = R"(tensor([[[[1.0000, 0.0000],
          [0.4011, 0.5989]]],


        [[[1.0000, 0.0000],
          [0.4264, 0.5736]]],


        [[[1.0000, 0.0000],
          [0.6304, 0.3696]]]]))";

constexpr const char* kFirstOut = R"(tensor([[[0.4132, 0.3728]]], grad_fn=<AddBackward0>))";

constexpr const char* kInputs2 = R"(tensor([[[-1.0000,  1.0000],
         [ 0.4132,  0.3728]]], grad_fn=<CatBackward>))";

constexpr const char* kSecondOut = R"(tensor([[[0.4137, 0.3727],
         [0.4132, 0.3728]]], grad_fn=<AddBackward0>))";

constexpr const char* kInputs3 = R"(tensor([[[-1.0000,  1.0000],
         [ 0.4132,  0.3728],
         [ 0.4132,  0.3728]]], grad_fn=<CatBackward>))";

constexpr const char* kPrediction = R"(tensor([[[0.4132, 0.3728],
         [0.4132, 0.3728]]], grad_fn=<SliceBackward>))";

}  // namespace

std::vector<PrintedCheck> notebook_004() {
  NoGradGuard no_grad;
  const Tensor full_seq = tensor({-1, -1, -1, 1, 1, 1, 1, -1}, {1, 4, 2});  // the perfect square
  const Tensor source_seq = slice(full_seq, 1, 0, 2), target_seq = slice(full_seq, 1, 2, 4);
  manual_seed(11, RngStyle::torch);
  seed004::EncoderSelfAttn encoder(3, 2, 10, 2);
  const Tensor encoder_states = encoder(source_seq);  // (1, 2, 2)
  manual_seed(13, RngStyle::torch);
  seed004::DecoderSelfAttn decoder(3, 2, 10, 2);
  manual_seed(0, RngStyle::attograd);
  decoder.init_keys(encoder_states);
  const Tensor shifted_seq = cat({slice(source_seq, 1, 1, 2), slice(target_seq, 1, 0, 1)}, 1);
  decoder(shifted_seq, Tensor(), causal_mask(2));  // teacher forcing under the subsequent mask
  const Tensor alphas = decoder.self_attn_heads->alphas();
  // Prediction: from the last source point, one point at a time. The notebook calls
  // decself(inputs, trg_masks), which passes the subsequent mask as the *source* mask (a seed bug:
  // its second step's first point moves, 0.4132 → 0.4137); as it ran, so as here.
  Tensor inputs = slice(source_seq, 1, 1, 2);
  const Tensor first = decoder(inputs, causal_mask(1));
  inputs = cat({inputs, slice(first, 1, 0, 1)}, 1);
  const Tensor second = decoder(inputs, causal_mask(2));
  const Tensor inputs_2 = inputs;
  inputs = cat({inputs, slice(second, 1, 1, 2)}, 1);
  return {
      {"2.5.3", "encoder_states", kEncoderStates, encoder_states},
      {"2.5.4.3", "self_attn alphas", kAlphas, alphas},
      {"2.5.4.4", "out (step 1)", kFirstOut, first},
      {"2.5.4.4", "inputs (step 1)", kInputs2, inputs_2},
      {"2.5.4.4", "out (step 2)", kSecondOut, second},
      {"2.5.4.4", "inputs (step 2)", kInputs3, inputs},
      {"2.5.4.4", "inputs[:, 1:]", kPrediction, slice(inputs, 1, 1, 3)},
  };
}

}  // namespace ag::seeds
