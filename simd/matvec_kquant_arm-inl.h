// MatVec of the K-quants (Q4_K, Q5_K, Q6_K, Q2_K, Q3_K) and IQ4_XS on Q8_K
// activations with ARM dot products: sdot (vdotq_s32) on the NEON target
// when the CPU has it (Armv8.2 dotprod), svdot on SVE/SVE2. A fragment of
// matvec_kquant.cc: included inside its per-target namespace where
// KVEDGE_HWY_ARM_DOT_TARGET holds, after KQuant, UnpackScalesMins,
// Iq4xsScale and FoldSuperBlock.
//
// Per super-block the codes are decoded to int8 16 at a time (Q4_K [0, 15],
// Q5_K [0, 31], Q6_K q − 32 [−32, 31], Q2_K [0, 3], Q3_K [−4, 3], IQ4_XS
// the codebook's [−127, 113]: FusedDot's codes without their scales) and
// one sdot per 16 codes against the int8 Q8_K codes gives 4 int32 partial
// sums of a sub-block (of 16 or 32 weights); one int32 multiply-add by the
// sub-block scale adds them to the super-block's lanes, and one horizontal
// sum gives S — the exact integer of FusedDot, so the f32 fold
// (FoldSuperBlock) and every result are bit for bit those of the other
// targets and of ref::MatVecRowsQ8K. Highway ops on 16 int8 lanes (NEON:
// the whole vector; SVE: its first 16 lanes, the others' activations load
// as 0) plus the dot itself, which Highway 1.0.3 lacks.
#if !KVEDGE_HWY_ARM_DOT_TARGET
#error "matvec_kquant_arm-inl.h is the ARM section of matvec_kquant.cc"
#endif

using ArmD8 = hn::CappedTag<int8_t, 16>;
using ArmDU8 = hn::RebindToUnsigned<ArmD8>;
using ArmD32 = hn::Repartition<int32_t, ArmD8>;
using ArmV8 = hn::Vec<ArmD8>;
using ArmVU8 = hn::Vec<ArmDU8>;
using ArmV32 = hn::Vec<ArmD32>;

#undef KVEDGE_ATTR_ARM_KDOT  // per target
#if HWY_TARGET == HWY_NEON
#define KVEDGE_ATTR_ARM_KDOT KVEDGE_ATTR_DOTPROD
HWY_INLINE bool UseArmKDot() { return ArmHasDotProd(); }
// acc + the 4-code group dot products of w and the 16 activation codes at x.
KVEDGE_ATTR_DOTPROD HWY_INLINE ArmV32 ArmDot(ArmV32 acc, ArmVU8 w, const int8_t* x) {
  return ArmV32(vdotq_s32(acc.raw, vreinterpretq_s8_u8(w.raw), vld1q_s8(x)));
}
#else
#define KVEDGE_ATTR_ARM_KDOT
HWY_INLINE bool UseArmKDot() { return true; }
HWY_INLINE ArmV32 ArmDot(ArmV32 acc, ArmVU8 w, const int8_t* x) {
  return svdot_s32(acc, svreinterpret_s8_u8(w), hn::LoadU(ArmD8(), x));
}
#endif

// sum + sc·(dot of 16 codes w with x).
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmScaledDot(ArmV32 sum, ArmVU8 w, const int8_t* x, int sc) {
  const ArmD32 d32;
  return hn::Add(sum, hn::Mul(ArmDot(hn::Zero(d32), w, x), hn::Set(d32, sc)));
}
// sum + sc·(dot of the 32 codes w0, w1 with x[0, 32)).
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmScaledDot2(ArmV32 sum, ArmVU8 w0, ArmVU8 w1, const int8_t* x, int sc) {
  const ArmD32 d32;
  return hn::Add(sum, hn::Mul(ArmDot(ArmDot(hn::Zero(d32), w0, x), w1, x + 16), hn::Set(d32, sc)));
}
// 16 where bit k of h is set, else 0.
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmVU8 ArmBitTo16(ArmVU8 h, int k) {
  const ArmDU8 du8;
  return hn::IfThenElseZero(hn::TestBit(h, hn::Set(du8, static_cast<uint8_t>(1u << k))), hn::Set(du8, 16));
}

// Q4_K (qh null) and Q5_K: S of one super-block (x: its 256 Q8_K codes),
// mins as FusedDot.
template <class Block>
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmQ45Sums(const Block& b, const uint8_t* qh, const int8_t* x, int32_t* mins) {
  const ArmDU8 du8;
  const auto k15 = hn::Set(du8, 15);
  uint8_t sc[16];  // [8] scales, [8] mins
  UnpackScalesMins(b.scales, sc);
  for (int g = 0; g < 16; ++g) mins[g] = sc[8 + g / 2];
  ArmV32 sum = hn::Zero(ArmD32());
  for (int j = 0; j < 4; ++j) {
    const auto b0 = hn::LoadU(du8, b.qs + 32 * j), b1 = hn::LoadU(du8, b.qs + 32 * j + 16);
    auto lo0 = hn::And(b0, k15), lo1 = hn::And(b1, k15);
    auto hi0 = hn::ShiftRight<4>(b0), hi1 = hn::ShiftRight<4>(b1);
    if (qh != nullptr) {  // Q5_K: bit 2j (2j + 1) of qh[l] is the fifth bit of weight 64j + l (+ 32)
      const auto h0 = hn::LoadU(du8, qh), h1 = hn::LoadU(du8, qh + 16);
      lo0 = hn::Or(lo0, ArmBitTo16(h0, 2 * j));
      lo1 = hn::Or(lo1, ArmBitTo16(h1, 2 * j));
      hi0 = hn::Or(hi0, ArmBitTo16(h0, 2 * j + 1));
      hi1 = hn::Or(hi1, ArmBitTo16(h1, 2 * j + 1));
    }
    sum = ArmScaledDot2(sum, lo0, lo1, x + 64 * j, sc[2 * j]);
    sum = ArmScaledDot2(sum, hi0, hi1, x + 64 * j + 32, sc[2 * j + 1]);
  }
  return sum;
}
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockQ4_K& b, const int8_t* x, int32_t* mins) {
  return ArmQ45Sums(b, nullptr, x, mins);
}
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockQ5_K& b, const int8_t* x, int32_t* mins) {
  return ArmQ45Sums(b, b.qh, x, mins);
}

KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockQ6_K& b, const int8_t* x, int32_t* /*mins*/) {
  const ArmDU8 du8;
  const auto k15 = hn::Set(du8, 15), k3 = hn::Set(du8, 3), k32 = hn::Set(du8, 32);
  ArmV32 sum = hn::Zero(ArmD32());
  for (size_t half = 0; half < 2; ++half) {
    const uint8_t* ql = b.ql + 64 * half;
    const uint8_t* qh = b.qh + 32 * half;
    const int8_t* sc = b.scales + 8 * half;
    const int8_t* xh = x + 128 * half;
    for (size_t l = 0; l < 32; l += 16) {
      const auto lo0 = hn::LoadU(du8, ql + l), lo1 = hn::LoadU(du8, ql + l + 32), h = hn::LoadU(du8, qh + l);
      // q − 32 wraps to the signed code as a byte.
      const auto q1 = hn::Sub(hn::Or(hn::And(lo0, k15), hn::ShiftLeft<4>(hn::And(h, k3))), k32);
      const auto q2 = hn::Sub(hn::Or(hn::And(lo1, k15), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), k3))), k32);
      const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(lo0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), k3))), k32);
      const auto q4 = hn::Sub(hn::Or(hn::ShiftRight<4>(lo1), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), k32);
      const size_t g = l / 16;
      sum = ArmScaledDot(sum, q1, xh + l, sc[g]);
      sum = ArmScaledDot(sum, q2, xh + l + 32, sc[2 + g]);
      sum = ArmScaledDot(sum, q3, xh + l + 64, sc[4 + g]);
      sum = ArmScaledDot(sum, q4, xh + l + 96, sc[6 + g]);
    }
  }
  return sum;
}

// Q2_K (hm null) and Q3_K, as DecodeQ23: weight 128h + 32j + l has code
// bits 2j of qs[32h + l] (Q3_K: − 4 unless bit 4h + j of hm[l]) and scale sc[8h + 2j + l/16].
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmQ23Sums(const uint8_t* qs, const uint8_t* hm, const int* sc,
                                                  const int8_t* x) {
  const ArmDU8 du8;
  const auto k3 = hn::Set(du8, 3), k4 = hn::Set(du8, 4);
  ArmV32 sum = hn::Zero(ArmD32());
  for (int h = 0; h < 2; ++h) {
    for (size_t l = 0; l < 32; l += 16) {
      const auto bytes = hn::LoadU(du8, qs + 32 * h + l);
      const auto high = hm != nullptr ? hn::LoadU(du8, hm + l) : hn::Zero(du8);
      for (int j = 0; j < 4; ++j) {
        auto q = hn::And(hn::ShiftRightSame(bytes, 2 * j), k3);
        if (hm != nullptr) {
          q = hn::Sub(q, hn::IfThenZeroElse(hn::TestBit(high, hn::Set(du8, static_cast<uint8_t>(1u << (4 * h + j)))), k4));
        }
        sum = ArmScaledDot(sum, q, x + 128 * h + 32 * j + l, sc[8 * h + 2 * j + l / 16]);
      }
    }
  }
  return sum;
}
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockQ2_K& b, const int8_t* x, int32_t* mins) {
  int sc[16];
  for (int g = 0; g < 16; ++g) {
    sc[g] = b.scales[g] & 15;
    mins[g] = b.scales[g] >> 4;
  }
  return ArmQ23Sums(b.qs, nullptr, sc, x);
}
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockQ3_K& b, const int8_t* x, int32_t* /*mins*/) {
  int8_t packed[16];
  UnpackQ3KScales(b.scales, packed);
  int sc[16];
  for (int g = 0; g < 16; ++g) sc[g] = packed[g] - 32;
  return ArmQ23Sums(b.qs, b.hmask, sc, x);
}

// IQ4_XS: per sub-block of 32, the codebook levels of the low nibbles
// (weights 0…15) and the high ones (16…31), scale ls − 32.
KVEDGE_ATTR_ARM_KDOT HWY_INLINE ArmV32 ArmKSums(const BlockIQ4_XS& b, const int8_t* x, int32_t* /*mins*/) {
  const ArmDU8 du8;
  const auto table = hn::LoadU(du8, reinterpret_cast<const uint8_t*>(kIq4nlValues));
  const auto k15 = hn::Set(du8, 15);
  ArmV32 sum = hn::Zero(ArmD32());
  for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
    const auto q = hn::LoadU(du8, b.qs + 16 * ib);
    const auto lo = hn::TableLookupBytes(table, hn::And(q, k15));
    const auto hi = hn::TableLookupBytes(table, hn::ShiftRight<4>(q));
    sum = ArmScaledDot2(sum, lo, hi, x + 32 * ib, Iq4xsScale(b, ib) - 32);
  }
  return sum;
}

// KQuantChunkRows for one vector: rows [row_begin, row_end) over
// super-blocks [cb, cb + nsb), S by ArmKSums, the same fold.
template <class Block>
KVEDGE_ATTR_ARM_KDOT HWY_NOINLINE void ArmKQuantChunkRows(const Block* w, size_t nsb_row, size_t cb, size_t nsb,
                                                          const ActChunk& xc, float* y, size_t row_begin,
                                                          size_t row_end) {
  const ArmD32 d32;
  int32_t mins[16];  // [group of 16] mins
  for (size_t r = row_begin; r < row_end; ++r) {
    const Block* row = w + r * nsb_row + cb;
    float acc = cb == 0 ? 0.0f : y[r];
    for (size_t s = 0; s < nsb; ++s) {
      const int32_t sum = hn::GetLane(hn::SumOfLanes(d32, ArmKSums(row[s], xc.q8 + s * kSuperBlock, mins)));
      acc = FoldSuperBlock<Block>(HalfToFloat(row[s].d), Dmin(row[s]), xc.d[s], sum, mins, xc.bsum16[s], acc);
    }
    y[r] = acc;
  }
}
