"""Golden data for the Transformer: torch.nn.Transformer(batch_first=True, dropout=0) with a
causal tgt_mask and key-padding masks, and a squares model (input projection, sinusoidal
positional encoding, Transformer, output projection) whose classes nn/transformer.h mirrors.

Stores weights, inputs, masks (torch's bool convention: true = hidden), output, and the gradients
of loss = Σ out ⊙ probe for every parameter and input. Runs in training mode so PyTorch takes its
ordinary (not the fused inference fast) path; dropout is 0, so that changes nothing else.
Writes tests/golden/transformer_<name>.safetensors. Run: /usr/bin/python3 tools/golden/transformer.py
"""
import math

import torch
import torch.nn as nn

from golden import golden_path, save, with_grads


class PositionalEncoding(nn.Module):
    """pe[pos, 2i] = sin(pos / 10000^(2i/d)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d)); x + pe[:L]."""

    def __init__(self, d_model, max_len=512):
        super().__init__()
        pos = torch.arange(max_len, dtype=torch.float64)[:, None]
        even = torch.arange(0, d_model, 2, dtype=torch.float64)
        angle = pos / torch.pow(10000.0, even / d_model)
        pe = torch.zeros(max_len, d_model, dtype=torch.float64)
        pe[:, 0::2] = torch.sin(angle)
        pe[:, 1::2] = torch.cos(angle[:, : d_model // 2])
        self.register_buffer("pe", pe.float())

    def forward(self, x):
        return x + self.pe[: x.size(1)]

    def extra_repr(self):
        return f"d_model={self.pe.size(1)}, max_len={self.pe.size(0)}"


class SquaresTransformer(nn.Module):
    def __init__(self, n_features, d_model, nhead, num_layers, dim_feedforward, max_len=512):
        super().__init__()
        self.input_proj = nn.Linear(n_features, d_model)
        self.pos_encoding = PositionalEncoding(d_model, max_len)
        self.transformer = nn.Transformer(d_model, nhead, num_layers, num_layers, dim_feedforward, dropout=0.0,
                                          batch_first=True)
        self.output_proj = nn.Linear(d_model, n_features)

    def embed(self, points):
        return self.pos_encoding(self.input_proj(points))

    def forward(self, source, shifted_target, src_key_padding_mask=None):
        t = shifted_target.size(1)
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        out = self.transformer(self.embed(source), self.embed(shifted_target), tgt_mask=causal,
                               src_key_padding_mask=src_key_padding_mask,
                               memory_key_padding_mask=src_key_padding_mask)
        return self.output_proj(out)


def padding_mask(lengths, max_len):
    """(N, max_len), true at the padding positions."""
    return torch.arange(max_len)[None, :] >= torch.tensor(lengths)[:, None]


def causal_mask(size):
    return torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)


def randomize_norms(module):
    """LayerNorms start at weight 1, bias 0; random values make their gradients matter."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.LayerNorm):
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.5, 0.5)


def record(name, module, run, inputs, masks):
    for t in inputs.values():
        t.requires_grad_(True)
    out = run(**inputs, **masks)
    probe = torch.randn(out.shape)
    (out * probe).sum().backward()
    tensors = {"out": out, "probe": probe}
    tensors.update({"param." + n: p for n, p in module.state_dict().items()})
    tensors.update({"x." + n: t for n, t in inputs.items()})
    tensors.update({"mask." + n: m for n, m in masks.items()})
    tensors.update(with_grads("grad.param.", module.named_parameters()))
    tensors.update(with_grads("grad.x.", inputs.items()))
    save(golden_path("transformer_" + name), tensors, {"module": repr(module)})


def main():
    torch.manual_seed(0)
    model = nn.Transformer(8, 2, 2, 2, 16, dropout=0.0, batch_first=True)
    randomize_norms(model)
    model.train()
    masks = {"tgt_mask": causal_mask(4), "src_key_padding_mask": padding_mask([5, 3, 4], 5),
             "tgt_key_padding_mask": padding_mask([4, 2, 3], 4), "memory_key_padding_mask": padding_mask([5, 3, 4], 5)}
    record("masked", model, lambda src, tgt, **m: model(src, tgt, **m),
           {"src": torch.randn(3, 5, 8), "tgt": torch.randn(3, 4, 8)}, masks)

    model = nn.Transformer(8, 4, 1, 2, 12, dropout=0.0, batch_first=True)
    randomize_norms(model)
    model.train()
    record("unmasked", model, lambda src, tgt: model(src, tgt), {"src": torch.randn(2, 3, 8), "tgt": torch.randn(2, 5, 8)},
           {})

    squares = SquaresTransformer(2, 8, 2, 1, 16, max_len=16)
    randomize_norms(squares)
    squares.train()
    record("squares", squares, lambda source, shifted_target, src_key_padding_mask: squares(
        source, shifted_target, src_key_padding_mask), {"source": torch.randn(3, 3, 2), "shifted_target": torch.randn(3, 2, 2)},
        {"src_key_padding_mask": padding_mask([3, 2, 3], 3)})


if __name__ == "__main__":
    main()
