#!/usr/bin/env bash
# The real `attograd train squares` / `eval squares` programs: short runs of both models write
# their files and eval reads them back; misuse gives exit 2 or 1 with a message and leaves no
# file; a diverging run exits 3 and leaves the earlier checkpoint alone; SIGINT exits 130 with a
# loadable last.safetensors. Prints OK / NOT OK per case.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"
squares=("$attograd" --threads 1 train squares --quiet)

out="$work/selfattn"
check "selfattn run" 0 "validation MSE" -- "${squares[@]}" --epochs 3 --out "$out"
for file in config.json metrics.csv losses.svg predictions.svg last.safetensors best.safetensors; do
  expect "selfattn wrote $file" test -s "$out/$file"
done
expect "metrics.csv has a val_loss column" grep -q "^epoch,train_loss,val_loss" "$out/metrics.csv"
expect "metrics.csv has 3 epochs" test "$(wc -l <"$out/metrics.csv")" -eq 4
expect "config.json has seed 004's sizes" grep -q '"ff_units": 10' "$out/config.json"
check "eval squares" 0 "MSE" -- "$attograd" eval squares --checkpoint "$out/best.safetensors"
check "eval on other squares" 0 "on 50 squares (seed 77" -- "$attograd" eval squares --checkpoint "$out/last.safetensors" --data-seed 77 --n 50

tf="$work/transformer"
check "transformer run" 0 "validation MSE" -- "${squares[@]}" --model transformer --epochs 2 --out "$tf"
expect "transformer takes its own defaults" grep -q '"d_model": 16' "$tf/config.json"
expect "transformer lr default" grep -q '"lr": 0.003' "$tf/config.json"
check "transformer flags override defaults" 0 "validation MSE" -- "${squares[@]}" --model transformer --epochs 1 --d-model 8 --heads 4 --lr 0.01 --out "$work/tf8"
expect "overridden sizes stored" grep -q '"d_model": 8' "$work/tf8/config.json"

check "train squares --help shows defaults" 0 "--batch-size INT:INT in [1, 1000000]=16" -- "$attograd" train squares --help
check "eval squares --help" 0 "--data-seed" -- "$attograd" eval squares --help
check "eval sentiment --help" 0 "--checkpoint" -- "$attograd" eval sentiment --help

bad="$work/bad"
check "unknown model" 2 "--model" -- "${squares[@]}" --model rnn --out "$bad"
check "negative epochs" 2 "--epochs" -- "${squares[@]}" --epochs -1 --out "$bad"
check "nan lr" 2 "--lr" -- "${squares[@]}" --lr nan --out "$bad"
check "zero heads" 2 "--heads" -- "${squares[@]}" --heads 0 --out "$bad"
check "layers for selfattn" 1 "transformer's settings" -- "${squares[@]}" --layers 2 --out "$bad"
check "heads not dividing d_model" 2 "--heads 3 does not divide --d-model 16" -- "${squares[@]}" --model transformer --heads 3 --out "$bad"
check "resume from a folder without a checkpoint" 1 "cannot open" -- "${squares[@]}" --resume "$work" --out "$bad"
check "eval without --checkpoint" 2 "--checkpoint" -- "$attograd" eval squares
check "eval a missing checkpoint" 1 "cannot open" -- "$attograd" eval squares --checkpoint "$work/none.safetensors"
check "eval a file that is no checkpoint" 1 "metrics.csv" -- "$attograd" eval squares --checkpoint "$out/metrics.csv"
"$attograd" train sentiment --epochs 1 --out "$work/sentiment" --quiet >/dev/null
check "eval squares on a sentiment checkpoint" 1 "expected 'squares'" -- "$attograd" eval squares --checkpoint "$work/sentiment/last.safetensors"
check "eval sentiment on a squares checkpoint" 1 "expected 'sentiment'" -- "$attograd" eval sentiment --checkpoint "$out/last.safetensors"
expect "failed runs left no files" test ! -e "$bad"

# A run that diverges at its second step writes nothing: the last good checkpoint stays as it was.
cp "$out/last.safetensors" "$work/good.safetensors"
check "huge lr diverges" 3 "diverged" -- "${squares[@]}" --lr 1e30 --out "$out"
expect "the last good checkpoint is untouched" cmp -s "$out/last.safetensors" "$work/good.safetensors"

# SIGINT during a long run: exit 130, and last.safetensors holds the step it stopped after.
long="$work/long"
signal_when_checkpointed INT "$long" "$work/long.out" -- "$attograd" --threads 1 train squares --epochs 1000000 --out "$long" --quiet
expect "SIGINT exits 130 (got $status)" test "$status" -eq 130
expect "SIGINT says where to continue" grep -q "continue with --resume" "$work/long.out"
check "last.safetensors after SIGINT loads" 0 "MSE" -- "$attograd" eval squares --checkpoint "$long/last.safetensors"
echo "squares CLI: $failures failed"
[ "$failures" -eq 0 ]
