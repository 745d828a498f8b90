// Choice lists the modules share: the model presets, element types, record variants, GPUs and
// links they offer.
#pragma once

#include <initializer_list>

#include "core/experiments/param_list.h"
#include "core/model/config.h"
#include "core/model/roofline.h"
#include "core/model/tp_shard.h"
#include "core/spec/storage.h"

namespace k3 {

// The presets offered by a module's `preset` parameter, with their display names.
Choices<ModelPreset> preset_choices(std::initializer_list<ModelPreset> offered);
// Element types by name ("fp32", "bf16", ...), no display names.
Choices<DType> dtype_choices(std::initializer_list<DType> offered);
// The KV cache's element type: "auto" (the model's) or a chosen one (modules 2 and 3).
Choices<KvDtype> kv_dtype_choices();
// The record variants of reference/kda.md §6, labelled by their table row ("(b) minimal exact ...");
// `exact_only`: only those whose replay rebuilds the whole layer state (modules 7 and 8).
Choices<spec::RecordVariant> record_variant_choices(bool exact_only = false);
// Every GPU preset (key its id, label its name), and every link preset likewise.
Choices<Hardware> hardware_choices();
Choices<Link> link_choices();

}  // namespace k3
