// Module 9 `cp`: errors against one rank, the naive sum against its closed form, the halo, the costs
// of this layer and at a preset's scale, as figures, tables, plots and checks.
//
// The report's lists keep the order the page has always shown: the error table and the per-token
// plot first, then each topic's figures, tables and checks.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/cp/cp.h"

namespace k3 {

namespace {

using namespace k3::cp;

constexpr double kTol = 1e-5;                           // fp32 relative RMS against the single-rank run
constexpr size_t kLinear = 0, kDiagonal = 1, kKda = 2;  // kVariants
constexpr size_t kNaive = 0, kSerial = 1, kScan = 2;    // kCombiners
constexpr size_t kRerun = 0, kLinearFixup = 1;          // Fixup

std::string sci(double v) { return format_sig(v, 3); }

void error_table(const CpOutcome& m, Report& r) {
    Table& t = r.add_table(
        make_table("Error against one rank (relative RMS, fp32)", {{"variant", ""},
                                                                   {"combiner", ""},
                                                                   {"outputs (rerun fix-up)", "ratio"},
                                                                   {"final state (rerun)", "ratio"},
                                                                   {"outputs (linear fix-up)", "ratio"},
                                                                   {"final state (linear)", "ratio"},
                                                                   {"fix-ups disagree by", "ratio"}}));
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const CpError &a = m.errors[vi][ci][kRerun], &b = m.errors[vi][ci][kLinearFixup];
            t.add({std::string(variant_title(kVariants[vi])), std::string(combiner_title(kCombiners[ci])),
                   a.outputs, a.state, b.outputs, b.state, m.fixups_disagree[vi][ci]});
        }
}

void per_token_plot(const CpOutcome& m, Report& r) {
    Series naive = make_series("naive sum (KDA)", "Output error per token", "token",
                               "relative error of the output row", "tokens", "ratio");
    naive.log_y = true;
    Series scan = naive, no_halo = naive;
    scan.name = "affine scan (KDA)";
    no_halo.name = "no halo (whole layer)";
    for (int t = 0; t < m.tokens; ++t) {
        naive.add(t, m.token_error_naive[size_t(t)]);
        scan.add(t, m.token_error_scan[size_t(t)]);
        no_halo.add(t, m.token_error_no_halo[size_t(t)]);
    }
    r.add_series(naive);
    r.add_series(scan);
    r.add_series(no_halo);
}

void closed_form_figures(const CpOutcome& m, Report& r) {
    r.scalar("naive_state_rel_err_linear", "Naive-sum state error, linear attention", "ratio",
             m.closed_form[kLinear].naive_rel)
        .help = "Plain linear attention has M = I: summing states is exact up to rounding.";
    r.scalar("naive_state_rel_err_diagonal", "Naive-sum state error, diagonal gate", "ratio",
             m.closed_form[kDiagonal].naive_rel);
    r.scalar("naive_state_rel_err", "Naive-sum state error (KDA)", "ratio", m.closed_form[kKda].naive_rel,
             true);
    r.scalar("naive_closed_form_gap", "Naive error vs closed form (KDA)", "ratio", m.closed_form[kKda].gap,
             true);
    Table& t = r.add_table(make_table("Naive sum against the closed form (reference/kda.md §4.3)",
                                      {{"variant", ""},
                                       {"||S_true - naive|| (fp32 runs)", ""},
                                       {"||closed form|| (fp32 maps)", ""},
                                       {"relative gap (fp32)", "ratio"},
                                       {"fp64 identity: max |difference|", ""},
                                       {"naive error, relative to ||S_true||", "ratio"}}));
    for (size_t vi = 0; vi < 3; ++vi) {
        const CpClosedForm& c = m.closed_form[vi];
        t.add({std::string(variant_title(kVariants[vi])), c.naive_error_norm, c.closed_norm, c.gap,
               c.identity_diff, c.naive_rel});
    }
}

void closed_form_checks(const CpOutcome& m, Report& r) {
    bool fp64_ok = true, fp32_ok = true;
    std::string fp64_detail, fp32_detail;
    for (size_t vi = 0; vi < 3; ++vi) {
        const CpClosedForm& c = m.closed_form[vi];
        const std::string id = variant_id(kVariants[vi]);
        fp64_ok = fp64_ok && c.identity_diff <= 1e-9 * std::max(1.0, c.identity_scale);
        fp64_detail += id + " " + sci(c.identity_diff) + "; ";
        if (vi == kLinear) continue;
        fp32_ok = fp32_ok && c.gap < 1e-3;
        fp32_detail += id + " " + sci(c.gap) + "; ";
    }
    r.check("naive_error_closed_form_fp64",
            "Naive-sum error equals the closed form in fp64 (all three variants)", fp64_ok,
            "max |(S_true - naive) - closed form|: " + fp64_detail);
    r.check("naive_error_closed_form_fp32",
            "Measured fp32 naive-sum error matches the closed form (diagonal, KDA)", fp32_ok,
            "relative gap " + fp32_detail + "bound 1e-3");
    r.check("linear_naive_sum_exact", "Plain linear attention (M = I): the naive sum is exact up to rounding",
            m.closed_form[kLinear].naive_rel < kTol,
            "relative state error " + sci(m.errors[kLinear][kNaive][kRerun].state) + " < " + sci(kTol));
}

void cost_figures(const CpOutcome& m, Report& r) {
    Table& t = r.add_table(make_table("Communication and critical path (one layer, runnable geometry)",
                                      {{"variant", ""},
                                       {"combiner", ""},
                                       {"rounds", "count"},
                                       {"bytes sent, busiest rank", "B"},
                                       {"bytes sent, all ranks", "B"},
                                       {"critical path", "MAC"},
                                       {"total work", "MAC"},
                                       {"single rank", "MAC"},
                                       {"speed-up by work", "ratio"}}));
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const CpCost& k = m.costs[vi][ci];
            t.add({std::string(variant_id(kVariants[vi])), std::string(combiner_title(kCombiners[ci])),
                   double(k.rounds), k.bytes_busiest_rank, k.bytes_total, k.critical(), k.total(),
                   k.single_rank, k.single_rank / k.critical()});
        }
    const CpCost& serial = m.costs[kKda][kSerial];
    const CpCost& scan = m.costs[kKda][kScan];
    r.scalar("speedup_serial", "Speed-up by work, serial passing vs one rank", "ratio",
             serial.single_rank / serial.critical());
    r.scalar("bytes_per_rank", "Map sent per rank per round (KDA, this layer)", "B", m.map_bytes).help =
        "[M | B] in fp32: (K x K + K x V) x 4 bytes per value head.";
    r.scalar("critical_path_mac", "Critical path, affine scan (KDA)", "MAC", scan.critical());
    r.scalar("single_rank_mac", "Single-rank work (KDA)", "MAC", scan.single_rank);
    r.scalar("speedup_scan", "Speed-up by work, scan vs one rank", "ratio",
             scan.single_rank / scan.critical(), true);
}

void at_scale_figures(const CpParams& p, const CpAtScale& a, Report& r) {
    const ModelConfig& pc = a.model;
    const double all_layers = a.map_bytes * pc.n_linear();
    r.scalar("bytes_per_rank_preset", "Map per rank per KDA layer at scale", "B", a.map_bytes, true).help =
        pc.name + ": (K x K + K x V) x 4 B x " + std::to_string(pc.lin_v_heads) +
        " value heads (reference/kda.md §4.2: 4 MiB for Kimi Linear; 12 MiB for Kimi-K3).";
    r.scalar("bytes_per_rank_preset_model", "Maps per rank, all linear layers at scale", "B", all_layers);
    r.scalar("exchange_s_preset", "One map over the link, all linear layers (estimate)", "s",
             transfer_seconds(all_layers, p.link));
    Table& t = r.add_table(make_table("At " + pc.name + " scale, per " + pc.linear_name +
                                          " layer (formulas; times are line-rate estimates)",
                                      {{"variant", ""},
                                       {"map per rank", "B"},
                                       {"of which M", "B"},
                                       {"send time per round on " + p.link.id, "s"},
                                       {"compose", "MAC"},
                                       {"apply", "MAC"}}));
    for (size_t vi = 0; vi < 3; ++vi) {
        const CpAtScale::Row& row = a.rows[vi];
        t.add({std::string(variant_title(kVariants[vi])), row.map_bytes, row.m_bytes, row.send_seconds,
               row.compose, row.apply});
    }
}

void at_scale_plot(const CpAtScale& a, Report& r) {
    Series scan = make_series("affine scan", "Speed-up by work at scale", "ranks",
                              "single-rank work / critical path", "ranks", "ratio");
    scan.log_x = true;
    Series serial = scan, linear = scan;
    serial.name = "serial state passing";
    linear.name = "linear attention, scan";
    for (const CpAtScale::Point& pt : a.sweep) {
        scan.add(pt.ranks, pt.scan);
        serial.add(pt.ranks, pt.serial);
        linear.add(pt.ranks, pt.linear_scan);
    }
    r.add_series(scan);
    r.add_series(serial);
    r.add_series(linear);
}

// The counted map size against the maps the ranks really hold (this layer and at scale), the bytes the
// combination really passed against the cost table, and for Kimi Linear the published 4 MiB.
void bytes_check(const CpParams& p, const CpOutcome& m, Report& r) {
    const CpAtScale& a = m.at_scale;
    bool held_ok = !m.held_map_bytes.empty();
    for (double b : m.held_map_bytes) held_ok = held_ok && b == m.map_bytes;
    bool sent_ok = true;
    std::string sent;
    for (size_t ci = 0; ci < 3; ++ci) {
        const CpCost& k = m.costs[kKda][ci];
        sent_ok = sent_ok && m.sent_busiest[ci] == k.bytes_busiest_rank && m.sent_total[ci] == k.bytes_total;
        sent += std::string(combiner_id(kCombiners[ci])) + " " + format_grouped(m.sent_total[ci]) + " vs " +
                format_grouped(k.bytes_total) + "; ";
    }
    // The published or derived map size of the preset: Kimi Linear's "4 MiB per layer per rank"
    // (reference/kda.md §4.2); Kimi-K3's 96 value heads x (128 x 128 + 128 x 128) x 4 B = 12 MiB
    // (reference/kimi_k3.md §1.3: 96 heads of 128, no value-head grouping).
    const bool kimi = p.preset == ModelPreset::kimi_linear_48b, k3 = p.preset == ModelPreset::kimi_k3;
    const double expected = kimi ? 4194304.0 : k3 ? 96.0 * (128 * 128 + 128 * 128) * 4 : 0;
    const std::string figure = kimi ? "; 4 MiB for Kimi Linear" : k3 ? "; 12 MiB for Kimi-K3" : "";
    r.check(
        "bytes_per_rank_match_held_maps", "Bytes per rank are the maps the ranks hold and send" + figure,
        held_ok && sent_ok && a.map_bytes == a.held_map_bytes && (expected == 0 || a.map_bytes == expected),
        "this layer: counted " + format_grouped(m.map_bytes) + " B, held " +
            (m.held_map_bytes.empty() ? std::string("none") : format_grouped(m.held_map_bytes.front())) +
            " B per rank; sent in step 2 (all ranks, KDA), measured vs the cost table: " + sent +
            a.model.name + ": counted " + format_grouped(a.map_bytes) + " B, held " +
            format_grouped(a.held_map_bytes) + " B" +
            (kimi ? std::string(" (reference/kda.md §4.2: \"4 MiB per layer per rank\")")
             : k3 ? " (expected 96 heads x (128 x 128 + 128 x 128) x 4 B = " + format_grouped(expected) +
                        " B, reference/kimi_k3.md §1.3)"
                  : std::string()));
}

void error_figures(const CpOutcome& m, Report& r) {
    bool exact_ok = true, fixup_ok = true, naive_wrong = true;
    std::string worst;
    double worst_err = 0;
    for (size_t vi = 0; vi < 3; ++vi)
        for (size_t ci = 0; ci < 3; ++ci) {
            const CpError &a = m.errors[vi][ci][kRerun], &b = m.errors[vi][ci][kLinearFixup];
            if (ci != kNaive) {
                const double e = std::max({a.outputs, a.state, b.outputs, b.state});
                exact_ok = exact_ok && e < kTol;
                if (e >= worst_err) {
                    worst_err = e;
                    worst = std::string(variant_id(kVariants[vi])) + "/" + combiner_id(kCombiners[ci]);
                }
                fixup_ok = fixup_ok && m.fixups_disagree[vi][ci] < kTol;
            } else if (vi == kKda && m.ranks > 1) {
                naive_wrong = naive_wrong && a.state > 1e-3;
            }
        }
    const auto& kda_errors = m.errors[kKda];
    r.scalar("rel_err_scan", "Affine scan vs one rank (KDA outputs)", "ratio",
             kda_errors[kScan][kRerun].outputs, true)
        .help =
        "Relative RMS of the layer core's outputs, rerun fix-up, against the single-rank chunked run.";
    r.scalar("rel_err_serial", "Serial passing vs one rank (KDA outputs)", "ratio",
             kda_errors[kSerial][kRerun].outputs);
    r.scalar("rel_err_naive", "Naive sum vs one rank (KDA outputs)", "ratio",
             kda_errors[kNaive][kRerun].outputs, true);
    r.check("exact_combiners_equal_one_rank",
            "Serial passing and the affine scan equal one rank (3 variants, 2 fix-ups)", exact_ok,
            "largest relative RMS " + sci(worst_err) + " (" + worst + "), tolerance " + sci(kTol));
    r.check("fixups_agree", "The two fix-ups (rerun, linear correction) agree", fixup_ok,
            "tolerance " + sci(kTol));
    if (m.ranks > 1)
        r.check("naive_sum_wrong_for_kda", "The naive sum is wrong for KDA", naive_wrong,
                "final-state relative error " + sci(kda_errors[kNaive][kRerun].state) + " > 1e-3");
}

void halo_figures(const CpOutcome& m, Report& r) {
    const CpHalo& h = m.halo;
    Table& t = r.add_table(make_table("The short-conv halo", {{"", ""},
                                                              {"layer outputs vs one rank", "ratio"},
                                                              {"final S vs one rank", "ratio"},
                                                              {"tokens with a wrong conv input", "tokens"},
                                                              {"halo bytes sent", "B"},
                                                              {"most ranks one halo reads from", "ranks"}}));
    t.add({std::string("with halo"), h.out_with, h.state_with, 0.0, h.halo_bytes, double(h.halo_max_ranks)});
    t.add({std::string("without halo"), h.out_without, h.state_without, double(h.wrong_tokens), 0.0, 0.0});
    r.scalar("halo_rel_err_with", "Layer outputs with the halo vs one rank", "ratio", h.out_with);
    r.scalar("halo_rel_err_without", "Layer outputs without the halo vs one rank", "ratio", h.out_without,
             true);
    r.check("halo_core_inputs_bitwise", "With the halo every core input has the single-rank bits",
            h.core_inputs_same,
            "q, k, v, g, beta of all " + std::to_string(m.tokens) + " tokens compared bit for bit");
    r.check("halo_layer_equals_one_rank", "With the halo the layer equals one rank",
            h.out_with < kTol && h.state_with < kTol && h.windows_same,
            "outputs " + sci(h.out_with) + ", S " + sci(h.state_with) + ", conv windows bitwise");
    if (m.ranks > 1)
        r.check(
            "no_halo_wrong_tokens",
            "Without the halo exactly the first W-1 tokens of every later rank see a wrong conv input",
            h.wrong_tokens == h.expected_wrong && h.out_without > h.out_with,
            std::to_string(h.wrong_tokens) + " tokens differ, expected " + std::to_string(h.expected_wrong));
}

void ranks_figures(const CpOutcome& m, Report& r) {
    Table& t = r.add_table(make_table("Ranks", {{"rank", ""},
                                                {"first token", ""},
                                                {"tokens", "tokens"},
                                                {"local map work (KDA)", "MAC"},
                                                {"fix-up work (KDA, rerun)", "MAC"}}));
    int shortest = m.tokens;
    for (size_t i = 0; i < m.rank_rows.size(); ++i) {
        const CpRank& k = m.rank_rows[i];
        t.add({double(i), double(k.first_token), double(k.tokens), k.map_work, k.fixup_work});
        shortest = std::min(shortest, k.tokens);
    }
    r.scalar("ranks", "Ranks", "ranks", m.ranks);
    r.scalar("shortest_slice", "Shortest slice", "tokens", double(shortest));
    r.timing_scalar("single_rank_ms", "Layer on one rank (this device)", "ms", m.single_ms);
    r.timing_scalar("cp_layer_ms", "Layer over R simulated ranks, run one after another (this device)", "ms",
                    m.cp_ms);
}

void notes(const CpOutcome& m, Report& r) {
    r.notes.push_back(
        "Ranks are simulated one after another in one process; \"critical path\" counts the work a "
        "real deployment would wait for (the busiest rank's local pass, the combination rounds, the "
        "busiest fix-up), by formula.");
    const ModelConfig c = default_runnable_config();
    r.notes.push_back(
        "Layer: one KDA layer of the runnable model " + c.id + " (" + std::to_string(m.shape.HV) +
        " heads, K = " + std::to_string(m.shape.K) + ", V = " + std::to_string(m.shape.V) + ", d_model " +
        std::to_string(c.d_model) + ", conv width " + std::to_string(c.conv_width) +
        (c.gate_lower_bound < 0 ? ", Kimi K3's bounded gate" : "") +
        ") and seeded weights; layer inputs x ~ N(0, 1). Linear attention and the diagonal gate "
        "run on the same q, k, v (and g) as the KDA core.");
    if (m.even_fallback) r.notes.push_back("Too few tokens for uneven slices: even slices were used.");
}

}  // namespace

void report_cp(const CpParams& p, const CpOutcome& m, Report& r) {
    if (!m.failed.empty()) {
        r.check("layer_made", "The KDA layer could be made", false, m.failed);
        return;
    }
    error_table(m, r);
    per_token_plot(m, r);
    closed_form_figures(m, r);
    closed_form_checks(m, r);
    cost_figures(m, r);
    at_scale_figures(p, m.at_scale, r);
    at_scale_plot(m.at_scale, r);
    bytes_check(p, m, r);
    error_figures(m, r);
    halo_figures(m, r);
    ranks_figures(m, r);
    notes(m, r);
}

}  // namespace k3
