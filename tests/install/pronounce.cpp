// G2P from C++ against an installed attograd: the shipped model pronounces words greedily and with
// a beam, each phoneme with its log-probability; "cat" comes out as CMUdict has it, "Dog" as "dog", and
// a word the model cannot read is an ag::Error naming it. Exit 0 when all holds.
#include <fmt/format.h>

#include <cmath>

#include "tasks/g2p/pronouncer.h"

namespace {

bool pronounced_well(const ag::g2p::Pronounced& p) {
  bool ok = !p.phonemes.empty() && p.scores.size() == p.phonemes.size() && p.score() <= 0 && std::isfinite(p.score());
  for (const double s : p.scores) ok = ok && s <= 0;
  fmt::print("  {:<12} {:<28} log-probability {:.3f}\n", p.word, fmt::format("{}", fmt::join(p.phonemes, " ")),
             p.score());
  return ok;
}

}  // namespace

int main() {
  ag::g2p::Pronouncer pronouncer = ag::g2p::Pronouncer::shipped();
  fmt::print("{}\n", pronouncer.name());
  bool ok = true;
  for (const int64_t beam : {1, 5}) {
    fmt::print("beam {}:\n", beam);
    const std::vector<ag::g2p::Pronounced> words =
        pronouncer.pronounce({"cat", "Dog", "dog", "attograd", "kubernetes"}, {.beam = beam});
    for (const ag::g2p::Pronounced& p : words) ok = pronounced_well(p) && ok;
    ok = ok && fmt::format("{}", fmt::join(words[0].phonemes, " ")) == "K AE T" &&  // CMUdict's
         words[1].phonemes == words[2].phonemes;                                    // capitals read as small
  }
  try {
    pronouncer.pronounce({"naïve"});
    fmt::print("'naïve' was pronounced; expected an error naming the character the model has not seen\n");
    return 1;
  } catch (const ag::Error& e) {
    fmt::print("refused as expected: {}\n", e.what());
    ok = ok && std::string(e.what()).find("word 1") != std::string::npos;
  }
  fmt::print("{}\n", ok ? "pronounce: all held" : "pronounce: FAILED");
  return ok ? 0 : 1;
}
