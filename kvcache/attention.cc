// Attention over one lane: gather → score → mask → softmax → accumulate.
#include "kvcache/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kvcache/key_codec.h"
#include "simd/kv_kernels.h"
#include "simd/model_kernels.h"

namespace kvedge::kv {
namespace {
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// The lane's blocks in cache order for one query, and where its scores go.
// Score rows (one per query head, `stride` apart) are in cache order
// [sinks S][heavy and ring blocks nb×G][tail G].
struct Gathered {
  int sinks = 0;       // S: filled sink slots
  int heavy_used = 0;  // heavy blocks holding tokens
  int nb = 0;          // heavy_used + ring blocks
  const uint8_t** kblocks = nullptr;  // [nb] key blocks
  const uint8_t** vblocks = nullptr;  // [nb] value blocks
  const uint8_t* tail_k = nullptr;
  const uint8_t* tail_v = nullptr;
  float* rot = nullptr;       // [nb][rope_dim] query rotation per block
  float* tail_rot = nullptr;  // [rope_dim]
  KvFormat key_format = KvFormat::kF32;
  KvFormat tail_key_format = KvFormat::kF32;
  int64_t query_position = 0;
  size_t stride = 0;   // score row stride: the most slots a lane can have
  size_t n_slots = 0;  // S + (nb + 1)·G
  size_t tail_offset() const { return static_cast<size_t>(sinks) + static_cast<size_t>(nb) * G; }
};

// Storage index of the lane's b-th block in cache order: the heavy blocks
// holding tokens (heavy_used), then the ring's, oldest first.
int BlockStorage(const KvCachePlan& p, const LayerState& st, int heavy_used, int b) {
  return b < heavy_used ? b : RingStorage(p, RingSlot(p, st, b - heavy_used));
}

// Step 1, gather: block pointers in cache order and the query rotation each
// needs (distance p_q − p_b, plus the block's stored phase), then the key
// codec's slow path if the plan takes it.
Gathered GatherBlocks(const CacheView& c, const LayerState& st, const LaneView& lane, uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  const int rd = p.shape.rope_dim;
  const bool absolute = p.positions == PositionMode::kAbsolute;
  Gathered g;
  g.sinks = st.sinks_filled;
  g.heavy_used = st.HeavyBlocksUsed();
  g.nb = g.heavy_used + st.ring_count;
  const size_t all_blocks = static_cast<size_t>(p.heavy_blocks + p.ring_blocks + 1);
  g.stride = static_cast<size_t>(p.sinks) + all_blocks * G;
  g.n_slots = static_cast<size_t>(g.sinks) + static_cast<size_t>(g.nb + 1) * G;
  g.rot = ScratchAt<float>(scratch, p.scratch.block_angles);
  g.kblocks = ScratchAt<const uint8_t*>(scratch, p.scratch.block_ptrs);
  g.vblocks = g.kblocks + all_blocks;
  g.query_position = absolute ? st.seen - 1 : st.Held() - 1;
  const int64_t pq = g.query_position;
  const int64_t ring_base = p.sinks + st.heavy_count - st.first_valid;  // in-cache pb of the oldest ring block
  for (int b = 0; b < g.nb; ++b) {
    const int storage = BlockStorage(p, st, g.heavy_used, b);
    int64_t pb;
    int64_t phase = 0;  // the rotation slot 0 of the block carries beyond R(t)
    if (b < g.heavy_used) {
      pb = absolute ? 0 : p.sinks + static_cast<int64_t>(b) * G;
    } else {
      const int k = b - g.heavy_used;
      const int64_t start = st.ring_start[static_cast<size_t>(RingSlot(p, st, k))];
      pb = absolute ? start : ring_base + static_cast<int64_t>(k) * G;
      phase = BlockPhase(p, start);
    }
    g.kblocks[b] = lane.key_block(storage);
    g.vblocks[b] = lane.value_block(storage);
    c.rope->Angles(pq - pb + phase, g.rot + static_cast<size_t>(b) * rd);
  }
  const int64_t tail_pb = absolute ? st.tail_start : ring_base + static_cast<int64_t>(st.ring_count) * G;
  g.tail_rot = g.rot + static_cast<size_t>(g.nb) * rd;
  c.rope->Angles(pq - tail_pb + BlockPhase(p, st.tail_start), g.tail_rot);
  g.tail_k = lane.tail_keys();
  g.tail_v = lane.tail_values();
  g.key_format = p.key_format;
  g.tail_key_format = p.tail_key_format();
  DecodeKeysForScoring(p, *c.rope, st, lane, g.nb, g.kblocks, &g.tail_k, &g.key_format, &g.tail_key_format, scratch);
  return g;
}

// Step 2, score: scale·q·k of every query head of the group and every slot,
// into rows of `scores`. All heads in one pass over the lane (GQA): each
// block is read and converted once for the whole group.
void ScoreSlots(const CacheView& c, const Gathered& g, const LaneView& lane, const float* q, float* scores,
                uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  const int d = p.shape.head_dim;
  const int rd = p.shape.rope_dim;
  const int group = p.shape.n_heads / p.shape.n_kv_heads;
  const float scale = p.shape.attn_scale > 0.0f ? p.shape.attn_scale : 1.0f / std::sqrt(static_cast<float>(d));
  if (g.sinks > 0) {
    // Sinks sit at 0..S−1 in f32 and carry R(slot): rotate the query instead.
    float* qrot = ScratchAt<float>(scratch, p.scratch.query);
    float* sink_angles = qrot + d;
    const float* sink_k = lane.sink_keys();
    c.rope->Angles(g.query_position, sink_angles);
    for (int head = 0; head < group; ++head) {
      float* row = scores + static_cast<size_t>(head) * g.stride;
      RopeRotate(d, rd, sink_angles, q + static_cast<size_t>(head) * d, qrot);
      for (int i = 0; i < g.sinks; ++i) row[i] = scale * DotF32(qrot, sink_k + static_cast<size_t>(i) * d, d);
    }
  }
  const size_t nq = static_cast<size_t>(group);
  if (g.nb > 0) {
    ScoreKeyBlocksMulti(g.key_format, d, rd, q, nq, g.rot, g.kblocks, g.nb, scale, scores + g.sinks, g.stride);
  }
  ScoreKeyBlocksMulti(g.tail_key_format, d, rd, q, nq, g.tail_rot, &g.tail_k, 1, scale, scores + g.tail_offset(),
                      g.stride);
}

// Masks (−inf) every slot of `row` whose token is sliding_window or more
// stream positions older than the query.
void MaskOutsideWindow(const KvCachePlan& p, const LayerState& st, const LaneView& lane, const Gathered& g,
                       float* row) {
  const int64_t oldest = st.seen - p.shape.sliding_window;  // first visible stream index
  if (oldest <= 0) return;
  for (int i = 0; i < std::min<int64_t>(g.sinks, oldest); ++i) row[i] = kMasked;
  float* blocks = row + g.sinks;
  if (st.heavy_count > 0) {
    const int64_t* ids = lane.heavy_ids();
    for (int j = 0; j < st.heavy_count; ++j) {
      if (ids[j] < oldest) blocks[j] = kMasked;
    }
  }
  for (int k = 0; k < st.ring_count; ++k) {
    const int64_t start = st.ring_start[static_cast<size_t>(RingSlot(p, st, k))];
    float* b = blocks + static_cast<size_t>(g.heavy_used + k) * G;
    for (int t = 0; t < G && start + t < oldest; ++t) b[t] = kMasked;
  }
  float* tail = row + g.tail_offset();
  for (int t = 0; t < st.tail_count && st.tail_start + t < oldest; ++t) tail[t] = kMasked;
}

// Step 3, mask one head's row: soft-capping (gemma2), the sliding window,
// and slots holding no token.
void MaskRow(const KvCachePlan& p, const LayerState& st, int layer, const LaneView& lane, const Gathered& g,
             float* row) {
  if (p.shape.attn_softcap > 0.0f) SoftCap(row, g.n_slots, p.shape.attn_softcap, row);
  if (p.shape.Windowed(layer)) MaskOutsideWindow(p, st, lane, g, row);
  float* block_scores = row + g.sinks;
  if (g.heavy_used > 0) {
    for (int j = st.heavy_count; j < g.heavy_used * G; ++j) block_scores[j] = kMasked;
  }
  if (st.ring_count > 0) {
    float* oldest = block_scores + static_cast<size_t>(g.heavy_used) * G;
    for (int t = 0; t < st.first_valid; ++t) oldest[t] = kMasked;
  }
  float* tail_scores = row + g.tail_offset();
  for (int t = st.tail_count; t < G; ++t) tail_scores[t] = kMasked;
}

// Step 5, accumulate: out[head] = Σ_slots w·v over sinks, blocks and tail.
void AccumulateValues(const KvCachePlan& p, const Gathered& g, const LaneView& lane, const float* weights,
                      float* out) {
  const int d = p.shape.head_dim;
  const size_t nq = static_cast<size_t>(p.shape.n_heads / p.shape.n_kv_heads);
  std::fill(out, out + nq * d, 0.0f);
  const float* sink_v = lane.sink_values();
  for (size_t head = 0; head < nq; ++head) {
    const float* row = weights + head * g.stride;
    float* oh = out + head * d;
    for (int i = 0; i < g.sinks; ++i) {
      const float w = row[i];
      const float* v = sink_v + static_cast<size_t>(i) * d;
      for (int c = 0; c < d; ++c) oh[c] += w * v[c];
    }
  }
  if (g.nb > 0) AccumulateValueBlocksMulti(p.value_format, d, weights + g.sinks, g.stride, nq, g.vblocks, g.nb, out);
  AccumulateValueBlocksMulti(p.tail_value_format(), d, weights + g.tail_offset(), g.stride, nq, &g.tail_v, 1, out);
}

}  // namespace

void AttendLane(const CacheView& c, const Eviction& eviction, const LayerState& st, int layer, int kv_head,
                const float* q, float* out, uint8_t* scratch) {
  const KvCachePlan& p = *c.plan;
  const int d = p.shape.head_dim;
  const int group = p.shape.n_heads / p.shape.n_kv_heads;
  const LaneView lane = c.Lane(layer, kv_head);
  if (Reorders(p.shape)) {
    float* ordered = ScratchAt<float>(scratch, p.scratch.reordered);  // [group][D]
    for (int head = 0; head < group; ++head) {
      ToCacheOrder(p.shape, q + static_cast<size_t>(head) * d, ordered + static_cast<size_t>(head) * d);
    }
    q = ordered;
  }
  const Gathered g = GatherBlocks(c, st, lane, scratch);
  // The value kernel prefetches ahead of itself from its fifth block on:
  // the first ones load while the keys are scored.
  PrefetchKvBlocks(g.vblocks, std::min<size_t>(static_cast<size_t>(g.nb), kKvPrefetchBlocks), p.value_block_bytes);
  float* scores = ScratchAt<float>(scratch, p.scratch.scores);  // [group][stride], then [stride] summed probabilities
  ScoreSlots(c, g, lane, q, scores, scratch);

  // Steps 3 and 4 per head: mask, softmax; the policy may want the
  // probabilities summed over the group's heads.
  const bool report = eviction.KeepsScores();
  float* prob_sum = scores + static_cast<size_t>(group) * g.stride;
  if (report) std::fill(prob_sum, prob_sum + g.n_slots, 0.0f);
  for (int head = 0; head < group; ++head) {
    float* row = scores + static_cast<size_t>(head) * g.stride;
    MaskRow(p, st, layer, lane, g, row);
    SoftmaxInPlace(row, g.n_slots);
    if (report) AddInPlace(prob_sum, row, g.n_slots);
  }
  AccumulateValues(p, g, lane, scores, out);
  if (report) eviction.OnAttention(p, st, lane, prob_sum + g.sinks);
}

void PrefetchLane(const CacheView& c, const LayerState& st, int layer, int kv_head) {
  const KvCachePlan& p = *c.plan;
  const LaneView lane = c.Lane(layer, kv_head);
  const int heavy_used = st.HeavyBlocksUsed();
  const size_t n = std::min<size_t>(static_cast<size_t>(heavy_used + st.ring_count), kKvPrefetchBlocks);
  const uint8_t* first[kKvPrefetchBlocks];
  for (size_t b = 0; b < n; ++b) first[b] = lane.key_block(BlockStorage(p, st, heavy_used, static_cast<int>(b)));
  PrefetchKvBlocks(first, n, p.key_block_bytes);
  const uint8_t* sinks = reinterpret_cast<const uint8_t*>(lane.sink_keys());
  PrefetchKvBlocks(&sinks, 1, static_cast<size_t>(st.sinks_filled) * p.shape.head_dim * sizeof(float));
}

}  // namespace kvedge::kv
