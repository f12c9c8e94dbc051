"""The parity suite's cases of single ops, family by family (tools/golden/parity.py).
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

from parity_common import *  # noqa: F401,F403 (the streams, drawing, case)

# ---- the ops, by family (the attributes the registry fixes are fixed here too)

# The elementwise ops come from the registry (registry_ops). Those older than that keep their place
# in the seed-15 stream, in this order, so that every case committed before stays as it was;
# softplus keeps its stream of seed 17; every op added since draws on a stream of its own.
SEED15_ELEMENTWISE = ["neg", "exp", "log", "sqrt", "abs", "relu", "gelu", "gelu_tanh", "tanh", "sigmoid", "clone",
                      "to", "rsub_scalar"]
SEED15_BINARY = ["add", "sub", "mul", "div"]
OWN_SEEDS = {"softplus": 17}


@functools.cache
def registry_ops():
    """The registry's entries as `attograd gradcheck --list --json` prints them; $ATTOGRAD names the
    program (default: build/tools/attograd)."""
    program = os.environ.get("ATTOGRAD", os.path.join(ROOT, "build", "tools", "attograd"))
    listing = subprocess.run([program, "gradcheck", "--list", "--json"], check=True, capture_output=True, text=True)
    return json.loads(listing.stdout)


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
