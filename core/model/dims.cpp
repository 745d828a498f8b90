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
    return d;
}

}  // namespace k3::model
