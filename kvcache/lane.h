// Internal to kvcache/: the bookkeeping of one layer and the storage of one
// lane, as the cache's parts share them (ring_storage, heavy_hitters,
// attention, eviction, key_codec). Not part of the public API.
#ifndef KVEDGE_KVCACHE_LANE_H_
#define KVEDGE_KVCACHE_LANE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kvcache/kv_cache.h"
#include "kvcache/kv_cache_plan.h"
#include "kvcache/rope_table.h"

namespace kvedge::kv {

inline constexpr int G = kKvBlockTokens;

// Bookkeeping shared by every lane of a layer: all lanes hold the same
// number of tokens in the same slots (h2o picks different tokens per lane,
// recorded per lane in the heavy-id region). The saved fields are the
// cursor's (seen, evicted, sinks_filled, heavy_count ≤ plan.heavy, ring_head:
// ring slot of the oldest ring block, ring_count, first_valid: first live
// slot of the oldest ring block, tail_count, tail_start: stream index of tail
// slot 0); ring_start follows from them (Restore).
struct LayerState : KvCache::LayerCursor {
  std::vector<int64_t> ring_start;  // [ring_blocks] stream index of slot 0

  int RingTokens() const { return ring_count * G - first_valid; }
  int Held() const { return sinks_filled + heavy_count + RingTokens() + tail_count; }
  int HeavyBlocksUsed() const { return (heavy_count + G - 1) / G; }
};

// A region of a thread's scratch (KvCachePlan::scratch) as an array of T.
template <typename T>
T* ScratchAt(uint8_t* scratch, const Region& r) {
  return reinterpret_cast<T*>(scratch + r.offset);
}

// Ring slot (0..ring_blocks) of the k-th oldest ring block.
inline int RingSlot(const KvCachePlan& p, const LayerState& st, int k) { return (st.ring_head + k) % p.ring_blocks; }
// Storage index of a ring slot: heavy blocks come first in block storage.
inline int RingStorage(const KvCachePlan& p, int ring_slot) { return p.heavy_blocks + ring_slot; }

// One lane's regions (plan.lane). Block storage index s: heavy blocks
// 0..heavy_blocks−1, then ring slots. A view: the arena outlives it.
struct LaneView {
  const KvCachePlan* plan = nullptr;
  uint8_t* base = nullptr;

  float* sink_keys() const { return reinterpret_cast<float*>(base + plan->lane.sink_keys.offset); }      // [S][D]
  float* sink_values() const { return reinterpret_cast<float*>(base + plan->lane.sink_values.offset); }  // [S][D]
  uint8_t* key_block(int storage) const { return base + plan->lane.block_keys.offset + storage * plan->key_block_bytes; }
  uint8_t* value_block(int storage) const {
    return base + plan->lane.block_values.offset + storage * plan->value_block_bytes;
  }
  uint8_t* tail_keys() const { return base + plan->lane.tail_keys.offset; }
  uint8_t* tail_values() const { return base + plan->lane.tail_values.offset; }
  // h2o: [heavy_blocks + ring_blocks + 1][G] f32, by storage index, the tail's last.
  float* scores() const { return reinterpret_cast<float*>(base + plan->lane.scores.offset); }
  float* tail_scores() const { return scores() + static_cast<size_t>(plan->heavy_blocks + plan->ring_blocks) * G; }
  // h2o: [heavy] int64 stream index of each heavy slot.
  int64_t* heavy_ids() const { return reinterpret_cast<int64_t*>(base + plan->lane.heavy_ids.offset); }
};

// What the parts read of a cache: its plan, RoPE table and lanes.
struct CacheView {
  const KvCachePlan* plan = nullptr;
  const RopeTable* rope = nullptr;
  uint8_t* lanes = nullptr;  // [layer][kv head] lanes of plan->lane_bytes

  LaneView Lane(int layer, int kv_head) const {
    return LaneView{plan, lanes + (static_cast<size_t>(layer) * plan->shape.n_kv_heads + kv_head) * plan->lane_bytes};
  }
};

// Whether keys and queries enter the cache in another channel order or scale
// (NEOX pairs, rope_mscale); then ToCacheOrder converts them.
inline bool Reorders(const KvShape& s) {
  return (s.rope_style == RopeStyle::kNeox && s.rope_dim > 2) || s.rope_mscale != 1.0f;
}

// out = x with NEOX pairs (i, i + rd/2) moved to (2i, 2i + 1) and the rotated
// channels scaled by rope_mscale; channels ≥ rope_dim copied. [head_dim] f32.
inline void ToCacheOrder(const KvShape& s, const float* x, float* out) {
  const int d = s.head_dim;
  const int half = s.rope_dim / 2;
  const float m = s.rope_mscale;
  if (s.rope_style == RopeStyle::kNeox) {
    for (int i = 0; i < half; ++i) {
      out[2 * i] = m * x[i];
      out[2 * i + 1] = m * x[half + i];
    }
  } else {
    for (int i = 0; i < 2 * half; ++i) out[i] = m * x[i];
  }
  for (int i = 2 * half; i < d; ++i) out[i] = x[i];
}

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_LANE_H_
