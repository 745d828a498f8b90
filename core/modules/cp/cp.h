// Module 9 `cp`: context parallelism and the non-additive state. A prompt split over R simulated ranks
// through one KDA layer of the runnable geometry (projections, conv with and without the halo, core,
// output), combined by a naive sum (wrong), serial state passing and an affine scan; the same for plain
// linear attention and a diagonal gate on the same inputs; errors against one rank, the naive sum's
// error against the closed form of reference/kda.md §4.3, bytes exchanged and critical-path work.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/cp/context_parallel.h"
#include "core/experiments/module.h"
#include "core/model/config.h"
#include "core/model/roofline.h"

namespace k3 {

enum class CpSplit : uint8_t { uneven, even };
enum class CpStart : uint8_t { zero, prefix };  // the layer state before the prompt

// Deliberate corruptions that the module's checks must catch (k3cli audit-checks).
enum class CpFalsify : uint8_t {
    none,
    fp64_state_bit,      // one exponent bit of the fp64 single-rank final state is flipped
    map_b_bit,           // one entry of rank 0's map B is doubled or halved before the combination
    zero_start_output,   // one zero-start output of the last rank (the linear fix-up's) is doubled or halved
    kda_as_linear,       // the KDA rows run plain linear attention (M = I)
    halo_row,            // rank 1's halo loses its newest raw row
    no_halo_reads_halo,  // the run without the halo reads the previous rank's rows anyway
    map_formula,         // the map size is counted with a diagonal M (K floats per head, not K x K)
};

struct CpParams {
    int tokens = 500;  // T
    int ranks = 7;     // R
    CpSplit split = CpSplit::uneven;
    int chunk = 64;  // C of the chunked kernel on every rank
    CpStart start = CpStart::zero;
    uint64_t seed = 1;
    ModelPreset preset = ModelPreset::kimi_k3;  // for the figures at scale
    int64_t context = 131072;                   // tokens split over the ranks at scale
    Link link = *link_preset("nvlink4");
    CpFalsify falsify = CpFalsify::none;  // not a declared parameter
};

// Relative RMS against the same variant on one rank.
struct CpError {
    double outputs = 0, state = 0;
};

// The naive sum's final-state error against the closed form (reference/kda.md §4.3), one variant.
struct CpClosedForm {
    double naive_error_norm = 0;  // ||S_true - naive||, fp32 runs
    double closed_norm = 0;       // ||closed form||, on the ranks' fp32 maps
    double gap = 0;               // relative difference of the two
    double naive_rel = 0;         // naive error relative to ||S_true||
    double identity_diff = 0;     // fp64: max |(S_true - naive) - closed form|
    double identity_scale = 0;    // fp64: max |S_true|
};

// The layer with and without the short-conv halo, against one rank.
struct CpHalo {
    double out_with = 0, out_without = 0;      // layer outputs, relative RMS
    double state_with = 0, state_without = 0;  // final S, relative RMS
    bool core_inputs_same = false;             // with the halo: q, k, v, g, beta bit for bit
    bool windows_same = false;                 // with the halo: the final conv windows bit for bit
    int wrong_tokens = 0;                      // without: tokens whose conv input differs
    int expected_wrong = 0;                    // tokens whose conv window reaches before their slice
    double halo_bytes = 0;
    int halo_max_ranks = 0;
};

struct CpRank {
    int first_token = 0, tokens = 0;
    double map_work = 0, fixup_work = 0;  // KDA, rerun fix-up (MAC)
};

// The preset's scale: formulas, not runs.
struct CpAtScale {
    ModelConfig model;
    kda::Shape shape;
    double map_bytes = 0;       // one rank's KDA map per layer
    double held_map_bytes = 0;  // a one-token KDA map at this shape, as local_maps holds it (M and B)
    struct Row {                // per variant
        double map_bytes = 0, m_bytes = 0, send_seconds = 0, compose = 0, apply = 0;
    };
    Row rows[3];
    struct Point {  // speed-up by work over one rank, even slices of the context
        int ranks = 0;
        double scan = 0, serial = 0, linear_scan = 0;
    };
    std::vector<Point> sweep;
};

// What a run found: the typed result the report is built from.
struct CpOutcome {
    std::string failed;  // the layer could not be made (cannot happen within the declared ranges)
    int tokens = 0, ranks = 0, chunk = 0;
    bool even_fallback = false;  // uneven slices asked for, too few tokens
    cp::Bounds bounds;
    kda::Shape shape;
    CpError errors[3][3][2];             // [variant][combiner][fix-up], in kVariants / kCombiners order
    double fixups_disagree[3][3] = {};   // the two fix-ups' largest relative difference
    CpClosedForm closed_form[3];         // per variant
    cp::CpCost costs[3][3];              // this layer, rerun fix-up
    double map_bytes = 0;                // KDA map per rank per round, this layer
    std::vector<double> held_map_bytes;  // every rank's KDA map as local_maps holds it (M and B)
    // KDA, per combiner: the bytes the ranks sent in step 2, counted from the buffers passed
    double sent_busiest[3] = {}, sent_total[3] = {};
    CpHalo halo;
    std::vector<double> token_error_naive, token_error_scan, token_error_no_halo;  // per output row
    std::vector<CpRank> rank_rows;
    CpAtScale at_scale;
    double single_ms = 0, cp_ms = 0;  // wall clock (the report's timing)
};

ParamList<CpParams> cp_params();
void validate_cp(const CpParams& p, Issues& issues);
// Uneven slices with a 2-token rank need T >= 4 R + 2; below that the run uses even slices.
bool cp_even_fallback(const CpParams& p);
std::unique_ptr<Run> start_cp(const CpParams& p, const Params& raw);
CpAtScale cp_at_scale(const CpParams& p);
void report_cp(const CpParams& p, const CpOutcome& m, Report& r);

}  // namespace k3
