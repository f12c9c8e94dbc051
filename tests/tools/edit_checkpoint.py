#!/usr/bin/env python3
"""Writes a damaged copy of an attograd checkpoint that is still a valid, checksummed file, so the
loader's own checks (not the checksum) must catch it. Plain python3, no torch.

  edit_checkpoint.py IN OUT shape   the first model tensor gets one more row (wrong shape)
  edit_checkpoint.py IN OUT dtype   the first model tensor is stored as F64 (wrong dtype)

The checksum is recomputed as attograd does: FNV-1a 64 over the header as canonical JSON (sorted
keys, no spaces, without the checksum) and then the data section.
"""
import json
import struct
import sys

CHECKSUM = "attograd_checksum"


def fnv1a(data, h=0xCBF29CE484222325):
    for byte in data:
        h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def main(src, dst, mode):
    raw = open(src, "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + length])
    data = raw[8 + length :]
    names = sorted((k for k in header if k != "__metadata__"), key=lambda k: header[k]["data_offsets"][0])
    target = next(k for k in names if not k.startswith("optimizer."))
    blobs = {}
    for name in names:
        begin, end = header[name]["data_offsets"]
        blobs[name] = data[begin:end]
    entry = header[target]
    if mode == "shape":
        row = 4 * (len(blobs[target]) // 4 // entry["shape"][0])
        blobs[target] += blobs[target][:row]
        entry["shape"][0] += 1
    elif mode == "dtype":
        floats = struct.unpack(f"<{len(blobs[target]) // 4}f", blobs[target])
        blobs[target] = struct.pack(f"<{len(floats)}d", *floats)
        entry["dtype"] = "F64"
    else:
        sys.exit(f"unknown mode {mode}")
    offset, new_data = 0, b""
    for name in names:
        header[name]["data_offsets"] = [offset, offset + len(blobs[name])]
        offset += len(blobs[name])
        new_data += blobs[name]
    header["__metadata__"].pop(CHECKSUM)
    canonical = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    header["__metadata__"][CHECKSUM] = "fnv1a64:%016x" % fnv1a(new_data, fnv1a(canonical))
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * (-len(text) % 8)
    open(dst, "wb").write(struct.pack("<Q", len(text)) + text + new_data)


if __name__ == "__main__":
    main(*sys.argv[1:])
