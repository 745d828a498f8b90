// Fuzz target: the Mooncake trace reader. Any input must give a trace or an error naming a line,
// never a crash. Accepted traces are expanded and replayed through the radix cache (unbounded and
// bounded), whose invariants must hold and whose unbounded hits must equal the block-level count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "core/fleet/trace_reference.h"
#include "core/fleet/workload_replay.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    k3::TraceLimits lim;
    lim.max_line_bytes = 4096;
    lim.max_requests = 64;
    lim.max_ids_per_request = 64;
    lim.max_total_ids = 256;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    const k3::TraceResult r = k3::parse_mooncake(text, lim);
    if (!r.ok()) {
        // Errors name a line (or the input as a whole) and leave no partial trace behind.
        if (r.error.empty() || !r.trace.requests.empty()) std::abort();
        if (r.error_line > 0 && r.error.rfind("line " + std::to_string(r.error_line), 0) != 0) std::abort();
        return 0;
    }
    const k3::Workload w = k3::mooncake_workload(r.trace);
    for (const k3::Request& q : w.requests)
        if (q.tokens->size() != q.prompt_len) std::abort();
    const uint8_t knob = size ? data[0] : 0;
    for (int bounded = 0; bounded < 2; ++bounded) {
        k3::ReplayConfig c;
        c.policy.kind = bounded ? k3::PolicyKind(knob % 7)
                                : (knob & 1 ? k3::PolicyKind::interval_end : k3::PolicyKind::interval);
        c.policy.interval = 64u << (knob >> 5 & 3);
        c.policy.chunk = 64;
        c.policy.max_states_per_path = 2;
        c.policy.retention_interval = 1024;
        c.state_bytes = 1000;
        if (bounded) {
            c.cache.state_capacity = 1 + knob % 5;
            c.cache.kv_capacity_tokens = 2000 + 300 * (knob % 7);
            c.cache.refresh = knob & 2 ? k3::LruRefresh::path : k3::LruRefresh::node;
        }
        k3::WorkloadReplay rp(w, c);
        rp.run();
        const k3::ReplayTotals& t = rp.totals();
        if (t.state_over_kv != 0 || t.recomputed_tokens + t.state_hit_tokens != t.prompt_tokens) std::abort();
        if (!rp.cache().audit().empty()) std::abort();
        if (!bounded) {
            const k3::TraceReferenceHits ref = k3::trace_reference_hits(r.trace, c.policy.interval);
            const uint64_t want = c.policy.kind == k3::PolicyKind::interval ? ref.state_hit_interval
                                                                            : ref.state_hit_interval_end;
            // Exactly: distinct blocks share no token (core/cache/token_seq.h), whatever their values.
            if (ref.kv_hit_tokens != t.kv_hit_tokens || want != t.state_hit_tokens) std::abort();
        }
        rp.cache().clear();
        const k3::CacheStats& s = rp.cache().stats();
        if (s.nodes || s.kv_tokens || s.states || s.live_checkpoints || s.leases) std::abort();
    }
    return 0;
}
