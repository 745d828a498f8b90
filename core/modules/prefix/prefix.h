// Module 4 `prefix`: dual-granularity prefix caching on the runnable model. A seeded workload of
// requests sharing prefixes (system prompt, multi-turn chat, branches) is served five ways through
// the real-state store (core/cache/prefix_server.h) and every output is compared with the same request
// run cold.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "core/cache/prefix_server.h"
#include "core/cache/tree_view.h"
#include "core/experiments/module.h"
#include "core/model/accounting.h"

namespace k3 {

enum class PrefixWorkload : uint8_t { mix, system, chat, branches };
// The three kinds of request the workload interleaves (mix) or serves alone.
enum class PrefixScenario : uint8_t { system, chat, branch };
inline constexpr size_t kPrefixScenarios = 3;

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class PrefixFalsify : uint8_t {
    none,
    flip_resumed_state,  // the state methods flip one bit of every state they resume from
    zero_resumed_state,  // the state methods resume from a zero state (KV-only reuse, called exact)
    exact_kv_only,       // KV-only reuse is given the true state of the skipped prefix
    probe_zero_state,    // the off-grid probe resumes with a zero state
    probe_on_grid,       // the off-grid probe resumes on the chunk grid
    states_dropped,      // the state methods' trees drop every checkpoint after each request
    kv_evicted,          // the caching methods' trees evict half their KV after each request
    recomputed_skewed,   // every resumed request's recomputed count is recorded one token short
    stray_state_slot,    // a state slot is taken from a method's pool behind the tree after request 1
    leaked_slot,         // a state slot is taken from a method's pool after its cache is dropped
    bad_prompt_token,    // the first prompt holds a token outside the vocabulary
    bad_output_token,    // KV-only reuse is fed an output token outside the vocabulary
    engine_misplaced,    // the engine method saves every state one page below where the engine's rule puts it
};

struct PrefixParams {
    PrefixWorkload workload = PrefixWorkload::mix;
    int requests = 3;             // per scenario (chat: turns)
    uint64_t shared_tokens = 64;  // the system prompt, the document of the branches
    uint64_t user_tokens = 12;    // each request's own part, +-25 %
    int gen = 3;                  // output tokens per request
    uint64_t seed = 1;            // of the workload's tokens
    uint32_t interval = 64;       // "states every N tokens"
    uint32_t chunk = 64;          // of the chunked KDA prefill kernel
    uint32_t page_size = 1;       // tokens per KV page
    uint64_t state_capacity = 0;  // checkpoints the tree may hold, 0 = unbounded
    serve::KvOnlyStart kv_only_start = serve::KvOnlyStart::zero;
    StateCodec codec = StateCodec::fp32;
    // Whose rules a sixth method follows (ideal: none; the five methods above are idealised placements).
    // Names, choice ids and labels as module 5's (core/modules/checkpoints/checkpoints.cpp).
    CacheEngine engine = CacheEngine::ideal;
    SglangMode sglang_mode = SglangMode::extra_buffer;
    uint32_t chunked_prefill_tokens = 64;  // small: several chunks per prompt at this scale
    uint32_t vllm_block_tokens = 64;       // a multiple of the kernel chunk: resumes stay bitwise
    std::string retention_interval = "dense";
    PrefixFalsify falsify = PrefixFalsify::none;  // not a declared parameter
};

// The engine method's server settings from the parameters (engine, SGLang's and vLLM's configs).
void prefix_engine_config(const PrefixParams& p, serve::ServerConfig& c);

// The methods compared, in table order. The first is the cold run itself.
enum class PrefixMethod : uint8_t { none, kv_only, end, interval, branch, engine };
struct PrefixMethodInfo {
    PrefixMethod method;
    const char* id;
    const char* label;
    serve::Reuse reuse;
    PolicyKind policy;
};
inline constexpr PrefixMethodInfo kPrefixMethods[] = {
    {PrefixMethod::none, "none", "no cache", serve::Reuse::none, PolicyKind::interval},
    {PrefixMethod::kv_only, "kv_only", "KV-only reuse (wrong)", serve::Reuse::kv_only, PolicyKind::interval},
    {PrefixMethod::end, "end", "state at request end only", serve::Reuse::state, PolicyKind::end},
    {PrefixMethod::interval, "interval", "states every N tokens", serve::Reuse::state, PolicyKind::interval},
    {PrefixMethod::branch, "branch", "states at branch points", serve::Reuse::state, PolicyKind::branch},
    // Served only when engine is not ideal; its label names the engine (PrefixMethodResult::label).
    {PrefixMethod::engine, "engine", "the engine's own rules", serve::Reuse::state, PolicyKind::interval},
};
inline constexpr size_t kPrefixMethodCount = std::size(kPrefixMethods);
static_assert(
    [] {
        for (size_t i = 0; i < kPrefixMethodCount; ++i)
            if (size_t(kPrefixMethods[i].method) != i) return false;
        return true;
    }(),
    "kPrefixMethods is indexed by PrefixMethod");

// |logit diff| <= kPrefixTolerance x largest |logit| of the cold run: a rounding difference.
inline constexpr double kPrefixTolerance = 1e-4;

// How a request's outputs compare with its cold run, as measured.
enum class PrefixExactness : uint8_t { bitwise, within_rounding, wrong };
const char* prefix_exactness_name(PrefixExactness e);  // "bitwise", "within rounding", "wrong"

// One request of the workload. Chat turns are resolved during the cold pass: a turn's prompt holds
// the previous turn's prompt and output.
struct PrefixRequest {
    PrefixScenario scenario = PrefixScenario::system;
    int index = 0;                 // within its scenario (chat: the turn)
    std::vector<int32_t> user;     // this request's own tokens
    std::vector<int32_t> prompt;   // resolved
    uint64_t decoded_from = 0;     // first prompt position holding an earlier request's output
    std::vector<int32_t> outputs;  // the cold run's (greedy)
    std::vector<float> logits;     // the cold run's
    double scale = 0;              // largest |cold logit|
    double cold_ms = 0;
    uint64_t shared = 0;  // longest common prefix with an earlier request's tokens
};

// One request served by one method.
struct PrefixRow {
    uint64_t kv_hit = 0, state_hit = 0, resumed = 0, recomputed = 0, borrowed = 0, saved = 0;
    uint64_t prefilled = 0;          // prompt tokens the server handed to the model
    uint64_t cached = 0;             // tokens the server inserted into the tree
    uint64_t branching = 0;          // the engine's branching seqlen or junction (0: none)
    uint32_t steps = 0;              // the engine's prefill steps
    std::vector<uint64_t> saved_at;  // positions of the checkpoints it saved
    bool state_matches = true, off_grid = false, bitwise = false;
    bool expected_exact = false;  // the server says its outputs must be the cold run's bits
    PrefixExactness exactness = PrefixExactness::bitwise;
    double max_diff = 0;
    int first_diff = -1;  // first output step whose greedy token differs from the cold run
    uint64_t held_states = 0, held_state_bytes = 0, held_kv_bytes = 0;
    double ms = 0;
};

// A request's hits recounted without the tree (prefix_recount.cpp).
struct PrefixRecount {
    uint64_t kv_hit = 0, state_hit = 0;
};

struct PrefixMethodResult {
    const PrefixMethodInfo* info = nullptr;
    bool active = true;                  // the engine method is served only when engine is not ideal
    std::string label;                   // info->label, or the engine's name
    std::vector<PrefixRow> rows;         // one per request, in workload order
    std::vector<PrefixRecount> recount;  // one per request; empty when not recounted
    std::string audit, error;            // the first failed audit; why serving stopped
    bool zero = false;                   // the pool is empty once the cache is dropped...
    std::string zero_detail;             // ...or what it still holds
    CacheStats end_stats;
    uint64_t end_state_bytes = 0, end_kv_bytes = 0, peak_bytes = 0;
    CompressedTree tree;
    double ms = 0, prefill_ms = 0, decode_ms = 0;
};

// A resume from a checkpoint at a page boundary off the chunk grid, measured against the cold run.
struct PrefixOffGridProbe {
    bool done = false, bitwise = false;
    uint64_t pos = 0;
    double diff = 0, scale = 0;
    std::string note;  // why it was not measured
};

struct PrefixResult {
    std::string failed;  // the run could not complete
    std::vector<PrefixRequest> requests;
    std::array<PrefixMethodResult, kPrefixMethodCount> methods;
    PrefixOffGridProbe probe;
    MemoryAccount account;  // of the runnable model

    PrefixMethodResult& method(PrefixMethod m) { return methods[size_t(m)]; }
    const PrefixMethodResult& method(PrefixMethod m) const { return methods[size_t(m)]; }
};

// Rough upper bounds of a run's size, from the parameters alone (validation, pool sizing).
struct PrefixEstimate {
    uint64_t prompt_tokens = 0, max_fed = 0, requests = 0, fed_tokens = 0;
};
PrefixEstimate estimate_prefix(const PrefixParams& p);
// Every request's prompt tokens at most (its own part at +25 %) and those it shares with an earlier
// request, in workload order.
struct PrefixRequestSize {
    PrefixScenario scenario;
    uint64_t index = 0, prompt = 0, shared = 0;
};
void for_each_prefix_request(const PrefixParams& p, const std::function<void(const PrefixRequestSize&)>& fn);
uint64_t prefix_pool_bytes(const ModelConfig& c, const PrefixEstimate& e, uint64_t states, uint32_t page);
uint64_t prefix_states(const PrefixEstimate& e, uint64_t interval, uint64_t capacity);
// The finest grid states may be saved on (interval, chunk, and the engine's chunk or block).
uint64_t prefix_state_grid(const PrefixParams& p);
// The engine method's label: the engine and its settings.
std::string prefix_engine_label(const PrefixParams& p);

// A caching method's hits recounted from the requests' tokens and the checkpoint positions each earlier
// request saved, without the tree. Empty when a state capacity may have evicted what the recount
// assumes is held.
std::vector<PrefixRecount> recount_prefix_hits(const PrefixParams& p, const PrefixResult& res,
                                               PrefixMethod m);

ParamList<PrefixParams> prefix_params();
void validate_prefix(const PrefixParams& p, Issues& issues);
RunEstimate prefix_estimate(const PrefixParams& p);
std::unique_ptr<Run> start_prefix(const PrefixParams& p, const Params& raw);
void report_prefix(const PrefixParams& p, const PrefixResult& res, Report& r);
// The engine method's figures and checks (prefix_engine.cpp); nothing when engine is ideal.
void report_prefix_engine(const PrefixParams& p, const PrefixResult& res, Report& r);

}  // namespace k3
