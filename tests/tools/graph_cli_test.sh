#!/usr/bin/env bash
# `attograd graph`: the graph of seed 004's model (squares, selfattn) as text, DOT and SVG, and
# its misuse (exit codes, no partial files). Prints OK / NOT OK per case.
set -u
attograd="$1"
source "$(dirname "$0")/cli_check.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

# Text: a numbered list; seed 004's decoder has three heads in each of its two attention blocks,
# each one fused scaled_dot_product_attention.
check "text exits 0" 0 "scaled_dot_product_attention" -- "$attograd" graph squares --model selfattn --format text
text="$("$attograd" graph squares --model selfattn --format text 2>/dev/null)"
expect "text lists attention in a decoder scope" grep -qE '^%[0-9]+ = scaled_dot_product_attention\(%[0-9]+, %[0-9]+, %[0-9]+\) .* decoder\.' <<<"$text"
expect "six decoder attentions" test "$(grep -cE '= scaled_dot_product_attention\(.* decoder\.(self|cross)_attn_heads\.attn_heads\.[0-2]$' <<<"$text")" -eq 6
expect "lines numbered from %0 in order" awk '{ if ($1 != "%" NR - 1) exit 1 }' <<<"$text"
expect "the loss is the last node" grep -qE '^%[0-9]+ = mse_loss\(' <(tail -n 1 <<<"$text")

# DOT: parses, and every node label has "%id op", "shape dtype" and a scope.
check "dot exits 0" 0 "wrote $tmp/g.dot" -- "$attograd" graph squares --model selfattn --format dot --out "$tmp/g.dot"
labels="$(grep -F '[label=' "$tmp/g.dot")"
expect "dot has nodes" test -n "$labels"
expect "every label: op, shape, scope" test -z "$(grep -vE '\[label="%[0-9]+ [a-z_]+[^"\\]*\\n\([0-9,]*\) f(32|64)\\n(\(root\)|[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*)(\\n|")' <<<"$labels")"
expect "clusters nest by module path" grep -qF 'subgraph "cluster_decoder.cross_attn_heads.attn_heads.1"' "$tmp/g.dot"
if command -v dot >/dev/null; then
  expect "graphviz parses the DOT" dot -Tsvg "$tmp/g.dot" -o "$tmp/from_dot.svg"
else
  echo "NOT OK graphviz is missing: tools/setup.sh installs it"
  failures=$((failures + 1))
fi

# SVG, written through a temporary file.
check "svg exits 0" 0 "wrote $tmp/g.svg" -- "$attograd" graph squares --model selfattn --format svg --out "$tmp/g.svg"
expect "svg is an SVG" grep -q "<svg" "$tmp/g.svg"
expect "no temporary left" test ! -e "$tmp/g.svg.tmp"

# Misuse.
check "unknown format" 2 "--format" -- "$attograd" graph squares --format png
check "unknown model" 2 "--model" -- "$attograd" graph squares --model rnn
mkdir "$tmp/taken"
before="$(ls "$tmp")"
check "unwritable --out (dot)" 1 "$tmp/taken" -- "$attograd" graph squares --format dot --out "$tmp/taken"
check "unwritable --out (svg)" 1 "$tmp/taken" -- "$attograd" graph squares --format svg --out "$tmp/taken"
check "unwritable --out (html)" 1 "$tmp/taken" -- "$attograd" graph walkthrough --format html --out "$tmp/taken"
expect "no partial file" test "$(ls "$tmp")" = "$before"
check "html and --trace-backward" 2 "--trace-backward" -- "$attograd" graph walkthrough --format html --trace-backward
check "help shows defaults" 0 "=text" -- "$attograd" graph squares --help
check "--tangent without html" 2 "--format html" -- "$attograd" graph walkthrough --tangent W_query
check "--tangent of no parameter" 1 "its 4 are inputs, W_query, W_key, W_value" -- \
  "$attograd" graph walkthrough --format html --tangent x --out "$tmp/t.html"
expect "no page from a refused --tangent" test ! -e "$tmp/t.html"

# Sentiment, both attention kinds; the trace goes to stderr.
check "sentiment" 0 "scaled_dot_product_attention" -- "$attograd" graph sentiment --heads 2 --format text
check "sentiment trace" 0 "backward summary" -- "$attograd" graph sentiment --format text --trace-backward

# train's inspection flags: the trace of the first step, and anomaly mode naming the op and the
# module where a diverging run (lr 1e30) first makes a NaN/Inf, where the trainer alone says only
# that the loss is not finite.
check "train --trace-backward" 0 "backward summary" -- "$attograd" train squares --epochs 1 --quiet --out "$tmp/trace" --trace-backward
check "train --detect-anomaly names op and scope" 1 "anomaly detected in forward: scaled_dot_product_attention in module scope encoder." -- "$attograd" train squares --epochs 3 --lr 1e30 --quiet --out "$tmp/diverge" --detect-anomaly
check "train --detect-anomaly on a healthy run" 0 "validation MSE" -- "$attograd" train squares --model transformer --epochs 1 --quiet --out "$tmp/healthy" --detect-anomaly

echo "$failures failed"
[ "$failures" -eq 0 ]
