// How heavy, ring and tail keys are stored: the one switch point of the
// measured alternatives (docs/quality.md) — the rotation a stored key carries
// (KeyRope: in-block, post, pre), token-major quantized keys (KeyQuantAxis)
// and the hot tail or its absence. The rest of the cache calls these and
// never branches on those options itself.
#ifndef KVEDGE_KVCACHE_KEY_CODEC_H_
#define KVEDGE_KVCACHE_KEY_CODEC_H_

#include <cstdint>

#include "kvcache/lane.h"

namespace kvedge::kv {

// Index of the rotation R(·) a key entering tail slot `slot` as stream index
// `stream` is stored with: in-block R(slot), post-RoPE R(stream), pre-RoPE none.
int64_t AppendedKeyRotation(const KvCachePlan& p, int slot, int64_t stream);

// Beyond R(t), the rotation slot 0 of a ring or tail block starting at stream
// index `start` carries (post-RoPE: start; else 0).
int64_t BlockPhase(const KvCachePlan& p, int64_t start);

// Whether stored heavy/ring keys carry a rotation at all (pre-RoPE: no).
inline bool KeysRotated(const KvCachePlan& p) { return p.key_rope != KeyRope::kPre; }

// Key blocks of format f: src/dst channel-major f32 [D][G]; stored
// channel-major (kv_format.h key layout) or, for the token-wise ablation of a
// quantized format, token-major in the value layout. tmp: [G][D] f32.
void EncodeKeys(const KvCachePlan& p, KvFormat f, const float* src, uint8_t* block, float* tmp);
void DecodeKeys(const KvCachePlan& p, KvFormat f, const uint8_t* block, float* dst, float* tmp);

// Writes one token into tail slot `slot`: key (rotated as AppendedKeyRotation
// says, cache channel order) and value, each f32 [D].
void WriteTailToken(const KvCachePlan& p, const LaneView& lane, int slot, const float* key, const float* value,
                    uint8_t* scratch);

// Stores the full tail as block storage index `storage` in the key/value formats.
void SealTailInto(const KvCachePlan& p, const LaneView& lane, int storage, uint8_t* scratch);

// Scoring's slow key path (pre-RoPE or token-major keys): decodes the nb key
// blocks `kblocks` and the tail to f32 [nb + 1][D][G] in scratch.slow_keys,
// gives pre-RoPE keys the rotation the in-block scheme stores (R(t), or
// R(stream index) for absolute-position heavy hitters), and points kblocks and
// *tail_keys at the decoded blocks (now of format f32). Costs a decode per
// block per step; does nothing when the plan takes the fast path.
void DecodeKeysForScoring(const KvCachePlan& p, const RopeTable& rope, const LayerState& st, const LaneView& lane,
                          int nb, const uint8_t** kblocks, const uint8_t** tail_keys, KvFormat* key_format,
                          KvFormat* tail_key_format, uint8_t* scratch);

}  // namespace kvedge::kv

#endif  // KVEDGE_KVCACHE_KEY_CODEC_H_
