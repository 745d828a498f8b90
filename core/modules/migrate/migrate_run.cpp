// Module 10 `migrate`: the run. A request runs on instance A and is paused; every strategy's blob is
// read, resumed and continued on instance B; then the fault injection, a pause and resume within A, and
// the costs at a published configuration's scale. The last stage builds the report.
#include <algorithm>
#include <map>

#include "core/base/bytes.h"
#include "core/base/clock.h"
#include "core/base/rng.h"
#include "core/modules/migrate/migrate.h"

namespace k3 {

namespace {

using namespace k3::lifecycle;
using model::Model;

// Two instances of the runnable model with the same config and seed, kept between runs: generating the
// seeded weights is most of a short run (in WebAssembly especially). Not thread-safe, like the model.
struct Instances {
    std::unique_ptr<Model> a, b;
};
Instances* instances(uint64_t seed, std::string* error) {
    static std::map<uint64_t, Instances> cache;
    if (auto it = cache.find(seed); it != cache.end()) return &it->second;
    cache.clear();  // keep one seed's pair only
    model::ModelOptions o;
    o.chunk = kMigrateChunk;
    Instances in;
    for (auto* m : {&in.a, &in.b}) {
        model::ModelResult r = Model::create(default_runnable_config(), seed, o);
        if (!r.model) {
            *error = r.error;
            return nullptr;
        }
        *m = std::move(r.model);
    }
    return &(cache[seed] = std::move(in));
}

// Flips bit 22 (a float's highest mantissa bit: up to half its value, still finite) of the first value
// of the blob's first non-empty payload and reseals the blob: the reader accepts it, the state it
// carries is damaged.
void flip_first_payload(std::vector<std::byte>& blob) {
    for (const BlobRecount::Section& s : recount_blob(blob).sections)
        if (s.payload >= 4) {
            blob[size_t(s.offset) + 2] ^= std::byte{0x40};
            break;
        }
    reseal_blob(blob);
}

// The request captured for strategy s, damaged as the falsifier says.
RequestState captured(const Model& m, const Request& r, MigrationStrategy s, uint64_t from,
                      MigrateFalsify f) {
    RequestState st = capture(m, r, s, from);
    if (f == MigrateFalsify::pending_token_lost && s == MigrationStrategy::move_kv &&
        st.tokens.size() > st.consumed)
        st.tokens.pop_back();
    if (f == MigrateFalsify::kv_row_dropped && s == MigrationStrategy::move_all && st.position > 0 &&
        st.layout.attention_layers > 0) {
        // Every attention layer's rows are stored in turn: keep the first position - 1 of each.
        const size_t layers = st.layout.attention_layers, row = st.kv.size() / layers / size_t(st.position);
        std::vector<std::byte> kv;
        for (size_t a = 0; a < layers; ++a) {
            const auto first = st.kv.begin() + ptrdiff_t(a * size_t(st.position) * row);
            kv.insert(kv.end(), first, first + ptrdiff_t((size_t(st.position) - 1) * row));
        }
        st.kv = std::move(kv);
        --st.position;
    }
    return st;
}

// The first section header of the blob declares 4 B more payload than it holds; resealed.
void lie_about_a_section(std::vector<std::byte>& blob) {
    const size_t at = size_t(kBlobHeaderBytes) + 8;
    store_le(blob.data() + at, load_le(blob.data() + at, 8) + 4, 8);
    reseal_blob(blob);
}

class MigrateRun : public StagedRun {
  public:
    MigrateRun(const MigrateParams& p, const Params& raw) : StagedRun("migrate", raw), p_(p) {
        add_step("two model instances", 3, [this] { setup(); });
        add_step("uninterrupted run", 2, [this] {
            if (ok()) reference();
        });
        add_step("live request, pause", 2, [this] {
            if (ok()) source();
        });
        add_stage("resume in the second instance", 4,
                  [this](const Deadline& dl) { return ok() ? strategies(dl) : 1.0; });
        add_step("fault injection", 1, [this] {
            if (ok()) faults();
        });
        add_step("pause and resume in one instance", 1, [this] {
            if (ok()) same_instance();
        });
        add_step("costs at scale", 0.5, [this] {
            if (ok()) at_scale();
            report_migrate(p_, result_, report_);
        });
    }

  private:
    void setup();
    void reference();
    void source();
    double strategies(const Deadline& dl);
    bool strategy(MigrationStrategy s);
    void faults();
    void same_instance();
    void at_scale();
    bool ok() const { return !result_.failure; }
    void fail(std::string key, std::string name, std::string error) {
        result_.failure = MigrateFailure{std::move(key), std::move(name), std::move(error)};
    }

    bool falsified(MigrateFalsify f) const { return p_.falsify == f; }
    BlobAccount account_for(MigrationStrategy s, uint64_t from) const;

    MigrateParams p_;
    MigrateResult result_;
    MemoryAccount account_;  // of the runnable model (core/model/accounting.h)
    Model *a_ = nullptr, *b_ = nullptr;
    std::unique_ptr<PagePool> pool_a_, pool_b_;
    std::vector<int32_t> prompt_;
    model::Sampler sampler_;
    Request source_;
    std::vector<StateCheckpoint> checkpoints_;
    std::vector<std::byte> full_blob_;
    size_t next_strategy_ = 0;
    OwnerId owner_b_ = 10;
};

void MigrateRun::setup() {
    std::string err;
    Instances* in = instances(p_.seed, &err);
    if (!in) return fail("instances_created", "Two instances of the runnable model", err);
    a_ = in->a.get();
    b_ = in->b.get();
    result_.linear_layers = a_->config().n_linear();
    account_ = account_memory(a_->config());
    const uint64_t tokens = uint64_t(p_.prompt + p_.before + p_.after + 2);
    PoolResult pa = model::make_model_pool(*a_, 3, tokens), pb = model::make_model_pool(*b_, 4, tokens);
    if (!pa.pool || !pb.pool)
        return fail("pools_created", "Page pools for the two instances", pa.error + pb.error);
    pool_a_ = std::move(pa.pool);
    pool_b_ = std::move(pb.pool);
    Rng rng(p_.seed * 104729 + 3);
    prompt_.resize(size_t(p_.prompt));
    for (auto& t : prompt_) t = int32_t(rng.below(uint64_t(a_->vocab())));
    sampler_.temperature = float(p_.temperature);
    sampler_.rng = Rng(p_.seed + 99);
}

void MigrateRun::reference() {
    Request r;
    if (std::string e = start_request(*a_, *pool_a_, 1, prompt_, sampler_, &r); !e.empty())
        return fail("uninterrupted_run", "Uninterrupted run", e);
    for (int i = 0; i < p_.before; ++i)
        if (std::string e = step_request(*a_, r); !e.empty())
            return fail("uninterrupted_run", "Uninterrupted run", e);
    if (std::string e = continue_for(*a_, r, p_.after, &result_.uninterrupted); !e.empty())
        return fail("uninterrupted_run", "Uninterrupted run", e);
}

void MigrateRun::source() {
    // The live request, prefilled in pieces at the checkpoint positions (the bits of one call), so the
    // checkpoints a prefix cache would hold exist; then `before` decode steps, then the pause.
    std::vector<uint64_t> cuts;
    for (uint64_t c = uint64_t(p_.interval); c < prompt_.size(); c += uint64_t(p_.interval))
        cuts.push_back(c);
    PausedRequest paused;
    const Stopwatch prefill;
    if (std::string e =
            start_request(*a_, *pool_a_, 2, prompt_, sampler_, &source_, nullptr, cuts, &checkpoints_);
        !e.empty())
        return fail("live_request", "Live request", e);
    paused.prefill_ms = prefill.ms();
    for (int i = 0; i < p_.before; ++i)
        if (std::string e = step_request(*a_, source_); !e.empty())
            return fail("live_request", "Live request", e);
    const Stopwatch pause;
    if (std::string e = write_blob(capture(*a_, source_, MigrationStrategy::move_all), &full_blob_);
        !e.empty())
        return fail("pause_blob_written", "Pause: write the blob", e);
    paused.pause_ms = pause.ms();
    paused.position = source_.consumed();
    paused.blob_crc32c = load_le(full_blob_.data() + full_blob_.size() - 4, 4);
    paused.prompt_tokens = prompt_.size();
    result_.paused = paused;
}

// What strategy s's blob must carry: the accounted state when it moves the state, the accounted KV of
// the rows it moves (all of them, those up to the checkpoint, none), and every token id of the request.
BlobAccount MigrateRun::account_for(MigrationStrategy s, uint64_t from) const {
    BlobAccount b;
    const double fed = double(p_.prompt + p_.before);  // the request fed its prompt, then `before` tokens
    b.state = s == MigrationStrategy::move_all ? double(account_.state_bytes) : 0;
    b.kv_rows = s == MigrationStrategy::move_all ? fed : s == MigrationStrategy::move_kv ? double(from) : 0;
    b.kv = b.kv_rows * double(account_.kv_bytes_per_token);
    b.ids = fed + 1;  // the sampled, not yet fed, token travels too
    return b;
}

// Writes the strategy's blob on A, reads and resumes it on B, continues; false on a failure (the
// outcome is kept as far as it got: the blob's own checks come before the resume).
bool MigrateRun::strategy(MigrationStrategy s) {
    const uint64_t at = source_.consumed();
    const StateCheckpoint* ckpt =
        s == MigrationStrategy::move_kv && !checkpoints_.empty() ? &checkpoints_.back() : nullptr;
    const uint64_t from = ckpt ? ckpt->position : 0;
    const std::string name = strategy_id(s);
    StrategyOutcome out;
    out.strategy = s;
    if (ckpt) out.checkpoint = from;
    std::vector<std::byte> blob;
    if (std::string e = write_blob(captured(*a_, source_, s, from, p_.falsify), &blob); !e.empty()) {
        fail("blob_written_" + name, "Write the " + name + " blob", e);
        return false;
    }
    if (falsified(MigrateFalsify::section_size_lie) && s == MigrationStrategy::recompute)
        lie_about_a_section(blob);
    out.blob_bytes = double(blob.size());
    out.recount = recount_blob(blob);
    out.accounted = account_for(s, from);
    ModelConfig cfg = a_->config();
    cfg.total_params = cfg.active_params = double(a_->weights().parameters());
    if (falsified(MigrateFalsify::cost_model_kv_dtype))
        cfg.kv_dtype = cfg.kv_dtype == DType::fp32 ? DType::bf16 : DType::fp32;
    out.counted = migration_costs_measured(cfg, {double(at), double(at - from)},
                                           link_preset(p_.link)->bytes_per_s, 1.0)[s];
    const Stopwatch resume_time;
    RequestState in;
    BlobStatus st = read_blob(blob, expect_for(*b_, at), &in);
    Request dst;
    if (st.ok()) st = resume(*b_, *pool_b_, owner_b_++, in, ckpt, &dst, &out.resume);
    out.resume_ms = resume_time.ms();
    if (!st.ok()) {
        result_.strategies.push_back(std::move(out));
        fail("resumed_" + name, "Resume with " + name,
             std::string(blob_error_id(st.code)) + ": " + st.message);
        return false;
    }
    out.resumed = true;
    if (falsified(MigrateFalsify::resumed_state_bit)) flip_bit(b_->kda_state(*dst.seq, 0).S[0], 0);
    const model::SequenceSnapshot restored = b_->save(*dst.seq), original = a_->save(*source_.seq);
    out.state_same = bitwise_equal(restored.state, original.state) && bitwise_equal(restored.kv, original.kv);
    Trace got;
    const Stopwatch continue_time;
    if (std::string e = continue_for(*b_, dst, p_.after, &got); !e.empty()) {
        result_.strategies.push_back(std::move(out));
        fail("continued_" + name, "Continue after " + name, e);
        return false;
    }
    out.continue_ms = continue_time.ms();
    out.continuation_same = identical(got, result_.uninterrupted);
    result_.strategies.push_back(std::move(out));
    return true;
}

double MigrateRun::strategies(const Deadline& dl) {
    while (next_strategy_ < kMigrationStrategies.size()) {
        if (!strategy(kMigrationStrategies[next_strategy_++])) return 1.0;
        if (dl.passed()) break;
    }
    if (next_strategy_ < kMigrationStrategies.size())
        return double(next_strategy_) / double(kMigrationStrategies.size());
    result_.all_strategies = true;
    return 1.0;
}

void MigrateRun::faults() {
    std::vector<std::byte> blob = full_blob_;
    const FaultPlan plan = inject_fault(p_, blob);
    if (falsified(MigrateFalsify::fault_resealed)) reseal_blob(blob);
    if (falsified(MigrateFalsify::intact_blob_bit) && p_.fault == BlobFault::none) flip_first_payload(blob);
    BlobFaultOutcome out;
    out.what = plan.what;
    out.blob_bytes = double(blob.size());
    RequestState in;
    out.status = read_blob(blob, expect_for(*b_, source_.consumed()), &in);
    if (out.status.ok()) {
        Request dst;
        out.status = resume(*b_, *pool_b_, owner_b_++, in, nullptr, &dst);
        Trace got;
        out.resumed_ok = out.status.ok() && continue_for(*b_, dst, p_.after, &got).empty() &&
                         identical(got, result_.uninterrupted);
    }
    out.as_expected = std::find(plan.expect.begin(), plan.expect.end(), out.status.code) != plan.expect.end();
    result_.fault = std::move(out);
}

void MigrateRun::same_instance() {
    // Pause, free the sequence (its slot and pages go back to the pool), resume in the same instance.
    const uint64_t at = source_.consumed();
    source_ = Request{};
    SameInstanceOutcome out;
    out.freed = pool_a_->kv_tokens(2) == 0;
    std::vector<std::byte> blob = full_blob_;
    if (falsified(MigrateFalsify::same_instance_bit)) flip_first_payload(blob);
    RequestState in;
    out.status = read_blob(blob, expect_for(*a_, at), &in);
    Request back;
    if (out.status.ok()) out.status = resume(*a_, *pool_a_, 3, in, nullptr, &back);
    Trace got;
    out.equal = out.status.ok() && continue_for(*a_, back, p_.after, &got).empty() &&
                identical(got, result_.uninterrupted);
    result_.same_instance = std::move(out);
}

void MigrateRun::at_scale() {
    ScaleCosts s;
    s.model = *model_preset(p_.preset);
    s.account = account_memory(s.model);
    // The configuration the cost model is given: the preset's, unless a falsifier damages it.
    ModelConfig cost_cfg = s.model;
    if (falsified(MigrateFalsify::scale_conv_dtype)) cost_cfg.conv_dtype = DType::fp32;
    if (falsified(MigrateFalsify::scale_wrong_model))
        cost_cfg = *model_preset(p_.preset == ModelPreset::kimi_linear_48b ? ModelPreset::qwen3_next_80b
                                                                           : ModelPreset::kimi_linear_48b);
    s.link = *link_preset(p_.link);
    s.hardware = *hardware_preset(p_.hardware);
    s.context = double(p_.context);
    s.distance = std::min(double(p_.distance), s.context);
    auto costs = [&](double context, double distance, RecomputeRegime regime) {
        return migration_costs(cost_cfg, {context, distance}, s.link, s.hardware, {}, regime);
    };
    s.alone = costs(s.context, s.distance, RecomputeRegime::alone);
    s.in_batch = costs(s.context, s.distance, RecomputeRegime::in_batch);
    s.break_even_distance =
        move_kv_break_even_distance(cost_cfg, s.context, s.link, s.hardware, {}, p_.regime);
    // Time against context, and move_kv against the checkpoint distance.
    for (double c = 1024; c <= 1048576 * 1.0001; c *= 2)
        s.over_context.push_back({c, costs(c, std::min(s.distance, c), p_.regime)});
    for (double d = 1; d <= s.context * 1.0001; d *= 2)
        s.over_distance.push_back({d, costs(s.context, d, p_.regime)});
    result_.scale = std::move(s);
}

}  // namespace

std::unique_ptr<Run> start_migrate(const MigrateParams& p, const Params& raw) {
    return std::make_unique<MigrateRun>(p, raw);
}

}  // namespace k3
