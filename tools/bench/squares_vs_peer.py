"""`train squares --rng torch` against the PyTorch peer, epoch by epoch, and PyTorch against itself
with one initial weight moved by one ulp: how far seed 004's chaotic training carries a rounding.

usage: /usr/bin/python3 tools/bench/squares_vs_peer.py RUN/metrics.csv
(the peer's own curve is ../shared/peer/squares_losses.csv; the perturbed PyTorch run takes ~10 s)
"""
import os
import sys

import numpy as np
import torch

PEER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "peer")
sys.path.insert(0, PEER)
import squares_torch  # noqa: E402


def relative_differences(train, val, reference):
    return np.maximum(abs(train - reference[:, 1]) / reference[:, 1], abs(val - reference[:, 2]) / reference[:, 2])


def report(name, r):
    over = np.flatnonzero(r > 1e-4)
    print(f"{name}: epochs 1-10 {' '.join(f'{x:.0e}' for x in r[:10])}; max {r.max():.3g} at epoch {r.argmax() + 1}; "
          f"first epoch over 1e-4: {over[0] + 1 if over.size else 'none'}")


def pytorch_one_ulp_off():
    build = squares_torch.EncoderSelfAttn.__init__

    def perturbed(self, *args, **kwargs):
        build(self, *args, **kwargs)
        with torch.no_grad():
            w = self.ffn[0].weight
            w[0, 0] = torch.nextafter(w[0, 0], torch.tensor(10.0))

    squares_torch.EncoderSelfAttn.__init__ = perturbed
    torch.set_num_threads(2)
    train, val, *_ = squares_torch.train_once(100)
    return np.array(train), np.array(val)


def main():
    peer = np.loadtxt(os.path.join(PEER, "squares_losses.csv"), delimiter=",", skiprows=1)
    ours = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
    report("attograd --rng torch vs peer", relative_differences(ours[:, 1], ours[:, 2], peer))
    report("PyTorch, one weight 1 ulp off, vs peer", relative_differences(*pytorch_one_ulp_off(), peer))


if __name__ == "__main__":
    main()
