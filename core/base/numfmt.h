// Number formatting and strict parsing shared by the JSON writer, the CLI, the URL state and the UI.
// Formatting is deterministic: the shortest decimal that reads back to the same double, laid out as
// ECMAScript's Number::toString does, so the page and the CLI print the same text.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace k3 {

// Shortest round-trip decimal ("43417600", "0.2606", "1e+21"); "NaN"/"Infinity" for non-finite.
std::string format_number(double v);
// Fixed number of significant digits for display ("41.4", "0.261").
std::string format_sig(double v, int digits);
// Integer with thousands separators ("43,417,600").
std::string format_grouped(double v);
// Bytes in binary units with the exact count for small values ("41.41 MiB", "576 B").
std::string format_bytes(double bytes);
// A value with an SI suffix ("1.2 M", "350 k").
std::string format_si(double v, int digits = 3);
// A value in its unit for display: bytes get binary units, fractions get %, others SI.
std::string format_with_unit(double v, std::string_view unit);

// Strict parsers: the whole text must be consumed; no NaN or infinity; surrounding spaces allowed.
std::optional<double> parse_real(std::string_view s);
// Accepts "131072", "1e6", "-3"; rejects fractions ("1.5") and values beyond 2^53.
std::optional<int64_t> parse_integer(std::string_view s);
// true/false, 1/0, yes/no, on/off.
std::optional<bool> parse_flag(std::string_view s);

}  // namespace k3
