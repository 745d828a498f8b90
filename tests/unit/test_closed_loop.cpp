// The benchmark's closed loop (core/fleet/closed_loop.h) on step models simple enough to count by hand.
#include <doctest/doctest.h>

#include "core/fleet/closed_loop.h"

using namespace k3;

namespace {

// Every step takes one second, whatever it holds.
const StepSeconds kOneSecond = [](const IterationWork&) { return 1.0; };

}  // namespace

TEST_CASE("closed loop: one request at a time is its prefill steps, then one step per token") {
    ClosedLoop b;
    b.prompts = 3;
    b.input_tokens = 20000;  // three chunks of 8192
    b.output_tokens = 11;
    const ClosedLoopResult r = run_closed_loop(b, kOneSecond);
    for (int i = 0; i < 3; ++i) {
        CHECK(r.ttft_s[size_t(i)] == 3.0);  // the third chunk's step gives the first token
        CHECK(r.tpot_s[size_t(i)] == 1.0);
    }
    CHECK(r.steps == 3 * (3 + 10));
    CHECK(r.duration_s == 39.0);
}

TEST_CASE("closed loop: prompts sent together wait for each other; later ones arrive as others finish") {
    ClosedLoop b;
    b.concurrency = 2;
    b.prompts = 4;
    b.input_tokens = 8000;  // one prompt a step in a budget of 8192 (mixed: decodes count)
    b.output_tokens = 5;
    const ClosedLoopResult r = run_closed_loop(b, kOneSecond);
    CHECK(r.ttft_s[0] == 1.0);
    CHECK(r.ttft_s[1] == 2.0);  // waited for the first prompt's step
    // The first finishes at step 5 (its tokens at steps 1, 2, 3, 4, 5), the third is sent then and
    // prefilled at step 6 beside the second's last decode.
    CHECK(r.ttft_s[2] == 1.0);
    CHECK(r.tpot_s[0] == 1.0);
    CHECK(median_of(r.ttft_s) == 1.0);
    CHECK(mean_of(r.ttft_s) == doctest::Approx(5.0 / 4));
}

TEST_CASE("closed loop: DP groups each take a prompt, a prefill-first engine makes the decodes wait") {
    ClosedLoop b;
    b.concurrency = b.prompts = 4;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.dp_groups = 4;
    const ClosedLoopResult dp = run_closed_loop(b, kOneSecond);
    for (double t : dp.ttft_s) CHECK(t == 1.0);  // one prompt per group, all in the first step
    b.dp_groups = 1;
    b.prefill_first = true;
    b.step_budget = 16000;  // two prompts a prefill step
    const ClosedLoopResult sg = run_closed_loop(b, kOneSecond);
    CHECK(sg.ttft_s[0] == 1.0);
    CHECK(sg.ttft_s[2] == 2.0);
    // The first two's decodes wait for the second prefill step: 2 tokens after the first in 3 steps.
    CHECK(sg.tpot_s[0] == 1.5);
    CHECK(sg.tpot_s[2] == 1.0);
}

TEST_CASE("closed loop: a TPOT holds the steps that carry other prompts, timed by the step model") {
    ClosedLoop b;
    b.concurrency = b.prompts = 2;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.step_budget = 8001;
    // A step costs one second plus one per 1000 prefill tokens. Step 1: the first prompt and one
    // token of the second; step 2: the first's decode and the rest of the second.
    const ClosedLoopResult r =
        run_closed_loop(b, [](const IterationWork& w) { return 1.0 + w.prefill_tokens / 1000.0; });
    CHECK(r.ttft_s[0] == doctest::Approx(9.001));
    CHECK(r.ttft_s[1] == doctest::Approx(18.0));
    CHECK(r.tpot_s[0] == doctest::Approx((8.999 + 1.0) / 2));  // a decode beside the second's chunk
    CHECK(r.tpot_s[1] == doctest::Approx(1.0));
    // Speculative decoding: 4 tokens a step, 9 tokens in 2 steps after the first.
    b.concurrency = b.prompts = 1;
    b.output_tokens = 9;
    b.tokens_per_decode = 4;
    CHECK(run_closed_loop(b, kOneSecond).tpot_s[0] == 2.0 / 8.0);
}

TEST_CASE("closed loop: under an overlap scheduler a request sent as one finishes misses the next step") {
    ClosedLoop b;
    b.concurrency = 2;
    b.prompts = 3;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.overlap = true;
    const ClosedLoopResult r = run_closed_loop(b, kOneSecond);
    // The first two arrive with the engine idle: steps 1 and 2 (as without overlap). The first
    // finishes at step 3; the third, sent then, misses step 4 (formed while step 3 ran) and is
    // prefilled in step 5.
    CHECK(r.ttft_s[0] == 1.0);
    CHECK(r.ttft_s[1] == 2.0);
    CHECK(r.ttft_s[2] == 2.0);
    b.overlap = false;
    CHECK(run_closed_loop(b, kOneSecond).ttft_s[2] == 1.0);
}

TEST_CASE("closed loop: refuses what cannot run, naming the limit") {
    ClosedLoop b;
    CHECK(closed_loop_error(b) == "");
    b.output_tokens = 1;
    CHECK(closed_loop_error(b) != "");
    b.output_tokens = 2e9;
    CHECK(closed_loop_error(b).find("limit") != std::string::npos);
    CHECK(run_closed_loop(b, kOneSecond).steps == 0);
}
