#!/usr/bin/env bash
# Desktop test: the native app under a virtual display renders every module to a non-blank PNG, and
# imports a file given with --import.
# Usage: smoke.sh K3EXPLORER K3CLI
set -uo pipefail
APP=$1 K3CLI=$2
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out="$ROOT/build/desktop"
mkdir -p "$out"
disp=:$((90 + RANDOM % 500))
Xvfb "$disp" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null' EXIT
for _ in $(seq 50); do [ -e "/tmp/.X11-unix/X${disp#:}" ] && break; sleep 0.1; done
mods="overview $($K3CLI list --json | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{for(const m of JSON.parse(s).modules)console.log(m.id)})')"
fail=0
for m in $mods; do
  png="$out/$m.png"
  rm -f "$png"
  if [ "$m" = overview ]; then args=(--link "#m=overview"); else args=(--module "$m"); fi
  if ! DISPLAY=$disp timeout 600 "$APP" "${args[@]}" --size 1280x800 --screenshot "$png"; then
    echo "FAIL $m: the app exited with an error"; fail=1; continue
  fi
  if node --input-type=module -e '
      import fs from "node:fs";
      import { decodePng, contentStats } from "'"$ROOT"'/tests/e2e/png.mjs";
      const img = decodePng(fs.readFileSync(process.argv[1]));
      const s = contentStats(img);
      console.log(`${img.width}x${img.height}, ${(s.nonBackground * 100).toFixed(1)} % drawn, ${s.colours} colours`);
      process.exit(img.width === 1280 && img.height === 800 && s.nonBackground > 0.03 && s.colours > 20 ? 0 : 1);
    ' "$png" > "$out/$m.txt"; then
    echo "ok   $m ($(cat "$out/$m.txt"))"
  else
    echo "FAIL $m: blank or wrong-size screenshot ($(cat "$out/$m.txt"))"; fail=1
  fi
done
# --import (as the Import button, or a file dropped on the window): a model's config.json becomes module
# 2's custom model, shown with the link that holds it; a file that does not read changes nothing.
link=$(DISPLAY=$disp timeout 600 "$APP" --import "$ROOT/tests/data/configs/Kimi-K3.config.json" --size 1280x800 \
       --screenshot "$out/import.png" --print-link)
if [[ "$link" == "#m=memory&preset=custom&layers=93"* ]]; then echo "ok   --import of a config.json ($link)"
else echo "FAIL --import of a config.json opened '$link'"; fail=1; fi
link=$(DISPLAY=$disp timeout 600 "$APP" --module memory --import "$ROOT/tests/desktop/smoke.sh" --size 1280x800 \
       --screenshot "$out/import-refused.png" --print-link)
if [ "$link" = "#m=memory" ]; then echo "ok   --import of a file that does not read changes nothing"
else echo "FAIL --import of a file that does not read opened '$link'"; fail=1; fi
exit $fail
