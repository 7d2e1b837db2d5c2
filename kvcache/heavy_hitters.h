// H2O heavy hitters: per-slot attention scores (updated after every query)
// and the merge that re-forms the heavy blocks from the current heavy hitters
// and the ring block leaving, keeping the best ranked.
#ifndef KVEDGE_KVCACHE_HEAVY_HITTERS_H_
#define KVEDGE_KVCACHE_HEAVY_HITTERS_H_

#include "kvcache/lane.h"

namespace kvedge::kv {

// Keeps the top plan.heavy of the lane's heavy hitters and the tokens of ring
// slot `leaving_slot` (ties: older first; expired ones last), rotating each
// kept key to its new index and re-encoding the heavy blocks, scores and ids.
// The caller updates st (heavy_count, ring) after every lane merged.
void MergeLeavingBlock(const CacheView& c, const LayerState& st, const LaneView& lane, int leaving_slot,
                       uint8_t* scratch);

// score = decay·score + p for every live heavy, ring and tail slot (TOVA:
// decay 0). probs: head-summed attention in cache order [heavy][ring][tail].
void AddAttention(const KvCachePlan& p, const LayerState& st, const LaneView& lane, const float* probs);

// The tail's scores move with it into block storage index `storage`.
void KeepSealedScores(const LaneView& lane, int storage);

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_HEAVY_HITTERS_H_
