// Per-target helpers of the int8-activation kernels for the 32-weight
// blocks (Q8_0/Q4_0, row-major in matvec_legacy.cc and interleaved in
// matvec_interleaved.cc): activation quantization per block of 32, the f16
// block scales as f32, the column chunking. Included once per target.
#if defined(KVEDGE_SIMD_LEGACY_INT_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_LEGACY_INT_INL_H_
#undef KVEDGE_SIMD_LEGACY_INT_INL_H_
#else
#define KVEDGE_SIMD_LEGACY_INT_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "hwy/highway.h"
#include "simd/weight_format.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Activations are quantized in chunks of this many 32-blocks (4096 columns):
// 8 KiB of int16 codes + 512 B of scales per input vector on the stack.
constexpr size_t kChunkBlocks = 128;
constexpr size_t kChunkCols = kChunkBlocks * kQuantBlock;
// MatMul quantizes this many input vectors at a time (64 KiB of stack codes)
// and streams the weights once per tile.
constexpr size_t kMatMulTile = 8;

// Quantizes x: [nb·32] f32 to q: [nb·32] int8 codes held in int16 and
// dx: [nb] f32 scales, as ref::QuantizeActivations (dx = amax/127,
// q = nearest-even(x·(1/dx))). Cost O(nb·32), once per call and chunk.
HWY_INLINE void QuantizeActivations(const float* x, size_t nb, int16_t* q, float* dx) {
  const hn::CappedTag<float, 16> df;  // ≤ 16 lanes, divides 32
  const hn::Rebind<int16_t, decltype(df)> di16;
  const size_t n = hn::Lanes(df);
  for (size_t b = 0; b < nb; ++b) {
    const float* xb = x + b * kQuantBlock;
    auto amax = hn::Zero(df);
    for (size_t j = 0; j < kQuantBlock; j += n) amax = hn::Max(amax, hn::Abs(hn::LoadU(df, xb + j)));
    const float d = hn::GetLane(hn::MaxOfLanes(df, amax)) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    const auto vid = hn::Set(df, id);
    for (size_t j = 0; j < kQuantBlock; j += n) {
      const auto codes = hn::NearestInt(hn::Mul(hn::LoadU(df, xb + j), vid));
      hn::StoreU(hn::DemoteTo(di16, codes), di16, q + b * kQuantBlock + j);
    }
  }
}

// 16 f16 bit patterns → f32, exact for every input (zero, subnormal, inf,
// nan): vcvtph2ps on x86 from AVX2 on, elsewhere the bit trick of
// HalfToFloat on int32 lanes (~12 ops per 16 values instead of per value).
HWY_INLINE void HalvesToFloats(const uint16_t* bits, float* out) {
  const hn::CappedTag<float, 16> df;
  const size_t n = hn::Lanes(df);
  for (size_t i = 0; i < 16; i += n) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(bits + i))), df, out + i);
#else
    const hn::RebindToUnsigned<decltype(df)> du;
    const hn::Rebind<uint16_t, decltype(df)> du16;
    const auto wv = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, bits + i)));
    const auto sign = hn::And(wv, hn::Set(du, 0x80000000u));
    const auto two_w = hn::Add(wv, wv);
    const auto normalized = hn::Mul(hn::BitCast(df, hn::Add(hn::ShiftRight<4>(two_w), hn::Set(du, 0xE0u << 23))),
                                    hn::Set(df, 0x1.0p-112f));
    const auto denormalized =
        hn::Sub(hn::BitCast(df, hn::Or(hn::ShiftRight<17>(two_w), hn::Set(du, 126u << 23))), hn::Set(df, 0.5f));
    const auto is_denormal = hn::Eq(hn::ShiftRight<27>(two_w), hn::Zero(du));
    const auto magnitude = hn::IfThenElse(is_denormal, hn::BitCast(du, denormalized), hn::BitCast(du, normalized));
    hn::StoreU(hn::BitCast(df, hn::Or(sign, magnitude)), df, out + i);
#endif
  }
}

// dw: [nb rounded up to 16] f32 = the f16 block scales of one row, 0 past nb.
// Scalar loads of the 16-bit scales, then 16 at a time through
// HalvesToFloats. (A gather of the block starts was tried: gathers stall on
// lines still in flight from DRAM, and cut Q8_0 matvec from DRAM to 40% of
// this path's speed.) bits: [kChunkBlocks] scratch; nb ≤ kChunkBlocks.
template <class Block>
HWY_INLINE void BlockScales(const Block* w, size_t nb, uint16_t* bits, float* dw) {
  size_t b = 0;
  for (; b < nb; ++b) {
    // One scalar load and store each: without the barrier GCC merges these
    // into vpinsrw chains on x86, which occupy vector ports (perf showed
    // them as a third of decode when the AVX3_DL path still used this pass).
    uint32_t d = w[b].d;
    asm("" : "+r"(d));
    bits[b] = static_cast<uint16_t>(d);
  }
  for (; b % 16 != 0; ++b) bits[b] = 0;
  for (b = 0; b < nb; b += 16) HalvesToFloats(bits + b, dw + b);
}

// s[b] = dw[b]·dx[b] (one f32 rounding, the same in every tile shape).
HWY_INLINE void MulScales(const float* dw, const float* dx, size_t nb, float* s) {
  const hn::CappedTag<float, 16> df;
  const size_t n = hn::Lanes(df);
  for (size_t b = 0; b < nb; b += n) hn::StoreU(hn::Mul(hn::LoadU(df, dw + b), hn::LoadU(df, dx + b)), df, s + b);
}

// 4 unaligned bytes as one int32 (e.g. 4 int8 activation codes, broadcast
// against 4 code bytes of each row).
HWY_INLINE int32_t LoadU32(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_LEGACY_INT_INL_H_
