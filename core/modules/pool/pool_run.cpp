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
    PoolModel derivation_model_;  // what vLLM's block derivation is told (its model, unless falsified)
    uint32_t derivation_multiple_ = 16;
    std::vector<SimRequest> stream_;
    uint64_t snapshot_step_ = 0;
    // The design being served: its pool lives only while it is served.
    std::unique_ptr<PagePool> pool_;
    std::unique_ptr<PoolSimulation> sim_;
    PoolComparison result_;
};

void PoolRun::prepare() {
    result_.config = pool_config(params_);
    result_.model = pool_model(result_.config);
    result_.vllm_page = vllm_page_of(params_);
    result_.vllm_model = vllm_pool_model(result_.config, result_.vllm_page);
    result_.kernel_multiple = vllm_kernel_multiple(params_);
    result_.state_blocks_per_request = vllm_state_blocks_per_request(params_);
    result_.budget = pool_budget_bytes(params_);
    stream_ = make_request_stream(params_.workload);
    result_.requests = stream_.size();
    result_.prefix_lengths = prefix_lengths(params_.workload);
    const double arrivals = double(stream_.empty() ? 0 : stream_.back().arrival);
    snapshot_step_ = uint64_t(params_.map_at * arrivals);
    derivation_model_ = result_.vllm_model;
    derivation_multiple_ = result_.kernel_multiple;
    switch (params_.falsify) {
        case PoolFalsify::state_size: derivation_model_.state_bytes_per_layer /= 2; break;
        case PoolFalsify::mla_align:
            if (mla_align_applies(params_))
                derivation_multiple_ = std::max(uint32_t(params_.block_multiple), 16u);
            break;
        case PoolFalsify::conv_draft:
            derivation_model_ = vllm_pool_model(
                result_.config,
                vllm_state_page(result_.config, params_.draft_len, params_.recoverssm, false));
            break;
        case PoolFalsify::spec_blocks:
            if (params_.recoverssm) result_.state_blocks_per_request += uint64_t(params_.draft_len);
            break;
        default: break;
    }
    plan_hybrid_blocks(derivation_model_, derivation_multiple_, kVllmUserBlockTokens, &result_.plan);
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
            return make_hybrid_pool(derivation_model_, {budget, derivation_multiple_, kVllmUserBlockTokens});
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

ModelConfig pool_config_tp1(const PoolParams& p) {
    ModelConfig c = *model_preset(p.preset);
    c.kv_dtype = resolve_kv_dtype(p.kv_dtype, c.kv_dtype);
    return c;
}

ModelConfig pool_config(const PoolParams& p) { return shard_for_tp(pool_config_tp1(p), p.tp); }

PoolModel pool_model_of(const PoolParams& p) { return pool_model(pool_config(p)); }

VllmStatePage vllm_page_of(const PoolParams& p) {
    return vllm_state_page(pool_config(p), p.draft_len, p.recoverssm);
}

PoolModel vllm_model_of(const PoolParams& p) { return vllm_pool_model(pool_config(p), vllm_page_of(p)); }

bool mla_align_applies(const PoolParams& p) {
    if (model_preset(p.preset)->attn_kind != AttnKind::mla) return false;
    switch (p.mla_align) {
        case MlaAlign::automatic: return p.preset == ModelPreset::kimi_k3;
        case MlaAlign::on: return true;
        case MlaAlign::off: return false;
    }
    return false;
}

uint32_t vllm_kernel_multiple(const PoolParams& p) {
    const uint32_t k = uint32_t(p.block_multiple);
    return mla_align_applies(p) ? std::max(k, kVllmMlaAlignment) : k;
}

uint64_t vllm_state_blocks_per_request(const PoolParams& p) {
    return (p.prefix_caching ? 2u : 1u) + (p.recoverssm ? 0u : uint64_t(p.draft_len));
}

std::unique_ptr<Run> start_pool(const PoolParams& p, const Params& raw) {
    return std::make_unique<PoolRun>(p, raw);
}

}  // namespace k3
