#!/usr/bin/env bash
# The real `attograd train charlm` / `eval charlm` / `sample` programs on a small text made here:
# a short run writes its files, eval reproduces its last validation loss, sample streams the same
# text for the same seed; SIGTERM mid-run saves the step and --resume ends byte-identical to an
# uninterrupted run; bad input (empty text, too short, invalid UTF-8, unknown characters, a
# checkpoint of another task, bad flags) gives exit 1 or 2 with a message and writes nothing.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

for i in $(seq 300); do echo "call me ishmael. some years ago, never mind how long precisely, i went to sea $i."; done >"$work/text.txt"
sizes=(--block-size 16 --layers 1 --width 16 --batch-size 8 --warmup-iters 5 --lr 0.003)
base=("$attograd" --threads 1 train charlm --quiet "${sizes[@]}")
charlm=("${base[@]}" --data "$work/text.txt" --heads 2)

out="$work/run"
check "train charlm" 0 "final validation loss" -- "${charlm[@]}" --iters 60 --eval-interval 20 --out "$out"
for file in config.json metrics.csv losses.svg last.safetensors best.safetensors; do
  expect "wrote $file" test -s "$out/$file"
done
expect "metrics.csv has iter, lr, bpc and loss columns" grep -q "^epoch,train_loss,iter,lr,val_bpc,val_loss$" "$out/metrics.csv"
expect "a row per evaluation" test "$(wc -l <"$out/metrics.csv")" -eq 4
last_loss="$(tail -n 1 "$out/metrics.csv" | awk -F, '{printf "%.6f", $6}')"
# --beta2 (a row of the settings table): AdamW's, recorded, carried over and refused as any setting.
check "train charlm --beta2 0.9" 0 "final validation loss" -- "${charlm[@]}" --iters 20 --eval-interval 20 --beta2 0.9 --out "$work/beta2"
expect "--beta2 recorded in config.json" grep -q '"beta2": 0.9' "$work/beta2/config.json"
expect "the default beta2 is not written (runs made before --beta2 resume)" test "$(grep -c beta2 "$out/config.json")" -eq 0
expect "--beta2 changes the training (other losses than beta2 0.99's)" \
  test "$(sed -n 2p "$work/beta2/metrics.csv")" != "$(sed -n 2p "$out/metrics.csv")"
check "resume --beta2 0.95: refused" 1 "the checkpoint's beta2 is 0.9, this run's is 0.95 (set by --beta2)" -- \
  "${base[@]}" --resume "$work/beta2" --iters 40 --beta2 0.95
check "resume without --beta2: carried over" 0 "final validation loss" -- "${base[@]}" --resume "$work/beta2" --iters 40
expect "... and still recorded" grep -q '"beta2": 0.9' "$work/beta2/config.json"
check "--beta2 1: refused" 2 "--beta2: expected a finite decimal number in [0, 0.9999], got '1'" -- "${charlm[@]}" --beta2 1
check "eval charlm reproduces the last validation loss" 0 "val loss $last_loss nats/char" -- \
  "$attograd" --threads 1 eval charlm --checkpoint "$out/last.safetensors"
check "eval charlm on the training split" 0 "train loss" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors" --split train
# --precision bf16 on eval and sample: the products in bf16, the loss within bf16's error of f32's;
# where the CPU lacks AVX512_BF16, refused naming the feature.
if grep -qw avx512_bf16 /proc/cpuinfo; then
  bf16_loss="$("$attograd" --threads 1 eval charlm --checkpoint "$out/last.safetensors" --precision bf16 2>&1 |
    sed -n 's/.*val loss \([0-9.]*\) nats\/char.*/\1/p')"
  expect "eval charlm --precision bf16: loss within 0.02 of f32's ($bf16_loss vs $last_loss)" \
    awk -v a="$bf16_loss" -v b="$last_loss" 'BEGIN {exit !(a != "" && a - b < 0.02 && b - a < 0.02)}'
  check "sample --precision bf16" 0 "characters/s" -- "$attograd" sample --checkpoint "$out/best.safetensors" --tokens 20 --precision bf16
else
  check "eval charlm --precision bf16 without AVX512_BF16" 1 "AVX512_BF16" -- \
    "$attograd" eval charlm --checkpoint "$out/last.safetensors" --precision bf16
fi
check "eval --precision takes f32 or bf16" 2 "precision" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors" --precision f16
one="$("$attograd" sample --checkpoint "$out/best.safetensors" --tokens 80 --seed 3 --prompt "call " 2>/dev/null)"
two="$("$attograd" sample --checkpoint "$out/best.safetensors" --tokens 80 --seed 3 --prompt "call " 2>/dev/null)"
expect "sample: the same seed gives the same text" test "$one" = "$two"
expect "sample: 80 characters" test "$(printf %s "$one" | wc -m)" -eq 80
check "sample reports its speed" 0 "characters/s" -- "$attograd" sample --checkpoint "$out/best.safetensors" --tokens 5
check "sample --help explains the window" 0 "last half" -- "$attograd" sample --help

# SIGTERM during a run: exit 143, the step is saved, and --resume ends as an uninterrupted run.
straight="$work/straight"
"${charlm[@]}" --iters 2000 --eval-interval 100 --out "$straight" >/dev/null 2>&1
stopped="$work/stopped"
signal_when_checkpointed TERM "$stopped" "$work/stopped.out" -- "${charlm[@]}" --iters 2000 --eval-interval 100 --out "$stopped"
expect "SIGTERM exits 143 (got $status)" test "$status" -eq 143
expect "SIGTERM says where to continue" grep -q "continue with --resume" "$work/stopped.out"
check "resume after SIGTERM" 0 "final validation loss" -- "${charlm[@]}" --iters 2000 --eval-interval 100 --out "$stopped" --resume "$stopped"
expect "resumed metrics.csv equals the uninterrupted one" cmp -s "$stopped/metrics.csv" "$straight/metrics.csv"
expect "resumed last.safetensors equals the uninterrupted one" cmp -s "$stopped/last.safetensors" "$straight/last.safetensors"

# Bad input: a message naming the problem, exit 1 (runtime) or 2 (usage), no folder written.
bad="$work/bad"
printf '' >"$work/empty.txt"
check "empty text" 1 "the text is empty" -- "${base[@]}" --data "$work/empty.txt" --out "$bad"
printf 'abcdefghij' >"$work/short.txt"
check "text shorter than a block" 1 "too short for --block-size 16" -- "${base[@]}" --data "$work/short.txt" --out "$bad"
printf 'good text\nthen \xff bad' >"$work/latin1.txt"
check "invalid UTF-8 names the byte offset" 1 "invalid UTF-8 at byte offset 15" -- "${base[@]}" --data "$work/latin1.txt" --out "$bad"
check "missing data file" 1 "no such file" -- "${base[@]}" --data "$work/nothing.txt" --out "$bad"
check "a folder as data" 1 "is a directory" -- "${base[@]}" --data "$work" --out "$bad"
check "heads not dividing the width" 2 "--heads 3 does not divide --width 16" -- "${base[@]}" --data "$work/text.txt" --heads 3 --out "$bad"
check "zero iterations" 2 "--iters" -- "${charlm[@]}" --iters 0 --out "$bad"
check "negative dropout" 2 "--dropout" -- "${charlm[@]}" --dropout -0.1 --out "$bad"
check "--epochs is not a charlm flag" 2 "--epochs" -- "${charlm[@]}" --epochs 3 --out "$bad"
expect "no folder was written by bad input" test ! -e "$bad"
check "unknown prompt characters are listed" 1 "'Z' (U+005A)" -- "$attograd" sample --checkpoint "$out/last.safetensors" --prompt "Zebra"
check "--drop-unknown leaves them out" 0 "characters/s" -- "$attograd" sample --checkpoint "$out/last.safetensors" --prompt "Zebra" --drop-unknown --tokens 3
check "zero temperature" 2 "--temperature" -- "$attograd" sample --checkpoint "$out/last.safetensors" --temperature 0
for i in $(seq 20); do echo "ZEBRAS AND QUAGGAS"; done >"$work/upper.txt"
check "eval on a text with unknown characters" 1 "the model's vocabulary does not have" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors" --data "$work/upper.txt"
check "eval --drop-unknown" 1 "fewer than a window" -- "$attograd" eval charlm --checkpoint "$out/last.safetensors" --data "$work/upper.txt" --drop-unknown
"$attograd" --threads 1 train squares --epochs 1 --quiet --out "$work/squares" >/dev/null
check "a squares checkpoint for sample" 1 "expected 'charlm'" -- "$attograd" sample --checkpoint "$work/squares/last.safetensors"
check "a squares checkpoint for eval charlm" 1 "expected 'charlm'" -- "$attograd" eval charlm --checkpoint "$work/squares/last.safetensors"
check "resume a squares run as charlm" 1 "cannot resume" -- "${charlm[@]}" --out "$work/squares" --resume "$work/squares"

echo "charlm CLI: $failures failed"
[ "$failures" -eq 0 ]
