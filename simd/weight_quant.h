// Reference weight quantizers (SIMD-free): f32 rows → GGUF Q8_0 / Q4_0 blocks,
// f16, bf16. Used by the GGUF writer and by tests; bit-exact to ggml's
// quantize_row_q8_0_reference / quantize_row_q4_0_reference. And the
// relayout of IsInterleavable matrices into kInterleaved16 (model_kernels.h).
#ifndef KVEDGE_SIMD_WEIGHT_QUANT_H_
#define KVEDGE_SIMD_WEIGHT_QUANT_H_

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "simd/model_kernels.h"

namespace kvedge {

// The element of x[n] with the largest |x|, keeping its sign (the first of
// equals; NaNs never win; 0 when n = 0 or all are 0): the reference
// quantizers' per-group "max" (ggml's amax/max scan).
inline float LargestMagnitude(const float* x, int n) {
  float max = 0.0f, amax = 0.0f;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  return max;
}

// x: f32 [n], n a multiple of kQuantBlock (aborts otherwise); out: [n / 32].
// Per block: d = amax / 127 (stored as f16), q = roundf(x / d) (ties away
// from zero, as ggml). |x − w| ≤ d/2 plus the f16 rounding of d.
void QuantizeRowQ8_0(const float* x, size_t n, BlockQ8_0* out);
// Per block: m = the element with the largest |x| (keeps its sign),
// d = m / −8 (f16), q = min(15, (int8)(x / d + 8.5)) so w = d·(q − 8) and m
// maps exactly to code 0. |x − w| ≤ |d|/2 except the clamp at code 15.
void QuantizeRowQ4_0(const float* x, size_t n, BlockQ4_0* out);
// The other block formats, transcribed from ggml's reference quantizers
// without an importance matrix (weight_quant_blocks.cc): the same
// search heuristics, so the same error on the same data. n a multiple of the
// type's block size (32 or 256); out: [n / block] blocks.
void QuantizeRowQ4_1(const float* x, size_t n, BlockQ4_1* out);
void QuantizeRowQ5_0(const float* x, size_t n, BlockQ5_0* out);
void QuantizeRowQ5_1(const float* x, size_t n, BlockQ5_1* out);
void QuantizeRowQ2_K(const float* x, size_t n, BlockQ2_K* out);
void QuantizeRowQ3_K(const float* x, size_t n, BlockQ3_K* out);
void QuantizeRowQ4_K(const float* x, size_t n, BlockQ4_K* out);
void QuantizeRowQ5_K(const float* x, size_t n, BlockQ5_K* out);
void QuantizeRowQ6_K(const float* x, size_t n, BlockQ6_K* out);
void QuantizeRowIQ4_NL(const float* x, size_t n, BlockIQ4_NL* out);
void QuantizeRowIQ4_XS(const float* x, size_t n, BlockIQ4_XS* out);
// out: [n] IEEE half / bfloat16 bits, round to nearest even.
void QuantizeRowF16(const float* x, size_t n, uint16_t* out);
void QuantizeRowBF16(const float* x, size_t n, uint16_t* out);

// Copies 16-row groups [group_begin, group_end) of `src` (IsInterleavable,
// kRows) into the kInterleaved16 layout at dst: the whole matrix's
// MatrixBytes(src.type, kInterleaved16, rows, cols) bytes, 64-byte aligned;
// the last group's missing rows become zero weights. Groups are independent
// (loaders split them over threads). Lossless: every weight keeps its bits.
void InterleaveGroups(const MatrixView& src, size_t group_begin, size_t group_end, uint8_t* dst);
// The view of a matrix interleaved at dst.
MatrixView InterleavedView(const MatrixView& src, const uint8_t* dst);
// Super-block s of row r of an interleaved Q2_K … Q6_K or IQ4_XS matrix w,
// read back into its GGUF bytes (the inverse of InterleaveGroups): out is
// the block of w.type (BlockQ4_K, …).
void ReadInterleavedSuperBlock(const MatrixView& w, size_t r, size_t s, void* out);
// Q5_K's codes as its interleaved layout holds them (model_kernels.h): qs
// [128] and qh [32] of a block → a [128] and b [32], and back. Each is the
// other's inverse on every input.
void EncodeQ5KCodes(const uint8_t* qs, const uint8_t* qh, uint8_t* a, uint8_t* b);
void DecodeQ5KCodes(const uint8_t* a, const uint8_t* b, uint8_t* qs, uint8_t* qh);
// The same for Q6_K: ql [128] and qh [64] → a [128] and b [64], and back.
void EncodeQ6KCodes(const uint8_t* ql, const uint8_t* qh, uint8_t* a, uint8_t* b);
void DecodeQ6KCodes(const uint8_t* a, const uint8_t* b, uint8_t* ql, uint8_t* qh);
// Q3_K's codes as its interleaved layout holds them (model_kernels.h): qs
// [64] and hmask [32] of a block → x [96], and back; inverses on every input.
void EncodeQ3KCodes(const uint8_t* qs, const uint8_t* hmask, uint8_t* x);
void DecodeQ3KCodes(const uint8_t* x, uint8_t* qs, uint8_t* hmask);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_WEIGHT_QUANT_H_
