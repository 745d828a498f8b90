#!/usr/bin/env python3
"""Golden vectors of the KDA recurrence with Kimi K3's bounded gate, computed in fp64 (pure Python 3).

The project's own generator (not FLA's): the format is that of ../kda/README.md plus the gate's
inputs, see README.md here. Every input is drawn in double, rounded to float32 and written; the
expected outputs are computed in double from the float32 inputs and rounded to float32 when written.

    python3 make_golden.py [OUTDIR]     (default: the folder of this script)
"""

import math
import os
import random
import struct
import sys

LOWER_BOUND = -5.0  # Kimi K3's linear_attn_config.gate_lower_bound (reference/kimi_k3.md §1.2)

# name, B, T, H, HV, K, V, initial_state, seed
CASES = [
    ("t1_k16_v16", 1, 1, 1, 1, 16, 16, 0, 101),
    ("t37_k32_v32_h2_grouped_b2", 2, 37, 2, 4, 32, 32, 0, 102),
    ("t64_k64_v64_init", 1, 64, 2, 2, 64, 64, 1, 103),
    ("t130_k32_v64", 1, 130, 2, 2, 32, 64, 0, 104),
]


def f32(x):
    """x rounded to the nearest float32 (round half to even), as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def gate(z, dt_bias, a_log, lower_bound):
    """g = lower_bound * sigmoid(exp(A_log) * (z + dt_bias)), fp64."""
    return lower_bound * sigmoid(math.exp(a_log) * (z + dt_bias))


def l2norm(row):
    n = math.sqrt(sum(x * x for x in row))
    return [x / n for x in row]


def write_f32(path, values):
    with open(path, "wb") as f:
        f.write(struct.pack("<%df" % len(values), *values))


def make_inputs(rng, B, T, H, HV, K, V, init):
    x = {}
    x["q"] = [f32(e) for _ in range(B * T * H) for e in l2norm([rng.gauss(0, 1) for _ in range(K)])]
    x["k"] = [f32(e) for _ in range(B * T * H) for e in l2norm([rng.gauss(0, 1) for _ in range(K)])]
    x["v"] = [f32(rng.gauss(0, 1)) for _ in range(B * T * HV * V)]
    x["beta"] = [f32(sigmoid(rng.gauss(0, 1))) for _ in range(B * T * HV)]
    # Gate inputs: A_log = log U(1, 16) (the model's init), z ~ N(0, 1), dt_bias ~ U(-1.5, 0.5), so the
    # argument exp(A_log) (z + dt_bias) spans the sigmoid's whole range and g covers (-5, 0).
    x["A_log"] = [f32(math.log(rng.uniform(1.0, 16.0))) for _ in range(HV)]
    x["dt_bias"] = [f32(rng.uniform(-1.5, 0.5)) for _ in range(HV * K)]
    x["z"] = [f32(rng.gauss(0, 1)) for _ in range(B * T * HV * K)]
    if init:
        x["h0"] = [f32(0.5 * rng.gauss(0, 1)) for _ in range(B * HV * K * V)]
    return x


def run(x, B, T, H, HV, K, V, init, scale):
    """The recurrence of ../kda/README.md in double; returns g, o, ht (doubles)."""
    grp = HV // H
    g_all, o_all, ht_all = [], [], []
    for b in range(B):
        for t in range(T):
            for h in range(HV):
                for i in range(K):
                    z = x["z"][((b * T + t) * HV + h) * K + i]
                    g_all.append(gate(z, x["dt_bias"][h * K + i], x["A_log"][h], LOWER_BOUND))
        states = []
        for h in range(HV):
            base = (b * HV + h) * K * V
            states.append([[x["h0"][base + i * V + j] if init else 0.0 for j in range(V)] for i in range(K)])
        outs = [[None] * HV for _ in range(T)]
        for t in range(T):
            for h in range(HV):
                S = states[h]
                qo = ((b * T + t) * H + h // grp) * K
                q, k = x["q"][qo:qo + K], x["k"][qo:qo + K]
                vo = ((b * T + t) * HV + h) * V
                v = x["v"][vo:vo + V]
                beta = x["beta"][(b * T + t) * HV + h]
                go = ((b * T + t) * HV + h) * K
                for i in range(K):
                    a = math.exp(g_all[go + i])
                    S[i] = [s * a for s in S[i]]
                p = [sum(k[i] * S[i][j] for i in range(K)) for j in range(V)]
                u = [beta * (v[j] - p[j]) for j in range(V)]
                for i in range(K):
                    S[i] = [S[i][j] + k[i] * u[j] for j in range(V)]
                outs[t][h] = [sum(scale * q[i] * S[i][j] for i in range(K)) for j in range(V)]
        for t in range(T):
            for h in range(HV):
                o_all.extend(outs[t][h])
        for h in range(HV):
            for i in range(K):
                ht_all.extend(states[h][i])
    return g_all, o_all, ht_all


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    for name, B, T, H, HV, K, V, init, seed in CASES:
        rng = random.Random(seed)
        x = make_inputs(rng, B, T, H, HV, K, V, init)
        scale = f32(K ** -0.5)
        g, o, ht = run(x, B, T, H, HV, K, V, init, scale)
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "meta.txt"), "w") as f:
            for key, val in (("B", B), ("T", T), ("H", H), ("HV", HV), ("K", K), ("V", V)):
                f.write("%s %d\n" % (key, val))
            f.write("scale %r\n" % scale)
            f.write("initial_state %d\nseed %d\ngate_lower_bound %r\n" % (init, seed, LOWER_BOUND))
        for key in ("q", "k", "v", "beta", "z", "A_log", "dt_bias") + (("h0",) if init else ()):
            write_f32(os.path.join(d, key + ".f32"), x[key])
        write_f32(os.path.join(d, "g.f32"), g)
        write_f32(os.path.join(d, "o.f32"), o)
        write_f32(os.path.join(d, "ht.f32"), ht)
        print("%s: g in [%.4f, %.4f], max |o| %.4f, max |ht| %.4f" %
              (name, min(g), max(g), max(abs(e) for e in o), max(abs(e) for e in ht)))


if __name__ == "__main__":
    main()
