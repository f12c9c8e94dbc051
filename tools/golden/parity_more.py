"""The parity suite's cases beyond single ops (tools/golden/parity.py): chains of ops, the registry's
own entries, backward ops, second order, packed attention, forward-mode JVPs.
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

from parity_common import *  # noqa: F401,F403
from parity_families import *  # noqa: F401,F403

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
    F.linear, F.relu(F.linear(...)) and F.gelu(F.linear(...)); f32 cases at oneDNN's sizes too. Last
    in the file, so that the cases before keep their cotangents."""
    for op in ["linear", "linear_relu", "linear_no_bias", "linear_gelu"]:
        with stream_of(op):
            for f32 in [False] * 12 + [True] * 3:
                rows, k, n = (R.randint(16, 40), R.randint(24, 64), R.randint(16, 40)) if f32 else \
                    (R.randint(1, 5), R.randint(1, 5), R.randint(1, 5))
                lead = R.choice([[], [2]]) if not f32 else [2]
                ins = [real(lead + [rows, k]), real([n, k])] + ([] if op == "linear_no_bias" else [real([n])])
                fn = {"linear_relu": lambda x, w, b: F.relu(F.linear(x, w, b)),
                      "linear_gelu": lambda x, w, b: F.gelu(F.linear(x, w, b))}.get(op, F.linear)
                case(op, "registry", ins, fn, f32=f32)


def linear_add_family():
    """linear_add (engine/ops/matmul.h: a residual's add as the product's epilogue) against
    F.linear(x, w, b) + r; f32 cases at oneDNN's sizes too. Drawn after the families above, so that
    their cases keep their places, and before forward_ad_family, which gives it JVP cases."""
    with stream_of("linear_add"):
        for f32 in [False] * 12 + [True] * 3:
            rows, k, n = (R.randint(16, 40), R.randint(24, 64), R.randint(16, 40)) if f32 else \
                (R.randint(1, 5), R.randint(1, 5), R.randint(1, 5))
            lead = R.choice([[], [2]]) if not f32 else [2]
            ins = [real(lead + [rows, k]), real([n, k]), real([n]), real(lead + [rows, n])]
            case("linear_add", "registry", ins, lambda x, w, b, r: F.linear(x, w, b) + r, f32=f32)


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
