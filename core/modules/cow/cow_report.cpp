// Module 6 `cow`: eager copies against copy-on-write as figures, tables, plots and checks.
#include <algorithm>

#include "core/base/numfmt.h"
#include "core/modules/cow/cow.h"

namespace k3 {

namespace {

using serve::ForkMode;
using serve::ForkStats;

constexpr ForkMode kMethods[] = {ForkMode::eager, ForkMode::cow};
const char* method_name(ForkMode m) { return m == ForkMode::eager ? "eager" : "copy-on-write"; }

uint64_t bytes_copied(const ForkStats& s) { return s.state_bytes_copied + s.kv_bytes_copied; }

void scalars(const CowResult& m, Report& r) {
    const ForkStats& e = m.eager.run.stats;
    const ForkStats& c = m.cow.run.stats;
    r.scalar("peak_bytes_eager", "Peak memory, eager copies", "B", double(e.peak_bytes), true).help =
        "Largest pool footprint (KV pages and state slots) at any step of the run.";
    r.scalar("peak_bytes_cow", "Peak memory, copy-on-write", "B", double(c.peak_bytes), true);
    r.scalar("peak_ratio", "Copy-on-write peak / eager peak", "ratio",
             e.peak_bytes ? double(c.peak_bytes) / double(e.peak_bytes) : 0.0, true);
    r.scalar("bytes_copied_eager", "Bytes copied, eager", "B", double(bytes_copied(e)));
    r.scalar("bytes_copied_cow", "Bytes copied, copy-on-write", "B", double(bytes_copied(c)), true);
    r.scalar("state_copies_eager", "State copies, eager", "copies", double(e.state_copies));
    r.scalar("state_copies_cow", "State copies, copy-on-write", "copies", double(c.state_copies));
    r.scalar("kv_bytes_copied_eager", "KV bytes copied, eager", "B", double(e.kv_bytes_copied));
    r.scalar("kv_bytes_copied_cow", "KV bytes copied, copy-on-write", "B", double(c.kv_bytes_copied));
    r.scalar("state_bytes", "One state of the runnable model", "B", double(m.state_bytes));
}

void methods_table(const CowResult& m, Report& r) {
    Table& t = r.add_table(make_table("Eager copies vs copy-on-write", {{"fork method", ""},
                                                                        {"peak memory", "B"},
                                                                        {"peak KV pages", "pages"},
                                                                        {"peak state slots", "states"},
                                                                        {"state copies", "copies"},
                                                                        {"state bytes copied", "B"},
                                                                        {"parent's slot taken over", "count"},
                                                                        {"KV pages copied", "pages"},
                                                                        {"KV bytes copied", "B"},
                                                                        {"bytes copied", "B"}}));
    for (ForkMode mode : kMethods) {
        const ForkStats& s = m.method(mode).run.stats;
        t.add({std::string(mode == ForkMode::eager ? "eager (Model::fork)" : "copy-on-write"),
               double(s.peak_bytes), double(s.peak_kv_pages), double(s.peak_states), double(s.state_copies),
               double(s.state_bytes_copied), double(s.states_taken), double(s.kv_pages_copied),
               double(s.kv_bytes_copied), double(bytes_copied(s))});
    }
}

// The first 8 tokens a fork sampled (alone), "..." if there are more.
std::string first_tokens(const std::vector<int32_t>& tokens) {
    std::string out;
    for (size_t j = 0; j < tokens.size() && j < 8; ++j) out += (j ? " " : "") + std::to_string(tokens[j]);
    if (tokens.size() > 8) out += " ...";
    return out;
}

void forks_table(const CowResult& m, Report& r) {
    Table& t = r.add_table(make_table(
        "Forks",
        {{"fork", ""}, {"tokens sampled", ""}, {"eager = alone", ""}, {"copy-on-write = alone", ""}}));
    auto verdict = [](bool same) { return std::string(same ? "bitwise" : "differs"); };
    for (size_t i = 0; i < m.specs.size(); ++i)
        t.add({double(i + 1), first_tokens(m.alone[i].tokens), verdict(m.eager_same[i]),
               verdict(m.cow_same[i])});
}

void plots(const CowResult& m, Report& r) {
    for (ForkMode mode : kMethods) {
        Series& s = r.add_series(make_series(method_name(mode), "Pool memory held, step by step",
                                             "round (0: right after the fork; then one model call per fork)",
                                             "bytes", "", "B"));
        s.style = SeriesStyle::step;
        const std::vector<double>& held = m.method(mode).run.stats.bytes_after_step;
        for (size_t i = 0; i < held.size(); ++i) s.add(double(i), held[i]);
    }
    const ForkStats& e = m.eager.run.stats;
    const ForkStats& c = m.cow.run.stats;
    auto copied = [](std::string name) {
        Series s = make_series(std::move(name), "Bytes copied", "fork method", "bytes", "", "B");
        s.style = SeriesStyle::bars;
        s.x_names = {"eager", "copy-on-write"};
        return s;
    };
    r.add_series(copied("state")).add(0, double(e.state_bytes_copied)).add(1, double(c.state_bytes_copied));
    r.add_series(copied("KV")).add(0, double(e.kv_bytes_copied)).add(1, double(c.kv_bytes_copied));
}

void equality_checks(const CowParams& p, const CowResult& m, Report& r) {
    const size_t n = m.specs.size();
    const size_t eager_same = size_t(std::count(m.eager_same.begin(), m.eager_same.end(), true));
    const size_t cow_same = size_t(std::count(m.cow_same.begin(), m.cow_same.end(), true));
    r.check("eager_equals_alone", "Each fork's output equals running it alone (eager)", eager_same == n,
            format_grouped(double(eager_same)) + " of " + format_grouped(double(n)) +
                " forks: the same tokens and every logit's bits as a fresh sequence with the same prompt" +
                (p.scenario == CowScenario::branching ? ", branch" : "") + " and sampler seed");
    r.check("cow_equals_alone", "Each fork's output equals running it alone (copy-on-write)", cow_same == n,
            format_grouped(double(cow_same)) + " of " + format_grouped(double(n)) +
                " forks bitwise equal to alone");
    for (ForkMode mode : kMethods) {
        const serve::ForkRun& run = m.method(mode).run;
        r.check(std::string("released_") + serve::fork_mode_id(mode),
                std::string("Reference counts and pool bytes return to zero (") + method_name(mode) + ")",
                run.released, run.release_detail);
    }
}

// What the design rule implies for something every fork shares at the fork (the parent's state, the
// prompt's partly filled page): in round-robin order each fork's first step either writes, copying it
// while another fork still reads it, or finishes without writing; either way one reader fewer. The
// copies made; the writer that finds itself the last reader takes it over in place.
uint64_t copies_while_shared(const CowResult& m) {
    size_t readers = m.specs.size();
    uint64_t copies = 0;
    for (const serve::ForkSpec& s : m.specs) {
        copies += fork_writes(s) && readers > 1;
        --readers;
    }
    return copies;
}

void copy_checks(const CowParams& p, const CowResult& m, Report& r) {
    const ForkStats& e = m.eager.run.stats;
    const ForkStats& c = m.cow.run.stats;
    const size_t writers = m.writing_forks;
    const uint64_t want_copies = copies_while_shared(m);
    r.check("cow_state_copies", "Copy-on-write copies the state once per writing fork but the last",
            c.state_copies == want_copies && c.states_taken == writers - want_copies,
            format_grouped(double(c.state_copies)) + " copies and " + format_grouped(double(c.states_taken)) +
                " slot taken over for " + format_grouped(double(writers)) +
                " writing forks (eager: " + format_grouped(double(e.state_copies)) + " copies at the fork)");
    // Only the prompt's last page is ever written while shared, and only when the prompt ends inside it.
    const uint64_t filled_rows = m.prompt.size() % uint64_t(p.page_size);
    const uint64_t want_pages = filled_rows ? want_copies : 0;
    const uint64_t want_bytes = want_pages * filled_rows * m.kv_bytes_per_token;
    r.check(
        "cow_copies_partial_page_only",
        "Copy-on-write copies the partly filled page once per writing fork but the last, and nothing else",
        c.kv_pages_copied == want_pages && c.kv_bytes_copied == want_bytes,
        format_grouped(double(c.kv_pages_copied)) + " pages, " + format_grouped(double(c.kv_bytes_copied)) +
            " B copied; the design: " + format_grouped(double(want_pages)) + " pages of " +
            format_grouped(double(filled_rows)) + " filled rows, " + format_grouped(double(want_bytes)) +
            " B (eager: " + format_grouped(double(e.kv_pages_copied)) + " pages, " +
            format_bytes(double(e.kv_bytes_copied)) + "); the shared prompt ends " +
            (filled_rows ? "inside a page" : "on a page boundary, so nothing needs copying"));
}

void notes(const CowParams& p, const CowResult& m, Report& r) {
    r.notes.push_back(
        "One state of the runnable model (" + std::string(default_runnable_id()) +
        "): " + format_bytes(double(m.state_bytes)) +
        "; the shared prompt's KV: " + format_bytes(double(m.prompt.size() * m.kv_bytes_per_token)) + " (" +
        std::to_string(m.prompt.size()) + " tokens, pages of " + std::to_string(p.page_size) + ").");
    r.notes.push_back(
        "Forks run round robin, one model call each per round, as a batch would; a fork's memory is "
        "released when it has sampled its last token.");
}

}  // namespace

void report_cow(const CowParams& p, const CowResult& m, Report& r) {
    if (!m.failed.empty()) {
        r.check("run_completed", "Run completed", false, m.failed);
        return;
    }
    scalars(m, r);
    methods_table(m, r);
    forks_table(m, r);
    plots(m, r);
    r.timing_scalar("eager_ms", "Eager run (this device)", "ms", m.eager.ms);
    r.timing_scalar("cow_ms", "Copy-on-write run (this device)", "ms", m.cow.ms);
    r.timing_scalar("alone_ms", "Every fork alone (this device)", "ms", m.alone_ms);
    equality_checks(p, m, r);
    copy_checks(p, m, r);
    notes(p, m, r);
}

}  // namespace k3
