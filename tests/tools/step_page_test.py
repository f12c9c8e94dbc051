"""The step page's numbers for `walkthrough`'s seed 003 step: every gradient equals what `attograd
walkthrough` prints, the leaves' gradients agree with finite differences of an independent forward
written here in plain Python, and the three uses of the inputs reach them as three gradients that
add up to their .grad. With --tangent LEAF, every node's tangent is the finite difference of its
value along the page's v. Prints OK / NOT OK per check.
    step_page_test.py ATTOGRAD"""
import math
import os
import sys
import tempfile

from step_page_common import (LEAVES, STEPS, close, leaf_named, make_page, node_of_scope, printed_gradient,
                              walkthrough_printout)

failures = 0


def expect(name, ok, detail=""):
    global failures
    print(("OK " if ok else "NOT OK ") + name + ("" if ok else ": " + detail))
    failures += 0 if ok else 1


# The walkthrough's step, in plain Python: the inputs and weights as the seed prints them.
INPUTS = [0.43, 0.15, 0.89, 0.55, 0.87, 0.66, 0.57, 0.85, 0.64, 0.22, 0.58, 0.33, 0.77, 0.25, 0.10, 0.05, 0.80, 0.55]
WEIGHTS = {"W_query": [0.2961, 0.5166, 0.2517, 0.6886, 0.0740, 0.8665],
           "W_key": [0.1366, 0.1025, 0.1841, 0.7264, 0.3153, 0.6871],
           "W_value": [0.0756, 0.1966, 0.3164, 0.4017, 0.1186, 0.8274]}


def matmul(a, b, n, k, m):  # (n, k) @ (k, m), row-major lists
    return [sum(a[i * k + j] * b[j * m + c] for j in range(k)) for i in range(n) for c in range(m)]


def forward(tensors):
    """Every step of context = softmax(q kᵀ / √2) v, by its scope name, row-major."""
    x = tensors["inputs"]
    q, k, v = (matmul(x, tensors[w], 6, 3, 2) for w in ("W_query", "W_key", "W_value"))
    scores = [q[2 * i] * k[2 * j] + q[2 * i + 1] * k[2 * j + 1] for i in range(6) for j in range(6)]
    scaled = [s / math.sqrt(2) for s in scores]
    weights = []
    for i in range(6):
        row = scaled[6 * i:6 * i + 6]
        e = [math.exp(s - max(row)) for s in row]
        weights += [w / sum(e) for w in e]
    context = matmul(weights, v, 6, 6, 2)
    return {"queries": q, "keys": k, "values": v, "attn_scores": scores, "scaled": scaled, "attn_weights": weights,
            "context": context}


def loss(tensors):
    return sum(forward(tensors)["context"])


def seed_tensors():
    return {"inputs": list(INPUTS), **{w: list(values) for w, values in WEIGHTS.items()}}


def finite_differences(name):
    tensors = seed_tensors()
    grad = []
    for e in range(len(tensors[name])):
        saved = tensors[name][e]
        tensors[name][e] = saved + 1e-6
        plus = loss(tensors)
        tensors[name][e] = saved - 1e-6
        minus = loss(tensors)
        tensors[name][e] = saved
        grad.append((plus - minus) / 2e-6)
    return grad


def main(attograd, tmp):
    data = make_page(attograd, os.path.join(tmp, "walkthrough.html"))
    printed = walkthrough_printout(attograd)
    arrived = {entry["id"]: entry["grad"]["values"] for entry in data["backward"]}
    # Printed to 4 decimals: the page's 7 digits must round to them.
    for step in STEPS:
        node = node_of_scope(data, step)
        expect(f"{step}: the gradient arriving at %{node['id']} {node['op']} is the one walkthrough prints",
               close(arrived[node["id"]], printed_gradient(printed, step), 0.5e-4 + 1e-9),
               f"page {arrived[node['id']]}, printed {printed_gradient(printed, step)}")
    for name in LEAVES:
        leaf = leaf_named(data, name)
        grad = leaf["grad"]["values"]
        expect(f"{name}: .grad is the one walkthrough prints", close(grad, printed_gradient(printed, name), 0.5e-4 + 1e-9),
               f"page {grad}")
        numeric = finite_differences(name)
        # The page keeps 7 significant digits: relative agreement to 1e-6.
        worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(grad, numeric))
        expect(f"{name}: .grad agrees with finite differences (max relative difference {worst:.1e})", worst < 1e-6)
    # The inputs feed queries, keys and values: three gradients reach them, and they add up to .grad.
    inputs = leaf_named(data, "inputs")
    contributions = [entry["sent"][i]["values"] for entry in data["backward"]
                     for i, source in enumerate(data["nodes"][entry["id"]]["inputs"])
                     if source["id"] == inputs["id"] and entry["sent"][i]]
    expect("inputs receive three gradients", len(contributions) == 3, f"{len(contributions)}")
    summed = [sum(c[e] for c in contributions) for e in range(18)]
    expect("the three add up to inputs.grad", close(summed, inputs["grad"]["values"], 1e-6))
    # The backward order: every node runs after every node that sends it a gradient.
    position = {entry["id"]: p for p, entry in enumerate(data["backward"])}
    expect("each node runs after the nodes that feed it gradients",
           all(position[i["id"]] > position[n["id"]] for n in data["nodes"] if n["id"] in position
               for i in n["inputs"] if i["id"] in position))
    for name in LEAVES:
        check_tangents(attograd, os.path.join(tmp, f"tangent-{name}.html"), name)
    print(f"{failures} failed")
    return 1 if failures else 0


def check_tangents(attograd, path, name):
    """`--tangent NAME`: the leaf's tangent v is on the page; every step's tangent is the central
    difference of that step's value along v, (f(NAME + εv) − f(NAME − εv)) / 2ε, computed here."""
    data = make_page(attograd, path, ("walkthrough", "--tangent", name, "--tangent-seed", "7"))
    v = leaf_named(data, name)["tangent"]["values"]
    expect(f"--tangent {name}: the other leaves carry no tangent",
           all(leaf_named(data, other)["tangent"] is None for other in LEAVES if other != name))
    plus, minus = seed_tensors(), seed_tensors()
    eps = 1e-6
    plus[name] = [a + eps * b for a, b in zip(plus[name], v)]
    minus[name] = [a - eps * b for a, b in zip(minus[name], v)]
    ahead, behind = forward(plus), forward(minus)
    for step in STEPS:
        numeric = [(a - b) / (2 * eps) for a, b in zip(ahead[step], behind[step])]
        tangent = node_of_scope(data, step)["tangent"]
        if tangent is None:  # a step that does not read the leaf: its value does not move along v
            expect(f"--tangent {name}: {step} carries no tangent, and its value does not move along v",
                   all(d == 0 for d in numeric))
            continue
        worst = max(abs(a - b) / max(1.0, abs(b)) for a, b in zip(tangent["values"], numeric))
        expect(f"--tangent {name}: {step}'s tangent is the finite difference along v (max relative difference "
               f"{worst:.1e})", worst < 1e-6)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(sys.argv[1], tmp))
