// k3cli: the command-line face of the Experiment API, the benchmarks and the kernel checks.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>

#include "core/cli/commands.h"

namespace k3::cli {

static std::vector<Command>& registry() {
    static std::vector<Command> c;
    return c;
}

CommandRegistrar::CommandRegistrar(Command c) { registry().push_back(c); }

const std::vector<Command>& commands() {
    auto& c = registry();
    std::sort(c.begin(), c.end(), [](const Command& a, const Command& b) { return a.order < b.order; });
    return c;
}

}  // namespace k3::cli

static void usage(FILE* f) {
    std::fputs("usage: k3cli COMMAND ...\n", f);
    for (const auto& c : k3::cli::commands()) {
        std::fprintf(f, "  %s %s\n", c.name, c.usage);
        std::fprintf(f, "      %s\n", c.help);
    }
    std::fputs("exit codes: 0 ok, 1 a check failed, 2 bad usage or input\n", f);
}

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") ||
        !std::strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const k3::cli::Args args(argv + 2, argv + argc);
    for (const auto& c : k3::cli::commands()) {
        if (std::strcmp(c.name, argv[1]) != 0) continue;
        try {
            return c.fn(args);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "k3cli %s: error: %s\n", c.name, e.what());
            return 2;
        }
    }
    std::fprintf(stderr, "k3cli: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
