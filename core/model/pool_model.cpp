#include "core/model/pool_model.h"

namespace k3 {

PoolModel pool_model(const MemoryAccount& a) {
    PoolModel m;
    m.linear_layers = a.linear_layers;
    m.attention_layers = a.attention_layers;
    m.state_bytes_per_layer = a.state_bytes_per_layer;
    m.recurrent_bytes_per_layer = a.recurrent_bytes_per_layer;
    m.kv_bytes_per_token_per_layer = a.kv_bytes_per_token_per_layer;
    return m;
}

}  // namespace k3
