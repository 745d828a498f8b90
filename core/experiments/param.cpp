#include "core/experiments/param.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "core/base/numfmt.h"

namespace k3 {

ParamSpec ParamSpec::seed(std::string help) {
    return integer("seed", "Seed", "", 0, 1e9, 1).describe(help.empty() ? help : help + kSeedHelpSuffix);
}

ParamSpec ParamSpec::integer(std::string key, std::string label, std::string unit, double min, double max,
                             double def) {
    ParamSpec s;
    s.key = std::move(key);
    s.label = std::move(label);
    s.unit = std::move(unit);
    s.kind = ParamKind::integer;
    s.min = min;
    s.max = max;
    s.def = def;
    return s;
}

ParamSpec ParamSpec::real(std::string key, std::string label, std::string unit, double min, double max,
                          double def) {
    ParamSpec s = integer(std::move(key), std::move(label), std::move(unit), min, max, def);
    s.kind = ParamKind::real;
    return s;
}

ParamSpec ParamSpec::choice(std::string key, std::string label, std::vector<std::string> choices,
                            std::string def, std::vector<std::string> labels) {
    ParamSpec s;
    s.key = std::move(key);
    s.label = std::move(label);
    s.kind = ParamKind::choice;
    s.choices = std::move(choices);
    s.choice_labels = std::move(labels);
    s.def_text = std::move(def);
    return s;
}

ParamSpec ParamSpec::flag(std::string key, std::string label, bool def) {
    ParamSpec s;
    s.key = std::move(key);
    s.label = std::move(label);
    s.kind = ParamKind::flag;
    s.min = 0;
    s.max = 1;
    s.def = def ? 1 : 0;
    return s;
}

ParamSpec ParamSpec::text(std::string key, std::string label, std::string def,
                          std::vector<std::string> suggestions) {
    ParamSpec s;
    s.key = std::move(key);
    s.label = std::move(label);
    s.kind = ParamKind::text;
    s.def_text = std::move(def);
    s.choices = std::move(suggestions);
    return s;
}

std::string ParamSpec::format(double v) const {
    if (kind == ParamKind::flag) return v != 0 ? "1" : "0";
    return format_number(v);
}

std::string ParamSpec::label_of(const std::string& c) const {
    for (size_t i = 0; i < choices.size() && i < choice_labels.size(); ++i)
        if (choices[i] == c) return choice_labels[i];
    return c;
}

Params::Params(const std::vector<ParamSpec>* specs) : specs_(specs) {
    nums_.resize(specs->size());
    strs_.resize(specs->size());
    for (size_t i = 0; i < specs->size(); ++i) {
        nums_[i] = (*specs)[i].def;
        strs_[i] = (*specs)[i].def_text;
    }
}

size_t Params::index(std::string_view key) const {
    if (specs_)
        for (size_t i = 0; i < specs_->size(); ++i)
            if ((*specs_)[i].key == key) return i;
    throw std::out_of_range("undeclared parameter '" + std::string(key) + "'");
}

const ParamSpec* Params::spec(std::string_view key) const {
    if (specs_)
        for (const auto& s : *specs_)
            if (s.key == key) return &s;
    return nullptr;
}

static std::string range_text(const ParamSpec& s) {
    std::string r = "[" + s.format(s.min) + ", " + s.format(s.max) + "]";
    if (!s.unit.empty()) r += " " + s.unit;
    return r;
}

static std::string join(const std::vector<std::string>& v) {
    std::string out;
    for (const auto& x : v) out += (out.empty() ? "" : ", ") + x;
    return out;
}

bool Params::set(std::string_view key, std::string_view text, RangePolicy policy,
                 std::vector<ParamIssue>& issues) {
    const ParamSpec* s = spec(key);
    if (!s) {
        std::vector<std::string> known;
        for (const auto& p : *specs_) known.push_back(p.key);
        issues.push_back({ParamIssue::error, std::string(key),
                          "unknown parameter '" + shown_text(key) + "' (known: " + join(known) + ")"});
        return false;
    }
    const size_t i = index(key);
    auto refuse = [&](const std::string& why) {
        issues.push_back({ParamIssue::error, s->key,
                          "bad value '" + shown_text(text) + "' for parameter '" + s->key + "': " + why});
        return false;
    };
    switch (s->kind) {
        case ParamKind::choice: {
            if (std::find(s->choices.begin(), s->choices.end(), text) == s->choices.end())
                return refuse("expected one of " + join(s->choices));
            strs_[i] = std::string(text);
            return true;
        }
        case ParamKind::text: {
            if (text.empty()) return refuse("expected a non-empty value");
            if (text.size() > 4096) return refuse("longer than 4096 characters");
            strs_[i] = std::string(text);
            return true;
        }
        case ParamKind::flag: {
            const auto b = parse_flag(text);
            if (!b) return refuse("expected true/false, 1/0, yes/no or on/off");
            nums_[i] = *b ? 1 : 0;
            return true;
        }
        case ParamKind::integer:
        case ParamKind::real: {
            double v;
            std::string why;
            if (s->kind == ParamKind::integer) {
                const auto n = parse_integer(text, &why);
                if (!n) return refuse(why);
                v = double(*n);
            } else {
                const auto r = parse_real(text, &why);
                if (!r) return refuse(why);
                v = *r;
            }
            if (v < s->min || v > s->max) {
                if (policy == RangePolicy::strict) return refuse("out of range " + range_text(*s));
                const double c = std::clamp(v, s->min, s->max);
                issues.push_back({ParamIssue::warning, s->key,
                                  s->key + "=" + std::string(text) + " is out of range " + range_text(*s) +
                                      "; clamped to " + s->format(c)});
                v = c;
            }
            nums_[i] = v;
            return true;
        }
    }
    return false;
}

void Params::set_number(std::string_view key, double v) {
    const size_t i = index(key);
    const ParamSpec& s = (*specs_)[i];
    if (!std::isfinite(v)) return;
    v = std::clamp(v, s.min, s.max);
    if (s.kind == ParamKind::integer || s.kind == ParamKind::flag) v = std::round(v);
    nums_[i] = v;
}

void Params::set_text(std::string_view key, std::string v) { strs_[index(key)] = std::move(v); }

void Params::reset(std::string_view key) {
    const size_t i = index(key);
    nums_[i] = (*specs_)[i].def;
    strs_[i] = (*specs_)[i].def_text;
}

double Params::num(std::string_view key) const { return nums_[index(key)]; }
const std::string& Params::str(std::string_view key) const { return strs_[index(key)]; }

bool Params::is_default(std::string_view key) const {
    const size_t i = index(key);
    const ParamSpec& s = (*specs_)[i];
    return s.is_textual() ? strs_[i] == s.def_text : nums_[i] == s.def;
}

bool Params::is_active(const ParamSpec& s) const {
    if (s.active_key.empty()) return true;
    if (s.active_value.rfind('!', 0) == 0) return text(s.active_key) != s.active_value.substr(1);
    return text(s.active_key) == s.active_value;
}

std::string Params::text(std::string_view key) const {
    const size_t i = index(key);
    const ParamSpec& s = (*specs_)[i];
    return s.is_textual() ? strs_[i] : s.format(nums_[i]);
}

bool ParsedParams::ok() const {
    for (const auto& i : issues)
        if (i.level == ParamIssue::error) return false;
    return true;
}

KeyValues first_of_each(const KeyValues& kv, std::vector<ParamIssue>& issues, bool first_used) {
    KeyValues out;
    std::vector<std::vector<const std::string*>> values;  // every value given for out[i]'s key
    for (const auto& [k, v] : kv) {
        size_t i = 0;
        while (i < out.size() && out[i].first != k) ++i;
        if (i == out.size()) {
            out.emplace_back(k, v);
            values.emplace_back();
        }
        values[i].push_back(&v);
    }
    for (size_t i = 0; i < out.size(); ++i) {
        const size_t n = values[i].size();
        if (n < 2) continue;
        const std::string& k = out[i].first;
        std::string given;
        for (const std::string* v : values[i]) given += (given.empty() ? "" : ", ") + k + "=" + *v;
        issues.push_back({ParamIssue::error, k,
                          "parameter '" + k + "' given " + (n == 2 ? "twice" : std::to_string(n) + " times") +
                              " (" + given + ")" + (first_used ? "; the first is used" : "")});
    }
    return out;
}

ParsedParams parse_params(const std::vector<ParamSpec>& specs, const KeyValues& kv, RangePolicy policy) {
    ParsedParams out{Params(&specs), {}};
    for (const auto& [k, v] : first_of_each(kv, out.issues, policy == RangePolicy::clamp))
        out.params.set(k, v, policy, out.issues);
    return out;
}

}  // namespace k3
