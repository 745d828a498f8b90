#!/usr/bin/env bash
# Installs what the build and the tests need and nothing else. Idempotent: when everything is
# present it only checks, in about a second. Sources of everything:
#   - Debian packages of this machine's suite (apt-get install);
#   - Dear ImGui sources (Debian source package `imgui`) and xsimd >= 13 (Debian's `libxsimd-dev`,
#     header only) from Debian's next suite, fetched through a private apt list into .deps/ so the
#     system is not touched. The mirror is read from this machine's own apt configuration;
#   - playwright-core from npm, pinned by tests/e2e/package-lock.json.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEPS="$ROOT/.deps"
NEXT_SUITE=trixie          # Debian suite that has xsimd 13 and ImGui 1.90
XSIMD_MIN_MAJOR=13

say()  { printf '\033[1m[setup]\033[0m %s\n' "$*"; }
fail() { printf '\033[1;31m[setup] error:\033[0m %s\n' "$*" >&2; exit 1; }

# ---- Debian packages --------------------------------------------------------------------------
PACKAGES=(
  cmake ninja-build g++ clang lld libclang-rt-14-dev   # native builds, libFuzzer, sanitizers
  emscripten                                           # WebAssembly build (3.1.6, uses clang 14)
  libglfw3-dev libgl-dev                               # desktop window
  doctest-dev                                          # unit tests
  libstb-dev                                           # PNG writer (stb_image_write: deflated PNGs)
  chromium                                             # browser tests (driven by playwright-core)
  xvfb x11-apps                                        # desktop test: virtual display, xwd
  fonts-inter fonts-jetbrains-mono                     # fonts embedded in the UI
  python3-fonttools                                    # cuts them down to the glyphs the UI draws
  imagemagick                                          # screenshot checks
  nodejs npm                                           # wasm tests under node, browser tests
  clang-format                                         # style check (tests/style/check_style.mjs)
  dpkg-dev xz-utils ca-certificates                    # unpacking the source package
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# node and npm may come from elsewhere than Debian (e.g. a preinstalled Node.js); accept those.
filtered=()
for p in "${missing[@]}"; do
  case "$p" in
    nodejs) command -v node >/dev/null || filtered+=("$p") ;;
    npm)    command -v npm  >/dev/null || filtered+=("$p") ;;
    *)      filtered+=("$p") ;;
  esac
done
missing=("${filtered[@]}")
if ((${#missing[@]})); then
  [ "$(id -u)" = 0 ] || fail "missing Debian packages (${missing[*]}); run this script as root or install them"
  say "installing Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || fail "apt-get update failed: is a Debian mirror reachable?"
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
    || fail "apt-get install ${missing[*]} failed"
fi

# ---- private apt list for the next suite --------------------------------------------------------
APT="$DEPS/apt"
apt_private() {
  apt-get -o Dir::Etc::sourcelist="$APT/sources.list" -o Dir::Etc::sourceparts=- \
          -o Dir::State::Lists="$APT/lists" -o Dir::Cache="$APT/cache" \
          -o Dir::State::status=/var/lib/dpkg/status -o Debug::NoLocking=1 -o APT::Sandbox::User=root "$@"
}
prepare_private_apt() {
  [ -f "$APT/lists/.updated" ] && return 0
  local mirror
  mirror=$(apt-get indextargets --format '$(REPO_URI)' 2>/dev/null | grep -v -- '-security' | head -n1)
  [ -n "$mirror" ] || fail "could not read a Debian mirror from this machine's apt configuration"
  mkdir -p "$APT/lists/partial" "$APT/cache/archives/partial"
  local key=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -f "$key" ] || fail "$key is missing (package debian-archive-keyring)"
  printf 'deb [signed-by=%s] %s %s main\ndeb-src [signed-by=%s] %s %s main\n' \
    "$key" "$mirror" "$NEXT_SUITE" "$key" "$mirror" "$NEXT_SUITE" >"$APT/sources.list"
  say "reading the $NEXT_SUITE package lists through a private apt list (mirror from apt config)"
  apt_private update -qq >/dev/null || fail "apt-get update of the private $NEXT_SUITE list failed"
  touch "$APT/lists/.updated"
}

# ---- xsimd (header only) ------------------------------------------------------------------------
XSIMD_DIR="$DEPS/include/xsimd"
if [ ! -f "$XSIMD_DIR/xsimd.hpp" ]; then
  prepare_private_apt
  tmp=$(mktemp -d)
  (cd "$tmp" && apt_private download libxsimd-dev >/dev/null) || fail "could not download libxsimd-dev from $NEXT_SUITE"
  deb=$(ls "$tmp"/libxsimd-dev_*.deb)
  ver=$(dpkg-deb -f "$deb" Version)
  [ "${ver%%.*}" -ge "$XSIMD_MIN_MAJOR" ] || fail "libxsimd-dev $ver is older than $XSIMD_MIN_MAJOR"
  dpkg-deb -x "$deb" "$tmp/x"
  mkdir -p "$DEPS/include"
  rm -rf "$XSIMD_DIR" && cp -r "$tmp/x/usr/include/xsimd" "$XSIMD_DIR"
  echo "$ver" >"$XSIMD_DIR/.version"
  rm -rf "$tmp"
  say "xsimd $ver -> .deps/include/xsimd"
fi

# ---- Dear ImGui sources ----------------------------------------------------------------------
IMGUI_DIR="$DEPS/imgui"
if [ ! -f "$IMGUI_DIR/imgui.cpp" ] || [ ! -f "$IMGUI_DIR/backends/imgui_impl_opengl3.cpp" ]; then
  prepare_private_apt
  tmp=$(mktemp -d)
  (cd "$tmp" && apt_private source --download-only imgui >/dev/null 2>&1) \
    || fail "could not download the imgui source package from $NEXT_SUITE"
  orig=$(ls "$tmp"/imgui_*.orig.tar.* | head -n1)
  mkdir -p "$tmp/src" && tar -xf "$orig" -C "$tmp/src"
  top=$(dirname "$(find "$tmp/src" -name imgui.cpp | head -n1)")
  rm -rf "$IMGUI_DIR" && mkdir -p "$IMGUI_DIR/backends"
  cp "$top"/imgui*.cpp "$top"/imgui*.h "$top"/imstb_*.h "$top"/imconfig.h "$IMGUI_DIR/"
  cp "$top"/backends/imgui_impl_glfw.* "$top"/backends/imgui_impl_opengl3.* \
     "$top"/backends/imgui_impl_opengl3_loader.h "$IMGUI_DIR/backends/"
  basename "$orig" >"$IMGUI_DIR/.version"
  rm -rf "$tmp"
  say "Dear ImGui $(cat "$IMGUI_DIR/.version") -> .deps/imgui"
fi

# ---- doctest in a folder of its own (never put /usr/include on the wasm include path) ------------
if [ ! -f "$DEPS/include/doctest/doctest.h" ]; then
  mkdir -p "$DEPS/include/doctest"
  cp /usr/include/doctest/doctest.h "$DEPS/include/doctest/"
fi

# ---- stb_image_write, in the same folder (header only) ----------------------------------------------
if [ ! -f "$DEPS/include/stb/stb_image_write.h" ]; then
  mkdir -p "$DEPS/include/stb"
  cp /usr/include/stb/stb_image_write.h "$DEPS/include/stb/"
fi

# ---- playwright-core for the browser tests ----------------------------------------------------
E2E="$ROOT/tests/e2e"
if [ ! -f "$E2E/node_modules/playwright-core/package.json" ]; then
  say "installing playwright-core (npm ci, pinned by tests/e2e/package-lock.json)"
  (cd "$E2E" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) || fail "npm ci in tests/e2e failed"
fi

say "ok: everything the build and the tests need is present"
