#include "core/cache/prefix_server.h"

#include <algorithm>
#include <cmath>
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

// Output tokens a request asks for: its given outputs, else `gen` generated ones.
uint64_t outputs_asked(const ServeRequest& r) {
    return !r.outputs.empty() ? r.outputs.size() : uint64_t(std::max(r.gen, 0));
}

// A prefill has a state only at chunk boundaries without changing the bits, so an end checkpoint
// inside the prompt off the grid is taken at the grid below (vLLM align mode does the same).
// Returns how many were moved.
uint32_t align_prompt_ends(std::vector<PlannedCheckpoint>& plan, uint64_t prompt_len, uint64_t grid) {
    uint32_t moved = 0;
    for (PlannedCheckpoint& pc : plan)
        if (pc.kind == CheckpointKind::end && pc.pos < prompt_len && pc.pos % grid != 0) {
            pc.pos = pc.pos / grid * grid;
            ++moved;
        }
    return moved;
}

// Moving ends may put a checkpoint at or below the resume point (the request holds that state
// already) or beside another one: restore plan_checkpoints' order, ascending and one per position,
// keeping the kind it would keep (junction > end > interval).
void restore_plan_order(std::vector<PlannedCheckpoint>& plan, uint64_t resumed_at) {
    std::erase_if(plan, [&](const PlannedCheckpoint& pc) { return pc.pos <= resumed_at; });
    std::stable_sort(plan.begin(), plan.end(), [](const PlannedCheckpoint& x, const PlannedCheckpoint& y) {
        return x.pos != y.pos ? x.pos < y.pos : int(x.kind) > int(y.kind);
    });
    plan.erase(
        std::unique(plan.begin(), plan.end(),
                    [](const PlannedCheckpoint& x, const PlannedCheckpoint& y) { return x.pos == y.pos; }),
        plan.end());
}

// SGLang's chunks, tracks and cached length (engine_plan).
void plan_sglang(const SglangConfig& c, uint64_t len, uint64_t kv_match, EnginePlan& e) {
    const bool extra = c.mode == SglangMode::extra_buffer;
    e.branching = sglang_branching(c, kv_match, e.resume);
    uint64_t prefix = e.resume, end = sglang_first_extend_end(c, prefix, len);
    for (;;) {
        e.steps.push_back(end);
        if (extra) {  // cache_unfinished_req / cache_finished_req insert up to the last track
            bool at_branch = false;
            const uint64_t at = sglang_track_pos(c, prefix, end - prefix, e.branching, &at_branch);
            if (at != 0) {
                e.states.push_back({at, at_branch ? CheckpointKind::junction : CheckpointKind::interval});
                e.cache_len = at;
            }
        } else {  // a copy of the running state at every chunk end, the final state at the prompt end
            e.states.push_back({end, end == len ? CheckpointKind::end : CheckpointKind::interval});
        }
        if (end >= len) break;
        prefix = end;
        end = sglang_next_extend_end(c, prefix, len);
    }
    if (!extra) e.cache_len = len;
}

// vLLM's hit on the block grid, its aligned steps, retained states and whole cached blocks (engine_plan).
void plan_vllm(const VllmEngineConfig& c, uint64_t len, uint64_t kv_match, EnginePlan& e) {
    const uint64_t B = c.block_tokens;
    e.kv_hit = std::min(kv_match, len - 1) / B * B;    // the attention group's chain of full blocks
    e.branching = e.kv_hit > e.resume ? e.kv_hit : 0;  // shared_prefix_boundary
    uint64_t computed = e.resume, cached = e.resume / B;
    while (computed < len) {
        const uint64_t n = vllm_aligned_split(c, computed, std::min<uint64_t>(len - computed, c.token_budget),
                                              len, e.branching);
        if (n == 0) break;  // a stalled step: the rest is prefilled in one piece
        const uint64_t end = computed + n;
        e.steps.push_back(end);
        if (end % B == 0 && end / B > cached && vllm_retained(c, end / B - 1, len, e.branching))
            e.states.push_back(
                {end, end == e.branching ? CheckpointKind::junction : CheckpointKind::interval});
        cached = std::max(cached, end / B);
        computed = end;
    }
    e.cache_len = len / B * B;
}

// ResumeFalsify::engine_misplaced: every state one page below its place (dropped at or below the resume).
void misplace_states(EnginePlan& e, uint64_t page) {
    for (PlannedCheckpoint& pc : e.states) pc.pos -= page;
    std::erase_if(e.states, [&](const PlannedCheckpoint& pc) { return pc.pos <= e.resume; });
}

// Why an engine cannot run this configuration ("" when it can).
std::string engine_config_error(const ServerConfig& c) {
    const uint64_t P = c.cache.page_size;
    if (c.engine == CacheEngine::sglang) {
        if (std::string e = sglang_config_error(c.sglang); !e.empty()) return e;
        if (c.sglang.page_size != P) return "the SGLang page size differs from the cache's";
        if (c.sglang.mamba_chunk() % P != 0)
            return "SGLang's state grid of " + std::to_string(c.sglang.mamba_chunk()) +
                   " tokens is not a multiple of the page size " + std::to_string(P);
    }
    if (c.engine == CacheEngine::vllm && (c.vllm.block_tokens == 0 || c.vllm.block_tokens % P != 0))
        return "vLLM block of " + std::to_string(c.vllm.block_tokens) +
               " tokens is not a multiple of the page size " + std::to_string(P);
    return {};
}

}  // namespace

EnginePlan engine_plan(const ServerConfig& c, uint64_t prompt_len, uint64_t kv_match, uint64_t state_match) {
    EnginePlan e;
    e.kv_hit = kv_match;
    e.resume = state_match;
    if (prompt_len == 0) return e;
    if (c.engine == CacheEngine::sglang) plan_sglang(c.sglang, prompt_len, kv_match, e);
    if (c.engine == CacheEngine::vllm) plan_vllm(c.vllm, prompt_len, kv_match, e);
    return e;
}

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
    return engine_config_error(c);
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

// One request on its way through serve(): what it holds (so that abandon() can give it all back) and
// what it has produced so far.
struct PrefixServer::InFlight {
    InFlight(const ServeRequest& req, uint64_t page_size)
        : r(req),
          given(!req.outputs.empty()),
          gen(outputs_asked(req)),
          toks(req.prompt.begin(), req.prompt.end()) {
        o.prompt_len = r.prompt.size();
        o.fed_len = o.prompt_len + gen - 1;
        o.cache_len = o.fed_len / page_size * page_size;
        if (given) toks.insert(toks.end(), r.outputs.begin(), r.outputs.end());
        q = TokenSeq::literal(toks);
    }

    const ServeRequest& r;
    const bool given;    // outputs given (teacher forcing), else generated greedily
    const uint64_t gen;  // output tokens asked for
    ServeOutcome o;
    std::vector<Token> toks;  // prompt + given outputs; generated outputs join them before the insert
    TokenSeqPtr q;            // toks as the tree sees them
    bool cached = false;      // the tree is used: matched before, inserted into after
    Admission a;              // the match, its lease and the planned checkpoints
    uint64_t handle = 0;      // the state the request resumes from (0: none, a zero state)
    OwnerId owner = 0;
    std::unique_ptr<model::Sequence> seq;  // the working sequence
    std::vector<PageRef> table;            // the request's pages in position order
    std::vector<CheckpointRef> saved;      // states it saved, the request's until the tree takes them
    std::vector<PlannedCheckpoint> kept;   // the planned checkpoints those states are
    bool mounted = false;                  // table is mounted for the model's calls
    size_t next = 0;                       // first planned checkpoint the request has not reached
    std::vector<uint64_t> steps;           // an engine's prefill step ends (empty: one piece per plan)
    size_t next_step = 0;                  // first step end the request has not reached
    std::vector<float> row;                // the latest logits row
};

ServeOutcome PrefixServer::serve(const ServeRequest& r) {
    if (std::string e = check_request(r); !e.empty()) {
        ServeOutcome refused;  // before anything is taken: nothing to give back, no owner id used
        refused.error = std::move(e);
        return refused;
    }
    // The steps of prefix_server.h; a failed step gives back everything the request holds.
    InFlight w(r, cfg_.cache.page_size);
    match_prompt(w);  // 1. match and plan
    w.owner = next_owner_++;
    const Stopwatch sw;  // prefill_ms includes the resume
    if (std::string e = resume(w); !e.empty()) return abandon(w, std::move(e));        // 2. resume
    if (std::string e = prefill_rest(w); !e.empty()) return abandon(w, std::move(e));  // 3. prefill
    w.o.prefill_ms = sw.ms();
    const Stopwatch sd;
    if (std::string e = decode_outputs(w); !e.empty()) return abandon(w, std::move(e));  // 4. decode
    w.o.decode_ms = sd.ms();
    if (std::string e = pages_.unmount(w.owner, &w.table); !e.empty()) return abandon(w, "unmount: " + e);
    w.mounted = false;
    if (w.cached)
        if (std::string e = insert_into_tree(w); !e.empty()) return abandon(w, std::move(e));  // 5. insert
    return finish(w);
}

std::string PrefixServer::check_request(const ServeRequest& r) const {
    const int V = model_.vocab();
    const bool given = !r.outputs.empty();
    if (r.prompt.empty()) return "the prompt is empty";
    if (outputs_asked(r) == 0) return "no output tokens asked for";
    for (size_t i = 0; i < r.prompt.size() + (given ? r.outputs.size() : 0); ++i) {
        const int32_t t = i < r.prompt.size() ? r.prompt[i] : r.outputs[i - r.prompt.size()];
        if (t < 0 || t >= V)
            return "token " + std::to_string(i) + " (id " + std::to_string(t) +
                   ") is outside the vocabulary [0, " + std::to_string(V) + ")";
    }
    return {};
}

void PrefixServer::match_prompt(InFlight& w) {
    ServeOutcome& o = w.o;
    w.cached = cfg_.reuse != Reuse::none;
    if (w.cached) {
        w.a = admit_request(*cache_, cfg_.policy, *w.q, o.prompt_len - 1, o.fed_len);
        w.a.cache_len = o.cache_len;  // admit_request caps it by q, which lacks generated outputs
        o.kv_hit = w.a.kv_hit;
        o.state_hit = w.a.state_hit;
        if (cfg_.reuse == Reuse::state && cfg_.engine != CacheEngine::ideal) {
            plan_engine_resume(w);
        } else if (cfg_.reuse == Reuse::state) {
            plan_state_resume(w);
        } else {
            // The bug under study: the KV-visible prefix is skipped, the state is not where it should be.
            o.resumed_at = w.a.kv_hit;
            if (o.resumed_at > 0 && cfg_.kv_only_start == KvOnlyStart::stale) w.handle = stale_;
            o.state_matches = o.resumed_at == 0;
            w.a.plan.clear();
        }
    }
    o.recomputed = o.prompt_len - o.resumed_at;
}

void PrefixServer::plan_state_resume(InFlight& w) {
    const uint64_t P = cfg_.cache.page_size;
    ServeOutcome& o = w.o;
    Admission& a = w.a;
    o.resumed_at = a.state_hit;
    if (a.state_hit > 0) w.handle = a.lease.state.handle;
    a.plan = plan_checkpoints(cfg_.policy, uint32_t(P), o.cache_len, a.state_hit, a.kv_hit);
    const uint64_t grid = std::lcm<uint64_t>(uint64_t(model_.options().chunk), P);
    o.ends_aligned += align_prompt_ends(a.plan, o.prompt_len, grid);
    restore_plan_order(a.plan, a.state_hit);
}

void PrefixServer::plan_engine_resume(InFlight& w) {
    ServeOutcome& o = w.o;
    Admission& a = w.a;
    EnginePlan e = engine_plan(cfg_, o.prompt_len, a.kv_hit, a.state_hit);
    if (cfg_.falsify == ResumeFalsify::engine_misplaced) misplace_states(e, cfg_.cache.page_size);
    o.kv_hit = e.kv_hit;
    o.resumed_at = e.resume;
    if (e.resume > 0) w.handle = a.lease.state.handle;
    o.branching = e.branching;
    o.steps = uint32_t(e.steps.size());
    o.cache_len = a.cache_len = e.cache_len;
    a.plan = std::move(e.states);
    w.steps = std::move(e.steps);
}

std::string PrefixServer::resume(InFlight& w) {
    model::SequenceResult sr = model_.new_sequence(pool_, w.owner);
    if (!sr.seq) return "working sequence: " + sr.error;
    w.seq = std::move(sr.seq);
    if (w.o.resumed_at > 0)
        if (std::string e = borrow_tree_pages(w); !e.empty()) return e;
    if (std::string e = pages_.mount(w.owner, w.table); !e.empty()) return "mount: " + e;
    w.mounted = true;
    if (std::string e = model_.adopt_kv(*w.seq); !e.empty()) return "adopt: " + e;
    // Copy-on-write: the checkpoint's state is copied into the working slot, never written.
    if (w.handle)
        if (std::string e = states_.load(w.handle, *w.seq); !e.empty()) return "resume: " + e;
    w.o.resumed_from = w.handle;
    if (cfg_.falsify != ResumeFalsify::none && w.o.resumed_at > 0) return falsify_resumed_state(w);
    return {};
}

std::string PrefixServer::falsify_resumed_state(InFlight& w) {
    const bool from_checkpoint = cfg_.reuse == Reuse::state;
    if (cfg_.falsify == ResumeFalsify::zero_state && from_checkpoint)
        return model_.restore_state(*w.seq,
                                    std::vector<std::byte>(size_t(model_.pool_model().state_bytes())));
    if (cfg_.falsify == ResumeFalsify::flip_state_bit && from_checkpoint) {
        float* s = reinterpret_cast<float*>(pool_.state_data(w.seq->state(), 0));
        const size_t n = size_t(model_.pool_model().recurrent_bytes_per_layer / sizeof(float));
        float* largest =
            std::max_element(s, s + n, [](float a, float b) { return std::fabs(a) < std::fabs(b); });
        *largest = -*largest;  // the sign bit
        return {};
    }
    if (cfg_.falsify == ResumeFalsify::exact_kv_only && cfg_.reuse == Reuse::kv_only) {
        const uint64_t n = w.o.resumed_at;
        PoolResult pr = model::make_model_pool(model_, 1, n);
        if (!pr.pool) return "falsifier pool: " + pr.error;
        model::SequenceResult side = model_.new_sequence(*pr.pool, 1);
        if (!side.seq) return "falsifier sequence: " + side.error;
        if (std::string e = model_.prefill(*side.seq, std::span(w.r.prompt).first(size_t(n))); !e.empty())
            return "falsifier prefill: " + e;
        return model_.restore_state(*w.seq, model_.save_state(*side.seq));
    }
    return {};
}

std::string PrefixServer::borrow_tree_pages(InFlight& w) {
    const std::vector<uint32_t> tp = cache_->kv_pages(w.a.lease);
    const size_t n = size_t(w.o.resumed_at / cfg_.cache.page_size);
    if (tp.size() < n) return "the tree lent fewer pages than its match";
    // Lent, not copied: the request references the tree's pages while it runs.
    w.table.assign(tp.begin(), tp.begin() + ptrdiff_t(n));
    pages_.retain_all(w.table);
    w.o.pages_borrowed = n;
    return {};
}

std::string PrefixServer::prefill_rest(InFlight& w) {
    ServeOutcome& o = w.o;
    const std::vector<PlannedCheckpoint>& plan = w.a.plan;
    const uint64_t chunk = uint64_t(model_.options().chunk);
    std::span<const int32_t> prompt(w.r.prompt);
    for (uint64_t cur = o.resumed_at; cur < o.prompt_len;) {
        // The piece ends at the next planned checkpoint inside the prompt, else at the prompt's end.
        uint64_t stop = o.prompt_len;
        while (w.next < plan.size() && plan[w.next].pos <= cur) ++w.next;
        if (w.next < plan.size() && plan[w.next].pos < o.prompt_len) stop = plan[w.next].pos;
        while (w.next_step < w.steps.size() && w.steps[w.next_step] <= cur) ++w.next_step;
        if (w.next_step < w.steps.size()) stop = std::min(stop, w.steps[w.next_step]);
        const bool last = stop == o.prompt_len;
        // Only the last piece's logits are wanted: they predict the first output.
        if (std::string e = model_.prefill(*w.seq, prompt.subspan(size_t(cur), size_t(stop - cur)),
                                           last ? &w.row : nullptr);
            !e.empty())
            return "prefill: " + e;
        o.prefilled += stop - cur;
        // A split off the chunk grid changes the request's own bits (judge_exactness needs where).
        if (!last && stop % chunk != 0 && !o.split_off_grid) {
            o.split_off_grid = true;
            o.first_off_grid_split = stop;
        }
        cur = stop;
        if (std::string e = save_planned_states(w); !e.empty()) return "checkpoint: " + e;
    }
    return {};
}

std::string PrefixServer::save_planned_states(InFlight& w) {
    const std::vector<PlannedCheckpoint>& plan = w.a.plan;
    // Planned positions the sequence has passed without stopping there are skipped.
    while (w.next < plan.size() && plan[w.next].pos <= w.seq->position()) {
        if (plan[w.next].pos == w.seq->position()) {
            CheckpointRef c;
            if (std::string e = states_.save(*w.seq, &c); !e.empty()) return e;
            w.saved.push_back(c);
            w.kept.push_back(plan[w.next]);
            w.o.checkpoints.push_back(plan[w.next].pos);
            w.o.checkpoint_handles.push_back(c.handle);
        }
        ++w.next;
    }
    return {};
}

std::string PrefixServer::decode_outputs(InFlight& w) {
    const int V = model_.vocab();
    ServeOutcome& o = w.o;
    // Output i is the given one or the greedy choice of the row that predicts it.
    auto take_output = [&](uint64_t i) {
        o.logits.insert(o.logits.end(), w.row.begin(), w.row.end());
        o.outputs.push_back(w.given ? w.r.outputs[size_t(i)] : model::argmax(w.row.data(), V));
    };
    o.logits.reserve(size_t(w.gen) * size_t(V));
    take_output(0);  // predicted by the prefill's last row
    for (uint64_t i = 1; i < w.gen; ++i) {
        if (std::string e = model_.decode(*w.seq, o.outputs.back(), &w.row); !e.empty())
            return "decode: " + e;
        if (std::string e = save_planned_states(w); !e.empty()) return "checkpoint: " + e;
        take_output(i);
    }
    return {};
}

std::string PrefixServer::insert_into_tree(InFlight& w) {
    const uint64_t P = cfg_.cache.page_size;
    ServeOutcome& o = w.o;
    if (!w.given) {  // the generated outputs are known only now
        w.toks.insert(w.toks.end(), o.outputs.begin(), o.outputs.end());
        w.q = TokenSeq::literal(w.toks);
    }
    const uint64_t n = o.cache_len / P;
    if (w.table.size() < n) return "the request holds fewer pages than it caches";
    // The tree adopts the pages of the part it does not hold yet: count its references first, an
    // eviction inside complete_request may hand them straight back.
    const uint64_t pre = cache_->match(*w.q, o.cache_len).kv_len;
    for (uint64_t i = pre / P; i < n; ++i) pages_.retain(w.table[size_t(i)]);
    tree_page_refs_ += n - pre / P;
    w.a.plan = w.kept;
    const Completion c = complete_request(*cache_, cfg_.policy, w.a, w.q, w.saved,
                                          std::span<const uint32_t>(w.table.data(), size_t(n)));
    w.saved.clear();  // the tree owns them now
    o.insert = c.insert;
    o.retention_dropped = c.retention_dropped;
    // Reported, not abandoned: the tree already owns the pages and states.
    if (c.insert.existing_len != pre)
        o.error = "internal: the tree held " + std::to_string(c.insert.existing_len) +
                  " tokens at insert, its match said " + std::to_string(pre);
    if (cfg_.reuse == Reuse::kv_only && cfg_.kv_only_start == KvOnlyStart::stale) keep_stale_state(*w.seq);
    return {};
}

void PrefixServer::keep_stale_state(const model::Sequence& seq) {
    if (stale_) states_.free(stale_);
    stale_ = 0;
    CheckpointRef s;
    if (states_.save(seq, &s).empty()) stale_ = s.handle;
}

ServeOutcome PrefixServer::finish(InFlight& w) {
    w.o.pages = w.table;
    if (w.o.error.empty()) judge_exactness(w.o);
    pages_.release_all(w.table);
    w.seq.reset();
    return std::move(w.o);
}

ServeOutcome PrefixServer::abandon(InFlight& w, std::string why) {
    if (w.mounted) (void)pages_.unmount(w.owner, &w.table);
    for (const CheckpointRef& c : w.saved) states_.free(c.handle);
    if (w.cached && w.a.lease.active) cache_->release(w.a.lease);
    pages_.release_all(w.table);
    w.seq.reset();
    w.o.error = std::move(why);
    w.o.logits.clear();
    return std::move(w.o);
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
