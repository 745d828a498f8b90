// The TP layout of a fleet instance (core/fleet/tp_layout.h): what one rank holds, what the pool and
// the cost model count, under tensor parallel and DP attention.
#include <doctest/doctest.h>

#include "core/fleet/cost_model.h"
#include "core/fleet/fleet_cost.h"
#include "core/fleet/tp_layout.h"
#include "core/model/accounting.h"

using namespace k3;

TEST_CASE("tp layout: the MLA latent is replicated, GQA KV heads split up to their number, states shard") {
    const ModelConfig kimi = *model_preset("kimi-linear-48b"), qwen = *model_preset("qwen3-next-80b");
    const MemoryAccount k = account_memory(kimi), q = account_memory(qwen);
    REQUIRE(qwen.kv_heads == 2);
    for (int tp : {1, 2, 4, 8}) {
        CAPTURE(tp);
        const TpLayout a = tp_layout(kimi, tp, false);
        CHECK(a.rank_kv_bytes_per_token() == k.kv_bytes_per_token);  // every rank the whole latent
        CHECK(a.kv_bytes_per_token() == uint64_t(tp) * k.kv_bytes_per_token);
        CHECK(a.rank_state_bytes() * uint64_t(tp) == k.state_bytes);  // KDA heads split
        CHECK(a.state_bytes() == k.state_bytes);
        const TpLayout b = tp_layout(qwen, tp, false);
        const uint64_t heads_per_rank = uint64_t(std::max(1, 2 / tp));
        CHECK(b.rank_kv_bytes_per_token() == q.kv_bytes_per_token / 2 * heads_per_rank);
        CHECK(b.kv_bytes_per_token() == q.kv_bytes_per_token * (tp <= 2 ? 1 : uint64_t(tp) / 2));
        // DP attention: every token and state whole on one rank, nothing counted twice.
        const TpLayout d = tp_layout(kimi, tp, true);
        CHECK(d.kv_bytes_per_token() == k.kv_bytes_per_token);
        CHECK(d.state_bytes() == k.state_bytes);
        CHECK(d.rank_state_bytes() == k.state_bytes);
    }
    CHECK(tp_layout_error(kimi, 3, false) != "");
    CHECK(tp_layout_error(kimi, 3, true) == "");
}

TEST_CASE("tp layout: a TP instance holds half the MLA tokens of DP at 2 GPUs and reads twice the KV") {
    FleetConfig c;
    c.model = *model_preset("kimi-linear-48b");
    c.hardware = *hardware_preset("h100");
    const PoolModel tp = tp_layout(c.model, 2, false).pool_model(),
                    dp = tp_layout(c.model, 2, true).pool_model();
    CHECK(tp.kv_bytes_per_token() == 2 * dp.kv_bytes_per_token());
    CHECK(tp.state_bytes() == dp.state_bytes());
    c.gpus = 2;
    FleetConfig cd = c;
    cd.attention_dp = true;
    const CostModel a(c), b(cd);
    IterationWork w0, w1;
    w0.add_decode(0);
    w1.add_decode(100000);
    const double kv_tp = a.cost(w1).bytes - a.cost(w0).bytes, kv_dp = b.cost(w1).bytes - b.cost(w0).bytes;
    CHECK(kv_tp == doctest::Approx(2 * kv_dp).epsilon(1e-12));
    // One copy is what a checkpoint, the host tier and a link carry, whatever the layout.
    CHECK(a.kv_bytes_per_token() == b.kv_bytes_per_token());
    CHECK(a.held_kv_bytes_per_token() == 2 * b.held_kv_bytes_per_token());
}
