// Everything a fleet simulation run is configured with (core/fleet/fleet_sim.h): the model and
// hardware behind the cost model, the instances (prefix cache, checkpoint policy, working memory,
// batching limits), the router, the tenant mechanisms, faults and recovery.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/cache/cache_engine.h"
#include "core/cache/checkpoint_policy.h"
#include "core/cache/engine_sglang.h"
#include "core/cache/engine_vllm.h"
#include "core/cache/radix_cache.h"
#include "core/fleet/tp_layout.h"
#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

// ---- routers (reference/serving.md §5) ----
// prefix and state_aware read each instance's true tree (oracles); cache_aware, kv_events and kv_cost
// keep their own view of it (core/fleet/router_views.h).
enum class RouterKind : uint8_t {
    round_robin,
    least_loaded,
    power_of_two,
    prefix,
    state_aware,
    session,
    cache_aware,
    kv_events,
    kv_cost
};
const std::vector<std::string>& router_ids();  // "round_robin", "least_loaded", "p2c", "prefix", ...
const std::vector<std::string>& router_labels();
const char* router_id(RouterKind k);
std::optional<RouterKind> parse_router(std::string_view s);

struct RouterConfig {
    RouterKind kind = RouterKind::prefix;
    // SGLang Model Gateway cache_aware: imbalanced when max - min > balance_abs AND max > balance_rel x
    // min (loads = requests in flight per worker); then least loaded. Otherwise the best match if
    // match / prompt > cache_threshold, else least loaded.
    double cache_threshold = 0.3;
    double balance_abs = 64;
    double balance_rel = 1.5;
    // Consistent hashing with bounded load (Mirrokni, Thorup, Zadimoghaddam 2018): an instance takes
    // a session only while its load stays within load_factor x the mean load.
    double load_factor = 1.25;
    uint32_t virtual_nodes = 64;
    // Deployed routers' own views (router_views.h). cache_aware: SGLang Model Gateway's approximate
    // trees, pruned to max_tree_tokens every eviction_interval_s (gateway defaults 2^26 and 120 s).
    uint64_t max_tree_tokens = uint64_t(1) << 26;
    double eviction_interval_s = 120;
    // kv_events, kv_cost: KV events per block of event_block_tokens, applied kv_event_delay_s late.
    double kv_event_delay_s = 0;
    uint32_t event_block_tokens = 16;  // vLLM's default block; Dynamo takes the engine's
    // kv_cost (Dynamo KvRouter): cost = overlap_weight x prefill blocks + decode blocks; softmax
    // over the costs at `temperature` (0 = argmin). Dynamo defaults 1.0 and 0.0.
    double overlap_weight = 1.0;
    double temperature = 0;
};

// ---- tenants (module 12) ----
enum class QueuePolicy : uint8_t { fcfs, token_bucket, drr };
const std::vector<std::string>& queue_policy_ids();  // "fcfs", "token_bucket", "drr"
const std::vector<std::string>& queue_policy_labels();
const char* queue_policy_id(QueuePolicy q);
std::optional<QueuePolicy> parse_queue_policy(std::string_view s);

struct TenantConfig {
    double weight = 1;  // entitlement share: weight / sum of weights
};

// ---- faults and recovery (module 13) ----
enum class FaultKind : uint8_t { crash, drain };
struct FaultSpec {
    FaultKind kind = FaultKind::crash;
    uint32_t instance = 0;
    double at_ms = 0;    // simulated time of the fault
    double down_ms = 0;  // the instance comes back (empty) this long after it went down; 0 = never
};
enum class Recovery : uint8_t { recompute, host_tier, migrate };
const std::vector<std::string>& recovery_ids();  // "recompute", "host_tier", "migrate"
const std::vector<std::string>& recovery_labels();
std::optional<Recovery> parse_recovery(std::string_view s);

// ---- speculative decoding's state scratch (reference/kimi_k3.md §3) ----
// What each running request holds in the working pool for its linear layers: one state (off, the
// fleet's own accounting); vLLM's default of one full state page per verified position, 1 + N pages
// (2 + N with prefix caching, vLLM's align mode); or Kimi-K3's RecoverSSM, one page that also holds
// the records of the 1 + N positions (two with prefix caching). Pages are vLLM's
// (spec::vllm_pages), not padded to an attention block. A step verifies 1 + N tokens and yields the
// acceptance length on average; its cost and tokens: core/fleet/spec_decode.h.
enum class SpecState : uint8_t { off, snapshot, recoverssm };
const std::vector<std::string>& spec_state_ids();  // "off", "snapshot", "recoverssm"
const std::vector<std::string>& spec_state_labels();
std::optional<SpecState> parse_spec_state(std::string_view s);

// ---- the host tier in normal serving (SGLang HiCache's host pools; reference/serving.md §6) ----
// Each instance keeps a tree of KV pages and states in its host memory beside the device's: what its
// requests insert is written through to it over the ranks' host links (every rank its own shard, in
// parallel) as each prefill ends, queued behind earlier writes; a request whose host match is deeper
// than the device's loads that prefix back before it runs (only the part the device lacks crosses the
// link, plus the state) and resumes there. Host state slots are a capacity of their own (SGLang's
// MambaPoolHost): KV without a state at its end is no hit for a hybrid model. LRU eviction.
struct HostTierConfig {
    uint64_t kv_tokens = 0;    // KV tokens each instance's host tier holds (0: no host tier)
    uint64_t state_slots = 0;  // states it holds
    Link link;                 // one rank's host link (PCIe Gen5 x16 by default)
    bool on() const { return kv_tokens > 0; }
};

// ---- prefill/decode disaggregation (reference/serving.md §6) ----
// Instances [0, prefill_instances) prefill, the rest decode. A request is routed to a prefill instance
// (the fleet's router, over those), prefills there and leaves: its prefix goes into that instance's
// cache, and its KV and one state cross the link to a decode instance (the least loaded), queued behind
// the prefill instance's earlier transfers, every rank sending its own shard in parallel. Where the
// state sits: SGLang sends the request's slot, the state after all N prompt tokens, with the first token
// the prefill computed; vLLM sends the state after N - 1 and the decoder recomputes the last prompt token
// (vLLM #46807). With a decode-side prefix cache only the KV the decode instance lacks crosses, and the
// transfer lands in its tree; without one the request holds it in pages of its own. Layer-wise, the
// transfer runs beside the prefill's last chunk, layer by layer, instead of after it.
enum class StateHandoff : uint8_t { slot, recompute_last };
struct PdConfig {
    uint32_t prefill_instances = 0;  // 0: colocated serving
    StateHandoff handoff = StateHandoff::slot;
    bool decode_cache = false;
    bool layerwise = false;
    Link link;  // one rank's
    bool on() const { return prefill_instances > 0; }
};

// ---- a second GPU preset ----
// Instances [0, instances) run on `hardware` instead of FleetConfig::hardware, with as many GPUs: the
// prefill pool under disaggregation, and the same instances when they serve colocated, so that the
// comparison runs on the same GPUs. The iterations' step model is the preset's; what a token and a
// state weigh does not change with it.
struct GpuGroup {
    uint32_t instances = 0;
    Hardware hardware;
    bool on() const { return instances > 0; }
};

// When a moved request's state is restored on another instance (module 10's strategies).
enum class MigrationMove : uint8_t { everything, kv_and_checkpoint };

// ---- falsifier hook (k3cli audit-checks, core/experiments/check_audit.h) ----
// A deliberate corruption of the simulation at one point, which the checks every fleet run reports
// (core/modules/shared/fleet_report.h) must catch. Each fires once per simulation. Only falsifiers
// set it; `none` leaves the simulation untouched.
enum class FleetSimFalsify : uint8_t {
    none,
    skew_ledger,      // the iterations' work ledger counts one prefill token more than the batch held
    drop_completion,  // the first request to complete leaves no completion record
    phantom_hit,      // the first admission resumes from half its prompt, which no instance holds
    leak_pages,       // the first request to complete keeps its working-memory pages
    late_iteration,   // the first iteration ends 1 % later than its batch's cost
    // Module 13's: the resumes and migrations its fault checks audit (FleetSim::resume_audit,
    // FaultOutcome::migrations).
    guard_lets_one_through,   // the guard lets one request resume at its KV, past its state
    checkpoint_one_page_off,  // one cache hit reports its checkpoint a page deeper than it was written
    crash_resume_in_place,    // a request of the crashed instance resumes where it was
    migration_drops_page,     // one live migration leaves the request's last KV page behind
    migration_drops_state,    // one live migration arrives without the request's state
    migration_lost_counter,   // the drain's lost-work counter is one token high
    state_slot_one_page,   // the first instance's state slots hold one state page, whatever the request holds
    spec_accepts_all,      // every verify keeps all its drafts, whatever the acceptance length (every step)
    host_write_unlogged,   // one write to an instance's host tier arrives and is neither inserted nor logged
    pd_transfer_unlogged,  // one prefill-to-decode transfer arrives without being logged as arrived
    pd_state_past_kv,      // vLLM's handoff: every transfer carries the state after all N tokens, KV to N - 1
    pd_record_drops_state,  // one transfer's record leaves out the state's bytes it sent
    // Module 13's under disaggregation: the handoffs a fault cuts (FaultOutcome::cut_transfers).
    pd_cut_transfer_delivered,  // one transfer a crash cut is recorded lost but delivered all the same
    pd_lost_transfer_unlogged,  // one lost transfer's bytes are not logged as lost
    // TP layout (core/fleet/tp_layout.h), under tensor parallel attention:
    kv_capacity_sharded,  // the first instance's pool holds KV as if spread over the ranks
    kv_read_sharded,      // the iterations cost the KV a decode reads as if spread over the ranks
    // The deployed routers' checks (core/modules/shared/fleet_router_checks.h).
    approx_misinsert,  // cache_aware: one request's prompt goes into another worker's approximate tree
    events_early,      // kv_events, kv_cost: KV events reach the router's view as soon as they are emitted
    cost_not_minimum,  // kv_cost: one decision picks a worker above the minimum of its costs
    events_lose_first_block,  // kv_events, kv_cost: every stored event loses its first block
    // Shared pool (engine sglang / vllm, core/fleet/fleet_shared_pool.cpp).
    cache_undercharged,  // every instance's pool charges its prefix cache one KV page too few
    sglang_cap_ignored,  // sglang: running requests are capped at max_running only, not at slots / ratio
    // The engines' batch formers (core/fleet/batch_former.h), checked by fleet_batch_checks.h.
    sglang_mixes_decode,  // sglang: the first prefill batch also carries the running decodes
    sglang_second_chunk,  // sglang: one prefill batch gets a second chunked request
    sglang_slot_over,     // sglang: the running cap is one above the state slots / ratio
    vllm_second_partial,  // vllm: one step schedules a partial prefill past max_partial_prefills
    vllm_chunk_off_grid,  // vllm: the first non-final chunk cut on the block grid ends one token early
    // The engines' rules (core/fleet/fleet_engine.h); unlike the others it corrupts every admission:
    engine_no_branching,  // engine=sglang: the branching point is never tracked (engines.md's ablation)
};

struct FleetConfig {
    // Cost model: the calibrated step model of one instance of `gpus` GPUs (core/fleet/fleet_cost.h);
    // `efficiency` is only a migration's roofline's (core/lifecycle), not the iterations'.
    ModelConfig model;
    Hardware hardware;
    int gpus = 2;
    GpuGroup first_gpus;  // the first instances' own preset (above)
    // How the gpus ranks lay out attention (core/fleet/tp_layout.h): false, tensor parallel (the MLA
    // latent replicated on every rank, the linear state sharded by heads); true, DP attention (each
    // rank serves its own requests with all the heads: KV and states whole on one rank).
    bool attention_dp = false;
    Efficiency efficiency;

    uint32_t instances = 4;
    // Prefix cache of each instance (radix tree with checkpoints, metadata mode).
    CacheConfig cache;
    // Whose rules the instances cache and schedule by. ideal: `policy` places the checkpoints
    // whatever the scheduler does, and the cache has its own capacities beside the working memory
    // (the upper bound). sglang, vllm: the engine's own rules (reference/engines.md), `sglang` and
    // `vllm` configure them.
    CacheEngine engine = CacheEngine::ideal;
    SglangConfig sglang;
    VllmEngineConfig vllm;
    CheckpointPolicy policy;
    bool caching = true;  // false: every request recomputes its whole prompt (the no-reuse baseline)

    // Working memory of each instance: a static-split page pool (core/memory/pool.h) holding the
    // running requests' KV pages (the part of their context not resumed from the cache) and one
    // working state slot each; max_running slots.
    uint64_t working_bytes = 32ull << 30;
    uint32_t page_tokens = 256;
    uint32_t max_running = 64;
    // Speculative decoding (above): N = draft_len draft tokens per step, of which a step keeps
    // acceptance_len - 1 on average, plus the token the verify itself yields (1 with spec_state off).
    SpecState spec_state = SpecState::off;
    uint32_t draft_len = 7;
    double acceptance_len = 1;
    // Continuous batching (vLLM / SGLang chunked prefill): at most max_batch_tokens tokens per
    // iteration (one per decoding sequence, the rest prefill chunks), at most max_prefills requests
    // prefilling at once.
    uint32_t max_batch_tokens = 8192;
    uint32_t max_prefills = 2;

    RouterConfig router;

    // Tenants: how each instance orders its waiting requests, the entitlements, and quotas: each
    // tenant gets its own prefix-cache namespace with its weight's share of the state and KV capacity,
    // and may hold at most its share of the running state slots and of the concurrent prefills.
    QueuePolicy queue = QueuePolicy::fcfs;
    std::vector<TenantConfig> tenants;    // indexed by Request::tenant; missing tenants weigh 1
    double bucket_rate_tokens_per_s = 0;  // token bucket: fleet-wide uncached tokens/s, split by weight
    double bucket_burst_s = 2;            // bucket depth in seconds of the tenant's rate
    double drr_quantum_tokens = 8192;     // deficit round robin quantum (x weight)
    bool quotas = false;

    HostTierConfig host;
    PdConfig pd;

    // Faults and recovery.
    std::vector<FaultSpec> faults;
    Recovery recovery = Recovery::recompute;
    MigrationMove migration_move = MigrationMove::everything;
    Link link;                     // instance <-> host tier and instance <-> instance
    double detect_ms = 500;        // a crash is noticed (requests re-routed) this long after it happens
    uint64_t host_tier_bytes = 0;  // host tier capacity (bytes); 0 = unbounded
    // Consistency guard: a request resumes only where its KV and its recurrent state sit at the same
    // position. Off: it resumes at the KV position whatever state it has (counted as a violation).
    bool guard = true;

    double load = 1;  // arrival-rate multiplier: arrival times are divided by it
    // Simulate runs of decode-only steps as one event (same results; tests compare both ways).
    bool fast_decode = true;
    uint64_t seed = 1;
    uint32_t max_timeline_spans = 3000;
    uint32_t series_points = 240;  // samples of the load-over-time series

    FleetSimFalsify falsify = FleetSimFalsify::none;  // falsifier hook (above): never set otherwise

    // engine sglang / vllm: each instance has ONE pool for its running requests and its prefix cache
    // (SGLang's token and mamba pools, vLLM's block pool), sized from the device as the engines size
    // it (SharedPoolPlan below); the cache holds what the running requests leave and is evicted
    // when they cannot allocate. working_bytes and the cache capacities do not apply.
    double memory_fraction = 0.9;  // vLLM gpu_memory_utilization; SGLang mem_fraction_static
    // Sizes given instead of derived: the pool's bytes (vLLM kv_cache_memory_bytes, SGLang's KV and
    // mamba pools together; 0 = from the device) and SGLang's mamba slots (--max-mamba-cache-size;
    // 0 = mamba_full_memory_ratio's split).
    uint64_t pool_bytes = 0;
    uint32_t mamba_slots = 0;
    // The cache never evicts: it is not charged to the pool (reference/engines.md rule 8, the engines'
    // runs with pools larger than anything the trace needs). The running requests still are.
    bool unbounded_memory = false;
    // The engines' schedulers (core/fleet/batch_former.h; engine ideal reads neither). SGLang's
    // --max-prefill-tokens: the input tokens of one prefill batch. vLLM's max_num_partial_prefills:
    // requests a step may leave with their prompt unfinished (0 = no limit).
    uint32_t max_prefill_tokens = 16384;
    uint32_t max_partial_prefills = 1;
};

// engine != ideal: what one instance's shared pool gets. The engines reserve memory_fraction of the
// GPUs' memory, load the weights and profile a forward pass of the largest batch; the pool is what
// is left (vLLM determine_available_memory; SGLang profile_max_num_token).
struct SharedPoolPlan {
    double device = 0;       // the instance's GPU memory
    double reserved = 0;     // device x memory_fraction
    double weights = 0;      // the checkpoint's weights (weight_bytes: MXFP4 experts where shipped), whole
    double activations = 0;  // activation_bytes(c)
    double budget = 0;       // reserved - weights - activations (<= 0: nothing fits), or pool_bytes
};
SharedPoolPlan shared_pool_plan(const FleetConfig& c);
// The activations live at the peak of a forward pass of max_batch_tokens tokens, summed over the
// instance's ranks: per token and rank, the residual stream and its normed copy (replicated), the
// widest linear-layer projection (the conv channels, sharded), the routed experts' gate and up rows
// (top-k x intermediate x 2, sharded), in bf16; and the fp32 logits of max_running sequences.
// An estimate of what profiling finds, named so in the report; the engines add their own slack.
double activation_bytes(const FleetConfig& c);

// Bytes of one instance's fixed allocations (weights, working memory, prefix cache at capacity)
// against its device memory: what validate() warns about.
struct MemoryPlan {
    double device = 0, weights = 0, working = 0, cache_kv = 0, cache_states = 0;
    bool cache_bounded = true;
    double total() const { return weights + working + cache_kv + cache_states; }
};
MemoryPlan memory_plan(const FleetConfig& c);

// What one running request holds for its linear layers in the working pool (SpecState) and how many
// such requests fit: the state slots, which limit the running batch. The working memory keeps
// kKvReservePages KV pages of page_tokens beside the slots.
inline constexpr uint32_t kKvReservePages = 16;
struct RunningStateSlots {
    uint64_t page_bytes_per_layer = 0;  // one state page of one linear layer
    uint32_t pages = 1;                 // state pages per running request
    uint64_t linear_layers = 0;
    uint64_t kv_reserve_bytes = 0;
    uint64_t fit = 0;    // requests whose state fits the working memory beside the KV reserve
    uint32_t slots = 0;  // off: max_running; else min(max_running, fit)
    uint64_t bytes_per_layer() const { return page_bytes_per_layer * pages; }
    uint64_t bytes() const { return bytes_per_layer() * linear_layers; }  // per running request
};
RunningStateSlots running_state_slots(const FleetConfig& c);
// The same for another choice of the state scratch (the report's comparison).
RunningStateSlots running_state_slots(const FleetConfig& c, SpecState s);
// engine sglang / vllm: the bytes of one linear layer's state slot in the instance's one pool, whose
// plain state is `state_bytes_per_layer`: under speculative decoding vLLM's spec page, or SGLang's state
// with its share of the verify scratch (core/fleet/fleet_shared_pool.cpp).
uint64_t engine_state_slot_bytes(const FleetConfig& c, uint64_t state_bytes_per_layer);

// The GPU preset instance k runs on, and c as instance k sees it (its preset as c.hardware).
const Hardware& instance_hardware(const FleetConfig& c, uint32_t k);
FleetConfig on_instance_gpus(const FleetConfig& c, uint32_t k);

// What prefill/decode disaggregation does not run with ("" when it runs, or is off).
std::string pd_config_error(const FleetConfig& c);
// An acceptance length a verify cannot yield ("" when within 1 and 1 + draft_len, or speculation is off).
std::string acceptance_error(const FleetConfig& c);
// What the host tier does not run with ("" when it runs, or is off).
std::string host_config_error(const FleetConfig& c);
// Empty when the configuration can run; else what is wrong (first problem).
std::string check_fleet_config(const FleetConfig& c);

}  // namespace k3
