// Second counts behind the checks every fleet run reports (fleet_report.h), taken from what the
// simulation logged about each request (the workload, its admissions, its abandoned attempts), not
// from the tallies the iterations keep nor from the radix trees.
#pragma once

#include <cstdint>

#include "core/fleet/fleet_sim.h"

namespace k3 {

// Tokens through the model and tokens generated, by the iterations' ledger and by the requests'
// records: a completed request's last attempt ran from where it resumed to prompt + output - 1 (the
// workload's lengths); its earlier attempts logged what they computed when they ended.
struct WorkRecount {
    uint64_t ledger_forward = 0, recount_forward = 0;  // context tokens computed (prefill + decode)
    uint64_t ledger_output = 0, recount_output = 0;    // output tokens generated
    uint64_t abandoned = 0;                            // of the recount: attempts that did not complete
    bool agree() const { return ledger_forward == recount_forward && ledger_output == recount_output; }
};
WorkRecount recount_work(const FleetSim& s);

// Every admission's hits against the tokens it could have come from: the longest prefix its tokens
// share with a request admitted earlier on the same instance (in the same tenant namespace under
// quotas), or anywhere when it resumed from what it carried along. No tree can hold more.
struct HitRecount {
    uint64_t admissions = 0, unbacked = 0;
    uint64_t claimed_tokens = 0, available_tokens = 0;  // hits claimed, and the bounds, summed
    // The first admission whose hit exceeds its bound.
    uint32_t first_req = 0, first_instance = 0;
    uint64_t first_claimed = 0, first_bound = 0;
};
HitRecount recount_hits(const FleetSim& s);

}  // namespace k3
