#include "core/lifecycle/blob_layout.h"

namespace k3::lifecycle {

const char* state_order_name(StateOrder o) { return o == StateOrder::kv ? "[K][V]" : "[V][K]"; }

BlobLayout BlobLayout::of(const ModelConfig& c, uint32_t chunk) {
    BlobLayout l;
    l.state_order = StateOrder::kv;
    l.state_dtype = c.state_dtype;
    l.conv_dtype = c.conv_dtype;
    l.kv_dtype = c.kv_dtype;
    l.linear_layers = uint32_t(c.n_linear());
    l.attention_layers = uint32_t(c.n_attention());
    l.heads = uint32_t(c.lin_heads);
    l.v_heads = uint32_t(c.lin_v_heads);
    l.head_k = uint32_t(c.head_k);
    l.head_v = uint32_t(c.head_v);
    l.conv_width = uint32_t(c.conv_width);
    l.kv_row = c.attn_kind == AttnKind::mla ? uint32_t(c.mla_latent + c.mla_rope)
                                            : 2u * uint32_t(c.kv_heads) * uint32_t(c.attn_head_dim);
    l.chunk = chunk;
    return l;
}

uint64_t BlobLayout::recurrent_bytes_per_layer() const {
    return uint64_t(v_heads) * head_k * head_v * dtype_bytes(state_dtype);
}

uint64_t BlobLayout::conv_bytes_per_layer() const {
    return uint64_t(conv_width > 1 ? conv_width - 1 : 0) * conv_channels() * dtype_bytes(conv_dtype);
}

uint64_t BlobLayout::kv_bytes_per_token_per_layer() const { return uint64_t(kv_row) * dtype_bytes(kv_dtype); }

std::string BlobLayout::problem() const {
    auto range = [](const char* name, uint64_t v, uint64_t lo, uint64_t hi) -> std::string {
        if (v >= lo && v <= hi) return {};
        return std::string(name) + " " + std::to_string(v) + " is outside [" + std::to_string(lo) + ", " +
               std::to_string(hi) + "]";
    };
    if (uint8_t(state_order) > 1) return "state order " + std::to_string(int(state_order)) + " is unknown";
    for (DType t : {state_dtype, conv_dtype, kv_dtype})
        if (uint8_t(t) > uint8_t(DType::int8)) return "dtype code " + std::to_string(int(t)) + " is unknown";
    std::string e;
    if (!(e = range("linear_layers", linear_layers, 0, kMaxBlobLayers)).empty()) return e;
    if (!(e = range("attention_layers", attention_layers, 0, kMaxBlobLayers)).empty()) return e;
    if (!(e = range("heads", heads, 1, kMaxBlobHeads)).empty()) return e;
    if (!(e = range("v_heads", v_heads, 1, kMaxBlobHeads)).empty()) return e;
    if (v_heads % heads)
        return "v_heads " + std::to_string(v_heads) + " is not a multiple of heads " + std::to_string(heads);
    if (!(e = range("head_k", head_k, 1, kMaxBlobHeadDim)).empty()) return e;
    if (!(e = range("head_v", head_v, 1, kMaxBlobHeadDim)).empty()) return e;
    if (!(e = range("conv_width", conv_width, 1, kMaxBlobConvWidth)).empty()) return e;
    if (!(e = range("kv_row", kv_row, 0, kMaxBlobKvRow)).empty()) return e;
    return range("chunk", chunk, 0, 1u << 20);
}

std::string BlobLayout::difference(const BlobLayout& m) const {
    auto differs = [](const char* name, const std::string& b, const std::string& mv) {
        return std::string(name) + ": blob " + b + ", model " + mv;
    };
    if (state_order != m.state_order)
        return differs("state order", state_order_name(state_order), state_order_name(m.state_order));
    if (state_dtype != m.state_dtype)
        return differs("state dtype", dtype_name(state_dtype), dtype_name(m.state_dtype));
    if (conv_dtype != m.conv_dtype)
        return differs("conv dtype", dtype_name(conv_dtype), dtype_name(m.conv_dtype));
    if (kv_dtype != m.kv_dtype) return differs("KV dtype", dtype_name(kv_dtype), dtype_name(m.kv_dtype));
    const struct {
        const char* name;
        uint32_t a, b;
    } f[] = {{"linear_layers", linear_layers, m.linear_layers},
             {"attention_layers", attention_layers, m.attention_layers},
             {"heads", heads, m.heads},
             {"v_heads", v_heads, m.v_heads},
             {"head_k", head_k, m.head_k},
             {"head_v", head_v, m.head_v},
             {"conv_width", conv_width, m.conv_width},
             {"kv_row", kv_row, m.kv_row},
             {"chunk", chunk, m.chunk}};
    for (const auto& x : f)
        if (x.a != x.b) return differs(x.name, std::to_string(x.a), std::to_string(x.b));
    return {};
}

std::string contents_text(uint32_t c) {
    static const char* names[] = {"S", "conv", "KV", "tokens", "sampler"};
    std::string s;
    for (int i = 0; i < 5; ++i)
        if (c & (1u << i)) s += (s.empty() ? "" : " + ") + std::string(names[i]);
    return s.empty() ? "nothing" : s;
}

uint64_t blob_bytes(const BlobLayout& l, uint64_t position, uint64_t tokens, uint32_t contents) {
    uint64_t n = kBlobHeaderBytes + kBlobTrailerBytes;
    if (contents & kBlobRecurrent)
        n += l.linear_layers * (kSectionHeaderBytes + l.recurrent_bytes_per_layer());
    if (contents & kBlobConv) n += l.linear_layers * (kSectionHeaderBytes + l.conv_bytes_per_layer());
    if (contents & kBlobKv)
        n += l.attention_layers * (kSectionHeaderBytes + position * l.kv_bytes_per_token_per_layer());
    if (contents & kBlobTokens) n += kSectionHeaderBytes + 4 * tokens;
    if (contents & kBlobSampler) n += kSectionHeaderBytes + kSamplerPayloadBytes;
    return n;
}

}  // namespace k3::lifecycle
