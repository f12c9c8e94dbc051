#!/usr/bin/env bash
# The real `attograd train sentiment` program: a short run writes its files; misuse gives exit 2
# or 1 with a message and leaves no file behind. Prints OK / NOT OK per case.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

out="$work/run"
check "short run" 0 "test sentences right" -- "$attograd" train sentiment --epochs 3 --out "$out" --quiet
for file in config.json metrics.csv losses.svg last.safetensors best.safetensors; do
  [ -s "$out/$file" ] && echo "OK wrote $file" || { echo "NOT OK missing $file"; failures=$((failures + 1)); }
done
[ "$(wc -l <"$out/metrics.csv")" -eq 4 ] && echo "OK metrics.csv has 3 epochs" || { echo "NOT OK metrics.csv"; failures=$((failures + 1)); }
grep -q '"weight_decay"' "$out/config.json" && echo "OK config.json has the settings" || { echo "NOT OK config.json"; failures=$((failures + 1)); }
check "resume to 5 epochs" 0 "epoch 5:" -- "$attograd" train sentiment --epochs 5 --out "$out" --resume "$out" --quiet
straight="$work/straight"
"$attograd" train sentiment --epochs 5 --out "$straight" --quiet >/dev/null 2>&1
if cmp -s <(cut -d, -f1-3 "$out/metrics.csv") <(cut -d, -f1-3 "$straight/metrics.csv"); then
  echo "OK resumed run equals the uninterrupted one (metrics bit for bit)"
else
  echo "NOT OK resumed run differs from the uninterrupted one"
  failures=$((failures + 1))
fi

check "predict" 0 "positive	I love this" -- "$attograd" predict sentiment --checkpoint "$out/best.safetensors" "I love this" "Worst ever" --explain "$work/explain.svg"
grep -q "<svg" "$work/explain.svg" && echo "OK predict --explain wrote an SVG" || { echo "NOT OK no explain.svg"; failures=$((failures + 1)); }
printf 'I love this\nWorst ever\n' >"$work/texts.txt"
check "predict --file" 0 "Worst ever" -- "$attograd" predict sentiment --checkpoint "$out/best.safetensors" --file "$work/texts.txt"
check "predict with no text" 1 "either texts or --file" -- "$attograd" predict sentiment --checkpoint "$out/best.safetensors"
check "predict from a non-checkpoint" 1 "metrics.csv" -- "$attograd" predict sentiment --checkpoint "$out/metrics.csv" "x"
check "predict from a missing checkpoint" 1 "cannot open" -- "$attograd" predict sentiment --checkpoint "$work/none.safetensors" "x"

heads="$work/heads"
check "--heads selects MultiHeadAttention" 0 "test sentences right" -- "$attograd" train sentiment --heads 2 --epochs 2 --out "$heads" --quiet
grep -q '"model": "multihead"' "$heads/config.json" && echo "OK config.json says multihead" || { echo "NOT OK config.json lacks the model"; failures=$((failures + 1)); }
check "predict rebuilds the multi-head model" 0 "I love this" -- "$attograd" predict sentiment --checkpoint "$heads/last.safetensors" "I love this" --explain "$work/heads.svg"
grep -q "mean of 2 heads" "$work/heads.svg" && echo "OK the heatmap averages the heads" || { echo "NOT OK heads heatmap"; failures=$((failures + 1)); }
check "eval rebuilds the multi-head model" 0 "accuracy" -- "$attograd" eval sentiment --checkpoint "$heads/last.safetensors"

bad="$work/bad"
check "negative epochs" 2 "--epochs" -- "$attograd" train sentiment --epochs -1 --out "$bad"
check "zero epochs" 2 "--epochs" -- "$attograd" train sentiment --epochs 0 --out "$bad"
check "nan lr" 2 "--lr" -- "$attograd" train sentiment --lr nan --out "$bad"
check "negative lr" 2 "--lr" -- "$attograd" train sentiment --lr -1 --out "$bad"
check "heads not dividing dim" 2 "--heads 3 does not divide --dim 16" -- "$attograd" train sentiment --heads 3 --out "$bad"
check "zero batch size" 2 "--batch-size" -- "$attograd" train sentiment --batch-size 0 --out "$bad"
check "zero threads" 2 "--threads" -- "$attograd" --threads 0 train sentiment --out "$bad"
check "unknown flag" 2 "--bogus" -- "$attograd" train sentiment --bogus --out "$bad"
check "missing data file" 2 "no-such.tsv" -- "$attograd" train sentiment --data "$work/no-such.tsv" --out "$bad"
printf '1\tgood\nno tab here\n' >"$work/broken.tsv"
check "malformed data line" 1 "broken.tsv:2" -- "$attograd" train sentiment --data "$work/broken.tsv" --out "$bad"
printf '1\tgood\n7\tbad\n' >"$work/label.tsv"
check "bad label" 1 "0 or 1" -- "$attograd" train sentiment --data "$work/label.tsv" --out "$bad"
: >"$work/empty.tsv"
check "empty data file" 1 "no examples" -- "$attograd" train sentiment --data "$work/empty.tsv" --out "$bad"
if [ -e "$bad/metrics.csv" ] || [ -e "$bad/last.safetensors" ]; then
  echo "NOT OK a failed run left files in $bad"
  failures=$((failures + 1))
else
  echo "OK failed runs left no training files"
fi
echo "train CLI: $failures failed"
[ "$failures" -eq 0 ]
