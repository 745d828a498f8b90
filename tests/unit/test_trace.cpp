// Mooncake trace reader, workload generators, and the conversation-trace figures of
// tests/data/traces/README.md reproduced through the radix cache.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "core/base/rng.h"
#include "core/fleet/trace.h"
#include "core/fleet/trace_reference.h"
#include "core/fleet/workload.h"
#include "core/fleet/workload_replay.h"

using namespace k3;

namespace {
// Distinct values in v.
template <class T>
size_t distinct(std::vector<T> v) {
    std::sort(v.begin(), v.end());
    return size_t(std::unique(v.begin(), v.end()) - v.begin());
}
}  // namespace

static const std::string kTrace = std::string(K3_TEST_DATA) + "/traces/mooncake_conversation_trace.jsonl";

TEST_CASE("trace reader: well-formed lines") {
    const auto r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [0, 1]}\n"
        "\r\n"
        "  {\"hash_ids\":[0,2,3],\"input_length\":1025,\"output_length\":0,\"timestamp\":12.5,"
        "\"extra\":{\"a\":[1,2,{\"b\":null}],\"s\":\"x\\\"y\\u0041\"}}\r\n"
        "{\"timestamp\": 13, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [4]}");
    REQUIRE_MESSAGE(r.ok(), r.error);
    REQUIRE(r.trace.requests.size() == 3);
    CHECK(r.trace.requests[1].timestamp_ms == 12.5);
    CHECK(r.trace.requests[1].input_length == 1025);
    CHECK(r.trace.requests[1].n_ids == 3);
    CHECK(r.trace.requests[1].line == 3);
    CHECK(r.trace.ids == std::vector<uint64_t>{0, 1, 0, 2, 3, 4});
    CHECK(r.trace.prompt_tokens() == 2026);
}

TEST_CASE("trace reader: a malformed line gets an error naming the line") {
    const std::string ok =
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}\n";
    struct Bad {
        std::string line, expect;
    };
    const Bad bad[] = {
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}", "missing key 'hash_ids'"},
        {"{\"timestamp\": 0, \"input_length\": -10, \"output_length\": 5, \"hash_ids\": [7]}",
         "input_length: expected a non-negative integer"},
        {"{\"timestamp\": 0, \"input_length\": 10.5, \"output_length\": 5, \"hash_ids\": [7]}",
         "input_length: expected a non-negative integer, found '10.5'"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": "
         "[7]}",
         "duplicate key 'input_length'"},
        {"{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [7]}",
         "hash_ids has 1 ids but input_length 1000 needs 2"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]} x",
         "unexpected characters after the request object"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7,]}",
         "hash_ids: expected a non-negative integer"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7}",
         "expected ',' or ']'"},
        {"{\"timestamp\": \"0\", \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}",
         "timestamp: expected a number"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7], \"x\": \"abc}",
         "unterminated string"},
        {"[1, 2]", "expected '{' at the start"},
        {"{\"timestamp\": 0 \"input_length\": 10}", "expected ',' or '}' after the value of 'timestamp'"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": "
         "[99999999999999999999]}",
         "exceeds the limit"},
        {"{\"timestamp\": 1e999, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}",
         "timestamp:"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7], \"x\": tru}",
         "invalid value"},
        {"{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7], \"x\": "
         "[[[[[[[[[[[[[[[[[[["
         "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
         "nested deeper than"},
        {std::string(
             "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7], \"x\": \"a") +
             char(1) + "\"}",
         "control character"},
        {"{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 10, \"hash_ids\": []}",
         "column 34: input_length: 0; a request needs at least one prompt token"},
        {std::string("\x7f\x45\x4c\x46\x02\x01\x00\x00", 8), "expected '{' at the start"},
    };
    for (const Bad& b : bad) {
        CAPTURE(b.line);
        const auto r = parse_mooncake(ok + ok + b.line + "\n" + ok);
        CHECK_FALSE(r.ok());
        CHECK(r.error_line == 3);
        CHECK(r.error.rfind("line 3, column ", 0) == 0);
        CHECK_MESSAGE(r.error.find(b.expect) != std::string::npos, r.error);
        CHECK(r.trace.requests.empty());
    }
}

TEST_CASE("trace reader: a byte-order mark, LF, CRLF and CR line endings, with the lines counted right") {
    const std::string ok =
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}";
    const std::string bad = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5}";
    // Line 5 is malformed, after lines ended by LF, CRLF, CR and CR (a blank line).
    const std::string body = ok + "\n" + ok + "\r\n" + ok + "\r" + "\r" + bad + "\r\n" + ok;
    for (const std::string& text : {body, "\xEF\xBB\xBF" + body}) {
        const auto r = parse_mooncake(text);
        CHECK(r.error_line == 5);
        CHECK(r.error == "line 5, column 57: missing key 'hash_ids'");
    }
    const std::string good = "\xEF\xBB\xBF" + ok + "\r" + ok + "\r\n\n" + ok + "\r";
    const auto r = parse_mooncake(good);
    REQUIRE_MESSAGE(r.ok(), r.error);
    REQUIRE(r.trace.requests.size() == 3);
    CHECK(r.trace.requests[1].line == 2);
    CHECK(r.trace.requests[2].line == 4);
    // A byte-order mark elsewhere is not whitespace.
    CHECK(parse_mooncake(ok + "\n\xEF\xBB\xBF" + ok).error.rfind("line 2, column 1: expected '{'", 0) == 0);
}

TEST_CASE("trace reader: no request, or requests out of arrival order, are refused") {
    for (const char* text : {"", "\n", "  \r\n\t\r", "\xEF\xBB\xBF"}) {
        const auto r = parse_mooncake(text);
        CHECK(r.error == "the trace holds no request");
        CHECK(r.error_line == 0);
    }
    const auto r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1]}\n"
        "{\"timestamp\": 5.5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [2]}\n\n"
        "{\"timestamp\": 5.5, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [3]}\n"
        "{\"timestamp\": 3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [4]}\n");
    CHECK(r.error_line == 5);
    CHECK(r.error ==
          "line 5: timestamp 3 is earlier than 5.5 on line 4; requests must be in arrival order (sort the "
          "file by timestamp)");
    CHECK(r.trace.requests.empty());
}

TEST_CASE("trace reader: directories, devices and files over the size limit are refused before reading") {
    auto error_of = [](const std::string& path, const TraceLimits& lim) {
        return load_mooncake(path, lim).error;
    };
    CHECK(error_of(K3_TEST_DATA, {}) == std::string("'") + K3_TEST_DATA + "' is a directory, not a file");
    TraceLimits lim;
    lim.max_bytes = 1000;
    CHECK(error_of(kTrace, lim) ==
          "'" + kTrace + "' (3,029,533 bytes) is larger than the limit of 1,000 bytes");
    if (std::FILE* f = std::fopen("/dev/zero", "rb")) {  // POSIX systems
        std::fclose(f);
        CHECK(error_of("/dev/zero", {}) == "'/dev/zero' is not a regular file");
    }
}

TEST_CASE("trace reader: limits are enforced") {
    TraceLimits lim;
    lim.max_line_bytes = 64;
    auto r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 5, \"hash_ids\": [7]}", lim);
    CHECK(r.error == "line 1: 73 bytes, longer than the limit of 64");
    lim = {};
    lim.max_ids_per_request = 2;
    r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1500, \"output_length\": 5, \"hash_ids\": [1, 2, 3]}", lim);
    CHECK(r.error.find("input_length: 1500 exceeds the limit of 1,024") != std::string::npos);
    lim = {};
    lim.max_total_ids = 3;
    r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1, 2]}\n"
        "{\"timestamp\": 0, \"input_length\": 1000, \"output_length\": 5, \"hash_ids\": [1, 2]}",
        lim);
    CHECK(r.error_line == 2);
    CHECK(r.error.find("more than 3 ids in the trace") != std::string::npos);
    lim = {};
    lim.max_requests = 1;
    r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 5, \"hash_ids\": [1]}\n"
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 5, \"hash_ids\": [1]}",
        lim);
    CHECK(r.error == "line 2: more than 1 requests");
    lim = {};
    lim.max_bytes = 10;
    CHECK_FALSE(parse_mooncake("{\"timestamp\": 0, \"input_length\": 1}", lim).ok());
    CHECK_FALSE(load_mooncake("/nonexistent/trace.jsonl").ok());
}

TEST_CASE("Mooncake workload: block ids expand to pseudo-tokens, the last block truncated") {
    const auto r = parse_mooncake(
        "{\"timestamp\": 5, \"input_length\": 600, \"output_length\": 5, \"hash_ids\": [3, 4]}\n"
        "{\"timestamp\": 6, \"input_length\": 700, \"output_length\": 5, \"hash_ids\": [3, 9]}\n");
    REQUIRE(r.ok());
    const Workload w = mooncake_workload(r.trace);
    REQUIRE(w.requests.size() == 2);
    const auto& a = *w.requests[0].tokens;
    CHECK(a.size() == 600);
    CHECK(a.at(0) == pseudo_token(mooncake_block_key(3), 0));
    CHECK(a.at(511) == pseudo_token(mooncake_block_key(3), 511));
    CHECK(a.at(512) == pseudo_token(mooncake_block_key(4), 0));
    CHECK(common_prefix(a, *w.requests[1].tokens, 0, 600) == 512);
    CHECK(w.requests[1].arrival_ms == 6);
    CHECK_FALSE(w.requests[0].output_known);
    CHECK(w.requests[0].cache_len() == 600);
}

TEST_CASE("Mooncake workload: distinct block ids share no token, even where their pseudo-token values do") {
    // Blocks 17348 and 26151 expand to streams whose first tokens have the same 32-bit value.
    const auto r = parse_mooncake(
        "{\"timestamp\": 0, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [17348]}\n"
        "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [26151]}\n");
    REQUIRE(r.ok());
    const Workload w = mooncake_workload(r.trace);
    const TokenSeq &a = *w.requests[0].tokens, &b = *w.requests[1].tokens;
    REQUIRE(a.at(0) == b.at(0));
    CHECK(common_prefix(a, b, 0, 1) == 0);
    CHECK(a.id_at(0) != b.id_at(0));
    WorkloadReplay two(w, {});
    two.run();
    CHECK(two.totals().kv_hit_tokens == 0);
    CHECK(trace_reference_hits(r.trace, 512).kv_hit_tokens == 0);

    // Many one-token requests, a quarter of them repeating an earlier block: the tree counts exactly
    // the block-level hits although some distinct blocks share their first value.
    MooncakeTrace t;
    Rng rng(3);
    for (uint32_t i = 0; i < 200000; ++i) {
        const bool repeat = i > 0 && rng.below(4) == 0;
        t.requests.push_back({double(i), 1, 1, i, 1, i + 1});
        t.ids.push_back(repeat ? t.ids[rng.below(i)] : rng.below(uint64_t(1) << 53));
    }
    std::vector<Token> values;
    for (uint64_t id : t.ids) values.push_back(pseudo_token(mooncake_block_key(id), 0));
    const size_t blocks = distinct(t.ids);
    REQUIRE(distinct(values) < blocks);  // some distinct blocks do share a value
    const TraceReferenceHits ref = trace_reference_hits(t, 512);
    const Workload mw = mooncake_workload(t);
    WorkloadReplay many(mw, {});
    many.run();
    CHECK(ref.kv_hit_tokens == t.requests.size() - blocks);
    CHECK(many.totals().kv_hit_tokens == ref.kv_hit_tokens);
}

TEST_CASE("bundled Mooncake conversation trace: 37.36 % KV-visible, 37.34 % / 37.36 % state-usable") {
    const TraceResult tr = load_mooncake(kTrace);
    REQUIRE_MESSAGE(tr.ok(), tr.error);
    CHECK(tr.trace.requests.size() == 12031);
    CHECK(tr.trace.ids.size() == 288500);
    CHECK(tr.trace.prompt_tokens() == 144793823);
    CHECK(resolve_trace_path("mooncake") != "");

    // The README's definition, straight from the block ids: a request hits
    // min(512 * leading run of ids seen before, input_length) tokens.
    uint64_t readme_kv = 0, readme_state = 0, readme_state_end = 0;
    {
        std::set<uint64_t> seen;
        for (const auto& q : tr.trace.requests) {
            uint64_t run = 0;
            while (run < q.n_ids && seen.count(tr.trace.ids[q.first_id + run])) ++run;
            const uint64_t h = std::min<uint64_t>(512 * run, q.input_length);
            readme_kv += h;
            readme_state += h / 512 * 512;
            readme_state_end += h == q.input_length ? h : h / 512 * 512;
            for (uint32_t k = 0; k < q.n_ids; ++k) seen.insert(tr.trace.ids[q.first_id + k]);
        }
    }
    const Workload w = mooncake_workload(tr.trace);
    for (PolicyKind p : {PolicyKind::interval, PolicyKind::interval_end}) {
        ReplayConfig c;
        c.policy.kind = p;
        c.policy.interval = 512;
        c.state_bytes = 1;
        WorkloadReplay rp(w, c);
        rp.run();
        const ReplayTotals& t = rp.totals();
        CHECK(t.requests == 12031);
        CHECK(t.prompt_tokens == 144793823);
        CHECK(t.kv_hit_tokens == readme_kv);
        CHECK(t.state_over_kv == 0);
        CHECK(std::round(t.token_hit_kv() * 10000) == 3736);
        if (p == PolicyKind::interval) {
            CHECK(t.state_hit_tokens == readme_state);
            CHECK(std::round(t.token_hit_state() * 10000) == 3734);
        } else {
            CHECK(t.state_hit_tokens == readme_state_end);
            CHECK(std::round(t.token_hit_state() * 10000) == 3736);
        }
        RadixCache& cache = rp.cache();
        CHECK(cache.stats().leases == 0);
        cache.clear();
        CHECK(cache.stats().nodes == 0);
        CHECK(cache.stats().live_checkpoints == 0);
        CHECK(cache.stats().kv_tokens == 0);
    }
}

namespace {
bool extends(const Request& later, const Request& earlier, uint64_t n) {
    return later.tokens->size() >= n && common_prefix(*later.tokens, *earlier.tokens, 0, n) == n;
}
}  // namespace

TEST_CASE("synthetic workloads: deterministic, turns extend, forks share their prefix") {
    ChatConfig cc;
    cc.sessions = 12;
    const Workload a = chat_workload(cc), b = chat_workload(cc);
    REQUIRE(a.requests.size() == b.requests.size());
    for (size_t i = 0; i < a.requests.size(); ++i) {
        CHECK(a.requests[i].arrival_ms == b.requests[i].arrival_ms);
        CHECK(a.requests[i].tokens->to_vector() == b.requests[i].tokens->to_vector());
        if (i > 0) CHECK(a.requests[i].arrival_ms >= a.requests[i - 1].arrival_ms);
    }
    // Turn t+1 extends turn t's prompt and output.
    uint64_t checked = 0;
    for (const Request& r : a.requests)
        for (const Request& s : a.requests)
            if (s.session == r.session && s.turn + 1 == r.turn) {
                CHECK(extends(r, s, s.cache_len()));
                CHECK(r.prompt_len > s.cache_len());
                ++checked;
            }
    CHECK(checked > 10);
    cc.seed = 2;
    CHECK(chat_workload(cc).requests[0].tokens->to_vector() != a.requests[0].tokens->to_vector());

    AgenticConfig ac;
    ac.tasks = 4;
    const Workload g = agentic_workload(ac);
    CHECK(g.sessions() == 4);
    // Every step after the first extends some earlier step of its task entirely.
    uint64_t forks = 0;
    for (const Request& r : g.requests) {
        if (r.turn == 0) continue;
        uint32_t parents = 0;
        for (const Request& s : g.requests)
            if (s.session == r.session && s.turn + 1 == r.turn && extends(r, s, s.cache_len())) ++parents;
        CHECK(parents == 1);
    }
    for (const Request& s : g.requests) {
        uint32_t kids = 0;
        for (const Request& r : g.requests)
            if (r.session == s.session && r.turn == s.turn + 1 && extends(r, s, s.cache_len())) ++kids;
        forks += kids > 1;
    }
    CHECK(forks > 0);

    const Workload sp = shared_prompt_workload({});
    CHECK(sp.requests.size() == 512);
    const Workload m = merge_workloads({a, g, sp}, "mix");
    CHECK(m.requests.size() == a.requests.size() + g.requests.size() + sp.requests.size());
    CHECK(m.sessions() == a.sessions() + g.sessions() + sp.sessions());
}

TEST_CASE("synthetic chat through the cache: hits grow with turns, states never exceed KV") {
    ChatConfig cc;
    cc.sessions = 24;
    const Workload w = chat_workload(cc);
    for (PolicyKind p : {PolicyKind::interval, PolicyKind::end, PolicyKind::branch, PolicyKind::cap,
                         PolicyKind::segmented, PolicyKind::spread}) {
        CAPTURE(policy_id(p));
        ReplayConfig c;
        c.policy.kind = p;
        c.cache.state_capacity = 64;
        c.state_bytes = 1000;
        c.record_requests = true;
        WorkloadReplay rp(w, c);
        rp.run();
        CHECK(rp.totals().state_over_kv == 0);
        CHECK(rp.totals().token_hit_state() > 0.3);  // multi-turn chat reuses most of each prompt
        CHECK(rp.cache().stats().states <= 64);
        CHECK(rp.cache().audit() == "");
        for (const RequestHit& h : rp.hits()) CHECK(h.state_hit <= h.kv_hit);
    }
}
