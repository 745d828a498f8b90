// Module 9 `cp`: one KDA layer on one rank and over R simulated ranks, the three recurrences under the
// three combiners, the naive sum against its closed form, and the costs by formula.
#include <algorithm>
#include <cmath>

#include "core/base/bytes.h"
#include "core/base/clock.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/cp/layer_cp.h"
#include "core/cp/reference.h"
#include "core/model/model.h"
#include "core/modules/cp/cp.h"

namespace k3 {

namespace {

using namespace k3::cp;

double rel(const FloatBuf& x, const FloatBuf& ref) { return rel_rms(x.data(), ref.data(), ref.size()); }

// The index of the element of largest magnitude (where a falsifier's corruption cannot drown).
template <class Buf>
size_t largest(const Buf& x) {
    size_t at = 0;
    for (size_t i = 1; i < x.size(); ++i)
        if (std::fabs(x[i]) > std::fabs(x[at])) at = i;
    return at;
}

// A KDA map at shape s as a rank holds it: local_maps on one token (the map's size does not depend on
// the tokens), M and B in fp32.
double held_map_bytes(const kda::Shape& s) {
    FloatBuf q(s.qk_row()), k(s.qk_row()), v(s.v_row()), g(s.g_row()), beta(size_t(s.HV));
    const Tokens one{q.data(), k.data(), v.data(), g.data(), beta.data(), 1};
    const std::vector<RankMap> maps = local_maps(Variant::kda, s, {one}, 1.0f, 64, false);
    return 4.0 * double(maps[0].M.size() + maps[0].B.size());
}

// The map size the module counts: the cost model's, or (falsified) one with a diagonal M.
double counted_map_bytes(const CpParams& p, const kda::Shape& s) {
    return map_bytes(p.falsify == CpFalsify::map_formula ? Variant::diagonal : Variant::kda, s);
}

// The lengths of the slices at `b`.
std::vector<int> slice_lengths(const Bounds& b) {
    std::vector<int> lens;
    for (size_t i = 0; i + 1 < b.size(); ++i) lens.push_back(b[i + 1] - b[i]);
    return lens;
}

class CpRun : public StagedRun {
  public:
    CpRun(const CpParams& p, const Params& raw) : StagedRun("cp", raw), p_(p) {
        add_step("layer on one rank", 1, [this] { single(); });
        add_step("layer over R ranks (halo, no halo)", 2, [this] {
            if (ok()) layer();
        });
        add_stage("variants x combiners", 4,
                  [this](const Deadline& dl) { return ok() ? variants(dl) : 1.0; });
        add_step("closed form (fp64)", 2, [this] {
            if (ok()) closed_form();
        });
        add_step("work and bytes", 0.5, [this] {
            if (ok()) costs();
        });
        add_step("report", 0.2, [this] {
            if (ok()) compare_outputs();
            report_cp(p_, m_, report_);
        });
    }

  private:
    bool ok() const { return m_.failed.empty(); }
    void single();
    void layer();
    double variants(const Deadline& dl);
    void damage(std::vector<RankMap>& maps) const;
    void count_sent(size_t ci, const CpResult& r);
    void closed_form();
    CpClosedForm closed_form_of(size_t vi, const Tokens& x, const std::vector<Tokens>& slices) const;
    void costs();
    void compare_outputs();
    void measure_halo();
    Tokens core_inputs() const {
        return {one_.q.data(), one_.k.data(), one_.v.data(), one_.g.data(), one_.beta.data(), m_.tokens};
    }

    CpParams p_;
    CpOutcome m_;
    std::unique_ptr<model::Model> model_;
    FloatBuf x_, start_, S0_;
    LayerRun one_, halo_, nohalo_;
    float scale_ = 0;
    struct Outputs {
        FloatBuf o, S;  // [T][HV][V], final state [HV][K][V]
    };
    Outputs single_[3];          // per variant, on one rank
    Outputs combined_[3][3][2];  // per (variant, combiner, fix-up), over the ranks
    size_t next_ = 0;
};

void CpRun::single() {
    const int T = m_.tokens = p_.tokens;
    const int R = m_.ranks = std::min(p_.ranks, T);
    const int C = m_.chunk = p_.chunk;
    // One KDA layer of the runnable model (config.h default_runnable_config) with seeded weights (the model's
    // other layer is the attention layer a runnable model must have; it is not used here).
    ModelConfig c = default_runnable_config();
    c.id = "cp-layer";
    c.layers = {LayerKind::linear, LayerKind::attention};
    c.vocab = 16;
    c.mlp_hidden = 8;
    model::ModelOptions options;
    options.chunk = C;
    model::ModelResult made = model::Model::create(c, p_.seed, options);
    if (!made.model) {  // cannot happen within the declared ranges; refuse loudly if it does
        m_.failed = made.error;
        return;
    }
    model_ = std::move(made.model);
    const model::KdaDims& d = model_->kda();
    m_.shape = d.s;
    scale_ = d.scale;
    Rng rng(p_.seed * 7919 + 17);
    x_.resize(size_t(T) * d.d_model);
    rng.fill_normal(x_.data(), x_.size());
    start_.assign(d.layer_floats(), 0.0f);
    if (p_.start == CpStart::prefix) rng.fill_normal(start_.data(), start_.size(), 0.5f);
    m_.bounds = p_.split == CpSplit::uneven ? uneven_bounds(T, R, C, 2, p_.seed) : even_bounds(T, R);
    m_.even_fallback = cp_even_fallback(p_);
    const Stopwatch sw;
    one_ = layer_single_rank(model_->kda_weights(0), d, x_.data(), T, start_.data(), C);
    m_.single_ms = sw.ms();
    S0_.assign(start_.begin(), start_.begin() + ptrdiff_t(m_.shape.state_floats()));
}

void CpRun::layer() {
    const model::KdaDims& d = model_->kda();
    const Stopwatch sw;
    LayerCpOptions with{Combiner::scan, Fixup::rerun, true, m_.chunk};
    if (p_.falsify == CpFalsify::halo_row) with.drop_newest_halo_row = 1;
    halo_ = layer_context_parallel(model_->kda_weights(0), d, x_.data(), m_.bounds, start_.data(), with);
    m_.cp_ms = sw.ms();
    const bool reads_halo = p_.falsify == CpFalsify::no_halo_reads_halo;
    nohalo_ = layer_context_parallel(model_->kda_weights(0), d, x_.data(), m_.bounds, start_.data(),
                                     {Combiner::scan, Fixup::rerun, reads_halo, m_.chunk});
}

// The falsifiers that damage the ranks' maps between step 1 and the combination.
void CpRun::damage(std::vector<RankMap>& maps) const {
    if (p_.falsify == CpFalsify::map_b_bit) flip_bit(maps.front().B[largest(maps.front().B)], 23);
    if (p_.falsify == CpFalsify::zero_start_output && !maps.back().o0.empty())
        flip_bit(maps.back().o0[largest(maps.back().o0)], 23);
}

// What the KDA ranks sent in step 2 with combiner ci, from the buffers the combination passed.
void CpRun::count_sent(size_t ci, const CpResult& r) {
    m_.sent_busiest[ci] = m_.sent_total[ci] = 0;
    for (double b : r.bytes_sent) {
        m_.sent_busiest[ci] = std::max(m_.sent_busiest[ci], b);
        m_.sent_total[ci] += b;
    }
}

double CpRun::variants(const Deadline& dl) {
    // The three recurrences on the same core inputs: the layer's q, k, v, g, beta (single rank).
    const Tokens x = core_inputs();
    const kda::Shape& s = m_.shape;
    const std::vector<Tokens> slices = split(s, x, m_.bounds);
    const size_t total = 3 * 3 * 2;
    while (next_ < total) {
        const size_t vi = next_ / 6, ci = next_ / 2 % 3, fi = next_ % 2;
        const bool kda = kVariants[vi] == Variant::kda;
        const Variant v = kda && p_.falsify == CpFalsify::kda_as_linear ? Variant::linear : kVariants[vi];
        if (ci == 0 && fi == 0) {
            single_[vi] = {FloatBuf(size_t(m_.tokens) * s.v_row()), S0_};
            run(v, s, single_[vi].S.data(), x, scale_, m_.chunk, single_[vi].o.data());
        }
        // context_parallel() in its two steps, so that the maps can be weighed and damaged in between.
        std::vector<RankMap> maps = local_maps(v, s, slices, scale_, m_.chunk, Fixup(fi) == Fixup::linear);
        if (kda && ci == 0 && fi == 0)
            for (const RankMap& rm : maps)
                m_.held_map_bytes.push_back(4.0 * double(rm.M.size() + rm.B.size()));
        damage(maps);
        const CpResult r =
            combine(v, s, slices, maps, S0_.data(), scale_, m_.chunk, kCombiners[ci], Fixup(fi));
        if (kda && fi == 0) count_sent(ci, r);
        m_.errors[vi][ci][fi] = {rel(r.o, single_[vi].o), rel(r.S, single_[vi].S)};
        combined_[vi][ci][fi] = {r.o, r.S};
        ++next_;
        if (dl.passed()) break;
    }
    return double(next_) / double(total);
}

CpClosedForm CpRun::closed_form_of(size_t vi, const Tokens& x, const std::vector<Tokens>& slices) const {
    const Variant v = kVariants[vi];
    const kda::Shape& s = m_.shape;
    const std::vector<double> S0d(S0_.begin(), S0_.end());
    CpClosedForm out;
    // fp64: the identity S_true - (S_0 + sum B) = closed form, on maps computed independently.
    std::vector<double> S_true = S0d, naive = S0d;
    ref::run(v, s, S_true.data(), x, 1.0, nullptr);
    if (p_.falsify == CpFalsify::fp64_state_bit) flip_bit(S_true[largest(S_true)], 52);
    std::vector<ref::MapF64> maps;
    for (const Tokens& sl : slices) {
        maps.push_back(ref::map(v, s, sl));
        for (size_t e = 0; e < naive.size(); ++e) naive[e] += maps.back().B[e];
    }
    const std::vector<double> closed = ref::naive_sum_error(s, maps, S0d.data());
    for (size_t e = 0; e < closed.size(); ++e) {
        out.identity_diff = std::max(out.identity_diff, std::fabs((S_true[e] - naive[e]) - closed[e]));
        out.identity_scale = std::max(out.identity_scale, std::fabs(S_true[e]));
    }
    // fp32: the measured error of the naive combiner vs the closed form on the ranks' fp32 maps.
    std::vector<ref::MapF64> maps32;
    for (const RankMap& m : local_maps(v, s, slices, scale_, m_.chunk, false))
        maps32.push_back(ref::promote(s, m.M.data(), m.B.data()));
    const std::vector<double> closed32 = ref::naive_sum_error(s, maps32, S0d.data());
    const FloatBuf& naive32 = combined_[vi][0][0].S;
    const FloatBuf& truth32 = single_[vi].S;
    double num = 0, den = 0, meas = 0, truth = 0;
    for (size_t e = 0; e < closed32.size(); ++e) {
        const double m = double(truth32[e]) - double(naive32[e]);
        num += (m - closed32[e]) * (m - closed32[e]);
        den += closed32[e] * closed32[e];
        meas += m * m;
        truth += double(truth32[e]) * double(truth32[e]);
    }
    out.gap = den > 0 ? std::sqrt(num / den) : 0;
    out.naive_rel = truth > 0 ? std::sqrt(meas / truth) : 0;
    out.naive_error_norm = std::sqrt(meas);
    out.closed_norm = std::sqrt(den);
    return out;
}

void CpRun::closed_form() {
    const Tokens x = core_inputs();
    const std::vector<Tokens> slices = split(m_.shape, x, m_.bounds);
    for (size_t vi = 0; vi < 3; ++vi) m_.closed_form[vi] = closed_form_of(vi, x, slices);
}

void CpRun::costs() {
    const kda::Shape& s = m_.shape;
    const std::vector<int> lens = slice_lengths(m_.bounds);
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci)
            m_.costs[vi][ci] = cp_cost(kVariants[vi], s, lens, m_.chunk, kCombiners[ci], Fixup::rerun);
    m_.map_bytes = counted_map_bytes(p_, s);
    for (size_t i = 0; i < lens.size(); ++i)
        m_.rank_rows.push_back({m_.bounds[i], lens[i], map_work(Variant::kda, s, lens[i], m_.chunk, false),
                                fixup_work(Variant::kda, s, lens[i], m_.chunk, Fixup::rerun)});
    m_.at_scale = cp_at_scale(p_);
}

void CpRun::measure_halo() {
    const model::KdaDims& d = model_->kda();
    CpHalo& h = m_.halo;
    h.core_inputs_same = bitwise_equal(halo_.q, one_.q) && bitwise_equal(halo_.k, one_.k) &&
                         bitwise_equal(halo_.v, one_.v) && bitwise_equal(halo_.g, one_.g) &&
                         bitwise_equal(halo_.beta, one_.beta);
    h.windows_same = bitwise_equal(halo_.state.data() + d.state_floats(),
                                   one_.state.data() + d.state_floats(), d.window_floats());
    const size_t qk = m_.shape.qk_row();
    for (int t = 0; t < m_.tokens; ++t)
        h.wrong_tokens +=
            !bitwise_equal(nohalo_.k.data() + size_t(t) * qk, one_.k.data() + size_t(t) * qk, qk);
    // Tokens whose conv window reaches before their rank's slice: the first W-1 of every later rank, or
    // all of a rank shorter than that.
    const Bounds& b = m_.bounds;
    for (size_t i = 1; i + 1 < b.size(); ++i) h.expected_wrong += std::min(d.window_rows(), b[i + 1] - b[i]);
    h.out_with = rel(halo_.out, one_.out);
    h.out_without = rel(nohalo_.out, one_.out);
    h.state_with = rel_rms(halo_.state.data(), one_.state.data(), d.state_floats());
    h.state_without = rel_rms(nohalo_.state.data(), one_.state.data(), d.state_floats());
    h.halo_bytes = halo_.halo_bytes;
    h.halo_max_ranks = halo_.halo_max_ranks;
}

void CpRun::compare_outputs() {
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const Outputs &rerun = combined_[vi][ci][0], &linear = combined_[vi][ci][1];
            m_.fixups_disagree[vi][ci] = std::max(rel(linear.o, rerun.o), rel(linear.S, rerun.S));
        }
    measure_halo();
    // Per output row (log axis: exact rows are drawn at 1e-12).
    const double floor = 1e-12;
    const size_t vr = m_.shape.v_row(), dm = size_t(model_->kda().d_model);
    const FloatBuf& kda_one = single_[2].o;
    for (int t = 0; t < m_.tokens; ++t) {
        const size_t at = size_t(t) * vr, row = size_t(t) * dm;
        m_.token_error_naive.push_back(
            std::max(floor, rel_rms(combined_[2][0][0].o.data() + at, kda_one.data() + at, vr)));
        m_.token_error_scan.push_back(
            std::max(floor, rel_rms(combined_[2][2][0].o.data() + at, kda_one.data() + at, vr)));
        m_.token_error_no_halo.push_back(
            std::max(floor, rel_rms(nohalo_.out.data() + row, one_.out.data() + row, dm)));
    }
}

}  // namespace

CpAtScale cp_at_scale(const CpParams& p) {
    CpAtScale a;
    a.model = *model_preset(p.preset);
    const ModelConfig& pc = a.model;
    const kda::Shape ps{pc.lin_heads, pc.lin_v_heads, pc.head_k, pc.head_v};
    a.shape = ps;
    a.map_bytes = counted_map_bytes(p, ps);
    a.held_map_bytes = held_map_bytes(ps);
    for (size_t vi = 0; vi < 3; ++vi) {
        const Variant v = kVariants[vi];
        a.rows[vi] = {map_bytes(v, ps), 4.0 * ps.HV * double(map_floats_per_head(v, ps)),
                      transfer_seconds(map_bytes(v, ps), p.link), compose_work(v, ps), apply_work(v, ps)};
    }
    const double ctx = double(p.context);
    for (int R = 1; R <= 256; R *= 2) {
        if (R > ctx) break;
        const std::vector<int> even = slice_lengths(even_bounds(int(std::min(ctx, 1e9)), R));
        const CpCost ks = cp_cost(Variant::kda, ps, even, 64, Combiner::scan, Fixup::rerun);
        const CpCost kr = cp_cost(Variant::kda, ps, even, 64, Combiner::serial, Fixup::rerun);
        const CpCost kl = cp_cost(Variant::linear, ps, even, 64, Combiner::scan, Fixup::rerun);
        a.sweep.push_back({R, ks.single_rank / ks.critical(), kr.single_rank / kr.critical(),
                           kl.single_rank / kl.critical()});
    }
    return a;
}

std::unique_ptr<Run> start_cp(const CpParams& p, const Params& raw) {
    return std::make_unique<CpRun>(p, raw);
}

}  // namespace k3
