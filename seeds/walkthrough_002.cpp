// Seed 002 ("Self Attention", then a sentiment classifier): what it prints comes from unseeded cells
// (nn.Embedding and torch.randn before any torch.manual_seed, in a kernel whose earlier state is
// unknown; PyTorch's own default seed gives other numbers), so none of it can be reproduced; the
// walkthrough lists each number with the reason. The printed blocks are the notebook's, verbatim.
#include "seeds/printed_values.h"

namespace ag::seeds {

namespace {

constexpr const char* kScore2 = R"((tensor(-35.4803, grad_fn=<DotBackward0>),
 tensor(-35.4803, grad_fn=<DotBackward0>)))";

constexpr const char* kScores2 = R"(tensor([ 29.3837, -35.4803,  10.7918,  78.3755,  47.9072,  49.6510, -30.6851,
         29.3837,  21.4900,  -0.9740, -71.2418,  41.8499, -28.4696],
       grad_fn=<SqueezeBackward4>))";

constexpr const char* kWeights2 = R"(tensor([4.7884e-06, 4.3418e-13, 4.5877e-08, 9.9863e-01, 4.9131e-04, 7.5977e-04,
        1.4398e-12, 4.7884e-06, 6.6548e-07, 2.4218e-09, 5.6874e-17, 1.0807e-04,
        2.5052e-12], grad_fn=<SoftmaxBackward0>))";

constexpr const char* kWeights2Dim0 = R"(tensor([4.7884e-06, 4.3418e-13, 4.5877e-08, 9.9863e-01, 4.9131e-04, 7.5977e-04,
        1.4398e-12, 4.7884e-06, 6.6548e-07, 2.4218e-09, 5.6874e-17, 1.0807e-04,
        2.5052e-12], grad_fn=<SoftmaxBackward0>))";

constexpr const char* kWeightsSum = R"(tensor(1.0000, grad_fn=<SumBackward0>))";

constexpr const char* kTrainingLog = R"(Epoch: 0, Loss: 0.6641170978546143
Epoch: 0, Loss: 0.7257056832313538
Epoch: 0, Loss: 0.6470229625701904
Epoch: 0, Loss: 0.6427892446517944
Epoch: 0, Loss: 0.45382237434387207
Epoch: 1, Loss: 0.6205589175224304
Epoch: 1, Loss: 0.5748776793479919
Epoch: 1, Loss: 0.5451675653457642
Epoch: 1, Loss: 0.7050160765647888
Epoch: 1, Loss: 0.6728764772415161
Epoch: 2, Loss: 0.7525603175163269
Epoch: 2, Loss: 0.7572631239891052
Epoch: 2, Loss: 0.6798258423805237
Epoch: 2, Loss: 0.5232846140861511
Epoch: 2, Loss: 0.6812126636505127
Epoch: 3, Loss: 0.5486624240875244
Epoch: 3, Loss: 0.6258867383003235
Epoch: 3, Loss: 0.6736737489700317
Epoch: 3, Loss: 0.713619589805603
Epoch: 3, Loss: 0.6508697271347046
Epoch: 4, Loss: 0.7275972366333008
Epoch: 4, Loss: 0.5853260159492493
Epoch: 4, Loss: 0.6316661834716797
Epoch: 4, Loss: 0.6792041659355164
Epoch: 4, Loss: 0.7094566226005554
Epoch: 5, Loss: 0.6542940139770508
Epoch: 5, Loss: 0.5303098559379578
Epoch: 5, Loss: 0.7321962118148804
Epoch: 5, Loss: 0.62)";

}  // namespace

std::vector<PrintedCheck> notebook_002() {
  const std::string unseeded = "unseeded: nn.Embedding and torch.randn before any torch.manual_seed";
  const std::string fresh_embedding =
      "unseeded, and its classifier draws a fresh nn.Embedding in every call (a seed bug)";
  return {
      {"In[10]", "attention_score_2", kScore2, {}, unseeded},
      {"In[11]", "attention_scores_2", kScores2, {}, unseeded},
      {"In[12]", "attention_weights_2", kWeights2, {}, unseeded},
      {"In[13]", "softmax(dim=0)", kWeights2Dim0, {}, unseeded},
      {"In[14]", "attention_weights_2.sum()", kWeightsSum, {}, unseeded},
      {"In[52]", "training loss", kTrainingLog, {}, fresh_embedding},
  };
}

}  // namespace ag::seeds
