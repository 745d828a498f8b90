// Maps 1-6 of module 14 `boundaries`, computed: each heat map with its break-even contour, the
// figures its checks judge and the read-offs its verdict quotes. The costs come from core/boundaries;
// the simulations (maps 2 and 6) are run by the module and passed in. Every computed map is compared
// cell by cell with a second count of its costs (boundaries_ledger.h). boundaries_report.cpp turns them
// into the report.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/boundaries/affinity_sweep.h"
#include "core/boundaries/engine_spacing.h"
#include "core/experiments/report.h"
#include "core/fleet/workload_replay.h"
#include "core/model/roofline.h"
#include "core/spec/storage.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks): the run damages its
// own data at one point, the checks stay the same code.
enum class BoundariesFalsify : uint8_t {
    none,
    prefix_cell,               // map 1: one cell is priced without its checkpoint
    interval_replays_swapped,  // map 2: the replays of the two finest intervals are swapped
    replay_row_records,        // map 3: one row counts core-only records instead of minimal exact ones
    module7_record_size,       // map 3: module 7's storage is counted with core-only records
    cp_link,                   // map 4: the exchanges are costed over a link twice as fast as the chosen one
    migration_row_bandwidth,   // map 5: one row moves the request at twice the row's bandwidth
    move_kv_link,              // map 5: the break-even distance is searched over a link twice as fast
    fleet_record_dropped,      // map 6: one completion record of one fleet run is dropped
    affinity_misroute,         // map 6: one request of a reuse-0 affinity run is recorded on another instance
    recoverssm_row_window,     // map 3 (RecoverSSM): one row sizes pages and records for one draft more
    recoverssm_k3_window,      // map 3: Kimi-K3's RecoverSSM storage is sized for N = 8, not 7
    engine_run_slips,          // map 2 (engine): one run's engine leaks (a mamba slot, a block's refs)
    engine_run_halved,         // map 2 (engine): one run is replayed at half the value it is plotted at
};

struct BoundaryInputs {
    ModelConfig model;
    Hardware hardware;
    Efficiency eff;           // roofline efficiencies (the defaults of core/model/roofline.h)
    double residence_s = 30;  // maps 1 and 2: how long a cached entry is held
    double context = 32768;   // read-offs of maps 1, 3 and 5
    double batch = 64;        // map 3: requests in a decode step
    Link link;                // map 5 read-off: between instances
    Link cp_link;             // map 4: between ranks
    bool dest_checkpoint = false;
    double checkpoint_distance = 512;  // map 5: when the destination holds a checkpoint
    int resolution = 20;
    // Map 3: what replay records (module 7's minimal exact records, or Kimi-K3's RecoverSSM as vLLM
    // runs it) and, for RecoverSSM, vLLM's align mode (prefix caching).
    spec::RecordVariant variant = spec::RecordVariant::minimal_exact;
    bool align = true;
    CacheEngine engine = CacheEngine::ideal;  // map 2: whose rules space the states (ideal: a free interval)
    BoundariesFalsify falsify = BoundariesFalsify::none;  // read by the map code only, never by the checks
};

// How the cells of a map agree with the second count of their costs (boundaries_ledger.h).
struct LedgerAgreement {
    int cells = 0, mismatches = 0;  // cells compared; cells further from the count than the tolerance
    double tolerance = 0;           // relative to the size of the terms a cell nets
    double worst = 0;               // the largest difference, in the same measure
};

// 1. Prefix caching with a checkpoint: net saving per cached token over prefix length and reuse.
struct PrefixMap {
    HeatMap heat;
    LedgerAgreement ledger;          // the cells against a ledger of the cache entry
    double checkpoint_s = 0;         // one checkpoint written and held for the residence (GPU-s)
    double checkpoint_tokens = 0;    // ... in tokens of prefill
    std::optional<double> shortest;  // the shortest prefix that pays at reuse 1, if any does
    double reuse_needed = 0;         // by a prefix of the chosen context
};
PrefixMap prefix_map(const BoundaryInputs& in);

// 2. Checkpoint interval: does halving it pay, over interval and residence (from replays).
struct IntervalMap {
    struct Row {
        double interval, recomputed, checkpoints, hit_state, cost_s;  // per request
    };
    HeatMap heat;
    std::string workload;
    double requests = 0;
    std::vector<Row> rows;  // one per replayed interval
    bool nested = false;    // a finer interval never recomputes more nor writes fewer checkpoints
    double best_interval = 0, best_cost_s = 0;  // NaN without replays
    double state_bytes = 0;
    // Under an engine (in.engine): the axis is the engine's setting, rows count the states the cache
    // holds instead of the checkpoints written; the runs' invariants and whether they followed it.
    CacheEngine engine = CacheEngine::ideal;
    size_t engine_runs = 0;
    uint64_t off_setting = 0;                // requests of all runs that did not follow their axis value
    std::string first_broken;                // the first run whose engine invariants failed ("" = none)
    double setting = 0, setting_cost_s = 0;  // the configured value's run and its cost per request
};
// From replays of `w` at intervals 64, 128, ..., each twice the previous (ReplayResult::x).
IntervalMap interval_map(const BoundaryInputs& in, const Workload& w, const std::vector<ReplayResult>& runs);
// Under an engine: the first `axis_runs` runs are the axis of its setting (each twice the previous),
// then the configured value's run if it is not on the axis; `setting` the configured value.
IntervalMap engine_spacing_map(const BoundaryInputs& in, const Workload& w,
                               const std::vector<boundaries::EngineSpacingRun>& runs, size_t axis_runs,
                               uint32_t setting);

// 3. Projection replay against per-token snapshots: saving per kept token over N and acceptance.
struct ReplayMap {
    HeatMap heat;
    LedgerAgreement ledger;  // the cells against a ledger of the verification's traffic and storage
    // Module 7's storage at Kimi-Linear dimensions, N = 4, from the map's own accounting and module 7's.
    double snapshot_bytes = 0, replay_bytes = 0, ratio_counting_confirmed = 0, ratio_n_snapshots = 0;
    std::optional<int> pays_from;                // the smallest N from which replay pays at every acceptance
    std::optional<double> snapshot_below_batch;  // N = 1: snapshots win below this many running requests
    double step_s = 0;                           // the decode step the rollback storage is held for
    bool recoverssm = false;                     // the x axis counts draft tokens (1 + N verified)
    // Kimi-K3's RecoverSSM storage at N = 7 from the map's accounting, per KDA layer and request
    // (reference/kimi_k3.md §3.3): snapshots and RecoverSSM, none and align mode.
    double k3_snapshot_none = 0, k3_recoverssm_none = 0, k3_snapshot_align = 0, k3_recoverssm_align = 0;
    double k3_record_per_head = 0;  // one record of one head at one position
};
ReplayMap replay_map(const BoundaryInputs& in);

// 4. Context parallelism: speed-up of a prefill over one rank, over tokens per rank and ranks.
struct CpMap {
    struct Row {
        double ranks, tokens_per_rank, prompt, speedup_at_1m;
    };
    HeatMap heat;
    std::vector<Row> rows;            // R >= 2: the shortest slice at which R ranks beat one
    LedgerAgreement ledger;           // the cells against the speed-ups recounted
    double tokens_per_rank_at_8 = 0;  // NaN if none pays
    double map_bytes_per_round = 0;   // the affine scan's maps, all linear layers
};
CpMap cp_map(const BoundaryInputs& in);

// 5. Moving a request against recomputing it, over context and link bandwidth.
struct MigrationMap {
    HeatMap heat;
    LedgerAgreement ledger;  // the cells against the moves recounted with the blob writer's sizes
    // move_kv's break-even distance at the chosen context and instance link: lifecycle's search, and the
    // root of the condition in closed form.
    double break_even_distance = 0, closed_form_distance = 0;
    std::optional<double> min_bandwidth;  // moving the chosen context pays above (B/s)
    std::optional<double> min_context;    // over the instance link, moving pays from (tokens)
    double state_bytes = 0;
};
MigrationMap migration_map(const BoundaryInputs& in);

// 6. Affinity against least loaded: mean TTFT ratio over reuse share and load (from fleet runs).
struct AffinityMap {
    struct Row {
        double reuse, load, ttft_least_loaded, ttft_affinity, ratio, hit_least_loaded, hit_affinity;
    };
    HeatMap heat;
    std::vector<Row> rows;
    uint32_t instances = 0, requests = 0;
    size_t runs = 0, failed_checks = 0;
    uint64_t incomplete = 0;    // requests not completed, over all runs
    uint64_t missing = 0;       // requests without a completion record, over all runs
    std::string first_failure;  // "name: detail" of the first failed check
    bool has_no_reuse_column = false, same_without_reuse = true;
    size_t wins = 0, worst = 0, best = 0;  // cells where affinity wins; indices of the extremes
    double wins_everywhere_from = 0;       // the smallest reuse share where it wins at every load (NaN)
    double capacity_per_s = 0;
};
// The request records of every fleet run, as map 6 reads them: [reuse][load][affinity].
using FleetRecords = std::vector<std::vector<std::array<std::vector<RequestOutcome>, 2>>>;
FleetRecords fleet_records(const boundaries::AffinitySweep& s);
AffinityMap affinity_map(const boundaries::AffinitySweep& s, const FleetRecords& records);

}  // namespace k3
