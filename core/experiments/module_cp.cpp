// Module 9 `cp`: context parallelism and the non-additive state. A prompt split over R simulated ranks
// through one KDA layer of the runnable geometry (projections, conv with and without the halo, core,
// output), combined by a naive sum (wrong), serial state passing and an affine scan; the same for plain
// linear attention and a diagonal gate on the same inputs; errors against one rank, the naive sum's
// error against the closed form of reference/kda.md §4.3, bytes exchanged and critical-path work.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/clock.h"
#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/cp/context_parallel.h"
#include "core/cp/layer_cp.h"
#include "core/cp/reference.h"
#include "core/cp/work.h"
#include "core/experiments/registry.h"
#include "core/model/model.h"
#include "core/model/roofline.h"

namespace k3 {

namespace {

using namespace k3::cp;

constexpr double kTol = 1e-5;  // fp32 relative RMS against the single-rank run

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B"};

std::vector<ParamSpec> cp_params() {
    return {
        ParamSpec::integer("tokens", "Prompt tokens", "tokens", 16, 4096, 500)
            .log()
            .in_group("Run")
            .describe(
                "T: tokens of the prompt run through one KDA layer of the runnable geometry (4 heads of "
                "64 x 64, d_model 256) on one rank and over R ranks."),
        ParamSpec::integer("ranks", "Ranks", "ranks", 1, 64, 7)
            .in_group("Run")
            .describe("R: simulated ranks, each holding a contiguous slice of the prompt."),
        ParamSpec::choice("split", "Slices", {"uneven", "even"}, "uneven",
                          {"uneven, off the chunk grid, one rank of 2 tokens", "even"})
            .in_group("Run")
            .describe(
                "Uneven: seeded slice lengths, no boundary on a multiple of the chunk size, and (R >= 3) "
                "rank 1 holds 2 tokens, fewer than the conv window's W-1 = 3 rows, so the next rank's "
                "halo reaches back over two ranks."),
        ParamSpec::integer("chunk", "Chunk size", "tokens", 1, 256, 64)
            .log()
            .in_group("Run")
            .describe("C of the chunked KDA kernel on every rank (chunks restart at each slice start)."),
        ParamSpec::choice("start", "Start state", {"zero", "prefix"}, "zero",
                          {"zero (a fresh prompt)", "random (after a prefix)"})
            .in_group("Run")
            .describe("The layer state before the prompt: zeros, or a random S_0 and conv windows as if a "
                      "prefix had been processed (then the closed form has an S_0 term)."),
        ParamSpec::seed("Seed of the layer weights, the layer inputs x ~ N(0, 1) and the uneven slices.")
            .in_group("Run"),
        ParamSpec::choice("preset", "Model at scale", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("At scale")
            .describe("Published configuration for the bytes and work at real scale (formulas, not runs)."),
        ParamSpec::integer("context", "Context at scale", "tokens", 1024, 16777216, 131072)
            .log()
            .in_group("At scale")
            .describe("Prompt length split over the ranks for the at-scale figures and the speed-up sweep."),
        ParamSpec::choice("link", "Link", link_preset_ids(), "nvlink4", link_preset_names())
            .in_group("At scale")
            .describe("Interconnect for the exchange time estimate (nominal line rate, no latency)."),
    };
}

std::vector<ParamIssue> validate_cp(const Params& p) {
    std::vector<ParamIssue> out;
    const int T = p.i("tokens"), R = p.i("ranks");
    if (R > T)
        out.push_back({ParamIssue::error, "ranks",
                       "ranks (" + p.text("ranks") + ") exceed the prompt (" + p.text("tokens") +
                           " tokens): every rank needs at least one token"});
    else if (p.str("split") == "uneven" && R >= 2 && T < 4 * R + 2)
        out.push_back({ParamIssue::warning, "split",
                       "too few tokens for uneven slices with a 2-token rank (needs 4 R + 2 = " +
                           std::to_string(4 * R + 2) + "): even slices are used"});
    return out;
}

double rel(const float* x, const float* ref, size_t n) { return rel_rms(x, ref, n); }
double rel(const FloatBuf& x, const FloatBuf& ref) { return rel(x.data(), ref.data(), ref.size()); }

std::string sci(double v) { return format_sig(v, 3); }

class CpRun : public StagedRun {
  public:
    explicit CpRun(const Params& p) : StagedRun("cp", p), p_(p) {
        add_step("layer on one rank", 1, [this] { single(); });
        add_step("layer over R ranks (halo, no halo)", 2, [this] {
            if (!failed_) layer();
        });
        add_stage("variants x combiners", 4,
                  [this](const Deadline& dl) { return failed_ ? 1.0 : variants(dl); });
        add_step("closed form (fp64)", 2, [this] {
            if (!failed_) closed_form();
        });
        add_step("work and bytes", 0.5, [this] {
            if (!failed_) costs();
        });
        add_step("report", 0.2, [this] {
            if (!failed_) finish();
        });
    }

  private:
    void single();
    void layer();
    double variants(const Deadline& dl);
    void closed_form();
    void costs();
    void finish();

    Params p_;
    int T_ = 0, R_ = 0, C_ = 0;
    Bounds b_;
    std::unique_ptr<model::Model> model_;
    FloatBuf x_, start_;
    LayerRun one_, halo_, nohalo_;
    kda::Shape s_;
    float scale_ = 0;
    FloatBuf S0_;
    // Per (variant, combiner, fix-up): errors; per variant: the single-rank run.
    struct Single {
        FloatBuf o, S;
    };
    Single single_[3];
    struct Err {
        double o = 0, S = 0;
        FloatBuf o_vals, S_vals;
    };
    Err err_[3][3][2];
    size_t next_ = 0;
    bool failed_ = false;
    double ms_single_ = 0, ms_cp_ = 0;
};

void CpRun::single() {
    T_ = p_.i("tokens");
    R_ = std::min(p_.i("ranks"), T_);
    C_ = p_.i("chunk");
    // One KDA layer of the runnable tiny geometry with seeded weights (the model's other layer is the
    // attention layer a runnable model must have; it is not used here).
    ModelConfig c = *model_preset("tiny");
    c.id = "cp-layer";
    c.layers = {LayerKind::linear, LayerKind::attention};
    c.vocab = 16;
    c.mlp_hidden = 8;
    model::ModelOptions mo;
    mo.chunk = C_;
    model::ModelResult mr = model::Model::create(c, uint64_t(p_.integer("seed")), mo);
    if (!mr.model) {  // cannot happen within the declared ranges; refuse loudly if it does
        report_.check("The KDA layer could be made", false, mr.error);
        failed_ = true;
        return;
    }
    model_ = std::move(mr.model);
    const model::KdaDims& d = model_->kda();
    s_ = d.s;
    scale_ = d.scale;
    Rng rng(uint64_t(p_.integer("seed")) * 7919 + 17);
    x_.resize(size_t(T_) * d.d_model);
    rng.fill_normal(x_.data(), x_.size());
    start_.assign(d.layer_floats(), 0.0f);
    if (p_.str("start") == "prefix") rng.fill_normal(start_.data(), start_.size(), 0.5f);
    b_ = p_.str("split") == "uneven" ? uneven_bounds(T_, R_, C_, 2, uint64_t(p_.integer("seed")))
                                     : even_bounds(T_, R_);
    const Stopwatch sw;
    one_ = layer_single_rank(model_->kda_weights(0), d, x_.data(), T_, start_.data(), C_);
    ms_single_ = sw.ms();
    S0_.assign(start_.begin(), start_.begin() + ptrdiff_t(s_.state_floats()));
}

void CpRun::layer() {
    const model::KdaDims& d = model_->kda();
    const Stopwatch sw;
    halo_ = layer_context_parallel(model_->kda_weights(0), d, x_.data(), b_, start_.data(),
                                   {Combiner::scan, Fixup::rerun, true, C_});
    ms_cp_ = sw.ms();
    nohalo_ = layer_context_parallel(model_->kda_weights(0), d, x_.data(), b_, start_.data(),
                                     {Combiner::scan, Fixup::rerun, false, C_});
}

double CpRun::variants(const Deadline& dl) {
    // The three recurrences on the same core inputs: the layer's q, k, v, g, beta (single rank).
    const Tokens x{one_.q.data(), one_.k.data(), one_.v.data(), one_.g.data(), one_.beta.data(), T_};
    const size_t total = 3 * 3 * 2;
    while (next_ < total) {
        const size_t vi = next_ / 6, ci = next_ / 2 % 3, fi = next_ % 2;
        const Variant v = kVariants[vi];
        if (ci == 0 && fi == 0) {
            single_[vi] = {FloatBuf(size_t(T_) * s_.v_row()), S0_};
            run(v, s_, single_[vi].S.data(), x, scale_, C_, single_[vi].o.data());
        }
        const CpResult r = context_parallel(v, s_, x, b_, S0_.data(), scale_, C_, kCombiners[ci], Fixup(fi));
        Err& e = err_[vi][ci][fi];
        e.o = rel(r.o, single_[vi].o);
        e.S = rel(r.S, single_[vi].S);
        e.o_vals = r.o;
        e.S_vals = r.S;
        ++next_;
        if (dl.passed()) break;
    }
    return double(next_) / double(total);
}

void CpRun::closed_form() {
    Report& r = report_;
    const Tokens x{one_.q.data(), one_.k.data(), one_.v.data(), one_.g.data(), one_.beta.data(), T_};
    const std::vector<Tokens> slices = split(s_, x, b_);
    const std::vector<double> S0d(S0_.begin(), S0_.end());
    Table t{"Naive sum against the closed form (reference/kda.md §4.3)",
            {"variant", "||S_true - naive|| (fp32 runs)", "||closed form|| (fp32 maps)",
             "relative gap (fp32)", "fp64 identity: max |difference|", "naive error, relative to ||S_true||"},
            {},
            {"", "", "", "ratio", "", "ratio"}};
    bool fp64_ok = true, fp32_ok = true, linear_exact = true;
    std::string fp64_detail, fp32_detail;
    for (size_t vi = 0; vi < 3; ++vi) {
        const Variant v = kVariants[vi];
        // fp64: the identity S_true - (S_0 + sum B) = closed form, on maps computed independently.
        std::vector<double> S_true = S0d, naive = S0d;
        ref::run(v, s_, S_true.data(), x, 1.0, nullptr);
        std::vector<ref::MapF64> maps;
        for (const Tokens& sl : slices) {
            maps.push_back(ref::map(v, s_, sl));
            for (size_t e = 0; e < naive.size(); ++e) naive[e] += maps.back().B[e];
        }
        const std::vector<double> closed = ref::naive_sum_error(s_, maps, S0d.data());
        double id_diff = 0, id_scale = 0;
        for (size_t e = 0; e < closed.size(); ++e) {
            id_diff = std::max(id_diff, std::fabs((S_true[e] - naive[e]) - closed[e]));
            id_scale = std::max(id_scale, std::fabs(S_true[e]));
        }
        // fp32: the measured error of the naive combiner vs the closed form on the ranks' fp32 maps.
        std::vector<ref::MapF64> maps32;
        for (const RankMap& m : local_maps(v, s_, slices, scale_, C_, false))
            maps32.push_back(ref::promote(s_, m.M.data(), m.B.data()));
        const std::vector<double> closed32 = ref::naive_sum_error(s_, maps32, S0d.data());
        const FloatBuf& naive32 = err_[vi][0][0].S_vals;
        double num = 0, den = 0, meas = 0, truth = 0;
        for (size_t e = 0; e < closed32.size(); ++e) {
            const double m = double(single_[vi].S[e]) - double(naive32[e]);
            num += (m - closed32[e]) * (m - closed32[e]);
            den += closed32[e] * closed32[e];
            meas += m * m;
            truth += double(single_[vi].S[e]) * double(single_[vi].S[e]);
        }
        const double gap = den > 0 ? std::sqrt(num / den) : 0;
        const double naive_rel = truth > 0 ? std::sqrt(meas / truth) : 0;
        t.rows.push_back(
            {std::string(variant_title(v)), std::sqrt(meas), std::sqrt(den), gap, id_diff, naive_rel});
        fp64_ok = fp64_ok && id_diff <= 1e-9 * std::max(1.0, id_scale);
        fp64_detail += std::string(variant_id(v)) + " " + sci(id_diff) + "; ";
        if (v == Variant::linear) {
            linear_exact = naive_rel < kTol;
            r.scalar("naive_state_rel_err_linear", "Naive-sum state error, linear attention", "ratio",
                     naive_rel)
                .help = "Plain linear attention has M = I: summing states is exact up to rounding.";
        } else {
            fp32_ok = fp32_ok && gap < 1e-3;
            fp32_detail += std::string(variant_id(v)) + " " + sci(gap) + "; ";
        }
        if (v == Variant::kda) {
            r.scalar("naive_state_rel_err", "Naive-sum state error (KDA)", "ratio", naive_rel, true).help =
                "||S_true - (S_0 + sum_r B_r)|| / ||S_true||: what an all-reduce '+' of the ranks' "
                "zero-start "
                "states leaves in the final state.";
            r.scalar("naive_closed_form_gap", "Naive error vs closed form (KDA)", "ratio", gap, true).help =
                "Relative difference between the measured naive-sum error (fp32) and the closed form "
                "sum_r (M_R..M_{r+1} - I) B_r + (M_R..M_1 - I) S_0 evaluated on the ranks' maps.";
        }
        if (v == Variant::diagonal)
            r.scalar("naive_state_rel_err_diagonal", "Naive-sum state error, diagonal gate", "ratio",
                     naive_rel);
    }
    r.tables.push_back(t);
    r.check("Naive-sum error equals the closed form in fp64 (all three variants)", fp64_ok,
            "max |(S_true - naive) - closed form|: " + fp64_detail);
    r.check("Measured fp32 naive-sum error matches the closed form (diagonal, KDA)", fp32_ok,
            "relative gap " + fp32_detail + "bound 1e-3");
    r.check("Plain linear attention (M = I): the naive sum is exact up to rounding", linear_exact,
            "relative state error " + sci(err_[0][0][0].S) + " < " + sci(kTol));
}

void CpRun::costs() {
    Report& r = report_;
    std::vector<int> lens;
    for (size_t i = 0; i + 1 < b_.size(); ++i) lens.push_back(b_[i + 1] - b_[i]);
    Table t{"Communication and critical path (one layer, runnable geometry)",
            {"variant", "combiner", "rounds", "bytes sent, busiest rank", "bytes sent, all ranks",
             "critical path", "total work", "single rank", "speed-up by work"},
            {},
            {"", "", "count", "B", "B", "MAC", "MAC", "MAC", "ratio"}};
    for (Variant v : kVariants)
        for (Combiner c : kCombiners) {
            const CpCost k = cp_cost(v, s_, lens, C_, c, Fixup::rerun);
            t.rows.push_back({std::string(variant_id(v)), std::string(combiner_title(c)), double(k.rounds),
                              k.bytes_busiest_rank, k.bytes_total, k.critical(), k.total(), k.single_rank,
                              k.single_rank / k.critical()});
            if (v == Variant::kda && c == Combiner::scan) {
                r.scalar("bytes_per_rank", "Map sent per rank per round (KDA, this layer)", "B",
                         map_bytes(v, s_))
                    .help = "[M | B] in fp32: (K x K + K x V) x 4 bytes per value head.";
                r.scalar("critical_path_mac", "Critical path, affine scan (KDA)", "MAC", k.critical());
                r.scalar("single_rank_mac", "Single-rank work (KDA)", "MAC", k.single_rank);
                r.scalar("speedup_scan", "Speed-up by work, scan vs one rank", "ratio",
                         k.single_rank / k.critical(), true)
                    .help =
                    "Single-rank multiply-adds / critical-path multiply-adds (local maps, ceil(log2 R) "
                    "compositions, fix-up). Work only: exchange time not included.";
            }
            if (v == Variant::kda && c == Combiner::serial)
                r.scalar("speedup_serial", "Speed-up by work, serial passing vs one rank", "ratio",
                         k.single_rank / k.critical());
        }
    r.tables.push_back(t);

    // At the preset's scale: one rank's exchange per KDA layer, and the speed-up sweep over R.
    const ModelConfig pc = *model_preset(p_.str("preset"));
    const Link link = *link_preset(p_.str("link"));
    const kda::Shape ps{pc.lin_heads, pc.lin_v_heads, pc.head_k, pc.head_v};
    const double ctx = p_.num("context");
    const double per_layer = map_bytes(Variant::kda, ps);
    r.scalar("bytes_per_rank_preset", "Map per rank per KDA layer at scale", "B", per_layer, true).help =
        pc.name + ": (K x K + K x V) x 4 B x " + std::to_string(pc.lin_v_heads) +
        " value heads (reference/kda.md "
        "§4.2: 4 MiB for Kimi Linear).";
    r.scalar("bytes_per_rank_preset_model", "Maps per rank, all linear layers at scale", "B",
             per_layer * pc.n_linear());
    r.scalar("exchange_s_preset", "One map over the link, all linear layers (estimate)", "s",
             transfer_seconds(per_layer * pc.n_linear(), link));
    Table at{
        "At " + pc.name + " scale, per " + pc.linear_name +
            " layer (formulas; times are line-rate estimates)",
        {"variant", "map per rank", "of which M", "send time per round on " + link.id, "compose", "apply"},
        {},
        {"", "B", "B", "s", "MAC", "MAC"}};
    for (Variant v : kVariants)
        at.rows.push_back({std::string(variant_title(v)), map_bytes(v, ps),
                           4.0 * ps.HV * double(map_floats_per_head(v, ps)),
                           transfer_seconds(map_bytes(v, ps), link), compose_work(v, ps), apply_work(v, ps)});
    r.tables.push_back(at);
    Series scan{
        "affine scan", "ranks", "single-rank work / critical path", {}, {}, "Speed-up by work at scale"};
    scan.x_unit = "ranks";
    scan.y_unit = "ratio";
    scan.log_x = true;
    Series serial = scan, lin = scan;
    serial.name = "serial state passing";
    lin.name = "linear attention, scan";
    for (int R = 1; R <= 256; R *= 2) {
        if (R > ctx) break;
        std::vector<int> even;
        const Bounds eb = even_bounds(int(std::min(ctx, 1e9)), R);
        for (size_t i = 0; i + 1 < eb.size(); ++i) even.push_back(eb[i + 1] - eb[i]);
        const CpCost ks = cp_cost(Variant::kda, ps, even, 64, Combiner::scan, Fixup::rerun);
        const CpCost kr = cp_cost(Variant::kda, ps, even, 64, Combiner::serial, Fixup::rerun);
        const CpCost kl = cp_cost(Variant::linear, ps, even, 64, Combiner::scan, Fixup::rerun);
        scan.x.push_back(R), scan.y.push_back(ks.single_rank / ks.critical());
        serial.x.push_back(R), serial.y.push_back(kr.single_rank / kr.critical());
        lin.x.push_back(R), lin.y.push_back(kl.single_rank / kl.critical());
    }
    r.series.push_back(scan);
    r.series.push_back(serial);
    r.series.push_back(lin);
    r.check("Bytes per rank follow (K x K + K x V) x 4 per value head",
            per_layer == 4.0 * ps.HV * (double(ps.K) * ps.K + double(ps.K) * ps.V) &&
                (pc.id != "kimi-linear-48b" || per_layer == 4194304.0),
            pc.name + ": " + format_bytes(per_layer) + " per layer per rank" +
                (pc.id == "kimi-linear-48b" ? " (reference/kda.md §4.2: 4 MiB)" : ""));
}

void CpRun::finish() {
    Report& r = report_;
    const model::KdaDims& d = model_->kda();
    // ---- errors against one rank ----
    Table e{"Error against one rank (relative RMS, fp32)",
            {"variant", "combiner", "outputs (rerun fix-up)", "final state (rerun)",
             "outputs (linear fix-up)", "final state (linear)", "fix-ups disagree by"},
            {},
            {"", "", "ratio", "ratio", "ratio", "ratio", "ratio"}};
    bool exact_ok = true, fixup_ok = true, naive_wrong = true;
    std::string worst;
    double worst_err = 0;
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const Err &a = err_[vi][ci][0], &b = err_[vi][ci][1];
            const double dis = std::max(rel(b.o_vals, a.o_vals), rel(b.S_vals, a.S_vals));
            e.rows.push_back({std::string(variant_title(kVariants[vi])),
                              std::string(combiner_title(kCombiners[ci])), a.o, a.S, b.o, b.S, dis});
            if (kCombiners[ci] != Combiner::naive_sum) {
                const double m = std::max({a.o, a.S, b.o, b.S});
                exact_ok = exact_ok && m < kTol;
                if (m >= worst_err)
                    worst_err = m,
                    worst = std::string(variant_id(kVariants[vi])) + "/" + combiner_id(kCombiners[ci]);
                fixup_ok = fixup_ok && dis < kTol;
            } else if (kVariants[vi] == Variant::kda && R_ > 1) {
                naive_wrong = naive_wrong && a.S > 1e-3;
            }
        }
    r.tables.insert(r.tables.begin(), e);
    r.scalar("rel_err_scan", "Affine scan vs one rank (KDA outputs)", "ratio", err_[2][2][0].o, true).help =
        "Relative RMS of the layer core's outputs, rerun fix-up, against the single-rank chunked run.";
    r.scalar("rel_err_serial", "Serial passing vs one rank (KDA outputs)", "ratio", err_[2][1][0].o);
    r.scalar("rel_err_naive", "Naive sum vs one rank (KDA outputs)", "ratio", err_[2][0][0].o, true);
    r.check("Serial passing and the affine scan equal one rank (3 variants, 2 fix-ups)", exact_ok,
            "largest relative RMS " + sci(worst_err) + " (" + worst + "), tolerance " + sci(kTol));
    r.check("The two fix-ups (rerun, linear correction) agree", fixup_ok, "tolerance " + sci(kTol));
    if (R_ > 1)
        r.check("The naive sum is wrong for KDA", naive_wrong,
                "final-state relative error " + sci(err_[2][0][0].S) + " > 1e-3");
    // ---- the halo ----
    const size_t qk = s_.qk_row();
    bool pre_core_same = halo_.q == one_.q && halo_.k == one_.k && halo_.v == one_.v && halo_.g == one_.g &&
                         halo_.beta == one_.beta;
    int wrong_tokens = 0, expected_wrong = 0;
    const int W1 = d.window_rows();
    for (int t = 0; t < T_; ++t)
        wrong_tokens +=
            std::memcmp(nohalo_.k.data() + size_t(t) * qk, one_.k.data() + size_t(t) * qk, qk * 4) != 0;
    // Tokens whose conv window reaches before their rank's slice: the first W-1 of every later rank, or
    // all of a rank shorter than that.
    for (size_t i = 1; i + 1 < b_.size(); ++i) expected_wrong += std::min(W1, b_[i + 1] - b_[i]);
    Table h{"The short-conv halo",
            {"", "layer outputs vs one rank", "final S vs one rank", "tokens with a wrong conv input",
             "halo bytes sent", "most ranks one halo reads from"},
            {},
            {"", "ratio", "ratio", "tokens", "B", "ranks"}};
    const double halo_out = rel(halo_.out, one_.out), nohalo_out = rel(nohalo_.out, one_.out);
    const double halo_S = rel(halo_.state.data(), one_.state.data(), d.state_floats());
    const double nohalo_S = rel(nohalo_.state.data(), one_.state.data(), d.state_floats());
    h.rows.push_back(
        {std::string("with halo"), halo_out, halo_S, 0.0, halo_.halo_bytes, double(halo_.halo_max_ranks)});
    h.rows.push_back({std::string("without halo"), nohalo_out, nohalo_S, double(wrong_tokens), 0.0, 0.0});
    r.tables.push_back(h);
    r.scalar("halo_rel_err_with", "Layer outputs with the halo vs one rank", "ratio", halo_out);
    r.scalar("halo_rel_err_without", "Layer outputs without the halo vs one rank", "ratio", nohalo_out, true)
        .help =
        "Every rank after the first starts its short conv from zeros instead of the previous rank's last W-1 "
        "raw "
        "rows.";
    r.check("With the halo every core input has the single-rank bits", pre_core_same,
            "q, k, v, g, beta of all " + std::to_string(T_) + " tokens compared bit for bit");
    r.check("With the halo the layer equals one rank",
            halo_out < kTol && halo_S < kTol &&
                std::memcmp(halo_.state.data() + d.state_floats(), one_.state.data() + d.state_floats(),
                            d.window_floats() * 4) == 0,
            "outputs " + sci(halo_out) + ", S " + sci(halo_S) + ", conv windows bitwise");
    if (R_ > 1)
        r.check("Without the halo exactly the first W-1 tokens of every later rank see a wrong conv input",
                wrong_tokens == expected_wrong && nohalo_out > halo_out,
                std::to_string(wrong_tokens) + " tokens differ, expected " + std::to_string(expected_wrong));
    // ---- per token error ----
    Series naive{"naive sum (KDA)",       "token", "relative error of the output row", {}, {},
                 "Output error per token"};
    naive.log_y = true;
    naive.x_unit = "tokens";
    naive.y_unit = "ratio";
    Series scan = naive, nh = naive;
    scan.name = "affine scan (KDA)";
    nh.name = "no halo (whole layer)";
    const size_t vr = s_.v_row(), dm = size_t(d.d_model);
    for (int t = 0; t < T_; ++t) {
        const double floor = 1e-12;  // log axis: exact rows are drawn at 1e-12
        naive.x.push_back(t), naive.y.push_back(std::max(floor, rel(err_[2][0][0].o_vals.data() + t * vr,
                                                                    single_[2].o.data() + t * vr, vr)));
        scan.x.push_back(t), scan.y.push_back(std::max(floor, rel(err_[2][2][0].o_vals.data() + t * vr,
                                                                  single_[2].o.data() + t * vr, vr)));
        nh.x.push_back(t),
            nh.y.push_back(std::max(floor, rel(nohalo_.out.data() + t * dm, one_.out.data() + t * dm, dm)));
    }
    r.series.insert(r.series.begin(), {naive, scan, nh});
    // ---- ranks ----
    Table rk{"Ranks",
             {"rank", "first token", "tokens", "local map work (KDA)", "fix-up work (KDA, rerun)"},
             {},
             {"", "", "tokens", "MAC", "MAC"}};
    for (size_t i = 0; i + 1 < b_.size(); ++i) {
        const int n = b_[i + 1] - b_[i];
        rk.rows.push_back({double(i), double(b_[i]), double(n), map_work(Variant::kda, s_, n, C_, false),
                           fixup_work(Variant::kda, s_, n, C_, Fixup::rerun)});
    }
    r.tables.push_back(rk);
    r.scalar("ranks", "Ranks", "ranks", R_);
    r.scalar("shortest_slice", "Shortest slice", "tokens", [&] {
        int m = T_;
        for (size_t i = 0; i + 1 < b_.size(); ++i) m = std::min(m, b_[i + 1] - b_[i]);
        return double(m);
    }());
    r.timing_scalar("single_rank_ms", "Layer on one rank (this device)", "ms", ms_single_);
    r.timing_scalar("cp_layer_ms", "Layer over R simulated ranks, run one after another (this device)", "ms",
                    ms_cp_);
    r.notes.push_back(
        "Ranks are simulated one after another in one process; \"critical path\" counts the work a "
        "real deployment would wait for (the busiest rank's local pass, the combination rounds, the "
        "busiest fix-up), by formula.");
    r.notes.push_back(
        "Layer: one KDA layer with the runnable tiny model's geometry (4 heads, K = V = 64, d_model "
        "256, conv width 4) and seeded weights; layer inputs x ~ N(0, 1). Linear attention and the "
        "diagonal gate run on the same q, k, v (and g) as the KDA core.");
    if (p_.str("split") == "uneven" && R_ >= 2 && T_ < 4 * R_ + 2)
        r.notes.push_back("Too few tokens for uneven slices: even slices were used.");
}

}  // namespace

Experiment make_cp_experiment() {
    Experiment e;
    e.number = 9;
    e.id = "cp";
    e.title = "Context parallelism and the non-additive state";
    e.component = "context parallelism";
    e.purpose =
        "Split one prompt over R ranks: what it takes to get exactly the single-rank KDA state and outputs, "
        "and why adding the ranks' states is wrong.";
    e.how_it_works =
        "Whatever state a token segment starts from, it ends in S_out = M S_in + B: B is the end state from "
        "zero, "
        "M = A_n ... A_1 with A_t = (I - beta_t k_t k_t^T) Diag(alpha_t) for KDA. Outputs are affine too, "
        "O = O0 + E S_in. So every rank runs its slice from a zero state, producing (M_r, B_r), O0_r and "
        "E_r, "
        "without waiting for anyone.\n\n"
        "The ranks then need their true start states S_in(r) = M_{r-1} S_in(r-1) + B_{r-1}. Maps compose as "
        "(M2, B2) o (M1, B1) = (M2 M1, M2 B1 + B2): associative, not commutative.\n\n"
        "- Serial state passing: rank r applies its map to the state it received and sends the result on: R "
        "- 1 "
        "hops of one K x V state each.\n"
        "- Affine scan: ceil(log2 R) rounds of composing maps (Hillis-Steele), each rank sending its "
        "composite [M | B], K x K + K x V floats per value head; 4 MiB per layer for Kimi Linear.\n"
        "- Naive sum: an all-reduce '+' of the B's. For plain linear attention (M = I) that is exact; for a "
        "diagonal gate it drops the decay; for KDA it also drops the delta rule's erasure of earlier values "
        "under similar keys. Its error is exactly sum_r (M_R..M_{r+1} - I) B_r + (M_R..M_1 - I) S_0, checked "
        "here against the measurement.\n\n"
        "Fix-up: rerun the slice's state pass from S_in (what FLA does), or correct linearly: O = O0 + E "
        "S_in, "
        "S_out = M S_in + B. Both are shown and agree.\n\n"
        "The short causal conv needs a halo: the first W-1 tokens of rank r convolve over the last W-1 raw "
        "(pre-conv) q/k/v rows before its slice, which live on rank r-1, or further back when a slice is "
        "shorter than W-1. Without it those tokens are wrong even when the state is right.\n\n"
        "Sources: reference/kda.md §4 and §8: FLA fla/ops/cp (README, chunk_delta_h.py: the merge "
        "S <- M_j S + S_ext_j, the conv halo cp_context), fla/ops/kda; Zhiyuan Li, \"KDA: From Matrix "
        "Multiplication to Affine Transformation\" (2026) for S' = M S + B and the composition lemma.";
    e.where_it_does_not_pay =
        "M is K x K per head: a rank's map is as large as its state again (K = V), and computing it runs the "
        "state pass a second time, on M. Composing two maps costs K^3 + K^2 V per head, twice an "
        "application. "
        "So for short slices the extra work and the exchange cost more than the parallelism saves: the "
        "speed-up "
        "plot at scale shows where the affine scan stops paying and where serial passing is as good (for R "
        "below about 8 a scan round costs more than the hops it saves).\n\n"
        "- The exchange is per layer: 20 KDA layers of Kimi Linear send 80 MiB per rank per round, and the "
        "layers cannot overlap it with the next layer's local pass, which needs this layer's outputs.\n"
        "- FlashKDA's intra-card split seeds each segment with the previous zero-start state only (dropping "
        "M S_in) and is not exact (reference/kda.md §4.2); any '+' reduction of states has the error shown "
        "here.\n"
        "- Plain linear attention needs none of this: its states add up. The cost of exactness is what the "
        "decay and the delta rule buy.\n\n"
        "Sources: reference/kda.md §4.2-4.3 and §8 (FLA fla/ops/cp, FlashKDA flash_kda/cp.py).";
    e.params = cp_params();
    e.validate = validate_cp;
    e.headlines = {
        {"Adding KDA states over 7 ranks (an all-reduce '+') leaves this relative error in the final state",
         {{"tokens", "200"}, {"ranks", "7"}},
         "naive_state_rel_err"},
        {"Each rank sends this much per KDA layer of Kimi Linear to make the split exact",
         {{"tokens", "200"}, {"ranks", "7"}},
         "bytes_per_rank_preset"},
    };
    e.start = [](const Params& p) { return std::make_unique<CpRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_cp_experiment);

}  // namespace k3
