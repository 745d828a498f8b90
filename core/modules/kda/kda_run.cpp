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
#include "core/kda/kernel_work.h"
#include "core/kda/recurrent.h"
#include "core/kda/reference.h"
#include "core/modules/kda/kda.h"
#include "core/modules/kda/timed_rate.h"

namespace k3 {

namespace {

using namespace k3::kda;

constexpr double kTimedMs = 6;  // least wall time per timed kernel
// Multiply-adds of one part of a parted kernel call: a millisecond or two of work in WebAssembly, so
// that the page's slices stay near their budget (its frames are 10 ms), and enough work per call that
// the calls cost nothing.
constexpr double kPartWork = 4.0e6;
// Multiply-adds of one timed call, which the throughput stage cannot split, bound by shortening the timed
// prefix of the tokens: about 10 ms natively (the scalar kernels are several times slower).
constexpr double kTimedCallWork = 6.7e7, kTimedScalarCallWork = 1.0e7;

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

// One kernel call made in parts, so that a run can stop between them (the page steps runs in
// time-boxed slices): `part(first, count)` runs units [first, first + count) of `units`, in order. The
// kernels give the one call's bits however the units are grouped (recurrent.h: tokens; chunked.h and
// affine.h: (chunk, head) pairs).
struct PartedCall {
    size_t units = 0, per_part = 1, done = 0;
    std::function<void(size_t first, size_t count)> part;

    static PartedCall of(size_t units, double unit_work, std::function<void(size_t, size_t)> part) {
        const size_t per = size_t(std::max(1.0, std::floor(kPartWork / std::max(1.0, unit_work))));
        return {units, per, 0, std::move(part)};
    }
    // Parts until all units are done (true) or the deadline has passed.
    bool advance(const Deadline& dl) {
        while (done < units) {
            const size_t n = std::min(per_part, units - done);
            part(done, n);
            done += n;
            if (dl.passed()) break;
        }
        return done >= units;
    }
};

// Parted calls and short steps run in order across slices; each is made when reached, so that it can
// take buffers the steps before it prepared. Returns the stage's progress.
class CallSequence {
  public:
    void call(std::function<PartedCall()> make) { items_.push_back(std::move(make)); }
    void step(std::function<void()> fn) {
        call([fn = std::move(fn)] { return PartedCall{1, 1, 0, [fn](size_t, size_t) { fn(); }}; });
    }
    bool empty() const { return items_.empty(); }
    double advance(const Deadline& dl) {
        while (i_ < items_.size()) {
            if (!started_) current_ = items_[i_](), started_ = true;
            if (!current_.advance(dl)) break;
            ++i_, started_ = false;
            current_ = {};
            if (dl.passed()) break;
        }
        if (i_ >= items_.size()) return 1.0;
        const double within = started_ && current_.units ? double(current_.done) / double(current_.units) : 0;
        return (double(i_) + within) / double(items_.size());
    }

  private:
    std::vector<std::function<PartedCall()>> items_;
    size_t i_ = 0;
    bool started_ = false;
    PartedCall current_;
};

class KdaRun : public StagedRun {
  public:
    KdaRun(const KdaParams& p, const Params& raw) : StagedRun("kda", raw), p_(p), s_(kda_shape(p)) {
        result_.shape = s_;
        result_.tokens = p.tokens;
        result_.chunk = p.chunk;
        plan_timing();
        plan_kernels();
        plan_exactness();
        add_step("inputs", 1, [this] { make_inputs(); });
        add_stage("fp64 reference", 6, [this](const Deadline& dl) { return reference(dl); });
        add_stage("fp32 kernels", 2, [this](const Deadline& dl) { return kernels_.advance(dl); });
        add_stage("chunk-size sweep", 2, [this](const Deadline& dl) { return sweep(dl); });
        if (p.model != KdaModel::none)
            add_stage("runnable model", 3, [this](const Deadline& dl) { return model_.advance(dl); });
        add_stage("device limits", 2, [this](const Deadline& dl) { return device(dl); });
        add_stage("throughput", 4, [this](const Deadline& dl) { return throughput(dl); });
        add_stage("exactness", 1, [this](const Deadline& dl) { return exactness_.advance(dl); });
        add_step("report", 0.1, [this] {
            result_.model = model_.rates();
            report_kda(result_, report_);
        });
    }

  private:
    // The buffers the timed calls work in, held only while the throughput stage runs.
    struct Scratch {
        FloatBuf S, o, many;
        FloatBuf l1, l2, state, weights;  // the device probes' buffers (device.h)
    };
    struct TimedCall {
        int tokens = 0;
        std::function<void()> fn;
    };
    struct Probe {
        std::function<double()> call;  // returns the flop or bytes it did
        double* rate;                  // where its best rate goes (result_.device)
    };

    void plan_timing();
    void plan_kernels();
    void plan_fma_kernels();
    void plan_exactness();
    void make_inputs();
    double reference(const Deadline& dl);
    void kernel_results(int v);
    void kernels_done();
    double sweep(const Deadline& dl);
    void sweep_result(int C);
    Scratch& scratch();
    double device(const Deadline& dl);
    void plan_probes();
    double throughput(const Deadline& dl);
    bool fill_states(const Deadline& dl);
    TimedCall timed_call(TimedKernel k, Scratch& w);
    std::function<void()> prefill(Scratch& w, Impl impl, int C, int T);
    std::function<void()> decode(Scratch& w, Impl impl, int T);
    std::function<void()> decode_states_in_memory(Scratch& w, int T);
    PartedCall recurrent_call(Impl impl, float* S, float* o, const Tokens& x) const;
    PartedCall chunked_call(Impl impl, int C, float* S, float* o, const Tokens& x) const;
    PartedCall decode_call(float* S, float* o);
    PartedCall affine_call();
    void check_affine();
    void gate_range();

    // Errors of a fp32 run (outputs and final state together) against the fp64 reference.
    ErrorStats vs_ref(const FloatBuf& o, const FloatBuf& S) const {
        ErrorStats e = compare(o.data(), ref_o_.data(), o.size());
        return e.add(compare(S.data(), ref_S_.data(), S.size()));
    }
    size_t out_floats() const { return size_t(p_.tokens) * s_.v_row(); }

    KdaParams p_;
    Shape s_;
    float scale_ = 0;
    TokenData x_;
    FloatBuf S0_;
    std::vector<double> ref_S_, ref_o_;
    int ref_t_ = 0;
    FloatBuf rec_S_[2], rec_o_[2], ch_S_[2], ch_o_[2];  // [scalar, SIMD]
    CallSequence kernels_, sweep_, exactness_;
    FloatBuf work_S_, work_o_;  // the run in progress of the sweep and the exactness checks
    AffineMap map_;
    std::vector<int> timed_chunks_;  // chunk sizes of the throughput-against-C curve
    size_t timing_i_ = 0;
    std::unique_ptr<Scratch> scratch_;
    std::vector<Probe> probes_;
    size_t probe_i_ = 0;
    TimedRate timed_;
    KdaModelTiming model_{kda_model_preset(p_.model)};
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

PartedCall KdaRun::recurrent_call(Impl impl, float* S, float* o, const Tokens& x) const {
    return PartedCall::of(size_t(x.T), 4.0 * s_.HV * s_.K * s_.V, [this, impl, S, o, x](size_t t, size_t n) {
        recurrent(s_, S, x.slice(s_, int(t), int(n)), scale_, o + t * s_.v_row(), impl);
    });
}

PartedCall KdaRun::chunked_call(Impl impl, int C, float* S, float* o, const Tokens& x) const {
    const double work = chunk_unit_madds(s_, std::min({C, x.T, kMaxChunk}));
    return PartedCall::of(chunked_units(s_, x.T, C), work, [this, impl, C, S, o, x](size_t u, size_t n) {
        chunked_part(s_, S, x, scale_, C, o, u, n, impl);
    });
}

// The four fp32 prefills over all tokens (recurrent and chunked, scalar and SIMD), each in parts.
void KdaRun::plan_kernels() {
    // The fp64 reference has run: from here on the fp32 kernels see a last-token gate it never saw.
    kernels_.step([this] {
        if (p_.falsify == KdaFalsify::fp32_gate) x_.g[size_t(p_.tokens - 1) * s_.g_row()] -= 1.0f;
    });
    for (int v = 0; v < 2; ++v) {
        const Impl impl = v ? Impl::simd : Impl::scalar;
        kernels_.step([this, v] { rec_S_[v] = S0_, rec_o_[v].assign(out_floats(), 0.0f); });
        kernels_.call(
            [this, v, impl] { return recurrent_call(impl, rec_S_[v].data(), rec_o_[v].data(), x_.view()); });
        kernels_.step([this, v] { ch_S_[v] = S0_, ch_o_[v].assign(out_floats(), 0.0f); });
        kernels_.call([this, v, impl] {
            return chunked_call(impl, p_.chunk, ch_S_[v].data(), ch_o_[v].data(), x_.view());
        });
        kernels_.step([this, v] { kernel_results(v); });
    }
    if (fma_enabled()) plan_fma_kernels();
    kernels_.step([this] { kernels_done(); });
}

// The FMA variants over all tokens, against fp64 and against the exact SIMD kernels.
void KdaRun::plan_fma_kernels() {
    kernels_.step([this] { work_S_ = S0_, work_o_.assign(out_floats(), 0.0f); });
    kernels_.call([this] { return recurrent_call(Impl::fma, work_S_.data(), work_o_.data(), x_.view()); });
    kernels_.step([this] {
        result_.fma_recurrent = vs_ref(work_o_, work_S_);
        result_.fma_max_diff = std::max(compare(work_o_.data(), rec_o_[1].data(), work_o_.size()).max_abs,
                                        compare(work_S_.data(), rec_S_[1].data(), work_S_.size()).max_abs);
        work_S_ = S0_, work_o_.assign(out_floats(), 0.0f);
    });
    kernels_.call(
        [this] { return chunked_call(Impl::fma, p_.chunk, work_S_.data(), work_o_.data(), x_.view()); });
    kernels_.step([this] {
        if (p_.falsify == KdaFalsify::fma_output) flip_bit(work_o_[largest(work_o_)], 23);
        result_.fma_chunked = vs_ref(work_o_, work_S_);
        result_.fma_max_diff =
            std::max({result_.fma_max_diff, compare(work_o_.data(), ch_o_[1].data(), work_o_.size()).max_abs,
                      compare(work_S_.data(), ch_S_[1].data(), work_S_.size()).max_abs});
        result_.fma = true;
        work_S_ = {}, work_o_ = {};
    });
}

void KdaRun::kernel_results(int v) {
    if (v == 1 && p_.falsify == KdaFalsify::simd_output_bit) flip_bit(ch_o_[1][0], 0);
    result_.recurrent[v] = vs_ref(rec_o_[v], rec_S_[v]);
    result_.chunked[v] = vs_ref(ch_o_[v], ch_S_[v]);
}

void KdaRun::kernels_done() {
    const size_t no = out_floats();
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

// The chunked (SIMD) kernel at every chunk size of the sweep, each a prefill of all tokens in parts.
double KdaRun::sweep(const Deadline& dl) {
    if (sweep_.empty())
        for (int C : result_.sweep_chunks) {
            sweep_.step([this] { work_S_ = S0_, work_o_.assign(out_floats(), 0.0f); });
            sweep_.call(
                [this, C] { return chunked_call(Impl::simd, C, work_S_.data(), work_o_.data(), x_.view()); });
            sweep_.step([this, C] { sweep_result(C); });
        }
    return sweep_.advance(dl);
}

void KdaRun::sweep_result(int C) {
    if (C == result_.sweep_chunks.front() && p_.falsify == KdaFalsify::sweep_state)
        flip_bit(work_S_[largest(work_S_)], 23);
    ErrorStats d = compare(work_o_.data(), rec_o_[1].data(), work_o_.size());
    d.add(compare(work_S_.data(), rec_S_[1].data(), work_S_.size()));
    result_.sweep_rel_err.push_back(vs_ref(work_o_, work_S_).rel_rms());
    result_.sweep_max_diff.push_back(d.max_abs);
}

KdaRun::Scratch& KdaRun::scratch() {
    if (!scratch_) scratch_.reset(new Scratch{FloatBuf(s_.state_floats()), FloatBuf(out_floats())});
    return *scratch_;
}

// Buffers of whole 4 KiB pages, at least `bytes`, for the streaming probes.
kda::FloatBuf probe_buffer(double bytes) { return FloatBuf(size_t(std::ceil(bytes / 4096)) * 1024, 1.0f); }

// The probes of device.h, each call a fixed amount of work (device.h: a few milliseconds natively). The
// memory probes stream the 64 MiB of states, which the read-modify-write probe multiplies by 1: the
// values the in-memory decode starts from stay as they are.
void KdaRun::plan_probes() {
    Scratch& w = scratch();
    DeviceLimits& d = result_.device;
    d.lanes = simd_width();
    probes_.push_back({[] { return probe_mul_add(kProbeIters); }, &d.mul_add_flops});
    if (fma_enabled()) probes_.push_back({[] { return probe_fma(kProbeIters); }, &d.fma_flops});
    w.l1 = probe_buffer(kL1ProbeBytes), w.l2 = probe_buffer(kL2ProbeBytes);
    w.state = probe_buffer(4.0 * double(s_.state_floats()));
    // The runnable model's weights are streamed from a buffer of their size, if the run has a model.
    const double weights = model_.rates().decode_work.weight_bytes;
    if (weights > 0) w.weights = probe_buffer(weights);
    FloatBuf* bufs[kMemLevels] = {&w.l1, &w.l2, &w.many, &w.state, &w.weights};
    for (size_t l = 0; l < kMemLevels; ++l) {
        FloatBuf* b = bufs[l];
        if (b->empty()) continue;
        d.level_bytes[l] = 4.0 * double(b->size());
        const int passes = probe_passes(d.level_bytes[l]);
        probes_.push_back(
            {[b, passes] { return probe_read(b->data(), b->size(), passes); }, &d.read_bytes[l]});
        probes_.push_back(
            {[b, passes] { return probe_rmw(b->data(), b->size(), passes, 1.0f); }, &d.rmw_bytes[l]});
    }
}

// The device's limits: the states the in-memory decode cycles through are written first (the memory
// probes stream them), then every probe is timed like a kernel.
double KdaRun::device(const Deadline& dl) {
    if (!fill_states(dl)) return 0;
    if (probes_.empty()) plan_probes();
    while (probe_i_ < probes_.size()) {
        if (!timed_.fn) timed_ = {probes_[probe_i_].call};
        if (!timed_.advance(dl, kTimedMs)) break;
        *probes_[probe_i_].rate = timed_.best;
        timed_ = {};
        ++probe_i_;
        if (dl.passed()) break;
    }
    if (probe_i_ < probes_.size()) return double(probe_i_) / double(probes_.size());
    scratch().l1 = {}, scratch().l2 = {}, scratch().state = {}, scratch().weights = {};
    return 1.0;
}

double KdaRun::throughput(const Deadline& dl) {
    Scratch& w = scratch();
    const int Tv = result_.timed_tokens_simd;
    const size_t n_calls = kTimedKernels + timed_chunks_.size();
    KdaThroughput& t = result_.throughput;
    while (timing_i_ < n_calls) {
        if (!timed_.fn) {
            TimedCall c =
                timing_i_ < kTimedKernels
                    ? timed_call(TimedKernel(timing_i_), w)
                    : TimedCall{Tv, prefill(w, Impl::simd, timed_chunks_[timing_i_ - kTimedKernels], Tv)};
            if (!c.fn) {  // a kernel this build does not have
                ++timing_i_;
                continue;
            }
            timed_ = {[fn = std::move(c.fn), ht = double(c.tokens) * s_.HV] { return fn(), ht; }};
        }
        if (!timed_.advance(dl, kTimedMs)) break;
        if (timing_i_ < kTimedKernels) {
            t.rate[timing_i_] = timed_.best;
        } else {
            t.chunks.push_back(timed_chunks_[timing_i_ - kTimedKernels]);
            t.chunk_rate.push_back(timed_.best);
        }
        timed_ = {};
        ++timing_i_;
        if (dl.passed()) break;
    }
    if (timing_i_ < n_calls) return double(timing_i_) / double(n_calls);
    scratch_.reset();
    return 1.0;
}

// The states the states-in-memory decode cycles through, copies of S0 written in parts (64 MiB).
bool KdaRun::fill_states(const Deadline& dl) {
    FloatBuf& many = scratch().many;
    const size_t n = s_.state_floats(), total = size_t(n_states_) * n;
    if (many.capacity() < total) many.reserve(total);
    while (many.size() < total) {
        for (size_t f = 0; f < (1u << 20) && many.size() < total; f += n)
            many.insert(many.end(), S0_.begin(), S0_.end());
        if (dl.passed()) break;
    }
    return many.size() >= total;
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
        case TimedKernel::decode_fma:
            return fma_enabled() ? TimedCall{Tv, decode(w, Impl::fma, Tv)} : TimedCall{};
        case TimedKernel::chunked_fma:
            return fma_enabled() ? TimedCall{Tv, prefill(w, Impl::fma, C, Tv)} : TimedCall{};
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
// reads and writes its state from memory instead of cache. The states are written before (fill_states).
std::function<void()> KdaRun::decode_states_in_memory(Scratch& w, int T) {
    return [this, &w, T] {
        const size_t n = s_.state_floats();
        for (int t = 0; t < T; ++t, ++states_pos_) {  // calls continue round the ring of states
            const Tokens r = x_.view().slice(s_, t, 1);
            recurrent_step(s_, w.many.data() + size_t(states_pos_ % n_states_) * n, r.q, r.k, r.v, r.g,
                           r.beta, scale_, w.o.data(), Impl::simd);
        }
    };
}

// The exactness checks, in parts: scalar against SIMD bits, decode steps against the prefill, a split
// prefill and the affine map against fp64, and the gates' range.
void KdaRun::plan_exactness() {
    exactness_.step([this] {
        result_.scalar_simd_same_bits =
            bitwise_equal(rec_o_[0], rec_o_[1]) && bitwise_equal(rec_S_[0], rec_S_[1]) &&
            bitwise_equal(ch_o_[0], ch_o_[1]) && bitwise_equal(ch_S_[0], ch_S_[1]);
    });
    // Decoding token by token gives the bits of the recurrent prefill.
    exactness_.step([this] { work_S_ = S0_, work_o_.assign(out_floats(), 0.0f); });
    exactness_.call([this] { return decode_call(work_S_.data(), work_o_.data()); });
    exactness_.step([this] {
        result_.decode_same_bits = bitwise_equal(work_S_, rec_S_[1]) && bitwise_equal(work_o_, rec_o_[1]);
    });
    // A prefill in two calls, cut off the chunk grid: chunks restart at the cut, so only the state
    // carried from the first call links the second to the tokens before it; both together against
    // fp64. (A cut on the grid would give the one-call bits by construction, chunked.h.)
    if (p_.tokens > 1) {
        const int T = p_.tokens, C = p_.chunk, A = split_point(T, C);
        exactness_.step(
            [this, A] { result_.split_at = A, work_S_ = S0_, work_o_.assign(out_floats(), 0.0f); });
        exactness_.call([this, A, C] {
            return chunked_call(Impl::simd, C, work_S_.data(), work_o_.data(), x_.view().slice(s_, 0, A));
        });
        exactness_.step([this] {
            if (p_.falsify == KdaFalsify::split_carry) work_S_ = S0_;
        });
        exactness_.call([this, A, C, T] {
            return chunked_call(Impl::simd, C, work_S_.data(), work_o_.data() + size_t(A) * s_.v_row(),
                                x_.view().slice(s_, A, T - A));
        });
        exactness_.step([this] { result_.split_vs_fp64 = vs_ref(work_o_, work_S_); });
    }
    exactness_.step([this] {
        work_S_ = {}, work_o_ = {};
        map_ = {s_, FloatBuf(size_t(s_.HV) * s_.K * s_.K), FloatBuf(s_.state_floats())};
    });
    exactness_.call([this] { return affine_call(); });
    exactness_.step([this] { check_affine(); });
    exactness_.step([this] { gate_range(); });
}

// Single-token steps from S0 over all tokens, with one bit of the state flipped midway when falsified.
PartedCall KdaRun::decode_call(float* S, float* o) {
    const int flip_after = (p_.tokens - 1) / 2;
    return PartedCall::of(size_t(p_.tokens), 4.0 * s_.HV * s_.K * s_.V,
                          [this, S, o, flip_after](size_t t0, size_t n) {
                              for (int t = int(t0); t < int(t0 + n); ++t) {
                                  const Tokens one = x_.view().slice(s_, t, 1);
                                  recurrent_step(s_, S, one.q, one.k, one.v, one.g, one.beta, scale_,
                                                 o + size_t(t) * s_.v_row());
                                  if (t == flip_after && p_.falsify == KdaFalsify::decode_state_bit)
                                      flip_bit(S[0], 22);
                              }
                          });
}

// The affine map of all tokens (segment_map, in parts).
PartedCall KdaRun::affine_call() {
    const int C = p_.chunk;
    const double work = chunk_unit_madds(s_, std::min({C, p_.tokens, kMaxChunk}), true);
    return PartedCall::of(segment_map_units(s_, p_.tokens, C), work, [this, C](size_t u, size_t n) {
        segment_map_part(s_, x_.view(), scale_, C, map_.M.data(), map_.B.data(), nullptr, nullptr, u, n);
    });
}

// The affine map of the run reproduces it from the start state: S_T = M S0 + B.
void KdaRun::check_affine() {
    if (p_.falsify == KdaFalsify::affine_b_sign) flip_bit(map_.B[largest(map_.B)], 31);
    FloatBuf S(s_.state_floats());
    affine_apply(s_, map_.M.data(), map_.B.data(), S0_.data(), S.data());
    result_.affine_vs_fp64 = compare(S.data(), ref_S_.data(), S.size());
    map_ = {};
}

// The most negative gate the inputs drew: how far a chunk's cumulative gate goes (<= 0 by the recipes,
// inputs.cpp; a non-finite result would fail the accuracy checks).
void KdaRun::gate_range() {
    result_.gate_min = 0;
    for (float g : x_.g) result_.gate_min = std::min(result_.gate_min, g);
}

// Timed on a prefix of the tokens: enough head-tokens for a stable rate, few enough that one timed call
// (which the throughput stage cannot split) stays within `work` multiply-adds: the prefix is halved until
// the recurrence and the chunked kernel at `chunk` fit.
int timed_prefix(const Shape& s, int tokens, int chunk, double work) {
    auto call_work = [&](int n) {
        const int c = std::max(1, std::min(chunk, n));
        const double chunked = chunk_unit_madds(s, c) * std::ceil(double(n) / c) * s.HV;
        return std::max(chunked, 4.0 * n * s.HV * s.K * s.V);
    };
    while (tokens > 1 && call_work(tokens) > work) tokens /= 2;
    return std::max(1, tokens);
}

}  // namespace

KdaPlan kda_plan(const KdaParams& p) {
    const int T = p.tokens, C = p.chunk;
    const Shape s = kda_shape(p);
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
    // The timed prefixes: the SIMD one also runs the throughput curve's chunk sizes, up to 128.
    plan.timed_tokens_scalar = timed_prefix(s, std::max(1, std::min(T, 256 / s.HV)), C, kTimedScalarCallWork);
    plan.timed_tokens_simd = timed_prefix(s, std::min(T, std::max({1, 65536 / s.HV, std::min(T, 2 * C)})),
                                          std::max(C, 128), kTimedCallWork);
    return plan;
}

std::unique_ptr<Run> start_kda(const KdaParams& p, const Params& raw) {
    return std::make_unique<KdaRun>(p, raw);
}

}  // namespace k3
