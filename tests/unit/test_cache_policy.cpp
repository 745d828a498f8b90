// Checkpoint placement and retention policies, and the checkpoint codecs.
#include <doctest/doctest.h>

#include <cmath>

#include "core/base/rng.h"
#include "core/cache/checkpoint_policy.h"
#include "core/cache/request_flow.h"
#include "core/cache/state_codec.h"

using namespace k3;

namespace {
std::vector<uint64_t> positions(const std::vector<PlannedCheckpoint>& v) {
    std::vector<uint64_t> out;
    for (const auto& p : v) out.push_back(p.pos);
    return out;
}
CheckpointPolicy policy(PolicyKind k, uint32_t interval = 512) {
    CheckpointPolicy p;
    p.kind = k;
    p.interval = interval;
    return p;
}
}  // namespace

TEST_CASE("checkpoint placement per policy") {
    // A request cached up to 1700 tokens that resumed at 512 with KV matched to 1300.
    CHECK(positions(plan_checkpoints(policy(PolicyKind::interval), 1, 1700, 512, 1300)) ==
          std::vector<uint64_t>{1024, 1536});
    CHECK(positions(plan_checkpoints(policy(PolicyKind::end), 1, 1700, 512, 1300)) ==
          std::vector<uint64_t>{1700});
    CHECK(positions(plan_checkpoints(policy(PolicyKind::interval_end), 1, 1700, 512, 1300)) ==
          std::vector<uint64_t>{1024, 1536, 1700});
    // Marconi: the junction at the KV match floored to the chunk grid (64): 1280.
    const auto br = plan_checkpoints(policy(PolicyKind::branch), 1, 1700, 512, 1300);
    CHECK(positions(br) == std::vector<uint64_t>{1280, 1700});
    CHECK(br[0].kind == CheckpointKind::junction);
    // No junction when the state is not lagging.
    CHECK(positions(plan_checkpoints(policy(PolicyKind::branch), 1, 1700, 1300, 1300)) ==
          std::vector<uint64_t>{1700});
    // Page size 16 floors the cached length: the end lands on 1696.
    CHECK(positions(plan_checkpoints(policy(PolicyKind::interval_end), 16, 1700, 0, 0)) ==
          std::vector<uint64_t>{512, 1024, 1536, 1696});
    // A junction on an interval point keeps the junction kind (retention pins junctions).
    const auto seg = plan_checkpoints(policy(PolicyKind::segmented), 1, 1700, 0, 1024);
    CHECK(positions(seg) == std::vector<uint64_t>{512, 1024, 1536, 1700});
    CHECK(seg[1].kind == CheckpointKind::junction);
    // Nothing to do when everything was resumed.
    CHECK(plan_checkpoints(policy(PolicyKind::interval_end), 1, 1700, 1700, 1700).empty());
}

namespace {
std::vector<RadixCache::PathState> path(std::initializer_list<uint64_t> pos) {
    std::vector<RadixCache::PathState> v;
    for (uint64_t p : pos) v.push_back({0, p, CheckpointKind::interval, false, false, false});
    return v;
}
std::vector<uint64_t> kept(const CheckpointPolicy& p, const std::vector<RadixCache::PathState>& st) {
    const auto keep = retention_keep(p, st);
    std::vector<uint64_t> out;
    for (size_t i = 0; i < st.size(); ++i)
        if (keep[i]) out.push_back(st[i].pos);
    return out;
}
}  // namespace

TEST_CASE("retention rules: cap, segmented, spread") {
    auto st = path({512, 1024, 1536, 2048, 2560, 3072, 3584, 4096});
    CheckpointPolicy cap = policy(PolicyKind::cap);
    cap.max_states_per_path = 3;
    CHECK(kept(cap, st) == std::vector<uint64_t>{3072, 3584, 4096});  // shallowest interior go first
    st[1].fork = true;                                                // a fork is never dropped
    CHECK(kept(cap, st) == std::vector<uint64_t>{1024, 3584, 4096});
    st[1].fork = false;

    CheckpointPolicy seg = policy(PolicyKind::segmented);
    seg.retention_interval = 2048;  // segments (0, 2048], (2048, 4096]
    CHECK(kept(seg, st) == std::vector<uint64_t>{2048, 4096});
    st[2].kind = CheckpointKind::junction;  // junctions are pinned
    CHECK(kept(seg, st) == std::vector<uint64_t>{1536, 2048, 4096});
    st[2].kind = CheckpointKind::interval;

    CheckpointPolicy spread = policy(PolicyKind::spread);
    spread.max_states_per_path = 4;  // targets 1024, 2048, 3072 + the tail
    CHECK(kept(spread, st) == std::vector<uint64_t>{1024, 2048, 3072, 4096});
    spread.max_states_per_path = 8;
    CHECK(kept(spread, st).size() == 8);
}

TEST_CASE("retention applied to the tree: a path keeps at most N states") {
    RadixCache c({1, 0, 0, LruRefresh::node});
    CheckpointPolicy p = policy(PolicyKind::cap);
    p.max_states_per_path = 3;
    const auto q = TokenSeq::Builder().stream(42, 0, 5000).build();
    Admission a = admit_request(c, p, *q, 5000, 5000);
    CHECK(a.plan.size() == 10);  // 512 ... 4608 and the end at 5000
    const Completion done = complete_request(c, p, a, q, 1000);
    CHECK(done.insert.states_added == 10);
    CHECK(done.retention_dropped == 7);
    CHECK(c.stats().states == 3);
    CHECK(c.stats().tombstones == 7);
    // The surviving states are the deepest ones: a new request with the same prefix resumes at 5000.
    const auto q2 = TokenSeq::Builder().stream(42, 0, 5000).stream(43, 0, 100).build();
    CHECK(c.match(*q2, q2->size()).state_len == 5000);
    CHECK(c.stats().leases == 0);
    CHECK(c.audit() == "");
}

TEST_CASE("codecs: conversions and stated error bounds") {
    // fp16 and bf16 round trip every finite encoding exactly.
    for (uint32_t h = 0; h < 65536; ++h) {
        const uint16_t v = uint16_t(h);
        const uint32_t e16 = (v >> 10) & 31;
        if (e16 != 31) CHECK(f32_to_f16(f16_to_f32(v)) == v);
        const uint32_t e_bf = (v >> 7) & 255;
        if (e_bf != 255) CHECK(f32_to_bf16(bf16_to_f32(v)) == v);
    }
    CHECK(f16_to_f32(f32_to_f16(65504.0f)) == 65504.0f);
    CHECK(f16_to_f32(f32_to_f16(1e6f)) == 65504.0f);  // saturates
    CHECK(f16_to_f32(f32_to_f16(0x1p-25f)) == 0.0f);  // a tie rounds to even (zero)
    CHECK(f16_to_f32(f32_to_f16(0x1.8p-25f)) == 0x1p-24f);
    CHECK(bf16_to_f32(f32_to_bf16(1.0f + 0x1p-8f)) == 1.0f);  // tie to even
    CHECK(bf16_to_f32(f32_to_bf16(1.0f + 0x1.8p-8f)) == 1.0f + 0x1p-7f);

    Rng rng(77);
    const size_t rows = 64, cols = 128;
    std::vector<float> x(rows * cols);
    for (size_t r = 0; r < rows; ++r) {
        // Rows of very different scales, a zero row, tiny values near the fp16 subnormal range.
        const double scale = r == 3 ? 0.0 : r == 5 ? 1e-6 : std::pow(10.0, double(int(r % 9)) - 4.0);
        for (size_t i = 0; i < cols; ++i) x[r * cols + i] = float(rng.normal() * scale);
    }
    x[7] = 70000.0f;  // beyond fp16's range: saturates, bound covers it
    for (StateCodec c : {StateCodec::fp32, StateCodec::bf16, StateCodec::fp16, StateCodec::int8}) {
        CAPTURE(state_codec_id(c));
        const CodecError e = measure_codec(c, x.data(), rows, cols);
        CHECK(e.max_bound_ratio <= 1.0);
        CHECK(e.bytes == encoded_bytes(c, rows, cols));
        if (c == StateCodec::fp32) CHECK(e.max_abs == 0);
        if (c != StateCodec::fp32) CHECK(e.max_bound_ratio > 0.2);  // the bound is not loose by orders
    }
    CHECK(encoded_bytes(StateCodec::int8, 128, 128) == 128 * 128 + 128 * 4);
    CHECK(encoded_bytes(StateCodec::bf16, 128, 128) == 128 * 128 * 2);
}
