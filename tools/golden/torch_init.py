"""Golden initial weights: each module built right after torch.manual_seed(seed), its parameters as
PyTorch drew them, and then torch.rand(4) (where the generator stands after the constructor).
The C++ test builds the same module under ag::manual_seed(seed, RngStyle::torch) and compares
bit for bit. Writes tests/golden/torch_init.safetensors.
Run: /usr/bin/python3 tools/golden/torch_init.py
"""
import torch
import torch.nn as nn

import attention
import seq2seq
from golden import golden_path, save

# name: (seed, constructor); the names are the C++ test's cases.
CASES = {
    "linear": (123, lambda: nn.Linear(5, 3)),
    "linear_nobias": (7, lambda: nn.Linear(4, 6, bias=False)),
    "linear_wide": (0, lambda: nn.Linear(300, 20)),
    "embedding_small": (123, lambda: nn.Embedding(3, 4)),  # 12 values: the scalar normal path
    "embedding": (123, lambda: nn.Embedding(6, 3)),  # 18 values: blocks of 16 and a redrawn tail
    "embedding_padding": (5, lambda: nn.Embedding(7, 4, padding_idx=0)),
    "layernorm_then_linear": (3, lambda: nn.Sequential(nn.LayerNorm(4), nn.Linear(4, 2))),
    "sequential": (0, lambda: nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))),
    "seed002_self_attention": (123, lambda: attention.SelfAttention(16, 24, 24, 28)),
    "seed003_v1": (123, lambda: attention.SelfAttention_v1(3, 2)),
    "seed003_v2": (789, lambda: attention.SelfAttention_v2(3, 2)),
    "seed003_causal": (123, lambda: attention.CausalAttention(3, 2, 6, 0.0)),
    "seed003_mha": (123, lambda: attention.MultiHeadAttention(3, 2, 6, 0.0, 2)),
    "multihead_attention": (11, lambda: nn.MultiheadAttention(8, 2, batch_first=True)),
    "transformer": (4, lambda: nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1, num_decoder_layers=1,
                                              dim_feedforward=16, dropout=0.0, batch_first=True)),
    "seed004_encdec": (23, lambda: seq2seq.EncoderDecoderSelfAttn(
        seq2seq.EncoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2),
        seq2seq.DecoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2), input_len=2, target_len=2)),
}


def main():
    tensors = {}
    for name, (seed, build) in CASES.items():
        torch.manual_seed(seed)
        module = build()
        tensors.update({f"{name}.param.{n}": p for n, p in module.named_parameters()})
        tensors[f"{name}.next"] = torch.rand(4)
    save(golden_path("torch_init"), tensors, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
