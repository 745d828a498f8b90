#include "core/modules/shared/fleet_recount.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace k3 {

WorkRecount recount_work(const FleetSim& s) {
    WorkRecount w;
    const FleetTotals& t = s.totals();
    w.ledger_forward = t.iter_prefill_tokens + t.iter_decode_tokens;
    w.ledger_output = t.iter_first_tokens + t.iter_decode_tokens;
    const auto& requests = s.workload().requests;
    const auto& out = s.outcomes();
    std::vector<const AdmissionRecord*> last(out.size(), nullptr);
    for (const AdmissionRecord& a : s.admissions()) last[a.req] = &a;
    for (size_t i = 0; i < out.size(); ++i) {
        w.abandoned += out[i].abandoned_work;
        if (!out[i].completed || !last[i]) {
            w.recount_output += out[i].generated;
            continue;
        }
        // The last attempt prefilled prompt + generated - resume tokens, then decoded each output
        // token after its first (none if it had them all already).
        const Request& q = requests[i];
        const int64_t decoded = std::max<int64_t>(int64_t(last[i]->generated), int64_t(q.output_len) - 1);
        w.recount_forward += uint64_t(int64_t(q.prompt_len) + decoded - int64_t(last[i]->resume));
        w.recount_output += q.output_len;
    }
    w.recount_forward += w.abandoned;
    return w;
}

namespace {

uint64_t shared_prefix(const TokenSeq& a, const TokenSeq& b) {
    return common_prefix(a, b, 0, std::min(a.size(), b.size()));
}

// Token sequences in lexicographic order of token identities (values would tie distinct streams that
// share one): the longest prefix a sequence shares with any of a set is the one it shares with its
// neighbour on either side.
struct Lexicographic {
    bool operator()(const TokenSeq* a, const TokenSeq* b) const {
        const uint64_t n = shared_prefix(*a, *b);
        if (n == a->size() || n == b->size()) return a->size() < b->size();
        return a->id_at(n) < b->id_at(n);
    }
};
using SeqSet = std::set<const TokenSeq*, Lexicographic>;

uint64_t longest_shared(const SeqSet& set, const TokenSeq& x) {
    const auto it = set.lower_bound(&x);
    uint64_t best = 0;
    if (it != set.end()) best = shared_prefix(x, **it);
    if (it != set.begin()) best = std::max(best, shared_prefix(x, **std::prev(it)));
    return best;
}

}  // namespace

HitRecount recount_hits(const FleetSim& s) {
    HitRecount h;
    const auto& requests = s.workload().requests;
    const bool namespaces = s.config().quotas;
    std::map<std::pair<uint32_t, uint32_t>, SeqSet> local;  // by (instance, tenant namespace)
    SeqSet anywhere;
    for (const AdmissionRecord& a : s.admissions()) {
        const Request& q = requests[a.req];
        const TokenSeq& x = *q.tokens;
        SeqSet& here = local[{a.instance, namespaces ? q.tenant : 0}];
        const uint64_t bound = longest_shared(a.carried ? anywhere : here, x);
        // Hits past the token sequence are the request's own generated tokens it carried along.
        const uint64_t claimed = std::min(std::max(a.kv_hit, a.resume), x.size());
        ++h.admissions;
        h.claimed_tokens += claimed;
        h.available_tokens += bound;
        if (claimed > bound && h.unbacked++ == 0) {
            h.first_req = a.req;
            h.first_instance = a.instance;
            h.first_claimed = claimed;
            h.first_bound = bound;
        }
        here.insert(&x);
        anywhere.insert(&x);
    }
    return h;
}

}  // namespace k3
