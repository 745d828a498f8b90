// k3cli subcommands. A command registers itself from its own file:
//     K3_REGISTER_COMMAND("list", "[--json]", "modules and their parameters", cmd_list);
// It returns the process exit code: 0 ok, 1 a check failed, 2 bad usage or input.
#pragma once

#include <string>
#include <vector>

namespace k3::cli {

using Args = std::vector<std::string>;
using CommandFn = int (*)(const Args&);

struct Command {
    const char* name;
    const char* usage;
    const char* help;
    CommandFn fn;
    int order;  // position in the usage text
};

const std::vector<Command>& commands();

struct CommandRegistrar {
    explicit CommandRegistrar(Command c);
};

#define K3_REGISTER_COMMAND(name, usage, help, fn, order) \
    static const ::k3::cli::CommandRegistrar k3_cmd_registrar_##fn({name, usage, help, fn, order})

}  // namespace k3::cli
