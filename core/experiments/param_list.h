// A module's parameters as a typed struct, declared once.
//
//     struct PrefixParams { uint32_t interval = 64; Codec codec = Codec::fp32; ... };
//     ParamList<PrefixParams> l;
//     l.integer(&PrefixParams::interval, "interval", "Checkpoint interval N", "tokens", 1, 4096).log();
//     l.choice(&PrefixParams::codec, "codec", "Checkpoint codec", codec_choices());
//
// The key is written once, the default is the struct's member initialiser, and the list's specs()
// drive the sliders, the URL hash, the CLI and the report's "params" exactly as hand-written
// ParamSpecs do; read() turns validated Params into the struct, so a module reads `p.interval`.
// Shared groups (the fleet's workload, say) are sub-structs declared once and included with group().
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/experiments/param.h"

namespace k3 {

// The values of a choice parameter: enum value, key (URL, CLI, JSON) and display label.
template <class E>
struct Choice {
    E value;
    std::string key, label;
};
template <class E>
using Choices = std::vector<Choice<E>>;

// Choices from a core component's id and label lists and its parser (router_ids(), parse_router).
template <class E, class Parse>
Choices<E> choices_from(const std::vector<std::string>& ids, const std::vector<std::string>& labels,
                        Parse parse) {
    Choices<E> out;
    for (size_t i = 0; i < ids.size(); ++i)
        out.push_back({*parse(ids[i]), ids[i], i < labels.size() ? labels[i] : std::string()});
    return out;
}

// Problems found by a module's validator, each naming the parameter by the field it came from:
//     issues.error(p.interval, "interval 100 is not a multiple of the kernel chunk 64");
class Issues {
  public:
    using KeyAt = std::function<const std::string*(const void* field)>;
    explicit Issues(KeyAt key_at) : key_at_(std::move(key_at)) {}

    template <class T>
    void error(const T& field, std::string message) {
        add(ParamIssue::error, &field, std::move(message));
    }
    template <class T>
    void warning(const T& field, std::string message) {
        add(ParamIssue::warning, &field, std::move(message));
    }
    std::vector<ParamIssue> take() { return std::move(list_); }

  private:
    void add(ParamIssue::Level level, const void* field, std::string message) {
        const std::string* key = key_at_(field);
        if (!key) throw std::logic_error("Issues: the field is not a declared parameter");
        list_.push_back({level, *key, std::move(message)});
    }
    KeyAt key_at_;
    std::vector<ParamIssue> list_;
};

template <class P>
class ParamList {
  public:
    explicit ParamList(const P& defaults = P{}) : defaults_(defaults) {}

    // Each adds one parameter and returns its spec for .log(), .describe(), .in_group() ...
    // (valid until the next parameter is added).
    template <class T>
    ParamSpec& integer(T P::*m, std::string key, std::string label, std::string unit, double min,
                       double max) {
        static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>, "integer() binds an integer member");
        return add(m,
                   ParamSpec::integer(std::move(key), std::move(label), std::move(unit), min, max,
                                      double(defaults_.*m)),
                   [m](double n, const std::string&, P& p) { p.*m = static_cast<T>(n); });
    }
    ParamSpec& real(double P::*m, std::string key, std::string label, std::string unit, double min,
                    double max) {
        return add(m,
                   ParamSpec::real(std::move(key), std::move(label), std::move(unit), min, max, defaults_.*m),
                   [m](double n, const std::string&, P& p) { p.*m = n; });
    }
    ParamSpec& flag(bool P::*m, std::string key, std::string label) {
        return add(m, ParamSpec::flag(std::move(key), std::move(label), defaults_.*m),
                   [m](double n, const std::string&, P& p) { p.*m = n != 0; });
    }
    // Free text (a file path, say); `suggestions` are offered in the UI.
    ParamSpec& text(std::string P::*m, std::string key, std::string label,
                    std::vector<std::string> suggestions = {}) {
        return add(m, ParamSpec::text(std::move(key), std::move(label), defaults_.*m, std::move(suggestions)),
                   [m](double, const std::string& s, P& p) { p.*m = s; });
    }
    template <class E>
    ParamSpec& choice(E P::*m, std::string key, std::string label, const Choices<E>& choices) {
        std::vector<std::string> keys, labels;
        bool labelled = false;
        const std::string* def = nullptr;
        for (const Choice<E>& c : choices) {
            keys.push_back(c.key);
            labels.push_back(c.label);
            labelled |= !c.label.empty();
            if (c.value == defaults_.*m) def = &c.key;
        }
        if (!def) throw std::logic_error("ParamList: the default of '" + key + "' is not one of its choices");
        if (!labelled) labels.clear();
        return add(m, ParamSpec::choice(std::move(key), std::move(label), keys, *def, labels),
                   [m, choices](double, const std::string& s, P& p) {
                       for (const Choice<E>& c : choices)
                           if (c.key == s) p.*m = c.value;
                   });
    }
    // The `seed` every stochastic module declares (ParamSpec::seed).
    ParamSpec& seed(uint64_t P::*m, std::string help) {
        ParamSpec s = ParamSpec::seed(std::move(help));
        s.def = double(defaults_.*m);
        return add(m, std::move(s), [m](double n, const std::string&, P& p) { p.*m = uint64_t(n); });
    }
    // The parameters of a shared sub-struct, declared by `declare(ParamList<S>&)`; the sub-struct's
    // defaults are this struct's member `m` (so a module picks its own defaults in its initialiser).
    template <class S, class Declare>
    ParamList& group(S P::*m, Declare&& declare) {
        ParamList<S> sub(defaults_.*m);
        declare(sub);
        const size_t base = offset_of(m);
        for (size_t i = 0; i < sub.specs().size(); ++i) {
            auto read = sub.reader(i);
            specs_.push_back(sub.specs()[i]);
            bindings_.push_back({base + sub.offset(i),
                                 [m, read](double n, const std::string& s, P& p) { read(n, s, p.*m); }});
        }
        return *this;
    }

    const std::vector<ParamSpec>& specs() const { return specs_; }
    const P& defaults() const { return defaults_; }

    // The struct for validated values (declared in this list's order, as specs() gives them).
    P read(const Params& raw) const {
        P p = defaults_;
        for (size_t i = 0; i < bindings_.size(); ++i) bindings_[i].read(raw.num_at(i), raw.str_at(i), p);
        return p;
    }
    // The key of the parameter stored at `field` inside `p` (null if it is not a declared parameter).
    const std::string* key_at(const P& p, const void* field) const {
        const auto off = size_t(static_cast<const char*>(field) - reinterpret_cast<const char*>(&p));
        for (size_t i = 0; i < bindings_.size(); ++i)
            if (bindings_[i].offset == off) return &specs_[i].key;
        return nullptr;
    }

    // For group(): the i-th binding of this list.
    using Reader = std::function<void(double num, const std::string& text, P& p)>;
    const Reader& reader(size_t i) const { return bindings_[i].read; }
    size_t offset(size_t i) const { return bindings_[i].offset; }

  private:
    struct Binding {
        size_t offset;  // of the member inside P: identifies the parameter of a field (key_at)
        Reader read;
    };
    template <class M>
    size_t offset_of(M P::*m) const {
        return size_t(reinterpret_cast<const char*>(&(defaults_.*m)) -
                      reinterpret_cast<const char*>(&defaults_));
    }
    template <class M>
    ParamSpec& add(M P::*m, ParamSpec spec, Reader read) {
        for (const ParamSpec& s : specs_)
            if (s.key == spec.key) throw std::logic_error("ParamList: '" + spec.key + "' is declared twice");
        specs_.push_back(std::move(spec));
        bindings_.push_back({offset_of(m), std::move(read)});
        return specs_.back();
    }

    P defaults_;
    std::vector<ParamSpec> specs_;
    std::vector<Binding> bindings_;
};

}  // namespace k3
