// Ring storage: a token enters a sink slot (f32, pinned) or the hot tail; a
// full tail is sealed into the ring of quantized blocks; the exact window
// evicts from the oldest ring block token by token.
#ifndef KVEDGE_KVCACHE_RING_STORAGE_H_
#define KVEDGE_KVCACHE_RING_STORAGE_H_

#include "kvcache/eviction.h"
#include "kvcache/lane.h"

namespace kvedge::kv {

// Appends one token to every lane of `layer`: k, v f32 [n_kv_heads][head_dim]
// pre-RoPE in model channel order. Then counts it in st, lets the policy
// evict, and seals a full tail. scratch: one thread's (plan.scratch).
void AppendToken(const CacheView& c, const Eviction& eviction, LayerState& st, int layer, const float* k,
                 const float* v, uint8_t* scratch);

// Drops the oldest ring token (the oldest block once all its tokens left).
void EvictOldestRingToken(const KvCachePlan& p, LayerState& st);

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_RING_STORAGE_H_
