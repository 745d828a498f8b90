// Module 4 `prefix`: the result as figures, tables of what each method saves and holds, plots per
// request, the radix trees, checks and notes.
#include <algorithm>
#include <cmath>

#include "core/base/numfmt.h"
#include "core/modules/prefix/prefix.h"
#include "core/modules/shared/tree_report.h"

namespace k3 {

using serve::Reuse;

const char* prefix_exactness_name(PrefixExactness e) {
    switch (e) {
        case PrefixExactness::bitwise: return "bitwise";
        case PrefixExactness::within_rounding: return "within rounding";
        case PrefixExactness::wrong: return "wrong";
    }
    return "";
}

namespace {

const char* const kScenarioNames[kPrefixScenarios] = {"system prompt", "chat", "branch"};

bool caches(const PrefixMethodResult& m) { return m.active && m.info->reuse != Reuse::none; }
bool keeps_states(const PrefixMethodResult& m) { return m.active && m.info->reuse == Reuse::state; }

uint64_t prompt_tokens(const PrefixResult& res) {
    uint64_t n = 0;
    for (const PrefixRequest& it : res.requests) n += it.prompt.size();
    return n;
}

template <class F>
double total(const PrefixMethodResult& m, F field) {
    double s = 0;
    for (const PrefixRow& r : m.rows) s += double(field(r));
    return s;
}

// How far KV-only reuse strays from the cold runs: the largest |logit diff| and the first step whose
// greedy token differs (-1: none).
struct Divergence {
    double max_diff = 0;
    int first_diff = -1;
};
Divergence kv_only_divergence(const PrefixResult& res) {
    Divergence d;
    for (const PrefixRow& r : res.method(PrefixMethod::kv_only).rows) {
        d.max_diff = std::max(d.max_diff, r.max_diff);
        if (r.first_diff >= 0 && (d.first_diff < 0 || r.first_diff < d.first_diff))
            d.first_diff = r.first_diff;
    }
    return d;
}

// Resumes of the state methods the server says must be bitwise, and how many are.
struct ExactResumes {
    size_t expected = 0, bitwise = 0;
};
ExactResumes exact_resumes(const PrefixResult& res) {
    ExactResumes e;
    for (const PrefixMethodResult& m : res.methods)
        if (keeps_states(m))
            for (const PrefixRow& r : m.rows)
                if (r.expected_exact && r.resumed > 0) {
                    ++e.expected;
                    e.bitwise += r.bitwise;
                }
    return e;
}

void scalars(const PrefixResult& res, Report& r) {
    const PrefixMethodResult& interval = res.method(PrefixMethod::interval);
    const uint64_t prompt = prompt_tokens(res);
    const double per_prompt = double(std::max<uint64_t>(prompt, 1));
    r.scalar("recomputed_tokens", "Prompt tokens recomputed (states every N)", "tokens",
             total(interval, [](const PrefixRow& x) { return x.recomputed; }), true);
    r.scalar("recomputed_tokens_no_cache", "Prompt tokens computed without a cache", "tokens",
             double(prompt));
    r.scalar("token_hit_kv", "KV-visible token hit (states every N)", "fraction",
             total(interval, [](const PrefixRow& x) { return x.kv_hit; }) / per_prompt)
        .help = "Prompt tokens whose KV the tree held, over all prompt tokens (the match covers prompt - 1).";
    r.scalar("token_hit_state", "State-usable token hit (states every N)", "fraction",
             total(interval, [](const PrefixRow& x) { return x.resumed; }) / per_prompt, true)
        .help = "Prompt tokens skipped: the deepest checkpoint at or above the KV match.";
    r.scalar("kv_only_max_logit_diff", "KV-only reuse: largest |logit diff| vs cold", "",
             kv_only_divergence(res).max_diff, true)
        .help =
        "Largest difference of a next-token logit between KV-only reuse and the same request run cold. "
        "Rounding differences are below " +
        format_sig(kPrefixTolerance, 2) + " of the largest logit.";
    r.scalar("bitwise_resumes", "Resumes from aligned checkpoints, bitwise equal to cold", "requests",
             double(exact_resumes(res).bitwise), true);
    r.scalar("checkpoint_bytes", "One checkpoint", "B", double(res.account.state_bytes));
    r.scalar("state_equivalent_tokens", "One checkpoint weighs as much KV as", "tokens",
             std::round(res.account.state_equivalent_tokens()));
    r.scalar("held_bytes_interval", "Cache held at the end (states every N)", "B",
             double(interval.end_state_bytes + interval.end_kv_bytes));
}

// What a second request saves and what the cache holds for it, per method; the times apart.
void saving_tables(const PrefixResult& res, Report& r) {
    Table& save = r.add_table(
        make_table("What does a second request actually save", {{"method", ""},
                                                                {"requests that skipped tokens", "requests"},
                                                                {"prompt tokens computed", "tokens"},
                                                                {"tokens saved", "tokens"},
                                                                {"share saved", "fraction"},
                                                                {"checkpoints held", "count"},
                                                                {"checkpoint bytes held", "B"},
                                                                {"KV bytes held", "B"},
                                                                {"peak bytes held", "B"},
                                                                {"bitwise", "requests"},
                                                                {"within rounding", "requests"},
                                                                {"wrong", "requests"},
                                                                {"largest |logit diff|", ""}}));
    r.timing.tables.push_back(make_table("Time on this device", {{"method", ""},
                                                                 {"prefill", "ms"},
                                                                 {"decode", "ms"},
                                                                 {"total", "ms"},
                                                                 {"time saved vs no cache", "ms"},
                                                                 {"share saved", "fraction"}}));
    Table& timing = r.timing.tables.back();
    const double prompt = double(prompt_tokens(res));
    const double cold_ms = res.method(PrefixMethod::none).ms;
    for (const PrefixMethodResult& m : res.methods) {
        if (!m.active) continue;
        size_t skipped = 0, counts[size_t(PrefixExactness::wrong) + 1] = {};
        double worst = 0;
        for (const PrefixRow& row : m.rows) {
            skipped += row.resumed > 0;
            ++counts[size_t(row.exactness)];
            worst = std::max(worst, row.max_diff);
        }
        const double computed = total(m, [](const PrefixRow& x) { return x.recomputed; });
        save.add({m.label, double(skipped), computed, prompt - computed,
                  (prompt - computed) / std::max(prompt, 1.0), double(m.end_stats.states),
                  double(m.end_state_bytes), double(m.end_kv_bytes), double(m.peak_bytes),
                  double(counts[size_t(PrefixExactness::bitwise)]),
                  double(counts[size_t(PrefixExactness::within_rounding)]),
                  double(counts[size_t(PrefixExactness::wrong)]), worst});
        // The cold run's time is all counted as prefill.
        const bool cold = !caches(m);
        timing.add({m.label, cold ? m.ms : m.prefill_ms, cold ? 0.0 : m.decode_ms, m.ms, cold_ms - m.ms,
                    cold_ms > 0 ? (cold_ms - m.ms) / cold_ms : 0.0});
    }
    r.timing_scalar("time_saved_ms", "Time saved by states every N (this device)", "ms",
                    cold_ms - res.method(PrefixMethod::interval).ms);
    r.timing_scalar("cold_ms", "Workload without a cache (this device)", "ms", cold_ms);
}

// The measured exactness, with the first cause that explains a departure from the cold run's bits.
std::string exactness_text(const PrefixRow& row, const PrefixRequest& it, uint32_t chunk) {
    std::string text = prefix_exactness_name(row.exactness);
    if (!row.state_matches)
        text += " (state of another position)";
    else if (row.off_grid)
        text += " (own prefill split off the grid)";
    else if (!row.bitwise && row.resumed % chunk != 0)
        text += " (resumed off the chunk grid)";
    else if (!row.bitwise && row.resumed > it.decoded_from)
        text += " (reused decoded tokens)";
    return text;
}

void request_tables(const PrefixParams& p, const PrefixResult& res, Report& r) {
    const std::vector<PrefixRequest>& requests = res.requests;
    Table& workload = r.add_table(make_table("Workload", {{"request", ""},
                                                          {"scenario", ""},
                                                          {"prompt", "tokens"},
                                                          {"shared with earlier requests", "tokens"},
                                                          {"output", "tokens"}}));
    for (size_t i = 0; i < requests.size(); ++i)
        workload.add({double(i + 1),
                      kScenarioNames[size_t(requests[i].scenario)] + std::string(" ") +
                          std::to_string(requests[i].index + 1),
                      double(requests[i].prompt.size()), double(requests[i].shared),
                      double(requests[i].outputs.size())});
    Table& per = r.add_table(make_table("Per request", {{"method", ""},
                                                        {"request", ""},
                                                        {"KV-visible hit", "tokens"},
                                                        {"state-usable hit", "tokens"},
                                                        {"resumed at", "tokens"},
                                                        {"recomputed", "tokens"},
                                                        {"pages borrowed", "pages"},
                                                        {"checkpoints saved", "count"},
                                                        {"bytes held after", "B"},
                                                        {"exactness", ""},
                                                        {"largest |logit diff|", ""},
                                                        {"first differing token", ""}}));
    for (const PrefixMethodResult& m : res.methods) {
        if (!caches(m)) continue;
        for (size_t i = 0; i < requests.size(); ++i) {
            const PrefixRow& row = m.rows[i];
            per.add(
                {std::string(m.info->id), double(i + 1), double(row.kv_hit), double(row.state_hit),
                 double(row.resumed), double(row.recomputed), double(row.borrowed), double(row.saved),
                 double(row.held_state_bytes + row.held_kv_bytes), exactness_text(row, requests[i], p.chunk),
                 row.max_diff,
                 row.first_diff < 0 ? std::string("none") : "step " + std::to_string(row.first_diff + 1)});
        }
    }
}

void plots(const PrefixResult& res, Report& r) {
    for (const PrefixMethodResult& m : res.methods) {
        if (!m.active) continue;
        Series computed =
            make_series(m.label, "Prompt tokens computed per request", "request", "tokens", "", "tokens");
        Series held =
            make_series(m.label, "Cache bytes held after each request", "request", "bytes", "", "B");
        computed.style = SeriesStyle::points;
        for (size_t i = 0; i < m.rows.size(); ++i) {
            computed.add(double(i + 1), double(m.rows[i].recomputed));
            held.add(double(i + 1), double(m.rows[i].held_state_bytes + m.rows[i].held_kv_bytes));
        }
        r.add_series(computed);
        if (caches(m)) r.add_series(held);
    }
    // Log scale: rounding differences sit near 1e-6, wrong outputs near 1; bitwise requests (0) are left out.
    for (const PrefixMethodResult& m : res.methods) {
        if (!caches(m)) continue;
        Series& diff = r.add_series(
            make_series(m.label, "Largest |logit diff| vs the cold run (bitwise requests left out)",
                        "request", "|logit diff|", "", ""));
        diff.style = SeriesStyle::points;
        diff.log_y = true;
        for (size_t i = 0; i < m.rows.size(); ++i)
            if (m.rows[i].max_diff > 0) diff.add(double(i + 1), m.rows[i].max_diff);
    }
    for (const PrefixMethodResult& m : res.methods)
        if (caches(m)) r.trees.push_back(prefix_tree_report("Radix tree at the end: " + m.label, m.tree));
}

void bitwise_check(const PrefixParams& p, const PrefixResult& res, Report& r) {
    const ExactResumes e = exact_resumes(res);
    if (e.expected > 0)
        r.check("aligned_resumes_bitwise",
                "A continuation from a checkpoint on the chunk grid is bitwise the cold run",
                e.bitwise == e.expected,
                format_grouped(double(e.bitwise)) + " of " + format_grouped(double(e.expected)) +
                    " requests that resumed from an fp32 checkpoint at a multiple of " +
                    std::to_string(p.chunk) +
                    " over exactly computed pages have every logit's bits of their cold run");
    else
        r.notes.push_back(
            "No request resumed from an exact fp32 checkpoint on the chunk grid, so the bitwise check has "
            "nothing to test: use the fp32 codec, an interval that is a multiple of the chunk, and a shared "
            "prefix of at least one chunk (" +
            std::to_string(p.chunk) + " tokens).");
}

void kv_only_check(const PrefixResult& res, Report& r) {
    size_t reused = 0, caught = 0;
    double least = -1;
    const PrefixMethodResult& kv_only = res.method(PrefixMethod::kv_only);
    for (size_t i = 0; i < res.requests.size(); ++i) {
        const PrefixRow& row = kv_only.rows[i];
        if (row.state_matches) continue;
        ++reused;
        caught += row.max_diff > kPrefixTolerance * res.requests[i].scale;
        least = least < 0 ? row.max_diff : std::min(least, row.max_diff);
    }
    if (reused == 0)
        return r.notes.push_back(
            "No request had a KV hit, so KV-only reuse had nothing to get wrong: add requests.");
    const Divergence d = kv_only_divergence(res);
    r.check(
        "kv_only_flagged", "KV-only reuse is flagged incorrect (its outputs diverge)", caught == reused,
        format_grouped(double(caught)) + " of " + format_grouped(double(reused)) +
            " requests that skipped KV with the state of another position differ from their cold run beyond "
            "rounding (largest |logit diff| " +
            format_sig(d.max_diff, 3) + ", smallest " + format_sig(least, 3) + "); greedy tokens " +
            (d.first_diff < 0 ? std::string("agree at every step")
                              : "differ from step " + std::to_string(d.first_diff + 1)));
}

void probe_check(const PrefixParams& p, const PrefixResult& res, Report& r) {
    const PrefixOffGridProbe& probe = res.probe;
    if (!probe.done) return r.notes.push_back("Off-grid resume not measured: " + probe.note + ".");
    // Both halves: the bits differ from the cold run (the rest is chunked differently), by rounding only.
    r.check("off_grid_within_rounding", "A checkpoint off the chunk grid is exact only within rounding",
            !probe.bitwise && probe.diff <= kPrefixTolerance * probe.scale,
            "resumed at " + std::to_string(probe.pos) + " (chunk " + std::to_string(p.chunk) + "): " +
                (probe.bitwise ? std::string("bitwise equal to the cold run, so the grid made no difference")
                               : std::string("its bits differ from the cold run")) +
                ", largest |logit diff| " + format_sig(probe.diff, 3) + " against logits up to " +
                format_sig(probe.scale, 3) + " (tolerance " + format_sig(kPrefixTolerance, 2) + " of it)");
}

void within_rounding_check(const PrefixParams& p, const PrefixResult& res, Report& r) {
    if (p.codec != StateCodec::fp32) return;
    size_t others = 0, within = 0;
    for (const PrefixMethodResult& m : res.methods)
        if (keeps_states(m))
            for (const PrefixRow& row : m.rows) {
                if (row.bitwise) continue;
                ++others;
                within += row.exactness == PrefixExactness::within_rounding;
            }
    r.check("other_resumes_within_rounding", "Every other resume from a state stays within rounding",
            within == others,
            others == 0
                ? "every state resume was bitwise (none off the grid or past decoded tokens)"
                : format_grouped(double(within)) + " of " + format_grouped(double(others)) +
                      " state resumes that are not bitwise (off the grid, past decoded tokens) differ by at "
                      "most " +
                      format_sig(kPrefixTolerance, 2) + " of the largest logit, with the same greedy tokens");
}

// The first request of a caching method whose hits or resume point differ from the recount without
// the tree (prefix_recount.cpp), described ("" when none does); `compared` counts the requests.
std::string hits_against_recount(const PrefixResult& res, size_t& compared) {
    for (const PrefixMethodResult& m : res.methods) {
        if (!caches(m) || m.recount.size() != m.rows.size()) continue;
        for (size_t i = 0; i < m.rows.size(); ++i, ++compared) {
            const PrefixRow& row = m.rows[i];
            const PrefixRecount& want = m.recount[i];
            const uint64_t resume = m.info->reuse == Reuse::kv_only ? want.kv_hit : want.state_hit;
            if (row.kv_hit != want.kv_hit || row.state_hit != want.state_hit || row.resumed != resume)
                return std::string(m.info->id) + " request " + std::to_string(i + 1) + ": KV hit " +
                       std::to_string(row.kv_hit) + ", state hit " + std::to_string(row.state_hit) +
                       ", resumed at " + std::to_string(row.resumed) + "; recounted " +
                       std::to_string(want.kv_hit) + ", " + std::to_string(want.state_hit) + ", resume at " +
                       std::to_string(resume);
        }
    }
    return {};
}

// The first request of a caching method whose prefill did not cover exactly the prompt past its
// resume point, or whose recorded recomputed count is not what it prefilled ("" when none).
std::string prefill_off_the_rest(const PrefixResult& res) {
    for (const PrefixMethodResult& m : res.methods) {
        if (!caches(m)) continue;
        for (size_t i = 0; i < m.rows.size(); ++i) {
            const PrefixRow& row = m.rows[i];
            const uint64_t rest = res.requests[i].prompt.size() - row.resumed;
            if (row.prefilled != rest || row.recomputed != row.prefilled)
                return std::string(m.info->id) + " request " + std::to_string(i + 1) + ": resumed at " +
                       std::to_string(row.resumed) + " of " + std::to_string(res.requests[i].prompt.size()) +
                       ", prefilled " + std::to_string(row.prefilled) + " tokens, recorded " +
                       std::to_string(row.recomputed) + " recomputed";
        }
    }
    return {};
}

void hit_checks(const PrefixResult& res, Report& r) {
    size_t compared = 0;
    const std::string bad_hits = hits_against_recount(res, compared);
    if (compared > 0 || !bad_hits.empty())
        r.check("hits_match_token_recount",
                "Every request's KV-visible and state-usable hit equal a recount without the tree, and it "
                "resumed there",
                bad_hits.empty(),
                bad_hits.empty() ? format_grouped(double(compared)) +
                                       " requests of the caching methods: the longest common prefix with an "
                                       "earlier request's tokens and the deepest checkpoint it saved on it "
                                       "(KV-only resumes at the first, the others at the second)"
                                 : bad_hits);
    const std::string bad_prefill = prefill_off_the_rest(res);
    r.check("prefilled_exactly_the_rest",
            "Every request prefilled exactly the prompt past where it resumed, and recorded that",
            bad_prefill.empty(),
            bad_prefill.empty()
                ? "tokens counted where the server hands them to the model, in every request of "
                  "every caching method"
                : bad_prefill);
}

void accounting_checks(const PrefixResult& res, Report& r) {
    hit_checks(res, r);
    std::string bad_audit;
    for (const PrefixMethodResult& m : res.methods)
        if (caches(m) && !m.audit.empty() && bad_audit.empty()) bad_audit = m.label + ": " + m.audit;
    r.check("tree_pages_pool_agree", "Tree, page references and pool agree after every request (audit)",
            bad_audit.empty(),
            bad_audit.empty()
                ? "every page the tree holds is referenced once per holder, every checkpoint is live, "
                  "the pool's own audit passes"
                : bad_audit);
    bool zero = true;
    std::string left;
    for (const PrefixMethodResult& m : res.methods) {
        if (!caches(m)) continue;
        zero = zero && m.zero;
        if (!m.zero) left = m.label + ": " + m.zero_detail;
    }
    r.check("pool_returns_to_zero", "Reference counts and pool bytes return to zero", zero,
            zero ? "after each method's cache is dropped: 0 KV pages, 0 state slots, 0 owners in its pool"
                 : left + " left");
}

void notes(const PrefixParams& p, const PrefixResult& res, Report& r) {
    r.notes.push_back("The runnable model " + std::string(default_runnable_id()) +
                      " (seeded weights), kernel chunk " + std::to_string(p.chunk) + ", KV pages of " +
                      std::to_string(p.page_size) + " tokens. One checkpoint is " +
                      format_bytes(double(res.account.state_bytes)) + ", one token of KV " +
                      format_bytes(double(res.account.kv_bytes_per_token)) + ".");
    r.notes.push_back(
        "Every method is fed the cold run's output tokens (teacher forcing), so each decode step compares "
        "logits of the same inputs. \"Within rounding\": at most " +
        format_sig(kPrefixTolerance, 2) + " of the largest logit and the same greedy tokens.");
    if (p.codec != StateCodec::fp32)
        r.notes.push_back(std::string("Checkpoints are stored as ") + state_codec_id(p.codec) +
                          ": resumes from them are not exact (module 5 measures the error).");
}

// A run that could not complete reports why, and nothing else.
bool report_failure(const PrefixResult& res, Report& r) {
    if (!res.failed.empty()) {
        r.check("run_completed", "Run completed", false, res.failed);
        return true;
    }
    for (const PrefixMethodResult& m : res.methods)
        if (!m.error.empty()) {
            r.check(std::string("served_every_request_") + m.info->id,
                    "Served every request (" + m.label + ")", false, m.error);
            return true;
        }
    return false;
}

}  // namespace

void report_prefix(const PrefixParams& p, const PrefixResult& res, Report& r) {
    if (report_failure(res, r)) return;
    scalars(res, r);
    saving_tables(res, r);
    request_tables(p, res, r);
    plots(res, r);
    bitwise_check(p, res, r);
    kv_only_check(res, r);
    probe_check(p, res, r);
    within_rounding_check(p, res, r);
    accounting_checks(res, r);
    report_prefix_engine(p, res, r);
    notes(p, res, r);
}

}  // namespace k3
