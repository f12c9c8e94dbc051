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
# Hostile checkpoints (edit_checkpoint.py's modes): nesting, sizes, offsets, names, weights.
edit() { python3 "$here/edit_checkpoint.py" "$@"; }
charlm="$work/charlm"
for _ in $(seq 20); do printf 'the cat sat on the mat.\nthe dog ate a bone.\n'; done >"$work/text.txt"
"$attograd" train charlm --data "$work/text.txt" --iters 2 --eval-interval 1 --block-size 8 --layers 1 --heads 1 \
  --width 8 --out "$charlm" --quiet >/dev/null 2>&1
[ -s "$charlm/last.safetensors" ] || { echo "NOT OK setup: no $charlm/last.safetensors"; exit 1; }
edit "$good/last.safetensors" "$ckpt/deep-header.safetensors" deep-header 200000
edit "$good/last.safetensors" "$ckpt/deep65-header.safetensors" deep-header 65
edit "$good/last.safetensors" "$ckpt/deep-config.safetensors" deep-config 200000
edit "$good/last.safetensors" "$ckpt/deep-vocabulary.safetensors" deep-metadata vocabulary 200000
edit "$good/last.safetensors" "$ckpt/deep-history.safetensors" deep-metadata history 200000
edit "$squares/last.safetensors" "$ckpt/deep-squares.safetensors" deep-header 200000
edit "$charlm/last.safetensors" "$ckpt/deep-charlm.safetensors" deep-config 200000
edit "$good/last.safetensors" "$ckpt/duplicate.safetensors" duplicate
edit "$good/last.safetensors" "$ckpt/gap.safetensors" gap
edit "$good/last.safetensors" "$ckpt/overlap.safetensors" overlap
edit "$good/last.safetensors" "$ckpt/trailing.safetensors" trailing
edit "$good/last.safetensors" "$ckpt/huge-offsets.safetensors" huge-offsets
edit "$good/last.safetensors" "$ckpt/huge-shape.safetensors" huge-shape
edit "$good/last.safetensors" "$ckpt/length-0.safetensors" header-length 0
edit "$good/last.safetensors" "$ckpt/length-max.safetensors" header-length 18446744073709551615
edit "$good/last.safetensors" "$ckpt/nan.safetensors" nan
edit "$good/last.safetensors" "$ckpt/inf.safetensors" inf
edit "$squares/last.safetensors" "$ckpt/nan-squares.safetensors" nan
edit "$charlm/last.safetensors" "$ckpt/inf-charlm.safetensors" inf
edit "$squares/last.safetensors" "$ckpt/heads-200000.safetensors" config heads 200000
edit "$squares/last.safetensors" "$ckpt/d-model-2e62.safetensors" config d_model 4611686018427387904
edit "$transformer/last.safetensors" "$ckpt/layers-100000.safetensors" config layers 100000
edit "$good/last.safetensors" "$ckpt/dim-2e62.safetensors" config dim 4611686018427387904
edit "$good/last.safetensors" "$ckpt/dim-string.safetensors" config dim '"sixteen"'
edit "$good/last.safetensors" "$ckpt/vocabulary-object.safetensors" config tokenizer '{"a": 1}'
edit "$charlm/last.safetensors" "$ckpt/n-embd-2e62.safetensors" config n_embd 4611686018427387904
# A 1 GB file (sparse: no disk) whose header length is 0, one whose length is 150 MB.
cp "$ckpt/length-0.safetensors" "$ckpt/big-length-0.safetensors" && truncate -s 1G "$ckpt/big-length-0.safetensors"
edit "$good/last.safetensors" "$ckpt/big-length.safetensors" header-length 150000000
truncate -s 200M "$ckpt/big-length.safetensors"
resume_from() {  # resume_from CHECKPOINT: a run folder holding it as last.safetensors
  local run="$work/resume-$(basename "$1" .safetensors)"
  mkdir -p "$run" && cp "$1" "$run/last.safetensors" && echo "$run"
}
# A message must not be a library's own text.
internals() { grep -qE 'json\.exception|bad_alloc|filesystem error|^attograd: error: : ' <<<"$1"; }
clean() {  # clean NAME -- COMMAND...: its message holds none of the libraries' internal text
  local name="$1" output
  shift 2
  output="$("$@" 2>&1)"
  if internals "$output"; then
    echo "NOT OK $name: library text in: $output"
    failures=$((failures + 1))
  else
    echo "OK $name (no library text)"
  fi
}

echo "== checkpoints"
eval_s=("$attograd" eval sentiment --checkpoint)
bad "missing checkpoint" 1 "cannot open" -- "${eval_s[@]}" "$ckpt/none.safetensors"
bad "checkpoint is a directory" 1 "is a directory" -- "${eval_s[@]}" "$ckpt/dir.safetensors"
bad "empty checkpoint" 1 "shorter than the 8-byte header length" -- "${eval_s[@]}" "$ckpt/empty.safetensors"
bad "truncated checkpoint (header)" 1 "truncated" -- "${eval_s[@]}" "$ckpt/truncated.safetensors"
bad "truncated checkpoint (data)" 1 "the file is truncated: its tensors need" -- "${eval_s[@]}" "$ckpt/short-data.safetensors"
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
# Nesting: bounded at parse time, never copied or printed recursively.
bad "header nested 200,000 deep" 1 "the header: the JSON nests deeper than 64 levels" -- "${eval_s[@]}" "$ckpt/deep-header.safetensors"
bad "header nested 65 deep" 1 "nests deeper than 64 levels" -- "${eval_s[@]}" "$ckpt/deep65-header.safetensors"
bad "resume: header nested 200,000 deep" 1 "nests deeper than 64 levels" -- "$attograd" train sentiment --resume "$(resume_from "$ckpt/deep-header.safetensors")" --out "$out" --quiet
bad "config nested 200,000 deep" 1 "the checkpoint's config: the JSON nests deeper" -- "${eval_s[@]}" "$ckpt/deep-config.safetensors"
bad "resume: config nested 200,000 deep" 1 "the checkpoint's config: the JSON nests deeper" -- "$attograd" train sentiment --resume "$(resume_from "$ckpt/deep-config.safetensors")" --out "$out" --quiet
bad "vocabulary nested 200,000 deep" 1 "vocabulary: the JSON nests deeper" -- "${eval_s[@]}" "$ckpt/deep-vocabulary.safetensors"
bad "resume: history nested 200,000 deep" 1 "the history: the JSON nests deeper" -- "$attograd" train sentiment --resume "$(resume_from "$ckpt/deep-history.safetensors")" --epochs 3 --out "$out" --quiet
bad "eval squares: header nested 200,000 deep" 1 "nests deeper than 64 levels" -- "$attograd" eval squares --checkpoint "$ckpt/deep-squares.safetensors"
bad "sample: config nested 200,000 deep" 1 "nests deeper than 64 levels" -- "$attograd" sample --checkpoint "$ckpt/deep-charlm.safetensors" --tokens 3
# The format's rules: one entry per name, tensors tiling the data, nothing after it.
bad "tensor name repeated" 1 "repeats the key \"embed.weight\"" -- "${eval_s[@]}" "$ckpt/duplicate.safetensors"
bad "gap between tensors" 1 "a gap of 4 bytes no tensor covers" -- "${eval_s[@]}" "$ckpt/gap.safetensors"
bad "two tensors on the same bytes" 1 "share data bytes" -- "${eval_s[@]}" "$ckpt/overlap.safetensors"
bad "bytes after the last tensor" 1 "16 bytes after the last tensor" -- "${eval_s[@]}" "$ckpt/trailing.safetensors"
bad "data_offsets near 2^64" 1 "data_offsets span" -- "${eval_s[@]}" "$ckpt/huge-offsets.safetensors"
bad "shape whose product wraps 2^64" 1 "more elements than a tensor can hold" -- "${eval_s[@]}" "$ckpt/huge-shape.safetensors"
bad "header length 0" 1 "its header length is 0" -- "${eval_s[@]}" "$ckpt/length-0.safetensors"
bad "header length 2^64-1" 1 "runs past the end" -- "${eval_s[@]}" "$ckpt/length-max.safetensors"
bad "1 GB file, header length 0 (not read whole)" 1 "its header length is 0" -- "${eval_s[@]}" "$ckpt/big-length-0.safetensors"
bad "header length 150 MB" 1 "over the 100000000 bytes a safetensors header may have" -- "${eval_s[@]}" "$ckpt/big-length.safetensors"
# Weights that are not numbers.
bad "eval: a NaN weight" 1 "tensor 'embed.weight' holds nan" -- "${eval_s[@]}" "$ckpt/nan.safetensors"
bad "predict: an infinite weight" 1 "tensor 'embed.weight' holds inf" -- "$attograd" predict sentiment --checkpoint "$ckpt/inf.safetensors" "a good film"
bad "resume: a NaN weight" 1 "holds nan" -- "$attograd" train sentiment --resume "$(resume_from "$ckpt/nan.safetensors")" --epochs 3 --out "$out" --quiet
bad "eval squares: a NaN weight" 1 "holds nan" -- "$attograd" eval squares --checkpoint "$ckpt/nan-squares.safetensors"
bad "sample: an infinite weight" 1 "holds inf" -- "$attograd" sample --checkpoint "$ckpt/inf-charlm.safetensors" --tokens 3
# Sizes in the config: checked against the stored tensors before the memory is spent.
bad "squares config: 200,000 heads" 1 "larger model than the tensors the file holds" -- "$attograd" eval squares --checkpoint "$ckpt/heads-200000.safetensors"
bad "squares config: d_model 2^62" 1 "more elements than a tensor can hold" -- "$attograd" eval squares --checkpoint "$ckpt/d-model-2e62.safetensors"
bad "squares config: 100,000 layers" 1 "larger model than the tensors the file holds" -- "$attograd" eval squares --checkpoint "$ckpt/layers-100000.safetensors"
bad "sentiment config: dim 2^62" 1 "more elements than a tensor can hold" -- "${eval_s[@]}" "$ckpt/dim-2e62.safetensors"
bad "sentiment config: dim a string" 1 "model settings (dim, heads, tokenizer) are malformed: type must be number" -- "${eval_s[@]}" "$ckpt/dim-string.safetensors"
bad "sentiment config: tokenizer an object" 1 "are malformed" -- "${eval_s[@]}" "$ckpt/vocabulary-object.safetensors"
bad "charlm config: n_embd 2^62" 1 "model sizes out of range" -- "$attograd" sample --checkpoint "$ckpt/n-embd-2e62.safetensors" --tokens 3
clean "sentiment config: dim a string" -- "${eval_s[@]}" "$ckpt/dim-string.safetensors"
clean "sentiment config: tokenizer an object" -- "${eval_s[@]}" "$ckpt/vocabulary-object.safetensors"
clean "empty checkpoint name" -- "${eval_s[@]}" ""

echo "== gradcheck"
grad=("$attograd" gradcheck --op)
bad "sum_keepdim 3x6148914691236517206 (wraps)" 1 "more elements than a tensor can hold" -- "${grad[@]}" sum_keepdim --shapes 3x6148914691236517206
bad "matmul with one shape" 1 "gradcheck matmul: got 1 input shape(s), expected 2" -- "${grad[@]}" matmul --shapes 4x5
bad "matmul with one shape, second order" 1 "got 1 input shape(s), expected 2" -- "${grad[@]}" matmul --shapes 4x5 --second-order
bad "add with three shapes" 1 "gradcheck add: got 3 input shape(s), expected 2" -- "${grad[@]}" add --shapes 2x3,2x3,2x3
bad "max 30x30: more distinct values than fit" 1 "cannot draw 900 values at least 0.01 apart" -- "${grad[@]}" max --shapes 30x30
bad "matmul 200x200 twice: too many elements" 1 "more than 10000 elements" -- "${grad[@]}" matmul --shapes 200x200,200x200
bad "a size past int64" 1 "expected sizes separated by 'x'" -- "${grad[@]}" sum --shapes 99999999999999999999
bad "a negative size" 1 "expected sizes separated by 'x'" -- "${grad[@]}" softmax --shapes 3x-1
bad "matmul of mismatched shapes" 1 "matmul: inner dimensions differ" -- "${grad[@]}" matmul --shapes 4x5,6x7
bad "max of an empty dimension" 1 "cannot reduce an empty dimension" -- "${grad[@]}" max --shapes 2x0
bad "no such op" 1 "no op named 'nosuch'" -- "${grad[@]}" nosuch
bad "index_select with scalar shapes (read past them)" 1 "do not have the numbers of dims of its registered shape sets" -- "${grad[@]}" index_select --shapes scalar,scalar
bad "cross_entropy with scalar shapes" 1 "do not have the numbers of dims" -- "${grad[@]}" cross_entropy --shapes scalar,scalar
bad "embedding_backward at other sizes (wrote out of bounds)" 1 "index_add_zeros: the gradient has shape (5,3), expected (7,3)" -- "${grad[@]}" embedding_backward --shapes 5x3,7
bad "max 20x20 (once a hang) passes" 0 "1 rows, 1 passed" -- "${grad[@]}" max --shapes 20x20
bad "matmul second order at a given shape passes" 0 "1 rows, 1 passed" -- "${grad[@]}" matmul --shapes 4x5,5x6 --second-order

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
