// k3cli: the command-line face of the Experiment API.
#include <cstdio>
#include <cstring>

#include "core/cli/commands.h"

namespace {

void usage(FILE* f) {
    std::fputs(
        "usage: k3cli COMMAND ...\n"
        "  list [--json]                         modules and their parameter declarations\n"
        "  run MODULE [key=value ...] [--json|--csv] [--pretty]\n"
        "                                        run a module; exit 1 if a check fails\n"
        "exit codes: 0 ok, 1 a check failed, 2 bad usage or parameter\n",
        f);
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    const std::string cmd = argv[1];
    k3::cli::Args args(argv + 2, argv + argc);
    try {
        if (cmd == "list") return k3::cli::cmd_list(args);
        if (cmd == "run") return k3::cli::cmd_run(args);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "k3cli: error: %s\n", e.what());
        return 2;
    }
    std::fprintf(stderr, "k3cli: unknown command '%s'\n", cmd.c_str());
    usage(stderr);
    return 2;
}
