#!/usr/bin/env bash
# The real `attograd train g2p` / `eval g2p` / `predict g2p` / `graph g2p` programs on pairs made here (spelling
# backwards): a short run writes its files, eval reproduces the last validation PER/WER and writes a
# report (well-formed, rare lengths pooled), predict prints each word's phonemes (as text, tsv or
# json; from arguments, or from stdin as it comes), --resume continues byte-identically; bad input (a
# line without a tab, an empty side, invalid UTF-8, an unknown character, a checkpoint of another
# task, contradicting or bad flags) gives exit 1 or 2 with a message and writes nothing.
set -u
attograd="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

for w in cat dog bird fish horse mouse tiger zebra camel eagle lion wolf bear deer frog goat ox yak emu owl; do
  for s in "" s er y ing; do echo "$w$s"; done
done | bash "$(dirname "${BASH_SOURCE[0]}")/reversal_pairs.sh" >"$work/pairs.tsv"
base=("$attograd" --threads 1 train g2p --quiet --d-model 16 --enc-layers 1 --dec-layers 1 --ff 32 --batch-size 16
  --lr 0.003)
g2p=("${base[@]}" --heads 2 --data "$work/pairs.tsv")

out="$work/run"
check "train g2p" 0 "test (greedy): PER" -- "${g2p[@]}" --epochs 3 --out "$out"
for file in config.json metrics.csv last.safetensors best.safetensors report.svg; do
  expect "wrote $file" test -s "$out/$file"
done
expect "metrics.csv has the PER and WER columns" grep -q "^epoch,train_loss,val_per,val_wer$" "$out/metrics.csv"
expect "a row per epoch" test "$(wc -l <"$out/metrics.csv")" -eq 4
wer="$(tail -n 1 "$out/metrics.csv" | awk -F, '{printf "%.2f", $4}')"
check "graph g2p draws the encoder-decoder's first step (cross-attention included)" 0 \
  "decoder.layers.0.multihead_attn" -- "$attograd" graph g2p --data "$work/pairs.tsv" --batch-size 4 --format text
check "graph g2p --format html writes the step page" 0 "wrote $work/g2p.html" -- \
  "$attograd" graph g2p --data "$work/pairs.tsv" --batch-size 4 --format html --out "$work/g2p.html"
# Forward mode through the whole encoder-decoder (graph --tangent): the loss, the last node, carries a
# tangent; a name that is not a parameter is refused with the names it may have meant.
check "graph g2p --tangent writes the step page" 0 "wrote $work/g2p-tangent.html" -- "$attograd" graph g2p \
  --data "$work/pairs.tsv" --batch-size 4 --format html --tangent src_emb.weight --out "$work/g2p-tangent.html"
expect "the loss carries a tangent" python3 -c '
import json, sys
html = open(sys.argv[1], encoding="utf-8").read()
start = html.index(">", html.index("id=\"step-data\"")) + 1
nodes = json.loads(html[start:html.index("</script>", start)])["nodes"]
sys.exit(0 if nodes[-1]["op"] == "cross_entropy" and nodes[-1]["tangent"]["norm"] > 0 else 1)' "$work/g2p-tangent.html"
check "graph g2p --tangent of no parameter" 1 "did you mean transformer.encoder.layers.0.self_attn.in_proj_weight" -- \
  "$attograd" graph g2p --data "$work/pairs.tsv" --batch-size 4 --format html \
  --tangent encoder.layers.0.self_attn.in_proj_weight --out "$work/bad-tangent.html"
check "eval g2p reproduces the last validation WER" 0 "WER $wer%" -- \
  "$attograd" --threads 1 eval g2p --checkpoint "$out/last.safetensors" --split val --report "$work/report.svg"
expect "eval --report wrote the report" grep -q "<svg" "$work/report.svg"
for svg in "$out/report.svg" "$work/report.svg"; do
  expect "$svg is well-formed XML" python3 -c 'import sys, xml.dom.minidom; xml.dom.minidom.parse(sys.argv[1])' "$svg"
  expect "$svg states how rare lengths are pooled" grep -q "fewer than 10 words are pooled" "$svg"
done
check "predict g2p" 0 "cat	" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" cat dogs
check "predict g2p --beam" 0 "dogs	" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" --beam 3 cat dogs

# --format tsv and json for scripts, and stdin when no words are given: each parses, stdin (CR LF,
# a byte order mark, empty lines, no last newline) gives what the arguments give, a word the model
# cannot read is reported on stderr while the others are pronounced (exit 1), and a pipe sees each
# word's line before stdin ends.
predict=("$attograd" --threads 1 predict g2p --checkpoint "$out/best.safetensors")
words=(cat dogs tigers owl yaking)
"${predict[@]}" "${words[@]}" >"$work/args.txt"
"${predict[@]}" --format tsv "${words[@]}" >"$work/args.tsv"
"${predict[@]}" --format json "${words[@]}" >"$work/args.json"
expect "text and tsv: the same lines" cmp -s "$work/args.txt" "$work/args.tsv"
expect "tsv: WORD<TAB>PHONEMES per word, in order" python3 -c '
import sys
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1], encoding="utf-8")]
ok = [r[0] for r in rows] == sys.argv[2:] and all(len(r) == 2 and r[1] == " ".join(r[1].split()) for r in rows)
sys.exit(0 if ok else 1)' "$work/args.tsv" "${words[@]}"
expect "json: an object per line, as tsv" python3 -c '
import json, sys
objects = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[2], encoding="utf-8")]
sys.exit(0 if [[o["word"], " ".join(o["phonemes"])] for o in objects] == rows else 1)' "$work/args.json" "$work/args.tsv"
printf '%s\n' "${words[@]}" | "${predict[@]}" --format tsv >"$work/stdin.tsv"
expect "stdin: as the arguments" cmp -s "$work/args.tsv" "$work/stdin.tsv"
printf '\xef\xbb\xbfcat\r\ndogs\r\n\ntigers\nowl\n\nyaking' | "${predict[@]}" --format json >"$work/stdin.json"
expect "stdin with CR LF, a BOM, empty lines, no last newline: as the arguments" \
  cmp -s "$work/args.json" "$work/stdin.json"
printf 'cat\rdogs\r\rtigers\rowl\r\nyaking\r' | "${predict[@]}" --format json >"$work/stdin_cr.json"
expect "stdin with lone CRs (old Mac lines) among CR LF: as the arguments" cmp -s "$work/args.json" "$work/stdin_cr.json"
printf 'cat\nQuail\n\ndogs\n' | "${predict[@]}" --format tsv >"$work/mixed.tsv" 2>"$work/mixed.err"
expect "stdin: a word the model cannot read gives exit 1" test "$?" -eq 1
expect "stdin: it is named on stderr, with its character" \
  grep -qF "line 2 of stdin 'Quail': 1 character(s) the model has never seen: 'Q'" "$work/mixed.err"
expect "stdin: the others are pronounced" cmp -s "$work/mixed.tsv" <(grep -E "^(cat|dogs)	" "$work/args.tsv")
check "a capital the model does not know is read as the small letter it knows" 0 \
  "Cat	$(grep "^cat	" "$work/args.tsv" | cut -f2)" -- "${predict[@]}" --format tsv Cat
# The stream runs behind two FIFOs the test owns: bash closes a coprocess's descriptors as soon as
# it exits, so a reply written just before exiting could not be read from a coproc reliably.
mkfifo "$work/to_stream" "$work/from_stream"
"${predict[@]}" --format tsv <"$work/to_stream" >"$work/from_stream" 2>"$work/stream.err" &
stream_pid=$!
exec {to_stream}>"$work/to_stream" {from_stream}<"$work/from_stream"
echo cat >&"$to_stream"
first="" && IFS= read -r -t 120 first <&"$from_stream"
expect "stdin: a word's line comes before stdin ends" test "$first" = "$(head -n 1 "$work/args.tsv")"
echo dogs >&"$to_stream"
exec {to_stream}>&-
second="" && IFS= read -r -t 120 second <&"$from_stream"
wait "$stream_pid"
expect "stdin: the next word after it, exit 0 at the end" test "$?" -eq 0 -a "$second" = "$(sed -n 2p "$work/args.tsv")"
exec {from_stream}<&-

# SIGTERM during a run: exit 143, the step is saved, and --resume ends as an uninterrupted run.
"${g2p[@]}" --epochs 40 --out "$work/straight" >/dev/null 2>&1
signal_when_checkpointed TERM "$work/stopped" "$work/stopped.out" -- "${g2p[@]}" --epochs 40 --out "$work/stopped"
expect "SIGTERM: exit 143" test "$status" -eq 143
check "resume g2p" 0 "test (greedy)" -- "$attograd" --threads 1 train g2p --quiet --resume "$work/stopped"
expect "resumed run: the same last checkpoint as the straight one" \
  cmp -s "$work/straight/last.safetensors" "$work/stopped/last.safetensors"
expect "resumed run: the same metrics" cmp -s "$work/straight/metrics.csv" "$work/stopped/metrics.csv"

# Bad input: exit 1 (runtime) or 2 (usage), a message naming the problem, nothing written.
printf 'cat\tT A C\ndog G O D\n' >"$work/no_tab.tsv"
check "a line without a tab" 1 "no_tab.tsv:2" -- "${base[@]}" --heads 2 --data "$work/no_tab.tsv" --out "$work/bad1"
printf 'cat\t\n' >"$work/empty_side.tsv"
check "an empty target" 1 "empty_side.tsv:1" -- "${base[@]}" --heads 2 --data "$work/empty_side.tsv" --out "$work/bad2"
printf 'ca\xfft\tT A C\n' >"$work/latin1.tsv"
check "invalid UTF-8" 1 "latin1.tsv" -- "${base[@]}" --heads 2 --data "$work/latin1.tsv" --out "$work/bad3"
check "a character the model never saw" 1 "Q" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" cat Quail
check "no words, none on stdin" 1 "no words given" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" \
  </dev/null
check "--format xml" 2 "format" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" --format xml cat
check "--stress with --data" 2 "excludes" -- "${g2p[@]}" --stress --out "$work/bad4"
check "--heads not dividing --d-model" 2 "must divide" -- "${base[@]}" --data "$work/pairs.tsv" --heads 3 --out "$work/bad5"
check "unknown preset" 2 "preset" -- "${g2p[@]}" --preset huge --out "$work/bad6"
check "--beam 0" 2 "beam" -- "$attograd" predict g2p --checkpoint "$out/best.safetensors" --beam 0 cat
"$attograd" --threads 1 train sentiment --epochs 1 --out "$work/sentiment" --quiet >/dev/null 2>&1
check "a checkpoint of another task" 1 "expected 'g2p'" -- \
  "$attograd" eval g2p --checkpoint "$work/sentiment/last.safetensors"
for bad in bad1 bad2 bad3 bad4 bad5 bad6; do expect "nothing written for $bad" test ! -e "$work/$bad"; done
expect "eval --report refuses to overwrite its checkpoint" \
  bash -c "! '$attograd' eval g2p --checkpoint '$out/best.safetensors' --report '$out/best.safetensors' 2>/dev/null"
check "train g2p --help names the presets" 0 "base" -- "$attograd" train g2p --help

echo "$failures failures"
[ "$failures" -eq 0 ]
