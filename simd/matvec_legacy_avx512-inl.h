// The AVX-512 VNNI byte-pair path of matvec_legacy.cc (HWY_AVX3_DL only): a
// fragment included inside its per-target namespace, after the int16 path's
// helpers (kHasMin, DispatchTileShape, legacy_int-inl.h).
#if HWY_TARGET != HWY_AVX3_DL
#error "matvec_legacy_avx512-inl.h is the HWY_AVX3_DL section of matvec_legacy.cc"
#endif

// ------------------------------ AVX-512 VNNI byte dot products
//
// Highway 1.0.3 has no u8×i8 dot product; this target (Ice Lake, Zen 4 and
// later) has VNNI and VBMI, used here through raw intrinsics. Two blocks per
// 512-bit vector: the pair is loaded, one byte permute puts its codes in
// lane order as unsigned bytes (Q4_0: 0…15; Q8_0: code + 128), and vpdpbusd
// multiplies them with the int8 activation codes, adding each group of 4
// products into an int32 lane. Each accumulator starts at −offset·(sum of
// that lane's 4 activation codes) (offset 8 or 128, prepared once per chunk),
// so every lane ends at an exact Σ w_code·x_code.
//
// Lane l holds 4 codes of block b + (l & 1), so a pair's scales are the
// lane pattern (s0, s1, s0, s1, …): dw from the loaded bytes (one word
// permute, one f16 convert per row and pair), dx a 64-bit broadcast load.
// Per (row, vector, pair): vpdpbusd, convert, dw·dx, FMA; per (row, pair):
// the decode (Q4_0: vpermt2b + one GF(2) affine op; Q8_0: vpermt2b + xor;
// the others below) and the two scale ops. Q4_1/Q5_1 add their min term
// m·dx·Σq as one more FMA per (row, vector, pair): each of a block's 8 lanes
// takes m·(dx·Σq/8). KVEDGE_ATTR_VNNI512 (simd/x86_vnni.h) adds the VNNI
// and GFNI features to functions using them.
constexpr size_t kPairCodes = 64;  // int8 activation codes per pair
constexpr size_t kPairLanes = 16;  // int32 lanes per pair
constexpr size_t kChunkPairs = kChunkBlocks / 2;

// One input vector's activations over one column chunk, in pair order.
struct ByteChunk {
  HWY_ALIGN int8_t q[kChunkPairs * kPairCodes];      // [pair][64] codes, lane order
  HWY_ALIGN int32_t init[kChunkPairs * kPairLanes];  // [pair][lane] −offset·Σ of the lane's 4 codes
  HWY_ALIGN float dx[kChunkBlocks];                  // [chunk blocks] scales
  HWY_ALIGN float sx8[kChunkBlocks];                 // [chunk blocks] dx·Σq/8 (kHasMin only)
};

HWY_INLINE __m512i LoadConst(const uint8_t (&bytes)[64]) { return _mm512_loadu_si512(bytes); }

// The f16 block scales at words `first` and `second` of a loaded pair, as
// f32 in the lane pattern (d[b], d[b+1], d[b], …): one word permute, one
// convert. Converting in the tile beats a per-row pass over the scales
// (which costs a scalar phase per row: decode 59 vs 52.5 ms/token on
// TinyLlama q4_0). Also the mins of Q4_1/Q5_1 (the words after).
HWY_INLINE __m512 PairHalves(__m512i pair, int second, int first = 0) {
  const __m512i idx = _mm512_set1_epi32(first | second << 16);
  return _mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(idx, pair)));
}

// Code position of byte i of a pair vector: lane i/4 holds weights
// 4·(lane/2) … +3 of block lane & 1 (Q4_0: of the low-nibble half for i < 32,
// the high-nibble half after).
HWY_INLINE constexpr size_t PairBlock(size_t i) { return (i >> 2) & 1; }
HWY_INLINE constexpr size_t PairWeightQ8(size_t i) { return 4 * (i >> 3) + (i & 3); }
HWY_INLINE constexpr size_t PairWeightQ4(size_t i) { return 16 * (i >> 5) + 4 * ((i & 31) >> 3) + (i & 3); }

// vpermt2b indices: byte offset of each code in the pair (block b's codes at
// kFirst, b+1's at kSecond), offsets from kSplit on taken from the second
// register (index 64 + offset − kSplit).
template <size_t kFirst, size_t kSecond, size_t (*Weight)(size_t), size_t kWeightMod, size_t kSplit>
constexpr auto MakeCodeIndex() {
  struct Table {
    alignas(64) uint8_t idx[64];
  } t{};
  for (size_t i = 0; i < 64; ++i) {
    const size_t offset = (PairBlock(i) ? kSecond : kFirst) + Weight(i) % kWeightMod;
    t.idx[i] = static_cast<uint8_t>(offset < kSplit ? offset : 64 + offset - kSplit);
  }
  return t;
}

template <class Block>
struct BytePair;

// GF(2) affine matrices (row i is byte 7 − i) that keep a byte's low nibble
// or move its high nibble down.
constexpr long long kLowNibble = 0x0102040800000000ll;   // bit i ← bit i, i < 4
constexpr long long kHighNibble = 0x1020408000000000ll;  // bit i ← bit i + 4

// Lane-order bytes with the qs nibbles of a pair: weight j and j + 16 share a
// byte, the upper 32 bytes take its high nibble (one GF(2) affine op).
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i PairNibbles(__m512i bytes) {
  const __m512i nibble = _mm512_set_epi64(kHighNibble, kHighNibble, kHighNibble, kHighNibble, kLowNibble,
                                          kLowNibble, kLowNibble, kLowNibble);
  return _mm512_gf2p8affine_epi64_epi8(bytes, nibble, 0);
}

// The pair's bytes: both blocks (two) or the first only, zero beyond; one
// masked load (kBytes: bytes per block, 2·kBytes ≤ 64).
template <size_t kBytes>
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i LoadPair(const void* w, bool two) {
  const __mmask64 mask = two ? (1ull << (2 * kBytes)) - 1 : (1ull << kBytes) - 1;
  return _mm512_maskz_loadu_epi8(mask, w);
}

// The lane-order nibbles (0…15) of a pair of Q4_0-layout blocks (f16 d, 16
// qs bytes: Q4_0, IQ4_NL) and their scales. Reads only the pair's 36 (or 18)
// bytes.
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Q4Nibbles(const uint8_t* p, bool two, __m512* dw) {
  // qs byte j of block b is at 2 + j, of block b+1 at 20 + j (32 and up:
  // bytes 32–35 of the pair, in the second table at 64 + 0…3).
  static constexpr auto kIdx = MakeCodeIndex<2, 20, PairWeightQ4, 16, 32>();
  const __m512i lo = two ? _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))
                         : _mm512_maskz_loadu_epi8(0x3FFFFull, p);
  const __m512i hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(two ? LoadU32(p + 32) : 0));
  *dw = PairHalves(lo, 9);
  return PairNibbles(_mm512_permutex2var_epi8(lo, LoadConst(kIdx.idx), hi));
}

// The fifth bits of a Q5 pair (qh of block b at byte kQh, of b+1 at kBytes +
// kQh) as a byte mask in lane order: the 8 qh bytes go to every 64-bit lane
// (one byte permute), then vpshufbitqmb picks bit 32·block + weight for
// each byte.
template <size_t kQh, size_t kBytes>
KVEDGE_ATTR_VNNI512 HWY_INLINE __mmask64 PairFifthBits(__m512i pair) {
  static constexpr auto kTables = [] {
    struct {
      alignas(64) uint8_t qh[64];
      alignas(64) uint8_t bit[64];
    } t{};
    for (size_t i = 0; i < 64; ++i) {
      const size_t k = i % 8;
      t.qh[i] = static_cast<uint8_t>(k < 4 ? kQh + k : kBytes + kQh + k - 4);
      t.bit[i] = static_cast<uint8_t>(32 * PairBlock(i) + PairWeightQ4(i));
    }
    return t;
  }();
  const __m512i qh = _mm512_permutexvar_epi8(LoadConst(kTables.qh), pair);
  return _mm512_bitshuffle_epi64_mask(qh, LoadConst(kTables.bit));
}

// Q4_1/Q5_0/Q5_1: the lane-order codes (0…15 or 0…31) of a pair of blocks
// of kBytes bytes with f16 d at 0, (kMin) f16 m at 2, (kQh ≥ 0) 4 qh bytes
// at kQh and 16 qs bytes at kQs; dw and (kMin) mw in the pair lane pattern.
template <size_t kBytes, bool kMin, int kQh, size_t kQs>
KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i DecodeNibblePair(const void* w, bool two, __m512* dw, __m512* mw) {
  static constexpr auto kIdx = MakeCodeIndex<kQs, kBytes + kQs, PairWeightQ4, 16, 64>();
  const __m512i pair = LoadPair<kBytes>(w, two);
  constexpr int kSecond = static_cast<int>(kBytes / 2);  // word of block b+1's d
  *dw = PairHalves(pair, kSecond);
  if constexpr (kMin) *mw = PairHalves(pair, kSecond + 1, 1);
  const __m512i codes = PairNibbles(_mm512_permutexvar_epi8(LoadConst(kIdx.idx), pair));
  if constexpr (kQh < 0) {
    return codes;
  } else {
    return _mm512_mask_add_epi8(codes, PairFifthBits<kQh, kBytes>(pair), codes, _mm512_set1_epi8(16));
  }
}

template <>
struct BytePair<BlockQ4_0> {
  static constexpr int32_t kOffset = 8;  // codes are w + 8
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }

  // Codes of w[0] and (if two) w[1] as unsigned bytes in lane order.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ4_0* w, bool two, __m512* dw, __m512*) {
    return Q4Nibbles(reinterpret_cast<const uint8_t*>(w), two, dw);
  }
};

template <>
struct BytePair<BlockIQ4_NL> {
  static constexpr int32_t kOffset = 128;  // codes are value + 128
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }

  // Q4_0's nibbles, then the codebook (+ 128) by one byte shuffle.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockIQ4_NL* w, bool two, __m512* dw, __m512*) {
    static constexpr auto kTable = [] {
      struct {
        alignas(64) uint8_t v[64];
      } t{};
      for (size_t i = 0; i < 64; ++i) t.v[i] = static_cast<uint8_t>(kIq4nlValues[i % 16] + 128);
      return t;
    }();
    return _mm512_shuffle_epi8(LoadConst(kTable.v), Q4Nibbles(reinterpret_cast<const uint8_t*>(w), two, dw));
  }
};

// Q4_1, Q5_0, Q5_1: DecodeNibblePair on the block's own layout. Q5_0's
// codes are w + 16; Q4_1/Q5_1 codes are q of w = d·q + m, as they are.
template <class Block>
  requires(std::is_same_v<Block, BlockQ4_1> || std::is_same_v<Block, BlockQ5_0> || std::is_same_v<Block, BlockQ5_1>)
struct BytePair<Block> {
  static constexpr bool kFifthBit = requires(const Block& b) { b.qh; };
  static constexpr int32_t kOffset = kFifthBit && !kHasMin<Block> ? 16 : 0;
  static constexpr size_t Weight(size_t i) { return PairWeightQ4(i); }
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const Block* w, bool two, __m512* dw, __m512* mw) {
    constexpr int kQh = [] {
      if constexpr (kFifthBit) {
        return static_cast<int>(offsetof(Block, qh));
      } else {
        return -1;
      }
    }();
    return DecodeNibblePair<sizeof(Block), kHasMin<Block>, kQh, offsetof(Block, qs)>(w, two, dw, mw);
  }
};

template <>
struct BytePair<BlockQ8_0> {
  static constexpr int32_t kOffset = 128;  // codes are w + 128
  static constexpr size_t Weight(size_t i) { return PairWeightQ8(i); }

  // Reads only the pair's 68 (or 34) bytes: 64 in one load, 4 more.
  static KVEDGE_ATTR_VNNI512 HWY_INLINE __m512i Decode(const BlockQ8_0* w, bool two, __m512* dw, __m512*) {
    // qs byte j of block b is at 2 + j, of block b+1 at 36 + j (64 and up:
    // the second register of the two-table permute).
    static constexpr auto kIdx = MakeCodeIndex<2, 36, PairWeightQ8, 32, 64>();
    const uint8_t* p = reinterpret_cast<const uint8_t*>(w);
    const __m512i lo = two ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(0x3FFFFFFFFull, p);
    const __m512i hi = _mm512_castsi128_si512(_mm_cvtsi32_si128(two ? LoadU32(p + 64) : 0));
    const __m512i codes = _mm512_permutex2var_epi8(lo, LoadConst(kIdx.idx), hi);
    *dw = PairHalves(lo, 17);
    return _mm512_xor_si512(codes, _mm512_set1_epi8(static_cast<char>(0x80)));
  }
};

// Quantizes one chunk as QuantizeActivations and lays it out in pairs.
template <class Block>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void PrepareChunk(const float* x, size_t nb, ByteChunk* c) {
  HWY_ALIGN int16_t q16[kChunkCols];  // [chunk cols] codes in column order
  QuantizeActivations(x, nb, q16, c->dx);
  if (nb % 2 != 0) c->dx[nb] = 0.0f;  // the missing block of the last pair
  if constexpr (kHasMin<Block>) {
    // 1/8: each of a block's 8 lanes of a pair takes an eighth (exact).
    for (size_t b = 0; b < nb; ++b) {
      int32_t sum = 0;
      for (size_t j = 0; j < static_cast<size_t>(kQuantBlock); ++j) sum += q16[b * kQuantBlock + j];
      c->sx8[b] = c->dx[b] * static_cast<float>(sum) * 0.125f;
    }
    if (nb % 2 != 0) c->sx8[nb] = 0.0f;
  }
  for (size_t p = 0; p < (nb + 1) / 2; ++p) {
    const size_t b = 2 * p;
    const bool two = b + 1 < nb;
    int8_t* q = c->q + p * kPairCodes;
    for (size_t i = 0; i < kPairCodes; ++i) {
      const size_t blk = PairBlock(i);
      q[i] = blk == 0 || two ? static_cast<int8_t>(q16[(b + blk) * kQuantBlock + BytePair<Block>::Weight(i)]) : 0;
    }
    const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), _mm512_load_si512(q));
    _mm512_store_si512(c->init + p * kPairLanes, _mm512_mullo_epi32(sums, _mm512_set1_epi32(-BytePair<Block>::kOffset)));
  }
}

// Lane pattern (v[b], v[b+1], v[b], …) of two f32 at v (a 64-bit broadcast
// load). v[b+1] must be readable (PrepareChunk zeroes dx past an odd end).
HWY_INLINE __m512 PairBroadcast(const float* v) {
  double both;
  std::memcpy(&both, v, sizeof(both));
  return _mm512_castpd_ps(_mm512_set1_pd(both));
}

// One pair step of an R×V tile: each decoded weight pair is used V times and
// each activation pair R times; the per-(row, vector) op sequence is the same
// in every tile shape. s: [R·V][kChunkBlocks] dw·dx.
template <class Block, size_t R, size_t V>
KVEDGE_ATTR_VNNI512 HWY_INLINE void BytePairStep(const Block* const* w, const ByteChunk* const* xc, size_t p,
                                                 bool two, __m512 (&acc)[R][V]) {
  __m512i xv[V];
  for (size_t v = 0; v < V; ++v) xv[v] = _mm512_load_si512(xc[v]->q + p * kPairCodes);
  for (size_t r = 0; r < R; ++r) {
    __m512 dw, mw;
    const __m512i codes = BytePair<Block>::Decode(w[r] + 2 * p, two, &dw, &mw);
    for (size_t v = 0; v < V; ++v) {
      const __m512i dot = _mm512_dpbusd_epi32(_mm512_load_si512(xc[v]->init + p * kPairLanes), codes, xv[v]);
      const __m512 scale = _mm512_mul_ps(dw, PairBroadcast(xc[v]->dx + 2 * p));
      acc[r][v] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), scale, acc[r][v]);
      if constexpr (kHasMin<Block>) acc[r][v] = _mm512_fmadd_ps(mw, PairBroadcast(xc[v]->sx8 + 2 * p), acc[r][v]);
    }
  }
}

// out[r·V + v] = row r · vector v over blocks [0, nb) of the chunk.
template <class Block, size_t R, size_t V>
KVEDGE_ATTR_VNNI512 HWY_NOINLINE void ByteTile(const Block* const* w, const ByteChunk* const* xc, size_t nb,
                                               size_t prefetch_ahead, float* out) {
  __m512 acc[R][V];
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const size_t full_pairs = nb / 2;
  for (size_t p = 0; p < full_pairs; ++p) {
    if (prefetch_ahead != 0) {
      for (size_t r = 0; r < R; ++r) hwy::Prefetch(w[r] + 2 * p + prefetch_ahead);
    }
    BytePairStep<Block, R, V>(w, xc, p, /*two=*/true, acc);
  }
  if (nb & 1) BytePairStep<Block, R, V>(w, xc, full_pairs, /*two=*/false, acc);
  for (size_t r = 0; r < R; ++r) {
    for (size_t v = 0; v < V; ++v) out[r * V + v] = _mm512_reduce_add_ps(acc[r][v]);
  }
}

// The byte path converts block scales inside the tile: nothing per row.
struct ByteScales {
  template <class Block>
  HWY_INLINE void SetRow(size_t, const Block*, size_t) {}
};

template <class Block>
HWY_INLINE void RunTile(size_t nr, size_t tv, const Block* const* wr, const ByteChunk* const* xc, size_t nb,
                        size_t prefetch_ahead, ByteScales&, float* out) {
  DispatchTileShape(nr, tv, [&]<size_t R, size_t V>() { ByteTile<Block, R, V>(wr, xc, nb, prefetch_ahead, out); });
}

// MatVec streams rows one at a time: one sequential stream is what the
// hardware prefetcher follows best (4 interleaved 1–2 KiB row streams left
// Q8_0 from DRAM at ~60% of MemoryRead), and the byte path has little to
// share between rows. Software prefetch runs ~4 KiB ahead.
using ActChunk = ByteChunk;
using ActScales = ByteScales;
constexpr bool kMatVecRowTiles = false;
