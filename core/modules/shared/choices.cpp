#include "core/modules/shared/choices.h"

namespace k3 {

Choices<ModelPreset> preset_choices(std::initializer_list<ModelPreset> offered) {
    Choices<ModelPreset> out;
    for (ModelPreset m : offered) out.push_back({m, preset_id(m), preset_label(m)});
    return out;
}

Choices<DType> dtype_choices(std::initializer_list<DType> offered) {
    Choices<DType> out;
    for (DType t : offered) out.push_back({t, dtype_name(t), ""});
    return out;
}

Choices<KvDtype> kv_dtype_choices() {
    return {{KvDtype::model, "auto", "the model's (auto)"},
            {KvDtype::bf16, "bf16", ""},
            {KvDtype::fp8, "fp8", ""},
            {KvDtype::fp16, "fp16", ""},
            {KvDtype::fp32, "fp32", ""}};
}

Choices<spec::RecordVariant> record_variant_choices(bool exact_only) {
    Choices<spec::RecordVariant> out;
    // exact_only: the variants the runnable model replays exactly; otherwise every variant, with the
    // accounting-only ones (spec::accounting_variants).
    for (const spec::VariantInfo& v : exact_only ? spec::record_variants() : spec::accounting_variants())
        if (v.exact || !exact_only) out.push_back({v.variant, v.id, std::string(v.row) + " " + v.label});
    return out;
}

Choices<Hardware> hardware_choices() {
    Choices<Hardware> out;
    for (const Hardware& h : hardware_presets()) out.push_back({h, h.id, h.name});
    return out;
}

Choices<Link> link_choices() {
    Choices<Link> out;
    for (const Link& l : link_presets()) out.push_back({l, l.id, l.name});
    return out;
}

}  // namespace k3
