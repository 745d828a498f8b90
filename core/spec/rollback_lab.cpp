#include "core/spec/rollback_lab.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/clock.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/kda/conv.h"
#include "core/kda/gates.h"
#include "core/kda/recurrent.h"
#include "core/model/sampler.h"
#include "core/model/vec_kernels.h"
#include "core/spec/delta.h"
#include "core/spec/drafter.h"

namespace k3::spec {

std::unique_ptr<RollbackLab> RollbackLab::create(model::Model& m, int draft_len, int prompt_len,
                                                 double accept, uint64_t seed, std::string* error,
                                                 VerifyFault fault) {
    auto fail = [&](std::string e) {
        *error = std::move(e);
        return nullptr;
    };
    if (draft_len < 1 || prompt_len < 1) return fail("draft_len and prompt_len must be at least 1");
    std::unique_ptr<RollbackLab> lab(new RollbackLab(m, fault));
    lab->N_ = draft_len;
    // Two sequences: the lab's, and the cold runs'.
    PoolResult p = model::make_model_pool(m, 2, uint64_t(prompt_len + 2 * draft_len + 2));
    if (!p.pool) return fail(p.error);
    lab->pool_ = std::move(p.pool);
    model::SequenceResult s = m.new_sequence(*lab->pool_, 1);
    if (!s.seq) return fail(s.error);
    lab->seq_ = std::move(s.seq);
    model::Sequence& seq = *lab->seq_;
    Rng rng(seed);
    for (int i = 0; i < prompt_len; ++i) lab->prompt_.push_back(int32_t(rng.below(uint64_t(m.vocab()))));
    std::vector<float> logits;
    if (std::string e = m.prefill(seq, lab->prompt_, &logits); !e.empty()) return fail(e);
    lab->confirmed_ = m.save(seq);
    // The target's greedy continuation, which the chance drafter proposes (right with probability p).
    std::vector<int32_t> cont;
    for (int i = 0; i < draft_len; ++i) {
        cont.push_back(model::argmax(logits.data(), m.vocab()));
        if (std::string e = m.decode(seq, cont.back(), &logits); !e.empty()) return fail(e);
    }
    ChanceDrafter drafter(cont, accept, mix64(seed + 1), m.vocab());
    std::vector<int32_t> drafts;
    if (std::string e = drafter.start(lab->prompt_); !e.empty()) return fail(e);
    if (std::string e = drafter.draft(cont[0], draft_len - 1, &drafts); !e.empty()) return fail(e);
    lab->tokens_.assign(1, cont[0]);
    lab->tokens_.insert(lab->tokens_.end(), drafts.begin(), drafts.end());
    // Direct: the verified tokens decoded one by one from the confirmed state.
    if (std::string e = m.restore(seq, lab->confirmed_); !e.empty()) return fail(e);
    lab->direct_.push_back(lab->confirmed_);
    for (int32_t t : lab->tokens_) {
        if (std::string e = m.decode(seq, t); !e.empty()) return fail(e);
        lab->direct_.push_back(m.save(seq));
    }
    if (std::string e = lab->cold_runs(); !e.empty()) return fail(e);
    // Snapshot verification (token by token), kept for every compare() and time_restore().
    if (std::string e = m.restore(seq, lab->confirmed_); !e.empty()) return fail(e);
    if (std::string e = lab->snap_.begin(seq); !e.empty()) return fail(e);
    if (std::string e = lab->snap_.extend(seq, lab->tokens_, &lab->snap_logits_); !e.empty()) return fail(e);
    lab->verified_ = m.save(seq);
    // One-pass verification with records: the same logits?
    if (std::string e = m.restore(seq, lab->confirmed_); !e.empty()) return fail(e);
    Verifier rv(m, Rollback::replay, RecordVariant::minimal_exact, fault);
    std::vector<float> one_pass;
    if (std::string e = rv.begin(seq); !e.empty()) return fail(e);
    if (std::string e = rv.extend(seq, lab->tokens_, &one_pass); !e.empty()) return fail(e);
    lab->logits_match_ =
        one_pass.size() == lab->snap_logits_.size() && bitwise_equal(one_pass, lab->snap_logits_);
    const int V = m.vocab();
    int kept = 1;
    while (kept < draft_len &&
           lab->tokens_[size_t(kept)] == model::argmax(lab->snap_logits_.data() + size_t(kept - 1) * V, V))
        ++kept;
    lab->kept_ = kept;
    return lab;
}

uint64_t RollbackLab::snapshot_bytes_held() const { return snap_.bytes_held(); }

// The reference of the copy restores: for every n, a sequence that never saw a draft, a restore or a
// token-by-token decode: the prompt prefilled, then the n kept tokens in one recurrent forward.
std::string RollbackLab::cold_runs() {
    const model::ForwardOptions fo{model::CoreMode::recurrent, model::LogitRows::none, nullptr};
    for (int n = 0; n <= N_; ++n) {
        model::SequenceResult s = m_.new_sequence(*pool_, 2);
        if (!s.seq) return s.error;
        if (std::string e = m_.prefill(*s.seq, prompt_); !e.empty()) return e;
        const auto kept = std::span<const int32_t>(tokens_).first(size_t(n));
        if (std::string e = m_.forward(*s.seq, kept, fo, nullptr); !e.empty()) return e;
        cold_.push_back(m_.save(*s.seq));
    }
    return {};
}

// From the confirmed state, the verify pass over the draft with `rv` recording its records.
std::string RollbackLab::verify_recording(model::Sequence& seq, Verifier& rv) {
    if (std::string e = m_.restore(seq, confirmed_); !e.empty()) return e;
    if (std::string e = rv.begin(seq); !e.empty()) return e;
    return rv.extend(seq, tokens_, nullptr);
}

namespace {

// Whether every layer's S, and every layer's conv windows, have the same bits in two saved states.
struct LayerMatch {
    bool S = false, windows = false;
};
LayerMatch match_layers(const std::vector<std::byte>& a, const std::vector<std::byte>& b, size_t per,
                        size_t S_bytes) {
    LayerMatch m;
    m.S = m.windows = a.size() == b.size();
    for (size_t l = 0; m.S && l * per < a.size(); ++l) {
        m.S = bitwise_equal(a.data() + l * per, b.data() + l * per, S_bytes);
        m.windows = m.windows &&
                    bitwise_equal(a.data() + l * per + S_bytes, b.data() + l * per + S_bytes, per - S_bytes);
    }
    return m;
}

}  // namespace

std::string RollbackLab::compare(RecordVariant v, std::vector<RestoreOutcome>* out,
                                 uint64_t* record_bytes_held) {
    out->clear();
    model::Sequence& seq = *seq_;
    Verifier rv(m_, Rollback::replay, v, fault_);
    if (std::string e = verify_recording(seq, rv); !e.empty()) return e;
    *record_bytes_held = rv.bytes_held();
    const model::SequenceSnapshot verified_r = m_.save(seq);
    const model::SequenceSnapshot& untouched = cold_[0];
    const size_t per = size_t(m_.pool_model().state_bytes_per_layer),
                 sb = m_.kda().state_floats() * sizeof(float);
    for (int n = 0; n <= N_; ++n) {
        RestoreOutcome o;
        o.n = n;
        if (std::string e = m_.restore(seq, verified_); !e.empty()) return e;
        if (std::string e = snap_.keep(seq, n, true); !e.empty()) return e;
        const model::SequenceSnapshot copied = m_.save(seq);
        o.copy_exact = model::same_contents(copied, cold_[size_t(n)]);
        if (std::string e = m_.restore(seq, verified_r); !e.empty()) return e;
        if (std::string e = rv.keep(seq, n, true); !e.empty()) return e;
        const model::SequenceSnapshot got = m_.save(seq);
        const model::SequenceSnapshot& want = direct_[size_t(n)];
        o.replay_exact = model::same_contents(got, want);
        const LayerMatch direct = match_layers(got.state, want.state, per, sb);
        o.S_exact = direct.S, o.windows_exact = direct.windows;
        o.copy_replay_same = model::same_contents(copied, got);
        o.copy_replay_S = match_layers(copied.state, got.state, per, sb).S;
        if (n == 0) {
            o.draft_mutated = verified_.state != untouched.state && verified_r.state != untouched.state;
            o.untouched = model::same_contents(copied, untouched) && model::same_contents(got, untouched);
        }
        out->push_back(o);
    }
    return {};
}

namespace {

// Running max |a - b| and max |b| over many arrays; their ratio.
struct RelError {
    double diff = 0, scale = 0;
    template <class A, class B>
    void add(const A* a, const B* b, size_t n) {
        for (size_t i = 0; i < n; ++i) {
            diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
            scale = std::max(scale, std::fabs(double(b[i])));
        }
    }
    double rel() const { return scale > 0 ? diff / scale : diff; }
};

}  // namespace

std::string RollbackLab::closed_form_errors(int skip_decay, std::vector<ClosedFormError>* out) {
    out->clear();
    Verifier rv(m_, Rollback::replay, RecordVariant::recoverssm, fault_);
    if (std::string e = verify_recording(*seq_, rv); !e.empty()) return e;
    const model::KdaDims& d = m_.kda();
    const size_t per = size_t(m_.pool_model().state_bytes_per_layer), sf = d.state_floats();
    std::vector<float> s32(sf), want(sf);
    std::vector<double> s64(sf);
    ReplayScratch scratch;
    for (int n = 0; n <= N_; ++n) {
        RelError direct, fp64, direct64;
        for (int li = 0; li < m_.config().n_linear(); ++li) {
            std::memcpy(s32.data(), confirmed_.state.data() + size_t(li) * per, sf * sizeof(float));
            std::memcpy(want.data(), direct_[size_t(n)].state.data() + size_t(li) * per, sf * sizeof(float));
            std::copy(s32.begin(), s32.end(), s64.begin());
            const FoldInputs f = recoverssm_fold_inputs(m_.kda_weights(li), d, rv.records().layout(),
                                                        rv.records().row(li, 0), n, scratch);
            closed_form_fold(d.s, s32.data(), f.k, f.c, f.g, n, skip_decay);
            closed_form_fold(d.s, s64.data(), f.k, f.c, f.g, n);
            direct.add(s32.data(), want.data(), sf);
            fp64.add(s32.data(), s64.data(), sf);
            direct64.add(want.data(), s64.data(), sf);
        }
        out->push_back({n, direct.rel(), fp64.rel(), direct64.rel()});
    }
    return {};
}

std::string RollbackLab::time_restore(RecordVariant v, int reps, std::vector<double>* copy_ms,
                                      std::vector<double>* replay_ms) {
    copy_ms->clear();
    replay_ms->clear();
    model::Sequence& seq = *seq_;
    Verifier rv(m_, Rollback::replay, v, fault_);
    if (std::string e = verify_recording(seq, rv); !e.empty()) return e;
    const model::SequenceSnapshot verified_r = m_.save(seq);
    for (int n = 0; n <= N_; ++n) {
        std::vector<double> c, r;
        for (int i = 0; i < reps; ++i) {  // interleaved, so both see the same machine state
            if (std::string e = m_.restore(seq, verified_); !e.empty()) return e;
            Stopwatch sw;
            if (std::string e = snap_.keep(seq, n, true); !e.empty()) return e;
            c.push_back(sw.ms());
            if (std::string e = m_.restore(seq, verified_r); !e.empty()) return e;
            sw.restart();
            if (std::string e = rv.keep(seq, n, true); !e.empty()) return e;
            r.push_back(sw.ms());
        }
        copy_ms->push_back(median(c));
        replay_ms->push_back(median(r));
    }
    return {};
}

LayerRestoreTiming time_layer_restore(const kda::Shape& s, int conv_width, int n_max, int reps,
                                      kda::Impl impl) {
    LayerRestoreTiming t;
    const int QK = int(s.qk_row()), VC = int(s.v_row()), W = conv_width, rows = std::max(W - 1, 0);
    const size_t wf = size_t(rows) * size_t(2 * QK + VC);
    kda::FloatBuf snap(s.state_floats() + wf), live(snap.size());
    t.state_bytes = snap.size() * sizeof(float);
    Rng r(5);
    r.fill_normal(snap.data(), snap.size(), 0.1f);
    // Records of n_max tokens: raw q, k, v rows, g, beta; the conv taps.
    const int n = std::max(n_max, 1);
    kda::FloatBuf rq(size_t(n) * QK), rk(rq.size()), rv(size_t(n) * VC), g(size_t(n) * s.g_row()),
        beta(size_t(n) * s.HV), wq(size_t(QK) * W), wk(wq.size()), wv(size_t(VC) * W);
    kda::FloatBuf q(rq.size()), k(rk.size()), v(rv.size());
    for (auto* b : {&rq, &rk, &rv}) r.fill_normal(b->data(), b->size());
    for (auto* b : {&wq, &wk, &wv}) r.fill_uniform(b->data(), b->size(), -0.5f, 0.5f);
    r.fill_uniform(g.data(), g.size(), -0.5f, 0.0f);
    r.fill_uniform(beta.data(), beta.size(), 0.1f, 0.9f);
    float* S = live.data();
    float* win_q = S + s.state_floats();
    float* win_k = win_q + size_t(rows) * QK;
    float* win_v = win_k + size_t(rows) * QK;
    for (int steps = 0; steps <= n_max; ++steps) {
        std::vector<double> c, p;
        for (int i = 0; i < reps; ++i) {
            Stopwatch sw;
            std::memcpy(live.data(), snap.data(), t.state_bytes);  // restore by copy
            c.push_back(sw.ms());
            sw.restart();  // replay `steps` records in place (as an engine does on the confirmed slot)
            if (steps > 0) {
                kda::conv_sequence(QK, W, win_q, rq.data(), steps, wq.data(), q.data());
                kda::conv_sequence(QK, W, win_k, rk.data(), steps, wk.data(), k.data());
                kda::conv_sequence(VC, W, win_v, rv.data(), steps, wv.data(), v.data());
                model::silu(k.data(), size_t(steps) * QK, impl);
                model::silu(v.data(), size_t(steps) * VC, impl);
                kda::l2norm_rows(k.data(), steps * s.H, s.K);
                kda::recurrent(s, S, kda::Tokens{q.data(), k.data(), v.data(), g.data(), beta.data(), steps},
                               kda::default_scale(s.K), nullptr, impl);
            }
            p.push_back(sw.ms());
        }
        t.copy_ms.push_back(median(c));
        t.replay_ms.push_back(median(p));
    }
    return t;
}

}  // namespace k3::spec
