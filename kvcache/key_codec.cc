// Key storage alternatives: key RoPE mode, token-major keys, hot tail.
#include "kvcache/key_codec.h"

#include <cstring>

#include "simd/kv_kernels.h"

namespace kvedge::kv {
namespace {

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

int64_t AppendedKeyRotation(const KvCachePlan& p, int slot, int64_t stream) {
  switch (p.key_rope) {
    case KeyRope::kInBlock: return slot;
    case KeyRope::kPost: return stream;
    case KeyRope::kPre: return 0;
  }
  return slot;
}

int64_t BlockPhase(const KvCachePlan& p, int64_t start) { return p.key_rope == KeyRope::kPost ? start : 0; }

void EncodeKeys(const KvCachePlan& p, KvFormat f, const float* src, uint8_t* block, float* tmp) {
  const int d = p.shape.head_dim;
  if (!p.TokenMajorKeys(f)) return EncodeKeyBlock(f, d, src, block);
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < G; ++t) tmp[t * d + c] = src[c * G + t];
  }
  EncodeValueBlock(f, d, tmp, block);
}

void DecodeKeys(const KvCachePlan& p, KvFormat f, const uint8_t* block, float* dst, float* tmp) {
  const int d = p.shape.head_dim;
  if (!p.TokenMajorKeys(f)) return DecodeKeyBlock(f, d, block, dst);
  DecodeValueBlock(f, d, block, tmp);
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < G; ++t) dst[c * G + t] = tmp[t * d + c];
  }
}

void WriteTailToken(const KvCachePlan& p, const LaneView& lane, int slot, const float* key, const float* value,
                    uint8_t* scratch) {
  const int d = p.shape.head_dim;
  if (p.hot_tail) {
    WriteKeyColumn(p.tail_format, d, key, lane.tail_keys(), slot);
    WriteValueRow(p.tail_format, d, value, lane.tail_values(), slot);
    return;
  }
  // No hot tail: the partial block lives only in its quantized form. Decode,
  // add the token, pad the free slots with it (padding never widens a range),
  // re-encode. Earlier tokens are re-quantized from their own codes.
  float* key_block = ScratchAt<float>(scratch, p.scratch.stage_keys);      // [D][G]
  float* value_block = ScratchAt<float>(scratch, p.scratch.stage_values);  // [G][D]
  float* tmp = ScratchAt<float>(scratch, p.scratch.stage_tmp);
  if (slot > 0) {
    DecodeKeys(p, p.key_format, lane.tail_keys(), key_block, tmp);
    DecodeValueBlock(p.value_format, d, lane.tail_values(), value_block);
  }
  for (int t = slot; t < G; ++t) {
    for (int c = 0; c < d; ++c) key_block[c * G + t] = key[c];
    std::memcpy(value_block + static_cast<size_t>(t) * d, value, d * sizeof(float));
  }
  EncodeKeys(p, p.key_format, key_block, lane.tail_keys(), tmp);
  EncodeValueBlock(p.value_format, d, value_block, lane.tail_values());
}

void SealTailInto(const KvCachePlan& p, const LaneView& lane, int storage, uint8_t* scratch) {
  const int d = p.shape.head_dim;
  uint8_t* key_dst = lane.key_block(storage);
  uint8_t* value_dst = lane.value_block(storage);
  if (!p.hot_tail) {  // the tail already holds the block in its final format
    std::memcpy(key_dst, lane.tail_keys(), p.key_block_bytes);
    std::memcpy(value_dst, lane.tail_values(), p.value_block_bytes);
    return;
  }
  float* staging = ScratchAt<float>(scratch, p.scratch.stage_keys);
  float* tmp = ScratchAt<float>(scratch, p.scratch.stage_tmp);
  DecodeKeyBlock(p.tail_format, d, lane.tail_keys(), staging);
  EncodeKeys(p, p.key_format, staging, key_dst, tmp);
  DecodeValueBlock(p.tail_format, d, lane.tail_values(), staging);
  EncodeValueBlock(p.value_format, d, staging, value_dst);
}

void DecodeKeysForScoring(const KvCachePlan& p, const RopeTable& rope, const LayerState& st, const LaneView& lane,
                          int nb, const uint8_t** kblocks, const uint8_t** tail_keys, KvFormat* key_format,
                          KvFormat* tail_key_format, uint8_t* scratch) {
  if (!p.SlowKeyPath()) return;
  const int d = p.shape.head_dim;
  const int rd = p.shape.rope_dim;
  const bool absolute = p.positions == PositionMode::kAbsolute;
  const int heavy_used = st.HeavyBlocksUsed();
  float* f32_keys = ScratchAt<float>(scratch, p.scratch.slow_keys);  // [nb + 1][D][G]
  float* tmp = ScratchAt<float>(scratch, p.scratch.stage_tmp);
  const int64_t* heavy_ids = lane.heavy_ids();
  float angles[kMaxHeadDim];
  float column[kMaxHeadDim];
  for (int b = 0; b <= nb; ++b) {
    float* dst = f32_keys + static_cast<size_t>(b) * G * d;
    DecodeKeys(p, b < nb ? *key_format : *tail_key_format, b < nb ? kblocks[b] : *tail_keys, dst, tmp);
    if (p.key_rope == KeyRope::kPre && rd > 0) {
      const bool heavy_ids_carry = absolute && b < heavy_used;
      for (int t = 0; t < G; ++t) {
        const int j = b * G + t;
        rope.Angles(heavy_ids_carry ? (j < st.heavy_count ? heavy_ids[j] : 0) : t, angles);
        for (int c = 0; c < d; ++c) column[c] = dst[c * G + t];
        RopeRotate(d, rd, angles, column, column);
        for (int c = 0; c < d; ++c) dst[c * G + t] = column[c];
      }
    }
    if (b < nb) kblocks[b] = reinterpret_cast<const uint8_t*>(dst);
  }
  *tail_keys = reinterpret_cast<const uint8_t*>(f32_keys + static_cast<size_t>(nb) * G * d);
  *key_format = *tail_key_format = KvFormat::kF32;
}

}  // namespace kvedge::kv
