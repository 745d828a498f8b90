// Tests that run only in the native release build: whole-module sweeps (every falsifier, the full
// check audit, the defaults run twice) and the step model's refit. Under the sanitizers and in
// WebAssembly they take minutes and reach no code that the light tests, the module runs through the
// CLI (tests/cli/run_modules.sh) and `k3cli audit-checks` do not also reach there; their results are
// the native ones, bit for bit (tests/cli/compare_builds.sh). Use: TEST_CASE("..." * test::native_only()).
#pragma once

#include <doctest/doctest.h>

namespace k3::test {

#if defined(__EMSCRIPTEN__) || defined(__SANITIZE_ADDRESS__)
inline constexpr bool kNativeRelease = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kNativeRelease = false;
#else
inline constexpr bool kNativeRelease = true;
#endif
#else
inline constexpr bool kNativeRelease = true;
#endif

inline doctest::skip native_only() { return doctest::skip(!kNativeRelease); }

}  // namespace k3::test
