#!/usr/bin/env bash
# Bad input to the CLI: exit code 2 and a message that names the offending key or value.
set -uo pipefail
K3CLI=$1
fail=0
expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pat=$2; shift 2
  local err rc
  err=$($K3CLI "$@" 2>&1 >/dev/null); rc=$?
  if [ "$rc" != "$code" ] || ! grep -q -- "$pat" <<<"$err"; then
    echo "FAIL: k3cli $* -> exit $rc, stderr: $err (expected exit $code and '$pat')"; fail=1
  else
    echo "ok   k3cli $* -> $rc"
  fi
}
expect 2 "unknown module 'nosuch'" run nosuch
expect 2 "unknown parameter 'contxt'" run memory contxt=5
expect 2 "bad value 'abc' for parameter 'context'" run memory context=abc
expect 2 "out of range" run memory context=0
expect 2 "bad value '1.5' for parameter 'context'" run memory context=1.5
expect 2 "expected one of" run memory preset=gpt5
expect 2 "bad value 'nan'" run memory budget_gib=nan
expect 2 "must be a multiple" run memory preset=custom heads=3 v_heads=4
expect 2 "bad argument" run memory --frobnicate
expect 2 "unknown command" frobnicate
# A repeated key is refused, not settled by the last value.
expect 2 "parameter 'instances' given twice (instances=4, instances=8)" run fleet instances=4 instances=8
# Numbers a double does not hold as typed, and text that is not a decimal number.
expect 2 "bad value '1e-400' for parameter 'attn_every': underflows to 0" run memory attn_every=1e-400
expect 2 "bad value '1e-310' for parameter 'prefix_share': underflows to a denormal" run pool prefix_share=1e-310
expect 2 "bad value '1e400' for parameter 'prefix_share': overflows" run pool prefix_share=1e400
expect 2 "bad value '-1e400' for parameter 'instances': overflows" run fleet instances=-1e400
expect 2 "bad value '0x10' for parameter 'instances': hexadecimal" run fleet instances=0x10
expect 2 "bad value '8abc' for parameter 'instances': not a decimal number" run fleet instances=8abc
expect 2 "bad value 'inf' for parameter 'prefix_share': not a finite number" run pool prefix_share=inf
expect 2 "bad value '-0' for parameter 'instances': out of range" run fleet instances=-0
expect 2 "bad value '9007199254740993' for parameter 'seed': 2^53 or more" run pool seed=9007199254740993

# kda-check sizes the work from meta.txt before reading: folders that declare more than the run limits
# (10 s, 1 GiB) are refused with the estimate. Only meta.txt is written, so a kda-check that went on to
# read would fail on the missing q.f32 (another message) instead of running for minutes.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/slow" "$tmp/big"
printf 'B 1\nT 200000\nH 1\nHV 1\nK 128\nV 128\nscale 0.088\ninitial_state 0\n' >"$tmp/slow/meta.txt"
printf 'B 4\nT 10000000\nH 1\nHV 1\nK 1\nV 1\nscale 1\ninitial_state 0\n' >"$tmp/big/meta.txt"
expect 2 "slow: checking would take about .* s .*more than the run limit of 10 s" kda-check "$tmp/slow"
expect 2 "big: checking would hold about .* GiB .*more than the run limit of 1.00 GiB" kda-check "$tmp/big"
# The bundled folders are within the limits and pass.
golden=$(dirname "$0")/../data/golden
if out=$($K3CLI kda-check "$golden"/kda/t* "$golden"/kda_bounded/t* 2>&1); then
  echo "ok   k3cli kda-check (bundled folders) -> 0"
else
  echo "FAIL: k3cli kda-check on the bundled folders -> exit $?: $out"; fail=1
fi
exit $fail
