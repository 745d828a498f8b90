#include <cstdio>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/commands.h"
#include "core/experiments/registry.h"

namespace k3::cli {

static const char* kind_name(ParamKind k) {
    switch (k) {
        case ParamKind::integer: return "integer";
        case ParamKind::real: return "real";
        case ParamKind::choice: return "choice";
        case ParamKind::flag: return "flag";
        case ParamKind::text: return "text";
    }
    return "?";
}

static int cmd_list(const Args& args) {
    bool json = false;
    for (const auto& a : args) {
        if (a == "--json")
            json = true;
        else {
            std::fprintf(stderr, "k3cli list: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (!json) {
        for (const auto& e : experiments())
            std::printf("%2d  %-14s %-22s %s\n", e.number, e.id.c_str(), e.component.c_str(),
                        e.title.c_str());
        return 0;
    }
    JsonWriter w(true);
    w.begin_object().key("modules").begin_array();
    for (const auto& e : experiments()) {
        w.begin_object();
        w.field("id", e.id)
            .field("title", e.title)
            .field("component", e.component)
            .field("purpose", e.purpose)
            .field("how_it_works", e.how_it_works)
            .field("where_it_does_not_pay", e.where_it_does_not_pay);
        w.key("params").begin_array();
        for (const auto& s : e.params) {
            w.begin_object();
            w.field("key", s.key)
                .field("label", s.label)
                .field("unit", s.unit)
                .field("kind", kind_name(s.kind));
            if (s.is_textual()) {
                w.field("default", s.def_text);
                w.key("choices").begin_array();
                for (const auto& c : s.choices) w.value(c);
                w.end_array();
            } else {
                w.field("min", s.min)
                    .field("max", s.max)
                    .field("default", s.def)
                    .field("log_scale", s.log_scale);
            }
            if (!s.active_key.empty())
                w.key("active_when").begin_object().field(s.active_key, s.active_value).end_object();
            w.field("help", s.help);
            w.end_object();
        }
        w.end_array();
        w.end_object();
    }
    w.end_array().end_object();
    std::printf("%s\n", w.str().c_str());
    return 0;
}

K3_REGISTER_COMMAND("list", "[--json]",
                    "list the modules (with --json: their parameter declarations and texts)", cmd_list, 10);

}  // namespace k3::cli
