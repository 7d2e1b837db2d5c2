// Model kernels with runtime SIMD dispatch (Highway): RMSNorm, SwiGLU, vector
// adds, and matrix–vector / matrix–matrix products for every weight format
// kvedge reads. Scalar references live in model_kernels_ref.h.
#ifndef KVEDGE_SIMD_MODEL_KERNELS_H_
#define KVEDGE_SIMD_MODEL_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "platform/thread_arena.h"

namespace kvedge {

// Weight storage formats. Q8_0 and Q4_0 are GGUF's (ggml's) block layouts,
// bit-exact:
//   Q8_0: 34-byte blocks of 32 weights: f16 d, int8 qs[32];        w = d·qs[j]
//   Q4_0: 18-byte blocks of 32 weights: f16 d, uint8 qs[16];
//         w[j] = d·((qs[j] & 15) − 8), w[j+16] = d·((qs[j] >> 4) − 8), j < 16
enum class WeightType : uint8_t { kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3, kQ4_0 = 4 };

inline constexpr int kQuantBlock = 32;  // weights per Q8_0 / Q4_0 block
struct BlockQ8_0 { uint16_t d; int8_t qs[kQuantBlock]; };
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQuantBlock / 2]; };
static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0 is 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0 is 18 bytes");

const char* WeightTypeName(WeightType t);
// Bytes of one row of `cols` weights (cols a multiple of 32 for Q8_0/Q4_0).
size_t WeightRowBytes(WeightType t, size_t cols);

// A row-major [rows][cols] matrix in place (e.g. inside a mapped file): row r
// starts at data + r·WeightRowBytes(type, cols). Non-owning view.
struct MatrixView {
  WeightType type = WeightType::kF32;
  const void* data = nullptr;
  size_t rows = 0;
  size_t cols = 0;
};

// y[r] = Σ_c W[r][c]·x[c] for r in [row_begin, row_end). x: f32 [cols].
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
// acc += x, over n.
void AddInPlace(float* acc, const float* x, size_t n);
// Dot product of two f32 vectors (tests, small heads).
float DotF32(const float* a, const float* b, size_t n);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_MODEL_KERNELS_H_
