// Eviction policies: each one the few decisions the cache asks of it, so the
// cache's flow (append, seal, attend, save) never switches on the policy.
#ifndef KVEDGE_KVCACHE_EVICTION_H_
#define KVEDGE_KVCACHE_EVICTION_H_

#include "kvcache/lane.h"
#include "platform/status.h"

namespace kvedge::kv {

// Stateless; one static instance per policy (EvictionFor). Hooks default to
// "nothing to do"; a policy overrides the ones it needs.
class Eviction {
 public:
  virtual ~Eviction() = default;

  // OK if `tokens` more tokens fit next to the `held` ones (full: refuses
  // past capacity with kResourceExhausted).
  virtual Status CheckRoom(const KvCachePlan& p, int held, int tokens) const;
  // After a token entered the tail (counted in st): evict so the ring and
  // tail stay within the window (window, sinks: the oldest ring token).
  virtual void AfterTailAppend(const KvCachePlan& p, LayerState& st) const;
  // Before sealing the tail into the ring: frees a ring block if the ring is
  // full (h2o: merges the oldest into the heavy hitters of every lane).
  virtual void MakeRingRoom(const CacheView& c, LayerState& st, int layer, uint8_t* scratch) const;
  // Whether lanes keep per-slot attention scores and heavy-hitter ids (h2o):
  // then the hooks below keep them, attention reports its probabilities and
  // save/restore carries them.
  virtual bool KeepsScores() const { return false; }
  // Whether ring and tail hold exactly the window (window, sinks).
  virtual bool ExactWindow() const { return false; }
  // A token was written to tail slot `slot` of `lane`.
  virtual void OnTailWrite(const LaneView& lane, int slot) const;
  // The tail of `lane` was sealed into block storage index `storage`.
  virtual void OnSeal(const LaneView& lane, int storage) const;
  // Attention of a layer's query over `lane`: probs are the head-summed
  // attention weights of its heavy, ring and tail slots in cache order
  // [heavy blocks][ring blocks][tail] (KeepsScores() only).
  virtual void OnAttention(const KvCachePlan& p, const LayerState& st, const LaneView& lane, const float* probs) const;
};

const Eviction& EvictionFor(EvictionPolicy policy);

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_EVICTION_H_
