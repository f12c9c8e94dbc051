"""Golden draws of PyTorch's CPU generator, for ag::TorchGenerator (engine/torch_generator.h).

For each seed and size, a fresh torch.manual_seed(seed) and then one call:
  rand_f32, rand_f64         torch.rand(n)                       (24 / 53 random bits)
  uniform_f32                torch.empty(n).uniform_(-0.4082, 0.7)  (kaiming_uniform_'s path)
  randn_f32, randn_f64       torch.randn(n)                      (vectorised Box-Muller from 16 on)
  normal_f32                 torch.empty(n).normal_(1.5, 0.25)
  randint                    torch.randint(-3, 7, (n,))          (32-bit draws)
  randint_wide               torch.randint(0, 2**40, (n,))       (64-bit draws)
  dropout_p0.5, dropout_p0.1 F.dropout(torch.ones(n), p)         (bernoulli_(1 - p), then / (1 - p))
  randperm                   torch.randperm(n)
"dataloader.N.E": epoch E's order of DataLoader(n=N, shuffle=True, generator seeded 42); and "stream.*": one seed, then a sequence of calls that share the generator's state (the cached
second normal of the scalar path, the mt19937 position), each result stored in call order.
Writes tests/golden/torch_generator.safetensors. Run: /usr/bin/python3 tools/golden/torch_generator.py
"""
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from golden import golden_path, save

SEEDS = [0, 7, 123, 2**32 + 42]
SIZES = [1, 15, 16, 17, 1000]

DRAWS = {
    "rand_f32": lambda n: torch.rand(n),
    "rand_f64": lambda n: torch.rand(n, dtype=torch.float64),
    "uniform_f32": lambda n: torch.empty(n).uniform_(-0.4082, 0.7),
    "randn_f32": lambda n: torch.randn(n),
    "randn_f64": lambda n: torch.randn(n, dtype=torch.float64),
    "normal_f32": lambda n: torch.empty(n).normal_(1.5, 0.25),
    "randint": lambda n: torch.randint(-3, 7, (n,)),
    "randint_wide": lambda n: torch.randint(0, 2**40, (n,)),
    "dropout_p0.5": lambda n: F.dropout(torch.ones(n), 0.5, training=True),
    "dropout_p0.1": lambda n: F.dropout(torch.ones(n), 0.1, training=True),
    "randperm": lambda n: torch.randperm(n),
}

# (name, call) in order after one manual_seed: the scalar path's cached normal carries across calls.
STREAM = [
    ("randn_f32_3", lambda: torch.randn(3)),
    ("randn_f32_1", lambda: torch.randn(1)),
    ("rand_f32_5", lambda: torch.rand(5)),
    ("randn_f64_5", lambda: torch.randn(5, dtype=torch.float64)),
    ("randn_f32_20", lambda: torch.randn(20)),
    ("randn_f32_2", lambda: torch.randn(2)),
    ("randperm_9", lambda: torch.randperm(9)),
    ("dropout_p0.2_7", lambda: F.dropout(torch.ones(7), 0.2, training=True)),
    ("randn_f32_4", lambda: torch.randn(4)),
]


def main():
    tensors = {}
    for seed in SEEDS:
        for name, draw in DRAWS.items():
            for n in SIZES:
                torch.manual_seed(seed)
                tensors[f"seed{seed}.{name}.{n}"] = draw(n)
    torch.manual_seed(5)
    for i, (name, call) in enumerate(STREAM):
        tensors[f"stream.{i}.{name}"] = call()
    for n in [1, 10, 128]:
        generator = torch.Generator()
        loader = DataLoader(TensorDataset(torch.arange(n)), batch_size=16, shuffle=True, generator=generator)
        generator.manual_seed(42)
        for epoch in range(3):
            tensors[f"dataloader.{n}.{epoch}"] = torch.cat([batch for (batch,) in loader])
    save(golden_path("torch_generator"), tensors, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
