// Attention of one query group (the query heads sharing a kv head) over one
// lane, in named steps: gather (the lane's blocks in cache order and the
// query rotation each needs) → score → mask → softmax → accumulate.
#ifndef KVEDGE_KVCACHE_ATTENTION_H_
#define KVEDGE_KVCACHE_ATTENTION_H_

#include "kvcache/eviction.h"
#include "kvcache/lane.h"

namespace kvedge::kv {

// q: f32 [group][head_dim] pre-RoPE in model channel order; out: f32
// [group][head_dim]. Reports the head-summed probabilities to the policy
// (eviction.OnAttention) when it keeps scores. scratch: one thread's.
void AttendLane(const CacheView& c, const Eviction& eviction, const LayerState& st, int layer, int kv_head,
                const float* q, float* out, uint8_t* scratch);

// Starts loading (L2 prefetches) what AttendLane reads first of a lane: its
// sink keys and first kKvPrefetchBlocks key blocks in cache order, which
// the score kernel's own look-ahead never covers. Call it one lane ahead.
void PrefetchLane(const CacheView& c, const LayerState& st, int layer, int kv_head);

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_ATTENTION_H_
