// Module 1 `kda`: the KDA kernels of core/kda run live on seeded inputs: accuracy of the fp32 recurrent
// and chunked kernels against the fp64 reference, scalar against SIMD (bit for bit and in throughput),
// and the chunk-size trade-off.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/experiments/module.h"
#include "core/kda/device.h"
#include "core/kda/golden.h"
#include "core/kda/inputs.h"
#include "core/modules/kda/kda_model.h"

namespace k3 {

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class KdaFalsify : uint8_t {
    none,
    fp32_gate,         // one gate of the fp32 kernels' inputs differs from the one the fp64 reference saw
    sweep_state,       // one element of a chunk-size sweep run's final state is doubled or halved
    simd_output_bit,   // the lowest bit of one output of the SIMD chunked kernel is flipped
    decode_state_bit,  // one bit of the state is flipped between two decode steps
    split_carry,       // the second call of the split prefill starts from S0, not the carried state
    affine_b_sign,     // the sign of the segment map's largest B entry is flipped
    fma_output,        // the largest output of the FMA chunked kernel is doubled or halved
};

// The runnable model module 1 puts on the device's roofline (core/model/config.h), or none.
enum class KdaModel : uint8_t { none, k3_tiny, tiny, small };
const char* kda_model_preset(KdaModel m);  // "k3-tiny", ...; "" for none
// Its parameters (Model::weights().parameters(), for the run estimate without building the model; a
// test holds them to the real models).
double kda_model_parameters(KdaModel m);

struct KdaParams {
    int heads = 2;         // H: query/key heads
    int group = 1;         // value heads per q/k head: HV = heads x group
    int k = 128, v = 128;  // head dims K, V
    int tokens = 256;      // T: tokens of one prefill
    int chunk = 64;        // C of the chunked kernel
    kda::GateRecipe gate = kda::GateRecipe::logsigmoid;
    double gate_strength = 1;
    uint64_t seed = 1;
    KdaModel model = KdaModel::k3_tiny;
    KdaFalsify falsify = KdaFalsify::none;  // not a declared parameter
};

// Relative RMS every fp32 kernel must stay within against fp64 (reference/kda.md §7).
inline constexpr double kKdaRelTarget = 1e-5;
// Layer states the "states in memory" decode cycles through: more than any cache holds.
inline constexpr double kKdaManyStateBytes = 64.0 * 1024 * 1024;

// The kernels whose throughput is measured, in the order of the report's bars.
enum class TimedKernel {
    decode_simd,
    decode_states_in_memory,  // SIMD decode cycling through 64 MiB of states
    recurrent_simd,
    chunked_simd,
    decode_scalar,
    recurrent_scalar,
    chunked_scalar,
    decode_fma,  // the FMA variants (not bit-exact), in builds that have them (kda::fma_enabled())
    chunked_fma,
};
inline constexpr size_t kTimedKernels = 9;

// What a clock measured: it goes to the report's `timing` only.
struct KdaThroughput {
    std::array<double, kTimedKernels> rate{};  // best head-tokens/s of each TimedKernel
    std::vector<int> chunks;                   // chunk sizes timed for the chunked (SIMD) kernel
    std::vector<double> chunk_rate;            // head-tokens/s at each of them
    double of(TimedKernel k) const { return rate[size_t(k)]; }
};

// The errors, bits and exactness findings of one run. Index [0] is the scalar kernel, [1] the SIMD one.
struct KdaResult {
    kda::Shape shape;
    int tokens = 0, chunk = 0;
    // fp32 runs against the fp64 reference, outputs and final state together
    std::array<kda::ErrorStats, 2> recurrent, chunked;
    kda::ErrorStats chunked_vs_recurrent;  // the SIMD kernels against each other
    // The chunk-size sweep (chunked SIMD): relative RMS vs fp64 and max |chunked - recurrent|
    std::vector<int> sweep_chunks;
    std::vector<double> sweep_rel_err, sweep_max_diff;
    uint32_t bits_digest = 0;  // CRC-32C of the fp32 outputs and states
    bool scalar_simd_same_bits = false;
    bool decode_same_bits = false;   // single-token steps against the recurrent prefill
    int split_at = 0;                // tokens of the first call of the split prefill; 0: no split (T = 1)
    kda::ErrorStats split_vs_fp64;   // the two calls' outputs and final state against fp64
    kda::ErrorStats affine_vs_fp64;  // M S0 + B against the fp64 final state
    float gate_min = 0;              // the most negative log-decay the inputs drew
    bool simd = false;               // the build has SIMD kernels (K3_SIMD=1)
    std::string simd_arch;           // their architecture ("avx512bw", "wasm", ...)
    int timed_tokens_scalar = 0, timed_tokens_simd = 0;  // prefix of the tokens the timings run on
    KdaThroughput throughput;
    kda::DeviceLimits device;  // this device's limits, measured in the run
    // The FMA variants (builds with kda::fma_enabled() only): against fp64 like the exact kernels, and
    // the largest difference from the exact SIMD kernels' results.
    bool fma = false;
    kda::ErrorStats fma_recurrent, fma_chunked;
    double fma_max_diff = 0;
    KdaModelRates model;  // the runnable model's prefill and decode (model.preset empty: none)
};

ParamList<KdaParams> kda_params();
void validate_kda(const KdaParams& p, Issues& issues);
kda::Shape kda_shape(const KdaParams& p);
// What the run computes beside the chosen kernels (kda_run.cpp), shared with its estimate: the chunk
// sizes of the sweep, those of them timed, and the prefix of the tokens the timed calls run on.
struct KdaPlan {
    std::vector<int> sweep_chunks, timed_chunks;
    int timed_tokens_scalar = 0, timed_tokens_simd = 0;
};
KdaPlan kda_plan(const KdaParams& p);
// What a run costs before it starts (kda_estimate.cpp).
RunEstimate kda_estimate(const KdaParams& p);
std::unique_ptr<Run> start_kda(const KdaParams& p, const Params& raw);
void report_kda(const KdaResult& m, Report& r);
// The device's limits, each kernel on their roofline, and the FMA variants (kda_roofline.cpp).
void report_kda_roofline(const KdaResult& m, Report& r);
const char* timed_kernel_name(TimedKernel k);  // "decode step (SIMD)", ...
const char* timed_kernel_key(TimedKernel k);   // "decode", ... (the report's keys)
bool is_fma_kernel(TimedKernel k);
bool kernel_was_timed(const KdaResult& m, TimedKernel k);  // the FMA ones only in builds with FMA

}  // namespace k3
