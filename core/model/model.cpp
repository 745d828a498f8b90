#include "core/model/model.h"

#include <algorithm>
#include <cstring>

#include "core/kda/layout.h"
#include "core/model/accounting.h"
#include "core/model/attn_res.h"
#include "core/model/matmul.h"
#include "core/model/norm.h"
#include "core/model/pool_model.h"

namespace k3::model {

namespace {

uint64_t fnv(uint64_t h, uint64_t x) {
    for (int i = 0; i < 8; ++i) h = (h ^ ((x >> (8 * i)) & 0xff)) * 1099511628211ull;
    return h;
}

uint64_t config_fingerprint(const ModelConfig& c, uint64_t seed) {
    uint64_t h = 1469598103934665603ull;
    for (char ch : c.id) h = fnv(h, uint64_t(uint8_t(ch)));
    for (LayerKind k : c.layers) h = fnv(h, uint64_t(k));
    for (int v : {c.d_model, c.lin_heads, c.lin_v_heads, c.head_k, c.head_v, c.conv_width, c.attn_heads,
                  c.mla_latent, c.mla_rope, c.mla_nope_dim, c.mla_v_dim, c.vocab, c.mlp_hidden, c.gate_rank})
        h = fnv(h, uint64_t(int64_t(v)));
    h = fnv(h, uint64_t(c.state_dtype) | uint64_t(c.conv_dtype) << 8 | uint64_t(c.kv_dtype) << 16);
    // Kimi K3's design fields, only when a config has one (the fingerprints of the other presets stay).
    if (c.gate_lower_bound != 0 || c.full_rank_output_gate || c.mla_output_gate ||
        c.activation != Activation::swiglu || c.attn_res_block != 0) {
        for (float f : {c.gate_lower_bound, c.situ_beta, c.situ_linear_beta}) {
            uint32_t u;
            std::memcpy(&u, &f, 4);
            h = fnv(h, u);
        }
        h = fnv(h, uint64_t(c.full_rank_output_gate) | uint64_t(c.mla_output_gate) << 1 |
                       uint64_t(c.activation) << 8 | uint64_t(uint32_t(c.attn_res_block)) << 16);
    }
    return fnv(h, seed);
}

bool aligned(const void* p) { return reinterpret_cast<uintptr_t>(p) % alignof(float) == 0; }

}  // namespace

std::string check_runnable(const ModelConfig& c) {
    const std::string n = "model '" + c.id + "': ";
    if (!c.runnable) return n + "not a runnable preset (accounting only)";
    if (c.n_linear() < 1 || c.n_attention() < 1) return n + "needs at least one KDA and one attention layer";
    if (c.d_model < 1 || c.vocab < 1 || c.mlp_hidden < 1 || c.gate_rank < 1)
        return n + "d_model, vocab, mlp_hidden and gate_rank must be positive";
    if (c.d_model > 8192 || c.vocab > (1 << 20) || c.mlp_hidden > 65536 || c.gate_rank > 8192)
        return n + "dimensions beyond the runnable limits";
    if (std::string e = kda::Shape{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v}.problem(); !e.empty())
        return n + "KDA heads: " + e;
    if (c.conv_width < 1 || c.conv_width > 16) return n + "conv_width must be in [1, 16]";
    if (c.attn_kind != AttnKind::mla) return n + "the runnable attention layers are MLA";
    if (c.attn_heads < 1 || c.attn_heads > kMaxMlaHeads)
        return n + "attention heads must be in [1, " + std::to_string(kMaxMlaHeads) + "]";
    if (c.mla_latent < 1 || c.mla_rope < 0 || c.mla_nope_dim < 1 || c.mla_v_dim < 1)
        return n + "MLA dims must be positive";
    if (c.state_dtype != DType::fp32 || c.conv_dtype != DType::fp32 || c.kv_dtype != DType::fp32)
        return n + "the runnable model keeps state, conv windows and KV in fp32";
    if (!(c.gate_lower_bound <= 0) || !(c.gate_lower_bound > -1000))
        return n + "gate_lower_bound must be 0 (softplus gate) or a negative number above -1000";
    if (!(c.situ_beta > 0) || !(c.situ_linear_beta > 0)) return n + "the SiTU betas must be positive";
    if (c.attn_res_block < 0 || c.attn_res_block > 1024) return n + "attn_res_block must be in [0, 1024]";
    return {};
}

ModelResult Model::create(const ModelConfig& c, uint64_t seed, const ModelOptions& o) {
    if (std::string e = check_runnable(c); !e.empty()) return {nullptr, e};
    if (o.chunk < 1 || o.chunk > kda::kMaxChunk)
        return {nullptr, "chunk (" + std::to_string(o.chunk) + ") must be in [1, " +
                             std::to_string(kda::kMaxChunk) + "]"};
    if (o.prefill_slice < 1) return {nullptr, "prefill_slice must be at least 1"};
    if (o.max_context < 1) return {nullptr, "max_context must be at least 1"};
    std::unique_ptr<Model> m(new Model());
    m->config_ = c;
    m->options_ = o;
    m->options_.prefill_slice = (o.prefill_slice + o.chunk - 1) / o.chunk * o.chunk;
    m->seed_ = seed;
    m->fingerprint_ = config_fingerprint(c, seed);
    m->kda_ = kda_dims(c);
    m->mla_ = mla_dims(c);
    // The pool is sized by the accounting; the layers address the bytes by their own dims. They must agree.
    const MemoryAccount acc = account_memory(c);
    m->pool_model_ = k3::pool_model(acc);
    const uint64_t state_layer = m->kda_.layer_floats() * sizeof(float);
    const uint64_t kv_row = uint64_t(m->mla_.cache_row()) * sizeof(float);
    if (acc.state_bytes_per_layer != state_layer ||
        acc.recurrent_bytes_per_layer != m->kda_.state_floats() * 4 ||
        acc.kv_bytes_per_token_per_layer != kv_row)
        return {nullptr, "model '" + c.id + "': accounting (" + std::to_string(acc.state_bytes_per_layer) +
                             " B state, " + std::to_string(acc.kv_bytes_per_token_per_layer) +
                             " B KV per token and layer) disagrees with the layers (" +
                             std::to_string(state_layer) + ", " + std::to_string(kv_row) + ")"};
    int nl = 0, na = 0;
    for (int l = 0; l < c.n_layers(); ++l) {
        const bool lin = c.layers[size_t(l)] == LayerKind::linear;
        m->linear_index_.push_back(lin ? nl++ : -1);
        m->attention_index_.push_back(lin ? -1 : na++);
        (lin ? m->linear_layers_ : m->attention_layers_).push_back(l);
    }
    m->weights_ = make_weights(c, seed);
    return {std::move(m), {}};
}

// ---- sequences ---------------------------------------------------------------------------------

Sequence::~Sequence() {
    if (pool_) pool_->release(owner_);
}

SequenceResult Model::new_sequence(PagePool& pool, OwnerId owner) const {
    const PoolModel& pm = pool.model();
    if (!pool.has_storage()) return {nullptr, "the pool has no backing storage (PoolOptions::backing)"};
    if (pm.linear_layers != pool_model_.linear_layers ||
        pm.attention_layers != pool_model_.attention_layers ||
        pm.state_bytes_per_layer != pool_model_.state_bytes_per_layer ||
        pm.recurrent_bytes_per_layer != pool_model_.recurrent_bytes_per_layer ||
        pm.kv_bytes_per_token_per_layer != pool_model_.kv_bytes_per_token_per_layer)
        return {nullptr, "the pool was made for another model geometry than '" + config_.id + "'"};
    if (owner == kNoOwner) return {nullptr, "owner 0 means nobody"};
    if (pool.kv_tokens(owner) != 0 || !pool.states(owner).empty())
        return {nullptr, "owner " + std::to_string(owner) + " already holds pool memory"};
    StateRef s = kNoRef;
    if (AllocStatus st = pool.alloc_state(owner, &s); st != AllocStatus::ok)
        return {nullptr, std::string("no state slot: ") + alloc_status_name(st)};
    for (int l = 0; l < pm.linear_layers; ++l) {
        std::byte* p = pool.state_data(s, l);
        if (!aligned(p)) {
            pool.free_state(s);
            return {nullptr, "state bytes of layer " + std::to_string(l) + " are not float-aligned"};
        }
        std::memset(p, 0, size_t(pm.state_bytes_per_layer));  // a reused slot holds someone else's bytes
    }
    return {std::unique_ptr<Sequence>(new Sequence(&pool, owner, s)), {}};
}

std::string Model::check_sequence(const Sequence& seq) const {
    const PoolModel& pm = seq.pool().model();
    if (pm.state_bytes_per_layer != pool_model_.state_bytes_per_layer ||
        pm.kv_bytes_per_token_per_layer != pool_model_.kv_bytes_per_token_per_layer ||
        pm.linear_layers != pool_model_.linear_layers || pm.attention_layers != pool_model_.attention_layers)
        return "the sequence's pool was made for another model geometry";
    if (seq.pool().state_owner(seq.state()) != seq.owner())
        return "the sequence's state slot is no longer its own";
    if (seq.pool().kv_tokens(seq.owner()) != seq.position())
        return "the sequence's KV holds " + std::to_string(seq.pool().kv_tokens(seq.owner())) +
               " tokens, its position is " + std::to_string(seq.position());
    return {};
}

KdaState Model::kda_state(const Sequence& seq, int li) const {
    return KdaState::at(kda_, reinterpret_cast<float*>(seq.pool().state_data(seq.state(), li)));
}

KvView Model::kv_view(const Sequence& seq, int ai) const {
    KvView v;
    v.page_tokens = int(seq.pool().layout().page_tokens);
    v.row = mla_.cache_row();
    for (PageRef p : seq.pool().kv_pages(seq.owner()))
        v.pages.push_back(reinterpret_cast<float*>(seq.pool().kv_data(p, ai)));
    return v;
}

SequenceSnapshot Model::save(const Sequence& seq) const {
    SequenceSnapshot s;
    s.fingerprint = fingerprint_;
    s.position = seq.position();
    const PoolModel& pm = pool_model_;
    s.state = save_state(seq);
    const size_t row = size_t(pm.kv_bytes_per_token_per_layer);
    s.kv.resize(size_t(pm.attention_layers) * size_t(s.position) * row);
    std::byte* out = s.kv.data();
    for (int a = 0; a < pm.attention_layers; ++a) {
        const KvView v = kv_view(seq, a);
        for (uint64_t t = 0; t < s.position; ++t, out += row) std::memcpy(out, v.at(t), row);
    }
    return s;
}

std::string Model::restore(Sequence& into, const SequenceSnapshot& snap) const {
    const PoolModel& pm = pool_model_;
    if (snap.fingerprint != fingerprint_)
        return "the snapshot was written by another model (fingerprint differs)";
    if (snap.state.size() != pm.state_bytes())
        return "snapshot state is " + std::to_string(snap.state.size()) + " B, the model needs " +
               std::to_string(pm.state_bytes());
    const size_t row = size_t(pm.kv_bytes_per_token_per_layer);
    if (snap.position > options_.max_context ||
        snap.kv.size() != size_t(pm.attention_layers) * size_t(snap.position) * row)
        return "snapshot KV is " + std::to_string(snap.kv.size()) + " B, position " +
               std::to_string(snap.position) + " needs " +
               std::to_string(size_t(pm.attention_layers) * size_t(snap.position) * row);
    if (std::string e = check_sequence(into); !e.empty()) return e;
    PagePool& pool = into.pool();
    const AllocStatus st = snap.position >= into.position() ? pool.grow_kv(into.owner(), snap.position)
                                                            : pool.truncate_kv(into.owner(), snap.position);
    if (st != AllocStatus::ok) return std::string("KV pages for the snapshot: ") + alloc_status_name(st);
    write_state(into, snap.state.data());
    const std::byte* in = snap.kv.data();
    for (int a = 0; a < pm.attention_layers; ++a) {
        const KvView v = kv_view(into, a);
        for (uint64_t t = 0; t < snap.position; ++t, in += row) std::memcpy(v.at(t), in, row);
    }
    into.position_ = snap.position;
    return {};
}

SequenceResult Model::fork(const Sequence& src, OwnerId owner) const {
    if (std::string e = check_sequence(src); !e.empty()) return {nullptr, e};
    SequenceResult r = new_sequence(src.pool(), owner);
    if (!r.seq) return r;
    PagePool& pool = src.pool();
    if (AllocStatus st = pool.grow_kv(owner, src.position()); st != AllocStatus::ok)
        return {nullptr,
                std::string("KV pages for the fork: ") + alloc_status_name(st)};  // r.seq releases the slot
    pool.copy_state(src.state(), r.seq->state());
    const size_t row = size_t(pool_model_.kv_bytes_per_token_per_layer);
    for (int a = 0; a < pool_model_.attention_layers; ++a) {
        const KvView from = kv_view(src, a), to = kv_view(*r.seq, a);
        for (uint64_t t = 0; t < src.position(); ++t) std::memcpy(to.at(t), from.at(t), row);
    }
    r.seq->position_ = src.position();
    return r;
}

std::vector<std::byte> Model::save_state(const Sequence& seq) const {
    const PoolModel& pm = pool_model_;
    std::vector<std::byte> s(size_t(pm.state_bytes()));
    for (int l = 0; l < pm.linear_layers; ++l)
        std::memcpy(s.data() + size_t(l) * pm.state_bytes_per_layer, seq.pool().state_data(seq.state(), l),
                    size_t(pm.state_bytes_per_layer));
    return s;
}

std::string Model::restore_state(Sequence& seq, std::span<const std::byte> state) const {
    const PoolModel& pm = pool_model_;
    if (state.size() != pm.state_bytes())
        return "state is " + std::to_string(state.size()) + " B, the model needs " +
               std::to_string(pm.state_bytes());
    if (std::string e = check_sequence(seq); !e.empty()) return e;
    write_state(seq, state.data());
    return {};
}

void Model::write_state(Sequence& seq, const std::byte* state) const {
    const PoolModel& pm = pool_model_;
    for (int l = 0; l < pm.linear_layers; ++l)
        std::memcpy(seq.pool().state_data(seq.state(), l), state + size_t(l) * pm.state_bytes_per_layer,
                    size_t(pm.state_bytes_per_layer));
}

std::string Model::truncate(Sequence& seq, uint64_t position) const {
    if (std::string e = check_sequence(seq); !e.empty()) return e;
    if (position > seq.position())
        return "cannot truncate to " + std::to_string(position) + " tokens: the sequence has " +
               std::to_string(seq.position());
    if (AllocStatus st = seq.pool().truncate_kv(seq.owner(), position); st != AllocStatus::ok)
        return std::string("truncate KV: ") + alloc_status_name(st);
    seq.position_ = position;
    return {};
}

PoolResult make_model_pool(const Model& m, int sequences, uint64_t tokens_each, uint32_t page_tokens) {
    if (sequences < 1) return {nullptr, "sequences must be at least 1"};
    if (page_tokens < 1) return {nullptr, "page_tokens must be at least 1"};
    const PoolModel& pm = m.pool_model();
    const uint64_t pages =
        uint64_t(sequences) * std::max<uint64_t>(1, (tokens_each + page_tokens - 1) / page_tokens);
    StaticSplitConfig c;
    c.page_tokens = page_tokens;
    c.state_slots = uint64_t(sequences);
    c.budget_bytes = c.state_slots * pm.state_bytes() + pages * page_tokens * pm.kv_bytes_per_token();
    return make_static_pool(pm, c, PoolOptions{true});
}

// ---- forward -----------------------------------------------------------------------------------

std::string Model::prefill(Sequence& seq, std::span<const int32_t> tokens, std::vector<float>* logits) {
    return forward(seq, tokens, ForwardOptions{CoreMode::chunked, LogitRows::last, nullptr}, logits);
}

std::string Model::decode(Sequence& seq, int32_t token, std::vector<float>* logits) {
    return forward(seq, std::span<const int32_t>(&token, 1),
                   ForwardOptions{CoreMode::recurrent, LogitRows::last, nullptr}, logits);
}

std::string Model::forward(Sequence& seq, std::span<const int32_t> tokens, const ForwardOptions& fo,
                           std::vector<float>* logits) {
    if (logits) logits->clear();
    if (std::string e = check_sequence(seq); !e.empty()) return e;
    for (size_t i = 0; i < tokens.size(); ++i)
        if (tokens[i] < 0 || tokens[i] >= config_.vocab)
            return "token " + std::to_string(i) + " (id " + std::to_string(tokens[i]) +
                   ") is outside the vocabulary [0, " + std::to_string(config_.vocab) + ")";
    const uint64_t pos = seq.position(), T = tokens.size();
    if (T == 0) return {};
    if (pos + T > options_.max_context)
        return "context of " + std::to_string(pos + T) + " tokens exceeds max_context " +
               std::to_string(options_.max_context);
    if (AllocStatus st = seq.pool().grow_kv(seq.owner(), pos + T); st != AllocStatus::ok)
        return "no room for " + std::to_string(T) + " more tokens of KV: " + alloc_status_name(st);
    // Views into the pool, taken once: nothing allocates from the pool until the forward ends.
    std::vector<KdaState> states;
    std::vector<KvView> kvs;
    for (int l = 0; l < pool_model_.linear_layers; ++l) states.push_back(kda_state(seq, l));
    for (int a = 0; a < pool_model_.attention_layers; ++a) {
        kvs.push_back(kv_view(seq, a));
        for (float* p : kvs.back().pages)
            if (!aligned(p)) {
                seq.pool().truncate_kv(seq.owner(), pos);
                return "KV page bytes are not float-aligned";
            }
    }
    if (logits && fo.logits != LogitRows::none)
        logits->reserve(size_t(fo.logits == LogitRows::all ? T : 1) * size_t(config_.vocab));
    const uint64_t slice = uint64_t(options_.prefill_slice);
    for (uint64_t s0 = 0; s0 < T; s0 += slice) {
        const uint64_t n = std::min(slice, T - s0);
        run_slice(seq, tokens.subspan(size_t(s0), size_t(n)), pos + s0, fo, states, kvs, s0 + n == T, logits);
    }
    seq.position_ = pos + T;
    return {};
}

void Model::run_mixer(int l, int T, uint64_t pos, const ForwardOptions& fo,
                      const std::vector<KdaState>& kda_states, const std::vector<KvView>& kv_views) {
    const BlockWeights& b = weights_.blocks[size_t(l)];
    if (b.kind == LayerKind::linear) {
        const int li = linear_index_[size_t(l)];
        kda_forward(b.kda, kda_, kda_states[size_t(li)], xn_.data(), T, kda_acts_, out_.data(), fo.core,
                    options_.chunk, options_.impl);
        if (fo.observer) fo.observer->on_kda(l, li, pos, xn_.data(), kda_acts_);
    } else {
        const int ai = attention_index_[size_t(l)];
        mla_forward(b.mla, mla_, kv_views[size_t(ai)], pos, xn_.data(), T, mla_acts_, out_.data(),
                    options_.impl);
        if (fo.observer) fo.observer->on_mla(l, ai, pos, xn_.data(), mla_acts_);
    }
}

// Attention residuals (attn_res.h): h_ is the running prefix sum, blocks_ [T][blocks][d] the sealed
// block sums, out_ the attention output (mlp = true). Makes xn_, the input of layer l's attention
// (mlp = false) or of its MLP.
void Model::attn_res_input(int l, int T, bool mlp) {
    const int D = config_.d_model, B = config_.attn_res_block;
    const size_t td = size_t(T) * size_t(D), ld = size_t(attn_res_blocks_before(config_.n_layers(), B)) * D;
    const bool seal = l % B == 0;
    const BlockWeights& b = weights_.blocks[size_t(l)];
    if (!mlp) {  // h_ already holds the previous MLP's output (run_slice adds it)
        if (seal)
            for (int t = 0; t < T; ++t)
                std::memcpy(blocks_.data() + size_t(t) * ld + size_t(l / B) * D, h_.data() + size_t(t) * D,
                            sizeof(float) * D);
    } else if (seal) {
        std::memcpy(h_.data(), out_.data(), sizeof(float) * td);  // the new block starts here
    } else {
        for (size_t e = 0; e < td; ++e) h_[e] = h_[e] + out_[e];
    }
    const int n = attn_res_blocks_before(l, B) + (mlp && seal ? 1 : 0);
    attn_res_mix(blocks_.data(), n, ld, h_.data(), T, D, mlp ? b.mlp_res : b.attn_res, kRmsEps, mix_.data());
    rmsnorm_rows(mix_.data(), T, D, D, (mlp ? b.mlp_norm : b.attn_norm).data(), kRmsEps, xn_.data(), D);
}

void Model::run_slice(Sequence& seq, std::span<const int32_t> tokens, uint64_t pos, const ForwardOptions& fo,
                      const std::vector<KdaState>& kda_states, const std::vector<KvView>& kv_views,
                      bool want_last, std::vector<float>* logits) {
    const int T = int(tokens.size()), D = config_.d_model, B = config_.attn_res_block;
    const Impl impl = options_.impl;
    const size_t td = size_t(T) * size_t(D);
    if (h_.size() < td) h_.resize(td), xn_.resize(td), out_.resize(td), mix_.resize(td);
    const int nb = B > 0 ? attn_res_blocks_before(config_.n_layers(), B) : 0;
    if (blocks_.size() < td * size_t(nb)) blocks_.resize(td * size_t(nb));
    for (int t = 0; t < T; ++t)
        std::memcpy(h_.data() + size_t(t) * D, weights_.embed.data() + size_t(tokens[size_t(t)]) * D,
                    sizeof(float) * D);
    for (int l = 0; l < config_.n_layers(); ++l) {
        const BlockWeights& b = weights_.blocks[size_t(l)];
        if (B > 0)
            attn_res_input(l, T, false);
        else
            rmsnorm_rows(h_.data(), T, D, D, b.attn_norm.data(), kRmsEps, xn_.data(), D);
        run_mixer(l, T, pos, fo, kda_states, kv_views);
        if (B > 0) {
            attn_res_input(l, T, true);
        } else {
            for (size_t e = 0; e < td; ++e) h_[e] = h_[e] + out_[e];
            rmsnorm_rows(h_.data(), T, D, D, b.mlp_norm.data(), kRmsEps, xn_.data(), D);
        }
        mlp_forward(b.mlp, MlpAct::of(config_), xn_.data(), T, mlp_acts_, out_.data(), impl);
        for (size_t e = 0; e < td; ++e) h_[e] = h_[e] + out_[e];
    }
    if (B > 0) {
        attn_res_mix(blocks_.data(), nb, size_t(nb) * D, h_.data(), T, D, weights_.output_res, kRmsEps,
                     mix_.data());
        std::memcpy(h_.data(), mix_.data(), sizeof(float) * td);
    }
    if (!logits || fo.logits == LogitRows::none || (fo.logits == LogitRows::last && !want_last)) return;
    const int first = fo.logits == LogitRows::all ? 0 : T - 1, rows = T - first, V = config_.vocab;
    rmsnorm_rows(h_.data() + size_t(first) * D, rows, D, D, weights_.final_norm.data(), kRmsEps, xn_.data(),
                 D);
    if (logit_rows_.size() < size_t(rows) * V) logit_rows_.resize(size_t(rows) * V);
    matmul(xn_.data(), rows, D, weights_.lm_head.view(), logit_rows_.data(), V, impl);
    logits->insert(logits->end(), logit_rows_.begin(), logit_rows_.begin() + ptrdiff_t(rows) * V);
}

}  // namespace k3::model
