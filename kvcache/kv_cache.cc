// KV arena: appending, sealing, eviction, H2O re-forming and attention.
#include "kvcache/kv_cache.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "simd/kv_kernels.h"
#include "simd/model_kernels.h"

namespace kvedge {
namespace {
constexpr int G = kKvBlockTokens;
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// A region of a thread's scratch (KvCachePlan::scratch) as an array of T.
template <typename T>
T* ScratchAt(uint8_t* scratch, const Region& r) {
  return reinterpret_cast<T*>(scratch + r.offset);
}

// Writes a token's (already rotated) key as column `slot` of a
// channel-major [D][G] block of format f16 or f32.
void WriteKeyColumn(KvFormat f, int d, const float* k, uint8_t* block, int slot) {
  if (f == KvFormat::kF32) {
    float* b = reinterpret_cast<float*>(block);
    for (int c = 0; c < d; ++c) b[c * G + slot] = k[c];
  } else {
    uint16_t* b = reinterpret_cast<uint16_t*>(block);
    for (int c = 0; c < d; ++c) b[c * G + slot] = F16FromF32(k[c]);
  }
}

// Key blocks of format f: channel-major (kv_format.h key layout) or, for the
// token-wise ablation, the value layout holding keys token-major. src/dst are
// channel-major f32 [D][G]; tmp is [G][D] f32 scratch.
void EncodeKeys(KvFormat f, bool token_major, int d, const float* src, uint8_t* block, float* tmp) {
  if (!token_major) return EncodeKeyBlock(f, d, src, block);
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < G; ++t) tmp[t * d + c] = src[c * G + t];
  }
  EncodeValueBlock(f, d, tmp, block);
}

void DecodeKeys(KvFormat f, bool token_major, int d, const uint8_t* block, float* dst, float* tmp) {
  if (!token_major) return DecodeKeyBlock(f, d, block, dst);
  DecodeValueBlock(f, d, block, tmp);
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < G; ++t) dst[c * G + t] = tmp[t * d + c];
  }
}

// Writes a token's value as row `slot` of a token-major [G][D] block.
void WriteValueRow(KvFormat f, int d, const float* v, uint8_t* block, int slot) {
  if (f == KvFormat::kF32) {
    std::memcpy(reinterpret_cast<float*>(block) + static_cast<size_t>(slot) * d, v, d * sizeof(float));
  } else {
    uint16_t* b = reinterpret_cast<uint16_t*>(block) + static_cast<size_t>(slot) * d;
    for (int c = 0; c < d; ++c) b[c] = F16FromF32(v[c]);
  }
}
}  // namespace

// Bookkeeping shared by every lane of a layer: all lanes hold the same
// number of tokens in the same slots (h2o picks different tokens per lane,
// recorded per lane in the heavy-id region).
struct KvCache::LayerState {
  int64_t seen = 0;          // tokens appended
  int64_t evicted = 0;
  int sinks_filled = 0;
  int heavy_count = 0;       // h ≤ plan.heavy
  int ring_head = 0;         // storage slot of the oldest ring block
  int ring_count = 0;        // ring blocks in use
  int first_valid = 0;       // first live slot of the oldest ring block
  int tail_count = 0;
  int64_t tail_start = 0;    // stream index of tail slot 0
  std::vector<int64_t> ring_start;  // [ring_blocks] stream index of slot 0

  int RingTokens() const { return ring_count * G - first_valid; }
  int Held() const { return sinks_filled + heavy_count + RingTokens() + tail_count; }
};

KvCache::KvCache(const KvCachePlan& plan, AlignedBuffer arena) : plan_(plan), arena_(std::move(arena)) {}
KvCache::~KvCache() = default;

StatusOr<std::unique_ptr<KvCache>> KvCache::Create(const KvCachePlan& plan, MemoryBudget* budget) {
  StatusOr<AlignedBuffer> arena = budget != nullptr ? AlignedBuffer::Allocate(*budget, plan.arena_bytes, "KV arena")
                                                    : AlignedBuffer::Allocate(plan.arena_bytes, "KV arena");
  if (!arena.ok()) return arena.status();
  std::unique_ptr<KvCache> c(new KvCache(plan, std::move(arena).value()));
  c->lanes_ = c->arena_.data();
  float* rope_storage = reinterpret_cast<float*>(c->lanes_ + static_cast<size_t>(plan.lanes()) * plan.lane_bytes);
  c->rope_freqs_ = plan.shape.rope_freqs;
  if (c->rope_freqs_.empty()) {
    c->rope_freqs_.resize(static_cast<size_t>(plan.shape.rope_dim / 2));
    DefaultRopeFrequencies(plan.shape.rope_theta, plan.shape.rope_dim, c->rope_freqs_.data());
  }
  c->rope_ = RopeTable(c->rope_freqs_.data(), plan.shape.rope_dim, plan.capacity + G, rope_storage);
  c->scratch_ = c->lanes_ + static_cast<size_t>(plan.lanes()) * plan.lane_bytes + plan.rope_table_bytes;
  c->layers_.resize(static_cast<size_t>(plan.shape.n_layers));
  for (auto& st : c->layers_) st.ring_start.assign(static_cast<size_t>(std::max(plan.ring_blocks, 1)), 0);
  return c;
}

uint8_t* KvCache::Lane(int layer, int kv_head) const {
  return lanes_ + (static_cast<size_t>(layer) * plan_.shape.n_kv_heads + kv_head) * plan_.lane_bytes;
}

Status KvCache::CheckRoom(int tokens) const {
  if (plan_.policy == EvictionPolicy::kFull && !layers_.empty() && layers_[0].Held() + tokens > plan_.capacity) {
    return ResourceExhausted("context full: " + std::to_string(layers_[0].Held()) + " + " + std::to_string(tokens) +
                             " tokens exceed the cache capacity of " + std::to_string(plan_.capacity) +
                             " (policy full); raise -c / --kv-budget or use an evicting policy");
  }
  return OkStatus();
}

int64_t KvCache::QueryPosition(const LayerState& st) const {
  return plan_.positions == PositionMode::kAbsolute ? st.seen - 1 : st.Held() - 1;
}

bool KvCache::Reorders() const {
  return (plan_.shape.rope_style == RopeStyle::kNeox && plan_.shape.rope_dim > 2) || plan_.shape.rope_mscale != 1.0f;
}

// out = x with NEOX pairs (i, i + rd/2) moved to (2i, 2i + 1) and the rotated
// channels scaled by rope_mscale; channels ≥ rope_dim copied. [head_dim] f32.
void KvCache::ToCacheOrder(const float* x, float* out) const {
  const int d = plan_.shape.head_dim;
  const int half = plan_.shape.rope_dim / 2;
  const float m = plan_.shape.rope_mscale;
  if (plan_.shape.rope_style == RopeStyle::kNeox) {
    for (int i = 0; i < half; ++i) {
      out[2 * i] = m * x[i];
      out[2 * i + 1] = m * x[half + i];
    }
  } else {
    for (int i = 0; i < 2 * half; ++i) out[i] = m * x[i];
  }
  for (int i = 2 * half; i < d; ++i) out[i] = x[i];
}

// Masks (−inf) every slot of `row` (cache order [sinks][blocks][tail], as
// AttendLane lays it out) whose token is sliding_window or more stream
// positions older than the query.
void KvCache::MaskOutsideWindow(const LayerState& st, int layer, int kv_head, float* row) const {
  const int64_t oldest = st.seen - plan_.shape.sliding_window;  // first visible stream index
  if (oldest <= 0) return;
  const int S = st.sinks_filled;
  for (int i = 0; i < std::min<int64_t>(S, oldest); ++i) row[i] = kMasked;
  float* blocks = row + S;
  const int heavy_used = (st.heavy_count + G - 1) / G;
  if (st.heavy_count > 0) {
    const int64_t* ids = reinterpret_cast<const int64_t*>(Lane(layer, kv_head) + plan_.lane.heavy_ids.offset);
    for (int j = 0; j < st.heavy_count; ++j) {
      if (ids[j] < oldest) blocks[j] = kMasked;
    }
  }
  for (int k = 0; k < st.ring_count; ++k) {
    const int64_t start = st.ring_start[static_cast<size_t>((st.ring_head + k) % plan_.ring_blocks)];
    float* b = blocks + static_cast<size_t>(heavy_used + k) * G;
    for (int t = 0; t < G && start + t < oldest; ++t) b[t] = kMasked;
  }
  float* tail = blocks + static_cast<size_t>(heavy_used + st.ring_count) * G;
  for (int t = 0; t < st.tail_count && st.tail_start + t < oldest; ++t) tail[t] = kMasked;
}

void KvCache::Append(int layer, const float* k, const float* v) {
  LayerState& st = layers_[static_cast<size_t>(layer)];
  uint8_t* scratch = scratch_;  // Append runs on the calling thread
  for (int h = 0; h < plan_.shape.n_kv_heads; ++h) {
    const size_t off = static_cast<size_t>(h) * plan_.shape.head_dim;
    AppendLane(st, layer, h, k + off, v + off, scratch);
  }
  // Shared bookkeeping, after every lane wrote the token.
  if (st.sinks_filled < plan_.sinks) {
    ++st.sinks_filled;
  } else {
    if (st.tail_count == 0) st.tail_start = st.seen;
    ++st.tail_count;
    const bool exact_window = plan_.policy == EvictionPolicy::kWindow || plan_.policy == EvictionPolicy::kSinks;
    if (exact_window && st.RingTokens() + st.tail_count > plan_.window) {
      ++st.evicted;
      if (++st.first_valid == G) {
        st.ring_head = (st.ring_head + 1) % plan_.ring_blocks;
        --st.ring_count;
        st.first_valid = 0;
      }
    }
    if (st.tail_count == G) SealTail(st, layer, scratch);
  }
  ++st.seen;
}

void KvCache::AppendLane(LayerState& st, int layer, int kv_head, const float* k, const float* v, uint8_t* scratch) {
  const int d = plan_.shape.head_dim;
  const int rd = plan_.shape.rope_dim;
  uint8_t* lane = Lane(layer, kv_head);
  float* angles = ScratchAt<float>(scratch, plan_.scratch.query);  // rotated key, angles
  float* rotated = angles + d;
  if (Reorders()) {
    float* ordered = ScratchAt<float>(scratch, plan_.scratch.reordered);  // [D]
    ToCacheOrder(k, ordered);
    k = ordered;
  }
  if (st.sinks_filled < plan_.sinks) {
    const int slot = st.sinks_filled;
    rope_.Angles(slot, angles);
    RopeRotate(d, rd, angles, k, rotated);
    std::memcpy(reinterpret_cast<float*>(lane + plan_.lane.sink_keys.offset) + static_cast<size_t>(slot) * d, rotated, d * sizeof(float));
    std::memcpy(reinterpret_cast<float*>(lane + plan_.lane.sink_values.offset) + static_cast<size_t>(slot) * d, v, d * sizeof(float));
    return;
  }
  const int slot = st.tail_count;
  switch (plan_.key_rope) {
    case KeyRope::kInBlock: rope_.Angles(slot, angles); break;
    case KeyRope::kPost: rope_.Angles(st.seen, angles); break;  // st.seen: this token's stream index
    case KeyRope::kPre: rope_.Angles(0, angles); break;
  }
  RopeRotate(d, rd, angles, k, rotated);
  if (plan_.hot_tail) {
    WriteKeyColumn(plan_.tail_format, d, rotated, lane + plan_.lane.tail_keys.offset, slot);
    WriteValueRow(plan_.tail_format, d, v, lane + plan_.lane.tail_values.offset, slot);
  } else {
    // The partial block lives only in its quantized form: decode, add the
    // token, pad the free slots with it (padding never widens a range),
    // re-encode. Earlier tokens are re-quantized from their own codes.
    float* key_block = ScratchAt<float>(scratch, plan_.scratch.stage_keys);      // [D][G]
    float* value_block = ScratchAt<float>(scratch, plan_.scratch.stage_values);  // [G][D]
    float* tmp = ScratchAt<float>(scratch, plan_.scratch.stage_tmp);
    const KvFormat kf = plan_.key_format, vf = plan_.value_format;
    const bool token_major = plan_.TokenMajorKeys(kf);
    if (slot > 0) {
      DecodeKeys(kf, token_major, d, lane + plan_.lane.tail_keys.offset, key_block, tmp);
      DecodeValueBlock(vf, d, lane + plan_.lane.tail_values.offset, value_block);
    }
    for (int t = slot; t < G; ++t) {
      for (int c = 0; c < d; ++c) key_block[c * G + t] = rotated[c];
      std::memcpy(value_block + static_cast<size_t>(t) * d, v, d * sizeof(float));
    }
    EncodeKeys(kf, token_major, d, key_block, lane + plan_.lane.tail_keys.offset, tmp);
    EncodeValueBlock(vf, d, value_block, lane + plan_.lane.tail_values.offset);
  }
  if (plan_.policy == EvictionPolicy::kH2O) {
    float* scores = reinterpret_cast<float*>(lane + plan_.lane.scores.offset);
    scores[static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * G + slot] = 0.0f;
  }
}

void KvCache::SealTail(LayerState& st, int layer, uint8_t* scratch) {
  const int d = plan_.shape.head_dim;
  if (plan_.policy == EvictionPolicy::kH2O && st.ring_count == plan_.ring_blocks) {
    for (int h = 0; h < plan_.shape.n_kv_heads; ++h) MergeHeavy(st, layer, h, st.ring_head, scratch);
    const int kept = std::min(plan_.heavy, st.heavy_count + G);
    st.evicted += st.heavy_count + G - kept;
    st.heavy_count = kept;
    st.ring_head = (st.ring_head + 1) % plan_.ring_blocks;
    --st.ring_count;
  }
  KVEDGE_CHECK(st.ring_count < plan_.ring_blocks);
  const int slot = (st.ring_head + st.ring_count) % plan_.ring_blocks;
  const int storage = plan_.heavy_blocks + slot;
  float* staging = ScratchAt<float>(scratch, plan_.scratch.stage_keys);
  float* tmp = ScratchAt<float>(scratch, plan_.scratch.stage_tmp);
  for (int h = 0; h < plan_.shape.n_kv_heads; ++h) {
    uint8_t* lane = Lane(layer, h);
    uint8_t* key_dst = lane + plan_.lane.block_keys.offset + storage * plan_.key_block_bytes;
    uint8_t* value_dst = lane + plan_.lane.block_values.offset + storage * plan_.value_block_bytes;
    if (plan_.hot_tail) {
      DecodeKeyBlock(plan_.tail_format, d, lane + plan_.lane.tail_keys.offset, staging);
      EncodeKeys(plan_.key_format, plan_.TokenMajorKeys(plan_.key_format), d, staging, key_dst, tmp);
      DecodeValueBlock(plan_.tail_format, d, lane + plan_.lane.tail_values.offset, staging);
      EncodeValueBlock(plan_.value_format, d, staging, value_dst);
    } else {  // the tail already holds the block in its final format
      std::memcpy(key_dst, lane + plan_.lane.tail_keys.offset, plan_.key_block_bytes);
      std::memcpy(value_dst, lane + plan_.lane.tail_values.offset, plan_.value_block_bytes);
    }
    if (plan_.policy == EvictionPolicy::kH2O) {
      float* scores = reinterpret_cast<float*>(lane + plan_.lane.scores.offset);
      std::memcpy(scores + static_cast<size_t>(storage) * G,
                  scores + static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * G, G * sizeof(float));
    }
  }
  st.ring_start[static_cast<size_t>(slot)] = st.tail_start;
  ++st.ring_count;
  st.tail_count = 0;
}

void KvCache::MergeHeavy(LayerState& st, int layer, int kv_head, int leaving_slot, uint8_t* scratch) {
  const int d = plan_.shape.head_dim;
  const int rd = plan_.shape.rope_dim;
  const bool absolute = plan_.positions == PositionMode::kAbsolute;
  const bool pre = plan_.key_rope == KeyRope::kPre;  // stored keys carry no rotation
  const bool token_major = plan_.TokenMajorKeys(plan_.key_format);
  uint8_t* lane = Lane(layer, kv_head);
  float* scores = reinterpret_cast<float*>(lane + plan_.lane.scores.offset);
  int64_t* heavy_ids = reinterpret_cast<int64_t*>(lane + plan_.lane.heavy_ids.offset);
  const int h_old = st.heavy_count;
  const int n_cand = h_old + G;
  const int n_keep = std::min(plan_.heavy, n_cand);

  float* block_k = ScratchAt<float>(scratch, plan_.scratch.stage_keys);    // [D][G]
  float* block_v = ScratchAt<float>(scratch, plan_.scratch.stage_values);  // [G][D]
  float* tmp = ScratchAt<float>(scratch, plan_.scratch.stage_tmp);
  const size_t merge = static_cast<size_t>(plan_.heavy_blocks) * G + G;
  float* cand_k = ScratchAt<float>(scratch, plan_.scratch.candidates);  // [cand][D] keys, then values
  float* cand_v = cand_k + merge * d;
  float* cand_score = ScratchAt<float>(scratch, plan_.scratch.cand_scores);  // ranking key (see rank below)
  int64_t* cand_id = ScratchAt<int64_t>(scratch, plan_.scratch.cand_ids);     // stream index
  int64_t* old_index = ScratchAt<int64_t>(scratch, plan_.scratch.cand_index);  // rotation index the stored key carries
  int32_t* order = ScratchAt<int32_t>(scratch, plan_.scratch.cand_order);

  // Gather candidates: current heavy hitters, then the leaving ring block.
  // Heavy keys carry R(slot % G) (in-cache) or R(stream index) (absolute);
  // ring keys carry R(slot).
  int n = 0;
  const auto gather = [&](const uint8_t* kb, const uint8_t* vb, KvFormat kf, KvFormat vf, int count,
                          const float* sc, auto id_of, auto index_of) {
    DecodeKeys(kf, token_major, d, kb, block_k, tmp);
    DecodeValueBlock(vf, d, vb, block_v);
    for (int t = 0; t < count; ++t, ++n) {
      for (int c = 0; c < d; ++c) cand_k[static_cast<size_t>(n) * d + c] = block_k[c * G + t];
      std::memcpy(cand_v + static_cast<size_t>(n) * d, block_v + static_cast<size_t>(t) * d, d * sizeof(float));
      cand_score[n] = sc[t];
      cand_id[n] = id_of(t);
      old_index[n] = pre ? 0 : index_of(t);
    }
  };
  for (int b = 0; b * G < h_old; ++b) {
    const int count = std::min(G, h_old - b * G);
    gather(lane + plan_.lane.block_keys.offset + b * plan_.key_block_bytes, lane + plan_.lane.block_values.offset + b * plan_.value_block_bytes,
           plan_.key_format, plan_.value_format, count, scores + static_cast<size_t>(b) * G,
           [&](int t) { return heavy_ids[b * G + t]; },
           [&](int t) { return absolute ? heavy_ids[b * G + t] : static_cast<int64_t>(t); });
  }
  const int storage = plan_.heavy_blocks + leaving_slot;
  const int64_t start = st.ring_start[static_cast<size_t>(leaving_slot)];
  gather(lane + plan_.lane.block_keys.offset + storage * plan_.key_block_bytes, lane + plan_.lane.block_values.offset + storage * plan_.value_block_bytes,
         plan_.key_format, plan_.value_format, G, scores + static_cast<size_t>(storage) * G,
         [&](int t) { return start + t; }, [&](int t) { return static_cast<int64_t>(t); });

  // Top n_keep by rank (ties: older first), then back into stream order.
  // Age: the queries token i has received are seen − i (this token's own
  // query comes after sealing). Expired heavy hitters rank below the rest.
  const int64_t now = st.seen;
  const auto rank = [&](int32_t i) {
    const double age = static_cast<double>(now - cand_id[i]);
    const double r = plan_.h2o_score == H2OScore::kAge ? cand_score[i] / age : cand_score[i];
    const bool expired = plan_.h2o_lifetime > 0 && age > plan_.h2o_lifetime;
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
      const int64_t new_index = pre ? 0 : absolute ? cand_id[src] : static_cast<int64_t>(std::min(t, count - 1));
      const float* key = cand_k + static_cast<size_t>(src) * d;
      if (new_index != old_index[src] && rd > 0) {
        rope_.Angles(new_index - old_index[src], angle_buf);
        RopeRotate(d, rd, angle_buf, key, rotated);
        key = rotated;
      }
      for (int c = 0; c < d; ++c) block_k[c * G + t] = key[c];
      std::memcpy(block_v + static_cast<size_t>(t) * d, cand_v + static_cast<size_t>(src) * d, d * sizeof(float));
    }
    EncodeKeys(plan_.key_format, token_major, d, block_k, lane + plan_.lane.block_keys.offset + b * plan_.key_block_bytes, tmp);
    EncodeValueBlock(plan_.value_format, d, block_v, lane + plan_.lane.block_values.offset + b * plan_.value_block_bytes);
  }
  // Scores and ids last: `order` indexes candidates, which are already copied.
  for (int j = 0; j < n_keep; ++j) {
    scores[j] = cand_score[order[j]];
    heavy_ids[j] = cand_id[order[j]];
  }
}

void KvCache::Attend(int layer, const float* q, float* out, ThreadArena* threads) {
  const LayerState& st = layers_[static_cast<size_t>(layer)];
  const auto run = [&](size_t kv_head, int thread) {
    const int h = static_cast<int>(kv_head);
    const int group = plan_.shape.n_heads / plan_.shape.n_kv_heads;
    const size_t off = static_cast<size_t>(h) * group * plan_.shape.head_dim;
    AttendLane(st, layer, h, q + off, out + off, scratch_ + static_cast<size_t>(thread) * plan_.scratch_bytes_per_thread);
  };
  if (threads != nullptr && threads->num_threads() > 1) {
    KVEDGE_CHECK(threads->num_threads() <= plan_.max_threads);
    threads->ParallelForEach(static_cast<size_t>(plan_.shape.n_kv_heads), run);
  } else {
    for (int h = 0; h < plan_.shape.n_kv_heads; ++h) run(static_cast<size_t>(h), 0);
  }
}

// Scores layout (cache order): [sinks S][heavy and ring blocks nb×G][tail G].
void KvCache::AttendLane(const LayerState& st, int layer, int kv_head, const float* q, float* out,
                         uint8_t* scratch) {
  const int d = plan_.shape.head_dim;
  const int rd = plan_.shape.rope_dim;
  const int group = plan_.shape.n_heads / plan_.shape.n_kv_heads;
  const bool absolute = plan_.positions == PositionMode::kAbsolute;
  const bool h2o = plan_.policy == EvictionPolicy::kH2O;
  const bool post = plan_.key_rope == KeyRope::kPost;
  const uint8_t* lane = Lane(layer, kv_head);
  const int heavy_used = (st.heavy_count + G - 1) / G;
  const int nb = heavy_used + st.ring_count;
  const size_t all_blocks = static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks + 1);
  const size_t slots_max = static_cast<size_t>(plan_.sinks) + all_blocks * G;

  float* scores = ScratchAt<float>(scratch, plan_.scratch.scores);  // [group][slots_max]
  float* prob_sum = scores + static_cast<size_t>(group) * slots_max;
  float* rot = ScratchAt<float>(scratch, plan_.scratch.block_angles);
  const uint8_t** kblocks = ScratchAt<const uint8_t*>(scratch, plan_.scratch.block_ptrs);
  const uint8_t** vblocks = kblocks + all_blocks;
  float* qrot = ScratchAt<float>(scratch, plan_.scratch.query);
  float* sink_angles = qrot + d;
  if (Reorders()) {
    float* ordered = ScratchAt<float>(scratch, plan_.scratch.reordered);  // [group][D]
    for (int head = 0; head < group; ++head) ToCacheOrder(q + static_cast<size_t>(head) * d, ordered + static_cast<size_t>(head) * d);
    q = ordered;
  }

  // Blocks in cache order and their query rotations (distance p_q − pb).
  const int64_t pq = QueryPosition(st);
  const int64_t ring_base = plan_.sinks + st.heavy_count - st.first_valid;  // in-cache pb of the oldest ring block
  for (int b = 0; b < nb; ++b) {
    int storage;
    int64_t pb;
    int64_t phase = 0;  // the rotation slot 0 of the block carries (post-RoPE: its stream index)
    if (b < heavy_used) {
      storage = b;
      pb = absolute ? 0 : plan_.sinks + static_cast<int64_t>(b) * G;
    } else {
      const int k = b - heavy_used;
      const int slot = (st.ring_head + k) % plan_.ring_blocks;
      storage = plan_.heavy_blocks + slot;
      pb = absolute ? st.ring_start[static_cast<size_t>(slot)] : ring_base + static_cast<int64_t>(k) * G;
      if (post) phase = st.ring_start[static_cast<size_t>(slot)];
    }
    kblocks[b] = lane + plan_.lane.block_keys.offset + storage * plan_.key_block_bytes;
    vblocks[b] = lane + plan_.lane.block_values.offset + storage * plan_.value_block_bytes;
    rope_.Angles(pq - pb + phase, rot + static_cast<size_t>(b) * rd);
  }
  const int64_t tail_pb = absolute ? st.tail_start : ring_base + static_cast<int64_t>(st.ring_count) * G;
  float* tail_rot = rot + static_cast<size_t>(nb) * rd;
  rope_.Angles(pq - tail_pb + (post ? st.tail_start : 0), tail_rot);
  const uint8_t* tail_k = lane + plan_.lane.tail_keys.offset;
  const uint8_t* tail_v = lane + plan_.lane.tail_values.offset;
  KvFormat key_format = plan_.key_format;
  KvFormat tail_key_format = plan_.tail_key_format();
  if (plan_.SlowKeyPath()) {
    // Ablation path: decode every key block to f32 [D][G] once per lane and,
    // for pre-RoPE keys, give slot t the rotation the in-block scheme stores
    // (R(t), or R(stream index) for absolute-position heavy hitters); then
    // score with the f32 kernel. Costs a decode per block per step.
    float* f32_keys = ScratchAt<float>(scratch, plan_.scratch.slow_keys);  // [nb + 1][D][G]
    float* tmp = ScratchAt<float>(scratch, plan_.scratch.stage_tmp);
    const int64_t* heavy_ids = reinterpret_cast<const int64_t*>(lane + plan_.lane.heavy_ids.offset);
    float angles[kMaxHeadDim];
    float column[kMaxHeadDim];
    for (int b = 0; b <= nb; ++b) {
      float* dst = f32_keys + static_cast<size_t>(b) * G * d;
      const KvFormat f = b < nb ? key_format : tail_key_format;
      DecodeKeys(f, plan_.TokenMajorKeys(f), d, b < nb ? kblocks[b] : tail_k, dst, tmp);
      if (plan_.key_rope == KeyRope::kPre && rd > 0) {
        const bool heavy_ids_carry = absolute && b < heavy_used;
        for (int t = 0; t < G; ++t) {
          const int j = b * G + t;
          rope_.Angles(heavy_ids_carry ? (j < st.heavy_count ? heavy_ids[j] : 0) : t, angles);
          for (int c = 0; c < d; ++c) column[c] = dst[c * G + t];
          RopeRotate(d, rd, angles, column, column);
          for (int c = 0; c < d; ++c) dst[c * G + t] = column[c];
        }
      }
      if (b < nb) kblocks[b] = reinterpret_cast<const uint8_t*>(dst);
    }
    tail_k = reinterpret_cast<const uint8_t*>(f32_keys + static_cast<size_t>(nb) * G * d);
    key_format = tail_key_format = KvFormat::kF32;
  }

  const int S = st.sinks_filled;
  const size_t n_slots = static_cast<size_t>(S) + static_cast<size_t>(nb + 1) * G;
  const float* sink_k = reinterpret_cast<const float*>(lane + plan_.lane.sink_keys.offset);
  const float* sink_v = reinterpret_cast<const float*>(lane + plan_.lane.sink_values.offset);
  const float scale = plan_.shape.attn_scale > 0.0f ? plan_.shape.attn_scale : 1.0f / std::sqrt(static_cast<float>(d));
  const float softcap = plan_.shape.attn_softcap;
  const bool windowed = plan_.shape.Windowed(layer);
  if (S > 0) rope_.Angles(pq, sink_angles);  // sinks sit at 0..S−1 and carry R(slot)
  if (h2o) std::fill(prob_sum, prob_sum + n_slots, 0.0f);

  // All query heads of the group in one pass over the lane (GQA): each block
  // is read and converted once for the whole group. Rows of `scores` are the
  // heads, in cache order [sinks S][blocks nb×G][tail G].
  const size_t stride = slots_max;
  if (S > 0) {
    for (int head = 0; head < group; ++head) {
      float* row = scores + static_cast<size_t>(head) * stride;
      RopeRotate(d, rd, sink_angles, q + static_cast<size_t>(head) * d, qrot);
      for (int i = 0; i < S; ++i) row[i] = scale * DotF32(qrot, sink_k + static_cast<size_t>(i) * d, d);
    }
  }
  const size_t nq = static_cast<size_t>(group);
  if (nb > 0) ScoreKeyBlocksMulti(key_format, d, rd, q, nq, rot, kblocks, nb, scale, scores + S, stride);
  const size_t tail_off = static_cast<size_t>(S) + static_cast<size_t>(nb) * G;
  ScoreKeyBlocksMulti(tail_key_format, d, rd, q, nq, tail_rot, &tail_k, 1, scale, scores + tail_off, stride);

  std::fill(out, out + nq * d, 0.0f);
  for (int head = 0; head < group; ++head) {
    float* row = scores + static_cast<size_t>(head) * stride;
    float* block_scores = row + S;
    float* tail_scores = row + tail_off;
    if (softcap > 0.0f) SoftCap(row, n_slots, softcap, row);
    if (windowed) MaskOutsideWindow(st, layer, kv_head, row);
    // Mask slots holding no token.
    if (heavy_used > 0) {
      for (int j = st.heavy_count; j < heavy_used * G; ++j) block_scores[j] = kMasked;
    }
    if (st.ring_count > 0) {
      float* oldest = block_scores + static_cast<size_t>(heavy_used) * G;
      for (int t = 0; t < st.first_valid; ++t) oldest[t] = kMasked;
    }
    for (int t = st.tail_count; t < G; ++t) tail_scores[t] = kMasked;

    SoftmaxInPlace(row, n_slots);

    float* oh = out + static_cast<size_t>(head) * d;
    for (int i = 0; i < S; ++i) {
      const float w = row[i];
      const float* v = sink_v + static_cast<size_t>(i) * d;
      for (int c = 0; c < d; ++c) oh[c] += w * v[c];
    }
    if (h2o) AddInPlace(prob_sum, row, n_slots);
  }
  if (nb > 0) AccumulateValueBlocksMulti(plan_.value_format, d, scores + S, stride, nq, vblocks, nb, out);
  AccumulateValueBlocksMulti(plan_.tail_value_format(), d, scores + tail_off, stride, nq, &tail_v, 1, out);

  if (h2o) {
    // decay·score + attention received, for every live heavy/ring/tail slot
    // (TOVA: decay 0, the latest attention only).
    float* lane_scores = reinterpret_cast<float*>(const_cast<uint8_t*>(lane) + plan_.lane.scores.offset);
    const float decay = plan_.h2o_score == H2OScore::kTova ? 0.0f : plan_.h2o_decay;
    const auto update = [&](float* dst, const float* p, int count) {
      for (int t = 0; t < count; ++t) dst[t] = decay * dst[t] + p[t];
    };
    const float* p = prob_sum + S;
    update(lane_scores, p, st.heavy_count);
    for (int k = 0; k < st.ring_count; ++k) {
      const int storage = plan_.heavy_blocks + (st.ring_head + k) % plan_.ring_blocks;
      update(lane_scores + static_cast<size_t>(storage) * G, p + static_cast<size_t>(heavy_used + k) * G, G);
    }
    update(lane_scores + static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * G,
           p + static_cast<size_t>(nb) * G, st.tail_count);
  }
}

KvCacheStats KvCache::Stats() const {
  KvCacheStats s;
  const LayerState& st = layers_.front();
  s.tokens_seen = static_cast<uint64_t>(st.seen);
  s.tokens_held = static_cast<uint64_t>(st.Held());
  s.tokens_evicted = static_cast<uint64_t>(st.evicted);
  s.arena_bytes = arena_.size();
  const int d = plan_.shape.head_dim;
  uint64_t lane = 2ull * st.sinks_filled * d * sizeof(float);
  lane += static_cast<uint64_t>((st.heavy_count + G - 1) / G + st.ring_count) *
          (plan_.key_block_bytes + plan_.value_block_bytes);
  if (st.tail_count > 0) lane += plan_.tail_key_bytes + plan_.tail_value_bytes;
  if (plan_.policy == EvictionPolicy::kH2O) {
    lane += static_cast<uint64_t>(st.Held() - st.sinks_filled) * sizeof(float) +
            static_cast<uint64_t>(st.heavy_count) * sizeof(int64_t);
  }
  s.held_bytes = lane * static_cast<uint64_t>(plan_.lanes());
  s.f16_full_bytes = plan_.F16FullBytes(s.tokens_seen);
  return s;
}

KvCache::LaneContents KvCache::Contents(int layer, int kv_head) const {
  const LayerState& st = layers_[static_cast<size_t>(layer)];
  const uint8_t* lane = Lane(layer, kv_head);
  LaneContents c;
  const bool h2o = plan_.policy == EvictionPolicy::kH2O;
  const float* scores = h2o ? reinterpret_cast<const float*>(lane + plan_.lane.scores.offset) : nullptr;
  const auto add = [&](int64_t token, const float* score) {
    c.tokens.push_back(token);
    if (h2o && score != nullptr) c.scores.push_back(*score);
  };
  for (int i = 0; i < st.sinks_filled; ++i) add(i, nullptr);
  if (h2o) {
    const int64_t* ids = reinterpret_cast<const int64_t*>(lane + plan_.lane.heavy_ids.offset);
    for (int j = 0; j < st.heavy_count; ++j) add(ids[j], scores + j);
  }
  for (int k = 0; k < st.ring_count; ++k) {
    const int slot = (st.ring_head + k) % plan_.ring_blocks;
    const int storage = plan_.heavy_blocks + slot;
    for (int t = (k == 0 ? st.first_valid : 0); t < G; ++t) {
      add(st.ring_start[static_cast<size_t>(slot)] + t, h2o ? scores + static_cast<size_t>(storage) * G + t : nullptr);
    }
  }
  const size_t tail_scores = static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * G;
  for (int t = 0; t < st.tail_count; ++t) add(st.tail_start + t, h2o ? scores + tail_scores + t : nullptr);
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    c.positions.push_back(plan_.positions == PositionMode::kAbsolute ? c.tokens[i] : static_cast<int64_t>(i));
  }
  return c;
}

}  // namespace kvedge

namespace kvedge {

KvCache::SinkRows KvCache::Sinks(int layer, int kv_head) const {
  const uint8_t* lane = Lane(layer, kv_head);
  return SinkRows{reinterpret_cast<const float*>(lane + plan_.lane.sink_keys.offset), reinterpret_cast<const float*>(lane + plan_.lane.sink_values.offset),
                  layers_[static_cast<size_t>(layer)].sinks_filled};
}

std::vector<KvCache::LayerCursor> KvCache::Cursors() const {
  std::vector<LayerCursor> out(layers_.size());
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerState& st = layers_[l];
    LayerCursor& c = out[l];
    c.seen = st.seen;
    c.evicted = st.evicted;
    c.tail_start = st.tail_start;
    c.sinks_filled = st.sinks_filled;
    c.heavy_count = st.heavy_count;
    c.ring_head = st.ring_head;
    c.ring_count = st.ring_count;
    c.first_valid = st.first_valid;
    c.tail_count = st.tail_count;
  }
  return out;
}

void KvCache::ForEachLaneSpan(const LayerCursor& c, int layer, int kv_head,
                              FunctionRef<void(uint8_t*, size_t)> visit) const {
  uint8_t* lane = Lane(layer, kv_head);
  const size_t row = static_cast<size_t>(plan_.shape.head_dim) * sizeof(float);
  const int heavy_used = (c.heavy_count + G - 1) / G;
  const auto ring_storage = [&](int k) { return plan_.heavy_blocks + (c.ring_head + k) % plan_.ring_blocks; };
  if (c.sinks_filled > 0) {
    visit(lane + plan_.lane.sink_keys.offset, static_cast<size_t>(c.sinks_filled) * row);
    visit(lane + plan_.lane.sink_values.offset, static_cast<size_t>(c.sinks_filled) * row);
  }
  if (heavy_used > 0) {
    visit(lane + plan_.lane.block_keys.offset, static_cast<size_t>(heavy_used) * plan_.key_block_bytes);
    visit(lane + plan_.lane.block_values.offset, static_cast<size_t>(heavy_used) * plan_.value_block_bytes);
  }
  for (int k = 0; k < c.ring_count; ++k) {
    const size_t storage = static_cast<size_t>(ring_storage(k));
    visit(lane + plan_.lane.block_keys.offset + storage * plan_.key_block_bytes, plan_.key_block_bytes);
    visit(lane + plan_.lane.block_values.offset + storage * plan_.value_block_bytes, plan_.value_block_bytes);
  }
  // The whole tail, live slots or not: attention reads (and masks) every slot.
  visit(lane + plan_.lane.tail_keys.offset, plan_.tail_key_bytes);
  visit(lane + plan_.lane.tail_values.offset, plan_.tail_value_bytes);
  if (plan_.policy == EvictionPolicy::kH2O) {
    uint8_t* scores = lane + plan_.lane.scores.offset;
    const size_t block_scores = G * sizeof(float);
    if (heavy_used > 0) visit(scores, static_cast<size_t>(heavy_used) * block_scores);
    for (int k = 0; k < c.ring_count; ++k) visit(scores + static_cast<size_t>(ring_storage(k)) * block_scores, block_scores);
    visit(scores + static_cast<size_t>(plan_.heavy_blocks + plan_.ring_blocks) * block_scores, block_scores);
    if (c.heavy_count > 0) visit(lane + plan_.lane.heavy_ids.offset, static_cast<size_t>(c.heavy_count) * sizeof(int64_t));
  }
}

void KvCache::ForEachHeldSpan(FunctionRef<void(const uint8_t*, size_t)> visit) const {
  const std::vector<LayerCursor> cursors = Cursors();
  for (int l = 0; l < plan_.shape.n_layers; ++l) {
    for (int h = 0; h < plan_.shape.n_kv_heads; ++h) {
      ForEachLaneSpan(cursors[static_cast<size_t>(l)], l, h, [&](uint8_t* p, size_t n) { visit(p, n); });
    }
  }
}

uint64_t KvCache::HeldSpanBytes(const std::vector<LayerCursor>& cursors) const {
  uint64_t total = 0;
  for (int l = 0; l < plan_.shape.n_layers; ++l) {
    uint64_t lane = 0;
    ForEachLaneSpan(cursors[static_cast<size_t>(l)], l, 0, [&](uint8_t*, size_t n) { lane += n; });
    total += lane * static_cast<uint64_t>(plan_.shape.n_kv_heads);
  }
  return total;
}

Status KvCache::CheckCursors(const std::vector<LayerCursor>& cursors) const {
  if (cursors.size() != static_cast<size_t>(plan_.shape.n_layers)) {
    return DataLoss("KV state has " + std::to_string(cursors.size()) + " layers; the cache has " +
                    std::to_string(plan_.shape.n_layers));
  }
  const bool exact_window = plan_.policy == EvictionPolicy::kWindow || plan_.policy == EvictionPolicy::kSinks;
  for (size_t l = 0; l < cursors.size(); ++l) {
    const LayerCursor& c = cursors[l];
    const auto bad = [&](const std::string& what) {
      return DataLoss("KV state of layer " + std::to_string(l) + ": " + what);
    };
    const auto range = [&](const char* field, int64_t v, int64_t lo, int64_t hi) -> Status {
      if (v < lo || v > hi) {
        return bad(std::string(field) + " " + std::to_string(v) + " is outside " + std::to_string(lo) + ".." +
                   std::to_string(hi));
      }
      return OkStatus();
    };
    KVEDGE_RETURN_IF_ERROR(range("sinks_filled", c.sinks_filled, 0, plan_.sinks));
    KVEDGE_RETURN_IF_ERROR(range("heavy_count", c.heavy_count, 0, plan_.heavy));
    KVEDGE_RETURN_IF_ERROR(range("ring_head", c.ring_head, 0, std::max(plan_.ring_blocks - 1, 0)));
    KVEDGE_RETURN_IF_ERROR(range("ring_count", c.ring_count, 0, plan_.ring_blocks));
    KVEDGE_RETURN_IF_ERROR(range("first_valid", c.first_valid, 0, exact_window && c.ring_count > 0 ? G - 1 : 0));
    KVEDGE_RETURN_IF_ERROR(range("tail_count", c.tail_count, 0, G - 1));
    KVEDGE_RETURN_IF_ERROR(range("seen", c.seen, 0, int64_t{1} << 62));
    KVEDGE_RETURN_IF_ERROR(range("evicted", c.evicted, 0, c.seen));
    KVEDGE_RETURN_IF_ERROR(range("tail_start", c.tail_start, 0, c.seen));
    if (plan_.policy != EvictionPolicy::kH2O && c.heavy_count > 0) return bad("heavy hitters without the h2o policy");
    const int64_t ring_tokens = static_cast<int64_t>(c.ring_count) * G - c.first_valid;
    const int64_t held = c.sinks_filled + c.heavy_count + ring_tokens + c.tail_count;
    if (c.sinks_filled < plan_.sinks && held != c.sinks_filled) return bad("tokens past unfilled sinks");
    if (held + c.evicted != c.seen) {
      return bad(std::to_string(held) + " held + " + std::to_string(c.evicted) + " evicted != " +
                 std::to_string(c.seen) + " seen");
    }
    if (held > plan_.capacity) return bad(std::to_string(held) + " tokens held exceed the capacity");
    if (exact_window && ring_tokens + c.tail_count > plan_.window) return bad("ring and tail exceed the window");
    if (c.tail_count > 0 && c.tail_start != c.seen - c.tail_count) return bad("tail_start does not match seen");
    if (c.seen - c.tail_count - static_cast<int64_t>(c.ring_count) * G < c.sinks_filled) {
      return bad("ring blocks start before the sinks end");
    }
  }
  return OkStatus();
}

Status KvCache::Restore(const std::vector<LayerCursor>& cursors, FunctionRef<Status(uint8_t*, size_t)> fill) {
  KVEDGE_RETURN_IF_ERROR(CheckCursors(cursors));
  for (size_t l = 0; l < layers_.size(); ++l) {
    const LayerCursor& c = cursors[l];
    LayerState& st = layers_[l];
    st.seen = c.seen;
    st.evicted = c.evicted;
    st.tail_start = c.tail_start;
    st.sinks_filled = c.sinks_filled;
    st.heavy_count = c.heavy_count;
    st.ring_head = c.ring_head;
    st.ring_count = c.ring_count;
    st.first_valid = c.first_valid;
    st.tail_count = c.tail_count;
    // Ring blocks hold consecutive stream indices ending where the tail starts.
    for (int k = 0; k < c.ring_count; ++k) {
      st.ring_start[static_cast<size_t>((c.ring_head + k) % plan_.ring_blocks)] =
          c.seen - c.tail_count - static_cast<int64_t>(c.ring_count - k) * G;
    }
  }
  Status status;
  for (int l = 0; l < plan_.shape.n_layers && status.ok(); ++l) {
    const LayerCursor& c = cursors[static_cast<size_t>(l)];
    for (int h = 0; h < plan_.shape.n_kv_heads && status.ok(); ++h) {
      ForEachLaneSpan(c, l, h, [&](uint8_t* p, size_t n) {
        if (status.ok()) status = fill(p, n);
      });
      if (!status.ok() || c.heavy_count == 0) continue;
      // Heavy hitters: distinct stream indices in increasing order, after the
      // sinks and before the oldest ring token.
      const int64_t* ids = reinterpret_cast<const int64_t*>(Lane(l, h) + plan_.lane.heavy_ids.offset);
      const int64_t ring_first = c.seen - c.tail_count - static_cast<int64_t>(c.ring_count) * G + c.first_valid;
      for (int j = 0; j < c.heavy_count && status.ok(); ++j) {
        const int64_t lo = j == 0 ? c.sinks_filled : ids[j - 1] + 1;
        if (ids[j] < lo || ids[j] >= ring_first) {
          status = DataLoss("KV state of layer " + std::to_string(l) + ", kv head " + std::to_string(h) +
                            ": heavy hitter " + std::to_string(j) + " has stream index " + std::to_string(ids[j]) +
                            " (expected " + std::to_string(lo) + " to " + std::to_string(ring_first - 1) + ")");
        }
      }
    }
  }
  if (!status.ok()) Reset();
  return status;
}

void KvCache::Reset() {
  for (LayerState& st : layers_) {
    std::fill(st.ring_start.begin(), st.ring_start.end(), 0);
    std::vector<int64_t> ring_start = std::move(st.ring_start);
    st = LayerState();
    st.ring_start = std::move(ring_start);
  }
}

}  // namespace kvedge
