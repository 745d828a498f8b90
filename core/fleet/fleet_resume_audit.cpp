// FleetSim: the resume audit, the live-migration records, and module 13's falsifier hook.
//
// The audit does not ask the guard what it decided. At every admission it compares the record of
// the state the request resumes on, as whoever computed that state wrote it (into a checkpoint's
// handle, a migration's blob, the host tier's copy), with the KV position the request continues
// from, so that a guard which lets a mismatch through, or a cache which misplaces a checkpoint,
// shows up as an inconsistent resume.
#include <string>

#include "core/fleet/fleet_sim_internal.h"

namespace k3 {

// Also closes the record of a live migration awaiting its resume: where the destination resumed it.
void FleetSim::audit_resume(uint32_t r, const Hits& h, uint64_t resume) {
    Live& L = live_[r];
    if (L.migration_fault >= 0) {
        fault_out_[uint32_t(L.migration_fault)].migrations[L.migration_index].resumed_at = int64_t(resume);
        L.migration_fault = -1;
    }
    if (resume == 0) {  // from the zero state: nothing is reused
        L.audit_mismatched = false;
        return;
    }
    ++audit_.resumes;
    const bool at_kv = h.record.pos == resume && resume <= h.kv;
    if (!at_kv)
        ++audit_.mismatched;
    else if (h.record.mismatched)
        ++audit_.from_mismatched;
    L.audit_mismatched = !at_kv || h.record.mismatched;
    if (L.audit_mismatched && audit_.first.empty())
        audit_.first = "request " + std::to_string(r) + " resumed at position " + std::to_string(resume) +
                       " with KV to " + std::to_string(h.kv) + " on a state computed at " +
                       std::to_string(h.record.pos) + (h.record.mismatched ? " after a mismatch" : "");
}

// Request r leaves its instance with its KV and a state at state_pos in a blob (migrate_running):
// the blob is what the destination gets, and the fault's record keeps what left and what arrived.
void FleetSim::record_migration(uint32_t r, int32_t f, uint64_t state_pos) {
    Live& L = live_[r];
    MigrationRecord m{r, L.pos, L.pos, state_pos};
    const uint64_t pt = c_.page_tokens;
    if (L.pos > 0 && falsify_now(FleetSimFalsify::migration_drops_page)) m.kv_carried = (L.pos - 1) / pt * pt;
    if (state_pos > 0 && falsify_now(FleetSimFalsify::migration_drops_state)) m.state_pos = 0;
    L.carry = true;
    L.carry_kv = m.kv_carried;
    L.carry_state = m.state_pos;
    L.carry_record = {m.state_pos, L.audit_mismatched};
    if (f < 0) return;
    FaultOutcome& fo = fault_out_[uint32_t(f)];
    if (falsify_now(FleetSimFalsify::migration_lost_counter)) ++fo.lost_tokens;
    L.migration_fault = f;
    L.migration_index = uint32_t(fo.migrations.size());
    fo.migrations.push_back(m);
}

}  // namespace k3
