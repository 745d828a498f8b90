#include "core/modules/boundaries/boundaries_ledger.h"
#include "core/model/accounting.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/cp/context_parallel.h"
#include "core/cp/variants.h"
#include "core/cp/work.h"
#include "core/fleet/cost_model.h"
#include "core/lifecycle/blob.h"
#include "core/spec/storage.h"

namespace k3 {

using lifecycle::BlobLayout;

namespace {

constexpr int kCpChunk = 64;  // the prefill chunk of module 9's work counts

// Bytes of the blob the writer produces, or NaN when it refuses (the checks then fail).
double written_size(const BlobLayout& l, uint32_t contents, uint64_t position, uint64_t ids) {
    lifecycle::RequestState r;
    r.layout = l;
    r.contents = contents;
    r.position = r.consumed = position;
    if (contents & lifecycle::kBlobRecurrent)
        r.state.resize(size_t((l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer()) * l.linear_layers));
    if (contents & lifecycle::kBlobKv)
        r.kv.resize(size_t(position * l.kv_bytes_per_token_per_layer() * l.attention_layers));
    if (contents & lifecycle::kBlobTokens) r.tokens.assign(size_t(ids), 0);
    std::vector<std::byte> out;
    return write_blob(r, &out).empty() ? double(out.size()) : NAN;
}

// The uncalibrated roofline of one device (the fleet's cost before issue 16, at the module's efficiencies);
// without the weight stream for work folded into batches that stream the weights anyway.
RooflineCostModel one_device(const BoundaryInputs& in, bool weights) {
    ModelConfig c = in.model;
    if (!weights) c.total_params = 0;
    return RooflineCostModel(c, in.hardware, 1, in.eff);
}

// Seconds of a prefill chunk of `tokens` after `cached` ones, alone in its iteration.
double prefill_s(const RooflineCostModel& m, double cached, double tokens) {
    if (tokens <= 0) return 0;
    IterationWork w;
    w.add_chunk(cached, tokens);
    return m.seconds(w);
}

// One decode step of the batch at the chosen context: how long rollback storage is held.
double decode_step_s(const BoundaryInputs& in) {
    IterationWork w;
    for (double i = 0; i < in.batch; ++i) w.add_decode(in.context);
    return one_device(in, true).seconds(w);
}

double rent(double bytes, double seconds, const Hardware& hw) { return bytes * seconds / hw.mem_bytes; }

// Tokens a verification of N keeps, from where the first draft is rejected: the k-th token is the
// last kept with probability a^(k-1) (1 - a), all N with a^(N-1).
double mean_kept(int draft_len, double accept) {
    double mean = 0, reached = 1;  // reached: the first k - 1 drafts accepted
    for (int k = 1; k < draft_len; ++k, reached *= accept) mean += k * reached * (1 - accept);
    return mean + draft_len * reached;
}

}  // namespace

BlobSizes measure_blob_sizes(const ModelConfig& c) {
    using namespace lifecycle;
    const BlobLayout l = BlobLayout::of(c);
    BlobLayout one = l, two = l;  // the state sections of one and of two linear layers
    one.linear_layers = 1;
    two.linear_layers = 2;
    const uint32_t kv = kBlobKv | kBlobTokens | kBlobSampler, ids = kBlobTokens | kBlobSampler;
    BlobSizes b;
    const double first = written_size(one, kBlobAll, 0, 0);
    b.everything = first + (double(l.linear_layers) - 1) * (written_size(two, kBlobAll, 0, 0) - first);
    b.kv_and_ids = written_size(l, kv, 0, 0);
    b.ids_only = written_size(l, ids, 0, 0);
    b.per_position = written_size(l, kv, 1, 1) - written_size(l, kv, 0, 1);
    b.per_id = written_size(l, ids, 0, 1) - b.ids_only;
    return b;
}

LedgerValue prefix_ledger(const BoundaryInputs& in, double prefix_tokens, double reuse) {
    const BlobLayout l = BlobLayout::of(in.model);
    // The state bytes are the accounting's (module 2 recounts them tensor by tensor).
    const double state = double(account_memory(in.model).state_bytes);
    const double row = double(l.kv_bytes_per_token_per_layer()) * l.attention_layers;
    // A hit skips the prefill of the prefix inside a running batch.
    const double saved = prefill_s(one_device(in, false), 0, prefix_tokens);
    // The checkpoint is a copy of the state (read and written once); the entry holds it and the KV rows.
    const double write = work_cost(0, 2 * state, in.hardware, in.eff).seconds;
    const double held = rent(state + prefix_tokens * row, in.residence_s, in.hardware);
    const double per_token = 1e6 / prefix_tokens;
    return {(reuse * saved - write - held) * per_token, (reuse * saved + write + held) * per_token};
}

namespace {

// Map 3 with RecoverSSM, n draft tokens: vLLM's pages sized from the blob layout. A page holds the
// recurrent state and a conv window of W - 1 + n columns; RecoverSSM's page adds, for each of the 1 + n
// positions and each value head, the correction (V fp32) and the key and raw gate (2 K in the conv
// window's dtype). Snapshots: the recurrent state written per position (the conv window rolls back by
// an offset), 1 + n pages held (2 + n in align mode);
// RecoverSSM: a record written per position, the commit reads the state and the kept records and
// writes the state; 1 page held (2 in align mode).
LedgerValue recoverssm_ledger(const BoundaryInputs& in, int n, double accept) {
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    const BlobLayout l = BlobLayout::of(c);
    const double layers = l.linear_layers, T = 1.0 + n, act = double(dtype_bytes(l.conv_dtype));
    const double S = double(l.recurrent_bytes_per_layer());
    const double page = S + double(l.conv_bytes_per_layer()) + n * double(l.conv_channels()) * act;
    const double record = double(l.v_heads) * (4.0 * l.head_v + 2.0 * l.head_k * act);
    const double held_snap = (in.align ? 2.0 + n : 1.0 + n) * page;
    const double held_rec = (in.align ? 2.0 : 1.0) * (page + T * record);
    const double kept = mean_kept(n + 1, accept), step_s = decode_step_s(in);
    const double core_flops = flops_per_token(c, 0) - 2 * c.active_params;
    const double snapshots =
        work_cost(0, T * S * layers, hw, in.eff).seconds + rent(held_snap * layers, step_s, hw);
    const double replay = work_cost(0, T * record * layers, hw, in.eff).seconds +
                          work_cost(kept * core_flops, (2 * S + kept * record) * layers, hw, in.eff).seconds +
                          rent(held_rec * layers, step_s, hw);
    return {(snapshots - replay) * 1e6 / kept, (snapshots + replay) * 1e6 / kept};
}

}  // namespace

LedgerValue replay_ledger(const BoundaryInputs& in, int draft_len, double accept) {
    if (in.variant == spec::RecordVariant::recoverssm) return recoverssm_ledger(in, draft_len, accept);
    const ModelConfig& c = in.model;
    const Hardware& hw = in.hardware;
    const BlobLayout l = BlobLayout::of(c);
    const double layers = l.linear_layers, N = draft_len;
    const double state = double(l.recurrent_bytes_per_layer() + l.conv_bytes_per_layer());
    // A minimal exact record: one raw row of each conv window (q, k and v) in the window's dtype, and
    // the gates g and beta in fp32.
    const double record = double(l.conv_channels() * dtype_bytes(l.conv_dtype)) +
                          4.0 * double(spec::gate_elements(c) + l.v_heads);
    const double kept = mean_kept(draft_len, accept), step_s = decode_step_s(in);
    // Replaying a token is the recurrent core of every linear layer: a token's FLOPs at context 0
    // without its projections and MLP.
    const double core_flops = flops_per_token(c, 0) - 2 * c.active_params;
    // Snapshots: a state written after each token, N + 1 held. Replay: N records written; on commit the
    // state read, the kept records replayed, the state written back; one state and N records held.
    const double snapshots =
        work_cost(0, N * state * layers, hw, in.eff).seconds + rent((N + 1) * state * layers, step_s, hw);
    const double replay =
        work_cost(0, N * record * layers, hw, in.eff).seconds +
        work_cost(kept * core_flops, (2 * state + kept * record) * layers, hw, in.eff).seconds +
        rent((state + N * record) * layers, step_s, hw);
    return {(snapshots - replay) * 1e6 / kept, (snapshots + replay) * 1e6 / kept};
}

LedgerValue cp_ledger(const BoundaryInputs& in, double tokens_per_rank, int ranks) {
    const ModelConfig& c = in.model;
    const RooflineCostModel rank = one_device(in, true);  // every rank streams all the weights
    const double n = tokens_per_rank, T = n * ranks, layers = c.n_linear();
    const double single = prefill_s(rank, 0, T);
    double last = prefill_s(rank, T - n, n);  // its causal attention sees every earlier token
    if (ranks > 1) {
        const kda::Shape s{c.lin_heads, c.lin_v_heads, c.head_k, c.head_v};
        const cp::CpCost k = cp::cp_cost(cp::Variant::kda, s, std::vector<int>(size_t(ranks), int(n)),
                                         kCpChunk, cp::Combiner::scan, cp::Fixup::rerun);
        // The scan's work beyond its own slice, as module 9 counts it (two FLOPs a multiply-add).
        const double extra = k.critical() - cp::run_work(cp::Variant::kda, s, int(n), kCpChunk);
        last += work_cost(2 * extra * layers, 0, in.hardware, in.eff).seconds;
        // Rank 0 sends a composite map in each of the scan's ceil(log2 R) rounds, every linear layer;
        // the attention KV of the earlier tokens reaches the last rank. Neither overlaps compute.
        const BlobLayout l = BlobLayout::of(c);
        const double kv = (T - n) * double(l.kv_bytes_per_token_per_layer()) * l.attention_layers;
        const double maps = cp::ceil_log2(ranks) * cp::map_bytes(cp::Variant::kda, s) * layers;
        last += (maps + kv) / in.cp_link.bytes_per_s;
    }
    return {single / last, single / last};
}

LedgerValue migration_ledger(const BoundaryInputs& in, const BlobSizes& b, double bandwidth, double context) {
    const double P = std::floor(context), ids = P + 1;      // the pending token travels too
    const RooflineCostModel batch = one_device(in, false);  // the destination recomputes inside its batches
    const double recompute = b.ids(ids) / bandwidth + prefill_s(batch, 0, P);
    double move = b.all(P, ids) / bandwidth;
    const double d = in.checkpoint_distance;
    if (in.dest_checkpoint && d < P)
        move = std::min(move, b.kv(P - d, ids) / bandwidth + prefill_s(batch, P - d, d));
    return {std::log10(recompute / move), 1};
}

// Moving only the KV from a checkpoint d tokens back wins while recomputing those d tokens in a running
// batch, max(F(d) / compute, M(d) / memory), takes no longer than sending the bytes it saves, G(d):
// F(d) = d (a + c (P - d / 2)) for flops_per_token(x) = a + c x (the d tokens follow P - d cached ones),
// M(d) = d x KV row + the state read and written, G(d) = (state sections + d KV rows) / link.
double move_kv_break_even_closed_form(const BoundaryInputs& in, const BlobSizes& b) {
    const Hardware& hw = in.hardware;
    const double P = std::floor(in.context), link = in.link.bytes_per_s;
    const double compute = hw.peak_flops * in.eff.compute, memory = hw.mem_bytes_per_s * in.eff.memory;
    const double a = flops_per_token(in.model, 0), c = flops_per_token(in.model, 1) - a;
    const double state = double(account_memory(in.model).state_bytes), row = b.per_position;
    const double saved = b.everything - b.kv_and_ids;  // the state sections the move leaves behind
    // Compute-bound: it loses where alpha d - beta d^2 - gamma > 0, from the smaller root on.
    const double alpha = (a + c * P) / compute - row / link, beta = c / (2 * compute), gamma = saved / link;
    double loses_from = INFINITY;
    const double disc = alpha * alpha - 4 * beta * gamma;
    if (alpha > 0 && disc >= 0) loses_from = 2 * gamma / (alpha + std::sqrt(disc));
    // Memory-bound: it loses where mu d + nu > 0 (a link faster than memory makes mu positive).
    const double mu = row / memory - row / link, nu = 2 * state / memory - saved / link;
    if (mu > 0) loses_from = std::min(loses_from, std::max(-nu / mu, 0.0));
    if (mu + nu > 0) return 0;  // it already loses one token back
    return std::min(P, std::floor(loses_from));
}

LedgerAgreement agree(const HeatMap& h, const std::function<LedgerValue(double x, double y)>& count,
                      double tolerance) {
    LedgerAgreement a;
    a.tolerance = tolerance;
    for (size_t iy = 0; iy < h.y.size(); ++iy)
        for (size_t ix = 0; ix < h.x.size(); ++ix) {
            const double z = h.z[iy * h.x.size() + ix];
            if (std::isnan(z)) continue;  // no cell
            const LedgerValue v = count(h.x[ix], h.y[iy]);
            const double off = std::fabs(z - v.value) / v.scale;
            ++a.cells;
            a.mismatches += !(off <= tolerance);
            a.worst = std::isnan(off) ? INFINITY : std::max(a.worst, off);
        }
    return a;
}

}  // namespace k3
