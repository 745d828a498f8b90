#include "core/lifecycle/migrate.h"

#include <algorithm>

namespace k3::lifecycle {

BlobLayout model_layout(const model::Model& m) {
    return BlobLayout::of(m.config(), uint32_t(m.options().chunk));
}

BlobExpect expect_for(const model::Model& m, std::optional<uint64_t> consumed) {
    BlobExpect e;
    e.model_hash = m.fingerprint();
    e.layout = model_layout(m);
    e.vocab = m.vocab();
    e.consumed = consumed;
    return e;
}

RequestState capture(const model::Model& m, const Request& r, MigrationStrategy s, uint64_t checkpoint) {
    RequestState st;
    st.model_hash = m.fingerprint();
    st.layout = model_layout(m);
    st.consumed = r.consumed();
    st.prompt_tokens = r.prompt_tokens;
    st.tokens = r.tokens;
    st.sampler = {r.sampler.temperature, r.sampler.rng.state()};
    switch (s) {
        case MigrationStrategy::move_all: {
            model::SequenceSnapshot snap = m.save(*r.seq);
            st.contents = kBlobAll;
            st.position = snap.position;
            st.state = std::move(snap.state);
            st.kv = std::move(snap.kv);
            break;
        }
        case MigrationStrategy::move_kv: {
            // The KV rows up to the checkpoint, layer by layer (save() lays out every layer's rows in turn).
            const model::SequenceSnapshot snap = m.save(*r.seq);
            const uint64_t c = std::min(checkpoint, snap.position);
            const size_t row = size_t(st.layout.kv_bytes_per_token_per_layer());
            st.contents = kBlobKv | kBlobTokens | kBlobSampler;
            st.position = c;
            for (uint32_t a = 0; a < st.layout.attention_layers; ++a) {
                const auto first = snap.kv.begin() + ptrdiff_t(size_t(a) * size_t(snap.position) * row);
                st.kv.insert(st.kv.end(), first, first + ptrdiff_t(size_t(c) * row));
            }
            break;
        }
        case MigrationStrategy::recompute:
            st.contents = kBlobTokens | kBlobSampler;
            st.position = 0;
            break;
    }
    return st;
}

BlobStatus resume(model::Model& m, PagePool& pool, OwnerId owner, const RequestState& r,
                  const StateCheckpoint* ckpt, Request* out, ResumeInfo* info) {
    ResumeInfo local;
    ResumeInfo& in = info ? *info : local;
    in = {};
    if (BlobStatus s = check_blob(r, expect_for(m)); !s.ok()) return s;
    const bool has_state = r.contents & kBlobRecurrent, has_kv = r.contents & kBlobKv;
    if (!(r.contents & kBlobSampler))
        return {BlobError::bad_header, "the blob carries no sampler state", kOffContents};
    if (r.position > 0 && !has_kv)
        return {BlobError::bad_header, "the blob has a position but no KV: attention layers cannot resume",
                kOffContents};
    model::SequenceSnapshot snap;
    snap.fingerprint = r.model_hash;
    snap.position = r.position;
    snap.kv = r.kv;
    if (has_state) {
        snap.state = r.state;
    } else if (r.position > 0) {
        if (!ckpt)
            return {BlobError::position_mismatch,
                    "the blob has KV for " + std::to_string(r.position) +
                        " tokens but no KDA state, and no checkpoint "
                        "is given",
                    kOffPosition};
        if (ckpt->model_hash != m.fingerprint())
            return {BlobError::model_mismatch, "the checkpoint was taken on another model", kOffModelHash};
        if (ckpt->position != r.position)
            return {BlobError::position_mismatch,
                    "the checkpoint is at " + std::to_string(ckpt->position) + " tokens, the blob's KV at " +
                        std::to_string(r.position),
                    kOffPosition};
        snap.state = ckpt->state;
        in.used_checkpoint = true;
    }
    model::SequenceResult s = m.new_sequence(pool, owner);  // zero state, empty KV
    if (!s.seq) return {BlobError::resume_failed, s.error, 0};
    if (!snap.state.empty())
        if (std::string e = m.restore(*s.seq, snap); !e.empty()) return {BlobError::resume_failed, e, 0};
    in.restored_position = r.position;
    // Re-feed [position, consumed) along the original path.
    const uint64_t p = r.position, P = r.consumed, prompt = r.prompt_tokens;
    in.exact_path = p == 0 || p >= prompt || p % uint64_t(m.options().chunk) == 0;
    if (p < std::min(prompt, P)) {
        const std::span<const int32_t> part(r.tokens.data() + p, size_t(std::min(prompt, P) - p));
        if (std::string e = m.prefill(*s.seq, part); !e.empty()) return {BlobError::resume_failed, e, 0};
        in.prefilled = part.size();
    }
    for (uint64_t t = std::max(p, prompt); t < P; ++t) {
        if (std::string e = m.decode(*s.seq, r.tokens[size_t(t)]); !e.empty())
            return {BlobError::resume_failed, e, 0};
        ++in.decoded;
    }
    in.recomputed_tokens = P - p;
    Request q;
    q.seq = std::move(s.seq);
    q.tokens = r.tokens;
    q.prompt_tokens = prompt;
    q.sampler.temperature = r.sampler.temperature;
    q.sampler.rng = Rng::from_state(r.sampler.rng);
    *out = std::move(q);
    return {};
}

}  // namespace k3::lifecycle
