#include "core/experiments/url_state.h"

#include "core/base/numfmt.h"
#include "core/experiments/registry.h"

namespace k3 {

static constexpr size_t kMaxPairs = 256;

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

std::string percent_decode(std::string_view s, bool* ok) {
    std::string out;
    bool good = true;
    for (size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '%') {
            const bool room = i + 2 < s.size();
            const int a = room ? hexval(s[i + 1]) : -1;
            const int b = room ? hexval(s[i + 2]) : -1;
            if (a >= 0 && b >= 0) {
                out.push_back(char(a * 16 + b));
                i += 2;
                continue;
            }
            good = false;
            out.push_back(c);
        } else if (c == '+') {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    if (ok) *ok = good;
    return out;
}

std::string percent_encode(std::string_view s) {
    static const char* hex = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : s) {
        const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                           c == '-' || c == '_' || c == '.' || c == '~' || c == '/';
        if (plain) {
            out.push_back(char(c));
        } else {
            out.push_back('%');
            out.push_back(hex[c >> 4]);
            out.push_back(hex[c & 15]);
        }
    }
    return out;
}

UrlState parse_url_hash(std::string_view h) {
    UrlState st;
    if (!h.empty() && h.front() == '#') h.remove_prefix(1);
    if (h.size() > kMaxLinkChars) {
        st.read = false;
        st.issues.push_back({ParamIssue::error, "",
                             "the link is " + format_grouped(double(h.size())) +
                                 " characters long; the page reads " + format_grouped(double(kMaxLinkChars)) +
                                 " at most"});
        return st;
    }
    size_t pairs = 0;
    KeyValues given;
    while (!h.empty()) {
        const size_t amp = h.find('&');
        const std::string_view part = h.substr(0, amp);
        h = amp == std::string_view::npos ? std::string_view{} : h.substr(amp + 1);
        if (part.empty()) continue;
        if (++pairs > kMaxPairs) {
            st.issues.push_back({ParamIssue::error, "",
                                 "the parts after the first " + std::to_string(kMaxPairs) +
                                     " (a link has at most " + std::to_string(kMaxPairs) + ")"});
            break;
        }
        const size_t eq = part.find('=');
        bool ok_k = true, ok_v = true;
        const std::string key = percent_decode(part.substr(0, eq), &ok_k);
        const std::string val =
            eq == std::string_view::npos ? "" : percent_decode(part.substr(eq + 1), &ok_v);
        if (!ok_k || !ok_v)
            st.issues.push_back({ParamIssue::warning, key,
                                 "malformed %-escape in '" + std::string(part) + "', read as typed"});
        if (eq == std::string_view::npos) {
            st.issues.push_back({ParamIssue::error, key, "'" + key + "' in the link has no value"});
            continue;
        }
        given.emplace_back(key, val);
    }
    for (auto& [key, val] : first_of_each(given, st.issues, true)) {
        if (key == "m")
            st.module = std::move(val);
        else if (key == "tab")
            st.tab = std::move(val);
        else if (key == "pin")
            st.pin_module = std::move(val);
        else if (key.rfind("pin.", 0) == 0)
            st.pin_kv.emplace_back(key.substr(4), std::move(val));
        else
            st.kv.emplace_back(std::move(key), std::move(val));
    }
    return st;
}

// "&key=value" for each parameter that is not at its default.
static std::string changed_params(const Params& params, const std::string& prefix) {
    std::string out;
    for (const auto& s : params.specs())
        if (!params.is_default(s.key))
            out += "&" + prefix + percent_encode(s.key) + "=" + percent_encode(params.text(s.key));
    return out;
}

std::string format_url_hash(const std::string& module, const Params* params, const std::string& tab,
                            const Pin* pin) {
    std::string out = "#m=" + percent_encode(module.empty() ? "overview" : module);
    if (params) out += changed_params(*params, "");
    if (!tab.empty()) out += "&tab=" + percent_encode(tab);
    if (pin && pin->module)
        out += "&pin=" + percent_encode(pin->module->id) + changed_params(pin->params, "pin.");
    return out;
}

// The baseline a link pins; its problems are reported as the baseline's ("pin.engine: ...").
static void resolve_pin(const UrlState& s, ResolvedView& r) {
    if (s.pin_module.empty()) {
        for (const auto& [k, v] : s.pin_kv)
            r.issues.push_back(
                {ParamIssue::error, "pin." + k, "baseline parameter 'pin." + k + "' without pin=MODULE"});
        return;
    }
    const Experiment* e = find_experiment(s.pin_module);
    if (!e) {
        r.issues.push_back(
            {ParamIssue::error, "pin", "unknown module '" + s.pin_module + "' for the baseline (pin)"});
        return;
    }
    ParsedParams pp = parse_params(e->params, s.pin_kv, RangePolicy::clamp);
    for (auto& i : pp.issues) r.issues.push_back({i.level, "pin." + i.key, "baseline: " + i.message});
    r.pin = {e, std::move(pp.params)};
}

ResolvedView resolve_url(const UrlState& s) {
    ResolvedView r;
    r.issues = s.issues;
    r.applied = s.read;
    resolve_pin(s, r);
    if (s.module.empty() || s.module == "overview") {
        for (const auto& [k, v] : s.kv)
            r.issues.push_back({ParamIssue::error, k, "parameter '" + k + "' given without a module"});
        return r;
    }
    r.experiment = find_experiment(s.module);
    if (!r.experiment) {
        r.applied = false;
        r.issues.push_back({ParamIssue::error, "m", "unknown module '" + s.module + "' in the link"});
        return r;
    }
    ParsedParams pp = parse_params(r.experiment->params, s.kv, RangePolicy::clamp);
    r.params = std::move(pp.params);
    r.issues.insert(r.issues.end(), pp.issues.begin(), pp.issues.end());
    return r;
}

}  // namespace k3
