// k3cli subcommands. Each returns the process exit code: 0 ok, 1 a check failed, 2 bad usage/input.
#pragma once

#include <string>
#include <vector>

namespace k3::cli {

using Args = std::vector<std::string>;

int cmd_list(const Args& args);
int cmd_run(const Args& args);


}  // namespace k3::cli
