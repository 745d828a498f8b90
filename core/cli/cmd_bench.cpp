#include <cstdio>
#include <cstring>

#include "core/base/json.h"
#include "core/base/numfmt.h"
#include "core/cli/bench.h"
#include "core/cli/commands.h"

namespace k3::cli {

namespace {
struct Bench {
    const char* name;
    const char* help;
    BenchFn fn;
};
std::vector<Bench>& benches() {
    static std::vector<Bench> b;
    return b;
}
}  // namespace

BenchRegistrar::BenchRegistrar(const char* name, const char* help, BenchFn fn) {
    benches().push_back({name, help, fn});
}

static int cmd_bench(const Args& args) {
    std::string name;
    bool json = false, quick = false;
    for (const auto& a : args) {
        if (a == "--json")
            json = true;
        else if (a == "--quick")
            quick = true;
        else if (!a.empty() && a[0] != '-' && name.empty())
            name = a;
        else {
            std::fprintf(stderr, "k3cli bench: bad argument '%s'\n", a.c_str());
            return 2;
        }
    }
    if (name.empty() || name == "list") {
        for (const auto& b : benches()) std::printf("%-10s %s\n", b.name, b.help);
        return name.empty() ? 2 : 0;
    }
    for (const auto& b : benches()) {
        if (name != b.name) continue;
        BenchContext ctx;
        ctx.quick = quick;
        ctx.arch = "scalar";
        b.fn(ctx);
        if (json) {
            JsonWriter w(true);
            w.begin_object().field("bench", name).field("build", K3_BUILD_NAME).field("arch", ctx.arch);
            w.key("results").begin_array();
            for (const auto& r : ctx.results) {
                w.begin_object().field("name", r.name).key("params").begin_object();
                for (const auto& [k, v] : r.params) w.field(k, v);
                for (const auto& [k, v] : r.text_params) w.field(k, v);
                w.end_object().field("value", r.value).field("unit", r.unit).end_object();
            }
            w.end_array().end_object();
            std::printf("%s\n", w.str().c_str());
        } else {
            std::printf("bench %s (build %s, arch %s)\n", name.c_str(), K3_BUILD_NAME, ctx.arch.c_str());
            for (const auto& r : ctx.results) {
                std::string ps;
                for (const auto& [k, v] : r.params) ps += " " + k + "=" + format_number(v);
                for (const auto& [k, v] : r.text_params) ps += " " + k + "=" + v;
                std::printf("  %-40s %14s %-14s%s\n", r.name.c_str(), format_sig(r.value, 4).c_str(),
                            r.unit.c_str(), ps.c_str());
            }
        }
        return 0;
    }
    std::fprintf(stderr, "k3cli bench: unknown benchmark '%s' (k3cli bench list shows them)\n", name.c_str());
    return 2;
}

K3_REGISTER_COMMAND("bench", "NAME [--json] [--quick]", "run a benchmark (k3cli bench list shows them)",
                    cmd_bench, 30);

}  // namespace k3::cli
