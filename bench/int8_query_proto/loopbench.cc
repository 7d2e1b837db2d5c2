// Score dot loop only, INT4 keys (kvedge layout: channel c = 16 bytes, byte j =
// token j | token j+16 << 4), D = 64 (32 channel pairs), 32 tokens per block,
// 8 queries (a GQA group), n blocks. A: main's AVX2 loop (int16 query codes,
// vpmaddwd + vpaddd, 2 queries per key decode, Avx2KeyPair<true>/MaddAdd).
// B: int8 query codes, vpmaddubsw (u8 key × s8 query byte pairs) + vpaddw into
// int16, widened to int32 every 8 channel pairs (|8·2·15·127| < 32768); kQ
// queries per decode. Output: int32 Σ_c iq_c·code_ct per (query, token).
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <algorithm>
#include <vector>
#include <random>

constexpr int D = 64, NP = 32, G = 32, NQ = 8;
constexpr size_t kBlockBytes = D * 16 + D * 4;  // codes + f16 scales + mins

static double Cpu() { timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

static inline __m256i MaddAdd(__m256i acc, __m256i k, __m256i x) {
  __m256i t;
  __asm__("vpmaddwd %2, %3, %1\n\tvpaddd %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(k), "x"(x));
  return acc;
}

// ---- A: main's loop
template <int kQ>
static inline void BlockA(const uint8_t* block, const int32_t* qa, const int32_t* qb, int32_t* oa, int32_t* ob) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
  const __m256i lo4 = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, -1, 8, -1, 1, -1, 9, -1, 2, -1, 10, -1, 3, -1, 11, -1));
  const __m256i hi4 = _mm256_broadcastsi128_si256(_mm_setr_epi8(4, -1, 12, -1, 5, -1, 13, -1, 6, -1, 14, -1, 7, -1, 15, -1));
  for (int p = 0; p < NP; ++p) {
    const __m256i xy = _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i*)(block + 32 * p)), 0xD8);
    const __m256i k0 = _mm256_shuffle_epi8(xy, lo4), k1 = _mm256_shuffle_epi8(xy, hi4);
    const __m256i k2 = _mm256_srli_epi16(k0, 4), k3 = _mm256_srli_epi16(k1, 4);
    const __m256i x = _mm256_set1_epi32(qa[p]);
    a0 = MaddAdd(a0, k0, x); a1 = MaddAdd(a1, k1, x); a2 = MaddAdd(a2, k2, x); a3 = MaddAdd(a3, k3, x);
    if (kQ > 1) {
      const __m256i y = _mm256_set1_epi32(qb[p]);
      b0 = MaddAdd(b0, k0, y); b1 = MaddAdd(b1, k1, y); b2 = MaddAdd(b2, k2, y); b3 = MaddAdd(b3, k3, y);
    }
  }
  auto fin = [](__m256i v0, __m256i v1, __m256i v2, __m256i v3, int32_t* o) {
    const __m256i l0 = _mm256_sub_epi32(v0, _mm256_slli_epi32(v2, 4));
    const __m256i l1 = _mm256_sub_epi32(v1, _mm256_slli_epi32(v3, 4));
    _mm256_storeu_si256((__m256i*)o, _mm256_permute2x128_si256(l0, l1, 0x20));
    _mm256_storeu_si256((__m256i*)(o + 8), _mm256_permute2x128_si256(l0, l1, 0x31));
    _mm256_storeu_si256((__m256i*)(o + 16), _mm256_permute2x128_si256(v2, v3, 0x20));
    _mm256_storeu_si256((__m256i*)(o + 24), _mm256_permute2x128_si256(v2, v3, 0x31));
  };
  fin(a0, a1, a2, a3, oa);
  if (kQ > 1) fin(b0, b1, b2, b3, ob);
}

// ---- B: int8 query bytes. iq8[q][p] = (uint8)qx | qy << 8 as int16.
static inline __m256i Dot8(__m256i acc, __m256i k, __m256i q) {
  __m256i t;
  __asm__("vpmaddubsw %3, %2, %1\n\tvpaddw %1, %0, %0" : "+x"(acc), "=&x"(t) : "x"(k), "x"(q));
  return acc;
}
template <int kQ>
static inline void BlockB(const uint8_t* block, const int16_t* const* q8, int32_t* const* out) {
  const __m256i inter = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  const __m256i nib = _mm256_set1_epi8(0x0F);
  alignas(32) int32_t wide[kQ][4][8];  // [query][even lo, odd lo, even hi, odd hi][8]
  for (int p0 = 0; p0 < NP; p0 += 8) {
    __m256i lo[kQ], hi[kQ];
    for (int i = 0; i < kQ; ++i) lo[i] = hi[i] = _mm256_setzero_si256();
    for (int p = p0; p < p0 + 8; ++p) {
      const __m256i xy = _mm256_shuffle_epi8(
          _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i*)(block + 32 * p)), 0xD8), inter);
      const __m256i kl = _mm256_and_si256(xy, nib);                          // tokens 0..15: (x_t, y_t)
      const __m256i kh = _mm256_and_si256(_mm256_srli_epi16(xy, 4), nib);   // tokens 16..31
      for (int i = 0; i < kQ; ++i) {
        const __m256i q = _mm256_set1_epi16(q8[i][p]);
        lo[i] = Dot8(lo[i], kl, q);
        hi[i] = Dot8(hi[i], kh, q);
      }
    }
    for (int i = 0; i < kQ; ++i) {  // int16 token sums → int32: even tokens, odd tokens
      const __m256i le = _mm256_srai_epi32(_mm256_slli_epi32(lo[i], 16), 16), lo_ = _mm256_srai_epi32(lo[i], 16);
      const __m256i he = _mm256_srai_epi32(_mm256_slli_epi32(hi[i], 16), 16), ho = _mm256_srai_epi32(hi[i], 16);
      if (p0 == 0) {
        _mm256_store_si256((__m256i*)wide[i][0], le); _mm256_store_si256((__m256i*)wide[i][1], lo_);
        _mm256_store_si256((__m256i*)wide[i][2], he); _mm256_store_si256((__m256i*)wide[i][3], ho);
      } else {
        _mm256_store_si256((__m256i*)wide[i][0], _mm256_add_epi32(_mm256_load_si256((__m256i*)wide[i][0]), le));
        _mm256_store_si256((__m256i*)wide[i][1], _mm256_add_epi32(_mm256_load_si256((__m256i*)wide[i][1]), lo_));
        _mm256_store_si256((__m256i*)wide[i][2], _mm256_add_epi32(_mm256_load_si256((__m256i*)wide[i][2]), he));
        _mm256_store_si256((__m256i*)wide[i][3], _mm256_add_epi32(_mm256_load_si256((__m256i*)wide[i][3]), ho));
      }
    }
  }
  for (int i = 0; i < kQ; ++i) {  // interleave even/odd back to token order
    for (int h = 0; h < 2; ++h) {
      const __m256i e = _mm256_load_si256((__m256i*)wide[i][2 * h]), o = _mm256_load_si256((__m256i*)wide[i][2 * h + 1]);
      const __m256i a = _mm256_unpacklo_epi32(e, o), b = _mm256_unpackhi_epi32(e, o);
      _mm256_storeu_si256((__m256i*)(out[i] + 16 * h), _mm256_permute2x128_si256(a, b, 0x20));
      _mm256_storeu_si256((__m256i*)(out[i] + 16 * h + 8), _mm256_permute2x128_si256(a, b, 0x31));
    }
  }
}

// B4: 4 queries per decode, named int16 accumulators (no arrays: GCC kept
// the array version in memory).
static inline void BlockB4(const uint8_t* block, const int16_t* const* q8, int32_t* const* out) {
  const __m256i inter = _mm256_broadcastsi128_si256(_mm_setr_epi8(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  const __m256i nib = _mm256_set1_epi8(0x0F);
  alignas(32) int32_t wide[4][4][8];
  const int16_t *qa = q8[0], *qb = q8[1], *qc = q8[2], *qd = q8[3];
  for (int p0 = 0; p0 < NP; p0 += 8) {
    __m256i la = _mm256_setzero_si256(), ha = la, lb = la, hb = la, lc = la, hc = la, ld = la, hd = la;
    for (int p = p0; p < p0 + 8; ++p) {
      const __m256i xy = _mm256_shuffle_epi8(
          _mm256_permute4x64_epi64(_mm256_loadu_si256((const __m256i*)(block + 32 * p)), 0xD8), inter);
      const __m256i kl = _mm256_and_si256(xy, nib);
      const __m256i kh = _mm256_and_si256(_mm256_srli_epi16(xy, 4), nib);
      __m256i q = _mm256_set1_epi16(qa[p]); la = Dot8(la, kl, q); ha = Dot8(ha, kh, q);
      q = _mm256_set1_epi16(qb[p]); lb = Dot8(lb, kl, q); hb = Dot8(hb, kh, q);
      q = _mm256_set1_epi16(qc[p]); lc = Dot8(lc, kl, q); hc = Dot8(hc, kh, q);
      q = _mm256_set1_epi16(qd[p]); ld = Dot8(ld, kl, q); hd = Dot8(hd, kh, q);
    }
    const __m256i L[4] = {la, lb, lc, ld}, H[4] = {ha, hb, hc, hd};
    for (int i = 0; i < 4; ++i) {
      const __m256i v[4] = {_mm256_srai_epi32(_mm256_slli_epi32(L[i], 16), 16), _mm256_srai_epi32(L[i], 16),
                            _mm256_srai_epi32(_mm256_slli_epi32(H[i], 16), 16), _mm256_srai_epi32(H[i], 16)};
      for (int j = 0; j < 4; ++j)
        _mm256_store_si256((__m256i*)wide[i][j], p0 == 0 ? v[j] : _mm256_add_epi32(_mm256_load_si256((__m256i*)wide[i][j]), v[j]));
    }
  }
  for (int i = 0; i < 4; ++i) {
    for (int h = 0; h < 2; ++h) {
      const __m256i e = _mm256_load_si256((__m256i*)wide[i][2 * h]), o = _mm256_load_si256((__m256i*)wide[i][2 * h + 1]);
      const __m256i a = _mm256_unpacklo_epi32(e, o), b = _mm256_unpackhi_epi32(e, o);
      _mm256_storeu_si256((__m256i*)(out[i] + 16 * h), _mm256_permute2x128_si256(a, b, 0x20));
      _mm256_storeu_si256((__m256i*)(out[i] + 16 * h + 8), _mm256_permute2x128_si256(a, b, 0x31));
    }
  }
}

static int Code(const uint8_t* block, int c, int t) {
  const uint8_t byte = block[c * 16 + t % 16];
  return t < 16 ? (byte & 15) : (byte >> 4);
}

int main(int argc, char** argv) {
  const size_t nb = argc > 1 ? atoi(argv[1]) : 512;
  const int reps = argc > 2 ? atoi(argv[2]) : 200;
  std::mt19937 rng(1);
  std::vector<uint8_t> mem(nb * kBlockBytes);
  for (auto& x : mem) x = rng();
  std::vector<const uint8_t*> blocks(nb);
  for (size_t b = 0; b < nb; ++b) blocks[b] = mem.data() + b * kBlockBytes;
  // query codes: int16 for A (pairs in int32), int8 for B (pairs in int16), random full range
  alignas(32) static int32_t iq16[NQ][NP];
  alignas(32) static int16_t iq8[NQ][NP];
  int q16[NQ][D], q8[NQ][D];
  for (int i = 0; i < NQ; ++i) for (int c = 0; c < D; ++c) {
    q16[i][c] = (int)(rng() % 65535) - 32767; q8[i][c] = (int)(rng() % 255) - 127;
  }
  for (int i = 0; i < NQ; ++i) for (int p = 0; p < NP; ++p) {
    iq16[i][p] = (q16[i][2 * p] & 0xFFFF) | (q16[i][2 * p + 1] << 16);
    iq8[i][p] = (int16_t)((q8[i][2 * p] & 0xFF) | (q8[i][2 * p + 1] << 8));
  }
  std::vector<int32_t> sa(NQ * nb * G), sb(NQ * nb * G), sc(NQ * nb * G);
  auto runA = [&] {
    for (size_t b = 0; b < nb; ++b)
      for (int i = 0; i < NQ; i += 2)
        BlockA<2>(blocks[b], iq16[i], iq16[i + 1], &sa[(i * nb + b) * G], &sa[((i + 1) * nb + b) * G]);
  };
  auto runB = [&](auto kq) {
    constexpr int kQ = decltype(kq)::value;
    for (size_t b = 0; b < nb; ++b)
      for (int i = 0; i < NQ; i += kQ) {
        const int16_t* qs[kQ]; int32_t* os[kQ];
        for (int j = 0; j < kQ; ++j) { qs[j] = iq8[i + j]; os[j] = &(kQ == 2 ? sb : sc)[((i + j) * nb + b) * G]; }
        if constexpr (kQ == 4) BlockB4(blocks[b], qs, os); else BlockB<kQ>(blocks[b], qs, os);
      }
  };
  runA(); runB(std::integral_constant<int, 2>()); runB(std::integral_constant<int, 4>());
  for (int i = 0; i < NQ; ++i) for (size_t b = 0; b < nb; ++b) for (int t = 0; t < G; ++t) {
    long ea = 0, eb = 0;
    for (int c = 0; c < D; ++c) { ea += (long)q16[i][c] * Code(blocks[b], c, t); eb += (long)q8[i][c] * Code(blocks[b], c, t); }
    const size_t o = (i * nb + b) * G + t;
    if (sa[o] != ea || sb[o] != eb || sc[o] != eb) { printf("MISMATCH q%d b%zu t%d: %d/%ld %d %d/%ld\n", i, b, t, sa[o], ea, sb[o], sc[o], eb); return 1; }
  }
  std::vector<double> ta, tb, tc;
  for (int r = 0; r < reps; ++r) {
    double t0 = Cpu(); runA(); double t1 = Cpu(); runB(std::integral_constant<int, 2>()); double t2 = Cpu();
    runB(std::integral_constant<int, 4>()); double t3 = Cpu();
    ta.push_back(t1 - t0); tb.push_back(t2 - t1); tc.push_back(t3 - t2);
  }
  auto report = [&](const char* n, std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const double per = 1e9 / (nb * NQ);
    printf("%-36s min %7.1f  median %7.1f ns per (query, block)   median %6.1f us per call\n", n, v[0] * per,
           v[v.size() / 2] * per, v[v.size() / 2] * 1e6);
  };
  printf("blocks %zu, D %d, %d queries, %d reps, sums checked exact\n", nb, D, NQ, reps);
  report("A int16 q, vpmaddwd, 2q/decode", ta);
  report("B int8 q, vpmaddubsw, 2q/decode", tb);
  report("B int8 q, vpmaddubsw, 4q/decode (named)", tc);
}
