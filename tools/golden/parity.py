"""The differential suite against PyTorch (issue 15): random cases for every registered op.

From a fixed seed, each case draws an op of attograd's registry (engine/registry.h), random
shapes (size-1 dims, 0-d and empty tensors where PyTorch allows them, broadcasting), random
attributes (dims, keepdim, bounds, masks with ±inf fills, ...) and random values, and runs the
op in PyTorch in f64: inputs, output and the gradients of Σ out ⊙ w for a random weight w.
Chains of 2-5 ops reuse their inputs, so gradients meet. Where attograd runs f32 on oneDNN
(matmul, softmax, layer_norm, attention at their sizes) a case also stores PyTorch's f32
output and gradients, so the C++ test can hold attograd's f32 error to PyTorch's own.

Inputs are rounded to f32 first, so the f32 and f64 runs see the same numbers.

The elementwise ops, one input or two that broadcast, come from the registry itself (`attograd
gradcheck --list --json`: each entry's PyTorch counterpart, shapes and domains); the other families
are written here.

Writes tests/golden/parity.safetensors; tests/engine/parity_test.cpp replays it.
Run (after building attograd): /usr/bin/python3 tools/golden/parity.py
"""
import contextlib
import functools
import json
import math
import os
import random
import subprocess
import zlib

import torch
import torch.autograd.forward_ad as fwAD
import torch.nn.functional as F

from golden import ROOT, golden_path, load, save

import parity_common
from parity_common import *  # noqa: F401,F403
from parity_families import *  # noqa: F401,F403
from parity_more import *  # noqa: F401,F403


def keep_committed_results(tensors, meta):
    """A case the committed file already holds (same description, same inputs) keeps its stored
    PyTorch results: PyTorch on another machine differs in the last bits of some products, and a
    new op should add its cases without rewriting the others'."""
    if not os.path.exists(golden_path("parity")):
        return
    old, old_meta = load(golden_path("parity"))
    for n, (entry, stored) in enumerate(zip(meta, json.loads(old_meta.get("cases", "[]")))):
        inputs = [k for k in tensors if k.startswith(f"{n}.in")]
        if entry == stored and all(k in old and torch.equal(old[k], tensors[k]) for k in inputs):
            for k in tensors:
                if k.startswith(f"{n}.") and k in old:
                    tensors[k] = old[k]


def main():
    torch.set_num_threads(1)
    for n in range(PASSES):
        parity_common.f32_pass = n == 0  # case() reads it
        for family in [elementwise, reduce, shapes_family, index_family, mask_family, matmul_family, softmax_family,
                       norm_family, loss_family, attention_family, dropout_family, chains]:
            family()
    parity_common.f32_pass = True  # the families below draw once, each op on a stream of its own
    from_registry()
    softmax_backward_family()
    layer_norm_backward_family()
    linear_family()
    second_order_family()
    packed_attention_family()
    linear_add_family()
    forward_ad_family()
    tensors, meta = {}, []
    for n, c in enumerate(CASES):
        xs, out = run(c, torch.float64)
        w = weight_like(out)
        if any(c["grads"]):  # a JVP case's output is a tangent: no gradients
            out.backward(w)
        entry = dict(op=c["op"], call=c["call"], attrs=encode(c["attrs"]), grads=c["grads"], f32=c["f32"])
        for j, x in enumerate(c["inputs"]):
            tensors[f"{n}.in{j}"] = x
            if c["grads"][j]:
                tensors[f"{n}.grad{j}"] = xs[j].grad if xs[j].grad is not None else torch.zeros_like(x)
        tensors[f"{n}.out"] = out
        tensors[f"{n}.w"] = w
        if c["f32"]:
            xs32, out32 = run(c, torch.float32)
            out32.backward(w.float())
            tensors[f"{n}.out32"] = out32
            for j, x in enumerate(xs32):
                if c["grads"][j]:
                    tensors[f"{n}.grad32_{j}"] = x.grad
        meta.append(entry)
    keep_committed_results(tensors, meta)
    save(golden_path("parity"), tensors, {"cases": json.dumps(meta, separators=(",", ":")), "torch": torch.__version__})
    ops = sorted({c["op"] for c in CASES})
    print(f"{len(CASES)} cases over {len(ops)} ops, {sum(c['f32'] for c in CASES)} with f32 results")


if __name__ == "__main__":
    main()
