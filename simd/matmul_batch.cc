// Batched-decode K-quant products (Q4_K, Q5_K, Q6_K on Q8_K activations)
// per Highway target. Decode steps S sequences through one pass over the
// weights (BatchDecoder), so MatMul sees a handful of input vectors; the
// single-row kernels (matvec_kquant.cc) would decode every weight
// super-block once per vector and reduce every (row, vector) sum
// horizontally. Here, on AVX-512 VNNI (AVX3_DL), the vectors live in the
// int32 lanes instead: activations are quantized once per call to Q8_K and
// stored transposed ([4 weights][vector] int8), each weight super-block is
// decoded once per 4-row tile into a 256-byte tile of unsigned codes, and
// one vpdpbusd takes 4 codes of a row (broadcast) against 4 activations of
// every vector — no horizontal sums. Per sub-block (32 weights; 16 for
// Q6_K) the lanes' exact int32 sums take the row's scale (vpmulld), so
// S = Σ sc·q·x is exact integer arithmetic, as the single-row path's; the
// mins (Q6_K: the −32 code offset, as 32·Σ sc·bsum) come from the Q8_K sums
// of 16 (vpdpwssd). The f32 fold is ref::MatVecRowsQ8K's, lane by lane:
//   acc = fma(dw·dx, S, acc); acc = fma(−(dmin·dx), M, acc)   (Q6_K: one fma)
// so every (row, vector) result equals MatVec's bit for bit. Up to 8
// vectors run in 256-bit registers (two vpdpbusd a cycle where 512-bit ones
// issue one on Zen 4), 9…16 in 512-bit ones; 2 or 3 vectors take the
// single-row kernel per vector instead (BatchRows).
// Raw intrinsics inside the AVX3_DL target: Highway 1.0.3 has no u8×i8 dot
// product. Other targets forward to KQuantRows (tested on every target).
#include "platform/hwy_target_policy.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "simd/matmul_batch.h"
#include "simd/matvec_kquant.h"
#include "simd/weight_format.h"
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/matmul_batch.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3_DL

constexpr size_t kChunkSb = 16;  // super-blocks of activations prepared per chunk (4096 columns)
constexpr size_t kTileRows = 4;  // weight rows decoded per pass over the chunk's activations

// The 4 code bytes at p as one int32 (to broadcast).
HWY_INLINE int32_t FourCodes(const uint8_t* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Lane traits: L vectors per pass in 256-bit (L = 8) or 512-bit (L = 16)
// registers.
template <size_t L>
struct Lanes;
template <>
struct Lanes<8> {
  using I = __m256i;
  using F = __m256;
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Zero() { return _mm256_setzero_si256(); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Set(int32_t v) { return _mm256_set1_epi32(v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Load(const void* p) { return _mm256_load_si256(static_cast<const I*>(p)); }
  // acc + Σ of the 4 u8 codes at w (broadcast to every lane) × 4 s8
  // activations per lane.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Dot4(I acc, I x, const uint8_t* w) {
    return _mm256_dpbusd_epi32(acc, _mm256_set1_epi32(FourCodes(w)), x);
  }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Dot2x16(I acc, I b, int32_t pair) {
    return _mm256_dpwssd_epi32(acc, b, _mm256_set1_epi32(pair));
  }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Add(I a, I b) { return _mm256_add_epi32(a, b); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Sub(I a, I b) { return _mm256_sub_epi32(a, b); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I MulLo(I a, int32_t s) { return _mm256_mullo_epi32(a, _mm256_set1_epi32(s)); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F ZeroF() { return _mm256_setzero_ps(); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F LoadF(const float* p) { return _mm256_load_ps(p); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE void StoreF(F v, float* p) { _mm256_store_ps(p, v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F MulS(float s, F v) { return _mm256_mul_ps(_mm256_set1_ps(s), v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F Fma(F a, I b, F c) { return _mm256_fmadd_ps(a, _mm256_cvtepi32_ps(b), c); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F Fnma(F a, I b, F c) { return _mm256_fnmadd_ps(a, _mm256_cvtepi32_ps(b), c); }
};
template <>
struct Lanes<16> {
  using I = __m512i;
  using F = __m512;
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Zero() { return _mm512_setzero_si512(); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Set(int32_t v) { return _mm512_set1_epi32(v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Load(const void* p) { return _mm512_load_si512(p); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Dot4(I acc, I x, const uint8_t* w) {
    return _mm512_dpbusd_epi32(acc, _mm512_set1_epi32(FourCodes(w)), x);
  }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Dot2x16(I acc, I b, int32_t pair) {
    return _mm512_dpwssd_epi32(acc, b, _mm512_set1_epi32(pair));
  }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Add(I a, I b) { return _mm512_add_epi32(a, b); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I Sub(I a, I b) { return _mm512_sub_epi32(a, b); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE I MulLo(I a, int32_t s) { return _mm512_mullo_epi32(a, _mm512_set1_epi32(s)); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F ZeroF() { return _mm512_setzero_ps(); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F LoadF(const float* p) { return _mm512_load_ps(p); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE void StoreF(F v, float* p) { _mm512_store_ps(p, v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F MulS(float s, F v) { return _mm512_mul_ps(_mm512_set1_ps(s), v); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F Fma(F a, I b, F c) { return _mm512_fmadd_ps(a, _mm512_cvtepi32_ps(b), c); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE F Fnma(F a, I b, F c) { return _mm512_fnmadd_ps(a, _mm512_cvtepi32_ps(b), c); }
};

// Up to L input vectors' Q8_K activations over one chunk, lane v = vector v
// (lanes past the call's vectors are zero: their sums are 0 and dropped).
template <size_t L>
struct BatchChunk {
  HWY_ALIGN int8_t q[kChunkSb][kSuperBlock / 4][L][4];   // [sb][4-weight group][vector] codes
  HWY_ALIGN int16_t bsum[kChunkSb][8][L][2];             // [sb][pair of 16-sums][vector] Q8_K bsums
  HWY_ALIGN float d[kChunkSb][L];                        // [sb][vector] Q8_K scales
};

// Quantizes vectors x[v·cols …] (v < nv ≤ L) over nsb super-blocks into c.
template <size_t L>
HWY_NOINLINE void PrepareBatchChunk(const float* x, size_t cols, size_t nv, size_t nsb, BatchChunk<L>* c) {
  BlockQ8_K blocks[kChunkSb];
  for (size_t v = 0; v < L; ++v) {
    if (v < nv) {
      QuantizeRowQ8_K(x + v * cols, blocks, nsb * kSuperBlock);
    } else {
      std::fill(blocks, blocks + nsb, BlockQ8_K{});
    }
    for (size_t s = 0; s < nsb; ++s) {
      for (size_t g = 0; g < kSuperBlock / 4; ++g) {
        for (size_t k = 0; k < 4; ++k) c->q[s][g][v][k] = blocks[s].qs[4 * g + k];
      }
      for (size_t p = 0; p < 8; ++p) {
        c->bsum[s][p][v][0] = blocks[s].bsums[2 * p];
        c->bsum[s][p][v][1] = blocks[s].bsums[2 * p + 1];
      }
      c->d[s][v] = blocks[s].d;
    }
  }
}

// One weight super-block, decoded for the lane kernel.
struct DecodedSb {
  HWY_ALIGN uint8_t code[kSuperBlock];  // [256] unsigned codes (Q4_K 0…15, Q5_K 0…31, Q6_K q + 32 = 0…63), weight order
  int32_t sc[16];                      // [sub-block] scale (Q4_K/Q5_K: 8 of 32 weights; Q6_K: 16 of 16)
  int32_t coef[8];                     // [pair of 16-sums] two int16 bsum coefficients, packed
  float d, dmin;
};

template <class Block>
struct SubBlocks {
  static constexpr size_t kLen = 32;  // Q4_K/Q5_K
};
template <>
struct SubBlocks<BlockQ6_K> {
  static constexpr size_t kLen = 16;
};


template <class Block>
KVEDGE_ATTR_VNNI512 HWY_INLINE void Decode(const Block& b, DecodedSb* out) {
  const __m256i k15 = _mm256_set1_epi8(15);
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    const __m256i k3 = _mm256_set1_epi8(3);
    for (size_t h = 0; h < 2; ++h) {
      const __m256i ql0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
      const __m256i ql1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
      const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
      // Bits 2c, 2c+1 of qh[l] are the top bits of weight 32c + l of the
      // half; 16-bit shifts are exact under the per-byte masks.
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(ql0, k15), _mm256_slli_epi16(_mm256_and_si256(qh, k3), 4));
      const __m256i q2 = _mm256_or_si256(_mm256_and_si256(ql1, k15),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), k3), 4));
      const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), k15),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), k3), 4));
      const __m256i q4 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), k15),
                                         _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), k3), 4));
      uint8_t* dst = out->code + 128 * h;
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst), q1);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 32), q2);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 64), q3);
      _mm256_store_si256(reinterpret_cast<__m256i*>(dst + 96), q4);
    }
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
    _mm512_storeu_si512(out->sc, _mm512_cvtepi8_epi32(sc8));
    // int16 pairs (32·sc[2p], 32·sc[2p+1]), little-endian: coef[p].
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->coef), _mm256_slli_epi16(_mm256_cvtepi8_epi16(sc8), 5));
    out->d = _cvtsh_ss(b.d);  // F16C: exact, as HalfToFloat
    out->dmin = 0.0f;
  } else {
    for (size_t j = 0; j < 4; ++j) {
      const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
      __m256i lo = _mm256_and_si256(q, k15);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), k15);
      if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        // Bit j' of qh[l] is the fifth bit of weight 32j' + l.
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh));
        const __m256i k1 = _mm256_set1_epi8(1);
        lo = _mm256_or_si256(lo, _mm256_slli_epi16(
                                     _mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(static_cast<int>(2 * j))), k1), 4));
        hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srl_epi16(h, _mm_cvtsi32_si128(
                                                                                           static_cast<int>(2 * j + 1))),
                                                                    k1),
                                                   4));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->code + 64 * j), lo);
      _mm256_store_si256(reinterpret_cast<__m256i*>(out->code + 64 * j + 32), hi);
    }
    // ggml's get_scale_min_k4 for all 8 sub-blocks with 32-bit word
    // operations (its vec_dot unpacking): bytes 0…7 scales, 8…15 mins.
    constexpr uint32_t kmask1 = 0x3f3f3f3f, kmask2 = 0x0f0f0f0f, kmask3 = 0x03030303;
    uint32_t u[4];
    std::memcpy(u, b.scales, 12);
    u[3] = ((u[2] >> 4) & kmask2) | (((u[1] >> 6) & kmask3) << 4);
    const uint32_t mins_lo = u[1] & kmask1;
    u[1] = (u[2] & kmask2) | (((u[0] >> 6) & kmask3) << 4);
    u[2] = mins_lo;
    u[0] &= kmask1;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(u));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->sc), _mm256_cvtepu8_epi32(v));
    // Sums of 16 2p and 2p+1 are sub-block p's: both take its min.
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out->coef),
                        _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)), _mm256_set1_epi32(0x10001)));
    out->d = _cvtsh_ss(b.d);
    out->dmin = _cvtsh_ss(b.dmin);
  }
}

// y[v·y_stride + r] for v < nv, rows [row_begin, row_end), over chunk
// super-blocks [0, nsb) (the rows' blocks cb …), continuing from y when
// cb > 0.
template <class Block, size_t L>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void BatchChunkRows(const Block* w, size_t nsb_row, size_t cb, size_t nsb,
                                                     const BatchChunk<L>& xc, size_t nv, float* y, size_t y_stride,
                                                     size_t row_begin, size_t row_end) {
  using T = Lanes<L>;
  using I = typename T::I;
  using F = typename T::F;
  constexpr size_t kLen = SubBlocks<Block>::kLen;
  constexpr bool kHasMins = !std::is_same_v<Block, BlockQ6_K>;
  HWY_ALIGN float lanes[L];
  DecodedSb decoded[2][kTileRows];  // [super-block parity][tile row]
  for (size_t r0 = row_begin; r0 < row_end; r0 += kTileRows) {
    const size_t valid = std::min(kTileRows, row_end - r0);
    const Block* row[kTileRows];  // spare rows repeat the last valid one (results dropped)
    for (size_t i = 0; i < kTileRows; ++i) row[i] = w + (r0 + std::min(i, valid - 1)) * nsb_row + cb;
    F acc[kTileRows];
    for (size_t i = 0; i < kTileRows; ++i) {
      if (cb == 0 || i >= valid) {
        acc[i] = T::ZeroF();
      } else {
        for (size_t v = 0; v < L; ++v) lanes[v] = v < nv ? y[v * y_stride + r0 + i] : 0.0f;
        acc[i] = T::LoadF(lanes);
      }
    }
    for (size_t i = 0; i < kTileRows; ++i) Decode(row[i][0], decoded[0] + i);
    for (size_t s = 0; s < nsb; ++s) {
      // The next tile's blocks: its rows follow these (kRows layout), a
      // stream the hardware prefetcher alone follows too late here.
      for (size_t i = 0; i < kTileRows; ++i) {
        const char* next = reinterpret_cast<const char*>(row[i] + kTileRows * nsb_row + s);
        for (size_t l = 0; l < sizeof(Block); l += 64) _mm_prefetch(next + l, _MM_HINT_T0);
      }
      // Decoded one super-block ahead: the tile's stores are long retired
      // when the dot products broadcast from it (reading them back at once
      // stalled on store forwarding: 4-byte loads out of 32-byte stores).
      const DecodedSb* dec = decoded[s & 1];
      if (s + 1 < nsb) {
        for (size_t i = 0; i < kTileRows; ++i) Decode(row[i][s + 1], decoded[(s + 1) & 1] + i);
      }
      I sum[kTileRows], corr[kTileRows];
      for (size_t i = 0; i < kTileRows; ++i) {
        sum[i] = T::Zero();
        corr[i] = T::Zero();
      }
      for (size_t j = 0; j < kSuperBlock / kLen; ++j) {
        I part[2][kTileRows];  // two chains per row (the dot products' latency)
        for (size_t i = 0; i < kTileRows; ++i) part[0][i] = part[1][i] = T::Zero();
        for (size_t g = 0; g < kLen / 4; ++g) {
          const size_t col = j * kLen + 4 * g;
          const I x = T::Load(xc.q[s][col / 4]);
          for (size_t i = 0; i < kTileRows; ++i) part[g & 1][i] = T::Dot4(part[g & 1][i], x, dec[i].code + col);
        }
        for (size_t i = 0; i < kTileRows; ++i) {
          sum[i] = T::Add(sum[i], T::MulLo(T::Add(part[0][i], part[1][i]), dec[i].sc[j]));
        }
      }
      for (size_t p = 0; p < 8; ++p) {
        const I b = T::Load(xc.bsum[s][p]);
        for (size_t i = 0; i < kTileRows; ++i) corr[i] = T::Dot2x16(corr[i], b, dec[i].coef[p]);
      }
      const F dx = T::LoadF(xc.d[s]);
      for (size_t i = 0; i < kTileRows; ++i) {
        if constexpr (kHasMins) {
          acc[i] = T::Fma(T::MulS(dec[i].d, dx), sum[i], acc[i]);
          acc[i] = T::Fnma(T::MulS(dec[i].dmin, dx), corr[i], acc[i]);
        } else {
          acc[i] = T::Fma(T::MulS(dec[i].d, dx), T::Sub(sum[i], corr[i]), acc[i]);
        }
      }
    }
    for (size_t i = 0; i < valid; ++i) {
      T::StoreF(acc[i], lanes);
      for (size_t v = 0; v < nv; ++v) y[v * y_stride + r0 + i] = lanes[v];
    }
  }
}

template <class Block, size_t L>
void BatchRowsOf(const MatrixView& m, const float* x, size_t nv, float* y, size_t row_begin, size_t row_end) {
  const size_t nsb_row = m.cols / kSuperBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/256] super-blocks
  HWY_ALIGN BatchChunk<L> xc;
  for (size_t cb = 0; cb < nsb_row; cb += kChunkSb) {
    const size_t nsb = std::min(kChunkSb, nsb_row - cb);
    PrepareBatchChunk<L>(x + cb * kSuperBlock, m.cols, nv, nsb, &xc);
    BatchChunkRows<Block, L>(w, nsb_row, cb, nsb, xc, nv, y, m.rows, row_begin, row_end);
  }
}

// At most this many vectors run the single-row kernel once per vector over
// row tiles of about kTileBytes of weights, which stay in L2 between the
// vectors' passes (each weight byte still comes from DRAM once). The lane
// kernels cost about as much for 2 vectors as for 8 (their lanes are the
// vectors); the single-row kernel costs one pass per vector (Q4_K,
// 2048×2048, cache-resident, CPU time: MatVec 73 µs, the 8-lane kernel
// ~370 µs at any batch ≤ 8).
constexpr size_t kPerVectorMax = 3;
constexpr size_t kTileBytes = size_t{128} << 10;

template <class Block>
void BatchRows(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  if (n == 1) return KQuantRows(m, x, 1, y, row_begin, row_end);  // MatVec: one uninterrupted stream
  if (n <= kPerVectorMax) {
    const size_t tile = std::max<size_t>(4, kTileBytes / WeightRowBytes(m.type, m.cols));
    for (size_t r0 = row_begin; r0 < row_end; r0 += tile) {
      const size_t r1 = std::min(row_end, r0 + tile);
      for (size_t v = 0; v < n; ++v) KQuantRows(m, x + v * m.cols, 1, y + v * m.rows, r0, r1);
    }
    return;
  }
  for (size_t v0 = 0; v0 < n;) {
    const size_t left = n - v0;
    if (left == 1) {  // a lone vector: the single-row kernel (the same result)
      KQuantRows(m, x + v0 * m.cols, 1, y + v0 * m.rows, row_begin, row_end);
      v0 += 1;
    } else if (left <= 8) {
      BatchRowsOf<Block, 8>(m, x + v0 * m.cols, left, y + v0 * m.rows, row_begin, row_end);
      v0 += left;
    } else {
      const size_t nv = std::min<size_t>(16, left);
      BatchRowsOf<Block, 16>(m, x + v0 * m.cols, nv, y + v0 * m.rows, row_begin, row_end);
      v0 += nv;
    }
  }
}

void KQuantBatchRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  switch (m.type) {
    case WeightType::kQ4_K: return BatchRows<BlockQ4_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ5_K: return BatchRows<BlockQ5_K>(m, x, n, y, row_begin, row_end);
    case WeightType::kQ6_K: return BatchRows<BlockQ6_K>(m, x, n, y, row_begin, row_end);
    default: return KQuantRows(m, x, n, y, row_begin, row_end);  // Q2_K, Q3_K, IQ4_XS: no batched kernel yet
  }
}

#else  // HWY_TARGET != HWY_AVX3_DL

void KQuantBatchRowsT(const MatrixView& m, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  KQuantRows(m, x, n, y, row_begin, row_end);
}

#endif  // HWY_TARGET == HWY_AVX3_DL

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(KQuantBatchRowsT);

void KQuantBatchRows(const MatrixView& w, const float* x, size_t n, float* y, size_t row_begin, size_t row_end) {
  HWY_DYNAMIC_DISPATCH(KQuantBatchRowsT)(w, x, n, y, row_begin, row_end);
}

}  // namespace kvedge
#endif  // HWY_ONCE
