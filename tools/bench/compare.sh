#!/usr/bin/env bash
# attograd side by side with its peers on this machine, one run after the other, at 1 and 2
# threads: the causal MHA block (ours: `attograd bench attention`; PyTorch:
# ../shared/peer/attn_bench_torch.py), matmul GFLOP/s (ours: kernels_bench; PyTorch:
# matmul_torch.py; oneDNN standalone: ../shared/peer/dnnl), softmax backward (ours vs oneDNN's
# own primitive) and per-op overhead. Prints medians and ratios (>1 means attograd is faster),
# then our workloads' efficiency: GFLOP/s (FLOPs as Note [counting FLOPs] in
# tools/bench_command.cpp counts them) as a fraction of the same run's matmul rate (the best of
# kernels_bench's matmuls at that thread count), and each workload's peak resident memory. The
# long-sequence block (1,4096,512,8) is ours alone (the peer script has no such shape).
#   tools/bench/compare.sh [--iters K]   (builds build-bench/ with ATTOGRAD_BENCH=ON, or $ATTOGRAD_BENCH_BUILD)
# Run it alone: it waits until no compiler is running, and gives up after 10 minutes.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
peer="${ATTOGRAD_PEER:-$root/../shared/peer}"
source "$root/tools/bench/bench_lib.sh"
iters=20
while [ $# -gt 0 ]; do
  case "$1" in
    --iters) whole_number compare.sh "$1" "${2:-}"; iters="$2"; shift 2 ;;
    *) echo "usage: compare.sh [--iters K]" >&2; exit 2 ;;
  esac
done
require_peer compare.sh
build="${ATTOGRAD_BENCH_BUILD:-$root/build-bench}"  # any build with ATTOGRAD_BENCH=ON
out="$build/compare-logs"  # every raw output of the last run
rm -rf "$out" && mkdir -p "$out"

[ -f "$build/build.ninja" ] || cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DATTOGRAD_BENCH=ON >&2
cmake --build "$build" -j 2 --target attograd kernels_bench >&2
[ -x "$build/peer-dnnl/dnnl_bench" ] || {
  cmake -S "$peer/dnnl" -B "$build/peer-dnnl" -DCMAKE_BUILD_TYPE=Release >&2
  cmake --build "$build/peer-dnnl" >&2
}

# Timings on a machine that is compiling are meaningless: wait (up to 10 minutes) for it to be idle.
busy() { pgrep -x cc1plus >/dev/null || pgrep -x ninja >/dev/null; }
for _ in $(seq 60); do busy && sleep 10 || break; done
if busy; then
  echo "compare.sh: a build is still running (cc1plus/ninja); try again when the machine is idle." >&2
  exit 1
fi

shapes=(1,6,16,2 16,4,6,3 32,128,256,8 8,512,512,8)
long_shape=1,4096,512,8
for t in 1 2; do
  echo "== $t thread(s)" >&2
  for s in "${shapes[@]}"; do
    "$build/tools/attograd" bench attention --shape "$s" --threads "$t" --iters "$iters" --json >>"$out/ours_t$t.json"
  done
  "$build/tools/attograd" bench attention --shape "$long_shape" --threads "$t" --iters 5 --json >>"$out/ours_t$t.json"
  "$build/tools/attograd" bench transformer --threads "$t" --iters "$iters" --json >"$out/ours_transformer_t$t.json"
  /usr/bin/python3 "$peer/attn_bench_torch.py" --threads "$t" --iters "$iters" >"$out/torch_attn_t$t.txt"
  /usr/bin/python3 "$peer/matmul_torch.py" --threads "$t" --reps "$iters" >"$out/torch_mm_t$t.txt"
  OMP_NUM_THREADS=$t "$build/peer-dnnl/dnnl_bench" >"$out/dnnl_t$t.txt"
  OMP_NUM_THREADS=$t "$build/tools/bench/kernels_bench" --benchmark_filter='BM_Matmul/|BM_MatmulBatched|BM_SoftmaxBackward|BM_AddOverhead' \
    --benchmark_repetitions=5 --benchmark_report_aggregates_only=true --benchmark_out="$out/kernels_t$t.json" \
    --benchmark_out_format=json >/dev/null
done
machine_line  # the CPU and the load at the end
/usr/bin/python3 - "$out" <<'PY'
import json, sys, re, pathlib
out = pathlib.Path(sys.argv[1])
def results(path):  # RESULT,name,median,best,unit
    r = {}
    for line in path.read_text().splitlines():
        if line.startswith("RESULT,"):
            _, name, med, best, _unit = line.split(",")
            r[name] = float(med)
    return r
def kernels(path):
    r = {}
    for b in json.loads(path.read_text())["benchmarks"]:
        if b.get("aggregate_name") == "median":
            r[b["run_name"]] = b
    return r
print("| workload | threads | attograd | peer | ratio (peer/attograd time, or attograd/peer GFLOP/s) |")
print("|---|---|---|---|---|")
for t in (1, 2):
    ours = [json.loads(l) for l in (out / f"ours_t{t}.json").read_text().splitlines()]
    torch = results(out / f"torch_attn_t{t}.txt") | results(out / f"torch_mm_t{t}.txt")
    dnnl = results(out / f"dnnl_t{t}.txt")
    k = kernels(out / f"kernels_t{t}.json")
    for o in ours:
        shape = "x".join(map(str, o["shape"]))
        for phase, key in (("fwd", "fwd_ms"), ("fwd+bwd", "fwdbwd_ms")):
            peer = torch.get(f"mha_{phase.replace('+', '')}_{shape}_t{t}")
            ratio = f"torch {peer:.4f} ms | {peer / o[key]:.2f}x" if peer else "— | —"
            print(f"| MHA {phase} ({','.join(map(str, o['shape']))}) | {t} | {o[key]:.4f} ms | {ratio} |")
    step = json.loads((out / f"ours_transformer_t{t}.json").read_text())["step_ms"]
    peer = torch[f"transformer_step_t{t}"]
    print(f"| Transformer train step (256,8,2+2,ff1024; B=16, S=T=64) | {t} | {step:.1f} ms | torch {peer:.1f} ms | "
          f"{peer / step:.2f}x |")
    for n in (256, 512, 1024, 2048):
        ours_gf = k[f"BM_Matmul/{n}/real_time"]["GFLOP/s"]
        for peer_name, peer_gf in (("torch", torch[f"torch_matmul_{n}^3_t{t}"]), ("oneDNN", dnnl[f"dnnl_matmul_{n}^3_t{t}"])):
            print(f"| matmul {n}³ GFLOP/s | {t} | {ours_gf:.1f} | {peer_name} {peer_gf:.1f} | {ours_gf / peer_gf:.2f}x |")
    b = k["BM_MatmulBatched/real_time"]["GFLOP/s"]
    for peer_name, peer_gf in (("torch", torch[f"torch_matmul_bmm_t{t}"]), ("oneDNN", dnnl[f"dnnl_matmul_bmm_t{t}"])):
        print(f"| matmul 64×(128×64 @ 64×128) GFLOP/s | {t} | {b:.1f} | {peer_name} {peer_gf:.1f} | {b / peer_gf:.2f}x |")
    sb = k["BM_SoftmaxBackward/rows:8192/cols:128/real_time"]["real_time"]
    sd = k["BM_SoftmaxBackwardOneDnn/rows:8192/cols:128/real_time"]
    print(f"| softmax bwd (8192,128) | {t} | {sb / 1e3:.1f} µs | oneDNN {sd.get('label', '')} {sd['real_time'] / 1e3:.1f} µs | "
          f"{sd['real_time'] / sb:.2f}x |")
    ov = k["BM_AddOverhead"]["ns_per_op"] * 1e9  # the counter is in seconds per op
    print(f"| per-op overhead, 4-element add fwd+bwd | {t} | {ov:.0f} ns | target 1000 ns | |")
print()
print("| workload | threads | time | GFLOP | GFLOP/s | matmul GFLOP/s (same run) | fraction | peak resident |")
print("|---|---|---|---|---|---|---|---|")
for t in (1, 2):
    k = kernels(out / f"kernels_t{t}.json")
    matmul = max(b["GFLOP/s"] for name, b in k.items() if name.startswith(("BM_Matmul/", "BM_MatmulBatched")))
    rows = []
    for o in [json.loads(l) for l in (out / f"ours_t{t}.json").read_text().splitlines()]:
        shape = ",".join(map(str, o["shape"]))
        for phase, p in (("fwd", "fwd"), ("fwd+bwd", "fwdbwd")):
            rows.append((f"MHA {phase} ({shape})", o[f"{p}_ms"], o[f"{p}_gflops"], o[f"{p}_gflop_per_s"], o["peak_rss_mb"]))
    tr = json.loads((out / f"ours_transformer_t{t}.json").read_text())
    rows.append(("Transformer train step", tr["step_ms"], tr["step_gflops"], tr["step_gflop_per_s"], tr["peak_rss_mb"]))
    for name, ms, gflop, rate, rss in rows:
        print(f"| {name} | {t} | {ms:.4f} ms | {gflop:.3f} | {rate:.1f} | {matmul:.1f} | {rate / matmul:.0%} | {rss:.0f} MB |")
PY
