#!/usr/bin/env bash
# Bad input to the CLI: exit code 2 and a message that names the offending key or value.
set -uo pipefail
K3CLI=$1
fail=0
# A run that hangs fails (exit 124) instead of stopping the suite.
LIMIT=""
if command -v timeout >/dev/null; then LIMIT="timeout 120"; fi
expect() {  # expect CODE PATTERN ARGS...
  local code=$1 pat=$2; shift 2
  local err rc
  err=$($LIMIT $K3CLI "$@" 2>&1 >/dev/null); rc=$?
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
# Imported files (core/modules/shared/import_file.h): refused naming the field, or the module they fit.
CFG="$(dirname "$0")/../data/configs"
expect 0 "imported Kimi Linear, 27 layers" run memory --import "$CFG/Kimi-Linear-48B-A3B-Instruct.config.json"
expect 2 "a model config.json for module memory, not fleet" run fleet --import "$CFG/Kimi-K3.config.json"
expect 2 "parameter 'preset' given twice" run memory preset=kimi-k3 --import "$CFG/Kimi-K3.config.json"
expect 2 "cannot open" run memory --import /nonexistent/config.json
expect 2 "unknown command" frobnicate

# Odd trace files: refused before the run (exit 2) with the line and what is wrong, or read as
# editors write them (a byte-order mark; LF, CRLF or CR line endings).
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
req() {  # req TIMESTAMP IDS...: one request of 512 tokens a block
  local ts=$1; shift
  local ids; ids=$(IFS=,; echo "$*")
  printf '{"timestamp": %s, "input_length": %d, "output_length": 4, "hash_ids": [%s]}' "$ts" $((512 * $#)) "$ids"
}
printf '\x7fELF\x02\x01\x01\x00\x00\x00\xff\xfe\n\x00\x01' >"$T/binary.jsonl"
{ req 0 1 2; printf '\n'; req 1 1 3 | head -c 40; } >"$T/truncated.jsonl"
{ req 0 1 2; printf '\r\n'; req 1 1 3; printf '\r\n'; } >"$T/crlf.jsonl"
{ printf '\xef\xbb\xbf'; req 0 1 2; printf '\n'; req 1 1 3; printf '\n'; } >"$T/bom.jsonl"
{ req 0 1 2; printf '\r'; req 1 1 3; printf '\r'; } >"$T/cr.jsonl"
{ req 0 1 2; printf '\r\r'; req 1 1 3; printf '\r'; req 2 4 | head -c 30; } >"$T/cr_bad.jsonl"
{ req 0 1 2; printf '\n'; req 1 1 9007199254740993; printf '\n'; } >"$T/huge_id.jsonl"
{ req 0 1 2; printf '\n'; req 5 1 3; printf '\n'; req 3 1 4; printf '\n'; } >"$T/unsorted.jsonl"
printf '{"timestamp": 0, "input_length": 0, "output_length": 10, "hash_ids": []}\n' >"$T/no_prompt.jsonl"
printf '\n  \r\n\n' >"$T/blank.jsonl"
: >"$T/empty.jsonl"
expect 2 "binary.jsonl: line 1, column 1: expected '{' at the start of a request object" run fleet trace="$T/binary.jsonl"
expect 2 "truncated.jsonl: line 2, column 41: unterminated string" run fleet trace="$T/truncated.jsonl"
expect 0 "" run fleet trace="$T/crlf.jsonl"
expect 0 "" run fleet trace="$T/bom.jsonl"
expect 0 "" run fleet trace="$T/cr.jsonl"
expect 2 "cr_bad.jsonl: line 4, column 31: unterminated string" run checkpoints trace="$T/cr_bad.jsonl"
expect 2 "line 2, column .*: hash_ids: 9007199254740993 exceeds the limit" run fleet trace="$T/huge_id.jsonl"
expect 2 "line 3: timestamp 3 is earlier than 5 on line 2" run faults trace="$T/unsorted.jsonl"
expect 2 "line 1, column 34: input_length: 0; a request needs at least one prompt token" \
  run fleet trace="$T/no_prompt.jsonl"
expect 2 "line 1, column 34: input_length: 0" run faults trace="$T/no_prompt.jsonl"
expect 2 "the trace holds no request" run fleet trace="$T/empty.jsonl"
expect 2 "the trace holds no request" run checkpoints trace="$T/blank.jsonl"
expect 2 "is a directory, not a file" run fleet trace="$T"
expect 2 "'/dev/zero' is not a regular file" run fleet trace=/dev/zero
expect 2 "cannot open" run fleet trace="$T/no_such_file.jsonl"
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
tmp=$T/kda
mkdir -p "$tmp/slow" "$tmp/big"
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
