#include "core/model/dims.h"

#include <cmath>

namespace k3::model {

KdaDims kda_dims(const ModelConfig& c) {
    KdaDims d;
    d.s = kda::Shape{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v};
    d.d_model = c.d_model;
    d.rank = c.gate_rank;
    d.conv_width = c.conv_width;
    d.scale = kda::default_scale(c.head_k);
    d.gate_lower_bound = c.gate_lower_bound;
    d.full_rank_gate = c.full_rank_output_gate;
    return d;
}

MlaDims mla_dims(const ModelConfig& c) {
    MlaDims d;
    d.d_model = c.d_model;
    d.heads = c.attn_heads;
    d.nope = c.mla_nope_dim;
    d.rope = c.mla_rope;
    d.latent = c.mla_latent;
    d.v = c.mla_v_dim;
    d.scale = float(1.0 / std::sqrt(double(d.nope + d.rope)));
    d.output_gate = c.mla_output_gate;
    return d;
}

}  // namespace k3::model
