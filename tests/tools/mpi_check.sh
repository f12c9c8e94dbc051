# Sourced by the tests that run the program under mpirun on this host, after cli_check.sh: Open MPI
# set up for a container run as root with more ranks than cores, `mpirun` under a time limit, and
# `same_losses`, which compares two runs' metrics.csv.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # CI runs as root
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
# Under ASan: Open MPI's libraries keep allocations until exit, and LeakSanitizer cannot unwind
# through them (no frame pointers) to match a suppression; the single-process tests leak-check the
# same attograd code.
[ -z "${ASAN_OPTIONS:-}" ] || export ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0"
mpirun() { timeout 300 mpirun --oversubscribe "$@"; }  # the program, under a time limit (timeout runs the binary)

# same_losses NAME A B [LIMIT]: every loss column of A/metrics.csv and B/metrics.csv equal to a
# relative LIMIT (1e-5 unless given); prints the rows side by side and the largest relative difference.
same_losses() {
  local name="$1" a="$2/metrics.csv" b="$3/metrics.csv" limit="${4:-1e-5}"
  if [ ! -s "$a" ] || [ ! -s "$b" ]; then
    echo "NOT OK $name: no metrics.csv ($a, $b)"
    failures=$((failures + 1))
    return
  fi
  paste -d, "$a" "$b" | awk -F, -v name="$name" -v limit="$limit" '
    NR == 1 { half = NF / 2; for (i = 1; i <= half; ++i) loss[i] = ($i ~ /loss|bpc/); print "  " name ": " $0; next }
    { worst_row = 0
      for (i = 1; i <= half; ++i) if (loss[i]) {
        d = $i - $(i + half); if (d < 0) d = -d; r = d / ($i < 0 ? -$i : $i); if (r > worst_row) worst_row = r }
      if (worst_row > worst) worst = worst_row
      printf "  %s  (largest relative difference %.1e)\n", $0, worst_row }
    END { printf "%s %s: largest relative difference %.2e (limit %s)\n",
                 (worst <= limit + 0 ? "OK" : "NOT OK"), name, worst, limit; exit worst > limit + 0 }' ||
    failures=$((failures + 1))
}
