#include "core/cache/codec_effect.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/base/bytes.h"
#include "core/base/rng.h"
#include "core/cache/checkpoint_store.h"
#include "core/model/sampler.h"

namespace k3::serve {

std::vector<CodecEffect> measure_codec_effects(model::Model& m, const CodecEffectConfig& c,
                                               std::string* error) {
    auto fail = [error](std::string e) {
        *error = std::move(e);
        return std::vector<CodecEffect>{};
    };
    const int V = m.vocab();
    const int total = c.resume + c.continue_tokens + c.steps;
    if (c.prompts < 1 || c.resume < 1 || c.continue_tokens < 1 || c.steps < 1)
        return fail("prompts, resume, continue_tokens and steps must be positive");
    PoolResult pr = model::make_model_pool(m, 3 + 1, uint64_t(total));
    if (!pr.pool) return fail(pr.error);
    PagePool& pool = *pr.pool;
    const PoolModel& pm = m.pool_model();
    const size_t cols = size_t(m.config().head_v);
    const size_t rows = size_t(pm.recurrent_bytes_per_layer / sizeof(float)) / cols;

    std::vector<CodecEffect> out;
    for (const std::string& id : state_codec_ids()) {
        CodecEffect e;
        e.codec = *parse_state_codec(id);
        out.push_back(e);
    }
    Rng rng(c.seed);
    for (int p = 0; p < c.prompts; ++p) {
        std::vector<int32_t> toks(size_t(c.resume + c.continue_tokens));
        for (auto& t : toks) t = int32_t(rng.below(uint64_t(V)));
        const std::span<const int32_t> prefix(toks.data(), size_t(c.resume));
        const std::span<const int32_t> rest(toks.data() + c.resume, size_t(c.continue_tokens));
        model::SequenceResult x = m.new_sequence(pool, 1);
        if (!x.seq) return fail(x.error);
        if (std::string e = m.prefill(*x.seq, prefix); !e.empty()) return fail(e);
        const model::SequenceSnapshot snap = m.save(*x.seq);

        // Continues a sequence restored from snap with the state of `load` (or the exact one): the
        // logit rows of the rest of the prompt's last token and of `steps - 1` decode steps, feeding
        // `feed` (the exact run's greedy tokens) or its own greedy tokens when feed is empty.
        auto continue_from = [&](CheckpointStore* store, uint64_t handle, std::vector<int32_t>& feed,
                                 std::vector<float>& rows_out) -> std::string {
            model::SequenceResult y = m.new_sequence(pool, 2);
            if (!y.seq) return y.error;
            if (std::string e = m.restore(*y.seq, snap); !e.empty()) return e;
            if (store)
                if (std::string e = store->load(handle, *y.seq); !e.empty()) return e;
            std::vector<float> l;
            if (std::string e = m.prefill(*y.seq, rest, &l); !e.empty()) return e;
            const bool own = feed.empty();
            for (int s = 0; s < c.steps; ++s) {
                rows_out.insert(rows_out.end(), l.begin(), l.end());
                if (own) feed.push_back(model::argmax(l.data(), V));
                if (s + 1 < c.steps)
                    if (std::string e = m.decode(*y.seq, feed[size_t(s)], &l); !e.empty()) return e;
            }
            return {};
        };
        std::vector<int32_t> feed;
        std::vector<float> exact;
        if (std::string e = continue_from(nullptr, 0, feed, exact); !e.empty()) return fail(e);

        for (CodecEffect& ce : out) {
            CheckpointStore store(m, pool, ce.codec);
            ce.checkpoint_bytes = store.checkpoint_bytes();
            CheckpointRef ref;
            if (std::string e = store.save(*x.seq, &ref); !e.empty()) return fail(e);
            for (int l = 0; l < pm.linear_layers; ++l) {
                const float* s = reinterpret_cast<const float*>(pool.state_data(x.seq->state(), l));
                const CodecError err = measure_codec(ce.codec, s, rows, cols);
                ce.state_bound_ratio = std::max(ce.state_bound_ratio, err.max_bound_ratio);
                ce.state_max_abs = std::max(ce.state_max_abs, err.max_abs);
                ce.state_rel_rms = std::max(ce.state_rel_rms, err.rel_rms);
            }
            std::vector<float> got;
            if (std::string e = continue_from(&store, ref.handle, feed, got); !e.empty()) return fail(e);
            store.free(ref.handle);
            ce.bitwise = ce.bitwise && bitwise_equal(got, exact);
            for (int s = 0; s < c.steps; ++s) {
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
    }
    return out;
}

}  // namespace k3::serve
