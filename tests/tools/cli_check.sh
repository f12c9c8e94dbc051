# Sourced by the CLI tests: `check` runs a command and compares its exit code and output;
# `expect` records a condition. Both print OK / NOT OK and count failures.
failures=0

check() {  # check NAME EXPECTED_EXIT MESSAGE_PART -- COMMAND...
  local name="$1" expected="$2" part="$3"
  shift 4
  local output
  output="$("$@" 2>&1)"
  local status=$?
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
