#!/usr/bin/env bash
# `attograd train sentiment --dataset uci` on the cached UCI corpus (tools/fetch_data.sh): a short
# run prints the split and learns; best.safetensors is the epoch of the highest validation
# accuracy, and `eval --split val` reproduces it; the report and report.svg; bad corpus files and a
# missing corpus give exit 1 naming the file, misuse exit 2. Prints OK / NOT OK per case.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

out="$work/run"
check "short UCI run" 0 "total      2430    277    293" -- "$attograd" --threads 2 train sentiment --dataset uci --epochs 3 --out "$out" --quiet
output="$("$attograd" --threads 2 train sentiment --dataset uci --epochs 3 --out "$work/again" --quiet 2>&1)"
expect "prints the dropped junk records" grep -q "1 from amazon.json, 1 from imdb.json, 1 from yelp.json" <<<"$output"
expect "prints the vocabulary" grep -q "vocabulary: 4710 training words" <<<"$output"
expect "prints the confusion matrix" grep -q "confusion matrix (test" <<<"$output"
expect "prints the reference points" grep -q "81.16%" <<<"$output"
for file in config.json metrics.csv losses.svg report.svg last.safetensors best.safetensors; do
  expect "wrote $file" test -s "$out/$file"
done
expect "metrics.csv has the validation columns" grep -q "^epoch,train_loss,val_accuracy,val_loss$" "$out/metrics.csv"
expect "report.svg lists the surest mistakes" grep -q "misclassified sentences the model was most sure about" "$out/report.svg"
expect "same seed, same files" cmp -s "$out/metrics.csv" "$work/again/metrics.csv"

# The best epoch: the highest validation accuracy, the earliest on ties; it learned something.
best_line="$(awk -F, 'NR > 1 && (best == "" || $3 > best) { best = $3; epoch = $1 } END { print epoch, best }' "$out/metrics.csv")"
read -r best_epoch best_accuracy <<<"$best_line"
expect "validation accuracy above 75% after 3 epochs ($best_accuracy)" awk -v a="$best_accuracy" 'BEGIN { exit !(a > 0.75) }'
expect "best.safetensors is epoch $best_epoch" grep -q "best epoch (highest validation accuracy, the earliest on ties): $best_epoch " <<<"$output"
correct="$(awk -v a="$best_accuracy" 'BEGIN { printf "%d", a * 277 + 0.5 }')"
check "eval reproduces the best validation accuracy" 0 "($correct of 277)" -- "$attograd" --threads 2 eval sentiment --checkpoint "$out/best.safetensors" --dataset uci --split val
test_line="$(grep -m1 "^  overall" <<<"$output")"
check "eval on test prints the training report's accuracy" 0 "$test_line" -- "$attograd" --threads 2 eval sentiment --checkpoint "$out/best.safetensors" --dataset uci
# Memory bounded by the work, not by the worst line (issue 16): eval and predict batch by length
# under a memory budget, so one 1,000-word line among 10,000 short ones pads only itself.
long_file="$work/long.tsv"
awk 'BEGIN { for (i = 1; i <= 10000; i++) {
  if (i == 5000) { printf "1\t"; for (w = 0; w < 1000; w++) printf "great "; print "" }
  else print (i % 2) "\tthe food was " (i % 2 ? "great" : "awful") } }' >"$long_file"
peak_kb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1"; }
# Under ASan (tools/test.sh --sanitize) freed memory waits in a 256 MB quarantine by default, which
# would count against the budget: keep it small for these two measured runs.
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=16"
/usr/bin/time -v -o "$work/eval.time" "$attograd" --threads 2 eval sentiment --checkpoint "$out/best.safetensors" \
  --data "$long_file" >"$work/eval.out" 2>&1
expect "eval of 10,000 lines with one of 1,000 words: all of them" grep -q "of 10000)" "$work/eval.out"
expect "... under 200 MB at its peak ($(($(peak_kb "$work/eval.time") / 1024)) MB)" test "$(peak_kb "$work/eval.time")" -lt 204800
cut -f2 "$long_file" >"$work/long.txt"
/usr/bin/time -v -o "$work/predict.time" "$attograd" --threads 2 predict sentiment --checkpoint "$out/best.safetensors" \
  --file "$work/long.txt" >"$work/predict.out" 2>&1
expect "predict --file of the same texts: one line each" test "$(awk -F'\t' '$2 == "positive" || $2 == "negative"' "$work/predict.out" | wc -l)" -eq 10000
expect "... under 200 MB at its peak ($(($(peak_kb "$work/predict.time") / 1024)) MB)" test "$(peak_kb "$work/predict.time")" -lt 204800
check "predict --explain on a real review" 0 "positive" -- "$attograd" predict sentiment --checkpoint "$out/best.safetensors" "I've dropped my phone more times than I can say, even on concrete and my phone is still great." --explain "$work/explain.svg"
expect "the heatmap marks unknown words" grep -q "(unk)" "$work/explain.svg"

# Resume: 2 epochs, then on to 3, give the 3-epoch run's metrics bit for bit. With a constant lr:
# the cosine schedule spans the run's epochs, so a run extended from 2 to 3 follows another curve
# (the charlm test resumes a schedule mid-run after SIGTERM).
expect "the UCI default schedule is recorded" grep -q '"lr_schedule": "cosine"' "$out/config.json"
constant=(--threads 2 train sentiment --dataset uci --lr-schedule constant --quiet)
"$attograd" "${constant[@]}" --epochs 3 --out "$work/straight" >/dev/null 2>&1
"$attograd" "${constant[@]}" --epochs 2 --out "$work/resumed" >/dev/null 2>&1
check "resume to 3 epochs" 0 "best epoch" -- "$attograd" --threads 2 train sentiment --dataset uci --epochs 3 --out "$work/resumed" --resume "$work/resumed" --quiet
expect "resumed run equals the uninterrupted one" cmp -s "$work/straight/metrics.csv" "$work/resumed/metrics.csv"
expect "... and the schedules differ" test "$(md5sum <"$out/metrics.csv")" != "$(md5sum <"$work/straight/metrics.csv")"
check "resume with another --lr-schedule" 1 "the checkpoint's lr_schedule is \"constant\", this run's is \"cosine\" (set by --lr-schedule)" -- "$attograd" train sentiment --dataset uci --epochs 4 --lr-schedule cosine --resume "$work/resumed" --quiet
check "--lr-schedule must be known" 2 "--lr-schedule: linear not in {constant,cosine}" -- "$attograd" train sentiment --dataset uci --lr-schedule linear --out "$work/never"

# Bad corpus files: exit 1, naming the file; nothing written.
bad="$work/bad"
corpus="$work/corpus/uci-sentiment"
mkdir -p "$corpus"
check "missing corpus" 1 "uci-sentiment/amazon.json is missing: run tools/fetch_data.sh" -- env ATTOGRAD_DATA_DIR="$work/corpus" "$attograd" train sentiment --dataset uci --out "$bad"
printf '[{"text": "fine", "class": 1}]' >"$corpus/amazon.json"
printf '[{"text": "broken", "class": 1},' >"$corpus/imdb.json"
# A cached corpus is checked against its pinned sha256 when read (issue 27): a damaged file is refused by that.
check "malformed JSON" 1 "the cached corpus has sha256" -- env ATTOGRAD_DATA_DIR="$work/corpus" "$attograd" train sentiment --dataset uci --out "$bad"
check "eval on a malformed corpus" 1 "the cached corpus has sha256" -- env ATTOGRAD_DATA_DIR="$work/corpus" "$attograd" eval sentiment --checkpoint "$out/best.safetensors" --dataset uci
expect "failed runs wrote nothing" test ! -e "$bad"
check "--data with --dataset" 2 "excludes" -- "$attograd" train sentiment --dataset uci --data "$corpus/amazon.json" --out "$bad"
check "unknown dataset" 2 "--dataset" -- "$attograd" train sentiment --dataset imdb --out "$bad"
check "--split for seed 002's data" 1 "--split is for --dataset uci" -- "$attograd" eval sentiment --checkpoint "$out/best.safetensors" --dataset seed --split val
echo "UCI CLI: $failures failed"
[ "$failures" -eq 0 ]
