"""Golden data for the seeds' attention classes (seeds/seed003.h): weights, input, output,
attention weights and the gradients of loss = Σ out ⊙ probe.

The classes are the seeds' own, copied below with their bugs fixed (seed 002's SelfAttention
multiplies the wrong axes and takes softmax over dim 0; seed 003's CausalAttention drops the
result of masked_fill) and one line added to each: the attention weights are kept for the
comparison. Where a seed printed its results, this script checks it reproduces them first.
Dropout is off: the modules are built with p = 0.1 and run in eval mode.

Writes tests/golden/attention_<name>.safetensors. Run: /usr/bin/python3 tools/golden/attention.py
"""
import torch
import torch.nn as nn

from golden import golden_path, save, with_grads


class SelfAttention(nn.Module):  # seed 002, with seed 000's maths
    def __init__(self, d_word, d_q, d_k, d_v):
        super(SelfAttention, self).__init__()
        self.W_q = torch.nn.Parameter(torch.randn(d_q, d_word))
        self.W_k = torch.nn.Parameter(torch.randn(d_k, d_word))
        self.W_v = torch.nn.Parameter(torch.randn(d_v, d_word))

    def forward(self, x):
        queries = x @ self.W_q.T
        keys = x @ self.W_k.T
        values = x @ self.W_v.T
        attention_scores = queries @ keys.transpose(-2, -1)
        attention_weights = torch.softmax(attention_scores / keys.shape[-1] ** 0.5, dim=-1)
        self.last_attention_weights = attention_weights.detach()
        return attention_weights @ values


class SelfAttention_v1(nn.Module):  # seed 003
    def __init__(self, d_in, d_out):
        super().__init__()
        self.w_query = nn.Parameter(torch.rand(d_in, d_out))
        self.w_key = nn.Parameter(torch.rand(d_in, d_out))
        self.w_value = nn.Parameter(torch.rand(d_in, d_out))

    def forward(self, x):
        keys = x @ self.w_key
        values = x @ self.w_value
        queries = x @ self.w_query
        attn_scores = queries @ keys.T
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        self.last_attention_weights = attn_weights.detach()
        return attn_weights @ values


class SelfAttention_v2(nn.Module):  # seed 003 (batched: keys.transpose(-2, -1) for keys.T)
    def __init__(self, d_in, d_out, qkv_bias=False):
        super().__init__()
        self.w_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def forward(self, x):
        keys = self.w_key(x)
        queries = self.w_query(x)
        values = self.w_value(x)
        attn_scores = queries @ keys.transpose(-2, -1)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        self.last_attention_weights = attn_weights.detach()
        return attn_weights @ values


class CausalAttention(nn.Module):  # seed 003, the masked_fill result used
    def __init__(self, d_in, d_out, context_length, dropout, qkv_bias=False):
        super().__init__()
        self.d_out = d_out
        self.w_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.w_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer('mask', torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.w_key(x)
        queries = self.w_query(x)
        values = self.w_value(x)
        attn_scores = queries @ keys.transpose(1, 2)
        attn_scores = attn_scores.masked_fill(self.mask.bool()[:num_tokens, :num_tokens], -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        self.last_attention_weights = attn_weights.detach()
        attn_weights = self.dropout(attn_weights)
        return attn_weights @ values


class MultiHeadAttention(nn.Module):  # seed 003's final class
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False):
        super().__init__()
        assert (d_out % num_heads == 0), "d_out must be divisible by num_heads"
        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)
        self.dropout = nn.Dropout(dropout)
        self.register_buffer("mask", torch.triu(torch.ones(context_length, context_length), diagonal=1))

    def forward(self, x):
        b, num_tokens, d_in = x.shape
        keys = self.W_key(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, num_tokens, self.num_heads, self.head_dim).transpose(1, 2)
        attn_scores = queries @ keys.transpose(2, 3)
        mask_bool = self.mask.bool()[:num_tokens, :num_tokens]
        attn_scores.masked_fill_(mask_bool, -torch.inf)
        attn_weights = torch.softmax(attn_scores / keys.shape[-1] ** 0.5, dim=-1)
        self.last_attention_weights = attn_weights.detach()
        attn_weights = self.dropout(attn_weights)
        context_vec = (attn_weights @ values).transpose(1, 2)
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        return self.out_proj(context_vec)


SEED003_INPUTS = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66], [0.57, 0.85, 0.64],
                               [0.22, 0.58, 0.33], [0.77, 0.25, 0.10], [0.05, 0.80, 0.55]])


def expect_printed(what, actual, printed, atol=1.5e-4):
    """The seed printed `printed` (4 decimals); stop if we do not reproduce it."""
    printed = torch.tensor(printed)
    if not torch.allclose(actual.detach(), printed, atol=atol, rtol=0):
        raise SystemExit(f"{what}: got {actual}, the seed printed {printed}")


def record(name, module, x, extra=None):
    module.eval()
    x = x.clone().requires_grad_(True)
    out = module(x)
    probe = torch.randn(out.shape)
    (out * probe).sum().backward()
    tensors = {"x": x, "out": out, "probe": probe, "grad.x": x.grad, "attn_weights": module.last_attention_weights}
    tensors.update({"param." + n: p for n, p in module.state_dict().items()})
    tensors.update(with_grads("grad.param.", module.named_parameters()))
    tensors.update(extra or {})
    save(golden_path("attention_" + name), tensors, {"module": repr(module)})
    return out


def self_attention_seed000():
    """Seed 000: its 6 × 16 embedded sentence, W_query/W_key/W_value (24/24/28 × 16) from U[0, 1)."""
    torch.manual_seed(123)
    inputs = nn.Embedding(6, 16)(torch.tensor([0, 4, 5, 2, 1, 3])).detach()
    module = SelfAttention(16, 24, 24, 28)
    torch.manual_seed(123)
    with torch.no_grad():
        module.W_q.copy_(torch.rand(24, 16))
        module.W_k.copy_(torch.rand(24, 16))
        module.W_v.copy_(torch.rand(28, 16))
    record("self_attention_seed000", module, inputs)
    expect_printed("seed 000 attention_weights2", module.last_attention_weights[1],
                   [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458])


def seed003_classes():
    torch.manual_seed(123)
    out = record("self_attention_v1", SelfAttention_v1(3, 2), SEED003_INPUTS)
    expect_printed("seed 003 SelfAttention_v1", out, [[0.2996, 0.8053], [0.3061, 0.8210], [0.3058, 0.8203],
                                                      [0.2948, 0.7939], [0.2927, 0.7891], [0.2990, 0.8040]])
    torch.manual_seed(789)
    out = record("self_attention_v2", SelfAttention_v2(3, 2), SEED003_INPUTS)
    expect_printed("seed 003 SelfAttention_v2", out, [[-0.0739, 0.0713], [-0.0748, 0.0703], [-0.0749, 0.0702],
                                                      [-0.0760, 0.0685], [-0.0763, 0.0679], [-0.0754, 0.0693]])
    torch.manual_seed(123)
    batch = torch.stack((SEED003_INPUTS, SEED003_INPUTS), dim=0)
    record("causal", CausalAttention(3, 2, 6, 0.1), batch)  # the seed's printout is the non-causal bug's
    torch.manual_seed(123)
    inputs = torch.tensor([[0.43, 0.15, 0.89, 0.55, 0.87, 0.66], [0.57, 0.85, 0.64, 0.22, 0.58, 0.33],
                           [0.77, 0.25, 0.10, 0.05, 0.80, 0.55]])
    out = record("mha", MultiHeadAttention(6, 6, 3, 0.1, num_heads=2), torch.stack((inputs, inputs), dim=0))
    printed = [[0.1569, -0.0873, 0.0210, 0.0215, -0.3243, -0.2518],
               [0.1117, -0.0547, 0.0406, -0.0213, -0.3251, -0.2993],
               [0.1196, -0.0491, 0.0318, -0.0635, -0.2788, -0.2578]]
    expect_printed("seed 003 MultiHeadAttention", out, [printed, printed])


def random_shapes():
    """Batched inputs, biases, T shorter than context_length, more heads."""
    torch.manual_seed(1)
    record("self_attention_batched", SelfAttention(5, 4, 4, 7), torch.randn(2, 6, 5))
    record("self_attention_v2_bias", SelfAttention_v2(4, 3, qkv_bias=True), torch.randn(3, 5, 4))
    record("causal_bias", CausalAttention(4, 3, 8, 0.1, qkv_bias=True), torch.randn(2, 5, 4))
    record("mha_bias", MultiHeadAttention(5, 8, 9, 0.1, num_heads=4, qkv_bias=True), torch.randn(3, 7, 5))


def mha_equals_torch():
    """Seed 003's MultiHeadAttention equals torch.nn.MultiheadAttention(batch_first=True) with
    in_proj_weight = [W_query; W_key; W_value] and a causal bool attn_mask; with a key-padding
    mask too. Stores torch's output, head-averaged weights and input gradient."""
    torch.manual_seed(2)
    d, heads, tokens = 8, 2, 5
    ours = MultiHeadAttention(d, d, tokens, 0.1, num_heads=heads, qkv_bias=True).eval()
    torch_mha = nn.MultiheadAttention(d, heads, dropout=0.1, bias=True, batch_first=True).eval()
    with torch.no_grad():
        torch_mha.in_proj_weight.copy_(torch.cat([ours.W_query.weight, ours.W_key.weight, ours.W_value.weight]))
        torch_mha.in_proj_bias.copy_(torch.cat([ours.W_query.bias, ours.W_key.bias, ours.W_value.bias]))
        torch_mha.out_proj.weight.copy_(ours.out_proj.weight)
        torch_mha.out_proj.bias.copy_(ours.out_proj.bias)
    x = torch.randn(2, tokens, d)
    causal = torch.triu(torch.ones(tokens, tokens, dtype=torch.bool), diagonal=1)
    unpadded, _ = torch_mha(x, x, x, attn_mask=causal)
    if not torch.allclose(ours(x), unpadded, atol=1e-6):
        raise SystemExit("seed 003's MultiHeadAttention differs from torch.nn.MultiheadAttention")
    padding = torch.tensor([[False] * tokens, [False, False, False, True, True]])
    x_torch = x.clone().requires_grad_(True)
    out, weights = torch_mha(x_torch, x_torch, x_torch, attn_mask=causal, key_padding_mask=padding)
    probe = torch.randn(out.shape)
    (out * probe).sum().backward()
    tensors = {"x": x, "key_padding_mask": padding, "probe": probe, "torch.out": out, "torch.attn_weights": weights,
               "torch.grad.x": x_torch.grad}
    tensors.update({"param." + n: p for n, p in ours.state_dict().items()})
    save(golden_path("attention_mha_vs_torch"), tensors, {"module": repr(ours), "torch_module": repr(torch_mha)})


def main():
    self_attention_seed000()
    seed003_classes()
    random_shapes()
    mha_equals_torch()


if __name__ == "__main__":
    main()
