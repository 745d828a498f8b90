// The URL hash that holds the current view: "#m=memory&context=1048576&preset=qwen3-next-80b".
// A pinned baseline follows as "&pin=fleet&pin.engine=vllm" (its module and its parameters).
// Only non-default parameters are written, so links stay short and survive new parameters.
// Parsing never fails hard: everything wrong is reported as an issue and the rest is applied. A key
// given twice is reported and its first value used (the same rule as parse_params under clamp).
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/experiments/compare.h"
#include "core/experiments/experiment.h"

namespace k3 {

struct UrlState {
    std::string module;              // "" = overview
    std::string tab;                 // "", "how", "limits"
    KeyValues kv;                    // parameter text values, each key once
    std::string pin_module;          // "" = no baseline pinned
    KeyValues pin_kv;                // the baseline's parameters ("pin.engine=vllm" -> engine, vllm)
    std::vector<ParamIssue> issues;  // malformed parts of the hash
    bool read = true;                // false: too long, none of it was read
};

// Links longer than this (after the '#') are not read: nothing of them is applied.
inline constexpr size_t kMaxLinkChars = 8192;

UrlState parse_url_hash(std::string_view hash);
std::string format_url_hash(const std::string& module, const Params* params, const std::string& tab = "",
                            const Pin* pin = nullptr);

// Applies a parsed hash to a module's declaration: values out of range are clamped with a warning,
// unknown keys and bad values are reported and skipped (errors: the parameter keeps its default).
struct ResolvedView {
    const Experiment* experiment = nullptr;  // null: overview (or unknown module, see issues)
    Params params;
    std::vector<ParamIssue> issues;
    // Whether the link was followed, its faulty parts aside; false when nothing of it was applied (a
    // link too long to read, an unknown module) and the Overview stands in for it.
    bool applied = true;
    Pin pin;  // the baseline the link pins (pin.module null: none)
};
ResolvedView resolve_url(const UrlState& s);

std::string percent_decode(std::string_view s, bool* ok = nullptr);
std::string percent_encode(std::string_view s);

}  // namespace k3
