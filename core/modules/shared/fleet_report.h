// The report parts modules 11 fleet, 12 tenants and 13 faults share: headline scalars, latency
// table, per-instance table, timeline, load over time, TTFT by arrival time, the checks every fleet
// run must pass, and the cost model's notes. The long help of the scalars is in fleet_report.md.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/experiments/report.h"
#include "core/fleet/fleet_metrics.h"
#include "core/fleet/fleet_sim.h"

namespace k3 {

// Which run a check is about, when a module reports several: `name` prefixes the check's name
// ("name: ..."), `key` (snake_case) suffixes its key ("..._key"). Empty for the module's own run.
struct RunTag {
    std::string name, key;
};

// The headline scalars every fleet module shows: hits, latency, throughput, balance, cost.
// The help text of a fleet figure (fleet_report.md's entry for `key`).
std::string fleet_figure_help(const char* key);
void report_core_scalars(Report& r, const FleetSummary& f, double price_per_gpu_hour);
// One row per (label, summary) and metric: TTFT, TPOT and E2E mean / p50 / p90 / p99 / max.
void report_latency_table(Report& r, const std::string& name,
                          const std::vector<std::pair<std::string, RequestSummary>>& rows);
void report_instances(Report& r, const FleetSim& s);
void report_timeline(Report& r, const FleetSim& s, const std::string& name);
void report_load_series(Report& r, const FleetSim& s);
// TTFT p90 per bin of arrival time over [0, end_ms) of the requests `keep` accepts (empty bins left
// out; the last bin takes arrivals at end_ms).
Series ttft_by_arrival(std::string name, std::string plot, const std::vector<RequestOutcome>& v,
                       double end_ms, int bins, const RequestFilter& keep);
// Checks every fleet run must pass (their falsifiers: fleet_falsifiers.h): every request completed
// with its output or failed; the iterations' work ledger equals a recount from the requests; every
// cache hit is backed by an earlier request's tokens on its instance (fleet_recount.h); caches and
// pools audit clean and are released; every iteration lasts its batch's step time; the pools held
// each running request's state as the accounting sizes it; under an engine, the fleet's hits against
// module 5's replay when the run qualifies, and (the module's own run) the engine's counters as scalars
// (fleet_engine_report.h).
void report_fleet_checks(Report& r, const FleetSim& s, const RunTag& tag = {});
// What a running request holds for its state (FleetConfig::spec_state) and the running requests that
// fit, for each choice of the state scratch (scalars and a table).
void report_running_state(Report& r, const FleetSim& s);
// The host tiers in normal serving (FleetConfig::host): host_hit_tokens and the bytes moved.
void report_host_tier(Report& r, const FleetSim& s);
// Prefill/decode disaggregation: transfer_bytes_per_request and the transfer times.
void report_pd(Report& r, const FleetSim& s);
// The TP layout (core/fleet/tp_layout.h): one rank's KV bytes per token and state bytes, the KV
// tokens and state slots of an instance's working memory, a decode step's KV read time (scalars, a
// note). report_running_state reports it.
void report_tp_layout(Report& r, const FleetSim& s);
// Its checks, recounted from one rank's share (shard_for_tp): the pools' KV capacity and the cost
// model's decode KV read time. report_fleet_checks reports them (key suffix "_tag" or "").
void report_tp_checks(Report& r, const FleetSim& s, const std::string& suffix, const std::string& name);
// engine sglang / vllm: the instance's one pool (core/fleet/fleet_shared_pool.cpp), its budget from
// the device and what allocations evicted from the cache (scalars, a note), and its check that the
// cache never held more than the pool left it (nothing for engine=ideal).
void report_shared_pool(Report& r, const FleetSim& s, const RunTag& tag = {});
// The hardware, the cost model's scale and its simplifications (notes).
void report_model_notes(Report& r, const FleetSim& s);

}  // namespace k3
