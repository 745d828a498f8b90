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
    CHECK(r.ttft_s[0] == 1.0);  // the idle engine starts a step with the first prompt to arrive
    CHECK(r.ttft_s[1] == 2.0);  // the second arrives while it runs
    // The first finishes at step 5 (its tokens at steps 1, 2, 3, 4, 5); the third, sent then, arrives
    // after step 6 is formed (the second's last decode) and is prefilled at step 7.
    CHECK(r.ttft_s[2] == 2.0);
    CHECK(r.ttft_s[3] == 2.0);  // sent at step 6's end, prefilled at step 8 beside the third's decode
    CHECK(r.tpot_s[0] == 1.0);
    CHECK(median_of(r.ttft_s) == 2.0);
    CHECK(mean_of(r.ttft_s) == doctest::Approx(7.0 / 4));
}

TEST_CASE("closed loop: DP groups each take a prompt, a prefill-first engine makes the decodes wait") {
    ClosedLoop b;
    b.concurrency = b.prompts = 4;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.dp_groups = 4;
    const ClosedLoopResult dp = run_closed_loop(b, kOneSecond);
    CHECK(dp.ttft_s[0] == 1.0);  // the first to arrive runs alone, the others in the next step,
    for (size_t i = 1; i < 4; ++i) CHECK(dp.ttft_s[i] == 2.0);  // one in each group
    b.dp_groups = 1;
    b.prefill_first = true;
    b.step_budget = 16000;  // two prompts a prefill step
    const ClosedLoopResult sg = run_closed_loop(b, kOneSecond);
    CHECK(sg.ttft_s[0] == 1.0);
    CHECK(sg.ttft_s[2] == 2.0);  // the second and third share step 2, the fourth has step 3
    CHECK(sg.ttft_s[3] == 3.0);
    // The first's decodes wait for steps 2 and 3: 2 tokens after the first in 4 steps.
    CHECK(sg.tpot_s[0] == 2.0);
    CHECK(sg.tpot_s[2] == 1.5);
    CHECK(sg.tpot_s[3] == 1.0);
}

TEST_CASE("closed loop: a TPOT holds the steps that carry other prompts, timed by the step model") {
    ClosedLoop b;
    b.concurrency = b.prompts = 2;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.step_budget = 8001;
    // A step costs one second plus one per 1000 prefill tokens. Step 1: the first prompt alone (the
    // second arrives while it runs); step 2: the first's decode and the second's prompt.
    const ClosedLoopResult r =
        run_closed_loop(b, [](const IterationWork& w) { return 1.0 + w.prefill_tokens / 1000.0; });
    CHECK(r.ttft_s[0] == doctest::Approx(9.0));
    CHECK(r.ttft_s[1] == doctest::Approx(18.0));
    CHECK(r.tpot_s[0] == doctest::Approx((9.0 + 1.0) / 2));  // a decode beside the second's prompt
    CHECK(r.tpot_s[1] == doctest::Approx(1.0));
    // Speculative decoding: 4 tokens a step, 9 tokens in 2 steps after the first.
    b.concurrency = b.prompts = 1;
    b.output_tokens = 9;
    b.tokens_per_decode = 4;
    CHECK(run_closed_loop(b, kOneSecond).tpot_s[0] == 2.0 / 8.0);
}

TEST_CASE("closed loop: under an overlap scheduler a request sent as one finishes misses two steps") {
    ClosedLoop b;
    b.concurrency = 2;
    b.prompts = 3;
    b.input_tokens = 8000;
    b.output_tokens = 3;
    b.overlap = true;
    const ClosedLoopResult r = run_closed_loop(b, kOneSecond);
    // The first arrives at the idle engine: step 1. The second arrives while step 1 runs, after step
    // 2 was formed (as step 1 launched): step 3, beside the first's last decode. The third, sent as
    // the first finishes at step 3, misses step 4 (formed while step 3 ran) and step 5 (formed as step
    // 4 launched) and is prefilled in step 6.
    CHECK(r.ttft_s[0] == 1.0);
    CHECK(r.ttft_s[1] == 3.0);
    CHECK(r.ttft_s[2] == 3.0);
    b.overlap = false;  // without it, each misses only the step formed when it was sent
    const ClosedLoopResult plain = run_closed_loop(b, kOneSecond);
    CHECK(plain.ttft_s[1] == 2.0);
    CHECK(plain.ttft_s[2] == 2.0);
}

TEST_CASE("closed loop: an engine with nothing to run waits for the requests on their way") {
    // Prefill-first under an overlap scheduler: the burst's first request finishes a step before the
    // others, its successor (sent while they decode) misses two steps, and the others' successors miss
    // two more: at some step nothing is eligible and nothing decodes. The engine idles until the
    // first of them arrives; every request still completes.
    ClosedLoop b;
    b.concurrency = 4;
    b.prompts = 12;
    b.input_tokens = 8000;
    b.output_tokens = 5;
    b.step_budget = 16000;
    b.prefill_first = true;
    b.overlap = true;
    const ClosedLoopResult r = run_closed_loop(b, kOneSecond);
    for (size_t i = 0; i < 12; ++i) {
        CHECK(r.ttft_s[i] >= 1.0);
        CHECK(r.tpot_s[i] >= 1.0);
    }
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
