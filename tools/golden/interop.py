"""Checkpoints between attograd and PyTorch, both ways.

(a) Loads each attograd_<model>.safetensors checkpoint that tests/nn/interop_test.cpp wrote into
    the equivalent PyTorch module (safetensors-style: plain tensors by state_dict name, the
    "optimizer." entries skipped, strict load_state_dict) and compares its outputs with the ones
    attograd stored in attograd_<model>_io.safetensors.
    Also loads each squares_<model>/best.safetensors that `attograd train squares` wrote into the
    peer's PyTorch classes (seed 004's EncoderDecoderSelfAttn, or SquaresTransformer) and compares
    its autoregressive predictions with squares_<model>/predictions.safetensors from
    `attograd eval squares --predictions`.
(b) Writes pytorch_<model>.safetensors (an attograd checkpoint made by PyTorch) and
    pytorch_<model>_io.safetensors (inputs, outputs) for the C++ test to reproduce.
Exits non-zero on any mismatch. Usually run through tools/golden/interop.sh.
Usage: /usr/bin/python3 tools/golden/interop.py <directory>
"""
import glob
import json
import os
import sys

import torch

from golden import ROOT, load, save
from seq2seq import DecoderSelfAttn, EncoderDecoderSelfAttn, EncoderSelfAttn
from transformer import SquaresTransformer

# The PyTorch peer, found as the bench scripts find it: $ATTOGRAD_PEER, else ../shared/peer beside the clone.
sys.path.insert(0, os.environ.get("ATTOGRAD_PEER", os.path.join(ROOT, "..", "shared", "peer")))
from charlm_torch import CharGPT, window_loss  # noqa: E402
from g2p_torch import G2PTransformer, greedy, pad_rows  # noqa: E402

FORMAT, FORMAT_VERSION = "attograd-checkpoint", "1"
CONFIGS = {
    "mlp": {"model": "mlp", "in": 4, "hidden": 8, "out": 3},
    "embedding": {"model": "embedding", "vocab": 10, "dim": 6},
    "seed004": {"model": "seed004_encdec", "n_heads": 3, "d_model": 2, "ff_units": 10, "n_features": 2,
                "input_len": 2, "target_len": 2},
    "gpt": {"model": "gpt", "vocab_size": 13, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16},
}


class NanoGPTNames(torch.nn.Module):
    """The peer's CharGPT under nanoGPT's state_dict names: its wte, wpe, h and ln_f sit on the
    model, nanoGPT (and attograd) keep them in a `transformer` ModuleDict."""

    def __init__(self, gpt):
        super().__init__()
        self.transformer = torch.nn.ModuleDict({"wte": gpt.wte, "wpe": gpt.wpe, "h": gpt.h, "ln_f": gpt.ln_f})
        self.lm_head = gpt.lm_head
        self.gpt = [gpt]  # a list: not registered, so its names do not appear twice

    def forward(self, idx):
        return self.gpt[0](idx, torch.zeros_like(idx))[0]  # logits at every position


def gpt_model(config):
    gpt = CharGPT(config["vocab_size"], config["block_size"], config["n_layer"], config["n_head"], config["n_embd"],
                  bias=config.get("bias", False), dropout=0.0)
    return NanoGPTNames(gpt)


def build(config):
    """The PyTorch module for a checkpoint's config, and how to run it (inputs → outputs)."""
    kind = config["model"]
    if kind == "mlp":
        model = torch.nn.Sequential(torch.nn.Linear(config["in"], config["hidden"]), torch.nn.ReLU(),
                                    torch.nn.LayerNorm(config["hidden"]),
                                    torch.nn.Linear(config["hidden"], config["out"]), torch.nn.GELU())
        return model, lambda inputs: {"out": model(inputs["x"])}
    if kind == "embedding":
        vocab, dim = config["vocab"], config["dim"]
        model = torch.nn.Sequential(torch.nn.Embedding(vocab, dim, padding_idx=0), torch.nn.Linear(dim, dim),
                                    torch.nn.GELU(approximate="tanh"), torch.nn.LayerNorm(dim))
        return model, lambda inputs: {"out": model(inputs["tokens"])}
    if kind == "gpt":
        model = gpt_model(config)
        model.eval()
        return model, lambda inputs: {"logits": model(inputs["idx"])}
    assert kind == "seed004_encdec", f"unknown model {kind}"
    sizes = (config["n_heads"], config["d_model"], config["ff_units"], config["n_features"])
    model = EncoderDecoderSelfAttn(EncoderSelfAttn(*sizes), DecoderSelfAttn(*sizes), config["input_len"],
                                   config["target_len"])

    def run(inputs):
        model.train()
        teacher_forced = model(inputs["X"])
        model.eval()
        return {"out_train": teacher_forced, "out_eval": model(inputs["X"][:, : config["input_len"]])}

    return model, run


def compare(what, actual, expected):
    worst = (actual - expected).abs().max().item() if actual.numel() else 0.0
    ok = actual.shape == expected.shape and torch.allclose(actual, expected, atol=1e-5, rtol=1e-4)
    print(f"{'OK' if ok else 'NOT OK'} {what} (max diff {worst:.3g})")
    return ok


def check_attograd_checkpoint(directory, name):
    tensors, metadata = load(f"{directory}/attograd_{name}.safetensors")
    if metadata.get("format") != FORMAT or metadata.get("format_version") != FORMAT_VERSION:
        print(f"NOT OK attograd → PyTorch {name}: metadata {metadata}")
        return False
    model, run = build(json.loads(metadata["config"]))
    state = {k: v for k, v in tensors.items() if not k.startswith("optimizer.")}
    model.load_state_dict(state, strict=True)
    skipped = len(tensors) - len(state)
    io, _ = load(f"{directory}/attograd_{name}_io.safetensors")
    inputs = {k: v for k, v in io.items() if not k.startswith("output.")}
    with torch.no_grad():
        outputs = run(inputs)
    label = f"attograd → PyTorch {name}" + (f" ({skipped} optimizer tensors skipped)" if skipped else "")
    return all([compare(f"{label} {key}", out, io["output." + key]) for key, out in outputs.items()])


def squares_model(config):
    """The PyTorch peer of an `attograd train squares` checkpoint, and its autoregressive predict."""
    n_features, source_len, target_len = 2, config["source_len"], config["target_len"]
    if config["model"] == "selfattn":
        sizes = (config["heads"], config["d_model"], config["ff_units"], n_features)
        model = EncoderDecoderSelfAttn(EncoderSelfAttn(*sizes), DecoderSelfAttn(*sizes), source_len, target_len)
        return model, model
    model = SquaresTransformer(n_features, config["d_model"], config["heads"], config["layers"], config["ff_units"],
                               max_len=source_len + target_len)

    def predict(source):
        inputs = source[:, -1:]
        for _ in range(target_len):
            inputs = torch.cat([inputs, model(source, inputs)[:, -1:]], dim=1)
        return inputs[:, 1:]

    return model, predict


def check_squares_checkpoint(folder):
    tensors, metadata = load(f"{folder}/best.safetensors")
    config = json.loads(metadata["config"])
    model, predict = squares_model(config)
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, strict=True)
    model.eval()
    io, _ = load(f"{folder}/predictions.safetensors")
    with torch.no_grad():
        predicted = predict(io["source"])
    mse = torch.nn.functional.mse_loss(predicted, io["target"]).item()
    return compare(f"attograd → PyTorch squares {config['model']} predictions (PyTorch's MSE {mse:.6f})", predicted,
                   io["predicted"])


def check_charlm_run(folder):
    """`attograd train charlm`'s best.safetensors in the peer's CharGPT: strict load, then the peer's
    own window_loss over the validation split must equal what `attograd eval charlm` printed."""
    tensors, metadata = load(f"{folder}/best.safetensors")
    config = json.loads(metadata["config"])
    model = gpt_model(config)
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, strict=True)
    model.eval()
    vocabulary = metadata["vocabulary"]
    text = open(config["data"], encoding="utf-8").read()
    data = torch.tensor([vocabulary.index(c) for c in text], dtype=torch.long)
    val = data[int(0.9 * len(data)):]
    ours = float(open(f"{folder}/eval.txt").read().split("val loss ")[1].split()[0])
    theirs, _ = window_loss(model.gpt[0], val, config["block_size"])
    ok = abs(ours - theirs) <= 1e-5 * max(1.0, abs(theirs))
    print(f"{'OK' if ok else 'NOT OK'} attograd → PyTorch train charlm checkpoint: validation loss {theirs:.6f} in "
          f"PyTorch, {ours:.6f} in attograd")
    return ok


def g2p_model(config):
    return G2PTransformer(config["source_vocab"], config["target_vocab"], config["d_model"], config["heads"],
                          config["enc_layers"], config["dec_layers"], config["ff"], config["dropout"],
                          max_len=config["max_len"])


def g2p_greedy(model, metadata, words):
    """The peer's greedy decoding of `words`, as `attograd predict g2p` prints it: word TAB phonemes."""
    source, target = json.loads(metadata["source_symbols"]), json.loads(metadata["target_symbols"])
    model.eval()
    lines = []
    with torch.no_grad():
        for w in words:
            src = pad_rows([[source.index(c) for c in w]])
            out = greedy(model, src, torch.tensor([len(w) + 10]))[0]
            lines.append(f"{w}\t{' '.join(target[i] for i in out)}")
    return lines


def check_g2p_run(folder):
    """`attograd train g2p`'s best.safetensors in the peer's G2PTransformer (strict load): the peer's
    greedy decoding of every word must equal what `attograd predict g2p` printed. Then PyTorch trains
    the model 20 more Adam steps and saves it as an attograd checkpoint, with its own predictions,
    for `attograd predict g2p` to reproduce (interop.sh compares them)."""
    tensors, metadata = load(f"{folder}/best.safetensors")
    config = json.loads(metadata["config"])
    model = g2p_model(config)
    model.load_state_dict({k: v for k, v in tensors.items() if not k.startswith("optimizer.")}, strict=True)
    expected = open(f"{folder}/predictions.tsv", encoding="utf-8").read().splitlines()
    words = [line.split("\t")[0] for line in expected]
    ours = g2p_greedy(model, metadata, words)
    same = sum(a == b for a, b in zip(ours, expected))
    ok = same == len(expected) and len(expected) > 0
    print(f"{'OK' if ok else 'NOT OK'} attograd → PyTorch train g2p checkpoint: {same} of {len(expected)} words "
          f"decoded alike")
    # PyTorch's turn: more training, then an attograd checkpoint of its own.
    torch.manual_seed(7)
    source, target = json.loads(metadata["source_symbols"]), json.loads(metadata["target_symbols"])
    pairs = [line.split("\t") for line in open(f"{folder}/../g2p_pairs.tsv", encoding="utf-8").read().splitlines()]
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    model.train()
    for step in range(20):
        batch = pairs[(step * 32) % len(pairs):][:32]
        src = pad_rows([[source.index(c) for c in w] for w, _ in batch])
        tgt = [[target.index(p) for p in ph.split()] for _, ph in batch]
        tin, tout = pad_rows([[1] + t for t in tgt]), pad_rows([t + [2] for t in tgt])
        logits = model(src, tin)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), tout.reshape(-1), ignore_index=0)
        opt.zero_grad()
        loss.backward()
        opt.step()
    meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": metadata["config"],
            "source_symbols": metadata["source_symbols"], "target_symbols": metadata["target_symbols"],
            "writer": "tools/golden/interop.py"}
    save(f"{folder}/pytorch_g2p.safetensors", model.state_dict(), meta)
    with open(f"{folder}/pytorch_predictions.tsv", "w", encoding="utf-8") as f:
        f.write("\n".join(g2p_greedy(model, metadata, words)) + "\n")
    print("wrote g2p/pytorch_g2p.safetensors and its predictions")
    return ok


def make_inputs(name):
    if name == "mlp":
        return {"x": torch.randn(5, 4)}
    if name == "embedding":
        return {"tokens": torch.tensor([[3, 0, 7, 1], [0, 0, 9, 4]])}
    if name == "gpt":
        return {"idx": torch.randint(13, (2, 8))}
    return {"X": torch.randn(3, 4, 2)}


def write_pytorch_checkpoint(directory, name):
    torch.manual_seed(40 + len(name))
    config = CONFIGS[name]
    model, run = build(config)
    inputs = make_inputs(name)
    with torch.no_grad():
        outputs = run(inputs)
    metadata = {"format": FORMAT, "format_version": FORMAT_VERSION, "config": json.dumps(config),
                "writer": "tools/golden/interop.py"}
    save(f"{directory}/pytorch_{name}.safetensors", model.state_dict(), metadata)
    io = dict(inputs)
    io.update({"output." + k: v for k, v in outputs.items()})
    save(f"{directory}/pytorch_{name}_io.safetensors", io)
    print(f"wrote pytorch_{name}.safetensors ({len(model.state_dict())} tensors)")


def main():
    directory = sys.argv[1]
    ok = all([check_attograd_checkpoint(directory, name) for name in CONFIGS])
    squares = sorted(glob.glob(f"{directory}/squares_*"))
    ok = all([check_squares_checkpoint(folder) for folder in squares]) and ok
    ok = all([check_charlm_run(folder) for folder in sorted(glob.glob(f"{directory}/charlm"))]) and ok
    ok = all([check_g2p_run(folder) for folder in sorted(glob.glob(f"{directory}/g2p"))]) and ok
    for name in CONFIGS:
        write_pytorch_checkpoint(directory, name)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
