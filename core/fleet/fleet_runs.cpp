#include "core/fleet/fleet_runs.h"

#include <algorithm>
#include <cstdint>

#include "core/base/numfmt.h"

namespace k3 {

namespace {
constexpr uint64_t kMaxTreeNodes = 3000000;  // about 300 MB of trees: the page's budget
}  // namespace

std::string check_fleet_size(const Workload& w, const FleetConfig& c) {
    uint64_t tokens = 0;
    for (const Request& r : w.requests) tokens += r.cache_len();
    const uint64_t estimate = tokens / std::max<uint64_t>(c.policy.interval, 1) + w.requests.size() * 2;
    if (estimate <= kMaxTreeNodes) return {};
    return "up to " + format_grouped(double(estimate)) + " tree nodes (" + format_grouped(double(tokens)) +
           " tokens at one checkpoint per " + format_grouped(double(c.policy.interval)) +
           " tokens) exceed the limit of " + format_grouped(double(kMaxTreeNodes)) + "; raise the interval";
}

}  // namespace k3
