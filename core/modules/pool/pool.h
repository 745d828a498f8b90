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
};

struct PoolParams {
    ModelPreset preset = ModelPreset::kimi_linear_48b;
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
    HybridBlockPlan plan;  // vLLM's block size, derived from the model
    uint64_t budget = 0;   // bytes per design
    size_t requests = 0;   // in the stream
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

uint64_t pool_budget_bytes(const PoolParams& p);
PoolModel pool_model_of(const PoolParams& p);
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
