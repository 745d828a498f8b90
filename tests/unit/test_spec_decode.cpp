// Speculative decoding's arithmetic in the fleet (core/fleet/spec_decode.h) against a count by hand.
#include <doctest/doctest.h>

#include <cmath>

#include "core/fleet/spec_decode.h"
#include "core/fleet/step_model.h"
#include "core/model/config.h"

namespace k3 {

namespace {
// Tokens after s steps at A thousandths, step by step in doubles (exact at these sizes).
uint64_t decoded_after(uint64_t s, uint32_t milli) {
    return uint64_t(std::floor(double(s * milli) / 1000.0));
}
}  // namespace

TEST_CASE("spec decode: steps yield floor(s A) tokens, found from the tokens alone") {
    for (double a : {1.0, 1.5, 2.0, 3.7, 4.26, 8.0}) {
        CAPTURE(a);
        const SpecAcceptance acc(a);
        for (uint64_t s = 0; s < 60; ++s) {
            const uint64_t d = decoded_after(s, acc.milli());
            for (uint64_t m = 0; m < 12; ++m)
                CHECK(acc.tokens(d, m) == decoded_after(s + m, acc.milli()) - d);
            for (uint64_t want = 1; want < 40; ++want) {
                const uint64_t n = acc.steps_for(d, want);  // the fewest steps reaching `want`
                CHECK(acc.tokens(d, n) >= want);
                CHECK((n == 0 || acc.tokens(d, n - 1) < want));
                const uint64_t k = acc.steps_within(d, want);  // the most steps within `want`
                CHECK(acc.tokens(d, k) <= want);
                CHECK(acc.tokens(d, k + 1) > want);
            }
        }
    }
    // DSpark on Kimi-K3 (A = 4.26): 4, 4, 4, 5 tokens over the first four steps.
    const SpecAcceptance k3(4.26);
    CHECK(k3.tokens(0, 1) == 4);
    CHECK(k3.tokens(4, 1) == 4);
    CHECK(k3.tokens(8, 1) == 4);
    CHECK(k3.tokens(12, 1) == 5);
    CHECK(SpecAcceptance(1.0).tokens(17, 5) == 5);
}

TEST_CASE("spec decode: a verify's drafts and state traffic, snapshot against RecoverSSM") {
    const ModelConfig m = *model_preset(ModelPreset::kimi_k3);
    CHECK(spec_work(m, SpecState::off, 7).drafts == 0);
    CHECK(spec_work(m, SpecState::off, 7).extra_state_transfers == 0);
    CHECK(spec_work(m, SpecState::snapshot, 7).extra_state_transfers == 7);
    // K = V = 128: a record is 128 x 4 + 2 x 128 x 2 = 1,024 B against a state of 65,536 B (1/64),
    // written by the verify and read by the commit for each of the 8 positions; the commit reads the
    // checkpoint once more.
    CHECK(spec_work(m, SpecState::recoverssm, 7).extra_state_transfers == doctest::Approx(1 + 16.0 / 64));
    IterationWork w = decode_work(4, 1000);
    add_drafts(w, spec_work(m, SpecState::snapshot, 3));
    CHECK(w.draft_tokens == 12);
    CHECK(w.draft_attention == doctest::Approx(3 * (4000 + 4 * 2.0)));  // 3 drafts at 1,001 ... 1,003
    CHECK(w.extra_state_transfers == 12);
}

}  // namespace k3
