"""Golden data for nn::GPT: the peer's nanoGPT model (../shared/peer/charlm_torch.py, CharGPT, itself
checked bit for bit against nanoGPT's model.py) at a tiny size, forward and backward.
The peer's module has no `transformer` ModuleDict (its wte, wpe, h, ln_f sit on the model), so its
state_dict names are nanoGPT's without the "transformer." prefix: nanogpt_name() adds it.

Writes tests/golden/gpt_<case>.safetensors: param.<state_dict name> (lm_head.weight is wte's tensor),
idx and targets (i64), out (logits), loss (mean cross-entropy) and grad.param.<name> for every
parameter (the tied wte gets the sum of both uses; lm_head.weight is not listed twice).
Usage: /usr/bin/python3 tools/golden/gpt.py
"""
import os
import sys

import torch
import torch.nn.functional as F

from golden import ROOT, golden_path, save

sys.path.insert(0, os.path.join(ROOT, "..", "shared", "peer"))
from charlm_torch import CharGPT  # noqa: E402

CASES = {
    # name: (vocab, block, layers, heads, width, bias, B, T)
    "tiny": (11, 8, 2, 2, 16, False, 3, 8),
    "short_bias": (7, 8, 1, 4, 8, True, 2, 5),
}


def nanogpt_name(peer_name):
    """The peer's state_dict name as nanoGPT's model.py (and attograd) spell it."""
    return peer_name if peer_name.startswith("lm_head.") else "transformer." + peer_name


def main():
    torch.set_default_dtype(torch.float32)
    for name, (vocab, block, layers, heads, width, bias, B, T) in CASES.items():
        torch.manual_seed(7)
        model = CharGPT(vocab, block, layers, heads, width, bias=bias, dropout=0.0)
        if bias:  # nonzero biases and LayerNorm weights, so their use is checked too
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if p.dim() == 1:
                        p.add_(0.1 * torch.randn_like(p))
        idx = torch.randint(vocab, (B, T))
        targets = torch.randint(vocab, (B, T))
        logits, loss = model(idx, targets)
        loss.backward()
        tensors = {"param." + nanogpt_name(k): v for k, v in model.state_dict().items()}
        tensors.update({"idx": idx, "targets": targets, "out": logits, "loss": loss.reshape(1)})
        tensors.update({"grad.param." + nanogpt_name(n): p.grad for n, p in model.named_parameters()})
        save(golden_path("gpt_" + name), tensors, {"config": f"{vocab},{block},{layers},{heads},{width},{int(bias)}"})
        print(f"gpt_{name}: loss {loss.item():.6f}, {sum(p.numel() for p in model.parameters())} parameters")


if __name__ == "__main__":
    main()
