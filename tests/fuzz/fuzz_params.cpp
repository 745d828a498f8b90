// Fuzz target: the URL hash parser and the parameter parser of every module. Any input must give
// issues, never a crash, and whatever is accepted must survive a format/parse round trip.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/experiments/registry.h"
#include "core/experiments/url_state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string in(reinterpret_cast<const char*>(data), size);
    const k3::UrlState st = k3::parse_url_hash(in);
    const k3::ResolvedView v = k3::resolve_url(st);
    if (v.experiment) {
        // Accepted values (clamped or not) must round-trip through a link exactly.
        const std::string link = k3::format_url_hash(v.experiment->id, &v.params, st.tab);
        const k3::ResolvedView again = k3::resolve_url(k3::parse_url_hash(link));
        if (again.experiment != v.experiment || !(again.params == v.params)) std::abort();
        for (const auto& i : again.issues)
            if (i.level == k3::ParamIssue::error) std::abort();
        (void)v.experiment->check(v.params);
    }
    // The same bytes as CLI arguments against every module, strictly.
    for (const auto& e : k3::experiments()) {
        std::vector<std::pair<std::string, std::string>> kv;
        for (const auto& [k, val] : st.kv) kv.emplace_back(k, val);
        const auto pp = k3::parse_params(e.params, kv, k3::RangePolicy::strict);
        if (pp.ok()) (void)e.check(pp.params);
    }
    return 0;
}
