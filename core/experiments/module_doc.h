// A module's texts, written as Markdown beside its code (core/modules/<id>/<id>.md, with '-' in the
// id written '_') and embedded at build time (core/CMakeLists.txt). Top-level sections:
//
//     # How it works            the module page's "How it works" (Markdown, core/base/markdown.h)
//     # Where it doesn't pay    the module page's "Where it doesn't pay"
//     # Parameters              "## key" per parameter: its help (tooltip, `k3cli list --json`);
//                               a seed's standard sentence (ParamSpec::seed) is added to it
//     # Figures                 "## key" per scalar: its help (tooltip), when the run sets none
//
// A heading may name several keys that share one help: "## mean_running_static, mean_running_vllm".
//
// Help that fits on a line stays in the code next to its declaration; longer help lives here.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3 {

struct ModuleDoc {
    std::string how_it_works, where_it_does_not_pay;                   // Markdown
    using Entries = std::vector<std::pair<std::string, std::string>>;  // key, plain text
    Entries param_help, figure_help;
    std::vector<std::string> unknown_sections;  // top-level headings other than the four above
};

// The embedded doc of module `id` (empty if it has none).
ModuleDoc module_doc(std::string_view id);
// The embedded Markdown source of module `id` ("" if none).
std::string_view module_doc_source(std::string_view id);
// Ids (file stems) of every embedded module doc, shared docs (core/modules/shared/*.md) included.
std::vector<std::string> module_doc_names();
// The help of parameter `key` in doc `doc`'s "# Parameters" ("" if none): for parameter groups
// several modules share, documented once in core/modules/shared/<doc>.md.
std::string doc_param_help(std::string_view doc, std::string_view key);
// The help of scalar `key` in doc `doc`'s "# Figures" ("" if none): for report parts several modules
// share (core/modules/shared/<doc>.md).
std::string doc_figure_help(std::string_view doc, std::string_view key);

}  // namespace k3
