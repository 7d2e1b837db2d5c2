// H2O scoring and the heavy-hitter merge.
#include "kvcache/heavy_hitters.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "kvcache/key_codec.h"
#include "simd/kv_kernels.h"

namespace kvedge::kv {

void MergeLeavingBlock(const CacheView& c, const LayerState& st, const LaneView& lane, int leaving_slot,
                       uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  const int d = p.shape.head_dim;
  const int rd = p.shape.rope_dim;
  const bool absolute = p.positions == PositionMode::kAbsolute;
  const bool rotated_keys = KeysRotated(p);
  float* scores = lane.scores();
  int64_t* heavy_ids = lane.heavy_ids();
  const int h_old = st.heavy_count;
  const int n_cand = h_old + G;
  const int n_keep = std::min(p.heavy, n_cand);

  float* block_k = ScratchAt<float>(scratch, p.scratch.stage_keys);    // [D][G]
  float* block_v = ScratchAt<float>(scratch, p.scratch.stage_values);  // [G][D]
  float* tmp = ScratchAt<float>(scratch, p.scratch.stage_tmp);
  const size_t merge = static_cast<size_t>(p.heavy_blocks) * G + G;
  float* cand_k = ScratchAt<float>(scratch, p.scratch.candidates);  // [cand][D] keys, then values
  float* cand_v = cand_k + merge * d;
  float* cand_score = ScratchAt<float>(scratch, p.scratch.cand_scores);   // ranking key (see rank below)
  int64_t* cand_id = ScratchAt<int64_t>(scratch, p.scratch.cand_ids);      // stream index
  int64_t* old_index = ScratchAt<int64_t>(scratch, p.scratch.cand_index);  // rotation index the stored key carries
  int32_t* order = ScratchAt<int32_t>(scratch, p.scratch.cand_order);

  // Gather candidates: current heavy hitters, then the leaving ring block.
  // Heavy keys carry R(slot % G) (in-cache) or R(stream index) (absolute);
  // ring keys carry R(slot).
  int n = 0;
  const auto gather = [&](const uint8_t* kb, const uint8_t* vb, int count, const float* sc, auto id_of,
                          auto index_of) {
    DecodeKeys(p, p.key_format, kb, block_k, tmp);
    DecodeValueBlock(p.value_format, d, vb, block_v);
    for (int t = 0; t < count; ++t, ++n) {
      for (int ch = 0; ch < d; ++ch) cand_k[static_cast<size_t>(n) * d + ch] = block_k[ch * G + t];
      std::memcpy(cand_v + static_cast<size_t>(n) * d, block_v + static_cast<size_t>(t) * d, d * sizeof(float));
      cand_score[n] = sc[t];
      cand_id[n] = id_of(t);
      old_index[n] = rotated_keys ? index_of(t) : 0;
    }
  };
  for (int b = 0; b * G < h_old; ++b) {
    const int count = std::min(G, h_old - b * G);
    gather(lane.key_block(b), lane.value_block(b), count, scores + static_cast<size_t>(b) * G,
           [&](int t) { return heavy_ids[b * G + t]; },
           [&](int t) { return absolute ? heavy_ids[b * G + t] : static_cast<int64_t>(t); });
  }
  const int storage = RingStorage(p, leaving_slot);
  const int64_t start = st.ring_start[static_cast<size_t>(leaving_slot)];
  gather(lane.key_block(storage), lane.value_block(storage), G, scores + static_cast<size_t>(storage) * G,
         [&](int t) { return start + t; }, [&](int t) { return static_cast<int64_t>(t); });

  // Top n_keep by rank (ties: older first), then back into stream order.
  // Age: the queries token i has received are seen − i (this token's own
  // query comes after sealing). Expired heavy hitters rank below the rest.
  const int64_t now = st.seen;
  const auto rank = [&](int32_t i) {
    const double age = static_cast<double>(now - cand_id[i]);
    const double r = p.h2o_score == H2OScore::kAge ? cand_score[i] / age : cand_score[i];
    const bool expired = p.h2o_lifetime > 0 && age > p.h2o_lifetime;
    return std::pair<int, double>(expired ? 0 : 1, r);
  };
  for (int i = 0; i < n_cand; ++i) order[i] = i;
  std::partial_sort(order, order + n_keep, order + n_cand, [&](int32_t a, int32_t b) {
    const auto ra = rank(a), rb = rank(b);
    if (ra != rb) return ra > rb;
    return cand_id[a] < cand_id[b];
  });
  std::sort(order, order + n_keep, [&](int32_t a, int32_t b) { return cand_id[a] < cand_id[b]; });

  // Re-form heavy blocks: rotate each kept key from its old index to its new
  // one, pad a partial last block by repeating its last token (so padding
  // never widens a channel's quantization range), encode.
  float angle_buf[kMaxHeadDim];
  float rotated[kMaxHeadDim];
  for (int b = 0; b * G < n_keep; ++b) {
    const int count = std::min(G, n_keep - b * G);
    for (int t = 0; t < G; ++t) {
      const int j = b * G + std::min(t, count - 1);
      const int src = order[j];
      const int64_t new_index =
          !rotated_keys ? 0 : absolute ? cand_id[src] : static_cast<int64_t>(std::min(t, count - 1));
      const float* key = cand_k + static_cast<size_t>(src) * d;
      if (new_index != old_index[src] && rd > 0) {
        c.rope->Angles(new_index - old_index[src], angle_buf);
        RopeRotate(d, rd, angle_buf, key, rotated);
        key = rotated;
      }
      for (int ch = 0; ch < d; ++ch) block_k[ch * G + t] = key[ch];
      std::memcpy(block_v + static_cast<size_t>(t) * d, cand_v + static_cast<size_t>(src) * d, d * sizeof(float));
    }
    EncodeKeys(p, p.key_format, block_k, lane.key_block(b), tmp);
    EncodeValueBlock(p.value_format, d, block_v, lane.value_block(b));
  }
  // Scores and ids last: `order` indexes candidates, which are already copied.
  for (int j = 0; j < n_keep; ++j) {
    scores[j] = cand_score[order[j]];
    heavy_ids[j] = cand_id[order[j]];
  }
}

void AddAttention(const KvCachePlan& p, const LayerState& st, const LaneView& lane, const float* probs) {
  float* lane_scores = lane.scores();
  const float decay = p.h2o_score == H2OScore::kTova ? 0.0f : p.h2o_decay;
  const auto update = [&](float* dst, const float* src, int count) {
    for (int t = 0; t < count; ++t) dst[t] = decay * dst[t] + src[t];
  };
  const int heavy_used = st.HeavyBlocksUsed();
  update(lane_scores, probs, st.heavy_count);
  for (int k = 0; k < st.ring_count; ++k) {
    update(lane_scores + static_cast<size_t>(RingStorage(p, RingSlot(p, st, k))) * G,
           probs + static_cast<size_t>(heavy_used + k) * G, G);
  }
  update(lane.tail_scores(), probs + static_cast<size_t>(heavy_used + st.ring_count) * G, st.tail_count);
}

void KeepSealedScores(const LaneView& lane, int storage) {
  std::memcpy(lane.scores() + static_cast<size_t>(storage) * G, lane.tail_scores(), G * sizeof(float));
}

}  // namespace kvedge::kv
