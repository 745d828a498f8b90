// Routers: which instance a request goes to (reference/serving.md §5).
//   round_robin   instances in turn
//   least_loaded  fewest requests in flight (queued + running), as SGLang's gateway counts load
//   p2c           power of two choices: two instances drawn at random, the less loaded one
//   prefix        SGLang Model Gateway cache_aware on the KV-visible match (what KV events export):
//                 if loads are imbalanced (max - min > balance_abs and max > balance_rel x min) the
//                 least loaded; else the longest match if match / prompt > cache_threshold; else the
//                 least loaded
//   state_aware   the same rule on the state-usable match: the deepest checkpoint the instance
//                 can resume from, which routers fed by KV events cannot see (SGLang #23678)
//   session       consistent hashing of the session id with bounded load: the session's home
//                 instance unless its load exceeds load_factor x the mean
// Ties go to the lower instance index. Only eligible instances (up, not draining) are chosen.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/base/rng.h"
#include "core/cache/radix_cache.h"
#include "core/fleet/fleet_config.h"
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

  private:
    int least_loaded(const RouterView& v) const;
    RouteDecision affinity(const Request& r, uint64_t len, const RouterView& v, bool state);
    RouteDecision hashed(const Request& r, const RouterView& v) const;

    RouterConfig c_;
    uint32_t n_;
    uint32_t next_ = 0;
    Rng rng_;
    std::vector<std::pair<uint64_t, uint32_t>> ring_;  // (point, instance), sorted
};

}  // namespace k3
