// Module 3 `pool`: the request stream, then each design's pool made from the same budget and served
// by the simulator (core/memory/pool_sim.h), one design at a time.
#include <algorithm>

#include "core/model/pool_model.h"
#include "core/modules/pool/pool.h"

namespace k3 {

namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// The simulator's fault for a falsifier that damages a design's run (none for the others).
PoolSimFault sim_fault(PoolFalsify f) {
    switch (f) {
        case PoolFalsify::second_owner: return PoolSimFault::second_owner;
        case PoolFalsify::page_count: return PoolSimFault::page_count;
        case PoolFalsify::lost_page: return PoolSimFault::lost_page;
        case PoolFalsify::leak_request: return PoolSimFault::leak_request;
        case PoolFalsify::lose_request: return PoolSimFault::lose_request;
        case PoolFalsify::refuse_fitting: return PoolSimFault::refuse_fitting;
        default: return PoolSimFault::none;
    }
}

class PoolRun : public StagedRun {
  public:
    PoolRun(const PoolParams& p, const Params& raw) : StagedRun("pool", raw), params_(p) {
        add_step("request stream", 0.05, [this] { prepare(); });
        for (size_t i = 0; i < kPoolDesigns.size(); ++i)
            add_stage(std::string("serving: ") + pool_design_title(kPoolDesigns[i]), 0.3,
                      [this, i](const Deadline& deadline) { return serve(result_.designs[i], deadline); });
        add_step("report", 0.05, [this] { report_pool(params_, result_, report_); });
    }

  private:
    void prepare();
    PoolResult make_pool(PoolDesign d) const;
    double serve(PoolDesignRun& run, const Deadline& deadline);

    PoolParams params_;
    PoolModel derivation_model_;  // what vLLM's block derivation is told (the model, unless falsified)
    std::vector<SimRequest> stream_;
    uint64_t snapshot_step_ = 0;
    // The design being served: its pool lives only while it is served.
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<PoolSimulation> sim_;
    PoolComparison result_;
};

void PoolRun::prepare() {
    result_.config = *model_preset(params_.preset);
    result_.model = pool_model(result_.config);
    result_.budget = pool_budget_bytes(params_);
    stream_ = make_request_stream(params_.workload);
    result_.requests = stream_.size();
    result_.prefix_lengths = prefix_lengths(params_.workload);
    const double arrivals = double(stream_.empty() ? 0 : stream_.back().arrival);
    snapshot_step_ = uint64_t(params_.map_at * arrivals);
    derivation_model_ = result_.model;
    if (params_.falsify == PoolFalsify::state_size) derivation_model_.state_bytes_per_layer /= 2;
    plan_hybrid_blocks(derivation_model_, uint32_t(params_.block_multiple), kVllmUserBlockTokens,
                       &result_.plan);
    for (size_t i = 0; i < kPoolDesigns.size(); ++i) result_.designs[i].design = kPoolDesigns[i];
}

PoolResult PoolRun::make_pool(PoolDesign d) const {
    const uint64_t budget =
        params_.falsify == PoolFalsify::budget ? result_.model.state_bytes() - 1 : result_.budget;
    const uint32_t page = uint32_t(params_.page_tokens);
    switch (d) {
        case PoolDesign::static_split:
            return make_static_pool(result_.model, {budget, page, params_.state_ratio, 0});
        case PoolDesign::hybrid_pages:
            return make_hybrid_pool(derivation_model_,
                                    {budget, uint32_t(params_.block_multiple), kVllmUserBlockTokens});
        case PoolDesign::unified: return make_unified_pool(result_.model, {budget, page, 0, true});
    }
    return {};
}

double PoolRun::serve(PoolDesignRun& run, const Deadline& deadline) {
    if (!sim_) {
        PoolResult made = make_pool(run.design);
        if (!made.pool) {
            run.error = made.error;
            return 1;
        }
        pool_ = std::move(made.pool);
        run.layout = pool_->layout();
        run.cache_grid = prefix_cache_grid(run.layout);
        PoolSimOptions o;
        o.cache_grid = run.cache_grid;
        o.states_per_request = params_.states_per_request;
        o.snapshot_step = snapshot_step_;
        o.fault = sim_fault(params_.falsify);
        o.fault_step = snapshot_step_;
        sim_ = std::make_unique<PoolSimulation>(*pool_, stream_, result_.prefix_lengths, o);
    }
    if (!sim_->advance(&deadline)) return std::min(0.99, sim_->progress());
    run.sim = sim_->result();
    sim_.reset();
    pool_.reset();
    return 1;
}

}  // namespace

uint64_t pool_budget_bytes(const PoolParams& p) { return uint64_t(p.budget_mib * kMiB); }

PoolModel pool_model_of(const PoolParams& p) { return pool_model(*model_preset(p.preset)); }

std::unique_ptr<Run> start_pool(const PoolParams& p, const Params& raw) {
    return std::make_unique<PoolRun>(p, raw);
}

}  // namespace k3
