#!/usr/bin/env python3
"""Writes a damaged or hostile copy of an attograd checkpoint. Most modes keep it a valid,
checksummed file, so the loader's own checks (not the checksum) must catch it. Plain python3.

  edit_checkpoint.py IN OUT shape            the first model tensor gets one more row (wrong shape)
  edit_checkpoint.py IN OUT dtype            the first model tensor is stored as F64 (wrong dtype)
  edit_checkpoint.py IN OUT nan|inf          the first model tensor's first value becomes NaN / +Inf (F32 or BF16)
  edit_checkpoint.py IN OUT claim-dtype D    the first model tensor's header says dtype D, its bytes unchanged
  edit_checkpoint.py IN OUT scale F          every model tensor's values times F (finite, so it loads)
  edit_checkpoint.py IN OUT metadata KEY S   metadata KEY (e.g. target_symbols) set to the string S
  edit_checkpoint.py IN OUT config KEY JSON  the config's KEY set to the JSON value (e.g. heads 200000)
  edit_checkpoint.py IN OUT no-config-key KEY  the config without KEY
  edit_checkpoint.py IN OUT deep-config N    the config is an object nested N levels deep
  edit_checkpoint.py IN OUT deep-metadata KEY N  metadata KEY (e.g. vocabulary) is a list nested N deep
  edit_checkpoint.py IN OUT deep-header N    the header holds a list nested N levels deep (no checksum)
  edit_checkpoint.py IN OUT duplicate        the first model tensor's entry appears twice (no checksum)
  edit_checkpoint.py IN OUT gap              4 bytes no tensor covers before the second tensor
  edit_checkpoint.py IN OUT overlap          a second name for the first tensor's bytes
  edit_checkpoint.py IN OUT trailing         16 bytes after the last tensor
  edit_checkpoint.py IN OUT huge-offsets     the first tensor's data_offsets near 2^64
  edit_checkpoint.py IN OUT huge-shape       the first tensor's shape [3, 6148914691236517206] (product wraps 2^64)
  edit_checkpoint.py IN OUT header-length N  only the 8-byte header length changed, to N
  edit_checkpoint.py IN OUT no-optimizer     without the optimizer's tensors (smaller, for eval)

The checksum is recomputed as attograd does: FNV-1a 64 over the header as canonical JSON (sorted
keys, no spaces, without the checksum) and then the data section.
"""
import json
import math
import struct
import sys

CHECKSUM = "attograd_checksum"


def fnv1a(data, h=0xCBF29CE484222325):
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def write(dst, header, blobs, names, checksum=True, splice=None, extra=b"", gap_before=None, edit=None):
    offset, data = 0, b""
    for name in names:
        if name == gap_before:
            data += b"\0" * 4
            offset += 4
        header[name]["data_offsets"] = [offset, offset + len(blobs[name])]
        offset += len(blobs[name])
        data += blobs[name]
    data += extra
    if edit:  # after the offsets are laid out, before the checksum
        edit(header)
    header["__metadata__"].pop(CHECKSUM, None)
    if checksum:
        canonical = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
        header["__metadata__"][CHECKSUM] = "fnv1a64:%016x" % fnv1a(data, fnv1a(canonical))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if splice is not None:  # what a dict cannot hold: a repeated key, nesting json.dumps would refuse
        text = b"{" + splice + b"," + text[1:]
    text += b" " * (-len(text) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text + data)


def main(src, dst, mode, *args):
    raw = open(src, "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    if mode == "header-length":
        open(dst, "wb").write(struct.pack("<Q", int(args[0])) + raw[8:])
        return
    header = json.loads(raw[8 : 8 + length])
    data = raw[8 + length :]
    names = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    target = next(k for k in names if not k.startswith("optimizer."))
    blobs = {}
    for name in names:
        begin, end = header[name]["data_offsets"]
        blobs[name] = data[begin:end]
    entry = header[target]
    metadata = header["__metadata__"]
    deep = lambda n, open_, close: open_ * n + close * n
    if mode == "shape":
        row = 4 * (len(blobs[target]) // 4 // entry["shape"][0])
        blobs[target] += blobs[target][:row]
        entry["shape"][0] += 1
    elif mode == "dtype":
        floats = struct.unpack(f"<{len(blobs[target]) // 4}f", blobs[target])
        blobs[target] = struct.pack(f"<{len(floats)}d", *floats)
        entry["dtype"] = "F64"
    elif mode in ("nan", "inf"):
        if entry["dtype"] == "BF16":  # the top half of the f32 value
            blobs[target] = struct.pack("<H", 0x7FC0 if mode == "nan" else 0x7F80) + blobs[target][2:]
        else:
            blobs[target] = struct.pack("<f", math.nan if mode == "nan" else math.inf) + blobs[target][4:]
    elif mode == "claim-dtype":
        entry["dtype"] = args[0]
    elif mode == "scale":
        for name in names:
            if not name.startswith("optimizer."):
                floats = struct.unpack(f"<{len(blobs[name]) // 4}f", blobs[name])
                blobs[name] = struct.pack(f"<{len(floats)}f", *(max(-3e38, min(3e38, x * float(args[0]))) for x in floats))
    elif mode == "metadata":
        metadata[args[0]] = args[1]
    elif mode == "config":
        config = json.loads(metadata["config"])
        config[args[0]] = json.loads(args[1])
        metadata["config"] = json.dumps(config, separators=(",", ":"))
    elif mode == "no-config-key":
        config = json.loads(metadata["config"])
        del config[args[0]]
        metadata["config"] = json.dumps(config, separators=(",", ":"))
    elif mode == "deep-config":
        metadata["config"] = '{"a":' * int(args[0]) + "1" + "}" * int(args[0])
    elif mode == "deep-metadata":
        metadata[args[0]] = deep(int(args[1]), "[", "]")
    elif mode == "deep-header":
        return write(dst, header, blobs, names, checksum=False, splice=b'"deep":' + deep(int(args[0]), "[", "]").encode())
    elif mode == "duplicate":
        splice = json.dumps({target: entry}, separators=(",", ":"))[1:-1].encode()
        return write(dst, header, blobs, names, checksum=False, splice=splice)
    elif mode == "gap":
        return write(dst, header, blobs, names, gap_before=names[1])
    elif mode == "trailing":
        return write(dst, header, blobs, names, extra=b"\0" * 16)
    elif mode == "overlap":
        alias = lambda h: h.__setitem__("alias", dict(h[target], data_offsets=list(h[target]["data_offsets"])))
        return write(dst, header, blobs, names, edit=alias)
    elif mode == "huge-offsets":
        return write(dst, header, blobs, names, edit=lambda h: h[target].__setitem__("data_offsets", [2**64 - 8, 2**64 - 1]))
    elif mode == "huge-shape":
        entry["shape"] = [3, 6148914691236517206]
    elif mode == "no-optimizer":
        names = [n for n in names if not n.startswith("optimizer.")]
        for n in list(header):
            if n.startswith("optimizer."):
                del header[n]
        metadata.pop("optimizer", None)
    else:
        sys.exit(f"unknown mode {mode}")
    write(dst, header, blobs, names)


if __name__ == "__main__":
    main(*sys.argv[1:])
