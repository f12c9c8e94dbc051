"""Seed 004's printed cells run by PyTorch 1.13 with the seed's classes (tools/golden/seq2seq.py),
as its code is written, for the walkthrough test. Keys are "<section>.<what>" as
seeds/walkthrough_004.cpp names its checks.
Writes tests/golden/walkthrough_004.safetensors. Run: /usr/bin/python3 tools/golden/walkthrough_004.py
"""
import torch

from golden import golden_path, save
from seq2seq import DecoderSelfAttn, EncoderSelfAttn, subsequent_mask


def main():
    out = {}
    full_seq = torch.tensor([[-1, -1], [-1, 1], [1, 1], [1, -1]]).float().view(1, 4, 2)
    source_seq, target_seq = full_seq[:, :2], full_seq[:, 2:]
    torch.manual_seed(11)
    encself = EncoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)
    encoder_states = encself(source_seq)
    out["2.5.3.encoder_states"] = encoder_states
    shifted_seq = torch.cat([source_seq[:, -1:], target_seq[:, :-1]], dim=1)
    torch.manual_seed(13)
    decself = DecoderSelfAttn(n_heads=3, d_model=2, ff_units=10, n_features=2)
    decself.init_keys(encoder_states)
    decself(shifted_seq, target_mask=subsequent_mask(2))
    out["2.5.4.3.self_attn alphas"] = decself.self_attn_heads.alphas
    inputs = source_seq[:, -1:]
    step = decself(inputs, subsequent_mask(1))  # the mask lands in source_mask, as in the notebook
    out["2.5.4.4.out (step 1)"] = step
    inputs = torch.cat([inputs, step[:, -1:, :]], dim=-2)
    out["2.5.4.4.inputs (step 1)"] = inputs
    step = decself(inputs, subsequent_mask(2))
    out["2.5.4.4.out (step 2)"] = step
    inputs = torch.cat([inputs, step[:, -1:, :]], dim=-2)
    out["2.5.4.4.inputs (step 2)"] = inputs
    out["2.5.4.4.inputs[:, 1:]"] = inputs[:, 1:]
    save(golden_path("walkthrough_004"), {k: v.detach().contiguous() for k, v in out.items()},
         {"torch": torch.__version__})


if __name__ == "__main__":
    main()
