#include "core/base/numfmt.h"

#include <cfloat>
#include <clocale>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace k3 {

namespace {
// Shortest digits d1..dn and decimal exponent e with v = 0.d1...dn * 10^e (|v| > 0, finite).
void shortest_digits(double v, std::string& digits, int& exp10) {
    char buf[64];
    for (int prec = 1; prec <= 17; ++prec) {
        std::snprintf(buf, sizeof buf, "%.*e", prec - 1, v);
        if (std::strtod(buf, nullptr) == v) break;
    }
    // buf looks like "d.ddddde+XX" (v > 0 here)
    digits.clear();
    const char* p = buf;
    for (; *p && *p != 'e'; ++p)
        if (*p >= '0' && *p <= '9') digits.push_back(*p);
    exp10 = std::atoi(p + 1) + 1;
    while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
}
}  // namespace

std::string format_number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
    if (v == 0) return "0";
    std::string out;
    if (v < 0) {
        out.push_back('-');
        v = -v;
    }
    std::string d;
    int n = 0;
    shortest_digits(v, d, n);
    const int k = int(d.size());
    if (k <= n && n <= 21) {
        out += d;
        out.append(size_t(n - k), '0');
    } else if (0 < n && n <= 21) {
        out += d.substr(0, size_t(n));
        out.push_back('.');
        out += d.substr(size_t(n));
    } else if (-6 < n && n <= 0) {
        out += "0.";
        out.append(size_t(-n), '0');
        out += d;
    } else {
        out.push_back(d[0]);
        if (k > 1) {
            out.push_back('.');
            out += d.substr(1);
        }
        out.push_back('e');
        out.push_back(n - 1 >= 0 ? '+' : '-');
        out += std::to_string(std::abs(n - 1));
    }
    return out;
}

std::string format_sig(double v, int digits) {
    if (!std::isfinite(v)) return format_number(v);
    if (v == 0) return "0";
    const int mag = int(std::floor(std::log10(std::fabs(v))));
    const int decimals = digits - 1 - mag;
    char buf[64];
    if (decimals >= 0 && decimals <= 12 && std::fabs(v) >= 1e-4) {
        std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    } else if (decimals < 0 && mag < 15) {
        std::snprintf(buf, sizeof buf, "%.0f", v);
    } else {
        std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    }
    return buf;
}

std::string trim_zeros(std::string s) {
    const size_t dot = s.find('.');
    if (dot == std::string::npos) return s;
    size_t end = dot + 1;
    while (end < s.size() && s[end] >= '0' && s[end] <= '9') ++end;
    size_t last = end;
    while (last > dot + 1 && s[last - 1] == '0') --last;
    if (last == dot + 1) last = dot;
    return s.substr(0, last) + s.substr(end);
}

std::string format_grouped(double v) {
    if (!std::isfinite(v) || std::fabs(v) >= 1e18) return format_number(v);
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", std::fabs(v));
    std::string s = buf, out;
    const int n = int(s.size());
    for (int i = 0; i < n; ++i) {
        out.push_back(s[size_t(i)]);
        const int left = n - 1 - i;
        if (left > 0 && left % 3 == 0) out.push_back(',');
    }
    return v < 0 ? "-" + out : out;
}

std::string format_bytes(double b) {
    if (!std::isfinite(b)) return format_number(b);
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double a = std::fabs(b);
    int u = 0;
    while (a >= 1024.0 && u < 5) {
        a /= 1024.0;
        ++u;
    }
    char buf[64];
    if (u == 0)
        std::snprintf(buf, sizeof buf, "%.0f B", b);
    else
        std::snprintf(buf, sizeof buf, "%s%.*f %s", b < 0 ? "-" : "",
                      a >= 1000  ? 0
                      : a >= 100 ? 1
                                 : 2,
                      a, units[u]);
    return buf;
}

std::string format_si(double v, int digits) {
    if (!std::isfinite(v)) return format_number(v);
    static const struct {
        double f;
        const char* s;
    } steps[] = {{1e12, " T"}, {1e9, " G"}, {1e6, " M"}, {1e3, " k"}};
    const double a = std::fabs(v);
    for (const auto& st : steps)
        if (a >= st.f) return format_sig(v / st.f, digits) + st.s;
    return format_sig(v, digits);
}

std::string format_with_unit(double v, std::string_view unit) {
    if (unit == "B") return format_bytes(v);
    if (unit == "fraction") return format_sig(v * 100.0, 4) + " %";
    if ((unit == "B/s" || unit == "flop/s") && std::fabs(v) >= 1e3)
        return format_si(v, 4) + std::string(unit);  // "311 GB/s"
    const bool plain = unit == "count" || unit == "ratio" || unit.empty();
    const std::string sfx = plain ? "" : " " + std::string(unit);
    // Whole numbers (counts, tokens, events) read best in full up to ten million.
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e7) return format_grouped(v) + sfx;
    if (std::fabs(v) < 1e4) return format_sig(v, 4) + sfx;
    return format_si(v, 4) + sfx;
}

std::string shown_text(std::string_view s, size_t max) {
    static const char* kHex = "0123456789abcdef";
    std::string out;
    for (size_t i = 0; i < s.size() && i < max; ++i) {
        const unsigned char c = static_cast<unsigned char>(s[i]);
        if (c >= 0x20 && c < 0x7f) {
            out += char(c);
        } else {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        }
    }
    if (s.size() > max) out += "...";
    return out;
}

int hex_digit(char c) {
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

std::optional<double> strtod_c(std::string_view s) {
    const char* point = std::localeconv()->decimal_point;
    const bool swap = point && std::strcmp(point, ".") != 0;
    std::string buf;
    buf.reserve(s.size() + 4);
    for (char c : s) {
        if (c == '.' && swap)
            buf += point;
        else
            buf.push_back(c);
    }
    char* end = nullptr;
    const double v = std::strtod(buf.c_str(), &end);
    if (buf.empty() || end != buf.c_str() + buf.size()) return std::nullopt;
    return v;
}

static std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

// Why `s` (trimmed, not empty) is not a plain decimal number: strtod alone would also take "inf",
// "nan" and hex, and stop at trailing junk.
static std::string not_decimal(std::string_view s) {
    std::string lower;
    for (char c : s) lower.push_back(char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    if (lower.find("0x") != std::string::npos) return "hexadecimal is not accepted; write a decimal number";
    if (lower.find("inf") != std::string::npos || lower.find("nan") != std::string::npos)
        return "not a finite number";
    return "not a decimal number";
}

// Whether the digits before the exponent are all zeros: then a result of 0 is the number typed, and
// otherwise it is an underflow.
static bool zero_mantissa(std::string_view s) {
    for (char c : s) {
        if (c == 'e' || c == 'E') break;
        if (c >= '1' && c <= '9') return false;
    }
    return true;
}

std::optional<double> parse_real(std::string_view s, std::string* why) {
    auto refuse = [&](std::string w) -> std::optional<double> {
        if (why) *why = std::move(w);
        return std::nullopt;
    };
    s = trim(s);
    if (s.empty()) return refuse("empty");
    if (s.size() > 64) return refuse("longer than 64 characters");
    for (char c : s)
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-' || c == '+' || c == 'e' || c == 'E'))
            return refuse(not_decimal(s));
    const auto parsed = strtod_c(s);
    if (!parsed) return refuse(not_decimal(s));
    const double v = *parsed;
    if (!std::isfinite(v)) return refuse("overflows: the largest number is about 1.8e308");
    // Decided on the value, not on errno, which C libraries set differently for denormal results.
    if ((v == 0 && !zero_mantissa(s)) || (v != 0 && std::fabs(v) < DBL_MIN))
        return refuse(std::string(v == 0 ? "underflows to 0" : "underflows to a denormal") +
                      ": numbers closer to 0 than about 2.2e-308 are not held as typed");
    return v + 0.0;  // -0 + 0 is +0
}

std::optional<int64_t> parse_integer(std::string_view s, std::string* why) {
    const auto v = parse_real(s, why);
    const char* problem = nullptr;
    if (!v) return std::nullopt;
    if (*v != std::floor(*v))
        problem = "not an integer";
    else if (std::fabs(*v) >= 9007199254740992.0)
        problem = "2^53 or more in magnitude, where not every integer is exact";
    if (!problem) return int64_t(*v);
    if (why) *why = problem;
    return std::nullopt;
}

std::optional<bool> parse_flag(std::string_view s) {
    s = trim(s);
    if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
    if (s == "0" || s == "false" || s == "no" || s == "off") return false;
    return std::nullopt;
}

}  // namespace k3
