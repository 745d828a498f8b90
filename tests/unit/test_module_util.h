// Running a module the way the CLI does, for the module tests.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/experiments/check_audit.h"
#include "core/experiments/registry.h"

namespace k3::test {

// Parses key=value pairs strictly, requires no error (and, unless `warnings_ok`, no warning) from the
// module's validation, runs to the end.
inline Report run_module(const char* module, const std::vector<std::pair<std::string, std::string>>& kv,
                         bool warnings_ok = true) {
    const Experiment& e = *find_experiment(module);
    auto pp = parse_params(e.params, kv, RangePolicy::strict);
    REQUIRE(pp.ok());
    for (const ParamIssue& i : e.check(pp.params))
        REQUIRE_MESSAGE((warnings_ok && i.level == ParamIssue::warning), i.message);
    return run_to_end(e, pp.params);
}

inline double scalar_of(const Report& r, const char* key) {
    const Scalar* s = r.find_scalar(key);
    REQUIRE_MESSAGE(s != nullptr, key);
    return s->value;
}

// The first table whose name starts with `prefix`, or null.
inline const Table* table_named(const Report& r, const std::string& prefix) {
    for (const Table& t : r.tables)
        if (t.name.rfind(prefix, 0) == 0) return &t;
    return nullptr;
}

// The check with stable key `key` (a test failure if the report has none).
inline const Check& check_keyed(const Report& r, const std::string& key) {
    const Check* c = r.find_check(key);
    REQUIRE_MESSAGE(c != nullptr, "no check with key " << key);
    return *c;
}

// Every check has a key, and no two share one.
inline void check_keys_unique(const Report& r) {
    for (size_t i = 0; i < r.checks.size(); ++i) {
        CHECK_MESSAGE(!r.checks[i].key.empty(), r.checks[i].name);
        for (size_t j = 0; j < i; ++j) CHECK_MESSAGE(r.checks[i].key != r.checks[j].key, r.checks[i].key);
    }
}

// The module's check audit (k3cli audit-checks): `checks` keys, each held intact and failed when
// falsified, and no problem.
inline void all_checks_proven(const char* module, size_t checks) {
    const CheckAudit a = audit_checks(*find_experiment(module));
    for (const std::string& p : a.problems) FAIL_CHECK(p);
    CHECK(a.checks.size() == checks);
    for (const CheckProof& c : a.checks) CHECK_MESSAGE(c.proven(), c.key << ": " << c.falsifier);
}

inline void all_checks_pass(const Report& r) {
    CHECK(!r.checks.empty());
    for (const Check& c : r.checks) CHECK_MESSAGE(c.passed, c.name << ": " << c.detail);
}

// Every falsifier of the module, applied to a run with `kv` (on top of the falsifier's own parameters),
// fails every check it names, each of which held on the intact run with the same parameters (k3cli
// audit-checks needs only one falsifier to fail each check). A key of `kv` replaces the falsifier's own
// value (parse_params refuses a key given twice).
inline void falsifiers_fail_their_checks(const char* module,
                                         const std::vector<std::pair<std::string, std::string>>& kv) {
    const Experiment& e = *find_experiment(module);
    REQUIRE(!e.falsifiers.empty());
    std::map<std::vector<std::pair<std::string, std::string>>, Report> intact;
    for (size_t i = 0; i < e.falsifiers.size(); ++i) {
        const FalsifierInfo& f = e.falsifiers[i];
        auto all = f.params;
        for (const auto& [k, v] : kv) {
            // (an init-capture: clang 14, the wasm build's compiler, cannot capture a structured binding)
            auto own =
                std::find_if(all.begin(), all.end(), [&key = k](const auto& p) { return p.first == key; });
            if (own != all.end())
                own->second = v;
            else
                all.emplace_back(k, v);
        }
        auto pp = parse_params(e.params, all, RangePolicy::strict);
        REQUIRE_MESSAGE(pp.ok(), f.id);
        if (!intact.count(all)) intact.emplace(all, run_to_end(e, pp.params));
        const Report &good = intact.at(all), bad = run_falsified_to_end(e, pp.params, i);
        for (const std::string& pattern : f.keys) {
            CAPTURE(f.id);
            CAPTURE(pattern);
            size_t named = 0;
            for (const auto* v : {&good.checks, &good.timing.checks})
                for (const Check& c : *v) {
                    if (!key_matches(pattern, c.key)) continue;
                    ++named;
                    CHECK_MESSAGE(c.passed, c.key);
                    bool failed = false;
                    for (const auto* w : {&bad.checks, &bad.timing.checks})
                        for (const Check& b : *w) failed = failed || (b.key == c.key && !b.passed);
                    CHECK_MESSAGE(failed, c.key);
                }
            CHECK(named > 0);
        }
    }
}

// The module's run estimate (Experiment::estimate) of the run with `kv` on top of its defaults: within
// the run limits (core/experiments/experiment.h), with what it counted, and accepted by
// Experiment::check.
inline RunCost estimate_within_limits(const char* module,
                                      const std::vector<std::pair<std::string, std::string>>& kv = {}) {
    const Experiment& e = *find_experiment(module);
    REQUIRE(e.estimate);
    auto pp = parse_params(e.params, kv, RangePolicy::strict);
    REQUIRE(pp.ok());
    const RunCost c = e.estimate(pp.params);
    CHECK(c.seconds > 0);
    CHECK(c.seconds <= kRunSecondsLimit);
    CHECK(c.bytes > 0);
    CHECK(c.bytes <= kRunBytesLimit);
    CHECK(!c.counted.empty());
    for (const ParamIssue& i : e.check(pp.params)) CHECK_MESSAGE(i.level == ParamIssue::warning, i.message);
    return c;
}

// The run with `kv` is refused before it starts (Experiment::check, the CLI's exit 2) by the run
// estimate, on parameter `key`. Returns the refusal's message ("" when there is none).
inline std::string estimate_refuses(const char* module,
                                    const std::vector<std::pair<std::string, std::string>>& kv,
                                    const std::string& key) {
    const Experiment& e = *find_experiment(module);
    auto pp = parse_params(e.params, kv, RangePolicy::strict);
    REQUIRE(pp.ok());
    std::string refusal;
    for (const ParamIssue& i : e.check(pp.params))
        if (i.level == ParamIssue::error && i.key == key &&
            i.message.find("above the limit") != std::string::npos)
            refusal = i.message;
    CHECK_MESSAGE(!refusal.empty(), module << ": no refusal on " << key);
    return refusal;
}

// Writes `text` to `path` (a trace for a module's `trace` parameter); false if it cannot.
inline bool write_text_file(const std::string& path, const std::string& text) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
    return std::fclose(f) == 0 && ok;
}

// The report's JSON without the wall-clock part: equal across runs and builds.
inline std::string without_timing(Report r) {
    r.timing = {};
    return report_json(r);
}

}  // namespace k3::test
