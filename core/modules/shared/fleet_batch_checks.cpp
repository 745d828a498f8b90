#include "core/modules/shared/fleet_batch_checks.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/fleet/batch_former.h"

namespace k3 {

namespace {

void sglang_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                   const std::string& name) {
    const FleetTotals& t = s.totals();
    const FleetConfig& c = s.config();
    r.check(key("sglang_prefill_decode_apart"), name + "SGLang: no iteration both prefilled and decoded",
            t.mixed_iterations == 0 && t.prefill_iterations > 0,
            format_count(t.prefill_iterations) + " prefill and " + format_count(t.decode_iterations) +
                " decode iterations, " + format_count(t.mixed_iterations) + " mixed");
    if (t.chunked_with_waiting > 0)  // the rule decided something
        r.check(key("sglang_one_chunked_per_batch"),
                name + "SGLang: at most one request of a prefill batch left its prompt unfinished",
                t.max_partial_in_batch <= 1,
                "at most " + format_count(t.max_partial_in_batch) + " in one of " +
                    format_count(t.batches_formed) + " batches; " + format_count(t.chunked_with_waiting) +
                    " ended on a chunked request with requests waiting (chunk " +
                    format_count(c.sglang.chunked_prefill_tokens) + " tokens)");
    const uint32_t ratio = sglang_running_ratio(c.sglang, c.caching);
    // The mamba pool's slots (the instance's one pool, which the cache's states share), and the cap
    // max_running_requests = min(--max-running-requests, slots // ratio).
    const uint64_t slots = s.pool_sizes().empty() ? 0 : s.pool_sizes()[0].state_slots;
    const uint32_t cap =
        std::min(c.max_running, sglang_max_running(uint32_t(std::min<uint64_t>(slots, UINT32_MAX)), ratio));
    // Reported where the cap held a request back and lies below the pool's own slots (without the
    // radix cache the ratio is 1: the pool itself is the cap).
    if (t.cap_reached == 0 || ratio == 1) return;
    r.check(key("sglang_running_within_slots"),
            name + "SGLang: no instance ran more requests than its state slots / the mamba ratio",
            t.peak_running <= cap,
            "at most " + format_count(t.peak_running) + " running; cap " + format_count(cap) +
                " = min(max_running " + format_count(c.max_running) + ", " + format_count(slots) +
                " mamba slots / " + std::to_string(ratio) + "), reached " + format_count(t.cap_reached) +
                " times with requests waiting");
}

void vllm_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                 const std::string& name) {
    const FleetTotals& t = s.totals();
    const FleetConfig& c = s.config();
    const uint32_t limit = c.max_partial_prefills;
    if (limit > 0 && t.partial_limit_reached > 0)  // the limit held a request back
        r.check(
            key("vllm_partial_prefills_within_limit"),
            name + "vLLM: no step left more requests with their prompt unfinished than max_partial_prefills",
            t.max_partial_in_batch <= limit,
            "at most " + format_count(t.max_partial_in_batch) + " in one of " +
                format_count(t.batches_formed) + " steps; limit " + format_count(limit) + ", reached " +
                format_count(t.partial_limit_reached) + " times by a waiting request");
    if (!c.vllm.hybrid || !c.caching) return;
    r.check(key("vllm_chunks_on_aligned_split"),
            name + "vLLM align mode: every non-final prefill chunk ends where the aligned split lets it",
            t.chunks_off_split == 0,
            t.chunks_off_split == 0
                ? format_count(t.nonfinal_chunks) + " non-final chunks, block " +
                      format_count(c.vllm.block_tokens) + " tokens"
                : format_count(t.chunks_off_split) + " of " + format_count(t.nonfinal_chunks) +
                      " off it; first: " + t.first_off_split);
}

}  // namespace

void report_batch_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                         const std::string& name) {
    const CacheEngine e = s.config().engine;
    if (e == CacheEngine::ideal) return;
    const FleetTotals& t = s.totals();
    if (key("retractions") == "retractions") {  // the module's own run, not the tagged comparisons
        r.scalar("retractions", "Retractions (SGLang)", "count", double(t.retractions));
        r.scalar("prefill_iterations", "Prefill-only iterations", "count", double(t.prefill_iterations));
        r.scalar("decode_iterations", "Decode-only iterations", "count", double(t.decode_iterations));
        r.scalar("mixed_iterations", "Mixed iterations", "count", double(t.mixed_iterations));
    }
    if (e == CacheEngine::sglang) sglang_checks(r, s, key, name);
    if (e == CacheEngine::vllm) vllm_checks(r, s, key, name);
}

}  // namespace k3
