// Hit counts of a Mooncake trace through an unbounded single-instance cache with page size 1,
// computed from the block ids alone, without a radix tree: the independent count that module 5 and
// the tests compare the radix cache with. Equal ids continue equal prefixes; a request's partial
// last block matches only as many tokens as an earlier request held of that block.
#pragma once

#include <cstdint>

#include "core/fleet/trace.h"

namespace k3 {

struct TraceReferenceHits {
    uint64_t prompt_tokens = 0;
    uint64_t kv_hit_tokens = 0;           // KV-visible
    uint64_t state_hit_interval = 0;      // checkpoints at multiples of the interval
    uint64_t state_hit_interval_end = 0;  // ... and at the end of every request
};

TraceReferenceHits trace_reference_hits(const MooncakeTrace& t, uint64_t interval);

}  // namespace k3
