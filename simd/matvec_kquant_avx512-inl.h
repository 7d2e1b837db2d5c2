// MatVec of the K-quants (Q2_K…Q6_K, IQ4_XS) on Q8_K activations with
// AVX-512 (BW; VNNI on AVX3_DL). A fragment of matvec_kquant.cc: included
// inside its per-target namespace for HWY_AVX3 and HWY_AVX3_DL only, after
// QuantizeQ8K, KQuant and UnpackScalesMins.
#if HWY_TARGET != HWY_AVX3 && HWY_TARGET != HWY_AVX3_DL
#error "matvec_kquant_avx512-inl.h is the AVX-512 section of matvec_kquant.cc"
#endif

// ------------------------------ MatVec on AVX-512 (BW; VNNI on AVX3_DL)
// One super-block at a time in the GGUF rows layout, 64 weights per zmm as
// unsigned bytes (Q4_K 0…15, Q5_K 0…31, Q6_K q + 32 = 0…63) without
// widening: vpmaddubsw against the int8 activation codes gives int16 pair
// sums (≤ 2·63·127, no saturation), vpdpwssd (AVX3: vpmaddwd + add) weights
// each pair by its sub-block scale into int32 lanes, and one horizontal sum
// per super-block gives S (and M, from the Q8_K bsums in one vpmaddwd).
// Raw intrinsics: Highway 1.0.3 has no u8×i8 or i16 pair-sum op.
// The activation codes are stored in the weights' byte order (PrepareAvxChunk), so
// no weight byte is moved: a Q4_K/Q5_K zmm of 64 code bytes holds sub-blocks
// 0 and 2 in its low nibbles and 1 and 3 in its high ones (4…7 likewise).
#if HWY_TARGET == HWY_AVX3_DL
#define KVEDGE_ATTR_KQ KVEDGE_ATTR_VNNI512
// acc + Σ of each int32 lane's two int16 products p·sc.
KVEDGE_ATTR_KQ HWY_INLINE __m512i AddScaledPairs(__m512i acc, __m512i p, __m512i sc) {
  return _mm512_dpwssd_epi32(acc, p, sc);
}
#else
#define KVEDGE_ATTR_KQ
HWY_INLINE __m512i AddScaledPairs(__m512i acc, __m512i p, __m512i sc) {
  return _mm512_add_epi32(acc, _mm512_madd_epi16(p, sc));
}
#endif

template <class Block>
constexpr bool kIsQ23 = std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K>;
template <class Block>
constexpr bool kIsQ45 = std::is_same_v<Block, BlockQ4_K> || std::is_same_v<Block, BlockQ5_K>;

// The activations in the byte order of a super-block's code vectors: slot i
// (16 bytes) of the reordered activations holds activations
// [16·order[i], +16). Q4_K/Q5_K: a zmm of 64 code bytes holds sub-blocks
// (of 32) 0 and 2 in its low nibbles and 1 and 3 in its high ones (4…7
// likewise); Q2_K/Q3_K: bit pair j of the 64 qs bytes holds weights 32j…
// and 128 + 32j…; IQ4_XS: the low nibbles of 4 sub-blocks' 16 bytes hold
// their first 16 weights, the high nibbles their last; Q6_K: ggml's order.
template <class Block>
constexpr std::array<uint8_t, 16> AvxOrder() {
  if constexpr (kIsQ45<Block>) {
    return {0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15};
  } else if constexpr (kIsQ23<Block>) {
    return {0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15};
  } else if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
    return {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  } else {
    return {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  }
}
// Weights per sub-block scale.
template <class Block>
constexpr int kScaleGroup = kIsQ45<Block> || std::is_same_v<Block, BlockIQ4_XS> ? 32 : 16;
// Q6_K (5), Q3_K (2) and, on AVX3_DL, IQ4_XS (7: levels + 128) sum unsigned
// codes q + 2^shift: the caller takes S − (M << shift), M = Σ sc·bsum; −1:
// signed codes or mins (no offset).
template <class Block>
constexpr int kOffsetShift = std::is_same_v<Block, BlockQ6_K>                                  ? 5
                             : std::is_same_v<Block, BlockQ3_K>                                ? 2
                             : std::is_same_v<Block, BlockIQ4_XS> && HWY_TARGET == HWY_AVX3_DL ? 7
                                                                                               : -1;

// One input vector's Q8_K activations over a chunk, qs in the weight
// format's byte order (AvxOrder).
template <class Block>
HWY_NOINLINE void PrepareAvxChunk(const float* x, size_t nsb, BlockQ8_K* c) {
  QuantizeQ8K(x, c, nsb);
  if constexpr (!std::is_same_v<Block, BlockQ6_K>) {
    constexpr std::array<uint8_t, 16> order = AvxOrder<Block>();
    for (size_t s = 0; s < nsb; ++s) {
      int8_t q[kSuperBlock];
      std::memcpy(q, c[s].qs, sizeof(q));
      for (int i = 0; i < 16; ++i) std::memcpy(c[s].qs + 16 * i, q + 16 * order[i], 16);
    }
  }
}

// Index vectors for vpermw, built once per call.
struct AvxIndex {
  __m512i scale[4];      // int16 lane → its sub-block's scale lane, per code vector
  __m512i scale_odd[4];  // Q4_K/Q5_K: the same + 16 (the second row of a Q45Headers half)
  // Q2_K…Q5_K on AVX3_DL: int16 lane → scale lane in the vpackssdw of the
  // int32 sums of code vectors 2p and 2p + 1 (and + 16 as scale_odd).
  __m512i pair[2];
  __m512i pair_odd[2];
};

template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE AvxIndex MakeAvxIndex() {
  HWY_ALIGN int16_t idx[4][32];
  constexpr std::array<uint8_t, 16> order = AvxOrder<Block>();
  for (int k = 0; k < 4; ++k) {
    for (int i = 0; i < 32; ++i) {  // int16 lane i of code vector k: activation 16·order[4k + i/8] + 2i % 16
      idx[k][i] = static_cast<int16_t>((16 * order[4 * k + i / 8] + 2 * i % 16) / kScaleGroup<Block>);
    }
  }
  HWY_ALIGN int16_t pair[2][32];
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 32; ++i) {  // int16 lane i: int32 lane 4·(i / 8) + i % 4 of code vector 2p + (i % 8) / 4
      const int k = 2 * p + (i % 8) / 4, lane = 4 * (i / 8) + i % 4;
      pair[p][i] = static_cast<int16_t>((16 * order[4 * k + lane / 4] + 4 * lane % 16) / kScaleGroup<Block>);
    }
  }
  AvxIndex out;
  const __m512i k16 = _mm512_set1_epi16(16);
  for (int k = 0; k < 4; ++k) {
    out.scale[k] = _mm512_load_si512(idx[k]);
    out.scale_odd[k] = _mm512_add_epi16(out.scale[k], k16);
  }
  for (int p = 0; p < 2; ++p) {
    out.pair[p] = _mm512_load_si512(pair[p]);
    out.pair_odd[p] = _mm512_add_epi16(out.pair[p], k16);
  }
  return out;
}

// The headers of four Q4_K/Q5_K super-blocks (one per row of a pass), one
// per 128-bit lane: [d | dmin << 16, u0, u1, u2] (u: the 12 packed scale
// bytes as 32-bit words), and their 8 scales and 8 mins as bytes
// [sc0 … sc7, m0 … m7] per lane: UnpackScalesMins on the four at once.
struct Q45Headers {
  __m512i raw;
  __m512i scales_mins;
};

template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE Q45Headers LoadQ45Headers(const Block* const* row, size_t s) {
  static_assert(offsetof(Block, scales) == 4 && sizeof(Block::scales) == 12);
  const auto head = [&](size_t i) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(&row[i][s])); };
  __m512i v = _mm512_castsi128_si512(head(0));
  v = _mm512_inserti32x4(v, head(1), 1);
  v = _mm512_inserti32x4(v, head(2), 2);
  v = _mm512_inserti32x4(v, head(3), 3);
  const __m512i a = _mm512_and_si512(
      _mm512_srlv_epi32(_mm512_shuffle_epi32(v, static_cast<_MM_PERM_ENUM>(0xED)),  // [u0 u2 u1 u2]
                        _mm512_broadcast_i32x4(_mm_set_epi32(4, 0, 0, 0))),
      _mm512_broadcast_i32x4(_mm_set_epi32(0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f)));
  const __m512i b = _mm512_and_si512(
      _mm512_srli_epi32(_mm512_shuffle_epi32(v, static_cast<_MM_PERM_ENUM>(0xA5)), 2),  // [u0 u0 u1 u1]
      _mm512_broadcast_i32x4(_mm_set_epi32(0x30303030, 0, 0x30303030, 0)));
  return {v, _mm512_or_si512(a, b)};
}

// The high nibbles of 64 bytes: one GF(2) affine op on AVX3_DL (GFNI).
KVEDGE_ATTR_KQ HWY_INLINE __m512i HighNibbles(__m512i v) {
#if HWY_TARGET == HWY_AVX3_DL
  return _mm512_gf2p8affine_epi64_epi8(v, _mm512_set1_epi64(0x1020408000000000ll), 0);  // bit i ← bit i + 4
#else
  return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15));
#endif
}

// One Q4_K (kQ5 false) or Q5_K super-block against activations a: the 16
// lanes whose sum is S = Σ sc·q·x. sc: int16 lanes holding the block's 8
// scales, found by the index vectors of idx (odd: the scale_odd/pair_odd
// ones). AVX3_DL: vpdpbusd sums 4 code × activation products per int32 lane
// (|·| ≤ 4·31·127, fits int16), vpackssdw packs two code vectors' lanes
// (exact) and one vpdpwssd per pair weights them by their scales; AVX3:
// vpmaddubsw pairs weighted by vpdpwssd (vpmaddwd + add) per code vector.
template <bool kQ5>
KVEDGE_ATTR_KQ HWY_INLINE __m512i SumsQ45(const uint8_t* qh, const uint8_t* qs, const BlockQ8_K& a,
                                          const AvxIndex& idx, bool odd, __m512i sc) {
  const __m512i k15 = _mm512_set1_epi8(15);
  const __m512i l0 = _mm512_loadu_si512(qs), l1 = _mm512_loadu_si512(qs + 64);
  __m512i w[4] = {_mm512_and_si512(l0, k15), HighNibbles(l0), _mm512_and_si512(l1, k15), HighNibbles(l1)};
  if constexpr (kQ5) {
    // Bit 2c (low nibbles) or 2c+1 (high) of qh[l] is the fifth bit of
    // weight 32c + l; vector k's 256-bit halves take bits kLowBit[k] and
    // kLowBit[k] + 2.
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh)));
    const __m512i k16 = _mm512_set1_epi8(16);
    constexpr int kLowBit[4] = {0, 1, 4, 5};
    for (int k = 0; k < 4; ++k) {
      const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << kLowBit[k])),
                                              _mm256_set1_epi8(static_cast<char>(1 << (kLowBit[k] + 2))), 1);
      w[k] = _mm512_mask_add_epi8(w[k], _mm512_test_epi8_mask(h, bits), w[k], k16);
    }
  }
#if HWY_TARGET == HWY_AVX3_DL
  __m512i d[4];
  for (int k = 0; k < 4; ++k) {
    d[k] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[k], _mm512_loadu_si512(a.qs + 64 * k));
  }
  const __m512i* pair = odd ? idx.pair_odd : idx.pair;
  const __m512i acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]),
                                          _mm512_permutexvar_epi16(pair[0], sc));
  return _mm512_dpwssd_epi32(acc, _mm512_packs_epi32(d[2], d[3]), _mm512_permutexvar_epi16(pair[1], sc));
#else
  const __m512i* scale_idx = odd ? idx.scale_odd : idx.scale;
  // Two accumulators halve the vpdpwssd latency chain.
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 4; ++k) {
    const __m512i p = _mm512_maddubs_epi16(w[k], _mm512_loadu_si512(a.qs + 64 * k));
    acc[k & 1] = AddScaledPairs(acc[k & 1], p, _mm512_permutexvar_epi16(scale_idx[k], sc));
  }
  return _mm512_add_epi32(acc[0], acc[1]);
#endif
}

// One super-block's products before the horizontal sums: S = Σ of s's 16
// lanes, M = Σ of m's 8.
struct RawSums {
  __m512i s;
  __m256i m;
};

// Q6_K against activations a: S = Σ sc·q·x over the unsigned codes q =
// (q − 32) + 32, M = Σ sc·bsum (the caller takes S − 32·M).
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsQ6(const BlockQ6_K& b, const BlockQ8_K& a, const AvxIndex& idx) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m512i scz = _mm512_castsi256_si512(sc16);
  const __m512i k15 = _mm512_set1_epi8(15), k48 = _mm512_set1_epi8(0x30);
  // qh bits 2c, 2c+1 of byte l are the top bits of weight 32c + l (of the
  // half): low nibbles (c = 0, 1) shift them up by 4 or 2, high nibbles
  // (c = 2, 3) down by 0 or 2, per 256-bit half; 16-bit shifts are exact
  // under the 0x30 mask.
  const __m512i up = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
  const __m512i down = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int half = 0; half < 2; ++half) {
    const __m512i ql = _mm512_loadu_si512(b.ql + 64 * half);
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * half)));
    const __m512i lo = _mm512_or_si512(_mm512_and_si512(ql, k15), _mm512_and_si512(_mm512_sllv_epi16(h, up), k48));
    const __m512i hi = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), k15),
                                       _mm512_and_si512(_mm512_srlv_epi16(h, down), k48));
    const __m512i p0 = _mm512_maddubs_epi16(lo, _mm512_loadu_si512(a.qs + 128 * half));
    const __m512i p1 = _mm512_maddubs_epi16(hi, _mm512_loadu_si512(a.qs + 128 * half + 64));
    acc[0] = AddScaledPairs(acc[0], p0, _mm512_permutexvar_epi16(idx.scale[2 * half], scz));
    acc[1] = AddScaledPairs(acc[1], p1, _mm512_permutexvar_epi16(idx.scale[2 * half + 1], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]),
          _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
}

// The 16 scales − 32 of a Q3_K super-block as int16 lanes (UnpackQ3KScales
// on 16-bit lanes). p: 16 bytes, the 12 packed scales at p + 2 (reading
// from the codes' last two bytes keeps the load inside the block).
KVEDGE_ATTR_KQ HWY_INLINE __m256i Q3Scales16(const uint8_t* p) {
  const __m256i v = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  // Scale g: low 4 bits from byte g % 8 (>> 4 when g ≥ 8), high 2 bits from
  // byte 8 + g % 4 (>> 2·(g / 4)).
  const __m256i lo_at = _mm256_setr_epi16(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9);
  const __m256i hi_at = _mm256_setr_epi16(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13);
  const __m256i lo_shift = _mm256_setr_epi16(0, 0, 0, 0, 0, 0, 0, 0, 4, 4, 4, 4, 4, 4, 4, 4);
  const __m256i hi_shift = _mm256_setr_epi16(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi16(_mm256_permutexvar_epi16(lo_at, v), lo_shift),
                                      _mm256_set1_epi16(15));
  const __m256i hi = _mm256_and_si256(_mm256_srlv_epi16(_mm256_permutexvar_epi16(hi_at, v), hi_shift),
                                      _mm256_set1_epi16(3));
  return _mm256_sub_epi16(_mm256_or_si256(lo, _mm256_slli_epi16(hi, 4)), _mm256_set1_epi16(32));
}

// Q2_K (kQ3 false) or Q3_K against activations a, a scale per 16 weights:
// S = Σ sc·u·x over the unsigned codes u (Q2_K: q; Q3_K: q + 4 = low +
// 4·high), M = Σ m·bsum with m the mins (Q2_K) or the scales (Q3_K: the
// caller takes S − 4·M).
template <bool kQ3, class Block>
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsQ23(const Block& b, const BlockQ8_K& a, const AvxIndex& idx) {
  __m256i sc, m;
  if constexpr (kQ3) {
    sc = Q3Scales16(b.qs + 62);
    m = sc;
  } else {
    const __m256i packed = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    sc = _mm256_and_si256(packed, _mm256_set1_epi16(15));
    m = _mm256_srli_epi16(packed, 4);
  }
  const __m512i scz = _mm512_castsi256_si512(sc);
  const __m512i q = _mm512_loadu_si512(b.qs), k3 = _mm512_set1_epi8(3);
  __m512i w[4];  // [j] unsigned codes of bit pair j, 0…3 (Q3_K: 0…7)
  for (int j = 0; j < 4; ++j) {
#if HWY_TARGET == HWY_AVX3_DL
    // Bits 2j, 2j + 1 of each byte to bits 0, 1 in one GF(2) affine op
    // (result bit i is the parity of matrix byte 7 − i AND the input byte).
    w[j] = _mm512_gf2p8affine_epi64_epi8(q, _mm512_set1_epi64(static_cast<long long>((1ull << (2 * j)) << 56 |
                                                                                     (1ull << (2 * j + 1)) << 48)),
                                         0);
#else
    w[j] = _mm512_and_si512(_mm512_srl_epi16(q, _mm_cvtsi32_si128(2 * j)), k3);
#endif
    if constexpr (kQ3) {
      // Bit j (low 256 bits: weights 32j + l) or 4 + j (high: 128 + 32j + l)
      // of hmask[l] adds 4.
      const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.hmask)));
      const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8(static_cast<char>(1 << j)),
                                              _mm256_set1_epi8(static_cast<char>(1 << (4 + j))), 1);
      w[j] = _mm512_mask_add_epi8(w[j], _mm512_test_epi8_mask(h, bits), w[j], _mm512_set1_epi8(4));
    }
  }
#if HWY_TARGET == HWY_AVX3_DL
  // vpdpbusd sums 4 code × activation products per int32 lane (one group of
  // 16 per 128-bit lane; |·| ≤ 4·7·127, fits int16), vpackssdw packs two
  // code vectors' sums (exact) and one vpdpwssd per pair weights them by
  // their group's scale (idx.pair): 2 vpermw + 2 vpdpwssd per super-block
  // instead of 4 + 4.
  __m512i d[4];
  for (int j = 0; j < 4; ++j) d[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w[j], _mm512_loadu_si512(a.qs + 64 * j));
  const __m512i acc = _mm512_dpwssd_epi32(_mm512_setzero_si512(), _mm512_packs_epi32(d[0], d[1]),
                                          _mm512_permutexvar_epi16(idx.pair[0], scz));
  return {_mm512_dpwssd_epi32(acc, _mm512_packs_epi32(d[2], d[3]), _mm512_permutexvar_epi16(idx.pair[1], scz)),
          _mm256_madd_epi16(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
#else
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int j = 0; j < 4; ++j) {
    const __m512i p = _mm512_maddubs_epi16(w[j], _mm512_loadu_si512(a.qs + 64 * j));
    acc[j & 1] = AddScaledPairs(acc[j & 1], p, _mm512_permutexvar_epi16(idx.scale[j], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]),
          _mm256_madd_epi16(m, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
#endif
}

// IQ4_XS against activations a: S = Σ (ls − 32)·level·x.
// AVX3_DL: the unsigned levels u = level + 128 (1…241, vpshufb from the
// codebook xor 0x80) meet x in vpdpbusd; a 128-bit lane of code vectors 0
// and 1 (2 and 3) is one sub-block (AvxOrder), so both accumulate into one
// int32 lane set (≤ 8·241·127) that one vpmulld weights by its scale:
// S = Σ ls·u·x, M = Σ ls·bsum, and the caller takes S − (M << 7)
// (|S| ≤ 2^28). AVX3: the levels are signed, so vpmaddubsw takes |level|
// against x negated where the level is (|level·x| ≤ 127², a pair ≤ 32258:
// no saturation; x ≥ −127, so −x fits).
KVEDGE_ATTR_KQ HWY_INLINE RawSums SumsIQ4XS(const BlockIQ4_XS& b, const BlockQ8_K& a, const AvxIndex& idx) {
  const __m128i head = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(&b));  // d, scales_h, scales_l[4]
  const __m128i lo = _mm_and_si128(
      _mm_srlv_epi16(_mm_shuffle_epi8(head, _mm_setr_epi8(4, -1, 4, -1, 5, -1, 5, -1, 6, -1, 6, -1, 7, -1, 7, -1)),
                     _mm_setr_epi16(0, 4, 0, 4, 0, 4, 0, 4)),
      _mm_set1_epi16(15));
  const __m128i hi = _mm_and_si128(
      _mm_srlv_epi16(_mm_shuffle_epi8(head, _mm_setr_epi8(2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3)),
                     _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14)),
      _mm_set1_epi16(3));
  const __m128i sc = _mm_sub_epi16(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi16(32));  // [8] ls − 32
  const __m512i table = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m512i k15 = _mm512_set1_epi8(15);
  const __m512i q0 = _mm512_loadu_si512(b.qs), q1 = _mm512_loadu_si512(b.qs + 64);
#if HWY_TARGET == HWY_AVX3_DL
  (void)idx;
  const __m512i table_u = _mm512_xor_si512(table, _mm512_set1_epi8(static_cast<char>(0x80)));
  const __m512i codes[4] = {_mm512_and_si512(q0, k15), HighNibbles(q0), _mm512_and_si512(q1, k15), HighNibbles(q1)};
  __m512i d[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};  // sub-blocks 0…3, 4…7
  for (int k = 0; k < 4; ++k) {
    d[k / 2] = _mm512_dpbusd_epi32(d[k / 2], _mm512_shuffle_epi8(table_u, codes[k]), _mm512_loadu_si512(a.qs + 64 * k));
  }
  const __m512i ls32 = _mm512_castsi256_si512(_mm256_cvtepi16_epi32(sc));  // [8] int32
  const __m512i sub = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);  // 128-bit lane → sub-block
  const __m512i s = _mm512_add_epi32(
      _mm512_mullo_epi32(d[0], _mm512_permutexvar_epi32(sub, ls32)),
      _mm512_mullo_epi32(d[1], _mm512_permutexvar_epi32(_mm512_add_epi32(sub, _mm512_set1_epi32(4)), ls32)));
  // bsums lane i (activations 16i…, ggml order) belongs to sub-block i / 2.
  const __m256i ls16 = _mm256_permutexvar_epi16(
      _mm256_setr_epi16(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7), _mm256_castsi128_si256(sc));
  return {s, _mm256_madd_epi16(ls16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)))};
#else
  const __m512i scz = _mm512_castsi128_si512(sc);
  const __m512i codes[4] = {_mm512_and_si512(q0, k15), _mm512_and_si512(_mm512_srli_epi16(q0, 4), k15),
                            _mm512_and_si512(q1, k15), _mm512_and_si512(_mm512_srli_epi16(q1, 4), k15)};
  __m512i acc[2] = {_mm512_setzero_si512(), _mm512_setzero_si512()};
  for (int k = 0; k < 4; ++k) {
    const __m512i v = _mm512_shuffle_epi8(table, codes[k]);
    const __m512i x = _mm512_loadu_si512(a.qs + 64 * k);
    const __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(v), _mm512_setzero_si512(), x);
    const __m512i p = _mm512_maddubs_epi16(_mm512_abs_epi8(v), sx);
    acc[k & 1] = AddScaledPairs(acc[k & 1], p, _mm512_permutexvar_epi16(idx.scale[k], scz));
  }
  return {_mm512_add_epi32(acc[0], acc[1]), _mm256_setzero_si256()};
#endif
}

template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE RawSums AvxSums(const Block& b, const BlockQ8_K& a, const AvxIndex& idx) {
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    return SumsQ6(b, a, idx);
  } else {
    static_assert(std::is_same_v<Block, BlockIQ4_XS>);
    return SumsIQ4XS(b, a, idx);
  }
}

// Lane i = Σ of v[i]'s 8 lanes (a transposed horizontal sum of 4 vectors).
KVEDGE_ATTR_KQ HWY_INLINE __m128i Sum8x4(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  const __m256i g = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
  return _mm_add_epi32(_mm256_castsi256_si128(g), _mm256_extracti128_si256(g, 1));
}
// Lane i = Σ of v[i]'s 16 lanes: two interleave-and-add steps leave each
// 128-bit lane holding [Σ v0, Σ v1, Σ v2, Σ v3] partial sums, then the four
// 128-bit lanes are added.
KVEDGE_ATTR_KQ HWY_INLINE __m128i Sum16x4(__m512i v0, __m512i v1, __m512i v2, __m512i v3) {
  const __m512i v01 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
  const __m512i v23 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
  const __m512i g = _mm512_add_epi32(_mm512_unpacklo_epi64(v01, v23), _mm512_unpackhi_epi64(v01, v23));
  const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(g), _mm512_extracti64x4_epi64(g, 1));
  return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

// One super-block column of a Q4_K/Q5_K pass: the four rows' S, M and
// [d × 4, dmin × 4]. The headers are decoded together (LoadQ45Headers); M =
// Σ_j min_j·(bsum_2j + bsum_2j+1), the Q8_K sums paired (each ≤ 32·127),
// is one vpmaddwd per two rows against [0 × 8, pair sums] per 256 bits.
template <class Block>
KVEDGE_ATTR_KQ HWY_INLINE void PassQ45(const Block* const* row, size_t s, const BlockQ8_K& a, const AvxIndex& idx,
                                       __m128i* sums, __m128i* mins, __m256* scales) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  const Q45Headers h = LoadQ45Headers(row, s);
  const __m512i sm01 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(h.scales_mins));    // rows 0, 1
  const __m512i sm23 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(h.scales_mins, 1));  // rows 2, 3
  __m512i raw[4];
  for (size_t i = 0; i < 4; ++i) {
    const uint8_t* qh = nullptr;
    if constexpr (kQ5) qh = row[i][s].qh;
    raw[i] = SumsQ45<kQ5>(qh, row[i][s].qs, a, idx, i % 2 == 1, i < 2 ? sm01 : sm23);
  }
  *sums = Sum16x4(raw[0], raw[1], raw[2], raw[3]);
  const __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums)),
                                          _mm256_set1_epi16(1));
  const __m512i bsum32 = _mm512_maskz_broadcast_i32x4(0xF0F0, _mm256_cvtepi32_epi16(pairs));
  // Row i's four pair products in 128-bit lane i, then summed in the lane.
  __m512i m = _mm512_shuffle_i32x4(_mm512_madd_epi16(sm01, bsum32), _mm512_madd_epi16(sm23, bsum32), 0xDD);
  m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, static_cast<_MM_PERM_ENUM>(0x4E)));
  m = _mm512_add_epi32(m, _mm512_shuffle_epi32(m, static_cast<_MM_PERM_ENUM>(0xB1)));
  // [d | dmin × 4, M × 4] from lane 0 of each 128-bit lane of raw and m.
  const __m256i dm = _mm512_castsi512_si256(
      _mm512_permutex2var_epi32(h.raw, _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0), m));
  *mins = _mm256_extracti128_si256(dm, 1);
  *scales = _mm256_permutexvar_ps(_mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7),
                                  _mm256_cvtph_ps(_mm256_castsi256_si128(dm)));  // [d × 4, dmin × 4]
}

// Bytes of weights the software prefetch runs ahead of the pass (at least
// one pass). Q4_K/Q5_K/IQ4_XS passes of 2048 columns are 4.3–5.5 KiB and
// one pass ahead was too close: from DRAM on AVX3_DL (a loaded machine,
// load 9–11; best of 245 calls, GB/s, two rounds each) one → two passes
// ahead took Q4_K 22.6/22.7 → 27.3/23.3, Q5_K 25.1/24.5 → 30.3/26.8 and
// IQ4_XS 20.2/19.1 → 21.0/26.8; three passes Q4_K 21.7/20.6/21.8 →
// 23.2/22.9/23.2, four no better. The other types keep one pass.
template <class Block>
constexpr size_t kPrefetchBytes = kIsQ45<Block> || std::is_same_v<Block, BlockIQ4_XS> ? 8192 : 0;

// The rows `passes` passes of kRows rows ahead of pass r (columns from
// super-block cb), or nullptr when they would run past row_end; then
// PrefetchPassStep prefetches that pass's super-block s of each row.
template <class Block, size_t kRows>
HWY_INLINE const char* PassAhead(const Block* w, size_t nsb_row, size_t cb, size_t passes, size_t r,
                                 size_t row_end) {
  return r + (passes + 1) * kRows <= row_end ? reinterpret_cast<const char*>(w + (r + passes * kRows) * nsb_row + cb)
                                             : nullptr;
}
template <class Block, size_t kRows>
HWY_INLINE void PrefetchPassStep(const char* ahead, size_t nsb_row, size_t s) {
  if (ahead == nullptr) return;
  for (size_t i = 0; i < kRows; ++i) {
    const char* p = ahead + (i * nsb_row + s) * sizeof(Block);
    for (size_t o = 0; o < sizeof(Block); o += 64) hwy::Prefetch(p + o);
  }
}

// y[r] for rows [row_begin, row_end) over super-blocks [cb, cb + nsb),
// continuing from y when cb > 0. Four rows per pass, one f32 lane each: the
// four rows' S (and M) of a super-block come out of one transposed
// horizontal sum, and each lane runs KQuantChunkRows' scalar folds
// acc = fma(dw·dx, S, acc), acc = fma(−(dmin·dx), M, acc) as vector FMAs
// (the f16 scales converted by F16C, exact as HalfToFloat). A last pass of
// fewer rows repeats its last row in the spare lanes and stores only its own.
template <class Block>
KVEDGE_ATTR_KQ HWY_NOINLINE void AvxChunkRows(const Block* w, size_t nsb_row, size_t cb, size_t nsb,
                                              const BlockQ8_K* xc, float* y, size_t row_begin, size_t row_end) {
  constexpr size_t kRowsPerPass = 4;
  const AvxIndex idx = MakeAvxIndex<Block>();
  const size_t pass_bytes = kRowsPerPass * nsb * sizeof(Block);
  const size_t passes = std::max<size_t>(1, (kPrefetchBytes<Block> + pass_bytes - 1) / pass_bytes);
  for (size_t r = row_begin; r < row_end; r += kRowsPerPass) {
    const size_t valid = std::min(kRowsPerPass, row_end - r);
    const __mmask8 mask = static_cast<__mmask8>((1u << valid) - 1);
    const Block* row[kRowsPerPass];
    for (size_t i = 0; i < kRowsPerPass; ++i) row[i] = w + (r + std::min(i, valid - 1)) * nsb_row + cb;
    __m128 acc = cb == 0 ? _mm_setzero_ps() : _mm_maskz_loadu_ps(mask, y + r);
    // Software prefetch of a later pass's rows, this step's share of them:
    // four row streams left the hardware prefetcher behind (Q4_K from DRAM,
    // CPU-time GB/s: 13.6 → 18.5, loaded machine). `passes` ahead: at least
    // kPrefetchBytes<Block> in flight.
    const char* ahead = PassAhead<Block, kRowsPerPass>(w, nsb_row, cb, passes, r, row_end);
    for (size_t s = 0; s < nsb; ++s) {
      PrefetchPassStep<Block, kRowsPerPass>(ahead, nsb_row, s);
      const __m128 dx = _mm_set1_ps(xc[s].d);
      if constexpr (kIsQ45<Block>) {
        __m128i sums, mins;
        __m256 scales;
        PassQ45(row, s, xc[s], idx, &sums, &mins, &scales);
        acc = _mm_fmadd_ps(_mm_mul_ps(_mm256_castps256_ps128(scales), dx), _mm_cvtepi32_ps(sums), acc);
        acc = _mm_fnmadd_ps(_mm_mul_ps(_mm256_extractf128_ps(scales, 1), dx), _mm_cvtepi32_ps(mins), acc);
      } else {
        RawSums raw[kRowsPerPass];
        for (size_t i = 0; i < kRowsPerPass; ++i) raw[i] = AvxSums(row[i][s], xc[s], idx);
        __m128i sums = Sum16x4(raw[0].s, raw[1].s, raw[2].s, raw[3].s);
        if constexpr (kOffsetShift<Block> >= 0) {
          const __m128i mins = Sum8x4(raw[0].m, raw[1].m, raw[2].m, raw[3].m);
          sums = _mm_sub_epi32(sums, _mm_slli_epi32(mins, kOffsetShift<Block>));
        }
        uint16_t d[kRowsPerPass];
        for (size_t i = 0; i < kRowsPerPass; ++i) d[i] = row[i][s].d;
        uint64_t packed;
        std::memcpy(&packed, d, sizeof(packed));
        const __m128 dw = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<int64_t>(packed)));
        acc = _mm_fmadd_ps(_mm_mul_ps(dw, dx), _mm_cvtepi32_ps(sums), acc);
      }
    }
    _mm_mask_storeu_ps(y + r, mask, acc);
  }
}

// Q2_K/Q3_K: eight rows per pass (two transposed horizontal sums of four
// fill one ymm, one f32 lane per row), so the scale loads, the folds and the
// loop overhead are shared by twice the rows of AvxChunkRows; otherwise its
// op order per lane (acc = fma(dw·dx, S, acc), Q2_K then
// acc = fma(−(dmin·dx), M, acc); Q3_K S − 4·M first), bit for bit. Eight
// rows keep 8 · 2 int32 vectors in flight (32 zmm registers).
template <class Block>
KVEDGE_ATTR_KQ HWY_NOINLINE void AvxChunkRowsQ23(const Block* w, size_t nsb_row, size_t cb, size_t nsb,
                                                 const BlockQ8_K* xc, float* y, size_t row_begin, size_t row_end) {
  static_assert(kIsQ23<Block>);
  constexpr bool kQ2 = std::is_same_v<Block, BlockQ2_K>;
  constexpr size_t kRowsPerPass = 8;
  const AvxIndex idx = MakeAvxIndex<Block>();
  // [d0 m0 d1 m1 …] f16 pairs of four rows per 128-bit lane → [d0 … d3 m0 … m3].
  const __m256i deinterleave = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const size_t pass_bytes = kRowsPerPass * nsb * sizeof(Block);
  const size_t passes = std::max<size_t>(1, (kPrefetchBytes<Block> + pass_bytes - 1) / pass_bytes);
  for (size_t r = row_begin; r < row_end; r += kRowsPerPass) {
    const size_t valid = std::min(kRowsPerPass, row_end - r);
    const __mmask8 mask = static_cast<__mmask8>((1u << valid) - 1);
    const Block* row[kRowsPerPass];
    for (size_t i = 0; i < kRowsPerPass; ++i) row[i] = w + (r + std::min(i, valid - 1)) * nsb_row + cb;
    __m256 acc = cb == 0 ? _mm256_setzero_ps() : _mm256_maskz_loadu_ps(mask, y + r);
    const char* ahead = PassAhead<Block, kRowsPerPass>(w, nsb_row, cb, passes, r, row_end);
    for (size_t s = 0; s < nsb; ++s) {
      PrefetchPassStep<Block, kRowsPerPass>(ahead, nsb_row, s);
      RawSums raw[kRowsPerPass];
      for (size_t i = 0; i < kRowsPerPass; ++i) raw[i] = SumsQ23<!kQ2>(row[i][s], xc[s], idx);
      __m256i sums = _mm256_set_m128i(Sum16x4(raw[4].s, raw[5].s, raw[6].s, raw[7].s),
                                      Sum16x4(raw[0].s, raw[1].s, raw[2].s, raw[3].s));
      const __m256i mins = _mm256_set_m128i(Sum8x4(raw[4].m, raw[5].m, raw[6].m, raw[7].m),
                                            Sum8x4(raw[0].m, raw[1].m, raw[2].m, raw[3].m));
      const __m256 dx = _mm256_set1_ps(xc[s].d);
      if constexpr (kQ2) {
        uint32_t bits[kRowsPerPass];  // [row] d | dmin << 16
        for (size_t i = 0; i < kRowsPerPass; ++i) std::memcpy(bits + i, &row[i][s].d, sizeof(bits[i]));
        const __m256i halves = _mm256_permute4x64_epi64(
            _mm256_shuffle_epi8(_mm256_setr_epi32(static_cast<int>(bits[0]), static_cast<int>(bits[1]),
                                                  static_cast<int>(bits[2]), static_cast<int>(bits[3]),
                                                  static_cast<int>(bits[4]), static_cast<int>(bits[5]),
                                                  static_cast<int>(bits[6]), static_cast<int>(bits[7])),
                                deinterleave),
            0xD8);  // [d × 8, dmin × 8]
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(_mm256_castsi256_si128(halves)), dx),
                              _mm256_cvtepi32_ps(sums), acc);
        acc = _mm256_fnmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1)), dx),
                               _mm256_cvtepi32_ps(mins), acc);
      } else {
        sums = _mm256_sub_epi32(sums, _mm256_slli_epi32(mins, kOffsetShift<Block>));
        const __m128i d = _mm_setr_epi16(static_cast<int16_t>(row[0][s].d), static_cast<int16_t>(row[1][s].d),
                                         static_cast<int16_t>(row[2][s].d), static_cast<int16_t>(row[3][s].d),
                                         static_cast<int16_t>(row[4][s].d), static_cast<int16_t>(row[5][s].d),
                                         static_cast<int16_t>(row[6][s].d), static_cast<int16_t>(row[7][s].d));
        acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(d), dx), _mm256_cvtepi32_ps(sums), acc);
      }
    }
    _mm256_mask_storeu_ps(y + r, mask, acc);
  }
}

template <class Block>
void AvxMatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const size_t nsb_row = m.cols / kSuperBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/256] super-blocks
  HWY_ALIGN BlockQ8_K xc[kChunkSuperBlocks];             // the chunk's activations, PrepareAvxChunk order
  for (size_t cb = 0; cb < nsb_row; cb += kChunkSuperBlocks) {
    const size_t nsb = std::min(kChunkSuperBlocks, nsb_row - cb);
    PrepareAvxChunk<Block>(x + cb * kSuperBlock, nsb, xc);
    if constexpr (kIsQ23<Block>) {
      AvxChunkRowsQ23(w, nsb_row, cb, nsb, xc, y, row_begin, row_end);
    } else {
      AvxChunkRows(w, nsb_row, cb, nsb, xc, y, row_begin, row_end);
    }
  }
}
#undef KVEDGE_ATTR_KQ
