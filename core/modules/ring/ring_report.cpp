// Module 8 `ring`: the request's ring over time, its figures, the capacity sweep, checks and notes.
#include "core/base/numfmt.h"
#include "core/kda/layout.h"
#include "core/modules/ring/ring.h"

namespace k3 {

namespace {

using namespace k3::spec;

double committed_tokens(const RingResult& res) { return double(res.committed.size()); }

double flushes_per_100_tokens(const RingSimResult& s) {
    return 100.0 * (s.flushes_full + s.flushes_commit) / double(s.tokens);
}
double replayed_per_token(const RingSimResult& s) {
    return double(s.rebuild_replayed + s.flush_replayed) / double(s.tokens);
}

void ring_view(const RingParams& p, const RingResult& res, Report& r) {
    Ring view{
        "Record ring of the request (L = " + std::to_string(p.ring_capacity) + ")", p.ring_capacity, {}};
    view.frames.push_back(
        {0, 0,
         "checkpoint: the state after the " + std::to_string(res.prompt_len) + "-token prompt; ring empty"});
    for (const RingEvent& e : res.events)
        view.frames.push_back({e.tail, e.count, "step " + std::to_string(e.step + 1) + ": " + e.text});
    r.rings.push_back(view);
}

void step_scalars(const RingResult& res, Report& r) {
    const RingStreamStats& st = res.stats;
    const double tokens = committed_tokens(res);
    const uint64_t replayed = st.rebuild_replayed + st.flush_replayed;
    r.scalar("tokens_per_step", "Tokens committed per verification", "tokens",
             st.steps ? tokens / st.steps : 0, true)
        .help = "Mean tokens kept per step (1 .. N): the pending token plus the accepted drafts.";
    r.scalar("flushes", "Flushes (checkpoint folded forward)", "count", st.flushes_full + st.flushes_commit,
             true)
        .help = std::to_string(st.flushes_full) + " because the next verification would not fit, " +
                std::to_string(st.flushes_commit) + " on commit.";
    r.scalar("replay_per_token", "Records replayed per committed token", "records",
             tokens > 0 ? replayed / tokens : 0, true);
    r.scalar("ring_bytes_per_request", "Ring memory per request (runnable model)", "B",
             double(res.ring_bytes), true)
        .help = "The checkpoint state plus L record slots in every linear layer, as allocated.";
    r.scalar("tokens_committed", "Tokens committed", "tokens", tokens);
    r.scalar("steps", "Verification steps", "count", st.steps);
    r.scalar("flushes_full", "Flushes: ring full", "count", st.flushes_full);
    r.scalar("flushes_commit", "Flushes: commit", "count", st.flushes_commit);
    r.scalar("shortened_steps", "Steps shortened to fit", "count", st.shortened);
    double occupancy = 0;
    for (int o : st.occupancy) occupancy += o;
    r.scalar("mean_occupancy", "Mean kept records after a step", "records",
             st.steps ? occupancy / st.steps : 0);
    r.scalar("peak_occupancy", "Peak occupancy (kept + pending)", "records", st.peak_occupancy);
    r.scalar("replayed_records", "Records replayed (rebuilds + folds)", "records", double(replayed));
    r.scalar("checkpoint_writes", "Checkpoint states written", "count", double(st.checkpoint_writes));
}

void write_scalars(const RingResult& res, Report& r) {
    const RingStreamStats& st = res.stats;
    const double tokens = committed_tokens(res);
    r.scalar("state_writes_per_token", "State writes per committed token, ring", "states",
             tokens > 0 ? double(st.checkpoint_writes) / tokens : 0)
        .help = "The ring writes a full state only when it folds the checkpoint forward.";
    r.scalar("snapshot_writes_per_token", "State writes per committed token, snapshots", "states",
             tokens > 0 ? double(st.verified) / tokens : 0)
        .help = "The snapshot method writes a full state after every verified token.";
    r.scalar("kimi_ring_bytes_per_request", "Kimi-K3: checkpoint + ring per request", "B",
             double(res.kimi.per_sequence(res.kimi.ring_total_per_layer)));
    r.scalar("kimi_snapshot_bytes_per_request", "Kimi-K3: confirmed + N snapshots per request", "B",
             double(res.kimi.per_sequence(res.kimi.snapshots_total_per_layer)));
}

void step_plots(const RingParams& p, const RingResult& res, Report& r) {
    auto over_steps = [](std::string name, std::string plot, std::string y, SeriesStyle style) {
        Series s = make_series(std::move(name), std::move(plot), "step", y, "step", y);
        s.style = style;
        return s;
    };
    const char* occupancy_plot = "Ring occupancy over time";
    Series kept_records =
        over_steps("kept records after the step", occupancy_plot, "records", SeriesStyle::step);
    Series capacity = over_steps("capacity L", occupancy_plot, "records", SeriesStyle::line);
    Series flushes = over_steps("flush", occupancy_plot, "records", SeriesStyle::points);
    Series work = over_steps("records replayed", "Replay work per step", "records", SeriesStyle::bars);
    Series kept = over_steps("tokens kept", "Tokens kept per step", "tokens", SeriesStyle::bars);
    const RingStreamStats& st = res.stats;
    for (int i = 0; i < st.steps; ++i) {
        const double x = i + 1;
        kept_records.add(x, st.occupancy[size_t(i)]);
        capacity.add(x, p.ring_capacity);
        work.add(x, st.replay_work[size_t(i)]);
        kept.add(x, st.kept[size_t(i)]);
    }
    for (const RingEvent& e : res.events)
        if (e.kind == RingEventKind::flush_full || e.kind == RingEventKind::flush_commit)
            flushes.add(e.step + 1, 0);
    for (Series* s : {&kept_records, &capacity, &flushes, &work, &kept}) r.add_series(std::move(*s));
}

void sweep_plots(const RingResult& res, Report& r) {
    auto sweep = [](std::string name, std::string plot, std::string y_label, std::string y_unit) {
        Series s = make_series(std::move(name), std::move(plot), "ring capacity L", std::move(y_label),
                               "records", std::move(y_unit));
        s.log_x = true;
        return s;
    };
    const std::string work_plot = "Capacity sweep (bookkeeping simulation, 4,096 tokens)";
    const std::string memory_plot = "Memory per request against L (Kimi-K3)";
    Series flushes = sweep("flushes per 100 tokens", work_plot, "per 100 tokens", "");
    Series replayed = sweep("records replayed per token", work_plot, "per 100 tokens", "");
    Series ring = sweep("checkpoint + ring (Kimi-K3)", memory_plot, "bytes", "B");
    Series snapshots = sweep("confirmed + N snapshots (Kimi-K3)", memory_plot, "bytes", "B");
    for (const RingSweepPoint& s : res.sweep) {
        const double x = s.capacity;
        flushes.add(x, flushes_per_100_tokens(s.sim));
        replayed.add(x, replayed_per_token(s.sim));
        ring.add(x, double(s.kimi.per_sequence(s.kimi.ring_total_per_layer)));
        snapshots.add(x, double(s.kimi.per_sequence(s.kimi.snapshots_total_per_layer)));
    }
    for (Series* s : {&flushes, &replayed, &ring, &snapshots}) r.add_series(std::move(*s));
}

void tables(const RingResult& res, Report& r) {
    const RingStreamStats& st = res.stats;
    Table& steps = r.add_table(make_table("Steps", {{"step", "step"},
                                                    {"verified", "tokens"},
                                                    {"kept", "tokens"},
                                                    {"kept records after", "records"},
                                                    {"records replayed", "records"}}));
    size_t e = 0;
    const std::vector<RingEvent>& events = res.events;
    for (int i = 0; i < st.steps; ++i) {
        int verified = 0;
        for (; e < events.size() && events[e].step <= i; ++e)
            if (events[e].step == i && events[e].kind == RingEventKind::verify) verified = events[e].tokens;
        steps.add({double(i + 1), double(verified), double(st.kept[size_t(i)]),
                   double(st.occupancy[size_t(i)]), double(st.replay_work[size_t(i)])});
    }
    Table& sweep = r.add_table(
        make_table("Capacity sweep (bookkeeping simulation)", {{"L", "records"},
                                                               {"flushes per 100 tokens", ""},
                                                               {"replayed per token", "records"},
                                                               {"mean occupancy", "records"},
                                                               {"shortened steps", "count"},
                                                               {"Kimi-K3 bytes per request", "B"}}));
    for (const RingSweepPoint& s : res.sweep)
        sweep.add({double(s.capacity), flushes_per_100_tokens(s.sim), replayed_per_token(s.sim),
                   s.sim.mean_occupancy, double(s.sim.shortened),
                   double(s.kimi.per_sequence(s.kimi.ring_total_per_layer))});
}

void bitwise_checks(const RingResult& res, Report& r) {
    const RingStreamStats& st = res.stats;
    r.check("tokens_equal_greedy", "Committed tokens = plain greedy decoding", res.tokens_match,
            std::to_string(res.committed.size()) + " tokens compared with the reference run");
    r.check("rebuilds_bitwise", "Every rebuilt working state = the directly computed state, bitwise",
            st.rebuilds_checked > 0 && st.rebuilds_exact == st.rebuilds_checked,
            std::to_string(st.rebuilds_exact) + " of " + std::to_string(st.rebuilds_checked) + " rebuilds" +
                (st.first_mismatch.empty() ? "" : "; " + st.first_mismatch));
    r.check(
        "ring_positions_bitwise",
        "Replay from any ring position = the directly computed state, bitwise (at every flush)",
        st.positions_checked > 0 && st.positions_exact == st.positions_checked,
        std::to_string(st.positions_exact) + " of " + std::to_string(st.positions_checked) + " positions");
}

// The first committed token whose record the flushes did not fold exactly once, in order (its index),
// or the count when every one was: read from the folded records' own tags.
size_t folded_in_order(const RingResult& res) {
    const size_t n = res.committed.size();
    for (size_t i = 0; i < n; ++i)
        if (i >= res.folded.size() || res.folded[i].position != uint64_t(res.prompt_len) + i ||
            res.folded[i].token != res.committed[i])
            return i;
    return n;
}

void ring_checks(const RingParams& p, const RingResult& res, Report& r) {
    const RingStreamStats& st = res.stats;
    const int L = p.ring_capacity;
    r.check("occupancy_within_capacity",
            "Occupancy never exceeds the capacity: no kept record is overwritten before it is folded",
            res.live_overwrites == 0 && res.peak_live == st.peak_occupancy,
            "recounted from the slots' tags: " + std::to_string(res.live_overwrites) +
                " kept records overwritten, peak " + std::to_string(res.peak_live) + " of " +
                std::to_string(L) + " slots (the cursor says " + std::to_string(st.peak_occupancy) + ")");
    const size_t n = res.committed.size(), in_order = folded_in_order(res);
    r.check("records_folded_once", "Every kept record is folded into the checkpoint exactly once, in order",
            in_order == n && res.folded.size() == n && res.kept_after_end == 0 &&
                res.checkpoint_position == size_t(res.prompt_len) + n,
            format_grouped(double(res.folded.size())) + " records folded for " + std::to_string(n) +
                " committed tokens; by their tags (position, token) the first " + std::to_string(in_order) +
                " are the committed tokens in order");
    r.check("final_checkpoint_bitwise",
            "The final checkpoint = the state after every committed token, bitwise",
            res.final_checkpoint_exact, "position " + std::to_string(size_t(res.prompt_len) + n));
    const SpecStorage& own = res.own;
    r.check("ring_memory_equals_accounting",
            "Ring memory as allocated = the accounting (core/spec/storage.h) for the runnable preset",
            res.ring_bytes == own.per_sequence(own.ring_total_per_layer),
            format_grouped(double(res.ring_bytes)) +
                " B allocated (checkpoint + slot buffers); accounting: state + " + std::to_string(L) + " x " +
                format_grouped(double(own.held_per_token)) + " B x " + std::to_string(own.linear_layers) +
                " layers = " + format_grouped(double(own.per_sequence(own.ring_total_per_layer))) + " B");
}

void notes(const RingParams& p, const RingResult& res, Report& r) {
    r.notes.push_back(
        "The working state is rebuilt from the checkpoint before every verification (copy + replay of "
        "the kept records), as ReplaySSM's verify kernel reads the checkpoint and the ring without "
        "materialising states; a rejection is then only a cursor move. On this CPU the forward writes "
        "its state in place, so the rebuild is a real copy and replay.");
    if (p.drafter != RingDrafter::self) return;
    const RingStreamStats& st = res.stats;
    const uint64_t drafted = st.verified - uint64_t(st.steps);
    const double acceptance =
        st.verified > uint64_t(st.steps) ? (committed_tokens(res) - st.steps) / double(drafted) : 0;
    r.notes.push_back("Self drafter: weights quantised to " + format_number(p.drafter_bits) +
                      " bits; measured acceptance per draft " + format_sig(acceptance, 3) +
                      ". Its weights stay bf16 in the kernels, so drafting costs as much as decoding here.");
}

void timing(const RingResult& res, Report& r) {
    r.timing_scalar("plain_tokens_per_s", "Plain greedy decoding (this device)", "tokens/s",
                    res.plain_ms > 0 ? double(res.reference_tokens) / (res.plain_ms * 1e-3) : 0);
    r.timing_scalar("ring_tokens_per_s", "Speculative decoding through the ring (this device)", "tokens/s",
                    res.stream_ms > 0 ? committed_tokens(res) / (res.stream_ms * 1e-3) : 0);
    r.timing_text("simd_arch", "SIMD", kda::simd_arch());
}

}  // namespace

void report_ring(const RingParams& p, const RingResult& res, Report& r) {
    if (!res.error.empty()) {
        r.check("stream_ran", "The ring stream ran", false, res.error);
        return;
    }
    ring_view(p, res, r);
    step_scalars(res, r);
    write_scalars(res, r);
    step_plots(p, res, r);
    sweep_plots(res, r);
    tables(res, r);
    bitwise_checks(res, r);
    ring_checks(p, res, r);
    notes(p, res, r);
    timing(res, r);
}

}  // namespace k3
