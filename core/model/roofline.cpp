#include "core/model/roofline.h"

#include <algorithm>

#include "core/model/accounting.h"

namespace k3 {

std::vector<Hardware> hardware_presets() {
    // NVLink: H100/H200/H20 NVLink 4 at 900 GB/s total, A100 NVLink 3 at 600 GB/s, B200/GB300 NVLink 5 at
    // 1.8 TB/s total (NVIDIA datasheets); one direction is half.
    return {
        {"h100", "NVIDIA H100 SXM5 80GB", 989.4e12, 3.35e12, 80e9,
         "NVIDIA H100 datasheet: 989 TFLOP/s dense BF16, 3.35 TB/s HBM3", 1978.9e12, 0, 450e9},
        {"h20", "NVIDIA H20 96GB", 148e12, 4.0e12, 96e9,
         "NVIDIA H20 product brief: 148 TFLOP/s dense BF16, 4.0 TB/s HBM3", 296e12, 0, 450e9},
        {"a100", "NVIDIA A100 SXM 80GB", 312e12, 2.039e12, 80e9,
         "NVIDIA A100 datasheet: 312 TFLOP/s dense BF16, 2,039 GB/s HBM2e", 0, 0, 300e9},
        {"h200", "NVIDIA H200 SXM 141GB", 989e12, 4.8e12, 141e9,
         "calibration.md §1: 989 TFLOP/s dense BF16, 1,979 FP8, 141 GB HBM3e at 4.8 TB/s", 1979e12, 0, 450e9},
        {"b200", "NVIDIA B200 (HGX, 1000 W)", 2.25e15, 8e12, 180e9,
         "calibration.md §1 (glennklockwood B200, HGX 1000 W): 2.25 PF dense BF16, 4.5 FP8, 9 FP4, 180 GB "
         "HBM3e at 8 TB/s",
         4.5e15, 9e15, 900e9},
        {"gb300", "NVIDIA GB300 (Blackwell Ultra, NVL72)", 2.5e15, 8e12, 288e9,
         "NVIDIA GB300 NVL72 per GPU (rack 1,080 PF dense FP4, 360 FP8, 180 BF16, 20 TB at 576 TB/s, NVLink "
         "130 TB/s over 72 GPUs; verda.com/blog/gb300-nvl72-architecture, glennklockwood.com B300)",
         5e15, 15e15, 900e9},
    };
}

std::optional<Hardware> hardware_preset(std::string_view id) {
    for (auto& h : hardware_presets())
        if (h.id == id) return h;
    return std::nullopt;
}

std::vector<Link> link_presets() {
    return {
        {"nvlink4", "NVLink 4 (H100, per direction)", 450e9},
        {"ib-ndr", "InfiniBand NDR 400 Gb/s", 50e9},
        {"roce-200", "RoCE 200 Gb/s", 25e9},
        {"pcie5", "PCIe Gen5 x16", 64e9},
        {"eth-100", "100 Gb Ethernet", 12.5e9},
    };
}

std::optional<Link> link_preset(std::string_view id) {
    for (auto& l : link_presets())
        if (l.id == id) return l;
    return std::nullopt;
}

namespace {
template <class T>
std::vector<std::string> field_of(const std::vector<T>& presets, std::string T::*field) {
    std::vector<std::string> v;
    for (const T& p : presets) v.push_back(p.*field);
    return v;
}
}  // namespace

std::vector<std::string> hardware_preset_ids() { return field_of(hardware_presets(), &Hardware::id); }
std::vector<std::string> hardware_preset_names() { return field_of(hardware_presets(), &Hardware::name); }
std::vector<std::string> link_preset_ids() { return field_of(link_presets(), &Link::id); }
std::vector<std::string> link_preset_names() { return field_of(link_presets(), &Link::name); }

static double attention_flops_per_token(const ModelConfig& c, double context) {
    // Scores and the weighted sum over the cached context, per attention layer: MLA in its absorbed
    // form works in the latent space (latent + rope per head), GQA per head dimension.
    const double per_head =
        c.attn_kind == AttnKind::mla ? double(c.mla_latent + c.mla_rope) : double(c.attn_head_dim);
    return 4.0 * double(c.attn_heads) * per_head * context * double(c.n_attention());
}

double flops_per_token(const ModelConfig& c, double context) {
    const double kda =
        8.0 * double(c.lin_v_heads) * double(c.head_k) * double(c.head_v) * double(c.n_linear());
    return 2.0 * c.active_params + attention_flops_per_token(c, context) + kda;
}

WorkCost work_cost(double flops, double bytes, const Hardware& hw, const Efficiency& eff) {
    WorkCost w;
    w.flops = flops;
    w.bytes = bytes;
    const double tc = flops / (hw.peak_flops * eff.compute);
    const double tm = bytes / (hw.mem_bytes_per_s * eff.memory);
    w.compute_bound = tc >= tm;
    w.seconds = std::max(tc, tm);
    return w;
}

WorkCost prefill_cost(const ModelConfig& c, const Hardware& hw, double tokens, double context,
                      const Efficiency& eff) {
    const MemoryAccount a = account_memory(c);
    // Attention of the new tokens sees on average the context plus half of themselves.
    const double flops = tokens * flops_per_token(c, context + tokens / 2);
    // Weights once (bf16, all experts a large batch touches), KV written, state read and written.
    const double bytes =
        2.0 * c.total_params + double(a.kv_bytes_per_token) * tokens + 2.0 * double(a.state_bytes);
    return work_cost(flops, bytes, hw, eff);
}

WorkCost prefill_cost_in_batch(const ModelConfig& c, const Hardware& hw, double tokens, double context,
                               const Efficiency& eff) {
    ModelConfig no_weights = c;
    no_weights.total_params = 0;
    return prefill_cost(no_weights, hw, tokens, context, eff);
}

WorkCost decode_step_cost(const ModelConfig& c, const Hardware& hw, double batch, double context,
                          const Efficiency& eff) {
    const MemoryAccount a = account_memory(c);
    const double flops = batch * flops_per_token(c, context);
    const double weights = 2.0 * std::min(c.total_params, batch * c.active_params);
    const double per_seq = 2.0 * double(a.state_bytes) + double(a.kv_bytes_per_token) * context;
    return work_cost(flops, weights + batch * per_seq, hw, eff);
}

double transfer_seconds(double bytes, const Link& link) { return bytes / link.bytes_per_s; }

}  // namespace k3
