"""The PyTorch peer's G2P decoding (../shared/peer/g2p_torch.py: greedy, the whole prefix re-run each
step, batches of 512 words sorted by length) timed on a checkpoint that `attograd train g2p` wrote, so
both programs decode the same trained weights. Prints `words/s N` and the peer's PER/WER on the split.
A wrapper: the peer's own functions, imported, not edited.
Usage: /usr/bin/python3 g2p_decode_torch.py CHECKPOINT INDEX_JS THREADS [--split test] [--stress]
"""
import argparse
import json
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "golden"))
sys.path.insert(0, os.environ.get("ATTOGRAD_PEER", os.path.join(here, "..", "..", "..", "shared", "peer")))
from golden import load  # noqa: E402
from g2p_torch import G2PTransformer, decode_words, load_cmudict, score, split_of  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint")
    ap.add_argument("data")
    ap.add_argument("threads", type=int)
    ap.add_argument("--split", default="test")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tensors, metadata = load(a.checkpoint)
    c = json.loads(metadata["config"])
    model = G2PTransformer(c["source_vocab"], c["target_vocab"], c["d_model"], c["heads"], c["enc_layers"],
                           c["dec_layers"], c["ff"], c["dropout"], max_len=c["max_len"])
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, strict=True)
    source, target = json.loads(metadata["source_symbols"]), json.loads(metadata["target_symbols"])
    words, _ = load_cmudict(a.data, c.get("stress", False))
    test = sorted(w for w in words if split_of(w) == a.split)
    stoi = {s: i for i, s in enumerate(source)}
    tstoi = {s: i for i, s in enumerate(target)}
    preds, seconds = decode_words(model, test, stoi, 512, c.get("max_extra", 10), 1)
    per, wer = score(preds, [[[tstoi[p] for p in pr] for pr in words[w]] for w in test])
    print(f"peer decode: {len(test)} words in {seconds:.2f} s, PER {per:.2f}% WER {wer:.2f}%")
    print(f"words/s {len(test) / seconds:.1f}")


if __name__ == "__main__":
    main()
