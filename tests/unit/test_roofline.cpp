// Roofline estimates: the regimes come out where the arithmetic says they should.
#include <doctest/doctest.h>

#include "core/model/roofline.h"

using namespace k3;

TEST_CASE("roofline: decode of one sequence is memory bound, a long prefill compute bound") {
    const ModelConfig c = *model_preset("kimi-linear-48b");
    const Hardware h = *hardware_preset("h100");
    const WorkCost d = decode_step_cost(c, h, 1, 4096);
    CHECK_FALSE(d.compute_bound);
    // One sequence reads 3B active params (bf16) plus twice its 43 MB state plus 4096 x 8064 B of KV.
    CHECK(d.bytes == doctest::Approx(2 * 3e9 + 2 * 43417600.0 + 4096 * 8064.0));
    const WorkCost p = prefill_cost(c, h, 32768, 0);
    CHECK(p.compute_bound);
    CHECK(p.seconds > d.seconds);
    // Small MoE batches read distinct experts (weights grow with the batch), large ones share them
    // all: a step of 64 sequences costs far less than 64 single steps.
    CHECK(decode_step_cost(c, h, 2, 4096).bytes ==
          doctest::Approx(2 * 2 * 3e9 + 2 * (2 * 43417600.0 + 4096 * 8064.0)));
    CHECK(decode_step_cost(c, h, 64, 4096).seconds < 0.3 * 64 * d.seconds);
    CHECK(flops_per_token(c, 0) == doctest::Approx(2 * 3e9 + 8.0 * 32 * 128 * 128 * 20));
    CHECK(transfer_seconds(50e9, *link_preset("ib-ndr")) == doctest::Approx(1.0));
    CHECK(hardware_presets().size() == 6);
}

TEST_CASE("roofline: a prefill inside running batches leaves the weight traffic out") {
    ModelConfig c = *model_preset("kimi-linear-48b");
    const Hardware h = *hardware_preset("h100");
    const WorkCost b = prefill_cost_in_batch(c, h, 512, 4096);
    const WorkCost a = prefill_cost(c, h, 512, 4096);
    CHECK(b.flops == a.flops);
    CHECK(a.bytes - b.bytes == doctest::Approx(2.0 * c.total_params));
    c.total_params = 0;
    CHECK(prefill_cost(c, h, 512, 4096).seconds == b.seconds);
    // Without the 96 GB weight stream a short prefill is no longer memory bound.
    CHECK_FALSE(a.compute_bound);
    CHECK(b.compute_bound);
}
