// `k3cli bench model`: tokens/s of the runnable model (core/model): prefill (chunked KDA kernel, C = 64)
// and greedy decode (recurrent KDA step) of the default runnable preset (`k3-tiny`, config.h), `tiny`
// and `small`, plus the default with the scalar kernels for comparison. Each measurement restores the same
// saved sequence first, so every repetition does identical work; variants run in interleaved rounds and the
// median is reported, so ratios come from one run on one machine state.
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
#include "core/model/model.h"
#include "core/model/sampler.h"
#include "core/model/token_work.h"

namespace k3::cli {

namespace {

using namespace k3::model;

struct Setup {
    std::string preset, impl;
    std::unique_ptr<Model> model;
    std::unique_ptr<PagePool> pool;
    std::unique_ptr<Sequence> seq;
    std::vector<int32_t> prompt;
    std::vector<SequenceSnapshot> at;  // saved sequences to decode from, one per decode context
    double create_ms = 0;
};

struct ModelVariant {
    Setup* s;
    std::string name;
    int tokens = 0, context = 0;
    std::function<double()> run;  // one measured call; returns its tokens/s
    std::vector<double> rates;
};

// A preset with its kernels, ready to measure: the model (its creation timed), a pool and a sequence
// for max_ctx tokens, a random prompt of max_ctx tokens, and the sequence saved after every decode
// context's prefill, then empty (for prefill). Null if the model or its pool cannot be made.
std::unique_ptr<Setup> make_setup(const char* preset, Impl impl, int max_ctx,
                                  const std::vector<int>& contexts) {
    auto s = std::make_unique<Setup>();
    s->preset = preset;
    s->impl = impl == Impl::simd ? "simd" : "scalar";
    ModelOptions o;
    o.impl = impl;
    const Stopwatch sw;
    ModelResult m = Model::create(*model_preset(preset), 1, o);
    s->create_ms = sw.ms();
    if (!m.model) return nullptr;
    s->model = std::move(m.model);
    PoolResult p = make_model_pool(*s->model, 1, uint64_t(max_ctx), 16);
    if (!p.pool) return nullptr;
    s->pool = std::move(p.pool);
    s->seq = s->model->new_sequence(*s->pool, 1).seq;
    Rng r(7);
    for (int i = 0; i < max_ctx; ++i) s->prompt.push_back(int32_t(r.below(uint64_t(s->model->vocab()))));
    const SequenceSnapshot empty = s->model->save(*s->seq);
    for (int c : contexts) {
        (void)s->model->restore(*s->seq, empty);
        (void)s->model->prefill(*s->seq, std::span<const int32_t>(s->prompt.data(), size_t(c)));
        s->at.push_back(s->model->save(*s->seq));
    }
    s->at.push_back(empty);  // last: the empty sequence, for prefill
    return s;
}

// Prefill of the first T prompt tokens into the empty sequence.
ModelVariant prefill_variant(Setup* s, int T) {
    return {s, "prefill", T, 0, [s, T] {
                (void)s->model->restore(*s->seq, s->at.back());
                const Stopwatch sw;
                (void)s->model->prefill(*s->seq, std::span<const int32_t>(s->prompt.data(), size_t(T)));
                return double(T) / (sw.ms() * 1e-3);
            }};
}

// decode_n greedy steps after the prefill of contexts[c] tokens.
ModelVariant decode_variant(Setup* s, size_t c, int context, int decode_n) {
    return {s, "decode", decode_n, context, [s, c, decode_n] {
                (void)s->model->restore(*s->seq, s->at[c]);
                std::vector<float> logits;
                int32_t tok = s->prompt[size_t(s->seq->position())];
                const Stopwatch sw;
                for (int i = 0; i < decode_n; ++i) {
                    (void)s->model->decode(*s->seq, tok, &logits);
                    tok = argmax(logits.data(), s->model->vocab());
                }
                return double(decode_n) / (sw.ms() * 1e-3);
            }};
}

// Every setup's variants, prefill then decode; the scalar kernels are slow, so they run only the
// first prefill length and the first decode context.
std::vector<ModelVariant> make_variants(const std::vector<std::unique_ptr<Setup>>& setups,
                                        const std::vector<int>& prefill_T, const std::vector<int>& contexts,
                                        int decode_n) {
    std::vector<ModelVariant> vars;
    for (auto& sp : setups) {
        Setup* s = sp.get();
        for (int T : prefill_T) {
            if (s->impl == "scalar" && T != prefill_T.front()) continue;  // the scalar kernels are slow
            vars.push_back(prefill_variant(s, T));
        }
        for (size_t c = 0; c < contexts.size(); ++c) {
            if (s->impl == "scalar" && c > 0) continue;
            vars.push_back(decode_variant(s, c, contexts[c], decode_n));
        }
    }
    return vars;
}

// One call (its run returns its rate).
void measure_model_call(ModelVariant& v, bool warm_up) {
    const double rate = v.run();
    if (!warm_up) v.rates.push_back(rate);
}

// What one token of the variant costs on the device's roofline: a decode step at its context, or a
// prefill token of T (at half the prompt's context on average).
kda::KernelWork work_of(const ModelVariant& v, const kda::DeviceLimits& d) {
    const Model& m = *v.s->model;
    const bool prefill = v.name == "prefill";
    const ModelTokenWork t =
        model_token_work(m.config(), m.weights(), prefill ? v.tokens / 2.0 : double(v.context));
    const kda::MemLevel level = kda::level_for(d, t.weight_bytes);  // the weights' own, for the default
    return prefill ? prefill_token_work(t, v.tokens, level) : decode_token_work(t, level);
}

// One result per variant: its median tokens/s, the parameters that tell it apart, and the device's
// limit for it with the fraction reached.
void add_rates(BenchContext& ctx, const std::vector<ModelVariant>& vars, int rounds,
               const kda::DeviceLimits& d) {
    for (const auto& v : vars) {
        BenchResult r{v.name + "/" + v.s->preset + "/" + v.s->impl, {}, {}, median(v.rates), "tokens/s"};
        if (v.name == "prefill")
            r.params.push_back({"T", v.tokens}), r.params.push_back({"C", v.s->model->options().chunk});
        else
            r.params.push_back({"context", v.context}), r.params.push_back({"steps", v.tokens});
        r.params.push_back({"parameters", double(v.s->model->weights().parameters())});
        r.params.push_back({"rounds", rounds});
        add_limit(r, d, work_of(v, d), r.value);
        ctx.add(r);
    }
}

// How long every setup's Model::create took (once, not repeated: building the weights).
void add_create_times(BenchContext& ctx, const std::vector<std::unique_ptr<Setup>>& setups) {
    for (const auto& s : setups)
        ctx.add({"create_ms/" + s->preset + "/" + s->impl,
                 {{"parameters", double(s->model->weights().parameters())}},
                 {},
                 s->create_ms,
                 "ms"});
}

// The median rate of a variant, 0 if it did not run. `at`: the decode context, or the prefill length.
double rate_of(const std::vector<ModelVariant>& vars, const std::string& name, const std::string& preset,
               const std::string& impl, int at) {
    for (const auto& v : vars)
        if (v.name == name && v.s->preset == preset && v.s->impl == impl &&
            (name == "prefill" ? v.tokens : v.context) == at)
            return median(v.rates);
    return 0.0;
}

// For the default runnable model (k3-tiny): prefill over decode and (with SIMD) the SIMD kernels over
// the scalar ones; tiny over small (size), and the default over tiny (Kimi K3's design against Kimi
// Linear's at the same size).
void add_ratios(BenchContext& ctx, const std::vector<ModelVariant>& vars, const std::vector<int>& prefill_T,
                const std::vector<int>& contexts) {
    auto find = [&](const std::string& name, const std::string& preset, const std::string& impl, int at) {
        return rate_of(vars, name, preset, impl, at);
    };
    auto ratio = [&](const std::string& name, double num, double den) {
        ctx.add({name, {}, {}, den > 0 ? num / den : 0, "ratio"});
    };
    const std::string best = kda::simd_enabled() ? "simd" : "scalar", m = default_runnable_id();
    const int T0 = prefill_T.front(), T1 = prefill_T.back(), c0 = contexts.front();
    ratio("ratio/" + m + "_prefill" + std::to_string(T1) + "_over_decode" + std::to_string(c0),
          find("prefill", m, best, T1), find("decode", m, best, c0));
    ratio("ratio/tiny_over_small_decode" + std::to_string(c0), find("decode", "tiny", best, c0),
          find("decode", "small", best, c0));
    ratio("ratio/" + m + "_over_tiny_decode" + std::to_string(c0), find("decode", m, best, c0),
          find("decode", "tiny", best, c0));
    if (kda::simd_enabled()) {
        ratio("ratio/" + m + "_decode" + std::to_string(c0) + "_simd_over_scalar",
              find("decode", m, "simd", c0), find("decode", m, "scalar", c0));
        ratio("ratio/" + m + "_prefill" + std::to_string(T0) + "_simd_over_scalar",
              find("prefill", m, "simd", T0), find("prefill", m, "scalar", T0));
    }
}

void bench_model(BenchContext& ctx) {
    ctx.arch = kda::simd_arch();
    const bool quick = ctx.quick;
    const std::vector<int> prefill_T = quick ? std::vector<int>{64} : std::vector<int>{128, 512};
    const int decode_n = quick ? 8 : 64, rounds = quick ? 1 : 3;
    const std::vector<int> contexts = quick ? std::vector<int>{64} : std::vector<int>{64, 1024};

    // A setup that cannot be made is left out.
    std::vector<std::unique_ptr<Setup>> setups;
    const int max_ctx = std::max(prefill_T.back(), contexts.back() + decode_n);
    auto add_setup = [&](const char* preset, Impl impl) {
        if (auto s = make_setup(preset, impl, max_ctx, contexts)) setups.push_back(std::move(s));
    };
    add_setup(default_runnable_id(), Impl::simd);
    if (kda::simd_enabled()) add_setup(default_runnable_id(), Impl::scalar);
    add_setup("tiny", Impl::simd);
    add_setup("small", Impl::simd);

    // The device around the models, with a working set of the default model's weights.
    double weight_bytes = 0;
    if (!setups.empty()) {
        const Model& m = *setups.front()->model;
        weight_bytes = model_token_work(m.config(), m.weights(), 0).weight_bytes;
    }
    std::vector<ModelVariant> vars = make_variants(setups, prefill_T, contexts, decode_n);
    const kda::DeviceLimits device =
        measure_device(ctx, 0, weight_bytes, [&] { measure_interleaved(vars, rounds, measure_model_call); });
    add_rates(ctx, vars, rounds, device);
    add_create_times(ctx, setups);
    add_ratios(ctx, vars, prefill_T, contexts);
}

}  // namespace

K3_REGISTER_BENCH("model",
                  "runnable models: prefill and decode tokens/s of k3-tiny (the default), tiny and small",
                  bench_model);

}  // namespace k3::cli
