// Request streams for the prefix cache and the fleet: the Mooncake trace expanded to pseudo-tokens,
// and seeded synthetic generators (multi-turn chat, shared system prompts, agentic branching).
//
// Tokens are TokenSeq stream pieces: every message (or trace block) is named by a 64-bit key and
// expands to deterministic pseudo-token ids, so a workload of hundreds of millions of tokens takes
// a few megabytes and prefixes shared in the workload are shared token for token.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/cache/token_seq.h"
#include "core/fleet/trace.h"

namespace k3 {

struct Request {
    uint64_t id = 0;
    double arrival_ms = 0;
    TokenSeqPtr tokens;  // the prompt, followed by the output when the output tokens are known
    uint32_t prompt_len = 0;
    uint32_t output_len = 0;
    bool output_known = false;  // tokens holds the output too (synthetic), so it can be cached
    uint32_t session = 0;       // conversation / task the request belongs to
    uint32_t tenant = 0;
    uint32_t turn = 0;  // position in its session (0 = first)
    // Tokens a server caches when the request finishes: prompt + output when known, else the prompt.
    uint64_t cache_len() const { return prompt_len + (output_known ? uint64_t(output_len) : 0); }
};

struct Workload {
    std::string name;
    std::vector<Request> requests;  // in arrival order (ties: by id)
    uint64_t prompt_tokens() const;
    uint64_t output_tokens() const;
    uint32_t sessions() const;
};

// Key of the pseudo-token stream of Mooncake block `hash_id` (distinct ids give distinct keys).
uint64_t mooncake_block_key(uint64_t hash_id);
// Expands each block id into block_tokens pseudo-tokens (the last block truncated to input_length).
// Requests keep the file order; arrival = timestamp. Outputs are unknown (not cached).
Workload mooncake_workload(const MooncakeTrace& t);

struct ChatConfig {
    uint32_t sessions = 64;
    uint32_t min_turns = 2, max_turns = 8;
    uint32_t system_prompts = 4;  // sessions pick one uniformly
    uint32_t system_len = 2048;
    double user_len_mean = 400;     // lognormal, sigma 0.8
    double output_len_mean = 300;   // lognormal, sigma 0.8
    double session_rate_per_s = 1;  // Poisson session starts
    double think_ms_mean = 30000;   // exponential gap between turns
    uint64_t seed = 1;
};
// Multi-turn chat: turn t's prompt is turn t-1's prompt + output + a new user message.
Workload chat_workload(const ChatConfig& c);

struct SharedPromptConfig {
    uint32_t requests = 512;
    uint32_t system_prompts = 8;  // popularity falls as 1 / rank (Zipf, s = 1)
    uint32_t system_len = 4096;
    double user_len_mean = 300;
    double output_len_mean = 200;
    double rate_per_s = 4;
    uint64_t seed = 2;
};
// Single-turn requests sharing one of a few long system prompts.
Workload shared_prompt_workload(const SharedPromptConfig& c);

struct AgenticConfig {
    uint32_t tasks = 16;
    uint32_t system_len = 3072;  // shared by every task
    uint32_t task_len = 1024;    // unique per task
    uint32_t depth = 6;          // steps along each branch
    double branch_prob = 0.35;   // a step forks ...
    uint32_t max_branches = 3;   // ... into 2..max_branches children (parallel tool calls, sampling)
    uint32_t max_requests_per_task = 64;
    double tool_len_mean = 600;    // tool output appended per step (lognormal, sigma 0.8)
    double action_len_mean = 150;  // model output per step
    double task_rate_per_s = 0.5;
    double step_ms_mean = 4000;
    uint64_t seed = 3;
};
// Agent trees: each step extends its parent step's context (prompt + output + tool result); forks
// share the whole prefix up to the fork.
Workload agentic_workload(const AgenticConfig& c);

struct ReuseMixConfig {
    uint32_t requests = 160;
    double reuse_share = 0.5;  // share of the requests that start with a shared prefix
    uint32_t prefixes = 8;     // shared prefixes; popularity falls as 1 / rank (Zipf, s = 1)
    uint32_t prefix_len = 4096;
    double suffix_len_mean = 300;  // unique part after the prefix
    double output_len_mean = 64;
    double rate_per_s = 4;  // Poisson arrivals of all requests
    uint64_t seed = 4;
};
// Single-turn requests of which a set share begin with one of a few shared prefixes (shared_prompt_workload)
// and the rest are unique prompts of the same mean length (module 14's affinity map).
Workload reuse_mix_workload(const ReuseMixConfig& c);

// Merges workloads into one in arrival order (ties: earlier workload first); ids are renumbered,
// sessions made distinct.
Workload merge_workloads(std::vector<Workload> parts, std::string name);

}  // namespace k3
