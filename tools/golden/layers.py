"""Golden data for the basic layers: weights, input, output and gradients of a scalar loss.

loss = Σ out ⊙ probe with a fixed random probe, so every output element matters.
Writes tests/golden/layer_<name>.safetensors. Run: /usr/bin/python3 tools/golden/layers.py
"""
import torch

from golden import golden_path, save, with_grads


def record(name, module, x, needs_input_grad=True):
    if needs_input_grad:
        x.requires_grad_(True)
    out = module(x)
    probe = torch.randn(out.shape)
    (out * probe).sum().backward()
    tensors = {"x": x, "out": out, "probe": probe}
    tensors.update({"param." + n: p for n, p in module.state_dict().items()})
    tensors.update(with_grads("grad.param.", module.named_parameters()))
    if needs_input_grad:
        tensors["grad.x"] = x.grad
    save(golden_path("layer_" + name), tensors, {"module": repr(module)})


def main():
    torch.manual_seed(0)
    record("linear", torch.nn.Linear(5, 3), torch.randn(2, 4, 5))
    record("linear_nobias", torch.nn.Linear(4, 6, bias=False), torch.randn(3, 4))
    emb = torch.nn.Embedding(7, 4, padding_idx=0)
    record("embedding", emb, torch.tensor([[1, 0, 3], [6, 6, 2]]), needs_input_grad=False)
    ln = torch.nn.LayerNorm(6)
    with torch.no_grad():
        ln.weight.uniform_(0.5, 1.5)
        ln.bias.uniform_(-0.5, 0.5)
    record("layernorm", ln, torch.randn(2, 3, 6))
    record("relu", torch.nn.ReLU(), torch.randn(3, 5))
    record("gelu", torch.nn.GELU(), torch.randn(3, 5))
    record("gelu_tanh", torch.nn.GELU(approximate="tanh"), torch.randn(3, 5))
    seq = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    record("sequential", seq, torch.randn(5, 4))


if __name__ == "__main__":
    main()
