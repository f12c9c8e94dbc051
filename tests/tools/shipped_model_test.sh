#!/usr/bin/env bash
# The G2P model shipped in the program (tasks/g2p/shipped/): its file is the one model.json records
# (sha256); `eval g2p` with no --checkpoint decodes the CMUdict test split with it and finds exactly
# the errors model.json records (wrong words, phoneme edits: a guard on decoding), and README.md
# states the same PER and WER; `predict g2p` with no --checkpoint pronounces words and names the
# model on stderr.
#   shipped_model_test.sh ATTOGRAD
set -u
attograd="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
shipped="$root/tasks/g2p/shipped"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

recorded() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$shipped/model.json" "$1"; }

expect "model.safetensors is the file model.json records" \
  test "$(sha256sum "$shipped/model.safetensors" | cut -d' ' -f1)" = "$(recorded sha256)"

"$attograd" --threads 2 eval g2p >"$work/eval.out" 2>"$work/eval.err"
expect "eval g2p without --checkpoint exits 0" test $? -eq 0
expect "eval names the shipped model on stderr" grep -q "eval g2p: the shipped model (" "$work/eval.err"
# "test (greedy): PER 8.52%  WER 34.30% on 12433 words (4264 wrong, 6686 edits over 78486 phonemes); …"
line="$(grep "^test (greedy): PER" "$work/eval.out")"
echo "$line"
for field in words wrong edits phonemes; do
  case $field in
    words) found="$(sed -E 's/.* on ([0-9]+) words.*/\1/' <<<"$line")" ;;
    wrong) found="$(sed -E 's/.*\(([0-9]+) wrong.*/\1/' <<<"$line")" ;;
    edits) found="$(sed -E 's/.* ([0-9]+) edits.*/\1/' <<<"$line")" ;;
    phonemes) found="$(sed -E 's/.* over ([0-9]+) phonemes.*/\1/' <<<"$line")" ;;
  esac
  expect "the test split's $field: $found, as recorded" test "$found" = "$(recorded "test_$field")"
done
per="$(printf '%.2f' "$(recorded test_per)")" wer="$(printf '%.2f' "$(recorded test_wer)")"
expect "eval prints the recorded PER $per% and WER $wer%" grep -q "PER $per%  WER $wer%" <<<"$line"
expect "README.md states the shipped model's PER $per% and WER $wer%" \
  grep -q "PER $per%, WER $wer%" "$root/README.md"

check "predict g2p without --checkpoint pronounces and names the shipped model" 0 "the shipped model (" -- \
  "$attograd" predict g2p attograd kubernetes zelensky
expect "one line per word" test "$(grep -c $'\t' <<<"$last_output")" -eq 3

echo "$failures failures"
[ "$failures" -eq 0 ]
