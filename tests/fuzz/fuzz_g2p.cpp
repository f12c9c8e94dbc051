// Fuzz target: the G2P readers (CMUdict's index.js and a user's pairs, the first byte choosing),
// then what training and scoring do with what they accept: the split, the symbol tables, the
// encodings, the error rates and confusions of the references against each other, report.svg.
// ag::Error is the only acceptable failure.
#include <cstddef>
#include <cstdint>
#include <string>

#include "engine/error.h"
#include "tasks/g2p/data.h"
#include "tasks/g2p/metrics.h"
#include "tasks/g2p/report.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    using namespace ag::g2p;
    const Lexicon lexicon =
        data[0] % 3 == 0 ? parse_pairs(bytes, "fuzz.tsv") : parse_cmudict(bytes, "fuzz/index.js", data[0] % 3 == 2);
    split_table(lexicon);
    const Symbols source = Symbols::source_of(lexicon), target = Symbols::target_of(lexicon);
    Symbols::from_json(source.to_json(), "source");
    Symbols::from_json(target.to_json(), "target");
    std::vector<Ids> predictions;
    std::vector<std::vector<Ids>> references;
    std::vector<int64_t> lengths;
    for (size_t k = 0; k < lexicon.words.size(); ++k) {
      lengths.push_back(static_cast<int64_t>(source.encode_word(lexicon.words[k], "word").size()));
      references.emplace_back();
      for (const Pronunciation& pron : lexicon.prons[k])
        references.back().push_back(target.encode_phonemes(pron, "pron"));
      predictions.push_back(references.back().back());  // the last reference, scored against all
    }
    ReportData report{"fuzz",
                      rates_by_length(predictions, references, lengths),
                      top_confusions(predictions, references, target, 10),
                      {}};
    report_svg(report);
  } catch (const ag::Error&) {
  }
  return 0;
}
