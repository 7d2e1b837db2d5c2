// KV-cache kernels of kv_kernels.h, compiled once per Highway target with
// runtime dispatch: one dispatch per call (a run of blocks), never per block.
#include "platform/hwy_target_policy.h"  // must precede hwy headers

#include <stddef.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "simd/kv_kernels.h"
#include "simd/arm_dotprod.h"
#include "simd/kv_kernels_ref.h"
#include "platform/target_report.h"  // AvxVnniEnabled (the AVX2 kernels' vpdpwssd)
#include "simd/x86_vnni.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "simd/kv_kernels.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr int kG = kKvBlockTokens;
constexpr size_t kHalfG = kKvBlockTokens / 2;

// ---------------------------------------------------------------- helpers

HWY_INLINE float LoadF16Scalar(const uint8_t* p, size_t index) {
  uint16_t h;
  std::memcpy(&h, p + 2 * index, 2);
  return F32FromF16(h);
}

// N f16 values at p (any alignment) widened to f32.
template <class DF>
HWY_INLINE hn::Vec<DF> LoadF16(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
}

// N bytes at p widened to f32 (int8 codes, or int4 bytes masked/shifted by the caller).
template <class DF>
HWY_INLINE hn::Vec<hn::Rebind<int32_t, DF>> LoadBytesAsI32(DF df, const uint8_t* HWY_RESTRICT p) {
  const hn::Rebind<uint8_t, DF> du8;
  const hn::Rebind<int32_t, DF> di;
  return hn::BitCast(di, hn::PromoteTo(hn::Rebind<uint32_t, DF>(), hn::LoadU(du8, p)));
}

// f32 → f16 bits, round to nearest even, for n floats. Vector path for lanes
// that are zero or normal in f16 (all real K/V data); any other lane (f16
// subnormal, overflow, nan) sends its chunk to the exact scalar conversion.
void F16FromF32Array(const float* HWY_RESTRICT src, size_t n, uint16_t* HWY_RESTRICT dst) {
  const hn::CappedTag<float, 16> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto bits = hn::BitCast(di, hn::LoadU(df, src + i));
    const auto abs = hn::And(bits, hn::Set(di, 0x7FFFFFFF));
    const auto is_zero = hn::Eq(abs, hn::Zero(di));
    const auto is_normal = hn::And(hn::Gt(abs, hn::Set(di, 0x387FFFFF)), hn::Lt(abs, hn::Set(di, 0x477FF000)));
    if (!hn::AllTrue(di, hn::Or(is_zero, is_normal))) {
      for (size_t k = 0; k < N; ++k) dst[i + k] = F16FromF32(src[i + k]);
      continue;
    }
    // Rebias 127 → 15 and drop 13 mantissa bits; adding 0xFFF plus the kept
    // lsb before the shift rounds to nearest even.
    const auto lsb = hn::And(hn::ShiftRight<13>(abs), hn::Set(di, 1));
    auto h = hn::ShiftRight<13>(hn::Sub(hn::Add(abs, hn::Add(hn::Set(di, 0xFFF), lsb)), hn::Set(di, 0x38000000)));
    h = hn::IfThenZeroElse(is_zero, h);
    h = hn::Or(h, hn::ShiftRight<16>(hn::And(bits, hn::Set(di, static_cast<int32_t>(0x80000000u)))));
    // The sign shift is arithmetic: keep the low 16 bits only.
    h = hn::And(h, hn::Set(di, 0xFFFF));
    hn::StoreU(hn::DemoteTo(du16, h), du16, dst + i);
  }
  for (; i < n; ++i) dst[i] = F16FromF32(src[i]);
}

// x: [32] f32, one quantization group (a key channel or a value group).
// codes: [32] one code per byte. Same arithmetic as ref::QuantizeGroup, so
// the codes are bit-identical: exact division, round to nearest even.
HWY_INLINE void QuantizeGroup32(const float* HWY_RESTRICT x, int bits, uint8_t* HWY_RESTRICT codes,
                                uint16_t* scale_f16, uint16_t* min_f16) {
  const hn::CappedTag<float, 32> df;
  const hn::Rebind<int32_t, decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t N = hn::Lanes(df);
  auto vmin = hn::LoadU(df, x);
  auto vmax = vmin;
  for (size_t i = N; i < 32; i += N) {
    const auto v = hn::LoadU(df, x + i);
    vmin = hn::Min(vmin, v);
    vmax = hn::Max(vmax, v);
  }
  const float lo = hn::GetLane(hn::MinOfLanes(df, vmin));
  const float hi = hn::GetLane(hn::MaxOfLanes(df, vmax));
  const float max_code = static_cast<float>((1 << bits) - 1);
  *scale_f16 = F16FromF32((hi - lo) / max_code);
  *min_f16 = F16FromF32(lo);
  const float s = F32FromF16(*scale_f16);
  if (s == 0.0f) {  // constant group (or scale below f16 range): all codes 0
    std::memset(codes, 0, 32);
    return;
  }
  const auto vs = hn::Set(df, s);
  const auto vm = hn::Set(df, F32FromF16(*min_f16));
  const auto vhi = hn::Set(df, max_code);
  const auto vzero = hn::Zero(df);
  for (size_t i = 0; i < 32; i += N) {
    auto c = hn::Round(hn::Div(hn::Sub(hn::LoadU(df, x + i), vm), vs));
    c = hn::Min(hn::Max(c, vzero), vhi);
    hn::StoreU(hn::DemoteTo(du8, hn::ConvertTo(di, c)), du8, codes + i);
  }
}

// dst[j] = lo[j] | hi[j] << 4 for j < n (codes < 16).
HWY_INLINE void PackNibbles(const uint8_t* HWY_RESTRICT lo, const uint8_t* HWY_RESTRICT hi, size_t n,
                            uint8_t* HWY_RESTRICT dst) {
  const hn::CappedTag<uint8_t, 16> du8;
  const size_t N = hn::Lanes(du8);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    const auto v = hn::Or(hn::LoadU(du8, lo + j), hn::ShiftLeft<4>(hn::LoadU(du8, hi + j)));
    hn::StoreU(v, du8, dst + j);
  }
  for (; j < n; ++j) dst[j] = static_cast<uint8_t>(lo[j] | (hi[j] << 4));
}

// Inverse of PackNibbles.
HWY_INLINE void UnpackNibbles(const uint8_t* HWY_RESTRICT src, size_t n, uint8_t* HWY_RESTRICT lo,
                              uint8_t* HWY_RESTRICT hi) {
  const hn::CappedTag<uint8_t, 16> du8;
  const size_t N = hn::Lanes(du8);
  const auto mask = hn::Set(du8, 0xF);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    const auto v = hn::LoadU(du8, src + j);
    hn::StoreU(hn::And(v, mask), du8, lo + j);
    hn::StoreU(hn::ShiftRight<4>(v), du8, hi + j);
  }
  for (; j < n; ++j) {
    lo[j] = src[j] & 0xF;
    hi[j] = src[j] >> 4;
  }
}

// dst[i] = s·code[i] + m for 32 codes. Mul then Add (no fusion), as the reference.
HWY_INLINE void DequantizeGroup32(const uint8_t* HWY_RESTRICT codes, float s, float m, float* HWY_RESTRICT dst) {
  const hn::CappedTag<float, 16> df;
  const size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  const auto vm = hn::Set(df, m);
  for (size_t i = 0; i < 32; i += N) {
    const auto c = hn::ConvertTo(df, LoadBytesAsI32(df, codes + i));
    hn::StoreU(hn::Add(hn::Mul(vs, c), vm), df, dst + i);
  }
}

void F32FromF16Array(const uint8_t* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT dst) {
  const hn::CappedTag<float, 16> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(LoadF16(df, src + 2 * i), df, dst + i);
  for (; i < n; ++i) dst[i] = LoadF16Scalar(src, i);
}

// Issues prefetches for every cache line of the blocks the kernel's
// look-ahead adds at block b (KvPrefetchAhead, kv_kernels.h). The hint is L2:
// measured on the AMD EPYC of docs/kernels.md, int4 hd128 cold: L1 hint
// 20.6–22.8 ns/token, L2 hint 17.5–19.5, none 41 (same binary, same run).
HWY_INLINE void PrefetchBlock(const uint8_t* const* blocks, size_t n_blocks, size_t b, size_t bytes) {
  const size_t end = std::min(KvPrefetchAhead(b + 1, bytes), n_blocks);
  for (size_t k = KvPrefetchAhead(b, bytes); k < end; ++k) PrefetchKvBlocks(blocks + k, 1, bytes);
}

// At block b, every line of block b + 1 from L2 (where PrefetchBlock put
// it) into L1. Every x86 kernel here begins a block with loads of its
// scales, mins and first codes that nothing else is ready to overlap: with
// the block in L2 only, a cold int4 lane at depth 16,384
// (DecodeAttentionGqa/int4/hd64/ctx16384/q8) took 329 µs on AVX3_DL and 509
// on AVX2 with AVX-VNNI, with this 234 and 409 (Zen 5, medians of three;
// f16 and the one-query kernels gain too: docs/performance.md, "AVX-VNNI
// on AVX2 CPUs, and the next block in L1"). x86 only: ARM, untimed here,
// keeps the L2 prefetches alone.
HWY_INLINE void PrefetchNextBlockToL1([[maybe_unused]] const uint8_t* const* blocks, [[maybe_unused]] size_t n_blocks,
                                      [[maybe_unused]] size_t b, [[maybe_unused]] size_t bytes) {
#if HWY_ARCH_X86
  if (b + 1 >= n_blocks) return;
  const char* next = reinterpret_cast<const char*>(blocks[b + 1]);
  for (size_t line = 0; line < bytes; line += 64) hwy::Prefetch(next + line);
#endif
}

// ---------------------------------------------------------------- encode/decode

void EncodeKeyBlock(KvFormat f, int d, const float* HWY_RESTRICT src, uint8_t* HWY_RESTRICT block) {
  const size_t n = static_cast<size_t>(d) * kG;
  if (f == KvFormat::kF32) {
    std::memcpy(block, src, n * sizeof(float));
    return;
  }
  if (f == KvFormat::kF16) {
    F16FromF32Array(src, n, reinterpret_cast<uint16_t*>(block));
    return;
  }
  uint8_t* scales = block + KeyBlockScalesOffset(f, d);
  uint8_t* mins = block + KeyBlockMinsOffset(f, d);
  for (int c = 0; c < d; ++c) {
    uint16_t s, m;
    if (f == KvFormat::kInt8) {
      QuantizeGroup32(src + c * kG, 8, block + c * kG, &s, &m);
    } else {
      HWY_ALIGN uint8_t codes[kG];  // [G] one channel, one code per byte
      QuantizeGroup32(src + c * kG, 4, codes, &s, &m);
      PackNibbles(codes, codes + kHalfG, kHalfG, block + c * kHalfG);
    }
    std::memcpy(scales + 2 * c, &s, 2);
    std::memcpy(mins + 2 * c, &m, 2);
  }
}

void DecodeKeyBlock(KvFormat f, int d, const uint8_t* HWY_RESTRICT block, float* HWY_RESTRICT dst) {
  const size_t n = static_cast<size_t>(d) * kG;
  if (f == KvFormat::kF32) {
    std::memcpy(dst, block, n * sizeof(float));
    return;
  }
  if (f == KvFormat::kF16) {
    F32FromF16Array(block, n, dst);
    return;
  }
  const uint8_t* scales = block + KeyBlockScalesOffset(f, d);
  const uint8_t* mins = block + KeyBlockMinsOffset(f, d);
  for (int c = 0; c < d; ++c) {
    HWY_ALIGN uint8_t codes[kG];  // [G] one channel
    const uint8_t* channel = block + c * kG;
    if (f == KvFormat::kInt4) {
      UnpackNibbles(block + c * kHalfG, kHalfG, codes, codes + kHalfG);
      channel = codes;
    }
    DequantizeGroup32(channel, LoadF16Scalar(scales, c), LoadF16Scalar(mins, c), dst + c * kG);
  }
}

void EncodeValueBlock(KvFormat f, int d, const float* HWY_RESTRICT src, uint8_t* HWY_RESTRICT block) {
  const size_t n = static_cast<size_t>(d) * kG;
  if (f == KvFormat::kF32) {
    std::memcpy(block, src, n * sizeof(float));
    return;
  }
  if (f == KvFormat::kF16) {
    F16FromF32Array(src, n, reinterpret_cast<uint16_t*>(block));
    return;
  }
  HWY_ALIGN uint8_t codes[kG * kMaxHeadDim];  // [G][D] one code per byte (int4 only)
  uint8_t* out = f == KvFormat::kInt8 ? block : codes;
  uint8_t* scales = block + ValueBlockScalesOffset(f, d);
  uint8_t* mins = block + ValueBlockMinsOffset(f, d);
  for (size_t g = 0; g < n / kValueGroup; ++g) {
    uint16_t s, m;
    QuantizeGroup32(src + g * kValueGroup, KvCodeBits(f), out + g * kValueGroup, &s, &m);
    std::memcpy(scales + 2 * g, &s, 2);
    std::memcpy(mins + 2 * g, &m, 2);
  }
  if (f == KvFormat::kInt4) {
    const size_t half = static_cast<size_t>(d) / 2;
    for (int t = 0; t < kG; ++t) PackNibbles(codes + t * d, codes + t * d + half, half, block + t * half);
  }
}

void DecodeValueBlock(KvFormat f, int d, const uint8_t* HWY_RESTRICT block, float* HWY_RESTRICT dst) {
  const size_t n = static_cast<size_t>(d) * kG;
  if (f == KvFormat::kF32) {
    std::memcpy(dst, block, n * sizeof(float));
    return;
  }
  if (f == KvFormat::kF16) {
    F32FromF16Array(block, n, dst);
    return;
  }
  HWY_ALIGN uint8_t codes[kG * kMaxHeadDim];  // [G][D] one code per byte (int4 only)
  const uint8_t* in = block;
  if (f == KvFormat::kInt4) {
    const size_t half = static_cast<size_t>(d) / 2;
    for (int t = 0; t < kG; ++t) UnpackNibbles(block + t * half, half, codes + t * d, codes + t * d + half);
    in = codes;
  }
  const uint8_t* scales = block + ValueBlockScalesOffset(f, d);
  const uint8_t* mins = block + ValueBlockMinsOffset(f, d);
  for (size_t g = 0; g < n / kValueGroup; ++g) {
    DequantizeGroup32(in + g * kValueGroup, LoadF16Scalar(scales, g), LoadF16Scalar(mins, g),
                      dst + g * kValueGroup);
  }
}

// ---------------------------------------------------------------- RoPE

// out[2i] = x0·c − x1·s, out[2i+1] = x0·s + x1·c for i < half, where x0/x1
// are the even/odd elements (deinterleaved: x0[i], x1[i]) and c/s = angles.
HWY_INLINE void RotatePairs(size_t half, const float* HWY_RESTRICT x0, const float* HWY_RESTRICT x1,
                            const float* HWY_RESTRICT angles, float* HWY_RESTRICT out) {
  const hn::CappedTag<float, 16> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    const auto a = hn::LoadU(df, x0 + i);
    const auto b = hn::LoadU(df, x1 + i);
    const auto c = hn::LoadU(df, angles + i);
    const auto s = hn::LoadU(df, angles + half + i);
    hn::StoreInterleaved2(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), hn::Add(hn::Mul(a, s), hn::Mul(b, c)), df,
                          out + 2 * i);
  }
  for (; i < half; ++i) {
    const float c = angles[i], s = angles[half + i];
    out[2 * i] = x0[i] * c - x1[i] * s;
    out[2 * i + 1] = x0[i] * s + x1[i] * c;
  }
}

void RopeRotate(int dim, int rope_dim, const float* angles, const float* x, float* out) {
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  HWY_ALIGN float x0[kMaxHeadDim / 2];  // [rope_dim/2] even elements
  HWY_ALIGN float x1[kMaxHeadDim / 2];  // [rope_dim/2] odd elements
  for (size_t i = 0; i < half; ++i) {
    x0[i] = x[2 * i];
    x1[i] = x[2 * i + 1];
  }
  for (int i = static_cast<int>(2 * half); i < dim; ++i) out[i] = x[i];  // before out may alias x
  RotatePairs(half, x0, x1, angles, out);
}

// The angle sum as a complex product, 16 pairs per step (rope_dim 64: two);
// the rest, for half not a multiple of the step, scalar as the reference.
void RopeAnglesSum(int rope_dim, const float* HWY_RESTRICT a, const float* HWY_RESTRICT b,
                   float* HWY_RESTRICT out) {
  const hn::CappedTag<float, 16> df;
  const size_t N = hn::Lanes(df);
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  size_t i = 0;
  for (; i + N <= half; i += N) {
    const auto ca = hn::LoadU(df, a + i), sa = hn::LoadU(df, a + half + i);
    const auto cb = hn::LoadU(df, b + i), sb = hn::LoadU(df, b + half + i);
    hn::StoreU(hn::MulSub(ca, cb, hn::Mul(sa, sb)), df, out + i);
    hn::StoreU(hn::MulAdd(sa, cb, hn::Mul(ca, sb)), df, out + half + i);
  }
  for (; i < half; ++i) {
    out[i] = a[i] * b[i] - a[half + i] * b[half + i];
    out[half + i] = a[half + i] * b[i] + a[i] * b[half + i];
  }
}

// ---------------------------------------------------------------- scores

// One key block: out[t] = scale·(Σ_c qs[c]·code(c, t) + bias) for t < 32.
// load(c, j, a, b) fills a with tokens j..j+N and b with tokens
// j+pair_offset..+N of channel c, as f32. Passes over j cover the 32 tokens;
// channels go four at a time into eight independent accumulators so the FMA
// latency is hidden. d is a multiple of 8. qs: [D] query folded with scales.
// kBytePairs (int4): load gives a = low nibble l, b = the whole byte l + 16·h
// (one conversion fewer than extracting h); the high-nibble tokens' dot is
// then (Σ q·b − Σ q·l)/16, exact in real arithmetic, and the f32 rounding of
// Σ q·b is ~16x that of Σ q·h divided back by 16: same error bound.
template <bool kBytePairs = false, class DF, class LoadFn>
HWY_INLINE void ScoreBlock(DF df, int d, size_t pass_end, size_t pass_step, size_t pair_offset,
                           const float* HWY_RESTRICT qs, float bias, float scale, const LoadFn& load,
                           float* HWY_RESTRICT out) {
  using V = hn::Vec<DF>;
  const V vbias = hn::Set(df, bias);
  const V vscale = hn::Set(df, scale);
  for (size_t j = 0; j < pass_end; j += pass_step) {
    V a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    V b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
    for (int c = 0; c < d; c += 4) {
      V x, y;
      load(c + 0, j, x, y);
      V q = hn::Set(df, qs[c + 0]);
      a0 = hn::MulAdd(q, x, a0);
      b0 = hn::MulAdd(q, y, b0);
      load(c + 1, j, x, y);
      q = hn::Set(df, qs[c + 1]);
      a1 = hn::MulAdd(q, x, a1);
      b1 = hn::MulAdd(q, y, b1);
      load(c + 2, j, x, y);
      q = hn::Set(df, qs[c + 2]);
      a2 = hn::MulAdd(q, x, a2);
      b2 = hn::MulAdd(q, y, b2);
      load(c + 3, j, x, y);
      q = hn::Set(df, qs[c + 3]);
      a3 = hn::MulAdd(q, x, a3);
      b3 = hn::MulAdd(q, y, b3);
    }
    const V a = hn::Add(hn::Add(a0, a1), hn::Add(a2, a3));
    V b = hn::Add(hn::Add(b0, b1), hn::Add(b2, b3));
    if (kBytePairs) b = hn::Mul(hn::Sub(b, a), hn::Set(df, 1.0f / 16));
    hn::StoreU(hn::Mul(hn::Add(a, vbias), vscale), df, out + j);
    hn::StoreU(hn::Mul(hn::Add(b, vbias), vscale), df, out + j + pair_offset);
  }
}

// Quantized keys: qs[c] = qr[c]·scale[c], returns Σ_c qr[c]·min[c].
HWY_INLINE float FoldKeyScales(int d, const float* HWY_RESTRICT qr, const uint8_t* HWY_RESTRICT scales,
                               const uint8_t* HWY_RESTRICT mins, float* HWY_RESTRICT qs) {
  const hn::CappedTag<float, 8> df;  // divides every head dim (multiples of 8)
  const size_t N = hn::Lanes(df);
  auto bias = hn::Zero(df);
  for (size_t c = 0; c < static_cast<size_t>(d); c += N) {
    const auto q = hn::LoadU(df, qr + c);
    hn::StoreU(hn::Mul(q, LoadF16(df, scales + 2 * c)), df, qs + c);
    bias = hn::MulAdd(q, LoadF16(df, mins + 2 * c), bias);
  }
  return hn::GetLane(hn::SumOfLanes(df, bias));
}

void ScoreKeyBlocks(KvFormat f, int d, int rope_dim, const float* HWY_RESTRICT q, const float* HWY_RESTRICT rot,
                    const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks, float scale,
                    float* HWY_RESTRICT scores) {
  const hn::CappedTag<float, 16> df;  // ≤ 16 lanes: divides the 16/32-token runs
  using V = hn::Vec<decltype(df)>;
  const hn::Rebind<int32_t, decltype(df)> di;
  const size_t N = hn::Lanes(df);
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  const size_t block_bytes = KeyBlockBytes(f, d);

  // Per call: the query split into even/odd rotated elements; unrotated tail.
  HWY_ALIGN float q0[kMaxHeadDim / 2];  // [rope_dim/2] q[2i]
  HWY_ALIGN float q1[kMaxHeadDim / 2];  // [rope_dim/2] q[2i+1]
  HWY_ALIGN float qr[kMaxHeadDim];      // [D] R_b q (tail fixed per call)
  HWY_ALIGN float qs[kMaxHeadDim];      // [D] R_b q folded with key scales
  for (size_t i = 0; i < half; ++i) {
    q0[i] = q[2 * i];
    q1[i] = q[2 * i + 1];
  }
  for (int c = static_cast<int>(2 * half); c < d; ++c) qr[c] = q[c];

  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* HWY_RESTRICT block = blocks[b];
    float* HWY_RESTRICT out = scores + b * kG;
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
    RotatePairs(half, q0, q1, rot + b * rope_dim, qr);
    switch (f) {
      case KvFormat::kF32: {
        const float* k = reinterpret_cast<const float*>(block);  // [D][G]
        ScoreBlock(df, d, kG, 2 * N, N, qr, 0.0f, scale,
                   [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                     x = hn::LoadU(df, k + c * kG + j);
                     y = hn::LoadU(df, k + c * kG + j + N);
                   },
                   out);
        break;
      }
      case KvFormat::kF16: {
        ScoreBlock(df, d, kG, 2 * N, N, qr, 0.0f, scale,
                   [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                     x = LoadF16(df, block + 2 * (c * kG + j));
                     y = LoadF16(df, block + 2 * (c * kG + j + N));
                   },
                   out);
        break;
      }
      case KvFormat::kInt8: {
        const float bias = FoldKeyScales(d, qr, block + KeyBlockScalesOffset(f, d),
                                         block + KeyBlockMinsOffset(f, d), qs);
        ScoreBlock(df, d, kG, 2 * N, N, qs, bias, scale,
                   [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                     x = hn::ConvertTo(df, LoadBytesAsI32(df, block + c * kG + j));
                     y = hn::ConvertTo(df, LoadBytesAsI32(df, block + c * kG + j + N));
                   },
                   out);
        break;
      }
      case KvFormat::kInt4: {
        const float bias = FoldKeyScales(d, qr, block + KeyBlockScalesOffset(f, d),
                                         block + KeyBlockMinsOffset(f, d), qs);
        // One byte load gives token j (low nibble) and token j+16 (high).
        ScoreBlock<true>(df, d, kHalfG, N, kHalfG, qs, bias, scale,
                         [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                           const auto bytes = LoadBytesAsI32(df, block + c * kHalfG + j);
                           x = hn::ConvertTo(df, hn::And(bytes, hn::Set(di, 0xF)));
                           y = hn::ConvertTo(df, bytes);
                         },
                         out);
        break;
      }
    }
  }
}

// ---------------------------------------------------------------- multi-query scores

// Queries scored together while one block's codes sit in registers: 8 where
// the ISA has 32 vector registers (2·8 accumulators + codes + broadcast fit),
// 4 on x86 below AVX3 (16 registers; 8 queries would spill accumulators).
#if HWY_ARCH_X86 && HWY_TARGET > HWY_AVX3
constexpr size_t kQueryGroup = 4;
#else
constexpr size_t kQueryGroup = 8;
#endif

// Group sizes the kernels are instantiated for: whole groups, then the rest as
// ≤ 4 (5..7 leftover queries on 8-wide targets go as 4 + rest).
HWY_INLINE size_t NextGroup(size_t remaining) {
  if (remaining >= kQueryGroup) return kQueryGroup;
  return remaining > 4 ? 4 : remaining;
}

// Accumulator slots of the multi-query loops: slot S holds query S % kQ and
// the S / kQ-th of kU unrolled channels (scores) or tokens (values); kU
// gives every group at least 4 independent FMA chains per vector pair
// (kQ = 1 → 4, 2 → 2, else 1), which the FMA latency needs.
template <int kQ>
constexpr int SlotUnroll() {
  return kQ == 1 ? 4 : (kQ == 2 ? 2 : 1);
}

// M(0) … M(7): one expansion per accumulator slot (named variables, not
// arrays: SVE vectors are sizeless, and GCC spilled arrays of them).
#define KVEDGE_EACH_SLOT(M) M(0) M(1) M(2) M(3) M(4) M(5) M(6) M(7)

// Adds the unrolled slots' partial sums into slot i < kQ (slot S holds query
// S % kQ): kQ = 1 sums slots 0..3, kQ = 2 adds slots 2, 3 to 0, 1; larger
// groups have one slot per query.
template <int kQ, class V>
HWY_INLINE void FoldSlots(V& s0, V& s1, V& s2, V& s3) {
  if constexpr (kQ == 1) {
    s0 = hn::Add(hn::Add(s0, s1), hn::Add(s2, s3));
  } else if constexpr (kQ == 2) {
    s0 = hn::Add(s0, s2);
    s1 = hn::Add(s1, s3);
  }
}

// As ScoreBlock, for kQ queries sharing each code load/conversion:
// out[i·out_stride + t] = scale·(Σ_c qs[i][c]·code(c, t) + bias[i]).
// qs: [kQ][kMaxHeadDim] queries rotated (and folded with key scales).
// Accumulators are named variables, not arrays: SVE vectors are sizeless.
#define KVEDGE_SCORE_SLOT(S)                                                  \
  if constexpr ((S) < kQ * kU) {                                              \
    if constexpr ((S) % kQ == 0) load(c + (S) / kQ, j, x, y);                 \
    const V q = hn::Set(df, qs[((S) % kQ) * kMaxHeadDim + c + (S) / kQ]);     \
    a##S = hn::MulAdd(q, x, a##S);                                            \
    b##S = hn::MulAdd(q, y, b##S);                                            \
  }
#define KVEDGE_SCORE_OUT(I) \
  if constexpr ((I) < kQ) finish(a##I, b##I, bias[I], out + (I) * out_stride + j);
template <int kQ, bool kBytePairs, class DF, class LoadFn>
HWY_INLINE void ScoreBlockMulti(DF df, int d, size_t pass_end, size_t pass_step, size_t pair_offset,
                                const float* HWY_RESTRICT qs, const float* HWY_RESTRICT bias, float scale,
                                const LoadFn& load, float* HWY_RESTRICT out, size_t out_stride) {
  using V = hn::Vec<DF>;
  constexpr int kU = SlotUnroll<kQ>();
  const V vscale = hn::Set(df, scale);
  const auto finish = [&](V a, V b, float bias_i, float* HWY_RESTRICT o) HWY_ATTR {
    if (kBytePairs) b = hn::Mul(hn::Sub(b, a), hn::Set(df, 1.0f / 16));
    const V vbias = hn::Set(df, bias_i);
    hn::StoreU(hn::Mul(hn::Add(a, vbias), vscale), df, o);
    hn::StoreU(hn::Mul(hn::Add(b, vbias), vscale), df, o + pair_offset);
  };
  for (size_t j = 0; j < pass_end; j += pass_step) {
    V a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    V a4 = hn::Zero(df), a5 = hn::Zero(df), a6 = hn::Zero(df), a7 = hn::Zero(df);
    V b0 = hn::Zero(df), b1 = hn::Zero(df), b2 = hn::Zero(df), b3 = hn::Zero(df);
    V b4 = hn::Zero(df), b5 = hn::Zero(df), b6 = hn::Zero(df), b7 = hn::Zero(df);
    for (int c = 0; c < d; c += kU) {
      V x, y;
      KVEDGE_EACH_SLOT(KVEDGE_SCORE_SLOT)
    }
    FoldSlots<kQ>(a0, a1, a2, a3);
    FoldSlots<kQ>(b0, b1, b2, b3);
    KVEDGE_EACH_SLOT(KVEDGE_SCORE_OUT)
  }
}
#undef KVEDGE_SCORE_SLOT
#undef KVEDGE_SCORE_OUT

// One block, kQ queries: qs [kQ][kMaxHeadDim] prepared by PrepareQuery.
template <int kQ>
HWY_INLINE void ScoreGroup(KvFormat f, int d, const uint8_t* HWY_RESTRICT block, const float* HWY_RESTRICT qs,
                           const float* HWY_RESTRICT bias, float scale, float* HWY_RESTRICT out, size_t out_stride) {
  const hn::CappedTag<float, 16> df;  // ≤ 16 lanes: divides the 16/32-token runs
  using V = hn::Vec<decltype(df)>;
  const hn::Rebind<int32_t, decltype(df)> di;
  const size_t N = hn::Lanes(df);
  switch (f) {
    case KvFormat::kF32: {
      const float* k = reinterpret_cast<const float*>(block);  // [D][G]
      ScoreBlockMulti<kQ, false>(df, d, kG, 2 * N, N, qs, bias, scale,
                                 [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                                   x = hn::LoadU(df, k + c * kG + j);
                                   y = hn::LoadU(df, k + c * kG + j + N);
                                 },
                                 out, out_stride);
      break;
    }
    case KvFormat::kF16:
      ScoreBlockMulti<kQ, false>(df, d, kG, 2 * N, N, qs, bias, scale,
                                 [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                                   x = LoadF16(df, block + 2 * (c * kG + j));
                                   y = LoadF16(df, block + 2 * (c * kG + j + N));
                                 },
                                 out, out_stride);
      break;
    case KvFormat::kInt8:
      ScoreBlockMulti<kQ, false>(df, d, kG, 2 * N, N, qs, bias, scale,
                                 [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                                   x = hn::ConvertTo(df, LoadBytesAsI32(df, block + c * kG + j));
                                   y = hn::ConvertTo(df, LoadBytesAsI32(df, block + c * kG + j + N));
                                 },
                                 out, out_stride);
      break;
    case KvFormat::kInt4:
      // One byte load gives token j (low nibble) and token j+16 (high).
      ScoreBlockMulti<kQ, true>(df, d, kHalfG, N, kHalfG, qs, bias, scale,
                                [&](int c, size_t j, V& x, V& y) HWY_ATTR {
                                  const auto bytes = LoadBytesAsI32(df, block + c * kHalfG + j);
                                  x = hn::ConvertTo(df, hn::And(bytes, hn::Set(di, 0xF)));
                                  y = hn::ConvertTo(df, bytes);
                                },
                                out, out_stride);
      break;
  }
}

// One block's key scales and mins as f32, split like the rotated query: even
// channels 2i (e0), odd channels 2i+1 (e1) for i < rope_dim/2, then the
// unrotated tail channels. Widened once per block, shared by every query.
struct KeyFoldF32 {
  HWY_ALIGN float s0[kMaxHeadDim / 2], s1[kMaxHeadDim / 2];  // [rope_dim/2] scales
  HWY_ALIGN float m0[kMaxHeadDim / 2], m1[kMaxHeadDim / 2];  // [rope_dim/2] mins
  HWY_ALIGN float s[kMaxHeadDim], m[kMaxHeadDim];            // [D] as stored
};

HWY_INLINE void LoadKeyFold(KvFormat f, int d, size_t half, const uint8_t* HWY_RESTRICT block, KeyFoldF32* k) {
  F32FromF16Array(block + KeyBlockScalesOffset(f, d), static_cast<size_t>(d), k->s);
  F32FromF16Array(block + KeyBlockMinsOffset(f, d), static_cast<size_t>(d), k->m);
  const hn::CappedTag<float, 16> df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    hn::Vec<decltype(df)> a, b;
    hn::LoadInterleaved2(df, k->s + 2 * i, a, b);
    hn::Store(a, df, k->s0 + i);
    hn::Store(b, df, k->s1 + i);
    hn::LoadInterleaved2(df, k->m + 2 * i, a, b);
    hn::Store(a, df, k->m0 + i);
    hn::Store(b, df, k->m1 + i);
  }
  for (; i < half; ++i) {
    k->s0[i] = k->s[2 * i];
    k->s1[i] = k->s[2 * i + 1];
    k->m0[i] = k->m[2 * i];
    k->m1[i] = k->m[2 * i + 1];
  }
}

// qs[c] = (R(angles) q)[c] · scale[c] (kf null: unquantized, factor 1);
// returns Σ_c (R q)[c]·min[c] (0 if unquantized). Rotation and fold in one
// pass over the pairs. q: [D] interleaved pairs, read directly (no per-call
// deinterleaved copy: the kernel takes any nq).
HWY_INLINE float PrepareQuery(int d, size_t half, const float* HWY_RESTRICT q, const float* HWY_RESTRICT angles,
                              const KeyFoldF32* HWY_RESTRICT kf, float* HWY_RESTRICT qs) {
  const hn::CappedTag<float, 16> df;
  using V = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(df);
  V vbias = hn::Zero(df);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    V a, b;
    hn::LoadInterleaved2(df, q + 2 * i, a, b);
    const V c = hn::LoadU(df, angles + i);
    const V s = hn::LoadU(df, angles + half + i);
    V r0 = hn::Sub(hn::Mul(a, c), hn::Mul(b, s));
    V r1 = hn::Add(hn::Mul(a, s), hn::Mul(b, c));
    if (kf != nullptr) {
      vbias = hn::MulAdd(r0, hn::Load(df, kf->m0 + i), hn::MulAdd(r1, hn::Load(df, kf->m1 + i), vbias));
      r0 = hn::Mul(r0, hn::Load(df, kf->s0 + i));
      r1 = hn::Mul(r1, hn::Load(df, kf->s1 + i));
    }
    hn::StoreInterleaved2(r0, r1, df, qs + 2 * i);
  }
  float bias = hn::GetLane(hn::SumOfLanes(df, vbias));
  for (; i < half; ++i) {
    const float c = angles[i], s = angles[half + i];
    float r0 = q[2 * i] * c - q[2 * i + 1] * s;
    float r1 = q[2 * i] * s + q[2 * i + 1] * c;
    if (kf != nullptr) {
      bias += r0 * kf->m0[i] + r1 * kf->m1[i];
      r0 *= kf->s0[i];
      r1 *= kf->s1[i];
    }
    qs[2 * i] = r0;
    qs[2 * i + 1] = r1;
  }
  for (int c = static_cast<int>(2 * half); c < d; ++c) {
    qs[c] = kf != nullptr ? q[c] * kf->s[c] : q[c];
    if (kf != nullptr) bias += q[c] * kf->m[c];
  }
  return bias;
}

#if HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2
// Lane i of the result = the 8-lane tree reduction of y[i] by `op`, for 8
// vectors at once, bit for bit as GCC's _mm512_reduce_{add,max}_ps finishes
// (and the AVX2 kernels' per-vector trees did): 128-bit halves, lane k with
// k + 2, then lanes 0 and 1 (`op` commutative: float add or max). 8-lane
// shuffles instead of one scalar tree and its latency per vector.
template <class Op>
HWY_INLINE __m256 ReduceTree8(const __m256* y, Op op) {
  __m256 z[4];  // [s4 of vector 2k | s4 of vector 2k+1]
  for (int k = 0; k < 4; ++k) {
    z[k] = op(_mm256_permute2f128_ps(y[2 * k], y[2 * k + 1], 0x31), _mm256_permute2f128_ps(y[2 * k], y[2 * k + 1], 0x20));
  }
  __m256 w[2];  // s2 (lane k with lane k+2): [v 4m, v 4m+2 | v 4m+1, v 4m+3], two lanes each
  for (int m = 0; m < 2; ++m) {
    w[m] = op(_mm256_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
              _mm256_shuffle_ps(z[2 * m], z[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Lanes 0 and 1: [v0 v2 v4 v6 | v1 v3 v5 v7], then in order.
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  return _mm256_permutevar8x32_ps(
      op(_mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(2, 0, 2, 0)), _mm256_shuffle_ps(w[0], w[1], _MM_SHUFFLE(3, 1, 3, 1))),
      order);
}
#endif  // HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2

#if HWY_TARGET == HWY_AVX3_DL
// ------------------------------ AVX-512 VNNI scores (int8/int4 keys, nq ≥ 2)
//
// The f32 group kernel above spends 2 FMAs per query, channel and 16 tokens.
// Here, per (query, block), q' = (R_b q)·s (rotation fused with the
// key-scale fold, as PrepareQuery) is rounded to int16 codes with its own
// step δ = max_c |q'_c| / 32767, so q'_c = δ·iq_c + e_c with |e_c| ≤ δ/2, and
// vpdpwssd multiplies token t's codes of a channel pair with the pair's
// query codes, adding both products into int32 lane t: per token an exact
// Σ_c iq_c·code_ct (|Σ| ≤ 32767·255·256 < 2^31). The min term
// Σ_c (R_b q)_c·m_c stays f32, as in the exact path. Score:
//   scale·(δ·Σ_c iq_c·code_ct + Σ_c (R_b q)_c·m_c),
// off the exact score by at most scale·(δ/2)·Σ_c code_ct (tested).
// Why int16 and not int8 queries with vpdpbusd (4 channels per lane, half
// the dot instructions; measured 135 vs … µs, see docs/kernels.md): an int8
// q' errs by up to max|q'|/254 per channel, which for int8 keys (codes up to
// 255) is ~3x the keys' own quantization error in the attention output.
//
// Keys are channel-major; per 4 channels and 32 tokens the decode (shared by
// the group's queries) is a zero-masking byte permute per channel pair and
// token half (int8: 4 vpermb; int4: 2 vpermb of the 64 bytes, then a nibble
// mask and a shift), each query then costs 4 vpdpwssd.

// acc += vpdpwssd(a, broadcast of the int32 at p). GCC 12 does not fold the
// broadcast into the instruction's memory operand ({1to16}); a separate
// vpbroadcastd per dot measured ~10% of the loop.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i DpwssdBroadcast(__m512i acc, __m512i a, const int32_t* p) {
  __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*p));
  return acc;
}

// Pairs (2i, 2i+1) of a pass's queries, even and odd channels apart, zero
// past D/2 up to a whole 16-lane chunk. Filled once per pass.
struct VnniQueries {
  HWY_ALIGN float qe[kQueryGroup][kMaxHeadDim / 2];  // [query][pair] q[2i]
  HWY_ALIGN float qo[kQueryGroup][kMaxHeadDim / 2];  // [query][pair] q[2i+1]
};

// One block's folded queries.
struct VnniFolded {
  HWY_ALIGN float pe[kQueryGroup][kMaxHeadDim / 2];    // [query][pair] q'[2i]
  HWY_ALIGN float po[kQueryGroup][kMaxHeadDim / 2];    // [query][pair] q'[2i+1]
  HWY_ALIGN int32_t iq[kQueryGroup][kMaxHeadDim / 2];  // [query][pair] the pair's two int16 q' codes
  float step[kQueryGroup];                             // [query] δ
  float bias[kQueryGroup];                             // [query] Σ_c (R q)_c·m_c
};
static_assert(kQueryGroup == 8, "ReduceQueries writes 8 lanes");

HWY_INLINE __mmask16 FirstLanes(size_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// The first min(n, 16) 32-bit words at p, zero beyond; reads only those.
// A whole vector is a plain load: on Zen 5 a masked load that misses the
// cache stalled the block fold (AttentionPartGqa/int4/hd64/ctx16384/q8/scores
// from DRAM 180–216 → 126–158 µs, docs/performance.md, twenty-first session).
HWY_INLINE __m512i LoadFirstLanes(size_t n, const void* p) {
  return n >= 16 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi32(FirstLanes(n), p);
}

// Byte permutes: word lanes (2t, 2t+1) of the result hold token t's codes
// of a channel pair, zero-extended (odd bytes masked to zero).
struct VnniKeyPerms {
  uint8_t int4_01[64];  // 4 channels × 16 bytes: channels 0,1, byte t (tokens t and t+16)
  uint8_t int4_23[64];  // channels 2,3
  uint8_t int8_lo[64];  // 2 channels × 32 bytes: tokens t < 16
  uint8_t int8_hi[64];  // tokens 16 + t
  constexpr VnniKeyPerms() : int4_01(), int4_23(), int8_lo(), int8_hi() {
    for (int t = 0; t < 16; ++t) {
      int4_01[4 * t] = static_cast<uint8_t>(t);
      int4_01[4 * t + 2] = static_cast<uint8_t>(16 + t);
      int4_23[4 * t] = static_cast<uint8_t>(32 + t);
      int4_23[4 * t + 2] = static_cast<uint8_t>(48 + t);
      int8_lo[4 * t] = static_cast<uint8_t>(t);
      int8_lo[4 * t + 2] = static_cast<uint8_t>(32 + t);
      int8_hi[4 * t] = static_cast<uint8_t>(16 + t);
      int8_hi[4 * t + 2] = static_cast<uint8_t>(48 + t);
    }
  }
};
constexpr VnniKeyPerms kVnniKeyPerms;
constexpr __mmask64 kEvenBytes = 0x5555555555555555ull;

// Lane i of the results = _mm512_reduce_add_ps(add[i]) and
// _mm512_reduce_max_ps(max[i]) for i < kQ (0 beyond), bit for bit: the
// 256-bit halves, then ReduceTree8 (docs/performance.md: the per-query trees,
// the divisions after them and their latency were a visible share of the
// per-block fold).
template <int kQ>
HWY_INLINE void ReduceQueries(const __m512* add, const __m512* max, __m256* sums, __m256* maxes) {
  __m256 ya[8], ym[8];
  for (int i = 0; i < 8; ++i) {
    const __m512 a = i < kQ ? add[i] : _mm512_setzero_ps();
    const __m512 m = i < kQ ? max[i] : _mm512_setzero_ps();
    ya[i] = _mm256_add_ps(_mm512_extractf32x8_ps(a, 1), _mm512_castps512_ps256(a));
    ym[i] = _mm256_max_ps(_mm512_extractf32x8_ps(m, 1), _mm512_castps512_ps256(m));
  }
  *sums = ReduceTree8(ya, [](__m256 a, __m256 b) { return _mm256_add_ps(a, b); });
  *maxes = ReduceTree8(ym, [](__m256 a, __m256 b) { return _mm256_max_ps(a, b); });
}

// Per lane: step = a/32767 and inv = 32767/a where a > 1e-33 (below,
// 32767/a would overflow: such a vector counts as 0), else 0 — the scalar
// expressions, lane by lane (IEEE division rounds the same either way).
HWY_INLINE void QuantSteps(__m256 a, float* step, float* inv) {
  const __mmask8 live = _mm256_cmp_ps_mask(a, _mm256_set1_ps(1e-33f), _CMP_GT_OQ);
  const __m256 big = _mm256_set1_ps(32767.0f);
  _mm256_storeu_ps(step, _mm256_maskz_div_ps(live, a, big));
  _mm256_storeu_ps(inv, _mm256_maskz_div_ps(live, big, a));
}

// 16 pairs (e_j, o_j) as int16 codes with signed saturation, e in the low
// half of 32-bit lane j: packs gives [e 4L..4L+3, o 4L..4L+3] per 128-bit
// lane L, and a byte shuffle within the lane interleaves them.
HWY_INLINE __m512i PackPairs(__m512i e, __m512i o) {
  const __m512i interleave = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15));
  return _mm512_shuffle_epi8(_mm512_packs_epi32(e, o), interleave);
}

// q' for kQ queries against one block (rope_half = rope_dim/2 rotated pairs,
// the rest identity), then its int16 codes. Angles, scales and mins are
// loaded once per 16 pairs for the whole group.
template <int kQ>
HWY_INLINE void VnniFoldBlock(KvFormat f, int d, size_t rope_half, const uint8_t* HWY_RESTRICT block,
                              const float* HWY_RESTRICT angles, const VnniQueries& q, VnniFolded* HWY_RESTRICT out) {
  const size_t np = static_cast<size_t>(d) / 2;
  const uint8_t* scales = block + KeyBlockScalesOffset(f, d);  // f16 [D], as 32-bit words of pairs
  const uint8_t* mins = block + KeyBlockMinsOffset(f, d);
  const __m512 sign = _mm512_set1_ps(-0.0f);
  __m512 amax[kQ], vb[kQ];
  for (int i = 0; i < kQ; ++i) {
    amax[i] = _mm512_setzero_ps();
    vb[i] = _mm512_setzero_ps();
  }
  for (size_t i0 = 0; i0 < np; i0 += 16) {
    const __m512i sw = LoadFirstLanes(np - i0, scales + 4 * i0);
    const __m512i mw = LoadFirstLanes(np - i0, mins + 4 * i0);
    const __m512 s0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(sw));
    const __m512 s1 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(sw, 16)));
    const __m512 m0 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(mw));
    const __m512 m1 = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(mw, 16)));
    const size_t rope_lanes = rope_half > i0 ? rope_half - i0 : 0;  // rotated pairs in this chunk
    const __m512 c = _mm512_mask_blend_ps(FirstLanes(rope_lanes), _mm512_set1_ps(1.0f),
                                          _mm512_castsi512_ps(LoadFirstLanes(rope_lanes, angles + i0)));
    const __m512 s = _mm512_castsi512_ps(LoadFirstLanes(rope_lanes, angles + rope_half + i0));
    for (int i = 0; i < kQ; ++i) {
      const __m512 a = _mm512_load_ps(q.qe[i] + i0);
      const __m512 b = _mm512_load_ps(q.qo[i] + i0);
      const __m512 r0 = _mm512_fmsub_ps(a, c, _mm512_mul_ps(b, s));
      const __m512 r1 = _mm512_fmadd_ps(a, s, _mm512_mul_ps(b, c));
      vb[i] = _mm512_fmadd_ps(r0, m0, _mm512_fmadd_ps(r1, m1, vb[i]));
      const __m512 p0 = _mm512_mul_ps(r0, s0);
      const __m512 p1 = _mm512_mul_ps(r1, s1);
      _mm512_store_ps(out->pe[i] + i0, p0);
      _mm512_store_ps(out->po[i] + i0, p1);
      amax[i] = _mm512_max_ps(amax[i], _mm512_max_ps(_mm512_andnot_ps(sign, p0), _mm512_andnot_ps(sign, p1)));
    }
  }
  __m256 bias, a;
  ReduceQueries<kQ>(vb, amax, &bias, &a);
  HWY_ALIGN float inv[kQueryGroup];
  _mm256_storeu_ps(out->bias, bias);
  // A q' below ~1e-33 scores as 0 (error ≤ a·Σ code).
  QuantSteps(a, out->step, inv);
  for (int i = 0; i < kQ; ++i) {
    const __m512 vinv = _mm512_set1_ps(inv[i]);
    for (size_t i0 = 0; i0 < np; i0 += 16) {
      const __m512i e = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(out->pe[i] + i0), vinv));
      const __m512i o = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_load_ps(out->po[i] + i0), vinv));
      _mm512_store_si512(out->iq[i] + i0, PackPairs(e, o));
    }
  }
}

// Token t's codes of channel pairs (0,1) and (2,3) of channel quad c4 as
// int16 pairs in int32 lane t: l01/l23 for tokens 0..15, h01/h23 for 16..31.
template <bool kInt4>
KVEDGE_ATTR_VNNI512 HWY_INLINE void VnniKeyQuad(const uint8_t* HWY_RESTRICT block, size_t c4, __m512i perm_a,
                                                __m512i perm_b, __m512i& l01, __m512i& l23, __m512i& h01,
                                                __m512i& h23) {
  if constexpr (kInt4) {  // perm_a / perm_b: pairs (0,1) / (2,3); a word holds one byte
    const __m512i raw = _mm512_loadu_si512(block + 64 * c4);
    const __m512i x01 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_a, raw);
    const __m512i x23 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_b, raw);
    const __m512i nibble = _mm512_set1_epi16(0x0F);
    l01 = _mm512_and_si512(x01, nibble);
    l23 = _mm512_and_si512(x23, nibble);
    h01 = _mm512_srli_epi16(x01, 4);
    h23 = _mm512_srli_epi16(x23, 4);
  } else {  // perm_a / perm_b: tokens 0..15 / 16..31 of a channel pair's 64 bytes
    const __m512i a = _mm512_loadu_si512(block + 128 * c4);
    const __m512i b = _mm512_loadu_si512(block + 128 * c4 + 64);
    l01 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_a, a);
    l23 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_a, b);
    h01 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_b, a);
    h23 = _mm512_maskz_permutexvar_epi8(kEvenBytes, perm_b, b);
  }
}

// out[i·out_stride + t] for kQ queries and the block's 32 tokens. Named
// accumulators (an array updated in a lambda was spilled by GCC).
#define KVEDGE_VNNI_DOT(I)                                                \
  if constexpr ((I) < kQ) {                                               \
    const int32_t* q01 = &fold.iq[I][2 * c4];                             \
    l##I = DpwssdBroadcast(DpwssdBroadcast(l##I, l01, q01), l23, q01 + 1);  \
    h##I = DpwssdBroadcast(DpwssdBroadcast(h##I, h01, q01), h23, q01 + 1);  \
  }
#define KVEDGE_VNNI_OUT(I)                                                                              \
  if constexpr ((I) < kQ) {                                                                             \
    const __m512 st = _mm512_set1_ps(fold.step[I] * scale);                                             \
    const __m512 bs = _mm512_set1_ps(fold.bias[I] * scale);                                             \
    _mm512_storeu_ps(out + (I) * out_stride, _mm512_fmadd_ps(_mm512_cvtepi32_ps(l##I), st, bs));       \
    _mm512_storeu_ps(out + (I) * out_stride + 16, _mm512_fmadd_ps(_mm512_cvtepi32_ps(h##I), st, bs));  \
  }
template <int kQ, bool kInt4>
KVEDGE_ATTR_VNNI512 HWY_INLINE void VnniScoreBlock(int d, const uint8_t* HWY_RESTRICT block,
                                                   const VnniFolded& fold, float scale, float* HWY_RESTRICT out,
                                                   size_t out_stride) {
  const __m512i perm_a = _mm512_loadu_si512(kInt4 ? kVnniKeyPerms.int4_01 : kVnniKeyPerms.int8_lo);
  const __m512i perm_b = _mm512_loadu_si512(kInt4 ? kVnniKeyPerms.int4_23 : kVnniKeyPerms.int8_hi);
  __m512i l0 = _mm512_setzero_si512(), l1 = l0, l2 = l0, l3 = l0, l4 = l0, l5 = l0, l6 = l0, l7 = l0;
  __m512i h0 = l0, h1 = l0, h2 = l0, h3 = l0, h4 = l0, h5 = l0, h6 = l0, h7 = l0;
  const size_t quads = static_cast<size_t>(d) / 4;
  for (size_t c4 = 0; c4 < quads; ++c4) {
    __m512i l01, l23, h01, h23;
    VnniKeyQuad<kInt4>(block, c4, perm_a, perm_b, l01, l23, h01, h23);
    KVEDGE_EACH_SLOT(KVEDGE_VNNI_DOT)
  }
  KVEDGE_EACH_SLOT(KVEDGE_VNNI_OUT)
}
#undef KVEDGE_VNNI_DOT
#undef KVEDGE_VNNI_OUT

template <int kQ>
KVEDGE_ATTR_VNNI512 HWY_INLINE void VnniScoreRun(KvFormat f, int d, size_t rope_half, size_t rope_dim,
                                                 const VnniQueries& q, const float* HWY_RESTRICT rot,
                                                 const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                                 float scale, float* HWY_RESTRICT scores, size_t stride,
                                                 VnniFolded* HWY_RESTRICT fold) {
  const size_t block_bytes = KeyBlockBytes(f, d);
  for (size_t b = 0; b < n_blocks; ++b) {
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
    VnniFoldBlock<kQ>(f, d, rope_half, blocks[b], rot + b * rope_dim, q, fold);
    if (f == KvFormat::kInt4) {
      VnniScoreBlock<kQ, true>(d, blocks[b], *fold, scale, scores + b * kG, stride);
    } else {
      VnniScoreBlock<kQ, false>(d, blocks[b], *fold, scale, scores + b * kG, stride);
    }
  }
}

// Quantized keys, nq ≥ 2: passes of ≤ 8 queries over the run (one pass for
// GQA groups ≤ 8).
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void ScoreKeyBlocksMultiVnni(KvFormat f, int d, int rope_dim,
                                                              const float* HWY_RESTRICT q, size_t nq,
                                                              const float* HWY_RESTRICT rot,
                                                              const uint8_t* const* HWY_RESTRICT blocks,
                                                              size_t n_blocks, float scale,
                                                              float* HWY_RESTRICT scores, size_t stride) {
  const size_t np = static_cast<size_t>(d) / 2;
  const size_t padded = (np + 15) / 16 * 16;
  const size_t rope_half = static_cast<size_t>(rope_dim) / 2;
  VnniQueries qd;
  VnniFolded fold;
  for (size_t p0 = 0; p0 < nq; p0 += kQueryGroup) {
    const size_t g = std::min(kQueryGroup, nq - p0);
    for (size_t i = 0; i < g; ++i) {
      const float* qi = q + (p0 + i) * d;
      for (size_t j = 0; j < padded; ++j) {
        qd.qe[i][j] = j < np ? qi[2 * j] : 0.0f;
        qd.qo[i][j] = j < np ? qi[2 * j + 1] : 0.0f;
      }
    }
    float* out = scores + p0 * stride;
    switch (g) {
      case 1: VnniScoreRun<1>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 2: VnniScoreRun<2>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 3: VnniScoreRun<3>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 4: VnniScoreRun<4>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 5: VnniScoreRun<5>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 6: VnniScoreRun<6>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      case 7: VnniScoreRun<7>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
      default: VnniScoreRun<8>(f, d, rope_half, rope_dim, qd, rot, blocks, n_blocks, scale, out, stride, &fold); break;
    }
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();
#include "simd/kv_kernels_arm-inl.h"  // ArmScoreKeyBlocksMulti, ArmAccumulateValueBlocksMulti (KVEDGE_HWY_ARM_DOT_TARGET)
#include "simd/kv_kernels_avx2-inl.h"  // Avx2ScoreKeyBlocksMulti, Avx2AccumulateValueBlocksMulti (HWY_AVX2)
HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

void ScoreKeyBlocksMulti(KvFormat f, int d, int rope_dim, const float* HWY_RESTRICT q, size_t nq,
                         const float* HWY_RESTRICT rot, const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                         float scale, float* HWY_RESTRICT scores, size_t scores_stride) {
  // One query: the single-query kernel deinterleaves q once per call and
  // folds without widening copies (~15% faster than the group path at nq = 1).
  if (nq == 1) return HWY_NAMESPACE::ScoreKeyBlocks(f, d, rope_dim, q, rot, blocks, n_blocks, scale, scores);
#if HWY_TARGET == HWY_AVX3_DL
  if (IsQuantized(f)) {
    return ScoreKeyBlocksMultiVnni(f, d, rope_dim, q, nq, rot, blocks, n_blocks, scale, scores, scores_stride);
  }
#endif
#if HWY_TARGET == HWY_AVX2
  if (IsQuantized(f)) {
    const auto kernel = f == KvFormat::kInt4 ? (AvxVnniEnabled() ? Avx2ScoreKeyBlocksMulti<true, true>
                                                                   : Avx2ScoreKeyBlocksMulti<true, false>)
                                             : (AvxVnniEnabled() ? Avx2ScoreKeyBlocksMulti<false, true>
                                                                   : Avx2ScoreKeyBlocksMulti<false, false>);
    return kernel(f, d, rope_dim, q, nq, rot, blocks, n_blocks, scale, scores, scores_stride);
  }
#endif
#if KVEDGE_HWY_ARM_DOT_TARGET
  // int8 keys on SVE stay on the f32 kernel: there the integer one (two key
  // copies per quad) cost 0.9 % more instructions per token (SVE-256,
  // docs/performance.md "Attention values on sdot / svdot").
#if HWY_TARGET == HWY_NEON
  if (f == KvFormat::kInt8 && UseArmKvDot()) {
    return ArmScoreKeyBlocksMulti<true>(f, d, rope_dim, q, nq, rot, blocks, n_blocks, scale, scores, scores_stride);
  }
#endif
  if (f == KvFormat::kInt4 && UseArmKvDot()) {
    return ArmScoreKeyBlocksMulti<false>(f, d, rope_dim, q, nq, rot, blocks, n_blocks, scale, scores, scores_stride);
  }
#endif
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  const size_t block_bytes = KeyBlockBytes(f, d);
  const bool quantized = IsQuantized(f);
  HWY_ALIGN float qs[kQueryGroup * kMaxHeadDim];  // [group][kMaxHeadDim] rotated, scale-folded queries
  KeyFoldF32 kf;                                  // the block's scales/mins as f32
  float bias[kQueryGroup];                        // [group] Σ_c qr·min
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* HWY_RESTRICT block = blocks[b];
    const float* HWY_RESTRICT angles = rot + b * rope_dim;
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
    if (quantized) LoadKeyFold(f, d, half, block, &kf);  // shared by every query of the block
    for (size_t q0 = 0; q0 < nq;) {
      const size_t g = NextGroup(nq - q0);
      for (size_t i = 0; i < g; ++i) {
        bias[i] = PrepareQuery(d, half, q + (q0 + i) * d, angles, quantized ? &kf : nullptr, qs + i * kMaxHeadDim);
      }
      float* out = scores + q0 * scores_stride + b * kG;
      switch (g) {
        case 1: ScoreGroup<1>(f, d, block, qs, bias, scale, out, scores_stride); break;
        case 2: ScoreGroup<2>(f, d, block, qs, bias, scale, out, scores_stride); break;
        case 3: ScoreGroup<3>(f, d, block, qs, bias, scale, out, scores_stride); break;
        case 4: ScoreGroup<4>(f, d, block, qs, bias, scale, out, scores_stride); break;
        default: ScoreGroup<kQueryGroup>(f, d, block, qs, bias, scale, out, scores_stride); break;
      }
      q0 += g;
    }
  }
}

bool MultiKernelsQuantize() {
#if KVEDGE_HWY_ARM_DOT_TARGET
  return UseArmKvDot();  // values; scores but SVE's int8 (kv_kernels_arm-inl.h)
#else
  return HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2;  // AVX2: kv_kernels_avx2-inl.h
#endif
}
bool MultiValuesQuantize() {
#if KVEDGE_HWY_ARM_DOT_TARGET
  return UseArmKvDot();
#else
  return HWY_TARGET == HWY_AVX3_DL || HWY_TARGET == HWY_AVX2;
#endif
}

// ---------------------------------------------------------------- values

// out[c0..c0+N) += Σ_t w_t·row_t, where load(p, x) fills x with the N f32
// elements at p, and token t's elements start at row + t·stride bytes.
// Tokens four at a time into independent accumulators; the row pointer
// advances by 4·stride per step (fully unrolled per-token addresses spilled
// registers on AVX2: +15 instructions/token for f16 in callgrind).
template <class DF, class LoadFn>
HWY_INLINE void AccumulateFloatChunk(DF df, const float* HWY_RESTRICT w, const uint8_t* HWY_RESTRICT row,
                                     size_t stride, const LoadFn& load, float* HWY_RESTRICT out) {
  using V = hn::Vec<DF>;
  V a0 = hn::LoadU(df, out), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
  V x;
  for (int t = 0; t < kG; t += 4, row += 4 * stride) {
    load(row, x);
    a0 = hn::MulAdd(hn::Set(df, w[t + 0]), x, a0);
    load(row + stride, x);
    a1 = hn::MulAdd(hn::Set(df, w[t + 1]), x, a1);
    load(row + 2 * stride, x);
    a2 = hn::MulAdd(hn::Set(df, w[t + 2]), x, a2);
    load(row + 3 * stride, x);
    a3 = hn::MulAdd(hn::Set(df, w[t + 3]), x, a3);
  }
  hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), df, out);
}

// Value-weight fold for quantized values, D ≥ 32 (cg = D/32 groups per
// token, D groups per block, group i = t·cg + j belongs to token t = i/cg):
//   ws[i] = w_{i/cg}·scale[i]   (stored: the main loop broadcasts it)
//   wm[i] += w_{i/cg}·min[i]    (accumulated over the whole run; the bias
//                                Σ_t w_t·min of each channel group is reduced
//                                once per call, not per block)
// Vectorised over groups: the weight of each lane comes from one unaligned
// load of the block's weights and a TableLookupLanes with per-call indices
// (lane i → token i/cg − base). The scalar fold this replaces was ~1/3 of
// the value kernel (docs/kernels.md).
template <class DF>
class ValueFold {
 public:
  using V = hn::Vec<DF>;
  ValueFold(DF df, int d) : n_(hn::Lanes(df)), d_(static_cast<size_t>(d)), cg_(static_cast<size_t>(d) / kValueGroup) {
    for (size_t i0 = 0; i0 < d_; i0 += n_) {
      base_[i0 / n_] = i0 / cg_;
      for (size_t lane = 0; lane < n_; ++lane) idx_[i0 + lane] = static_cast<int32_t>((i0 + lane) / cg_ - i0 / cg_);
    }
    for (size_t i = 0; i < d_; ++i) wm_[i] = 0.0f;
  }

  // w: the block's [G] weights; readable up to w[G + N) unless `last`.
  HWY_INLINE void Fold(DF df, const float* HWY_RESTRICT w, bool last, const uint8_t* HWY_RESTRICT scales,
                       const uint8_t* HWY_RESTRICT mins, float* HWY_RESTRICT ws) {
    if (last) {  // the run's final block: the loads below may reach past w[G)
      for (int t = 0; t < kG; ++t) wpad_[t] = w[t];
      w = wpad_;
    }
    for (size_t i0 = 0; i0 < d_; i0 += n_) {
      const V wv = hn::TableLookupLanes(hn::LoadU(df, w + base_[i0 / n_]), hn::SetTableIndices(df, idx_ + i0));
      hn::Store(hn::Mul(wv, LoadF16(df, scales + 2 * i0)), df, ws + i0);
      hn::Store(hn::MulAdd(wv, LoadF16(df, mins + 2 * i0), hn::Load(df, wm_ + i0)), df, wm_ + i0);
    }
  }

  // bias[j] = Σ_t wm[t·cg + j] for j < cg.
  void Bias(float* HWY_RESTRICT bias) const {
    for (size_t j = 0; j < cg_; ++j) bias[j] = 0.0f;
    for (size_t i = 0; i < d_; ++i) bias[i % cg_] += wm_[i];
  }

 private:
  const size_t n_, d_, cg_;
  size_t base_[kMaxHeadDim];            // [D/N] first token of each vector of groups
  HWY_ALIGN int32_t idx_[kMaxHeadDim];  // [D] lane → token − base
  HWY_ALIGN float wm_[kMaxHeadDim];     // [D] Σ over blocks of w·min per group slot
  HWY_ALIGN float wpad_[kG + 16];       // [G + N] last block's weights, padded
};

// D < 32 (8, 16): one group spans 32/D tokens; ws[t] = w_t·scale[t·D/32] and
// the returned Σ_t w_t·min[t·D/32] is the bias of every channel. Scalar: tiny
// heads only.
HWY_INLINE float FoldValueWeightsSmall(int d, const float* HWY_RESTRICT w, const uint8_t* HWY_RESTRICT block,
                                       KvFormat f, float* HWY_RESTRICT ws) {
  const uint8_t* scales = block + ValueBlockScalesOffset(f, d);
  const uint8_t* mins = block + ValueBlockMinsOffset(f, d);
  float sum = 0.0f;
  for (int t = 0; t < kG; ++t) {
    const int g = t * d / kValueGroup;
    ws[t] = w[t] * LoadF16Scalar(scales, g);
    sum += w[t] * LoadF16Scalar(mins, g);
  }
  return sum;
}

// Chunk lanes: DF has N ≤ 16 lanes with N dividing the chunked width.
template <class DF>
void AccumulateBlocksT(DF df, KvFormat f, int d, const float* HWY_RESTRICT weights,
                       const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks, float* HWY_RESTRICT out) {
  using V = hn::Vec<DF>;
  const hn::Rebind<int32_t, DF> di;
  const size_t N = hn::Lanes(df);
  const size_t D = static_cast<size_t>(d);
  const bool small = d < kValueGroup;
  const int cg = small ? 1 : d / kValueGroup;
  const size_t block_bytes = ValueBlockBytes(f, d);
  const bool quantized = IsQuantized(f);
  const size_t scales_offset = quantized ? ValueBlockScalesOffset(f, d) : 0;
  const size_t mins_offset = quantized ? ValueBlockMinsOffset(f, d) : 0;
  HWY_ALIGN float ws[kMaxHeadDim];  // [G][cg] weight × group scale
  float small_bias = 0.0f;          // D < 32: Σ over the run of w·min
  ValueFold<DF> fold(df, small || !quantized ? kValueGroup : d);
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* HWY_RESTRICT block = blocks[b];
    const float* HWY_RESTRICT w = weights + b * kG;
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
    if (quantized) {
      if (small) {
        small_bias += FoldValueWeightsSmall(d, w, block, f, ws);
      } else {
        fold.Fold(df, w, b + 1 == n_blocks, block + scales_offset, block + mins_offset, ws);
      }
    }
    switch (f) {
      case KvFormat::kF32: {
        // [G][D] f32 rows, read through byte pointers (stride 4·D)
        for (size_t c0 = 0; c0 < D; c0 += N) {
          AccumulateFloatChunk(
              df, w, block + 4 * c0, 4 * D,
              [&](const uint8_t* p, V& x) HWY_ATTR { x = hn::LoadU(df, reinterpret_cast<const float*>(p)); },
              out + c0);
        }
        break;
      }
      case KvFormat::kF16: {
        for (size_t c0 = 0; c0 < D; c0 += N) {
          AccumulateFloatChunk(df, w, block + 2 * c0, 2 * D, [&](const uint8_t* p, V& x) HWY_ATTR { x = LoadF16(df, p); },
                               out + c0);
        }
        break;
      }
      case KvFormat::kInt8: {
        for (size_t c0 = 0; c0 < D; c0 += N) {
          const float* HWY_RESTRICT wj = ws + (small ? 0 : c0 / kValueGroup);
          V a0 = hn::LoadU(df, out + c0), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
          for (int t = 0; t < kG; t += 4) {
            const uint8_t* p = block + t * D + c0;
            a0 = hn::MulAdd(hn::Set(df, wj[(t + 0) * cg]), hn::ConvertTo(df, LoadBytesAsI32(df, p)), a0);
            a1 = hn::MulAdd(hn::Set(df, wj[(t + 1) * cg]), hn::ConvertTo(df, LoadBytesAsI32(df, p + D)), a1);
            a2 = hn::MulAdd(hn::Set(df, wj[(t + 2) * cg]), hn::ConvertTo(df, LoadBytesAsI32(df, p + 2 * D)), a2);
            a3 = hn::MulAdd(hn::Set(df, wj[(t + 3) * cg]), hn::ConvertTo(df, LoadBytesAsI32(df, p + 3 * D)), a3);
          }
          hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), df, out + c0);
        }
        break;
      }
      case KvFormat::kInt4: {
        const size_t half = D / 2;
        const auto mask = hn::Set(di, 0xF);
        // Byte j of a token holds channel j (low) and j + D/2 (high).
        for (size_t c0 = 0; c0 < half; c0 += N) {
          const float* HWY_RESTRICT wl = ws + (small ? 0 : c0 / kValueGroup);
          const float* HWY_RESTRICT wh = ws + (small ? 0 : (c0 + half) / kValueGroup);
          V a0 = hn::LoadU(df, out + c0), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
          V h0 = hn::LoadU(df, out + half + c0), h1 = hn::Zero(df), h2 = hn::Zero(df), h3 = hn::Zero(df);
          for (int t = 0; t < kG; t += 4) {
            const uint8_t* p = block + t * half + c0;
            const auto x0 = LoadBytesAsI32(df, p);
            const auto x1 = LoadBytesAsI32(df, p + half);
            const auto x2 = LoadBytesAsI32(df, p + 2 * half);
            const auto x3 = LoadBytesAsI32(df, p + 3 * half);
            a0 = hn::MulAdd(hn::Set(df, wl[(t + 0) * cg]), hn::ConvertTo(df, hn::And(x0, mask)), a0);
            h0 = hn::MulAdd(hn::Set(df, wh[(t + 0) * cg]), hn::ConvertTo(df, hn::ShiftRight<4>(x0)), h0);
            a1 = hn::MulAdd(hn::Set(df, wl[(t + 1) * cg]), hn::ConvertTo(df, hn::And(x1, mask)), a1);
            h1 = hn::MulAdd(hn::Set(df, wh[(t + 1) * cg]), hn::ConvertTo(df, hn::ShiftRight<4>(x1)), h1);
            a2 = hn::MulAdd(hn::Set(df, wl[(t + 2) * cg]), hn::ConvertTo(df, hn::And(x2, mask)), a2);
            h2 = hn::MulAdd(hn::Set(df, wh[(t + 2) * cg]), hn::ConvertTo(df, hn::ShiftRight<4>(x2)), h2);
            a3 = hn::MulAdd(hn::Set(df, wl[(t + 3) * cg]), hn::ConvertTo(df, hn::And(x3, mask)), a3);
            h3 = hn::MulAdd(hn::Set(df, wh[(t + 3) * cg]), hn::ConvertTo(df, hn::ShiftRight<4>(x3)), h3);
          }
          hn::StoreU(hn::Add(hn::Add(a0, a1), hn::Add(a2, a3)), df, out + c0);
          hn::StoreU(hn::Add(hn::Add(h0, h1), hn::Add(h2, h3)), df, out + half + c0);
        }
        break;
      }
    }
  }
  if (!quantized) return;
  // The mins' share, once per call: out[c] += Σ_b Σ_t w·min of c's group.
  if (small) {
    for (size_t c = 0; c < D; ++c) out[c] += small_bias;
    return;
  }
  float bias[kMaxHeadDim / kValueGroup];  // [cg]
  fold.Bias(bias);
  for (size_t c = 0; c < D; ++c) out[c] += bias[c / kValueGroup];
}

// Quantized values whose 32-element groups straddle tokens irregularly (D
// neither divides nor is a multiple of 32: 24, 40, 48, 80, 112…): each block
// is decoded once to f32 [G][D] on the stack and summed by the f32 kernels
// for all nq queries. Costs one extra pass over G·D floats in L1 per block.
bool RegularValueGroups(int d) { return d % kValueGroup == 0 || kValueGroup % d == 0; }

void AccumulateValueBlocksMulti(KvFormat f, int d, const float* HWY_RESTRICT weights, size_t weights_stride,
                                size_t nq, const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                float* HWY_RESTRICT out);

HWY_NOINLINE void AccumulateDecodedValueBlocks(KvFormat f, int d, const float* HWY_RESTRICT weights,
                                               size_t weights_stride, size_t nq,
                                               const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                               float* HWY_RESTRICT out) {
  HWY_ALIGN float decoded[kG * kMaxHeadDim];  // [G][D] one block's values
  const uint8_t* one = reinterpret_cast<const uint8_t*>(decoded);
  for (size_t b = 0; b < n_blocks; ++b) {
    HWY_NAMESPACE::DecodeValueBlock(f, d, blocks[b], decoded);
    HWY_NAMESPACE::AccumulateValueBlocksMulti(KvFormat::kF32, d, weights + b * kG, weights_stride, nq, &one, 1, out);
  }
}

void AccumulateValueBlocks(KvFormat f, int d, const float* HWY_RESTRICT weights,
                           const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks, float* HWY_RESTRICT out) {
  if (IsQuantized(f) && !RegularValueGroups(d)) {
    return AccumulateDecodedValueBlocks(f, d, weights, kG, 1, blocks, n_blocks, out);
  }
  // Chunk width: D for float/int8 codes, D/2 for int4 (low/high halves).
  const int width = f == KvFormat::kInt4 ? d / 2 : d;
  if (width % 16 == 0) {
    AccumulateBlocksT(hn::CappedTag<float, 16>(), f, d, weights, blocks, n_blocks, out);
  } else if (width % 8 == 0) {
    AccumulateBlocksT(hn::CappedTag<float, 8>(), f, d, weights, blocks, n_blocks, out);
  } else {
    AccumulateBlocksT(hn::CappedTag<float, 4>(), f, d, weights, blocks, n_blocks, out);
  }
}

// ---------------------------------------------------------------- multi-query values

// Queries per pass over the blocks in AccumulateValueBlocksMulti: bounds the
// per-call state (the run's w·min sums, [pass][D]). GQA groups are ≤ 8 in
// the Llama family; larger nq (MQA) streams the blocks ceil(nq/8) times.
constexpr size_t kValuePassQueries = 8;

// out_i[c0..c0+N) and out_i[c0+half..+N) += Σ_t w·row_t for kQ queries of
// one block. load(t, x, y) gives token t's elements at c0 (x) and c0 + half
// (y) as f32, decoded once for all kQ queries. Query i's weight of token t
// for x is ws[i·ws_stride + t·cg + gl] (for y: + gh) — weight × group scale
// for quantized values, the raw weight otherwise (cg = 1, gl = gh = 0).
// Named accumulators (SVE vectors are sizeless); slot S holds query S % kQ
// and token offset S / kQ of kU unrolled tokens.
#define KVEDGE_VALUE_SLOT(S)                                                  \
  if constexpr ((S) < kQ * kU) {                                              \
    constexpr int kI = (S) % kQ, kT = (S) / kQ;                               \
    if constexpr (kI == 0) load(t + kT, x, y);                                \
    const float* HWY_RESTRICT wi = ws + kI * ws_stride + (t + kT) * cg;       \
    a##S = hn::MulAdd(hn::Set(df, wi[gl]), x, a##S);                          \
    h##S = hn::MulAdd(hn::Set(df, wi[gh]), y, h##S);                          \
  }
#define KVEDGE_VALUE_INIT(S)                                                            \
  V a##S = hn::Zero(df), h##S = hn::Zero(df);                                           \
  if constexpr ((S) < kQ) {                                                             \
    a##S = hn::LoadU(df, out + (S) * out_stride + c0);                                  \
    h##S = hn::LoadU(df, out + (S) * out_stride + c0 + half);                           \
  }
#define KVEDGE_VALUE_OUT(S)                                                             \
  if constexpr ((S) < kQ) {                                                             \
    hn::StoreU(a##S, df, out + (S) * out_stride + c0);                                  \
    hn::StoreU(h##S, df, out + (S) * out_stride + c0 + half);                           \
  }
template <int kQ, class DF, class LoadFn>
HWY_INLINE void AccumulateChunkMulti(DF df, const float* HWY_RESTRICT ws, size_t ws_stride, size_t cg, size_t gl,
                                     size_t gh, const LoadFn& load, size_t c0, size_t half, float* HWY_RESTRICT out,
                                     size_t out_stride) {
  using V = hn::Vec<DF>;
  constexpr int kU = SlotUnroll<kQ>();
  KVEDGE_EACH_SLOT(KVEDGE_VALUE_INIT)
  for (int t = 0; t < kG; t += kU) {
    V x, y;
    KVEDGE_EACH_SLOT(KVEDGE_VALUE_SLOT)
  }
  FoldSlots<kQ>(a0, a1, a2, a3);
  FoldSlots<kQ>(h0, h1, h2, h3);
  KVEDGE_EACH_SLOT(KVEDGE_VALUE_OUT)
}
#undef KVEDGE_VALUE_SLOT
#undef KVEDGE_VALUE_INIT
#undef KVEDGE_VALUE_OUT

// One block, kQ queries, every channel chunk pair (c0, c0 + D/2).
template <int kQ, class DF>
HWY_INLINE void AccumulateGroup(DF df, KvFormat f, int d, const uint8_t* HWY_RESTRICT block,
                                const float* HWY_RESTRICT ws, size_t ws_stride, size_t cg, bool per_group,
                                float* HWY_RESTRICT out, size_t out_stride) {
  using V = hn::Vec<DF>;
  const hn::Rebind<int32_t, DF> di;
  const size_t N = hn::Lanes(df);
  const size_t D = static_cast<size_t>(d);
  const size_t half = D / 2;
  for (size_t c0 = 0; c0 < half; c0 += N) {
    const size_t gl = per_group ? c0 / kValueGroup : 0;
    const size_t gh = per_group ? (c0 + half) / kValueGroup : 0;
    switch (f) {
      case KvFormat::kF32: {
        const float* v = reinterpret_cast<const float*>(block) + c0;  // [G][D]
        AccumulateChunkMulti<kQ>(df, ws, ws_stride, cg, gl, gh,
                                 [&](int t, V& x, V& y) HWY_ATTR {
                                   x = hn::LoadU(df, v + t * D);
                                   y = hn::LoadU(df, v + t * D + half);
                                 },
                                 c0, half, out, out_stride);
        break;
      }
      case KvFormat::kF16:
        AccumulateChunkMulti<kQ>(df, ws, ws_stride, cg, gl, gh,
                                 [&](int t, V& x, V& y) HWY_ATTR {
                                   x = LoadF16(df, block + 2 * (t * D + c0));
                                   y = LoadF16(df, block + 2 * (t * D + c0 + half));
                                 },
                                 c0, half, out, out_stride);
        break;
      case KvFormat::kInt8:
        AccumulateChunkMulti<kQ>(df, ws, ws_stride, cg, gl, gh,
                                 [&](int t, V& x, V& y) HWY_ATTR {
                                   x = hn::ConvertTo(df, LoadBytesAsI32(df, block + t * D + c0));
                                   y = hn::ConvertTo(df, LoadBytesAsI32(df, block + t * D + c0 + half));
                                 },
                                 c0, half, out, out_stride);
        break;
      case KvFormat::kInt4:
        // Byte j of a token holds channel j (low) and j + D/2 (high).
        AccumulateChunkMulti<kQ>(df, ws, ws_stride, cg, gl, gh,
                                 [&](int t, V& x, V& y) HWY_ATTR {
                                   const auto bytes = LoadBytesAsI32(df, block + t * half + c0);
                                   x = hn::ConvertTo(df, hn::And(bytes, hn::Set(di, 0xF)));
                                   y = hn::ConvertTo(df, hn::ShiftRight<4>(bytes));
                                 },
                                 c0, half, out, out_stride);
        break;
    }
  }
}

// ws[i] = w_{i/cg}·scale[i], wm[i] += w_{i/cg}·min[i] for the D groups of one
// block (D ≥ 32), with the block's scales/mins already widened to f32 (once
// per block, shared by the queries). Same lane → token map as ValueFold.
template <class DF>
class ValueFoldF32 {
 public:
  ValueFoldF32(DF df, int d) : n_(hn::Lanes(df)), d_(static_cast<size_t>(d)), cg_(static_cast<size_t>(d) / kValueGroup) {
    for (size_t i0 = 0; i0 < d_; i0 += n_) {
      base_[i0 / n_] = i0 / cg_;
      for (size_t lane = 0; lane < n_; ++lane) idx_[i0 + lane] = static_cast<int32_t>((i0 + lane) / cg_ - i0 / cg_);
    }
  }

  // w: one query's [G] block weights; readable up to w[G + N) unless `last`.
  HWY_INLINE void Fold(DF df, const float* HWY_RESTRICT w, bool last, const float* HWY_RESTRICT scales,
                       const float* HWY_RESTRICT mins, float* HWY_RESTRICT ws, float* HWY_RESTRICT wm) {
    if (last) {  // the run's final block: the loads below may reach past w[G)
      for (int t = 0; t < kG; ++t) wpad_[t] = w[t];
      w = wpad_;
    }
    for (size_t i0 = 0; i0 < d_; i0 += n_) {
      const auto wv = hn::TableLookupLanes(hn::LoadU(df, w + base_[i0 / n_]), hn::SetTableIndices(df, idx_ + i0));
      hn::Store(hn::Mul(wv, hn::Load(df, scales + i0)), df, ws + i0);
      hn::Store(hn::MulAdd(wv, hn::Load(df, mins + i0), hn::Load(df, wm + i0)), df, wm + i0);
    }
  }

 private:
  const size_t n_, d_, cg_;
  size_t base_[kMaxHeadDim];            // [D/N] first token of each vector of groups
  HWY_ALIGN int32_t idx_[kMaxHeadDim];  // [D] lane → token − base
  HWY_ALIGN float wpad_[kG + 16];       // [G + N] last block's weights, padded
};

// Chunk lanes: DF has N ≤ 16 lanes with N dividing D/2.
template <class DF>
void AccumulateBlocksMultiT(DF df, KvFormat f, int d, const float* HWY_RESTRICT weights, size_t weights_stride,
                            size_t nq, const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                            float* HWY_RESTRICT out) {
  const size_t D = static_cast<size_t>(d);
  const bool quantized = IsQuantized(f);
  const bool small = d < kValueGroup;
  const bool per_group = quantized && !small;  // ws holds [G][cg] weight × scale
  const size_t cg = per_group ? D / kValueGroup : 1;
  const size_t block_bytes = ValueBlockBytes(f, d);
  HWY_ALIGN float ws[kValuePassQueries * kMaxHeadDim];  // [query][G·cg] weight × group scale
  HWY_ALIGN float wm[kValuePassQueries * kMaxHeadDim];  // [query][D] Σ_blocks w·min per group slot
  HWY_ALIGN float vscale[kMaxHeadDim];                  // [D groups] the block's value scales as f32
  HWY_ALIGN float vmin[kMaxHeadDim];                    // [D groups] the block's value mins as f32
  float small_bias[kValuePassQueries];                  // D < 32: Σ_run w·min per query
  ValueFoldF32<DF> fold(df, per_group ? d : kValueGroup);
  for (size_t p0 = 0; p0 < nq; p0 += kValuePassQueries) {
    const size_t np = nq - p0 < kValuePassQueries ? nq - p0 : kValuePassQueries;
    const float* HWY_RESTRICT wp = weights + p0 * weights_stride;
    float* HWY_RESTRICT op = out + p0 * D;
    std::fill(wm, wm + np * kMaxHeadDim, 0.0f);
    std::fill(small_bias, small_bias + np, 0.0f);
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
      // Weight rows the chunk loop reads: the caller's for f32/f16, else ws.
      const float* w_rows = wp + b * kG;
      size_t w_stride = weights_stride;
      if (quantized) {
        w_rows = ws;
        w_stride = kMaxHeadDim;
        if (small) {
          for (size_t i = 0; i < np; ++i) {
            small_bias[i] += FoldValueWeightsSmall(d, wp + i * weights_stride + b * kG, block, f, ws + i * kMaxHeadDim);
          }
        } else {
          F32FromF16Array(block + ValueBlockScalesOffset(f, d), D, vscale);
          F32FromF16Array(block + ValueBlockMinsOffset(f, d), D, vmin);
          for (size_t i = 0; i < np; ++i) {
            fold.Fold(df, wp + i * weights_stride + b * kG, b + 1 == n_blocks, vscale, vmin, ws + i * kMaxHeadDim,
                      wm + i * kMaxHeadDim);
          }
        }
      }
      for (size_t q0 = 0; q0 < np;) {
        const size_t g = NextGroup(np - q0);
        const float* wg = w_rows + q0 * w_stride;
        float* og = op + q0 * D;
        switch (g) {
          case 1: AccumulateGroup<1>(df, f, d, block, wg, w_stride, cg, per_group, og, D); break;
          case 2: AccumulateGroup<2>(df, f, d, block, wg, w_stride, cg, per_group, og, D); break;
          case 3: AccumulateGroup<3>(df, f, d, block, wg, w_stride, cg, per_group, og, D); break;
          case 4: AccumulateGroup<4>(df, f, d, block, wg, w_stride, cg, per_group, og, D); break;
          default: AccumulateGroup<kQueryGroup>(df, f, d, block, wg, w_stride, cg, per_group, og, D); break;
        }
        q0 += g;
      }
    }
    if (!quantized) continue;
    // The mins' share, once per pass: out_i[c] += Σ_b Σ_t w_i·min of c's group.
    for (size_t i = 0; i < np; ++i) {
      float* oi = op + i * D;
      if (small) {
        for (size_t c = 0; c < D; ++c) oi[c] += small_bias[i];
        continue;
      }
      float bias[kMaxHeadDim / kValueGroup] = {};  // [cg]
      for (size_t k = 0; k < D; ++k) bias[k % cg] += wm[i * kMaxHeadDim + k];
      for (size_t c = 0; c < D; ++c) oi[c] += bias[c / kValueGroup];
    }
  }
}

#if HWY_TARGET == HWY_AVX3_DL
// ------------------------------ AVX-512 VNNI values (int8/int4, D ≥ 32, nq ≥ 2)
//
// As the scores: per (query, block, value group j) the folded weights
// ws_t = w_t·scale_{t,j} of the 32 tokens are rounded to int16 codes with
// step δ = max_t |ws_t| / 32767 (|error| ≤ δ/2 per token), and vpdpwssd
// multiplies a token pair's codes of 16 channels with the pair's weight
// codes (int32 lane c: Σ over the pair, exact; over a block
// |Σ| ≤ 32767·255·32 < 2^31). Per block and channel chunk the int32 sums are
// scaled by δ into the f32 output; the mins' share Σ_t w_t·min_{t,j} stays
// f32 and is added once per call. out differs from the exact sum by at most
// Σ_b Σ_t (δ_{b,j}/2)·code_{t,c} (tested).
//
// Per token pair and chunk pair (c0, c0 + D/2) the decode (shared by the
// queries) interleaves the two tokens' 16 code bytes and widens them to
// int16 (int4: then the nibble mask and shift give both chunks); each query
// then costs 2 vpdpwssd where the f32 kernel spends 4 FMAs.

constexpr size_t kMaxValueGroups = kMaxHeadDim / kValueGroup;  // cg ≤ 8

// A block's value scales and mins as f32, group-major: [j][t]. Shared by the
// queries of a pass.
struct VnniValueScales {
  HWY_ALIGN float s[kMaxValueGroups][kG];
  HWY_ALIGN float m[kMaxValueGroups][kG];
};

// One block's weight codes for a pass's queries.
struct VnniValueWeights {
  HWY_ALIGN int32_t iw[kQueryGroup][kMaxValueGroups][kG / 2];  // [query][group][token pair] 2 int16 codes
  float step[kQueryGroup][kMaxValueGroups];                    // [query][group] δ
};

// ws codes of kQ queries for every group of one block; wm[i][j] += w·min
// (16-lane partial sums, reduced once per call). The max |ws| of each
// (query, group) is reduced 8 at a time (ReduceTree8; max is exact in any
// order, so equal to _mm512_reduce_max_ps) and δ, 1/δ take one division per
// 8 (QuantSteps) instead of a scalar tree and two divisions each.
template <int kQ>
HWY_INLINE void VnniFoldValueWeights(size_t cg, const float* HWY_RESTRICT w, size_t w_stride,
                                     const VnniValueScales& vs, float (*HWY_RESTRICT wm)[kMaxValueGroups * 16],
                                     VnniValueWeights* HWY_RESTRICT wt) {
  const __m512 sign = _mm512_set1_ps(-0.0f);
  constexpr size_t kMaxFolds = kQueryGroup * kMaxValueGroups;
  __m256 ym[kMaxFolds];
  const size_t n = kQ * cg;
  for (int i = 0; i < kQ; ++i) {
    const __m512 w0 = _mm512_loadu_ps(w + i * w_stride);
    const __m512 w1 = _mm512_loadu_ps(w + i * w_stride + 16);
    for (size_t j = 0; j < cg; ++j) {
      const __m512 a0 = _mm512_mul_ps(w0, _mm512_load_ps(vs.s[j]));
      const __m512 a1 = _mm512_mul_ps(w1, _mm512_load_ps(vs.s[j] + 16));
      float* acc = wm[i] + 16 * j;
      _mm512_store_ps(acc, _mm512_fmadd_ps(w0, _mm512_load_ps(vs.m[j]),
                                           _mm512_fmadd_ps(w1, _mm512_load_ps(vs.m[j] + 16), _mm512_load_ps(acc))));
      const __m512 m = _mm512_max_ps(_mm512_andnot_ps(sign, a0), _mm512_andnot_ps(sign, a1));
      ym[i * cg + j] = _mm256_max_ps(_mm512_extractf32x8_ps(m, 1), _mm512_castps512_ps256(m));
    }
  }
  // Below 1e-33, 32767/a could overflow: weights that small count as 0.
  HWY_ALIGN float step[kMaxFolds], inv[kMaxFolds];  // [i·cg + j]
  for (size_t k = n; k % 8 != 0; ++k) ym[k] = _mm256_setzero_ps();
  for (size_t k = 0; k < n; k += 8) {
    QuantSteps(ReduceTree8(ym + k, [](__m256 x, __m256 y) { return _mm256_max_ps(x, y); }), step + k, inv + k);
  }
  for (int i = 0; i < kQ; ++i) {
    const __m512 w0 = _mm512_loadu_ps(w + i * w_stride);
    const __m512 w1 = _mm512_loadu_ps(w + i * w_stride + 16);
    for (size_t j = 0; j < cg; ++j) {
      wt->step[i][j] = step[i * cg + j];
      const __m512 vinv = _mm512_set1_ps(inv[i * cg + j]);
      const __m512 a0 = _mm512_mul_ps(w0, _mm512_load_ps(vs.s[j]));
      const __m512 a1 = _mm512_mul_ps(w1, _mm512_load_ps(vs.s[j] + 16));
      const __m256i lo = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(a0, vinv)));
      const __m256i hi = _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(_mm512_mul_ps(a1, vinv)));
      _mm512_store_si512(wt->iw[i][j], _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1));
    }
  }
}

// Value groups per token whose f16 scales (and mins) the word permutes below
// pick out: 1, 2, 4, 8 (D = 32, 64, 128, 256). Other counts (D = 96, 160…)
// widen the block's scales to f32 and gather each group's tokens.
HWY_INLINE bool IsPowerOfTwoGroups(size_t cg) { return cg == 1 || cg == 2 || cg == 4 || cg == 8; }

// Word lane k → (k·cg + j) mod 64: token k's group-j f16 among the 16·cg words
// of 16 tokens, for cg ≤ 4; for cg = 8, lanes 0..7 index words 0..63 (tokens
// 0..7) and lanes 8..15 the same offsets in the next 64 words (tokens 8..15).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i GroupWordIndex(size_t cg, size_t j) {
  const __m512i k = _mm512_set_epi16(31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14, 13, 12,
                                     11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i w = _mm512_add_epi16(_mm512_mullo_epi16(k, _mm512_set1_epi16(static_cast<int16_t>(cg))),
                                     _mm512_set1_epi16(static_cast<int16_t>(j)));
  return _mm512_and_si512(w, _mm512_set1_epi16(63));
}

// Group j's f16 of tokens 16h..16h+15 as f32, from a block's f16 [G][cg]
// array (cg a power of two ≤ 8, idx = GroupWordIndex(cg, j)). Reads exactly
// those tokens' 32·cg bytes with plain loads (no gather: the widened copy and
// two vgatherdps per group were ~15 % of the value kernel, docs/performance.md).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512 GroupTokensF16(const uint8_t* HWY_RESTRICT p, size_t cg, size_t h,
                                                     __m512i idx) {
  const uint8_t* base = p + 32 * h * cg;
  __m256i w;
  if (cg == 1) {
    w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(base));
  } else if (cg == 2) {
    w = _mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, _mm512_loadu_si512(base)));
  } else if (cg == 4) {
    w = _mm512_castsi512_si256(_mm512_permutex2var_epi16(_mm512_loadu_si512(base), idx, _mm512_loadu_si512(base + 64)));
  } else {  // 8: tokens 0..7 of the 16 from the first 128 bytes, 8..15 from the next
    const __m512i lo = _mm512_permutex2var_epi16(_mm512_loadu_si512(base), idx, _mm512_loadu_si512(base + 64));
    const __m512i hi = _mm512_permutex2var_epi16(_mm512_loadu_si512(base + 128), idx, _mm512_loadu_si512(base + 192));
    w = _mm512_castsi512_si256(_mm512_mask_blend_epi16(0xFF00u, lo, hi));
  }
  return _mm512_cvtph_ps(w);
}

// Byte permute for VnniTokenPair: word lanes (2c, 2c+1) ← bytes c and
// 64 + c of the two sources (odd bytes masked to zero).
struct VnniPairPerm {
  uint8_t idx[64];
  constexpr VnniPairPerm() : idx() {
    for (int c = 0; c < 16; ++c) {
      idx[4 * c] = static_cast<uint8_t>(c);
      idx[4 * c + 2] = static_cast<uint8_t>(64 + c);
    }
  }
};
constexpr VnniPairPerm kVnniPairPerm;

// Two tokens' 16 code bytes (a: token t, b: token t+1) as int32 lane c =
// (a_c, b_c) in int16 halves: one two-source byte permute (perm:
// kVnniPairPerm) in place of two unpacks, an insert and a widening.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i VnniTokenPair(const uint8_t* HWY_RESTRICT a, const uint8_t* HWY_RESTRICT b,
                                                     __m512i perm) {
  const __m512i x = _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a)));
  const __m512i y = _mm512_zextsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b)));
  return _mm512_maskz_permutex2var_epi8(kEvenBytes, x, perm, y);
}

#define KVEDGE_VNNI_VDOT(I)                                                                  \
  if constexpr ((I) < kQ) {                                                                  \
    l##I = DpwssdBroadcast(l##I, lo, &wt.iw[I][jl][tp]);                                     \
    h##I = DpwssdBroadcast(h##I, hi, &wt.iw[I][jh][tp]);                                     \
  }
#define KVEDGE_VNNI_VOUT(I)                                                                  \
  if constexpr ((I) < kQ) {                                                                  \
    float* o = out + (I) * out_stride + c0;                                                  \
    _mm512_storeu_ps(o, _mm512_fmadd_ps(_mm512_cvtepi32_ps(l##I), _mm512_set1_ps(wt.step[I][jl]),   \
                                        _mm512_loadu_ps(o)));                                \
    _mm512_storeu_ps(o + half, _mm512_fmadd_ps(_mm512_cvtepi32_ps(h##I), _mm512_set1_ps(wt.step[I][jh]), \
                                               _mm512_loadu_ps(o + half)));                  \
  }
// out[i][c] += Σ_t δ·iw·code for kQ queries and one block.
template <int kQ, bool kInt4>
KVEDGE_ATTR_VNNI512 HWY_INLINE void VnniValueBlock(int d, const uint8_t* HWY_RESTRICT block,
                                                   const VnniValueWeights& wt, float* HWY_RESTRICT out,
                                                   size_t out_stride) {
  const size_t D = static_cast<size_t>(d);
  const size_t half = D / 2;
  const size_t row = kInt4 ? half : D;  // code bytes per token
  const __m512i nibble = _mm512_set1_epi16(0x0F);
  const __m512i perm = _mm512_loadu_si512(kVnniPairPerm.idx);
  for (size_t c0 = 0; c0 < half; c0 += 16) {
    const size_t jl = c0 / kValueGroup, jh = (c0 + half) / kValueGroup;
    __m512i l0 = _mm512_setzero_si512(), l1 = l0, l2 = l0, l3 = l0, l4 = l0, l5 = l0, l6 = l0, l7 = l0;
    __m512i h0 = l0, h1 = l0, h2 = l0, h3 = l0, h4 = l0, h5 = l0, h6 = l0, h7 = l0;
    for (size_t tp = 0; tp < kG / 2; ++tp) {
      const uint8_t* r = block + 2 * tp * row + c0;
      __m512i lo, hi;
      if constexpr (kInt4) {  // byte j: channel j (low nibble), j + D/2 (high)
        const __m512i x = VnniTokenPair(r, r + row, perm);
        lo = _mm512_and_si512(x, nibble);
        hi = _mm512_srli_epi16(x, 4);
      } else {
        lo = VnniTokenPair(r, r + row, perm);
        hi = VnniTokenPair(r + half, r + row + half, perm);
      }
      KVEDGE_EACH_SLOT(KVEDGE_VNNI_VDOT)
    }
    KVEDGE_EACH_SLOT(KVEDGE_VNNI_VOUT)
  }
}
#undef KVEDGE_VNNI_VDOT
#undef KVEDGE_VNNI_VOUT

template <int kQ>
KVEDGE_ATTR_VNNI512 HWY_INLINE void VnniValueRun(KvFormat f, int d, const float* HWY_RESTRICT weights,
                                                 size_t weights_stride, const uint8_t* const* HWY_RESTRICT blocks,
                                                 size_t n_blocks, float* HWY_RESTRICT out,
                                                 float (*HWY_RESTRICT wm)[kMaxValueGroups * 16]) {
  const size_t D = static_cast<size_t>(d);
  const size_t cg = D / kValueGroup;
  const size_t block_bytes = ValueBlockBytes(f, d);
  VnniValueScales vs;
  VnniValueWeights wt;
  HWY_ALIGN float flat_s[kG * kMaxValueGroups];  // [t][j] the block's scales as f32
  HWY_ALIGN float flat_m[kG * kMaxValueGroups];  // [t][j] mins
  const __m512i lane_cg = _mm512_mullo_epi32(
      _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0), _mm512_set1_epi32(static_cast<int>(cg)));
  const bool permute = IsPowerOfTwoGroups(cg);
  __m512i group_idx[kMaxValueGroups];  // [j] word lane k → (k·cg + j) mod 64
  for (size_t j = 0; j < cg; ++j) group_idx[j] = GroupWordIndex(cg, j);
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* HWY_RESTRICT block = blocks[b];
    PrefetchBlock(blocks, n_blocks, b, block_bytes);
    PrefetchNextBlockToL1(blocks, n_blocks, b, block_bytes);
    const uint8_t* scales = block + ValueBlockScalesOffset(f, d);  // f16 [G][cg]
    const uint8_t* mins = block + ValueBlockMinsOffset(f, d);
    if (permute) {
      for (size_t j = 0; j < cg; ++j) {
        for (size_t h = 0; h < 2; ++h) {
          _mm512_store_ps(vs.s[j] + 16 * h, GroupTokensF16(scales, cg, h, group_idx[j]));
          _mm512_store_ps(vs.m[j] + 16 * h, GroupTokensF16(mins, cg, h, group_idx[j]));
        }
      }
    } else {
      // [t][j] f16 → [j][t] f32: widen (vector), then gather each group's tokens.
      F32FromF16Array(scales, kG * cg, flat_s);
      F32FromF16Array(mins, kG * cg, flat_m);
      for (size_t j = 0; j < cg; ++j) {
        for (int t0 = 0; t0 < kG; t0 += 16) {
          const __m512i idx = _mm512_add_epi32(lane_cg, _mm512_set1_epi32(static_cast<int>(t0 * cg + j)));
          _mm512_store_ps(vs.s[j] + t0, _mm512_i32gather_ps(idx, flat_s, 4));
          _mm512_store_ps(vs.m[j] + t0, _mm512_i32gather_ps(idx, flat_m, 4));
        }
      }
    }
    VnniFoldValueWeights<kQ>(cg, weights + b * kG, weights_stride, vs, wm, &wt);
    if (f == KvFormat::kInt4) {
      VnniValueBlock<kQ, true>(d, block, wt, out, D);
    } else {
      VnniValueBlock<kQ, false>(d, block, wt, out, D);
    }
  }
}

KVEDGE_ATTR_VNNI512 HWY_NOINLINE void AccumulateValueBlocksMultiVnni(KvFormat f, int d,
                                                                     const float* HWY_RESTRICT weights,
                                                                     size_t weights_stride, size_t nq,
                                                                     const uint8_t* const* HWY_RESTRICT blocks,
                                                                     size_t n_blocks, float* HWY_RESTRICT out) {
  const size_t D = static_cast<size_t>(d);
  const size_t cg = D / kValueGroup;
  HWY_ALIGN float wm[kQueryGroup][kMaxValueGroups * 16];  // [query][group][16 lanes] Σ w·min partial sums
  for (size_t p0 = 0; p0 < nq; p0 += kQueryGroup) {
    const size_t g = std::min(kQueryGroup, nq - p0);
    std::fill(&wm[0][0], &wm[0][0] + kQueryGroup * kMaxValueGroups * 16, 0.0f);
    const float* w = weights + p0 * weights_stride;
    float* o = out + p0 * D;
    switch (g) {
      case 1: VnniValueRun<1>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 2: VnniValueRun<2>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 3: VnniValueRun<3>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 4: VnniValueRun<4>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 5: VnniValueRun<5>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 6: VnniValueRun<6>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      case 7: VnniValueRun<7>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
      default: VnniValueRun<8>(f, d, w, weights_stride, blocks, n_blocks, o, wm); break;
    }
    // The mins' share: out_i[c] += Σ_b Σ_t w·min of c's group.
    for (size_t i = 0; i < g; ++i) {
      for (size_t j = 0; j < cg; ++j) {
        const float bias = _mm512_reduce_add_ps(_mm512_load_ps(wm[i] + 16 * j));
        for (size_t c = 0; c < kValueGroup; ++c) o[i * D + j * kValueGroup + c] += bias;
      }
    }
  }
}
#endif  // HWY_TARGET == HWY_AVX3_DL

void AccumulateValueBlocksMulti(KvFormat f, int d, const float* HWY_RESTRICT weights, size_t weights_stride,
                                size_t nq, const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                float* HWY_RESTRICT out) {
  if (nq == 1) return HWY_NAMESPACE::AccumulateValueBlocks(f, d, weights, blocks, n_blocks, out);  // as scores
  if (IsQuantized(f) && !RegularValueGroups(d)) {
    return AccumulateDecodedValueBlocks(f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  }
#if HWY_TARGET == HWY_AVX3_DL
  if (IsQuantized(f) && d >= kValueGroup) {
    return AccumulateValueBlocksMultiVnni(f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  }
#endif
#if HWY_TARGET == HWY_AVX2
  if (IsQuantized(f) && d >= kValueGroup) {  // kv_kernels_avx2-inl.h
    const auto kernel = f == KvFormat::kInt4 ? (AvxVnniEnabled() ? Avx2AccumulateValueBlocksMulti<true, true>
                                                                   : Avx2AccumulateValueBlocksMulti<true, false>)
                                             : (AvxVnniEnabled() ? Avx2AccumulateValueBlocksMulti<false, true>
                                                                   : Avx2AccumulateValueBlocksMulti<false, false>);
    return kernel(f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  }
#endif
#if KVEDGE_HWY_ARM_DOT_TARGET
  if (IsQuantized(f) && d >= kValueGroup && UseArmKvDot()) {
    return f == KvFormat::kInt8
               ? ArmAccumulateValueBlocksMulti<true>(f, d, weights, weights_stride, nq, blocks, n_blocks, out)
               : ArmAccumulateValueBlocksMulti<false>(f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  }
#endif
  const int half = d / 2;  // chunk pairs (c0, c0 + D/2) for every format
  if (half % 16 == 0) {
    AccumulateBlocksMultiT(hn::CappedTag<float, 16>(), f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  } else if (half % 8 == 0) {
    AccumulateBlocksMultiT(hn::CappedTag<float, 8>(), f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  } else {
    AccumulateBlocksMultiT(hn::CappedTag<float, 4>(), f, d, weights, weights_stride, nq, blocks, n_blocks, out);
  }
}

// ---------------------------------------------------------------- softmax

// exp(x) for x ≤ 0 (a score minus its row's max), 0 where x < kExpFloor
// (−inf: masked slots; below it exp is under FLT_MIN and adds nothing a
// float sum of ≤ 1 can hold). n = round(x·log2 e) by the 1.5·2^23 shift,
// r = x − n·ln 2 (|r| ≤ ln 2 / 2), Cephes' expf polynomial by Estrin's
// scheme, 2^n built in the exponent bits: ≤ 1.2e-7 relative with an FMA
// (every float of [kExpFloor, 0] checked against exp in double). Against
// hn::Exp it drops the float→int conversion's overflow fix-up, the
// two-step 2^n, the range masks and half of the dependency chain (Horner's
// 5 FMAs in a row): ~18 operations to ~40.
constexpr float kExpFloor = -87.33654f;  // ln FLT_MIN: n ≥ −126

template <class D, class V = hn::Vec<D>>
HWY_INLINE V ExpNonPositive(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V kMagic = hn::Set(d, 12582912.0f);  // 1.5·2^23: adding it rounds to an integer in the low bits
  const V j = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), kMagic);
  const V nf = hn::Sub(j, kMagic);
  // ln 2 in two parts, the first with 9 significant bits: n·0.693359375 is
  // exact in float with or without an FMA (SSE4 has none).
  const V r = hn::NegMulAdd(nf, hn::Set(d, -2.12194440e-4f), hn::NegMulAdd(nf, hn::Set(d, 0.693359375f), x));
  const V r2 = hn::Mul(r, r);
  const V p01 = hn::MulAdd(hn::Set(d, 1.6666665459e-1f), r, hn::Set(d, 5.0000001201e-1f));
  const V p23 = hn::MulAdd(hn::Set(d, 8.3334519073e-3f), r, hn::Set(d, 4.1665795894e-2f));
  const V p45 = hn::MulAdd(hn::Set(d, 1.9875691500e-4f), r, hn::Set(d, 1.3981999507e-3f));
  const V p = hn::MulAdd(hn::Mul(r2, r2), p45, hn::MulAdd(r2, p23, p01));
  const V y = hn::MulAdd(p, r2, hn::Add(r, hn::Set(d, 1.0f)));
  // j's low bits hold n (two's complement); (n + 127) << 23 is 2^n, the
  // shift dropping j's exponent bits. Below the floor (and for −inf, where
  // r is NaN) the lanes are garbage, zeroed by the compare; NaN stays NaN.
  const V scale = hn::BitCast(d, hn::ShiftLeft<23>(hn::Add(hn::BitCast(di, j), hn::Set(di, 127))));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, kExpFloor)), hn::Mul(y, scale));
}

float SoftmaxInPlace(float* HWY_RESTRICT x, size_t n) {
  const hn::CappedTag<float, 16> df;
  using V = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(df);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  V vmax = hn::Set(df, kNegInf);
  size_t i = 0;
  for (; i + N <= n; i += N) vmax = hn::Max(vmax, hn::LoadU(df, x + i));
  float max = hn::GetLane(hn::MaxOfLanes(df, vmax));
  for (size_t k = i; k < n; ++k) max = x[k] > max ? x[k] : max;

  // exp(x − max); the tail goes through a −inf padded copy so every element
  // sees the same exp. Four vectors a step: each exp is a ~20-deep chain,
  // and four independent chains side by side let the core overlap them
  // (AttentionPartGqa softmax at ctx 16384 on a Zen-1 core: 205 µs per lane
  // one vector a step, 179 four).
  const V vm = hn::Set(df, max);
  V s0 = hn::Zero(df), s1 = s0, s2 = s0, s3 = s0;
  for (i = 0; i + 4 * N <= n; i += 4 * N) {
    const V e0 = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i), vm));
    const V e1 = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i + N), vm));
    const V e2 = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i + 2 * N), vm));
    const V e3 = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i + 3 * N), vm));
    hn::StoreU(e0, df, x + i);
    hn::StoreU(e1, df, x + i + N);
    hn::StoreU(e2, df, x + i + 2 * N);
    hn::StoreU(e3, df, x + i + 3 * N);
    s0 = hn::Add(s0, e0);
    s1 = hn::Add(s1, e1);
    s2 = hn::Add(s2, e2);
    s3 = hn::Add(s3, e3);
  }
  for (; i + N <= n; i += N) {
    const V e = ExpNonPositive(df, hn::Sub(hn::LoadU(df, x + i), vm));
    hn::StoreU(e, df, x + i);
    s0 = hn::Add(s0, e);
  }
  if (i < n) {
    HWY_ALIGN float tail[16];
    for (size_t k = 0; k < N; ++k) tail[k] = i + k < n ? x[i + k] : kNegInf;
    const V e = ExpNonPositive(df, hn::Sub(hn::Load(df, tail), vm));
    hn::Store(e, df, tail);
    s0 = hn::Add(s0, e);
    for (size_t k = i; k < n; ++k) x[k] = tail[k - i];
  }
  const V vsum = hn::Add(hn::Add(s0, s1), hn::Add(s2, s3));
  const V inv = hn::Set(df, 1.0f / hn::GetLane(hn::SumOfLanes(df, vsum)));
  for (i = 0; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), inv), df, x + i);
  for (; i < n; ++i) x[i] *= hn::GetLane(inv);
  return max;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
#undef KVEDGE_EACH_SLOT

}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace kvedge {

HWY_EXPORT(EncodeKeyBlock);
HWY_EXPORT(DecodeKeyBlock);
HWY_EXPORT(EncodeValueBlock);
HWY_EXPORT(DecodeValueBlock);
HWY_EXPORT(ScoreKeyBlocks);
HWY_EXPORT(AccumulateValueBlocks);
HWY_EXPORT(ScoreKeyBlocksMulti);
HWY_EXPORT(AccumulateValueBlocksMulti);
HWY_EXPORT(SoftmaxInPlace);
HWY_EXPORT(MultiKernelsQuantize);
HWY_EXPORT(MultiValuesQuantize);
HWY_EXPORT(RopeRotate);
HWY_EXPORT(RopeAnglesSum);

void EncodeKeyBlock(KvFormat f, int head_dim, const float* src, uint8_t* block) {
  HWY_DYNAMIC_DISPATCH(EncodeKeyBlock)(f, head_dim, src, block);
}
void DecodeKeyBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst) {
  HWY_DYNAMIC_DISPATCH(DecodeKeyBlock)(f, head_dim, block, dst);
}
void EncodeValueBlock(KvFormat f, int head_dim, const float* src, uint8_t* block) {
  HWY_DYNAMIC_DISPATCH(EncodeValueBlock)(f, head_dim, src, block);
}
void DecodeValueBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst) {
  HWY_DYNAMIC_DISPATCH(DecodeValueBlock)(f, head_dim, block, dst);
}
void ScoreKeyBlocks(KvFormat f, int head_dim, int rope_dim, const float* q, const float* rot,
                    const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores) {
  HWY_DYNAMIC_DISPATCH(ScoreKeyBlocks)(f, head_dim, rope_dim, q, rot, blocks, n_blocks, scale, scores);
}
void AccumulateValueBlocks(KvFormat f, int head_dim, const float* weights, const uint8_t* const* blocks,
                           size_t n_blocks, float* out) {
  HWY_DYNAMIC_DISPATCH(AccumulateValueBlocks)(f, head_dim, weights, blocks, n_blocks, out);
}
void ScoreKeyBlocksMulti(KvFormat f, int head_dim, int rope_dim, const float* q, size_t nq, const float* rot,
                         const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores,
                         size_t scores_stride) {
  HWY_DYNAMIC_DISPATCH(ScoreKeyBlocksMulti)(f, head_dim, rope_dim, q, nq, rot, blocks, n_blocks, scale, scores,
                                            scores_stride);
}
void AccumulateValueBlocksMulti(KvFormat f, int head_dim, const float* weights, size_t weights_stride, size_t nq,
                                const uint8_t* const* blocks, size_t n_blocks, float* out) {
  HWY_DYNAMIC_DISPATCH(AccumulateValueBlocksMulti)(f, head_dim, weights, weights_stride, nq, blocks, n_blocks, out);
}
float SoftmaxInPlace(float* x, size_t n) { return HWY_DYNAMIC_DISPATCH(SoftmaxInPlace)(x, n); }
bool MultiKernelsQuantize() { return HWY_DYNAMIC_DISPATCH(MultiKernelsQuantize)(); }
bool MultiValuesQuantize() { return HWY_DYNAMIC_DISPATCH(MultiValuesQuantize)(); }
void RopeRotate(int dim, int rope_dim, const float* angles, const float* x, float* out) {
  HWY_DYNAMIC_DISPATCH(RopeRotate)(dim, rope_dim, angles, x, out);
}
void RopeAnglesSum(int rope_dim, const float* a, const float* b, float* out) {
  HWY_DYNAMIC_DISPATCH(RopeAnglesSum)(rope_dim, a, b, out);
}

// Double-precision trig per pair, once per block per step: no SIMD gain worth
// a second implementation, so the reference is the implementation.
void RopeAngles(double base, int rope_dim, int64_t distance, float* out) {
  ref::RopeAngles(base, rope_dim, distance, out);
}

}  // namespace kvedge
#endif  // HWY_ONCE
