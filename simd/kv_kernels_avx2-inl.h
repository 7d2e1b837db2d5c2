// Multi-query attention over int8/int4 blocks on AVX2 (no AVX-512): each
// block's codes are decoded to f32 ONCE into an L1-resident scratch, and every
// query of the GQA group then runs against that scratch with FMAs taking a
// memory operand. A fragment of kv_kernels.cc: included inside its per-target
// namespace for HWY_AVX2 only, after the generic multi-query kernels (it
// reuses LoadKeyFold, PrepareQuery, ValueFoldF32, F32FromF16Array).
//
// Why: AVX2's 16 registers hold the accumulators of only 4 queries, so the
// generic kernels redo the nibble unpack and int→float conversion per 4
// queries (docs/performance.md, "Attention at depth"). Here the conversion is
// paid once per block, and the inner loops are
//   scores: per channel, per query 1 broadcast + 4 FMAs (32 tokens), tiles of
//           2 queries (8 accumulators), query prepared without interleaving;
//   values: per token, per query 1 broadcast + 4 FMAs per 32 channels.
// Callgrind, D = 64, nq = 8, per (query, block): scores 859 → 724
// instructions (int4), values 1,078 → 819.
// Arithmetic stays f32 with the generic kernels' operand values and the same
// summation order per output lane (one FMA chain over channels, resp. tokens,
// starting from 0, resp. the incoming out): the results are bit-identical to
// the generic AVX2 kernels for nq = 3, 4, 7, 8 (where those use one chain per
// lane), and within f32 rounding of them for other nq (their kU > 1 chains).
#if HWY_TARGET != HWY_AVX2
#error "kv_kernels_avx2-inl.h is the HWY_AVX2 section of kv_kernels.cc"
#endif

using Avx2DF = hn::Full256<float>;  // 8 lanes
constexpr size_t kAvx2N = 8;

// ---------------------------------------------------------------- scores

// A block's key codes as f32, kc: [D][G] floats. int8: tokens 0..31 of each
// channel. int4: [low nibbles of bytes 0..15 | whole bytes 0..15] (tokens
// 0..15, then 16·h + l of tokens 16..31: the byte-pair form of ScoreBlock).
HWY_INLINE void Avx2DecodeKeyCodes(KvFormat f, int d, const uint8_t* HWY_RESTRICT block, float* HWY_RESTRICT kc) {
  const Avx2DF df;
  const hn::Rebind<int32_t, Avx2DF> di;
  const auto mask = hn::Set(di, 0xF);
  if (f == KvFormat::kInt8) {
    for (int c = 0; c < d; ++c, block += kG, kc += kG) {
      for (size_t j = 0; j < static_cast<size_t>(kG); j += kAvx2N) {
        hn::Store(hn::ConvertTo(df, LoadBytesAsI32(df, block + j)), df, kc + j);
      }
    }
    return;
  }
  for (int c = 0; c < d; ++c, block += kHalfG, kc += kG) {
    for (size_t j = 0; j < kHalfG; j += kAvx2N) {
      const auto bytes = LoadBytesAsI32(df, block + j);
      hn::Store(hn::ConvertTo(df, hn::And(bytes, mask)), df, kc + j);
      hn::Store(hn::ConvertTo(df, bytes), df, kc + kHalfG + j);
    }
  }
}

// Per call: query i deinterleaved into qd[i] = [q[2j] for j < half | q[2j+1]
// for j < half | q[c] for c ≥ rope_dim] so the per-block preparation needs no
// interleaving (PrepareQuery's StoreInterleaved2).
HWY_INLINE void Avx2SplitQuery(int d, size_t half, const float* HWY_RESTRICT q, float* HWY_RESTRICT qd) {
  for (size_t j = 0; j < half; ++j) {
    qd[j] = q[2 * j];
    qd[half + j] = q[2 * j + 1];
  }
  for (size_t c = 2 * half; c < static_cast<size_t>(d); ++c) qd[c] = q[c];
}

// PrepareQuery on a split query, with its result split the same way:
// qs = [(R q)[2j]·s[2j] | (R q)[2j+1]·s[2j+1] | q[c]·s[c] tail], returns
// Σ_c (R q)[c]·min[c]. The same operations, in the same order, as
// PrepareQuery's (so the same floats).
HWY_INLINE float Avx2PrepareQuery(int d, size_t half, const float* HWY_RESTRICT qd,
                                  const float* HWY_RESTRICT angles, const KeyFoldF32& kf,
                                  float* HWY_RESTRICT qs) {
  const hn::CappedTag<float, 16> df;  // PrepareQuery's tag (8 lanes here)
  using V = hn::Vec<decltype(df)>;
  const size_t N = hn::Lanes(df);
  V vbias = hn::Zero(df);
  size_t i = 0;
  for (; i + N <= half; i += N) {
    const V a = hn::LoadU(df, qd + i);
    const V b = hn::LoadU(df, qd + half + i);
    const V c = hn::LoadU(df, angles + i);
    const V s = hn::LoadU(df, angles + half + i);
    const V r0 = hn::Sub(hn::Mul(a, c), hn::Mul(b, s));
    const V r1 = hn::Add(hn::Mul(a, s), hn::Mul(b, c));
    vbias = hn::MulAdd(r0, hn::Load(df, kf.m0 + i), hn::MulAdd(r1, hn::Load(df, kf.m1 + i), vbias));
    hn::StoreU(hn::Mul(r0, hn::Load(df, kf.s0 + i)), df, qs + i);
    hn::StoreU(hn::Mul(r1, hn::Load(df, kf.s1 + i)), df, qs + half + i);
  }
  float bias = hn::GetLane(hn::SumOfLanes(df, vbias));
  for (; i < half; ++i) {
    const float c = angles[i], s = angles[half + i];
    const float r0 = qd[i] * c - qd[half + i] * s;
    const float r1 = qd[i] * s + qd[half + i] * c;
    bias += r0 * kf.m0[i] + r1 * kf.m1[i];
    qs[i] = r0 * kf.s0[i];
    qs[half + i] = r1 * kf.s1[i];
  }
  for (size_t c = 2 * half; c < static_cast<size_t>(d); ++c) {
    qs[c] = qd[c] * kf.s[c];
    bias += qd[c] * kf.m[c];
  }
  return bias;
}

// Queries per score tile: 2 × the block's 32 tokens (4 vectors) = 8
// accumulators, 8 independent FMA chains; the code vectors are memory
// operands. (3 queries fit the registers too, but GCC then loads the code
// vectors into registers: 7.3 instructions per (query, channel) against 6.5.)
constexpr int kAvx2ScoreTile = 2;

// kQ queries × the block's 32 tokens: per query and token lane one FMA chain
// over the channels in order 0, 1, …, D − 1, as ScoreBlockMulti's kU = 1
// groups. out[i·out_stride + t] = scale·(Σ_c qs[i][c]·code(c, t) + bias[i]).
// kc: [D][G] from Avx2DecodeKeyCodes; qs: [kQ][kMaxHeadDim] split queries
// from Avx2PrepareQuery (channel 2j at j, 2j + 1 at half + j).
template <int kQ, bool kBytePairs>
HWY_INLINE void Avx2ScoreTile(int d, size_t half, const float* HWY_RESTRICT kc, const float* HWY_RESTRICT qs,
                              const float* HWY_RESTRICT bias, float scale, float* HWY_RESTRICT out,
                              size_t out_stride) {
  using V = hn::Vec<Avx2DF>;
  const Avx2DF df;
  V acc[kQ][4];  // [query][token vector]; fully unrolled, kept in registers
  for (int i = 0; i < kQ; ++i) {
    for (int v = 0; v < 4; ++v) acc[i][v] = hn::Zero(df);
  }
  const auto step = [&](const float* HWY_RESTRICT k, size_t at) HWY_ATTR {
    for (int i = 0; i < kQ; ++i) {
      const V q = hn::Set(df, qs[i * kMaxHeadDim + at]);
      for (int v = 0; v < 4; ++v) acc[i][v] = hn::MulAdd(q, hn::Load(df, k + v * kAvx2N), acc[i][v]);
    }
  };
  for (size_t j = 0; j < half; ++j, kc += 2 * kG) {  // channels 2j, 2j + 1
    step(kc, j);
    step(kc + kG, half + j);
  }
  for (size_t c = 2 * half; c < static_cast<size_t>(d); ++c, kc += kG) step(kc, c);
  const V vscale = hn::Set(df, scale);
  for (int i = 0; i < kQ; ++i) {
    if constexpr (kBytePairs) {  // vectors 2, 3 hold Σ q·byte: high nibble = (byte − low)/16
      acc[i][2] = hn::Mul(hn::Sub(acc[i][2], acc[i][0]), hn::Set(df, 1.0f / 16));
      acc[i][3] = hn::Mul(hn::Sub(acc[i][3], acc[i][1]), hn::Set(df, 1.0f / 16));
    }
    const V vbias = hn::Set(df, bias[i]);
    for (int v = 0; v < 4; ++v) {
      hn::StoreU(hn::Mul(hn::Add(acc[i][v], vbias), vscale), df, out + i * out_stride + v * kAvx2N);
    }
  }
}

// Queries per pass over the blocks (bounds the split-query buffer).
constexpr size_t kAvx2ScorePass = 8;

// ScoreKeyBlocksMulti for int8/int4 keys, nq ≥ 2.
HWY_NOINLINE void Avx2ScoreKeyBlocksMulti(KvFormat f, int d, int rope_dim, const float* HWY_RESTRICT q, size_t nq,
                                          const float* HWY_RESTRICT rot, const uint8_t* const* HWY_RESTRICT blocks,
                                          size_t n_blocks, float scale, float* HWY_RESTRICT scores,
                                          size_t scores_stride) {
  const size_t half = static_cast<size_t>(rope_dim) / 2;
  const size_t block_bytes = KeyBlockBytes(f, d);
  HWY_ALIGN float kc[kMaxHeadDim * kG];                   // [D][G] the block's codes as f32 (8 KB at D = 64)
  HWY_ALIGN float qd[kAvx2ScorePass * kMaxHeadDim];       // [pass][kMaxHeadDim] split queries
  HWY_ALIGN float qs[kAvx2ScoreTile * kMaxHeadDim];       // [tile][kMaxHeadDim] rotated, scale-folded
  KeyFoldF32 kf;                                          // the block's scales/mins as f32
  float bias[kAvx2ScoreTile];                             // [tile] Σ_c qr·min
  for (size_t p0 = 0; p0 < nq; p0 += kAvx2ScorePass) {
    const size_t np = nq - p0 < kAvx2ScorePass ? nq - p0 : kAvx2ScorePass;
    for (size_t i = 0; i < np; ++i) Avx2SplitQuery(d, half, q + (p0 + i) * d, qd + i * kMaxHeadDim);
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      const float* HWY_RESTRICT angles = rot + b * rope_dim;
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      LoadKeyFold(f, d, half, block, &kf);
      Avx2DecodeKeyCodes(f, d, block, kc);
      for (size_t q0 = 0; q0 < np; q0 += kAvx2ScoreTile) {
        const size_t g = np - q0 < kAvx2ScoreTile ? np - q0 : kAvx2ScoreTile;
        for (size_t i = 0; i < g; ++i) {
          bias[i] = Avx2PrepareQuery(d, half, qd + (q0 + i) * kMaxHeadDim, angles, kf, qs + i * kMaxHeadDim);
        }
        float* out = scores + (p0 + q0) * scores_stride + b * kG;
        if (f == KvFormat::kInt4) {
          if (g == 2) {
            Avx2ScoreTile<2, true>(d, half, kc, qs, bias, scale, out, scores_stride);
          } else {
            Avx2ScoreTile<1, true>(d, half, kc, qs, bias, scale, out, scores_stride);
          }
        } else if (g == 2) {
          Avx2ScoreTile<2, false>(d, half, kc, qs, bias, scale, out, scores_stride);
        } else {
          Avx2ScoreTile<1, false>(d, half, kc, qs, bias, scale, out, scores_stride);
        }
      }
    }
  }
}

// ---------------------------------------------------------------- values

// A block's value codes as f32 in channel order, vc: [G][D] (int4: byte j of
// a token gives channel j from its low nibble, j + D/2 from its high one).
// D is a multiple of 32.
HWY_INLINE void Avx2DecodeValueCodes(KvFormat f, int d, const uint8_t* HWY_RESTRICT block, float* HWY_RESTRICT vc) {
  const Avx2DF df;
  const hn::Rebind<int32_t, Avx2DF> di;
  const auto mask = hn::Set(di, 0xF);
  const size_t D = static_cast<size_t>(d);
  if (f == KvFormat::kInt8) {
    for (size_t i = 0; i < kG * D; i += kAvx2N) hn::Store(hn::ConvertTo(df, LoadBytesAsI32(df, block + i)), df, vc + i);
    return;
  }
  const size_t half = D / 2;
  for (int t = 0; t < kG; ++t, block += half, vc += D) {
    for (size_t j = 0; j < half; j += kAvx2N) {
      const auto bytes = LoadBytesAsI32(df, block + j);
      hn::Store(hn::ConvertTo(df, hn::And(bytes, mask)), df, vc + j);
      hn::Store(hn::ConvertTo(df, hn::ShiftRight<4>(bytes)), df, vc + half + j);
    }
  }
}

// One query, kGroups value groups of 32 channels from channel 32·j0:
// o[c] += Σ_t ws[t·cg + c/32]·vc[t][c], one FMA chain per lane over the
// tokens in order (as AccumulateChunkMulti's kU = 1 groups). kGroups = 2
// gives 8 independent chains.
template <int kGroups>
HWY_INLINE void Avx2ValueTile(size_t d, const float* HWY_RESTRICT vc, const float* HWY_RESTRICT ws, size_t cg,
                              size_t j0, float* HWY_RESTRICT out) {
  using V = hn::Vec<Avx2DF>;
  const Avx2DF df;
  constexpr int kV = 4 * kGroups;  // vectors of 8 channels
  float* HWY_RESTRICT o = out + j0 * kValueGroup;
  V acc[kV];
  for (int v = 0; v < kV; ++v) acc[v] = hn::LoadU(df, o + v * kAvx2N);
  vc += j0 * kValueGroup;
  ws += j0;
  const auto step = [&](const float* HWY_RESTRICT v_t, const float* HWY_RESTRICT w_t) HWY_ATTR {
    for (int g = 0; g < kGroups; ++g) {
      const V w = hn::Set(df, w_t[g]);
      for (int v = 4 * g; v < 4 * g + 4; ++v) acc[v] = hn::MulAdd(w, hn::Load(df, v_t + v * kAvx2N), acc[v]);
    }
  };
  for (int t = 0; t < kG; t += 2, vc += 2 * d, ws += 2 * cg) {  // two tokens per iteration: half the loop overhead
    step(vc, ws);
    step(vc + d, ws + cg);
  }
  for (int v = 0; v < kV; ++v) hn::StoreU(acc[v], df, o + v * kAvx2N);
}

// AccumulateValueBlocksMulti for int8/int4 values with D a multiple of 32,
// nq ≥ 2: the weight × scale fold and the once-per-pass min term are those
// of AccumulateBlocksMultiT.
HWY_NOINLINE void Avx2AccumulateValueBlocksMulti(KvFormat f, int d, const float* HWY_RESTRICT weights,
                                                 size_t weights_stride, size_t nq,
                                                 const uint8_t* const* HWY_RESTRICT blocks, size_t n_blocks,
                                                 float* HWY_RESTRICT out) {
  const Avx2DF df;
  const size_t D = static_cast<size_t>(d);
  const size_t cg = D / kValueGroup;
  const size_t block_bytes = ValueBlockBytes(f, d);
  HWY_ALIGN float vc[kG * kMaxHeadDim];                 // [G][D] the block's codes as f32 (8 KB at D = 64)
  HWY_ALIGN float ws[kValuePassQueries * kMaxHeadDim];  // [query][G·cg] weight × group scale
  HWY_ALIGN float wm[kValuePassQueries * kMaxHeadDim];  // [query][D] Σ_blocks w·min per group slot
  HWY_ALIGN float vscale[kMaxHeadDim];                  // [D groups] the block's value scales as f32
  HWY_ALIGN float vmin[kMaxHeadDim];                    // [D groups] the block's value mins as f32
  ValueFoldF32<Avx2DF> fold(df, d);
  for (size_t p0 = 0; p0 < nq; p0 += kValuePassQueries) {
    const size_t np = nq - p0 < kValuePassQueries ? nq - p0 : kValuePassQueries;
    const float* HWY_RESTRICT wp = weights + p0 * weights_stride;
    float* HWY_RESTRICT op = out + p0 * D;
    std::fill(wm, wm + np * kMaxHeadDim, 0.0f);
    for (size_t b = 0; b < n_blocks; ++b) {
      const uint8_t* HWY_RESTRICT block = blocks[b];
      PrefetchBlock(blocks, n_blocks, b, block_bytes);
      F32FromF16Array(block + ValueBlockScalesOffset(f, d), D, vscale);
      F32FromF16Array(block + ValueBlockMinsOffset(f, d), D, vmin);
      Avx2DecodeValueCodes(f, d, block, vc);
      for (size_t i = 0; i < np; ++i) {
        float* HWY_RESTRICT wsi = ws + i * kMaxHeadDim;
        fold.Fold(df, wp + i * weights_stride + b * kG, b + 1 == n_blocks, vscale, vmin, wsi, wm + i * kMaxHeadDim);
        size_t j = 0;
        for (; j + 2 <= cg; j += 2) Avx2ValueTile<2>(D, vc, wsi, cg, j, op + i * D);
        if (j < cg) Avx2ValueTile<1>(D, vc, wsi, cg, j, op + i * D);
      }
    }
    // The mins' share, once per pass: out_i[c] += Σ_b Σ_t w_i·min of c's group.
    for (size_t i = 0; i < np; ++i) {
      float* oi = op + i * D;
      float bias[kMaxHeadDim / kValueGroup] = {};  // [cg]
      for (size_t k = 0; k < D; ++k) bias[k % cg] += wm[i * kMaxHeadDim + k];
      for (size_t c = 0; c < D; ++c) oi[c] += bias[c / kValueGroup];
    }
  }
}
