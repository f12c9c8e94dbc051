"""Golden data for the optimizers, gradient clipping and the learning-rate schedules.

Optimizers: a small model (Linear(4,8) → ReLU → Linear(8,1)) trained for 10 steps with MSE on
fixed data; the file holds the initial parameters ("param.<name>"), the data, the loss before
each step ("loss") and every parameter after every step ("step<k>.<name>", k = 1..10).
Writes tests/golden/optim_<name>.safetensors. Run: /usr/bin/python3 tools/golden/optim.py
"""
import math

import torch

from golden import golden_path, save

STEPS = 10


def small_model():
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))


def record_optimizer(name, make_optimizer, options):
    torch.manual_seed(1)
    model = small_model()
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    tensors = {"x": x, "y": y}
    tensors.update({"param." + n: p.detach().clone() for n, p in model.named_parameters()})
    optimizer = make_optimizer(model.parameters())
    losses = []
    for step in range(1, STEPS + 1):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        tensors.update({f"step{step}.{n}": p.detach().clone() for n, p in model.named_parameters()})
    tensors["loss"] = torch.tensor(losses)
    save(golden_path("optim_" + name), tensors, {"options": options})


def record_clip_grad_norm():
    torch.manual_seed(2)
    grads = [torch.randn(3, 4), torch.randn(5), torch.randn(2, 2, 2)]
    tensors = {}
    for norm_type, max_norm in [("2", 1.5), ("inf", 0.5), ("2_noclip", 100.0)]:
        params = [torch.zeros_like(g, requires_grad=True) for g in grads]
        for p, g in zip(params, grads):
            p.grad = g.clone()
        p_value = math.inf if norm_type == "inf" else 2.0
        total = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=p_value)
        tensors[f"{norm_type}.total_norm"] = total
        tensors.update({f"{norm_type}.clipped.{i}": p.grad for i, p in enumerate(params)})
    tensors.update({f"grad.{i}": g for i, g in enumerate(grads)})
    save(golden_path("optim_clip_grad_norm"), tensors)


def learning_rates(scheduler, optimizer, steps):
    rates = []
    for _ in range(steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return torch.tensor(rates, dtype=torch.float64)


def warmup_cosine(warmup_steps, total_steps):
    def factor(step):
        if step < warmup_steps:
            return step / warmup_steps
        progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    return factor


def record_schedules():
    param = torch.zeros(1, requires_grad=True)
    sgd = torch.optim.SGD([param], lr=0.5)
    step_lr = learning_rates(torch.optim.lr_scheduler.StepLR(sgd, step_size=3, gamma=0.1), sgd, 12)
    sgd = torch.optim.SGD([param], lr=0.5)
    lambda_lr = torch.optim.lr_scheduler.LambdaLR(sgd, warmup_cosine(4, 20))
    cosine = learning_rates(lambda_lr, sgd, 24)
    save(golden_path("optim_schedules"), {"step_lr": step_lr, "warmup_cosine": cosine})


def main():
    record_optimizer(
        "sgd",
        lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-2),
        "lr=0.1 momentum=0.9 weight_decay=1e-2",
    )
    record_optimizer(
        "sgd_nesterov",
        lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True),
        "lr=0.05 momentum=0.8 nesterov",
    )
    record_optimizer("adam", lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=1e-2), "lr=1e-2 weight_decay=1e-2")
    record_optimizer("adamw", lambda p: torch.optim.AdamW(p, lr=1e-2), "lr=1e-2 (weight_decay 1e-2 by default)")
    record_clip_grad_norm()
    record_schedules()


if __name__ == "__main__":
    main()
