// Module 14 `boundaries`: defaults pass every check, nine maps with contours, break-evens that agree
// with direct evaluation of core/boundaries, monotone where physics says so, reproducible reports,
// other presets and settings, refusals; the second count's blob sizes and closed form against the
// format's arithmetic and lifecycle's search; every falsifier fails exactly the checks it names.
#include <doctest/doctest.h>

#include <cmath>
#include <string>

#include "core/boundaries/economics.h"
#include "core/boundaries/grid.h"
#include "core/experiments/check_audit.h"
#include "core/lifecycle/blob_layout.h"
#include "core/modules/boundaries/boundaries.h"
#include "core/modules/boundaries/boundaries_ledger.h"
#include "tests/unit/test_module_util.h"
#include "tests/unit/test_native_only.h"

using namespace k3;
using namespace k3::boundaries;

namespace {

Report run(const std::vector<std::pair<std::string, std::string>>& kv) {
    return test::run_module("boundaries", kv);
}
double scalar(const Report& r, const char* k) { return test::scalar_of(r, k); }
const HeatMap& map_named(const Report& r, const std::string& prefix) {
    for (const HeatMap& h : r.heatmaps)
        if (h.name.rfind(prefix, 0) == 0) return h;
    FAIL("no heat map " << prefix);
    return r.heatmaps.front();
}
double z(const HeatMap& h, size_t ix, size_t iy) { return h.z[iy * h.x.size() + ix]; }

}  // namespace

TEST_CASE("boundaries: module 14, every check passes, nine maps with contours, a verdict per method" *
          test::native_only()) {
    const Experiment* e = find_experiment("boundaries");
    REQUIRE(e != nullptr);
    CHECK(e->number == 14);
    CHECK(e->component == "opposition");
    CHECK(experiments()[13].id == "boundaries");  // module 15 (cost) follows it
    CHECK(e->how_it_works.find("Sources") != std::string::npos);
    CHECK(e->where_it_does_not_pay.find("roofline estimate") != std::string::npos);
    const Report r = run({});
    CHECK(r.checks.size() == 16);
    test::all_checks_pass(r);
    test::check_keys_unique(r);
    CHECK(test::check_keyed(r, "map6_no_reuse_routes_as_least_loaded").passed);
    REQUIRE(r.heatmaps.size() == 9);
    for (const HeatMap& h : r.heatmaps) {
        CAPTURE(h.name);
        CHECK(h.contour.has_value());
        CHECK(h.z.size() == h.x.size() * h.y.size());
    }
    // The computed maps cross their break-even, except map 3: at 64 running requests replay pays everywhere.
    for (const char* m : {"1.", "2.", "4.", "5."})
        CHECK_MESSAGE(has_both_signs(map_named(r, m).z, *map_named(r, m).contour), m);
    CHECK_FALSE(has_both_signs(map_named(r, "3.").z, 0));
    // The verdict: one row per method, each naming a module that exists.
    REQUIRE(!r.tables.empty());
    const Table& v = r.tables.front();
    CHECK(v.name.rfind("Verdict", 0) == 0);
    REQUIRE(v.rows.size() == 9);
    for (const auto& row : v.rows) CHECK(find_experiment(std::get<std::string>(row.back())) != nullptr);
    // Break-evens where the arithmetic puts them for Kimi Linear on an H100 (the defaults).
    const BoundaryInputs in = boundary_inputs(BoundariesParams{});
    REQUIRE(in.model.id == "kimi-linear-48b");
    REQUIRE(in.hardware.id == "h100");
    const ModelConfig& kimi = in.model;
    const Hardware& h100 = in.hardware;
    const double shortest = scalar(r, "prefix_min_tokens");
    CHECK(prefix_cache_value(kimi, h100, shortest, 30).net(1) >= 0);
    CHECK(prefix_cache_value(kimi, h100, shortest - 1, 30).net(1) < 0);
    const double n8 = scalar(r, "cp_min_tokens_per_rank");
    CHECK(cp_prefill(kimi, h100, *link_preset("nvlink4"), int(n8), 8).speedup() >= 1);
    CHECK(cp_prefill(kimi, h100, *link_preset("nvlink4"), int(n8) - 1, 8).speedup() < 1);
    const double bw = scalar(r, "migration_min_bandwidth") * 1e9;
    CHECK(move_vs_recompute(kimi, h100, bw * 1.001, 32768, -1).advantage() > 1);
    CHECK(move_vs_recompute(kimi, h100, bw * 0.999, 32768, -1).advantage() < 1);
    CHECK(scalar(r, "replay_min_draft") >= 1);
    CHECK(scalar(r, "best_interval") >= 64);
    // Shapes: the CP map's R = 1 row is 1; moving never gets worse with bandwidth.
    const HeatMap& cp = map_named(r, "4.");
    for (size_t ix = 0; ix < cp.x.size(); ++ix) CHECK(z(cp, ix, 0) == 1);
    const HeatMap& mig = map_named(r, "5.");
    for (size_t ix = 0; ix < mig.x.size(); ++ix)
        for (size_t iy = 1; iy < mig.y.size(); ++iy) CHECK(z(mig, ix, iy) >= z(mig, ix, iy - 1));
    // The affinity map's reuse-0 column is exactly 1: both routers route alike.
    const HeatMap& aff = map_named(r, "6.");
    for (size_t iy = 0; iy < aff.y.size(); ++iy) CHECK(z(aff, 0, iy) == 1);
    // Without shared prefixes a host tier has nothing to serve: map 8's reuse-0 column is exactly 1.
    const HeatMap& host = map_named(r, "8.");
    for (size_t iy = 0; iy < host.y.size(); ++iy) CHECK(z(host, 0, iy) == 1);
    // Speculation that never keeps a draft only adds the verify's work; keeping all of them pays at the
    // lowest load.
    const HeatMap& spec = map_named(r, "9.");
    for (size_t iy = 0; iy < spec.y.size(); ++iy) CHECK(z(spec, 0, iy) < 1);
    CHECK(z(spec, spec.x.size() - 1, 0) > 1);
    // Reproducible: the same report again, timing aside.
    CHECK(test::without_timing(r) == test::without_timing(run({})));
}

TEST_CASE("boundaries: other presets and settings, refusals") {
    const Report q = run({{"preset", "qwen3-next-80b"},
                          {"hardware", "a100"},
                          {"resolution", "8"},
                          {"fleet_grid", "2"},
                          {"fleet_requests", "60"},
                          {"dest_checkpoint", "1"},
                          {"affinity", "state_aware"},
                          {"residence_s", "600"}});
    test::all_checks_pass(q);
    CHECK(map_named(q, "1.").x.size() == 8);
    CHECK(map_named(q, "6.").x.size() == 2);
    // A longer residence makes caching a prefix need more reuse.
    const Report shorter = run({{"preset", "qwen3-next-80b"},
                                {"hardware", "a100"},
                                {"resolution", "8"},
                                {"fleet_grid", "2"},
                                {"fleet_requests", "60"},
                                {"residence_s", "6"}});
    CHECK(scalar(shorter, "prefix_reuse_needed") < scalar(q, "prefix_reuse_needed"));
    const Experiment& e = *find_experiment("boundaries");
    CHECK_FALSE(parse_params(e.params, {{"affinity", "session"}}, RangePolicy::strict).ok());
    // SGLang's chunk of 64 tracks a state every 64 tokens of the conversation trace: past the run limit.
    auto big =
        parse_params(e.params, {{"engine", "sglang"}, {"chunked_prefill_tokens", "64"}}, RangePolicy::strict);
    REQUIRE(big.ok());
    bool refused = false;
    for (const ParamIssue& i : e.check(big.params))
        refused |= i.level == ParamIssue::error && i.key == "chunked_prefill_tokens";
    CHECK(refused);
}

TEST_CASE("boundaries: blob sizes measured from the writer are the format's arithmetic") {
    using namespace lifecycle;
    for (const char* id : {"kimi-linear-48b", "qwen3-next-80b"}) {
        CAPTURE(id);
        const ModelConfig c = *model_preset(id);
        const BlobLayout l = BlobLayout::of(c);
        const BlobSizes b = measure_blob_sizes(c);
        for (uint64_t P : {0, 1, 4096, 1048576}) {
            CHECK(b.all(double(P), double(P + 1)) == double(blob_bytes(l, P, P + 1, kBlobAll)));
            CHECK(b.kv(double(P), double(P + 1)) ==
                  double(blob_bytes(l, P, P + 1, kBlobKv | kBlobTokens | kBlobSampler)));
            CHECK(b.ids(double(P + 1)) == double(blob_bytes(l, 0, P + 1, kBlobTokens | kBlobSampler)));
        }
    }
}

TEST_CASE("boundaries: the closed-form move_kv break-even is lifecycle's search, within a token") {
    BoundariesParams p;
    for (ModelPreset m : {ModelPreset::kimi_linear_48b, ModelPreset::qwen3_next_80b}) {
        const BlobSizes blobs = measure_blob_sizes(*model_preset(m));
        for (const std::string& hw : hardware_preset_ids())
            for (const std::string& link : link_preset_ids())
                for (uint32_t context : {256u, 2896u, 32768u, 185364u, 1048576u}) {
                    p.preset = m;
                    p.hardware = *hardware_preset(hw);
                    p.link = *link_preset(link);
                    p.context = context;
                    const BoundaryInputs in = boundary_inputs(p);
                    const double searched =
                        lifecycle::move_kv_break_even_distance(in.model, in.context, in.link, in.hardware,
                                                               in.eff, lifecycle::RecomputeRegime::in_batch);
                    CAPTURE(in.model.id);
                    CAPTURE(hw);
                    CAPTURE(link);
                    CAPTURE(context);
                    CHECK(std::fabs(move_kv_break_even_closed_form(in, blobs) - searched) <= 1);
                }
    }
}

TEST_CASE("boundaries: every falsifier fails exactly the checks it names" * test::native_only()) {
    const Experiment& e = *find_experiment("boundaries");
    REQUIRE(!e.falsifiers.empty());
    for (size_t i = 0; i < e.falsifiers.size(); ++i) {
        const FalsifierInfo& f = e.falsifiers[i];
        auto pp = parse_params(e.params, f.params, RangePolicy::strict);
        REQUIRE(pp.ok());
        if (i == 0 || f.params != e.falsifiers.front().params)
            test::all_checks_pass(run_to_end(e, pp.params));
        const Report bad = run_falsified_to_end(e, pp.params, i);
        for (const Check& c : bad.checks) {
            bool named = false;
            for (const std::string& k : f.keys) named = named || key_matches(k, c.key);
            CAPTURE(f.id);
            CHECK_MESSAGE(c.passed != named, c.key << ": " << c.detail);
        }
    }
}

TEST_CASE("boundaries: every check holds intact and fails when falsified" * test::native_only()) {
    const CheckAudit a = audit_checks(*find_experiment("boundaries"));
    CHECK(a.problems.empty());
    CHECK(a.checks.size() == 18);
    for (const CheckProof& c : a.checks) {
        CAPTURE(c.key);
        CHECK(c.proven());
    }
}

TEST_CASE("boundaries: Kimi-K3 on GB300 passes every check; no H100 instance holds it") {
    // Map 6's instances take the fewest GPUs that hold the weights: Kimi-K3's 1.42 TiB need 8 GB300.
    CHECK(fleet_map_gpus(*model_preset("kimi-k3"), *hardware_preset("gb300")) == 8);
    CHECK(fleet_map_gpus(*model_preset("kimi-linear-48b"), *hardware_preset("h100")) == 2);
    const Report r = run({{"preset", "kimi-k3"},
                          {"hardware", "gb300"},
                          {"resolution", "6"},
                          {"fleet_grid", "2"},
                          {"fleet_requests", "40"}});
    test::all_checks_pass(r);
    const Experiment& e = *find_experiment("boundaries");
    auto pp = parse_params(e.params, {{"preset", "kimi-k3"}}, RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e.check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "hardware";
    CHECK(refused);
}

TEST_CASE("boundaries: map 3 with RecoverSSM as vLLM runs it, and a GDN model refused") {
    // Kimi-K3 with prefix caching: 2 + N snapshot pages against 2 RecoverSSM pages (reference/kimi_k3.md
    // §3.3); RecoverSSM writes records where snapshots write pages, so it saves at every cell.
    const Report r = run({{"preset", "kimi-k3"},
                          {"hardware", "gb300"},
                          {"variant", "recoverssm"},
                          {"resolution", "6"},
                          {"fleet_grid", "2"},
                          {"fleet_requests", "40"}});
    test::all_checks_pass(r);
    const HeatMap& h = r.heatmaps.at(2);
    CHECK(h.name.find("RecoverSSM") != std::string::npos);
    for (double z : h.z) CHECK(z > 0);
    CHECK(test::scalar_of(r, "replay_min_draft") == 1);
    const Experiment& e = *find_experiment("boundaries");
    auto pp = parse_params(e.params, {{"preset", "qwen3-next-80b"}, {"variant", "recoverssm"}},
                           RangePolicy::strict);
    REQUIRE(pp.ok());
    bool refused = false;
    for (const ParamIssue& i : e.check(pp.params))
        refused |= i.level == ParamIssue::error && i.key == "variant";
    CHECK(refused);
}

// Map 2 under an engine: module 5's engine replay of the same workload at each setting (its recompute is
// module 5's at that chunked prefill / block), the axis named, the fleet's engine fields set.
TEST_CASE("boundaries: map 2 under SGLang's and vLLM's rules, module 5's engine replays at each setting") {
    using Kv = std::vector<std::pair<std::string, std::string>>;
    struct Case {
        const char *engine, *axis;
        Kv module5;
        double at;
    };
    const Case cases[] = {
        {"sglang",
         "chunked_prefill_tokens",
         {{"engine", "sglang"}, {"chunked_prefill_tokens", "8192"}},
         8192},
        {"vllm",
         "block B",
         {{"engine", "vllm"}, {"vllm_block_tokens", "1024"}, {"retention_interval", "dense"}},
         1024},
    };
    for (const Case& c : cases) {
        CAPTURE(c.engine);
        const Report r =
            run({{"resolution", "6"}, {"fleet_grid", "2"}, {"fleet_requests", "40"}, {"engine", c.engine}});
        test::all_checks_pass(r);
        CHECK(test::check_keyed(r, "map2_engine_follows_setting").passed);
        CHECK(r.find_check("map2_finer_interval_nested") == nullptr);
        const HeatMap& h = map_named(r, "2.");
        CHECK(h.x_label.find(c.axis) != std::string::npos);
        CHECK(h.x.size() == 8);
        const Table* t = test::table_named(r, "Map 2:");
        REQUIRE(t != nullptr);
        Kv m5 = c.module5;
        for (Kv::value_type kv :
             Kv{{"sessions", "24"}, {"seed", "1"}, {"preset", "kimi-linear-48b"}, {"sweeps", "0"}})
            m5.push_back(kv);
        const Report five = test::run_module("checkpoints", m5);
        bool found = false;
        for (const std::vector<Cell>& row : t->rows) {
            if (std::get<double>(row[0]) != c.at) continue;
            found = true;
            CHECK(std::get<double>(row[1]) * scalar(five, "requests") ==
                  doctest::Approx(scalar(five, "recomputed_tokens")).epsilon(1e-12));
        }
        CHECK(found);
    }
}
