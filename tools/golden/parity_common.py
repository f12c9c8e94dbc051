"""The parity suite's shared parts (tools/golden/parity.py): the random streams, drawing inputs,
and recording a case.
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

R = random.Random(15)
G = torch.Generator().manual_seed(15)
INF = float("inf")

# ---- drawing inputs


def shape(rank=None, lo=0, hi=4, empty=0.1):
    """A random shape; dims of size 1 often, 0 now and then."""
    rank = R.randint(0, 3) if rank is None else rank
    dims = []
    for _ in range(rank):
        u = R.random()
        dims.append(0 if u < empty else 1 if u < 0.35 else R.randint(max(lo, 2), max(hi, 2)))
    return dims


def real(s, low=-2.0, high=2.0, away=None, ties=False, kinks=(), margin=0.0):
    """f64 values exactly representable in f32, in [low, high], optionally |x - a| > margin for
    away=(a, margin), or for every a of kinks."""
    if ties:
        t = torch.randint(-2, 3, s, generator=G).double()
    else:
        t = low + (high - low) * torch.rand(s, generator=G, dtype=torch.float64)
        for point, margin in ([away] if away is not None else []) + [(k, margin) for k in kinks]:
            near = (t - point).abs() < margin
            t = torch.where(near, t + 2 * margin * torch.sign(t - point + 1e-12), t)
    return t.float().double()


def mask(s, p=0.5):
    return torch.rand(s, generator=G) < p


def broadcast_pair():
    """Two shapes that broadcast together."""
    out = shape(R.randint(0, 3))
    a, b = [], []
    for d in out:
        a.append(d if R.random() < 0.7 else 1)
        b.append(d if R.random() < 0.7 else 1)
    # Drop leading dims of one operand now and then.
    if R.random() < 0.3:
        b = b[R.randint(0, len(b)):]
    if R.random() < 0.3:
        a = a[R.randint(0, len(a)):]
    return a, b


# ---- one case

CASES = []
JVP_CASES = 3  # JVP cases per op (forward_ad_family)
# Ops whose JVP differs from PyTorch's forward AD on purpose, and why.
JVP_DIFFERS = {"embedding_padding": "attograd's JVP is its VJP's transpose: the padding row gets no gradient, so "
                                    "it carries no tangent either; PyTorch's forward AD (auto_linear) looks the "
                                    "padding row's tangent up as any other, disagreeing with its own backward"}
PASSES = 3  # every family runs this often with fresh draws; its f32 cases only in the first pass
f32_pass = True


def case(op, call, inputs, fn, attrs=None, grads=None, f32=False):
    """Records a case: inputs (tensors), fn(*inputs) in PyTorch, which inputs get gradients."""
    if f32 and not f32_pass:
        return
    grads = grads if grads is not None else [t.is_floating_point() for t in inputs]
    CASES.append(dict(op=op, call=call, attrs=attrs or {}, inputs=inputs, fn=fn, grads=grads, f32=f32))


def run(c, dtype):
    xs = []
    for t, g in zip(c["inputs"], c["grads"]):
        t = t.to(dtype) if t.is_floating_point() else t
        xs.append(t.clone().requires_grad_(g))
    out = c["fn"](*xs)
    return xs, out


def weight_like(out):
    return real(list(out.shape), -1, 1)
