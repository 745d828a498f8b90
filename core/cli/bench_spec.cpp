// `k3cli bench spec`: speculative decoding with a recurrent state (core/spec).
//   restore_ms/tiny/{copy,replay}        rollback of the runnable tiny model to n kept tokens (n = 0..N):
//                                        copy a snapshot, or copy the confirmed state and replay n records
//   restore_ms/kimi_layer/{copy,replay}  one KDA layer at Kimi-Linear dimensions (32 heads, 128 x 128):
//                                        copy a full layer state, or replay n minimal-exact records in place
//   tokens_per_s/...                     greedy decoding of the tiny model, plain and speculative (N = 4)
//                                        with a chance drafter at several acceptance rates (drafting free:
//                                        the bound of what speculation gains here), and the model drafting
//                                        for itself with quantised weights (as costly as the target here).
//                                        The snapshot run verifies token by token, because the runnable
//                                        model's one-pass forward cannot hand out per-token states: its
//                                        tokens/s measures that, not an engine's snapshot kernel; compare the
//                                        rollback methods by restore_ms.
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
#include "core/kda/layout.h"
#include "core/model/sampler.h"
#include "core/spec/decoder.h"
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

void bench_spec(BenchContext& ctx) {
    ctx.arch = kda::simd_arch();
    const bool quick = ctx.quick;
    const int N = 4, rounds = quick ? 1 : 3, tokens = quick ? 16 : 64, reps = quick ? 3 : 15;
    std::string err;
    std::shared_ptr<model::Model> m = cached_model("tiny", 1, 16, &err);
    if (!m) return;

    // ---- restore time against n ----
    const int n_max = quick ? 4 : 8;
    auto lab = RollbackLab::create(*m, n_max, 32, 0.6, 7, &err);
    if (!lab) return;
    std::vector<double> copy_ms, replay_ms;
    if (!lab->time_restore(RecordVariant::minimal_exact, reps, &copy_ms, &replay_ms).empty()) return;
    for (int n = 0; n <= n_max; ++n) {
        ctx.add({"restore_ms/tiny/copy", {{"n", n}, {"reps", reps}}, {}, copy_ms[size_t(n)], "ms"});
        ctx.add({"restore_ms/tiny/replay",
                 {{"n", n}, {"reps", reps}},
                 {{"variant", "minimal_exact"}},
                 replay_ms[size_t(n)],
                 "ms"});
    }
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

    // ---- tokens/s, plain and speculative ----
    Rng rng(11);
    std::vector<int32_t> prompt;
    for (int i = 0; i < 32; ++i) prompt.push_back(int32_t(rng.below(uint64_t(m->vocab()))));
    std::vector<int32_t> greedy;
    {
        PoolResult p = model::make_model_pool(*m, 1, uint64_t(prompt.size() + tokens + 2 * N));
        if (!p.pool) return;
        auto s = m->new_sequence(*p.pool, 1);
        if (!s.seq || !greedy_decode(*m, *s.seq, prompt, tokens + 2 * N, &greedy).empty()) return;
    }
    const size_t pool_tokens = prompt.size() + size_t(tokens + 2 * N);
    std::vector<Decoding> runs;
    runs.push_back({"tokens_per_s/plain", {}, [&](double* acc) {
                        *acc = 0;
                        PoolResult p = model::make_model_pool(*m, 1, pool_tokens);
                        auto s = m->new_sequence(*p.pool, 1);
                        std::vector<float> logits;
                        (void)m->prefill(*s.seq, prompt, &logits);
                        const Stopwatch sw;
                        for (int i = 0; i < tokens; ++i)
                            (void)m->decode(*s.seq, model::argmax(logits.data(), m->vocab()), &logits);
                        return tokens / (sw.ms() * 1e-3);
                    }});
    // One speculative run: `make` builds the drafter (outside the timing).
    auto spec_run = [&](std::function<std::unique_ptr<Drafter>()> make, Rollback how) {
        return [&, make, how](double* acc) {
            PoolResult p = model::make_model_pool(*m, 1, pool_tokens);
            auto s = m->new_sequence(*p.pool, 1);
            std::unique_ptr<Drafter> d = make();
            if (!d) return 0.0;
            SpecDecoder dec(*m, *d, {N, how, RecordVariant::minimal_exact});
            if (!dec.start(*s.seq, prompt).empty()) return 0.0;
            std::vector<int32_t> out;
            const Stopwatch sw;
            while (int(out.size()) < tokens)
                if (!dec.step(*s.seq, &out).empty()) return 0.0;
            const double ms = sw.ms();
            *acc = dec.stats().drafted ? double(dec.stats().accepted) / double(dec.stats().drafted) : 0;
            return double(out.size()) / (ms * 1e-3);
        };
    };
    for (double pr : quick ? std::vector<double>{0.8} : std::vector<double>{0.5, 0.8, 0.95}) {
        auto make = [&, pr] {
            return std::unique_ptr<Drafter>(new ChanceDrafter(greedy, pr, 3, m->vocab()));
        };
        runs.push_back({"tokens_per_s/spec_chance_replay",
                        {{"N", N}, {"accept", pr}},
                        spec_run(make, Rollback::replay)});
        if (pr == 0.8)
            runs.push_back({"tokens_per_s/spec_chance_snapshot_tokenwise",
                            {{"N", N}, {"accept", pr}},
                            spec_run(make, Rollback::snapshot)});
    }
    for (int bits : quick ? std::vector<int>{4} : std::vector<int>{8, 4}) {
        std::shared_ptr<model::Model> dm = cached_model("tiny", 1, bits, &err);
        if (!dm) continue;
        auto make = [&, dm] {
            std::string e;
            return std::unique_ptr<Drafter>(SelfDrafter::create(*dm, pool_tokens + 8, &e).release());
        };
        runs.push_back(
            {"tokens_per_s/spec_self_replay", {{"N", N}, {"bits", bits}}, spec_run(make, Rollback::replay)});
    }
    double dummy = 0;
    for (auto& r : runs) r.run(&dummy);  // warm-up
    for (int round = 0; round < rounds; ++round)
        for (auto& r : runs) {
            double acc = 0;
            r.rates.push_back(r.run(&acc));
            r.accepts.push_back(acc);
        }
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

}  // namespace

K3_REGISTER_BENCH("spec",
                  "speculative decoding: restore by copy vs replay; tokens/s with and without speculation",
                  bench_spec);

}  // namespace k3::cli
