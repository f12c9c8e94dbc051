#!/usr/bin/env bash
# Same seed and thread count ⇒ the same bytes: two runs of each task (and model) write identical
# folders (metrics.csv, config.json, last/best checkpoints, plots); another seed writes others.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

same_bytes() {  # same_bytes NAME ARGS...: two runs with ARGS, every file compared
  local name="$1"
  shift
  for run in a b; do
    "$attograd" --threads 2 "$@" --out "$work/$name-$run" --quiet >/dev/null 2>&1 || {
      echo "NOT OK $name: run $run failed"
      failures=$((failures + 1))
      return
    }
  done
  for file in metrics.csv last.safetensors best.safetensors; do
    [ -s "$work/$name-a/$file" ] || { echo "NOT OK $name: no $file"; failures=$((failures + 1)); }
  done
  if diff -r "$work/$name-a" "$work/$name-b" >/dev/null; then
    echo "OK $name: two runs wrote the same bytes ($(ls "$work/$name-a" | tr '\n' ' '))"
  else
    echo "NOT OK $name: the runs differ: $(diff -rq "$work/$name-a" "$work/$name-b" | tr '\n' ' ')"
    failures=$((failures + 1))
  fi
}

same_bytes sentiment train sentiment --epochs 6 --seed 3
same_bytes sentiment-heads train sentiment --epochs 3 --heads 2 --seed 3
same_bytes squares train squares --epochs 3 --seed 3
same_bytes transformer train squares --model transformer --epochs 2 --seed 3  # dropout draws from the seeded RNG
for i in $(seq 200); do echo "a small text, line $i, for a short character-level run."; done >"$work/text.txt"
same_bytes charlm train charlm --data "$work/text.txt" --iters 30 --eval-interval 10 --block-size 16 --layers 1 \
  --heads 2 --width 16 --dropout 0.1 --seed 3  # random windows and dropout

"$attograd" --threads 2 train sentiment --epochs 6 --seed 4 --out "$work/other-seed" --quiet >/dev/null 2>&1
for file in metrics.csv last.safetensors; do
  if cmp -s "$work/sentiment-a/$file" "$work/other-seed/$file"; then
    echo "NOT OK another seed wrote the same $file (is the seed used?)"
    failures=$((failures + 1))
  else
    echo "OK another seed gives another $file"
  fi
done
echo "determinism: $failures failed"
[ "$failures" -eq 0 ]
