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


# ---- the ops, by family (the attributes the registry fixes are fixed here too)

# The elementwise ops come from the registry (registry_ops). Those older than that keep their place
# in the seed-15 stream, in this order, so that every case committed before stays as it was;
# softplus keeps its stream of seed 17; every op added since draws on a stream of its own.
SEED15_ELEMENTWISE = ["neg", "exp", "log", "sqrt", "abs", "relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "clone",
                      "to", "rsub_scalar"]
SEED15_BINARY = ["add", "sub", "mul", "div"]
OWN_SEEDS = {"softplus": 17}


def draw(s, domain):
    """Values of shape s from one of the registry's domains (low, high, kinks, kink_margin)."""
    return real(s, domain["low"], domain["high"], kinks=domain["kinks"], margin=domain["kink_margin"])


def registry_cases(op, count):
    """`count` cases of an entry with a PyTorch counterpart, its inputs drawn from its domains: one of
    a random shape of rank 0-3 for every input ("any"), or two whose shapes broadcast together ("broadcast")."""
    torch_op = op["torch"]
    fn = eval(torch_op["expression"], {"torch": torch, "F": F})
    for _ in range(count):
        shapes = [shape()] * len(torch_op["domains"]) if torch_op["shapes"] == "any" else broadcast_pair()
        case(op["name"], "registry", [draw(s, d) for s, d in zip(shapes, torch_op["domains"])], fn)


def elementwise():
    ops = {op["name"]: op for op in registry_ops()}
    for name in SEED15_ELEMENTWISE:
        registry_cases(ops[name], 12)
    for name in SEED15_BINARY:
        registry_cases(ops[name], 20)
    for _ in range(12):
        s = R.choice([1.5, -2.5, 0.0, 1e3])
        case("add_scalar", "add_scalar", [real(shape())], lambda x, s=s: x + s, dict(s=s))
        case("mul_scalar", "mul_scalar", [real(shape())], lambda x, s=s: x * s, dict(s=s))
        case("rdiv_scalar", "rdiv_scalar", [real(shape(), away=(0, 0.3))], lambda x, s=s: s / x, dict(s=s))
    for _ in range(16):
        p = R.choice([3.0, 2.0, 0.5, -1.5, 1.0, 0.0])
        name = "pow" if p == int(p) and p >= 0 else "pow_fractional"
        case(name, "pow", [real(shape(), 0.2, 2) if name == "pow_fractional" else real(shape())],
             lambda x, p=p: x**p, dict(p=p))
    for _ in range(20):
        lo, hi = sorted([R.uniform(-1.5, 1.5), R.uniform(-1.5, 1.5)])
        if R.random() < 0.25:
            lo, hi = hi, lo  # min > max: max everywhere, no gradient
        x = real(shape())
        x = torch.where(((x - lo).abs() < 1e-2) | ((x - hi).abs() < 1e-2), x + 0.05, x).float().double()
        case("clamp", "clamp", [x], lambda x, lo=lo, hi=hi: torch.clamp(x, lo, hi), dict(min=lo, max=hi))


def dims_of(rank, k):
    dims = R.sample(range(rank), k)
    return [d - rank if R.random() < 0.4 else d for d in dims]


def reduce():
    for _ in range(14):
        case("sum", "registry", [real(shape())], torch.sum)
        case("mean", "registry", [real(shape(empty=0))], torch.mean)
        case("max", "registry", [real(shape(lo=1, empty=0), ties=R.random() < 0.5)], torch.max)
        case("min", "registry", [real(shape(lo=1, empty=0), ties=R.random() < 0.5)], torch.min)
    for _ in range(16):
        s = shape(R.randint(1, 4))
        dims = dims_of(len(s), R.randint(1, len(s)))
        keep = R.random() < 0.5
        op = "sum_dims" if not keep else "sum_keepdim"
        case(op, "sum_dims", [real(s)], lambda x, d=dims, k=keep: torch.sum(x, d, k), dict(dims=dims, keepdim=keep))
        s = shape(R.randint(1, 4), empty=0)
        dims = dims_of(len(s), R.randint(1, len(s)))
        case("mean_dims", "mean_dims", [real(s)], lambda x, d=dims, k=keep: torch.mean(x, d, k),
             dict(dims=dims, keepdim=keep))
    for name, fn in [("max_dim", torch.max), ("min_dim", torch.min)]:
        for _ in range(14):
            s = shape(R.randint(1, 4), empty=0)
            d = dims_of(len(s), 1)[0]
            keep = R.random() < 0.5
            x = torch.randperm(max(1, math.prod(s)), generator=G)[: math.prod(s)].double().reshape(s) / 4
            case(name, name, [x], lambda x, d=d, k=keep, fn=fn: fn(x, d, k)[0], dict(dim=d, keepdim=keep))
    for _ in range(12):
        a, b = broadcast_pair()
        target = list(torch.broadcast_shapes(a, b))
        case("broadcast_to", "broadcast_to", [real(a)], lambda x, t=target: x.broadcast_to(t), dict(shape=target))
        case("sum_to", "sum_to", [real(target)], lambda x, t=a: x.sum_to_size(t) if t else x.sum(), dict(shape=a))


def shapes_family():
    for _ in range(10):
        s = shape(R.randint(1, 3), empty=0.05)
        n = math.prod(s)
        new = [n] if R.random() < 0.3 else [-1] + ([1] if R.random() < 0.5 else [])
        case("reshape", "reshape", [real(s)], lambda x, t=new: x.reshape(t), dict(shape=new))
        s = shape(R.randint(1, 4))
        a, b = sorted([R.randrange(len(s)), R.randrange(len(s))])
        case("flatten", "flatten", [real(s)], lambda x, a=a, b=b: torch.flatten(x, a, b), dict(start=a, end=b))
        s = shape()
        d = R.randint(-len(s) - 1, len(s))
        case("unsqueeze", "unsqueeze", [real(s)], lambda x, d=d: x.unsqueeze(d), dict(dim=d))
        s = shape()
        case("squeeze", "registry", [real(s)], torch.squeeze)
    for _ in range(12):
        s = shape(R.randint(1, 4))
        a, b = R.randrange(-len(s), len(s)), R.randrange(-len(s), len(s))
        op = "transpose_inner" if len(s) >= 2 and R.random() < 0.4 else "transpose"
        if op == "transpose_inner":
            a, b = -2, -1
        case(op, "transpose", [real(s)], lambda x, a=a, b=b: x.transpose(a, b), dict(dim0=a, dim1=b))
        s = shape(R.choice([3, 4]))
        perm = list(range(len(s)))
        R.shuffle(perm)
        case("permute" if len(s) == 3 else "permute_4d", "permute", [real(s)], lambda x, p=perm: x.permute(p),
             dict(dims=perm))
    for op in ["cat", "cat_dim1", "cat_last"]:
        for _ in range(8):
            s = shape(R.randint(1, 3) if op != "cat_dim1" else R.randint(2, 3))
            d = {"cat": 0, "cat_dim1": 1, "cat_last": -1}[op] if R.random() < 0.5 else R.randrange(-len(s), len(s))
            parts = []
            for _ in range(R.randint(1, 3)):
                p = list(s)
                p[d] = R.randint(0, 3)
                parts.append(real(p))
            case(op, "cat", parts, lambda *xs, d=d: torch.cat(xs, d), dict(dim=d))
    for op in ["stack", "stack_last"]:
        for _ in range(8):
            s = shape()
            d = 0 if op == "stack" else -1
            if R.random() < 0.5:
                d = R.randint(-len(s) - 1, len(s))
            parts = [real(s) for _ in range(R.randint(1, 3))]
            case(op, "stack", parts, lambda *xs, d=d: torch.stack(xs, d), dict(dim=d))
    # split/chunk: each piece scaled by its position, then put back together (the registry's form).
    def scaled_cat(pieces, d):
        return torch.cat([p * (k + 1) for k, p in enumerate(pieces)], d)

    for _ in range(12):
        s = shape(R.randint(1, 3), empty=0.15)
        d = R.randrange(-len(s), len(s))
        size = R.randint(1, 3)
        case("split", "split", [real(s)], lambda x, n=size, d=d: scaled_cat(torch.split(x, n, d), d),
             dict(size=size, dim=d))
        n = R.randint(1, 4)
        case("chunk", "chunk", [real(s)], lambda x, n=n, d=d: scaled_cat(torch.chunk(x, n, d), d),
             dict(chunks=n, dim=d))
    for _ in range(14):
        s = shape(R.randint(1, 3), lo=2, hi=7)
        d = R.randrange(-len(s), len(s))
        start, end, step = R.randint(-6, 6), R.choice([R.randint(-6, 8), 100]), R.randint(1, 3)
        op = "slice_negative_end" if end < 0 else "slice"
        idx = [slice(None)] * len(s)
        idx[d] = slice(start, end, step)
        case(op, "slice", [real(s)], lambda x, i=tuple(idx): x[i], dict(dim=d, start=start, end=end, step=step))
        size = s[d]
        begin = R.randint(-size, size)
        length = R.randint(0, size - (begin + size if begin < 0 else begin))
        case("narrow", "narrow", [real(s)], lambda x, d=d, b=begin, n=length: x.narrow(d, b, n),
             dict(dim=d, start=begin, length=length))
    for _ in range(8):  # slice's backward (the registry's: into (B, 7, 2) at 2, 4, 6 of dim 1)
        def back(g):
            out = torch.zeros(g.shape[0], 7, 2, dtype=g.dtype)
            out[:, -5:7:2] = g
            return out

        case("slice_backward", "registry", [real([R.randint(1, 3), 3, 2])], back)


def index_family():
    for op, dim in [("index_select", 0), ("index_select_dim1", 1), ("index_select_last", -1)]:
        for _ in range(8):
            s = shape(R.randint(max(1, dim + 1), 3), lo=2, empty=0)
            n = R.randint(0, 6)
            idx = torch.randint(0, s[dim], (n,), generator=G)
            case(op, "index_select", [real(s), idx], lambda x, i, d=dim: x.index_select(d, i), dict(dim=dim))
    for _ in range(16):
        rows = R.randint(1, 6)
        pad = R.choice([None, R.randint(-rows, rows - 1)])
        idx = torch.randint(0, rows, shape(R.randint(0, 2), lo=1), generator=G)
        op = "embedding" if pad is None else "embedding_padding"
        case(op, "embedding", [real([rows, R.randint(1, 4)]), idx], lambda w, i, p=pad: F.embedding(i, w, p),
             dict(padding_idx=pad))
    for _ in range(8):  # the gathers' backwards (the registry's: into (B, 4, 2) along dim 1; into (4, 3), pad 2)
        B, n = R.randint(1, 3), R.randint(0, 6)
        idx = torch.randint(0, 4, (n,), generator=G)
        case("index_select_backward", "registry", [real([B, n, 2]), idx],
             lambda g, i: torch.zeros(g.shape[0], 4, 2, dtype=g.dtype).index_add(1, i, g))
        idx = torch.randint(0, 4, (R.randint(1, 7),), generator=G)
        keep = lambda i, g: (i != 2).to(g.dtype).unsqueeze(1)
        case("embedding_backward", "registry", [real([len(idx), 3]), idx],
             lambda g, i: torch.zeros(4, 3, dtype=g.dtype).index_add(0, i, g * keep(i, g)))


def mask_family():
    for _ in range(16):
        a, b = broadcast_pair()
        target = list(torch.broadcast_shapes(a, b))
        value = R.choice([-0.75, 0.0, -INF, INF, 3.5])
        case("masked_fill", "masked_fill", [real(target), mask(b)], lambda x, m, v=value: x.masked_fill(m, v),
             dict(value=value))
        c = broadcast_pair()
        third = list(torch.broadcast_shapes(*c)) if R.random() < 0.5 else c[0]
        case("where", "registry", [mask(c[0]), real(c[1]), real(third)], torch.where)
    for op in ["triu", "triu_diagonal_1", "triu_diagonal_m1", "tril", "tril_diagonal_1", "tril_diagonal_m1"]:
        for _ in range(4):
            s = shape(R.randint(2, 4))
            k = {"": 0, "_diagonal_1": 1, "_diagonal_m1": -1}[op[4:]] if R.random() < 0.5 else R.randint(-3, 3)
            fn = torch.triu if op.startswith("triu") else torch.tril
            case(op, op[:4], [real(s)], lambda x, k=k, fn=fn: fn(x, k), dict(diagonal=k))


def matmul_family():
    def operand(batch, r, c, transposed, vector):
        if vector:
            return real([r if not transposed else c] if False else [c if transposed else r])
        return real(batch + ([c, r] if transposed else [r, c]))

    for op, ta, tb in [("matmul", False, False), ("matmul_ta", True, False), ("matmul_tb", False, True),
                       ("matmul_tatb", True, True), ("matmul_batched", False, False), ("matmul_vector", False, False)]:
        for _ in range(10):
            m, k, n = R.randint(1, 5), R.randint(0, 5), R.randint(1, 5)
            ba, bb = ([], []) if op not in ("matmul_batched",) else broadcast_pair()
            if op in ("matmul_ta", "matmul_tb", "matmul_tatb") and R.random() < 0.4:
                ba, bb = broadcast_pair()
            a = real(ba + ([k, m] if ta else [m, k]))
            b = real(bb + ([n, k] if tb else [k, n]))
            if op == "matmul_vector":
                if R.random() < 0.5:
                    a = real([k])
                else:
                    b = real([k])
                if R.random() < 0.3:
                    a, b = real([k]), real([k])
            case(op, "matmul", [a, b], lambda a, b, ta=ta, tb=tb: mm(a, b, ta, tb), dict(ta=ta, tb=tb))
    # f32 at oneDNN's sizes (≥ 8192 multiply-adds)
    for op, ta, tb in [("matmul", False, False), ("matmul_ta", True, False), ("matmul_tb", False, True),
                       ("matmul_tatb", True, True), ("matmul_batched", False, False)]:
        m, k, n = R.randint(16, 40), R.randint(24, 64), R.randint(16, 40)
        batch = [2] if op == "matmul_batched" else []
        a = real(batch + ([k, m] if ta else [m, k]))
        b = real(batch + ([n, k] if tb else [k, n]))
        case(op, "matmul", [a, b], lambda a, b, ta=ta, tb=tb: mm(a, b, ta, tb), dict(ta=ta, tb=tb), f32=True)


def mm(a, b, ta, tb):
    if ta and a.dim() >= 2:
        a = a.transpose(-1, -2)
    if tb and b.dim() >= 2:
        b = b.transpose(-1, -2)
    return torch.matmul(a, b)


def softmax_family():
    for log in [False, True]:
        fn = torch.log_softmax if log else torch.softmax
        base = "log_softmax" if log else "softmax"
        for suffix, fixed in [("", -1), ("_dim0", 0), ("_dim1", 1)]:
            for _ in range(8):
                s = shape(R.randint(max(1, fixed + 1), 3))
                d = fixed if R.random() < 0.5 else R.randrange(-len(s), len(s)) if s else 0
                x = real(s, -4, 4)
                if R.random() < 0.3 and x.numel():
                    x = x.masked_fill(mask(s, 0.3), -INF)  # -inf entries (rows of all -inf: NaN)
                if R.random() < 0.1 and x.numel():
                    x = x.masked_fill(mask(s, 0.1), INF)
                case(base + suffix, "softmax", [x], lambda x, d=d, fn=fn: fn(x, d), dict(dim=d, log=log))
        for _ in range(3):  # f32 past oneDNN's threshold (256 elements), one dominant logit per row
            x = real([R.randint(3, 8), R.randint(100, 300)], -4, 4)
            x[:, 0] = 12
            case(base, "softmax", [x], lambda x, fn=fn: fn(x, -1), dict(dim=-1, log=log), f32=True)


def norm_family():
    for op, affine in [("layer_norm", 2), ("layer_norm_weight_only", 1), ("layer_norm_no_affine", 0),
                       ("layer_norm_no_affine_last2", 0)]:
        for f32 in [False] * 8 + [True] * 4:
            k = 2 if op.endswith("last2") else R.randint(1, 2)
            s = shape(R.randint(k, 3), lo=3, hi=6, empty=0) if not f32 else [R.randint(8, 32), R.randint(16, 64)]
            if f32 and R.random() < 0.5:  # a model's width, on oneDNN
                s, k = [R.randint(4, 16), R.choice([16, 64, 100, 256, 384, 512])], 1
            k = min(k, len(s))
            ns = s[len(s) - k:]
            if math.prod(ns) < 3:
                s, ns = s[: len(s) - k] + [4] * k, [4] * k
            eps = R.choice([1e-5, 1e-3])
            ins = [real(s)] + [real(ns, 0.5, 1.5) for _ in range(affine)]
            case(op, "layer_norm", ins,
                 lambda x, *wb, ns=ns, eps=eps: F.layer_norm(x, ns, *(list(wb) + [None] * (2 - len(wb))), eps=eps),
                 dict(normalized=len(ns), eps=eps), f32=f32)


def loss_family():
    red = {"mean": "", "sum": "_sum", "none": "_none"}
    for r, suffix in red.items():
        for _ in range(6):
            s = shape(R.randint(0, 3), empty=0)
            case("mse_loss" + suffix, "mse_loss", [real(s), real(s)], lambda a, b, r=r: F.mse_loss(a, b, reduction=r),
                 dict(reduction=r))
            case("binary_cross_entropy_with_logits" + suffix, "bce_with_logits", [real(s, -4, 4), real(s, 0, 1)],
                 lambda a, b, r=r: F.binary_cross_entropy_with_logits(a, b, reduction=r), dict(reduction=r))
            n, c = R.randint(1, 7), R.randint(2, 5)
            t = torch.randint(0, c, (n,), generator=G)
            ignore = R.choice([-100, 0])
            t[0] = R.randrange(1, c)  # row 0 is never ignored
            if n > 1 and R.random() < 0.5:
                t[R.randrange(1, n)] = ignore
            op = "cross_entropy_ignore_class0" if ignore == 0 and r == "mean" else "cross_entropy" + suffix
            logits = real([n, c], -3, 3) if R.random() < 0.8 else real([n, c], -3, 3) * 1e6
            case(op, "cross_entropy", [logits, t],
                 lambda x, t, r=r, i=ignore: F.cross_entropy(x, t, ignore_index=i, reduction=r),
                 dict(reduction=r, ignore_index=ignore))
            if ignore == -100:  # PyTorch's label smoothing (0.1, as the registry entry)
                case("cross_entropy_label_smoothing" + suffix, "cross_entropy", [logits, t],
                     lambda x, t, r=r: F.cross_entropy(x, t, reduction=r, label_smoothing=0.1),
                     dict(reduction=r, ignore_index=-100, label_smoothing=0.1))
    x = torch.tensor([[1e300, 1e300, 0.0], [1e12, 1e12 - 1, 1e12 - 2]], dtype=torch.float64)
    case("cross_entropy_none", "cross_entropy", [x, torch.tensor([0, 0])],
         lambda x, t: F.cross_entropy(x, t, reduction="none"), dict(reduction="none", ignore_index=-100))
    for _ in range(3):  # f32 at softmax's oneDNN sizes
        x = real([R.randint(4, 10), R.randint(64, 200)], -5, 5)
        t = torch.randint(0, x.shape[1], (x.shape[0],), generator=G)
        case("cross_entropy", "cross_entropy", [x, t], lambda x, t: F.cross_entropy(x, t),
             dict(reduction="mean", ignore_index=-100), f32=True)


def sdpa_reference(q, k, v, attn_mask, padding, causal, zero_rows):
    """softmax(q kᵀ/√d + masks) v composed from PyTorch ops (1.13 has no fused sdpa). A b8 attn_mask
    is true where the key takes part; key_padding (B, S) true where it is ignored."""
    T, S = q.shape[2], k.shape[2]
    scores = q @ k.transpose(-1, -2) / math.sqrt(max(q.shape[3], 1))
    hidden = torch.zeros(q.shape[0], q.shape[1], T, S, dtype=torch.bool)
    if causal:
        hidden = hidden | torch.ones(T, S, dtype=torch.bool).triu(1)
    if attn_mask is not None and attn_mask.dtype == torch.bool:
        hidden = hidden | ~attn_mask
    elif attn_mask is not None:
        scores = scores + attn_mask
    if padding is not None:
        hidden = hidden | padding[:, None, None, :]
    scores = scores.masked_fill(hidden, -INF)
    if not zero_rows:
        return torch.softmax(scores, -1) @ v
    # A query that sees no key (its keys hidden, or an additive -inf on each) gets zero weights; its
    # scores are replaced before the softmax too, so that no gradient of any order reaches them
    # through the NaN an all -inf softmax would give.
    empty = (scores == -INF).all(-1, keepdim=True)
    return torch.softmax(scores.masked_fill(empty, 0.0), -1).masked_fill(empty, 0.0) @ v


def attention_family():
    for op, causal in [("scaled_dot_product_attention", False), ("scaled_dot_product_attention_causal", True),
                       ("scaled_dot_product_attention_masked", False)]:
        for f32 in [False] * 14 + [True] * 2:
            B, H = (R.randint(1, 2), R.randint(1, 3)) if not f32 else (1, 1)
            T, S = (R.randint(1, 5), R.randint(1, 5)) if not f32 else (R.randint(24, 32), R.randint(24, 32))
            d, dv = (R.randint(1, 4), R.randint(1, 4)) if not f32 else (16, 16)
            ins = [real([B, H, T, d]), real([B, H, S, d]), real([B, H, S, dv])]
            kind = R.choice(["bool", "additive", "none"]) if op.endswith("masked") else "none"
            pad = op.endswith("masked") and R.random() < 0.6
            zero_rows = R.random() < 0.3
            am = None
            if kind == "bool":
                am = mask(R.choice([[T, S], [B, 1, T, S], [1, H, 1, S]]), 0.7)
            elif kind == "additive":
                am = real(R.choice([[T, S], [1, H, T, S]]), -2, 2)
            pm = mask([B, S], 0.3) if pad else None
            extra = [t for t in (am, pm) if t is not None]
            attrs = dict(causal=causal, attn_mask=kind, padding=pad, zero_rows=zero_rows)

            def fn(q, k, v, *masks, kind=kind, pad=pad, causal=causal, zero_rows=zero_rows):
                masks = list(masks)
                am = masks.pop(0) if kind != "none" else None
                pm = masks.pop(0) if pad else None
                return sdpa_reference(q, k, v, am, pm, causal, zero_rows)

            grads = [True, True, True] + [kind == "additive" and False] * (kind != "none") + [False] * pad
            case(op, "sdpa", ins + extra, fn, attrs, grads=grads, f32=f32)


def dropout_family():
    # The mask of a training dropout comes from attograd's generator: only p = 0, p = 1 and eval
    # have a PyTorch counterpart.
    for op, p, training in [("dropout", 0.0, True), ("dropout", 0.3, False), ("dropout_p1", 1.0, True)] * 5:
        case(op, "dropout", [real(shape())], lambda x, p=p, t=training: F.dropout(x, p, t), dict(p=p, training=training))


# ---- chains: 2-5 ops over a pool that starts with the inputs; operands are drawn from the pool,
# so an input (or an intermediate) feeds several ops and gradients meet.

CHAIN_UNARY = {"tanh": torch.tanh, "sigmoid": torch.sigmoid, "exp_neg_sq": None, "neg": torch.neg,
               "softmax": lambda x: torch.softmax(x, -1), "log_softmax": lambda x: torch.log_softmax(x, -1),
               "gelu": F.gelu, "sum_keepdim": lambda x: x.sum(-1, keepdim=True), "mean0": lambda x: x.mean(0, True),
               "transpose_mm": lambda x: (x @ x.transpose(0, 1)) @ x / 4}
CHAIN_BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul}


def chain_op(step, pool):
    kind, name, a, b = step
    if kind == "u":
        if name == "exp_neg_sq":
            return torch.exp(-pool[a] * pool[a])
        return CHAIN_UNARY[name](pool[a])
    return CHAIN_BINARY[name](pool[a], pool[b])


def chains():
    for _ in range(160):
        s = [R.randint(1, 4), R.randint(1, 4)]
        n_in = R.randint(1, 3)
        steps = []
        for i in range(R.randint(2, 5)):
            size = n_in + i
            if R.random() < 0.5:
                steps.append(["u", R.choice(sorted(CHAIN_UNARY)), R.randrange(size), 0])
            else:
                steps.append(["b", R.choice(sorted(CHAIN_BINARY)), R.randrange(size), R.randrange(size)])

        def fn(*xs, steps=steps):
            pool = list(xs)
            for st in steps:
                pool.append(chain_op(st, pool))
            return pool[-1]

        case("chain", "chain", [real(s) for _ in range(n_in)], fn, dict(steps=steps))


@functools.cache
def registry_ops():
    """The registry's entries as `attograd gradcheck --list --json` prints them; $ATTOGRAD names the
    program (default: build/tools/attograd)."""
    program = os.environ.get("ATTOGRAD", os.path.join(ROOT, "build", "tools", "attograd"))
    listing = subprocess.run([program, "gradcheck", "--list", "--json"], check=True, capture_output=True, text=True)
    return json.loads(listing.stdout)


@contextlib.contextmanager
def stream_of(name):
    """Draws from a stream of the op's own, seeded by its name: adding an op changes no other case."""
    state = R.getstate(), G.get_state()
    seed = OWN_SEEDS.get(name)
    R.seed(name if seed is None else seed)
    G.manual_seed(zlib.crc32(name.encode()) if seed is None else seed)
    yield
    R.setstate(state[0])
    G.set_state(state[1])


def from_registry():
    """Every other entry with a PyTorch counterpart (TorchCounterpart in engine/registry.h): 36
    cases each, on a stream of its own."""
    for op in registry_ops():
        if op.get("torch") is None or op["name"] in SEED15_ELEMENTWISE + SEED15_BINARY:
            continue
        with stream_of(op["name"]):
            registry_cases(op, PASSES * 12)


def softmax_backward_family():
    """softmax's backward as an op (engine/ops/softmax.h) against PyTorch's _softmax_backward_data."""
    for op, dim in [("softmax_backward", -1), ("softmax_backward_dim0", 0)]:
        with stream_of(op):
            for _ in range(PASSES * 8):
                s = shape(R.randint(1, 3), empty=0)
                case(op, "registry", [real(s), real(s)],
                     lambda y, g, d=dim: torch._softmax_backward_data(g, y, d, y.dtype))


def native_layer_norm_backward(g, x, w=None):
    """PyTorch's layer_norm backward with x's statistics, as the registry's entries: dx, dw and db
    flattened and joined; without w, dx over the last dim."""
    ns = list(w.shape) if w is not None else [x.shape[-1]]
    with torch.no_grad():
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, ns, w, None, 1e-5)
    affine = w is not None
    grads = torch.ops.aten.native_layer_norm_backward(g, x, ns, mean, rstd, w, torch.zeros_like(w) if affine else None,
                                                      [True, affine, affine])
    return torch.cat([t.flatten() for t in grads]) if affine else grads[0]


def layer_norm_backward_family():
    """layer_norm's backward as an op (engine/ops/norm.h) against PyTorch's native_layer_norm_backward:
    its output is the first order, its gradients the second."""
    for op, affine in [("layer_norm_backward", True), ("layer_norm_backward_no_affine", False)]:
        with stream_of(op):
            for f32, width in [(False, 0)] * (PASSES * 8) + [(True, 100), (True, 512), (True, 600)]:
                if f32:  # a model's width: on oneDNN up to 512, on our loops past it
                    s, k = [R.randint(2, 4), width], 1
                else:
                    k = R.randint(1, 2) if affine else 1
                    s = shape(R.randint(k, 3), lo=3, hi=6, empty=0)
                    if math.prod(s[len(s) - k:]) < 3:
                        s = s[: len(s) - k] + [4] * k
                ins = [real(s), real(s)] + ([real(s[len(s) - k:], 0.5, 1.5)] if affine else [])
                case(op, "registry", ins, native_layer_norm_backward, f32=f32)


def linear_family():
    """linear (engine/ops/matmul.h: the product with the bias and activation as its epilogue) against
    F.linear and F.relu(F.linear(...)); f32 cases at oneDNN's sizes too. Last in the file, so that the
    cases before keep their cotangents."""
    for op in ["linear", "linear_relu", "linear_no_bias"]:
        with stream_of(op):
            for f32 in [False] * 12 + [True] * 3:
                rows, k, n = (R.randint(16, 40), R.randint(24, 64), R.randint(16, 40)) if f32 else \
                    (R.randint(1, 5), R.randint(1, 5), R.randint(1, 5))
                lead = R.choice([[], [2]]) if not f32 else [2]
                ins = [real(lead + [rows, k]), real([n, k])] + ([] if op == "linear_no_bias" else [real([n])])
                fn = (lambda x, w, b: F.relu(F.linear(x, w, b))) if op == "linear_relu" else F.linear
                case(op, "registry", ins, fn, f32=f32)


def first_order(fn):
    """fn's first-order gradient as a function of its inputs and u (the last input, shaped as fn's
    output): the gradients of Σ fn(inputs) ⊙ u with respect to the inputs that require grad, made with
    create_graph, flattened and joined. A case of it stores them as its output, and the gradients of
    Σ output ⊙ w as the second order."""
    def gradient(*xs):
        inputs, u = xs[:-1], xs[-1]
        wrt = [x for x in inputs if x.requires_grad]
        return torch.cat([g.flatten() for g in torch.autograd.grad(fn(*inputs), wrt, u, create_graph=True)])
    return gradient


def emptied_row_masks(B, H, T, S, zero_rows):
    """attention masks of which at least one query sees no key: a batch's keys all padding, a b8 (T, S)
    attn_mask with a row all false, or (under zero_rows) an additive one with a row all -inf, beside
    random ones. (Under the nan policy an additive -inf row gives NaN dq and dk in PyTorch's
    composition, where attograd's dq and dk stay finite, as for the other masks.)"""
    how = R.choice(["padding", "bool", "additive"] if zero_rows else ["padding", "bool"])
    pm = mask([B, S], 0.3) if how == "padding" or R.random() < 0.5 else None
    if how == "padding":
        pm[R.randrange(B)] = True
    kind = how if how != "padding" else R.choice(["bool", "additive", "none"])
    am = None
    if kind == "bool":
        am = mask([T, S], 0.7)
        if how == "bool":
            am[R.randrange(T)] = False
    elif kind == "additive":
        am = real([T, S], -2, 2)
        if how == "additive":
            am[R.randrange(T)] = -INF
    return kind, am, pm


def second_order_family():
    """create_graph through the edges (issue: second order at the edges): attention where a query sees
    no key, under both policies and both kernels, and the losses over no elements (and some)."""
    for op, kernel, zero_rows in [("scaled_dot_product_attention_masked_rows_zero", "materialising", True),
                                  ("scaled_dot_product_attention_streaming_masked_rows_zero", "streaming", True),
                                  ("scaled_dot_product_attention_masked", "materialising", False),
                                  ("scaled_dot_product_attention_streaming_masked", "streaming", False)]:
        with stream_of(op + " second order"):
            for _ in range(PASSES * 4):
                B, H, T, S, d, dv = (R.randint(1, 2), R.randint(1, 2), R.randint(1, 4), R.randint(1, 4),
                                     R.randint(1, 3), R.randint(1, 3))
                kind, am, pm = emptied_row_masks(B, H, T, S, zero_rows)
                causal = R.random() < 0.3
                extra = [t for t in (am, pm) if t is not None]
                attrs = dict(of="sdpa", causal=causal, attn_mask=kind, padding=pm is not None, zero_rows=zero_rows,
                             kernel=kernel)

                def fn(q, k, v, *masks, kind=kind, pad=pm is not None, causal=causal, zero_rows=zero_rows):
                    masks = list(masks)
                    am = masks.pop(0) if kind != "none" else None
                    pm = masks.pop(0) if pad else None
                    return sdpa_reference(q, k, v, am, pm, causal, zero_rows)

                ins = [real([B, H, T, d]), real([B, H, S, d]), real([B, H, S, dv])]
                grads = [True] * 3 + [False] * len(extra) + [True]
                case(op, "first_order", ins + extra + [real([B, H, T, dv])], first_order(fn), attrs, grads=grads)
    for op, call, low, high, loss in [("mse_loss", "mse_loss", -2, 2, F.mse_loss),
                                      ("binary_cross_entropy_with_logits", "bce_with_logits", -4, 4,
                                       F.binary_cross_entropy_with_logits)]:
        with stream_of(op + " second order"):
            for _ in range(PASSES * 4):
                s = shape(R.randint(1, 3), empty=0.4)
                r = R.choice(["mean", "mean", "sum", "none"])
                u = real([] if r != "none" else s)
                case(op + ("" if r == "mean" else "_" + r), "first_order", [real(s, low, high), real(s, 0, 1), u],
                     first_order(lambda a, b, r=r, loss=loss: loss(a, b, reduction=r)), dict(of=call, reduction=r))


def encode(v):
    """JSON has no infinity: ±inf become the strings "inf" and "-inf"."""
    if isinstance(v, dict):
        return {k: encode(x) for k, x in v.items()}
    if isinstance(v, list):
        return [encode(x) for x in v]
    if isinstance(v, float) and math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def packed_attention_family():
    """packed_self_attention and packed_cross_attention (engine/ops/attention.h: two heads, as their
    registry entries) against the attention reference on the heads split from the packed
    projections. Last in the file, so that the cases before keep their cotangents."""
    def heads(x, slot, E):  # (N, L, slots·E) → the slot's (N, 2, L, E/2)
        N, L = x.shape[0], x.shape[1]
        return x[..., slot * E:(slot + 1) * E].reshape(N, L, 2, E // 2).transpose(1, 2)

    for op in ["packed_self_attention", "packed_self_attention_causal", "packed_cross_attention"]:
        with stream_of(op):
            for f32 in [False] * 12 + [True] * 2:
                N, T, S = (R.randint(1, 2), R.randint(1, 5), R.randint(1, 5)) if not f32 else \
                    (1, R.randint(24, 32), R.randint(24, 32))
                E = 2 * (R.randint(1, 3) if not f32 else 16)
                causal = op.endswith("causal")
                if op == "packed_cross_attention":
                    ins = [real([N, T, E]), real([N, S, 2 * E])]

                    def fn(q, kv, E=E):
                        return sdpa_reference(heads(q, 0, E), heads(kv, 0, E), heads(kv, 1, E), None, None, False,
                                              False)
                else:
                    ins = [real([N, T, 3 * E])]

                    def fn(qkv, E=E, causal=causal):
                        return sdpa_reference(heads(qkv, 0, E), heads(qkv, 1, E), heads(qkv, 2, E), None, None,
                                              causal, False)
                case(op, "registry", ins, fn, f32=f32)


def jvp_of(fn, requires, tangent_of, n):
    """fn's JVP by torch.autograd.forward_ad: the inputs after fn's n are the tangents of the inputs
    tangent_of lists; each of those becomes a dual (requiring grad as the case did, so that a
    first_order case's gradients carry tangents: forward-over-reverse). Returns the output's tangent."""
    def tangent(*xs):
        primals = list(xs[:n])
        with fwAD.dual_level():
            for j, t in zip(tangent_of, xs[n:]):
                primals[j] = fwAD.make_dual(primals[j].detach().requires_grad_(requires[j]), t)
            out = fn(*primals)
            t = fwAD.unpack_dual(out).tangent
            return (t if t is not None else torch.zeros_like(out)).detach()
    return tangent


def forward_ad_family():
    """JVPs against PyTorch's forward AD (issue 40): for every op, its first JVP_CASES cases drawn
    above (second-order ones included: forward-over-reverse), each with random tangents for the inputs
    that take gradients. A case PyTorch 1.13 has no forward derivative for is left out and named.
    Last in the file, so that the cases before keep their places."""
    per_op, unsupported = {}, set()
    with stream_of("forward_ad"):
        for c in list(CASES):
            tangent_of = [j for j, g in enumerate(c["grads"]) if g]
            if per_op.get(c["op"], 0) >= JVP_CASES or not tangent_of or c["op"] in JVP_DIFFERS:
                continue
            n = len(c["inputs"])
            fn = jvp_of(c["fn"], c["grads"], tangent_of, n)
            ins = c["inputs"] + [real(list(c["inputs"][j].shape)) for j in tangent_of]
            try:
                fn(*ins)
            except (RuntimeError, NotImplementedError):
                unsupported.add(c["op"])
                continue
            per_op[c["op"]] = per_op.get(c["op"], 0) + 1
            case(c["op"], "jvp", ins, fn, dict(of=c["call"], op=c["op"], attrs=c["attrs"], inputs=n,
                                               tangent_of=tangent_of, requires=c["grads"]), grads=[False] * len(ins))
    print(f"forward AD: {sum(per_op.values())} JVP cases over {len(per_op)} ops; without a forward derivative in "
          f"PyTorch {torch.__version__}: {', '.join(sorted(unsupported - set(per_op))) or 'none'}")
    for op, why in JVP_DIFFERS.items():
        print(f"forward AD: no JVP cases for {op}: {why}")


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
    global f32_pass
    torch.set_num_threads(1)
    for n in range(PASSES):
        f32_pass = n == 0
        for family in [elementwise, reduce, shapes_family, index_family, mask_family, matmul_family, softmax_family,
                       norm_family, loss_family, attention_family, dropout_family, chains]:
            family()
    f32_pass = True  # the families below draw once, each op on a stream of its own
    from_registry()
    softmax_backward_family()
    layer_norm_backward_family()
    linear_family()
    second_order_family()
    packed_attention_family()
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
