// Seed 000 ("Self-attention", a notebook to see the workings of self-attention): every number it
// prints, recomputed from its own seeds with PyTorch's generator (RngStyle::torch), in f32 as the
// notebook ran. The printed blocks below are the notebook's outputs, copied verbatim.
#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "engine/autograd.h"
#include "engine/ops/arithmetic.h"
#include "engine/ops/shape.h"
#include "engine/ops/softmax.h"
#include "nn/layers.h"
#include "seeds/printed_values.h"

namespace ag::seeds {

namespace {

// Its cells 4-6 (and again 7): sorted-vocabulary tokens of "Life is short, eat dessert first"
// through nn.Embedding(6, 16) after torch.manual_seed(123).
Tensor sentence_embeddings() {
  manual_seed(123, RngStyle::torch);
  nn::Embedding emb(6, 16);
  return emb(tensor({0, 4, 5, 2, 1, 3}, {6}, DType::i64)).detach();  // (6, 16)
}

constexpr const char* kInputs = R"(
tensor([[ 0.3374, -0.1778, -0.3035, -0.5880,  0.3486,  0.6603, -0.2196, -0.3792,
          0.7671, -1.1925,  0.6984, -1.4097,  0.1794,  1.8951,  0.4954,  0.2692],
        [ 0.5146,  0.9938, -0.2587, -1.0826, -0.0444,  1.6236, -2.3229,  1.0878,
          0.6716,  0.6933, -0.9487, -0.0765, -0.1526,  0.1167,  0.4403, -1.4465],
        [ 0.2553, -0.5496,  1.0042,  0.8272, -0.3948,  0.4892, -0.2168, -1.7472,
         -1.6025, -1.0764,  0.9031, -0.7218, -0.5951, -0.7112,  0.6230, -1.3729],
        [-1.3250,  0.1784, -2.1338,  1.0524, -0.3885, -0.9343, -0.4991, -1.0867,
          0.8805,  1.5542,  0.6266, -0.1755,  0.0983, -0.0935,  0.2662, -0.5850],
        [-0.0770, -1.0205, -0.1690,  0.9178,  1.5810,  1.3010,  1.2753, -0.2010,
          0.4965, -1.5723,  0.9666, -1.1481, -1.1589,  0.3255, -0.6315, -2.8400],
        [ 0.8768,  1.6221, -1.4779,  1.1331, -1.2203,  1.3139,  1.0533,  0.1388,
          2.2473, -0.8036, -0.2808,  0.7697, -0.6596, -0.7979,  0.1838,  0.2293]]))";

constexpr const char* kToken2 = R"(
tensor([ 0.5146,  0.9938, -0.2587, -1.0826, -0.0444,  1.6236, -2.3229,  1.0878,
         0.6716,  0.6933, -0.9487, -0.0765, -0.1526,  0.1167,  0.4403, -1.4465]))";

constexpr const char* kOmega24 = "tensor(11.1466, grad_fn=<DotBackward0>)";

constexpr const char* kOmega2 = R"(
tensor([ 8.5808, -7.6597,  3.2558,  1.0395, 11.1466, -0.4800],
       grad_fn=<SqueezeBackward4>))";

constexpr const char* kWeights2 = R"(
tensor([0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458],
       grad_fn=<SoftmaxBackward0>))";

constexpr const char* kContext2 = R"(
tensor([-1.5993,  0.0156,  1.2670,  0.0032, -0.6460, -1.1407, -0.4908, -1.4632,
         0.4747,  1.1926,  0.4506, -0.7110,  0.0602,  0.7125, -0.1628, -2.0184,
         0.3838, -2.1188, -0.8136, -1.5694,  0.7934, -0.2911, -1.3640, -0.2366,
        -0.9564, -0.5265,  0.0624,  1.7084], grad_fn=<SqueezeBackward4>))";

constexpr const char* kOmega = R"(
tensor([[  16.4255,    8.1306,  -24.5414,  -19.6606,   -9.5164,   19.2777],
        [   8.5808,   -7.6597,    3.2558,    1.0395,   11.1466,   -0.4800],
        [ -39.2836,   -1.5165,  145.4604,   74.2561,   58.8008, -141.6884],
        [  -5.2174,   -4.6914,   74.9203,   30.6947,   35.7423,  -73.7312],
        [ -21.6148,   10.6362,   65.4889,   39.2832,   21.8496,  -80.2922],
        [  40.0110,   -8.6863, -129.7707,  -64.2901,  -39.9965,  102.5285]],
       grad_fn=<MmBackward0>))";

constexpr const char* kWeights = R"(
tensor([[3.3559e-01, 6.1726e-02, 7.8361e-05, 2.1222e-04, 1.6829e-03, 6.0071e-01],
        [2.9123e-01, 1.0581e-02, 9.8213e-02, 6.2474e-02, 4.9169e-01, 4.5814e-02],
        [4.1922e-17, 9.3433e-14, 1.0000e+00, 4.8723e-07, 2.0779e-08, 3.5016e-26],
        [7.8632e-08, 8.7544e-08, 9.9954e-01, 1.2001e-04, 3.3626e-04, 6.6351e-14],
        [1.8886e-08, 1.3652e-05, 9.9512e-01, 4.7287e-03, 1.3467e-04, 1.1868e-13],
        [2.8696e-06, 1.3829e-10, 2.5508e-21, 1.6275e-15, 2.3183e-13, 1.0000e+00]],
       grad_fn=<SoftmaxBackward0>))";

Tensor row(const Tensor& t, int64_t i) { return squeeze(slice(t, 0, i, i + 1), 0); }

}  // namespace

std::vector<PrintedCheck> notebook_000() {
  NoGradGuard no_grad;
  const Tensor inputs = sentence_embeddings();  // (6, 16)
  const Tensor token_2 = row(inputs, 1);        // (16)
  // Cells 44 and 12: W_query, W_key (24, 16), W_value (28, 16) = nn.Parameter(torch.rand(...)).
  manual_seed(123, RngStyle::torch);
  const Tensor w_query = rand({24, 16}), w_key = rand({24, 16}), w_value = rand({28, 16});
  manual_seed(0, RngStyle::attograd);
  const Tensor query_2 = torch_matmul(w_query, unsqueeze(token_2, 1));                    // (24, 1)
  const Tensor keys = transpose(torch_matmul(w_key, transpose(inputs, 0, 1)), 0, 1);      // (6, 24)
  const Tensor values = transpose(torch_matmul(w_value, transpose(inputs, 0, 1)), 0, 1);  // (6, 28)
  const Tensor omega_2 = squeeze(torch_matmul(keys, query_2), 1);                         // (6)
  const Tensor weights_2 = softmax(div(omega_2, scalar(std::sqrt(24.0))), 0);
  const Tensor context_2 = squeeze(torch_matmul(unsqueeze(weights_2, 0), values), 0);      // (28)
  const Tensor queries = transpose(torch_matmul(w_query, transpose(inputs, 0, 1)), 0, 1);  // (6, 24)
  const Tensor omega = torch_matmul(queries, transpose(keys, 0, 1));                       // (6, 6)
  // Measured with tools/golden/walkthrough_000.py: where ours differ, PyTorch 1.13 here does too.
  const std::string order = "f32 summation order of the notebook's machine; PyTorch 1.13 here differs too";
  return {
      {"In[6]", "inputs", kInputs, inputs},
      {"In[14]", "token_2", kToken2, token_2},
      {"In[48]", "omega_24", kOmega24, row(omega_2, 4)},
      {"In[49]", "omega_2", kOmega2, omega_2},
      {"In[50]", "attention_weights2", kWeights2, weights_2},
      {"In[21]", "omega24", kOmega24, row(omega_2, 4)},
      {"In[23]", "omega2", kOmega2, omega_2},
      {"In[27]", "attention_weights2", kWeights2, weights_2},
      {"In[41]", "context_2", kContext2, context_2},
      {"In[33]", "omega", kOmega, omega, order},
      {"In[35]", "attention_weights", kWeights, softmax(div(omega, scalar(std::sqrt(24.0))), 1), order},
  };
}

}  // namespace ag::seeds
