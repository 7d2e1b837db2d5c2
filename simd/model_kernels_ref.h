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

// The int8-activation model of the fast Q8_0/Q4_0 path (see matvec_legacy.cc):
// per block b of 32 activations, dx[b] = amax/127 (f32, not f16), id = 1/dx[b]
// (0 if dx[b] = 0), q[j] = nearest-even(x[j]·id) ∈ [−127, 127].
// x: f32 [cols]; q: [cols]; dx: [cols/32]; cols a multiple of 32.
void QuantizeActivations(const float* x, size_t cols, int16_t* q, float* dx);
// y[r] = Σ_b dw[r][b]·dx[b]·(Σ_j qw·qx), the integer block sums exact, the
// outer sum in double: what the fast path computes up to f32 rounding.
void MatVecRowsQuantizedActivations(const MatrixView& w, const float* x, float* y, size_t row_begin,
                                    size_t row_end);

// llama.cpp's K-quant dot product (ggml_vec_dot_q{4,5,6}_K_q8_K), the model
// of the fast Q4_K/Q5_K/Q6_K path (matvec_kquant.h): x quantized to Q8_K
// (QuantizeRowQ8_K), then per super-block, from the block definitions,
// S = Σ_i sc(i)·q_w(i)·q_x(i) (Q6_K: q_w − 32) and M = Σ_j min_j·(Σ q_x over
// sub-block j) exact in integers, folded in super-block order as
//   acc = fma(dw·dx, S, acc); acc = fma(−(dmin·dx), M, acc)  (Q6_K: no M).
// w: a Q4_K, Q5_K or Q6_K matrix in kRows layout.
void MatVecRowsQ8K(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end);

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out);
void SwiGlu(const float* gate, const float* up, size_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, size_t n, float* out);
void SoftCap(const float* x, size_t n, float cap, float* out);
void AddInPlace(float* acc, const float* x, size_t n);
float DotF32(const float* a, const float* b, size_t n);

}  // namespace kvedge::ref

#endif  // KVEDGE_SIMD_MODEL_KERNELS_REF_H_
