#!/usr/bin/env bash
# Crash safety: `attograd train` killed with SIGKILL at 20 moments (0 to ~300 ms after start,
# so the kills land before, between and inside checkpoint writes). After each kill,
# last.safetensors and best.safetensors must load (`attograd eval`, which verifies the checksum)
# and be either the version from before the run or a newer, complete one (a later epoch).
#   crash_test.sh ATTOGRAD        CRASH_TEST_SCALE=4 stretches the delays (sanitizer builds)
set -u
attograd="$1"
scale="${CRASH_TEST_SCALE:-1}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
source "$(dirname "${BASH_SOURCE[0]}")/cli_check.sh"

out="$work/run"
"$attograd" train sentiment --epochs 2 --out "$out" --quiet >/dev/null 2>&1 || { echo "NOT OK first run"; exit 1; }

epoch_of() { grep -ao '"epoch":"[0-9]*"' "$1" | head -n 1 | tr -dc '0-9'; }  # the metadata's epoch

kills_inside=0
for step in $(seq 0 19); do
  for file in last best; do cp "$out/$file.safetensors" "$work/$file.before"; done
  "$attograd" train sentiment --epochs 100000 --resume "$out" --out "$out" --quiet >/dev/null 2>&1 &
  pid=$!
  sleep "$(awk -v s="$step" -v k="$scale" 'BEGIN { printf "%.3f", s * 0.015 * k }')"
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  for file in last best; do
    path="$out/$file.safetensors"
    if ! "$attograd" eval sentiment --checkpoint "$path" >"$work/eval.log" 2>&1; then
      echo "NOT OK kill $step: $file.safetensors does not load: $(cat "$work/eval.log")"
      failures=$((failures + 1))
    elif cmp -s "$path" "$work/$file.before"; then
      echo "OK kill $step: $file.safetensors is the old version (epoch $(epoch_of "$path"))"
    elif [ "$(epoch_of "$path")" -gt "$(epoch_of "$work/$file.before")" ]; then
      echo "OK kill $step: $file.safetensors is a new version (epoch $(epoch_of "$work/$file.before") -> $(epoch_of "$path"))"
      kills_inside=$((kills_inside + 1))
    else
      echo "NOT OK kill $step: $file.safetensors changed but is not newer (epoch $(epoch_of "$path"))"
      failures=$((failures + 1))
    fi
  done
done
# Stale *.tmp.XXXXXX files a kill may leave are never read (each write makes its own, exclusively).
quietly() { "$@" >/dev/null 2>&1; }
expect "a run after the kills resumes and finishes" quietly "$attograd" train sentiment --epochs "$(($(epoch_of "$out/last.safetensors") + 1))" --resume "$out" --out "$out" --quiet
[ "$kills_inside" -gt 0 ] && echo "OK $kills_inside kills came after a new checkpoint" ||
  { echo "NOT OK no kill came late enough to see a new checkpoint (raise CRASH_TEST_SCALE)"; failures=$((failures + 1)); }
echo "crash safety: $failures failed"
[ "$failures" -eq 0 ]
