#include "core/fleet/fleet_config.h"

#include <algorithm>

#include "core/base/numfmt.h"
#include "core/fleet/fleet_engine.h"
#include "core/fleet/step_model.h"
#include "core/model/accounting.h"
#include "core/spec/storage.h"

namespace k3 {

namespace {
template <class E>
std::optional<E> parse_in(const std::vector<std::string>& ids, std::string_view s) {
    for (size_t i = 0; i < ids.size(); ++i)
        if (ids[i] == s) return E(i);
    return std::nullopt;
}
}  // namespace

const std::vector<std::string>& router_ids() {
    static const std::vector<std::string> v = {"round_robin", "least_loaded", "p2c",
                                               "prefix",      "state_aware",  "session",
                                               "cache_aware", "kv_events",    "kv_cost"};
    return v;
}
const std::vector<std::string>& router_labels() {
    static const std::vector<std::string> v = {"round robin",
                                               "least loaded",
                                               "power of two choices",
                                               "prefix affinity, oracle (true tree: precise, zero-lag)",
                                               "state-aware affinity, oracle (checkpoint depth)",
                                               "session hashing, bounded load",
                                               "SGLang cache_aware (approximate trees)",
                                               "prefix affinity fed by KV events (delayed)",
                                               "Dynamo KV cost (overlap vs decode blocks)"};
    return v;
}
const char* router_id(RouterKind k) { return router_ids()[size_t(k)].c_str(); }
std::optional<RouterKind> parse_router(std::string_view s) { return parse_in<RouterKind>(router_ids(), s); }

const std::vector<std::string>& queue_policy_ids() {
    static const std::vector<std::string> v = {"fcfs", "token_bucket", "drr"};
    return v;
}
const std::vector<std::string>& queue_policy_labels() {
    static const std::vector<std::string> v = {"first come first served (no isolation)",
                                               "token buckets per tenant",
                                               "deficit round robin on uncached tokens"};
    return v;
}
const char* queue_policy_id(QueuePolicy q) { return queue_policy_ids()[size_t(q)].c_str(); }
std::optional<QueuePolicy> parse_queue_policy(std::string_view s) {
    return parse_in<QueuePolicy>(queue_policy_ids(), s);
}

const std::vector<std::string>& recovery_ids() {
    static const std::vector<std::string> v = {"recompute", "host_tier", "migrate"};
    return v;
}
const std::vector<std::string>& recovery_labels() {
    static const std::vector<std::string> v = {"drop and recompute elsewhere",
                                               "checkpoints replicated to a host tier",
                                               "live migration on drain (+ host tier on crash)"};
    return v;
}
std::optional<Recovery> parse_recovery(std::string_view s) { return parse_in<Recovery>(recovery_ids(), s); }

const std::vector<std::string>& spec_state_ids() {
    static const std::vector<std::string> v = {"off", "snapshot", "recoverssm"};
    return v;
}
const std::vector<std::string>& spec_state_labels() {
    static const std::vector<std::string> v = {"off (one state per request)",
                                               "snapshot: one state page per draft token (vLLM)",
                                               "RecoverSSM: one page with records (Kimi-K3)"};
    return v;
}
std::optional<SpecState> parse_spec_state(std::string_view s) {
    return parse_in<SpecState>(spec_state_ids(), s);
}

RunningStateSlots running_state_slots(const FleetConfig& c, SpecState spec) {
    // In instance bytes, summed over the ranks that hold them (tp_layout.h).
    const PoolModel a = tp_layout(c.model, c.gpus, c.attention_dp).pool_model();
    RunningStateSlots s;
    s.linear_layers = uint64_t(a.linear_layers);
    s.page_bytes_per_layer = a.state_bytes_per_layer;
    if (spec != SpecState::off) {
        const int n = int(c.draft_len);
        const spec::VllmPages p = spec::vllm_pages(spec::vllm_kda_page_tensors(c.model, n), n);
        const bool align = c.caching;  // vLLM: prefix caching runs the mamba cache in align mode
        s.page_bytes_per_layer = spec == SpecState::snapshot ? p.snapshot_page : p.recoverssm_page;
        s.pages = spec == SpecState::snapshot ? c.draft_len + (align ? 2 : 1) : (align ? 2 : 1);
    }
    s.kv_reserve_bytes = uint64_t(kKvReservePages) * c.page_tokens * a.kv_bytes_per_token();
    const uint64_t per_request = s.bytes();
    s.fit = per_request && c.working_bytes > s.kv_reserve_bytes
                ? (c.working_bytes - s.kv_reserve_bytes) / per_request
                : 0;
    // Off keeps the fleet's fixed slots (a pool that cannot hold them is refused); the scratch of
    // speculative decoding lowers them to what fits.
    s.slots = spec == SpecState::off ? c.max_running : uint32_t(std::min<uint64_t>(c.max_running, s.fit));
    return s;
}
RunningStateSlots running_state_slots(const FleetConfig& c) { return running_state_slots(c, c.spec_state); }

double activation_bytes(const FleetConfig& c) {
    const ModelConfig& m = c.model;
    const double tp = c.attention_dp ? 1.0 : double(c.gpus), ranks = double(c.gpus);
    const double widest_linear = double(m.conv_channels()) / tp;
    const double experts = double(m.moe.top_k) * double(m.moe.intermediate) * 2.0 / double(c.gpus);
    const double dense = m.moe.top_k ? 0.0 : double(m.mlp_hidden) * 2.0 / double(c.gpus);
    const double per_token_rank = 2.0 * (2.0 * double(m.d_model) + std::max(widest_linear, experts + dense));
    const double logits = 4.0 * double(c.max_running) * double(m.vocab);
    return ranks * per_token_rank * double(c.max_batch_tokens) + logits;
}

SharedPoolPlan shared_pool_plan(const FleetConfig& c) {
    SharedPoolPlan p;
    p.device = c.hardware.mem_bytes * double(c.gpus);
    p.reserved = p.device * c.memory_fraction;
    p.weights = weight_bytes(c.model).total();
    p.activations = activation_bytes(c);
    p.budget = c.pool_bytes ? double(c.pool_bytes) : p.reserved - p.weights - p.activations;
    return p;
}

MemoryPlan memory_plan(const FleetConfig& c) {
    const TpLayout a = tp_layout(c.model, c.gpus, c.attention_dp);
    MemoryPlan m;
    m.device = c.hardware.mem_bytes * double(c.gpus);
    m.weights = weight_bytes(c.model).total();
    m.working = double(c.working_bytes);
    m.cache_kv = double(c.cache.kv_capacity_tokens) * double(a.kv_bytes_per_token());
    m.cache_states = double(c.cache.state_capacity) * double(a.state_bytes());
    m.cache_bounded = c.cache.kv_capacity_tokens > 0 && c.cache.state_capacity > 0;
    if (c.engine != CacheEngine::ideal) {  // one pool: the device less the weights, cache inside
        const SharedPoolPlan p = shared_pool_plan(c);
        m.working = std::max(0.0, p.budget) + p.activations;
        m.cache_kv = m.cache_states = 0;
        m.cache_bounded = true;
    }
    return m;
}

std::string acceptance_error(const FleetConfig& c) {
    if (c.spec_state == SpecState::off) return {};  // one token per step, whatever acceptance_len says
    if (c.acceptance_len >= 1 && c.acceptance_len <= 1.0 + double(c.draft_len)) return {};
    return "a verify of 1 + draft_len = " + std::to_string(1 + c.draft_len) +
           " tokens yields between 1 and that many: the acceptance length is outside";
}

std::string host_config_error(const FleetConfig& c) {
    if (!c.host.on()) return {};
    if (c.engine != CacheEngine::ideal)
        return std::string("the host tier is modelled for engine=ideal, not for ") +
               cache_engine_id(c.engine) + "'s own (SGLang's HiCache, vLLM's CPU offload): set engine=ideal";
    if (c.quotas) return "the host tier keeps one namespace: it would share prefixes across tenants";
    if (c.host.state_slots == 0) return "the host tier needs state slots (0 would mean unbounded)";
    if (!(c.host.link.bytes_per_s > 0)) return "the host link needs a bandwidth";
    return {};
}

// What prefill/decode disaggregation is not modelled with (yet), and a split that leaves a stage empty.
std::string pd_config_error(const FleetConfig& c) {
    if (!c.pd.on()) return {};
    if (c.pd.prefill_instances >= c.instances)
        return "prefill_instances " + std::to_string(c.pd.prefill_instances) +
               " leaves no decode instance of " + std::to_string(c.instances);
    if (c.engine != CacheEngine::ideal) return "prefill/decode disaggregation is modelled for engine=ideal";
    if (c.quotas) return "prefill/decode disaggregation is not modelled with tenant quotas";
    if (!(c.pd.link.bytes_per_s > 0)) return "the prefill-to-decode link needs a bandwidth";
    if (c.spec_state == SpecState::recoverssm)
        return "vLLM refuses RecoverSSM with KV connectors (P/D disaggregation): disaggregated Kimi-K3 runs "
               "spec_state=snapshot";
    return {};
}

namespace {
// engine sglang / vllm: what the shared pool cannot hold or does not model.
std::string shared_pool_error(const FleetConfig& c) {
    if (c.engine == CacheEngine::ideal) return {};
    const char* engine = cache_engine_id(c.engine);
    if (c.cache.state_capacity || c.cache.kv_capacity_tokens)
        return std::string("engine=") + engine +
               " caches in the instance's one pool (what the running requests leave): state_capacity and "
               "kv_capacity_tokens are engine=ideal's";
    if (c.engine == CacheEngine::sglang && c.spec_state == SpecState::recoverssm)
        return "RecoverSSM is vLLM's (Kimi-K3's V2 runner); SGLang keeps snapshot scratch "
               "(spec_state=snapshot)";
    if (!(c.memory_fraction > 0 && c.memory_fraction <= 1)) return "memory_fraction must lie in (0, 1]";
    const SharedPoolPlan p = shared_pool_plan(c);
    // unbounded_memory models the engines' own runs (no device): a pool given then need not fit one.
    if (c.pool_bytes && !c.unbounded_memory && p.weights + p.activations + p.budget > p.device)
        return "a pool of " + format_bytes(p.budget) + " beside " + format_bytes(p.weights) +
               " of weights and " + format_bytes(p.activations) + " of activations exceeds the instance's " +
               format_bytes(p.device);
    if (p.budget <= 0)
        return "the weights (" + format_bytes(p.weights) + ") and the activations (" +
               format_bytes(p.activations) + ") leave no pool in " + format_bytes(p.reserved) +
               " (memory_fraction of " + format_bytes(p.device) + ")";
    return {};
}

// The engines' rules (core/fleet/fleet_engine.h) model the engine's own request lifecycle: what the
// fleet adds on top of it that reads the ideal policy's checkpoint plan is refused.
std::string fleet_engine_check(const FleetConfig& c) {
    const FleetEngineRules e = fleet_engine_rules(c);
    if (!e.on()) return {};
    if (std::string err = fleet_engine_error(e); !err.empty()) return err;
    const std::string name = std::string("engine=") + cache_engine_id(c.engine);
    if (!c.guard)
        return name + " resumes only where a state sits (the engines have no consistency guard to turn off)";
    if (c.recovery != Recovery::recompute)
        return name + ": recovery " + recovery_ids()[size_t(c.recovery)] +
               " moves the ideal policy's planned checkpoints (host tier replication, live migration), which "
               "the engines do not have; use recovery=recompute";
    // A verify of D = 1 + N tokens crosses at most one track boundary only if the interval covers it
    // (SGLang's server_args: mamba_track_interval >= speculative_num_draft_tokens).
    if (c.engine == CacheEngine::sglang && c.sglang.mode == SglangMode::extra_buffer &&
        c.spec_state != SpecState::off && e.track_interval < 1 + c.draft_len)
        return name + ": mamba_track_interval " + std::to_string(e.track_interval) +
               " must cover a verify's 1 + draft_len = " + std::to_string(1 + c.draft_len) + " tokens";
    return {};
}

}  // namespace

const Hardware& instance_hardware(const FleetConfig& c, uint32_t k) {
    return k < c.first_gpus.instances ? c.first_gpus.hardware : c.hardware;
}

FleetConfig on_instance_gpus(const FleetConfig& c, uint32_t k) {
    FleetConfig x = c;
    x.hardware = instance_hardware(c, k);
    return x;
}

std::string check_fleet_config(const FleetConfig& c) {
    if (c.instances == 0) return "at least one instance";
    if (c.first_gpus.on() &&
        (c.first_gpus.instances > c.instances || !(c.first_gpus.hardware.peak_flops > 0)))
        return "the second GPU preset needs a published preset on at most " + std::to_string(c.instances) +
               " instances";
    if (!(c.model.active_params > 0) || !(c.model.total_params > 0))
        return "model " + c.model.id + " has no parameter counts: the roofline needs a published preset";
    if (std::string e = tp_layout_error(c.model, c.gpus, c.attention_dp); !e.empty()) return e;
    if (c.max_running == 0 || c.max_batch_tokens == 0 || c.max_prefills == 0)
        return "batching limits must be positive";
    if (c.cache.page_size == 0 || c.page_tokens == 0) return "page sizes must be positive";
    if (c.spec_state != SpecState::off && c.draft_len == 0)
        return "speculative decoding needs a draft length";
    if (std::string e = acceptance_error(c); !e.empty()) return e;
    if (c.spec_state == SpecState::recoverssm && c.model.linear_name != "KDA")
        return "RecoverSSM records KDA's corrections and gates; " + c.model.name + "'s linear layers are " +
               c.model.linear_name;
    if (c.engine == CacheEngine::ideal && c.spec_state != SpecState::off && running_state_slots(c).slots == 0)
        return "the working memory (" + format_bytes(double(c.working_bytes)) +
               ") cannot hold one running request's state and KV pages";
    if (std::string e = fleet_engine_check(c); !e.empty()) return e;
    if (std::string e = pd_config_error(c); !e.empty()) return e;
    if (std::string e = host_config_error(c); !e.empty()) return e;
    if (c.engine == CacheEngine::ideal &&
        (c.policy.interval == 0 || c.policy.interval % c.cache.page_size != 0))
        return "checkpoint interval " + std::to_string(c.policy.interval) +
               " is not a multiple of the page size " + std::to_string(c.cache.page_size);
    for (const FaultSpec& f : c.faults)
        if (f.instance >= c.instances)
            return "fault on instance " + std::to_string(f.instance) + " of " + std::to_string(c.instances);
    if (!(c.load > 0)) return "load multiplier must be positive";
    if (std::string e = shared_pool_error(c); !e.empty()) return e;
    if ((c.recovery != Recovery::recompute || c.migration_move != MigrationMove::everything) &&
        !(c.link.bytes_per_s > 0))
        return "the recovery needs a link with a positive bandwidth";
    return {};
}

}  // namespace k3
