// `k3cli bench spec`: speculative decoding with a recurrent state (core/spec).
//   restore_ms/runnable/{copy,replay}    rollback of the default runnable model (k3-tiny) to n kept
//                                        tokens (n = 0..N): copy a snapshot, or copy the confirmed state and
//                                        replay n records
//   restore_ms/kimi_layer/{copy,replay}  one KDA layer at Kimi-Linear dimensions (32 heads, 128 x 128):
//                                        copy a full layer state, or replay n minimal-exact records in place
//   fold_ms/k3_layer/{token_order,closed_form}  RecoverSSM's commit of n records into one KDA layer at
//                                        Kimi-K3 dimensions (96 heads, 128 x 128): the token-order fold (n
//                                        passes over S, bitwise = decoding) and vLLM's closed form (one pass)
//   tokens_per_s/...                     greedy decoding of the default runnable model, plain and
//                                        speculative (N = 4) with a chance drafter at several acceptance
//                                        rates (drafting free: the bound of what speculation gains here), and
//                                        the model drafting for itself with quantised weights (as costly as
//                                        the target here). The snapshot run verifies token by token, because
//                                        the runnable model's one-pass forward cannot hand out per-token
//                                        states: its tokens/s measures that, not an engine's snapshot kernel;
//                                        compare the rollback methods by restore_ms.
// Variants run in interleaved rounds and report medians, so ratios come from one machine state.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/base/clock.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/cli/bench.h"
#include "core/kda/gates.h"
#include "core/kda/layout.h"
#include "core/model/sampler.h"
#include "core/spec/decoder.h"
#include "core/spec/delta.h"
#include "core/spec/models.h"
#include "core/spec/rollback_lab.h"

namespace k3::cli {

namespace {

using namespace k3::spec;

struct Decoding {
    std::string name;
    std::vector<std::pair<std::string, double>> params;
    std::function<double(double*)> run;  // tokens/s of one measured run; *accept = accepted drafts / drafted
    std::vector<double> rates, accepts;
};

// The runnable model's rollback to n kept tokens (n = 0..n_max), by copy and by replay of minimal exact and
// of RecoverSSM records, as timed by the lab.
std::string bench_runnable_restore(BenchContext& ctx, RollbackLab& lab, int n_max, int reps) {
    for (RecordVariant v : {RecordVariant::minimal_exact, RecordVariant::recoverssm}) {
        std::vector<double> copy_ms, replay_ms;
        if (std::string e = lab.time_restore(v, reps, &copy_ms, &replay_ms); !e.empty()) return e;
        for (int n = 0; n <= n_max; ++n) {
            if (v == RecordVariant::minimal_exact)
                ctx.add(
                    {"restore_ms/runnable/copy", {{"n", n}, {"reps", reps}}, {}, copy_ms[size_t(n)], "ms"});
            ctx.add({"restore_ms/runnable/replay",
                     {{"n", n}, {"reps", reps}},
                     {{"variant", variant_info(v).id}},
                     replay_ms[size_t(n)],
                     "ms"});
        }
    }
    return {};
}

// RecoverSSM's commit into one KDA layer at Kimi-K3 dimensions, n = 0..n_max records of random inputs
// (unit keys, gates in K3's bounded range): token order against the closed form, median ms of `reps`
// (the state is reset outside the timing).
void bench_k3_fold(BenchContext& ctx, int n_max, int reps) {
    const kda::Shape s{96, 96, 128, 128};
    const size_t n = size_t(std::max(n_max, 1));
    Rng r(13);
    kda::FloatBuf S0(s.state_floats()), S(S0.size()), k(n * s.qk_row()), c(n * s.v_row()), g(n * s.g_row());
    r.fill_normal(S0.data(), S0.size(), 0.1f);
    r.fill_normal(k.data(), k.size());
    kda::l2norm_rows(k.data(), int(n) * s.H, s.K);
    r.fill_normal(c.data(), c.size(), 0.1f);
    r.fill_uniform(g.data(), g.size(), -5.0f, 0.0f);
    for (int steps = 0; steps <= n_max; ++steps) {
        std::vector<double> token_order, closed;
        for (int i = 0; i < reps; ++i) {
            S = S0;
            Stopwatch sw;
            for (int t = 0; t < steps; ++t)
                delta_replay(s, S.data(), k.data() + size_t(t) * s.qk_row(), c.data() + size_t(t) * s.v_row(),
                             g.data() + size_t(t) * s.g_row(), 1, 0);
            token_order.push_back(sw.ms());
            S = S0;
            sw.restart();
            closed_form_fold(s, S.data(), k.data(), c.data(), g.data(), steps);
            closed.push_back(sw.ms());
        }
        ctx.add(
            {"fold_ms/k3_layer/token_order", {{"n", steps}, {"reps", reps}}, {}, median(token_order), "ms"});
        ctx.add({"fold_ms/k3_layer/closed_form", {{"n", steps}, {"reps", reps}}, {}, median(closed), "ms"});
    }
}

// One KDA layer at Kimi-Linear dimensions: what a real model's rollback costs, apart from the runnable
// model's overheads.
void bench_kimi_layer_restore(BenchContext& ctx, int n_max, int reps) {
    const LayerRestoreTiming lt = time_layer_restore(kda::Shape{32, 32, 128, 128}, 4, n_max, reps);
    for (int n = 0; n <= n_max; ++n) {
        ctx.add({"restore_ms/kimi_layer/copy",
                 {{"n", n}, {"bytes", double(lt.state_bytes)}},
                 {},
                 lt.copy_ms[size_t(n)],
                 "ms"});
        ctx.add({"restore_ms/kimi_layer/replay",
                 {{"n", n}},
                 {{"variant", "minimal_exact"}},
                 lt.replay_ms[size_t(n)],
                 "ms"});
    }
    if (lt.replay_ms.back() > 0)
        ctx.add({"ratio/kimi_layer_copy_over_one_replayed_token",
                 {},
                 {},
                 lt.copy_ms[0] / (lt.replay_ms.back() / n_max),
                 "ratio"});
}

// What every tokens/s run decodes: the same prompt, for `tokens` tokens, in a pool of `pool_tokens`.
struct DecodeSetup {
    model::Model& m;
    int N = 0, tokens = 0;
    std::vector<int32_t> prompt;
    std::vector<int32_t> greedy;  // the target's greedy continuation: what the chance drafter gets right
    size_t pool_tokens = 0;
};

// The prompt: 32 tokens of a fixed seed, so that every run and every build decodes the same sequence.
std::vector<int32_t> random_prompt(const model::Model& m) {
    Rng rng(11);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 32; ++i) prompt.push_back(int32_t(rng.below(uint64_t(m.vocab()))));
    return prompt;
}

// The target's greedy continuation of the prompt, 2 N tokens longer than a run keeps: a run's last
// speculative step drafts and verifies past `tokens`. False if the model cannot run.
bool greedy_continuation(DecodeSetup& u) {
    PoolResult p = model::make_model_pool(u.m, 1, uint64_t(u.prompt.size() + u.tokens + 2 * u.N));
    if (!p.pool) return false;
    auto s = u.m.new_sequence(*p.pool, 1);
    return s.seq && greedy_decode(u.m, *s.seq, u.prompt, u.tokens + 2 * u.N, &u.greedy).empty();
}

// Plain greedy decoding: the baseline every speculative run is divided by.
Decoding plain_run(const DecodeSetup& u) {
    return {"tokens_per_s/plain", {}, [&u](double* acc) {
                *acc = 0;
                PoolResult p = model::make_model_pool(u.m, 1, u.pool_tokens);
                auto s = u.m.new_sequence(*p.pool, 1);
                std::vector<float> logits;
                (void)u.m.prefill(*s.seq, u.prompt, &logits);
                const Stopwatch sw;
                for (int i = 0; i < u.tokens; ++i)
                    (void)u.m.decode(*s.seq, model::argmax(logits.data(), u.m.vocab()), &logits);
                return u.tokens / (sw.ms() * 1e-3);
            }};
}

// One speculative run: `make` builds the drafter (outside the timing).
std::function<double(double*)> spec_run(const DecodeSetup& u, std::function<std::unique_ptr<Drafter>()> make,
                                        Rollback how) {
    return [&u, make, how](double* acc) {
        PoolResult p = model::make_model_pool(u.m, 1, u.pool_tokens);
        auto s = u.m.new_sequence(*p.pool, 1);
        std::unique_ptr<Drafter> d = make();
        if (!d) return 0.0;
        SpecDecoder dec(u.m, *d, {u.N, how, RecordVariant::minimal_exact});
        if (!dec.start(*s.seq, u.prompt).empty()) return 0.0;
        std::vector<int32_t> out;
        const Stopwatch sw;
        while (int(out.size()) < u.tokens)
            if (!dec.step(*s.seq, &out).empty()) return 0.0;
        const double ms = sw.ms();
        *acc = dec.stats().drafted ? double(dec.stats().accepted) / double(dec.stats().drafted) : 0;
        return double(out.size()) / (ms * 1e-3);
    };
}

// Every variant, in the order they run and are reported: plain first (the ratios' denominator), the
// chance drafter at each acceptance rate (with the snapshot rollback at 0.8 only), then the
// self-drafters.
std::vector<Decoding> decoding_runs(const DecodeSetup& u, bool quick) {
    std::vector<Decoding> runs;
    runs.push_back(plain_run(u));
    for (double pr : quick ? std::vector<double>{0.8} : std::vector<double>{0.5, 0.8, 0.95}) {
        auto make = [&u, pr] {
            return std::unique_ptr<Drafter>(new ChanceDrafter(u.greedy, pr, 3, u.m.vocab()));
        };
        runs.push_back({"tokens_per_s/spec_chance_replay",
                        {{"N", u.N}, {"accept", pr}},
                        spec_run(u, make, Rollback::replay)});
        if (pr == 0.8)
            runs.push_back({"tokens_per_s/spec_chance_snapshot_tokenwise",
                            {{"N", u.N}, {"accept", pr}},
                            spec_run(u, make, Rollback::snapshot)});
    }
    for (int bits : quick ? std::vector<int>{4} : std::vector<int>{8, 4}) {
        std::string err;
        std::shared_ptr<model::Model> dm = cached_model(default_runnable_id(), 1, bits, &err);
        if (!dm) continue;
        auto make = [&u, dm] {
            std::string e;
            return std::unique_ptr<Drafter>(SelfDrafter::create(*dm, u.pool_tokens + 8, &e).release());
        };
        runs.push_back({"tokens_per_s/spec_self_replay",
                        {{"N", u.N}, {"bits", bits}},
                        spec_run(u, make, Rollback::replay)});
    }
    return runs;
}

// One call: its rate and its acceptance.
void measure_spec_call(Decoding& r, bool warm_up) {
    double accepted = 0;
    const double rate = r.run(&accepted);
    if (warm_up) return;
    r.rates.push_back(rate);
    r.accepts.push_back(accepted);
}

// The medians, then every speculative run over plain (runs[0]).
void add_decoding(BenchContext& ctx, const std::vector<Decoding>& runs, int tokens, int rounds) {
    const double plain = median(runs[0].rates);
    for (auto& r : runs) {
        BenchResult b{r.name, r.params, {}, median(r.rates), "tokens/s"};
        b.params.push_back({"tokens", tokens});
        b.params.push_back({"rounds", rounds});
        if (r.name != "tokens_per_s/plain")
            b.params.push_back({"drafts_accepted_fraction", median(r.accepts)});
        ctx.add(b);
    }
    for (size_t i = 1; i < runs.size(); ++i)
        ctx.add({"ratio/" + runs[i].name.substr(std::string("tokens_per_s/").size()) + "_over_plain",
                 runs[i].params,
                 {},
                 plain > 0 ? median(runs[i].rates) / plain : 0,
                 "ratio"});
}

void bench_spec(BenchContext& ctx) {
    ctx.arch = kda::simd_arch();
    const bool quick = ctx.quick;
    const int N = 4, rounds = quick ? 1 : 3, tokens = quick ? 16 : 64, reps = quick ? 3 : 15;
    std::string err;
    std::shared_ptr<model::Model> m = cached_model(default_runnable_id(), 1, 16, &err);
    if (!m) return;

    // ---- restore time against n ----
    const int n_max = quick ? 4 : 8;
    // Held to the end: its pool stays allocated while the tokens/s runs below are measured.
    auto lab = RollbackLab::create(*m, n_max, 32, 0.6, 7, &err);
    if (!lab) return;
    if (!bench_runnable_restore(ctx, *lab, n_max, reps).empty()) return;
    bench_kimi_layer_restore(ctx, n_max, reps);
    bench_k3_fold(ctx, n_max, reps);

    // ---- tokens/s, plain and speculative ----
    DecodeSetup u{*m, N, tokens, random_prompt(*m)};
    if (!greedy_continuation(u)) return;
    u.pool_tokens = u.prompt.size() + size_t(tokens + 2 * N);
    std::vector<Decoding> runs = decoding_runs(u, quick);
    measure_interleaved(runs, rounds, measure_spec_call);
    add_decoding(ctx, runs, tokens, rounds);
}

}  // namespace

K3_REGISTER_BENCH("spec",
                  "speculative decoding: restore by copy vs replay; tokens/s with and without speculation",
                  bench_spec);

}  // namespace k3::cli
