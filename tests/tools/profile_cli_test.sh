#!/usr/bin/env bash
# `train TASK --profile N`: the table by op on stderr and in OUT/profile.txt, and the run's files the
# same bytes as a run without --profile (profiling observes, it changes no number), for every task;
# its misuse.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

profiled_run_is_the_run() {  # profiled_run_is_the_run NAME N ARGS...: with --profile N and without
  local name="$1" steps="$2"
  shift 2
  check "$name: --profile $steps prints the table" 0 "where a step's time goes, by op ($steps steps after the first 2" \
    -- "$attograd" --threads 2 "$@" --quiet --out "$work/$name-profiled" --profile "$steps"
  local table
  table="$(sed -n "/^where a step's time goes/,/^page faults per step/p" <<<"$last_output")"
  expect "$name: a forward op's row (Linear)" grep -qE "^Linear +[0-9.]+% +[1-9][0-9]* " <<<"$table"
  expect "$name: a backward node's row" grep -qE "^LinearBackward +[0-9.]+% +[1-9][0-9]* " <<<"$table"
  expect "$name: the optimizer's sections, once a step" \
    grep -qE "^\(optimizer: zero_grad\) +[0-9.]+% +1 " <<<"$table"
  expect "$name: the optimizer's step" grep -qE "^\(optimizer: [A-Za-z]+ step\) +[0-9.]+% +1 " <<<"$table"
  expect "$name: the total" grep -qE "^total +100.0%" <<<"$table"
  expect "$name: OUT/profile.txt holds the printed table" cmp -s <(printf '%s\n' "$table") "$work/$name-profiled/profile.txt"
  "$attograd" --threads 2 "$@" --quiet --out "$work/$name-plain" >/dev/null 2>&1
  expect "$name: no profile.txt without --profile" test ! -e "$work/$name-plain/profile.txt"
  expect "$name: the same files, byte for byte ($(ls "$work/$name-plain" | tr '\n' ' '))" \
    diff -r -x profile.txt "$work/$name-profiled" "$work/$name-plain"
}

profiled_run_is_the_run sentiment 2 train sentiment --epochs 3 --seed 3 --heads 2
for i in $(seq 200); do echo "a small text, line $i, for a short character-level run."; done >"$work/text.txt"
profiled_run_is_the_run charlm 3 train charlm --data "$work/text.txt" --iters 12 --eval-interval 4 --block-size 16 \
  --layers 1 --heads 2 --width 16 --dropout 0.1 --seed 3  # random windows and dropout; an evaluation in the window
profiled_run_is_the_run squares 2 train squares --model transformer --epochs 2 --seed 3  # dropout
for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf bear deer frog goat ox yak emu owl; do
  for s in "" s er y ing; do echo "$w$s"; done
done | bash "$(dirname "${BASH_SOURCE[0]}")/reversal_pairs.sh" >"$work/pairs.tsv"
profiled_run_is_the_run g2p 2 train g2p --data "$work/pairs.tsv" --d-model 16 --heads 2 --enc-layers 1 --dec-layers 1 \
  --ff 32 --batch-size 16 --epochs 2

check "a window past the run's end: its steps" 0 "(6 steps after the first 2 of this run: the run ended before the 50 asked)" \
  -- "$attograd" train squares --epochs 1 --batch-size 16 --quiet --out "$work/short" --profile 50
check "a run within the warm-up: says so" 0 "--profile: nothing profiled: the run ended within the warm-up" \
  -- "$attograd" train squares --epochs 1 --batch-size 1000 --quiet --out "$work/warm-up" --profile 2
check "--profile-after 10: a window after the tenth step" 0 "(3 steps after the first 10 of this run)" \
  -- "$attograd" train squares --epochs 3 --batch-size 16 --quiet --out "$work/later" --profile 3 --profile-after 10
expect "--profile-after: the primitives built per step are printed" \
  grep -qE "^page faults per step: [0-9]+ .*oneDNN primitives built per step: [0-9.]+$" "$work/later/profile.txt"
check "--profile-after without --profile" 2 "--profile-after requires --profile" \
  -- "$attograd" train squares --epochs 1 --quiet --out "$work/after-alone" --profile-after 10
check "--profile-after -1" 2 "--profile-after" \
  -- "$attograd" train squares --epochs 1 --quiet --out "$work/after-negative" --profile 2 --profile-after -1
check "--profile 0" 2 "--profile" -- "$attograd" train sentiment --epochs 1 --quiet --out "$work/zero" --profile 0
check "--profile x" 2 "--profile" -- "$attograd" train sentiment --epochs 1 --quiet --out "$work/x" --profile x
check "--profile without N" 2 "--profile" -- "$attograd" train sentiment --epochs 1 --quiet --out "$work/none" --profile
expect "refused runs wrote nothing" test ! -e "$work/zero" -a ! -e "$work/x" -a ! -e "$work/none" \
  -a ! -e "$work/after-alone" -a ! -e "$work/after-negative"
check "eval --profile: a usage error" 2 "--profile" \
  -- "$attograd" eval sentiment --checkpoint "$work/sentiment-plain/best.safetensors" --profile 2
echo "profile: $failures failed"
[ "$failures" -eq 0 ]
