"""Golden f32 → bf16 conversions: PyTorch's .to(torch.bfloat16) of contiguous f32 tensors, for
engine/dtype.h's bf16_bits_from_f32 and engine/kernels/bf16.h's vectorised loops.

  special.f32 / special.bf16   hand-picked values: ±0, ±inf, NaNs (quiet, signalling, negative,
                               with payloads), ties to even either way, the largest finite values
                               (which round to inf), subnormals and the smallest normals
  random.f32 / random.bf16     10,007 values (not a multiple of any vector width): random bit
                               patterns, every exponent included, and values at ±(k + 0.5) ulp
Writes tests/golden/bf16.safetensors. Run: /usr/bin/python3 tools/golden/bf16.py
"""
import torch

from golden import golden_path, save

BITS = [
    0x00000000, 0x80000000,  # ±0
    0x7F800000, 0xFF800000,  # ±inf
    0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0x7FA12345,  # NaNs
    0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF,  # ties: to even (down), to even (up), just above, just below
    0xBF808000, 0xBF818000,  # negative ties
    0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF,  # largest finite: to inf; tie to inf; stays finite
    0x00000001, 0x80000001, 0x00008000, 0x00018000, 0x00007FFF, 0x007FFFFF, 0x807FFFFF,  # subnormals
    0x00800000, 0x00FF8000, 0x3F800000, 0x40490FDB,  # smallest normal, a tie near it, 1, pi
]


def bits_to_f32(values):
    return torch.tensor([v - (1 << 32) if v >= 1 << 31 else v for v in values], dtype=torch.int32).view(torch.float32)


def main():
    special = bits_to_f32(BITS)
    gen = torch.Generator().manual_seed(28)
    patterns = torch.randint(-(1 << 31), 1 << 31, (8000,), generator=gen, dtype=torch.int64).to(torch.int32)
    halves = (torch.randint(0, 1 << 16, (2007,), generator=gen) << 16 | 0x8000).to(torch.int32)  # exact ties
    rand = torch.cat([patterns, halves]).view(torch.float32)
    save(golden_path("bf16"), {
        "special.f32": special,
        "special.bf16": special.to(torch.bfloat16),
        "random.f32": rand,
        "random.bf16": rand.to(torch.bfloat16),
    })


if __name__ == "__main__":
    main()
