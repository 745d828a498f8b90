// Module 8 `ring`: one request decoded speculatively on the runnable model through a per-request ring
// of records (core/spec/ring.h, ring_stream.h; ReplaySSM in reference/serving.md §3): a checkpoint state
// and L record slots, folded forward when a verification would not fit or on commit. Every working
// state the ring rebuilds, and every ring position at every flush, is compared bitwise with plain
// greedy decoding; a bookkeeping simulation sweeps the capacity.
#include <algorithm>
#include <cmath>
#include <memory>

#include "core/base/clock.h"
#include "core/base/numfmt.h"
#include "core/experiments/registry.h"
#include "core/kda/layout.h"
#include "core/model/sampler.h"
#include "core/spec/decoder.h"
#include "core/spec/models.h"
#include "core/spec/ring_stream.h"
#include "core/spec/storage.h"

namespace k3 {

namespace {

using namespace k3::spec;

constexpr double kMaxBytes = 256.0 * 1024 * 1024;  // refuse runs whose reference states exceed this
constexpr uint64_t kWeightSeed = 1;                // the runnable model's weights (as modules 4-6)

std::vector<std::string> exact_variants(bool labels) {
    std::vector<std::string> v;
    for (const auto& i : record_variants())
        if (i.exact) v.push_back(labels ? std::string(i.row) + " " + i.label : std::string(i.id));
    return v;
}

std::vector<ParamSpec> ring_params() {
    return {
        ParamSpec::choice("model", "Runnable model", {"tiny", "small"}, "tiny", {"tiny", "small"})
            .in_group("Model")
            .describe("The seeded runnable model the request is decoded on."),
        ParamSpec::integer("draft_len", "Tokens per verification N", "tokens", 1, 16, 4)
            .in_group("Speculation")
            .describe("Tokens verified per step: the pending token plus N - 1 drafts. One verification "
                      "writes N records into the ring."),
        ParamSpec::integer("ring_capacity", "Ring capacity L", "records", 1, 64, 16)
            .in_group("Ring")
            .describe("Record slots per request (SGLang's ReplaySSM default: 16). Must be at least N."),
        ParamSpec::choice("overflow", "When a verification does not fit", {"fold", "shorten"}, "fold",
                          {"fold the checkpoint forward first", "shorten the draft to fit"})
            .in_group("Ring")
            .describe("fold: flush (replay the kept records onto the checkpoint) and then verify N tokens. "
                      "shorten: verify only the tokens that fit, and flush when not even one draft fits."),
        ParamSpec::integer("commit_every", "Commit every", "tokens", 0, 1024, 0)
            .in_group("Ring")
            .describe("Tokens between commits, each of which folds the checkpoint forward (a prefix-cache "
                      "checkpoint, a pause). 0: only at the end of the request."),
        ParamSpec::choice("variant", "Record variant", exact_variants(false), "minimal_exact",
                          exact_variants(true))
            .in_group("Ring")
            .describe("What each slot holds (reference/kda.md §6). Only the variants that rebuild the conv "
                      "window are offered: the ring has no other copy of it."),
        ParamSpec::choice("drafter", "Drafter", {"chance", "self"}, "chance",
                          {"set acceptance probability", "the model itself, quantised"})
            .in_group("Drafter")
            .describe("chance: each draft is the target's own greedy pick with a set probability. self: the "
                      "runnable model drafts for itself with its projection weights quantised."),
        ParamSpec::real("accept", "Draft acceptance", "fraction", 0, 1, 0.8)
            .in_group("Drafter")
            .active_when("drafter", "chance")
            .describe("Probability that each draft is right, given the ones before it were."),
        ParamSpec::integer("drafter_bits", "Drafter weight bits", "bits", 2, 8, 4)
            .in_group("Drafter")
            .active_when("drafter", "self")
            .describe("Symmetric per-output-channel quantisation of every projection matrix of the drafter."),
        ParamSpec::integer("new_tokens", "Tokens to generate", "tokens", 8, 256, 48)
            .in_group("Request")
            .describe("Tokens the request decodes after its prompt."),
        ParamSpec::integer("prompt_len", "Prompt length", "tokens", 1, 256, 32)
            .in_group("Request")
            .describe("Random prompt tokens prefilled before speculation starts."),
        ParamSpec::seed("Seed of the prompt and of the chance drafter.").in_group("Request"),
    };
}

uint64_t state_bytes_of(const std::string& model) {
    const ModelConfig c = *model_preset(model);
    return snapshot_bytes_per_layer(c) * uint64_t(c.n_linear());
}

std::vector<ParamIssue> validate_ring(const Params& p) {
    std::vector<ParamIssue> out;
    if (std::string e = RecordRing::check(p.i("ring_capacity"), p.i("draft_len")); !e.empty())
        out.push_back({ParamIssue::error, "ring_capacity", e});
    // The reference run keeps a state per generated token for the bitwise checks.
    const double bytes =
        double(p.i("new_tokens") + p.i("draft_len") + 2) * double(state_bytes_of(p.str("model")));
    if (bytes > kMaxBytes)
        out.push_back({ParamIssue::error, "new_tokens",
                       "the reference states for " + p.text("new_tokens") + " tokens need " +
                           format_bytes(bytes) + ", above the limit of " + format_bytes(kMaxBytes) +
                           "; generate fewer tokens"});
    return out;
}

Series series(std::string name, std::string plot, std::string x_label, std::string y_label,
              std::string x_unit, std::string y_unit, SeriesStyle style = SeriesStyle::line) {
    Series s = make_series(std::move(name), std::move(plot), std::move(x_label), std::move(y_label),
                           std::move(x_unit), std::move(y_unit));
    s.style = style;
    return s;
}

class RingRun : public StagedRun {
  public:
    explicit RingRun(const Params& p) : StagedRun("ring", p), p_(p) {
        add_step("runnable model", 3, [this] { setup(); });
        add_stage("plain greedy decoding (reference)", 3, [this](const Deadline& d) { return reference(d); });
        add_stage("speculative decoding through the ring", 6,
                  [this](const Deadline& d) { return stream(d); });
        add_step("capacity sweep", 0.5, [this] { sweep(); });
        add_step("report", 0.1, [this] { finish(); });
    }

  private:
    void setup();
    double reference(const Deadline& d);
    double stream(const Deadline& d);
    void sweep();
    void finish();
    bool failed() const { return !error_.empty(); }

    Params p_;
    std::string error_;
    std::shared_ptr<model::Model> target_, drafter_model_;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    std::vector<int32_t> prompt_, ref_tokens_;
    std::vector<std::vector<std::byte>> ref_states_;
    std::vector<float> logits_;
    double plain_ms_ = 0, stream_ms_ = 0;
    int ref_target_ = 0;
    std::unique_ptr<Drafter> drafter_;
    std::unique_ptr<RingStream> ring_;
    bool started_ = false;
    std::vector<RingSimResult> sweep_;
    std::vector<int> sweep_L_;
};

void RingRun::setup() {
    const std::string model = p_.str("model");
    target_ = cached_model(model, kWeightSeed, 16, &error_);
    if (!target_) return;
    if (p_.str("drafter") == "self") {
        drafter_model_ = cached_model(model, kWeightSeed, p_.i("drafter_bits"), &error_);
        if (!drafter_model_) return;
    }
    const int N = p_.i("draft_len");
    ref_target_ = p_.i("new_tokens") + N + 1;  // the stream may commit up to N - 1 tokens past new_tokens
    PoolResult pr = model::make_model_pool(*target_, 1, uint64_t(p_.i("prompt_len") + ref_target_));
    if (!pr.pool) {
        error_ = pr.error;
        return;
    }
    pool_ = std::move(pr.pool);
    model::SequenceResult s = target_->new_sequence(*pool_, 1);
    if (!s.seq) {
        error_ = s.error;
        return;
    }
    seq_ = std::move(s.seq);
    Rng rng(mix64(uint64_t(p_.integer("seed")) + 0x52494e47));
    for (int i = 0; i < p_.i("prompt_len"); ++i)
        prompt_.push_back(int32_t(rng.below(uint64_t(target_->vocab()))));
}

double RingRun::reference(const Deadline& d) {
    if (failed()) return 1.0;
    model::Model& m = *target_;
    const Stopwatch sw;
    if (ref_tokens_.empty()) {
        if (std::string e = m.prefill(*seq_, prompt_, &logits_); !e.empty()) return error_ = e, 1.0;
        ref_states_.push_back(m.save_state(*seq_));
    }
    // Plain greedy decoding, token by token (spec::greedy_decode's loop, sliced for progress).
    while (int(ref_tokens_.size()) < ref_target_) {
        const int32_t t = model::argmax(logits_.data(), m.vocab());
        ref_tokens_.push_back(t);
        if (int(ref_tokens_.size()) == ref_target_) break;
        if (std::string e = m.decode(*seq_, t, &logits_); !e.empty()) return error_ = e, 1.0;
        ref_states_.push_back(m.save_state(*seq_));
        if (d.passed()) break;
    }
    plain_ms_ += sw.ms();
    return double(ref_tokens_.size()) / double(ref_target_);
}

double RingRun::stream(const Deadline& d) {
    if (failed()) return 1.0;
    const Stopwatch sw;
    if (!started_) {
        started_ = true;
        seq_.reset();
        pool_.reset();
        if (drafter_model_) {
            drafter_ = SelfDrafter::create(*drafter_model_, uint64_t(p_.i("prompt_len") + ref_target_ + 16),
                                           &error_);
            if (!drafter_) return 1.0;
        } else {
            drafter_ = std::make_unique<ChanceDrafter>(ref_tokens_, p_.num("accept"),
                                                       mix64(uint64_t(p_.integer("seed"))), target_->vocab());
        }
        RingStreamOptions o;
        o.draft_len = p_.i("draft_len");
        o.capacity = p_.i("ring_capacity");
        o.overflow = p_.str("overflow") == "shorten" ? Overflow::shorten : Overflow::fold;
        o.commit_every = p_.i("commit_every");
        o.variant = *parse_variant(p_.str("variant"));
        o.new_tokens = p_.i("new_tokens");
        ring_ = std::make_unique<RingStream>(*target_, *drafter_, o);
        if (std::string e = ring_->start(prompt_, &ref_states_); !e.empty()) return error_ = e, 1.0;
    }
    bool done = false;
    while (!done) {
        if (std::string e = ring_->step(&done); !e.empty()) return error_ = e, 1.0;
        if (d.passed()) break;
    }
    stream_ms_ += sw.ms();
    return done ? 1.0 : std::min(0.99, double(ring_->tokens().size()) / double(p_.i("new_tokens")));
}

void RingRun::sweep() {
    if (failed()) return;
    const RingStreamStats& st = ring_->stats();
    // Acceptance per draft seen in the stream (the self drafter's is measured, the chance drafter's set).
    uint64_t drafted = 0, accepted = 0;
    for (size_t i = 0; i < st.kept.size(); ++i) accepted += uint64_t(st.kept[i] - 1);
    drafted = st.verified - uint64_t(st.steps);
    const double p = p_.str("drafter") == "chance" ? p_.num("accept")
                                                   : (drafted ? double(accepted) / double(drafted) : 0.0);
    const int N = p_.i("draft_len");
    for (int L : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
        if (L < N) continue;
        RingSimOptions o;
        o.draft_len = N;
        o.capacity = L;
        o.overflow = p_.str("overflow") == "shorten" ? Overflow::shorten : Overflow::fold;
        o.commit_every = p_.i("commit_every");
        o.tokens = 4096;
        o.accept = p;
        o.seed = mix64(uint64_t(p_.integer("seed")) + 3);
        sweep_.push_back(simulate_ring(o));
        sweep_L_.push_back(L);
    }
}

void RingRun::finish() {
    Report& r = report_;
    if (failed()) {
        r.check("The ring stream ran", false, error_);
        return;
    }
    const model::Model& m = *target_;
    const RingStreamStats& st = ring_->stats();
    const RecordRing& ring = ring_->ring();
    const int N = p_.i("draft_len"), L = p_.i("ring_capacity");
    const RecordVariant v = *parse_variant(p_.str("variant"));
    const auto& committed = ring_->tokens();
    const double tokens = double(committed.size());
    const uint64_t replayed = st.rebuild_replayed + st.flush_replayed;

    // ---- the ring view ----
    Ring view{"Record ring of the request (L = " + std::to_string(L) + ")", L, {}};
    view.frames.push_back(
        {0, 0,
         "checkpoint: the state after the " + std::to_string(prompt_.size()) + "-token prompt; ring empty"});
    for (const auto& e : ring_->events())
        view.frames.push_back({e.tail, e.count, "step " + std::to_string(e.step + 1) + ": " + e.text});
    r.rings.push_back(view);

    // ---- scalars ----
    r.scalar("tokens_per_step", "Tokens committed per verification", "tokens",
             st.steps ? tokens / st.steps : 0, true)
        .help = "Mean tokens kept per step (1 .. N): the pending token plus the accepted drafts.";
    r.scalar("flushes", "Flushes (checkpoint folded forward)", "count", st.flushes_full + st.flushes_commit,
             true)
        .help = std::to_string(st.flushes_full) + " because the next verification would not fit, " +
                std::to_string(st.flushes_commit) + " on commit.";
    r.scalar("replay_per_token", "Records replayed per committed token", "records",
             tokens > 0 ? replayed / tokens : 0, true)
        .help =
        "Rebuilding the working state from the checkpoint before each verification, plus the folds. A "
        "larger ring flushes less but replays more per step.";
    r.scalar("ring_bytes_per_request", "Ring memory per request (runnable model)", "B", double(ring.bytes()),
             true)
        .help = "The checkpoint state plus L record slots in every linear layer, as allocated.";
    r.scalar("tokens_committed", "Tokens committed", "tokens", tokens);
    r.scalar("steps", "Verification steps", "count", st.steps);
    r.scalar("flushes_full", "Flushes: ring full", "count", st.flushes_full);
    r.scalar("flushes_commit", "Flushes: commit", "count", st.flushes_commit);
    r.scalar("shortened_steps", "Steps shortened to fit", "count", st.shortened);
    double occ = 0;
    for (int o : st.occupancy) occ += o;
    r.scalar("mean_occupancy", "Mean kept records after a step", "records", st.steps ? occ / st.steps : 0);
    r.scalar("peak_occupancy", "Peak occupancy (kept + pending)", "records", st.peak_occupancy);
    r.scalar("replayed_records", "Records replayed (rebuilds + folds)", "records", double(replayed));
    r.scalar("checkpoint_writes", "Checkpoint states written", "count", double(st.checkpoint_writes));
    r.scalar("state_writes_per_token", "State writes per committed token, ring", "states",
             tokens > 0 ? double(st.checkpoint_writes) / tokens : 0)
        .help = "The ring writes a full state only when it folds the checkpoint forward.";
    r.scalar("snapshot_writes_per_token", "State writes per committed token, snapshots", "states",
             tokens > 0 ? double(st.verified) / tokens : 0)
        .help = "The snapshot method writes a full state after every verified token.";
    const ModelConfig kimi = *model_preset("kimi-linear-48b");
    const SpecStorage ks = spec_storage(kimi, v, N, 1, L);
    r.scalar("kimi_ring_bytes_per_request", "Kimi-Linear: checkpoint + ring per request", "B",
             double(ks.per_sequence(ks.ring_total_per_layer)));
    r.scalar("kimi_snapshot_bytes_per_request", "Kimi-Linear: confirmed + N snapshots per request", "B",
             double(ks.per_sequence(ks.snapshots_total_per_layer)));

    // ---- series ----
    Series occs = series("kept records after the step", "Ring occupancy over time", "step", "records", "step",
                         "records", SeriesStyle::step);
    Series cap = series("capacity L", "Ring occupancy over time", "step", "records", "step", "records");
    Series work = series("records replayed", "Replay work per step", "step", "records", "step", "records",
                         SeriesStyle::bars);
    Series keptS =
        series("tokens kept", "Tokens kept per step", "step", "tokens", "step", "tokens", SeriesStyle::bars);
    Series fl = series("flush", "Ring occupancy over time", "step", "records", "step", "records",
                       SeriesStyle::points);
    for (int i = 0; i < st.steps; ++i) {
        const double x = i + 1;
        occs.x.push_back(x), occs.y.push_back(st.occupancy[size_t(i)]);
        cap.x.push_back(x), cap.y.push_back(L);
        work.x.push_back(x), work.y.push_back(st.replay_work[size_t(i)]);
        keptS.x.push_back(x), keptS.y.push_back(st.kept[size_t(i)]);
    }
    for (const auto& e : ring_->events())
        if (e.kind == RingEventKind::flush_full || e.kind == RingEventKind::flush_commit)
            fl.x.push_back(e.step + 1), fl.y.push_back(0);
    Series sf = series("flushes per 100 tokens", "Capacity sweep (bookkeeping simulation, 4,096 tokens)",
                       "ring capacity L", "per 100 tokens", "records", "");
    sf.log_x = true;
    Series sr = sf;
    sr.name = "records replayed per token";
    Series sm = series("checkpoint + ring (Kimi-Linear)", "Memory per request against L (Kimi-Linear)",
                       "ring capacity L", "bytes", "records", "B");
    sm.log_x = true;
    Series ss = sm;
    ss.name = "confirmed + N snapshots (Kimi-Linear)";
    for (size_t i = 0; i < sweep_.size(); ++i) {
        const RingSimResult& s = sweep_[i];
        const double x = sweep_L_[i], t = double(s.tokens);
        sf.x.push_back(x), sf.y.push_back(100.0 * (s.flushes_full + s.flushes_commit) / t);
        sr.x.push_back(x), sr.y.push_back(double(s.rebuild_replayed + s.flush_replayed) / t);
        const SpecStorage k = spec_storage(kimi, v, N, 1, sweep_L_[i]);
        sm.x.push_back(x), sm.y.push_back(double(k.per_sequence(k.ring_total_per_layer)));
        ss.x.push_back(x), ss.y.push_back(double(k.per_sequence(k.snapshots_total_per_layer)));
    }
    r.series = {occs, cap, fl, work, keptS, sf, sr, sm, ss};

    // ---- tables ----
    Table steps{"Steps",
                {"step", "verified", "kept", "kept records after", "records replayed"},
                {},
                {"step", "tokens", "tokens", "records", "records"}};
    {
        size_t e = 0;
        const auto& ev = ring_->events();
        for (int i = 0; i < st.steps; ++i) {
            int verified = 0;
            for (; e < ev.size() && ev[e].step <= i; ++e)
                if (ev[e].step == i && ev[e].kind == RingEventKind::verify) verified = ev[e].tokens;
            steps.rows.push_back({double(i + 1), double(verified), double(st.kept[size_t(i)]),
                                  double(st.occupancy[size_t(i)]), double(st.replay_work[size_t(i)])});
        }
    }
    r.tables.push_back(steps);
    Table sw{"Capacity sweep (bookkeeping simulation)",
             {"L", "flushes per 100 tokens", "replayed per token", "mean occupancy", "shortened steps",
              "Kimi-Linear bytes per request"},
             {},
             {"records", "", "records", "records", "count", "B"}};
    for (size_t i = 0; i < sweep_.size(); ++i)
        sw.rows.push_back({double(sweep_L_[i]), sf.y[i], sr.y[i], sweep_[i].mean_occupancy,
                           double(sweep_[i].shortened), sm.y[i]});
    r.tables.push_back(sw);

    // ---- checks ----
    const size_t n = committed.size();
    const bool same_tokens =
        n <= ref_tokens_.size() && std::equal(committed.begin(), committed.end(), ref_tokens_.begin());
    r.check("Committed tokens = plain greedy decoding", same_tokens,
            std::to_string(n) + " tokens compared with the reference run");
    r.check("Every rebuilt working state = the directly computed state, bitwise",
            st.rebuilds_checked > 0 && st.rebuilds_exact == st.rebuilds_checked,
            std::to_string(st.rebuilds_exact) + " of " + std::to_string(st.rebuilds_checked) + " rebuilds" +
                (st.first_mismatch.empty() ? "" : "; " + st.first_mismatch));
    r.check(
        "Replay from any ring position = the directly computed state, bitwise (at every flush)",
        st.positions_checked > 0 && st.positions_exact == st.positions_checked,
        std::to_string(st.positions_exact) + " of " + std::to_string(st.positions_checked) + " positions");
    bool bounded = true;
    for (const auto& e : ring_->events()) bounded &= e.count <= L;
    r.check("Occupancy never exceeds the capacity", bounded && st.peak_occupancy <= L,
            "peak " + std::to_string(st.peak_occupancy) + " of " + std::to_string(L) + " slots");
    r.check(
        "Every kept record is folded into the checkpoint exactly once",
        st.flush_replayed == uint64_t(n) && ring.cursor().count == 0 &&
            ring.checkpoint_position() == prompt_.size() + n,
        format_grouped(double(st.flush_replayed)) + " records folded, " + std::to_string(n) + " committed");
    r.check("The final checkpoint = the state after every committed token, bitwise",
            n < ref_states_.size() && ring.checkpoint() == ref_states_[n],
            "position " + std::to_string(prompt_.size() + n));
    const SpecStorage own = spec_storage(m.config(), v, N, 1, L);
    r.check("Ring memory = the accounting (core/spec/storage.h) for the runnable preset",
            ring.bytes() == own.per_sequence(own.ring_total_per_layer),
            format_grouped(double(ring.bytes())) + " B = state + " + std::to_string(L) + " x " +
                format_grouped(double(own.record_per_token)) + " B x " + std::to_string(own.linear_layers) +
                " layers");

    r.notes.push_back(
        "The working state is rebuilt from the checkpoint before every verification (copy + replay of "
        "the kept records), as ReplaySSM's verify kernel reads the checkpoint and the ring without "
        "materialising states; a rejection is then only a cursor move. On this CPU the forward writes "
        "its state in place, so the rebuild is a real copy and replay.");
    if (p_.str("drafter") == "self")
        r.notes.push_back(
            "Self drafter: weights quantised to " + p_.text("drafter_bits") +
            " bits; measured acceptance per draft " +
            format_sig(st.verified > uint64_t(st.steps)
                           ? (tokens - st.steps) / double(st.verified - uint64_t(st.steps))
                           : 0,
                       3) +
            ". Its weights stay bf16 in the kernels, so drafting costs as much as decoding here.");

    // ---- timing ----
    r.timing_scalar("plain_tokens_per_s", "Plain greedy decoding (this device)", "tokens/s",
                    plain_ms_ > 0 ? double(ref_tokens_.size()) / (plain_ms_ * 1e-3) : 0);
    r.timing_scalar("ring_tokens_per_s", "Speculative decoding through the ring (this device)", "tokens/s",
                    stream_ms_ > 0 ? tokens / (stream_ms_ * 1e-3) : 0);
    r.timing_text("simd_arch", "SIMD", kda::simd_arch());
}

}  // namespace

Experiment make_ring_experiment() {
    Experiment e;
    e.number = 8;
    e.id = "ring";
    e.title = "Ring buffer for speculative decoding";
    e.component = "speculative decoding";
    e.purpose =
        "A per-request ring of per-token records with one checkpoint state, folded forward when it fills "
        "or on commit: rollback by a cursor move, exact replay from any position.";
    e.how_it_works =
        "Each request keeps one checkpoint state (the confirmed state at the ring's tail) and L record "
        "slots. A "
        "verification of N tokens (the pending token and N - 1 drafts) rebuilds the working state from the "
        "checkpoint plus the records kept so far, runs the N tokens, and writes their records at the head. "
        "The "
        "target keeps a prefix; the records of the rejected tokens are simply not kept, which is the whole "
        "rollback: the head moves back.\n\n"
        "- Flush: when the next verification would not fit after the kept records, or on commit, the kept "
        "records "
        "are replayed onto the checkpoint and it takes the result; the tail moves past them. A full state is "
        "written once per flush, not once per verified token.\n"
        "- Overflow: fold first (flush, then verify N tokens), or shorten the draft to the free slots and "
        "flush "
        "only when not even one draft fits.\n"
        "- Capacity: a verification writes N records, so L >= N; a smaller ring is refused.\n\n"
        "The module decodes one request on the runnable model with the ring and compares, bitwise, every "
        "rebuilt "
        "working state and every ring position at every flush with plain greedy decoding, and the committed "
        "tokens "
        "with plain greedy decoding's. A bookkeeping simulation over 4,096 tokens sweeps L.\n\n"
        "Sources: reference/serving.md §3 (ReplaySSM: one frozen checkpoint plus a ring of per-step inputs, "
        "default L = 16, flush every L steps or on commit; SGLang #28451, #28695, RFC #28511; vLLM RFC "
        "#49232, "
        "#47572); reference/kda.md §6 (what a record must hold to replay exactly).";
    e.where_it_does_not_pay =
        "A larger ring flushes less often but every verification replays all kept records to rebuild the "
        "working state: replay work per token grows with L while state writes shrink. On a GPU decode is "
        "bound by "
        "reading and writing the state (reference/serving.md §3: 70-79% of peak bandwidth at batch 64 and "
        "up), so "
        "trading writes for recomputation pays; on this CPU, with the runnable model's state in cache, the "
        "rebuild "
        "is pure overhead next to keeping the live state.\n\n"
        "- Every rejection still costs the replay of the kept records at the next rebuild: with high "
        "acceptance "
        "the ring fills quickly and the work per step approaches L records.\n"
        "- With N = 1 there is nothing to roll back: the ring only defers state writes.\n"
        "- KDA's per-key-channel gate makes each record larger than GDN's per-head gate (SGLang notes the "
        "KDA ring "
        "may be slower).\n"
        "- The self drafter here costs a full forward per draft (its quantised weights run in the same bf16 "
        "kernels), so it measures acceptance, not a speed-up.\n\n"
        "Sources: reference/serving.md §3 and §8; reference/kda.md §6 and §8.";
    e.params = ring_params();
    e.validate = validate_ring;
    e.live = false;
    e.start = [](const Params& p) { return std::make_unique<RingRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_ring_experiment);

}  // namespace k3
