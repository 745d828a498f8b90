#include "core/fleet/instance_shape.h"

#include <algorithm>
#include <string>

#include "core/model/accounting.h"

namespace k3 {

InstanceShape::InstanceShape(const ModelConfig& model, const Hardware& hw, int gpus, bool attention_dp)
    : hw_(hw), gpus_(std::max(gpus, 1)), layout_(tp_layout(model, gpus, attention_dp)) {
    hw_.peak_flops *= double(gpus_);
    hw_.mem_bytes_per_s *= double(gpus_);
    hw_.mem_bytes *= double(gpus_);
    if (gpus_ > 1) hw_.name = std::to_string(gpus_) + " x " + hw.name;
    const MemoryAccount acc = account_memory(model);
    state_bytes_ = acc.state_bytes;
    kv_bytes_ = acc.kv_bytes_per_token;
}

}  // namespace k3
