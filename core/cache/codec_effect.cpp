#include "core/cache/codec_effect.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/rng.h"
#include "core/cache/checkpoint_store.h"
#include "core/model/sampler.h"

namespace k3::serve {

namespace {

// Where one prompt's runs continue from: its prefix prefilled and saved, the rest still to feed.
struct ResumePoint {
    model::Model& m;
    PagePool& pool;
    const model::SequenceSnapshot& snap;  // the sequence after the prefix
    std::span<const int32_t> rest;        // the prompt's tokens after the prefix
    int steps;                            // logit rows to compare
    const CodecEffectConfig& config;
};

// One entry per codec of state_codec_ids(), nothing measured yet.
std::vector<CodecEffect> one_per_codec() {
    std::vector<CodecEffect> out;
    for (const std::string& id : state_codec_ids()) {
        CodecEffect e;
        e.codec = *parse_state_codec(id);
        out.push_back(e);
    }
    return out;
}

// The logit rows of `seq` fed `tokens` by one prefill (the last token's row), then `steps - 1` decode
// steps, feeding `feed` (the exact run's greedy tokens) or its own greedy tokens when feed is empty.
std::string feed_rows(model::Model& m, model::Sequence& seq, std::span<const int32_t> tokens, int steps,
                      std::vector<int32_t>& feed, std::vector<float>& rows_out) {
    const int V = m.vocab();
    std::vector<float> l;
    if (std::string e = m.prefill(seq, tokens, &l); !e.empty()) return e;
    const bool own = feed.empty();
    for (int s = 0; s < steps; ++s) {
        rows_out.insert(rows_out.end(), l.begin(), l.end());
        if (own) feed.push_back(model::argmax(l.data(), V));
        if (s + 1 < steps)
            if (std::string e = m.decode(seq, feed[size_t(s)], &l); !e.empty()) return e;
    }
    return {};
}

// Continues a sequence restored from rp.snap with the state of `handle` in `store` (or the exact one
// when store is null): the rows of feed_rows over the rest of the prompt. Before a load the restored
// KDA state is wiped, so that the checkpoint alone supplies it.
std::string continue_from(const ResumePoint& rp, CheckpointStore* store, uint64_t handle,
                          std::vector<int32_t>& feed, std::vector<float>& rows_out) {
    model::Model& m = rp.m;
    model::SequenceResult y = m.new_sequence(rp.pool, 2);
    if (!y.seq) return y.error;
    if (std::string e = m.restore(*y.seq, rp.snap); !e.empty()) return e;
    if (store) {
        const std::vector<std::byte> zero(size_t(m.pool_model().state_bytes()));
        if (std::string e = m.restore_state(*y.seq, zero); !e.empty()) return e;
        if (std::string e = store->load(handle, *y.seq); !e.empty()) return e;
    }
    return feed_rows(m, *y.seq, rp.rest, rp.steps, feed, rows_out);
}

// The cold run: a fresh sequence prefills the whole prompt in one call (no snapshot, no checkpoint).
std::string cold_rows(model::Model& m, PagePool& pool, std::span<const int32_t> prompt, int steps,
                      std::vector<int32_t>& feed, std::vector<float>& rows_out) {
    model::SequenceResult z = m.new_sequence(pool, 3);
    if (!z.seq) return z.error;
    return feed_rows(m, *z.seq, prompt, steps, feed, rows_out);
}

// The codec's error on the real state of every linear layer of `seq`, folded into ce's maxima.
void measure_state_error(const model::Model& m, PagePool& pool, const model::Sequence& seq,
                         bool flip_encoded_bit, CodecEffect& ce) {
    const PoolModel& pm = m.pool_model();
    const size_t cols = size_t(m.config().head_v);
    const size_t rows = size_t(pm.recurrent_bytes_per_layer / sizeof(float)) / cols;
    for (int l = 0; l < pm.linear_layers; ++l) {
        const float* s = reinterpret_cast<const float*>(pool.state_data(seq.state(), l));
        const CodecError err = measure_codec(ce.codec, s, rows, cols, flip_encoded_bit);
        ce.state_bound_ratio = std::max(ce.state_bound_ratio, err.max_bound_ratio);
        ce.state_max_abs = std::max(ce.state_max_abs, err.max_abs);
        ce.state_rel_rms = std::max(ce.state_rel_rms, err.rel_rms);
    }
}

// The resumed run's logit rows against the exact run's, folded into ce.
void compare_logits(const std::vector<float>& exact, const std::vector<float>& got, int steps, int V,
                    CodecEffect& ce) {
    ce.bitwise = ce.bitwise && bitwise_equal(got, exact);
    for (int s = 0; s < steps; ++s) {
        const float* a = exact.data() + size_t(s) * size_t(V);
        const float* b = got.data() + size_t(s) * size_t(V);
        for (int i = 0; i < V; ++i) {
            ce.max_logit_diff = std::max(ce.max_logit_diff, std::fabs(double(a[i]) - double(b[i])));
            ce.logit_scale = std::max(ce.logit_scale, std::fabs(double(a[i])));
        }
        ++ce.rows;
        ce.top1_agree += model::argmax(a, V) == model::argmax(b, V);
    }
}

// The logits a run computed against the run it must reproduce.
struct ReferenceRows {
    const std::vector<float>& exact;  // restored from the snapshot with its own state
    const std::vector<float>& cold;   // the whole prompt prefilled in one call
};

// One codec on one prompt: checkpoint `seq` (the prompt's prefix) with the codec, measure the state
// error, resume from the checkpoint and compare with the exact run (fed `feed`) and the cold run.
std::string measure_codec_at(const ResumePoint& rp, const model::Sequence& seq, std::vector<int32_t>& feed,
                             const ReferenceRows& ref_rows, CodecEffect& ce) {
    CheckpointStore store(rp.m, rp.pool, ce.codec);
    ce.checkpoint_bytes = store.checkpoint_bytes();
    CheckpointRef ref;
    if (std::string e = store.save(seq, &ref); !e.empty()) return e;
    // Byte 3, bit 7: the sign of the first stored value (fp32, the int8 row scale) or of the second.
    if (rp.config.flip_checkpoint_bit) store.flip_stored_bit(ref.handle, 3, 7);
    measure_state_error(rp.m, rp.pool, seq, rp.config.flip_encoded_bit, ce);
    std::vector<float> got;
    if (std::string e = continue_from(rp, &store, ref.handle, feed, got); !e.empty()) return e;
    store.free(ref.handle);
    compare_logits(ref_rows.exact, got, rp.steps, rp.m.vocab(), ce);
    ce.cold_bitwise = ce.cold_bitwise && bitwise_equal(got, ref_rows.cold);
    return {};
}

// One random prompt (drawn from rng) through every codec of `out`.
std::string measure_prompt(model::Model& m, PagePool& pool, const CodecEffectConfig& c, Rng& rng,
                           std::vector<CodecEffect>& out) {
    const int V = m.vocab();
    std::vector<int32_t> toks(size_t(c.resume + c.continue_tokens));
    for (auto& t : toks) t = int32_t(rng.below(uint64_t(V)));
    const std::span<const int32_t> prefix(toks.data(), size_t(c.resume));
    const std::span<const int32_t> rest(toks.data() + c.resume, size_t(c.continue_tokens));
    model::SequenceResult x = m.new_sequence(pool, 1);
    if (!x.seq) return x.error;
    if (std::string e = m.prefill(*x.seq, prefix); !e.empty()) return e;
    const model::SequenceSnapshot snap = m.save(*x.seq);
    const ResumePoint rp{m, pool, snap, rest, c.steps, c};
    // The exact run first: its greedy tokens are what every codec's run and the cold run are fed.
    std::vector<int32_t> feed;
    std::vector<float> exact, cold;
    if (std::string e = continue_from(rp, nullptr, 0, feed, exact); !e.empty()) return e;
    if (std::string e = cold_rows(m, pool, toks, c.steps, feed, cold); !e.empty()) return e;
    for (CodecEffect& ce : out)
        if (std::string e = measure_codec_at(rp, *x.seq, feed, {exact, cold}, ce); !e.empty()) return e;
    return {};
}

}  // namespace

std::vector<CodecEffect> measure_codec_effects(model::Model& m, const CodecEffectConfig& c,
                                               std::string* error) {
    auto fail = [error](std::string e) {
        *error = std::move(e);
        return std::vector<CodecEffect>{};
    };
    const int total = c.resume + c.continue_tokens + c.steps;
    if (c.prompts < 1 || c.resume < 1 || c.continue_tokens < 1 || c.steps < 1)
        return fail("prompts, resume, continue_tokens and steps must be positive");
    PoolResult pr = model::make_model_pool(m, 3 + 1, uint64_t(total));
    if (!pr.pool) return fail(pr.error);
    std::vector<CodecEffect> out = one_per_codec();
    Rng rng(c.seed);
    for (int p = 0; p < c.prompts; ++p)
        if (std::string e = measure_prompt(m, *pr.pool, c, rng, out); !e.empty()) return fail(e);
    return out;
}

}  // namespace k3::serve
