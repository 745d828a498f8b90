// Module 7 `spec-storage`: the accounting and the runnable model's rollback as figures, plots, tables,
// checks and notes.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/base/numfmt.h"
#include "core/kda/layout.h"
#include "core/modules/spec_storage/spec_storage.h"

namespace k3 {

namespace {

using namespace k3::spec;

std::string fixed2(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.2f", v);
    return b;
}

std::string variant_name(const VariantInfo& v) { return std::string(v.row) + " " + v.label; }

// ---- the accounting ----

void ratio_scalars(const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    const std::string N = std::to_string(s.draft_len);
    const std::string against_records =
        " B vs " + format_grouped(double(s.projection_total_per_layer)) + " B per layer.";
    const std::string snapshots = "Snapshots: " + N + " full states (one after each verified token). ";
    const std::string records =
        "Records: the confirmed state is kept apart (the verify pass must not overwrite it) plus " + N +
        " records. ";
    r.scalar("ratio_n_snapshots", "N snapshots : one state + N records", "ratio", s.ratio_n_snapshots, true)
        .help = "Convention 1: the storage speculation needs beyond the live state. " + snapshots + records +
                format_grouped(double(s.snapshots_extra_per_layer)) + against_records;
    r.scalar("ratio_counting_confirmed",
             "N + 1 states : one state + N records (confirmed state on both sides)", "ratio",
             s.ratio_counting_confirmed, true)
        .help =
        "Convention 2: the confirmed state counted on both sides "
        "(the snapshot side also holds the state it rolls back to on a full rejection). " +
        format_grouped(double(s.snapshots_total_per_layer)) + against_records;
    const double share = s.snapshots_extra_per_layer
                             ? double(s.projection_total_per_layer) / double(s.snapshots_extra_per_layer)
                             : 0;
    r.scalar("projection_share", "Record storage as a share of N snapshots", "fraction", share, true).help =
        "One state + N records divided by N snapshots: about a quarter at Kimi-Linear dimensions, N = 4.";
}

void size_scalars(const SpecStorageParams& p, const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    const VariantInfo& v = variant_info(p.variant);
    r.scalar("snapshot_bytes_per_layer", "Full snapshot per layer (S + conv windows)", "B",
             double(s.snapshot_per_layer), true)
        .help = "Recurrent state S (" + std::string(dtype_name(a.model.state_dtype)) +
                ") plus the W-1 raw rows of the q, k, v conv windows (" + dtype_name(a.model.conv_dtype) +
                ").";
    r.scalar("record_bytes_per_token_per_layer", "Record per token per layer, " + variant_name(v), "B",
             double(s.record_per_token), true)
        .help =
        "Contents: " + std::string(v.contents) + "." +
        (s.held_per_token != s.record_per_token
             ? " Held per token with its conv window column: " + format_grouped(double(s.held_per_token)) +
                   " B (the figure the snapshot/record ratios use)."
             : "");
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
    r.scalar("linear_layers", a.model.linear_name + " layers", "count", s.linear_layers);
}

void variant_table(const StorageAccounting& a, Report& r) {
    Table& t = r.add_table(make_table("Record variants (reference/kda.md §6), per token per layer",
                                      {{"variant", ""},
                                       {"row", ""},
                                       {"contents", ""},
                                       {"bytes per token", "B"},
                                       {"snapshot / record", "ratio"},
                                       {"one state + N records", "B"},
                                       {"N snapshots : state + N records", "ratio"},
                                       {"N + 1 : state + N records", "ratio"},
                                       {"exact on the runnable model", ""}}));
    const auto& variants = accounting_variants();
    for (size_t i = 0; i < variants.size(); ++i) {
        const VariantInfo& v = variants[i];
        const SpecStorage& x = a.variants[i];
        const char* claim = v.exact ? "claimed: S and windows bitwise" : "claimed: S only (windows stale)";
        t.add({std::string(v.label), std::string(v.row), std::string(v.contents), double(x.record_per_token),
               x.ratio_per_token, double(x.projection_total_per_layer), x.ratio_n_snapshots,
               x.ratio_counting_confirmed, std::string(claim)});
    }
}

void storage_tables(const SpecStorageParams& p, const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    Table& fleet = r.add_table(make_table("Rollback storage per layer, per sequence and per fleet (" +
                                              std::to_string(p.running_requests) + " running requests)",
                                          {{"method", ""},
                                           {"per layer", "B"},
                                           {"per sequence", "B"},
                                           {"per fleet", "B"},
                                           {"vs confirmed + N records", "ratio"}}));
    auto row = [&](std::string name, uint64_t per_layer) {
        fleet.add({std::move(name), double(per_layer), double(s.per_sequence(per_layer)),
                   double(s.per_fleet(per_layer)), double(per_layer) / double(s.projection_total_per_layer)});
    };
    row("N snapshots (extra only)", s.snapshots_extra_per_layer);
    row("confirmed + N snapshots", s.snapshots_total_per_layer);
    row("N records (extra only)", s.records_extra_per_layer);
    row("confirmed + N records", s.projection_total_per_layer);
    row("checkpoint + ring of L = " + std::to_string(p.ring_capacity) + " records", s.ring_total_per_layer);

    Table& fields =
        r.add_table(make_table("Fields of one record: " + variant_name(variant_info(p.variant)),
                               {{"field", ""}, {"elements", "count"}, {"dtype", ""}, {"bytes", "B"}}));
    for (const RecordField& f : a.fields)
        fields.add({f.name, double(f.elements), std::string(dtype_name(f.dtype)), double(f.bytes())});
    // RecoverSSM: the raw rows are held as conv window columns (vLLM's page), not in the record.
    const ModelConfig& c = a.model;
    const uint64_t column = conv_column_bytes(c);
    for (int i = 0; i < record_conv_columns(p.variant); ++i)
        fields.add(
            {std::string("(held beside the record) raw q, k, v: one column of the W - 1 + N conv window"),
             double(column / dtype_bytes(c.conv_dtype)), std::string(dtype_name(c.conv_dtype)),
             double(column)});
}

void draft_len_plots(const StorageAccounting& a, Report& r) {
    auto per_layer = [](std::string name) {
        Series s = make_series(std::move(name), "Storage per layer against N", "tokens per verification N",
                               "bytes per layer", "tokens", "B");
        s.log_y = true;
        return s;
    };
    auto ratio = [](std::string name) {
        return make_series(std::move(name), "Snapshot / record storage against N",
                           "tokens per verification N", "ratio", "tokens", "ratio");
    };
    Series snapshots = per_layer("N snapshots"), confirmed = per_layer("confirmed + N snapshots"),
           records = per_layer("confirmed + N records");
    Series extra = ratio("N : 1 + N records"), counted = ratio("N + 1 : 1 + N records (confirmed counted)");
    for (const SpecStorage& x : a.by_draft_len) {
        const double n = x.draft_len;
        snapshots.add(n, double(x.snapshots_extra_per_layer));
        confirmed.add(n, double(x.snapshots_total_per_layer));
        records.add(n, double(x.projection_total_per_layer));
        extra.add(n, x.ratio_n_snapshots);
        counted.add(n, x.ratio_counting_confirmed);
    }
    for (Series* s : {&snapshots, &confirmed, &records, &extra, &counted}) r.add_series(std::move(*s));
}

void fleet_and_variant_plots(const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    auto fleet = [](std::string name) {
        Series f = make_series(std::move(name), "Fleet storage against running requests",
                               "running requests R", "bytes", "requests", "B");
        f.log_x = f.log_y = true;
        return f;
    };
    Series snapshots = fleet("confirmed + N snapshots"), records = fleet("confirmed + N records"),
           ring = fleet("checkpoint + ring of L records");
    for (int q = 1; q <= 4096; q *= 2) {
        snapshots.add(q, double(s.per_sequence(s.snapshots_total_per_layer)) * q);
        records.add(q, double(s.per_sequence(s.projection_total_per_layer)) * q);
        ring.add(q, double(s.per_sequence(s.ring_total_per_layer)) * q);
    }
    for (Series* f : {&snapshots, &records, &ring}) r.add_series(std::move(*f));
    Series bars =
        make_series("bytes per token per layer", "Record size by variant", "variant", "bytes", "", "B");
    bars.style = SeriesStyle::bars;
    const auto& variants = accounting_variants();
    for (size_t i = 0; i < variants.size(); ++i) {
        bars.add(double(i), double(a.variants[i].record_per_token));
        bars.x_names.push_back(std::string(variants[i].row) + " " + variants[i].id);
    }
    r.add_series(std::move(bars));
}

// The snapshot the accounting counts against the one the layer's layout holds (KdaDims: S [HV][K][V]
// in the state dtype, then W - 1 rows of the raw q, k, v channels in the conv dtype).
void accounting_checks(const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    const uint64_t layout = a.layout_S_bytes + a.layout_window_bytes;
    r.check("snapshot_equals_layer_state",
            "Snapshot = the state one layer keeps, recounted from the layer's layout (S + conv windows)",
            s.snapshot_per_layer == layout,
            "accounting " + format_grouped(double(s.snapshot_per_layer)) + " B per layer; layout: S " +
                format_grouped(double(a.layout_S_bytes)) + " B (" + dtype_name(a.model.state_dtype) +
                ") + windows " + format_grouped(double(a.layout_window_bytes)) + " B (" +
                dtype_name(a.model.conv_dtype) + ") = " + format_grouped(double(layout)) + " B");
}

// The figures reference/kda.md §6 gives for Kimi-Linear.
void kimi_reference_checks(const StorageAccounting& a, Report& r) {
    if (!a.kimi_reference) return;
    // record_variants() order, the first 7 (recoverssm is not in kda.md's table)
    const uint64_t want[] = {32896, 41088, 32832, 57472, 4608, 40960, 65536};
    bool table = true;
    std::string got;
    const auto& variants = record_variants();
    for (size_t i = 0; i < std::size(want); ++i) {
        const uint64_t b = a.variants[i].record_per_token;
        table = table && b == want[i];
        got += (got.empty() ? "" : ", ") + std::string(variants[i].row) + " " + format_grouped(double(b));
    }
    r.check("kimi_linear_record_variants", "Kimi-Linear record variants = the kda.md §6 table (its 7 rows)",
            table, got + " B");
    const SpecStorage& k4 = *a.kimi_reference;
    const bool ok = k4.snapshot_per_layer == 2170880 && a.layout_S_bytes == 2097152 &&
                    a.layout_window_bytes == 73728 && k4.record_per_token == 41088 &&
                    std::round(k4.ratio_n_snapshots * 100) == 372 &&
                    std::round(k4.ratio_counting_confirmed * 100) == 465;
    r.check("kimi_linear_reference_figures",
            "Kimi-Linear reference figures (reference/kda.md §5-6, N = 4, minimal exact)", ok,
            format_grouped(double(k4.snapshot_per_layer)) +
                " B per snapshot (expect 2,170,880), of which S " + format_grouped(double(a.layout_S_bytes)) +
                " B (expect 2,097,152) and windows " + format_grouped(double(a.layout_window_bytes)) +
                " B (expect 73,728) in the layer's layout, " + format_grouped(double(k4.record_per_token)) +
                " B per record (expect 41,088), " + format_sig(k4.ratio_n_snapshots, 3) +
                ":1 (expect 3.72) and " + format_sig(k4.ratio_counting_confirmed, 3) + ":1 (expect 4.65)");
}

void accounting_notes(const StorageAccounting& a, Report& r) {
    const SpecStorage& s = a.chosen;
    const ModelConfig& c = a.model;
    r.notes.push_back(
        "Which convention is which: ratio_n_snapshots = N snapshots : (one state + N records), the storage "
        "beyond the live state; ratio_counting_confirmed = (N + 1) states : (one state + N records), "
        "the confirmed state counted on both sides. Per token, a snapshot is " +
        format_sig(s.ratio_per_token, 3) + "x a record.");
    r.notes.push_back(c.name + ": " + std::to_string(s.linear_layers) + " " + c.linear_name +
                      " layers, snapshot " + format_bytes(double(s.snapshot_per_layer)) +
                      " per layer. Tensor parallelism 1 "
                      "(with TP each rank holds 1/TP of both sides; the ratios do not change).");
    if (c.linear_name == "GDN")
        r.notes.push_back("Gated DeltaNet decays each head by one scalar, so g is " +
                          std::to_string(c.lin_v_heads) +
                          " values per token, not one per key channel as in KDA.");
}

// ---- vLLM's pages: snapshot per draft token against RecoverSSM (kimi_k3.md §3.3) ----

void vllm_scalars(const StorageAccounting& a, const VllmPageComparison& v, Report& r) {
    const VllmPages& x = v.chosen;
    const std::string N = std::to_string(x.draft_tokens);
    r.scalar("vllm_snapshot_page_bytes", "vLLM: one state page per KDA layer (S + conv window of W - 1 + N)",
             "B", double(x.snapshot_page))
        .help =
        "The baseline's page: the fp32 recurrent state plus the conv window widened to W - 1 + N columns "
        "(kimi_k3.md §3.1). Raw page, TP1, before vLLM pads it to the attention page.";
    r.scalar("vllm_recoverssm_page_bytes", "vLLM: RecoverSSM's page per KDA layer (S + conv + records)", "B",
             double(x.recoverssm_page))
        .help =
        "The same page with correction_cache (HV, 1 + N, V) fp32 and kg_cache (HV, 1 + N, 2 K) appended "
        "(kimi_k3.md §3.2).";
    r.scalar("vllm_record_bytes_per_layer", "vLLM: RecoverSSM's records per KDA layer, 1 + N positions", "B",
             double(x.records));
    r.scalar("vllm_ratio_none", "vLLM without prefix caching: (1 + N) snapshot pages / one RecoverSSM page",
             "ratio", x.ratio_none, true)
        .help = "mamba_cache_mode none: the baseline holds 1 + " + N +
                " state blocks per request (one per verified position), RecoverSSM one.";
    r.scalar("vllm_ratio_align", "vLLM with prefix caching: (2 + N) snapshot pages / two RecoverSSM pages",
             "ratio", x.ratio_align, true)
        .help = "mamba_cache_mode align: the baseline holds 2 + " + N +
                " state blocks per request, RecoverSSM two (the checkpoint and the next aligned block).";
    const double layers = double(a.chosen.linear_layers);
    r.scalar("vllm_snapshot_bytes_per_request_align", "vLLM, prefix caching: snapshot pages per request", "B",
             double(x.snapshot_align) * layers)
        .help = "All " + std::to_string(a.chosen.linear_layers) + " KDA layers, raw pages, TP1.";
    r.scalar("vllm_recoverssm_bytes_per_request_align", "vLLM, prefix caching: RecoverSSM pages per request",
             "B", double(x.recoverssm_align) * layers);
}

void vllm_table_and_plot(const VllmPageComparison& v, Report& r) {
    Table& t =
        r.add_table(make_table("vLLM's KDA pages per layer and request, snapshot per draft token vs "
                               "RecoverSSM (kimi_k3.md §3.3; raw "
                               "pages, TP1; N = draft tokens)",
                               {{"N", "tokens"},
                                {"snapshot page S + C_N", "B"},
                                {"RecoverSSM page S + C_N + R_N", "B"},
                                {"records R_N", "B"},
                                {"no prefix caching: (1 + N) snapshot pages", "B"},
                                {"no prefix caching: ratio", "ratio"},
                                {"prefix caching: (2 + N) snapshot pages", "B"},
                                {"prefix caching: 2 RecoverSSM pages", "B"},
                                {"prefix caching: ratio", "ratio"}}));
    auto ratio = [](std::string name) {
        return make_series(std::move(name), "vLLM: snapshot pages / RecoverSSM pages per KDA layer against N",
                           "draft tokens N", "ratio", "tokens", "ratio");
    };
    Series none = ratio("no prefix caching: (1 + N) snap / rec"),
           align = ratio("prefix caching: (2 + N) snap / (2 rec)");
    for (const VllmPages& x : v.table) {
        t.add({double(x.draft_tokens), double(x.snapshot_page), double(x.recoverssm_page), double(x.records),
               double(x.snapshot_none), x.ratio_none, double(x.snapshot_align), double(x.recoverssm_align),
               x.ratio_align});
        none.add(x.draft_tokens, x.ratio_none);
        align.add(x.draft_tokens, x.ratio_align);
    }
    r.add_series(std::move(none));
    r.add_series(std::move(align));
    Table& tensors = r.add_table(make_table(
        "vLLM's tensors of one KDA layer's page at N = " + std::to_string(v.chosen.draft_tokens) + " (TP1)",
        {{"tensor", ""}, {"shape", ""}, {"dtype", ""}, {"bytes", "B"}, {"in", ""}}));
    for (const PageTensor& x : v.tensors) {
        std::string shape;
        for (uint64_t d : x.shape) shape += (shape.empty() ? "" : " x ") + std::to_string(d);
        tensors.add({x.name, shape, std::string(dtype_name(x.dtype)), double(x.bytes()),
                     std::string(x.record ? "RecoverSSM only" : "both pages")});
    }
}

void vllm_checks(const StorageAccounting& a, const VllmPageComparison& v, Report& r) {
    // The page model's snapshot against the accounting's state (account_memory) and the layer's layout.
    bool widens = true, records = true;
    for (const VllmPages& x : v.table) {
        widens &=
            x.snapshot_page == a.chosen.snapshot_per_layer + uint64_t(x.draft_tokens) * v.conv_column_bytes;
        records &= x.records == uint64_t(1 + x.draft_tokens) *
                                    a.variants[size_t(RecordVariant::recoverssm)].record_per_token;
    }
    const VllmPages& one = v.table.front();
    r.check("vllm_snapshot_page_widens_window",
            "vLLM's snapshot page = the layer's state (S + W - 1 conv columns) + one conv column per draft "
            "token, "
            "N = 1.." +
                std::to_string(kVllmPageTableDraft),
            widens,
            "N = 1: page " + format_grouped(double(one.snapshot_page)) + " B; state " +
                format_grouped(double(a.chosen.snapshot_per_layer)) + " B + " +
                format_grouped(double(v.conv_column_bytes)) + " B per column (the layer's layout)");
    r.check("recoverssm_page_records_equal_records",
            "vLLM's record caches R_N = (1 + N) RecoverSSM records of the record accounting, N = 1.." +
                std::to_string(kVllmPageTableDraft),
            records,
            "N = 1: correction_cache + kg_cache " + format_grouped(double(one.records)) + " B; record " +
                format_grouped(double(a.variants[size_t(RecordVariant::recoverssm)].record_per_token)) +
                " B per position");
}

// The Kimi-K3 figures of kimi_k3.md §3.3: the record and the raw-page table.
void kimi_k3_checks(const StorageAccounting& a, const VllmPageComparison& v, Report& r) {
    if (a.model.id != "kimi-k3") return;
    const uint64_t heads = uint64_t(a.model.lin_v_heads);
    const uint64_t rec = v.recoverssm_record, snap_head = a.layout_S_bytes / heads;
    r.check(
        "kimi_k3_recoverssm_record",
        "Kimi-K3 RecoverSSM record = kimi_k3.md §3.3 (1,024 B per head and draft position, 1/64 of a head's "
        "state)",
        rec == 98304 && rec / heads == 1024 && snap_head == 65536 && snap_head == 64 * (rec / heads),
        format_grouped(double(rec)) + " B per layer (expect \"98,304\"), " +
            format_grouped(double(rec / heads)) + " B per head (expect \"1,024\"); a head's state " +
            format_grouped(double(snap_head)) + " B (expect \"65,536\")");
    struct Row {
        uint64_t snap, rec;
        int none, align;  // x 100
    };
    const Row want[kVllmPageTableDraft] = {{6586368, 6782976, 194, 146}, {6660096, 6955008, 287, 192},
                                           {6733824, 7127040, 378, 236}, {6807552, 7299072, 466, 280},
                                           {6881280, 7471104, 553, 322}, {6955008, 7643136, 637, 364},
                                           {7028736, 7815168, 719, 405}, {7102464, 7987200, 800, 445}};
    bool ok = v.table.size() == size_t(kVllmPageTableDraft);
    std::string bad;
    for (size_t i = 0; ok && i < v.table.size(); ++i) {
        const VllmPages& x = v.table[i];
        const Row& w = want[i];
        const bool row = x.snapshot_page == w.snap && x.recoverssm_page == w.rec &&
                         std::lround(x.ratio_none * 100) == w.none &&
                         std::lround(x.ratio_align * 100) == w.align;
        if (!row && bad.empty())
            bad = "; N = " + std::to_string(x.draft_tokens) +
                  " differs: " + format_grouped(double(x.snapshot_page)) + " / " +
                  format_grouped(double(x.recoverssm_page)) + " B, " + fixed2(x.ratio_none) + " / " +
                  fixed2(x.ratio_align);
        ok &= row;
    }
    const VllmPages& n1 = v.table.front();
    const VllmPages& n8 = v.table.back();
    r.check(
        "kimi_k3_vllm_page_table",
        "Kimi-K3 raw pages and ratios from the tensor shapes = the kimi_k3.md §3.3 table, N = 1..8", ok,
        "N = 1: " + format_grouped(double(n1.snapshot_page)) + " / " +
            format_grouped(double(n1.recoverssm_page)) + " B, " + fixed2(n1.ratio_none) + " / " +
            fixed2(n1.ratio_align) + " (expect \"6,586,368\" / \"6,782,976\", \"1.94\" / \"1.46\"); N = 8: " +
            format_grouped(double(n8.snapshot_page)) + " / " + format_grouped(double(n8.recoverssm_page)) +
            " B, " + fixed2(n8.ratio_none) + " / " + fixed2(n8.ratio_align) +
            " (expect \"7,102,464\" / \"7,987,200\", \"8.00\" / \"4.45\")" + bad);
}

void vllm_notes(const VllmPageComparison& v, Report& r) {
    const std::string N = std::to_string(v.chosen.draft_tokens);
    r.notes.push_back(
        "vLLM's default for KDA under speculative decoding (kimi_k3.md §3.1) is a snapshot per draft token: "
        "num_speculative_blocks = N extra state blocks per request, the verify kernel writes the full fp32 "
        "state "
        "after every token into its own slot, and the next step starts from slot num_accepted - 1. "
        "RecoverSSM "
        "(kimi_k3.md §3.2, --use-replayssm) keeps one untouched checkpoint and records per draft position "
        "and "
        "head the delta-rule correction c_t, the raw key and the raw gate; after acceptance it folds the "
        "accepted "
        "records into the checkpoint. Both widen the conv window to W - 1 + N columns.");
    r.notes.push_back(
        "In the vLLM page comparison N = draft_len = " + N +
        " is vLLM's num_speculative_tokens (a verify window of 1 + N positions, each with a record), while "
        "the "
        "module's own snapshot/record figures count N verified tokens. Pages are raw (TP1, before the "
        "padding "
        "to the attention page); all three terms scale with 1/TP, so the ratios hold at any TP. RecoverSSM "
        "cannot "
        "be combined with KV connectors (P/D disaggregation, KV offload), per kimi_k3.md §3.2.");
}

void report_vllm(const StorageAccounting& a, Report& r) {
    if (!a.vllm) return;
    vllm_scalars(a, *a.vllm, r);
    vllm_table_and_plot(*a.vllm, r);
    vllm_checks(a, *a.vllm, r);
    kimi_k3_checks(a, *a.vllm, r);
    vllm_notes(*a.vllm, r);
}

// ---- the rollback on the runnable model ----

void demo_scalars(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    r.scalar("demo_accepted", "Demo: tokens the target kept", "tokens", d.accepted).help =
        "Of the " + std::to_string(d.draft_len) + " verified tokens (pending + " +
        std::to_string(d.draft_len - 1) +
        " drafts), the longest prefix the target's greedy picks agree with.";
    r.scalar("demo_snapshot_bytes", "Demo: confirmed + N snapshots held", "B", double(d.snapshot_bytes_held));
    r.scalar("demo_record_bytes", "Demo: confirmed + N records held", "B",
             double(d.record_bytes_held[size_t(p.variant)]));
}

// How many of a variant's restores (n = 0..N) were bitwise: S, conv windows, the whole state and KV.
struct Exactness {
    int S = 0, windows = 0, full = 0, total = 0;
    // Claimed exact: every n bitwise. Claimed S only: S every n, windows wrong for every n >= 1.
    bool claim_holds(const VariantInfo& v) const {
        return v.exact ? full == total : S == total && windows == 1;
    }
};
Exactness measured(const std::vector<RestoreOutcome>& outcomes) {
    Exactness e;
    for (const RestoreOutcome& o : outcomes)
        e.S += o.S_exact, e.windows += o.windows_exact, e.full += o.replay_exact;
    e.total = int(outcomes.size());
    return e;
}

void demo_tables(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    Table& restores = r.add_table(make_table(
        "Runnable model (" + std::string(default_runnable_id()) + "): reject at n, restore both ways",
        {{"n kept", "tokens"},
         {"copy == cold run", ""},
         {"replay == direct", ""},
         {"copy == replay", ""},
         {"tokens replayed", "tokens"},
         {"state bytes copied", "B"}}));
    for (const RestoreOutcome& o : d.outcomes[size_t(p.variant)])
        restores.add({double(o.n), std::string(o.copy_exact ? "bitwise" : "DIFFERS"),
                      std::string(o.replay_exact ? "bitwise"
                                  : o.S_exact    ? "S only"
                                                 : "DIFFERS"),
                      std::string(o.copy_replay_same ? "bitwise" : "no"), double(o.n),
                      double(d.state_bytes)});
    Table& exactness = r.add_table(
        make_table("Measured exactness of every record variant (n = 0.." + std::to_string(d.draft_len) + ")",
                   {{"variant", ""},
                    {"claimed", ""},
                    {"S bitwise", ""},
                    {"windows bitwise", ""},
                    {"state + KV bitwise", ""},
                    {"bytes held (runnable model)", "B"}}));
    const auto& variants = record_variants();
    for (size_t i = 0; i < variants.size(); ++i) {
        const Exactness e = measured(d.outcomes[i]);
        auto of = [&](int k) { return std::to_string(k) + " of " + std::to_string(e.total); };
        exactness.add({variant_name(variants[i]), std::string(variants[i].exact ? "exact" : "S only"),
                       of(e.S), of(e.windows), of(e.full), double(d.record_bytes_held[i])});
    }
}

bool exactness_claims_hold(const RollbackDemo& d) {
    const auto& variants = record_variants();
    bool claims = true;
    for (size_t i = 0; i < variants.size(); ++i) claims &= measured(d.outcomes[i]).claim_holds(variants[i]);
    return claims;
}

void restore_checks(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    const std::vector<RestoreOutcome>& chosen = d.outcomes[size_t(p.variant)];
    const VariantInfo& v = variant_info(p.variant);
    bool agree = true, all_replay = true;
    int copies = 0;
    for (const RestoreOutcome& o : chosen) {
        agree &= v.exact ? o.copy_replay_same : o.copy_replay_S;
        copies += o.copy_exact, all_replay &= o.replay_exact;
    }
    const int points = int(chosen.size());
    const RestoreOutcome& none = chosen.front();
    auto yes = [](bool b) { return std::string(b ? "yes" : "NO"); };
    r.check("copy_equals_replay",
            v.exact ? "Restore by copy and by replay give the same state, bitwise, for every n in 0..N"
                    : "Restore by copy and by replay give the same S, bitwise, for every n in 0..N",
            agree,
            std::to_string(d.draft_len + 1) + " rejection points, variant " + v.id +
                (v.exact ? "" : ": it claims S only, its conv windows stay at the confirmed ones"));
    r.check("copy_equals_direct",
            "Restore by copy equals a cold run of the n kept tokens, bitwise, for every n in 0..N",
            copies == points,
            std::to_string(copies) + " of " + std::to_string(points) +
                " bitwise in state and KV against a new sequence that prefilled the prompt and ran the n "
                "tokens in one recurrent forward (no restore, no token-by-token decode)");
    if (v.exact)
        r.check("replay_equals_direct", "Replay of the records equals direct decoding, for every n",
                all_replay, std::string("variant ") + v.id);
    r.check("none_kept_leaves_confirmed_state",
            "n = 0 gives back the state no draft touched, by copy and by replay",
            none.draft_mutated && none.untouched,
            "the draft changed the working state: " + yes(none.draft_mutated) +
                "; after keeping none, copy and replay = a cold run of the prompt alone (state and KV): " +
                yes(none.untouched));
}

// The runnable model's two ratios measured on the buffers it holds (snapshots, confirmed state,
// records), against the accounting's for its preset.
void held_ratio_check(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    const SpecStorage& tiny = d.tiny_accounting;
    const double records = double(d.record_bytes_held[size_t(p.variant)]);
    const double n_snapshots = double(d.snapshot_bytes_held - d.confirmed_bytes_held) / records,
                 counting_confirmed = double(d.snapshot_bytes_held) / records;
    auto same = [](double a, double b) { return std::fabs(a - b) <= 1e-12 * std::fabs(b); };
    r.check(
        "ratios_from_held_bytes",
        "The ratios measured on the runnable model's snapshots and records = the accounting's for its "
        "preset",
        same(n_snapshots, tiny.ratio_n_snapshots) && same(counting_confirmed, tiny.ratio_counting_confirmed),
        "held: " + format_sig(n_snapshots, 4) + ":1 and " + format_sig(counting_confirmed, 4) +
            ":1; accounting: " + format_sig(tiny.ratio_n_snapshots, 4) + ":1 and " +
            format_sig(tiny.ratio_counting_confirmed, 4) + ":1");
}

void demo_checks(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    restore_checks(p, d, r);
    held_ratio_check(p, d, r);
    r.check("variant_exactness_claims",
            "Every variant's exactness claim holds (exact: all n bitwise; S only: S bitwise, windows stale)",
            exactness_claims_hold(d),
            "core only and delta form do not rebuild the conv windows; the others do");
    r.check("one_pass_logits_bitwise",
            "One-pass verification has the logits of token-by-token verification, bitwise", d.logits_match,
            std::to_string(d.draft_len) + " rows of " + std::to_string(d.vocab) + " logits");
    const SpecStorage& tiny = d.tiny_accounting;
    const uint64_t records = d.record_bytes_held[size_t(p.variant)];
    r.check("held_bytes_equal_accounting", "Bytes the runnable model holds = the accounting for its preset",
            d.snapshot_bytes_held == tiny.per_sequence(tiny.snapshots_total_per_layer) &&
                records == tiny.per_sequence(tiny.projection_total_per_layer),
            format_grouped(double(d.snapshot_bytes_held)) + " B of snapshots, " +
                format_grouped(double(records)) + " B of state + records");
}

// RecoverSSM's commit on the runnable model: its token-order fold (the variant's replay, compared with
// direct decoding in the restores above) beside the closed form vLLM's kernel evaluates.
//
// Tolerance: the closed form reorders the same fp32 arithmetic. Each element of S is P S0 + sum_t
// (P_{>t} k_t) c_t: a product of up to n + 1 rounded factors and a sum of n + 1 rounded terms, so its
// error is at most about (2 n + 2) u of the largest term, u = 2^-24, and the token-order fold's (which is
// direct decoding) the same again: |closed - direct| <= (4 n + 4) u max|S|, at N = kSpecMaxDraft about
// 7.9e-6. kClosedFormTolerance = 1e-5 is that bound rounded up. Measured on the tiny model (seed 7; k3-tiny,
// the demo default, gives the same order): 0 at n <= 1 (one step is the same arithmetic), 2.2e-7 at N =
// 7, 3.7e-7 at N = 32 (about 6 u), as large as direct decoding's own distance from fp64; a flipped correction
// bit or a skipped decay factor lands orders of magnitude above the bound (module 7's falsifiers).
void closed_form_report(const RollbackDemo& d, Report& r) {
    const std::vector<RestoreOutcome>& fold = d.outcomes[size_t(RecordVariant::recoverssm)];
    Table& t = r.add_table(
        make_table("RecoverSSM's commit on the runnable model: token-order fold against vLLM's closed form",
                   {{"n accepted", "tokens"},
                    {"token-order fold == direct", ""},
                    {"closed form vs direct, max rel", "ratio"},
                    {"closed form vs fp64, max rel", "ratio"},
                    {"direct vs fp64, max rel", "ratio"}}));
    double vs_direct = 0, vs_fp64 = 0, direct_fp64 = 0;
    int bitwise = 0;
    for (size_t n = 0; n < d.closed_form.size() && n < fold.size(); ++n) {
        const ClosedFormError& e = d.closed_form[n];
        bitwise += fold[n].replay_exact;
        t.add({double(e.n), std::string(fold[n].replay_exact ? "bitwise" : "DIFFERS"), e.vs_direct, e.vs_fp64,
               e.direct_vs_fp64});
        vs_direct = std::max(vs_direct, e.vs_direct);
        vs_fp64 = std::max(vs_fp64, e.vs_fp64);
        direct_fp64 = std::max(direct_fp64, e.direct_vs_fp64);
    }
    const std::string over = " over n = 0.." + std::to_string(d.draft_len) + " and every layer's S";
    r.scalar("closed_form_rel_error", "RecoverSSM closed form vs direct decoding: max |diff| / max |S|",
             "ratio", vs_direct)
        .help =
        "vLLM's closed-form commit in fp32 against the bits of decoding the n tokens directly" + over + ".";
    r.scalar("closed_form_rel_error_fp64", "RecoverSSM closed form vs its fp64 evaluation", "ratio", vs_fp64)
        .help = "The same closed form in fp32 against fp64" + over + ".";
    r.scalar("direct_rel_error_fp64", "Direct decoding (fp32) vs the fp64 closed form", "ratio", direct_fp64)
        .help = "The fp32 recurrence's own rounding, for scale" + over + ".";
    const int points = int(fold.size());
    r.check(
        "recoverssm_fold_bitwise",
        "RecoverSSM's token-order fold of the first n records = decoding them directly, bitwise (S, "
        "conv windows, KV), for every n in 0..N",
        bitwise == points && points == d.draft_len + 1,
        std::to_string(bitwise) + " of " + std::to_string(points) +
            " accepted counts; the fold re-normalises k, recomputes g from z through the layer's gate and "
            "applies S = exp(g) S + k c^T");
    r.check("closed_form_within_tolerance",
            "vLLM's closed-form commit stays within " + format_sig(kClosedFormTolerance, 2) +
                " of max |S| of direct decoding and of fp64, for every n",
            d.closed_form.size() == size_t(d.draft_len + 1) && vs_direct <= kClosedFormTolerance &&
                vs_fp64 <= kClosedFormTolerance,
            "max " + format_sig(vs_direct, 3) + " against direct decoding, " + format_sig(vs_fp64, 3) +
                " against fp64 (direct decoding itself: " + format_sig(direct_fp64, 3) +
                " against fp64); bound (4 N + 4) 2^-24 at N = " + std::to_string(kSpecMaxDraft) +
                ", rounded up");
}

void demo_timing(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    auto model = [](std::string name) {
        return make_series(std::move(name), "Restore time against n kept (runnable model, this device)",
                           "tokens kept n", "ms", "tokens", "ms");
    };
    auto layer = [](std::string name) {
        return make_series(std::move(name),
                           "One KDA layer at Kimi-Linear dimensions: restore time against n (this device)",
                           "tokens kept n", "ms", "tokens", "ms");
    };
    Series copy = model("copy snapshot n");
    Series replay =
        model("copy confirmed + replay n records (" + std::string(variant_info(p.variant).id) + ")");
    for (int n = 0; n <= d.draft_len; ++n) {
        copy.add(n, d.copy_ms[size_t(n)]);
        replay.add(n, d.replay_ms[size_t(n)]);
    }
    Series layer_copy = layer("copy one layer state (" + format_bytes(double(d.layer.state_bytes)) + ")");
    Series layer_replay = layer("replay n minimal-exact records in place");
    for (size_t n = 0; n < d.layer.copy_ms.size(); ++n) {
        layer_copy.add(double(n), d.layer.copy_ms[n]);
        layer_replay.add(double(n), d.layer.replay_ms[n]);
    }
    r.timing.series = {copy, replay, layer_copy, layer_replay};
    const size_t N = size_t(d.draft_len);
    r.timing_scalar("restore_copy_ms", "Restore by copy (runnable model), median", "ms", d.copy_ms[N]);
    r.timing_scalar("restore_replay_ms_at_n", "Restore by replay of N records (runnable model), median", "ms",
                    d.replay_ms[N]);
    const std::vector<double>& replay_ms = d.layer.replay_ms;
    if (replay_ms.size() > 1 && replay_ms[1] > 0)
        r.timing_scalar("kimi_layer_replay_steps_per_copy",
                        "Kimi-Linear layer: replayed tokens that cost one copy", "tokens",
                        d.layer.copy_ms[0] / (replay_ms.back() / double(replay_ms.size() - 1)));
    r.timing_text("simd_arch", "SIMD", kda::simd_arch());
}

void report_demo(const SpecStorageParams& p, const RollbackDemo& d, Report& r) {
    if (!d.ran) {
        r.check("demo_ran", "Rollback on the runnable model ran", false, d.error);
        return;
    }
    demo_scalars(p, d, r);
    demo_tables(p, d, r);
    demo_checks(p, d, r);
    closed_form_report(d, r);
    demo_timing(p, d, r);
    r.notes.push_back(
        "Restore times on the runnable model include a copy of the confirmed state before the replay: its "
        "forward writes the sequence's state in place. An engine's verify kernel leaves the confirmed "
        "slot untouched and replays onto it directly (the Kimi-Linear layer timing does that).");
}

}  // namespace

void report_spec_storage(const SpecStorageParams& p, const SpecStorageResult& result, Report& r) {
    const StorageAccounting& a = result.accounting;
    ratio_scalars(a, r);
    size_scalars(p, a, r);
    variant_table(a, r);
    storage_tables(p, a, r);
    draft_len_plots(a, r);
    fleet_and_variant_plots(a, r);
    accounting_checks(a, r);
    kimi_reference_checks(a, r);
    accounting_notes(a, r);
    report_vllm(a, r);
    if (result.demo) report_demo(p, *result.demo, r);
}

}  // namespace k3
