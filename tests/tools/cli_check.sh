# Sourced by the CLI tests: `check` runs a command and compares its exit code and output;
# `expect` records a condition. Both print OK / NOT OK and count failures.
failures=0

check() {  # check NAME EXPECTED_EXIT MESSAGE_PART -- COMMAND...
  local name="$1" expected="$2" part="$3"
  shift 4
  local output
  output="$("$@" 2>&1)"
  local status=$?
  last_output="$output"
  if [ "$status" -eq "$expected" ] && grep -qF -- "$part" <<<"$output"; then
    echo "OK $name"
  else
    echo "NOT OK $name: exit $status (expected $expected), output: $output"
    failures=$((failures + 1))
  fi
}

expect() {  # expect NAME COMMAND...: OK if the command succeeds
  local name="$1"
  shift
  if "$@"; then
    echo "OK $name"
  else
    echo "NOT OK $name"
    failures=$((failures + 1))
  fi
}

signal_when_checkpointed() {  # signal_when_checkpointed SIGNAL FOLDER LOG -- COMMAND...
  # Runs COMMAND in the background (output to LOG), sends SIGNAL once FOLDER/last.safetensors
  # exists, and sets `status` to its exit code.
  local signal="$1" folder="$2" log="$3"
  shift 4
  "$@" >"$log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    [ -s "$folder/last.safetensors" ] && break
    sleep 0.05
  done
  kill "-$signal" "$pid"
  wait "$pid"
  status=$?
}
