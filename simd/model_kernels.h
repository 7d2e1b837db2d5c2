// Model kernels with runtime SIMD dispatch (Highway): RMSNorm, SwiGLU, vector
// adds, and matrix–vector / matrix–matrix products for every weight format
// kvedge reads. Scalar references live in model_kernels_ref.h.
#ifndef KVEDGE_SIMD_MODEL_KERNELS_H_
#define KVEDGE_SIMD_MODEL_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "platform/thread_arena.h"
#include "simd/weight_format.h"

namespace kvedge {

// How a matrix's bytes are laid out.
//   kRows: row-major, GGUF's: row r starts at data + r·WeightRowBytes(type, cols).
//   kInterleaved16 (the legacy 32-blocks: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
//     IQ4_NL): rows in groups of 16 (the last group padded with zero rows),
//     so that one 512-bit vector holds 4 code bytes of each of 16 rows and a
//     block's 16 scales are one contiguous load; the fast kernels then keep
//     one row per int32 lane and need no shuffles.
//     Group g (rows 16g … 16g+15) starts at data + g·InterleavedGroupBytes.
//     With H = InterleavedHeaderBytes (32: the 16 rows' f16 d; Q4_1/Q5_1 64:
//     d then m) and C = InterleavedCodeBytes (Q8_0 512, Q5_0/Q5_1 320, the
//     others 256), a group is its blocks in pairs, one sequential stream (a
//     separate scale array measured 40% slower from DRAM):
//       pair p, at p·(2C + 2H): d of blocks 2p and 2p+1 ([16 rows] f16 each,
//       32 bytes), Q4_1/Q5_1 then m of 2p and 2p+1 (32 bytes each), then
//       the codes of 2p and 2p+1 (C bytes each);
//       codes: [4][16 rows][4 bytes] — bytes qs[4j … 4j+3] of row r's block
//       at 64j + 4r (nibble types: GGUF's nibble pairs as they are; Q8_0:
//       [8][16][4], qs + 128 as unsigned bytes); Q5_0/Q5_1 then 64 bytes of
//       fifth bits, [16 rows][4 bytes]: bit i of byte 4r + t is the fifth
//       bit of row r's weight InterleavedColumn(i) + t, i.e. bit i belongs
//       to code vector i of the kernels (low nibbles of qs vector i/2 for
//       even i, high nibbles for odd i).
//     An odd last block forms a pair alone (its second d and m are zero).
//     Q4_K (super-blocks of 256): group g is its super-blocks in order,
//     InterleavedKSuperBytes (2304 = 16 × 144, the 16 rows' GGUF bytes) each:
//       +0 d [16 rows] f16; +32 dmin [16 rows] f16;
//       +64 the packed 6-bit scales and mins: [3 words][16 rows][4 bytes],
//         bytes scales[4k … 4k+3] of row r at 64 + 64k + 4r (so the 32-bit
//         word unpacking of ggml's vec_dot runs one row per int32 lane);
//       +256 codes: [32][16 rows][4 bytes], bytes qs[4v … 4v+3] of row r at
//         256 + 64v + 4r (GGUF's nibble pairs as they are: vector v's low
//         nibbles are weights 64(v/8) + 4(v%8) + t of sub-block 2(v/8), its
//         high nibbles the weights 32 further, of sub-block 2(v/8) + 1).
//     Q5_K: Q4_K's super-block with its codes re-coded, kILQ5SuperBytes
//       (2816 = 16 × 176) each: d, dmin and scales as Q4_K; the code bytes
//       A (+256, where Q4_K has qs) and B (+2304: [8][16 rows][4 bytes],
//       B[4u … 4u+3] of row r at 2304 + 64u + 4r) hold each row's 5-bit
//       codes so that a kernel takes a code with fewer operations than
//       GGUF's nibble + qh bit (EncodeQ5KCodes in weight_quant.h): for
//       pair p (sub-blocks 2p and 2p + 1) and t < 32, with lo the code of
//       weight 64p + t and hi that of weight 64p + 32 + t,
//         A[32p + t] = lo | (hi & 7) << 5,  bits 2p, 2p + 1 of B[t] = hi >> 3;
//       so code vector v (A's line v) gives lo = A & 31 and hi = A >> 5 with
//       bits 2(v/8), 2(v/8) + 1 of B's line v%8 on top.
//     Q6_K (super-blocks of 256): group g is its super-blocks' scales and
//     codes in order, kILQ6SuperBytes (3328 = 16 × 208) each, then the d of
//     all of them, [nsb][16 rows] f16 (so every super-block starts on a
//     64-byte line), then 32 zero bytes when nsb is odd (a group is 64-byte
//     lines; the only bytes kRows does not have):
//       +0 scales: [4 words][16 rows][4 bytes], int8 scales[4k … 4k+3] of
//         row r at 64k + 4r;
//       +256 A: [32][16 rows][4 bytes], A[4v … 4v+3] of row r at
//         256 + 64v + 4r; +2304 B: [16][16 rows][4 bytes], B[4u … 4u+3]
//         at 2304 + 64u + 4r: the row's 6-bit codes re-coded from GGUF's
//         ql/qh so that a kernel takes them with fewer operations
//         (EncodeQ6KCodes in weight_quant.h). GGUF's code c_q of weight
//         128h + 32q + l (q < 4, l < 32) is a nibble of ql byte
//         64h + 32(q%2) + l with bits 2q, 2q + 1 of qh byte 32h + l on top;
//         here, for m < 2,
//           A[64h + 32m + l] = c_m | (c_{m+2} >> 4) << 6,
//           B[32h + l] = (c_2 & 15) | (c_3 & 15) << 4,
//         so c_0, c_1 = A & 63, and c_2, c_3 are a nibble of B with A's top
//         two bits (A >> 6) above it.
//     Q3_K (InterleavedQ3K*): group g is its super-blocks in pairs (an odd
//       last one alone, its second d zero), 3520 bytes = 16 × 2 × 110 per
//       pair p at p·3520: +0 d of 2p [16 rows] f16, +32 d of 2p + 1, then
//       the bodies of 2p (+64) and 2p + 1 (+1792), 1728 bytes each:
//       +0 the 12 packed scale bytes [3 words][16 rows][4 bytes] (as Q4_K);
//       +192 codes: [24][16 rows][4 bytes], x[4n … 4n+3] of row r at
//         192 + 64n + 4r (all line-aligned), x [96] the row's qs and hmask
//         re-coded so that a kernel takes a 3-bit code with one or two
//         operations where GGUF's 2 + 1 bits took four or five
//         (EncodeQ3KCodes in weight_quant.h): lines 3T, 3T + 1, 3T + 2
//         (T < 8) are bytes A, B, C holding, per t < 4, the codes
//         c_m = q + 4 ∈ [0, 8) of weights 32T + 4m + t (m < 8: sub-blocks
//         2T and 2T + 1, four weights each), as
//           A = c_0 | c_1 << 3 | (c_6 & 3) << 6,
//           B = c_2 | c_3 << 3 | (c_7 & 3) << 6,
//           C = c_4 | c_5 << 3 | (c_6 >> 2) << 6 | (c_7 >> 2) << 7.
//     Q2_K (kILQ2*): group g is its super-blocks in order, 1344 bytes =
//       16 × 84 each: +0 d [16 rows] f16; +32 dmin; +64 the 16 scale/min
//       bytes [4][16 rows][4 bytes]; +320 qs [16][16 rows][4 bytes].
//     IQ4_XS (kILX*): group g is its super-blocks in order, 2176 bytes =
//       16 × 136 each: +0 d [16 rows] f16; +32 scales_h [16 rows] u16;
//       +64 scales_l [16 rows][4 bytes]; +128 qs [32][16 rows][4 bytes],
//       qs[4v … 4v+3] of row r at 128 + 64v + 4r (GGUF's nibble pairs as
//       they are: vector v's low nibbles are weights 32(v/4) + 4(v%4) + t of
//       sub-block v/4, its high nibbles the weights 16 further).
//     Same bytes per weight as kRows. Built by InterleaveGroups (weight_quant.h).
enum class WeightLayout : uint8_t { kRows = 0, kInterleaved16 = 1 };

inline constexpr size_t kInterleaveRows = 16;

// A [rows][cols] matrix in place (e.g. inside a mapped file) in `layout`.
// Non-owning view.
struct MatrixView {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
  WeightLayout layout = WeightLayout::kRows;
};

// The types with a kInterleaved16 layout: the legacy 32-blocks, Q2_K … Q6_K and IQ4_XS.
inline constexpr bool IsInterleavable(WeightType t) {
  return t == WeightType::kQ8_0 || t == WeightType::kQ4_0 || t == WeightType::kQ4_1 || t == WeightType::kQ5_0 ||
         t == WeightType::kQ5_1 || t == WeightType::kIQ4_NL || t == WeightType::kQ4_K || t == WeightType::kQ5_K ||
         t == WeightType::kQ6_K || t == WeightType::kQ3_K || t == WeightType::kQ2_K || t == WeightType::kIQ4_XS;
}
// Q3_K's interleaved pairs of super-blocks (the layout above): d of
// super-block s and its body, relative to the group; the body's parts.
inline constexpr size_t kILQ3PairBytes = 16 * 2 * 110, kILQ3BodyBytes = 1728;
inline constexpr size_t kILQ3ScalesOffset = 0, kILQ3CodesOffset = 192;
inline constexpr size_t InterleavedQ3KDOffset(size_t s) { return s / 2 * kILQ3PairBytes + 32 * (s & 1); }
inline constexpr size_t InterleavedQ3KBodyOffset(size_t s) {
  return s / 2 * kILQ3PairBytes + 64 + kILQ3BodyBytes * (s & 1);
}
// Q2_K's interleaved super-block of 16 rows and its parts.
inline constexpr size_t kILQ2SuperBytes = 16 * 84;
inline constexpr size_t kILQ2DOffset = 0, kILQ2DminOffset = 32, kILQ2ScalesOffset = 64, kILQ2QsOffset = 320;
// IQ4_XS's interleaved super-block of 16 rows and its parts.
inline constexpr size_t kILXSuperBytes = 16 * 136;
inline constexpr size_t kILXDOffset = 0, kILXScalesHOffset = 32, kILXScalesLOffset = 64, kILXQsOffset = 128;
// Q4_K's interleaved super-block of 16 rows and the offsets inside it of
// d, dmin, the packed scales and the codes (the layout above). The
// Interleaved*Offset functions below describe the legacy 32-blocks only.
inline constexpr size_t InterleavedKSuperBytes = 16 * 144;
inline constexpr size_t kILKDOffset = 0, kILKDminOffset = 32, kILKScalesOffset = 64, kILKCodesOffset = 256;
// Q5_K's: Q4_K's parts at the same offsets (its code bytes A where Q4_K has qs), then B.
inline constexpr size_t kILQ5SuperBytes = 16 * 176, kILQ5BOffset = InterleavedKSuperBytes;
// Q6_K's interleaved super-block of 16 rows without its d (layout above),
// the offsets inside it, and where the d array of a group starts.
inline constexpr size_t kILQ6SuperBytes = 16 * 208;
inline constexpr size_t kILQ6ScalesOffset = 0, kILQ6AOffset = 256, kILQ6BOffset = 2304;
inline constexpr size_t InterleavedQ6DOffset(size_t nsb) { return nsb * kILQ6SuperBytes; }
// Q4_1/Q5_1: a per-block f16 min m (w = d·q + m) after the scales.
inline constexpr bool InterleavedHasMin(WeightType t) { return t == WeightType::kQ4_1 || t == WeightType::kQ5_1; }
// Q5_0/Q5_1: 64 bytes of fifth bits after a block's nibbles.
inline constexpr bool InterleavedHasFifthBits(WeightType t) {
  return t == WeightType::kQ5_0 || t == WeightType::kQ5_1;
}
// 16-row groups of a matrix of `rows` (the last one padded).
inline constexpr size_t InterleavedGroups(size_t rows) { return (rows + kInterleaveRows - 1) / kInterleaveRows; }
// Header (scale, min) bytes per block of a 16-row group.
inline constexpr size_t InterleavedHeaderBytes(WeightType t) { return InterleavedHasMin(t) ? 64 : 32; }
// Code bytes per block of a 16-row group: 32 weights × 16 rows at 4, 5 or 8 bits.
inline constexpr size_t InterleavedCodeBytes(WeightType t) {
  return t == WeightType::kQ8_0 ? 512 : InterleavedHasFifthBits(t) ? 320 : 256;
}
inline constexpr size_t InterleavedPairBytes(WeightType t) {
  return 2 * (InterleavedCodeBytes(t) + InterleavedHeaderBytes(t));
}
// Offsets of block b's scales, mins (InterleavedHasMin), codes and fifth
// bits (InterleavedHasFifthBits) inside its group.
inline constexpr size_t InterleavedScaleOffset(WeightType t, size_t b) {
  return b / 2 * InterleavedPairBytes(t) + 32 * (b & 1);
}
inline constexpr size_t InterleavedMinOffset(WeightType t, size_t b) {
  return b / 2 * InterleavedPairBytes(t) + 64 + 32 * (b & 1);
}
inline constexpr size_t InterleavedCodeOffset(WeightType t, size_t b) {
  return b / 2 * InterleavedPairBytes(t) + 2 * InterleavedHeaderBytes(t) + InterleavedCodeBytes(t) * (b & 1);
}
inline constexpr size_t InterleavedFifthBitsOffset(WeightType t, size_t b) { return InterleavedCodeOffset(t, b) + 256; }
// Block column of the 4 weights that code vector i (4 bytes per row) of a
// block holds: nibble types, vector 2j = low nibbles of qs bytes 4j…4j+3
// (weights 4j…), 2j+1 = their high nibbles (weights 16+4j…); Q8_0 vector j:
// weights 4j….
inline constexpr size_t InterleavedColumn(WeightType t, size_t i) {
  return t == WeightType::kQ8_0 ? 4 * i : (i & 1) * 16 + 4 * (i >> 1);
}
// Bytes of one 16-row group of an interleaved matrix of `cols` (a multiple
// of 32).
size_t InterleavedGroupBytes(WeightType t, size_t cols);
// Bytes of a whole matrix in `layout` (kRows: rows·WeightRowBytes).
size_t MatrixBytes(WeightType t, WeightLayout layout, size_t rows, size_t cols);

// True when the kernels dispatch selects on this CPU are faster on
// kInterleaved16 than on kRows (x86 from AVX2 on); every target reads both
// layouts. Loaders interleave IsInterleavable matrices when this holds.
bool InterleavedWeightsPreferred();

// y[r] = Σ_c W[r][c]·x[c] for r in [row_begin, row_end). x: f32 [cols].
// Interleaved matrices: row_begin a multiple of 16, row_end one too or rows.
void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);
// All rows, partitioned over the arena's threads (arena may be null: 1 thread).
void MatVec(const MatrixView& w, const float* x, float* y, ThreadArena* arena);
// Batched: Y[n][rows] = X[n][cols] · Wᵀ, reading each weight row once per
// batch (prefill). Partitioned over rows.
void MatMul(const MatrixView& w, const float* x, size_t n, float* y, ThreadArena* arena);

// out = x / sqrt(mean(x²) + eps) * weight, over n. out may equal x.
void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out);
// out = silu(gate) * up = gate / (1 + e^−gate) * up, over n. out may alias either.
void SwiGlu(const float* gate, const float* up, size_t n, float* out);
// out = gelu_tanh(gate) * up, gelu_tanh(g) = 0.5·g·(1 + tanh(√(2/π)·(g +
// 0.044715·g³))) (gemma's FFN), over n. out may alias either.
void GeluTanhMul(const float* gate, const float* up, size_t n, float* out);
// out = cap·tanh(x/cap) (gemma2's soft-capping), over n; cap > 0. out may equal x.
void SoftCap(const float* x, size_t n, float cap, float* out);
// acc += x, over n (also bias adds).
void AddInPlace(float* acc, const float* x, size_t n);
// Dot product of two f32 vectors (tests, small heads).
float DotF32(const float* a, const float* b, size_t n);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MODEL_KERNELS_H_
