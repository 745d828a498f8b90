// Module 10 `migrate`: pause a live request on the runnable model, serialise it into the versioned,
// checksummed blob (core/lifecycle/blob.h), restore it in a second Model instance and continue; the
// continuation must have the bits of the run that never stopped. Three strategies (move everything,
// move KV and recompute the KDA state from a checkpoint, recompute everything) with their costs at the
// runnable scale and at a published configuration's scale, and fault injection into the blob.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "core/base/clock.h"
#include "core/base/numfmt.h"
#include "core/base/rng.h"
#include "core/experiments/registry.h"
#include "core/lifecycle/migrate.h"
#include "core/model/accounting.h"
#include "core/model/roofline.h"

namespace k3 {

namespace {

using namespace k3::lifecycle;
using model::Model;

constexpr int kChunk = 64;

const std::vector<std::string> kFaults = {"none",        "bit_flip",     "truncate",
                                          "wrong_model", "wrong_layout", "wrong_position"};
const std::vector<std::string> kFaultLabels = {"none",
                                               "flip one bit",
                                               "truncate",
                                               "another model's hash (re-checksummed)",
                                               "[V][K] state order (re-checksummed)",
                                               "position one token off (re-checksummed)"};

std::vector<ParamSpec> migrate_params() {
    return {
        ParamSpec::integer("prompt", "Prompt", "tokens", 1, 2048, 100)
            .log()
            .in_group("Request (runnable model)")
            .describe("Prompt tokens of the live request on the runnable tiny model, prefilled in one call."),
        ParamSpec::integer("before", "Generated before the pause", "tokens", 0, 512, 8)
            .in_group("Request (runnable model)")
            .describe("Tokens decoded before the request is paused (one more is sampled and pending)."),
        ParamSpec::integer("after", "Generated after resuming", "tokens", 1, 512, 8)
            .in_group("Request (runnable model)")
            .describe(
                "Tokens decoded after resuming, compared bit for bit (token and logits) with the run that "
                "was never interrupted."),
        ParamSpec::real("temperature", "Temperature", "", 0, 2, 0)
            .in_group("Request (runnable model)")
            .describe(
                "0 = greedy. Above 0 the sampler draws from the seeded generator, whose state travels in "
                "the blob."),
        ParamSpec::integer("interval", "Checkpoint interval", "tokens", 64, 4096, 64)
            .log()
            .in_group("Request (runnable model)")
            .describe(
                "The destination holds KDA state checkpoints every this many prompt tokens (a prefix cache); "
                "move_kv restarts from the last one. A multiple of the chunk size 64, so the recompute "
                "keeps the original chunk boundaries and stays bit-exact."),
        ParamSpec::seed("Seed of the model weights (both instances) and of the prompt.")
            .in_group("Request (runnable model)"),
        ParamSpec::choice("fault", "Injected fault", kFaults, "none", kFaultLabels)
            .in_group("Fault injection")
            .describe("Damage done to the move-everything blob before the second instance reads it. Forged "
                      "faults are re-checksummed, so only the check that targets them can catch them."),
        ParamSpec::integer("fault_offset", "Fault byte offset", "B", 0, 2147483647, 1000)
            .in_group("Fault injection")
            .describe("Bit flip: the byte to change; truncate: bytes kept. Clamped to the blob's size - 1."),
        ParamSpec::integer("fault_bit", "Bit to flip", "", 0, 7, 0)
            .in_group("Fault injection")
            .active_when("fault", "bit_flip")
            .describe("Which bit (0 = least significant) of the byte at the fault offset is flipped."),
        ParamSpec::choice("preset", "Model at scale", {"kimi-linear-48b", "qwen3-next-80b"},
                          "kimi-linear-48b", {"Kimi-Linear-48B-A3B", "Qwen3-Next-80B-A3B"})
            .in_group("At scale")
            .describe("Published configuration for the strategy costs at real scale (exact bytes, roofline "
                      "times)."),
        ParamSpec::integer("context", "Context at scale", "tokens", 1, 16777216, 131072)
            .log()
            .in_group("At scale")
            .describe("Tokens the migrated request holds."),
        ParamSpec::integer("distance", "Checkpoint distance at scale", "tokens", 1, 16777216, 2048)
            .log()
            .in_group("At scale")
            .describe(
                "Tokens between the destination's nearest KDA state checkpoint and the request's position "
                "(move_kv recomputes them)."),
        ParamSpec::choice("link", "Link", link_preset_ids(), "ib-ndr", link_preset_names())
            .in_group("At scale")
            .describe("Interconnect between the instances (nominal line rate, no latency). Also used for the "
                      "transfer time at the runnable scale."),
        ParamSpec::choice("hardware", "Hardware", hardware_preset_ids(), "h100", hardware_preset_names())
            .in_group("At scale")
            .describe("Destination GPU for the roofline estimate of recompute time."),
        ParamSpec::choice("regime", "Recompute regime", {"alone", "in_batch"}, "alone",
                          {"alone (streams all weights)", "inside running batches (FLOPs only)"})
            .in_group("At scale")
            .describe(
                "Alone: the recompute is its own prefill and streams the weights once (a floor of tens of "
                "ms for a 48B MoE). In batch: it joins batches the destination runs anyway."),
    };
}

std::vector<ParamIssue> validate_migrate(const Params& p) {
    std::vector<ParamIssue> out;
    if (p.i("interval") % kChunk != 0)
        out.push_back({ParamIssue::error, "interval",
                       "interval (" + p.text("interval") + ") must be a multiple of the chunk size " +
                           std::to_string(kChunk) +
                           " (recomputing from a checkpoint off the chunk grid is not "
                           "bit-exact)"});
    return out;
}

// Two instances of the tiny model with the same config and seed, kept between runs: generating the
// seeded weights is most of a short run (in WebAssembly especially). Not thread-safe, like the model.
struct Instances {
    std::unique_ptr<Model> a, b;
};
Instances* instances(uint64_t seed, std::string* error) {
    static std::map<uint64_t, Instances> cache;
    if (auto it = cache.find(seed); it != cache.end()) return &it->second;
    cache.clear();  // keep one seed's pair only
    model::ModelOptions o;
    o.chunk = kChunk;
    Instances in;
    for (auto* m : {&in.a, &in.b}) {
        model::ModelResult r = Model::create(*model_preset("tiny"), seed, o);
        if (!r.model) {
            *error = r.error;
            return nullptr;
        }
        *m = std::move(r.model);
    }
    return &(cache[seed] = std::move(in));
}

struct Trace {
    std::vector<int32_t> tokens;
    std::vector<std::vector<float>> logits;
};

std::string continue_for(Model& m, Request& r, int n, Trace* t) {
    for (int i = 0; i < n; ++i) {
        std::vector<float> lg;
        if (std::string e = step_request(m, r, &lg); !e.empty()) return e;
        t->logits.push_back(std::move(lg));
    }
    t->tokens = r.tokens;
    return {};
}

bool same(const Trace& a, const Trace& b) {
    if (a.tokens != b.tokens || a.logits.size() != b.logits.size()) return false;
    for (size_t i = 0; i < a.logits.size(); ++i)
        if (a.logits[i].size() != b.logits[i].size() ||
            std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * 4) != 0)
            return false;
    return true;
}

void put_le(std::vector<std::byte>& b, size_t off, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) b[off + size_t(i)] = std::byte(v >> (8 * i));
}
uint64_t get_le(const std::vector<std::byte>& b, size_t off, int bytes) {
    uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v |= uint64_t(b[off + size_t(i)]) << (8 * i);
    return v;
}

class MigrateRun : public StagedRun {
  public:
    explicit MigrateRun(const Params& p) : StagedRun("migrate", p), p_(p) {
        add_step("two model instances", 3, [this] { setup(); });
        add_step("uninterrupted run", 2, [this] {
            if (ok_) reference();
        });
        add_step("live request, pause", 2, [this] {
            if (ok_) source();
        });
        add_stage("resume in the second instance", 4,
                  [this](const Deadline& dl) { return ok_ ? strategies(dl) : 1.0; });
        add_step("fault injection", 1, [this] {
            if (ok_) faults();
        });
        add_step("pause and resume in one instance", 1, [this] {
            if (ok_) same_instance();
        });
        add_step("costs at scale", 0.5, [this] {
            if (ok_) at_scale();
        });
    }

  private:
    void setup();
    void reference();
    void source();
    double strategies(const Deadline& dl);
    void faults();
    void same_instance();
    void at_scale();
    void fail(const std::string& what, const std::string& e) {
        report_.check(what, false, e);
        ok_ = false;
    }

    Params p_;
    bool ok_ = true;
    Model *a_ = nullptr, *b_ = nullptr;
    std::unique_ptr<PagePool> pa_, pb_;
    std::vector<int32_t> prompt_;
    model::Sampler sampler_;
    Trace want_;
    Request src_;
    std::vector<StateCheckpoint> cps_;
    std::vector<std::byte> full_blob_;
    size_t next_ = 0;
    OwnerId owner_b_ = 10;
    double prefill_ms_ = 0;
    Table run_table_;
    Table time_table_;
};

void MigrateRun::setup() {
    std::string err;
    Instances* in = instances(uint64_t(p_.integer("seed")), &err);
    if (!in) return fail("Two instances of the runnable model", err);
    a_ = in->a.get();
    b_ = in->b.get();
    const uint64_t tokens = uint64_t(p_.i("prompt") + p_.i("before") + p_.i("after") + 2);
    PoolResult pa = model::make_model_pool(*a_, 3, tokens), pb = model::make_model_pool(*b_, 4, tokens);
    if (!pa.pool || !pb.pool) return fail("Page pools for the two instances", pa.error + pb.error);
    pa_ = std::move(pa.pool);
    pb_ = std::move(pb.pool);
    Rng rng(uint64_t(p_.integer("seed")) * 104729 + 3);
    prompt_.resize(size_t(p_.i("prompt")));
    for (auto& t : prompt_) t = int32_t(rng.below(uint64_t(a_->vocab())));
    sampler_.temperature = float(p_.num("temperature"));
    sampler_.rng = Rng(uint64_t(p_.integer("seed")) + 99);
}

void MigrateRun::reference() {
    Request r;
    if (std::string e = start_request(*a_, *pa_, 1, prompt_, sampler_, &r); !e.empty())
        return fail("Uninterrupted run", e);
    for (int i = 0; i < p_.i("before"); ++i)
        if (std::string e = step_request(*a_, r); !e.empty()) return fail("Uninterrupted run", e);
    if (std::string e = continue_for(*a_, r, p_.i("after"), &want_); !e.empty())
        return fail("Uninterrupted run", e);
}

void MigrateRun::source() {
    // The live request, prefilled in pieces at the checkpoint positions (the bits of one call), so the
    // checkpoints a prefix cache would hold exist; then `before` decode steps, then the pause.
    std::vector<uint64_t> cuts;
    const uint64_t iv = uint64_t(p_.i("interval"));
    for (uint64_t c = iv; c < prompt_.size(); c += iv) cuts.push_back(c);
    const Stopwatch sw;
    if (std::string e = start_request(*a_, *pa_, 2, prompt_, sampler_, &src_, nullptr, cuts, &cps_);
        !e.empty())
        return fail("Live request", e);
    prefill_ms_ = sw.ms();
    for (int i = 0; i < p_.i("before"); ++i)
        if (std::string e = step_request(*a_, src_); !e.empty()) return fail("Live request", e);
    const Stopwatch sp;
    if (std::string e = write_blob(capture(*a_, src_, MigrationStrategy::move_all), &full_blob_); !e.empty())
        return fail("Pause: write the blob", e);
    report_.timing_scalar("pause_ms", "Pause: capture and write the blob (this device)", "ms", sp.ms());
    // The blob's own checksum: equal across runs and builds exactly when the blob's bytes are.
    report_
        .scalar("blob_crc32c", "CRC-32C of the blob", "",
                double(get_le(full_blob_, full_blob_.size() - 4, 4)))
        .help =
        "The trailer of the move-everything blob; the same natively and in WebAssembly because every byte "
        "of the state, the KV and the sampler is.";
    report_.timing_scalar("prefill_tokens_per_s", "Prefill speed of the tiny model (this device)", "tokens/s",
                          prefill_ms_ > 0 ? 1e3 * double(prompt_.size()) / prefill_ms_ : 0);
}

double MigrateRun::strategies(const Deadline& dl) {
    Report& r = report_;
    const Link link = *link_preset(p_.str("link"));
    if (next_ == 0) {
        run_table_ = {
            "Strategies on the runnable model (exact bytes; transfer time at line rate)",
            {"strategy", "blob", "KDA state", "KV", "KV tokens", "recomputed tokens", "recompute work",
             "transfer on " + link.id, "resumed from", "continuation bitwise equal"},
            {},
            {"", "B", "B", "B", "tokens", "tokens", "FLOP", "s", "", ""}};
        time_table_ = {"Strategies on this device (measured)",
                       {"strategy", "read + resume", "of which recompute tokens", "continue"},
                       {},
                       {"", "ms", "tokens", "ms"}};
    }
    while (next_ < kMigrationStrategies.size()) {
        const MigrationStrategy s = kMigrationStrategies[next_++];
        const uint64_t P = src_.consumed();
        const StateCheckpoint* ck = s == MigrationStrategy::move_kv && !cps_.empty() ? &cps_.back() : nullptr;
        const uint64_t c = ck ? ck->position : 0;
        const std::string name = strategy_id(s);
        std::vector<std::byte> blob;
        if (std::string e = write_blob(capture(*a_, src_, s, c), &blob); !e.empty()) {
            fail("Write the " + name + " blob", e);
            return 1.0;
        }
        // The cost model counts the very bytes written.
        ModelConfig cfg = a_->config();
        cfg.total_params = cfg.active_params = double(a_->weights().parameters());
        const MigrationCosts mc =
            migration_costs_measured(cfg, {double(P), double(P - c)}, link.bytes_per_s, 1.0);
        const StrategyCost& sc = mc[s];
        const Stopwatch sw;
        RequestState in;
        BlobStatus st = read_blob(blob, expect_for(*b_, P), &in);
        Request dst;
        ResumeInfo info;
        if (st.ok()) st = resume(*b_, *pb_, owner_b_++, in, ck, &dst, &info);
        const double resume_ms = sw.ms();
        if (!st.ok()) {
            fail("Resume with " + name, std::string(blob_error_id(st.code)) + ": " + st.message);
            return 1.0;
        }
        const bool state_same = b_->save(*dst.seq).state == a_->save(*src_.seq).state &&
                                b_->save(*dst.seq).kv == a_->save(*src_.seq).kv;
        Trace got;
        const Stopwatch sc2;
        if (std::string e = continue_for(*b_, dst, p_.i("after"), &got); !e.empty()) {
            fail("Continue after " + name, e);
            return 1.0;
        }
        const double cont_ms = sc2.ms();
        const bool equal = same(got, want_);
        const std::string from = s == MigrationStrategy::move_all    ? "the blob"
                                 : s == MigrationStrategy::recompute ? "token ids only"
                                 : ck ? "checkpoint at " + std::to_string(c) + " tokens + KV"
                                      : "token ids (no checkpoint inside the prompt)";
        run_table_.rows.push_back({std::string(strategy_title(s)), double(blob.size()), sc.state_bytes,
                                   sc.kv_bytes, sc.kv_tokens, double(info.recomputed_tokens),
                                   sc.recompute_flops, sc.transfer_s, from,
                                   std::string(equal ? "yes" : "NO")});
        time_table_.rows.push_back(
            {std::string(strategy_title(s)), resume_ms, double(info.recomputed_tokens), cont_ms});
        r.check("Migrated with " + name + ": the continuation is bitwise the uninterrupted run",
                equal && state_same,
                std::to_string(p_.i("after")) +
                    " tokens and their logits compared bit for bit after resuming at " + std::to_string(P) +
                    " tokens (" + std::to_string(info.recomputed_tokens) +
                    " recomputed); restored state and KV " + (state_same ? "byte-identical" : "DIFFER") +
                    (info.exact_path ? "" : "; recompute path off the chunk grid"));
        r.check(
            "The " + name + " blob has the size the cost model counts", double(blob.size()) == sc.bytes,
            format_grouped(double(blob.size())) + " B written, " + format_grouped(sc.bytes) + " B counted");
        if (s == MigrationStrategy::move_all) {
            r.scalar("blob_bytes", "Blob, move everything (runnable)", "B", double(blob.size()), true).help =
                "Header, the KDA state (S and conv windows of " + std::to_string(a_->config().n_linear()) +
                " layers), the MLA latent KV of " + std::to_string(P) +
                " tokens, token ids, sampler, CRC-32C.";
            r.scalar("blob_state_bytes", "of which KDA state", "B", sc.state_bytes);
            r.scalar("blob_kv_bytes", "of which KV", "B", sc.kv_bytes);
            r.scalar("paused_at", "Paused after", "tokens", double(P));
        }
        if (dl.passed()) break;
    }
    if (next_ < kMigrationStrategies.size()) return double(next_) / double(kMigrationStrategies.size());
    r.tables.push_back(run_table_);
    r.timing.tables.push_back(time_table_);
    // The continuation itself, for the eye.
    Table ct{"Continuation (uninterrupted run)", {"step", "token", "max |logit|"}, {}, {"", "", ""}};
    const size_t first = want_.tokens.size() - want_.logits.size();
    for (size_t i = 0; i < want_.logits.size() && i < 16; ++i) {
        float mx = 0;
        for (float v : want_.logits[i]) mx = std::max(mx, std::fabs(v));
        ct.rows.push_back({double(i), double(want_.tokens[first + i]), double(mx)});
    }
    r.tables.push_back(ct);
    return 1.0;
}

void MigrateRun::faults() {
    Report& r = report_;
    const std::string f = p_.str("fault");
    std::vector<std::byte> b = full_blob_;
    const size_t n = b.size();
    const size_t off = size_t(std::min<int64_t>(p_.integer("fault_offset"), int64_t(n) - 1));
    std::string what;
    std::vector<BlobError> expect;
    if (f == "none") {
        what = "no fault";
        expect = {BlobError::ok};
    } else if (f == "bit_flip") {
        const int bit = p_.i("fault_bit");
        b[off] ^= std::byte(1u << bit);
        what = "bit " + std::to_string(bit) + " of byte " + std::to_string(off) + " flipped";
        if (off < 8)
            expect = {BlobError::bad_magic};
        else if (off >= kOffTotal && off < kOffTotal + 8)
            expect = {BlobError::truncated, BlobError::trailing_bytes};
        else
            expect = {BlobError::checksum_mismatch};
    } else if (f == "truncate") {
        b.resize(off);
        what = "truncated to " + std::to_string(off) + " of " + std::to_string(n) + " bytes";
        expect = {BlobError::truncated};
    } else if (f == "wrong_model") {
        put_le(b, kOffModelHash, get_le(b, kOffModelHash, 8) ^ 0x9e3779b97f4a7c15ull, 8);
        reseal_blob(b);
        what = "model hash replaced, checksum recomputed";
        expect = {BlobError::model_mismatch};
    } else if (f == "wrong_layout") {
        b[kOffLayout] = std::byte{uint8_t(StateOrder::vk)};
        reseal_blob(b);
        what = "state order [V][K] declared, checksum recomputed";
        expect = {BlobError::layout_mismatch};
    } else {
        put_le(b, kOffPosition, get_le(b, kOffPosition, 8) + 1, 8);
        put_le(b, kOffConsumed, get_le(b, kOffConsumed, 8) + 1, 8);
        reseal_blob(b);
        what = "position and consumed one token further, checksum recomputed";
        expect = {BlobError::position_mismatch};
    }
    RequestState in;
    BlobStatus st = read_blob(b, expect_for(*b_, src_.consumed()), &in);
    bool resumed_ok = false;
    if (st.ok()) {
        Request dst;
        st = resume(*b_, *pb_, owner_b_++, in, nullptr, &dst);
        Trace got;
        resumed_ok = st.ok() && continue_for(*b_, dst, p_.i("after"), &got).empty() && same(got, want_);
    }
    const bool as_expected = std::find(expect.begin(), expect.end(), st.code) != expect.end();
    Table t{"Fault injection",
            {"fault", "blob bytes", "reader's error", "message", "byte offset"},
            {},
            {"", "B", "", "", ""}};
    t.rows.push_back({what, double(b.size()), std::string(blob_error_id(st.code)),
                      st.ok() ? std::string("accepted") : st.message, double(st.offset)});
    r.tables.push_back(t);
    if (f == "none")
        r.check("The intact blob is accepted and resumes bitwise", st.ok() && resumed_ok,
                st.ok() ? "read, checked, resumed and continued"
                        : std::string(blob_error_id(st.code)) + ": " + st.message);
    else
        r.check("Injected fault detected: " + std::string(blob_error_id(st.code)), !st.ok() && as_expected,
                what + " -> " + (st.ok() ? std::string("ACCEPTED (not detected)") : st.message));
    r.scalar("fault_detected", "Fault detected", "flag", st.ok() ? 0 : 1);
    r.notes.push_back(st.ok() ? "Fault injection: " + what + "; the blob was accepted."
                              : "Fault injection: " + what + "; the reader says " + blob_error_id(st.code) +
                                    ": " + st.message);
}

void MigrateRun::same_instance() {
    // Pause, free the sequence (its slot and pages go back to the pool), resume in the same instance.
    const uint64_t at = src_.consumed();
    std::vector<std::byte> blob = full_blob_;
    src_ = Request{};
    const bool freed = pa_->kv_tokens(2) == 0;
    RequestState in;
    BlobStatus st = read_blob(blob, expect_for(*a_, at), &in);
    Request back;
    if (st.ok()) st = resume(*a_, *pa_, 3, in, nullptr, &back);
    Trace got;
    const bool equal = st.ok() && continue_for(*a_, back, p_.i("after"), &got).empty() && same(got, want_);
    report_.check(
        "Paused, freed and resumed in the same instance: bitwise the uninterrupted run", equal && freed,
        st.ok() ? "the paused sequence released its pages; the resumed one continues with the same bits"
                : std::string(blob_error_id(st.code)) + ": " + st.message);
}

void MigrateRun::at_scale() {
    Report& r = report_;
    const ModelConfig pc = *model_preset(p_.str("preset"));
    const Link link = *link_preset(p_.str("link"));
    const Hardware hw = *hardware_preset(p_.str("hardware"));
    const RecomputeRegime rg =
        p_.str("regime") == "in_batch" ? RecomputeRegime::in_batch : RecomputeRegime::alone;
    const double ctx = p_.num("context"), dist = std::min(p_.num("distance"), ctx);
    const MigrationCosts alone = migration_costs(pc, {ctx, dist}, link, hw, {}, RecomputeRegime::alone);
    const MigrationCosts batch = migration_costs(pc, {ctx, dist}, link, hw, {}, RecomputeRegime::in_batch);
    const MigrationCosts& m = rg == RecomputeRegime::alone ? alone : batch;
    Table t{"Strategies at " + pc.name + " scale, " + format_grouped(ctx) + " tokens, checkpoint " +
                format_grouped(dist) + " tokens back (bytes exact; times are roofline ESTIMATES on " + hw.id +
                ", line rate on " + link.id + ")",
            {"strategy", "bytes moved", "KDA state", "KV", "recomputed tokens", "recompute work", "transfer",
             "recompute (alone)", "total (alone)", "recompute (in batch)", "total (in batch)"},
            {},
            {"", "B", "B", "B", "tokens", "FLOP", "s", "s", "s", "s", "s"}};
    for (MigrationStrategy s : kMigrationStrategies) {
        const StrategyCost &x = alone[s], &y = batch[s];
        t.rows.push_back({std::string(strategy_title(s)), x.bytes, x.state_bytes, x.kv_bytes,
                          x.recompute_tokens, x.recompute_flops, x.transfer_s, x.recompute_s, x.total_s,
                          y.recompute_s, y.total_s});
    }
    r.tables.push_back(t);
    const MemoryAccount acc = account_memory(pc);
    r.scalar("scale_move_all_bytes", "Bytes to move everything at scale", "B",
             m[MigrationStrategy::move_all].bytes, true)
        .help = pc.name + " at " + format_grouped(ctx) + " tokens: KDA state " +
                format_bytes(double(acc.state_bytes)) + " + KV " +
                format_bytes(double(acc.kv_bytes_per_token) * ctx) + " + ids, sampler, header.";
    r.scalar("scale_move_all_s", "Move everything (estimate)", "s", m[MigrationStrategy::move_all].total_s,
             true);
    r.scalar("scale_move_kv_s", "Move KV, recompute from checkpoint (estimate)", "s",
             m[MigrationStrategy::move_kv].total_s, true);
    r.scalar("scale_recompute_s", "Recompute everything (estimate)", "s",
             m[MigrationStrategy::recompute].total_s, true)
        .help = "Roofline estimate of prefilling the whole context on the destination (" + hw.name + ", " +
                p_.str("regime") + ").";
    const double be = move_kv_break_even_distance(pc, ctx, link, hw, {}, rg);
    r.scalar("break_even_distance", "move_kv beats move_all up to a checkpoint distance of", "tokens", be)
        .help =
        "Below this many tokens between checkpoint and position, not sending the KDA state saves more "
        "transfer time "
        "than the recompute costs (estimate).";
    r.notes.push_back("At scale the fastest strategy is " + std::string(strategy_title(m.fastest())) + " (" +
                      p_.str("regime") + " regime, estimate).");
    r.check("At scale the blob carries exactly the accounted state and KV",
            m[MigrationStrategy::move_all].state_bytes == double(acc.state_bytes) &&
                m[MigrationStrategy::move_all].kv_bytes == double(acc.kv_bytes_per_token) * std::floor(ctx),
            format_grouped(double(acc.state_bytes)) + " B of state + " +
                format_grouped(double(acc.kv_bytes_per_token)) + " B x " + format_grouped(ctx) +
                " tokens of KV (core/model/accounting.h)");
    // Time against context, and move_kv against the checkpoint distance.
    Series sa{strategy_title(MigrationStrategy::move_all), "context (tokens)", "seconds (estimate)", {}, {},
              "Migration time vs context (estimate)"};
    sa.log_x = sa.log_y = true;
    sa.x_unit = "tokens";
    sa.y_unit = "s";
    Series sk = sa, sr = sa;
    sk.name = strategy_title(MigrationStrategy::move_kv);
    sr.name = strategy_title(MigrationStrategy::recompute);
    for (double c = 1024; c <= 1048576 * 1.0001; c *= 2) {
        const MigrationCosts x = migration_costs(pc, {c, std::min(dist, c)}, link, hw, {}, rg);
        sa.x.push_back(c), sa.y.push_back(x[MigrationStrategy::move_all].total_s);
        sk.x.push_back(c), sk.y.push_back(x[MigrationStrategy::move_kv].total_s);
        sr.x.push_back(c), sr.y.push_back(x[MigrationStrategy::recompute].total_s);
    }
    Series da{strategy_title(MigrationStrategy::move_all),
              "checkpoint distance (tokens)",
              "seconds (estimate)",
              {},
              {},
              "Move KV + recompute vs checkpoint distance (estimate)"};
    da.log_x = da.log_y = true;
    da.x_unit = "tokens";
    da.y_unit = "s";
    Series dk = da;
    dk.name = strategy_title(MigrationStrategy::move_kv);
    for (double d = 1; d <= ctx * 1.0001; d *= 2) {
        const MigrationCosts x = migration_costs(pc, {ctx, d}, link, hw, {}, rg);
        da.x.push_back(d), da.y.push_back(x[MigrationStrategy::move_all].total_s);
        dk.x.push_back(d), dk.y.push_back(x[MigrationStrategy::move_kv].total_s);
    }
    r.series.insert(r.series.end(), {sa, sk, sr, da, dk});
    r.notes.push_back(
        "Times at scale are roofline estimates (core/model/roofline.h, compute efficiency 0.5, memory "
        "0.8 of " +
        hw.name + " peaks: " + hw.source + "); transfers at the nominal line rate of " + link.name +
        ". Bytes are exact.");
}

}  // namespace

Experiment make_migrate_experiment() {
    Experiment e;
    e.number = 10;
    e.id = "migrate";
    e.title = "Split, pause, resume, migrate";
    e.component = "request lifecycle";
    e.purpose =
        "Move a live request between two model instances and get exactly the tokens it would have produced; "
        "what each way of moving it costs.";
    e.how_it_works =
        "A paused request of a hybrid model needs, to continue exactly: for every KDA layer its recurrent "
        "state S "
        "and the last W-1 RAW q/k/v projection rows of the short conv (not post-conv, not post-SiLU); for "
        "every MLA "
        "layer the latent KV rows of all its tokens; its token ids; and the sampler's state. Nothing else: "
        "q, the "
        "gates and beta are recomputed from the input, and NoPE MLA has no positions to restore.\n\n"
        "The blob holds exactly that, in a versioned format: a magic, the format version, the model hash "
        "(config + "
        "seed, i.e. the weights), the layout (state order [K][V], dtypes, heads, K, V, conv width, KV row, "
        "chunk "
        "size), the position, per-layer sections, the sampler, and a CRC-32C over all of it. The reader "
        "checks "
        "length, magic, checksum, version, every section's kind, layer and size, then the model hash, layout "
        "and "
        "position against the resuming model, and names the first problem.\n\n"
        "Here the request runs on instance A; it is paused, serialised, read by instance B (another Model "
        "object "
        "with the same config and seed, another page pool), resumed and continued. Its tokens and logits are "
        "compared bit for bit with a run that never stopped.\n\n"
        "- move everything: state + KV + ids. No compute.\n"
        "- move KV, recompute from a checkpoint: the destination holds a KDA checkpoint (a prefix cache "
        "entry); "
        "only the KV up to it and the ids cross the link, and the tokens after it are run again, which "
        "rebuilds "
        "their KV and the state. Bit-exact when the restart is on the chunk grid.\n"
        "- recompute everything: only ids move; the destination prefills the whole context (vLLM's "
        "preemption).\n\n"
        "Sources: reference/kda.md §5 (what a resume needs) and §8; reference/serving.md §4 and §8 (SGLang "
        "#22493, #35957, #10912, #16056, #32262; vLLM #54993, #46807, #44243, NIXL #36687).";
    e.where_it_does_not_pay =
        "Moving the KDA state is cheap next to the KV it travels with at long context (Kimi Linear: 41 MiB "
        "of state "
        "against 1 GiB of MLA cache at 128k tokens), so recomputing the state to save sending it rarely "
        "pays: it "
        "only wins when the checkpoint is a handful of tokens back (alone, the recompute streams the weights "
        "once, "
        "tens of ms on an H100, while 41 MiB cross InfiniBand in under a millisecond).\n\n"
        "- Recomputing everything is seconds at 128k tokens against tens of milliseconds of transfer: only "
        "short "
        "requests or a missing link make it the better choice.\n"
        "- At short context the fixed state dominates the blob: below the break-even length (about 5,400 "
        "tokens "
        "for Kimi Linear) a migration moves more state than KV.\n"
        "- Exactness is fragile: a recompute off the chunk grid, a different chunk size, state order [V][K] "
        "vs "
        "[K][V], or a state at N-1 vs N tokens silently change results; engines have shipped each of these "
        "(SGLang #32262 sliced the conv state on the wrong axis; retraction without the state gave corrupted "
        "output, #22493). The blob records all of them and refuses mismatches.\n\n"
        "Sources: reference/serving.md §4, §7, §8; reference/kda.md §3.4, §5.";
    e.params = migrate_params();
    e.validate = validate_migrate;
    e.headlines = {
        {"Bytes to migrate a Kimi-Linear request of 128k tokens (state + KV)",
         {{"prompt", "16"}, {"before", "1"}, {"after", "1"}},
         "scale_move_all_bytes"},
        {"Recomputing that request instead: seconds on an H100 (roofline estimate)",
         {{"prompt", "16"}, {"before", "1"}, {"after", "1"}},
         "scale_recompute_s"},
    };
    e.start = [](const Params& p) { return std::make_unique<MigrateRun>(p); };
    return e;
}

K3_REGISTER_EXPERIMENT(make_migrate_experiment);

}  // namespace k3
