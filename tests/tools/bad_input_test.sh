#!/usr/bin/env bash
# The bad-input matrix: the real `attograd` program fed missing, damaged, mismatched and absurd
# inputs. Each case must exit 1 (runtime error) or 2 (usage error) as listed, never crash (134,
# 139), trip a sanitizer (86, 87) or hang (124); its message must name the problem; and the files
# already in the output folder must stay byte for byte as they were.
#   bad_input_test.sh ATTOGRAD      (python3 edits checkpoints: tests/tools/edit_checkpoint.py)
set -u
attograd="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$here/cli_check.sh"
cases=0

# Reference runs: sentiment (seed 002's model), sentiment with heads, squares selfattn and transformer.
good="$work/good" heads="$work/heads" squares="$work/squares" transformer="$work/transformer"
"$attograd" train sentiment --epochs 2 --out "$good" --quiet >/dev/null 2>&1
"$attograd" train sentiment --epochs 1 --heads 2 --out "$heads" --quiet >/dev/null 2>&1
"$attograd" train squares --epochs 1 --out "$squares" --quiet >/dev/null 2>&1
"$attograd" train squares --epochs 1 --model transformer --out "$transformer" --quiet >/dev/null 2>&1
for f in "$good" "$heads" "$squares" "$transformer"; do
  [ -s "$f/last.safetensors" ] || { echo "NOT OK setup: no $f/last.safetensors"; exit 1; }
done

# OUT: a good run's folder plus a file of the user's; every case that writes aims at it.
out="$work/out"
cp -r "$good" "$out"
echo "my notes" >"$out/keep.txt"
fingerprint() { (cd "$out" && find . -type f | sort | xargs sha256sum); }
before="$(fingerprint)"

# bad NAME EXIT MESSAGE_PART -- COMMAND...: the exit code, the message, OUT untouched, within 60 s.
bad() {
  local name="$1" expected="$2" part="$3"
  shift 4
  cases=$((cases + 1))
  check "$name" "$expected" "$part" -- timeout 60 "$@"
  if [ "$(fingerprint)" != "$before" ]; then
    echo "NOT OK $name: changed files in $out"
    failures=$((failures + 1))
    rm -rf "$out" && cp -r "$good" "$out" && echo "my notes" >"$out/keep.txt"
  fi
}

ckpt="$work/ckpt"
mkdir -p "$ckpt/dir.safetensors"
: >"$ckpt/empty.safetensors"
head -c 100 "$good/last.safetensors" >"$ckpt/truncated.safetensors"
head -c -7 "$good/last.safetensors" >"$ckpt/short-data.safetensors"
printf 'this is not a checkpoint, only text that happens to be long enough\n' >"$ckpt/garbage.safetensors"
flip() {  # flip OFFSET FILE: a copy of the good checkpoint with one bit flipped at OFFSET
  cp "$good/last.safetensors" "$2"
  local byte
  byte=$(od -An -tu1 -j "$1" -N1 "$2" | tr -d ' ')
  printf "$(printf '\\%03o' $((byte ^ 4)))" | dd of="$2" bs=1 seek="$1" conv=notrunc status=none
}
size=$(stat -c %s "$good/last.safetensors")
flip $((size - 10)) "$ckpt/flipped-data.safetensors"
flip 200 "$ckpt/flipped-header.safetensors"
python3 "$here/edit_checkpoint.py" "$good/last.safetensors" "$ckpt/shape.safetensors" shape
python3 "$here/edit_checkpoint.py" "$good/last.safetensors" "$ckpt/dtype.safetensors" dtype

echo "== checkpoints"
eval_s=("$attograd" eval sentiment --checkpoint)
bad "missing checkpoint" 1 "cannot open" -- "${eval_s[@]}" "$ckpt/none.safetensors"
bad "checkpoint is a directory" 1 "is a directory" -- "${eval_s[@]}" "$ckpt/dir.safetensors"
bad "empty checkpoint" 1 "shorter than the 8-byte header length" -- "${eval_s[@]}" "$ckpt/empty.safetensors"
bad "truncated checkpoint (header)" 1 "truncated" -- "${eval_s[@]}" "$ckpt/truncated.safetensors"
bad "truncated checkpoint (data)" 1 "corrupt" -- "${eval_s[@]}" "$ckpt/short-data.safetensors"
bad "garbage checkpoint" 1 "garbage.safetensors" -- "${eval_s[@]}" "$ckpt/garbage.safetensors"
bad "bit flipped in the data" 1 "corrupt" -- "${eval_s[@]}" "$ckpt/flipped-data.safetensors"
bad "bit flipped in the header" 1 "flipped-header.safetensors" -- "${eval_s[@]}" "$ckpt/flipped-header.safetensors"
bad "tensor of the wrong shape" 1 "the model expects (109,16)" -- "${eval_s[@]}" "$ckpt/shape.safetensors"
bad "tensor of the wrong dtype" 1 "f64, the model expects (109,16) f32" -- "${eval_s[@]}" "$ckpt/dtype.safetensors"
bad "not a checkpoint (metrics.csv)" 1 "metrics.csv" -- "${eval_s[@]}" "$good/metrics.csv"
bad "checkpoint is an endless device" 1 "/dev/zero: is not a regular file" -- "${eval_s[@]}" /dev/zero
bad "predict: squares checkpoint" 1 "expected 'sentiment'" -- "$attograd" predict sentiment --checkpoint "$squares/last.safetensors" "hi"
bad "eval squares: sentiment checkpoint" 1 "expected 'squares'" -- "$attograd" eval squares --checkpoint "$good/last.safetensors"
bad "eval squares: corrupt checkpoint" 1 "corrupt" -- "$attograd" eval squares --checkpoint "$ckpt/flipped-data.safetensors"
bad "resume: squares run into sentiment" 1 "cannot resume: the checkpoint's task is \"squares\"" -- "$attograd" train sentiment --resume "$squares" --out "$out" --quiet
bad "resume: selfattn run with --heads 2" 1 "cannot resume: the checkpoint's model is \"selfattn\"" -- "$attograd" train sentiment --heads 2 --resume "$good" --out "$out" --quiet
bad "resume: multihead run without --heads" 1 "the checkpoint's model is \"multihead\"" -- "$attograd" train sentiment --resume "$heads" --out "$out" --quiet
bad "resume: squares selfattn as transformer" 1 "the checkpoint's model is \"selfattn\"" -- "$attograd" train squares --model transformer --resume "$squares" --out "$out" --quiet
bad "resume: other --dim" 1 "the model expects" -- "$attograd" train sentiment --dim 8 --resume "$good" --out "$out" --quiet
bad "resume: folder without last.safetensors" 1 "cannot open" -- "$attograd" train sentiment --resume "$ckpt" --out "$out" --quiet
bad "resume: corrupt last.safetensors" 1 "corrupt" -- bash -c "mkdir -p '$work/corrupt' && cp '$ckpt/flipped-data.safetensors' '$work/corrupt/last.safetensors' && '$attograd' train sentiment --resume '$work/corrupt' --out '$out' --quiet"

echo "== flags"
train_s=("$attograd" train sentiment --out "$out" --quiet)
bad "unknown flag" 2 "--bogus" -- "${train_s[@]}" --bogus
bad "--epochs -1" 2 "--epochs" -- "${train_s[@]}" --epochs -1
bad "--epochs 0" 2 "--epochs" -- "${train_s[@]}" --epochs 0
bad "--epochs abc" 2 "--epochs" -- "${train_s[@]}" --epochs abc
bad "--lr nan" 2 "--lr" -- "${train_s[@]}" --lr nan
bad "--lr inf" 2 "--lr" -- "${train_s[@]}" --lr inf
bad "--lr -1" 2 "--lr" -- "${train_s[@]}" --lr -1
bad "--batch-size 0" 2 "--batch-size" -- "${train_s[@]}" --batch-size 0
bad "--threads 0" 2 "--threads" -- "$attograd" --threads 0 train sentiment --out "$out"
bad "--threads 100000" 2 "--threads" -- "$attograd" --threads 100000 train sentiment --out "$out"
bad "--dim 0" 2 "--dim" -- "${train_s[@]}" --dim 0
bad "--heads 3 does not divide --dim 16" 1 "divisible by num_heads" -- "${train_s[@]}" --heads 3
bad "--val-fraction 0.95" 2 "--val-fraction" -- "${train_s[@]}" --val-fraction 0.95
bad "squares --heads 0" 2 "--heads" -- "$attograd" train squares --heads 0 --out "$out"
bad "squares --model nosuch" 2 "--model" -- "$attograd" train squares --model nosuch --out "$out"
bad "squares --dropout 2" 2 "--dropout" -- "$attograd" train squares --model transformer --dropout 2 --out "$out"
bad "eval squares --n 0" 2 "--n" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 0
bad "no subcommand" 2 "subcommand" -- "$attograd"
bad "predict: no checkpoint flag" 2 "--checkpoint" -- "$attograd" predict sentiment "hi"

echo "== data files"
data="$work/data"
mkdir -p "$data"
: >"$data/empty.tsv"
printf '1\tgood film\nno tab on this line\n' >"$data/notab.tsv"
printf '1\tgood film\n2\tbad film\n' >"$data/label.tsv"
printf '1\tgood film\n0\tbad \xff\xfe film\n' >"$data/latin.tsv"
{ printf '1\t'; head -c 1048576 /dev/zero | tr '\0' 'a' | sed 's/aaaaa/word /g'; printf '\n'; } >"$data/huge.tsv"
bad "missing data file" 2 "no-such.tsv" -- "${train_s[@]}" --data "$data/no-such.tsv"
bad "data file is a directory" 2 "directory" -- "${train_s[@]}" --data "$data"
bad "empty data file" 1 "no examples" -- "${train_s[@]}" --data "$data/empty.tsv"
bad "data file is an endless device" 1 "/dev/zero: is not a regular file" -- "${train_s[@]}" --data /dev/zero
bad "predict --file an endless device" 1 "/dev/zero: is not a regular file" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file /dev/zero
bad "line without a tab" 1 "notab.tsv:2: expected 'label<TAB>text'" -- "${train_s[@]}" --data "$data/notab.tsv"
bad "label other than 0/1" 1 "label.tsv:2: label must be 0 or 1" -- "${train_s[@]}" --data "$data/label.tsv"
bad "non-UTF-8 text" 1 "latin.tsv:2: the text is not valid UTF-8" -- "${train_s[@]}" --data "$data/latin.tsv"
bad "a 1 MB line" 1 "huge.tsv:1: the text has more than the 1000 words" -- "${train_s[@]}" --data "$data/huge.tsv"
bad "eval: a 1 MB line" 1 "more than the 1000" -- "$attograd" eval sentiment --checkpoint "$good/last.safetensors" --data "$data/huge.tsv"
bad "predict: a 1 MB text" 1 "more than the 1000" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/huge.tsv"
bad "predict --file a directory" 2 "directory" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data"

echo "== output folders"
echo "a file" >"$work/afile"
bad "--out below a regular file" 1 "afile/run: cannot create the folder" -- "$attograd" train sentiment --epochs 1 --out "$work/afile/run" --quiet
bad "--out is a regular file" 1 "afile: exists and is not a folder" -- "$attograd" train sentiment --epochs 1 --out "$work/afile" --quiet
bad "--explain below a regular file" 1 "afile" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" "hi" --explain "$work/afile/x.svg"
bad "--predictions below a regular file" 1 "afile" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions "$work/afile/p.safetensors"
[ "$(cat "$work/afile")" = "a file" ] && echo "OK the regular file in the way is intact" || { echo "NOT OK $work/afile changed"; failures=$((failures + 1)); }

echo "bad input: $cases cases, $failures failed"
[ "$failures" -eq 0 ]
