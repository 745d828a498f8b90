#include "core/cache/checkpoint_store.h"

#include <algorithm>
#include <cstring>

namespace k3::serve {

namespace {
struct Geometry {
    size_t rows = 0, cols = 0;  // one layer's recurrent state S as a matrix ([HV][K] rows of V)
    size_t window_bytes = 0;    // the conv windows after it
};
Geometry geometry(const model::Model& m) {
    const PoolModel& pm = m.pool_model();
    Geometry g;
    g.cols = size_t(m.config().head_v);
    g.rows = size_t(pm.recurrent_bytes_per_layer / sizeof(float)) / g.cols;
    g.window_bytes = size_t(pm.state_bytes_per_layer - pm.recurrent_bytes_per_layer);
    return g;
}
}  // namespace

CheckpointStore::CheckpointStore(const model::Model& m, PagePool& pool, StateCodec codec)
    : model_(m), pool_(pool), codec_(codec) {}

CheckpointStore::~CheckpointStore() {
    for (size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].live) free(i + 1);
}

uint64_t CheckpointStore::checkpoint_bytes() const {
    const PoolModel& pm = model_.pool_model();
    if (codec_ == StateCodec::fp32) return pm.state_bytes();
    const Geometry g = geometry(model_);
    return uint64_t(pm.linear_layers) * (encoded_bytes(codec_, g.rows, g.cols) + g.window_bytes);
}

bool CheckpointStore::live(uint64_t h) const {
    return h >= 1 && h <= entries_.size() && entries_[h - 1].live;
}

std::string CheckpointStore::save(const model::Sequence& seq, CheckpointRef* out) {
    const PoolModel& pm = model_.pool_model();
    if (seq.pool().state_owner(seq.state()) != seq.owner())
        return "the sequence has no state slot of its own";
    Entry e;
    e.live = true;
    e.bytes = checkpoint_bytes();
    if (codec_ == StateCodec::fp32) {
        if (AllocStatus st = pool_.alloc_state(kCheckpointOwner, &e.slot); st != AllocStatus::ok)
            return std::string("no state slot for a checkpoint: ") + alloc_status_name(st);
        pool_.copy_state(seq.state(), e.slot);
    } else {
        const Geometry g = geometry(model_);
        const size_t enc = size_t(encoded_bytes(codec_, g.rows, g.cols));
        e.blob.resize(size_t(e.bytes));
        uint8_t* o = e.blob.data();
        for (int l = 0; l < pm.linear_layers; ++l) {
            const std::byte* s = seq.pool().state_data(seq.state(), l);
            encode_state(codec_, reinterpret_cast<const float*>(s), g.rows, g.cols, o);
            std::memcpy(o + enc, s + pm.recurrent_bytes_per_layer, g.window_bytes);
            o += enc + g.window_bytes;
        }
    }
    uint64_t h;
    if (!free_.empty()) {
        h = free_.back();
        free_.pop_back();
        entries_[h - 1] = std::move(e);
    } else {
        entries_.push_back(std::move(e));
        h = entries_.size();
    }
    ++stats_.live;
    ++stats_.saved;
    stats_.bytes += entries_[h - 1].bytes;
    stats_.peak = std::max(stats_.peak, stats_.live);
    stats_.peak_bytes = std::max(stats_.peak_bytes, stats_.bytes);
    *out = CheckpointRef{h, entries_[h - 1].bytes};
    return {};
}

std::string CheckpointStore::load(uint64_t h, model::Sequence& seq) {
    if (!live(h)) return "checkpoint " + std::to_string(h) + " is not live";
    if (seq.pool().state_owner(seq.state()) != seq.owner())
        return "the sequence has no state slot of its own";
    const Entry& e = entries_[h - 1];
    ++stats_.loaded;
    if (e.slot != kNoRef) {
        if (&seq.pool() != &pool_) return "the sequence lives in another pool than the checkpoint";
        pool_.copy_state(e.slot, seq.state());
        return {};
    }
    const PoolModel& pm = model_.pool_model();
    const Geometry g = geometry(model_);
    const size_t enc = size_t(encoded_bytes(codec_, g.rows, g.cols));
    const uint8_t* in = e.blob.data();
    for (int l = 0; l < pm.linear_layers; ++l) {
        std::byte* s = seq.pool().state_data(seq.state(), l);
        decode_state(codec_, in, g.rows, g.cols, reinterpret_cast<float*>(s));
        std::memcpy(s + pm.recurrent_bytes_per_layer, in + enc, g.window_bytes);
        in += enc + g.window_bytes;
    }
    return {};
}

bool CheckpointStore::flip_stored_bit(uint64_t h, uint64_t byte, int bit) {
    if (!live(h) || bit < 0 || bit > 7) return false;
    Entry& e = entries_[h - 1];
    const auto mask = std::byte(1u << bit);
    if (e.slot == kNoRef) {
        if (byte >= e.blob.size()) return false;
        e.blob[size_t(byte)] ^= uint8_t(mask);
        return true;
    }
    const PoolModel& pm = model_.pool_model();
    if (byte >= pm.state_bytes()) return false;
    std::byte* layer = pool_.state_data(e.slot, int(byte / pm.state_bytes_per_layer));
    layer[size_t(byte % pm.state_bytes_per_layer)] ^= mask;
    return true;
}

bool CheckpointStore::free(uint64_t h) {
    if (!live(h)) return false;
    Entry& e = entries_[h - 1];
    if (e.slot != kNoRef) pool_.free_state(e.slot);
    stats_.bytes -= e.bytes;
    --stats_.live;
    ++stats_.freed;
    e = Entry{};
    free_.push_back(h);
    return true;
}

}  // namespace k3::serve
