// Products with the legacy 32-block weights (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL) in the interleaved layout (WeightLayout::kInterleaved16,
// model_kernels.h), compiled once per Highway target, on int8 activations as
// matvec_legacy.cc.
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "platform/target_report.h"  // AvxVnniEnabled
#include "simd/matvec_interleaved.h"
#include "simd/model_kernels.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matvec_interleaved.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

// Per-target helpers.
#include "simd/legacy_int-inl.h"
#include "simd/x86_chain-inl.h"  // KeepChain, PrefetchStreamAhead, StreamAt, DpbusdAvxVnni

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One row per int32 lane: for each block, the codes of 16 rows are a few
// contiguous 64-byte vectors and their 16 scales one 32-byte load, so each
// lane accumulates its row's exact integer block dot, then one convert and
// one FMA with dw·dx — no permutes, no horizontal sums. A matrix is one
// sequential stream; the tiles still prefetch in software along it (8 KiB
// ahead for one vector, 4 KiB for a batch), since a model's matrices are
// short streams, each started cold, and the hardware prefetcher alone ramps
// up late (figures at each tile).
// Every (row, vector) pair runs the same op sequence (blocks in order, one
// f32 FMA each) in MatVec, in every MatMul tile and on every thread count.

// Per format: the lane code of a weight is an unsigned byte u = q + kOffset
// (q the integer code of ref::QuantCode), so a block dot is Σ u·x − kOffset·Σx:
//   Q8_0 stored qs + 128; Q4_0 the nibble (q + 8); Q4_1 the nibble; Q5_0/Q5_1
//   nibble | fifth bit << 4 (Q5_0: q + 16); IQ4_NL the codebook value + 128.
// kMin: w = d·q + m; the min adds m·dx·Σx per block (LaneChunk::sx).
template <class Block>
struct LaneFormat;
template <>
struct LaneFormat<BlockQ8_0> {
  static constexpr WeightType kType = WeightType::kQ8_0;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false;
};
template <>
struct LaneFormat<BlockQ4_0> {
  static constexpr WeightType kType = WeightType::kQ4_0;
  static constexpr int32_t kOffset = 8;
  static constexpr bool kMin = false;
};
template <>
struct LaneFormat<BlockQ4_1> {
  static constexpr WeightType kType = WeightType::kQ4_1;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct LaneFormat<BlockQ5_0> {
  static constexpr WeightType kType = WeightType::kQ5_0;
  static constexpr int32_t kOffset = 16;
  static constexpr bool kMin = false;
};
template <>
struct LaneFormat<BlockQ5_1> {
  static constexpr WeightType kType = WeightType::kQ5_1;
  static constexpr int32_t kOffset = 0;
  static constexpr bool kMin = true;
};
template <>
struct LaneFormat<BlockIQ4_NL> {
  static constexpr WeightType kType = WeightType::kIQ4_NL;
  static constexpr int32_t kOffset = 128;
  static constexpr bool kMin = false;
};
template <class Block>
inline constexpr bool kLaneNibbles = LaneFormat<Block>::kType != WeightType::kQ8_0;
template <class Block>
inline constexpr bool kLaneFifth = InterleavedHasFifthBits(LaneFormat<Block>::kType);
template <class Block>
inline constexpr bool kLaneCodebook = LaneFormat<Block>::kType == WeightType::kIQ4_NL;

// IQ4_NL's codebook + 128 (the unsigned lane codes, 1…241).
alignas(16) inline constexpr uint8_t kIq4nlUnsigned[16] = {
    1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4nlUnsigned[0] == kIq4nlValues[0] + 128 && kIq4nlUnsigned[15] == kIq4nlValues[15] + 128);

// The interleaved kernels quantize activations in chunks of this many
// 32-blocks (6144 columns; the row-layout kernels' kChunkBlocks is 128 blocks,
// 4096 columns): a matrix of up to 6144 columns streams its groups in one
// sequential pass, not one strided pass per chunk. TinyLlama's FFN down (5632
// columns) in one chunk instead of 4096 + 1536:
// MatMul/q4_0.il16/2048x5632/dram/batch:8 ~10 % less time
// (docs/performance.md, twenty-ninth session), although 8 vectors' codes
// (45 KiB) then fill most of L1.
constexpr size_t kLaneChunkBlocks = 192;
constexpr size_t kLaneChunkCols = kLaneChunkBlocks * kQuantBlock;

// One input vector's activations over one column chunk for the interleaved
// kernels: codes in column order (4 consecutive codes are broadcast against
// 4 code bytes of each row), per block −offset·Σ codes, so that unsigned
// lane codes give exact signed dots, and dx·Σ codes for the min term.
struct LaneChunk {
  HWY_ALIGN int8_t q[kLaneChunkCols];        // [chunk cols] int8 codes
  HWY_ALIGN int32_t corr[kLaneChunkBlocks];  // [chunk blocks] −offset·Σ_j q (kLaneOffset)
  HWY_ALIGN float dx[kLaneChunkBlocks];      // [chunk blocks] scales
  HWY_ALIGN float sx[kLaneChunkBlocks];      // [chunk blocks] dx·Σ_j q (kMin formats only)
};

// Column offset (inside a block) of the 4 codes that lane code vector i of a
// block holds (InterleavedColumn, model_kernels.h).
template <class Block>
HWY_INLINE constexpr size_t LaneCodeColumn(size_t i) {
  return InterleavedColumn(LaneFormat<Block>::kType, i);
}

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// The byte `distance` past block cb + b's codes along the stream a tile pass
// reads (StreamAt): the chunk's span of this group (blocks [cb, cb + nb)),
// then the same span of the next group, which the caller's next pass reads.
// (Prefetches past the matrix are dropped, never fault.)
template <WeightType kType>
HWY_INLINE const char* LaneStreamAhead(const uint8_t* group, size_t group_bytes, size_t cb, size_t nb, size_t b,
                                       size_t distance) {
  return StreamAt(group, group_bytes, InterleavedScaleOffset(kType, cb), InterleavedScaleOffset(kType, cb + nb),
                  InterleavedCodeOffset(kType, cb + b) + distance);
}

// Batched decode (MatMul tiles) spends V× longer per block than MatVec, and
// then waits on DRAM without a prefetch 4 KiB ahead of the stream it reads
// (a q4_0 block's 288 bytes: 5 lines). MatMul/q4_0.il16/32000x2048/dram/
// batch:8: AVX3_DL 4.0 → 2.6 ms CPU; on a Zen 5 dispatched to AVX2 with
// AVX-VNNI 6.2 → 4.7 ms, to AVX2 6.7 → 4.7, to AVX3 3.8 → 2.6 (medians of 3,
// side by side); the 8-stream TinyLlama q4_0 step 115 → 88 ms (AVX2 with
// AVX-VNNI) and 129 → 94 ms (AVX2). MatVec is bandwidth-bound and measured
// slower with it. A matrix of several column chunks (FFN down: 5632
// columns) is read chunk by chunk, so near a span's end the stream continues
// in the next group's span, not in this group's next chunk.
template <WeightType kType>
HWY_INLINE void PrefetchTileBlock(const uint8_t* group, size_t group_bytes, size_t cb, size_t nb, size_t b) {
  const char* ahead = LaneStreamAhead<kType>(group, group_bytes, cb, nb, b, 4096);
  for (int l = 0; l < 5; ++l) _mm_prefetch(ahead + 64 * l, _MM_HINT_T0);
}
#endif

#if HWY_TARGET == HWY_AVX3_DL
// acc += vpdpbusd(w, the 4 int8 codes at q broadcast to every lane), with the
// broadcast in the instruction's memory operand ({1to16}): GCC 12 emits a
// separate vpbroadcastd per dot instead (prefill MatMul 8-vector tile: see
// docs/model-kernels.md). The asm reads the 4 bytes at q.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i DpbusdBroadcast(__m512i acc, __m512i w, const int8_t* q) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(w), "m"(*reinterpret_cast<const int32_t*>(q)));
  return acc;
}

// Lane codes on this target: unsigned, u = q + kOffset (LaneFormat).
template <class Block>
inline constexpr int32_t kLaneOffset = LaneFormat<Block>::kOffset;

// GF(2) affine matrix (vgf2p8affineqb) moving bit `from` of each byte to
// bit `to` and clearing the others: output bit j is the parity of x AND
// matrix byte 7 − j.
constexpr long long BitMoveMatrix(int from, int to) {
  return static_cast<long long>(static_cast<unsigned long long>(1u << from) << (8 * (7 - to)));
}

// The block's 8 lane code vectors as unsigned bytes, one row per int32 lane
// (vector i pairs with the activations at LaneCodeColumn(i)):
//   Q8_0: 8 loads as they are;
//   nibble types: 4 loads, each split into 2 vectors (AND for the low
//   nibbles; one GF(2) affine op moves each high nibble down);
//   IQ4_NL: the nibbles through the codebook + 128 (vpermb reads only the
//   low 6 bits of each index, so the table repeated 4 times needs no AND;
//   the high nibbles vpshufb);
//   Q5_0/Q5_1: OR the fifth bit of vector i (bit i of the fifth-bit bytes,
//   one affine op) into bit 4.
// Lane code vectors 2j and 2j + 1 from qs vector j (nibble types); fifth:
// the block's fifth-bit bytes (Q5), table: the codebook + 128 in every
// 128-bit block (IQ4_NL).
template <class Block, int J>
KVEDGE_ATTR_VNNI512 HWY_INLINE void LoadLaneNibbles(const uint8_t* codes, __m512i table, __m512i fifth, __m512i* out) {
  constexpr long long kHighNibble = 0x1020408000000000ll;  // bit i ← bit i + 4
  const __m512i v = _mm512_load_si512(codes + 64 * J);
  __m512i lo, hi = _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(kHighNibble), 0);
  if constexpr (kLaneCodebook<Block>) {
    lo = _mm512_permutexvar_epi8(v, table);
    hi = _mm512_shuffle_epi8(table, hi);
  } else {
    lo = _mm512_and_si512(v, _mm512_set1_epi8(15));
  }
  if constexpr (kLaneFifth<Block>) {
    lo = _mm512_or_si512(lo, _mm512_gf2p8affine_epi64_epi8(fifth, _mm512_set1_epi64(BitMoveMatrix(2 * J, 4)), 0));
    hi = _mm512_or_si512(hi, _mm512_gf2p8affine_epi64_epi8(fifth, _mm512_set1_epi64(BitMoveMatrix(2 * J + 1, 4)), 0));
  }
  out[2 * J] = lo;
  out[2 * J + 1] = hi;
}

template <class Block>
KVEDGE_ATTR_VNNI512 HWY_INLINE void LoadLaneCodes(const uint8_t* codes, __m512i* out) {
  if constexpr (kLaneNibbles<Block>) {
    __m512i table = _mm512_setzero_si512(), fifth = _mm512_setzero_si512();
    if constexpr (kLaneCodebook<Block>) {
      table = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4nlUnsigned)));
    }
    if constexpr (kLaneFifth<Block>) fifth = _mm512_load_si512(codes + 256);
    LoadLaneNibbles<Block, 0>(codes, table, fifth, out);
    LoadLaneNibbles<Block, 1>(codes, table, fifth, out);
    LoadLaneNibbles<Block, 2>(codes, table, fifth, out);
    LoadLaneNibbles<Block, 3>(codes, table, fifth, out);
  } else {
    for (size_t j = 0; j < 8; ++j) out[j] = _mm512_load_si512(codes + 64 * j);
  }
}

// y[v·y_stride + row0 + r] (r < valid_rows) for V vectors over chunk
// blocks [0, nb): group points at the group's bytes (group_bytes each, the
// next group right after), cb is the chunk's first block; the sums continue
// from y when cb > 0 (same order as one pass). xc: the V vectors' chunks, one
// array (one base register for all their broadcasts).
template <class Block, size_t V, bool kVnni = false>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void LaneTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nb,
                                               const LaneChunk* xc, float* y, size_t y_stride, size_t row0,
                                               size_t valid_rows) {
  constexpr size_t kVecs = kQuantBlock / 4;  // code vectors per block: 4 weights per lane each
  const __mmask16 mask = static_cast<__mmask16>((1u << valid_rows) - 1);
  __m512 sum[V];  // in registers: every loop over v is unrolled
#pragma GCC unroll 16
  for (size_t v = 0; v < V; ++v) {
    sum[v] = cb == 0 ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mask, y + v * y_stride + row0);
  }
  constexpr WeightType kType = LaneFormat<Block>::kType;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(group + InterleavedScaleOffset(kType, cb + b));
    __m512i w[kVecs];
    if constexpr (V == 1 && kType != WeightType::kQ8_0) {
      // The block's share of its pair's bytes, kStreamPrefetchBytes ahead.
      // A model's matrices are short streams (0.3–36 MB), each started cold,
      // and the hardware prefetcher alone ramps up late. End to end
      // (TinyLlama shape, 1 thread, Zen 5; `kvedge bench --bound`: decode
      // time ÷ a plain read of the same weights, four interleaved rounds,
      // medians) q4_0 went 1.35x → 1.24x and IQ4_NL 1.39x → 1.29x, but Q8_0
      // 1.19x → 1.26x (9 lines a block: the hardware keeps up, the extra
      // prefetches only cost), so Q8_0 goes without. Q4_1 and Q5_0/Q5_1
      // (5–6 lines a block, like q4_0's 4.5 and IQ4_NL's) take it unmeasured.
      const size_t half = InterleavedPairBytes(kType) / 2;
      PrefetchStreamAhead<kStreamPrefetchBytes>(group, group_bytes, cb * half, (cb + nb) * half, (cb + b) * half,
                                                (cb + b + 1) * half);
    }
    if constexpr (V > 1) PrefetchTileBlock<kType>(group, group_bytes, cb, nb, b);
    LoadLaneCodes<Block>(codes, w);
    const __m512 dw = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(scales)));
    // Code vector outer, input vector inner: V independent vpdpbusd chains
    // in flight (one vector's 8 dots are a dependent chain; in chain order
    // the out-of-order window could not cover enough of them: 8 vectors ×
    // 2048 columns, standalone copy, 213–226 → 256–258 GMAC/s from L3).
    __m512i acc[V];
#pragma GCC unroll 16
    for (size_t v = 0; v < V; ++v) acc[v] = _mm512_set1_epi32(xc[v].corr[b]);
#pragma GCC unroll 8
    for (size_t i = 0; i < kVecs; ++i) {
#pragma GCC unroll 16
      for (size_t v = 0; v < V; ++v) {
        acc[v] = DpbusdBroadcast(acc[v], w[i], xc[v].q + b * kQuantBlock + LaneCodeColumn<Block>(i));
      }
    }
#pragma GCC unroll 16
    for (size_t v = 0; v < V; ++v) {
      const __m512 s = _mm512_mul_ps(dw, _mm512_set1_ps(xc[v].dx[b]));
      sum[v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(acc[v]), s, sum[v]);
    }
    if constexpr (LaneFormat<Block>::kMin) {
      const __m512 mw = _mm512_cvtph_ps(_mm256_load_si256(
          reinterpret_cast<const __m256i*>(group + InterleavedMinOffset(kType, cb + b))));
#pragma GCC unroll 16
      for (size_t v = 0; v < V; ++v) sum[v] = _mm512_fmadd_ps(mw, _mm512_set1_ps(xc[v].sx[b]), sum[v]);
    }
  }
#pragma GCC unroll 16
  for (size_t v = 0; v < V; ++v) _mm512_mask_storeu_ps(y + v * y_stride + row0, mask, sum[v]);
}
constexpr bool kInterleavedPreferred = true;
#elif HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
// AVX2 and AVX-512 without VNNI (Haswell … Alder Lake, Zen 2/3, Skylake-SP):
// the same one-row-per-int32-lane scheme with vpmaddubsw (u8 × s8 pairs →
// int16) and vpmaddwd against ones (→ int32), through raw intrinsics (no
// such op in Highway 1.0.3). 8 rows per 256-bit vector (two halves of a
// group), 16 per 512-bit vector.
//  Q4_0/Q4_1: codes 0…15 × activation codes: a pair sum is ≤ 2·15·127, so
//    the 8 vpmaddubsw of a block add up in int16 (≤ 30480) before one vpmaddwd.
//  Q5_0/Q5_1: codes 0…31 (the fifth bit shifted to bit 4 and ORed in): pairs
//    ≤ 2·31·127, so 4 add up in int16 (≤ 31496), two vpmaddwd per block.
//  Q8_0 and IQ4_NL: signed codes (Q8_0 stored − 128 by xor; IQ4_NL the
//    codebook through vpshufb): |w| × (x with w's sign) keeps every pair
//    ≤ 2·128·127 in int16, each widened by its own vpmaddwd.
// Then the offset sum, one convert and one FMA per block (Q4_1/Q5_1 a
// second FMA for the min), in block order.
constexpr bool kInterleavedPreferred = true;
// Lane codes on this target: Q8_0 and IQ4_NL signed (no offset), the others
// unsigned, u = q + kOffset (LaneFormat).
template <class Block>
inline constexpr int32_t kLaneOffset =
    LaneFormat<Block>::kType == WeightType::kQ8_0 || kLaneCodebook<Block> ? 0 : LaneFormat<Block>::kOffset;
template <class Block>
inline constexpr bool kLaneSigned = LaneFormat<Block>::kType == WeightType::kQ8_0 || kLaneCodebook<Block>;
#if HWY_TARGET == HWY_AVX2
using LaneI = __m256i;
using LaneF = __m256;
constexpr size_t kLaneRows = 8;
HWY_INLINE LaneI LaneLoad(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE LaneI LaneSet8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
HWY_INLINE LaneI LaneSet16(int v) { return _mm256_set1_epi16(static_cast<int16_t>(v)); }
HWY_INLINE LaneI LaneSet32(int32_t v) { return _mm256_set1_epi32(v); }
HWY_INLINE LaneI LaneAnd(LaneI a, LaneI b) { return _mm256_and_si256(a, b); }
HWY_INLINE LaneI LaneXor(LaneI a, LaneI b) { return _mm256_xor_si256(a, b); }
HWY_INLINE LaneI LaneOr(LaneI a, LaneI b) { return _mm256_or_si256(a, b); }
template <int kShift>  // 16-bit lanes, left for kShift > 0, right for < 0
HWY_INLINE LaneI LaneShift16(LaneI a) {
  if constexpr (kShift > 0) return _mm256_slli_epi16(a, kShift);
  if constexpr (kShift < 0) return _mm256_srli_epi16(a, -kShift);
  return a;
}
HWY_INLINE LaneI LaneShr4(LaneI a) { return LaneShift16<-4>(a); }
// Byte shuffle inside each 128-bit block (table: 16 bytes, idx ≤ 15).
HWY_INLINE LaneI LaneTable(const void* table16) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(static_cast<const __m128i*>(table16)));
}
HWY_INLINE LaneI LaneLookup(LaneI table, LaneI idx) { return _mm256_shuffle_epi8(table, idx); }
HWY_INLINE LaneI LaneMulPairs(LaneI u8, LaneI s8) { return _mm256_maddubs_epi16(u8, s8); }
HWY_INLINE LaneI LaneAdd16(LaneI a, LaneI b) { return _mm256_add_epi16(a, b); }
HWY_INLINE LaneI LaneAdd32(LaneI a, LaneI b) { return _mm256_add_epi32(a, b); }
HWY_INLINE LaneI LaneWiden(LaneI a) { return _mm256_madd_epi16(a, LaneSet16(1)); }
// (|w|, x·sign(w)) for signed bytes w.
HWY_INLINE void LaneSignSplit(LaneI w, LaneI x, LaneI* abs_w, LaneI* signed_x) {
  *abs_w = _mm256_abs_epi8(w);
  *signed_x = _mm256_sign_epi8(x, w);
}
HWY_INLINE LaneF LaneScales(const uint8_t* p) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p)));
}
HWY_INLINE LaneF LaneSetF(float v) { return _mm256_set1_ps(v); }
HWY_INLINE LaneF LaneMulF(LaneF a, LaneF b) { return _mm256_mul_ps(a, b); }
HWY_INLINE LaneF LaneFma(LaneI isum, LaneF s, LaneF acc) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), s, acc); }
HWY_INLINE LaneF LaneFmaF(LaneF a, LaneF b, LaneF acc) { return _mm256_fmadd_ps(a, b, acc); }
HWY_INLINE LaneF LaneLoadF(const float* p, size_t n) {
  HWY_ALIGN float tmp[kLaneRows] = {};
  std::copy(p, p + n, tmp);
  return _mm256_load_ps(tmp);
}
HWY_INLINE void LaneStoreF(LaneF v, float* p, size_t n) {
  HWY_ALIGN float tmp[kLaneRows];
  _mm256_store_ps(tmp, v);
  std::copy(tmp, tmp + n, p);
}
#else
using LaneI = __m512i;
using LaneF = __m512;
constexpr size_t kLaneRows = 16;
HWY_INLINE LaneI LaneLoad(const uint8_t* p) { return _mm512_load_si512(p); }
HWY_INLINE LaneI LaneSet8(int v) { return _mm512_set1_epi8(static_cast<char>(v)); }
HWY_INLINE LaneI LaneSet16(int v) { return _mm512_set1_epi16(static_cast<int16_t>(v)); }
HWY_INLINE LaneI LaneSet32(int32_t v) { return _mm512_set1_epi32(v); }
HWY_INLINE LaneI LaneAnd(LaneI a, LaneI b) { return _mm512_and_si512(a, b); }
HWY_INLINE LaneI LaneXor(LaneI a, LaneI b) { return _mm512_xor_si512(a, b); }
HWY_INLINE LaneI LaneOr(LaneI a, LaneI b) { return _mm512_or_si512(a, b); }
template <int kShift>  // 16-bit lanes, left for kShift > 0, right for < 0
HWY_INLINE LaneI LaneShift16(LaneI a) {
  if constexpr (kShift > 0) return _mm512_slli_epi16(a, kShift);
  if constexpr (kShift < 0) return _mm512_srli_epi16(a, -kShift);
  return a;
}
HWY_INLINE LaneI LaneShr4(LaneI a) { return LaneShift16<-4>(a); }
// Byte shuffle inside each 128-bit block (table: 16 bytes, idx ≤ 15).
HWY_INLINE LaneI LaneTable(const void* table16) {
  return _mm512_broadcast_i32x4(_mm_loadu_si128(static_cast<const __m128i*>(table16)));
}
HWY_INLINE LaneI LaneLookup(LaneI table, LaneI idx) { return _mm512_shuffle_epi8(table, idx); }
HWY_INLINE LaneI LaneMulPairs(LaneI u8, LaneI s8) { return _mm512_maddubs_epi16(u8, s8); }
HWY_INLINE LaneI LaneAdd16(LaneI a, LaneI b) { return _mm512_add_epi16(a, b); }
HWY_INLINE LaneI LaneAdd32(LaneI a, LaneI b) { return _mm512_add_epi32(a, b); }
HWY_INLINE LaneI LaneWiden(LaneI a) { return _mm512_madd_epi16(a, LaneSet16(1)); }
// (|w|, x·sign(w)) for signed bytes w (AVX-512 has no vpsignb: negate x
// under w's sign mask; w = 0 contributes 0 through |w| either way).
HWY_INLINE void LaneSignSplit(LaneI w, LaneI x, LaneI* abs_w, LaneI* signed_x) {
  *abs_w = _mm512_abs_epi8(w);
  *signed_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
}
HWY_INLINE LaneF LaneScales(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
}
HWY_INLINE LaneF LaneSetF(float v) { return _mm512_set1_ps(v); }
HWY_INLINE LaneF LaneMulF(LaneF a, LaneF b) { return _mm512_mul_ps(a, b); }
HWY_INLINE LaneF LaneFma(LaneI isum, LaneF s, LaneF acc) { return _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), s, acc); }
HWY_INLINE LaneF LaneFmaF(LaneF a, LaneF b, LaneF acc) { return _mm512_fmadd_ps(a, b, acc); }
HWY_INLINE LaneF LaneLoadF(const float* p, size_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1), p);
}
HWY_INLINE void LaneStoreF(LaneF v, float* p, size_t n) {
  _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
}
#endif

// The block's 8 code vectors for rows [8h, 8h + kLaneRows) of a group as
// unsigned (Q4_0, Q4_1, Q5_0, Q5_1) or signed (Q8_0, IQ4_NL) bytes; vector i
// pairs with the 4 activation codes at LaneCodeColumn(i). Q5: the fifth bit
// of vector i is bit i of its byte, shifted to bit 4 (16-bit shifts move no
// other byte's bit there for shifts ≤ 4) and ORed in.
template <class Block, int J>
HWY_INLINE void LoadLaneNibbles(const uint8_t* codes, size_t h, LaneI table, LaneI fifth, LaneI* out) {
  const LaneI v = LaneLoad(codes + 64 * J + 4 * kLaneRows * h);
  LaneI lo = LaneAnd(v, LaneSet8(15)), hi = LaneAnd(LaneShr4(v), LaneSet8(15));
  if constexpr (kLaneCodebook<Block>) {
    lo = LaneLookup(table, lo);
    hi = LaneLookup(table, hi);
  }
  if constexpr (kLaneFifth<Block>) {
    lo = LaneOr(lo, LaneAnd(LaneShift16<4 - 2 * J>(fifth), LaneSet8(16)));
    hi = LaneOr(hi, LaneAnd(LaneShift16<3 - 2 * J>(fifth), LaneSet8(16)));
  }
  out[2 * J] = lo;
  out[2 * J + 1] = hi;
}

template <class Block>
HWY_INLINE void LoadLaneCodes(const uint8_t* codes, size_t h, LaneI* out) {
  if constexpr (kLaneNibbles<Block>) {
    LaneI table = LaneSet8(0), fifth = LaneSet8(0);
    if constexpr (kLaneCodebook<Block>) table = LaneTable(kIq4nlValues);
    if constexpr (kLaneFifth<Block>) fifth = LaneLoad(codes + 256 + 4 * kLaneRows * h);
    LoadLaneNibbles<Block, 0>(codes, h, table, fifth, out);
    LoadLaneNibbles<Block, 1>(codes, h, table, fifth, out);
    LoadLaneNibbles<Block, 2>(codes, h, table, fifth, out);
    LoadLaneNibbles<Block, 3>(codes, h, table, fifth, out);
  } else {
    for (size_t j = 0; j < 8; ++j) out[j] = LaneXor(LaneLoad(codes + 64 * j + 4 * kLaneRows * h), LaneSet8(0x80));
  }
}

// Σ of the block's exact products for one input vector, per row lane.
// The 4 activation codes code vector i meets, in every lane.
template <class Block>
HWY_INLINE LaneI LaneActivations(const int8_t* q, size_t i) {
  return LaneSet32(LoadU32(q + LaneCodeColumn<Block>(i)));
}

// acc + x (16- or 32-bit lanes) as one link of a chain (KeepChain,
// x86_chain-inl.h); with `line`, the link also prefetches that line.
HWY_INLINE LaneI LaneAddChain16(LaneI acc, LaneI x) { return KeepChain(LaneAdd16(acc, x)); }
HWY_INLINE LaneI LaneAddChain32(LaneI acc, LaneI x) { return KeepChain(LaneAdd32(acc, x)); }
HWY_INLINE LaneI LaneAddChain16(LaneI acc, LaneI x, const char* line) { return KeepChainPrefetch(LaneAdd16(acc, x), line); }
HWY_INLINE LaneI LaneAddChain32(LaneI acc, LaneI x, const char* line) { return KeepChainPrefetch(LaneAdd32(acc, x), line); }

#if HWY_TARGET == HWY_AVX2
// acc += the 4 u8 × s8 products of each int32 lane (DpbusdAvxVnni), exact in
// int32 as vpmaddubsw's int16 pairs summed and widened are when they do not
// saturate, which the lane codes' bounds above rule out.
HWY_INLINE LaneI LaneDotVnni(LaneI acc, LaneI u8, LaneI s8) { return DpbusdAvxVnni(acc, u8, s8); }
#endif

template <class Block>
HWY_INLINE LaneI LaneBlockDot(const LaneI* w, const int8_t* q) {
  if constexpr (kLaneSigned<Block>) {
    LaneI sum = LaneSet32(0);
    for (size_t i = 0; i < 8; ++i) {
      LaneI abs_w, signed_x;
      LaneSignSplit(w[i], LaneActivations<Block>(q, i), &abs_w, &signed_x);
      sum = LaneAddChain32(sum, LaneWiden(LaneMulPairs(abs_w, signed_x)));
    }
    return sum;
  } else {
    // int16 groups of pairs: 8 for codes < 16, 4 for 5-bit codes.
    constexpr size_t kGroup = kLaneFifth<Block> ? 4 : 8;
    LaneI sum = LaneSet32(0);
    for (size_t g = 0; g < 8; g += kGroup) {
      LaneI pairs = LaneMulPairs(w[g], LaneActivations<Block>(q, g));
      for (size_t i = g + 1; i < g + kGroup; ++i) {
        pairs = LaneAddChain16(pairs, LaneMulPairs(w[i], LaneActivations<Block>(q, i)));
      }
      sum = g == 0 ? LaneWiden(pairs) : LaneAdd32(sum, LaneWiden(pairs));
    }
    return sum;
  }
}

// LaneBlockDot, or with AVX-VNNI (kVnni, AVX2 only) one vpdpbusd per code
// vector: signed codes as |w| × (x with w's sign), as LaneBlockDot's.
template <class Block, bool kVnni>
HWY_INLINE LaneI LaneBlockDotT(const LaneI* w, const int8_t* q) {
#if HWY_TARGET == HWY_AVX2
  if constexpr (kVnni) {
    LaneI sum = LaneSet32(0);
    for (size_t i = 0; i < 8; ++i) {
      if constexpr (kLaneSigned<Block>) {
        LaneI abs_w, signed_x;
        LaneSignSplit(w[i], LaneActivations<Block>(q, i), &abs_w, &signed_x);
        sum = LaneDotVnni(sum, abs_w, signed_x);
      } else {
        sum = LaneDotVnni(sum, w[i], LaneActivations<Block>(q, i));
      }
    }
    return sum;
  }
#endif
  return LaneBlockDot<Block>(w, q);
}

#if HWY_TARGET == HWY_AVX2
// MatVec's software prefetch distance along the stream (4 KiB: q8_0/q4_0
// 14.0/11.5 GB/s from DRAM on a Zen-1 core, 8 KiB: 14.5/11.7; without:
// 10.0/7.6 once both halves share the loop below).
constexpr size_t kLanePrefetchBytes = 8192;
// LaneBlockDot for both 8-row halves of a group at once (MatVec): each
// broadcast activation word meets both halves' code vectors, and the sums
// are chains in order, with prefetches of the lines at `ahead` tied to half
// 0's links: kLaneAheadLines of them, at most 7 (Q8_0's 9 lines get 7: that
// is the version measured at 92 % of MemoryRead). isum[h]: half h's exact
// block dots.
template <class Block>
inline constexpr size_t kLaneAheadLines = (InterleavedPairBytes(LaneFormat<Block>::kType) / 2 + 63) / 64;
template <class Block>
HWY_INLINE void LaneBlockDotsBoth(const uint8_t* codes, const int8_t* q, const char* ahead, LaneI* isum) {
  LaneI w[2][8];
  LoadLaneCodes<Block>(codes, 0, w[0]);
  LoadLaneCodes<Block>(codes, 1, w[1]);
  if constexpr (kLaneSigned<Block>) {
    for (size_t i = 0; i < 8; ++i) {
      const LaneI a = LaneActivations<Block>(q, i);
      // IQ4_NL: |x| once for both halves against the level with x's sign
      // (no level is −128); Q8_0's codes can be −128, so |w| against x
      // with w's sign.
      const LaneI abs_a = kLaneCodebook<Block> ? _mm256_abs_epi8(a) : a;
      for (size_t h = 0; h < 2; ++h) {
        LaneI abs_w, signed_x;
        if constexpr (kLaneCodebook<Block>) {
          abs_w = abs_a;
          signed_x = _mm256_sign_epi8(w[h][i], a);
        } else {
          LaneSignSplit(w[h][i], a, &abs_w, &signed_x);
        }
        const LaneI dot = LaneWiden(LaneMulPairs(abs_w, signed_x));
        if (i == 0) {
          isum[h] = dot;
        } else if (h == 0 && i - 1 < kLaneAheadLines<Block>) {
          isum[h] = LaneAddChain32(isum[h], dot, ahead + 64 * (i - 1));
        } else {
          isum[h] = LaneAddChain32(isum[h], dot);
        }
      }
    }
  } else {
    // int16 groups of pairs: 8 for codes < 16, 4 for 5-bit codes.
    constexpr size_t kGroup = kLaneFifth<Block> ? 4 : 8;
    LaneI pairs[2];
    for (size_t i = 0; i < 8; ++i) {
      const LaneI a = LaneActivations<Block>(q, i);
      for (size_t h = 0; h < 2; ++h) {
        const LaneI dot = LaneMulPairs(w[h][i], a);
        if (i % kGroup == 0) {
          pairs[h] = dot;
        } else if (h == 0 && i - 1 < kLaneAheadLines<Block>) {
          pairs[h] = LaneAddChain16(pairs[h], dot, ahead + 64 * (i - 1));
        } else {
          pairs[h] = LaneAddChain16(pairs[h], dot);
        }
        if (i % kGroup == kGroup - 1) isum[h] = i < kGroup ? LaneWiden(pairs[h]) : LaneAdd32(isum[h], LaneWiden(pairs[h]));
      }
    }
  }
}

// Q5_0/Q5_1 (fifth-bit formats) for both halves at once: qs vector J of
// both halves at a time (its two code vectors decoded, each meeting its
// broadcast activation word once for 16 rows), so only 2 code vectors,
// the 2 fifth-bit vectors and 2 int16 chains are live (all 16 code vectors
// at once spilled: 0.75x the half-at-a-time loop, Zen 1). int16 groups of
// 4 code vectors (J = 0, 1 and J = 2, 3), as LaneBlockDot's; half 0's
// links prefetch the lines at `ahead`, one each.
template <class Block, int J>
HWY_INLINE void LaneFifthStep(const uint8_t* codes, const int8_t* q, const char* ahead, const LaneI* fifth,
                              LaneI* pairs, LaneI* isum) {
  const LaneI a_lo = LaneActivations<Block>(q, 2 * J), a_hi = LaneActivations<Block>(q, 2 * J + 1);
  for (size_t h = 0; h < 2; ++h) {
    LaneI w[8];
    LoadLaneNibbles<Block, J>(codes, h, LaneSet8(0), fifth[h], w);
    const LaneI lo = LaneMulPairs(w[2 * J], a_lo), hi = LaneMulPairs(w[2 * J + 1], a_hi);
    // Half 0's links: J even 1 (hi), J odd 2 (lo, hi); 6 over the block.
    constexpr size_t kLine = J == 0 ? 0 : J == 1 ? 1 : J == 2 ? 3 : 4;
    if constexpr (J % 2 == 0) {
      pairs[h] = h == 0 && kLine < kLaneAheadLines<Block> ? LaneAddChain16(lo, hi, ahead + 64 * kLine)
                                                          : LaneAddChain16(lo, hi);
    } else {
      pairs[h] = h == 0 && kLine < kLaneAheadLines<Block> ? LaneAddChain16(pairs[h], lo, ahead + 64 * kLine)
                                                          : LaneAddChain16(pairs[h], lo);
      pairs[h] = h == 0 && kLine + 1 < kLaneAheadLines<Block> ? LaneAddChain16(pairs[h], hi, ahead + 64 * (kLine + 1))
                                                              : LaneAddChain16(pairs[h], hi);
      isum[h] = J == 1 ? LaneWiden(pairs[h]) : LaneAdd32(isum[h], LaneWiden(pairs[h]));
    }
  }
}
template <class Block>
HWY_INLINE void LaneBlockDotsBothFifth(const uint8_t* codes, const int8_t* q, const char* ahead, LaneI* isum) {
  const LaneI fifth[2] = {LaneLoad(codes + 256), LaneLoad(codes + 256 + 4 * kLaneRows)};
  LaneI pairs[2];
  LaneFifthStep<Block, 0>(codes, q, ahead, fifth, pairs, isum);
  LaneFifthStep<Block, 1>(codes, q, ahead, fifth, pairs, isum);
  LaneFifthStep<Block, 2>(codes, q, ahead, fifth, pairs, isum);
  LaneFifthStep<Block, 3>(codes, q, ahead, fifth, pairs, isum);
}
#endif

// As the VNNI LaneTile: y[v·y_stride + row0 + r], r < valid_rows, over chunk
// blocks [0, nb), continuing from y when cb > 0. Unsigned codes count from
// 0 (offset −kOffset·Σx per block); signed ones need no offset.
// AVX2 holds a group in two halves: MatVec (V = 1) takes both per block, so
// the group streams once (half by half it ran at ~half the DRAM speed);
// MatMul tiles take one half per pass. 16 ymm do not hold 8 codes and V
// sums even at V = 4 (GCC keeps the sums on the stack there too), so the
// 8-vector tile shares each half's unpack among twice the vectors for a few
// more spills (MatMul/q4_0.il16/32000x2048/dram/batch:8 5–10% less CPU time
// than two 4-vector tiles, AVX2).
template <class Block, size_t V, bool kVnni = false>
HWY_NOINLINE void LaneTile(const uint8_t* group, size_t group_bytes, size_t cb, size_t nb,
                           const LaneChunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  constexpr WeightType kType = LaneFormat<Block>::kType;
  constexpr size_t kHalves = kInterleaveRows / kLaneRows;
  constexpr size_t kPerPass = V == 1 ? kHalves : 1;  // halves per pass
  for (size_t h0 = 0; h0 * kLaneRows < valid_rows; h0 += kPerPass) {
    size_t rows[kPerPass];  // valid rows of each half in this pass (0: none)
    LaneF sum[kPerPass][V];
    for (size_t i = 0; i < kPerPass; ++i) {
      const size_t first = (h0 + i) * kLaneRows;
      rows[i] = first < valid_rows ? std::min(kLaneRows, valid_rows - first) : 0;
      for (size_t v = 0; v < V; ++v) {
        sum[i][v] = cb == 0 || rows[i] == 0 ? LaneSetF(0.0f) : LaneLoadF(y + v * y_stride + row0 + first, rows[i]);
      }
    }
    for (size_t b = 0; b < nb; ++b) {
      const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
      const uint8_t* scales = group + InterleavedScaleOffset(kType, cb + b);
      // MatMul: the first pass over the group streams it, the second (AVX2's
      // half 1) finds it in cache.
      if constexpr (V > 1) {
        if (h0 == 0) PrefetchTileBlock<kType>(group, group_bytes, cb, nb, b);
      }
#if HWY_TARGET == HWY_AVX2
      // MatVec: both halves at once (LaneBlockDotsBoth; the 5-bit formats
      // one qs vector at a time, LaneBlockDotsBothFifth).
      if constexpr (V == 1) {
        // The stream kLanePrefetchBytes ahead.
        const char* ahead = LaneStreamAhead<kType>(group, group_bytes, cb, nb, b, kLanePrefetchBytes);
        LaneI isum[2];
        if constexpr (kLaneFifth<Block>) {
          LaneBlockDotsBothFifth<Block>(codes, xc[0].q + b * kQuantBlock, ahead, isum);
        } else {
          LaneBlockDotsBoth<Block>(codes, xc[0].q + b * kQuantBlock, ahead, isum);
        }
        for (size_t i = 0; i < 2; ++i) {
          if constexpr (kLaneOffset<Block> != 0) isum[i] = LaneAdd32(isum[i], LaneSet32(xc[0].corr[b]));
          const LaneF dw = LaneScales(scales + 2 * kLaneRows * i);
          sum[i][0] = LaneFma(isum[i], LaneMulF(dw, LaneSetF(xc[0].dx[b])), sum[i][0]);
          if constexpr (LaneFormat<Block>::kMin) {
            const LaneF mw = LaneScales(group + InterleavedMinOffset(kType, cb + b) + 2 * kLaneRows * i);
            sum[i][0] = LaneFmaF(mw, LaneSetF(xc[0].sx[b]), sum[i][0]);
          }
        }
        continue;
      }
#endif
#if HWY_TARGET == HWY_AVX2
      // MatMul tiles of the 4-bit unsigned formats: a code line's two vectors
      // at a time against every vector (V int16 chains and 2 code vectors
      // live, where all 8 code vectors held across the V vectors spilled).
      // With AVX-VNNI (kVnni) one vpdpbusd per code vector and input vector
      // adds the products into int32 lanes (8 per block, against 8
      // vpmaddubsw, 7 int16 adds and a vpmaddwd), from the offset sum on.
      if constexpr (V > 1 && kLaneNibbles<Block> && !kLaneFifth<Block> && !kLaneCodebook<Block>) {
        const LaneF dw = LaneScales(scales + 2 * kLaneRows * h0);
        LaneI acc[V];  // int16 pair chains; kVnni: int32 sums from the offset sum on
        if constexpr (kVnni) {
#pragma GCC unroll 8
          for (size_t v = 0; v < V; ++v) acc[v] = LaneSet32(kLaneOffset<Block> != 0 ? xc[v].corr[b] : 0);
        }
#pragma GCC unroll 4
        for (size_t j = 0; j < 4; ++j) {
          LaneI w[8];
          LoadLaneNibbles<Block, 0>(codes + 64 * j, h0, LaneSet8(0), LaneSet8(0), w);  // w[0], w[1]: vectors 2j, 2j + 1
#pragma GCC unroll 8
          for (size_t v = 0; v < V; ++v) {
            const int8_t* q = xc[v].q + b * kQuantBlock;
            const LaneI a_lo = LaneActivations<Block>(q, 2 * j), a_hi = LaneActivations<Block>(q, 2 * j + 1);
            if constexpr (kVnni) {
              acc[v] = LaneDotVnni(LaneDotVnni(acc[v], w[0], a_lo), w[1], a_hi);
            } else {
              const LaneI lo = LaneMulPairs(w[0], a_lo);
              acc[v] = j == 0 ? lo : LaneAddChain16(acc[v], lo);
              acc[v] = LaneAddChain16(acc[v], LaneMulPairs(w[1], a_hi));
            }
          }
        }
        for (size_t v = 0; v < V; ++v) {
          LaneI isum = acc[v];
          if constexpr (!kVnni) {
            isum = LaneWiden(isum);
            if constexpr (kLaneOffset<Block> != 0) isum = LaneAdd32(isum, LaneSet32(xc[v].corr[b]));
          }
          sum[0][v] = LaneFma(isum, LaneMulF(dw, LaneSetF(xc[v].dx[b])), sum[0][v]);
        }
        if constexpr (LaneFormat<Block>::kMin) {
          const LaneF mw = LaneScales(group + InterleavedMinOffset(kType, cb + b) + 2 * kLaneRows * h0);
          for (size_t v = 0; v < V; ++v) sum[0][v] = LaneFmaF(mw, LaneSetF(xc[v].sx[b]), sum[0][v]);
        }
        continue;
      }
#endif
      for (size_t i = 0; i < kPerPass; ++i) {
        LaneI w[8];
        LoadLaneCodes<Block>(codes, h0 + i, w);
        const LaneF dw = LaneScales(scales + 2 * kLaneRows * (h0 + i));
        for (size_t v = 0; v < V; ++v) {
          LaneI isum = LaneBlockDotT<Block, kVnni>(w, xc[v].q + b * kQuantBlock);
          if constexpr (kLaneOffset<Block> != 0) isum = LaneAdd32(isum, LaneSet32(xc[v].corr[b]));
          sum[i][v] = LaneFma(isum, LaneMulF(dw, LaneSetF(xc[v].dx[b])), sum[i][v]);
        }
        if constexpr (LaneFormat<Block>::kMin) {
          const LaneF mw = LaneScales(group + InterleavedMinOffset(kType, cb + b) + 2 * kLaneRows * (h0 + i));
          for (size_t v = 0; v < V; ++v) sum[i][v] = LaneFmaF(mw, LaneSetF(xc[v].sx[b]), sum[i][v]);
        }
      }
    }
    for (size_t i = 0; i < kPerPass; ++i) {
      if (rows[i] == 0) continue;
      for (size_t v = 0; v < V; ++v) LaneStoreF(sum[i][v], y + v * y_stride + row0 + (h0 + i) * kLaneRows, rows[i]);
    }
  }
}
#else
// Portable form: int16 multiply-adds per sub-vector of rows (the int16 path's
// arithmetic); exact integer dots, the same f32 sequence per (row, vector).
constexpr bool kInterleavedPreferred = false;
// Lane codes on this target: unsigned, u = q + kOffset (LaneFormat).
template <class Block>
inline constexpr int32_t kLaneOffset = LaneFormat<Block>::kOffset;

// isum[r] = corr + Σ_i Σ_{t<4} code(r, i, t)·q[col(i) + t] for the n32 rows
// at sub (exact int32), codes: the block's code bytes.
#if HWY_TARGET == HWY_SCALAR
// Lane code u of byte t of row `sub` in code vector i (LaneFormat).
template <class Block>
HWY_INLINE int32_t LaneCode(const uint8_t* codes, size_t i, size_t sub, size_t t) {
  if constexpr (!kLaneNibbles<Block>) return codes[64 * i + 4 * sub + t];
  const uint8_t byte = codes[64 * (i >> 1) + 4 * sub + t];
  int32_t u = (i & 1) ? byte >> 4 : byte & 15;
  if constexpr (kLaneCodebook<Block>) u = kIq4nlUnsigned[u];
  if constexpr (kLaneFifth<Block>) u |= ((codes[256 + 4 * sub + t] >> i) & 1) << 4;
  return u;
}

template <class Block>
HWY_INLINE void LaneBlockDots(const uint8_t* codes, size_t sub, const int8_t* q, int32_t corr, int32_t* isum) {
  constexpr size_t kVecs = kQuantBlock / 4;  // 4 weights per lane each
  int32_t s = corr;
  for (size_t i = 0; i < kVecs; ++i) {
    const size_t col = LaneCodeColumn<Block>(i);
    for (size_t t = 0; t < 4; ++t) s += LaneCode<Block>(codes, i, sub, t) * q[col + t];
  }
  *isum = s;
}
#else
template <class Block>
HWY_INLINE void LaneBlockDots(const uint8_t* codes, size_t sub, const int8_t* q, int32_t corr, int32_t* isum) {
  constexpr size_t kVecs = kQuantBlock / 4;  // 4 weights per lane each
  const hn::CappedTag<int32_t, kInterleaveRows> di32;
  const hn::Repartition<int16_t, decltype(di32)> di16;
  const hn::Repartition<uint16_t, decltype(di32)> du16;
  const hn::Repartition<uint8_t, decltype(di32)> du8;
  // RearrangeToOddPlusEven pairs lanes on some targets (NEON), so the offset
  // sum is added after it, not preloaded.
  auto s0 = hn::Zero(di32), s1 = hn::Zero(di32);
  for (size_t i = 0; i < kVecs; ++i) {
    const size_t vec = kLaneNibbles<Block> ? i >> 1 : i;
    auto bytes = hn::LoadU(du8, codes + 64 * vec + 4 * sub);
    if constexpr (kLaneNibbles<Block>) {
      bytes = (i & 1) ? hn::ShiftRight<4>(bytes) : hn::And(bytes, hn::Set(du8, 15));
    }
    if constexpr (kLaneCodebook<Block>) bytes = hn::TableLookupBytes(hn::LoadDup128(du8, kIq4nlUnsigned), bytes);
    if constexpr (kLaneFifth<Block>) {
      const auto fifth = hn::LoadU(du8, codes + 256 + 4 * sub);
      const auto bit = hn::Set(du8, static_cast<uint8_t>(1u << i));
      bytes = hn::Or(bytes, hn::IfThenElseZero(hn::TestBit(fifth, bit), hn::Set(du8, 16)));
    }
    // Bytes (b0, b1, b2, b3) of a lane as int16 pairs (b0, b2) and (b1, b3),
    // against codes (q0, q2) and (q1, q3).
    const auto words = hn::BitCast(du16, bytes);
    const auto even = hn::BitCast(di16, hn::And(words, hn::Set(du16, 0xFF)));
    const auto odd = hn::BitCast(di16, hn::ShiftRight<8>(words));
    const int8_t* qc = q + LaneCodeColumn<Block>(i);
    const auto q02 = hn::BitCast(di16, hn::Set(di32, static_cast<int32_t>(static_cast<uint16_t>(qc[0]) |
                                                                         (static_cast<uint32_t>(qc[2]) << 16))));
    const auto q13 = hn::BitCast(di16, hn::Set(di32, static_cast<int32_t>(static_cast<uint16_t>(qc[1]) |
                                                                         (static_cast<uint32_t>(qc[3]) << 16))));
    s0 = hn::ReorderWidenMulAccumulate(di32, even, q02, s0, s1);
    s0 = hn::ReorderWidenMulAccumulate(di32, odd, q13, s0, s1);
  }
  hn::StoreU(hn::Add(hn::RearrangeToOddPlusEven(s0, s1), hn::Set(di32, corr)), di32, isum);
}
#endif  // HWY_TARGET == HWY_SCALAR

template <class Block, size_t V, bool kVnni = false>
HWY_NOINLINE void LaneTile(const uint8_t* group, size_t /*group_bytes*/, size_t cb, size_t nb,
                           const LaneChunk* xc, float* y, size_t y_stride, size_t row0, size_t valid_rows) {
  const hn::CappedTag<float, kInterleaveRows> df;
  const size_t n = hn::Lanes(df);
  HWY_ALIGN float sum[V][kInterleaveRows];  // [vector][row] running sums
  for (size_t v = 0; v < V; ++v) {
    for (size_t r = 0; r < kInterleaveRows; ++r) sum[v][r] = cb == 0 || r >= valid_rows ? 0.0f : y[v * y_stride + row0 + r];
  }
  constexpr WeightType kType = LaneFormat<Block>::kType;
  for (size_t b = 0; b < nb; ++b) {
    const uint8_t* codes = group + InterleavedCodeOffset(kType, cb + b);
    HWY_ALIGN float dw[kInterleaveRows];
    HalvesToFloats(reinterpret_cast<const uint16_t*>(group + InterleavedScaleOffset(kType, cb + b)), dw);
    for (size_t v = 0; v < V; ++v) {
      const int8_t* q = xc[v].q + b * kQuantBlock;
      for (size_t sub = 0; sub < kInterleaveRows; sub += n) {
        HWY_ALIGN int32_t isum[kInterleaveRows];
        LaneBlockDots<Block>(codes, sub, q, xc[v].corr[b], isum);
        const hn::Rebind<int32_t, decltype(df)> di32;
        const auto s = hn::Mul(hn::Load(df, dw + sub), hn::Set(df, xc[v].dx[b]));
        hn::Store(hn::MulAdd(hn::ConvertTo(df, hn::Load(di32, isum)), s, hn::Load(df, sum[v] + sub)), df,
                  sum[v] + sub);
      }
    }
    if constexpr (LaneFormat<Block>::kMin) {
      HWY_ALIGN float mw[kInterleaveRows];
      HalvesToFloats(reinterpret_cast<const uint16_t*>(group + InterleavedMinOffset(kType, cb + b)), mw);
      for (size_t v = 0; v < V; ++v) {
        for (size_t sub = 0; sub < kInterleaveRows; sub += n) {
          hn::Store(hn::MulAdd(hn::Load(df, mw + sub), hn::Set(df, xc[v].sx[b]), hn::Load(df, sum[v] + sub)), df,
                    sum[v] + sub);
        }
      }
    }
  }
  for (size_t v = 0; v < V; ++v) {
    for (size_t r = 0; r < valid_rows; ++r) y[v * y_stride + row0 + r] = sum[v][r];
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

template <class Block>
HWY_NOINLINE void PrepareLaneChunk(const float* x, size_t nb, LaneChunk* c) {
  HWY_ALIGN int16_t q16[kLaneChunkCols];  // [chunk cols] codes in column order
  QuantizeActivations(x, nb, q16, c->dx);
  for (size_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    for (size_t j = 0; j < static_cast<size_t>(kQuantBlock); ++j) {
      const int16_t v = q16[b * kQuantBlock + j];
      c->q[b * kQuantBlock + j] = static_cast<int8_t>(v);
      sum += v;
    }
    c->corr[b] = -kLaneOffset<Block> * sum;
    if constexpr (LaneFormat<Block>::kMin) c->sx[b] = c->dx[b] * static_cast<float>(sum);
  }
}

// Rows [row_begin, row_end) (row_begin a multiple of 16) × n input vectors.
// Y[v][rows]; n == 1 is MatVec. Input tiles of kMatMulTile vectors are
// quantized per column chunk; each group's codes stream once per tile.
template <class Block, bool kVnni = false>
void LaneMatMulRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  const size_t nb_row = m.cols / kQuantBlock;
  const size_t group_bytes = InterleavedGroupBytes(m.type, m.cols);
  const uint8_t* base = static_cast<const uint8_t*>(m.data);
  HWY_ALIGN LaneChunk xc[kMatMulTile];  // [tile vector] chunk activations
  for (size_t v0 = 0; v0 < n; v0 += kMatMulTile) {
    const size_t nv = std::min(kMatMulTile, n - v0);
    for (size_t cb = 0; cb < nb_row; cb += kLaneChunkBlocks) {
      const size_t nb = std::min(kLaneChunkBlocks, nb_row - cb);
      for (size_t v = 0; v < nv; ++v) PrepareLaneChunk<Block>(x + (v0 + v) * m.cols + cb * kQuantBlock, nb, xc + v);
      for (size_t r = row_begin; r < row_end; r += kInterleaveRows) {
        const uint8_t* group = base + (r / kInterleaveRows) * group_bytes;
        const size_t valid = std::min(kInterleaveRows, row_end - r);
        float* yv = y + v0 * m.rows;
        for (size_t v = 0; v < nv;) {
          if (nv - v >= 8) {
            LaneTile<Block, 8, kVnni>(group, group_bytes, cb, nb, xc + v, yv + v * m.rows, m.rows, r, valid);
            v += 8;
          } else if (nv - v >= 4) {
            LaneTile<Block, 4, kVnni>(group, group_bytes, cb, nb, xc + v, yv + v * m.rows, m.rows, r, valid);
            v += 4;
          } else if (nv - v >= 2) {
            LaneTile<Block, 2, kVnni>(group, group_bytes, cb, nb, xc + v, yv + v * m.rows, m.rows, r, valid);
            v += 2;
          } else {
            LaneTile<Block, 1, kVnni>(group, group_bytes, cb, nb, xc + v, yv + v * m.rows, m.rows, r, valid);
            v += 1;
          }
        }
      }
    }
  }
}

// One kernel for MatVec (n = 1) and MatMul.
void InterleavedRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
#if HWY_TARGET == HWY_AVX2
  // The MatMul tiles with AVX-VNNI (LaneTile).
  if (n > 1 && AvxVnniEnabled()) {
    switch (m.type) {
      case WeightType::kQ8_0: return LaneMatMulRows<BlockQ8_0, true>(m, x, n, y, row_begin, row_end);
      case WeightType::kQ4_0: return LaneMatMulRows<BlockQ4_0, true>(m, x, n, y, row_begin, row_end);
      case WeightType::kQ4_1: return LaneMatMulRows<BlockQ4_1, true>(m, x, n, y, row_begin, row_end);
      case WeightType::kQ5_0: return LaneMatMulRows<BlockQ5_0, true>(m, x, n, y, row_begin, row_end);
      case WeightType::kQ5_1: return LaneMatMulRows<BlockQ5_1, true>(m, x, n, y, row_begin, row_end);
      case WeightType::kIQ4_NL: return LaneMatMulRows<BlockIQ4_NL, true>(m, x, n, y, row_begin, row_end);
      default: break;
    }
  }
#endif
  switch (m.type) {
    case WeightType::kQ8_0: return LaneMatMulRows<BlockQ8_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_0: return LaneMatMulRows<BlockQ4_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ4_1: return LaneMatMulRows<BlockQ4_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_0: return LaneMatMulRows<BlockQ5_0>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_1: return LaneMatMulRows<BlockQ5_1>(m, x, n, y, row_begin, row_end);
    case WeightType::kIQ4_NL: return LaneMatMulRows<BlockIQ4_NL>(m, x, n, y, row_begin, row_end);
    default: HWY_ABORT("%s: not an interleavable weight type", WeightTypeName(m.type));
  }
}

bool InterleavedPreferredT() { return kInterleavedPreferred; }

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(InterleavedRowsT);
HWY_EXPORT(InterleavedPreferredT);

void InterleavedRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(InterleavedRowsT)(w, x, n, y, row_begin, row_end);
}

bool InterleavedWeightsPreferred() { return HWY_DYNAMIC_DISPATCH(InterleavedPreferredT)(); }

}  // namespace kvedge
#endif  // HWY_ONCE
