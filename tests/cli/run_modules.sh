#!/usr/bin/env bash
# Runs every registered module with its defaults through the CLI; fails if any check fails, a check
# lacks a unique snake_case key, the JSON report is malformed, or a module text quotes a figure the
# report does not compute (check_texts.mjs). Usage: run_modules.sh "K3CLI COMMAND"
set -euo pipefail
K3CLI=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
mods=$($K3CLI list --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const m of JSON.parse(s).modules)console.log(m.id)})')
[ -n "$mods" ] || { echo "no modules registered"; exit 1; }
fail=0
for m in $mods; do
  if ! $K3CLI run "$m" --json >"$out/$m.json" 2>"$out/$m.err"; then
    echo "FAIL $m"; cat "$out/$m.err"; fail=1; continue
  fi
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    for (const k of ["module","params","scalars","series","tables","checks","notes","timing"])
      if (!(k in r)) throw new Error("report lacks " + k);
    if (r.module !== process.argv[2]) throw new Error("module id " + r.module);
    if (r.checks.length === 0) throw new Error("module has no checks");
    const keys = new Set();
    for (const c of r.checks) {
      if (!/^[a-z][a-z0-9_]*$/.test(c.key || "")) throw new Error("check without a snake_case key: " + JSON.stringify(c));
      if (keys.has(c.key)) throw new Error("two checks with the key " + c.key);
      keys.add(c.key);
    }
    const bad = r.checks.filter(c => !c.passed);
    if (bad.length) throw new Error("failed checks: " + JSON.stringify(bad));
  ' "$out/$m.json" "$m" || { echo "FAIL $m (report)"; fail=1; continue; }
  echo "ok   $m ($(node -e 'const r=JSON.parse(require("fs").readFileSync(process.argv[1]));console.log(r.checks.length+" checks")' "$out/$m.json"))"
done
$K3CLI list --json >"$out/list.json"
node "$(dirname "$0")/check_texts.mjs" "$out/list.json" "$out" || fail=1
exit $fail
