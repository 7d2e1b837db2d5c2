// Appending, sealing and window eviction.
#include "kvcache/ring_storage.h"

#include <cstring>

#include "kvcache/key_codec.h"
#include "platform/status.h"
#include "simd/kv_kernels.h"

namespace kvedge::kv {
namespace {

// Writes one token of one lane where st puts it: sink slot or tail slot.
void WriteLaneToken(const CacheView& c, const Eviction& eviction, const LayerState& st, const LaneView& lane,
                    const float* k, const float* v, uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  const int d = p.shape.head_dim;
  const int rd = p.shape.rope_dim;
  float* angles = ScratchAt<float>(scratch, p.scratch.query);  // rotated key, angles
  float* rotated = angles + d;
  if (Reorders(p.shape)) {
    float* ordered = ScratchAt<float>(scratch, p.scratch.reordered);  // [D]
    ToCacheOrder(p.shape, k, ordered);
    k = ordered;
  }
  if (st.sinks_filled < p.sinks) {
    const int slot = st.sinks_filled;
    c.rope->Angles(slot, angles);
    RopeRotate(d, rd, angles, k, rotated);
    std::memcpy(lane.sink_keys() + static_cast<size_t>(slot) * d, rotated, d * sizeof(float));
    std::memcpy(lane.sink_values() + static_cast<size_t>(slot) * d, v, d * sizeof(float));
    return;
  }
  const int slot = st.tail_count;
  c.rope->Angles(AppendedKeyRotation(p, slot, st.seen), angles);  // st.seen: this token's stream index
  RopeRotate(d, rd, angles, k, rotated);
  WriteTailToken(p, lane, slot, rotated, v, scratch);
  eviction.OnTailWrite(lane, slot);
}

// Moves the full tail of every lane of `layer` into the ring.
void SealTail(const CacheView& c, const Eviction& eviction, LayerState& st, int layer, uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  eviction.MakeRingRoom(c, st, layer, scratch);
  KVEDGE_CHECK(st.ring_count < p.ring_blocks);
  const int slot = RingSlot(p, st, st.ring_count);
  const int storage = RingStorage(p, slot);
  for (int h = 0; h < p.shape.n_kv_heads; ++h) {
    const LaneView lane = c.Lane(layer, h);
    SealTailInto(p, lane, storage, scratch);
    eviction.OnSeal(lane, storage);
  }
  st.ring_start[static_cast<size_t>(slot)] = st.tail_start;
  ++st.ring_count;
  st.tail_count = 0;
}

}  // namespace

void AppendToken(const CacheView& c, const Eviction& eviction, LayerState& st, int layer, const float* k,
                 const float* v, uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  for (int h = 0; h < p.shape.n_kv_heads; ++h) {
    const size_t off = static_cast<size_t>(h) * p.shape.head_dim;
    WriteLaneToken(c, eviction, st, c.Lane(layer, h), k + off, v + off, scratch);
  }
  // Shared bookkeeping, after every lane wrote the token.
  if (st.sinks_filled < p.sinks) {
    ++st.sinks_filled;
  } else {
    if (st.tail_count == 0) st.tail_start = st.seen;
    ++st.tail_count;
    eviction.AfterTailAppend(p, st);
    if (st.tail_count == G) SealTail(c, eviction, st, layer, scratch);
  }
  ++st.seen;
}

void EvictOldestRingToken(const KvCachePlan& p, LayerState& st) {
  ++st.evicted;
  if (++st.first_valid == G) {
    st.ring_head = (st.ring_head + 1) % p.ring_blocks;
    --st.ring_count;
    st.first_valid = 0;
  }
}

}  // namespace kvedge::kv
