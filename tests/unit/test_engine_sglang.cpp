// SGLang's MambaRadixCache replay (core/cache/engine_sglang.h): its rules on small prompts, then every
// configuration of reference/engines.md's SGLang table on the bundled conversation trace.
#include <doctest/doctest.h>

#include <cmath>
#include <memory>

#include "core/cache/engine_sglang.h"
#include "core/fleet/trace.h"
#include "core/fleet/workload.h"

using namespace k3;

namespace {

// A prompt of `len` tokens of stream `key` (prompts with the same key share their prefix).
TokenSeqPtr prompt(uint64_t key, uint32_t len) { return TokenSeq::Builder().stream(key, 0, len).build(); }
// Stream `a` for `shared` tokens, then stream `b`.
TokenSeqPtr branch(uint64_t a, uint32_t shared, uint64_t b, uint32_t len) {
    return TokenSeq::Builder().stream(a, 0, shared).stream(b, 0, len - shared).build();
}

SglangConfig config(SglangMode m, uint32_t chunk, uint32_t page = 1) {
    SglangConfig c;
    c.mode = m;
    c.chunked_prefill_tokens = chunk;
    c.page_size = page;
    c.sanity_every = 1;
    return c;
}

void invariants_hold(SglangReplay& r) {
    CHECK(r.mamba_slots_check() == "");
    CHECK(r.kv_check() == "");
    CHECK(r.locks_check() == "");
    r.sanity_check();
    CHECK(r.totals().sanity_failure == "");
}

}  // namespace

TEST_CASE("SGLang extra_buffer: one state per extend at the chunk end floored to 64, the KV past it freed") {
    SglangReplay r(config(SglangMode::extra_buffer, 256));
    // 600 tokens in chunks of 256, 256, 88: states at 256, 512 and 576 (512 + 64); KV past 576 freed.
    const SglangRequest a = r.serve(prompt(1, 600), 600);
    CHECK(a.kv_hit == 0);
    CHECK(a.extends == 3);
    CHECK(a.tracked == 3);
    CHECK(a.cached_len == 576);
    CHECK(r.cache().stats().states == 3);
    CHECK(r.cache().stats().kv_tokens == 576);
    CHECK(r.cache().stats().checkpoints_used == 0);  // re-locks after each chunk resume nothing
    // The same prompt again: the match stops at input_len - 1 = 599 and is limited to the cached 576.
    const SglangRequest b = r.serve(prompt(1, 600), 600);
    CHECK(b.kv_hit == 576);
    CHECK(b.state_hit == 576);
    CHECK(b.extends == 1);
    CHECK(b.tracked == 0);  // a 24-token extend tracks nothing
    CHECK(b.cached_len == 0);
    CHECK(r.cache().stats().checkpoints_used == 1);
    invariants_hold(r);
}

TEST_CASE("SGLang extra_buffer: the branching point replaces the chunk-end track when inside the extend") {
    SglangReplay r(config(SglangMode::extra_buffer, 8192));
    (void)r.serve(prompt(1, 1000), 1000);  // one extend: the state at 960
    // Shares 700 tokens: KV match 700 > state match 0, branching point 640, tracked instead of 1152.
    const SglangRequest b = r.serve(branch(1, 700, 2, 1200), 1200);
    CHECK(b.kv_hit == 700);
    CHECK(b.state_hit == 0);
    CHECK(b.branching == 640);
    CHECK(b.branch_tracked);
    CHECK(b.cached_len == 640);
    // A third sibling now resumes at the junction.
    const SglangRequest c = r.serve(branch(1, 700, 3, 900), 900);
    CHECK(c.kv_hit == 700);
    CHECK(c.state_hit == 640);
    CHECK(c.branching == 640);  // not strictly inside (640, 900): the chunk end 896 is tracked
    CHECK_FALSE(c.branch_tracked);
    CHECK(c.cached_len == 896);
    invariants_hold(r);

    SglangConfig off = config(SglangMode::extra_buffer, 8192);
    off.track_branching = false;  // the driver's ablation
    SglangReplay a(off);
    (void)a.serve(prompt(1, 1000), 1000);
    const SglangRequest d = a.serve(branch(1, 700, 2, 1200), 1200);
    CHECK(d.branching == 0);
    CHECK(d.cached_len == 1152);
}

TEST_CASE("SGLang no_buffer: a state at every chunk end and at the prompt end, all KV kept") {
    SglangReplay r(config(SglangMode::no_buffer, 256));
    const SglangRequest a = r.serve(prompt(1, 600), 600);
    CHECK(a.extends == 3);
    CHECK(a.cached_len == 600);
    CHECK(r.cache().stats().states == 3);  // at 256, 512, 600
    CHECK(r.cache().stats().kv_tokens == 600);
    const SglangRequest b = r.serve(branch(1, 550, 2, 700), 700);
    CHECK(b.kv_hit == 550);
    CHECK(b.state_hit == 512);
    CHECK(b.extends == 1);
    CHECK(r.cache().stats().states == 4);
    invariants_hold(r);
}

TEST_CASE("SGLang page 64: the match is page aligned, no_buffer refuses page 64") {
    SglangReplay r(config(SglangMode::extra_buffer, 8192, 64));
    (void)r.serve(prompt(1, 1000), 1000);
    const SglangRequest b = r.serve(branch(1, 700, 2, 1200), 1200);
    CHECK(b.kv_hit == 640);
    CHECK(b.branching == 640);
    CHECK(b.branch_tracked);  // 0 < 640 < 1200, on the 64 grid from the prefix
    invariants_hold(r);
    CHECK(sglang_config_error(config(SglangMode::no_buffer, 8192, 64)) != "");
    CHECK(sglang_config_error(config(SglangMode::extra_buffer, 8192, 64)) == "");
}

TEST_CASE("SGLang invariants fail on a slip") {
    for (SglangSlip s : {SglangSlip::mamba_slot_leak, SglangSlip::kv_tail_kept, SglangSlip::lock_left}) {
        SglangReplay r(config(SglangMode::extra_buffer, 256));
        r.slip(s);
        (void)r.serve(prompt(1, 600), 600);
        CHECK((r.mamba_slots_check() != "") == (s == SglangSlip::mamba_slot_leak));
        CHECK((r.kv_check() != "") == (s == SglangSlip::kv_tail_kept));
        CHECK((r.locks_check() != "") == (s == SglangSlip::lock_left));
    }
}

namespace {

const Workload& trace_workload() {
    static const Workload w = [] {
        const TraceResult tr = load_mooncake(std::string(K3_TEST_DATA) + "/traces/" + kMooncakeTraceFile);
        REQUIRE_MESSAGE(tr.ok(), tr.error);
        return mooncake_workload(tr.trace);
    }();
    return w;
}

void reproduce(const SglangReferenceRow& row) {
    SglangConfig c;
    c.mode = row.mode;
    c.chunked_prefill_tokens = row.chunked_prefill_tokens;
    c.page_size = row.page_size;
    c.track_branching = row.track_branching;
    SglangReplay r(c);
    for (const Request& q : trace_workload().requests) (void)r.serve(q.tokens, q.prompt_len);
    const SglangTotals& t = r.totals();
    CHECK(t.prompt_tokens == kSglangReferencePromptTokens);
    CHECK(std::fabs(t.token_hit_kv() * 100 - row.kv_percent) < 0.1);
    CHECK(std::fabs(t.token_hit_state() * 100 - row.state_percent) < 0.1);
    // The engine's own counts, token for token.
    CHECK(t.kv_hit_tokens == row.kv_tokens);
    CHECK(t.state_hit_tokens == row.state_tokens);
    CHECK(r.cache().stats().states == row.states_in_tree);
    CHECK(t.extends == row.extends);
    CHECK(r.mamba_slots_check() == "");
    CHECK(r.kv_check() == "");
    CHECK(r.locks_check() == "");
    CHECK(t.sanity_checks == 6);  // every 2000 of the 12,031 requests
    CHECK(t.sanity_failure == "");
}

}  // namespace

TEST_CASE("SGLang on the conversation trace: every configuration of engines.md's table") {
    const std::vector<SglangReferenceRow>& rows = sglang_reference_rows();
    for (size_t i = 0; i < rows.size(); ++i) {
        const SglangReferenceRow& row = rows[i];
        CAPTURE(i);
        CAPTURE(row.chunked_prefill_tokens);
        CAPTURE(row.page_size);
        reproduce(row);
    }
}
