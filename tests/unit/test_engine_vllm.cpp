// vLLM's hybrid prefix cache in align mode (core/cache/engine_vllm.h): its rules on small prompts, and
// every unbounded configuration of reference/engines.md's vLLM table replayed on the conversation trace.
#include <doctest/doctest.h>

#include <cmath>

#include "core/base/clock.h"
#include "core/cache/engine_vllm.h"
#include "core/fleet/trace.h"
#include "core/fleet/workload.h"

using namespace k3;

namespace {

// A prompt of `blocks` 100-token blocks of stream keys; shared keys give shared prefixes.
TokenSeqPtr prompt_of(std::initializer_list<uint64_t> keys, uint32_t tail = 0) {
    TokenSeq::Builder b;
    for (uint64_t k : keys) b.stream(k, 0, 100);
    if (tail) b.stream(999, 0, tail);
    return b.build();
}

VllmTotals replay(const Workload& w, const VllmEngineConfig& c, std::string* audit) {
    VllmKvCacheManager m(c);
    for (const Request& r : w.requests) m.serve(r.tokens, r.prompt_len);
    *audit = m.audit();
    return m.totals();
}

}  // namespace

TEST_CASE("vllm engine: block hashes depend on content, not on how the pieces are cut") {
    TokenSeq::Builder a, b;
    a.stream(7, 0, 300);
    b.stream(7, 0, 120).stream(7, 120, 180);
    CHECK(block_hash_chain(*a.build(), 300, 100) == block_hash_chain(*b.build(), 300, 100));
    CHECK(block_hash_chain(*prompt_of({1, 2}), 200, 100)[0] ==
          block_hash_chain(*prompt_of({1, 3}), 200, 100)[0]);
    CHECK(block_hash_chain(*prompt_of({1, 2}), 200, 100)[1] !=
          block_hash_chain(*prompt_of({1, 3}), 200, 100)[1]);
    CHECK(block_hash_chain(*prompt_of({1, 2}), 199, 100).size() == 1);  // full blocks only
}

TEST_CASE("vllm engine: retention parses dense, 0 and a token count") {
    CHECK(parse_vllm_retention("dense")->kind == VllmRetention::dense);
    CHECK(parse_vllm_retention("0")->kind == VllmRetention::boundaries);
    CHECK(parse_vllm_retention("7680")->tokens == 7680);
    CHECK_FALSE(parse_vllm_retention("-1"));
    CHECK_FALSE(parse_vllm_retention("4k"));
    CHECK(vllm_retention_text(*parse_vllm_retention("7680")) == "7680");
}

TEST_CASE("vllm engine: aligned split, hit cap and junctions") {
    VllmEngineConfig c;
    c.block_tokens = 100;
    c.token_budget = 250;
    c.retention = {VllmRetention::boundaries, 0};
    VllmKvCacheManager m(c);
    // Non-final chunks round down to blocks (250 -> 200); the last full block (500) stops a chunk.
    CHECK(m.aligned_split(0, 250, 550, 0) == 200);
    CHECK(m.aligned_split(400, 150, 550, 0) == 100);
    CHECK(m.aligned_split(500, 50, 550, 0) == 50);
    CHECK(m.aligned_split(0, 250, 550, 100) == 100);  // the junction stops the chunk
    // Retention 0 keeps the replay boundary (prompt - 1 floored: 500 -> block 4) and the junction.
    CHECK(m.retained(4, 550, 0));
    CHECK_FALSE(m.retained(1, 550, 0));
    CHECK(m.retained(0, 550, 100));
    // A prompt of 5 blocks plus 50: states at 200, 400 and 500 are computed, only 500's is kept.
    const auto first = m.serve(prompt_of({1, 2, 3, 4, 5}, 50), 550);
    CHECK(first.hit == 0);
    CHECK(first.chunks == 4);  // 200, 200, 100, 50
    CHECK(m.totals().states_cached == 1);
    // The same prompt again: the hit stops at prompt - 1 on the grid (500), where the state is.
    const auto again = m.serve(prompt_of({1, 2, 3, 4, 5}, 50), 550);
    CHECK(again.hit == 500);
    CHECK(again.attention_hit == 500);
    CHECK(again.junction == 0);
    // Branching after block 3: attention hits 300, no state there -> hybrid 0, junction 300.
    const auto branch = m.serve(prompt_of({1, 2, 3, 8, 9}, 50), 550);
    CHECK(branch.attention_hit == 300);
    CHECK(branch.hit == 0);
    CHECK(branch.junction == 300);
    // Its chunk stopped at the junction and kept the state there: a sibling hits 300.
    const auto sibling = m.serve(prompt_of({1, 2, 3, 6, 7}, 50), 550);
    CHECK(sibling.hit == 300);
    CHECK(m.audit().empty());
}

TEST_CASE("vllm engine: the audit catches a leaked reference and a block missing from the hash map") {
    VllmEngineConfig c;
    c.block_tokens = 100;
    for (VllmFault f : {VllmFault::leaked_ref, VllmFault::stray_block}) {
        VllmKvCacheManager m(c, f);
        m.serve(prompt_of({1, 2, 3}), 300);
        m.serve(prompt_of({1, 2, 4}), 300);
        m.serve(prompt_of({1, 2, 5}), 300);
        CHECK_FALSE(m.audit().empty());
    }
}

TEST_CASE("vllm engine: every unbounded row of engines.md on the conversation trace") {
    const TraceResult tr =
        load_mooncake(std::string(K3_TEST_DATA) + "/traces/mooncake_conversation_trace.jsonl");
    REQUIRE(tr.ok());
    const Workload w = mooncake_workload(tr.trace);
    for (const VllmReferenceRow& row : vllm_reference_rows()) {
        const std::string run = row.run;
        CAPTURE(run);
        VllmEngineConfig c;
        c.block_tokens = row.block;
        c.prefix_match_unit = row.prefix_match_unit;
        c.hybrid = row.hybrid;
        c.retention = row.retention;
        REQUIRE(vllm_reference_row(c) == &row);
        std::string audit;
        const Stopwatch sw;
        const VllmTotals t = replay(w, c, &audit);
        MESSAGE(run << ": hit " << t.hit_tokens << " (vLLM " << row.hit_tokens << "), attention "
                    << t.attention_hit_tokens << " (" << row.attention_hit_tokens << ", " << row.attention_pct
                    << " %), reqs w/ hit " << t.requests_with_hit << " (" << row.requests_with_hit
                    << "), junctions " << t.requests_with_junction << " (" << row.requests_with_junction
                    << "), " << sw.ms() << " ms");
        CHECK(audit.empty());
        CHECK(t.prompt_tokens == row.prompt_tokens);
        const double p = double(row.prompt_tokens);
        CHECK(std::abs(double(t.hit_tokens) - double(row.hit_tokens)) / p < 0.001);
        CHECK(std::abs(100 * t.attention_rate() - row.attention_pct) < 0.1);
        // The mechanisms are vLLM's, so the counts are too, token for token.
        CHECK(t.hit_tokens == row.hit_tokens);
        if (row.attention_hit_tokens) CHECK(t.attention_hit_tokens == row.attention_hit_tokens);
        CHECK(std::round(10000 * t.attention_rate()) == std::round(100 * row.attention_pct));
        CHECK(t.requests_with_hit == row.requests_with_hit);
        CHECK(t.requests_with_junction == row.requests_with_junction);
    }
}
