#include "core/spec/storage.h"

#include "core/model/accounting.h"

namespace k3::spec {

const std::vector<VariantInfo>& record_variants() {
    static const std::vector<VariantInfo> v = {
        {RecordVariant::core_only, "core_only", "(a)", "core only",
         "k and v after conv, SiLU (and L2 for k); g; beta", false, false},
        {RecordVariant::minimal_exact, "minimal_exact", "(b)", "minimal exact (raw conv inputs)",
         "raw pre-conv q, k, v rows; g; beta. k and v are recomputed through the conv from the confirmed "
         "window",
         true, true},
        {RecordVariant::raw_gates, "raw_gates", "(b')", "raw gate inputs",
         "raw q, k, v; raw gate input z = f_b(f_a x); raw beta logit. g and beta are recomputed", true, true},
        {RecordVariant::no_conv_recompute, "no_conv_recompute", "(c)", "core + raw rows (no conv recompute)",
         "(a) plus the raw q, k, v rows that rebuild the conv window", true, true},
        {RecordVariant::layer_input, "layer_input", "(d)", "layer input only",
         "the layer input x; every projection is recomputed on replay", true, true},
        {RecordVariant::delta, "delta", "(e)", "delta form",
         "k; delta = beta (v - k^T D S); g. Replay is S = D S + k delta^T, no prediction dot product", false,
         false},
        {RecordVariant::delta_conv, "delta_conv", "(e)+conv", "delta form + raw rows",
         "(e) plus the raw q, k, v rows that rebuild the conv window", true, true},
        // kimi_k3.md §3.2: the raw q, k, v rows stay in the conv window vLLM widens to W - 1 + N columns
        // (record_conv_columns); the fold rebuilds S from the correction, the re-normalised key and the
        // gate recomputed from z, and shifts the rows into the W - 1 window.
        {RecordVariant::recoverssm, "recoverssm", "K3", "RecoverSSM (Kimi-K3)",
         "per head and position: the delta-rule correction c_t (fp32), the key after the conv before its "
         "L2 norm and the raw gate z (activation dtype), folded into the untouched checkpoint after "
         "acceptance; the raw q, k, v rows are the conv window's W - 1 + N columns",
         true, true},
    };
    return v;
}

const VariantInfo& variant_info(RecordVariant v) { return record_variants()[size_t(v)]; }

std::optional<RecordVariant> parse_variant(std::string_view id) {
    for (const auto& i : accounting_variants())
        if (id == i.id) return i.variant;
    return std::nullopt;
}

std::vector<std::string> variant_ids() {
    std::vector<std::string> ids;
    for (const auto& i : accounting_variants()) ids.emplace_back(i.id);
    return ids;
}

uint64_t gate_elements(const ModelConfig& c) {
    // Gated DeltaNet decays each head by one scalar; KDA by one value per key channel (kda.md §0).
    const uint64_t hv = uint64_t(c.lin_v_heads);
    return c.linear_name == "GDN" ? hv : hv * uint64_t(c.head_k);
}

std::vector<RecordField> record_fields(const ModelConfig& c, RecordVariant v) {
    const DType act = c.conv_dtype;  // activations: the dtype the conv window keeps raw rows in
    const uint64_t qk = uint64_t(c.lin_heads) * uint64_t(c.head_k);
    const uint64_t vc = uint64_t(c.lin_v_heads) * uint64_t(c.head_v);
    const uint64_t hv = uint64_t(c.lin_v_heads), g = gate_elements(c);
    const RecordField k{"k (post-conv, L2)", qk, act}, vv{"v (post-conv)", vc, act};
    const RecordField gate{"g (log-decay)", g, DType::fp32}, beta{"beta", hv, DType::fp32};
    const RecordField rq{"raw q", qk, act}, rk{"raw k", qk, act}, rv{"raw v", vc, act};
    switch (v) {
        case RecordVariant::core_only: return {k, vv, gate, beta};
        case RecordVariant::minimal_exact: return {rq, rk, rv, gate, beta};
        case RecordVariant::raw_gates:
            return {rq, rk, rv, {"raw gate input z", g, act}, {"raw beta logit", hv, act}};
        case RecordVariant::no_conv_recompute: return {k, vv, gate, beta, rq, rk, rv};
        case RecordVariant::layer_input: return {{"layer input x", uint64_t(c.d_model), act}};
        case RecordVariant::delta: return {k, {"delta", vc, DType::fp32}, gate};
        case RecordVariant::delta_conv: return {k, {"delta", vc, DType::fp32}, gate, rq, rk, rv};
        case RecordVariant::recoverssm:  // kimi_k3.md §3.2: c_t (128 fp32) + raw k, raw g (2 x 128 bf16)
            return {{"correction c_t", vc, DType::fp32},
                    {"k (post-conv, before L2)", qk, act},
                    {"raw gate input z", g, act}};
    }
    return {};
}

uint64_t record_bytes_per_token_per_layer(const ModelConfig& c, RecordVariant v) {
    uint64_t b = 0;
    for (const auto& f : record_fields(c, v)) b += f.bytes();
    return b;
}

int record_conv_columns(RecordVariant v) { return v == RecordVariant::recoverssm ? 1 : 0; }

uint64_t conv_column_bytes(const ModelConfig& c) {
    const uint64_t channels = 2 * uint64_t(c.lin_heads) * uint64_t(c.head_k) +
                              uint64_t(c.lin_v_heads) * uint64_t(c.head_v);  // q, k, v
    return channels * dtype_bytes(c.conv_dtype);
}

uint64_t held_bytes_per_token_per_layer(const ModelConfig& c, RecordVariant v) {
    return record_bytes_per_token_per_layer(c, v) + uint64_t(record_conv_columns(v)) * conv_column_bytes(c);
}

uint64_t snapshot_bytes_per_layer(const ModelConfig& c) { return account_memory(c).state_bytes_per_layer; }

SpecStorage spec_storage(const ModelConfig& c, RecordVariant v, int draft_len, int running_requests,
                         int ring_capacity) {
    SpecStorage s;
    s.draft_len = draft_len;
    s.running_requests = running_requests;
    s.ring_capacity = ring_capacity;
    s.linear_layers = c.n_linear();
    s.snapshot_per_layer = snapshot_bytes_per_layer(c);
    s.record_per_token = record_bytes_per_token_per_layer(c, v);
    s.held_per_token = held_bytes_per_token_per_layer(c, v);
    const uint64_t n = uint64_t(draft_len > 0 ? draft_len : 0);
    s.snapshots_extra_per_layer = n * s.snapshot_per_layer;
    s.records_extra_per_layer = n * s.held_per_token;
    s.snapshots_total_per_layer = (n + 1) * s.snapshot_per_layer;
    s.projection_total_per_layer = s.snapshot_per_layer + s.records_extra_per_layer;
    s.ring_total_per_layer =
        s.snapshot_per_layer + uint64_t(ring_capacity > 0 ? ring_capacity : 0) * s.held_per_token;
    const double proj = double(s.projection_total_per_layer);
    s.ratio_n_snapshots = proj > 0 ? double(s.snapshots_extra_per_layer) / proj : 0;
    s.ratio_counting_confirmed = proj > 0 ? double(s.snapshots_total_per_layer) / proj : 0;
    s.ratio_per_token = s.held_per_token > 0 ? double(s.snapshot_per_layer) / double(s.held_per_token) : 0;
    return s;
}

std::vector<PageTensor> vllm_kda_page_tensors(const ModelConfig& c, int draft_tokens, int tp) {
    const uint64_t n = uint64_t(draft_tokens > 0 ? draft_tokens : 0), t = uint64_t(tp > 0 ? tp : 1);
    const uint64_t hv = uint64_t(c.lin_v_heads) / t, h = uint64_t(c.lin_heads) / t;
    const uint64_t K = uint64_t(c.head_k), V = uint64_t(c.head_v);
    const uint64_t channels = 2 * h * K + hv * V;  // q, k, v
    return {
        {"ssm_state", {hv, K, V}, c.state_dtype, false},
        {"conv_state", {channels, uint64_t(c.conv_width - 1) + n}, c.conv_dtype, false},
        {"correction_cache", {hv, 1 + n, V}, DType::fp32, true},
        {"kg_cache", {hv, 1 + n, 2 * K}, c.conv_dtype, true},
    };
}

VllmPages vllm_pages(const std::vector<PageTensor>& tensors, int draft_tokens) {
    VllmPages p;
    p.draft_tokens = draft_tokens;
    for (const PageTensor& x : tensors) {
        if (x.record)
            p.records += x.bytes();
        else if (x.name == "ssm_state")
            p.state += x.bytes();
        else
            p.conv += x.bytes();
    }
    const uint64_t n = uint64_t(draft_tokens > 0 ? draft_tokens : 0);
    p.snapshot_page = p.state + p.conv;
    p.recoverssm_page = p.snapshot_page + p.records;
    p.snapshot_none = (1 + n) * p.snapshot_page;
    p.recoverssm_none = p.recoverssm_page;
    p.snapshot_align = (2 + n) * p.snapshot_page;
    p.recoverssm_align = 2 * p.recoverssm_page;
    p.ratio_none = p.recoverssm_none ? double(p.snapshot_none) / double(p.recoverssm_none) : 0;
    p.ratio_align = p.recoverssm_align ? double(p.snapshot_align) / double(p.recoverssm_align) : 0;
    return p;
}

}  // namespace k3::spec
