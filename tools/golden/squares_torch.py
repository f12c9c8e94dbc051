"""Per-epoch losses of the PyTorch peer on seed 004's squares (../shared/peer/squares_torch.py, run
as it is: numpy's data, torch.manual_seed(23) before the model, set_seed(42), DataLoader shuffle),
for `attograd train squares --rng torch`. Writes tests/golden/squares_torch_losses.safetensors.
Run: /usr/bin/python3 tools/golden/squares_torch.py
"""
import os
import sys

import torch

from golden import ROOT, golden_path, save

sys.path.insert(0, os.path.join(os.path.dirname(ROOT), "shared", "peer"))
import squares_torch  # noqa: E402  (the peer, imported from its folder)


def main():
    torch.set_num_threads(2)
    losses, val_losses, _, _, _ = squares_torch.train_once(n_epochs=100)
    save(golden_path("squares_torch_losses"),
         {"train_loss": torch.tensor(losses, dtype=torch.float64),
          "val_loss": torch.tensor(val_losses, dtype=torch.float64)},
         {"torch": torch.__version__})


if __name__ == "__main__":
    main()
