// MatVec of every Q8_K-activation type (Q2_K … Q6_K, IQ4_XS) with AVX2 (no
// AVX-512, no VNNI): the codes stay bytes, 32 weights per ymm, eight rows
// per pass. A fragment of matvec_kquant.cc: included inside its per-target
// namespace for HWY_AVX2 only, after QuantizeQ8K, KQuant and UnpackScalesMins.
//
// Per row and super-block, vpmaddubsw multiplies the unsigned code bytes
// (Q2_K 0…3, Q3_K q + 4 = 0…7, Q4_K 0…15, Q5_K 0…31, Q6_K q + 32 = 0…63)
// by the int8 activation codes into int16 pair sums (≤ 2·63·127, no
// saturation), and vpmaddwd weights them by their sub-block scale into int32
// lanes: S = Σ of the lanes, exact. M (Q2_K/Q4_K/Q5_K: Σ min·bsum; Q3_K and
// Q6_K: Σ sc·bsum, S −= 4·M or 32·M) is one vpmaddwd of the scales or mins,
// spread to the 16 bsums lanes, against the Q8_K sums. IQ4_XS levels are
// signed (vpshufb of the codebook): vpmaddubsw takes |level| against the
// activations with the levels' signs (vpsignb; |level·x| ≤ 127², a pair ≤
// 32258), and has no M.
// A Q4_K/Q5_K ymm of 32 code bytes holds sub-block 2j in its low nibbles and
// 2j + 1 in its high ones, which is ggml's activation order: the Q8_K codes
// are used as QuantizeQ8K writes them. Raw intrinsics: Highway 1.0.3 has no
// u8×i8 or i16 pair-sum op.
#if HWY_TARGET != HWY_AVX2
#error "matvec_kquant_avx2-inl.h is the HWY_AVX2 section of matvec_kquant.cc"
#endif

// Q3_K (2) and Q6_K (5) sum unsigned codes q + 2^shift: S −= M << shift;
// −1: no offset (IQ4_XS has no M; the types with mins fold M themselves).
template <class Block>
constexpr int kAvx2OffsetShift = std::is_same_v<Block, BlockQ6_K> ? 5 : std::is_same_v<Block, BlockQ3_K> ? 2 : -1;

// IQ4_XS reads the 16 code bytes of two sub-blocks (of 32) as one ymm: its
// low nibbles hold weights [0, 16) of each, its high nibbles [16, 32). The
// chunk's activations are stored in that order (slot i of 16 codes holds
// activations [16·order[i], +16)); the other types use ggml's order.
constexpr uint8_t kAvx2Iq4Order[16] = {0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15};

// vpshufb indices (per 128-bit lane) that spread scales (bytes; Q6_K int16) to
// int16 lanes; a 0x80 byte gives 0.
struct Avx2Index {
  // Q4_K/Q5_K, on [sc0 … sc7, m0 … m7] bytes: q45_scale[c] = sc_c in every
  // int16 lane (zero-extended); q45_min: lane i = m_{i/2} (bsums lane i
  // covers codes 16i … 16i + 15, sub-block i/2).
  HWY_ALIGN uint8_t q45_scale[8][32];
  HWY_ALIGN uint8_t q45_min[32];
  // Q5_K, on the same bytes: q5_quad[h] = int16 lanes [sc_4h, sc_4h,
  // sc_4h+1, sc_4h+1, …, sc_4h+3] in each 128-bit lane (zero-extended).
  HWY_ALIGN uint8_t q5_quad[2][32];
  // Q6_K, Q2_K and Q3_K, on the int16 scales [sc_8h … sc_8h+7] of half h
  // in both 128-bit lanes: q6_scale[k] = sc_8h+2k in the low lane,
  // sc_8h+2k+1 in the high one (code vector k of a half covers weights
  // 32k … 32k + 31, a scale per 16). IQ4_XS, on its 8 int16 scales in both
  // lanes: code vector k (kAvx2Iq4Order) has sub-block 2⌊k/2⌋ in its low
  // lane and 2⌊k/2⌋ + 1 in its high one, so q6_scale[k/2] again.
  HWY_ALIGN uint8_t q6_scale[4][32];
};

constexpr Avx2Index MakeAvx2Index() {
  Avx2Index idx{};
  for (int i = 0; i < 32; i += 2) {
    const int lane16 = i / 2;  // 0…15; 128-bit lane lane16 / 8
    for (int c = 0; c < 8; ++c) {
      idx.q45_scale[c][i] = static_cast<uint8_t>(c);
      idx.q45_scale[c][i + 1] = 0x80;
    }
    idx.q45_min[i] = static_cast<uint8_t>(8 + lane16 / 2);
    idx.q45_min[i + 1] = 0x80;
    for (int h = 0; h < 2; ++h) {
      idx.q5_quad[h][i] = static_cast<uint8_t>(4 * h + (lane16 % 8) / 2);
      idx.q5_quad[h][i + 1] = 0x80;
    }
    for (int k = 0; k < 4; ++k) {
      const int scale = 2 * k + lane16 / 8;  // int16 element of the table
      idx.q6_scale[k][i] = static_cast<uint8_t>(2 * scale);
      idx.q6_scale[k][i + 1] = static_cast<uint8_t>(2 * scale + 1);
    }
  }
  return idx;
}
constexpr Avx2Index kAvx2Index = MakeAvx2Index();

HWY_INLINE __m256i LoadIdx(const uint8_t* p) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(p)); }
HWY_INLINE __m256i Load32(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// The 4 bytes at p as an int (Q2_K's d | dmin << 16).
HWY_INLINE int Load32Bits(const void* p) {
  int v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Int16 pair sums p weighted by the scales that vpshufb index idx spreads
// from table: int32 lanes.
HWY_INLINE __m256i ScaledPairs(__m256i p, __m256i table, const uint8_t* idx) {
  return _mm256_madd_epi16(p, _mm256_shuffle_epi8(table, LoadIdx(idx)));
}

// One row's super-block before the horizontal sums: S = Σ of s's 8 lanes,
// M = Σ of m's 8.
struct Avx2Sums {
  __m256i s;
  __m256i m;
};

// Q4_K against activations a.
HWY_INLINE Avx2Sums Avx2SumsQ4(const uint8_t* packed, const uint8_t* qs, const BlockQ8_K& a) {
  HWY_ALIGN uint8_t sm[16];  // [8] scales, [8] mins
  UnpackScalesMins(packed, sm);
  const __m256i table = _mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(sm)));
  const __m256i k15 = _mm256_set1_epi8(15);
  // Two accumulators halve the vpaddd chain.
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int j = 0; j < 4; ++j) {
    const __m256i bytes = Load32(qs + 32 * j);
    const __m256i lo = _mm256_and_si256(bytes, k15);
    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), k15);
    const __m256i p_lo = _mm256_maddubs_epi16(lo, Load32(a.qs + 64 * j));
    const __m256i p_hi = _mm256_maddubs_epi16(hi, Load32(a.qs + 64 * j + 32));
    acc[0] = _mm256_add_epi32(acc[0], ScaledPairs(p_lo, table, kAvx2Index.q45_scale[2 * j]));
    acc[1] = _mm256_add_epi32(acc[1], ScaledPairs(p_hi, table, kAvx2Index.q45_scale[2 * j + 1]));
  }
  const __m256i mins = _mm256_shuffle_epi8(table, LoadIdx(kAvx2Index.q45_min));
  return {_mm256_add_epi32(acc[0], acc[1]), _mm256_madd_epi16(mins, Load32(a.bsums))};
}

// Q6_K against activations a over the unsigned codes q + 32 (S − 32·M is
// the caller's).
HWY_INLINE Avx2Sums Avx2SumsQ6(const BlockQ6_K& b, const BlockQ8_K& a) {
  const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
  const __m256i k15 = _mm256_set1_epi8(15), k48 = _mm256_set1_epi8(0x30);
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int half = 0; half < 2; ++half) {
    // [sc_8h … sc_8h+7] in both 128-bit lanes.
    __m256i table = _mm256_permute4x64_epi64(sc16, 0x44);
    if (half == 1) table = _mm256_permute4x64_epi64(sc16, 0xEE);
    const __m256i ql0 = Load32(b.ql + 64 * half), ql1 = Load32(b.ql + 64 * half + 32);
    const __m256i h = Load32(b.qh + 32 * half);  // bits 2k, 2k+1 of byte l: top bits of weight 32k + l
    // 16-bit shifts are exact under the per-byte 0x30 mask.
    const __m256i q[4] = {
        _mm256_or_si256(_mm256_and_si256(ql0, k15), _mm256_and_si256(_mm256_slli_epi16(h, 4), k48)),
        _mm256_or_si256(_mm256_and_si256(ql1, k15), _mm256_and_si256(_mm256_slli_epi16(h, 2), k48)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql0, 4), k15), _mm256_and_si256(h, k48)),
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(ql1, 4), k15),
                        _mm256_and_si256(_mm256_srli_epi16(h, 2), k48))};
    for (int k = 0; k < 4; ++k) {
      const __m256i p = _mm256_maddubs_epi16(q[k], Load32(a.qs + 128 * half + 32 * k));
      acc[k & 1] = _mm256_add_epi32(acc[k & 1], ScaledPairs(p, table, kAvx2Index.q6_scale[k]));
    }
  }
  return {_mm256_add_epi32(acc[0], acc[1]), _mm256_madd_epi16(sc16, Load32(a.bsums))};
}


// The 16 scales − 32 of a Q3_K super-block as int16 lanes: UnpackQ3KScales
// in registers (scalar word stores read back as one vector stalled on store
// forwarding: 28 % of the kernel's samples). p: 16 bytes, the 12 packed
// scales at p + 2 (the codes' last two bytes first keeps the load inside the
// block). Scale g: low 4 bits from byte g % 8 (>> 4 when g ≥ 8), high 2 bits
// from byte 8 + g % 4 (>> 2·(g / 4)); 32-bit shifts are exact under the
// per-byte masks.
HWY_INLINE __m256i Avx2Q3Scales16(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i lo = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi8(v, _mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9)),
                     _mm_setr_epi32(0, 0, 4, 4)),
      _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(
      _mm_srlv_epi32(_mm_shuffle_epi8(v, _mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13)),
                     _mm_setr_epi32(0, 2, 4, 6)),
      _mm_set1_epi8(3));
  return _mm256_sub_epi16(_mm256_cvtepu8_epi16(_mm_or_si128(lo, _mm_slli_epi32(hi, 4))), _mm256_set1_epi16(32));
}

// Q2_K (kQ3 false) or Q3_K against activations a (ggml order), a scale per
// 16 weights: weight 128h + 32j + l is bit pair j of qs[32h + l] (Q3_K: + 4
// when bit 4h + j of hmask[l] is set, the unsigned code q + 4). S = Σ sc·u·x,
// M = Σ m·bsum with m the mins (Q2_K) or the scales (Q3_K: S − 4·M is the
// caller's).
template <bool kQ3, class Block>
HWY_INLINE Avx2Sums Avx2SumsQ23(const Block& b, const BlockQ8_K& a) {
  __m256i sc16, m16;  // [16] int16 scales, mins
  if constexpr (kQ3) {
    sc16 = Avx2Q3Scales16(b.qs + 62);
    m16 = sc16;
  } else {
    const __m256i bytes = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    sc16 = _mm256_and_si256(bytes, _mm256_set1_epi16(15));
    m16 = _mm256_srli_epi16(bytes, 4);
  }
  const __m256i k3 = _mm256_set1_epi8(3), k4 = _mm256_set1_epi8(4);
  __m256i hm = _mm256_setzero_si256();  // bit 4h + j of byte l: the high bit of weight 128h + 32j + l
  if constexpr (kQ3) hm = Load32(b.hmask);
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int h = 0; h < 2; ++h) {
    // [sc_8h … sc_8h+7] in both 128-bit lanes.
    // (Immediate operands: clang wants a constant, so one permute per half.)
    const __m256i table = h == 0 ? _mm256_permute4x64_epi64(sc16, 0x44) : _mm256_permute4x64_epi64(sc16, 0xEE);
    const __m256i q = Load32(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      // 16-bit shifts are exact under the per-byte masks.
      __m256i u = _mm256_and_si256(_mm256_srli_epi16(q, 2 * j), k3);
      if constexpr (kQ3) {
        // Bit k = 4h + j moved to bit 2 (value 4) by one shift and mask.
        const int k = 4 * h + j;
        const __m256i at2 = k > 2 ? _mm256_srli_epi16(hm, k - 2) : k < 2 ? _mm256_slli_epi16(hm, 2 - k) : hm;
        u = _mm256_or_si256(u, _mm256_and_si256(at2, k4));
      }
      const __m256i p = _mm256_maddubs_epi16(u, Load32(a.qs + 128 * h + 32 * j));
      acc[j & 1] = _mm256_add_epi32(acc[j & 1], ScaledPairs(p, table, kAvx2Index.q6_scale[j]));
    }
  }
  return {_mm256_add_epi32(acc[0], acc[1]), _mm256_madd_epi16(m16, Load32(a.bsums))};
}

// IQ4_XS against activations a in kAvx2Iq4Order: S = Σ (ls − 32)·level·x.
HWY_INLINE Avx2Sums Avx2SumsIQ4XS(const BlockIQ4_XS& b, const BlockQ8_K& a) {
  // Sub-block ib's scale: bits 4ib… of scales_l (as one u32) and 2ib… of
  // scales_h, as int32 lanes, then packed to int16 [ls_0 … ls_7] in both
  // 128-bit lanes.
  uint32_t low;
  std::memcpy(&low, b.scales_l, sizeof(low));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(low)),
                                                        _mm256_slli_epi32(lane, 2)),
                                      _mm256_set1_epi32(15));
  const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(b.scales_h), _mm256_slli_epi32(lane, 1)),
                                      _mm256_set1_epi32(3));
  const __m256i ls = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), _mm256_set1_epi32(32));
  const __m256i table = _mm256_permute4x64_epi64(_mm256_packs_epi32(ls, ls), 0x88);
  const __m256i levels = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  const __m256i k15 = _mm256_set1_epi8(15);
  __m256i acc[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
  for (int j = 0; j < 4; ++j) {
    const __m256i q = Load32(b.qs + 32 * j);
    const __m256i codes[2] = {_mm256_and_si256(q, k15), _mm256_and_si256(_mm256_srli_epi16(q, 4), k15)};
    for (int n = 0; n < 2; ++n) {
      const __m256i v = _mm256_shuffle_epi8(levels, codes[n]);
      const __m256i x = Load32(a.qs + 64 * j + 32 * n);
      const __m256i p = _mm256_maddubs_epi16(_mm256_abs_epi8(v), _mm256_sign_epi8(x, v));
      acc[n] = _mm256_add_epi32(acc[n], ScaledPairs(p, table, kAvx2Index.q6_scale[j]));
    }
  }
  return {_mm256_add_epi32(acc[0], acc[1]), _mm256_setzero_si256()};
}

// Q5_K's 8 scales and 8 mins as bytes [sc0 … sc7, m0 … m7]: UnpackScalesMins
// on the 32-bit lanes of one register (no scalar stores read back as a
// vector). head: the block's first 16 bytes [d | dmin << 16, u0, u1, u2] (u:
// the 12 packed scale bytes as 32-bit words).
HWY_INLINE __m128i Avx2Q5ScalesMins(const BlockQ5_K& b) {
  static_assert(offsetof(BlockQ5_K, scales) == 4 && sizeof(BlockQ5_K::scales) == 12);
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(&b));
  const __m128i a = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0xED), _mm_setr_epi32(0, 0, 0, 4)),  // [u0 u2 u1 u2]
                                  _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
  const __m128i c = _mm_and_si128(_mm_srli_epi32(_mm_shuffle_epi32(v, 0xA5), 2),  // [u0 u0 u1 u1]
                                  _mm_setr_epi32(0, 0x30303030, 0, 0x30303030));
  return _mm_or_si128(a, c);
}

// Bit kBit of every byte of h moved to bit 4 (other bits: garbage for the
// caller's 0x10 mask; 16-bit shifts by ≤ 4 are exact under it).
template <int kBit>
HWY_INLINE __m256i Avx2BitTo4(__m256i h) {
  if constexpr (kBit < 4) {
    return _mm256_slli_epi16(h, 4 - kBit);
  } else if constexpr (kBit > 4) {
    return _mm256_srli_epi16(h, kBit - 4);
  } else {
    return h;
  }
}

// The int16 pair sums of code vector pair j (32 qs bytes: sub-block 2j in
// the low nibbles, 2j + 1 in the high ones) of a Q5_K block with its fifth
// bits (bits 2j, 2j + 1 of qh) against the activations: [sub-block 2j,
// sub-block 2j + 1], each |·| ≤ 2·31·127.
template <int j>
HWY_INLINE void Avx2Q5Pairs(const BlockQ5_K& b, const BlockQ8_K& a, __m256i h, __m256i* p) {
  const __m256i k15 = _mm256_set1_epi8(15), k16 = _mm256_set1_epi8(16);
  const __m256i bytes = Load32(b.qs + 32 * j);
  const __m256i lo = _mm256_or_si256(_mm256_and_si256(bytes, k15), _mm256_and_si256(Avx2BitTo4<2 * j>(h), k16));
  const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bytes, 4), k15),
                                     _mm256_and_si256(Avx2BitTo4<2 * j + 1>(h), k16));
  p[0] = _mm256_maddubs_epi16(lo, Load32(a.qs + 64 * j));
  p[1] = _mm256_maddubs_epi16(hi, Load32(a.qs + 64 * j + 32));
}

// Q5_K against activations a (ggml order). Each fifth bit reaches bit 4 by
// one shift of the loaded qh; the scales are unpacked in registers. The
// pair sums of four sub-blocks are added two levels deep by vphaddw (each
// int16 then sums 8 products, |·| ≤ 8·31·127 = 31496: exact), which leaves
// per 128-bit lane [2 lanes of sub-block 4h, 2 of 4h + 1, 4h + 2, 4h + 3];
// one vpmaddwd by [sc_4h, sc_4h, sc_4h+1, …] per half weights them.
HWY_INLINE Avx2Sums Avx2SumsQ5(const BlockQ5_K& b, const BlockQ8_K& a) {
  const __m256i table = _mm256_broadcastsi128_si256(Avx2Q5ScalesMins(b));
  const __m256i h = Load32(b.qh);  // bit c of byte l: 5th bit of weight 32c + l
  __m256i p[8];
  Avx2Q5Pairs<0>(b, a, h, p + 0);
  Avx2Q5Pairs<1>(b, a, h, p + 2);
  Avx2Q5Pairs<2>(b, a, h, p + 4);
  Avx2Q5Pairs<3>(b, a, h, p + 6);
  const __m256i q0 = _mm256_hadd_epi16(_mm256_hadd_epi16(p[0], p[1]), _mm256_hadd_epi16(p[2], p[3]));
  const __m256i q1 = _mm256_hadd_epi16(_mm256_hadd_epi16(p[4], p[5]), _mm256_hadd_epi16(p[6], p[7]));
  const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(q0, _mm256_shuffle_epi8(table, LoadIdx(kAvx2Index.q5_quad[0]))),
                                     _mm256_madd_epi16(q1, _mm256_shuffle_epi8(table, LoadIdx(kAvx2Index.q5_quad[1]))));
  const __m256i mins = _mm256_shuffle_epi8(table, LoadIdx(kAvx2Index.q45_min));
  return {s, _mm256_madd_epi16(mins, Load32(a.bsums))};
}

template <class Block>
HWY_INLINE Avx2Sums Avx2SumsOf(const Block& b, const BlockQ8_K& a) {
  if constexpr (std::is_same_v<Block, BlockQ6_K>) {
    return Avx2SumsQ6(b, a);
  } else if constexpr (std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K>) {
    return Avx2SumsQ23<std::is_same_v<Block, BlockQ3_K>>(b, a);
  } else if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
    return Avx2SumsIQ4XS(b, a);
  } else if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    return Avx2SumsQ5(b, a);
  } else {
    return Avx2SumsQ4(b.scales, b.qs, a);
  }
}

// [S_i, M_i, S_j, M_j] of two rows' sums.
HWY_INLINE __m128i PairSums(const Avx2Sums& i, const Avx2Sums& j) {
  const __m256i ti = _mm256_hadd_epi32(i.s, i.m), tj = _mm256_hadd_epi32(j.s, j.m);  // [s s m m | s s m m]
  const __m128i fi = _mm_add_epi32(_mm256_castsi256_si128(ti), _mm256_extracti128_si256(ti, 1));
  const __m128i fj = _mm_add_epi32(_mm256_castsi256_si128(tj), _mm256_extracti128_si256(tj, 1));
  return _mm_hadd_epi32(fi, fj);
}

constexpr size_t kAvx2Rows = 8;

// Prefetches super-block s of the next pass's eight rows (kAvx2Rows rows
// after each of `row`).
template <class Block>
HWY_INLINE void Avx2PrefetchNextPass(const Block* const* row, size_t nsb_row, size_t s) {
  for (size_t i = 0; i < kAvx2Rows; ++i) {
    const char* next = reinterpret_cast<const char*>(row[i] + kAvx2Rows * nsb_row + s);
    for (size_t o = 0; o < sizeof(Block); o += 64) hwy::Prefetch(next + o);
  }
}

// One pass over up to eight rows: rows [0, valid) of w (nsb_row super-blocks
// apart, from the chunk's first), y[0, valid) their running sums (continued
// when `accumulate`), xc the chunk's nsb activation blocks. One f32 lane per
// row runs KQuantChunkRows' scalar folds acc = fma(dw·dx, S, acc),
// acc = fma(−(dmin·dx), M, acc) as vector FMAs (f16 scales by F16C, exact
// as HalfToFloat), so every lane equals ref::MatVecRowsQ8K bit for bit.
// Fewer than eight rows repeat the last one in the spare lanes; only
// [0, valid) is stored. With `prefetch`, the next pass's eight rows are
// prefetched, one super-block of each per step (eight row streams are more
// than the hardware prefetcher follows).
template <class Block>
HWY_INLINE void Avx2Pass(const Block* w, size_t nsb_row, size_t nsb, size_t valid, bool prefetch,
                         const BlockQ8_K* xc, float* y, bool accumulate) {
  // d (and dmin) halves of four rows [d0 m0 d1 m1 …] → [d0 d1 d2 d3 m0 m1 m2 m3].
  const __m256i deinterleave_halves = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                       0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const Block* row[kAvx2Rows];
  for (size_t i = 0; i < kAvx2Rows; ++i) row[i] = w + std::min(i, valid - 1) * nsb_row;
  __m256 acc = accumulate ? _mm256_maskload_ps(y, lanes) : _mm256_setzero_ps();
  for (size_t s = 0; s < nsb; ++s) {
    if (prefetch) Avx2PrefetchNextPass(row, nsb_row, s);
    __m128i pairs[kAvx2Rows / 2];  // [S_2k, M_2k, S_2k+1, M_2k+1]
    for (size_t k = 0; k < kAvx2Rows / 2; ++k) {
      pairs[k] = PairSums(Avx2SumsOf(row[2 * k][s], xc[s]), Avx2SumsOf(row[2 * k + 1][s], xc[s]));
    }
    const __m256 p01_45 = _mm256_castsi256_ps(_mm256_set_m128i(pairs[2], pairs[0]));
    const __m256 p23_67 = _mm256_castsi256_ps(_mm256_set_m128i(pairs[3], pairs[1]));
    __m256i sums = _mm256_castps_si256(_mm256_shuffle_ps(p01_45, p23_67, 0x88));  // [S0 … S7]
    const __m256i mins = _mm256_castps_si256(_mm256_shuffle_ps(p01_45, p23_67, 0xDD));
    const __m256 dx = _mm256_set1_ps(xc[s].d);
    if constexpr (KQuant<Block>::kHasMins) {
      uint32_t bits[kAvx2Rows];  // [row] d | dmin << 16
      for (size_t i = 0; i < kAvx2Rows; ++i) std::memcpy(bits + i, &row[i][s].d, sizeof(bits[i]));
      const __m256i halves = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(Load32(bits), deinterleave_halves), 0xD8);
      const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
      const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sums), acc);
      acc = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mins), acc);
    } else {
      if constexpr (kAvx2OffsetShift<Block> >= 0) sums = _mm256_sub_epi32(sums, _mm256_slli_epi32(mins, kAvx2OffsetShift<Block>));
      // [row] f16 d, inserted lane by lane (eight 16-bit stores read back as
      // one vector would stall on store forwarding).
      const __m128i d = _mm_setr_epi16(static_cast<int16_t>(row[0][s].d), static_cast<int16_t>(row[1][s].d),
                                       static_cast<int16_t>(row[2][s].d), static_cast<int16_t>(row[3][s].d),
                                       static_cast<int16_t>(row[4][s].d), static_cast<int16_t>(row[5][s].d),
                                       static_cast<int16_t>(row[6][s].d), static_cast<int16_t>(row[7][s].d));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(d), dx), _mm256_cvtepi32_ps(sums), acc);
    }
  }
  _mm256_maskstore_ps(y, lanes, acc);
}

// Lane i = Σ of v[i]'s 8 lanes: two levels of vphaddd over the eight
// vectors, then the 128-bit halves added (9 ops for 8 rows; PairSums takes
// 7 per 2 rows and S and M together).
HWY_INLINE __m256i Sum8x8(const __m256i* v) {
  const __m256i b0 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[0], v[1]), _mm256_hadd_epi32(v[2], v[3]));
  const __m256i b1 = _mm256_hadd_epi32(_mm256_hadd_epi32(v[4], v[5]), _mm256_hadd_epi32(v[6], v[7]));
  return _mm256_add_epi32(_mm256_permute2x128_si256(b0, b1, 0x20), _mm256_permute2x128_si256(b0, b1, 0x31));
}

// Avx2Pass for Q2_K and Q3_K, the same folds per lane: the eight rows' S
// (and Q2_K's M) come out of Sum8x8. Q3_K takes S − 4·M per lane before the
// horizontal sum (exact integers, the same S), so it reduces one vector per
// row instead of two.
template <class Block>
HWY_INLINE void Avx2PassQ23(const Block* w, size_t nsb_row, size_t nsb, size_t valid, bool prefetch,
                            const BlockQ8_K* xc, float* y, bool accumulate) {
  constexpr bool kQ2 = std::is_same_v<Block, BlockQ2_K>;
  const __m256i deinterleave_halves = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                       0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const Block* row[kAvx2Rows];
  for (size_t i = 0; i < kAvx2Rows; ++i) row[i] = w + std::min(i, valid - 1) * nsb_row;
  __m256 acc = accumulate ? _mm256_maskload_ps(y, lanes) : _mm256_setzero_ps();
  for (size_t s = 0; s < nsb; ++s) {
    if (prefetch) Avx2PrefetchNextPass(row, nsb_row, s);
    __m256i sv[kAvx2Rows], mv[kAvx2Rows];  // [row] S lanes, M lanes
    for (size_t i = 0; i < kAvx2Rows; ++i) {
      const Avx2Sums t = Avx2SumsQ23<!kQ2>(row[i][s], xc[s]);
      sv[i] = kQ2 ? t.s : _mm256_sub_epi32(t.s, _mm256_slli_epi32(t.m, kAvx2OffsetShift<Block>));
      mv[i] = t.m;
    }
    const __m256i sums = Sum8x8(sv);
    const __m256 dx = _mm256_set1_ps(xc[s].d);
    if constexpr (kQ2) {
      const __m256i mins = Sum8x8(mv);
      const __m256i halves = _mm256_permute4x64_epi64(
          _mm256_shuffle_epi8(_mm256_setr_epi32(Load32Bits(&row[0][s].d), Load32Bits(&row[1][s].d),
                                                Load32Bits(&row[2][s].d), Load32Bits(&row[3][s].d),
                                                Load32Bits(&row[4][s].d), Load32Bits(&row[5][s].d),
                                                Load32Bits(&row[6][s].d), Load32Bits(&row[7][s].d)),
                              deinterleave_halves),
          0xD8);  // [d × 8, dmin × 8]
      const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
      const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sums), acc);
      acc = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mins), acc);
    } else {
      const __m128i d = _mm_setr_epi16(static_cast<int16_t>(row[0][s].d), static_cast<int16_t>(row[1][s].d),
                                       static_cast<int16_t>(row[2][s].d), static_cast<int16_t>(row[3][s].d),
                                       static_cast<int16_t>(row[4][s].d), static_cast<int16_t>(row[5][s].d),
                                       static_cast<int16_t>(row[6][s].d), static_cast<int16_t>(row[7][s].d));
      acc = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_cvtph_ps(d), dx), _mm256_cvtepi32_ps(sums), acc);
    }
  }
  _mm256_maskstore_ps(y, lanes, acc);
}

// Avx2Pass with the loops swapped, for Q5_K, whose per-row work fills the
// sixteen ymm registers (eight rows per super-block spilled): each row runs
// over the chunk's super-blocks alone, its [S, M] and f16 d | dmin << 16
// kept per super-block, and then one loop folds the eight rows lane by lane
// exactly as Avx2Pass does (the same bit-identical results). With `prefetch`, each row prefetches
// the same row of the next pass, one super-block per step.
template <class Block>
HWY_INLINE void Avx2PassByRows(const Block* w, size_t nsb_row, size_t nsb, size_t valid, bool prefetch,
                               const BlockQ8_K* xc, float* y, bool accumulate) {
  static_assert(KQuant<Block>::kHasMins && offsetof(Block, d) == 0 && offsetof(Block, dmin) == 2);
  const __m256i deinterleave_halves = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,  //
                                                       0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
  const __m256i lanes = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(valid)),
                                           _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  const Block* row[kAvx2Rows];
  for (size_t i = 0; i < kAvx2Rows; ++i) row[i] = w + std::min(i, valid - 1) * nsb_row;
  HWY_ALIGN int32_t sm[kChunkSuperBlocks][kAvx2Rows][2];  // [s][row] [S, M]
  HWY_ALIGN uint32_t heads[kChunkSuperBlocks][kAvx2Rows];  // [s][row] f16 d | dmin << 16
  for (size_t i = 0; i < kAvx2Rows; ++i) {
    const Block* ri = row[i];
    for (size_t s = 0; s < nsb; ++s) {
      if (prefetch) {
        const char* next = reinterpret_cast<const char*>(ri + kAvx2Rows * nsb_row + s);
        for (size_t o = 0; o < sizeof(Block); o += 64) hwy::Prefetch(next + o);
      }
      const Avx2Sums t = Avx2SumsOf(ri[s], xc[s]);
      const __m256i h = _mm256_hadd_epi32(t.s, t.m);  // [s s m m | s s m m]
      const __m128i f = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
      _mm_storel_epi64(reinterpret_cast<__m128i*>(sm[s][i]), _mm_hadd_epi32(f, f));
      std::memcpy(&heads[s][i], &ri[s], sizeof(uint32_t));
    }
  }
  __m256 acc = accumulate ? _mm256_maskload_ps(y, lanes) : _mm256_setzero_ps();
  for (size_t s = 0; s < nsb; ++s) {
    const __m256i r0_3 = Load32(sm[s][0]), r4_7 = Load32(sm[s][4]);  // [S, M] of rows 0…3, 4…7
    const __m256 p01_45 = _mm256_castsi256_ps(_mm256_permute2x128_si256(r0_3, r4_7, 0x20));
    const __m256 p23_67 = _mm256_castsi256_ps(_mm256_permute2x128_si256(r0_3, r4_7, 0x31));
    const __m256i sums = _mm256_castps_si256(_mm256_shuffle_ps(p01_45, p23_67, 0x88));  // [S0 … S7]
    const __m256i mins = _mm256_castps_si256(_mm256_shuffle_ps(p01_45, p23_67, 0xDD));
    const __m256 dx = _mm256_set1_ps(xc[s].d);
    // [d0 … d7 | dmin0 … dmin7] as f16.
    const __m256i halves = _mm256_permute4x64_epi64(
        _mm256_shuffle_epi8(_mm256_load_si256(reinterpret_cast<const __m256i*>(heads[s])), deinterleave_halves), 0xD8);
    const __m256 dw = _mm256_cvtph_ps(_mm256_castsi256_si128(halves));
    const __m256 dmin = _mm256_cvtph_ps(_mm256_extracti128_si256(halves, 1));
    acc = _mm256_fmadd_ps(_mm256_mul_ps(dw, dx), _mm256_cvtepi32_ps(sums), acc);
    acc = _mm256_fnmadd_ps(_mm256_mul_ps(dmin, dx), _mm256_cvtepi32_ps(mins), acc);
  }
  _mm256_maskstore_ps(y, lanes, acc);
}

// y[r] for rows [row_begin, row_end): per chunk of 64 super-blocks, the
// activations quantized once (IQ4_XS: then reordered, kAvx2Iq4Order), then
// passes of eight rows.
template <class Block>
HWY_NOINLINE void Avx2MatVecRows(const MatrixView& m, const float* x, float* y, size_t row_begin, size_t row_end) {
  const size_t nsb_row = m.cols / kSuperBlock;
  const Block* w = static_cast<const Block*>(m.data);  // [rows][cols/256] super-blocks
  HWY_ALIGN BlockQ8_K xc[kChunkSuperBlocks];             // [super-block of the chunk] activations
  for (size_t cb = 0; cb < nsb_row; cb += kChunkSuperBlocks) {
    const size_t nsb = std::min(kChunkSuperBlocks, nsb_row - cb);
    QuantizeQ8K(x + cb * kSuperBlock, xc, nsb);
    if constexpr (std::is_same_v<Block, BlockIQ4_XS>) {
      for (size_t s = 0; s < nsb; ++s) {
        int8_t q[kSuperBlock];
        std::memcpy(q, xc[s].qs, sizeof(q));
        for (int i = 0; i < 16; ++i) std::memcpy(xc[s].qs + 16 * i, q + 16 * kAvx2Iq4Order[i], 16);
      }
    }
    for (size_t r = row_begin; r < row_end; r += kAvx2Rows) {
      const size_t valid = std::min(kAvx2Rows, row_end - r);
      const bool prefetch = r + 2 * kAvx2Rows <= row_end;
      if constexpr (std::is_same_v<Block, BlockQ2_K> || std::is_same_v<Block, BlockQ3_K>) {
        Avx2PassQ23(w + r * nsb_row + cb, nsb_row, nsb, valid, prefetch, xc, y + r, cb > 0);
      } else if constexpr (std::is_same_v<Block, BlockQ5_K>) {
        Avx2PassByRows(w + r * nsb_row + cb, nsb_row, nsb, valid, prefetch, xc, y + r, cb > 0);
      } else {
        Avx2Pass(w + r * nsb_row + cb, nsb_row, nsb, valid, prefetch, xc, y + r, cb > 0);
      }
    }
  }
}
