#include "core/cache/forks.h"

#include <algorithm>
#include <memory>

#include "core/cache/kv_pages.h"
#include "core/model/sampler.h"

namespace k3::serve {

const char* fork_mode_id(ForkMode m) { return m == ForkMode::eager ? "eager" : "cow"; }

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

ForkRun run_forks(model::Model& m, PagePool& pool, ForkMode mode, const std::vector<int32_t>& prompt,
                  const std::vector<ForkSpec>& specs) {
    ForkRun run;
    ForkStats& st = run.stats;
    auto fail = [&run](std::string e) {
        run.error = std::move(e);
        return run;
    };
    const int V = m.vocab();
    const size_t n = specs.size();
    if (n == 0) return fail("no forks");
    if (prompt.empty()) return fail("the prompt is empty");
    for (const ForkSpec& f : specs)
        if (f.gen < 1) return fail("every fork samples at least one token");
    if (!pool.owners().empty()) return fail("the pool is not empty");

    auto note = [&] {
        const PoolStats s = pool.stats();
        st.peak_bytes = std::max(st.peak_bytes, pool_bytes(pool));
        st.peak_kv_pages = std::max(st.peak_kv_pages, s.kv_pages);
        st.peak_states = std::max(st.peak_states, s.states);
    };
    const uint64_t state_bytes = m.pool_model().state_bytes();
    const uint64_t pt = pool.layout().page_tokens;

    {
        KvPages pages(pool);  // cow only; empty otherwise
        std::unique_ptr<model::Sequence> parent;
        uint32_t shared_refs = 0;  // cow: forks still reading the parent's state
        std::vector<float> logits0;
        std::vector<Fork> forks(n);

        // ---- the shared prompt, once ----
        model::SequenceResult ps = m.new_sequence(pool, 1);
        if (!ps.seq) return fail(ps.error);
        parent = std::move(ps.seq);
        std::vector<PageRef> ptable;
        if (mode == ForkMode::cow)
            if (std::string e = pages.mount(1, ptable); !e.empty()) return fail(e);
        if (std::string e = m.prefill(*parent, prompt, &logits0); !e.empty()) return fail(e);
        if (mode == ForkMode::cow)
            if (std::string e = pages.unmount(1, &ptable); !e.empty()) return fail(e);
        note();

        // ---- fork ----
        for (size_t i = 0; i < n; ++i) {
            Fork& f = forks[i];
            f.logits = logits0;
            f.sampler = model::Sampler{specs[i].temperature, Rng(specs[i].seed)};
            f.branch_pending = !specs[i].branch.empty();
            if (mode == ForkMode::eager) {
                if (i == 0) continue;  // the parent goes on as fork 0
                model::SequenceResult c = m.fork(*parent, OwnerId(1 + i));
                if (!c.seq) return fail("fork " + std::to_string(i) + ": " + c.error);
                f.seq = std::move(c.seq);
                ++st.state_copies;
                st.state_bytes_copied += state_bytes;
                st.kv_pages_copied += (prompt.size() + pt - 1) / pt;
                st.kv_bytes_copied += prompt.size() * m.pool_model().kv_bytes_per_token();
            } else {
                f.table = ptable;
                pages.retain_all(f.table);
            }
        }
        if (mode == ForkMode::eager) {
            forks[0].seq = std::move(parent);
        } else {
            pages.release_all(ptable);  // the forks hold the pages now
            shared_refs = uint32_t(n);
        }
        note();
        st.bytes_after_step.push_back(double(pool_bytes(pool)));

        // One model call of fork i, writing at its position.
        auto write = [&](size_t i, auto&& call) -> std::string {
            Fork& f = forks[i];
            const OwnerId owner = OwnerId(2 + i);
            if (mode == ForkMode::eager) return call(*f.seq);
            bool adopt = false;
            if (!f.seq) {
                if (shared_refs > 1) {  // others still read the parent's state: copy it
                    model::SequenceResult c = m.new_sequence(pool, owner);
                    if (!c.seq) return "fork " + std::to_string(i) + ": " + c.error;
                    f.seq = std::move(c.seq);
                    pool.copy_state(parent->state(), f.seq->state());
                    ++st.state_copies;
                    st.state_bytes_copied += state_bytes;
                    adopt = true;
                } else {  // the last reader takes the parent's slot as it is
                    f.seq = std::move(parent);
                    ++st.states_taken;
                }
                --shared_refs;
            }
            uint64_t position = 0;
            for (PageRef p : f.table) position += pages.held_tokens(p);
            bool copied = false;
            if (std::string e = pages.make_writable(&f.table, position, &copied); !e.empty()) return e;
            const OwnerId o = f.seq->owner();
            if (std::string e = pages.mount(o, f.table); !e.empty()) return e;
            std::string e;
            if (adopt) e = m.adopt_kv(*f.seq);
            if (e.empty()) e = call(*f.seq);
            if (std::string u = pages.unmount(o, &f.table); !u.empty() && e.empty()) e = u;
            return e;
        };
        auto finish = [&](size_t i) {
            Fork& f = forks[i];
            f.done = true;
            if (mode == ForkMode::cow) {
                pages.release_all(f.table);
                f.table.clear();
                if (!f.seq && --shared_refs == 0) parent.reset();  // it never wrote
            }
            f.seq.reset();
        };

        // ---- step every fork, round robin ----
        for (bool any = true; any;) {
            any = false;
            for (size_t i = 0; i < n; ++i) {
                Fork& f = forks[i];
                if (f.done) continue;
                any = true;
                std::string e;
                if (f.branch_pending) {
                    f.branch_pending = false;
                    e = write(i,
                              [&](model::Sequence& s) { return m.prefill(s, specs[i].branch, &f.logits); });
                } else {
                    const int32_t tok = f.sampler.next(f.logits.data(), V);
                    f.out.tokens.push_back(tok);
                    f.out.logits.insert(f.out.logits.end(), f.logits.begin(), f.logits.end());
                    if (int(f.out.tokens.size()) < specs[i].gen)
                        e = write(i, [&](model::Sequence& s) { return m.decode(s, tok, &f.logits); });
                    else
                        finish(i);
                }
                if (!e.empty()) return fail("fork " + std::to_string(i) + ": " + e);
                note();
            }
            if (any) st.bytes_after_step.push_back(double(pool_bytes(pool)));
        }
        st.kv_pages_copied += pages.copies().pages_copied;
        st.kv_bytes_copied += pages.copies().bytes_copied;
        for (Fork& f : forks) run.outputs.push_back(std::move(f.out));

        // ---- everything released? ----
        const PoolStats ps2 = pool.stats();
        const std::string pa = pages.audit(), pl = pool.audit();
        run.released = shared_refs == 0 && !parent && pages.live_pages() == 0 && pages.references() == 0 &&
                       ps2.kv_pages == 0 && ps2.states == 0 && pool.owners().empty() && pa.empty() &&
                       pl.empty();
        run.release_detail = std::to_string(pages.references()) + " page references, " +
                             std::to_string(shared_refs) + " readers of the shared state, " +
                             std::to_string(ps2.kv_pages) + " KV pages and " + std::to_string(ps2.states) +
                             " state slots in the pool, " + std::to_string(pool.owners().size()) + " owners" +
                             (pa.empty() ? "" : "; pages: " + pa) + (pl.empty() ? "" : "; pool: " + pl);
    }
    return run;
}

}  // namespace k3::serve
