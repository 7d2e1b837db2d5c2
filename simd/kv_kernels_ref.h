// Scalar reference implementations of the KV kernels in kv_kernels.h, written
// for clarity rather than speed; the per-target tests trust these.
#ifndef KVEDGE_SIMD_KV_KERNELS_REF_H_
#define KVEDGE_SIMD_KV_KERNELS_REF_H_

#include <cstddef>
#include <cstdint>

#include "simd/kv_format.h"

namespace kvedge {
namespace ref {

// Same contracts as the kvedge:: functions of the same names (kv_kernels.h).
void EncodeKeyBlock(KvFormat f, int head_dim, const float* src, uint8_t* block);
void DecodeKeyBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst);
void EncodeValueBlock(KvFormat f, int head_dim, const float* src, uint8_t* block);
void DecodeValueBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst);
void ScoreKeyBlocks(KvFormat f, int head_dim, int rope_dim, const float* q, const float* rot,
                    const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores);
void AccumulateValueBlocks(KvFormat f, int head_dim, const float* weights, const uint8_t* const* blocks,
                           size_t n_blocks, float* out);
// Multi-query variants: loops of the single-query references over the rows.
void ScoreKeyBlocksMulti(KvFormat f, int head_dim, int rope_dim, const float* q, size_t nq, const float* rot,
                         const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores,
                         size_t scores_stride);
void AccumulateValueBlocksMulti(KvFormat f, int head_dim, const float* weights, size_t weights_stride, size_t nq,
                                const uint8_t* const* blocks, size_t n_blocks, float* out);
float SoftmaxInPlace(float* x, size_t n);
void RopeAngles(double base, int rope_dim, int64_t distance, float* out);
void RopeRotate(int dim, int rope_dim, const float* angles, const float* x, float* out);
void RopeAnglesSum(int rope_dim, const float* a, const float* b, float* out);

// Quantizes n (≤ 32) floats as one group with `bits` per code: computes
// min and scale = (max − min)/(2^bits − 1), rounds both to f16, then
// code = clamp(round_to_nearest_even((x − min_h)/scale_h), 0, 2^bits − 1),
// or 0 everywhere when scale_h is 0. Shared by the key and value encoders.
void QuantizeGroup(const float* x, int n, int bits, uint8_t* codes, uint16_t* scale_f16, uint16_t* min_f16);

}  // namespace ref
}  // namespace kvedge

#endif  // KVEDGE_SIMD_KV_KERNELS_REF_H_
