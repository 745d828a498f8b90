#include "core/fleet/trace_reference.h"

#include <algorithm>
#include <map>
#include <vector>

namespace k3 {

TraceReferenceHits trace_reference_hits(const MooncakeTrace& t, uint64_t interval) {
    struct Block {
        uint32_t max_len = 0;        // most tokens of this block any earlier request held
        std::vector<uint32_t> ends;  // offsets in this block where an earlier request ended
    };
    std::vector<Block> blocks(1);                             // 0: the root
    std::map<std::pair<uint32_t, uint64_t>, uint32_t> child;  // (parent block, id) -> block
    const uint64_t B = t.block_tokens;
    interval = std::max<uint64_t>(interval, 1);
    TraceReferenceHits h;
    for (const TraceRequest& r : t.requests) {
        h.prompt_tokens += r.input_length;
        // Look up: the leading run of blocks already seen on this exact prefix.
        uint64_t hit = 0, best_end = 0;
        uint32_t parent = 0;
        for (uint32_t k = 0; k < r.n_ids; ++k) {
            const auto it = child.find({parent, t.ids[r.first_id + k]});
            if (it == child.end()) break;
            const Block& b = blocks[it->second];
            const uint64_t blen = std::min<uint64_t>(B, r.input_length - k * B);
            const uint64_t take = std::min<uint64_t>(b.max_len, blen);
            for (uint32_t e : b.ends)
                if (e <= take) best_end = std::max(best_end, k * B + e);
            hit += take;
            if (take < B) break;
            parent = it->second;
        }
        h.kv_hit_tokens += hit;
        h.state_hit_interval += hit / interval * interval;
        h.state_hit_interval_end += std::max(hit / interval * interval, best_end);
        // Insert the request.
        parent = 0;
        for (uint32_t k = 0; k < r.n_ids; ++k) {
            auto [it, fresh] = child.try_emplace({parent, t.ids[r.first_id + k]}, uint32_t(blocks.size()));
            if (fresh) blocks.emplace_back();
            Block& b = blocks[it->second];
            const uint32_t blen = uint32_t(std::min<uint64_t>(B, r.input_length - k * B));
            b.max_len = std::max(b.max_len, blen);
            if (k + 1 == r.n_ids && std::find(b.ends.begin(), b.ends.end(), blen) == b.ends.end())
                b.ends.push_back(blen);
            parent = it->second;
        }
    }
    return h;
}

}  // namespace k3
