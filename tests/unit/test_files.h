// Test data files (tests/data) for the tests, natively and under node (NODERAWFS).
#pragma once

#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace k3::test {

// The contents of tests/data/<relative> (a test failure if it cannot be read).
inline std::string data_file(const std::string& relative) {
    std::ifstream f(std::string(K3_TEST_DATA) + "/" + relative, std::ios::binary);
    REQUIRE_MESSAGE(f.good(), "cannot read tests/data/" << relative);
    std::ostringstream s;
    s << f.rdbuf();
    return s.str();
}

// `text` with its first `from` replaced by `to` (a test failure if `from` is not in it).
inline std::string replaced(std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE_MESSAGE(at != std::string::npos, "no '" << from << "' to replace");
    return text.replace(at, from.size(), to);
}

}  // namespace k3::test
