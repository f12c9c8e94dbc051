"""Shared by the golden-data scripts: write a dict of torch tensors as a safetensors file.

Run the scripts with Debian's PyTorch: /usr/bin/python3 tools/golden/<script>.py
They write tests/golden/<name>.safetensors, which the C++ tests (label `golden`) load.
"""
import json
import os
import struct

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")

_DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.bool: "BOOL", torch.bfloat16: "BF16"}


def fnv1a64(data, value=0xCBF29CE484222325):
    for byte in data:
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


def save(path, tensors, metadata=None):
    """Writes {name: tensor} to path in the safetensors layout (8-byte length, JSON, data). An
    attograd checkpoint (metadata format "attograd-checkpoint") gets the checksum attograd requires:
    FNV-1a 64 of the header as canonical JSON (sorted keys, no spaces) and then of the data."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        data = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()  # numpy has no bf16
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    if metadata and metadata.get("format") == "attograd-checkpoint":
        canonical = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        digest = fnv1a64(b"".join(blobs), fnv1a64(canonical))
        header["__metadata__"]["attograd_checksum"] = f"fnv1a64:{digest:016x}"
    text = json.dumps(header, separators=(",", ":"))
    text += " " * ((8 - len(text) % 8) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text.encode())
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def load(path):
    """Reads a safetensors file into ({name: tensor}, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    metadata = header.pop("__metadata__", {})
    data = raw[8 + length :]
    names = {v: k for k, v in _DTYPES.items()}
    out = {}
    for name, e in header.items():
        b, end = e["data_offsets"]
        t = torch.frombuffer(bytearray(data[b:end]), dtype=names[e["dtype"]]) if end > b else torch.empty(0, dtype=names[e["dtype"]])
        out[name] = t.reshape(e["shape"]).clone()
    return out, metadata


def golden_path(name):
    os.makedirs(GOLDEN_DIR, exist_ok=True)
    return os.path.join(GOLDEN_DIR, name + ".safetensors")


def with_grads(prefix, named):
    """{prefix + name: tensor.grad} for every tensor that has a gradient."""
    return {prefix + n: t.grad for n, t in named if t.grad is not None}
