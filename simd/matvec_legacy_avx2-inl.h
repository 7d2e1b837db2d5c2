// Q4_1, Q5_0, Q5_1 and IQ4_NL tiles with AVX2 (no AVX-512, no VNNI): the
// codes stay bytes, one 32-weight block per ymm. A fragment of
// matvec_legacy.cc: included inside its per-target namespace for HWY_AVX2
// only, where TileKernel routes these types (QuantTile's int16 widening ran
// them at 29–45% of MemoryRead from DRAM).
//
// Per (row, block): the 32 codes as bytes in weight order (16 qs bytes: low
// nibbles weights 0…15, high nibbles 16…31; the fifth bits of qh spread to
// bytes as llama.cpp's bytes_from_bits_32). Q4_1/Q5_1 codes are unsigned
// (0…15, 0…31): vpmaddubsw against the int8 activation codes (pairs ≤
// 2·31·127). Q5_0 (q − 16 = nibble | 0xF0 where the fifth bit is clear) and
// IQ4_NL (vpshufb of the codebook) are signed: vpmaddubsw takes |w| against
// the activations with w's sign (vpsignb; pairs ≤ 2·127·127 = 32258; the
// activation codes are within ±127). One vpmaddwd against ones gives eight
// int32 lanes whose sum is the block's exact Σ w·x; per (row, vector) the
// lanes are converted and FMA'd with the block scale dw·dx into eight f32
// lanes, summed at the end in a fixed order. The sequence per (row, vector)
// is the same in every R×V tile, so MatMul and any thread count agree with
// MatVec bit for bit. The activations arrive as int16 codes (WordChunk):
// one vpacksswb + vpermq per (block, vector), shared by the tile's rows.
#if HWY_TARGET != HWY_AVX2
#error "matvec_legacy_avx2-inl.h is the HWY_AVX2 section of matvec_legacy.cc"
#endif

template <class Block>
constexpr bool kAvx2LegacyBytes = std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_0> ||
                                  std::is_same_v<Block, BlockQ5_1> || std::is_same_v<Block, BlockIQ4_NL>;

// Nibble codes 0…15 of a block's 32 weights from its 16 qs bytes.
HWY_INLINE __m256i Avx2Nibbles(const uint8_t* qs) {
  const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(15));
}

// 0xFF where bit j of the 4 bytes at qh is set (byte j), else 0.
HWY_INLINE __m256i Avx2BitsToBytes(const uint8_t* qh) {
  uint32_t bits;
  std::memcpy(&bits, qh, sizeof(bits));
  const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)),
                                             _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                               0x0101010101010101, 0x0000000000000000));
  // Byte j keeps all bits but bit j % 8: all ones exactly when that bit is set.
  const __m256i others = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
  return _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi64x(-1));
}

// The block's codes as bytes in weight order (ref::QuantCode): unsigned for
// Q4_1/Q5_1, signed for Q5_0/IQ4_NL.
HWY_INLINE __m256i Avx2Codes(const BlockQ4_1& b) { return Avx2Nibbles(b.qs); }
HWY_INLINE __m256i Avx2Codes(const BlockQ5_1& b) {
  return _mm256_or_si256(Avx2Nibbles(b.qs), _mm256_and_si256(Avx2BitsToBytes(b.qh), _mm256_set1_epi8(16)));
}
HWY_INLINE __m256i Avx2Codes(const BlockQ5_0& b) {
  return _mm256_or_si256(Avx2Nibbles(b.qs),
                         _mm256_andnot_si256(Avx2BitsToBytes(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0))));
}
HWY_INLINE __m256i Avx2Codes(const BlockIQ4_NL& b) {
  const __m256i table = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4nlValues)));
  return _mm256_shuffle_epi8(table, Avx2Nibbles(b.qs));
}

// Eight int32 lanes summing to Σ w·x over the block; x: 32 int8 codes.
template <class Block>
HWY_INLINE __m256i Avx2BlockDot(__m256i w, __m256i x) {
  __m256i pairs;
  if constexpr (std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_1>) {
    pairs = _mm256_maddubs_epi16(w, x);
  } else {
    pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  }
  return _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
}

// 32 int16 codes (each within ±127) as int8 bytes in order.
HWY_INLINE __m256i Avx2PackCodes(const int16_t* q) {
  const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q));
  const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16));
  return _mm256_permute4x64_epi64(_mm256_packs_epi16(lo, hi), 0xD8);
}

// Σ of the eight lanes of v: ((0+4) + (2+6)) + ((1+5) + (3+7)).
HWY_INLINE float Avx2SumLanes(__m256 v) {
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// QuantTile's contract (w[r]: [nb] blocks; xq[v]: [nb·32] int16 codes; s:
// [R·V][kChunkBlocks] dw·dx; out: [R][V]) on bytes.
template <class Block, size_t R, size_t V>
HWY_NOINLINE void Avx2ByteTile(const Block* const* w, const int16_t* const* xq, const float* s, size_t nb,
                               size_t prefetch_ahead, float* out) {
  __m256 acc[R][V];
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) acc[r][v] = _mm256_setzero_ps();
  }
  for (size_t b = 0; b < nb; ++b) {
    if (prefetch_ahead != 0) {
      for (size_t r = 0; r < R; ++r) hwy::Prefetch(w[r] + b + prefetch_ahead);
    }
    __m256i x[V];
    for (size_t v = 0; v < V; ++v) x[v] = Avx2PackCodes(xq[v] + b * kQuantBlock);
    for (size_t r = 0; r < R; ++r) {
      const __m256i codes = Avx2Codes(w[r][b]);
      for (size_t v = 0; v < V; ++v) {
        const __m256 sum = _mm256_cvtepi32_ps(Avx2BlockDot<Block>(codes, x[v]));
        acc[r][v] = _mm256_fmadd_ps(sum, _mm256_set1_ps(s[(r * V + v) * kChunkBlocks + b]), acc[r][v]);
      }
    }
  }
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) out[r * V + v] = Avx2SumLanes(acc[r][v]);
  }
}
