#!/usr/bin/env bash
# Everything, from a clean checkout: installs what is missing, builds native, sanitizer (with the
# fuzz targets) and WebAssembly, and runs every test. Prints the duration of each stage and a
# summary; exits non-zero if anything failed. (.ci/run calls this through scripts/k3 test.)
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
export NODE_PATH=/usr/share/nodejs
FUZZ_SECONDS=${K3_FUZZ_SECONDS:-15}

declare -a NAMES TIMES RESULTS
failed=0
stage() {  # stage NAME COMMAND...
  local name=$1; shift
  printf '\n\033[1;34m==== %s\033[0m\n' "$name"
  local t0=$SECONDS
  if "$@"; then RESULTS+=("ok"); else RESULTS+=("FAILED"); failed=1; fi
  NAMES+=("$name"); TIMES+=($((SECONDS - t0)))
}
configure() { [ -f "build/$1/build.ninja" ] || cmake --preset "$1" "${@:2}" >/dev/null; }
build() { configure "$@" && cmake --build --preset "$1"; }
ctest_in() { (cd "build/$1" && ctest -j2 --output-on-failure --timeout 900 "${@:2}"); }

stage "set-up" scripts/setup.sh
stage "style (clang-format, columns, function lengths, include layers, citations)" node tests/style/check_style.mjs
stage "build native (release: core, CLI, desktop app, tests)" build native
stage "test native (unit, modules through the CLI, bad input)" ctest_in native
stage "hostile input (every parameter at and past its extremes, odd traces and golden folders)" \
      node tests/cli/hostile.mjs build/native/core/k3cli --quick --jobs 2
stage "build asan (clang -O1: AddressSanitizer + UBSan, libFuzzer targets)" build asan -DK3_FUZZ_SECONDS="$FUZZ_SECONDS"
stage "test asan (unit, modules through the CLI, bad input)" ctest_in asan -E '^fuzz_'
stage "fuzz (bounded, ${FUZZ_SECONDS}s per target, under ASan + UBSan)" ctest_in asan -R '^fuzz_'
stage "build wasm (SIMD: page, CLI, tests)" build wasm
stage "test wasm (unit tests and modules under node)" ctest_in wasm
# The same k3cli with the scalar kernels and with AVX2 kernels (where the machine has AVX2), built with
# the native build (core/CMakeLists.txt), and WebAssembly: "the same bits in every build" is measured.
OTHER_BUILDS=(build/native/core/k3cli-scalar "node --no-experimental-fetch build/wasm/core/k3cli.js")
grep -qw avx2 /proc/cpuinfo && OTHER_BUILDS+=(build/native/core/k3cli-x86-64-v3)
stage "every build gives identical reports (native, scalar, AVX2, wasm)" tests/cli/compare_builds.sh \
      build/native/core/k3cli "${OTHER_BUILDS[@]}"
stage "browser (headless chromium + playwright-core)" node tests/e2e/page.test.mjs build/wasm/web build/native/core/k3cli
stage "desktop (native app under Xvfb)" tests/desktop/smoke.sh build/native/ui/k3explorer build/native/core/k3cli

printf '\n\033[1m%-58s %8s  %s\033[0m\n' "stage" "seconds" "result"
total=0
for i in "${!NAMES[@]}"; do
  printf '%-58s %8s  %s\n' "${NAMES[$i]}" "${TIMES[$i]}" "${RESULTS[$i]}"
  total=$((total + TIMES[i]))
done
printf '%-58s %8s\n' "total" "$total"
[ $failed = 0 ] && printf '\n\033[1;32mall tests passed\033[0m\n' || printf '\n\033[1;31msome stages failed\033[0m\n'
exit $failed
