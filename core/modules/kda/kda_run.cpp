// Module 1 `kda`: the run. Seeded inputs, the fp64 reference, the four fp32 kernels (recurrent and
// chunked, scalar and SIMD), the chunk-size sweep, the throughput, and the bit-exactness findings.
#include <algorithm>
#include <cmath>
#include <functional>

#include "core/base/bytes.h"
#include "core/base/clock.h"
#include "core/base/crc32c.h"
#include "core/kda/affine.h"
#include "core/kda/chunked.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"
#include "core/modules/kda/kda.h"

namespace k3 {

namespace {

using namespace k3::kda;

constexpr double kTimedMs = 6;  // least wall time per timed kernel

// The index of the element of largest magnitude (where a falsifier's corruption cannot drown).
size_t largest(const FloatBuf& x) {
    size_t at = 0;
    for (size_t i = 1; i < x.size(); ++i)
        if (std::fabs(x[i]) > std::fabs(x[at])) at = i;
    return at;
}

// Where the split prefill cuts the T tokens: the middle, moved off the chunk grid when C > 1 (so the
// second call's chunks do not line up with the one-call run's). 0 < A < T for T >= 2.
int split_point(int T, int C) {
    const int A = T / 2;
    return C > 1 && A % C == 0 ? A + 1 : A;
}

// Calls `fn` (which processes `head_tokens` head-tokens) once untimed (caches; in WebAssembly the
// engine tiers the code up), then timed at least three times and until `ms` have passed; returns the
// best rate of the timed calls in head-tokens/s (the best, because a shared machine only ever slows
// a call down).
double best_rate(const std::function<void()>& fn, double head_tokens, double ms) {
    fn();
    double best = 0;
    const Stopwatch total;
    int n = 0;
    do {
        const Stopwatch sw;
        fn();
        const double t = sw.ms();
        if (t > 0) best = std::max(best, head_tokens / (t * 1e-3));
        ++n;
    } while (total.ms() < ms || n < 3);
    return best;
}

class KdaRun : public StagedRun {
  public:
    KdaRun(const KdaParams& p, const Params& raw) : StagedRun("kda", raw), p_(p), s_(kda_shape(p)) {
        result_.shape = s_;
        result_.tokens = p.tokens;
        result_.chunk = p.chunk;
        plan_timing();
        add_step("inputs", 1, [this] { make_inputs(); });
        add_stage("fp64 reference", 6, [this](const Deadline& dl) { return reference(dl); });
        add_step("fp32 kernels", 2, [this] { kernels(); });
        add_stage("chunk-size sweep", 2, [this](const Deadline& dl) { return sweep(dl); });
        add_stage("throughput", 4, [this](const Deadline& dl) { return throughput(dl); });
        add_step("report", 0.1, [this] {
            exactness();
            report_kda(result_, report_);
        });
    }

  private:
    // The buffers the timed calls work in, held only while the throughput stage runs.
    struct Scratch {
        FloatBuf S, o, many;
    };
    struct TimedCall {
        int tokens = 0;
        std::function<void()> fn;
    };

    void plan_timing();
    void make_inputs();
    double reference(const Deadline& dl);
    void kernels();
    double sweep(const Deadline& dl);
    double throughput(const Deadline& dl);
    TimedCall timed_call(TimedKernel k, Scratch& w);
    std::function<void()> prefill(Scratch& w, Impl impl, int C, int T);
    std::function<void()> decode(Scratch& w, Impl impl, int T);
    std::function<void()> decode_states_in_memory(Scratch& w, int T);
    void exactness();
    void check_decode();
    void check_split();
    void check_affine();
    void gate_range();

    // Errors of a fp32 run (outputs and final state together) against the fp64 reference.
    ErrorStats vs_ref(const FloatBuf& o, const FloatBuf& S) const {
        ErrorStats e = compare(o.data(), ref_o_.data(), o.size());
        return e.add(compare(S.data(), ref_S_.data(), S.size()));
    }

    KdaParams p_;
    Shape s_;
    float scale_ = 0;
    TokenData x_;
    FloatBuf S0_;
    std::vector<double> ref_S_, ref_o_;
    int ref_t_ = 0;
    FloatBuf rec_S_[2], rec_o_[2], ch_S_[2], ch_o_[2];  // [scalar, SIMD]
    size_t sweep_i_ = 0;
    std::vector<int> timed_chunks_;  // chunk sizes of the throughput-against-C curve
    size_t timing_i_ = 0;
    int n_states_ = 0, states_tokens_ = 0;  // states cycled through by the states-in-memory decode, tokens
    long states_pos_ = 0;                   // its position in the ring of states, across calls
    KdaResult result_;
};

// The sweep, the timed chunk sizes and the timed prefix (kda_plan); the states the decode cycles through.
void KdaRun::plan_timing() {
    result_.simd = simd_enabled();
    result_.simd_arch = simd_arch();
    const KdaPlan plan = kda_plan(p_);
    result_.timed_tokens_scalar = plan.timed_tokens_scalar;
    result_.timed_tokens_simd = plan.timed_tokens_simd;
    result_.sweep_chunks = plan.sweep_chunks;
    timed_chunks_ = plan.timed_chunks;
    n_states_ = std::max(1, int(kKdaManyStateBytes / (4.0 * double(s_.state_floats()))));
    states_tokens_ = std::min(result_.timed_tokens_simd, std::max(1, 4 * n_states_));
}

void KdaRun::make_inputs() {
    const InputRecipe recipe{.gate = p_.gate, .gate_strength = p_.gate_strength};
    x_ = random_tokens(s_, p_.tokens, p_.seed, recipe);
    S0_ = random_state(s_, p_.seed ^ 0x5eedull);
    scale_ = default_scale(s_.K);
    ref_S_.assign(S0_.begin(), S0_.end());
    ref_o_.assign(size_t(p_.tokens) * s_.v_row(), 0.0);
}

double KdaRun::reference(const Deadline& dl) {
    // The fp64 recurrence in slices of tokens, so that long runs report progress.
    const int T = p_.tokens;
    while (ref_t_ < T) {
        const int n = std::min(T - ref_t_, 16);
        ref::recurrent(s_, ref_S_.data(), x_.view().slice(s_, ref_t_, n), double(scale_),
                       ref_o_.data() + size_t(ref_t_) * s_.v_row());
        ref_t_ += n;
        if (dl.passed()) break;
    }
    return double(ref_t_) / T;
}

void KdaRun::kernels() {
    const size_t no = size_t(p_.tokens) * s_.v_row();
    // The fp64 reference has run: from here on the fp32 kernels see a last-token gate it never saw.
    if (p_.falsify == KdaFalsify::fp32_gate) x_.g[size_t(p_.tokens - 1) * s_.g_row()] -= 1.0f;
    for (int v = 0; v < 2; ++v) {
        const Impl impl = v ? Impl::simd : Impl::scalar;
        rec_S_[v] = S0_, rec_o_[v].assign(no, 0.0f);
        recurrent(s_, rec_S_[v].data(), x_.view(), scale_, rec_o_[v].data(), impl);
        ch_S_[v] = S0_, ch_o_[v].assign(no, 0.0f);
        chunked(s_, ch_S_[v].data(), x_.view(), scale_, p_.chunk, ch_o_[v].data(), impl);
        if (v == 1 && p_.falsify == KdaFalsify::simd_output_bit) flip_bit(ch_o_[1][0], 0);
        result_.recurrent[v] = vs_ref(rec_o_[v], rec_S_[v]);
        result_.chunked[v] = vs_ref(ch_o_[v], ch_S_[v]);
    }
    result_.chunked_vs_recurrent = compare(ch_o_[1].data(), rec_o_[1].data(), no);
    result_.chunked_vs_recurrent.add(compare(ch_S_[1].data(), rec_S_[1].data(), ch_S_[1].size()));
    uint32_t crc = 0;
    for (int v = 0; v < 2; ++v) {
        crc = crc32c(rec_o_[v].data(), rec_o_[v].size() * 4, crc);
        crc = crc32c(ch_o_[v].data(), ch_o_[v].size() * 4, crc);
        crc = crc32c(ch_S_[v].data(), ch_S_[v].size() * 4, crc);
    }
    result_.bits_digest = crc;
}

double KdaRun::sweep(const Deadline& dl) {
    const std::vector<int>& chunks = result_.sweep_chunks;
    while (sweep_i_ < chunks.size()) {
        const int C = chunks[sweep_i_++];
        FloatBuf S = S0_, o(size_t(p_.tokens) * s_.v_row());
        chunked(s_, S.data(), x_.view(), scale_, C, o.data(), Impl::simd);
        if (sweep_i_ == 1 && p_.falsify == KdaFalsify::sweep_state) flip_bit(S[largest(S)], 23);
        ErrorStats d = compare(o.data(), rec_o_[1].data(), o.size());
        d.add(compare(S.data(), rec_S_[1].data(), S.size()));
        result_.sweep_rel_err.push_back(vs_ref(o, S).rel_rms());
        result_.sweep_max_diff.push_back(d.max_abs);
        if (dl.passed()) break;
    }
    return chunks.empty() ? 1.0 : double(sweep_i_) / chunks.size();
}

double KdaRun::throughput(const Deadline& dl) {
    Scratch w{FloatBuf(s_.state_floats()), FloatBuf(size_t(p_.tokens) * s_.v_row()), {}};
    const int Tv = result_.timed_tokens_simd;
    const size_t n_calls = kTimedKernels + timed_chunks_.size();
    KdaThroughput& t = result_.throughput;
    while (timing_i_ < n_calls) {
        if (timing_i_ < kTimedKernels) {
            const TimedCall c = timed_call(TimedKernel(timing_i_), w);
            t.rate[timing_i_] = best_rate(c.fn, double(c.tokens) * s_.HV, kTimedMs);
        } else {
            const int C = timed_chunks_[timing_i_ - kTimedKernels];
            t.chunks.push_back(C);
            t.chunk_rate.push_back(best_rate(prefill(w, Impl::simd, C, Tv), double(Tv) * s_.HV, kTimedMs));
        }
        ++timing_i_;
        if (dl.passed()) break;
    }
    return double(timing_i_) / double(n_calls);
}

KdaRun::TimedCall KdaRun::timed_call(TimedKernel k, Scratch& w) {
    const int Ts = result_.timed_tokens_scalar, Tv = result_.timed_tokens_simd, C = p_.chunk;
    switch (k) {
        case TimedKernel::decode_simd: return {Tv, decode(w, Impl::simd, Tv)};
        case TimedKernel::decode_states_in_memory:
            return {states_tokens_, decode_states_in_memory(w, states_tokens_)};
        case TimedKernel::recurrent_simd: return {Tv, prefill(w, Impl::simd, 0, Tv)};
        case TimedKernel::chunked_simd: return {Tv, prefill(w, Impl::simd, C, Tv)};
        case TimedKernel::decode_scalar: return {Ts, decode(w, Impl::scalar, Ts)};
        case TimedKernel::recurrent_scalar: return {Ts, prefill(w, Impl::scalar, 0, Ts)};
        case TimedKernel::chunked_scalar: return {Ts, prefill(w, Impl::scalar, C, Ts)};
    }
    return {};
}

// A prefill of the first T tokens from S0: chunked with chunk size C, or recurrent when C = 0.
std::function<void()> KdaRun::prefill(Scratch& w, Impl impl, int C, int T) {
    return [this, &w, impl, C, T] {
        std::copy(S0_.begin(), S0_.end(), w.S.begin());
        const Tokens x = x_.view().slice(s_, 0, T);
        if (C > 0)
            chunked(s_, w.S.data(), x, scale_, C, w.o.data(), impl);
        else
            recurrent(s_, w.S.data(), x, scale_, w.o.data(), impl);
    };
}

std::function<void()> KdaRun::decode(Scratch& w, Impl impl, int T) {
    return [this, &w, impl, T] {
        for (int t = 0; t < T; ++t) {
            const Tokens r = x_.view().slice(s_, t, 1);
            recurrent_step(s_, w.S.data(), r.q, r.k, r.v, r.g, r.beta, scale_, w.o.data(), impl);
        }
    };
}

// Decode cycling through 64 MiB of states (a model's layers times a batch of sequences): every step
// reads and writes its state from memory instead of cache.
std::function<void()> KdaRun::decode_states_in_memory(Scratch& w, int T) {
    return [this, &w, T] {
        const size_t n = s_.state_floats();
        if (w.many.empty()) {  // filled by the untimed first call
            w.many.resize(size_t(n_states_) * n);
            for (int m = 0; m < n_states_; ++m)
                std::copy(S0_.begin(), S0_.end(), w.many.data() + size_t(m) * n);
        }
        for (int t = 0; t < T; ++t, ++states_pos_) {  // calls continue round the ring of states
            const Tokens r = x_.view().slice(s_, t, 1);
            recurrent_step(s_, w.many.data() + size_t(states_pos_ % n_states_) * n, r.q, r.k, r.v, r.g,
                           r.beta, scale_, w.o.data(), Impl::simd);
        }
    };
}

void KdaRun::exactness() {
    result_.scalar_simd_same_bits = bitwise_equal(rec_o_[0], rec_o_[1]) &&
                                    bitwise_equal(rec_S_[0], rec_S_[1]) &&
                                    bitwise_equal(ch_o_[0], ch_o_[1]) && bitwise_equal(ch_S_[0], ch_S_[1]);
    check_decode();
    if (p_.tokens > 1) check_split();
    check_affine();
    gate_range();
}

// Decoding token by token gives the bits of the recurrent prefill.
void KdaRun::check_decode() {
    FloatBuf S = S0_, o(rec_o_[1].size());
    const int flip_after = (p_.tokens - 1) / 2;
    for (int t = 0; t < p_.tokens; ++t) {
        const Tokens one = x_.view().slice(s_, t, 1);
        recurrent_step(s_, S.data(), one.q, one.k, one.v, one.g, one.beta, scale_,
                       o.data() + size_t(t) * s_.v_row());
        if (t == flip_after && p_.falsify == KdaFalsify::decode_state_bit) flip_bit(S[0], 22);
    }
    result_.decode_same_bits = bitwise_equal(S, rec_S_[1]) && bitwise_equal(o, rec_o_[1]);
}

// A prefill in two calls, cut off the chunk grid: chunks restart at the cut, so only the state carried
// from the first call links the second to the tokens before it; both together against fp64. (A cut on
// the grid would give the one-call bits by construction, chunked.h.)
void KdaRun::check_split() {
    const int T = p_.tokens, C = p_.chunk, A = split_point(T, C);
    FloatBuf S = S0_, o(ch_o_[1].size());
    chunked(s_, S.data(), x_.view().slice(s_, 0, A), scale_, C, o.data());
    if (p_.falsify == KdaFalsify::split_carry) S = S0_;
    chunked(s_, S.data(), x_.view().slice(s_, A, T - A), scale_, C, o.data() + size_t(A) * s_.v_row());
    result_.split_at = A;
    result_.split_vs_fp64 = vs_ref(o, S);
}

// The affine map of the run reproduces it from the start state: S_T = M S0 + B.
void KdaRun::check_affine() {
    AffineMap map = segment_map(s_, x_.view(), scale_, p_.chunk);
    if (p_.falsify == KdaFalsify::affine_b_sign) flip_bit(map.B[largest(map.B)], 31);
    FloatBuf S(s_.state_floats());
    affine_apply(s_, map.M.data(), map.B.data(), S0_.data(), S.data());
    result_.affine_vs_fp64 = compare(S.data(), ref_S_.data(), S.size());
}

// The most negative gate the inputs drew: how far a chunk's cumulative gate goes (<= 0 by the recipes,
// inputs.cpp; a non-finite result would fail the accuracy checks).
void KdaRun::gate_range() {
    result_.gate_min = 0;
    for (float g : x_.g) result_.gate_min = std::min(result_.gate_min, g);
}

}  // namespace

KdaPlan kda_plan(const KdaParams& p) {
    const int T = p.tokens, C = p.chunk, HV = kda_shape(p).HV;
    KdaPlan plan;
    // The sweep: powers of two up to the run length, plus the chosen chunk size.
    std::vector<int>& cs = plan.sweep_chunks;
    for (int c = 1; c <= std::min(T, 256); c *= 2) cs.push_back(c);
    if (T <= 256 && (cs.empty() || cs.back() != T)) cs.push_back(T);
    cs.push_back(std::min(C, T));
    std::sort(cs.begin(), cs.end());
    cs.erase(std::unique(cs.begin(), cs.end()), cs.end());
    // Throughput against chunk size for C = 4 ... 128 and the chosen C (C = 1 and 2 are the recurrence
    // plus set-up, C = 256 is all set-up: both slow and already clear from the trend).
    for (int c : cs)
        if ((c >= 4 && c <= 128) || c == C) plan.timed_chunks.push_back(c);
    // Timed on a prefix of the tokens: enough head-tokens for a stable rate, few enough that the scalar
    // kernels finish quickly even for large runs.
    plan.timed_tokens_scalar = std::max(1, std::min(T, 256 / HV));
    plan.timed_tokens_simd = std::min(T, std::max({1, 65536 / HV, std::min(T, 2 * C)}));
    return plan;
}

std::unique_ptr<Run> start_kda(const KdaParams& p, const Params& raw) {
    return std::make_unique<KdaRun>(p, raw);
}

}  // namespace k3
