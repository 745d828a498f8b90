// Reader for the Mooncake trace format (tests/data/traces/README.md): one JSON object per line,
//   {"timestamp": ms, "input_length": n, "output_length": m, "hash_ids": [id, ...]}
// with one id per 512-token block of the prompt (the last block may be partial).
//
// Hand-written and bounds-checked: every limit is enforced while reading, a malformed line gives an
// error naming the line, the column and what is wrong, and nothing throws. Unknown keys are skipped
// (values of any JSON type, nested up to a depth limit); blank lines are allowed; a leading UTF-8
// byte-order mark is skipped; lines end with LF, CRLF or CR. Refused besides malformed lines: a trace
// with no request, a request with no prompt token, and a timestamp earlier than the line before.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace k3 {

struct TraceLimits {
    uint64_t max_bytes = uint64_t(256) << 20;  // whole file
    uint32_t max_line_bytes = 1u << 20;
    uint32_t max_requests = 1u << 20;
    uint32_t max_ids_per_request = 1u << 16;  // 32 M tokens at 512 per block
    uint64_t max_total_ids = uint64_t(1) << 26;
    uint32_t block_tokens = 512;
    uint32_t max_output_length = 1u << 24;
    uint32_t max_nesting = 32;  // of skipped unknown values
};

struct TraceRequest {
    double timestamp_ms = 0;
    uint32_t input_length = 0, output_length = 0;
    uint32_t first_id = 0, n_ids = 0;  // hash ids are ids[first_id, first_id + n_ids)
    uint32_t line = 0;                 // 1-based line in the file
};

struct MooncakeTrace {
    std::vector<TraceRequest> requests;
    std::vector<uint64_t> ids;
    uint32_t block_tokens = 512;
    uint64_t prompt_tokens() const;
};

struct TraceResult {
    MooncakeTrace trace;
    std::string error;        // empty on success; otherwise "line N[, column C]: what is wrong" or, when no
                              // line is at fault, what is ("the trace holds no request")
    uint64_t error_line = 0;  // 0 when no line is at fault
    bool ok() const { return error.empty(); }
};

TraceResult parse_mooncake(std::string_view text, const TraceLimits& limits = {});
TraceResult load_mooncake(const std::string& path, const TraceLimits& limits = {});

// Reads a whole regular file, refusing files over max_bytes (before reading when the size is known),
// directories, devices and pipes. Returns false with a message on failure.
bool read_file_bytes(const std::string& path, uint64_t max_bytes, std::string& out, std::string& error);

// The bundled conversation trace of Mooncake (FAST'25), Apache-2.0.
inline constexpr const char* kMooncakeTraceName = "mooncake";
inline constexpr const char* kMooncakeTraceFile = "mooncake_conversation_trace.jsonl";
// Traces a user imports (core/experiments/import.h) are registered as data files under this
// prefix and their file name ("imported:my_trace.jsonl"), which is then the `trace` parameter: a name
// no path on disk is likely to have, and one a link can carry (it then asks for the file again).
inline constexpr const char* kImportedTracePrefix = "imported:";
// Resolves a `trace` parameter: "mooncake" becomes the first readable copy of the bundled trace
// (see the .cpp for the places searched; the web page preloads it at /data/traces/); anything else
// is taken as a path. Returns "" if "mooncake" is not found anywhere.
std::string resolve_trace_path(std::string_view name);
// The text of a `trace` parameter's file: the bytes registered for it (core/base/data_files.h: the
// bundled trace under its file name, which the web page fetches, or an imported trace under its
// name) if any; else for "mooncake" the first copy found on disk, and otherwise the file at the path.
// `source` says where it came from. False with a message naming what is missing otherwise.
bool read_trace_text(std::string_view name, uint64_t max_bytes, std::string& text, std::string& source,
                     std::string& error);
// Places searched for the bundled trace, in order.
std::vector<std::string> bundled_trace_candidates();

}  // namespace k3
