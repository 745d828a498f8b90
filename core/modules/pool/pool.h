// Module 3 `pool`: one seeded request stream served from three memory designs holding the same
// bytes (core/memory): SGLang's static split, vLLM's one page size, SGLang's unified two-ended pool.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/memory/hybrid_blocks.h"
#include "core/memory/pool.h"
#include "core/memory/pool_sim.h"
#include "core/model/config.h"
#include "core/model/pool_model.h"
#include "core/model/tp_shard.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class PoolFalsify : uint8_t {
    none,
    budget,          // every design's pool is made from one byte less than a state slot
    second_owner,    // PoolSimFault::second_owner, in every design's run (so for the rest)
    page_count,      // PoolSimFault::page_count
    lost_page,       // PoolSimFault::lost_page
    leak_request,    // PoolSimFault::leak_request
    lose_request,    // PoolSimFault::lose_request
    refuse_fitting,  // PoolSimFault::refuse_fitting
    state_size,      // vLLM's block derivation (and its pool) is told the state is half its size
    mla_align,       // vLLM's block derivation is told the MLA kernel alignment is 16, not 128
    conv_draft,      // vLLM's state page leaves the N draft columns out of the conv window
    spec_blocks,     // with RecoverSSM a request still holds N speculative state blocks
};

// Whether vLLM forces the attention kernel alignment to at least 128 tokens for MLA models
// (Platform._align_hybrid_block_size, reference/kimi_k3.md §2.2). `automatic`: for Kimi K3, which the
// vLLM tree of reference/kimi_k3.md serves; not for the older presets, whose blocks (reference/serving.md
// §1.2) come from vLLM before it.
enum class MlaAlign : uint8_t { automatic, on, off };
inline constexpr uint32_t kVllmMlaAlignment = 128;

struct PoolParams {
    ModelPreset preset = ModelPreset::kimi_k3;
    KvDtype kv_dtype = KvDtype::model;
    int tp = 8;                  // tensor-parallel ranks: one rank's pool (K3's vLLM recipes run TP8)
    int draft_len = 0;           // N speculative tokens (vLLM num_speculative_tokens)
    bool recoverssm = false;     // K3's RecoverSSM: records instead of one state page per draft token
    bool prefix_caching = true;  // vLLM mamba_cache_mode: align when on, none when off
    MlaAlign mla_align = MlaAlign::automatic;
    double budget_mib = 2048;  // each design gets the same bytes
    int page_tokens = 64;      // SGLang page_size (static and unified designs)
    double state_ratio = 0.9;  // SGLang mamba_full_memory_ratio (static split)
    int block_multiple = 16;   // vLLM's attention kernel block multiple
    int states_per_request = 1;
    PoolWorkload workload = {.shift_factor = 8};  // the request stream; a stronger mix shift than its own
    double map_at = 0.4;                          // pool maps taken at this share of the arrival period
    PoolFalsify falsify = PoolFalsify::none;      // not a declared parameter
};

// vLLM's default --block-size: the user's block, which the derived attention block never goes below.
inline constexpr uint32_t kVllmUserBlockTokens = 16;

// The designs in the order the run serves them and the report lists them.
inline constexpr std::array<PoolDesign, 3> kPoolDesigns = {PoolDesign::static_split, PoolDesign::hybrid_pages,
                                                           PoolDesign::unified};

// One design serving the stream.
struct PoolDesignRun {
    PoolDesign design = PoolDesign::static_split;
    std::string error;  // why the pool could not be made; empty when it was
    PoolLayout layout;
    uint32_t cache_grid = 0;  // tokens: a cached prefix is a whole number of these
    PoolSimResult sim;
};

// The three designs serving one stream from the same budget.
struct PoolComparison {
    ModelConfig config;
    PoolModel model;
    PoolModel vllm_model;           // what vLLM's design holds: the model with vLLM's state page
    VllmStatePage vllm_page;        // that page's parts
    uint32_t kernel_multiple = 16;  // vLLM's kernel alignment for this model
    HybridBlockPlan plan;           // vLLM's block size, derived from the model (as the falsifier tells it)
    uint64_t state_blocks_per_request = 0;  // vLLM: state blocks one request holds in each linear layer
    uint64_t budget = 0;                    // bytes per design
    size_t requests = 0;                    // in the stream
    std::vector<uint32_t> prefix_lengths;
    std::array<PoolDesignRun, kPoolDesigns.size()> designs;  // kPoolDesigns order

    const PoolDesignRun& of(PoolDesign d) const {
        for (const PoolDesignRun& run : designs)
            if (run.design == d) return run;
        return designs[0];  // not reached: every design is served
    }
};

ParamList<PoolParams> pool_params();
void validate_pool(const PoolParams& p, Issues& issues);
// What a run costs before it starts (pool_estimate.cpp).
RunEstimate pool_estimate(const PoolParams& p);

uint64_t pool_budget_bytes(const PoolParams& p);
ModelConfig pool_config_tp1(const PoolParams& p);  // the preset with its KV dtype
ModelConfig pool_config(const PoolParams& p);      // one rank's share of it
PoolModel pool_model_of(const PoolParams& p);
// vLLM's design: its state page, the pool model with it, its kernel alignment, and the state blocks
// a request holds per linear layer (reference/kimi_k3.md §2.2): 2 + N in align mode, 1 + N in none
// mode, N = 0 speculative blocks with RecoverSSM. Undamaged (the run applies the falsifiers).
VllmStatePage vllm_page_of(const PoolParams& p);
PoolModel vllm_model_of(const PoolParams& p);
bool mla_align_applies(const PoolParams& p);
uint32_t vllm_kernel_multiple(const PoolParams& p);
uint64_t vllm_state_blocks_per_request(const PoolParams& p);
// The run in stages: the request stream, each design served in turn, the report.
std::unique_ptr<Run> start_pool(const PoolParams& p, const Params& raw);

void report_pool(const PoolParams& p, const PoolComparison& c, Report& r);
// The designs as figures, rows and checks name them (pool_design_title is the long form).
std::string pool_design_label(PoolDesign d);
// The checks (pool_checks.cpp): whether every design's pool was made (false: the report stops there),
// then the audits of each design's run and vLLM's block.
bool pool_built_checks(const PoolComparison& c, Report& r);
void pool_checks(const PoolParams& p, const PoolComparison& c, Report& r);
// A pool map downsampled to kPoolMapCells cells, one per `*cell_bytes` of pool order (pool_map.cpp).
inline constexpr int kPoolMapCells = 2048;
CellGrid pool_map_grid(const std::vector<MapUnit>& units, uint64_t budget, std::string name,
                       uint64_t* cell_bytes);

}  // namespace k3
