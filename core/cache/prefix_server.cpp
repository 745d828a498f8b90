#include "core/cache/prefix_server.h"

#include <algorithm>
#include <numeric>

#include "core/base/clock.h"
#include "core/cache/request_flow.h"
#include "core/model/sampler.h"

namespace k3::serve {

namespace {

bool flagged(const std::vector<uint8_t>& flags, uint64_t i) {
    return i < flags.size() && flags[size_t(i)] != 0;
}

void set_flag(std::vector<uint8_t>& flags, uint64_t i, bool on) {
    if (i >= flags.size()) flags.resize(size_t(i) + 1, 0);
    flags[size_t(i)] = on;
}

}  // namespace

PrefixServer::PrefixServer(model::Model& m, PagePool& pool, const ServerConfig& c)
    : model_(m), pool_(pool), cfg_(c), pages_(pool), states_(m, pool, c.codec) {
    cache_ = std::make_unique<RadixCache>(cfg_.cache, this);
}

PrefixServer::~PrefixServer() {
    cache_.reset();  // hands every page and checkpoint back through the observer
    if (stale_) states_.free(stale_);
}

std::string PrefixServer::check_config(const model::Model& m, const PagePool& pool, const ServerConfig& c) {
    if (!pool.has_storage()) return "the pool has no backing storage";
    const PoolModel& a = pool.model();
    const PoolModel& b = m.pool_model();
    if (a.linear_layers != b.linear_layers || a.attention_layers != b.attention_layers ||
        a.state_bytes_per_layer != b.state_bytes_per_layer ||
        a.kv_bytes_per_token_per_layer != b.kv_bytes_per_token_per_layer)
        return "the pool was made for another model geometry";
    if (c.cache.page_size != pool.layout().page_tokens)
        return "cache page size " + std::to_string(c.cache.page_size) + " differs from the pool's page of " +
               std::to_string(pool.layout().page_tokens) + " tokens";
    if (c.policy.places_interval() && (c.policy.interval == 0 || c.policy.interval % c.cache.page_size != 0))
        return "checkpoint interval " + std::to_string(c.policy.interval) +
               " is not a multiple of the page size";
    if (c.policy.chunk != uint32_t(m.options().chunk))
        return "policy chunk " + std::to_string(c.policy.chunk) + " differs from the model's kernel chunk " +
               std::to_string(m.options().chunk);
    return {};
}

uint64_t PrefixServer::held_kv_bytes() const {
    return cache_->stats().kv_tokens * pool_.model().kv_bytes_per_token();
}

void PrefixServer::clear() {
    cache_->clear();
    if (stale_) states_.free(stale_);
    stale_ = 0;
    exact_pages_.clear();
    exact_checkpoints_.clear();
}

void PrefixServer::kv_removed(const TokenSeq&, uint64_t, uint64_t, std::span<const uint32_t> pages) {
    for (uint32_t p : pages)
        if (pages_.release(p)) --tree_page_refs_;
}

void PrefixServer::state_freed(const CheckpointRef& ref) { states_.free(ref.handle); }

std::string PrefixServer::audit() const {
    if (std::string e = cache_->audit(); !e.empty()) return "radix tree: " + e;
    if (std::string e = pages_.audit(); !e.empty()) return "KV pages: " + e;
    if (std::string e = pool_.audit(); !e.empty()) return "pool: " + e;
    const uint64_t P = cfg_.cache.page_size;
    uint64_t tree_pages = 0;
    for (const NodeView& n : cache_->nodes())
        if (n.id != kRoot) tree_pages += (n.end - n.start) / P;
    if (tree_pages != tree_page_refs_)
        return "the tree spans " + std::to_string(tree_pages) + " pages but holds " +
               std::to_string(tree_page_refs_) + " page references";
    if (pages_.references() != tree_page_refs_)
        return std::to_string(pages_.references() - tree_page_refs_) +
               " page references held outside the tree between requests";
    const uint64_t cps = cache_->stats().live_checkpoints + (stale_ ? 1 : 0);
    if (states_.stats().live != cps)
        return std::to_string(states_.stats().live) +
               " checkpoints live in the store, the tree accounts for " + std::to_string(cps);
    const PoolStats ps = pool_.stats();
    if (ps.kv_pages != pages_.live_pages())
        return "the pool holds " + std::to_string(ps.kv_pages) + " KV pages, the page table " +
               std::to_string(pages_.live_pages());
    const uint64_t slots = states_.codec() == StateCodec::fp32 ? states_.stats().live : 0;
    if (ps.states != slots)
        return "the pool holds " + std::to_string(ps.states) + " state slots, the checkpoints " +
               std::to_string(slots);
    return {};
}

ServeOutcome PrefixServer::serve(const ServeRequest& r) {
    ServeOutcome o;
    const uint64_t P = cfg_.cache.page_size;
    const int V = model_.vocab();
    auto refuse = [&o](std::string why) {
        o.error = std::move(why);
        return o;
    };
    const bool given = !r.outputs.empty();
    const uint64_t gen = given ? r.outputs.size() : uint64_t(std::max(r.gen, 0));
    if (r.prompt.empty()) return refuse("the prompt is empty");
    if (gen == 0) return refuse("no output tokens asked for");
    for (size_t i = 0; i < r.prompt.size() + (given ? r.outputs.size() : 0); ++i) {
        const int32_t t = i < r.prompt.size() ? r.prompt[i] : r.outputs[i - r.prompt.size()];
        if (t < 0 || t >= V)
            return refuse("token " + std::to_string(i) + " (id " + std::to_string(t) +
                          ") is outside the vocabulary [0, " + std::to_string(V) + ")");
    }
    o.prompt_len = r.prompt.size();
    o.fed_len = o.prompt_len + gen - 1;
    o.cache_len = o.fed_len / P * P;

    std::vector<Token> toks(r.prompt.begin(), r.prompt.end());
    if (given) toks.insert(toks.end(), r.outputs.begin(), r.outputs.end());
    TokenSeqPtr q = TokenSeq::literal(toks);

    // ---- match and resume ----
    const bool cached = cfg_.reuse != Reuse::none;
    Admission a;
    uint64_t handle = 0;
    if (cached) {
        a = admit_request(*cache_, cfg_.policy, *q, o.prompt_len - 1, o.fed_len);
        a.cache_len = o.cache_len;  // admit_request caps it by q, which lacks generated outputs
        o.kv_hit = a.kv_hit;
        o.state_hit = a.state_hit;
        if (cfg_.reuse == Reuse::state) {
            o.resumed_at = a.state_hit;
            if (a.state_hit > 0) handle = a.lease.state.handle;
            a.plan = plan_checkpoints(cfg_.policy, uint32_t(P), o.cache_len, a.state_hit, a.kv_hit);
            // An end state inside the prompt, off the chunk grid: take it at the grid below instead.
            const uint64_t grid = std::lcm<uint64_t>(uint64_t(model_.options().chunk), P);
            for (PlannedCheckpoint& pc : a.plan)
                if (pc.kind == CheckpointKind::end && pc.pos < o.prompt_len && pc.pos % grid != 0) {
                    pc.pos = pc.pos / grid * grid;
                    ++o.ends_aligned;
                }
            std::erase_if(a.plan, [&](const PlannedCheckpoint& pc) { return pc.pos <= a.state_hit; });
            std::stable_sort(a.plan.begin(), a.plan.end(),
                             [](const PlannedCheckpoint& x, const PlannedCheckpoint& y) {
                                 return x.pos != y.pos ? x.pos < y.pos : int(x.kind) > int(y.kind);
                             });
            a.plan.erase(std::unique(a.plan.begin(), a.plan.end(),
                                     [](const PlannedCheckpoint& x, const PlannedCheckpoint& y) {
                                         return x.pos == y.pos;
                                     }),
                         a.plan.end());
        } else {
            // The bug under study: the KV-visible prefix is skipped, the state is not where it should be.
            o.resumed_at = a.kv_hit;
            if (o.resumed_at > 0 && cfg_.kv_only_start == KvOnlyStart::stale) handle = stale_;
            o.state_matches = o.resumed_at == 0;
            a.plan.clear();
        }
    }
    o.recomputed = o.prompt_len - o.resumed_at;

    const OwnerId owner = next_owner_++;
    std::unique_ptr<model::Sequence> seq;
    std::vector<PageRef> table;
    std::vector<CheckpointRef> saved;
    std::vector<PlannedCheckpoint> kept;
    bool mounted = false;
    auto fail = [&](std::string why) {
        if (mounted) (void)pages_.unmount(owner, &table);
        for (const CheckpointRef& c : saved) states_.free(c.handle);
        if (cached && a.lease.active) cache_->release(a.lease);
        pages_.release_all(table);
        seq.reset();
        o.error = std::move(why);
        o.logits.clear();
        return o;
    };

    const Stopwatch sw;
    model::SequenceResult sr = model_.new_sequence(pool_, owner);
    if (!sr.seq) return fail("working sequence: " + sr.error);
    seq = std::move(sr.seq);
    if (o.resumed_at > 0) {
        const std::vector<uint32_t> tp = cache_->kv_pages(a.lease);
        const size_t n = size_t(o.resumed_at / P);
        if (tp.size() < n) return fail("the tree lent fewer pages than its match");
        table.assign(tp.begin(), tp.begin() + ptrdiff_t(n));
        pages_.retain_all(table);
        o.pages_borrowed = n;
    }
    if (std::string e = pages_.mount(owner, table); !e.empty()) return fail("mount: " + e);
    mounted = true;
    if (std::string e = model_.adopt_kv(*seq); !e.empty()) return fail("adopt: " + e);
    if (handle)
        if (std::string e = states_.load(handle, *seq); !e.empty()) return fail("resume: " + e);
    o.resumed_from = handle;

    // ---- prefill the rest, split at planned checkpoints ----
    const uint64_t chunk = uint64_t(model_.options().chunk);
    size_t next = 0;
    auto save_here = [&]() -> std::string {
        while (next < a.plan.size() && a.plan[next].pos <= seq->position()) {
            if (a.plan[next].pos == seq->position()) {
                CheckpointRef c;
                if (std::string e = states_.save(*seq, &c); !e.empty()) return e;
                saved.push_back(c);
                kept.push_back(a.plan[next]);
                o.checkpoints.push_back(a.plan[next].pos);
                o.checkpoint_handles.push_back(c.handle);
            }
            ++next;
        }
        return {};
    };
    std::vector<float> logits;
    std::span<const int32_t> prompt(r.prompt);
    for (uint64_t cur = o.resumed_at; cur < o.prompt_len;) {
        uint64_t stop = o.prompt_len;
        while (next < a.plan.size() && a.plan[next].pos <= cur) ++next;
        if (next < a.plan.size() && a.plan[next].pos < o.prompt_len) stop = a.plan[next].pos;
        const bool last = stop == o.prompt_len;
        if (std::string e = model_.prefill(*seq, prompt.subspan(size_t(cur), size_t(stop - cur)),
                                           last ? &logits : nullptr);
            !e.empty())
            return fail("prefill: " + e);
        if (!last && stop % chunk != 0 && !o.split_off_grid) {
            o.split_off_grid = true;
            o.first_off_grid_split = stop;
        }
        cur = stop;
        if (std::string e = save_here(); !e.empty()) return fail("checkpoint: " + e);
    }
    o.prefill_ms = sw.ms();

    // ---- decode ----
    const Stopwatch sd;
    o.logits.reserve(size_t(gen) * size_t(V));
    o.logits.insert(o.logits.end(), logits.begin(), logits.end());
    o.outputs.push_back(given ? r.outputs[0] : model::argmax(logits.data(), V));
    for (uint64_t i = 1; i < gen; ++i) {
        if (std::string e = model_.decode(*seq, o.outputs.back(), &logits); !e.empty())
            return fail("decode: " + e);
        if (std::string e = save_here(); !e.empty()) return fail("checkpoint: " + e);
        o.logits.insert(o.logits.end(), logits.begin(), logits.end());
        o.outputs.push_back(given ? r.outputs[size_t(i)] : model::argmax(logits.data(), V));
    }
    o.decode_ms = sd.ms();
    if (std::string e = pages_.unmount(owner, &table); !e.empty()) return fail("unmount: " + e);
    mounted = false;

    // ---- insert ----
    if (cached) {
        if (!given) {
            toks.insert(toks.end(), o.outputs.begin(), o.outputs.end());
            q = TokenSeq::literal(toks);
        }
        const uint64_t n = o.cache_len / P;
        if (table.size() < n) return fail("the request holds fewer pages than it caches");
        // The tree adopts the pages of the part it does not hold yet: count its references first, an
        // eviction inside complete_request may hand them straight back.
        const uint64_t pre = cache_->match(*q, o.cache_len).kv_len;
        for (uint64_t i = pre / P; i < n; ++i) pages_.retain(table[size_t(i)]);
        tree_page_refs_ += n - pre / P;
        a.plan = kept;
        const Completion c = complete_request(*cache_, cfg_.policy, a, q, saved,
                                              std::span<const uint32_t>(table.data(), size_t(n)));
        saved.clear();  // the tree owns them now
        o.insert = c.insert;
        o.retention_dropped = c.retention_dropped;
        if (c.insert.existing_len != pre)
            o.error = "internal: the tree held " + std::to_string(c.insert.existing_len) +
                      " tokens at insert, its match said " + std::to_string(pre);
        if (cfg_.reuse == Reuse::kv_only && cfg_.kv_only_start == KvOnlyStart::stale) {
            if (stale_) states_.free(stale_);
            stale_ = 0;
            CheckpointRef s;
            if (states_.save(*seq, &s).empty()) stale_ = s.handle;
        }
    }
    o.pages = table;
    if (o.error.empty()) judge_exactness(o);
    pages_.release_all(table);
    seq.reset();
    return o;
}

ResumeExactness PrefixServer::start_exactness(const ServeOutcome& o) const {
    if (o.resumed_at == 0) return ResumeExactness::bitwise;
    if (cfg_.reuse != Reuse::state) return ResumeExactness::state_of_other_position;
    if (cfg_.codec != StateCodec::fp32) return ResumeExactness::lossy_checkpoint;
    if (o.resumed_at % uint64_t(model_.options().chunk) != 0) return ResumeExactness::off_chunk_grid;
    if (!flagged(exact_checkpoints_, o.resumed_from)) return ResumeExactness::inexact_checkpoint;
    for (uint64_t i = 0; i < o.pages_borrowed; ++i)
        if (!flagged(exact_pages_, o.pages[size_t(i)])) return ResumeExactness::inexact_pages;
    return ResumeExactness::bitwise;
}

void PrefixServer::judge_exactness(ServeOutcome& o) {
    const uint64_t P = cfg_.cache.page_size, chunk = uint64_t(model_.options().chunk);
    const ResumeExactness start = start_exactness(o);
    const bool exact_start = start == ResumeExactness::bitwise;
    o.exactness = exact_start && o.split_off_grid ? ResumeExactness::split_off_grid : start;
    // The request computed exactly what it prefilled from an exact start up to its first split off
    // the grid; decoded rows are not (the recurrent kernel is not the chunked one).
    const uint64_t exact_end = !exact_start       ? o.resumed_at
                               : o.split_off_grid ? o.first_off_grid_split
                                                  : o.prompt_len;
    for (size_t i = size_t(o.pages_borrowed); i < o.pages.size(); ++i)
        set_flag(exact_pages_, o.pages[i], uint64_t(i + 1) * P <= exact_end);
    for (size_t j = 0; j < o.checkpoints.size(); ++j)
        set_flag(exact_checkpoints_, o.checkpoint_handles[j],
                 exact_start && o.checkpoints[j] <= exact_end && o.checkpoints[j] % chunk == 0 &&
                     cfg_.codec == StateCodec::fp32);
}

}  // namespace k3::serve
