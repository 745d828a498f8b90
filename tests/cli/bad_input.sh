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
exit $fail
