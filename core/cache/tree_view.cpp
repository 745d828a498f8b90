#include "core/cache/tree_view.h"

#include <algorithm>
#include <queue>
#include <unordered_map>

namespace k3 {

CompressedTree compress_tree(const std::vector<NodeView>& nodes, size_t max_nodes) {
    CompressedTree out;
    if (nodes.empty()) return out;
    // Index by id (lookup only) and collect children in depth-first order.
    std::unordered_map<NodeId, size_t> at;
    for (size_t i = 0; i < nodes.size(); ++i) at[nodes[i].id] = i;
    std::vector<std::vector<size_t>> kids(nodes.size());
    for (size_t i = 1; i < nodes.size(); ++i) kids[at.at(nodes[i].parent)].push_back(i);

    // Merge chains: a span starts at a child of the root or of a fork and runs down through
    // single-child nodes.
    std::vector<CompressedNode> all(1);
    all[0].merged = 1;
    std::vector<std::vector<size_t>> all_kids(1);
    std::vector<std::pair<size_t, int>> todo;  // (tree node starting a span, parent span)
    for (auto it = kids[0].rbegin(); it != kids[0].rend(); ++it) todo.push_back({*it, 0});
    while (!todo.empty()) {
        auto [i, parent] = todo.back();
        todo.pop_back();
        CompressedNode c;
        c.parent = parent;
        c.start = nodes[i].start;
        while (true) {
            const NodeView& v = nodes[i];
            ++c.merged;
            c.end = v.end;
            if (v.has_state) c.checkpoints.push_back(v.end);
            c.tombstones += v.tombstone;
            if (kids[i].size() != 1) break;
            i = kids[i][0];
        }
        const int self = int(all.size());
        all.push_back(c);
        all_kids.emplace_back();
        all_kids[size_t(parent)].push_back(size_t(self));
        for (auto it = kids[i].rbegin(); it != kids[i].rend(); ++it) todo.push_back({*it, self});
    }
    // Subtree tokens, children last to first (children always come after their parent).
    for (size_t k = all.size(); k-- > 1;) {
        all[k].subtree_tokens += all[k].end - all[k].start;
        all[size_t(all[k].parent)].subtree_tokens += all[k].subtree_tokens;
    }
    for (size_t k = 0; k < all.size(); ++k) all[k].children = uint32_t(all_kids[k].size());
    out.total = all.size();

    // Keep the heaviest subtrees: a parent always leaves the queue before its children.
    auto lighter = [&](size_t a, size_t b) {
        return all[a].subtree_tokens != all[b].subtree_tokens ? all[a].subtree_tokens < all[b].subtree_tokens
                                                              : a > b;
    };
    std::priority_queue<size_t, std::vector<size_t>, decltype(lighter)> q(lighter);
    std::vector<int> new_index(all.size(), -1);
    q.push(0);
    while (!q.empty() && out.nodes.size() < std::max<size_t>(max_nodes, 1)) {
        const size_t k = q.top();
        q.pop();
        new_index[k] = int(out.nodes.size());
        CompressedNode c = all[k];
        c.parent = k == 0 ? -1 : new_index[size_t(all[k].parent)];
        out.nodes.push_back(std::move(c));
        for (size_t ch : all_kids[k]) q.push(ch);
    }
    return out;
}

}  // namespace k3
