#!/usr/bin/env bash
# `attograd walkthrough` against the numbers seed 003's notebook prints (typed in here from the
# notebook, independent of the program): each must appear within 2e-4 (the seed's weights are
# printed rounded to 4 decimals, so its results are reproduced to about that), and no
# finite-difference check may say NOT OK. Prints OK / NOT OK per case.
set -u
attograd="$1"
failures=0
output="$("$attograd" walkthrough 2>&1)"
status=$?

report() {  # report NAME CONDITION_STATUS [DETAIL]
  if [ "$2" -eq 0 ]; then echo "OK $1"; else echo "NOT OK $1 ${3:-}"; failures=$((failures + 1)); fi
}

# near HEADER ROWS EXPECTED...: the numbers in the ROWS lines after the line starting with HEADER
# equal EXPECTED within 2e-4 (the first such line: the forward pass).
near() {
  local header="$1" rows="$2"
  shift 2
  local actual
  actual="$(grep -m1 -A"$rows" -F -- "$header" <<<"$output" | tail -n "$rows" | sed 's/dtype=f64//' |
    grep -oE -- '-?[0-9]+\.[0-9]+(e[-+][0-9]+)?|-?inf' | tr '\n' ' ')"
  awk -v actual="$actual" -v expected="$*" 'BEGIN {
    n = split(actual, a, " "); m = split(expected, e, " ");
    if (n != m) exit 1;
    for (i = 1; i <= n; ++i) {
      if (a[i] == e[i]) continue;
      d = a[i] - e[i]; if (d < 0) d = -d;
      if (d > 2e-4) exit 1;
    }
  }'
  report "$header" $? "got: $actual expected: $*"
}

report "exit status 0" "$status" "(exit $status)"
near "W_query =" 3 0.2961 0.5166 0.2517 0.6886 0.0740 0.8665
near "query_2 = inputs[1] @ W_query" 1 0.4306 1.4551
near "key_2 =" 1 0.4433 1.1419
near "value_2 =" 1 0.3951 1.0037
near "attn_scores = queries @ keys.T" 6 \
  0.9231 1.3545 1.3241 0.7910 0.4032 1.1330 1.2705 1.8524 1.8111 1.0795 0.5577 1.5440 \
  1.2544 1.8284 1.7877 1.0654 0.5508 1.5238 0.6973 1.0167 0.9941 0.5925 0.3061 0.8475 \
  0.6114 0.8819 0.8626 0.5121 0.2707 0.7307 0.8995 1.3165 1.2871 0.7682 0.3937 1.0996
near "attn_weights_2 = softmax" 1 0.1500 0.2264 0.2199 0.1311 0.0906 0.1820
near "context_vec_2 = attn_weights_2 @ values" 1 0.3061 0.8210
near "context (all tokens, SelfAttention_v1)" 6 \
  0.2996 0.8053 0.3061 0.8210 0.3058 0.8203 0.2948 0.7939 0.2927 0.7891 0.2990 0.8040
near "calc_keys = x @ wk" 3 -6.6988 -7.7515 2.1643 4.8921 15.1472 -2.8751 \
  7.4296 -2.3733 -4.4848 0.9557 13.9021 -8.3648 0.1044 -1.4464 -0.3315 0.8354 4.1499 -1.6057
near "calc_queries = x @ wq" 3 -0.2365 -0.4841 3.7703 1.4909 4.3061 -2.3338 \
  3.4404 -3.1496 8.2907 2.3808 -0.1789 -6.0977 0.4577 -0.5191 1.7230 0.5531 0.5896 -1.2045
near "calc_values = x @ wv" 3 0.8367 3.2513 5.1307 4.1028 -2.6025 15.1535 \
  10.0693 8.0278 5.0522 1.1059 -4.7524 8.9916 1.5580 1.6113 1.4547 0.7441 -1.0507 3.4493
near "attn_score = queries_grp @ keys_grp.transpose(2, 3)" 7 \
  13.4968 -17.5172 -0.5743 19.3111 -4.1464 2.1664 4.6869 -3.0948 0.2274 \
  79.2289 80.8105 22.8628 26.4688 50.7943 11.0376 15.0997 18.8007 4.8429
near "attn_score.masked_fill" 7 \
  13.4968 -inf -inf 19.3111 -4.1464 -inf 4.6869 -3.0948 0.2274 \
  79.2289 -inf -inf 26.4688 50.7943 -inf 15.0997 18.8007 4.8429

checks="$(grep -c '^finite differences: OK\|: OK (max' <<<"$output")"
[ "$checks" -eq 13 ]
report "13 checks say OK (11 gradients, the causal renormalisation, the fused attention)" $? "(found $checks)"
! grep -q "NOT OK" <<<"$output"
report "no line says NOT OK" $?
# --jacobian: seed 003's context (6, 2) differentiated with respect to its 36 input elements both ways;
# d context[0,0] / d inputs from PyTorch (torch.autograd.functional.jacobian of the same function, f64,
# the printed weights), typed in here.
output="$("$attograd" walkthrough --notebook 003 --jacobian 2>&1)"
status=$?
report "--jacobian: exit status 0" "$status" "(exit $status)"
grep -q "36 JVPs, one per input element" <<<"$output"
report "--jacobian: 36 JVPs" $?
grep -q "12 VJPs, one per output element" <<<"$output"
report "--jacobian: 12 VJPs" $?
near "  d context[0,0] / d inputs" 6 0.0196 0.0508 0.0223 0.0180 0.0785 0.0367 0.0174 0.0760 0.0351 \
  0.0098 0.0396 0.0118 0.0065 0.0244 0.0033 0.0140 0.0593 0.0237
"$attograd" walkthrough --jacobian >/dev/null 2>&1
status=$?
report "--jacobian without --notebook 003: usage error (exit 2)" $((status != 2)) "(exit $status)"

exit $((failures > 0))
