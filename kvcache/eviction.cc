// The four eviction policies as Eviction hooks.
#include "kvcache/eviction.h"

#include <algorithm>
#include <string>

#include "kvcache/heavy_hitters.h"
#include "kvcache/ring_storage.h"

namespace kvedge::kv {

Status Eviction::CheckRoom(const KvCachePlan&, int, int) const { return OkStatus(); }
void Eviction::AfterTailAppend(const KvCachePlan&, LayerState&) const {}
void Eviction::MakeRingRoom(const CacheView&, LayerState&, int, uint8_t*) const {}
void Eviction::OnTailWrite(const LaneView&, int) const {}
void Eviction::OnSeal(const LaneView&, int) const {}
void Eviction::OnAttention(const KvCachePlan&, const LayerState&, const LaneView&, const float*) const {}

namespace {

// full: keeps everything up to capacity, then refuses.
class FullEviction final : public Eviction {
 public:
  Status CheckRoom(const KvCachePlan& p, int held, int tokens) const override {
    if (held + tokens <= p.capacity) return OkStatus();
    return ResourceExhausted("context full: " + std::to_string(held) + " + " + std::to_string(tokens) +
                             " tokens exceed the cache capacity of " + std::to_string(p.capacity) +
                             " (policy full); raise -c / --kv-budget or use an evicting policy");
  }
};

// window and sinks (the sinks are the plan's, filled before the ring): the
// W most recent tokens, evicted token by token from the oldest ring block.
class WindowEviction final : public Eviction {
 public:
  void AfterTailAppend(const KvCachePlan& p, LayerState& st) const override {
    if (st.RingTokens() + st.tail_count > p.window) EvictOldestRingToken(p, st);
  }
  bool ExactWindow() const override { return true; }
};

// h2o: sinks, heavy hitters by accumulated attention, and the recent ring; a
// full ring hands its oldest block to the heavy-hitter merge.
class H2OEviction final : public Eviction {
 public:
  void MakeRingRoom(const CacheView& c, LayerState& st, int layer, uint8_t* scratch) const override {
    const KvCachePlan& p = *c.plan;
    if (st.ring_count < p.ring_blocks) return;
    for (int h = 0; h < p.shape.n_kv_heads; ++h) MergeLeavingBlock(c, st, c.Lane(layer, h), st.ring_head, scratch);
    const int kept = std::min(p.heavy, st.heavy_count + G);
    st.evicted += st.heavy_count + G - kept;
    st.heavy_count = kept;
    st.ring_head = (st.ring_head + 1) % p.ring_blocks;
    --st.ring_count;
  }
  bool KeepsScores() const override { return true; }
  void OnTailWrite(const LaneView& lane, int slot) const override { lane.tail_scores()[slot] = 0.0f; }
  void OnSeal(const LaneView& lane, int storage) const override { KeepSealedScores(lane, storage); }
  void OnAttention(const KvCachePlan& p, const LayerState& st, const LaneView& lane, const float* probs) const override {
    AddAttention(p, st, lane, probs);
  }
};

}  // namespace

const Eviction& EvictionFor(EvictionPolicy policy) {
  static const FullEviction full;
  static const WindowEviction window;
  static const H2OEviction h2o;
  switch (policy) {
    case EvictionPolicy::kFull: return full;
    case EvictionPolicy::kWindow:
    case EvictionPolicy::kSinks: return window;
    case EvictionPolicy::kH2O: return h2o;
  }
  return full;
}

}  // namespace kvedge::kv
