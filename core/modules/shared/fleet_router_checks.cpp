#include "core/modules/shared/fleet_router_checks.h"

#include "core/base/numfmt.h"

namespace k3 {

namespace {

void event_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                  const std::string& name, const RouterAudit& a) {
    const RouterConfig& c = s.config().router;
    r.check(key("kv_events_respect_delay"),
            name + "The router's event-fed view never holds an event younger than the delay",
            a.min_event_slack_ms >= 0,
            format_grouped(double(a.events_applied)) + " events applied, " +
                format_grouped(double(a.events_pending)) + " still in flight; delay " +
                format_sig(c.kv_event_delay_s, 3) + " s" +
                (a.events_applied ? ", least margin " + format_sig(a.min_event_slack_ms, 3) + " ms" : ""));
    // Tenant quotas split an instance's cache into namespaces; its events (one view) mix them.
    if (c.kv_event_delay_s > 0 || !s.config().caching || s.config().quotas) return;
    r.check(key("kv_events_match_tree_at_zero_delay"),
            name + "With no delay, the event-fed view equals each instance's true tree floored to blocks",
            a.zero_delay_compared > 0 && a.zero_delay_mismatches == 0,
            format_grouped(double(a.zero_delay_mismatches)) + " of " +
                format_grouped(double(a.zero_delay_compared)) + " matches differ (blocks of " +
                std::to_string(c.event_block_tokens) + " tokens)");
}

}  // namespace

void report_router_checks(Report& r, const FleetSim& s, const std::function<std::string(const char*)>& key,
                          const std::string& name) {
    const RouterKind k = s.config().router.kind;
    if (k != RouterKind::cache_aware && k != RouterKind::kv_events && k != RouterKind::kv_cost) return;
    // With one instance to route to (or one prefill instance) the router never weighs anything.
    const FleetConfig& c = s.config();
    if ((c.pd.on() ? c.pd.prefill_instances : c.instances) < 2) return;
    const RouterAudit a = s.router().audit();
    if (k == RouterKind::cache_aware)
        r.check(
            key("approx_tree_holds_routed"),
            name + "Each approximate tree holds exactly the prompts routed to its worker minus its pruning",
            a.approx.empty(),
            a.approx.empty() ? format_grouped(double(a.approx_tokens)) + " tokens in the trees; " +
                                   format_grouped(double(a.approx_cycles)) + " pruning cycles removed " +
                                   format_grouped(double(a.approx_pruned))
                             : a.approx);
    if (k == RouterKind::kv_events || k == RouterKind::kv_cost) event_checks(r, s, key, name, a);
    if (k == RouterKind::kv_cost) {
        const std::string recount = s.router().recount_costs();
        const size_t n = s.router().cost_decisions().size();
        r.check(key("kv_cost_picks_minimum"),
                name + "Every cost decision, recounted, picked the minimum cost", recount.empty() && n > 0,
                recount.empty() ? format_grouped(double(n)) + " decisions recounted (temperature " +
                                      format_sig(s.config().router.temperature, 3) + ")"
                                : recount);
    }
}

}  // namespace k3
