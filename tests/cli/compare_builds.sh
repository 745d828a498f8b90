#!/usr/bin/env bash
# Every module with its defaults in every build given: the reports must be identical apart from
# "timing" (wall clock and what only some builds have), and so must the exit codes (0 or 1, never a
# crash or a refusal) (docs/architecture.md, Numerics: bitwise-identical results for the same seed).
# Then module 1 once more in each build, alone, for plausible fractions of the device's limits
# (roofline_fractions.mjs): a probe that falls short in one build shows only there.
# Usage: compare_builds.sh "REFERENCE K3CLI" "OTHER K3CLI"... (each a command, e.g. "node k3cli.js")
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: compare_builds.sh REFERENCE OTHER..." >&2; exit 2; }
REF=$1; shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mods=$($REF list --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const m of JSON.parse(s).modules)console.log(m.id)})')
n=$(echo "$mods" | grep -c .)
if [ "$n" -eq 0 ]; then echo "compare_builds: '$REF list --json' named no module: nothing compared" >&2; exit 1; fi
fail=0 compared=0
for m in $mods; do
  $REF run "$m" --json >"$tmp/ref.json" 2>"$tmp/ref.err"; rc_ref=$?
  if [ $rc_ref -gt 1 ]; then echo "FAILED $m: the reference build exited $rc_ref: $(head -c 300 "$tmp/ref.err")"; fail=1; continue; fi
  ok=1
  # The other builds run side by side (the machine has more than one core); each is then compared.
  i=0
  for other in "$@"; do
    i=$((i + 1))
    ( $other run "$m" --json >"$tmp/b$i.json" 2>"$tmp/b$i.err"; echo $? >"$tmp/b$i.rc" ) &
  done
  wait
  i=0
  for other in "$@"; do
    i=$((i + 1))
    rc=$(cat "$tmp/b$i.rc")
    if [ $rc -ne $rc_ref ]; then
      echo "DIFFERENT $m: exit $rc_ref in '$REF', $rc in '$other': $(head -c 300 "$tmp/b$i.err")"; fail=1 ok=0; continue
    fi
    if node -e '
        const fs = require("fs");
        const a = JSON.parse(fs.readFileSync(process.argv[1])), b = JSON.parse(fs.readFileSync(process.argv[2]));
        delete a.timing; delete b.timing;
        const sa = JSON.stringify(a), sb = JSON.stringify(b);
        if (sa !== sb) {
          for (let i = 0; i < sa.length; ++i) if (sa[i] !== sb[i]) {
            console.log("  first difference near: reference …" + sa.slice(Math.max(0, i - 80), i + 60) + "…");
            console.log("                              other …" + sb.slice(Math.max(0, i - 80), i + 60) + "…");
            break;
          }
          process.exit(1);
        }' "$tmp/ref.json" "$tmp/b$i.json"; then
      compared=$((compared + 1))
    else
      echo "DIFFERENT $m in '$other'"; fail=1 ok=0
    fi
  done
  [ $ok = 1 ] && echo "same $m in $# other builds"
done
echo "compare_builds: $compared of $((n * $#)) reports identical to the reference"

# Module 1's device roofline in every build, each run alone (side by side, one build's probes would
# measure a core another build is using): every fraction of a limit must be plausible.
here=$(dirname "$0")
for b in "$REF" "$@"; do
  $b run kda --json >"$tmp/kda.json" 2>/dev/null
  if node "$here/roofline_fractions.mjs" "$tmp/kda.json" >"$tmp/fractions.txt"; then
    echo "roofline fractions plausible in '$b'"
  else
    echo "IMPLAUSIBLE roofline fractions in '$b':"; cat "$tmp/fractions.txt"; fail=1
  fi
done
exit $fail
