#!/usr/bin/env bash
# The memory estimate every `train` prints at the start against the peak resident memory the kernel
# measured (getrusage) that `--report-memory` prints at the end: within 30% for each task, in runs
# where a training step (or an evaluation chunk) dwarfs the program's own memory, at two sizes each,
# so the test checks the per-task formulas (tasks/*/train.cpp, Note [memory estimate]), not only the
# resident memory at the start. Not under the sanitizers: their shadow memory is not the program's.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

# within NAME -- COMMAND...: the run succeeds and prints both figures, within 30% of each other.
within() {
  local name="$1"
  shift 2
  check "$name" 0 "memory: measured peak" -- "$@" --quiet --report-memory
  local line measured estimated start
  line="$(grep "memory: measured peak" <<<"$last_output")"
  measured="$(sed -E 's/.*measured peak ([0-9.]+) MB.*/\1/' <<<"$line")"
  estimated="$(sed -E 's/.*estimated ([0-9.]+) MB.*/\1/' <<<"$line")"
  start="$(grep -oE "memory: estimated peak [0-9]+ MB" <<<"$last_output" | grep -oE "[0-9]+")"
  expect "$name: the end repeats the estimate printed at the start ($start MB)" \
    awk -v a="$estimated" -v b="$start" 'BEGIN { exit !(a - b < 1 && b - a < 1) }'
  expect "$name: estimated $estimated MB within 30% of the measured $measured MB" \
    awk -v e="$estimated" -v m="$measured" 'BEGIN { exit !(e > 0.7 * m && e < 1.3 * m) }'
}

within "squares (defaults)" -- "$attograd" train squares --epochs 2 --out "$work/squares"
within "sentiment (defaults)" -- "$attograd" train sentiment --epochs 2 --out "$work/sentiment"

# charlm on a text of its own: a step of 64 windows of 128, then 16 (the estimate moves with them), then 12 of 512.
awk 'BEGIN { srand(7); for (i = 0; i < 4000; i++) { for (j = 0; j < 60; j++) printf "%c", 97 + int(rand() * 26); print "" } }' \
  >"$work/text.txt"
charlm=("$attograd" train charlm --data "$work/text.txt" --iters 2 --eval-interval 2)
within "charlm, a step of 64 x 128" -- "${charlm[@]}" --block-size 128 --batch-size 64 --out "$work/charlm64"
within "charlm, a step of 16 x 128" -- "${charlm[@]}" --block-size 128 --batch-size 16 --out "$work/charlm16"
# A long block: the streaming attention keeps no (T, T) weights, so the estimate must not count them.
within "charlm, a step of 12 x 512" -- "${charlm[@]}" --block-size 512 --out "$work/charlm512"

# g2p on pairs of 24 letters and 24 phonemes (every batch as long as the longest), at two widths.
awk 'BEGIN { srand(11); for (i = 0; i < 320; i++) { w = ""; p = "";
  for (j = 0; j < 24; j++) { w = w sprintf("%c", 97 + int(rand() * 26)); p = p (j ? " " : "") "P" int(rand() * 30) }
  print w "\t" p } }' >"$work/pairs.tsv"
g2p=("$attograd" train g2p --data "$work/pairs.tsv" --epochs 1 --batch-size 256)
within "g2p, d-model 128" -- "${g2p[@]}" --out "$work/g2p128"
within "g2p, d-model 64, ff 1024, 8 heads" -- "${g2p[@]}" --d-model 64 --ff 1024 --heads 8 --out "$work/g2p64"

echo "memory_cli: $failures failure(s)"
[ "$failures" -eq 0 ]
