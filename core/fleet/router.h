// Routers: which instance a request goes to (reference/serving.md §5).
//   round_robin   instances in turn
//   least_loaded  fewest requests in flight (queued + running), as SGLang's gateway counts load
//   p2c           power of two choices: two instances drawn at random, the less loaded one
//   prefix        an oracle: SGLang Model Gateway cache_aware's rule on the KV-visible match read from
//                 each instance's true tree (precise, zero-lag): if loads are imbalanced (max - min >
//                 balance_abs and max > balance_rel x min) the least loaded; else the longest match if
//                 match / prompt > cache_threshold; else the least loaded
//   state_aware   an oracle: the same rule on the state-usable match: the deepest checkpoint the
//                 instance can resume from, which routers fed by KV events cannot see (SGLang #23678)
//   cache_aware   the same rule on the gateway's own approximate trees (router_views.h ApproxTrees)
//   kv_events     the same rule on a view fed by KV events kv_event_delay_s late (KvEventView)
//   kv_cost       Dynamo's KvRouter (ai-dynamo/dynamo: the worker-selection logit and softmax_sample of
//                 lib/llm/src/kv_router/scheduler.rs, later lib/kv-router/src/scheduling/selector.rs;
//                 defaults of lib/llm/src/kv_router/config.rs KvRouterConfig::default at 0435b58a): per
//                 instance cost = overlap_weight x prefill blocks not cached (in the event view) + decode
//                 blocks (blocks of the requests in flight + the request's own); the minimum, or a softmax
//                 sample at `temperature` over the costs normalised by their range
//   session       consistent hashing of the session id with bounded load: the session's home
//                 instance unless its load exceeds load_factor x the mean
// Ties go to the lower instance index. Only eligible instances (up, not draining) are chosen.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/base/rng.h"
#include "core/cache/radix_cache.h"
#include "core/fleet/fleet_config.h"
#include "core/fleet/router_views.h"
#include "core/fleet/workload.h"

namespace k3 {

// What a router may look at.
class RouterView {
  public:
    virtual ~RouterView() = default;
    virtual uint32_t instances() const = 0;
    virtual bool eligible(uint32_t i) const = 0;
    virtual double load(uint32_t i) const = 0;  // requests in flight
    // The instance's cache match for the request's context (no side effects).
    virtual Match match(uint32_t i, const Request& r, uint64_t len) const = 0;
    virtual double now_ms() const { return 0; }
    // One cache per instance (no tenant namespaces): what the zero-delay event view is compared with.
    virtual bool one_namespace() const { return true; }
    // KV blocks of `block` tokens the instance's requests in flight hold (kv_cost's decode blocks).
    virtual double active_blocks(uint32_t i, uint32_t block) const { return 0; }
};

// One kv_cost decision, as the router saw it (the check recounts the costs from these inputs).
struct CostDecision {
    uint64_t len = 0;
    int chosen = -1;
    bool sampled = false;  // temperature > 0
    std::vector<uint32_t> instance;
    std::vector<uint64_t> overlap;  // tokens
    std::vector<double> active, cost;
};

// What the deployed routers' own views did, for the checks.
struct RouterAudit {
    uint64_t approx_pruned = 0, approx_cycles = 0, approx_tokens = 0;
    uint64_t events_applied = 0, events_pending = 0;
    double min_event_slack_ms = 1e300;  // < 0: an event was applied before its delay
    uint64_t zero_delay_compared = 0, zero_delay_mismatches = 0;
    std::string approx;  // ApproxTrees::audit
};

enum class RouteReason : uint8_t { only_choice, rotation, load, affinity, balance, below_threshold, hash };
const char* route_reason_name(RouteReason r);

struct RouteDecision {
    int instance = -1;  // -1: no eligible instance
    RouteReason reason = RouteReason::load;
};

class Router {
  public:
    Router(const RouterConfig& c, uint32_t instances, uint64_t seed);
    RouteDecision choose(const Request& r, uint64_t len, const RouterView& v);
    const RouterConfig& config() const { return c_; }

    // The KV events of instance i (kv_events, kv_cost): the engine cached q[0, upto) / let go of
    // q[start, end) at `now`.
    bool wants_kv_events() const { return !events_.empty(); }
    void kv_stored(uint32_t i, const TokenSeq& q, uint64_t upto, double now);
    void kv_removed(uint32_t i, const TokenSeq& q, uint64_t start, uint64_t end, double now);

    RouterAudit audit() const;
    const std::vector<CostDecision>& cost_decisions() const { return decisions_; }
    // Recounts every kv_cost decision: "" when each picked the minimum of its own costs (temperature
    // 0) and every cost is overlap_weight x prefill blocks + decode blocks.
    std::string recount_costs() const;
    // Falsifiers of the deployed routers' checks (each fires once or from then on).
    enum class Corrupt : uint8_t {
        none,
        approx_misinsert,
        events_early,
        cost_not_minimum,
        events_lose_first_block
    };
    void corrupt(Corrupt c);

  private:
    int least_loaded(const RouterView& v) const;
    bool imbalanced(const RouterView& v) const;
    RouteDecision affinity(const Request& r, uint64_t len, const RouterView& v, bool state);
    // The cache rule on match(i) (tokens): the best match above the threshold, else least loaded.
    template <class M>
    RouteDecision best_match(uint64_t len, const RouterView& v, M match) const;
    RouteDecision approximate(const Request& r, uint64_t len, const RouterView& v, bool only);
    RouteDecision event_fed(const Request& r, uint64_t len, const RouterView& v);
    RouteDecision cost(const Request& r, uint64_t len, const RouterView& v);
    void compare_zero_delay(const Request& r, uint64_t len, const RouterView& v,
                            std::span<const uint64_t> hashes);
    RouteDecision hashed(const Request& r, const RouterView& v) const;

    RouterConfig c_;
    uint32_t n_;
    uint32_t next_ = 0;
    Rng rng_;
    std::vector<std::pair<uint64_t, uint32_t>> ring_;  // (point, instance), sorted
    std::unique_ptr<ApproxTrees> approx_;              // cache_aware
    std::unique_ptr<BlockHashMemo> hashes_;            // kv_events, kv_cost
    std::vector<KvEventView> events_;
    std::vector<CostDecision> decisions_;  // kv_cost
    uint64_t zero_compared_ = 0, zero_mismatches_ = 0;
    bool cost_not_minimum_ = false;
};

}  // namespace k3
