#include "core/fleet/closed_loop.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/base/numfmt.h"

namespace k3 {

double mean_of(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / double(v.size());
}

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

namespace {

// Steps the loop takes, at most: each round of `concurrency` decodes its output, and every prompt's
// chunks take a step of their own.
double steps_bound(const ClosedLoop& b) {
    const double rounds = std::ceil(double(b.prompts) / double(b.concurrency));
    const double uncached = std::max(b.input_tokens - b.cached_tokens, 1.0);
    const double chunks = std::ceil(uncached / std::max(b.step_budget - double(b.concurrency), 1.0));
    return rounds * std::ceil(b.output_tokens / b.tokens_per_decode) + double(b.prompts) * chunks;
}

struct Live {
    double sent = 0, first = 0;
    double left = 0, context = 0, decoded = 0;  // tokens still to prefill, in the KV, generated
    int group = 0;
    uint64_t eligible = 0;  // the first step (by count) that may hold it
    double chunk = 0;       // this step's chunk (0: a decode, or waiting)
    bool in_step = false;
};

class Loop {
  public:
    Loop(const ClosedLoop& b, const StepSeconds& step_s) : b_(b), step_s_(step_s), in_flight_(b.dp_groups) {}
    ClosedLoopResult run() {
        while (sent_ < b_.concurrency && sent_ < b_.prompts) send(0, false);
        r_.ttft_s.assign(size_t(b_.prompts), 0);
        r_.tpot_s.assign(size_t(b_.prompts), 0);
        while (!live_.empty()) {
            if (decode_run()) continue;
            IterationWork w = form_step();
            if (w.empty()) {  // the engine is idle until the requests on their way arrive
                wake_idle_engine();
                w = form_step();
            }
            if (w.empty()) break;  // cannot happen: a live request always decodes or prefills
            now_ += step_s_(w);
            ++r_.steps;
            finish_step();
        }
        r_.duration_s = now_;
        return r_;
    }

  private:
    const ClosedLoop& b_;
    const StepSeconds& step_s_;
    std::vector<int> in_flight_;  // per DP group
    std::vector<Live> live_;      // in the order sent
    std::vector<int> id_;         // each live request's index in the results
    std::vector<double> room_;    // form_step's budgets per group
    int sent_ = 0;
    double now_ = 0;
    ClosedLoopResult r_;

    // `busy`: the engine has other requests in flight, so it forms its next step without waiting.
    // A request reaches the engine an instant after it is sent (client, HTTP, tokenizer), after the
    // engine has formed the steps it forms at that instant: an idle engine starts a step with the first
    // request of a burst alone, the rest arrive while it runs; a busy engine has formed its next step
    // (and under an overlap scheduler the one after, formed as the next is launched).
    void send(double t, bool busy) {
        Live q;
        q.sent = t;
        q.left = std::max(b_.input_tokens - b_.cached_tokens, 1.0);
        q.context = b_.input_tokens - q.left;
        const bool starts_idle_engine = !busy && live_.empty();
        q.eligible = r_.steps + (starts_idle_engine ? 0 : (b_.overlap ? 2 : 1));
        q.group = int(std::min_element(in_flight_.begin(), in_flight_.end()) - in_flight_.begin());
        ++in_flight_[size_t(q.group)];
        live_.push_back(q);
        id_.push_back(sent_++);
    }
    // Nothing to run: the engine waits for the requests sent but not yet arrived; the first to arrive
    // starts a step alone, as an idle engine's burst does (send).
    void wake_idle_engine() {
        bool first = true;
        for (Live& q : live_) {
            if (q.eligible <= r_.steps) continue;
            q.eligible = r_.steps + (first ? 0 : (b_.overlap ? 2 : 1));
            first = false;
        }
    }
    IterationWork form_step() {
        IterationWork w;
        bool waiting = false;
        for (const Live& q : live_) waiting = waiting || (q.left > 0 && q.eligible <= r_.steps);
        const bool prefill_only = b_.prefill_first && waiting;
        std::vector<double>& room = room_;  // each group's budget left, reused step to step
        room.assign(in_flight_.size(), b_.step_budget);
        for (Live& q : live_) {
            q.chunk = 0;
            q.in_step = q.left == 0 && !prefill_only;
            if (!q.in_step) continue;
            w.add_decode(q.context);
            if (!b_.prefill_first) room[size_t(q.group)] -= 1;
        }
        for (Live& q : live_) {
            if (q.left == 0 || q.eligible > r_.steps) continue;
            const double n = std::min(q.left, room[size_t(q.group)]);
            if (n <= 0) continue;
            w.add_chunk(q.context, n);
            room[size_t(q.group)] -= n;
            q.chunk = n;
            q.in_step = true;
        }
        return w;
    }
    // With no prompt waiting, the steps until the next request finishes are decode steps of every live
    // request, each context one step further: timed without visiting the requests.
    bool decode_run() {
        double ctx = 0, k = 1e300;
        for (const Live& q : live_) {
            if (q.left > 0) return false;
            ctx += q.context;
            k = std::min(k, std::ceil((b_.output_tokens - q.decoded) / b_.tokens_per_decode));
        }
        if (k < 2) return false;
        IterationWork w;
        w.decode = uint32_t(live_.size());
        const double per_step = double(live_.size()) * b_.tokens_per_decode;
        for (double j = 0; j < k - 1; ++j) {
            w.decode_context = ctx + j * per_step;
            now_ += step_s_(w);
        }
        r_.steps += uint64_t(k - 1);
        for (Live& q : live_) {  // the last of the k steps goes through finish_step
            q.decoded += (k - 1) * b_.tokens_per_decode;
            q.context += (k - 1) * b_.tokens_per_decode;
        }
        return true;
    }
    void finish_step() {
        size_t kept = 0;
        int done = 0;
        for (size_t i = 0; i < live_.size(); ++i) {
            Live& q = live_[i];
            if (q.in_step && q.chunk > 0) {
                q.left -= q.chunk;
                q.context += q.chunk;
                if (q.left == 0) {
                    q.first = now_;
                    q.decoded = 1;
                }
            } else if (q.in_step) {
                q.decoded += b_.tokens_per_decode;
                q.context += b_.tokens_per_decode;
            }
            if (q.decoded >= b_.output_tokens) {
                const size_t id = size_t(id_[i]);
                r_.ttft_s[id] = q.first - q.sent;
                r_.tpot_s[id] = (now_ - q.first) / (b_.output_tokens - 1);
                --in_flight_[size_t(q.group)];
                ++done;
                continue;
            }
            live_[kept] = q;
            id_[kept++] = id_[i];
        }
        live_.resize(kept);
        id_.resize(kept);
        const bool busy = !live_.empty();
        for (; done > 0 && sent_ < b_.prompts; --done) send(now_, busy);
    }
};

}  // namespace

std::string closed_loop_error(const ClosedLoop& b) {
    if (b.concurrency < 1 || b.prompts < 1 || b.dp_groups < 1)
        return "concurrency, prompts and groups must be >= 1";
    if (!(b.input_tokens >= 1) || !(b.output_tokens >= 2))
        return "a prompt of at least 1 token and 2 output tokens";
    if (!(b.cached_tokens >= 0) || !(b.tokens_per_decode >= 1))
        return "cached tokens >= 0, tokens per decode >= 1";
    if (!(b.step_budget >= 2)) return "the step budget must hold a decode and a chunk token";
    const double work = closed_loop_work(b);
    if (work > kMaxClosedLoopWork)
        return "the benchmark would take about " + format_grouped(work) +
               " request-steps (steps x concurrency), above "
               "the limit of " +
               format_grouped(kMaxClosedLoopWork);
    return "";
}

double closed_loop_work(const ClosedLoop& b) { return steps_bound(b) * double(b.concurrency); }

ClosedLoopResult run_closed_loop(const ClosedLoop& b, const StepSeconds& step_s) {
    if (!closed_loop_error(b).empty()) return {};
    return Loop(b, step_s).run();
}

}  // namespace k3
