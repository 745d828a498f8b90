// Portable seeded random numbers: xoshiro256** seeded through SplitMix64, and distributions built
// on our own arithmetic. The standard library's distributions differ between libstdc++ (native)
// and libc++ (Emscripten); these give the same numbers everywhere for the same seed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3 {

// SplitMix64: a good 64-bit mixer; also used to derive seeds and pseudo-token ids from keys.
inline uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
// Stateless hash of a value (one SplitMix64 round).
inline uint64_t mix64(uint64_t x) { return splitmix64(x); }

class Rng {
  public:
    explicit Rng(uint64_t seed = 0x6b33u);
    uint64_t next();                       // 64 uniform bits
    double uniform();                      // [0, 1), 53 bits
    float uniform_f();                     // [0, 1), 24 bits
    double uniform(double lo, double hi);  // [lo, hi)
    uint64_t below(uint64_t n);            // uniform integer in [0, n), n > 0, unbiased
    double normal();                       // N(0, 1), Marsaglia polar method
    double normal(double mean, double sd) { return mean + sd * normal(); }
    double exponential(double rate);  // mean 1/rate
    double lognormal(double mu, double sigma);
    bool bernoulli(double p) { return uniform() < p; }
    // Fill with N(0, sd) floats or U(lo, hi) floats.
    void fill_normal(float* x, size_t n, float sd = 1.0f);
    void fill_uniform(float* x, size_t n, float lo, float hi);
    // A child generator whose stream is independent of how much of this one is consumed later.
    Rng fork(uint64_t stream);

    // The whole generator state as plain values (serialising a sampler with a paused request:
    // restoring it continues the same stream, including a cached second normal deviate).
    struct State {
        uint64_t s[4];
        double spare;
        bool has_spare;
    };
    State state() const { return {{s_[0], s_[1], s_[2], s_[3]}, spare_, has_spare_}; }
    static Rng from_state(const State& st) {
        Rng r;
        for (int i = 0; i < 4; ++i) r.s_[i] = st.s[i];
        r.spare_ = st.spare;
        r.has_spare_ = st.has_spare;
        return r;
    }

  private:
    uint64_t s_[4];
    double spare_ = 0.0;
    bool has_spare_ = false;
};

}  // namespace k3
