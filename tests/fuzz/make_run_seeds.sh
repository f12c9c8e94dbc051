#!/usr/bin/env bash
# Writes the seeds of the `run` fuzz target into tests/fuzz/run/: tiny checkpoints of each task
# (trained here) with a data file, one per command of fuzz_run.cpp, in its input format
#   [command: 1 byte][checkpoint length: 4 bytes, little-endian][checkpoint][data file]
#   tests/fuzz/make_run_seeds.sh ATTOGRAD
set -euo pipefail
attograd="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
edit="$here/../tools/edit_checkpoint.py"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
train=("$attograd" --threads 1 train)
"${train[@]}" sentiment --epochs 1 --dim 4 --out "$work/s" --quiet >/dev/null
"${train[@]}" squares --epochs 1 --out "$work/q" --quiet >/dev/null
for i in $(seq 20); do printf 'the cat sat on the mat.\nthe dog ate a bone.\n'; done >"$work/text.txt"
"${train[@]}" charlm --data "$work/text.txt" --iters 2 --eval-interval 1 --block-size 8 --layers 1 --heads 1 \
  --width 8 --out "$work/c" --quiet >/dev/null
for task in s q c; do python3 "$edit" "$work/$task/last.safetensors" "$work/$task.eval" no-optimizer; done
for task in s c; do  # model files (`export`, bf16): read wherever a checkpoint is
  "$attograd" export --checkpoint "$work/$task/best.safetensors" --out "$work/$task.model" --dtype bf16 >/dev/null
done
printf '1\ta good film\n0\ta bad film\n' >"$work/tsv"
printf 'a good film\nbad\n' >"$work/lines"
: >"$work/none"
seed() {  # seed NAME COMMAND CHECKPOINT DATA
  python3 - "$here/run/$1" "$2" "$3" "$4" <<'PY'
import struct, sys
out, command, checkpoint, data = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
ckpt = open(checkpoint, "rb").read()
open(out, "wb").write(bytes([command]) + struct.pack("<I", len(ckpt)) + ckpt + open(data, "rb").read())
PY
}
mkdir -p "$here/run"
seed eval_sentiment 0 "$work/s.eval" "$work/tsv"
seed predict_sentiment 1 "$work/s.eval" "$work/lines"
seed eval_squares 2 "$work/q.eval" "$work/none"
seed eval_charlm 3 "$work/c.eval" "$work/text.txt"
seed sample 4 "$work/c.eval" "$work/none"
seed train_sentiment 5 "$work/none" "$work/tsv"
seed resume_sentiment 6 "$work/s/last.safetensors" "$work/none"
seed train_charlm 7 "$work/none" "$work/text.txt"
seed predict_sentiment_model_file 1 "$work/s.model" "$work/lines"
seed sample_model_file 4 "$work/c.model" "$work/none"
seed resume_sentiment_model_file 6 "$work/s.model" "$work/none"
ls -l "$here/run"
