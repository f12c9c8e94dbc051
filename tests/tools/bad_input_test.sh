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
quietly() { "$@" >/dev/null 2>&1; }

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
# Every file under the work folder but scratch/ (where cases that succeed write): OUT, the
# reference runs, the checkpoints and data files the cases read.
scratch="$work/scratch"
# Files' contents, but only size and time for the huge ones (hashing the 1 GB case file per case
# would take the test past its time limit).
fingerprint() {
  (cd "$work" && find . -path ./scratch -prune -o -type f -size -10485760c -print | sort | xargs -d '\n' sha256sum &&
    find . -path ./scratch -prune -o -type f -size +10485759c -printf '%p %s %T@\n' | sort)
}

# bad NAME EXIT MESSAGE_PART -- COMMAND...: the exit code, the message, no file changed (OUT, the
# inputs, the other runs), within 60 s.
bad() {
  local name="$1" expected="$2" part="$3" before
  shift 4
  cases=$((cases + 1))
  before="$(fingerprint)"
  check "$name" "$expected" "$part" -- timeout 60 "$@"
  if grep -qE 'json\.exception|filesystem error|bad_alloc|basic_string|error: : |^: ' <<<"$last_output"; then
    echo "NOT OK $name: a library's text instead of a message: $last_output"
    failures=$((failures + 1))
  fi
  if [ "$(fingerprint)" != "$before" ]; then
    echo "NOT OK $name: changed files: $(diff <(echo "$before") <(fingerprint) | grep '^[<>]' | tr '\n' ' ')"
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
edit "$good/last.safetensors" "$ckpt/task-7.safetensors" config task 7
edit "$squares/last.safetensors" "$ckpt/squares-task-7.safetensors" config task 7
edit "$charlm/last.safetensors" "$ckpt/charlm-task-7.safetensors" config task 7
edit "$good/last.safetensors" "$ckpt/dim-string-64.safetensors" config dim '"64"'
edit "$good/last.safetensors" "$ckpt/dim-1e300.safetensors" config dim 1e300
edit "$good/last.safetensors" "$ckpt/dropout-string.safetensors" config dropout '"0.1"'
edit "$squares/last.safetensors" "$ckpt/squares-d-model-float.safetensors" config d_model 16.5
edit "$charlm/last.safetensors" "$ckpt/charlm-bias-string.safetensors" config bias '"yes"'
edit "$charlm/last.safetensors" "$ckpt/charlm-n-head-2e64.safetensors" config n_head 18446744073709551615
edit "$charlm/last.safetensors" "$ckpt/charlm-data-missing.safetensors" config data '"/nonexistent/moby.txt"'
# Model files (`export`, bf16) of the good run and the charlm run, and hostile copies of them.
"$attograd" export --checkpoint "$good/best.safetensors" --out "$ckpt/model.bf16" --dtype bf16 >/dev/null
"$attograd" export --checkpoint "$charlm/best.safetensors" --out "$ckpt/charlm-model.bf16" --dtype bf16 >/dev/null
[ -s "$ckpt/model.bf16" ] && [ -s "$ckpt/charlm-model.bf16" ] || { echo "NOT OK setup: no model files"; exit 1; }
edit "$ckpt/model.bf16" "$ckpt/model-nan.safetensors" nan
edit "$ckpt/charlm-model.bf16" "$ckpt/charlm-model-inf.safetensors" inf
edit "$ckpt/model.bf16" "$ckpt/model-shape.safetensors" shape
edit "$ckpt/model.bf16" "$ckpt/model-claims-f32.safetensors" claim-dtype F32
edit "$ckpt/model.bf16" "$ckpt/model-task-7.safetensors" config task 7
head -c -7 "$ckpt/model.bf16" >"$ckpt/model-truncated.safetensors"
# A 1 GB file (sparse: no disk) whose header length is 0, one whose length is 150 MB.
cp "$ckpt/length-0.safetensors" "$ckpt/big-length-0.safetensors" && truncate -s 1G "$ckpt/big-length-0.safetensors"
edit "$good/last.safetensors" "$ckpt/big-length.safetensors" header-length 150000000
truncate -s 200M "$ckpt/big-length.safetensors"
resume_from() {  # resume_from CHECKPOINT: a run folder holding it as last.safetensors (and a good best)
  local run="$work/resume-$(basename "$1" .safetensors)"
  mkdir -p "$run" && cp "$1" "$run/last.safetensors" && cp "$good/best.safetensors" "$run/" && echo "$run"
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
bad "resume: multihead run with --heads 0" 1 "the checkpoint's model is \"multihead\"" -- "$attograd" train sentiment --heads 0 --epochs 2 --resume "$heads" --out "$out" --quiet
bad "resume: squares selfattn as transformer" 1 "the checkpoint's model is \"selfattn\"" -- "$attograd" train squares --model transformer --resume "$squares" --out "$out" --quiet
bad "resume: other --dim" 1 "the checkpoint's dim is 16, this run's is 8 (set by --dim)" -- "$attograd" train sentiment --dim 8 --resume "$good" --out "$out" --quiet
bad "resume: folder without last.safetensors" 1 "cannot open" -- "$attograd" train sentiment --resume "$ckpt" --out "$out" --quiet
mkdir -p "$work/corrupt" && cp "$ckpt/flipped-data.safetensors" "$work/corrupt/last.safetensors"
bad "resume: corrupt last.safetensors" 1 "corrupt" -- "$attograd" train sentiment --resume "$work/corrupt" --out "$out" --quiet
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
bad "sentiment config: dim a string" 1 "dim-string.safetensors: the checkpoint's config has \"dim\": \"sixteen\", expected a whole number" -- "${eval_s[@]}" "$ckpt/dim-string.safetensors"
bad "sentiment config: tokenizer an object" 1 "the checkpoint's config has \"tokenizer\": {\"a\":1}, expected a string" -- "${eval_s[@]}" "$ckpt/vocabulary-object.safetensors"
bad "charlm config: n_embd 2^62" 1 "model sizes out of range" -- "$attograd" sample --checkpoint "$ckpt/n-embd-2e62.safetensors" --tokens 3
# Config values of the wrong type or range: the file, the key and the value, not the JSON library's text.
bad "sentiment config: task 7" 1 "task-7.safetensors: the checkpoint's config has \"task\": 7, expected a string" -- "${eval_s[@]}" "$ckpt/task-7.safetensors"
bad "squares config: task 7" 1 "the checkpoint's config has \"task\": 7, expected a string" -- "$attograd" eval squares --checkpoint "$ckpt/squares-task-7.safetensors"
bad "charlm config: task 7" 1 "the checkpoint's config has \"task\": 7, expected a string" -- "$attograd" sample --checkpoint "$ckpt/charlm-task-7.safetensors" --tokens 3
bad "sentiment config: dim \"64\"" 1 "dim-string-64.safetensors: the checkpoint's config has \"dim\": \"64\", expected a whole number" -- "${eval_s[@]}" "$ckpt/dim-string-64.safetensors"
bad "sentiment config: dim 1e300" 1 "the checkpoint's config has \"dim\": 1e+300, expected a whole number" -- "${eval_s[@]}" "$ckpt/dim-1e300.safetensors"
bad "sentiment config: dropout a string" 1 "has \"dropout\": \"0.1\", expected a finite number" -- "$attograd" predict sentiment --checkpoint "$ckpt/dropout-string.safetensors" "a film"
bad "squares config: d_model 16.5" 1 "has \"d_model\": 16.5, expected a whole number" -- "$attograd" eval squares --checkpoint "$ckpt/squares-d-model-float.safetensors"
bad "charlm config: bias a string" 1 "has \"bias\": \"yes\", expected true or false" -- "$attograd" sample --checkpoint "$ckpt/charlm-bias-string.safetensors" --tokens 3
bad "charlm config: n_head 2^64 - 1" 1 "has \"n_head\": 18446744073709551615, expected a whole number" -- "$attograd" sample --checkpoint "$ckpt/charlm-n-head-2e64.safetensors" --tokens 3
bad "eval charlm: the checkpoint's data path is gone" 1 "/nonexistent/moby.txt: cannot open the data file: no such file (the data path is the one the checkpoint $ckpt/charlm-data-missing.safetensors was trained on; --data FILE evaluates on another text)" -- "$attograd" eval charlm --checkpoint "$ckpt/charlm-data-missing.safetensors"
# Model files are checked as checkpoints are, naming the file and the tensor.
bad "eval: a NaN in a model file's bf16 tensor" 1 "model-nan.safetensors: tensor 'embed.weight' holds nan" -- "${eval_s[@]}" "$ckpt/model-nan.safetensors"
bad "sample: an infinity in a model file's bf16 tensor" 1 "charlm-model-inf.safetensors: tensor 'transformer.wte.weight' holds inf" -- "$attograd" sample --checkpoint "$ckpt/charlm-model-inf.safetensors" --tokens 3
bad "predict: a model file's tensor of the wrong shape" 1 "'embed.weight' has shape (110,16) bf16, the model expects (109,16) f32" -- "$attograd" predict sentiment --checkpoint "$ckpt/model-shape.safetensors" "a film"
bad "a model file's header claiming F32 for bf16 bytes" 1 "model-claims-f32.safetensors: tensor 'embed.weight'" -- "${eval_s[@]}" "$ckpt/model-claims-f32.safetensors"
bad "a truncated model file" 1 "the file is truncated: its tensors need" -- "${eval_s[@]}" "$ckpt/model-truncated.safetensors"
bad "model file config: task 7" 1 "model-task-7.safetensors: the checkpoint's config has \"task\": 7, expected a string" -- "${eval_s[@]}" "$ckpt/model-task-7.safetensors"
bad "resume: a model file" 1 "last.safetensors is a model file (exported, no optimizer state); --resume needs a run folder's last.safetensors" -- "$attograd" train sentiment --resume "$(resume_from "$ckpt/model.bf16")" --epochs 3 --out "$out" --quiet
# export reads a checkpoint as eval does, and writes nothing when it refuses.
export_good=("$attograd" export --out "$scratch/model.safetensors" --checkpoint)
bad "export: missing checkpoint" 1 "cannot open" -- "${export_good[@]}" "$ckpt/none.safetensors"
bad "export: bit flipped in the data" 1 "corrupt" -- "${export_good[@]}" "$ckpt/flipped-data.safetensors"
bad "export: a NaN weight" 1 "nan.safetensors: tensor 'embed.weight' holds nan" -- "${export_good[@]}" "$ckpt/nan.safetensors"
bad "export: config task 7" 1 "has \"task\": 7, expected a string" -- "${export_good[@]}" "$ckpt/task-7.safetensors"
bad "export: a model file" 1 "model.bf16: is a model file already" -- "${export_good[@]}" "$ckpt/model.bf16"
bad "export: --out is the checkpoint" 1 "is the same file as $good/best.safetensors" -- "$attograd" export --checkpoint "$good/best.safetensors" --out "$good/best.safetensors"
clean "sentiment config: dim a string" -- "${eval_s[@]}" "$ckpt/dim-string.safetensors"
clean "sentiment config: tokenizer an object" -- "${eval_s[@]}" "$ckpt/vocabulary-object.safetensors"
clean "empty checkpoint name" -- "${eval_s[@]}" ""

echo "== gradcheck"
grad=("$attograd" gradcheck --op)
bad "sum_keepdim 3x6148914691236517206 (wraps)" 2 "more elements than a tensor can hold" -- "${grad[@]}" sum_keepdim --shapes 3x6148914691236517206
bad "matmul with one shape" 2 "gradcheck matmul: got 1 input shape(s), expected 2" -- "${grad[@]}" matmul --shapes 4x5
bad "matmul with one shape, second order" 2 "got 1 input shape(s), expected 2" -- "${grad[@]}" matmul --shapes 4x5 --second-order
bad "add with three shapes" 2 "gradcheck add: got 3 input shape(s), expected 2" -- "${grad[@]}" add --shapes 2x3,2x3,2x3
bad "max 30x30: more distinct values than fit" 1 "cannot draw 900 values at least 0.01 apart" -- "${grad[@]}" max --shapes 30x30
bad "matmul 200x200 twice: too many elements" 2 "more than 10000 elements" -- "${grad[@]}" matmul --shapes 200x200,200x200
bad "a size past int64" 2 "expected sizes separated by 'x'" -- "${grad[@]}" sum --shapes 99999999999999999999
bad "a negative size" 2 "expected sizes separated by 'x'" -- "${grad[@]}" softmax --shapes 3x-1
bad "matmul of mismatched shapes" 1 "matmul: inner dimensions differ" -- "${grad[@]}" matmul --shapes 4x5,6x7
bad "max of an empty dimension" 1 "cannot reduce an empty dimension" -- "${grad[@]}" max --shapes 2x0
bad "no such op" 2 "no op named 'nosuch'" -- "${grad[@]}" nosuch
bad "index_select with scalar shapes (read past them)" 2 "do not have the numbers of dims of its registered shape sets" -- "${grad[@]}" index_select --shapes scalar,scalar
bad "cross_entropy with scalar shapes" 2 "do not have the numbers of dims" -- "${grad[@]}" cross_entropy --shapes scalar,scalar
bad "embedding_backward at other sizes (wrote out of bounds)" 1 "index_add_zeros: the gradient has shape (5,3), expected (7,3)" -- "${grad[@]}" embedding_backward --shapes 5x3,7
bad "max 20x20 (once a hang) passes" 0 "1 rows, 1 passed" -- "${grad[@]}" max --shapes 20x20
bad "matmul second order at a given shape passes" 0 "1 rows, 1 passed" -- "${grad[@]}" matmul --shapes 4x5,5x6 --second-order

# Usage errors, exit 2 before any work: malformed or unfitting shapes, an unknown op, contradicting flags.
bad "gradcheck --shapes 4x" 2 "shape '4x': expected sizes separated by 'x'" -- "${grad[@]}" matmul --shapes 4x
bad "gradcheck --shapes '' (not every shape set)" 2 "--shapes: expected input shapes such as 4x5,5, got ''" -- "${grad[@]}" sum --shapes ""
bad "bench attention --shape 0,6,16,2" 2 "--shape: expected B,T,d,h with positive sizes and h dividing d, got '0,6,16,2'" -- "$attograd" bench attention --shape 0,6,16,2
bad "bench attention --shape 1,6,16,3 (h not dividing d)" 2 "h dividing d" -- "$attograd" bench attention --shape 1,6,16,3
bad "bench transformer --shape --kernel: do not apply" 2 "--shape and --kernel: apply to \`bench attention\` only" -- "$attograd" bench transformer --shape 1,2,3,4 --kernel streaming
bad "bench attention --profile: does not apply" 2 "--profile: applies to \`bench transformer\` only" -- "$attograd" bench attention --profile 2
bad "bench attention --parts: does not apply" 2 "--parts: applies to \`bench transformer\` only" -- "$attograd" bench attention --parts 2
bad "bench transformer --parts 0: out of range" 2 "--parts" -- "$attograd" bench transformer --parts 0
bad "bench cpus --precision: does not apply" 2 "--precision: does not apply to \`bench cpus\`" -- "$attograd" bench cpus --precision bf16
bad "bench cpus --iters past 100 rounds" 2 "--iters: bench cpus takes at most 100 rounds, got 101" -- "$attograd" bench cpus --iters 101
bad "bench cpus on one CPU" 1 "bench cpus: this process may run on 1 CPU(s); the round trip needs two" -- taskset -c 0 "$attograd" bench cpus --iters 1
bad "train --profile 0" 2 "--profile: expected a decimal whole number in [1, 1000000], got '0'" -- "$attograd" train sentiment --epochs 1 --profile 0 --out "$out" --quiet
bad "train --profile x" 2 "--profile" -- "$attograd" train sentiment --epochs 1 --profile x --out "$out" --quiet
bad "train --profile-after x" 2 "--profile-after" -- "$attograd" train sentiment --epochs 1 --profile 2 --profile-after x --out "$out" --quiet
bad "train charlm --heads 3 --width 128" 2 "--heads 3 does not divide --width 128" -- "$attograd" train charlm --heads 3 --width 128 --out "$out" --quiet
bad "train charlm --min-lr above --lr" 2 "--min-lr 5 is above --lr 0.001" -- "$attograd" train charlm --min-lr 5 --lr 0.001 --out "$out" --quiet
bad "train g2p --min-lr above --lr" 2 "--min-lr 0.5 is above --lr 0.001" -- "$attograd" train g2p --min-lr 0.5 --lr 0.001 --out "$out" --quiet
bad "train g2p --min-lr above the default --lr" 2 "--min-lr 0.01 is above --lr 0.001" -- "$attograd" train g2p --min-lr 0.01 --out "$out" --quiet
bad "train sentiment --heads 3 (dim 16)" 2 "--heads 3 does not divide --dim 16" -- "$attograd" train sentiment --heads 3 --out "$out" --quiet
bad "train squares transformer --heads 3" 2 "--heads 3 does not divide --d-model 16" -- "$attograd" train squares --model transformer --heads 3 --out "$out" --quiet
bad "graph sentiment --heads 3" 2 "--heads 3 does not divide --dim 16" -- "$attograd" graph sentiment --heads 3
bad "graph squares transformer --heads 3" 2 "--heads 3 does not divide the transformer's d_model 16" -- "$attograd" graph squares --model transformer --heads 3

echo "== flags"
train_s=("$attograd" train sentiment --out "$out" --quiet)
bad "unknown flag" 2 "--bogus" -- "${train_s[@]}" --bogus
bad "--epochs -1" 2 "--epochs" -- "${train_s[@]}" --epochs -1
bad "--epochs 0" 2 "--epochs" -- "${train_s[@]}" --epochs 0
bad "--epochs abc" 2 "--epochs" -- "${train_s[@]}" --epochs abc
bad "--lr nan" 2 "--lr" -- "${train_s[@]}" --lr nan
bad "--lr inf" 2 "--lr" -- "${train_s[@]}" --lr inf
bad "--lr -1" 2 "--lr" -- "${train_s[@]}" --lr -1
bad "--epochs 010 (octal-looking)" 2 "--epochs: expected a decimal whole number in [1, 1000000], got '010' (a leading 0 reads as octal in C and shells; write 10)" -- "${train_s[@]}" --epochs 010
bad "--epochs 0x10" 2 "--epochs: expected a decimal whole number" -- "${train_s[@]}" --epochs 0x10
bad "--epochs 1e3" 2 "--epochs: expected a decimal whole number" -- "${train_s[@]}" --epochs 1e3
bad "--dim 016" 2 "--dim: expected a decimal whole number in [1, 4096], got '016'" -- "${train_s[@]}" --dim 016
bad "--seed -1" 2 "--seed: expected a seed: a decimal whole number in [0, 2^64 - 1 = 18446744073709551615], got '-1'" -- "${train_s[@]}" --seed -1
bad "--seed 2^64" 2 "got '18446744073709551616'" -- "${train_s[@]}" --seed 18446744073709551616
bad "--seed 007" 2 "write 7" -- "${train_s[@]}" --seed 007
bad "eval squares --data-seed 2^64+1" 2 "--data-seed: expected a seed" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --data-seed 18446744073709551617
bad "sample --seed -5" 2 "--seed: expected a seed" -- "$attograd" sample --checkpoint "$squares/last.safetensors" --seed -5
bad "--lr 0x1p-3 (hex float)" 2 "--lr: expected a finite decimal number > 0, got '0x1p-3'" -- "${train_s[@]}" --lr 0x1p-3
bad "--lr 1e400 (overflows)" 2 "--lr: expected a finite decimal number > 0, got '1e400'" -- "${train_s[@]}" --lr 1e400
bad "--weight-decay 2" 2 "--weight-decay: expected a finite decimal number in [0, 1], got '2'" -- "${train_s[@]}" --weight-decay 2
bad "--threads 08" 2 "--threads: expected a decimal whole number in [1, 1024], got '08'" -- "$attograd" --threads 08 train sentiment --out "$out"
bad "--out \"\"" 2 "--out: expected a path, got an empty string" -- "$attograd" train sentiment --out "" --quiet
bad "--data \"\"" 2 "--data: expected a path, got an empty string" -- "${train_s[@]}" --data ""
bad "--resume \"\"" 2 "--resume: expected a path, got an empty string" -- "${train_s[@]}" --resume ""
bad "eval --checkpoint \"\"" 2 "--checkpoint: expected a path, got an empty string" -- "$attograd" eval squares --checkpoint ""
bad "--out not UTF-8" 2 "run\\xff'" -- "$attograd" train sentiment --out "$work/run"$'\xff' --quiet
bad "graph --heads 010" 2 "--heads: expected a decimal whole number" -- "$attograd" graph squares --heads 010
bad "graph --tangent of no parameter" 1 "--tangent nope: the step has no parameter of that name" -- "$attograd" graph walkthrough --format html --tangent nope --out "$out/t.html"
bad "graph --tangent without html" 2 "add --format html" -- "$attograd" graph squares --tangent encoder.self_attn_heads.linear_out.weight
bad "graph --tangent-seed negative" 2 "--tangent-seed" -- "$attograd" graph walkthrough --format html --tangent W_query --tangent-seed -1
bad "predict g2p --format xml" 2 "--format" -- "$attograd" predict g2p --checkpoint "$good/best.safetensors" --format xml word
bad "export --dtype f16" 2 "--dtype: f16 not in {f32,bf16}" -- "$attograd" export --checkpoint "$good/best.safetensors" --out "$scratch/m.safetensors" --dtype f16
bad "export --out \"\"" 2 "--out: expected a path, got an empty string" -- "$attograd" export --checkpoint "$good/best.safetensors" --out ""
bad "export without --out" 2 "--out is required" -- "$attograd" export --checkpoint "$good/best.safetensors"
bad "charlm --iters 1_000" 2 "--iters: expected a decimal whole number" -- "$attograd" train charlm --iters 1_000 --out "$out"
cases=$((cases + 1))
check "--lr 1e-320 (subnormal, > 0) is accepted" 0 "test sentences right" -- "$attograd" train sentiment --epochs 1 --lr 1e-320 --out "$scratch/subnormal-lr" --quiet
bad "--batch-size 0" 2 "--batch-size" -- "${train_s[@]}" --batch-size 0
bad "--threads 0" 2 "--threads" -- "$attograd" --threads 0 train sentiment --out "$out"
bad "--threads 100000" 2 "--threads" -- "$attograd" --threads 100000 train sentiment --out "$out"
bad "--dim 0" 2 "--dim" -- "${train_s[@]}" --dim 0
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
bad "non-UTF-8 text" 1 "latin.tsv:2: invalid UTF-8 at byte offset 18 (byte 0xff)" -- "${train_s[@]}" --data "$data/latin.tsv"
bad "a 1 MB line" 1 "huge.tsv:1: the text has more than the 1000 words" -- "${train_s[@]}" --data "$data/huge.tsv"
bad "eval: a 1 MB line" 1 "more than the 1000" -- "$attograd" eval sentiment --checkpoint "$good/last.safetensors" --data "$data/huge.tsv"
bad "predict: a 1 MB text" 1 "more than the 1000" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/huge.tsv"
bad "predict --file a directory" 2 "directory" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data"
# Text as people have it: CR-only, CRLF and LF lines, a byte order mark, are the same examples.
printf '1\tgood film\n0\tbad film\n1\tgreat acting\n0\tawful plot\n' >"$data/lf.tsv"
tr '\n' '\r' <"$data/lf.tsv" >"$data/cr.tsv"
sed 's/$/\r/' "$data/lf.tsv" >"$data/crlf.tsv"
{ printf '\xef\xbb\xbf'; cat "$data/crlf.tsv"; } >"$data/bom.tsv"
eval_good=("$attograd" eval sentiment --checkpoint "$good/last.safetensors" --data)
lf_result="$("${eval_good[@]}" "$data/lf.tsv" 2>&1 | sed 's/ on .*//')"
expect "the LF file's result: 4 examples ($lf_result)" grep -q "of 4)" <<<"$lf_result"
for ending in cr crlf bom; do
  cases=$((cases + 1))
  check "$ending.tsv: 4 examples, as the LF file" 0 "$lf_result on $data/$ending.tsv" -- "${eval_good[@]}" "$data/$ending.tsv"
done
cases=$((cases + 1))
check "train on a CR-only file: 4 examples, not 1" 0 "test sentences right" -- "$attograd" train sentiment --data "$data/cr.tsv" --epochs 1 --batch-size 4 --out "$scratch/cr" --quiet
expect "CR-only file's run saw 4 examples" grep -q '"vocab_size": 9' "$scratch/cr/config.json"
printf 'good film\rbad film\rI hated it' >"$data/texts-cr.txt"
cases=$((cases + 1))
check "predict --file with CR lines: 3 texts" 0 "	I hated it" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/texts-cr.txt"
printf 'I loved this film\n' >"$data/text.txt"
{ printf '\xef\xbb\xbf'; cat "$data/text.txt"; } >"$data/text-bom.txt"
plain_prediction="$("$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/text.txt")"
expect "the prediction without a BOM ($plain_prediction)" grep -q "	I loved this film" <<<"$plain_prediction"
cases=$((cases + 1))
check "predict --file with a BOM: the same prediction" 0 "$plain_prediction" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/text-bom.txt"
printf '1\tgood film\n1\x00x\tbad film\n' >"$data/nul.tsv"
printf '1\tgood film\n\x1b[31m1\tbad film\n' >"$data/escape.tsv"
printf 'fine\nalso fine\nnot \xc3\x28 fine\n' >"$data/texts-latin.txt"
printf '\xef\xbb\xbf1\tgood\r\n0\tbad \xe2\x82 film\r\n' >"$data/bom-latin.tsv"
bad "NUL in a label: shown, not cutting the message" 1 "nul.tsv:2: label must be 0 or 1, got '1\\x00x'" -- "${train_s[@]}" --data "$data/nul.tsv"
bad "ESC in a label: shown as \\x1b" 1 "escape.tsv:2: label must be 0 or 1, got '\\x1b[31m1'" -- "${train_s[@]}" --data "$data/escape.tsv"
bad "predict --file: invalid UTF-8 on line 3" 1 "texts-latin.txt:3: invalid UTF-8 at byte offset 19 (byte 0xc3)" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/texts-latin.txt"
bad "predict: invalid UTF-8 in a text argument" 1 "text 2:1: invalid UTF-8 at byte offset 4" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" "fine" $'bad \xff'
bad "invalid UTF-8 after a BOM and CRLF: line and file offset" 1 "bom-latin.tsv:2: invalid UTF-8 at byte offset 17 (byte 0xe2)" -- "${train_s[@]}" --data "$data/bom-latin.tsv"
printf '\r\r\n\r' >"$data/blank-cr.tsv"
bad "only blank CR lines" 1 "blank-cr.tsv: no examples" -- "${train_s[@]}" --data "$data/blank-cr.tsv"
bad "charlm: invalid UTF-8 names the line" 1 "texts-latin.txt:3: invalid UTF-8" -- "$attograd" train charlm --data "$data/texts-latin.txt" --out "$out" --quiet
# charlm reads CRLF and a BOM as plain LF text: the same characters and vocabulary.
head -c 6000 /dev/urandom | base64 -w 60 >"$data/chars.txt"
{ printf '\xef\xbb\xbf'; sed 's/$/\r/' "$data/chars.txt"; } >"$data/chars-crlf.txt"
charlm_tiny=(train charlm --block-size 8 --layers 1 --heads 2 --width 8 --batch-size 4 --quiet)
lf_chars="$("$attograd" "${charlm_tiny[@]}" --iters 2 --eval-interval 2 --data "$data/chars.txt" --out "$scratch/chars" 2>&1 | grep -o 'characters, vocabulary [0-9]*')"
expect "the LF text's characters ($lf_chars)" test -n "$lf_chars"
cases=$((cases + 1))
check "charlm: CRLF + BOM text reads as the LF text" 0 "$lf_chars" -- "$attograd" "${charlm_tiny[@]}" --iters 2 --eval-interval 2 --data "$data/chars-crlf.txt" --out "$scratch/chars-crlf"
# --explain of a text with control characters: the SVG is well-formed XML.
cases=$((cases + 1))
check "--explain with control characters in the text" 0 "wrote" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" $'bad \x01\x02 film\x1b & <co>' --explain "$scratch/explain.svg"
expect "--explain SVG is well-formed XML" python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$scratch/explain.svg"
# File errors in plain words, not the C++ library's ("filesystem error: status: …").
ln -s loop-b "$data/loop-a.safetensors" && ln -s loop-a.safetensors "$data/loop-b"
bad "checkpoint is a symlink loop" 1 "loop-a.safetensors: cannot open for reading: Too many levels of symbolic links" -- "${eval_s[@]}" "$data/loop-a.safetensors"
bad "checkpoint name too long" 1 "cannot open for reading: File name too long" -- "${eval_s[@]}" "$data/$(printf 'a%.0s' $(seq 300))"
bad "data file is a symlink loop" 1 "loop-b: cannot open the data file" -- "$attograd" train charlm --data "$data/loop-b" --out "$out" --quiet

echo "== output folders"
echo "a file" >"$work/afile"
bad "--out below a regular file" 1 "afile/run: cannot create the folder" -- "$attograd" train sentiment --epochs 1 --out "$work/afile/run" --quiet
bad "--out is a regular file" 1 "afile: exists and is not a folder" -- "$attograd" train sentiment --epochs 1 --out "$work/afile" --quiet
bad "--explain below a regular file" 1 "afile" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" "hi" --explain "$work/afile/x.svg"
bad "--predictions below a regular file" 1 "afile" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions "$work/afile/p.safetensors"
bad "export: --out below a regular file" 1 "afile" -- "$attograd" export --checkpoint "$good/best.safetensors" --out "$work/afile/m.safetensors"
bad "--predictions is the checkpoint it reads" 1 "$squares/last.safetensors: is the same file as $squares/last.safetensors, an input of this command" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions "$squares/last.safetensors"
bad "--predictions is the checkpoint by another path" 1 "which writing would destroy" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions "$squares/../$(basename "$squares")/./last.safetensors"
ln -s "$squares/best.safetensors" "$work/link.safetensors"
bad "--predictions is a symlink to the checkpoint" 1 "$work/link.safetensors: is the same file as $squares/best.safetensors" -- "$attograd" eval squares --checkpoint "$squares/best.safetensors" --n 4 --predictions "$work/link.safetensors"
bad "--predictions is a folder" 1 "$work/ckpt" -- "$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions "$work/ckpt"
bad "--explain is the checkpoint" 1 "$good/last.safetensors: is the same file as $good/last.safetensors" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" "hi" --explain "$good/last.safetensors"
bad "--explain is the --file it reads" 1 "$data/text.txt: is the same file as $data/text.txt" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$data/text.txt" --explain "$data/text.txt"
bad "--out holds a squares run: sentiment refuses" 1 "holds another run (its config.json's task is squares)" -- "$attograd" train sentiment --epochs 1 --out "$squares" --quiet
bad "--out holds a sentiment run: squares refuses" 1 "its config.json's task is sentiment" -- "$attograd" train squares --epochs 1 --out "$out" --quiet
bad "--out holds a sentiment run: charlm refuses" 1 "a charlm run would overwrite its files" -- "$attograd" "${charlm_tiny[@]}" --iters 2 --data "$data/chars.txt" --out "$out"
# --out must be empty or an attograd run: the user's own files are never overwritten.
mkdir -p "$work/users"
echo "epoch,my_loss" >"$work/users/metrics.csv" && echo "<svg/>" >"$work/users/losses.svg"
cp "$squares/last.safetensors" "$work/users/last.safetensors"
bad "--out holds the user's files, no config.json: refused, listed" 1 "--out $work/users: is not empty and holds no attograd run (no config.json): last.safetensors, losses.svg, metrics.csv" -- "$attograd" train sentiment --epochs 1 --out "$work/users" --quiet
bad "charlm --out holds the user's files: refused" 1 "holds no attograd run" -- "$attograd" "${charlm_tiny[@]}" --iters 2 --data "$data/chars.txt" --out "$work/users"
mkdir -p "$scratch/locked-only" && : >"$scratch/locked-only/.attograd.lock"
cases=$((cases + 1))
check "--out holding only a run's lock file: trains" 0 "test sentences right" -- "$attograd" train sentiment --epochs 1 --out "$scratch/locked-only" --quiet
mkdir -p "$work/theirs" && echo '{"name": "not ours"}' >"$work/theirs/config.json"
bad "--out holds someone else's config.json" 1 "task is (not attograd's)" -- "$attograd" train sentiment --epochs 1 --out "$work/theirs" --quiet
# A NaN loss in epoch 1 stops the run before its first checkpoint: config.json stays the old run's.
bad "a run diverging in epoch 1 leaves config.json as it was" 3 "training diverged" -- "${train_s[@]}" --epochs 2 --lr 1e30
bad "bad data leaves config.json as it was" 1 "notab.tsv:2" -- "${train_s[@]}" --epochs 2 --data "$data/notab.tsv"
# One run per folder: a second run into a folder another process holds is refused, naming it.
python3 -c 'import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); print(os.getpid(), flush=True); time.sleep(60)' "$out/.attograd.lock" >"$work/holder.pid" &
holder=$!
for _ in $(seq 100); do [ -s "$work/holder.pid" ] && break; sleep 0.05; done
bad "--out locked by another process: names its pid" 1 "--out $out: another run (pid $holder) is writing to this folder" -- "${train_s[@]}" --epochs 1
bad "--resume into a locked --out" 1 "another run (pid $holder)" -- "${train_s[@]}" --epochs 3 --resume "$out"
kill "$holder" && wait "$holder" 2>/dev/null
rm -f "$work/holder.pid"
"$attograd" train sentiment --epochs 100000 --out "$scratch/busy" --quiet >/dev/null 2>&1 &
busy=$!
for _ in $(seq 600); do [ -s "$scratch/busy/last.safetensors" ] && break; sleep 0.05; done
cases=$((cases + 1))
check "a second run into a running run's folder" 1 "another run (pid $busy)" -- "$attograd" train sentiment --epochs 1 --out "$scratch/busy" --quiet
kill -TERM "$busy" && wait "$busy"
cases=$((cases + 1))
check "the first run was not disturbed: it resumes" 0 "test sentences right" -- "$attograd" train sentiment --resume "$scratch/busy" --epochs "$(grep -c . "$scratch/busy/metrics.csv")" --quiet
# graph --format svg: dot's files are made exclusively beside --out, so a planted symlink under the
# old predictable names is not followed.
if command -v dot >/dev/null; then
  echo "precious" >"$work/victim.txt"
  mkdir -p "$scratch/graph"
  ln -s "$work/victim.txt" "$scratch/graph/g.svg.tmp"
  cases=$((cases + 1))
  check "graph --format svg with planted symlinks" 0 "wrote $scratch/graph/g.svg" -- "$attograd" graph squares --format svg --out "$scratch/graph/g.svg"
  expect "graph: the symlinks' target is untouched" grep -qx precious "$work/victim.txt"
  expect "graph: the drawing is an SVG" grep -q "<svg" "$scratch/graph/g.svg"
  expect "graph: no temporary files left" test "$(ls "$scratch/graph" | wc -l)" -eq 2
fi
[ "$(cat "$work/afile")" = "a file" ] && echo "OK the regular file in the way is intact" || { echo "NOT OK $work/afile changed"; failures=$((failures + 1)); }

echo "== divergence"
# A NaN validation loss is divergence too (exit 3); no checkpoint with a non-finite tensor is written;
# the last finite one stays and the message says which iteration it holds.
cases=$((cases + 1))
check "charlm --lr 1e6: exit 3 naming the last finite checkpoint" 3 "training diverged: the validation val_bpc is -nan after iteration 4; $scratch/diverged/last.safetensors keeps the last finite state, after iteration 2" -- "$attograd" train charlm --data "$work/text.txt" --lr 1e6 --iters 4 --eval-interval 2 --block-size 8 --layers 1 --heads 1 --width 8 --out "$scratch/diverged" --quiet
expect "the diverged run's last.safetensors loads (finite)" quietly "$attograd" eval charlm --checkpoint "$scratch/diverged/last.safetensors" --data "$work/text.txt"
expect "the diverged run's metrics stop at iteration 2" test "$(tail -n +2 "$scratch/diverged/metrics.csv" | wc -l)" -eq 1
printf 'the cat sat on the mat. QXZ!\n' >"$work/unknown.txt"
for _ in $(seq 10); do cat "$work/text.txt"; done >>"$work/unknown.txt"
bad "eval charlm --drop-unknown: says what it dropped" 0 "unknown.txt: --drop-unknown left out 4 of its" -- "$attograd" eval charlm --checkpoint "$charlm/last.safetensors" --data "$work/unknown.txt" --drop-unknown --split all

echo "== data digests"
# The cached corpora are checked against their pinned sha256 when read; a data file's digest is in
# config.json, so a file rewritten in place (same size, same characters) is noticed.
while IFS='|' read -r _ _ _ name sha; do
  expect "corpus.cpp pins $name as fetch_data.sh does" grep -q "{\"$name\", \"$sha\"}" "$here/../../tasks/common/corpus.cpp"
done < <(grep -oE '^  "[^"]+"' "$here/../../tools/fetch_data.sh" | tr -d '" ')
cache="${ATTOGRAD_DATA_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/attograd}"
if [ -s "$cache/uci-sentiment/amazon.json" ] && [ -s "$cache/moby-dick.txt" ]; then
  mkdir -p "$work/cache/uci-sentiment"
  cp "$cache/uci-sentiment/"*.json "$work/cache/uci-sentiment/"
  python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); json.dump(d[:100], open(sys.argv[1], "w"))' "$work/cache/uci-sentiment/amazon.json"
  head -c 60000 "$cache/moby-dick.txt" >"$work/cache/moby-dick.txt"
  bad "UCI: a damaged cached corpus is refused" 1 "amazon.json: the cached corpus has sha256" -- env ATTOGRAD_DATA_DIR="$work/cache" "$attograd" train sentiment --dataset uci --epochs 1 --out "$out" --quiet
  bad "charlm: a cut Moby-Dick is refused" 1 "moby-dick.txt: the cached corpus has sha256" -- env ATTOGRAD_DATA_DIR="$work/cache" "$attograd" train charlm --iters 2 --out "$out" --quiet
else
  echo "SKIP damaged corpus cases: the data cache is not filled (tools/fetch_data.sh)"
fi
sed 's/cat/dog/; s/dog ate/cat ate/' "$work/text.txt" >"$work/rewritten.txt"
cp "$work/text.txt" "$scratch/inplace.txt"
"$attograd" train charlm --data "$scratch/inplace.txt" --iters 2 --eval-interval 1 --block-size 8 --layers 1 --heads 1 --width 8 --out "$scratch/inplace" --quiet >/dev/null 2>&1
cp "$work/rewritten.txt" "$scratch/inplace.txt"
expect "the rewritten text has the same size" test "$(stat -c %s "$work/text.txt")" -eq "$(stat -c %s "$scratch/inplace.txt")"
cases=$((cases + 1))
check "charlm --resume: a data file rewritten in place is refused" 1 "cannot resume: the data $scratch/inplace.txt changed since the run began: its sha256 is \"$(sha256sum <"$scratch/inplace.txt" | cut -d' ' -f1)\", the run recorded \"$(sha256sum <"$work/text.txt" | cut -d' ' -f1)\"" -- "$attograd" train charlm --resume "$scratch/inplace" --iters 4 --quiet
cases=$((cases + 1))
check "eval charlm: says the data is not the run's" 0 "is not the data $scratch/inplace/last.safetensors was trained on" -- "$attograd" eval charlm --checkpoint "$scratch/inplace/last.safetensors"

echo "== memory"
# The estimated peak is printed before the first step; a run that cannot fit is refused before any work.
bad "charlm --batch-size 1000000 on a short text: more windows than it holds" 1 "--batch-size 1000000 is more windows than the training split holds (728 windows of --block-size 64" -- "$attograd" train charlm --data "$work/text.txt" --batch-size 1000000 --out "$scratch/huge-batch" --quiet
bad "charlm --batch-size 700 --max-memory 200: refused before the work, naming the setting" 1 "a training step takes" -- "$attograd" train charlm --data "$work/text.txt" --batch-size 700 --max-memory 200 --out "$scratch/huge-batch" --quiet
expect "... set by --batch-size 700" grep -q "set by --batch-size 700 x --block-size 64" <<<"$last_output"
/usr/bin/python3 -c 'import sys; sys.stdout.buffer.write("".join(chr(0x10000 + i) for i in range(200000)).encode())' >"$work/distinct.txt"
bad "charlm on a text of 200,000 distinct characters: the vocabulary's limit" 1 "200000 distinct characters, more than a charlm vocabulary's limit of 16384" -- "$attograd" train charlm --data "$work/distinct.txt" --out "$scratch/distinct" --quiet
cases=$((cases + 1))
check "squares --batch-size 1000: capped at the 128 squares, and says so" 0 "note: --batch-size 1000 is more than the 128 training examples: each step takes all 128" -- "$attograd" train squares --epochs 1 --batch-size 1000 --out "$scratch/capped" --quiet
bad "charlm, a model too large for --max-memory: refused while it is built" 1 "train charlm: the model (--width 1024, --layers 8, the text's" -- "$attograd" train charlm --data "$work/text.txt" --width 1024 --layers 8 --max-memory 200 --out "$scratch/big-model" --quiet
expect "... and nothing written" test ! -e "$scratch/big-model"
bad "squares, a model too large for --max-memory: refused while it is built" 1 "train squares: the model (--d-model 2048, --heads 2, --ff-units 32, --layers 64) is too large" -- "$attograd" train squares --model transformer --d-model 2048 --layers 64 --max-memory 100 --out "$scratch/big-model" --quiet
bad "sentiment, a model too large for --max-memory: refused while it is built" 1 "train sentiment: the model (--dim 4096, --heads 0, the vocabulary's" -- "$attograd" train sentiment --dataset uci --dim 4096 --max-memory 200 --out "$scratch/big-model" --quiet
expect "... and nothing written" test ! -e "$scratch/big-model"
bad "sentiment --max-memory 1: refused naming it" 1 "MB --max-memory allows" -- "$attograd" train sentiment --max-memory 1 --out "$out" --quiet
bad "--max-memory 0: a usage error" 2 "--max-memory" -- "$attograd" train squares --max-memory 0 --out "$out" --quiet
cases=$((cases + 1))
check "every train prints its estimate first" 0 "memory: estimated peak" -- "$attograd" train squares --epochs 1 --out "$scratch/memory" --quiet

echo "== output paths"
# Note [output paths] (engine/io.cpp): a regular file or a new name is replaced atomically,
# a symlink's target likewise, a character device or FIFO is streamed into and stays what it was,
# a folder, a block device or a dangling symlink is refused.
paths="$work/paths"
mkdir -p "$paths"
graph_dot=("$attograd" graph squares --format dot)
predictions=("$attograd" eval squares --checkpoint "$squares/last.safetensors" --n 4 --predictions)
explain=("$attograd" predict sentiment --checkpoint "$good/last.safetensors" "a fine film" --explain)
if mknod "$paths/null" c 1 3 2>/dev/null && echo probe >"$paths/null" 2>/dev/null; then
  bad "graph --out a device (mknod'd /dev/null)" 0 "wrote $paths/null" -- "${graph_dot[@]}" --out "$paths/null"
  bad "eval --predictions a device" 0 "MSE" -- "${predictions[@]}" "$paths/null"
  bad "predict --explain a device" 0 "wrote" -- "${explain[@]}" "$paths/null"
  expect "the device is still a character device" test -c "$paths/null"
else
  echo "SKIP device cases: mknod is not allowed here"
fi
if mknod "$paths/loop" b 7 0 2>/dev/null; then
  bad "graph --out a block device: refused, never opened" 1 "loop: is a block device" -- "${graph_dot[@]}" --out "$paths/loop"
  expect "the block device is still one" test -b "$paths/loop"
  rm -f "$paths/loop"
else
  echo "SKIP block device case: mknod is not allowed here"
fi
ln -s /proc/self/fd/1 "$paths/stdout"
bad "graph --out a symlink to /proc/self/fd/1: the graph on stdout" 0 "digraph autograd" -- "${graph_dot[@]}" --out "$paths/stdout"
bad "graph --out -: the graph on stdout" 0 "digraph autograd" -- "${graph_dot[@]}" --out -
expect "the symlink to /proc/self/fd/1 is still a symlink" test -L "$paths/stdout"
mkfifo "$paths/fifo"
bad "graph --out a FIFO without a reader: refused, no hang" 1 "fifo: is a FIFO that no process reads" -- "${graph_dot[@]}" --out "$paths/fifo"
cat "$paths/fifo" >"$scratch/from-fifo.dot" &
reader=$!
bad "graph --out a FIFO with a reader" 0 "wrote $paths/fifo" -- "${graph_dot[@]}" --out "$paths/fifo"
wait "$reader"
expect "the reader got the graph" grep -q "digraph autograd" "$scratch/from-fifo.dot"
expect "the FIFO is still a FIFO" test -p "$paths/fifo"
mkdir -p "$scratch/real"
ln -s "$scratch/real/p.safetensors" "$scratch/p-link.safetensors"
cases=$((cases + 1))
check "eval --predictions a symlink to a new file: made there" 0 "MSE" -- "${predictions[@]}" "$scratch/p-link.safetensors"
expect "the symlink stays, its target holds the predictions" test -L "$scratch/p-link.safetensors" -a -s "$scratch/real/p.safetensors"
ln -s "$paths/missing/p.safetensors" "$paths/dangling"
bad "--predictions a symlink into a missing folder: refused" 1 "dangling: is a symlink to $paths/missing/p.safetensors, whose folder does not exist" -- "${predictions[@]}" "$paths/dangling"
bad "--explain a folder: refused" 1 "$paths: is a folder" -- "${explain[@]}" "$paths"
ln -s "$paths" "$paths/folder-link"
bad "graph --out a symlink to a folder: refused" 1 "folder-link: is a folder" -- "${graph_dot[@]}" --out "$paths/folder-link"

echo "== outputs never replace inputs"
# Note [inputs are not outputs] (engine/io.h): no command writes over a file it reads, by any path (a
# hard link, a symlink, `..`), the data a checkpoint's config names included; the input stays as it was.
g2p_tiny=("$attograd" --threads 1 train g2p --quiet --d-model 16 --heads 2 --enc-layers 1 --dec-layers 1 --ff 32 --batch-size 16)
for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf; do
  for s in "" s er ing; do echo "$w$s"; done
done | bash "$here/reversal_pairs.sh" >"$work/pairs.tsv"
g2p_run="$work/g2p"
"${g2p_tiny[@]}" --data "$work/pairs.tsv" --epochs 1 --out "$g2p_run" >/dev/null 2>&1
[ -s "$g2p_run/last.safetensors" ] || { echo "NOT OK setup: no $g2p_run/last.safetensors"; exit 1; }
ln "$work/pairs.tsv" "$work/pairs-hard.tsv"
ln -s pairs.tsv "$work/pairs-link.tsv"
eval_g2p=("$attograd" --threads 1 eval g2p --checkpoint "$g2p_run/last.safetensors" --split val --report)
bad "eval g2p --report onto the data its checkpoint names" 1 "$work/pairs.tsv: is the same file as $work/pairs.tsv, an input of this command, which writing would destroy" -- "${eval_g2p[@]}" "$work/pairs.tsv"
bad "eval g2p --report onto its checkpoint" 1 "$g2p_run/last.safetensors: is the same file as $g2p_run/last.safetensors" -- "${eval_g2p[@]}" "$g2p_run/last.safetensors"
bad "eval g2p --report onto a hard link to the data" 1 "$work/pairs-hard.tsv: is the same file as $work/pairs.tsv" -- "${eval_g2p[@]}" "$work/pairs-hard.tsv"
bad "eval g2p --report onto a symlink to the data" 1 "$work/pairs-link.tsv: is the same file as $work/pairs.tsv" -- "${eval_g2p[@]}" "$work/pairs-link.tsv"
bad "eval g2p --report onto a .. path to the data" 1 "$g2p_run/../pairs.tsv: is the same file as $work/pairs.tsv" -- "${eval_g2p[@]}" "$g2p_run/../pairs.tsv"
bad "eval g2p --data F --report onto F by another name" 1 "$work/pairs.tsv: is the same file as $work/pairs-hard.tsv" -- "${eval_g2p[@]}" "$work/pairs.tsv" --data "$work/pairs-hard.tsv"
charlm_graph=("$attograd" graph charlm --data "$work/text.txt" --block-size 8 --layers 1 --heads 1 --width 8)
for format in text dot svg html; do
  if [ "$format" = text ] || [ "$format" = dot ] || command -v dot >/dev/null; then
    bad "graph charlm --format $format --out onto its --data" 1 "$work/text.txt: is the same file as $work/text.txt" -- "${charlm_graph[@]}" --format "$format" --out "$work/text.txt"
  fi
done
bad "graph g2p --out onto a hard link to its --data" 1 "$work/pairs-hard.tsv: is the same file as $work/pairs.tsv" -- "$attograd" graph g2p --data "$work/pairs.tsv" --batch-size 4 --format dot --out "$work/pairs-hard.tsv"
bad "graph charlm --out onto a .. path to its --data" 1 "is the same file as $work/text.txt" -- "${charlm_graph[@]}" --format dot --out "$work/data/../text.txt"
# A run folder: a file the run would write there (config.json, metrics.csv, the checkpoints) that is an
# input is refused when the folder is claimed, before any training.
cp -r "$charlm" "$work/trap-charlm" && cp "$work/text.txt" "$work/trap-charlm/metrics.csv"
bad "train charlm --data its --out's metrics.csv" 1 "$work/trap-charlm/metrics.csv: is the same file as $work/trap-charlm/metrics.csv" -- "$attograd" train charlm --data "$work/trap-charlm/metrics.csv" --iters 2 --eval-interval 1 --block-size 8 --layers 1 --heads 1 --width 8 --out "$work/trap-charlm" --quiet
cp -r "$good" "$work/trap-sentiment" && cp "$data/lf.tsv" "$work/trap-sentiment/metrics.csv"
bad "train sentiment --data its --out's metrics.csv" 1 "$work/trap-sentiment/metrics.csv: is the same file as" -- "$attograd" train sentiment --data "$work/trap-sentiment/metrics.csv" --epochs 1 --out "$work/trap-sentiment" --quiet
cp -r "$g2p_run" "$work/trap-g2p" && rm "$work/trap-g2p/best.safetensors" && ln "$work/pairs.tsv" "$work/trap-g2p/best.safetensors"
bad "train g2p: the --out's best.safetensors is a hard link to --data" 1 "$work/trap-g2p/best.safetensors: is the same file as $work/pairs.tsv" -- "${g2p_tiny[@]}" --data "$work/pairs.tsv" --epochs 1 --out "$work/trap-g2p"
mkdir -p "$work/trap-resume" && ln "$work/text.txt" "$work/trap-resume/metrics.csv"
bad "train charlm --resume: the data carried over from the checkpoint is an output" 1 "$work/trap-resume/metrics.csv: is the same file as $work/text.txt" -- "$attograd" train charlm --resume "$charlm" --out "$work/trap-resume" --iters 4 --quiet

echo "== every run knows its data"
# A g2p run records its data's sha256 and word count; a relative data path is recorded resolved, so
# eval from another folder (one with a file of the same name) reads the run's file.
sha() { sha256sum <"$1" | cut -d' ' -f1; }
cases=$((cases + 1))
check "train g2p from the data's folder with a relative --data" 0 "test (beam 2)" -- bash -c 'cd "$1" && shift && "$@"' _ "$work" "${g2p_tiny[@]}" --data pairs.tsv --epochs 1 --beam 2 --out "$scratch/rel-g2p"
expect "g2p records its data resolved, its sha256, word count and --beam" python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["data"] == sys.argv[2] and c["data_sha256"] == sys.argv[3] and c["data_words"] == 48 and c["beam"] == 2))' "$scratch/rel-g2p/config.json" "$work/pairs.tsv" "$(sha "$work/pairs.tsv")"
cases=$((cases + 1))
check "train charlm with a relative --data" 0 "final validation loss" -- bash -c 'cd "$1" && shift && "$@"' _ "$work" "$attograd" train charlm --data text.txt --iters 2 --eval-interval 1 --block-size 8 --layers 1 --heads 1 --width 8 --out "$scratch/rel-charlm" --quiet
expect "charlm records its data resolved" grep -q "\"data\": \"$work/text.txt\"" "$scratch/rel-charlm/config.json"
cases=$((cases + 1))
check "eval charlm from a folder with another text.txt reads the run's" 0 "of $work/text.txt" -- bash -c 'cd "$1" && shift && "$@"' _ "$data" "$attograd" eval charlm --checkpoint "$scratch/rel-charlm/last.safetensors"
expect "... without a note" test -z "$(grep note <<<"$last_output")"
cases=$((cases + 1))
check "train sentiment with a relative --data" 0 "test sentences right" -- bash -c 'cd "$1" && shift && "$@"' _ "$data" "$attograd" train sentiment --data lf.tsv --epochs 1 --batch-size 4 --out "$scratch/rel-sentiment" --quiet
expect "sentiment records its data resolved" grep -q "\"data\": \"$data/lf.tsv\"" "$scratch/rel-sentiment/config.json"
# A run whose data an older version recorded relative resumes from the folder it ran in.
mkdir -p "$scratch/old-relative" && cp "$charlm/config.json" "$charlm/best.safetensors" "$scratch/old-relative/"
edit "$charlm/last.safetensors" "$scratch/old-relative/last.safetensors" config data '"text.txt"'
cases=$((cases + 1))
check "charlm --resume of a run that recorded its data relative" 0 "final validation loss" -- bash -c 'cd "$1" && shift && "$@"' _ "$work" "$attograd" train charlm --resume "$scratch/old-relative" --iters 4 --quiet
expect "... and records it resolved" grep -q "\"data\": \"$work/text.txt\"" "$scratch/old-relative/config.json"
# --resume refuses data that changed since the run began, naming the file and both digests.
cp "$work/pairs.tsv" "$scratch/g2p-inplace.tsv"
"${g2p_tiny[@]}" --data "$scratch/g2p-inplace.tsv" --epochs 1 --out "$scratch/g2p-inplace" >/dev/null 2>&1
sed -i '1s/T A C$/C A T/' "$scratch/g2p-inplace.tsv"
cases=$((cases + 1))
check "g2p --resume: data rewritten in place is refused" 1 "--resume $scratch/g2p-inplace: cannot resume: the data $scratch/g2p-inplace.tsv changed since the run began: its sha256 is \"$(sha "$scratch/g2p-inplace.tsv")\", the run recorded \"$(sha "$work/pairs.tsv")\"" -- "${g2p_tiny[@]}" --resume "$scratch/g2p-inplace" --epochs 2
cp "$data/lf.tsv" "$scratch/sentiment-inplace.tsv"
"$attograd" train sentiment --data "$scratch/sentiment-inplace.tsv" --epochs 1 --batch-size 4 --out "$scratch/sentiment-inplace" --quiet >/dev/null 2>&1
sed -i '1s/^1/0/' "$scratch/sentiment-inplace.tsv"
cases=$((cases + 1))
check "sentiment --resume: data rewritten in place is refused" 1 "cannot resume: the data $scratch/sentiment-inplace.tsv changed since the run began: its sha256 is \"$(sha "$scratch/sentiment-inplace.tsv")\", the run recorded \"$(sha "$data/lf.tsv")\"" -- "$attograd" train sentiment --resume "$scratch/sentiment-inplace" --epochs 2 --quiet
# eval on other data than the run's says so before its figures (a note, not a refusal).
cases=$((cases + 1))
check "eval g2p: its run's data rewritten in place: a note" 0 "note: $scratch/g2p-inplace.tsv is not the data $scratch/g2p-inplace/last.safetensors was trained on (its sha256 is $(sha "$scratch/g2p-inplace.tsv"), the run's $(sha "$work/pairs.tsv")): the figures below are not the run's" -- "$attograd" --threads 1 eval g2p --checkpoint "$scratch/g2p-inplace/last.safetensors" --split val
expect "... before the figures" test "$(grep -n '^note' <<<"$last_output" | cut -d: -f1)" -lt "$(grep -n 'PER' <<<"$last_output" | head -n 1 | cut -d: -f1)"
head -n 30 "$work/pairs.tsv" >"$scratch/other-pairs.tsv"
cases=$((cases + 1))
check "eval g2p --data other pairs: a note" 0 "note: $scratch/other-pairs.tsv is not the data $g2p_run/last.safetensors was trained on" -- "$attograd" --threads 1 eval g2p --checkpoint "$g2p_run/last.safetensors" --data "$scratch/other-pairs.tsv" --split val
cases=$((cases + 1))
check "eval g2p on the run's data: no note" 0 "PER" -- "$attograd" --threads 1 eval g2p --checkpoint "$g2p_run/last.safetensors" --split val
expect "... none" test -z "$(grep note <<<"$last_output")"

echo "== bounded memory"
# A data file larger than a data file may be (1 GiB, less on a machine with less than 16 GiB free) is
# refused before it is read, by every reader of a user's file (a sparse file: no disk).
truncate -s 2G "$work/huge-data.txt"
too_big="huge-data.txt: the file is 2147483648 bytes, more than the"
bad "train charlm --data a 2 GB file" 1 "$too_big" -- "$attograd" train charlm --data "$work/huge-data.txt" --out "$scratch/huge-data" --quiet
bad "train g2p --data a 2 GB file" 1 "$too_big" -- "${g2p_tiny[@]}" --data "$work/huge-data.txt" --out "$scratch/huge-data"
bad "train sentiment --data a 2 GB file" 1 "$too_big" -- "$attograd" train sentiment --data "$work/huge-data.txt" --out "$scratch/huge-data" --quiet
bad "eval charlm --data a 2 GB file" 1 "$too_big" -- "$attograd" eval charlm --checkpoint "$charlm/last.safetensors" --data "$work/huge-data.txt"
bad "eval g2p --data a 2 GB file" 1 "$too_big" -- "$attograd" eval g2p --checkpoint "$g2p_run/last.safetensors" --data "$work/huge-data.txt"
bad "eval sentiment --data a 2 GB file" 1 "$too_big" -- "$attograd" eval sentiment --checkpoint "$good/last.safetensors" --data "$work/huge-data.txt"
bad "predict sentiment --file a 2 GB file" 1 "$too_big" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" --file "$work/huge-data.txt"
bad "predict g2p --file a 2 GB file" 1 "$too_big" -- "$attograd" predict g2p --checkpoint "$g2p_run/last.safetensors" --file "$work/huge-data.txt"
bad "graph charlm --data a 2 GB file" 1 "$too_big" -- "$attograd" graph charlm --data "$work/huge-data.txt"
# eval and predict g2p estimate decoding's peak (words at once x --beam x their length) and refuse
# what would not fit, before decoding, naming the settings (--max-memory bounds it here).
awk 'BEGIN { srand(3); L = "abcdefghilmnorstuwz"; for (i = 0; i < 600; i++) { w = ""; for (j = 0; j < 7; j++) w = w substr(L, 1 + int(rand() * 19), 1); print w } }' >"$work/words.txt"
bash "$here/reversal_pairs.sh" <"$work/words.txt" >"$work/many-pairs.tsv"
bad "predict g2p --beam 64 on 600 words, --max-memory 100" 1 "predict g2p: the estimated peak memory" -- "$attograd" predict g2p --checkpoint "$g2p_run/last.safetensors" --file "$work/words.txt" --beam 64 --max-memory 100
expect "... naming the batch and the beam" grep -q "set by 512 words at once x --beam 64 words of up to 7 letters" <<<"$last_output"
bad "eval g2p --eval-batch-size 65536 --beam 64, --max-memory 100" 1 "eval g2p: the estimated peak memory" -- "$attograd" eval g2p --checkpoint "$g2p_run/last.safetensors" --data "$work/many-pairs.tsv" --split train --eval-batch-size 65536 --beam 64 --max-memory 100
expect "... naming the batch and the beam" grep -q "set by --eval-batch-size 65536 x --beam 64 words of up to 7 letters" <<<"$last_output"
bad "eval g2p --max-memory 0: a usage error" 2 "--max-memory" -- "$attograd" eval g2p --checkpoint "$g2p_run/last.safetensors" --max-memory 0

echo "== nothing accepted silently"
# A Unicode space inside a g2p target is refused with file:line, never made part of a phoneme's name.
for code in 00A0 3000 2028 200B; do
  /usr/bin/python3 -c 'import sys; sys.stdout.write("dog\tD AO G\ncat\tK AE T\ncats\tK AE" + chr(int(sys.argv[1], 16)) + "T S\n")' "$code" >"$work/space-$code.tsv"
  bad "train g2p: U+$code inside a target" 1 "space-$code.tsv:3: the target has the Unicode space U+$code, which would join or hide phonemes" -- "${g2p_tiny[@]}" --data "$work/space-$code.tsv" --epochs 1 --out "$scratch/space-$code"
done
# --min-lr above --lr: the usage cases above. --beam in config.json: "every run knows its data".
# A model whose weights overflow (finite, so it loads) has non-finite logits: said, not empty pronunciations.
edit "$g2p_run/last.safetensors" "$ckpt/g2p-overflow.safetensors" scale 1e20
bad "predict g2p: a model whose logits are not finite" 1 "g2p decode: the model's logits are not finite (NaN at output position 1)" -- "$attograd" predict g2p --checkpoint "$ckpt/g2p-overflow.safetensors" cat dog
bad "eval g2p --beam 3: a model whose logits are not finite" 1 "the model's logits are not finite" -- "$attograd" eval g2p --checkpoint "$ckpt/g2p-overflow.safetensors" --split val --beam 3
# Symbols from a checkpoint are printed with control characters escaped, as report.svg shows them.
symbols=$(python3 -c 'import json, struct, sys; r = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", r[:8])[0]; t = json.loads(json.loads(r[8:8 + n])["__metadata__"]["target_symbols"]); print(json.dumps(t[:3] + [s + "\u001b[31m\r" for s in t[3:]]))' "$g2p_run/last.safetensors")
edit "$g2p_run/last.safetensors" "$ckpt/g2p-escapes.safetensors" metadata target_symbols "$symbols"
bad "predict g2p: a checkpoint's symbols with ESC and CR" 0 '\x1b[31m\x0d' -- "$attograd" predict g2p --checkpoint "$ckpt/g2p-escapes.safetensors" cat dog
expect "... and no raw ESC or CR printed" test "$(tr -d '\033\r' <<<"$last_output")" = "$last_output"

echo "== resume"
# A resumed run keeps its settings: a flag not given is carried over from the checkpoint, a flag
# given with another value is refused naming it and both values; only --epochs/--iters (further),
# --threads change. OUT holds seed 002's run of 2 epochs (lr 0.01, seed 0, batch 10, dim 16).
resume_s=("$attograd" train sentiment --resume "$out" --out "$out" --quiet)
bad "resume: --lr 0.5" 1 "cannot resume: the checkpoint's lr is 0.01, this run's is 0.5 (set by --lr)" -- "${resume_s[@]}" --epochs 3 --lr 0.5
bad "resume: --seed 3" 1 "the checkpoint's seed is 0, this run's is 3 (set by --seed)" -- "${resume_s[@]}" --epochs 3 --seed 3
bad "resume: --batch-size 5" 1 "the checkpoint's batch_size is 10, this run's is 5 (set by --batch-size)" -- "${resume_s[@]}" --epochs 3 --batch-size 5
bad "resume: --weight-decay 0.1" 1 "the checkpoint's weight_decay is 0.5, this run's is 0.1 (set by --weight-decay)" -- "${resume_s[@]}" --epochs 3 --weight-decay 0.1
bad "resume: --val-fraction 0.2" 1 "(set by --val-fraction)" -- "${resume_s[@]}" --epochs 3 --val-fraction 0.2
bad "resume: --data another file" 1 "the checkpoint's data is \"\", this run's is \"$data/lf.tsv\"" -- "${resume_s[@]}" --epochs 3 --data "$data/lf.tsv"
bad "resume: --epochs lower than done" 1 "--resume $out: --epochs 1 trains nothing: the run has done 2 epochs; give --epochs > 2" -- "${resume_s[@]}" --epochs 1
bad "resume: --epochs equal to done" 1 "--epochs 2 trains nothing" -- "${resume_s[@]}" --epochs 2
bad "resume: a finished run without --epochs" 1 "--epochs 2 trains nothing: the run has done 2 epochs" -- "${resume_s[@]}"
bad "resume: --heads 2 on a SelfAttention run" 1 "the checkpoint's model is \"selfattn\", this run's is \"multihead\"" -- "${resume_s[@]}" --epochs 3 --heads 2
bad "resume: multihead run --heads 4" 1 "the checkpoint's heads is 2, this run's is 4 (set by --heads)" -- "$attograd" train sentiment --resume "$heads" --out "$out" --epochs 3 --heads 4 --quiet
bad "resume squares: --d-model 8" 1 "the checkpoint's d_model is" -- "$attograd" train squares --resume "$squares" --out "$out" --epochs 2 --d-model 8 --quiet
bad "resume squares: --dropout 0.3" 1 "(set by --dropout)" -- "$attograd" train squares --resume "$transformer" --out "$out" --epochs 2 --dropout 0.3 --quiet
"$attograd" "${charlm_tiny[@]}" --data "$data/chars.txt" --iters 4 --eval-interval 2 --out "$work/charlm" >/dev/null 2>&1
bad "resume charlm: --heads 4" 1 "the checkpoint's n_head is 2, this run's is 4 (set by --heads)" -- "$attograd" train charlm --resume "$work/charlm" --iters 6 --heads 4 --quiet
bad "resume charlm: --block-size 16" 1 "(set by --block-size)" -- "$attograd" train charlm --resume "$work/charlm" --iters 6 --block-size 16 --quiet
bad "resume charlm: --iters not past the run" 1 "--iters 4 trains nothing: the run has done 2 evaluation intervals of 2 iterations; give --iters > 4" -- "$attograd" train charlm --resume "$work/charlm" --quiet
bad "resume charlm: --min-lr 0.0005" 1 "(set by --min-lr)" -- "$attograd" train charlm --resume "$work/charlm" --iters 6 --min-lr 0.0005 --quiet
bad "resume charlm: --data another text" 1 "(set by --data)" -- "$attograd" train charlm --resume "$work/charlm" --iters 6 --data "$data/chars-crlf.txt" --quiet
# Carried over: the checkpoint's settings, --out the resumed folder; --epochs recorded in config.json.
cp -r "$good" "$scratch/carry"
"$attograd" train sentiment --epochs 1 --lr 0.02 --seed 5 --batch-size 7 --out "$scratch/carry2" --quiet >/dev/null 2>&1
cases=$((cases + 1))
check "resume with only --epochs: settings carried over" 0 "test sentences right" -- "$attograd" train sentiment --resume "$scratch/carry2" --epochs 2 --quiet
expect "carried: lr, seed, batch size in config.json" python3 -c 'import json, sys; c = json.load(open(sys.argv[1])); sys.exit(not (c["lr"] == 0.02 and c["seed"] == 5 and c["batch_size"] == 7 and c["epochs"] == 2 and c["resumed"] == [{"after_epoch": 1, "changed": {"epochs": {"from": 1, "to": 2}}}]))' "$scratch/carry2/config.json"
"$attograd" train sentiment --epochs 2 --lr 0.02 --seed 5 --batch-size 7 --out "$scratch/carry2-straight" --quiet >/dev/null 2>&1
expect "carried-over resume equals the straight run (metrics)" cmp -s "$scratch/carry2/metrics.csv" "$scratch/carry2-straight/metrics.csv"
cases=$((cases + 1))
check "resume squares transformer without --model" 0 "MSE" -- "$attograd" train squares --resume "$transformer" --out "$scratch/transformer-more" --epochs 2 --quiet
expect "squares: the resumed run is still a transformer" grep -q '"model": "transformer"' "$scratch/transformer-more/config.json"
cases=$((cases + 1))
check "resume charlm with only --iters" 0 "final validation loss" -- "$attograd" train charlm --resume "$work/charlm" --out "$scratch/charlm-more" --iters 6 --quiet
# Signals: SIGTERM and SIGHUP end every task's run like SIGINT: the step saved, a message, 128 + n.
for task_signal in "sentiment TERM 143" "sentiment HUP 129" "squares TERM 143" "squares HUP 129" "charlm HUP 129" "charlm INT 130"; do
  read -r task sig code <<<"$task_signal"
  case "$task" in
    sentiment) run=("$attograd" train sentiment --epochs 100000) ;;
    squares) run=("$attograd" train squares --epochs 100000) ;;
    charlm) run=("$attograd" "${charlm_tiny[@]}" --data "$data/chars.txt" --iters 1000000 --eval-interval 5) ;;
  esac
  folder="$scratch/signal-$task-$sig"
  cases=$((cases + 1))
  signal_when_checkpointed "$sig" "$folder" "$work/signal.log" -- "${run[@]}" --out "$folder" --quiet
  if [ "$status" -eq "$code" ] && grep -q "stopped by .* (continue with --resume)" "$work/signal.log"; then
    echo "OK $task: SIG$sig ends the run with $code and a message"
  else
    echo "NOT OK $task: SIG$sig: exit $status (expected $code): $(cat "$work/signal.log")"
    failures=$((failures + 1))
  fi
  expect "$task: after SIG$sig, last.safetensors loads" quietly "$attograd" eval "$task" --checkpoint "$folder/last.safetensors" $([ "$task" = squares ] && echo --n 4) $([ "$task" = charlm ] && echo --data "$data/chars.txt")
done

echo "== fail before the work"
# A resume whose folder lacks what the end of the run reads (best.safetensors) is refused before
# training; --resume RUN --out NEW carries RUN's best epoch into NEW, so the end finds it there.
cp -r "$good" "$work/no-best" && rm "$work/no-best/best.safetensors"
bad "resume: the run folder has no best.safetensors" 1 "--resume $work/no-best: cannot resume: $work/no-best/best.safetensors is missing" -- "$attograd" train sentiment --resume "$work/no-best" --epochs 3 --quiet
cp -r "$g2p_run" "$work/g2p-no-best" && rm "$work/g2p-no-best/best.safetensors"
bad "g2p resume: the run folder has no best.safetensors (refused before training)" 1 "$work/g2p-no-best/best.safetensors is missing" -- "${g2p_tiny[@]}" --resume "$work/g2p-no-best" --epochs 2
"${g2p_tiny[@]}" --data "$work/pairs.tsv" --lr 1e-12 --min-lr 0 --epochs 1 --out "$work/g2p-still" >/dev/null 2>&1
cases=$((cases + 1))
check "g2p --resume RUN --out NEW: no better epoch, the test decodes RUN's best" 0 "test (greedy)" -- "${g2p_tiny[@]}" --resume "$work/g2p-still" --out "$scratch/g2p-new" --epochs 2
expect "... NEW/best.safetensors is RUN's best epoch" cmp -s "$work/g2p-still/best.safetensors" "$scratch/g2p-new/best.safetensors"
expect "... and NEW resumes on its own" quietly "${g2p_tiny[@]}" --resume "$scratch/g2p-new" --epochs 3
# Ctrl-C while g2p decodes its test words at the end (beam 64: half a second after the checkpoint,
# ten times the signal helper's poll): exit 130, the run folder whole.
/usr/bin/python3 -c '
import random
random.seed(5)
for _ in range(3000):
    print("".join(random.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(random.randint(3, 9))))' |
  sort -u | bash "$here/reversal_pairs.sh" >"$work/many-pairs.tsv"
folder="$scratch/g2p-int"
cases=$((cases + 1))
signal_when_checkpointed INT "$folder" "$work/g2p-int.log" -- "${g2p_tiny[@]}" --data "$work/many-pairs.tsv" --epochs 1 --train-fraction 0.02 --eval-batch-size 1 --beam 64 --out "$folder"
if [ "$status" -eq 130 ] && grep -q "stopped by Interrupt while decoding the test words" "$work/g2p-int.log"; then
  echo "OK g2p: SIGINT during the test decoding ends it with 130 and a message"
else
  echo "NOT OK g2p: SIGINT during the test decoding: exit $status (expected 130): $(cat "$work/g2p-int.log")"
  failures=$((failures + 1))
fi
expect "... its best.safetensors loads" quietly "$attograd" --threads 1 eval g2p --checkpoint "$folder/best.safetensors" --split val
expect "... its config.json parses" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$folder/config.json"
expect "... its metrics.csv has the epoch" test "$(wc -l <"$folder/metrics.csv")" -eq 2
expect "... no temporary files" test -z "$(find "$folder" -name '*.tmp.*')"

echo "== say exactly what is wrong"
printf 'cat\tT A C\n\ndog\tG O D\n' >"$data/blank.tsv"
printf '\tgood film\n1\tbad film\n' >"$data/empty-label.tsv"
bad "g2p --data: a blank line" 1 "blank.tsv:2: the line is blank; expected \`source<TAB>target tokens\`" -- "${g2p_tiny[@]}" --data "$data/blank.tsv" --out "$out"
bad "eval g2p --data: a blank line" 1 "blank.tsv:2: the line is blank" -- "$attograd" eval g2p --checkpoint "$g2p_run/last.safetensors" --data "$data/blank.tsv"
bad "sentiment --data: an empty label" 1 "empty-label.tsv:1: the label (before the tab) is empty; expected 0 or 1" -- "${train_s[@]}" --data "$data/empty-label.tsv"
bad "--lr= (an empty value)" 2 "--lr: expected a value after '=', got none" -- "$attograd" train sentiment --lr= --out "$out" --quiet
bad "graph --format= (an empty value)" 2 "--format: expected a value after '=', got none" -- "$attograd" graph squares --format=
bad "eval g2p --split= (an empty value)" 2 "--split: expected a value after '=', got none" -- "$attograd" eval g2p --checkpoint "$g2p_run/last.safetensors" --split=
bad "--explain into a missing folder: names the folder" 1 "$work/no-such-folder/x.svg: cannot write it: the folder $work/no-such-folder does not exist" -- "$attograd" predict sentiment --checkpoint "$good/last.safetensors" "hi" --explain "$work/no-such-folder/x.svg"
expect "... and no temporary file's name" test -z "$(grep -o '\.tmp\.' <<<"$last_output")"
bad "graph --out into a missing folder" 1 "the folder $work/no-such-folder does not exist" -- "$attograd" graph squares --format dot --out "$work/no-such-folder/g.dot"
bad "eval g2p --report into a missing folder" 1 "the folder $work/no-such-folder does not exist" -- "$attograd" --threads 1 eval g2p --checkpoint "$g2p_run/last.safetensors" --split val --report "$work/no-such-folder/r.svg"
edit "$charlm/last.safetensors" "$ckpt/charlm-no-data.safetensors" no-config-key data
edit "$g2p_run/last.safetensors" "$ckpt/g2p-no-data.safetensors" no-config-key data
bad "eval charlm: the checkpoint's config has no data" 1 "charlm-no-data.safetensors: the checkpoint's config has no \"data\"" -- "$attograd" eval charlm --checkpoint "$ckpt/charlm-no-data.safetensors"
bad "eval g2p: the checkpoint's config has no data" 1 "g2p-no-data.safetensors: the checkpoint's config has no \"data\"" -- "$attograd" eval g2p --checkpoint "$ckpt/g2p-no-data.safetensors"
mkdir -p "$work/no-lr" && cp "$good/config.json" "$good/best.safetensors" "$work/no-lr/"
edit "$good/last.safetensors" "$work/no-lr/last.safetensors" no-config-key lr
bad "resume: the checkpoint's config has no lr" 1 "$work/no-lr/last.safetensors: the checkpoint's config has no \"lr\"" -- "$attograd" train sentiment --resume "$work/no-lr" --epochs 3 --quiet
mkdir -p "$work/no-data" && cp "$good/config.json" "$good/best.safetensors" "$work/no-data/"
edit "$good/last.safetensors" "$work/no-data/last.safetensors" no-config-key data
bad "resume: the checkpoint's config has no data" 1 "$work/no-data/last.safetensors: the checkpoint's config has no \"data\"" -- "$attograd" train sentiment --resume "$work/no-data" --epochs 3 --quiet
bad "predict g2p: an empty word" 1 "predict g2p: word 2 is empty" -- "$attograd" predict g2p --checkpoint "$g2p_run/last.safetensors" cat ""
bad "predict g2p: a word longer than the model's context" 1 "predict g2p: word 1 has 250 characters, more than the 245" -- "$attograd" predict g2p --checkpoint "$g2p_run/last.safetensors" "$(printf 'a%.0s' $(seq 250))"
bad "sample --prompt \"\"" 2 "--prompt: expected a text, got an empty string" -- "$attograd" sample --checkpoint "$charlm/last.safetensors" --prompt ""
bad "bench attention --shape whose sizes overflow" 2 "--shape: B,T,d,h = 1000000000,1000000000,16,2" -- "$attograd" bench attention --shape 1000000000,1000000000,16,2
cases=$((cases + 1))
check "bench says which precision ran" 0 "precision=f32" -- "$attograd" bench attention --shape 1,6,16,2 --iters 1
if [ "$(nproc)" -ge 2 ]; then
  cases=$((cases + 1))
  check "bench cpus prints the round trip" 0 "a cache line's round trip" -- "$attograd" bench cpus --iters 1
  ns=$(sed -n 's/.*round trip \([0-9.]*\) ns.*/\1/p' <<<"$last_output")
  cases=$((cases + 1))
  check "bench cpus: a positive round trip ($ns ns)" 0 "" -- awk -v ns="$ns" 'BEGIN { exit !(ns > 0) }'
fi
# FNV-1a's low bit is the parity of the bytes' low bits: words of one odd-coded letter ('a') among
# even-coded ones all hash to even buckets, so `% 10` gave them no validation word, and words of
# even-coded letters alone no test word, however many there were. A user's data is split on
# well-mixed bits.
for odd in a ""; do
  for a in b d f h j l n p r t; do for b in b d f h j l n p r t; do for c in v x z b d; do echo "$odd$a$b$c"; done; done; done |
    bash "$here/reversal_pairs.sh" >"$data/parity.tsv"
  cases=$((cases + 1))
  check "g2p --data of words of one parity (${odd:-even}): validation and test words" 0 "test (greedy)" -- "${g2p_tiny[@]}" --data "$data/parity.tsv" --epochs 1 --out "$scratch/parity-${odd:-even}"
done
printf 'cat\tT A C\n' >"$data/one-pair.tsv"
bad "g2p --data of one pair: the split's advice" 1 "the hash split needs more words" -- "${g2p_tiny[@]}" --data "$data/one-pair.tsv" --out "$out"
{ /usr/bin/python3 -c 'import sys; sys.stdout.write("".join(chr(0x4e00 + i) for i in range(3000)) + "\n")'; cat "$work/text.txt"; } >"$work/cjk.txt"
cases=$((cases + 1))
check "eval charlm --drop-unknown: a summary, not 3000 characters" 0 " more)" -- "$attograd" eval charlm --checkpoint "$charlm/last.safetensors" --data "$work/cjk.txt" --drop-unknown --split all
expect "... in a line of at most 400 characters" test "$(grep -- '--drop-unknown' <<<"$last_output" | wc -c)" -le 400

echo "== leave nothing behind"
# graph --format svg killed while dot draws: nothing left in the temporary folder.
if command -v dot >/dev/null; then
  mkdir -p "$work/slow-dot" "$work/graph-tmp"
  printf '#!/bin/sh\nsleep 30 &\necho "$$ $!" >"%s"\nwait\nexec %s "$@"\n' "$work/slow-dot/started" "$(command -v dot)" >"$work/slow-dot/dot"
  chmod +x "$work/slow-dot/dot"
  for sig in TERM KILL; do
    rm -f "$work/slow-dot/started"
    TMPDIR="$work/graph-tmp" PATH="$work/slow-dot:$PATH" "$attograd" graph squares --format svg --out "$scratch/slow.svg" >/dev/null 2>&1 &
    grapher=$!
    for _ in $(seq 200); do [ -s "$work/slow-dot/started" ] && break; sleep 0.05; done
    kill "-$sig" "$grapher"
    wait "$grapher" 2>/dev/null
    kill $(cat "$work/slow-dot/started") 2>/dev/null  # the slow dot and its sleep
    cases=$((cases + 1))
    expect "graph killed (SIG$sig) while dot draws: the temporary folder is empty" test -z "$(ls -A "$work/graph-tmp")"
    rm -rf "$work/graph-tmp"/*
  done
fi
# Two runs racing for one --out: the second is told another run is writing, whatever the first has
# written so far (here its first checkpoint, before its config.json).
mkdir -p "$work/racing" && cp "$good/last.safetensors" "$work/racing/" && : >"$work/racing/.attograd.lock"
python3 -c 'import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR); fcntl.lockf(fd, fcntl.LOCK_EX); print(os.getpid(), flush=True); time.sleep(60)' "$work/racing/.attograd.lock" >"$work/racer.pid" &
racer=$!
for _ in $(seq 100); do [ -s "$work/racer.pid" ] && break; sleep 0.05; done
bad "--out half-written by a run holding it: another run is writing" 1 "--out $work/racing: another run (pid $racer) is writing" -- "$attograd" train sentiment --epochs 1 --out "$work/racing" --quiet
kill "$racer" && wait "$racer" 2>/dev/null

echo "bad input: $cases cases, $failures failed"
[ "$failures" -eq 0 ]
