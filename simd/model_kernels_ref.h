// Scalar reference kernels for model_kernels.h (namespace kvedge::ref): plain
// loops over the GGUF block definitions, accumulating in double. Tests trust
// these; they are slow on purpose and never used on the hot path.
#ifndef KVEDGE_SIMD_MODEL_KERNELS_REF_H_
#define KVEDGE_SIMD_MODEL_KERNELS_REF_H_

#include <cstddef>
#include <cstdint>

#include "simd/model_kernels.h"

namespace kvedge::ref {

// Weight (r, c) of w as f32, straight from the block definition.
float DequantizeWeight(const MatrixView& w, size_t r, size_t c);
// out: f32 [w.cols], row r of w.
void DequantizeRow(const MatrixView& w, size_t r, float* out);

// y[r] = Σ_c W[r][c]·x[c] in double, rounded once to f32.
void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);

// The int8-activation model of the fast path of the legacy 32-weight blocks
// (WeightKernel::kInt8: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL; see
// matvec_legacy.cc): per block b of 32 activations, dx[b] = amax/127 (f32,
// not f16), id = 1/dx[b] (0 if dx[b] = 0), q[j] = nearest-even(x[j]·id) ∈
// [−127, 127]. x: f32 [cols]; q: [cols]; dx: [cols/32]; cols a multiple of 32.
void QuantizeActivations(const float* x, size_t cols, int16_t* q, float* dx);
// Integer code q of weight (r, c) of a kInt8 matrix (either layout), with
// its block's f16 scale d and min m as f32: w = d·q + m exactly, m = 0 but
// for Q4_1/Q5_1. Codes: Q8_0 [−128, 127], Q4_0 nibble − 8, Q4_1 nibble,
// Q5_0 (nibble | fifth bit << 4) − 16, Q5_1 without the − 16, IQ4_NL
// kIq4nlValues[nibble]. The integer semantics every kInt8 kernel uses.
int QuantCode(const MatrixView& w, size_t r, size_t c, float* d, float* m);
// y[r] = Σ_b dx[b]·(dw·Σ_j qw_j·q_j + m·Σ_j q_j), with the weights' integer
// codes qw, f16 scale dw and min m of each block (w = dw·qw + m; m = 0 but
// for Q4_1/Q5_1, as llama.cpp's Q8_1 "s" term): the integer sums exact, the
// rest in double. What the fast path computes up to f32 rounding.
void MatVecRowsQuantizedActivations(const MatrixView& w, const float* x, float* y, size_t row_begin,
                                    size_t row_end);

// llama.cpp's K-quant dot product (ggml_vec_dot_{q2,q3,q4,q5,q6,iq4_xs}_K…
// _q8_K), the model of the fast kInt8K path (matvec_kquant.h): x quantized
// to Q8_K (QuantizeRowQ8_K), then per super-block, from the block
// definitions, S = Σ_i sc(i)·q_w(i)·q_x(i) (Q3_K: sc − 32 and the signed
// code low − 4·!high; Q6_K: q_w − 32; IQ4_XS: (ls − 32)·level) and, for the
// types with mins (Q2_K per 16, Q4_K/Q5_K per 32 weights),
// M = Σ_j min_j·(Σ q_x over sub-block j), exact in integers, folded in
// super-block order as
//   acc = fma(dw·dx, S, acc); acc = fma(−(dmin·dx), M, acc)  (no M: one fma).
// w: a Q2_K, Q3_K, Q4_K, Q5_K, Q6_K or IQ4_XS matrix in kRows layout, or any
// of them but Q5_K in kInterleaved16 (read back into GGUF blocks).
void MatVecRowsQ8K(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out);
void SwiGlu(const float* gate, const float* up, size_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, size_t n, float* out);
void SoftCap(const float* x, size_t n, float cap, float* out);
void AddInPlace(float* acc, const float* x, size_t n);
float DotF32(const float* a, const float* b, size_t n);

}  // namespace kvedge::ref

#endif  // KVEDGE_SIMD_MODEL_KERNELS_REF_H_
