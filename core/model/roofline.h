// Roofline estimates of serving work on GPU-class hardware, from a model configuration and a
// hardware preset. These are ESTIMATES and every figure derived from them must be labelled so:
// time = max(FLOPs / (peak x compute efficiency), bytes / (bandwidth x memory efficiency)).
// Times for "this device" are measured live instead (the runnable model's benchmarks).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/model/config.h"

namespace k3 {

struct Hardware {
    std::string id, name;
    double peak_flops = 0;          // dense BF16 tensor FLOP/s (no sparsity)
    double mem_bytes_per_s = 0;     // HBM bandwidth
    double mem_bytes = 0;           // device memory
    std::string source;             // where the figures come from
    double fp8_flops = 0;           // dense FP8 tensor FLOP/s (0: use peak_flops)
    double fp4_flops = 0;           // dense FP4 tensor FLOP/s (0: no FP4 tensor cores; FP4 runs dequantised)
    double nvlink_bytes_per_s = 0;  // NVLink per GPU, one direction (half the quoted bidirectional total)
    bool operator==(const Hardware&) const = default;
};
// "h100" (H100 SXM5), "h20", "a100" (A100 SXM 80GB), "h200", "b200", "gb300": published peaks
// (reference/calibration.md §1; GB300 from NVIDIA's GB300 NVL72 figures per GPU, see the source field).
std::vector<Hardware> hardware_presets();
std::optional<Hardware> hardware_preset(std::string_view id);

// Ids and display names of the hardware presets, in order (parameter choices).
std::vector<std::string> hardware_preset_ids();
std::vector<std::string> hardware_preset_names();

struct Link {
    std::string id, name;
    double bytes_per_s = 0;  // one direction
    bool operator==(const Link&) const = default;
};
// Interconnects for moving state between instances: NVLink 4, InfiniBand NDR 400G, RoCE 200G,
// PCIe Gen5 x16, 100 GbE (nominal line rates).
std::vector<Link> link_presets();
std::optional<Link> link_preset(std::string_view id);
std::vector<std::string> link_preset_ids();
std::vector<std::string> link_preset_names();

// How much of the peak a serving engine reaches; the defaults are assumptions, shown with results.
struct Efficiency {
    double compute = 0.5;  // of peak FLOP/s
    double memory = 0.8;   // of peak bandwidth
};

struct WorkCost {
    double flops = 0, bytes = 0, seconds = 0;
    bool compute_bound = false;
};

// The roofline of any piece of work: seconds = max(FLOPs / (peak x compute efficiency),
// bytes / (bandwidth x memory efficiency)).
WorkCost work_cost(double flops, double bytes, const Hardware& hw, const Efficiency& eff = {});

// FLOPs of one token through the model at `context` tokens of history: 2 x active parameters for
// the projections and MLP/MoE, plus attention over the cached context, plus the KDA core (4 K V
// multiply-adds per value head per linear layer). Needs cfg.active_params (the accounting presets
// have it; the runnable models are measured, not estimated).
double flops_per_token(const ModelConfig& cfg, double context);

// Prefill of `tokens` new tokens after `context` cached ones, as one batch.
WorkCost prefill_cost(const ModelConfig& cfg, const Hardware& hw, double tokens, double context,
                      const Efficiency& eff = {});
// The same prefill folded into batches that stream the weights anyway (chunked prefill next to other
// requests): its FLOPs and its own KV and state traffic, without the weight traffic. What a prefix-cache
// hit or a recompute at a destination saves or costs in a busy engine.
WorkCost prefill_cost_in_batch(const ModelConfig& cfg, const Hardware& hw, double tokens, double context,
                               const Efficiency& eff = {});
// One decode step of `batch` sequences at a mean context of `context` tokens: weights are read
// once per step (active experts of the batch, at most all of them), each sequence's state is read
// and written and its KV read.
WorkCost decode_step_cost(const ModelConfig& cfg, const Hardware& hw, double batch, double context,
                          const Efficiency& eff = {});
double transfer_seconds(double bytes, const Link& link);

}  // namespace k3
