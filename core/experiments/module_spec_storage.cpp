// Module 7 `spec-storage`: speculative verification of N tokens with a recurrent state, full state
// snapshots per verified token against the confirmed state plus per-token records replayed on
// rejection (reference/kda.md §6, reference/serving.md §3). Storage is exact accounting of the chosen
// preset (core/spec/storage.h); the rollback itself runs on the runnable model (core/spec/rollback_lab.h)
// and is compared bitwise with direct decoding, for every rejection point and every record variant.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/kda/layout.h"
#include "core/model/accounting.h"
#include "core/spec/models.h"
#include "core/spec/rollback_lab.h"
#include "core/spec/storage.h"

namespace k3 {

namespace {

using namespace k3::spec;

const std::vector<std::string> kPresets = {"kimi-linear-48b", "qwen3-next-80b", "tiny", "small"};
const std::vector<std::string> kPresetLabels = {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B",
                                                "tiny (runnable)", "small (runnable)"};
constexpr int kMaxDraft = 32;
constexpr uint64_t kDemoSeed = 7;
constexpr int kDemoPrompt = 24;

std::vector<std::string> variant_labels() {
    std::vector<std::string> v;
    for (const auto& i : record_variants()) v.push_back(std::string(i.row) + " " + i.label);
    return v;
}

std::vector<ParamSpec> spec_storage_params() {
    return {
        ParamSpec::choice("preset", "Model", kPresets, "kimi-linear-48b", kPresetLabels)
            .in_group("Model")
            .describe("Geometry for the storage accounting (the published configurations, or the runnable "
                      "models). The rollback demo always runs on the runnable tiny model."),
        ParamSpec::integer("draft_len", "Tokens per verification N", "tokens", 1, kMaxDraft, 4)
            .in_group("Speculation")
            .describe("N: tokens verified in one pass, the pending token plus N - 1 drafts (SGLang's "
                      "speculative_num_draft_tokens; vLLM's 1 + num_speculative_tokens). The snapshot "
                      "method keeps a state after each of them; the record method keeps N records."),
        ParamSpec::choice("variant", "Record variant", variant_ids(), "minimal_exact", variant_labels())
            .in_group("Speculation")
            .describe(
                "What is recorded per token per layer (reference/kda.md §6): (b) minimal exact keeps the "
                "raw q/k/v rows, g and beta and is the smallest record that rebuilds the conv window."),
        ParamSpec::integer("running_requests", "Running requests R", "requests", 1, 4096, 128)
            .log()
            .in_group("Fleet")
            .describe("Requests decoding speculatively at once on one instance: rollback storage is held per "
                      "running request (SGLang sizes it by max running requests)."),
        ParamSpec::integer("ring_capacity", "Ring capacity L", "records", 1, 256, 16)
            .log()
            .in_group("Fleet")
            .describe("For comparison: a ReplaySSM-style ring of L records per request (module 8). SGLang's "
                      "default is 16."),
        ParamSpec::flag("demo", "Run the rollback on the runnable model", true)
            .in_group("Runnable model")
            .describe("Draft, verify N tokens, reject at every n, restore by copy and by replay, compare "
                      "bitwise, and time both. Off: accounting only (instant)."),
        ParamSpec::real("accept", "Draft acceptance (demo)", "fraction", 0, 1, 0.6)
            .in_group("Runnable model")
            .active_when("demo", "1")
            .describe("Chance that each draft of the demo is the target's own greedy pick (the rollback is "
                      "run for every n regardless; this sets where the real rejection falls)."),
    };
}

std::vector<ParamIssue> validate_spec_storage(const Params& p) {
    std::vector<ParamIssue> out;
    if (p.i("ring_capacity") < p.i("draft_len"))
        out.push_back({ParamIssue::warning, "ring_capacity",
                       "a ring of " + p.text("ring_capacity") +
                           " records cannot hold one verification of N = " + p.text("draft_len") +
                           " tokens (module 8 refuses it); its figure is shown anyway"});
    return out;
}

Series series(std::string name, std::string plot, std::string x_label, std::string y_label,
              std::string x_unit, std::string y_unit, bool log_y = false) {
    Series s = make_series(std::move(name), std::move(plot), std::move(x_label), std::move(y_label),
                           std::move(x_unit), std::move(y_unit));
    s.log_y = log_y;
    return s;
}

class SpecStorageRun : public StagedRun {
  public:
    explicit SpecStorageRun(const Params& p) : StagedRun("spec-storage", p), p_(p) {
        add_step("storage accounting", 1, [this] { accounting(); });
        if (p.flag("demo")) {
            add_step("runnable model", 3, [this] { demo_setup(); });
            add_stage("rollback for every n and variant", 3,
                      [this](const Deadline& d) { return demo_compare(d); });
            add_stage("restore timings", 3, [this](const Deadline& d) { return demo_timing(d); });
            add_step("report", 0.1, [this] { demo_report(); });
        }
    }

  private:
    void accounting();
    void demo_setup();
    double demo_compare(const Deadline& d);
    double demo_timing(const Deadline& d);
    void demo_report();

    Params p_;
    std::shared_ptr<model::Model> model_;
    std::unique_ptr<RollbackLab> lab_;
    std::string error_;
    size_t next_variant_ = 0;
    std::vector<std::vector<RestoreOutcome>> outcomes_;  // per variant
    std::vector<uint64_t> record_held_;
    int timing_part_ = 0;
    std::vector<double> copy_ms_, replay_ms_;
    LayerRestoreTiming layer_;
};

void SpecStorageRun::accounting() {
    Report& r = report_;
    const ModelConfig c = *model_preset(p_.str("preset"));
    const RecordVariant v = *parse_variant(p_.str("variant"));
    const VariantInfo& vi = variant_info(v);
    const int N = p_.i("draft_len"), R = p_.i("running_requests"), L = p_.i("ring_capacity");
    const SpecStorage s = spec_storage(c, v, N, R, L);
    const std::string lin = c.linear_name, Ns = std::to_string(N);

    r.scalar("ratio_n_snapshots", "N snapshots : one state + N records", "ratio", s.ratio_n_snapshots, true)
        .help = "Convention 1: the storage speculation needs beyond the live state. Snapshots: " + Ns +
                " full states (one after each verified token). Records: the confirmed state is kept apart "
                "(the verify "
                "pass must not overwrite it) plus " +
                Ns + " records. " + format_grouped(double(s.snapshots_extra_per_layer)) + " B vs " +
                format_grouped(double(s.projection_total_per_layer)) + " B per layer.";
    r.scalar("ratio_counting_confirmed",
             "N + 1 states : one state + N records (confirmed state on both sides)", "ratio",
             s.ratio_counting_confirmed, true)
        .help =
        "Convention 2: the confirmed state counted on both sides (the snapshot side also holds the state "
        "it rolls back to on a full rejection). " +
        format_grouped(double(s.snapshots_total_per_layer)) + " B vs " +
        format_grouped(double(s.projection_total_per_layer)) + " B per layer.";
    r.scalar("projection_share", "Record storage as a share of N snapshots", "fraction",
             s.snapshots_extra_per_layer
                 ? double(s.projection_total_per_layer) / double(s.snapshots_extra_per_layer)
                 : 0,
             true)
        .help =
        "One state + N records divided by N snapshots: about a quarter at Kimi-Linear dimensions, N = 4.";
    r.scalar("snapshot_bytes_per_layer", "Full snapshot per layer (S + conv windows)", "B",
             double(s.snapshot_per_layer), true)
        .help = "Recurrent state S (" + std::string(dtype_name(c.state_dtype)) +
                ") plus the W-1 raw rows of the q, k, v "
                "conv windows (" +
                dtype_name(c.conv_dtype) + ").";
    r.scalar("record_bytes_per_token_per_layer",
             std::string("Record per token per layer, ") + vi.row + " " + vi.label, "B",
             double(s.record_per_token), true)
        .help = std::string("Contents: ") + vi.contents + ".";
    r.scalar("ratio_per_token", "Snapshot / record, per token", "ratio", s.ratio_per_token).help =
        "What each extra verified token costs: one snapshot against one record (any N).";
    r.scalar("snapshot_extra_bytes_per_sequence", "N snapshots per sequence", "B",
             double(s.per_sequence(s.snapshots_extra_per_layer)));
    r.scalar("record_extra_bytes_per_sequence", "N records per sequence", "B",
             double(s.per_sequence(s.records_extra_per_layer)));
    r.scalar("snapshot_bytes_per_fleet", "Confirmed + N snapshots, R requests", "B",
             double(s.per_fleet(s.snapshots_total_per_layer)));
    r.scalar("projection_bytes_per_fleet", "Confirmed + N records, R requests", "B",
             double(s.per_fleet(s.projection_total_per_layer)));
    r.scalar("ring_bytes_per_fleet", "Checkpoint + ring of L records, R requests", "B",
             double(s.per_fleet(s.ring_total_per_layer)));
    r.scalar(
        "fleet_saving_bytes", "Saved across R requests (records instead of snapshots)", "B",
        double(s.per_fleet(s.snapshots_total_per_layer)) - double(s.per_fleet(s.projection_total_per_layer)));
    r.scalar("linear_layers", lin + " layers", "count", s.linear_layers);

    // ---- tables ----
    Table vt{"Record variants (reference/kda.md §6), per token per layer",
             {"variant", "row", "contents", "bytes per token", "snapshot / record", "one state + N records",
              "N snapshots : state + N records", "N + 1 : state + N records", "exact on the runnable model"},
             {},
             {"", "", "", "B", "ratio", "B", "ratio", "ratio", ""}};
    for (const auto& i : record_variants()) {
        const SpecStorage x = spec_storage(c, i.variant, N, R, L);
        vt.rows.push_back(
            {std::string(i.label), std::string(i.row), std::string(i.contents), double(x.record_per_token),
             x.ratio_per_token, double(x.projection_total_per_layer), x.ratio_n_snapshots,
             x.ratio_counting_confirmed,
             std::string(i.exact ? "claimed: S and windows bitwise" : "claimed: S only (windows stale)")});
    }
    r.tables.push_back(vt);
    Table ft{
        "Rollback storage per layer, per sequence and per fleet (" + std::to_string(R) + " running requests)",
        {"method", "per layer", "per sequence", "per fleet", "vs confirmed + N records"},
        {},
        {"", "B", "B", "B", "ratio"}};
    auto row = [&](std::string name, uint64_t per_layer) {
        ft.rows.push_back({std::move(name), double(per_layer), double(s.per_sequence(per_layer)),
                           double(s.per_fleet(per_layer)),
                           double(per_layer) / double(s.projection_total_per_layer)});
    };
    row("N snapshots (extra only)", s.snapshots_extra_per_layer);
    row("confirmed + N snapshots", s.snapshots_total_per_layer);
    row("N records (extra only)", s.records_extra_per_layer);
    row("confirmed + N records", s.projection_total_per_layer);
    row("checkpoint + ring of L = " + std::to_string(L) + " records", s.ring_total_per_layer);
    r.tables.push_back(ft);
    Table fields{std::string("Fields of one record: ") + vi.row + " " + vi.label,
                 {"field", "elements", "dtype", "bytes"},
                 {},
                 {"", "count", "", "B"}};
    for (const auto& f : record_fields(c, v))
        fields.rows.push_back(
            {f.name, double(f.elements), std::string(dtype_name(f.dtype)), double(f.bytes())});
    r.tables.push_back(fields);

    // ---- series ----
    Series sn = series("N snapshots", "Storage per layer against N", "tokens per verification N",
                       "bytes per layer", "tokens", "B", true);
    Series sc = sn, pr = sn;
    sc.name = "confirmed + N snapshots";
    pr.name = "confirmed + N records";
    Series r1 = series("N : 1 + N records", "Snapshot / record storage against N",
                       "tokens per verification N", "ratio", "tokens", "ratio");
    Series r2 = r1;
    r2.name = "N + 1 : 1 + N records (confirmed counted)";
    for (int n = 1; n <= kMaxDraft; ++n) {
        const SpecStorage x = spec_storage(c, v, n, R, L);
        sn.x.push_back(n), sn.y.push_back(double(x.snapshots_extra_per_layer));
        sc.x.push_back(n), sc.y.push_back(double(x.snapshots_total_per_layer));
        pr.x.push_back(n), pr.y.push_back(double(x.projection_total_per_layer));
        r1.x.push_back(n), r1.y.push_back(x.ratio_n_snapshots);
        r2.x.push_back(n), r2.y.push_back(x.ratio_counting_confirmed);
    }
    Series fs = series("confirmed + N snapshots", "Fleet storage against running requests",
                       "running requests R", "bytes", "requests", "B", true);
    fs.log_x = true;
    Series fp = fs, fr = fs;
    fp.name = "confirmed + N records";
    fr.name = "checkpoint + ring of L records";
    for (int q = 1; q <= 4096; q *= 2) {
        fs.x.push_back(q), fs.y.push_back(double(s.per_sequence(s.snapshots_total_per_layer)) * q);
        fp.x.push_back(q), fp.y.push_back(double(s.per_sequence(s.projection_total_per_layer)) * q);
        fr.x.push_back(q), fr.y.push_back(double(s.per_sequence(s.ring_total_per_layer)) * q);
    }
    Series vb = series("bytes per token per layer", "Record size by variant", "variant", "bytes", "", "B");
    vb.style = SeriesStyle::bars;
    for (const auto& i : record_variants()) {
        vb.x.push_back(double(vb.x.size()));
        vb.y.push_back(double(record_bytes_per_token_per_layer(c, i.variant)));
        vb.x_names.push_back(std::string(i.row) + " " + i.id);
    }
    r.series = {sn, sc, pr, r1, r2, fs, fp, fr, vb};

    // ---- checks ----
    const MemoryAccount a = account_memory(c);
    r.check("Snapshot = the state one sequence keeps per layer (core/model/accounting.h)",
            s.snapshot_per_layer == a.state_bytes_per_layer &&
                s.per_sequence(s.snapshot_per_layer) == a.state_bytes,
            format_grouped(double(s.snapshot_per_layer)) + " B per layer x " +
                std::to_string(s.linear_layers) +
                " layers = " + format_grouped(double(s.per_sequence(s.snapshot_per_layer))) + " B");
    uint64_t sum = 0;
    for (const auto& f : record_fields(c, v)) sum += f.bytes();
    r.check(
        "Ratios recomputed from the byte counts",
        std::fabs(s.ratio_n_snapshots - double(N) * double(s.snapshot_per_layer) /
                                            (double(s.snapshot_per_layer) + double(N) * double(sum))) <
                1e-12 &&
            std::fabs(s.ratio_counting_confirmed - s.ratio_n_snapshots * double(N + 1) / double(N)) < 1e-12,
        "record fields sum to " + format_grouped(double(sum)) + " B");
    if (c.id == "kimi-linear-48b") {
        const uint64_t want[] = {32896, 41088, 32832, 57472, 4608, 40960, 65536};
        bool table = true;
        std::string got;
        for (const auto& i : record_variants()) {
            const uint64_t b = record_bytes_per_token_per_layer(c, i.variant);
            table = table && b == want[size_t(i.variant)];
            got += (got.empty() ? "" : ", ") + std::string(i.row) + " " + format_grouped(double(b));
        }
        r.check("Kimi-Linear record variants = the kda.md §6 table", table, got + " B");
        const SpecStorage k4 = spec_storage(c, RecordVariant::minimal_exact, 4, R, L);
        const bool ok = k4.snapshot_per_layer == 2170880 && k4.record_per_token == 41088 &&
                        std::round(k4.ratio_n_snapshots * 100) == 372 &&
                        std::round(k4.ratio_counting_confirmed * 100) == 465;
        r.check("Kimi-Linear reference figures (reference/kda.md §6, N = 4, minimal exact)", ok,
                format_grouped(double(k4.snapshot_per_layer)) + " B per snapshot (expect 2,170,880), " +
                    format_grouped(double(k4.record_per_token)) + " B per record (expect 41,088), " +
                    format_sig(k4.ratio_n_snapshots, 3) + ":1 (expect 3.72) and " +
                    format_sig(k4.ratio_counting_confirmed, 3) + ":1 (expect 4.65)");
    }

    // ---- notes ----
    r.notes.push_back(
        "Which convention is which: ratio_n_snapshots = N snapshots : (one state + N records), the storage "
        "beyond the live state; ratio_counting_confirmed = (N + 1) states : (one state + N records), "
        "the confirmed state counted on both sides. Per token, a snapshot is " +
        format_sig(s.ratio_per_token, 3) + "x a record.");
    r.notes.push_back(c.name + ": " + std::to_string(s.linear_layers) + " " + lin + " layers, snapshot " +
                      format_bytes(double(s.snapshot_per_layer)) +
                      " per layer. Tensor parallelism 1 (with TP each "
                      "rank holds 1/TP of both sides; the ratios do not change).");
    if (c.linear_name == "GDN")
        r.notes.push_back("Gated DeltaNet decays each head by one scalar, so g is " +
                          std::to_string(c.lin_v_heads) +
                          " values per token, not one per key channel as in KDA.");
}

void SpecStorageRun::demo_setup() {
    const int N = p_.i("draft_len");
    model_ = cached_model("tiny", 1, 16, &error_);
    if (!model_) return;
    lab_ = RollbackLab::create(*model_, N, kDemoPrompt, p_.num("accept"), kDemoSeed, &error_);
}

double SpecStorageRun::demo_compare(const Deadline& d) {
    if (!lab_) return 1.0;
    const auto& vs = record_variants();
    while (next_variant_ < vs.size()) {
        std::vector<RestoreOutcome> o;
        uint64_t held = 0;
        if (std::string e = lab_->compare(vs[next_variant_].variant, &o, &held); !e.empty()) {
            error_ = e;
            return 1.0;
        }
        outcomes_.push_back(std::move(o));
        record_held_.push_back(held);
        ++next_variant_;
        if (d.passed()) break;
    }
    return double(next_variant_) / double(vs.size());
}

double SpecStorageRun::demo_timing(const Deadline&) {
    if (!lab_) return 1.0;
    const RecordVariant v = *parse_variant(p_.str("variant"));
    if (timing_part_ == 0) {
        if (std::string e = lab_->time_restore(v, 5, &copy_ms_, &replay_ms_); !e.empty()) error_ = e;
        ++timing_part_;
        return 0.5;
    }
    // One KDA layer at Kimi-Linear dimensions (32 heads, 128 x 128), outside the model.
    layer_ = time_layer_restore(kda::Shape{32, 32, 128, 128}, 4, p_.i("draft_len"), 3);
    return 1.0;
}

void SpecStorageRun::demo_report() {
    Report& r = report_;
    if (!error_.empty() || !lab_) {
        r.check("Rollback on the runnable model ran", false, error_);
        return;
    }
    const model::Model& m = *model_;
    const int N = lab_->draft_len();
    const RecordVariant v = *parse_variant(p_.str("variant"));
    const auto& vs = record_variants();
    const std::vector<RestoreOutcome>& chosen = outcomes_[size_t(v)];

    r.scalar("demo_accepted", "Demo: tokens the target kept", "tokens", lab_->accepted()).help =
        "Of the " + std::to_string(N) + " verified tokens (pending + " + std::to_string(N - 1) +
        " drafts), the longest prefix the target's greedy picks agree with.";
    const uint64_t state = m.pool_model().state_bytes();
    r.scalar("demo_snapshot_bytes", "Demo: confirmed + N snapshots held", "B",
             double(lab_->snapshot_bytes_held()));
    r.scalar("demo_record_bytes", "Demo: confirmed + N records held", "B", double(record_held_[size_t(v)]));

    Table dt{"Runnable model (tiny): reject at n, restore both ways",
             {"n kept", "copy == direct", "replay == direct", "copy == replay", "tokens replayed",
              "state bytes copied"},
             {},
             {"tokens", "", "", "", "tokens", "B"}};
    bool all_copy = true, all_replay = true;
    for (const auto& o : chosen) {
        const bool eq = o.copy_exact && o.replay_exact;
        all_copy &= o.copy_exact, all_replay &= o.replay_exact;
        dt.rows.push_back({double(o.n), std::string(o.copy_exact ? "bitwise" : "DIFFERS"),
                           std::string(o.replay_exact ? "bitwise"
                                       : o.S_exact    ? "S only"
                                                      : "DIFFERS"),
                           std::string(eq ? "bitwise" : "no"), double(o.n), double(state)});
    }
    r.tables.push_back(dt);
    Table ex{
        "Measured exactness of every record variant (n = 0.." + std::to_string(N) + ")",
        {"variant", "claimed", "S bitwise", "windows bitwise", "state + KV bitwise", "bytes held (tiny)"},
        {},
        {"", "", "", "", "", "B"}};
    bool claims = true;
    for (size_t i = 0; i < vs.size(); ++i) {
        int s_ok = 0, w_ok = 0, full = 0;
        for (const auto& o : outcomes_[i]) s_ok += o.S_exact, w_ok += o.windows_exact, full += o.replay_exact;
        const int total = int(outcomes_[i].size());
        // Claimed exact: every n bitwise. Claimed S only: S every n, windows wrong for every n >= 1.
        const bool holds = vs[i].exact ? full == total : s_ok == total && w_ok == 1;
        claims &= holds;
        auto frac = [&](int k) { return std::to_string(k) + " of " + std::to_string(total); };
        ex.rows.push_back({std::string(vs[i].row) + " " + vs[i].label,
                           std::string(vs[i].exact ? "exact" : "S only"), frac(s_ok), frac(w_ok), frac(full),
                           double(record_held_[i])});
    }
    r.tables.push_back(ex);

    const bool exact = variant_info(v).exact;
    bool agree = true;
    for (const auto& o : chosen) agree &= o.copy_exact && (exact ? o.replay_exact : o.S_exact);
    r.check(exact ? "Restore by copy and by replay give the same state, bitwise, for every n in 0..N"
                  : "Restore by copy and by replay give the same S, bitwise, for every n in 0..N",
            agree,
            std::to_string(N + 1) + " rejection points, variant " + variant_info(v).id +
                (exact ? "" : ": it claims S only, its conv windows stay at the confirmed ones"));
    r.check("Restore by copy equals direct decoding of the n kept tokens, for every n", all_copy,
            "state and KV compared with a fresh run decoding the n tokens one by one");
    if (variant_info(v).exact)
        r.check("Replay of the records equals direct decoding, for every n", all_replay,
                std::string("variant ") + variant_info(v).id);
    r.check("n = 0 leaves the confirmed state untouched",
            chosen.front().untouched && chosen.front().copy_exact,
            "replaying no record keeps the confirmed bytes");
    r.check("Every variant's exactness claim holds (exact: all n bitwise; S only: S bitwise, windows stale)",
            claims, "core only and delta form do not rebuild the conv windows; the others do");
    r.check("One-pass verification has the logits of token-by-token verification, bitwise",
            lab_->logits_match(), std::to_string(N) + " rows of " + std::to_string(m.vocab()) + " logits");
    const SpecStorage tiny = spec_storage(m.config(), v, N, 1, 0);
    r.check("Bytes the runnable model holds = the accounting for its preset",
            lab_->snapshot_bytes_held() == tiny.per_sequence(tiny.snapshots_total_per_layer) &&
                record_held_[size_t(v)] == tiny.per_sequence(tiny.projection_total_per_layer),
            format_grouped(double(lab_->snapshot_bytes_held())) + " B of snapshots, " +
                format_grouped(double(record_held_[size_t(v)])) + " B of state + records");

    // ---- timing (wall clock) ----
    Series tc = series("copy snapshot n", "Restore time against n kept (runnable tiny model, this device)",
                       "tokens kept n", "ms", "tokens", "ms");
    Series tr = tc;
    tr.name = std::string("copy confirmed + replay n records (") + variant_info(v).id + ")";
    for (int n = 0; n <= N; ++n) {
        tc.x.push_back(n), tc.y.push_back(copy_ms_[size_t(n)]);
        tr.x.push_back(n), tr.y.push_back(replay_ms_[size_t(n)]);
    }
    Series lc = series("copy one layer state (" + format_bytes(double(layer_.state_bytes)) + ")",
                       "One KDA layer at Kimi-Linear dimensions: restore time against n (this device)",
                       "tokens kept n", "ms", "tokens", "ms");
    Series lr = lc;
    lr.name = "replay n minimal-exact records in place";
    for (size_t n = 0; n < layer_.copy_ms.size(); ++n) {
        lc.x.push_back(double(n)), lc.y.push_back(layer_.copy_ms[n]);
        lr.x.push_back(double(n)), lr.y.push_back(layer_.replay_ms[n]);
    }
    r.timing.series = {tc, tr, lc, lr};
    r.timing_scalar("restore_copy_ms", "Restore by copy (runnable tiny model), median", "ms",
                    copy_ms_[size_t(N)]);
    r.timing_scalar("restore_replay_ms_at_n", "Restore by replay of N records (runnable tiny model), median",
                    "ms", replay_ms_[size_t(N)]);
    if (layer_.replay_ms.size() > 1 && layer_.replay_ms[1] > 0)
        r.timing_scalar("kimi_layer_replay_steps_per_copy",
                        "Kimi-Linear layer: replayed tokens that cost one copy", "tokens",
                        layer_.copy_ms[0] / (layer_.replay_ms.back() / double(layer_.replay_ms.size() - 1)));
    r.timing_text("simd_arch", "SIMD", kda::simd_arch());
    r.notes.push_back(
        "Restore times on the runnable model include a copy of the confirmed state before the replay: its "
        "forward writes the sequence's state in place. An engine's verify kernel leaves the confirmed "
        "slot untouched and replays onto it directly (the Kimi-Linear layer timing does that).");
}

}  // namespace

Experiment make_spec_storage_experiment() {
    Experiment e;
    e.number = 7;
    e.id = "spec-storage";
    e.title = "Projection replay vs snapshots";
    e.component = "speculative decoding";
    e.purpose =
        "What rolling back a rejected speculative draft costs with a recurrent state: a full state snapshot "
        "per verified token, or the confirmed state plus small per-token records replayed on rejection.";
    e.how_it_works =
        "Speculative decoding verifies N tokens in one pass (the pending token and N - 1 drafts) and keeps "
        "the n "
        "the target agrees with. An attention layer just drops the rejected KV rows. A KDA layer has "
        "overwritten its "
        "one state N times and cannot rewind it, so something per verified position must be kept.\n\n"
        "- Snapshots (vLLM, SGLang, TRT-LLM today): the verify kernel writes a full state after each "
        "verified token "
        "into per-position slots; rollback uses slot n (SGLang copies it into the working slot, vLLM moves "
        "the "
        "state index). Kimi-Linear: 2,170,880 B per layer per slot (S 2,097,152 B fp32 plus 73,728 B of bf16 "
        "conv "
        "windows).\n"
        "- Records (projection replay): keep the confirmed state, record what each token fed the layer, and "
        "on "
        "rejection replay the n kept tokens through the recurrent step from the confirmed state. q is never "
        "needed; k, v, the gate and beta are, and the conv window needs the raw pre-conv rows because which "
        "rows "
        "end up in it depends on n. The minimal exact record is the raw q, k, v rows plus g and beta in "
        "fp32: "
        "41,088 B per token per layer.\n\n"
        "At Kimi-Linear dimensions and N = 4 that is 8,683,520 B of snapshots against 2,335,232 B (one state "
        "+ 4 "
        "records): 3.72:1, the records need about a quarter. Counting the confirmed state on both sides (the "
        "snapshot method keeps it too, for a full rejection): 10,854,400 B against 2,335,232 B, 4.65:1. Both "
        "figures are shown; the first is the extra storage speculation needs.\n\n"
        "Replay is exact only if verification ran the same per-token recurrent arithmetic: here verification "
        "uses "
        "the recurrent kernel (CoreMode::recurrent), whose multi-token forward has the bits of decoding "
        "token by "
        "token, so replay reproduces the state bitwise, which the module checks for every n and every "
        "variant. A "
        "chunked verification kernel would agree only to rounding. g and delta must be stored in fp32.\n\n"
        "Sources: reference/kda.md §6 (storage arithmetic and the variant table) and §7 invariant 21; FLA "
        "fused_recurrent_kda spec-decoding hooks (ssm_state_indices, num_accepted_tokens); vLLM mamba_utils "
        "(kda_state_shape with a W-1+N conv buffer; spec copy offsets); SGLang MambaPool.SpeculativeState "
        "(intermediate_ssm per draft position) and ReplaySSM (sgl-project/sglang #28451, #28695, RFC "
        "#28511); "
        "reference/serving.md §3.";
    e.where_it_does_not_pay =
        "Every rejection costs compute: replaying n kept tokens is n recurrent steps per layer (about 4 K V "
        "H "
        "multiply-adds each; the delta form about half), plus the conv rows and L2 norms, where a snapshot "
        "restore "
        "is one copy or an index move. When drafts are mostly accepted the replay work is n close to N on "
        "every "
        "step; a rejection of the first draft (n = 1 kept) costs almost nothing.\n\n"
        "- Small N: with N = 1 nothing is drafted and the saving is under 2x (2 states against one state + "
        "one "
        "record, 1.96:1); the record method pays off as N grows.\n"
        "- Bandwidth-rich, memory-rich settings: if the rollback storage fits anyway, snapshots cost only "
        "the "
        "state writes during verify, and vLLM's rollback is an index move with no copy at all.\n"
        "- Exactness has a price: the verify pass must use the per-token recurrent kernel. A chunked verify "
        "is "
        "faster for long drafts but replay then matches it only to rounding.\n"
        "- Records in bf16 for g or delta make replay inexact (kda.md §6); the layer-input variant is tiny "
        "but "
        "recomputes every projection (a GEMM per layer per replayed token), and is exact only where the "
        "GEMM's bits "
        "do not depend on the batch size (true here by construction, not on typical GPU kernels).\n\n"
        "Sources: reference/kda.md §6 and §8; reference/serving.md §3 (snapshot scratch of R x D x state, "
        "the "
        "\"-11.5 GB per GPU\" of SGLang's ReplaySSM) and §8.";
    e.params = spec_storage_params();
    e.validate = validate_spec_storage;
    e.headlines = {
        {"Kimi-Linear, N = 4: N snapshots against one state + N records (extra storage convention)",
         {{"preset", "kimi-linear-48b"}, {"draft_len", "4"}, {"variant", "minimal_exact"}, {"demo", "0"}},
         "ratio_n_snapshots"},
        {"Kimi-Linear, N = 4: the same, counting the confirmed state on both sides",
         {{"preset", "kimi-linear-48b"}, {"draft_len", "4"}, {"variant", "minimal_exact"}, {"demo", "0"}},
         "ratio_counting_confirmed"},
    };
    e.live = false;
    e.start = [](const Params& p) { return std::make_unique<SpecStorageRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_spec_storage_experiment);

}  // namespace k3
