// The falsifiers of the checks every fleet run reports (report_fleet_checks, fleet_report.h), for
// any module that reports them. The module's parameters P carry the simulator's falsifier hook in a
// member that is no declared parameter (`FleetSimFalsify sim_falsify = FleetSimFalsify::none;`),
// copied into FleetConfig::falsify of every simulation its run makes; each falsifier then corrupts
// every simulation, so that every tagged copy of its check ("..._solo", "..._round_robin") fails.
//
//     .falsifiers = with_fleet_falsifiers(tenants_falsifiers(), &TenantsParams::sim_falsify),
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/experiments/module.h"
#include "core/fleet/fleet_config.h"

namespace k3 {

struct FleetCheckFalsifier {
    const char* id;
    const char* does;
    const char* keys;  // a key pattern
    FleetSimFalsify corruption;
    bool snapshots = false;          // runs with spec_state=snapshot (off holds one page: nothing to corrupt)
    const char* engine = nullptr;    // runs with this engine (the batch formers' checks)
    const char* pool_gib = nullptr;  // and this pool per instance (the shared pool's checks: pressure)
    const char* host_tier_gib = nullptr;  // with a host tier this large (modules that declare one)
    const char* state_handoff = nullptr;  // disaggregated (architecture=pd), with this handoff
};
inline const std::vector<FleetCheckFalsifier>& fleet_check_falsifiers() {
    static const std::vector<FleetCheckFalsifier> v = {
        {"drop_completion", "the first request to complete leaves no completion record",
         "requests_accounted*", FleetSimFalsify::drop_completion},
        {"skew_work_ledger", "the iterations' work ledger counts one prefill token more than the batch held",
         "work_ledgers_agree*", FleetSimFalsify::skew_ledger},
        {"phantom_hit", "the first request admitted resumes from half its prompt, which no instance holds",
         "hits_backed_by_routed_requests*", FleetSimFalsify::phantom_hit},
        {"leak_pages", "the first request to complete keeps its working-memory pages", "caches_released*",
         FleetSimFalsify::leak_pages},
        {"late_iteration", "the first iteration ends 1 % later than its batch's step time",
         "iteration_times_match_roofline*", FleetSimFalsify::late_iteration},
        {"state_slot_one_page",
         "with speculative snapshots, the first instance's state slots hold one state page instead of 2 + N",
         "state_bytes_match_accounting*", FleetSimFalsify::state_slot_one_page, true},
        {"spec_accepts_all",
         "with speculative snapshots, every verify keeps all N drafts whatever the acceptance length",
         "decode_steps_yield_acceptance*", FleetSimFalsify::spec_accepts_all, true},
        {"host_write_unlogged", "with a host tier, one write arrives and is neither inserted nor logged",
         "host_tier_bytes_conserved*", FleetSimFalsify::host_write_unlogged, false, nullptr, nullptr, "64"},
        {"pd_transfer_unlogged", "disaggregated, one transfer reaches its decoder without being logged",
         "pd_transfer_bytes_conserved*", FleetSimFalsify::pd_transfer_unlogged, false, nullptr, nullptr,
         nullptr, "slot"},
        {"pd_record_drops_state", "disaggregated, one transfer's record leaves out the state it sent",
         "pd_bytes_match_accounting*", FleetSimFalsify::pd_record_drops_state, false, nullptr, nullptr,
         nullptr, "slot"},
        {"pd_state_past_kv",
         "disaggregated with vLLM's handoff, every transfer carries the state after all N tokens with the KV "
         "to N - 1",
         "pd_decode_resumes_at_state*", FleetSimFalsify::pd_state_past_kv, false, nullptr, nullptr, nullptr,
         "recompute_last"},
        {"kv_capacity_sharded",
         "under tensor parallel attention, the first instance's pool holds KV as if spread over the ranks",
         "kv_capacity_matches_rank_bytes*", FleetSimFalsify::kv_capacity_sharded},
        {"kv_read_sharded",
         "under tensor parallel attention, the iterations cost the KV a decode reads as if spread over the "
         "ranks",
         "decode_kv_read_matches_rank_bytes*", FleetSimFalsify::kv_read_sharded},
        {"sglang_mixes_decode",
         "with engine sglang, the first prefill batch also carries the running decodes",
         "sglang_prefill_decode_apart*", FleetSimFalsify::sglang_mixes_decode, false, "sglang"},
        {"sglang_second_chunk", "with engine sglang, one prefill batch gets a second chunked request",
         "sglang_one_chunked_per_batch*", FleetSimFalsify::sglang_second_chunk, false, "sglang"},
        {"sglang_slot_over", "with engine sglang, the running cap is once one above the state slots / ratio",
         "sglang_running_within_slots*", FleetSimFalsify::sglang_slot_over, false, "sglang"},
        {"vllm_second_partial", "with engine vllm, one step schedules a partial prefill past the limit",
         "vllm_partial_prefills_within_limit*", FleetSimFalsify::vllm_second_partial, false, "vllm"},
        {"cache_undercharged",
         "with engine sglang, every instance's pool charges its cache one KV page too few",
         "caches_released*", FleetSimFalsify::cache_undercharged, false, "sglang"},
        {"sglang_cap_ignored",
         "with engine sglang and a 1.5 GiB pool, the running cap at mamba slots / ratio is ignored "
         "(max_running)",
         "pool_never_overcommitted*", FleetSimFalsify::sglang_cap_ignored, false, "sglang", "1.5"},
        {"vllm_chunk_off_grid",
         "with engine vllm, the first non-final chunk cut on the block grid ends one token early",
         "vllm_chunks_on_aligned_split*", FleetSimFalsify::vllm_chunk_off_grid, false, "vllm"},
    };
    return v;
}

// `own` followed by the shared checks' falsifiers, set through `hook`, each on top of `params`; those
// that run under an engine also on top of `engine_params` (what the module must set for an engine to run).
template <class P>
std::vector<Falsifier<P>> with_fleet_falsifiers(
    std::vector<Falsifier<P>> own, FleetSimFalsify P::*hook,
    std::vector<std::pair<std::string, std::string>> params = {}, bool engine_formers = true,
    std::vector<std::pair<std::string, std::string>> engine_params = {}, bool fleet_only = false) {
    for (const FleetCheckFalsifier& f : fleet_check_falsifiers()) {
        if (f.engine && !engine_formers) continue;
        if ((f.host_tier_gib || f.state_handoff) && !fleet_only) continue;  // module 11's parameters
        auto with = params;
        if (f.snapshots) with.push_back({"spec_state", "snapshot"});
        if (f.engine) with.push_back({"engine", f.engine});
        if (f.engine) with.insert(with.end(), engine_params.begin(), engine_params.end());
        if (f.pool_gib) with.push_back({"pool_gib", f.pool_gib});
        if (f.host_tier_gib) with.push_back({"host_tier_gib", f.host_tier_gib});
        if (f.state_handoff)
            with.insert(with.end(), {{"architecture", "pd"}, {"state_handoff", f.state_handoff}});
        // Module 11's own architectures prove their checks on a third of its default workload (the
        // audit runs every router beside them, under the sanitizers too).
        if (f.host_tier_gib || f.state_handoff) with.push_back({"sessions", "32"});
        own.push_back({f.id, f.does, {f.keys}, [hook, c = f.corruption](P& p) { p.*hook = c; }, with});
    }
    return own;
}

}  // namespace k3
