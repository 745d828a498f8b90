#include "core/experiments/check_audit.h"

#include <map>
#include <optional>
#include <set>

#include "core/base/json.h"

namespace k3 {

namespace {

using Kv = std::vector<std::pair<std::string, std::string>>;

struct Audit {
    const Experiment& e;
    CheckAudit out;
    std::map<Kv, Report> intact;  // by parameter set
    std::set<Kv> refused;

    // The run's parameters, or none (and a problem named, once) when they are refused.
    std::optional<Params> params_of(const Kv& kv, const std::string& who) {
        if (refused.count(kv)) return std::nullopt;
        ParsedParams pp = parse_params(e.params, kv, RangePolicy::strict);
        for (const ParamIssue& i : e.check(pp.params)) pp.issues.push_back(i);
        if (pp.ok()) return pp.params;
        refused.insert(kv);
        for (const ParamIssue& i : pp.issues)
            if (i.level == ParamIssue::error) out.problems.push_back(e.id + ": " + who + ": " + i.message);
        return std::nullopt;
    }
    const Report* intact_run(const Kv& kv, const std::string& who) {
        if (auto it = intact.find(kv); it != intact.end()) return &it->second;
        const std::optional<Params> p = params_of(kv, who);
        if (!p) return nullptr;
        return &intact.emplace(kv, run_to_end(e, *p)).first->second;
    }
    bool known(const std::string& key) const {
        for (const CheckProof& c : out.checks)
            if (c.key == key) return true;
        return false;
    }
    CheckProof& proof(const std::string& key) {
        for (CheckProof& c : out.checks)
            if (c.key == key) return c;
        out.checks.push_back({e.id, key});
        return out.checks.back();
    }
    void falsify(size_t i);
};

// Whether any check with this key failed (a key can repeat: once per design, per simulation).
bool any_failed(const Report& r, const std::string& key) {
    for (const auto* v : {&r.checks, &r.timing.checks})
        for (const Check& c : *v)
            if (c.key == key && !c.passed) return true;
    return false;
}

void Audit::falsify(size_t i) {
    const FalsifierInfo& f = e.falsifiers[i];
    const std::string who = "falsifier " + f.id;
    const Report* base = intact_run(f.params, who);  // its checks' intact state is already recorded
    const std::optional<Params> p = params_of(f.params, who);
    if (!base || !p) return;
    const Report bad = run_falsified_to_end(e, *p, i);
    for (const std::string& pattern : f.keys) {
        bool named = false;
        auto consider = [&](const std::string& key) {
            named = true;
            const bool reported_intact = known(key);
            CheckProof& c = proof(key);
            if (!reported_intact) c.held_intact = true;  // a check that only reports a failure
            const bool caught = any_failed(bad, key);
            if (c.falsifier.empty() || (caught && !c.failed_when_falsified)) c.falsifier = f.does;
            c.failed_when_falsified = c.failed_when_falsified || caught;
        };
        for (const auto* v : {&base->checks, &base->timing.checks})
            for (const Check& c : *v)
                if (key_matches(pattern, c.key)) consider(c.key);
        for (const auto* v : {&bad.checks, &bad.timing.checks})  // checks that report only a failure
            for (const Check& c : *v)
                if (key_matches(pattern, c.key) && !base->find_check(c.key)) consider(c.key);
        if (!named)
            out.problems.push_back(e.id + ": " + who + " names " + pattern +
                                   ", which its runs do not report");
    }
}

}  // namespace

size_t CheckAudit::proven() const {
    size_t n = 0;
    for (const CheckProof& c : checks) n += c.proven();
    return n;
}

CheckAudit audit_checks(const Experiment& e) {
    Audit a{e, {}, {}};
    std::vector<std::pair<Kv, std::string>> sets = {{Kv{}, "defaults"}};
    for (const FalsifierInfo& f : e.falsifiers) sets.push_back({f.params, "falsifier " + f.id});
    for (const Kv& kv : e.audit_params) sets.push_back({kv, "audit parameters"});
    std::map<std::string, bool> seen;  // key: passed in every intact run that reports it
    for (const auto& [kv, who] : sets)
        if (const Report* r = a.intact_run(kv, who))
            for (const auto* v : {&r->checks, &r->timing.checks})
                for (const Check& c : *v) {
                    auto [it, first] = seen.emplace(c.key, c.passed);
                    if (!first) it->second = it->second && c.passed;
                }
    for (const auto& [key, passed] : seen) a.proof(key).held_intact = passed;
    if (e.falsifiers.empty()) {
        a.out.problems.push_back(e.id + ": the module declares no falsifiers");
        return a.out;
    }
    for (size_t i = 0; i < e.falsifiers.size(); ++i) a.falsify(i);
    return a.out;
}

std::string check_audit_json(const CheckAudit& a) {
    JsonWriter w(true);
    w.begin_object().key("checks").begin_array();
    for (const CheckProof& c : a.checks)
        w.begin_object()
            .field("module", c.module)
            .field("key", c.key)
            .field("held_intact", c.held_intact)
            .field("failed_when_falsified", c.failed_when_falsified)
            .field("falsifier", c.falsifier)
            .end_object();
    w.end_array();
    w.field("total", double(a.checks.size())).field("proven", double(a.proven()));
    w.key("problems").begin_array();
    for (const std::string& p : a.problems) w.value(p);
    w.end_array();
    w.end_object();
    return w.take();
}

}  // namespace k3
