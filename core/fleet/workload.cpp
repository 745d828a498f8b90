#include "core/fleet/workload.h"

#include <algorithm>
#include <cmath>
#include <deque>

#include "core/base/fmath.h"
#include "core/base/rng.h"

namespace k3 {

uint64_t Workload::prompt_tokens() const {
    uint64_t t = 0;
    for (const auto& r : requests) t += r.prompt_len;
    return t;
}

uint64_t Workload::output_tokens() const {
    uint64_t t = 0;
    for (const auto& r : requests) t += r.output_len;
    return t;
}

uint32_t Workload::sessions() const {
    std::vector<uint32_t> s;
    for (const auto& r : requests) s.push_back(r.session);
    std::sort(s.begin(), s.end());
    return uint32_t(std::unique(s.begin(), s.end()) - s.begin());
}

uint64_t mooncake_block_key(uint64_t hash_id) {
    // mix64 is a bijection, so distinct ids name distinct streams.
    return mix64(hash_id ^ 0x4d6f6f6e63616b65ull);
}

Workload mooncake_workload(const MooncakeTrace& t) {
    Workload w;
    w.name = "mooncake";
    w.requests.reserve(t.requests.size());
    const uint32_t B = t.block_tokens;
    for (size_t i = 0; i < t.requests.size(); ++i) {
        const TraceRequest& tr = t.requests[i];
        TokenSeq::Builder b;
        uint64_t left = tr.input_length;
        for (uint32_t k = 0; k < tr.n_ids && left > 0; ++k) {
            const uint32_t n = uint32_t(std::min<uint64_t>(B, left));
            b.stream(mooncake_block_key(t.ids[tr.first_id + k]), 0, n);
            left -= n;
        }
        Request r;
        r.id = i;
        r.arrival_ms = tr.timestamp_ms;
        r.tokens = b.build();
        r.prompt_len = tr.input_length;
        r.output_len = tr.output_length;
        r.session = uint32_t(i);
        w.requests.push_back(std::move(r));
    }
    return w;
}

namespace {

// Lognormal length with the given mean (sigma 0.8), clamped to [1, 1 << 20].
uint32_t draw_len(Rng& rng, double mean) {
    const double sigma = 0.8;
    const double v = rng.lognormal(log_f64(std::max(mean, 1.0)) - 0.5 * sigma * sigma, sigma);
    return uint32_t(std::clamp(v + 0.5, 1.0, double(1 << 20)));
}

void sort_by_arrival(Workload& w) {
    std::stable_sort(w.requests.begin(), w.requests.end(),
                     [](const Request& a, const Request& b) { return a.arrival_ms < b.arrival_ms; });
    for (size_t i = 0; i < w.requests.size(); ++i) w.requests[i].id = i;
}

// A request whose tokens are `context` + `more` (new message) + output of `out` tokens.
Request make_request(const TokenSeqPtr& context, uint64_t more_key, uint32_t more, uint64_t out_key,
                     uint32_t out) {
    TokenSeq::Builder b;
    if (context) b.append(*context);
    b.stream(more_key, 0, more);
    const uint64_t prompt = b.size();
    b.stream(out_key, 0, out);
    Request r;
    r.tokens = b.build();
    r.prompt_len = uint32_t(prompt);
    r.output_len = out;
    r.output_known = true;
    return r;
}

bool fits(const TokenSeqPtr& ctx, uint64_t more) {
    return (ctx ? ctx->size() : 0) + more <= (uint64_t(1) << 31);
}

}  // namespace

Workload chat_workload(const ChatConfig& c) {
    Workload w;
    w.name = "chat";
    Rng rng(c.seed);
    Rng keys = rng.fork(1);
    std::vector<uint64_t> sys(std::max<uint32_t>(c.system_prompts, 1));
    for (auto& k : sys) k = keys.next();
    Rng arrivals = rng.fork(2);
    double t0 = 0;
    const uint32_t lo = std::max<uint32_t>(c.min_turns, 1), hi = std::max(lo, c.max_turns);
    for (uint32_t s = 0; s < c.sessions; ++s) {
        t0 += arrivals.exponential(std::max(c.session_rate_per_s, 1e-9) / 1000.0);
        Rng r = rng.fork(1000 + s);  // a session's content does not depend on how many sessions there are
        const uint32_t turns = lo + uint32_t(r.below(hi - lo + 1));
        TokenSeq::Builder sb;
        sb.stream(sys[r.below(sys.size())], 0, c.system_len);
        TokenSeqPtr ctx = sb.build();
        double t = t0;
        for (uint32_t turn = 0; turn < turns; ++turn) {
            const uint32_t user = draw_len(r, c.user_len_mean), out = draw_len(r, c.output_len_mean);
            if (!fits(ctx, uint64_t(user) + out)) break;
            Request q = make_request(ctx, r.next(), user, r.next(), out);
            q.arrival_ms = t;
            q.session = s;
            q.turn = turn;
            ctx = q.tokens;
            w.requests.push_back(std::move(q));
            t += r.exponential(1.0 / std::max(c.think_ms_mean, 1e-9));
        }
    }
    sort_by_arrival(w);
    return w;
}

Workload shared_prompt_workload(const SharedPromptConfig& c) {
    Workload w;
    w.name = "shared-prompts";
    Rng rng(c.seed);
    const uint32_t K = std::max<uint32_t>(c.system_prompts, 1);
    std::vector<TokenSeqPtr> sys;
    std::vector<double> cdf;
    double total = 0;
    for (uint32_t k = 0; k < K; ++k) {
        sys.push_back(TokenSeq::Builder().stream(rng.next(), 0, c.system_len).build());
        total += 1.0 / double(k + 1);
        cdf.push_back(total);
    }
    double t = 0;
    for (uint32_t i = 0; i < c.requests; ++i) {
        t += rng.exponential(std::max(c.rate_per_s, 1e-9) / 1000.0);
        const double u = rng.uniform() * total;
        const uint32_t k = uint32_t(std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin());
        const uint32_t user = draw_len(rng, c.user_len_mean), out = draw_len(rng, c.output_len_mean);
        Request q = make_request(sys[std::min(k, K - 1)], rng.next(), user, rng.next(), out);
        q.arrival_ms = t;
        q.session = i;
        w.requests.push_back(std::move(q));
    }
    sort_by_arrival(w);
    return w;
}

Workload agentic_workload(const AgenticConfig& c) {
    Workload w;
    w.name = "agentic";
    Rng rng(c.seed);
    const uint64_t sys_key = rng.next();
    Rng arrivals = rng.fork(2);
    double t0 = 0;
    for (uint32_t task = 0; task < c.tasks; ++task) {
        t0 += arrivals.exponential(std::max(c.task_rate_per_s, 1e-9) / 1000.0);
        Rng r = rng.fork(1000 + task);
        struct Step {
            TokenSeqPtr context;  // what the step's prompt extends
            uint64_t more_key;
            uint32_t more;
            uint32_t depth;
            double at;
        };
        TokenSeqPtr sys = TokenSeq::Builder().stream(sys_key, 0, c.system_len).build();
        std::deque<Step> todo{{sys, r.next(), c.task_len, 0, t0}};
        uint32_t made = 0;
        while (!todo.empty() && made < c.max_requests_per_task) {
            Step st = todo.front();
            todo.pop_front();
            const uint32_t out = draw_len(r, c.action_len_mean);
            if (!fits(st.context, uint64_t(st.more) + out)) continue;
            Request q = make_request(st.context, st.more_key, st.more, r.next(), out);
            q.arrival_ms = st.at;
            q.session = task;
            q.turn = st.depth;
            ++made;
            if (st.depth + 1 < c.depth) {
                const uint32_t kids = r.bernoulli(c.branch_prob)
                                          ? 2 + uint32_t(r.below(std::max<uint32_t>(c.max_branches, 2) - 1))
                                          : 1;
                for (uint32_t k = 0; k < kids; ++k)
                    todo.push_back({q.tokens, r.next(), draw_len(r, c.tool_len_mean), st.depth + 1,
                                    st.at + r.exponential(1.0 / std::max(c.step_ms_mean, 1e-9))});
            }
            w.requests.push_back(std::move(q));
        }
    }
    sort_by_arrival(w);
    return w;
}

Workload reuse_mix_workload(const ReuseMixConfig& c) {
    const double share = std::clamp(c.reuse_share, 0.0, 1.0);
    const uint32_t shared = uint32_t(std::floor(double(c.requests) * share + 0.5));
    SharedPromptConfig s;
    s.requests = shared;
    s.system_prompts = c.prefixes;
    s.system_len = c.prefix_len;
    s.user_len_mean = c.suffix_len_mean;
    s.output_len_mean = c.output_len_mean;
    s.rate_per_s = c.rate_per_s * share;
    s.seed = c.seed * 2 + 1;
    SharedPromptConfig u = s;  // unique: no shared part, the whole prompt drawn as the suffix
    u.requests = c.requests - shared;
    u.system_prompts = 1;
    u.system_len = 0;
    u.user_len_mean = double(c.prefix_len) + c.suffix_len_mean;
    u.rate_per_s = c.rate_per_s * (1 - share);
    u.seed = c.seed * 2 + 2;
    return merge_workloads({shared_prompt_workload(s), shared_prompt_workload(u)}, "reuse-mix");
}

Workload merge_workloads(std::vector<Workload> parts, std::string name) {
    Workload w;
    w.name = std::move(name);
    uint32_t session_base = 0;
    for (Workload& p : parts) {
        uint32_t top = 0;
        for (Request& r : p.requests) {
            top = std::max(top, r.session + 1);
            r.session += session_base;
            w.requests.push_back(std::move(r));
        }
        session_base += top;
    }
    sort_by_arrival(w);
    return w;
}

}  // namespace k3
