// Module 4 `prefix`: every request's hits recounted without the radix tree. With no state capacity
// the tree keeps everything inserted into it, so a request's KV-visible hit is its longest common
// prefix (page-floored, over prompt - 1 tokens) with what one earlier request cached (its prompt and
// outputs up to prompt + outputs - 1, page-floored), and its state-usable hit the deepest checkpoint
// an earlier request saved on that common prefix. The prompts and outputs are the module's own; the
// checkpoint positions are the ones each request reports it saved.
#include <algorithm>

#include "core/modules/prefix/prefix.h"

namespace k3 {

namespace {

// What request j left in the tree: the tokens the server fed (prompt and outputs) and where it saved states.
struct Held {
    std::vector<int32_t> tokens;
    uint64_t len = 0;  // tokens cached
    const std::vector<uint64_t>* saved_at = nullptr;
};

uint64_t common_length(const std::vector<int32_t>& a, uint64_t n, const std::vector<int32_t>& b) {
    const uint64_t end = std::min<uint64_t>(n, b.size());
    uint64_t k = 0;
    while (k < end && a[size_t(k)] == b[size_t(k)]) ++k;
    return k;
}

// What request `it` left in the tree: prompt and outputs up to prompt + outputs - 1 (page-floored), or
// under an engine its prompt (vLLM: whole blocks; SGLang extra_buffer: up to its last saved state).
uint64_t cached_length(const PrefixParams& p, PrefixMethod m, const PrefixRequest& it, const PrefixRow& row) {
    const uint64_t P = p.page_size;
    if (m != PrefixMethod::engine) return (it.prompt.size() + it.outputs.size() - 1) / P * P;
    if (p.engine == CacheEngine::vllm) return it.prompt.size() / p.vllm_block_tokens * p.vllm_block_tokens;
    if (p.sglang_mode == SglangMode::no_buffer) return it.prompt.size();
    return row.saved_at.empty() ? 0 : row.saved_at.back();
}

}  // namespace

std::vector<PrefixRecount> recount_prefix_hits(const PrefixParams& p, const PrefixResult& res,
                                               PrefixMethod m) {
    const PrefixMethodResult& method = res.method(m);
    if (p.state_capacity != 0 || method.rows.size() != res.requests.size()) return {};
    // vLLM's KV hit is the attention group's chain of whole blocks.
    const bool vllm = m == PrefixMethod::engine && p.engine == CacheEngine::vllm;
    const uint64_t P = vllm ? p.vllm_block_tokens : p.page_size;
    std::vector<PrefixRecount> out;
    std::vector<Held> held;
    for (size_t i = 0; i < res.requests.size(); ++i) {
        const PrefixRequest& it = res.requests[i];
        const uint64_t match_len = it.prompt.size() - 1;  // the last prompt token is always computed
        PrefixRecount h;
        for (const Held& j : held) {
            const uint64_t common = common_length(it.prompt, std::min(match_len, j.len), j.tokens) / P * P;
            h.kv_hit = std::max(h.kv_hit, common);
            for (uint64_t pos : *j.saved_at)
                if (pos <= common) h.state_hit = std::max(h.state_hit, pos);
        }
        out.push_back(h);
        Held mine{it.prompt, cached_length(p, m, it, method.rows[i]), &method.rows[i].saved_at};
        mine.tokens.insert(mine.tokens.end(), it.outputs.begin(), it.outputs.end());
        held.push_back(std::move(mine));
    }
    return out;
}

}  // namespace k3
