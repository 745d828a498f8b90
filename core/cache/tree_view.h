// A drawable digest of a radix cache: chains of single-child nodes (a path cut into pieces by its
// checkpoints) merged into one span with the checkpoint positions as markers, and only the heaviest
// subtrees kept when the tree is large. Feeds the icicle view of the report.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cache/radix_cache.h"

namespace k3 {

struct CompressedNode {
    int parent = -1;  // index in CompressedTree::nodes; -1 for the root
    uint64_t start = 0, end = 0;
    std::vector<uint64_t> checkpoints;  // positions with a state, in (start, end]
    uint32_t tombstones = 0;            // merged nodes whose state was evicted
    uint32_t merged = 0;                // tree nodes merged into this span
    uint32_t children = 0;              // in the full compressed tree
    uint64_t subtree_tokens = 0;        // KV tokens in this span and everything below it
};

struct CompressedTree {
    std::vector<CompressedNode> nodes;  // parents before children; nodes[0] is the root
    uint64_t total = 0;                 // compressed nodes before the cut to max_nodes
};

// nodes: RadixCache::nodes() (depth-first, root first). Keeps at most max_nodes, taking the
// subtrees with the most KV tokens first (ties: depth-first order).
CompressedTree compress_tree(const std::vector<NodeView>& nodes, size_t max_nodes);

}  // namespace k3
