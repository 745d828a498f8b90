// Module 10 `migrate`: the result as figures, tables, checks and notes: the pause, each strategy on
// the runnable model, the fault injection, the resume within one instance, and the costs at scale.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/migrate/migrate.h"

namespace k3 {

namespace {

using namespace k3::lifecycle;

void paused(const PausedRequest& pr, Report& r) {
    r.timing_scalar("pause_ms", "Pause: capture and write the blob (this device)", "ms", pr.pause_ms);
    // The blob's own checksum: equal across runs and builds exactly when the blob's bytes are.
    r.scalar("blob_crc32c", "CRC-32C of the blob", "", double(pr.blob_crc32c));
    r.timing_scalar("prefill_tokens_per_s", "Prefill speed of the runnable model (this device)", "tokens/s",
                    pr.prefill_ms > 0 ? 1e3 * double(pr.prompt_tokens) / pr.prefill_ms : 0);
}

// The blob parsed back from its bytes against the accounting (state, KV rows, ids) and the format's
// fixed sampler payload, and against what the cost model counts for it.
void blob_check(const StrategyOutcome& o, Report& r) {
    const std::string name = strategy_id(o.strategy);
    const BlobRecount& n = o.recount;
    const BlobAccount& a = o.accounted;
    const StrategyCost& c = o.counted;
    const double sampler = 4 + 4 + 4 * 8 + 8;  // f32 temperature, u32 has_spare, u64 rng[4], f64 spare
    const bool carried = n.problem.empty() && double(n.state) == a.state && double(n.kv) == a.kv &&
                         double(n.tokens) == 4 * a.ids && double(n.sampler) == sampler;
    const bool counted =
        c.bytes == o.blob_bytes && c.state_bytes == double(n.state) && c.kv_bytes == double(n.kv);
    auto vs = [](double got, double want) {
        return format_grouped(got) + " B (accounted " + format_grouped(want) + ")";
    };
    r.check(
        "blob_recount_matches_accounting_" + name,
        "The " + name +
            " blob, parsed back, carries the accounted state and KV, and the cost model counts it",
        carried && counted,
        (n.problem.empty()
             ? std::to_string(n.sections.size()) + " sections: state " + vs(double(n.state), a.state) +
                   ", KV " + vs(double(n.kv), a.kv) + " = " + format_grouped(a.kv_rows) + " rows, ids " +
                   vs(double(n.tokens), 4 * a.ids) + ", sampler " + format_grouped(double(n.sampler)) + " B"
             : "the blob does not parse: " + n.problem) +
            "; " + format_grouped(o.blob_bytes) + " B written, cost model " + format_grouped(c.bytes) +
            " B (state " + format_grouped(c.state_bytes) + ", KV " + format_grouped(c.kv_bytes) + ")");
}

void strategy_checks(const MigrateParams& p, const MigrateResult& m, const StrategyOutcome& o, Report& r) {
    const std::string name = strategy_id(o.strategy);
    const uint64_t at = m.paused->position;
    if (o.resumed)
        r.check("migrated_bitwise_" + name,
                "Migrated with " + name + ": the continuation is bitwise the uninterrupted run",
                o.continuation_same && o.state_same,
                std::to_string(p.after) + " tokens and their logits compared bit for bit after resuming at " +
                    std::to_string(at) + " tokens (" + std::to_string(o.resume.recomputed_tokens) +
                    " recomputed); restored state and KV " + (o.state_same ? "byte-identical" : "DIFFER") +
                    (o.resume.exact_path ? "" : "; recompute path off the chunk grid"));
    blob_check(o, r);
    if (o.strategy != MigrationStrategy::move_all) return;
    r.scalar("blob_bytes", "Blob, move everything (runnable)", "B", o.blob_bytes, true).help =
        "Header, the KDA state (S and conv windows of " + std::to_string(m.linear_layers) +
        " layers), the MLA latent KV of " + std::to_string(at) + " tokens, token ids, sampler, CRC-32C.";
    r.scalar("blob_state_bytes", "of which KDA state", "B", o.counted.state_bytes);
    r.scalar("blob_kv_bytes", "of which KV", "B", o.counted.kv_bytes);
    r.scalar("paused_at", "Paused after", "tokens", double(at));
}

std::string resumed_from(const StrategyOutcome& o) {
    if (o.strategy == MigrationStrategy::move_all) return "the blob";
    if (o.strategy == MigrationStrategy::recompute) return "token ids only";
    return o.checkpoint ? "checkpoint at " + std::to_string(*o.checkpoint) + " tokens + KV"
                        : "token ids (no checkpoint inside the prompt)";
}

void strategy_tables(const MigrateParams& p, const MigrateResult& m, Report& r) {
    Table& run =
        r.add_table(make_table("Strategies on the runnable model (exact bytes; transfer time at line rate)",
                               {{"strategy", ""},
                                {"blob", "B"},
                                {"KDA state", "B"},
                                {"KV", "B"},
                                {"KV tokens", "tokens"},
                                {"recomputed tokens", "tokens"},
                                {"recompute work", "FLOP"},
                                {"transfer on " + p.link, "s"},
                                {"resumed from", ""},
                                {"continuation bitwise equal", ""}}));
    Table time = make_table("Strategies on this device (measured)", {{"strategy", ""},
                                                                     {"read + resume", "ms"},
                                                                     {"of which recompute tokens", "tokens"},
                                                                     {"continue", "ms"}});
    for (const StrategyOutcome& o : m.strategies) {
        const StrategyCost& c = o.counted;
        const double recomputed = double(o.resume.recomputed_tokens);
        run.add({std::string(strategy_title(o.strategy)), o.blob_bytes, c.state_bytes, c.kv_bytes,
                 c.kv_tokens, recomputed, c.recompute_flops, c.transfer_s, resumed_from(o),
                 std::string(o.continuation_same ? "yes" : "NO")});
        time.add({std::string(strategy_title(o.strategy)), o.resume_ms, recomputed, o.continue_ms});
    }
    r.timing.tables.push_back(std::move(time));
    // The continuation itself, for the eye.
    const Trace& want = m.uninterrupted;
    Table& cont = r.add_table(
        make_table("Continuation (uninterrupted run)", {{"step", ""}, {"token", ""}, {"max |logit|", ""}}));
    const size_t first = want.tokens.size() - want.logits.size();
    for (size_t i = 0; i < want.logits.size() && i < 16; ++i) {
        float mx = 0;
        for (float v : want.logits[i]) mx = std::max(mx, std::fabs(v));
        cont.add({double(i), double(want.tokens[first + i]), double(mx)});
    }
}

void fault(const BlobFaultOutcome& f, BlobFault injected, Report& r) {
    const BlobStatus& st = f.status;
    const std::string error = blob_error_id(st.code);
    r.add_table(make_table("Fault injection", {{"fault", ""},
                                               {"blob bytes", "B"},
                                               {"reader's error", ""},
                                               {"message", ""},
                                               {"byte offset", ""}}))
        .add(
            {f.what, f.blob_bytes, error, st.ok() ? std::string("accepted") : st.message, double(st.offset)});
    if (injected == BlobFault::none)
        r.check("intact_blob_resumes_bitwise", "The intact blob is accepted and resumes bitwise",
                st.ok() && f.resumed_ok,
                st.ok() ? "read, checked, resumed and continued" : error + ": " + st.message);
    else
        r.check("injected_fault_detected", "Injected fault detected: " + error, !st.ok() && f.as_expected,
                f.what + " -> " + (st.ok() ? std::string("ACCEPTED (not detected)") : st.message));
    r.scalar("fault_detected", "Fault detected", "flag", st.ok() ? 0 : 1);
    r.notes.push_back(st.ok()
                          ? "Fault injection: " + f.what + "; the blob was accepted."
                          : "Fault injection: " + f.what + "; the reader says " + error + ": " + st.message);
}

void same_instance(const SameInstanceOutcome& s, Report& r) {
    r.check(
        "same_instance_resumes_bitwise",
        "Paused, freed and resumed in the same instance: bitwise the uninterrupted run", s.equal && s.freed,
        s.status.ok() ? "the paused sequence released its pages; the resumed one continues with the same bits"
                      : std::string(blob_error_id(s.status.code)) + ": " + s.status.message);
}

void scale_table(const ScaleCosts& s, Report& r) {
    Table& t = r.add_table(make_table(
        "Strategies at " + s.model.name + " scale, " + format_grouped(s.context) + " tokens, checkpoint " +
            format_grouped(s.distance) + " tokens back (bytes exact; times are roofline ESTIMATES on " +
            s.hardware.id + ", line rate on " + s.link.id + ")",
        {{"strategy", ""},
         {"bytes moved", "B"},
         {"KDA state", "B"},
         {"KV", "B"},
         {"recomputed tokens", "tokens"},
         {"recompute work", "FLOP"},
         {"transfer", "s"},
         {"recompute (alone)", "s"},
         {"total (alone)", "s"},
         {"recompute (in batch)", "s"},
         {"total (in batch)", "s"}}));
    for (MigrationStrategy st : kMigrationStrategies) {
        const StrategyCost &x = s.alone[st], &y = s.in_batch[st];
        t.add({std::string(strategy_title(st)), x.bytes, x.state_bytes, x.kv_bytes, x.recompute_tokens,
               x.recompute_flops, x.transfer_s, x.recompute_s, x.total_s, y.recompute_s, y.total_s});
    }
}

// Bytes of a move-everything blob beyond its state and KV, by the format table of core/lifecycle/blob.h:
// the 112 B header, a 16 B header per section (S and conv windows of every linear layer, KV of every
// attention layer, token ids, sampler), 4 B per token id, the 48 B sampler and the 4 B CRC-32C.
double blob_overhead(const MemoryAccount& a, double ids) {
    return 112 + 16.0 * (2 * a.linear_layers + a.attention_layers + 2) + 4 * ids + 48 + 4;
}

// The cost model's blob at scale (the format's arithmetic on the configuration's layout) against the
// accounting plus the format's overhead, and the accounting against the published figures of the preset
// asked for (reference/kda.md §5, reference/kimi_k3.md §2, reference/serving.md §7).
void scale_check(const MigrateParams& p, const ScaleCosts& s, Report& r) {
    const StrategyCost& all = s.chosen(p.regime)[MigrationStrategy::move_all];
    const MemoryAccount& acc = s.account;
    const double P = std::floor(s.context), kv = double(acc.kv_bytes_per_token) * P;
    const double want = double(acc.state_bytes) + kv + blob_overhead(acc, P + 1);
    const bool split = all.state_bytes == double(acc.state_bytes) && all.kv_bytes == kv;
    bool published = true;
    std::string source;
    if (p.preset == ModelPreset::kimi_linear_48b) {
        published = all.state_bytes == 43417600 && all.kv_bytes == 8064 * P;
        source = "; Kimi Linear: 43,417,600 B of state and 8,064 B/token (reference/kda.md §5)";
    } else if (p.preset == ModelPreset::kimi_k3) {
        const double per_layer = all.state_bytes / double(s.model.n_linear());
        published = all.state_bytes == 449372160 && per_layer == 6512640 && all.kv_bytes == 27648 * P;
        source = "; Kimi-K3: " + format_grouped(per_layer) + " B per KDA layer x " +
                 std::to_string(s.model.n_linear()) +
                 " layers; published 6,512,640 B per layer, 449,372,160 B of state and 27,648 B/token in "
                 "bf16 (reference/kimi_k3.md §2.1, §2.3)";
    } else if (p.preset == ModelPreset::qwen3_next_80b) {
        published = std::fabs(all.state_bytes / 1048576 - 73.7) < 0.05 && all.kv_bytes == 24576 * P;
        source = "; Qwen3-Next: 73.7 MiB of state and 24 KiB/token (reference/serving.md §7)";
    }
    r.check("scale_blob_is_accounted",
            "At scale the blob is the accounted state and KV plus the format's headers",
            all.bytes == want && split && published,
            "cost model " + format_grouped(all.bytes) + " B (state " + format_grouped(all.state_bytes) +
                ", KV " + format_grouped(all.kv_bytes) + ") vs accounting " +
                format_grouped(double(acc.state_bytes)) + " + " +
                format_grouped(double(acc.kv_bytes_per_token)) + " B x " + format_grouped(P) + " tokens + " +
                format_grouped(blob_overhead(acc, P + 1)) +
                " B of headers, ids, sampler and CRC = " + format_grouped(want) + " B" + source);
}

void scale_figures(const MigrateParams& p, const ScaleCosts& s, Report& r) {
    const MigrationCosts& m = s.chosen(p.regime);
    const StrategyCost& all = m[MigrationStrategy::move_all];
    const MemoryAccount& acc = s.account;
    r.scalar("scale_move_all_bytes", "Bytes to move everything at scale", "B", all.bytes, true).help =
        s.model.name + " at " + format_grouped(s.context) + " tokens: KDA state " +
        format_bytes(double(acc.state_bytes)) + " + KV " +
        format_bytes(double(acc.kv_bytes_per_token) * s.context) + " + ids, sampler, header.";
    r.scalar("scale_move_all_s", "Move everything (estimate)", "s", all.total_s, true);
    r.scalar("scale_move_kv_s", "Move KV, recompute from checkpoint (estimate)", "s",
             m[MigrationStrategy::move_kv].total_s, true);
    r.scalar("scale_recompute_s", "Recompute everything (estimate)", "s",
             m[MigrationStrategy::recompute].total_s, true)
        .help = "Roofline estimate of prefilling the whole context on the destination (" + s.hardware.name +
                ", " + regime_id(p.regime) + ").";
    r.scalar("break_even_distance", "move_kv beats move_all up to a checkpoint distance of", "tokens",
             s.break_even_distance);
    r.notes.push_back("At scale the fastest strategy is " + std::string(strategy_title(m.fastest())) + " (" +
                      regime_id(p.regime) + " regime, estimate).");
    scale_check(p, s, r);
}

void scale_plots(const ScaleCosts& s, Report& r) {
    auto series = [](MigrationStrategy st, std::string plot, std::string x_label) {
        Series out = make_series(strategy_title(st), std::move(plot), std::move(x_label),
                                 "seconds (estimate)", "tokens", "s");
        out.log_x = out.log_y = true;
        return out;
    };
    const std::string over_context = "Migration time vs context (estimate)";
    Series sa = series(MigrationStrategy::move_all, over_context, "context (tokens)"),
           sk = series(MigrationStrategy::move_kv, over_context, "context (tokens)"),
           sr = series(MigrationStrategy::recompute, over_context, "context (tokens)");
    for (const ScaleCosts::Point& x : s.over_context) {
        sa.add(x.x, x.costs[MigrationStrategy::move_all].total_s);
        sk.add(x.x, x.costs[MigrationStrategy::move_kv].total_s);
        sr.add(x.x, x.costs[MigrationStrategy::recompute].total_s);
    }
    const std::string over_distance = "Move KV + recompute vs checkpoint distance (estimate)";
    Series da = series(MigrationStrategy::move_all, over_distance, "checkpoint distance (tokens)"),
           dk = series(MigrationStrategy::move_kv, over_distance, "checkpoint distance (tokens)");
    for (const ScaleCosts::Point& x : s.over_distance) {
        da.add(x.x, x.costs[MigrationStrategy::move_all].total_s);
        dk.add(x.x, x.costs[MigrationStrategy::move_kv].total_s);
    }
    r.series.insert(r.series.end(), {sa, sk, sr, da, dk});
    r.notes.push_back(
        "Times at scale are roofline estimates (core/model/roofline.h, compute efficiency 0.5, memory "
        "0.8 of " +
        s.hardware.name + " peaks: " + s.hardware.source + "); transfers at the nominal line rate of " +
        s.link.name + ". Bytes are exact.");
}

}  // namespace

void report_migrate(const MigrateParams& p, const MigrateResult& m, Report& r) {
    if (m.paused) paused(*m.paused, r);
    for (const StrategyOutcome& o : m.strategies) strategy_checks(p, m, o, r);
    if (m.all_strategies) strategy_tables(p, m, r);
    if (m.fault) fault(*m.fault, p.fault, r);
    if (m.same_instance) same_instance(*m.same_instance, r);
    if (m.scale) {
        scale_table(*m.scale, r);
        scale_figures(p, *m.scale, r);
        scale_plots(*m.scale, r);
    }
    // The run stops at a failure, so its check comes after everything the run did.
    if (m.failure) r.check(m.failure->key, m.failure->name, false, m.failure->error);
}

}  // namespace k3
