#!/usr/bin/python3
"""The PyTorch peer's charlm (../shared/peer/charlm_torch.py: nanoGPT's baby GPT) data-parallel with
DistributedDataParallel over gloo, as `mpirun -np N attograd train charlm` runs it: every rank builds
the model from the same seed, draws the same global batch of --batch-size windows, takes its
contiguous 1/N of them, and DDP averages the gradients (its default buckets, overlapped with
backward); clipping, AdamW and the lr schedule as the peer. Rank 0 times each step (tokens: the
global batch) and prints the peer's RESULT line for training tokens/s (median after 50 warm-up
iterations). With --bf16 each rank's forward runs under torch.cpu.amp.autocast(dtype=torch.bfloat16),
backward and the optimizer outside (PyTorch's CPU mixed-precision recipe). Not the peer folder's: tools/bench/charlm_scaling.sh runs it.

  /usr/bin/python3 tools/bench/charlm_ddp.py --data moby-dick.txt --ranks 2 --threads 1 --iters 300
"""
import argparse, importlib.util, os, statistics, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def load_peer(path):
    spec = importlib.util.spec_from_file_location("charlm_torch", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(rank, a):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    torch.set_num_threads(a.threads)
    peer = load_peer(a.peer)
    text = open(a.data, "rb").read().decode("utf-8")
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)
    train = data[: int(0.9 * len(data))]
    T, B = a.block_size, a.batch_size
    first, last = B * rank // a.ranks, B * (rank + 1) // a.ranks
    torch.manual_seed(a.seed)
    model = peer.CharGPT(len(chars), T, a.n_layer, a.n_head, a.n_embd, False, 0.0)
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    # gloo cannot broadcast the peer's bool causal-mask buffers; they are the same on every rank anyway.
    torch.nn.parallel.DistributedDataParallel._set_params_and_buffers_to_ignore_for_model(
        model, [name for name, buffer in model.named_buffers() if buffer.dtype == torch.bool])
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.99))
    gen = torch.Generator().manual_seed(a.seed)
    offs = torch.arange(T)
    step_s = []
    ddp.train()
    for it in range(a.iters):
        for g in opt.param_groups:
            g["lr"] = peer.lr_at(it, 1e-3, 1e-4, 100, a.iters)
        t = time.perf_counter()
        ix = torch.randint(len(train) - T, (B,), generator=gen)[first:last]  # the same global draw on every rank
        pos = ix[:, None] + offs
        with torch.cpu.amp.autocast(dtype=torch.bfloat16, enabled=a.bf16):
            _, loss = ddp(train[pos], train[pos + 1])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step_s.append(time.perf_counter() - t)
        if rank == 0 and it % 100 == 0:
            print(f"iter {it}: rank 0 loss {loss.item():.4f}, {step_s[-1] * 1e3:.2f} ms", flush=True)
    if rank == 0:
        after = step_s[50:] if len(step_s) > 50 else step_s
        tps = [B * T / s for s in after]
        print(f"torch {torch.__version__} DDP gloo ({'bf16 autocast' if a.bf16 else 'f32'}): {a.ranks} ranks x {a.threads} threads, global batch {B}: "
              f"median {statistics.median(after) * 1e3:.2f} ms/step, {statistics.median(tps):,.0f} tokens/s")
        print(f"RESULT,charlm_ddp_train_tokens_per_s,{statistics.median(tps):.1f},{max(tps):.1f},tok/s")
    dist.destroy_process_group()


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--peer", default=os.path.join(here, "../../../shared/peer/charlm_torch.py"))
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--n-layer", type=int, default=4)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-embd", type=int, default=128)
    ap.add_argument("--block-size", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=12)
    ap.add_argument("--port", type=int, default=29517)
    ap.add_argument("--bf16", action="store_true", help="the forward under CPU autocast (bfloat16)")
    a = ap.parse_args()
    if not os.path.exists(a.peer):
        sys.exit(f"charlm_ddp: the peer script {a.peer} is missing (--peer PATH)")
    mp.spawn(run, args=(a,), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
