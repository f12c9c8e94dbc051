#!/usr/bin/env bash
# The attograd ⇄ PyTorch checkpoint round trip, both ways; exits non-zero on any mismatch.
#   tools/golden/interop.sh [build-dir]     (default build/; builds nothing: needs tests/nn_tests
#                                            and tools/attograd)
# 1. nn_tests writes attograd checkpoints + their inputs/outputs into <build-dir>/interop/;
#    `attograd train squares` (both models, 3 epochs) and `eval squares --predictions` add
#    squares_<model>/best.safetensors and the predictions on the held-out squares; a short
#    `train charlm` adds charlm/best.safetensors and its `eval charlm` validation loss; a short
#    `train g2p` adds g2p/best.safetensors and `predict g2p`'s decoding of its words;
# 2. interop.py (Debian's PyTorch) loads them into the PyTorch modules and compares outputs,
#    then writes PyTorch checkpoints + inputs/outputs;
# 3. nn_tests loads those and reproduces PyTorch's outputs; `predict g2p` decodes PyTorch's G2P
#    checkpoint as PyTorch did.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$root/build}" && pwd)"
tests="$build/tests/nn_tests"
attograd="$build/tools/attograd"
[ -x "$tests" ] || { echo "interop: $tests not found; build the nn_tests target first" >&2; exit 2; }
[ -x "$attograd" ] || { echo "interop: $attograd not found; build the attograd target first" >&2; exit 2; }
export ATTOGRAD_INTEROP_DIR="$build/interop"
rm -rf "$ATTOGRAD_INTEROP_DIR"
mkdir -p "$ATTOGRAD_INTEROP_DIR"

echo "== attograd writes checkpoints"
"$tests" --gtest_filter=Interop.WritesCheckpointsForPyTorch --gtest_brief=1
for model in selfattn transformer; do
  run="$ATTOGRAD_INTEROP_DIR/squares_$model"
  "$attograd" train squares --model "$model" --epochs 3 --out "$run" --quiet >/dev/null
  "$attograd" eval squares --checkpoint "$run/best.safetensors" --predictions "$run/predictions.safetensors"
done
run="$ATTOGRAD_INTEROP_DIR/charlm"
for i in $(seq 200); do echo "it was the best of times, it was the worst of times, line $i."; done >"$ATTOGRAD_INTEROP_DIR/text.txt"
"$attograd" train charlm --data "$ATTOGRAD_INTEROP_DIR/text.txt" --iters 40 --eval-interval 20 --block-size 16 \
  --layers 2 --heads 2 --width 32 --out "$run" --quiet >/dev/null
"$attograd" eval charlm --checkpoint "$run/best.safetensors" | tee "$run/eval.txt"
run="$ATTOGRAD_INTEROP_DIR/g2p"
for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf bear deer frog goat; do
  for s in "" s er; do echo "$w$s"; done
done | bash "$root/tests/tools/reversal_pairs.sh" >"$ATTOGRAD_INTEROP_DIR/g2p_pairs.tsv"  # spelling backwards
"$attograd" train g2p --data "$ATTOGRAD_INTEROP_DIR/g2p_pairs.tsv" --epochs 30 --batch-size 8 --lr 0.003 \
  --d-model 32 --heads 2 --enc-layers 1 --dec-layers 1 --ff 64 --dropout 0 --out "$run" --quiet >/dev/null
cut -f1 "$ATTOGRAD_INTEROP_DIR/g2p_pairs.tsv" >"$run/words.txt"
"$attograd" predict g2p --checkpoint "$run/best.safetensors" --file "$run/words.txt" >"$run/predictions.tsv"
echo "== PyTorch loads them, then writes its own"
/usr/bin/python3 "$root/tools/golden/interop.py" "$ATTOGRAD_INTEROP_DIR"
echo "== attograd reproduces PyTorch"
"$tests" --gtest_filter=Interop.ReproducesPyTorchCheckpoints --gtest_brief=1
"$attograd" predict g2p --checkpoint "$run/pytorch_g2p.safetensors" --file "$run/words.txt" >"$run/ours.tsv"
if cmp -s "$run/ours.tsv" "$run/pytorch_predictions.tsv"; then
  echo "OK PyTorch → attograd g2p checkpoint: $(wc -l <"$run/ours.tsv") words decoded alike"
else
  echo "NOT OK PyTorch → attograd g2p checkpoint: predictions differ" >&2
  diff "$run/ours.tsv" "$run/pytorch_predictions.tsv" | head >&2
  exit 1
fi
echo "interop: both ways OK"
