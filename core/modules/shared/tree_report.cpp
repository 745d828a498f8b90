#include "core/modules/shared/tree_report.h"

#include "core/base/numfmt.h"

namespace k3 {

Tree prefix_tree_report(std::string name, const CompressedTree& t) {
    Tree tv;
    tv.name = std::move(name);
    tv.x_label = "token position";
    tv.categories = {"holds checkpoints", "KV only, a state was evicted", "KV only"};
    tv.marker_label = "state checkpoint";
    for (const CompressedNode& n : t.nodes) {
        TreeNode tn;
        tn.parent = n.parent;
        tn.start = double(n.start);
        tn.end = double(n.end);
        tn.category = !n.checkpoints.empty() ? 0 : n.tombstones > 0 ? 1 : 2;
        for (uint64_t m : n.checkpoints) tn.markers.push_back(double(m));
        tn.label = n.parent < 0 ? "root: " + format_grouped(double(n.subtree_tokens)) + " KV tokens cached"
                                : "tokens " + format_grouped(double(n.start)) + " to " +
                                      format_grouped(double(n.end)) + ": " +
                                      format_grouped(double(n.checkpoints.size())) + " checkpoints, " +
                                      format_grouped(double(n.tombstones)) + " tombstones, " +
                                      format_grouped(double(n.merged)) + " tree nodes, " +
                                      format_grouped(double(n.children)) + " branches below, " +
                                      format_grouped(double(n.subtree_tokens)) + " KV tokens in the subtree";
        tv.nodes.push_back(std::move(tn));
    }
    return tv;
}

}  // namespace k3
