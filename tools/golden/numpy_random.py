"""Golden draws of numpy's legacy RandomState, for ag::NumpyRandomState (engine/numpy_random.h),
and seed 004's noisy squares as its generate_sequences makes them (seeds 13 and 19), for
`train squares --rng torch`. Each case starts from np.random.seed(seed).
Writes tests/golden/numpy_random.safetensors. Run: /usr/bin/python3 tools/golden/numpy_random.py
"""
import numpy as np
import torch

from golden import golden_path, save

SEEDS = [0, 13, 19, 4294967295]

DRAWS = {
    "random_sample": lambda: np.random.random_sample(100),
    "randint_4": lambda: np.random.randint(4, size=100),
    "randint_2": lambda: np.random.randint(2, size=100),
    "randint_1": lambda: np.random.randint(1, size=5),
    "randint_-3_1000": lambda: np.random.randint(-3, 1000, size=100),
    "randn": lambda: np.random.randn(1001),
}


def generate_sequences(n=128, variable_len=False, seed=13):  # seed 004's, as the peer runs it
    basic_corners = np.array([[-1, -1], [-1, 1], [1, 1], [1, -1]])
    np.random.seed(seed)
    bases = np.random.randint(4, size=n)
    lengths = np.random.randint(3, size=n) + 2 if variable_len else [4] * n
    directions = np.random.randint(2, size=n)
    points = [basic_corners[[(b + i) % 4 for i in range(4)]][slice(None, None, d * 2 - 1)][:l]
              + np.random.randn(l, 2) * 0.1 for b, d, l in zip(bases, directions, lengths)]
    return points, directions


def main():
    tensors = {}
    for seed in SEEDS:
        for name, draw in DRAWS.items():
            np.random.seed(seed)
            tensors[f"seed{seed}.{name}"] = torch.as_tensor(draw())
    for seed in [13, 19]:
        points, directions = generate_sequences(seed=seed)
        tensors[f"squares{seed}.points"] = torch.as_tensor(np.array(points)).float()
        tensors[f"squares{seed}.directions"] = torch.as_tensor(directions)
    save(golden_path("numpy_random"), tensors, {"numpy": np.__version__})


if __name__ == "__main__":
    main()
