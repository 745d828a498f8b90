// A compressed radix prefix tree (core/cache/tree_view.h) as a report's tree view, shared by the
// prefix-caching modules: spans coloured by whether they hold checkpoints, lost them (tombstones) or
// hold only KV; checkpoints as markers; each span's counts in its hover label.
#pragma once

#include <string>

#include "core/cache/tree_view.h"
#include "core/experiments/report.h"

namespace k3 {

Tree prefix_tree_report(std::string name, const CompressedTree& t);

}  // namespace k3
