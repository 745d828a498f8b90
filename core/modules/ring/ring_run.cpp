// Module 8 `ring`: the run in stages: load the runnable model, decode the request plainly (the
// reference states), decode it again speculatively through the ring, sweep the capacity.
#include <algorithm>

#include "core/base/bytes.h"
#include "core/base/clock.h"
#include "core/model/sampler.h"
#include "core/modules/ring/ring.h"
#include "core/spec/models.h"

namespace k3 {

namespace {

using namespace k3::spec;

constexpr uint64_t kWeightSeed = 1;  // the runnable model's weights (as modules 4-6)

class RingRun : public StagedRun {
  public:
    RingRun(const RingParams& p, const Params& raw) : StagedRun("ring", raw), params_(p) {
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
    std::string start_stream();
    double stream(const Deadline& d);
    double drafter_acceptance() const;
    void sweep();
    void finish();
    bool failed() const { return !result_.error.empty(); }
    double fail(std::string error) {
        result_.error = std::move(error);
        return 1.0;
    }

    RingParams params_;
    RingResult result_;
    std::shared_ptr<model::Model> target_, drafter_model_;
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<model::Sequence> seq_;
    std::vector<int32_t> prompt_, ref_tokens_;
    std::vector<std::vector<std::byte>> ref_states_;  // ref_states_[j]: after the prompt and j tokens
    std::vector<float> logits_;
    int ref_target_ = 0;
    std::unique_ptr<Drafter> drafter_;
    std::unique_ptr<RingStream> ring_;
};

void RingRun::setup() {
    const std::string model = preset_id(params_.model);
    target_ = cached_model(model, kWeightSeed, 16, &result_.error);
    if (!target_) return;
    if (params_.drafter == RingDrafter::self) {
        drafter_model_ = cached_model(model, kWeightSeed, params_.drafter_bits, &result_.error);
        if (!drafter_model_) return;
    }
    // The stream may commit up to N - 1 tokens past new_tokens.
    ref_target_ = params_.new_tokens + params_.draft_len + 1;
    PoolResult pr = model::make_model_pool(*target_, 1, uint64_t(params_.prompt_len + ref_target_));
    if (!pr.pool) {
        fail(pr.error);
        return;
    }
    pool_ = std::move(pr.pool);
    model::SequenceResult s = target_->new_sequence(*pool_, 1);
    if (!s.seq) {
        fail(s.error);
        return;
    }
    seq_ = std::move(s.seq);
    Rng rng(mix64(params_.seed + 0x52494e47));
    for (int i = 0; i < params_.prompt_len; ++i)
        prompt_.push_back(int32_t(rng.below(uint64_t(target_->vocab()))));
}

double RingRun::reference(const Deadline& d) {
    if (failed()) return 1.0;
    model::Model& m = *target_;
    const Stopwatch sw;
    if (ref_tokens_.empty()) {
        if (std::string e = m.prefill(*seq_, prompt_, &logits_); !e.empty()) return fail(e);
        ref_states_.push_back(m.save_state(*seq_));
    }
    // Plain greedy decoding, token by token (spec::greedy_decode's loop, sliced for progress).
    while (int(ref_tokens_.size()) < ref_target_) {
        const int32_t t = model::argmax(logits_.data(), m.vocab());
        ref_tokens_.push_back(t);
        if (int(ref_tokens_.size()) == ref_target_) break;
        if (std::string e = m.decode(*seq_, t, &logits_); !e.empty()) return fail(e);
        ref_states_.push_back(m.save_state(*seq_));
        if (d.passed()) break;
    }
    result_.plain_ms += sw.ms();
    return double(ref_tokens_.size()) / double(ref_target_);
}

std::string RingRun::start_stream() {
    seq_.reset();
    pool_.reset();
    if (drafter_model_) {
        std::string error;
        drafter_ =
            SelfDrafter::create(*drafter_model_, uint64_t(params_.prompt_len + ref_target_ + 16), &error);
        if (!drafter_) return error;
    } else {
        drafter_ = std::make_unique<ChanceDrafter>(ref_tokens_, params_.accept, mix64(params_.seed),
                                                   target_->vocab());
    }
    RingStreamOptions o;
    o.draft_len = params_.draft_len;
    o.capacity = params_.ring_capacity;
    o.overflow = params_.overflow;
    o.commit_every = params_.commit_every;
    o.variant = params_.variant;
    o.new_tokens = params_.new_tokens;
    o.fault = params_.falsify;
    ring_ = std::make_unique<RingStream>(*target_, *drafter_, o);
    return ring_->start(prompt_, &ref_states_);
}

double RingRun::stream(const Deadline& d) {
    if (failed()) return 1.0;
    const Stopwatch sw;
    if (!ring_)
        if (std::string e = start_stream(); !e.empty()) return fail(e);
    bool done = false;
    while (!done) {
        if (std::string e = ring_->step(&done); !e.empty()) return fail(e);
        if (d.passed()) break;
    }
    result_.stream_ms += sw.ms();
    return done ? 1.0 : std::min(0.99, double(ring_->tokens().size()) / double(params_.new_tokens));
}

// Acceptance per draft: the chance drafter's is set, the self drafter's is measured in the stream.
double RingRun::drafter_acceptance() const {
    if (params_.drafter == RingDrafter::chance) return params_.accept;
    const RingStreamStats& st = ring_->stats();
    uint64_t accepted = 0;
    for (int kept : st.kept) accepted += uint64_t(kept - 1);
    const uint64_t drafted = st.verified - uint64_t(st.steps);
    return drafted ? double(accepted) / double(drafted) : 0.0;
}

void RingRun::sweep() {
    if (failed()) return;
    const ModelConfig kimi = *model_preset(ModelPreset::kimi_k3);
    const int N = params_.draft_len;
    const double accept = drafter_acceptance();
    for (int L : {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128}) {
        if (L < N) continue;
        RingSimOptions o;
        o.draft_len = N;
        o.capacity = L;
        o.overflow = params_.overflow;
        o.commit_every = params_.commit_every;
        o.tokens = 4096;
        o.accept = accept;
        o.seed = mix64(params_.seed + 3);
        result_.sweep.push_back({L, simulate_ring(o), spec_storage(kimi, params_.variant, N, 1, L)});
    }
}

void RingRun::finish() {
    if (!failed()) {
        RingResult& res = result_;
        const RecordRing& ring = ring_->ring();
        res.prompt_len = int(prompt_.size());
        res.stats = ring_->stats();
        res.events = ring_->events();
        res.committed = ring_->tokens();
        res.reference_tokens = ref_tokens_.size();
        const size_t n = res.committed.size();
        res.tokens_match = n <= ref_tokens_.size() &&
                           std::equal(res.committed.begin(), res.committed.end(), ref_tokens_.begin());
        res.final_checkpoint_exact =
            n < ref_states_.size() && bitwise_equal(ring.checkpoint(), ref_states_[n]);
        res.ring_bytes = ring.bytes();
        res.checkpoint_position = ring.checkpoint_position();
        res.kept_after_end = ring.cursor().count;
        res.folded = ring.folded();
        res.live_overwrites = ring.live_overwrites();
        res.peak_live = ring.peak_live();
        const int N = params_.draft_len, L = params_.ring_capacity;
        res.own = spec_storage(target_->config(), params_.variant, N, 1, L);
        res.kimi = spec_storage(*model_preset(ModelPreset::kimi_k3), params_.variant, N, 1, L);
    }
    report_ring(params_, result_, report_);
}

}  // namespace

std::unique_ptr<Run> start_ring(const RingParams& p, const Params& raw) {
    return std::make_unique<RingRun>(p, raw);
}

}  // namespace k3
