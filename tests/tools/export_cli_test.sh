#!/usr/bin/env bash
# The real `attograd export` on short runs of each task made here: the model file holds the model's
# tensors (f32: the checkpoint's bytes; bf16: half the size), the config and the task's own entries,
# and no optimizer state or resume entries; `predict`, `eval` and `sample` give the same output from
# the f32 model file as from the checkpoint, and run from the bf16 one; `train --resume` of a model
# file, a model file exported again, --out the checkpoint itself and a bad --dtype are refused.
set -u
attograd="$1"
here="$(dirname "${BASH_SOURCE[0]}")"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$here/cli_check.sh"
ag=("$attograd" --threads 1)

# Each model file of a checkpoint: NAME.f32 and NAME.bf16 next to it.
export_both() {  # export_both TASK CHECKPOINT NAME
  for dtype in f32 bf16; do
    check "export $1 --dtype $dtype" 0 "wrote $work/$3.$dtype: " -- \
      "${ag[@]}" export --checkpoint "$2" --out "$work/$3.$dtype" --dtype "$dtype"
    expect "... names the task, epoch and dtype" grep -q "tensors of $1 (epoch [0-9]*), [0-9]* bytes, $dtype$" \
      <<<"$last_output"
  done
}
# What each file holds, read with Python (not attograd): the tensors and metadata as the brief says.
cat >"$work/check.py" <<'EOF'
import json, struct, sys
def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__")
    meta.pop("attograd_checksum")
    return header, {k: raw[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]] for k, v in header.items()}, meta
checkpoint, model_file, dtype, own = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
ch, cblobs, cmeta = read(checkpoint)
mh, mblobs, mmeta = read(model_file)
model = sorted(k for k in ch if not k.startswith("optimizer."))
assert sorted(mh) == model, (sorted(mh), model)
assert sorted(mmeta) == sorted(["format", "format_version", "config", "model_file"] + own), sorted(mmeta)
assert all(mmeta[k] == cmeta[k] for k in ["format", "format_version", "config"] + own)
origin = json.loads(mmeta["model_file"])
assert origin == {"from": checkpoint, "epoch": cmeta["epoch"], "dtype": dtype}, origin
for k in model:
    if dtype == "f32" or ch[k]["dtype"] != "F32":
        assert mh[k]["dtype"] == ch[k]["dtype"] and mblobs[k] == cblobs[k], k
    else:  # each f32 value's top half, rounded to nearest even
        f = struct.unpack("<%dI" % (len(cblobs[k]) // 4), cblobs[k])
        want = [((x + 0x7FFF + ((x >> 16) & 1)) >> 16) & 0xFFFF for x in f]
        assert mh[k]["dtype"] == "BF16" and list(struct.unpack("<%dH" % len(want), mblobs[k])) == want, k
EOF
holds() {  # holds CHECKPOINT NAME OWN_KEYS...: both model files hold what they should
  local checkpoint="$1" name="$2"
  shift 2
  for dtype in f32 bf16; do
    expect "$name.$dtype: the model's tensors, config and $*; no optimizer, no resume entries" \
      python3 "$work/check.py" "$checkpoint" "$work/$name.$dtype" "$dtype" "$@"
  done
  expect "$name.bf16 is smaller than $name.f32" test "$(stat -c %s "$work/$name.bf16")" -lt "$(stat -c %s "$work/$name.f32")"
}
# same NAME CHECKPOINT MODEL_FILE -- COMMAND... (@MODEL where the checkpoint goes): both succeed with the
# same output, the file's name and the timings ("decoded in 0.01 s = ...", "sampled 60 characters in ...") aside.
same() {
  local name="$1" checkpoint="$2" model="$3" status
  shift 4
  "${@//@MODEL/$checkpoint}" >"$work/from-checkpoint.txt" 2>&1
  status=$?
  "${@//@MODEL/$model}" >"$work/from-model.txt" 2>&1
  status="$status$?"
  sed -Ei "s|$checkpoint|MODEL|g; s/ in [0-9.]+ s[ =:].*$//" "$work/from-checkpoint.txt"
  sed -Ei "s|$model|MODEL|g; s/ in [0-9.]+ s[ =:].*$//" "$work/from-model.txt"
  expect "$name: the same output from the f32 model file as from the checkpoint (exit $status)" \
    test "$status" = 00 -a -s "$work/from-model.txt"
  expect "... byte for byte" cmp -s "$work/from-checkpoint.txt" "$work/from-model.txt"
}

echo "== g2p"
for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf bear deer frog goat ox yak emu owl; do
  for s in "" s er y ing; do echo "$w$s"; done
done | bash "$here/reversal_pairs.sh" >"$work/pairs.tsv"
"${ag[@]}" train g2p --quiet --d-model 16 --enc-layers 1 --dec-layers 1 --ff 32 --batch-size 16 --lr 0.003 --heads 2 \
  --data "$work/pairs.tsv" --epochs 2 --out "$work/g2p" >/dev/null 2>&1
[ -s "$work/g2p/best.safetensors" ] || { echo "NOT OK setup: no g2p run"; exit 1; }
export_both g2p "$work/g2p/best.safetensors" g2p
holds "$work/g2p/best.safetensors" g2p source_symbols target_symbols
cut -f1 "$work/pairs.tsv" >"$work/words.txt"
same "predict g2p" "$work/g2p/best.safetensors" "$work/g2p.f32" -- "${ag[@]}" predict g2p --checkpoint @MODEL --file "$work/words.txt"
expect "... a line per word" test "$(wc -l <"$work/from-model.txt")" -eq "$(wc -l <"$work/words.txt")"
same "predict g2p --beam 3" "$work/g2p/best.safetensors" "$work/g2p.f32" -- "${ag[@]}" predict g2p --checkpoint @MODEL --beam 3 cat dogs
same "eval g2p" "$work/g2p/best.safetensors" "$work/g2p.f32" -- "${ag[@]}" eval g2p --checkpoint @MODEL --split val
check "predict g2p from the bf16 file" 0 "cat	" -- "${ag[@]}" predict g2p --checkpoint "$work/g2p.bf16" cat dogs
check "eval g2p from the bf16 file" 0 "WER" -- "${ag[@]}" eval g2p --checkpoint "$work/g2p.bf16" --split val
check "eval g2p --precision bf16 from the bf16 file" 0 "WER" -- "${ag[@]}" eval g2p --precision bf16 \
  --checkpoint "$work/g2p.bf16" --split val

# A model file cannot be trained on: --resume of a folder holding one, refused before any work.
cp -r "$work/g2p" "$work/resume" && cp "$work/g2p.f32" "$work/resume/last.safetensors"
check "train --resume of a model file" 1 \
  "$work/resume/last.safetensors is a model file (exported, no optimizer state); --resume needs a run folder's last.safetensors" \
  -- "${ag[@]}" train g2p --quiet --resume "$work/resume" --epochs 3
check "export of a model file" 1 "$work/g2p.f32: is a model file already" -- \
  "${ag[@]}" export --checkpoint "$work/g2p.f32" --out "$work/again.safetensors"
check "--out the checkpoint itself" 1 "is the same file as" -- \
  "${ag[@]}" export --checkpoint "$work/g2p/best.safetensors" --out "$work/g2p/best.safetensors"
check "--dtype f16" 2 "--dtype" -- "${ag[@]}" export --checkpoint "$work/g2p/best.safetensors" --out "$work/x" --dtype f16
expect "... names the choices" grep -q "f32" <<<"$last_output"
check "export of a run's metrics.csv" 1 "metrics.csv" -- "${ag[@]}" export --checkpoint "$work/g2p/metrics.csv" --out "$work/x"
check "export --help" 0 "model file" -- "$attograd" export --help
expect "nothing written by the refusals" test ! -e "$work/x" -a ! -e "$work/again.safetensors"
expect "the checkpoint is as it was" cmp -s "$work/g2p/best.safetensors" "$work/resume/best.safetensors"

echo "== charlm"
for i in $(seq 40); do echo "call me ishmael. some years ago, never mind how long precisely $i."; done >"$work/text.txt"
"${ag[@]}" train charlm --quiet --block-size 16 --layers 1 --width 16 --heads 2 --batch-size 8 --data "$work/text.txt" \
  --iters 20 --eval-interval 10 --out "$work/charlm" >/dev/null 2>&1
[ -s "$work/charlm/best.safetensors" ] || { echo "NOT OK setup: no charlm run"; exit 1; }
export_both charlm "$work/charlm/best.safetensors" charlm
holds "$work/charlm/best.safetensors" charlm vocabulary
same "sample" "$work/charlm/best.safetensors" "$work/charlm.f32" -- \
  "${ag[@]}" sample --checkpoint @MODEL --seed 5 --tokens 60 --prompt "call "
same "eval charlm" "$work/charlm/best.safetensors" "$work/charlm.f32" -- "${ag[@]}" eval charlm --checkpoint @MODEL
check "sample from the bf16 file" 0 "sampled 60 characters" -- "${ag[@]}" sample --checkpoint "$work/charlm.bf16" --seed 5 \
  --tokens 60

echo "== sentiment"
"${ag[@]}" train sentiment --epochs 1 --out "$work/sentiment" --quiet >/dev/null 2>&1
[ -s "$work/sentiment/best.safetensors" ] || { echo "NOT OK setup: no sentiment run"; exit 1; }
export_both sentiment "$work/sentiment/best.safetensors" sentiment
holds "$work/sentiment/best.safetensors" sentiment vocabulary
same "predict sentiment" "$work/sentiment/best.safetensors" "$work/sentiment.f32" -- \
  "${ag[@]}" predict sentiment --checkpoint @MODEL "a good film" "I hated it"
same "eval sentiment" "$work/sentiment/best.safetensors" "$work/sentiment.f32" -- "${ag[@]}" eval sentiment --checkpoint @MODEL
check "predict sentiment from the bf16 file" 0 "	a good film" -- "${ag[@]}" predict sentiment \
  --checkpoint "$work/sentiment.bf16" "a good film"

echo "== squares"
"${ag[@]}" train squares --epochs 1 --out "$work/squares" --quiet >/dev/null 2>&1
[ -s "$work/squares/best.safetensors" ] || { echo "NOT OK setup: no squares run"; exit 1; }
export_both squares "$work/squares/best.safetensors" squares
holds "$work/squares/best.safetensors" squares
same "eval squares" "$work/squares/best.safetensors" "$work/squares.f32" -- "${ag[@]}" eval squares --checkpoint @MODEL --n 16
check "eval squares from the bf16 file" 0 "" -- "${ag[@]}" eval squares --checkpoint "$work/squares.bf16" --n 16

echo "$failures failures"
[ "$failures" -eq 0 ]
