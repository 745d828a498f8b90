// What each KDA kernel does per head-token, for the roofline of device.h: arithmetic in flop (a multiply
// and an add are one each; exp is left out, about 2 % of the decode step at K = V = 128) and the bytes
// of state it moves. Inputs and outputs (3 K + 2 V floats per head-token) are left out too: they are
// read once from L1-sized rows and are under 3 % of the state traffic of a decode step.
#pragma once

#include "core/kda/device.h"
#include "core/kda/layout.h"
#include "core/kda/recurrent.h"

namespace k3::kda {

// Multiply-adds of one (chunk of n tokens, value head) unit of the chunked kernel (chunked.h): the pair
// matrices and the forward substitution, the state pass, Aqk D; `map` adds the segment map's pass on M.
double chunk_unit_madds(const Shape& s, int n, bool map = false);

// The decode step (recurrent.h): decay, predict, write and read on K x V elements (7 flop each), the
// update u (2 V), the scaled q (K); the state read and written once (pass 2 meets it in L1).
KernelWork decode_step_work(const Shape& s, MemLevel level);
// The recurrence over many tokens: the decode step's arithmetic; the state moves once per block of
// kRecurrentTokenBlock tokens (and once more to pack it).
KernelWork recurrent_work(const Shape& s, MemLevel level);
// The chunked prefill at chunk size C: 2 flop per multiply-add of chunk_unit_madds, the state moved
// once per chunk.
KernelWork chunked_work(const Shape& s, int C, MemLevel level);

// The same work, fused: its compute limit is the FMA throughput (the `*_fma` kernels).
inline KernelWork fused(KernelWork w) {
    w.fma = true;
    return w;
}

}  // namespace k3::kda
