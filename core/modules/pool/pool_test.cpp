// Module 3 `pool`: the report at defaults, determinism, the two "where it does not pay" effects,
// other presets, refused parameter combinations, and every check failing under its falsifiers.
#include <doctest/doctest.h>

#include "core/experiments/check_audit.h"
#include "core/modules/pool/pool.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;

namespace {

Report run_pool(std::vector<std::pair<std::string, std::string>> kv = {}) {
    return test::run_module("pool", kv, false);
}
// Kimi-Linear on one GPU: the proportions the effects below are shown with (a 41.4 MiB state slot).
std::vector<std::pair<std::string, std::string>> kimi_linear(
    std::vector<std::pair<std::string, std::string>> kv) {
    kv.insert(kv.begin(), {{"preset", "kimi-linear-48b"}, {"tp", "1"}});
    return kv;
}
double scalar(const Report& r, const std::string& key) { return test::scalar_of(r, key.c_str()); }
const Table* table(const Report& r, const std::string& prefix) { return test::table_named(r, prefix); }

double cell(const Table& t, size_t row, const std::string& column) {
    for (size_t c = 0; c < t.columns.size(); ++c)
        if (t.columns[c] == column) return std::get<double>(t.rows[row][c]);
    FAIL("no column " << column);
    return 0;
}

}  // namespace

TEST_CASE("pool: defaults are Kimi-K3 on one rank of TP8") {
    const Report r = run_pool();
    test::all_checks_pass(r);
    // bf16 KV at TP8: 768-token blocks (reference/kimi_k3.md §2.2), the state sharded by heads.
    CHECK(scalar(r, "vllm_block_tokens") == 768);
    CHECK(test::check_keyed(r, "vllm_block_k3_reference").passed);
    // The same bytes: the shared designs admit more at once than the static split, which refuses
    // requests while its free bytes would have held them.
    CHECK(scalar(r, "mean_running_unified") > scalar(r, "mean_running_static"));
    CHECK(scalar(r, "mean_running_vllm") > scalar(r, "mean_running_static"));
    CHECK(scalar(r, "refused_with_room_static") > 10 * (scalar(r, "refused_with_room_unified") + 1));
}

TEST_CASE("pool: Kimi-Linear on one GPU") {
    const Report r = run_pool(kimi_linear({}));
    test::all_checks_pass(r);
    CHECK(r.checks.size() >= 15);
    for (const char* design : {"static", "vllm", "unified"})
        for (const char* check :
             {"pool_built_", "no_page_owned_twice_", "freed_at_end_", "bytes_add_up_", "requests_accounted_"})
            CHECK(test::check_keyed(r, std::string(check) + design).passed);
    CHECK(test::check_keyed(r, "vllm_block_minimal").passed);
    CHECK(r.find_check("vllm_block_qwen3_next_observed") == nullptr);  // Qwen3-Next only
    // One help in pool.md for a figure of every design ("## utilisation_static, utilisation_vllm, ...").
    for (const char* key : {"utilisation_static", "utilisation_vllm", "utilisation_unified"}) {
        const Scalar* s = r.find_scalar(key);
        REQUIRE(s);
        CHECK(s->help.rfind("Bytes holding model data", 0) == 0);
    }
    // Kimi-Linear under vLLM: 1885 tokens of MLA per layer hold one KDA layer's state -> 1888.
    CHECK(scalar(r, "vllm_block_tokens") == 1888);
    CHECK(scalar(r, "min_cacheable_prompt_vllm") == 1889);
    CHECK(scalar(r, "min_cacheable_prompt_static") == 65);
    CHECK(scalar(r, "min_cacheable_prompt_unified") == 65);
    CHECK(scalar(r, "vllm_padding_layers") == 1);
    // SGLang's split at r = 0.9: 2 GiB * 0.9 / 1.9 = 1.02 GB -> 23 slots of 41.4 MiB.
    CHECK(scalar(r, "static_state_slots") == 23);
    // Same bytes: the shared designs admit more at once than the static split.
    CHECK(scalar(r, "mean_running_unified") > scalar(r, "mean_running_static"));
    CHECK(scalar(r, "mean_running_vllm") > scalar(r, "mean_running_static"));
    CHECK(scalar(r, "utilisation_unified") > scalar(r, "utilisation_static"));
    // vLLM pays padding and unfilled block slots; the others have no structural padding.
    CHECK(scalar(r, "padding_vllm") > 0);
    CHECK(scalar(r, "padding_static") == 0);
    CHECK(scalar(r, "padding_unified") == 0);
    CHECK(scalar(r, "unfilled_vllm") > 5 * scalar(r, "unfilled_unified"));
    // The static split refuses requests while its free bytes would have held them.
    CHECK(scalar(r, "refused_with_room_static") > 10 * (scalar(r, "refused_with_room_unified") + 1));
    // One pool map per design, downsampled to at most a few thousand cells, with owner labels.
    REQUIRE(r.grids.size() == 3);
    for (const CellGrid& g : r.grids) {
        CHECK(g.cells.size() <= 4096);
        CHECK(g.cells.size() == g.cell_labels.size());
        CHECK(g.categories.front() == "free");
        int labelled = 0;
        for (const auto& l : g.cell_labels) labelled += l.rfind("request ", 0) == 0;
        CHECK(labelled > 0);
    }
    // Series: running requests and bytes by type for each design, in simulated steps.
    int bytes_series = 0;
    for (const Series& s : r.series) {
        CHECK(s.x.size() == s.y.size());
        CHECK(s.x.size() <= 2 * PoolSimResult::kMaxSamples);
        bytes_series += s.y_unit == "B";
    }
    CHECK(bytes_series == 18);
}

TEST_CASE("pool: deterministic for a seed") {
    const std::vector<std::pair<std::string, std::string>> kv = {{"requests", "120"}, {"seed", "7"}};
    CHECK(test::without_timing(run_pool(kv)) == test::without_timing(run_pool(kv)));
    CHECK(test::without_timing(run_pool(kv)) !=
          test::without_timing(run_pool({{"requests", "120"}, {"seed", "8"}})));
}

TEST_CASE("pool: slicing the run does not change the report") {
    const Experiment& e = *find_experiment("pool");
    auto pp = parse_params(e.params, {{"requests", "150"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    Report whole = run_to_end(e, pp.params);
    auto run = e.start(pp.params);
    int slices = 0;
    while (run->step(0.001) < 1.0) ++slices;
    CHECK(slices > 3);  // it really ran in pieces
    Report sliced = run->report();
    whole.timing = {};
    sliced.timing = {};
    CHECK(report_json(whole) == report_json(sliced));
}

TEST_CASE("pool: a static split wastes memory when the mix shifts") {
    const Report r = run_pool(kimi_linear({{"shift_factor", "16"}}));
    const Table* t = table(r, "Before and after the mix shift");
    REQUIRE(t);
    // Rows: static before/after, vLLM before/after, unified before/after.
    // Before (short prompts) the static split runs out of state slots; after, of KV pages.
    CHECK(cell(*t, 0, "refused: no state id") > 0);
    CHECK(cell(*t, 0, "refused: no KV page") == 0);
    CHECK(cell(*t, 1, "refused: no KV page") > 0);
    // In both phases it admits fewer than the unified pool, which follows the mix.
    CHECK(cell(*t, 0, "mean running") < cell(*t, 4, "mean running"));
    CHECK(cell(*t, 1, "mean running") < cell(*t, 5, "mean running"));
    CHECK(cell(*t, 0, "free") > 2 * cell(*t, 4, "free"));
    // No shift, no phase table.
    CHECK(table(run_pool({{"shift_factor", "1"}, {"requests", "60"}}), "Before and after") == nullptr);
}

TEST_CASE("pool: prefixes shorter than vLLM's block are never reused") {
    // Every shared prefix is 1,500 tokens: 23 grid units of 64 for SGLang, less than one 1,888 block.
    const Report r =
        run_pool(kimi_linear({{"prefix_min", "1500"}, {"prefix_max", "1500"}, {"prefix_share", "0.8"}}));
    CHECK(scalar(r, "prefix_hit_tokens_vllm") == 0);
    CHECK(scalar(r, "prefix_hit_tokens_unified") > 0.5);
    const Table* t = table(r, "Prefix cache by shared-prefix length");
    REQUIRE(t);
    CHECK(cell(*t, 0, "cacheable: vLLM") == 0);
    CHECK(cell(*t, 0, "cacheable: unified") == 1472);
    CHECK(cell(*t, 0, "hits: vLLM") == 0);
}

TEST_CASE("pool: other presets") {
    const Report q = run_pool({{"preset", "qwen3-next-80b"}, {"tp", "1"}, {"requests", "100"}});
    test::all_checks_pass(q);
    CHECK(test::check_keyed(q, "vllm_block_qwen3_next_observed").passed);
    CHECK(scalar(q, "vllm_block_tokens") == 1056);
    const Report t = run_pool({{"preset", "tiny"}, {"tp", "1"}, {"budget_mib", "64"}, {"requests", "100"}});
    test::all_checks_pass(t);
    CHECK(scalar(t, "vllm_block_tokens") == 128);
}

TEST_CASE("pool: Kimi K3 under vLLM's derivation (reference/kimi_k3.md §2.2)") {
    struct Row {
        KvDtype kv;
        int tp, n;
        bool recoverssm;
        uint64_t page, block, padded;
    };
    // The first table of §2.2, both ends of its ranges of N.
    const Row rows[] = {
        {KvDtype::bf16, 1, 0, false, 6512640, 5760, 6635520},
        {KvDtype::fp8, 1, 0, false, 6512640, 11392, 6561792},
        {KvDtype::fp8, 1, 7, false, 7028736, 12288, 7077888},
        {KvDtype::fp8, 1, 7, true, 7815168, 13568, 7815168},
        {KvDtype::fp8, 8, 0, false, 814080, 1536, 884736},
        {KvDtype::fp8, 8, 7, false, 878592, 1536, 884736},
        {KvDtype::fp8, 8, 7, true, 976896, 1792, 1032192},
        {KvDtype::bf16, 8, 0, false, 814080, 768, 884736},
        {KvDtype::bf16, 8, 7, false, 878592, 768, 884736},
    };
    for (const Row& row : rows) {
        PoolParams p;
        p.preset = ModelPreset::kimi_k3;
        p.kv_dtype = row.kv;
        p.tp = row.tp;
        p.draft_len = row.n;
        p.recoverssm = row.recoverssm;
        CAPTURE(row.tp);
        CAPTURE(row.n);
        CAPTURE(row.recoverssm);
        CHECK(vllm_page_of(p).bytes() == row.page);
        CHECK(vllm_kernel_multiple(p) == 128);
        HybridBlockPlan plan;
        REQUIRE(plan_hybrid_blocks(vllm_model_of(p), vllm_kernel_multiple(p), kVllmUserBlockTokens, &plan)
                    .empty());
        CHECK(plan.block_tokens == row.block);
        CHECK(plan.page_bytes_per_layer == row.padded);
    }
    // Blocks held per request: 2 + N aligned, 1 + N without prefix caching, N = 0 with RecoverSSM.
    PoolParams p;
    p.draft_len = 7;
    CHECK(vllm_state_blocks_per_request(p) == 9);
    p.prefix_caching = false;
    CHECK(vllm_state_blocks_per_request(p) == 8);
    p.recoverssm = true;
    CHECK(vllm_state_blocks_per_request(p) == 1);
    // The MLA alignment is Kimi K3's tree's: Kimi-Linear keeps FlashAttention's 16 unless asked.
    PoolParams kl;
    kl.preset = ModelPreset::kimi_linear_48b;
    CHECK(vllm_kernel_multiple(kl) == 16);
    kl.mla_align = MlaAlign::on;
    CHECK(vllm_kernel_multiple(kl) == 128);

    // The acceptance runs, with the residency of the second table (4,395 MB aligned at TP1, N = 7).
    const Report tp8 =
        run_pool({{"preset", "kimi-k3"}, {"tp", "8"}, {"kv_dtype", "fp8"}, {"requests", "100"}});
    test::all_checks_pass(tp8);
    CHECK(scalar(tp8, "vllm_block_tokens") == 1536);
    CHECK(test::check_keyed(tp8, "vllm_block_k3_reference").passed);
    const Report n7 = run_pool(
        {{"preset", "kimi-k3"}, {"tp", "1"}, {"kv_dtype", "fp8"}, {"draft_len", "7"}, {"requests", "100"}});
    test::all_checks_pass(n7);
    CHECK(scalar(n7, "vllm_block_tokens") == 12288);
    CHECK(scalar(n7, "vllm_state_resident_bytes") == 9.0 * 7077888 * 69);
    CHECK(test::check_keyed(n7, "vllm_state_residency_k3_reference").passed);
}

TEST_CASE("pool: refused parameter combinations") {
    const Experiment& e = *find_experiment("pool");
    auto refused = [&](std::vector<std::pair<std::string, std::string>> kv, const std::string& key) {
        auto pp = parse_params(e.params, kv, RangePolicy::strict);
        REQUIRE(pp.ok());
        bool found = false;
        for (const auto& i : e.check(pp.params)) found |= i.level == ParamIssue::error && i.key == key;
        CHECK_MESSAGE(found, key);
    };
    refused({{"prefix_min", "5000"}, {"prefix_max", "100"}}, "prefix_min");
    refused({{"budget_mib", "16"}}, "budget_mib");
    refused({{"preset", "tiny"}}, "tp");  // 4 heads cannot be split over the default 8 ranks
    refused({{"preset", "kimi-k3"}, {"tp", "5"}}, "tp");
    refused({{"preset", "kimi-k3"}, {"recoverssm", "on"}}, "recoverssm");
    refused({{"preset", "qwen3-next-80b"}, {"recoverssm", "on"}, {"draft_len", "2"}}, "recoverssm");
}

TEST_CASE("pool: the run estimate keeps the defaults within the limits and refuses long runs") {
    test::estimate_within_limits("pool");
    // Pages of one token: page operations are most of the run (16 s natively).
    test::estimate_refuses("pool", {{"page_tokens", "1"}}, "page_tokens");
    // The pool's tables past the memory limit: tiny pages of a large budget.
    const std::string big = test::estimate_refuses(
        "pool", {{"preset", "tiny"}, {"tp", "1"}, {"page_tokens", "1"}, {"budget_mib", "65536"}},
        "page_tokens");
    CHECK(big.find("GiB") != std::string::npos);
    // Long outputs of many requests (the decode steps): the output length, the one moved furthest.
    test::estimate_refuses("pool", {{"requests", "5000"}, {"output_tokens", "16384"}}, "output_tokens");
}

TEST_CASE("pool: a factory can refuse a layout the validator accepts, and the report says which") {
    // At r = 20 the static split's KV share of 60 MiB (2.9 MiB) holds no page of 1,024 tokens (8.3 MB).
    const Report r = test::run_module(
        "pool", kimi_linear({{"state_ratio", "20"}, {"page_tokens", "1024"}, {"budget_mib", "60"}}));
    CHECK_FALSE(test::check_keyed(r, "pool_built_static").passed);
    CHECK(test::check_keyed(r, "pool_built_vllm").passed);
    CHECK(test::check_keyed(r, "pool_built_unified").passed);
    CHECK(r.find_check("bytes_add_up_static") == nullptr);  // the run stops there
}

TEST_CASE("pool: every check holds intact and fails when falsified, under each of its falsifiers" *
          test::native_only()) {
    const Experiment& e = *find_experiment("pool");
    const CheckAudit a = audit_checks(e);
    CHECK(a.problems.empty());
    CHECK(a.checks.size() == 19);
    for (const CheckProof& c : a.checks) {
        CAPTURE(c.key);
        CHECK(c.proven());
    }
    // The audit needs one falsifier to break a check; here each breaks every check it names, in every design.
    for (size_t i = 0; i < e.falsifiers.size(); ++i) {
        const FalsifierInfo& f = e.falsifiers[i];
        CAPTURE(f.id);
        const Report bad =
            run_falsified_to_end(e, parse_params(e.params, f.params, RangePolicy::strict).params, i);
        for (const std::string& pattern : f.keys) {
            size_t named = 0;
            for (const Check& c : bad.checks)
                if (key_matches(pattern, c.key)) {
                    ++named;
                    CHECK_MESSAGE(!c.passed, c.key);
                }
            CHECK_MESSAGE(named == (pattern.back() == '*' ? kPoolDesigns.size() : 1), pattern);
        }
    }
}
