#include "core/base/rng.h"

#include <cmath>

#include "core/base/fmath.h"

namespace k3 {

Rng::Rng(uint64_t seed) {
    uint64_t st = seed;
    for (auto& s : s_) s = splitmix64(st);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Rng::next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
}

double Rng::uniform() { return double(next() >> 11) * 0x1.0p-53; }
float Rng::uniform_f() { return float(next() >> 40) * 0x1.0p-24f; }
double Rng::uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }

uint64_t Rng::below(uint64_t n) {
    // Rejection on the top of the range keeps it unbiased and avoids 128-bit arithmetic.
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
}

double Rng::normal() {
    if (has_spare_) {
        has_spare_ = false;
        return spare_;
    }
    double u, v, s;
    do {
        u = 2.0 * uniform() - 1.0;
        v = 2.0 * uniform() - 1.0;
        s = u * u + v * v;
    } while (s >= 1.0 || s == 0.0);
    const double f = std::sqrt(-2.0 * log_f64(s) / s);  // sqrt is correctly rounded everywhere
    spare_ = v * f;
    has_spare_ = true;
    return u * f;
}

double Rng::exponential(double rate) { return -log1p_f64(-uniform()) / rate; }

double Rng::lognormal(double mu, double sigma) { return exp_f64(mu + sigma * normal()); }

void Rng::fill_normal(float* x, size_t n, float sd) {
    for (size_t i = 0; i < n; ++i) x[i] = float(normal()) * sd;
}

void Rng::fill_uniform(float* x, size_t n, float lo, float hi) {
    for (size_t i = 0; i < n; ++i) x[i] = lo + (hi - lo) * uniform_f();
}

Rng Rng::fork(uint64_t stream) {
    uint64_t st = next() ^ mix64(stream + 0x51ed27u);
    return Rng(splitmix64(st));
}

}  // namespace k3
