#include "core/fleet/trace.h"

#include "core/base/data_files.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <sys/stat.h>

#include "core/base/numfmt.h"

namespace k3 {

uint64_t MooncakeTrace::prompt_tokens() const {
    uint64_t t = 0;
    for (const auto& r : requests) t += r.input_length;
    return t;
}

namespace {

constexpr uint64_t kMaxSafeInteger = (uint64_t(1) << 53) - 1;  // ids beyond this lose precision in JSON

// Parses one line (one request object). Positions are byte offsets in the line; errors report
// them 1-based as columns.
class LineParser {
  public:
    LineParser(std::string_view s, uint64_t line, const TraceLimits& lim) : s_(s), line_(line), lim_(lim) {}

    bool parse(TraceRequest& r, std::vector<uint64_t>& ids, uint64_t total_ids);
    const std::string& error() const { return error_; }

  private:
    bool fail(std::string msg) {
        if (error_.empty())
            error_ = "line " + std::to_string(line_) + ", column " + std::to_string(p_ + 1) + ": " + msg;
        return false;
    }
    bool at_end() const { return p_ >= s_.size(); }
    char peek() const { return at_end() ? '\0' : s_[p_]; }
    void ws() {
        while (!at_end() && (s_[p_] == ' ' || s_[p_] == '\t' || s_[p_] == '\r' || s_[p_] == '\n')) ++p_;
    }
    // What stands at the current position, for error messages.
    std::string found() const {
        if (at_end()) return "end of line";
        std::string t;
        for (size_t i = p_; i < s_.size() && t.size() < 16; ++i) {
            const unsigned char c = static_cast<unsigned char>(s_[i]);
            if (c >= 0x20 && c < 0x7f)
                t += char(c);
            else {
                char buf[8];
                std::snprintf(buf, sizeof buf, "\\x%02x", c);
                t += buf;
            }
        }
        return "'" + t + (p_ + 16 < s_.size() ? "...'" : "'");
    }
    bool expect(char c, const std::string& context) {
        if (peek() != c) return fail(std::string("expected '") + c + "' " + context + ", found " + found());
        ++p_;
        return true;
    }
    bool string(std::string* out);
    bool number_span(std::string_view& span);
    bool uint_value(const char* field, uint64_t max, uint64_t& v);
    bool skip_value(uint32_t depth);
    bool literal(const char* word) {
        const size_t n = std::strlen(word);
        if (s_.substr(p_, n) != word) return fail("invalid value, found " + found());
        p_ += n;
        return true;
    }

    // The keys a request must have, each once; any other key's value is skipped.
    enum Field { kTimestamp, kInput, kOutput, kIds, kFields };
    static constexpr const char* kFieldNames[kFields] = {"timestamp", "input_length", "output_length",
                                                         "hash_ids"};
    // The parts of parse(), in the order they meet the line; ids_before is ids.size() before this line.
    bool members(TraceRequest& r, std::vector<uint64_t>& ids, size_t ids_before, uint64_t total_ids,
                 bool (&seen)[kFields]);
    bool field_value(int f, TraceRequest& r, std::vector<uint64_t>& ids, size_t ids_before,
                     uint64_t total_ids);
    bool timestamp(double& ms);
    bool hash_ids(std::vector<uint64_t>& ids, size_t ids_before, uint64_t total_ids);
    bool ids_cover_input(const TraceRequest& r);

    std::string_view s_;
    size_t p_ = 0;
    uint64_t line_;
    const TraceLimits& lim_;
    std::string error_;
};

bool LineParser::string(std::string* out) {
    if (!expect('"', "(a string)")) return false;
    while (true) {
        if (at_end()) return fail("unterminated string");
        const unsigned char c = static_cast<unsigned char>(s_[p_]);
        if (c == '"') {
            ++p_;
            return true;
        }
        if (c < 0x20) return fail("control character in a string");
        if (c != '\\') {
            if (out && out->size() < 256) *out += char(c);
            ++p_;
            continue;
        }
        ++p_;
        if (at_end()) return fail("unterminated escape in a string");
        const char e = s_[p_++];
        char decoded = 0;
        switch (e) {
            case '"': decoded = '"'; break;
            case '\\': decoded = '\\'; break;
            case '/': decoded = '/'; break;
            case 'b': decoded = '\b'; break;
            case 'f': decoded = '\f'; break;
            case 'n': decoded = '\n'; break;
            case 'r': decoded = '\r'; break;
            case 't': decoded = '\t'; break;
            case 'u': {
                uint32_t cp = 0;
                for (int i = 0; i < 4; ++i, ++p_) {
                    const int d = hex_digit(peek());
                    if (d < 0) return fail("bad \\u escape in a string");
                    cp = cp * 16 + uint32_t(d);
                }
                // Keys we look for are ASCII; anything else only has to differ from them.
                decoded = cp < 0x80 ? char(cp) : char(0x80);
                break;
            }
            default: --p_; return fail("bad escape in a string");
        }
        if (out && out->size() < 256) *out += decoded;
    }
}

// A JSON number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
bool LineParser::number_span(std::string_view& span) {
    const size_t b = p_;
    auto digits = [&] {
        const size_t d = p_;
        while (!at_end() && s_[p_] >= '0' && s_[p_] <= '9') ++p_;
        return p_ > d;
    };
    if (peek() == '-') ++p_;
    if (peek() == '0')
        ++p_;
    else if (!digits()) {
        p_ = b;
        return fail("expected a number, found " + found());
    }
    if (peek() == '.') {
        ++p_;
        if (!digits()) return fail("expected digits after the decimal point");
    }
    if (peek() == 'e' || peek() == 'E') {
        ++p_;
        if (peek() == '+' || peek() == '-') ++p_;
        if (!digits()) return fail("expected digits in the exponent");
    }
    span = s_.substr(b, p_ - b);
    return true;
}

bool LineParser::uint_value(const char* field, uint64_t max, uint64_t& v) {
    const size_t b = p_;
    std::string_view span;
    if (!number_span(span)) {
        error_.clear();
        p_ = b;
        return fail(std::string(field) + ": expected a non-negative integer, found " + found());
    }
    if (span.find_first_not_of("0123456789") != std::string_view::npos) {
        p_ = b;
        return fail(std::string(field) + ": expected a non-negative integer, found '" + std::string(span) +
                    "'");
    }
    v = 0;
    for (char c : span) {
        v = v * 10 + uint64_t(c - '0');
        if (v > max) {
            p_ = b;
            return fail(std::string(field) + ": " + std::string(span.substr(0, 24)) +
                        " exceeds the limit of " + format_grouped(double(max)));
        }
    }
    return true;
}

bool LineParser::skip_value(uint32_t depth) {
    if (depth > lim_.max_nesting)
        return fail("values nested deeper than " + std::to_string(lim_.max_nesting));
    ws();
    const char c = peek();
    if (c == '"') return string(nullptr);
    if (c == 't') return literal("true");
    if (c == 'f') return literal("false");
    if (c == 'n') return literal("null");
    if (c == '-' || (c >= '0' && c <= '9')) {
        std::string_view span;
        return number_span(span);
    }
    if (c == '[' || c == '{') {
        const char close = c == '[' ? ']' : '}';
        ++p_;
        ws();
        if (peek() == close) {
            ++p_;
            return true;
        }
        while (true) {
            if (c == '{') {
                ws();
                if (!string(nullptr)) return false;
                ws();
                if (!expect(':', "after a key")) return false;
            }
            if (!skip_value(depth + 1)) return false;
            ws();
            if (peek() == ',') {
                ++p_;
                continue;
            }
            if (peek() == close) {
                ++p_;
                return true;
            }
            return fail(std::string("expected ',' or '") + close + "', found " + found());
        }
    }
    return fail("expected a value, found " + found());
}

bool LineParser::parse(TraceRequest& r, std::vector<uint64_t>& ids, uint64_t total_ids) {
    ws();
    if (!expect('{', "at the start of a request object")) return false;
    bool seen[kFields] = {};
    const size_t ids_before = ids.size();
    if (!members(r, ids, ids_before, total_ids, seen)) return false;
    ws();
    if (!at_end()) return fail("unexpected characters after the request object: " + found());
    for (int i = 0; i < kFields; ++i)
        if (!seen[i]) return fail(std::string("missing key '") + kFieldNames[i] + "'");
    r.n_ids = uint32_t(ids.size() - ids_before);
    return ids_cover_input(r);
}

// The object's members after its '{', through its '}'. A key is marked seen before its value is
// parsed, and a duplicate is reported at the key.
bool LineParser::members(TraceRequest& r, std::vector<uint64_t>& ids, size_t ids_before, uint64_t total_ids,
                         bool (&seen)[kFields]) {
    ws();
    if (peek() == '}') {
        ++p_;
        return true;
    }
    while (true) {
        ws();
        const size_t key_at = p_;
        std::string key;
        if (peek() != '"') return fail("expected a key string, found " + found());
        if (!string(&key)) return false;
        ws();
        if (!expect(':', "after the key '" + key + "'")) return false;
        ws();
        int f = -1;
        for (int i = 0; i < kFields; ++i)
            if (key == kFieldNames[i]) f = i;
        if (f >= 0 && seen[f]) {
            p_ = key_at;
            return fail("duplicate key '" + key + "'");
        }
        if (f >= 0) seen[f] = true;
        if (!field_value(f, r, ids, ids_before, total_ids)) return false;
        ws();
        if (peek() == ',') {
            ++p_;
            continue;
        }
        if (peek() == '}') {
            ++p_;
            return true;
        }
        return fail("expected ',' or '}' after the value of '" + key + "', found " + found());
    }
}

// The value of field f (-1: a key we do not use) into r or ids.
bool LineParser::field_value(int f, TraceRequest& r, std::vector<uint64_t>& ids, size_t ids_before,
                             uint64_t total_ids) {
    // input_length is bounded by what the ids of one request can cover.
    const uint64_t max_input = uint64_t(lim_.max_ids_per_request) * lim_.block_tokens;
    uint64_t v = 0;
    switch (f) {
        case kTimestamp: return timestamp(r.timestamp_ms);
        case kInput: {
            const size_t at = p_;
            if (!uint_value("input_length", max_input, v)) return false;
            // Refused rather than served: the first output token comes from the logits of a prefill,
            // and an empty prompt has nothing to prefill (vLLM refuses one too: "The decoder prompt
            // cannot be empty"). The fleet could only wait forever for that first token.
            if (v == 0) {
                p_ = at;
                return fail("input_length: 0; a request needs at least one prompt token");
            }
            r.input_length = uint32_t(v);
            return true;
        }
        case kOutput:
            if (!uint_value("output_length", lim_.max_output_length, v)) return false;
            r.output_length = uint32_t(v);
            return true;
        case kIds: return hash_ids(ids, ids_before, total_ids);
        default: return skip_value(0);
    }
}

// A JSON number of milliseconds in [0, 1e15]; errors point at the value's start.
bool LineParser::timestamp(double& ms) {
    std::string_view span;
    const size_t b = p_;
    if (!number_span(span)) {
        error_.clear();  // number_span's own message gives way to one that names the field
        p_ = b;
        return fail("timestamp: expected a number of milliseconds, found " + found());
    }
    const auto t = parse_real(span);
    if (!t || *t < 0 || *t > 1e15) {
        p_ = b;
        return fail("timestamp: " + std::string(span.substr(0, 24)) +
                    " is not a time in milliseconds in [0, 1e15]");
    }
    ms = *t;
    return true;
}

// The array of block ids, appended to ids, within the per-request and the whole-trace limits.
bool LineParser::hash_ids(std::vector<uint64_t>& ids, size_t ids_before, uint64_t total_ids) {
    if (!expect('[', "(hash_ids is an array of block ids)")) return false;
    ws();
    if (peek() == ']') {
        ++p_;
        return true;
    }
    uint64_t v = 0;
    while (true) {
        ws();
        if (!uint_value("hash_ids", kMaxSafeInteger, v)) return false;
        if (ids.size() - ids_before >= lim_.max_ids_per_request)
            return fail("hash_ids: more than " + format_grouped(lim_.max_ids_per_request) +
                        " ids in one request");
        if (total_ids + (ids.size() - ids_before) >= lim_.max_total_ids)
            return fail("hash_ids: more than " + format_grouped(double(lim_.max_total_ids)) +
                        " ids in the trace");
        ids.push_back(v);
        ws();
        if (peek() == ',') {
            ++p_;
            continue;
        }
        if (peek() == ']') {
            ++p_;
            return true;
        }
        return fail("hash_ids: expected ',' or ']', found " + found());
    }
}

// One id per block_tokens-token block of the input, the last block partial; the error is the
// line's, so it points at column 1.
bool LineParser::ids_cover_input(const TraceRequest& r) {
    const uint64_t need = (uint64_t(r.input_length) + lim_.block_tokens - 1) / lim_.block_tokens;
    if (r.n_ids != need) {
        p_ = 0;
        return fail("hash_ids has " + std::to_string(r.n_ids) + " ids but input_length " +
                    std::to_string(r.input_length) + " needs " + std::to_string(need) + " (one per " +
                    std::to_string(lim_.block_tokens) + "-token block)");
    }
    return true;
}

// The line starting at pos, without its ending; pos moves past the ending. Editors end lines with
// LF, CRLF or a lone CR (classic Mac OS, and some exporters), so each counts as one line ending.
std::string_view next_line(std::string_view text, size_t& pos) {
    const size_t nl = text.find_first_of("\r\n", pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    const std::string_view s = text.substr(pos, end - pos);
    pos = end;
    if (pos < text.size()) pos += text[pos] == '\r' && pos + 1 < text.size() && text[pos + 1] == '\n' ? 2 : 1;
    return s;
}

// Requests in a file are in arrival order. An out-of-order one is refused rather than sorted: module
// 5 replays a trace in file order and the fleet serves it in arrival order, so a file whose two orders
// differ would give two different answers to "what did the cache hold when this request came".
std::string out_of_order(const MooncakeTrace& t, const TraceRequest& r) {
    if (t.requests.empty() || r.timestamp_ms >= t.requests.back().timestamp_ms) return {};
    const TraceRequest& prev = t.requests.back();
    return "line " + std::to_string(r.line) + ": timestamp " + format_number(r.timestamp_ms) +
           " is earlier than " + format_number(prev.timestamp_ms) + " on line " + std::to_string(prev.line) +
           "; requests must be in arrival order (sort the file by timestamp)";
}

}  // namespace

TraceResult parse_mooncake(std::string_view text, const TraceLimits& lim) {
    TraceResult res;
    res.trace.block_tokens = lim.block_tokens;
    if (lim.block_tokens == 0) {
        res.error = "block_tokens must be positive";
        return res;
    }
    if (text.size() > lim.max_bytes) {
        res.error = "input of " + format_grouped(double(text.size())) + " bytes exceeds the limit of " +
                    format_grouped(double(lim.max_bytes));
        return res;
    }
    // A UTF-8 byte-order mark, as some editors write one: not part of line 1's columns.
    size_t pos = text.starts_with("\xEF\xBB\xBF") ? 3 : 0;
    uint64_t line = 0;
    while (pos < text.size()) {
        ++line;
        const std::string_view s = next_line(text, pos);
        if (s.size() > lim.max_line_bytes) {
            res.error = "line " + std::to_string(line) + ": " + format_grouped(double(s.size())) +
                        " bytes, longer than the limit of " + format_grouped(lim.max_line_bytes);
            res.error_line = line;
            return res;
        }
        if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;  // blank line
        if (res.trace.requests.size() >= lim.max_requests) {
            res.error = "line " + std::to_string(line) + ": more than " + format_grouped(lim.max_requests) +
                        " requests";
            res.error_line = line;
            return res;
        }
        TraceRequest r;
        r.first_id = uint32_t(res.trace.ids.size());
        r.line = uint32_t(line);
        LineParser lp(s, line, lim);
        std::string error;
        if (!lp.parse(r, res.trace.ids, res.trace.ids.size()))
            error = lp.error();
        else
            error = out_of_order(res.trace, r);
        if (!error.empty()) {
            res.error = error;
            res.error_line = line;
            res.trace = MooncakeTrace{};
            return res;
        }
        res.trace.requests.push_back(r);
    }
    if (res.trace.requests.empty()) res.error = "the trace holds no request";
    return res;
}

bool read_file_bytes(const std::string& path, uint64_t max_bytes, std::string& out, std::string& error) {
    out.clear();
    if (!disk_files()) {  // not even stat(): see core/base/data_files.h
        error = "cannot open '" + path + "': this build reads no files from disk";
        return false;
    }
    // Only regular files: a directory opens but cannot be read, and a device or a pipe (/dev/zero,
    // /dev/stdin) may never end or give other bytes to the second read (validation reads the file,
    // then the run does). A size known up front is refused before reading anything.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            error = "'" + path + "' is a directory, not a file";
            return false;
        }
        if (!S_ISREG(st.st_mode)) {
            error = "'" + path + "' is not a regular file";
            return false;
        }
        if (uint64_t(st.st_size) > max_bytes) {
            error = "'" + path + "' (" + format_grouped(double(st.st_size)) +
                    " bytes) is larger than the limit of " + format_grouped(double(max_bytes)) + " bytes";
            return false;
        }
    }
    std::FILE* f = std::fopen(path.c_str(), "rb");
    if (!f) {
        error = "cannot open '" + path + "'";
        return false;
    }
    char buf[1 << 16];
    while (true) {
        const size_t n = std::fread(buf, 1, sizeof buf, f);
        if (n == 0) break;
        if (out.size() + n > max_bytes) {
            std::fclose(f);
            error =
                "'" + path + "' is larger than the limit of " + format_grouped(double(max_bytes)) + " bytes";
            return false;
        }
        out.append(buf, n);
    }
    const bool bad = std::ferror(f) != 0;
    std::fclose(f);
    if (bad) {
        error = "error reading '" + path + "'";
        return false;
    }
    return true;
}

TraceResult load_mooncake(const std::string& path, const TraceLimits& lim) {
    std::string text, err;
    if (!read_file_bytes(path, lim.max_bytes, text, err)) {
        TraceResult r;
        r.error = err;
        return r;
    }
    TraceResult r = parse_mooncake(text, lim);
    if (!r.ok()) r.error = path + ": " + r.error;
    return r;
}

std::vector<std::string> bundled_trace_candidates() {
    std::vector<std::string> c;
    const std::string rel = std::string("tests/data/traces/") + kMooncakeTraceFile;
    if (const char* d = std::getenv("K3_DATA_DIR"))
        c.push_back(std::string(d) + "/traces/" + kMooncakeTraceFile);
    c.push_back(rel);          // run from the repository
    c.push_back("../" + rel);  // from build/<dir>
    c.push_back("../../" + rel);
    c.push_back("../../../" + rel);
    // The source tree this file was compiled from (native builds and node runs of the wasm build).
    const std::string self = __FILE__;
    const std::string suffix = "core/fleet/trace.cpp";
    if (self.size() > suffix.size() && self.compare(self.size() - suffix.size(), suffix.size(), suffix) == 0)
        c.push_back(self.substr(0, self.size() - suffix.size()) + rel);
    c.push_back(std::string("/data/traces/") + kMooncakeTraceFile);  // preloaded by the web page
    return c;
}

bool read_trace_text(std::string_view name, uint64_t max_bytes, std::string& text, std::string& source,
                     std::string& error) {
    const std::string registered = name == kMooncakeTraceName ? kMooncakeTraceFile : std::string(name);
    if (const auto bytes = registered_data_file(registered)) {
        if (bytes->size() > max_bytes) {
            error = shown_text(registered) + " is larger than " + std::to_string(max_bytes) + " bytes";
            return false;
        }
        text = *bytes;
        source = registered;
        return true;
    }
    if (name.rfind(kImportedTracePrefix, 0) == 0) {
        error = "trace '" + shown_text(name) + "' was imported in another session: import the file again";
        return false;
    }
    source = resolve_trace_path(name);
    if (source.empty()) {
        error =
            "the bundled Mooncake trace was not found (looked in tests/data/traces/, $K3_DATA_DIR/traces/ "
            "and "
            "the page's data/ folder)";
        return false;
    }
    return read_file_bytes(source, max_bytes, text, error);
}

std::string resolve_trace_path(std::string_view name) {
    if (name != kMooncakeTraceName) return std::string(name);
    if (!disk_files()) return "";
    for (const std::string& p : bundled_trace_candidates()) {
        if (std::FILE* f = std::fopen(p.c_str(), "rb")) {
            std::fclose(f);
            return p;
        }
    }
    return "";
}

}  // namespace k3
