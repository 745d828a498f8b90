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
// The trailing zeros of the first number in `s` removed ("25.0 %" -> "25 %", "1.50 GiB" -> "1.5 GiB").
std::string trim_zeros(std::string s);
// Integer with thousands separators ("43,417,600").
std::string format_grouped(double v);
// A count with thousands separators ("1,234,567").
inline std::string format_count(uint64_t n) { return format_grouped(double(n)); }
// Bytes in binary units with the exact count for small values ("41.41 MiB", "576 B").
std::string format_bytes(double bytes);
// A value with an SI suffix ("1.2 M", "350 k").
std::string format_si(double v, int digits = 3);
// A value in its unit for display: bytes get binary units, fractions get %, others SI.
std::string format_with_unit(double v, std::string_view unit);
// Untrusted text quoted in a message: printable ASCII as is, other bytes as \xNN, at most `max`
// characters of the original ("...", when cut), so a binary file or link stays a readable message.
std::string shown_text(std::string_view s, size_t max = 60);

// 0 to 15 for a hexadecimal digit ('0'-'9', 'a'-'f', 'A'-'F'), -1 for any other character.
int hex_digit(char c);

// strtod's correctly rounded value of the whole of `s`, with '.' as the decimal point whatever the C
// locale (strtod follows LC_NUMERIC, which a host program may set): nullopt unless strtod takes every
// character. It takes what strtod takes ("inf", hex): callers check the characters first.
std::optional<double> strtod_c(std::string_view s);

// Strict parsers: the whole text must be a decimal number (surrounding spaces allowed) that a double
// holds as typed, up to rounding: no NaN, infinity, hex or trailing junk, and nothing that overflows
// ("1e400") or underflows to 0 or to a denormal ("1e-400", "1e-310"), which would be another number
// than the one given. "-0" reads as 0. A refusal says why in `why` (when given), in words that follow
// "bad value 'X': ", such as "underflows to 0".
std::optional<double> parse_real(std::string_view s, std::string* why = nullptr);
// Accepts "131072", "1e6", "-3"; rejects fractions ("1.5") and magnitudes from 2^53 on, where not
// every integer is a double (9007199254740993 would read as ...992).
std::optional<int64_t> parse_integer(std::string_view s, std::string* why = nullptr);
// true/false, 1/0, yes/no, on/off.
std::optional<bool> parse_flag(std::string_view s);

}  // namespace k3
