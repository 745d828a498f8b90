// The radix tree's child lookup: 64-bit keys (already well mixed) to node ids, open addressing with
// linear probing. Never iterated, so its layout cannot affect results.
#pragma once

#include <cstdint>
#include <vector>

namespace k3 {

class ChildIndex {
  public:
    static constexpr uint32_t kEmpty = UINT32_MAX, kDeleted = UINT32_MAX - 1;

    // The value stored for key, or nullptr.
    uint32_t* find(uint64_t key) {
        if (slots_.empty()) return nullptr;
        for (size_t i = key & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.val == kEmpty) return nullptr;
            if (s.val != kDeleted && s.key == key) return &s.val;
        }
    }
    const uint32_t* find(uint64_t key) const { return const_cast<ChildIndex*>(this)->find(key); }
    // Inserts key -> v if absent; returns the stored value's slot and whether it was inserted.
    std::pair<uint32_t*, bool> try_emplace(uint64_t key, uint32_t v) {
        if (uint32_t* f = find(key)) return {f, false};
        if ((used_ + 1) * 2 > slots_.size()) grow();
        for (size_t i = key & mask_;; i = (i + 1) & mask_) {
            Slot& s = slots_[i];
            if (s.val == kEmpty || s.val == kDeleted) {
                used_ += s.val == kEmpty;
                ++live_;
                s = {key, v};
                return {&s.val, true};
            }
        }
    }
    void erase(uint32_t* val) {
        *val = kDeleted;
        --live_;
    }
    size_t size() const { return live_; }

  private:
    struct Slot {
        uint64_t key = 0;
        uint32_t val = kEmpty;
    };
    void grow() {
        size_t cap = 16;
        while (cap < (live_ + 1) * 4) cap *= 2;
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(cap, Slot{});
        mask_ = cap - 1;
        used_ = live_ = 0;
        for (const Slot& s : old)
            if (s.val != kEmpty && s.val != kDeleted) try_emplace(s.key, s.val);
    }
    std::vector<Slot> slots_;
    size_t mask_ = 0, used_ = 0, live_ = 0;
};

}  // namespace k3
