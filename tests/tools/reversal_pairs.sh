#!/usr/bin/env bash
# Spelling backwards, the g2p tests' toy transduction, small enough to learn in seconds: each word
# read from stdin (one a line) becomes the pair `word<TAB>D R O W` (its letters reversed, in upper
# case, separated by spaces). The one generator of such pairs: tests/tools/g2p_cli_test.sh,
# tools/golden/interop.sh and the C++ tests (tests/reversal_pairs.h) all pipe their words through it.
#   printf 'cat\ndog\n' | tests/tools/reversal_pairs.sh > pairs.tsv
set -euo pipefail
awk '{ printf "%s\t", $0; n = split($0, c, ""); for (i = n; i >= 1; i--) printf "%s%s", toupper(c[i]), (i > 1 ? " " : "\n") }'
