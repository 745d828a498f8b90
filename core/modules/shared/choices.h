// Choice lists the modules share: the model presets, element types, GPUs and links they offer.
#pragma once

#include <initializer_list>

#include "core/experiments/param_list.h"
#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

// The presets offered by a module's `preset` parameter, with their display names.
Choices<ModelPreset> preset_choices(std::initializer_list<ModelPreset> offered);
// Element types by name ("fp32", "bf16", ...), no display names.
Choices<DType> dtype_choices(std::initializer_list<DType> offered);
// Every GPU preset (key its id, label its name), and every link preset likewise.
Choices<Hardware> hardware_choices();
Choices<Link> link_choices();

}  // namespace k3
