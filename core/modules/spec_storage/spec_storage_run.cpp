// Module 7 `spec-storage`: the accounting, then (with demo) the rollback on the default runnable model
// (k3-tiny) in stages: load it, restore every n with every record variant, time the restores.
#include "core/model/dims.h"
#include "core/modules/spec_storage/spec_storage.h"
#include "core/spec/models.h"

namespace k3 {

namespace {

using namespace k3::spec;

constexpr uint64_t kDemoSeed = 7;
constexpr int kDemoPrompt = 24;

// The damage the demo's verifiers do for the falsifier (none for the accounting's).
VerifyFault demo_fault(SpecStorageFalsify f) {
    switch (f) {
        case SpecStorageFalsify::short_record: return VerifyFault::short_record;
        case SpecStorageFalsify::record_bit: return VerifyFault::flip_record_bit;
        case SpecStorageFalsify::correction_bit: return VerifyFault::flip_correction_bit;
        case SpecStorageFalsify::snapshot_position: return VerifyFault::snapshot_position;
        case SpecStorageFalsify::chunked_verify: return VerifyFault::chunked_verify;
        default: return VerifyFault::none;
    }
}

// The configuration the storage accounting is given: the model's, damaged as the falsifier says.
ModelConfig accounting_config(const SpecStorageParams& p, ModelConfig c) {
    if (p.falsify == SpecStorageFalsify::window_row) c.conv_width -= 1;
    if (p.falsify == SpecStorageFalsify::gate_per_head) c.linear_name = "GDN";
    return c;
}

class SpecStorageRun : public StagedRun {
  public:
    SpecStorageRun(const SpecStorageParams& p, const Params& raw)
        : StagedRun("spec-storage", raw), params_(p) {
        add_step("storage accounting", 1, [this] { accounting(); });
        if (!p.demo) return;
        add_step("runnable model", 3, [this] { load_model(); });
        add_stage("rollback for every n and variant", 3, [this](const Deadline& d) { return compare(d); });
        add_step("RecoverSSM closed-form commit", 0.5, [this] { closed_form(); });
        add_stage("restore timings", 3, [this](const Deadline& d) { return time_restores(d); });
        add_step("report", 0.1, [this] { finish(); });
    }

  private:
    void accounting() {
        result_.accounting = account_spec_storage(params_);
        if (!params_.demo) report_spec_storage(params_, result_, report_);
    }
    void load_model();
    double compare(const Deadline& d);
    void closed_form();
    double time_restores(const Deadline& d);
    void finish();

    SpecStorageParams params_;
    SpecStorageResult result_;
    RollbackDemo demo_;
    std::shared_ptr<model::Model> model_;
    std::unique_ptr<RollbackLab> lab_;
    bool timed_model_ = false;
};

void SpecStorageRun::load_model() {
    model_ = cached_model(default_runnable_id(), 1, 16, &demo_.error);
    if (!model_) return;
    lab_ = RollbackLab::create(*model_, params_.draft_len, kDemoPrompt, params_.accept, kDemoSeed,
                               &demo_.error, demo_fault(params_.falsify));
}

double SpecStorageRun::compare(const Deadline& d) {
    if (!lab_) return 1.0;
    const auto& variants = record_variants();
    while (demo_.outcomes.size() < variants.size()) {
        std::vector<RestoreOutcome> outcomes;
        uint64_t held = 0;
        if (std::string e = lab_->compare(variants[demo_.outcomes.size()].variant, &outcomes, &held);
            !e.empty()) {
            demo_.error = e;
            return 1.0;
        }
        demo_.outcomes.push_back(std::move(outcomes));
        demo_.record_bytes_held.push_back(held);
        if (d.passed()) break;
    }
    return double(demo_.outcomes.size()) / double(variants.size());
}

void SpecStorageRun::closed_form() {
    if (!lab_ || !demo_.error.empty()) return;
    const int skip = params_.falsify == SpecStorageFalsify::closed_form_skip ? 0 : -1;
    if (std::string e = lab_->closed_form_errors(skip, &demo_.closed_form); !e.empty()) demo_.error = e;
}

double SpecStorageRun::time_restores(const Deadline&) {
    if (!lab_) return 1.0;
    if (!timed_model_) {
        if (std::string e = lab_->time_restore(params_.variant, 5, &demo_.copy_ms, &demo_.replay_ms);
            !e.empty())
            demo_.error = e;
        timed_model_ = true;
        return 0.5;
    }
    // One KDA layer at Kimi-Linear dimensions (32 heads, 128 x 128), outside the model.
    demo_.layer = time_layer_restore(kda::Shape{32, 32, 128, 128}, 4, params_.draft_len, 3);
    return 1.0;
}

void SpecStorageRun::finish() {
    demo_.ran = lab_ && demo_.error.empty();
    if (demo_.ran) {
        demo_.draft_len = lab_->draft_len();
        demo_.accepted = lab_->accepted();
        demo_.vocab = model_->vocab();
        demo_.state_bytes = model_->pool_model().state_bytes();
        demo_.snapshot_bytes_held = lab_->snapshot_bytes_held();
        demo_.confirmed_bytes_held = lab_->confirmed_bytes_held();
        demo_.logits_match = lab_->logits_match();
        demo_.tiny_accounting = spec_storage(model_->config(), params_.variant, demo_.draft_len, 1, 0);
    }
    result_.demo = std::move(demo_);
    report_spec_storage(params_, result_, report_);
}

// vLLM's pages at N draft tokens, damaged as the falsifier says.
spec::VllmPages pages_at(const SpecStorageParams& p, const ModelConfig& c, int n,
                         std::vector<PageTensor>* tensors = nullptr) {
    std::vector<PageTensor> t = vllm_kda_page_tensors(c, n, 1);
    if (p.falsify == SpecStorageFalsify::records_without_kg)
        std::erase_if(t, [](const PageTensor& x) { return x.name == "kg_cache"; });
    if (p.falsify == SpecStorageFalsify::conv_without_draft)
        for (PageTensor& x : t)
            if (x.name == "conv_state") x.shape[1] = uint64_t(c.conv_width - 1);
    if (tensors) *tensors = t;
    return vllm_pages(t, n);
}

}  // namespace

StorageAccounting account_spec_storage(const SpecStorageParams& p) {
    StorageAccounting a;
    a.model = *model_preset(p.preset);
    const ModelConfig c = accounting_config(p, a.model);
    const int N = p.draft_len, R = p.running_requests, L = p.ring_capacity;
    a.chosen = spec_storage(c, p.variant, N, R, L);
    for (const VariantInfo& v : accounting_variants())
        a.variants.push_back(spec_storage(c, v.variant, N, R, L));
    for (int n = 1; n <= kSpecMaxDraft; ++n) a.by_draft_len.push_back(spec_storage(c, p.variant, n, R, L));
    a.fields = record_fields(c, p.variant);
    const model::KdaDims layer = model::kda_dims(a.model);
    a.layout_S_bytes = layer.state_floats() * dtype_bytes(a.model.state_dtype);
    a.layout_window_bytes = layer.window_floats() * dtype_bytes(a.model.conv_dtype);
    if (a.model.id == "kimi-linear-48b")
        a.kimi_reference = spec_storage(c, RecordVariant::minimal_exact, 4, R, L);
    a.recoverssm_fields = record_fields(c, RecordVariant::recoverssm);
    if (p.falsify == SpecStorageFalsify::records_without_kg)
        std::erase_if(a.recoverssm_fields, [](const RecordField& f) { return f.name != "correction c_t"; });
    if (a.model.linear_name == "KDA") {
        VllmPageComparison v;
        v.chosen = pages_at(p, c, N, &v.tensors);
        for (int n = 1; n <= kVllmPageTableDraft; ++n) v.table.push_back(pages_at(p, c, n));
        v.conv_column_bytes =
            uint64_t(layer.window_floats() / size_t(layer.window_rows())) * dtype_bytes(a.model.conv_dtype);
        for (const RecordField& f : a.recoverssm_fields) v.recoverssm_record += f.bytes();
        a.vllm = std::move(v);
    }
    return a;
}

std::unique_ptr<Run> start_spec_storage(const SpecStorageParams& p, const Params& raw) {
    return std::make_unique<SpecStorageRun>(p, raw);
}

}  // namespace k3
