#include "core/modules/shared/fleet_engine_report.h"

#include "core/base/numfmt.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/modules/shared/fleet_report.h"

namespace k3 {

namespace {

struct HitTotals {
    uint64_t prompt = 0, kv = 0, state = 0;
};

// Module 5's replay of the engine over the requests in the order the fleet admitted them.
HitTotals replay_hits(const FleetSim& s) {
    const FleetConfig& c = s.config();
    const auto& q = s.workload().requests;
    HitTotals t;
    if (c.engine == CacheEngine::sglang) {
        SglangReplay rep(c.sglang);
        for (const AdmissionRecord& a : s.admissions()) rep.serve(q[a.req].tokens, q[a.req].prompt_len);
        t = {rep.totals().prompt_tokens, rep.totals().kv_hit_tokens, rep.totals().state_hit_tokens};
    } else {
        VllmKvCacheManager rep(c.vllm);
        for (const AdmissionRecord& a : s.admissions()) rep.serve(q[a.req].tokens, q[a.req].prompt_len);
        t = {rep.totals().prompt_tokens, rep.totals().attention_hit_tokens, rep.totals().hit_tokens};
    }
    return t;
}

}  // namespace

void report_engine_scalars(Report& r, const FleetSim& s) {
    if (s.config().engine == CacheEngine::ideal) return;
    const EngineCounters& n = s.totals().engine;
    r.scalar("engine_states_tracked", "States tracked by prefill extends (SGLang)", "count",
             double(n.tracked))
        .help = fleet_figure_help("engine_states_tracked");
    r.scalar("engine_branch_tracks", "Of which at the branching point", "count", double(n.branch_tracks))
        .help = fleet_figure_help("engine_branch_tracks");
    r.scalar("engine_decode_tracks", "States tracked in decode (SGLang)", "count", double(n.decode_tracks))
        .help = fleet_figure_help("engine_decode_tracks");
    if (s.config().engine == CacheEngine::vllm)
        r.scalar("engine_vllm_block", "vLLM block (the tree's page)", "tokens",
                 double(s.config().vllm.block_tokens))
            .help = fleet_figure_help("engine_vllm_block");
    r.scalar("engine_junctions", "Admissions with a shared-prefix junction (vLLM)", "requests",
             double(n.junctions))
        .help = fleet_figure_help("engine_junctions");
    r.scalar("engine_states_not_retained", "Block-boundary states retention left out (vLLM)", "count",
             double(n.states_not_retained))
        .help = fleet_figure_help("engine_states_not_retained");
}

std::string engine_replay_excluded(const FleetSim& s) {
    const FleetConfig& c = s.config();
    if (c.engine == CacheEngine::ideal) return "engine=ideal";
    if (c.instances != 1) return "more than one instance";
    if (c.quotas) return "tenant namespaces";
    if (!c.faults.empty()) return "faults";
    if (!c.caching) return "caching off";
    const FleetTotals& t = s.totals();
    if (t.overlapped_admissions)
        return format_count(t.overlapped_admissions) + " admissions overlapped another request";
    if (t.preemptions) return "preemptions";
    for (const InstanceStats& st : s.instance_stats())
        if (st.cache_kv_evicted || st.cache_states_evicted) return "the cache evicted";
    if (s.admissions().size() != s.workload().requests.size()) return "not every request was admitted once";
    for (const Request& q : s.workload().requests)
        if (q.output_known && q.output_len > 1) return "output tokens are cached";
    return {};
}

void report_engine_check(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                         const std::string& name) {
    if (!engine_replay_excluded(s).empty()) return;
    const HitTotals rep = replay_hits(s);
    uint64_t prompt = 0, kv = 0, state = 0;
    for (const RequestOutcome& o : s.outcomes()) {
        prompt += o.prompt;
        kv += o.kv_hit;
        state += o.state_hit;
    }
    const auto pct = [&](uint64_t n) {
        return format_sig(100.0 * double(n) / double(prompt ? prompt : 1), 5);
    };
    const char* engine = s.config().engine == CacheEngine::sglang ? "SGLang" : "vLLM";
    r.check(key("engine_matches_replay"),
            name + "One instance, one request at a time: the fleet's hits equal module 5's " + engine +
                " replay of the same requests",
            prompt == rep.prompt && kv == rep.kv && state == rep.state,
            "KV-visible " + format_count(kv) + " tokens (" + pct(kv) + " %; replay " + format_count(rep.kv) +
                "), state-usable " + format_count(state) + " (" + pct(state) + " %; replay " +
                format_count(rep.state) + ") of " + format_count(prompt) + " prompt tokens (replay " +
                format_count(rep.prompt) + ")");
}

}  // namespace k3
