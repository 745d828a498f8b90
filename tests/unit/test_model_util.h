// Helpers shared by the runnable-model tests (tests/unit/test_model*.cpp).
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/base/bytes.h"
#include "core/base/rng.h"
#include "core/base/stats.h"
#include "core/model/model.h"

namespace k3::model::test {

// A runnable preset with default options and seed 1, made once per preset (weight generation is the
// slow part, in WebAssembly especially). Tests must not depend on the model's scratch between calls
// (they do not).
inline Model& runnable(std::string_view id) {
    static std::map<std::string, std::unique_ptr<Model>, std::less<>> models;
    std::unique_ptr<Model>& m = models[std::string(id)];
    if (!m) {
        ModelResult r = Model::create(*model_preset(id), 1);
        REQUIRE_MESSAGE(r.model, r.error);
        m = std::move(r.model);
    }
    return *m;
}
inline Model& tiny() { return runnable("tiny"); }

// The presets the exactness tests run on (TEST_CASE_TEMPLATE(name, P, K3_EXACTNESS_PRESETS), then
// runnable(P::id)): Kimi Linear's design (tiny) and Kimi K3's (k3-tiny, the default runnable model:
// bounded gate, full-rank output gate, MLA output gate, SiTU, attention residuals).
struct TinyPreset {
    static constexpr const char* id = "tiny";
};
struct K3TinyPreset {
    static constexpr const char* id = "k3-tiny";
};
#define K3_EXACTNESS_PRESETS k3::model::test::TinyPreset, k3::model::test::K3TinyPreset

inline std::vector<int32_t> random_tokens(int n, uint64_t seed, int vocab) {
    Rng r(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = int32_t(r.below(uint64_t(vocab)));
    return t;
}

// A pool and one sequence in it (the pool outlives the sequence: members are destroyed in reverse).
struct Run {
    std::unique_ptr<PagePool> pool;
    std::unique_ptr<Sequence> seq;
};

inline Run new_run(Model& m, int sequences = 2, uint64_t tokens_each = 1024, uint32_t page_tokens = 16) {
    Run r;
    PoolResult p = make_model_pool(m, sequences, tokens_each, page_tokens);
    REQUIRE_MESSAGE(p.pool, p.error);
    r.pool = std::move(p.pool);
    SequenceResult s = m.new_sequence(*r.pool, 1);
    REQUIRE_MESSAGE(s.seq, s.error);
    r.seq = std::move(s.seq);
    return r;
}

inline std::vector<float> as_floats(const std::vector<std::byte>& b) {
    std::vector<float> f(b.size() / sizeof(float));
    std::memcpy(f.data(), b.data(), f.size() * sizeof(float));
    return f;
}

// Relative RMS difference ||x - ref|| / ||ref|| over [first, first + n) of ref (core/base/stats.h).
template <class X, class R>
double rel_rms(const X& x, const R& ref, size_t first = 0, size_t n = size_t(-1)) {
    if (n == size_t(-1)) n = ref.size() - first;
    return k3::rel_rms(x.data(), ref.data() + first, n);
}

// FNV-1a over raw bytes.
struct Digest {
    uint64_t h = 1469598103934665603ull;
    void add(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    }
    template <class T>
    void add_all(const std::vector<T>& v) {
        add(v.data(), v.size() * sizeof(T));
    }
};

}  // namespace k3::model::test
