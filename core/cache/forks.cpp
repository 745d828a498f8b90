#include "core/cache/forks.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/base/bytes.h"
#include "core/cache/kv_pages.h"
#include "core/model/sampler.h"

namespace k3::serve {

const char* fork_mode_id(ForkMode m) { return m == ForkMode::eager ? "eager" : "cow"; }

bool same_output(const ForkOutput& a, const ForkOutput& b) {
    return a.tokens == b.tokens && bitwise_equal(a.logits, b.logits);
}

namespace {

uint64_t pool_bytes(const PagePool& p) {
    const PoolStats s = p.stats();
    return s.kv_pages * p.layout().kv_page_bytes + s.states * p.layout().state_slot_bytes;
}

struct Fork {
    std::unique_ptr<model::Sequence> seq;  // cow: null until the first write
    std::vector<PageRef> table;            // cow: its pages (shared or private)
    std::vector<float> logits;             // what the next token is sampled from
    model::Sampler sampler;
    bool branch_pending = false, done = false;
    ForkOutput out;
};

}  // namespace

ForkOutput run_alone(model::Model& m, PagePool& pool, const std::vector<int32_t>& prompt, const ForkSpec& f,
                     std::string* error) {
    ForkOutput out;
    auto fail = [&](std::string e) {
        *error = std::move(e);
        return out;
    };
    model::SequenceResult s = m.new_sequence(pool, 1);
    if (!s.seq) return fail(s.error);
    std::vector<float> logits;
    if (std::string e = m.prefill(*s.seq, prompt, &logits); !e.empty()) return fail(e);
    if (!f.branch.empty())
        if (std::string e = m.prefill(*s.seq, f.branch, &logits); !e.empty()) return fail(e);
    model::Sampler sampler{f.temperature, Rng(f.seed)};
    for (int i = 0; i < f.gen; ++i) {
        out.tokens.push_back(sampler.next(logits.data(), m.vocab()));
        out.logits.insert(out.logits.end(), logits.begin(), logits.end());
        if (i + 1 < f.gen)
            if (std::string e = m.decode(*s.seq, out.tokens.back(), &logits); !e.empty()) return fail(e);
    }
    return out;
}

namespace {

std::string check_input(const PagePool& pool, const std::vector<int32_t>& prompt,
                        const std::vector<ForkSpec>& specs) {
    if (specs.empty()) return "no forks";
    if (prompt.empty()) return "the prompt is empty";
    for (const ForkSpec& f : specs)
        if (f.gen < 1) return "every fork samples at least one token";
    if (!pool.owners().empty()) return "the pool is not empty";
    return {};
}

// One run_forks call: the shared prompt, the forks, their pages and the parent's state, step by step.
// Members are destroyed in the order the run releases them: the forks' sequences, then the pages.
class Forker {
  public:
    Forker(model::Model& m, PagePool& pool, ForkMode mode, const std::vector<int32_t>& prompt,
           const std::vector<ForkSpec>& specs, ForkStats& st, ForkFault fault)
        : m_(m),
          pool_(pool),
          mode_(mode),
          fault_(fault),
          prompt_(prompt),
          specs_(specs),
          st_(st),
          pages_(pool),
          forks_(specs.size()) {}

    std::string prefill_prompt();
    std::string fork_all();
    std::string step_all();
    void collect(ForkRun& run);

  private:
    std::string fork_eagerly(size_t i);
    template <class Call>
    std::string write(size_t i, Call&& call);
    std::string take_state(size_t i, bool* adopt);
    std::string step(size_t i);
    void finish(size_t i);
    void note();
    // Whether the falsifier's fault `f` strikes now (once per run).
    bool strike(ForkFault f) {
        if (fault_ != f || struck_) return false;
        return struck_ = true;
    }
    std::string make_writable(Fork& f, uint64_t position);

    model::Model& m_;
    PagePool& pool_;
    const ForkMode mode_;
    const ForkFault fault_;
    bool struck_ = false;
    const std::vector<int32_t>& prompt_;
    const std::vector<ForkSpec>& specs_;
    ForkStats& st_;
    KvPages pages_;  // cow only; empty otherwise
    std::unique_ptr<model::Sequence> parent_;
    uint32_t shared_refs_ = 0;  // cow: forks still reading the parent's state
    std::vector<float> logits0_;
    std::vector<Fork> forks_;
    std::vector<PageRef> parent_table_;
};

void Forker::note() {
    const PoolStats s = pool_.stats();
    st_.peak_bytes = std::max(st_.peak_bytes, pool_bytes(pool_));
    st_.peak_kv_pages = std::max(st_.peak_kv_pages, s.kv_pages);
    st_.peak_states = std::max(st_.peak_states, s.states);
}

std::string Forker::prefill_prompt() {
    model::SequenceResult ps = m_.new_sequence(pool_, 1);
    if (!ps.seq) return ps.error;
    parent_ = std::move(ps.seq);
    if (mode_ == ForkMode::cow)
        if (std::string e = pages_.mount(1, parent_table_); !e.empty()) return e;
    if (std::string e = m_.prefill(*parent_, prompt_, &logits0_); !e.empty()) return e;
    if (mode_ == ForkMode::cow)
        if (std::string e = pages_.unmount(1, &parent_table_); !e.empty()) return e;
    note();
    return {};
}

std::string Forker::fork_eagerly(size_t i) {
    model::SequenceResult c = m_.fork(*parent_, OwnerId(1 + i));
    if (!c.seq) return "fork " + std::to_string(i) + ": " + c.error;
    forks_[i].seq = std::move(c.seq);
    if (std::byte* state = pool_.state_data(forks_[i].seq->state(), 0);
        state && strike(ForkFault::flip_state_bit))
        state[2] ^= std::byte{0x10};
    const uint64_t pt = pool_.layout().page_tokens;
    ++st_.state_copies;
    st_.state_bytes_copied += m_.pool_model().state_bytes();
    st_.kv_pages_copied += (prompt_.size() + pt - 1) / pt;
    st_.kv_bytes_copied += prompt_.size() * m_.pool_model().kv_bytes_per_token();
    return {};
}

std::string Forker::fork_all() {
    for (size_t i = 0; i < forks_.size(); ++i) {
        Fork& f = forks_[i];
        f.logits = logits0_;
        f.sampler = model::Sampler{specs_[i].temperature, Rng(specs_[i].seed)};
        f.branch_pending = !specs_[i].branch.empty();
        if (mode_ == ForkMode::eager) {
            if (i == 0) continue;  // the parent goes on as fork 0
            if (std::string e = fork_eagerly(i); !e.empty()) return e;
        } else {
            f.table = parent_table_;
            pages_.retain_all(f.table);
        }
    }
    if (mode_ == ForkMode::eager) {
        forks_[0].seq = std::move(parent_);
    } else {
        pages_.release_all(parent_table_);  // the forks hold the pages now
        shared_refs_ = uint32_t(forks_.size());
    }
    note();
    st_.bytes_after_step.push_back(double(pool_bytes(pool_)));
    return {};
}

// Copy-on-write, before fork i's first write: its own copy of the parent's state, or the parent's slot.
std::string Forker::take_state(size_t i, bool* adopt) {
    Fork& f = forks_[i];
    if (shared_refs_ > 1) {  // others still read the parent's state: copy it
        model::SequenceResult c = m_.new_sequence(pool_, OwnerId(2 + i));
        if (!c.seq) return "fork " + std::to_string(i) + ": " + c.error;
        f.seq = std::move(c.seq);
        if (!strike(ForkFault::skip_state_copy)) {
            pool_.copy_state(parent_->state(), f.seq->state());
            ++st_.state_copies;
            st_.state_bytes_copied += m_.pool_model().state_bytes();
        }
        *adopt = true;
    } else {  // the last reader takes the parent's slot as it is
        f.seq = std::move(parent_);
        ++st_.states_taken;
    }
    --shared_refs_;
    return {};
}

// KvPages::make_writable on fork f's table, with the page faults of the falsifiers.
std::string Forker::make_writable(Fork& f, uint64_t position) {
    const size_t idx = size_t(position / pages_.page_tokens());
    const PageRef page = idx < f.table.size() ? f.table[idx] : kNoRef;
    const bool was_shared =
        std::find(parent_table_.begin(), parent_table_.end(), page) != parent_table_.end();
    // A phantom reader makes make_writable copy a page its last reader could write in place.
    const bool phantom = was_shared && pages_.refs(page) == 1 && strike(ForkFault::extra_page_copy);
    if (phantom) pages_.retain(page);
    bool copied = false;
    std::string e = pages_.make_writable(&f.table, position, &copied);
    if (phantom) pages_.release(page);
    if (e.empty() && copied && idx > 0 && strike(ForkFault::wrong_page_copy)) {
        const PageRef fresh = f.table[idx], before = f.table[idx - 1];
        const size_t bytes = size_t(pages_.held_tokens(fresh) * m_.pool_model().kv_bytes_per_token_per_layer);
        for (int a = 0; a < m_.pool_model().attention_layers; ++a)
            std::memcpy(pool_.kv_data(fresh, a), pool_.kv_data(before, a), bytes);
    }
    return e;
}

// One model call of fork i, writing at its position.
template <class Call>
std::string Forker::write(size_t i, Call&& call) {
    Fork& f = forks_[i];
    if (mode_ == ForkMode::eager) return call(*f.seq);
    bool adopt = false;
    if (!f.seq)
        if (std::string e = take_state(i, &adopt); !e.empty()) return e;
    uint64_t position = 0;
    for (PageRef p : f.table) position += pages_.held_tokens(p);
    if (std::string e = make_writable(f, position); !e.empty()) return e;
    const OwnerId o = f.seq->owner();
    if (std::string e = pages_.mount(o, f.table); !e.empty()) return e;
    std::string e;
    if (adopt) e = m_.adopt_kv(*f.seq);
    if (e.empty()) e = call(*f.seq);
    if (std::string u = pages_.unmount(o, &f.table); !u.empty() && e.empty()) e = u;
    return e;
}

void Forker::finish(size_t i) {
    Fork& f = forks_[i];
    f.done = true;
    if (strike(ForkFault::keep_memory)) return;  // its sequence and references stay until the run ends
    if (mode_ == ForkMode::cow) {
        pages_.release_all(f.table);
        f.table.clear();
        if (!f.seq && --shared_refs_ == 0) parent_.reset();  // it never wrote
    }
    f.seq.reset();
}

// Fork i's next step: its branch prefill, or sampling a token (and decoding it unless it was the last).
std::string Forker::step(size_t i) {
    Fork& f = forks_[i];
    if (f.branch_pending) {
        f.branch_pending = false;
        return write(i, [&](model::Sequence& s) { return m_.prefill(s, specs_[i].branch, &f.logits); });
    }
    const int32_t tok = f.sampler.next(f.logits.data(), m_.vocab());
    f.out.tokens.push_back(tok);
    f.out.logits.insert(f.out.logits.end(), f.logits.begin(), f.logits.end());
    if (int(f.out.tokens.size()) < specs_[i].gen)
        return write(i, [&](model::Sequence& s) { return m_.decode(s, tok, &f.logits); });
    finish(i);
    return {};
}

std::string Forker::step_all() {
    for (bool any = true; any;) {
        any = false;
        for (size_t i = 0; i < forks_.size(); ++i) {
            if (forks_[i].done) continue;
            any = true;
            if (std::string e = step(i); !e.empty()) return "fork " + std::to_string(i) + ": " + e;
            note();
        }
        if (any) st_.bytes_after_step.push_back(double(pool_bytes(pool_)));
    }
    return {};
}

// The outputs, the pages copied on write, and whether everything was released.
void Forker::collect(ForkRun& run) {
    st_.kv_pages_copied += pages_.copies().pages_copied;
    st_.kv_bytes_copied += pages_.copies().bytes_copied;
    for (Fork& f : forks_) run.outputs.push_back(std::move(f.out));
    const PoolStats ps = pool_.stats();
    const std::string pa = pages_.audit(), pl = pool_.audit();
    run.released = shared_refs_ == 0 && !parent_ && pages_.live_pages() == 0 && pages_.references() == 0 &&
                   ps.kv_pages == 0 && ps.states == 0 && pool_.owners().empty() && pa.empty() && pl.empty();
    run.release_detail = std::to_string(pages_.references()) + " page references, " +
                         std::to_string(shared_refs_) + " readers of the shared state, " +
                         std::to_string(ps.kv_pages) + " KV pages and " + std::to_string(ps.states) +
                         " state slots in the pool, " + std::to_string(pool_.owners().size()) + " owners" +
                         (pa.empty() ? "" : "; pages: " + pa) + (pl.empty() ? "" : "; pool: " + pl);
}

}  // namespace

ForkRun run_forks(model::Model& m, PagePool& pool, ForkMode mode, const std::vector<int32_t>& prompt,
                  const std::vector<ForkSpec>& specs, ForkFault fault) {
    ForkRun run;
    run.error = check_input(pool, prompt, specs);
    if (!run.error.empty()) return run;
    Forker forker(m, pool, mode, prompt, specs, run.stats, fault);
    run.error = forker.prefill_prompt();
    if (run.error.empty()) run.error = forker.fork_all();
    if (run.error.empty()) run.error = forker.step_all();
    if (run.error.empty()) forker.collect(run);
    return run;
}

}  // namespace k3::serve
