#!/usr/bin/env bash
# Every module with its defaults, natively and in WebAssembly: the reports must be identical apart
# from "timing" (docs/architecture.md, Numerics: bitwise-identical results for the same seed).
# Usage: compare_builds.sh "NATIVE K3CLI" "WASM K3CLI"
set -uo pipefail
A=$1 B=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mods=$($A list --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const m of JSON.parse(s).modules)console.log(m.id)})')
fail=0
for m in $mods; do
  $A run "$m" --json >"$tmp/a.json" 2>/dev/null
  $B run "$m" --json >"$tmp/b.json" 2>/dev/null
  if node -e '
      const fs = require("fs");
      const a = JSON.parse(fs.readFileSync(process.argv[1])), b = JSON.parse(fs.readFileSync(process.argv[2]));
      delete a.timing; delete b.timing;
      const sa = JSON.stringify(a), sb = JSON.stringify(b);
      if (sa !== sb) {
        for (let i = 0; i < sa.length; ++i) if (sa[i] !== sb[i]) {
          console.log("  first difference near: native …" + sa.slice(Math.max(0, i - 80), i + 60) + "…");
          console.log("                           wasm …" + sb.slice(Math.max(0, i - 80), i + 60) + "…");
          break;
        }
        process.exit(1);
      }' "$tmp/a.json" "$tmp/b.json"; then
    echo "same $m"
  else
    echo "DIFFERENT $m"; fail=1
  fi
done
exit $fail
