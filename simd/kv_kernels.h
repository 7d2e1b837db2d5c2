// KV-cache kernels with runtime SIMD dispatch (Highway): block quantization,
// attention scores with inline dequantization and in-kernel RoPE, weighted
// value sums, softmax. Layouts are those of kv_format.h; each kernel has a
// scalar reference in kv_kernels_ref.h that tests compare against.
//
// Positions. Keys are stored rotated only by their slot's offset t inside the
// block (R(t)·k, pre-RoPE otherwise). A block has a base position pb chosen by
// the cache; token t of the block sits at pb + t. Since
//   R(p_q)q · R(pb+t)k = (R(p_q − pb) q) · (R(t) k),
// the kernel rotates the query once per block by the distance d = p_q − pb
// and dots it with the stored codes. The caller supplies, per block, cos and
// sin of θ_i·d for each rotated pair i (see RopeAngles below). Positions can
// then change (StreamingLLM in-cache positions, H2O compaction) without
// touching stored keys. RoPE rotates adjacent pairs (2i, 2i+1) (llama "normal"
// mode); channels ≥ rope_dim are not rotated. The cache permutes NEOX-style
// keys and queries (pairs (i, i + rope_dim/2)) into this layout on entry.
//
// Alignment: blocks must be 4-byte aligned (they hold f32 and f16 arrays;
// every block size in kv_format.h is a multiple of 4, so blocks laid end to
// end from an aligned base are). No kernel assumes vector alignment.
#ifndef KVEDGE_SIMD_KV_KERNELS_H_
#define KVEDGE_SIMD_KV_KERNELS_H_

#include <cstddef>
#include <cstdint>

#include "simd/kv_format.h"

namespace kvedge {

// ---- Encoding (sealing a block) and decoding (tests, H2O re-forming) ----

// src: channel-major f32 [D][G] (the hot-tail key block). Writes one key block
// of format f (for f32, a copy). Quantized formats: per channel, min and
// scale = (max − min)/(2^bits − 1) over the G tokens, stored as f16; codes are
// round-to-nearest of (x − min)/scale computed with the f16-rounded scale and
// min, clamped to [0, 2^bits − 1].
void EncodeKeyBlock(KvFormat f, int head_dim, const float* src, uint8_t* block);
// dst: channel-major f32 [D][G].
void DecodeKeyBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst);
// src: token-major f32 [G][D] (the hot-tail value block). Groups of 32
// elements share scale/min as described in kv_format.h.
void EncodeValueBlock(KvFormat f, int head_dim, const float* src, uint8_t* block);
// dst: token-major f32 [G][D].
void DecodeValueBlock(KvFormat f, int head_dim, const uint8_t* block, float* dst);

// ---- Attention ----

// For each block b of a run (in cache order) and each slot t < G:
//   scores[b*G + t] = scale · dot(R_b q, k_{b,t})
// q: f32 [head_dim], pre-RoPE. rot: [n_blocks][rope_dim] — for block b,
// rope_dim/2 cosines then rope_dim/2 sines of θ_i·d_b. blocks: [n_blocks]
// pointers to key blocks of format f. Every slot is scored; the caller masks
// slots that hold no token. Dequantization happens inside the dot product.
void ScoreKeyBlocks(KvFormat f, int head_dim, int rope_dim, const float* q, const float* rot,
                    const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores);

// out[D] += Σ_b Σ_{t<G} weights[b*G + t] · v_{b,t}. Slots holding no token
// must have weight 0 (their stored bytes are finite).
void AccumulateValueBlocks(KvFormat f, int head_dim, const float* weights, const uint8_t* const* blocks,
                           size_t n_blocks, float* out);

// ---- Grouped-query attention: all query heads of one kv head at once ----
//
// With GQA the nq query heads of a group attend to the same lane. The single-
// query kernels above would stream every block nq times; these read each
// block once per call and decode each code vector once for up to 8 queries
// (4 on x86 below AVX-512): one pass over the lane's bytes, plus nq times
// the FMAs, which then bound int4/int8 (f32/f16 stay memory-bound; measured
// in docs/kernels.md).
// Results equal nq calls of the single-query kernels up to f32 rounding.

// For each query i < nq, block b < n_blocks and slot t < G:
//   scores[i·scores_stride + b·G + t] = scale · dot(R_b q_i, k_{b,t})
// q: [nq][head_dim] f32, pre-RoPE, rows contiguous. rot, blocks: as
// ScoreKeyBlocks (the same block distances serve every query of the group).
// scores: [nq] rows of scores_stride ≥ n_blocks·G floats. Any nq ≥ 1.
void ScoreKeyBlocksMulti(KvFormat f, int head_dim, int rope_dim, const float* q, size_t nq, const float* rot,
                         const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores,
                         size_t scores_stride);

// On x86 with AVX-512 VNNI (Highway target AVX3_DL: Ice Lake, Zen 4 and
// later) and on ARM with integer dot products (NEON when the CPU has Armv8.2
// sdot/udot, every SVE target: svdot, int4 keys only there; simd/kv_kernels_arm-inl.h,
// the same int16 codes and exact integer sums, split into bytes for the dot
// units) and on AVX2 (vpmaddwd; simd/kv_kernels_avx2-inl.h, bit for bit the
// AVX-512 result), int8/int4 keys with nq ≥ 2 take an integer path: per (query,
// block) the rotated, scale-folded query q'_c = (R_b q)_c·s_c is rounded to
// int16 codes with step δ = max_c |q'_c| / 32767 and dotted with the key codes
// by vpdpwssd; the min term stays f32. Those scores differ from the f32
// result by at most scale·(δ/2)·Σ_c code_{c,t} (tested; in attention-output
// terms far below the int4/int8 key quantization itself, see
// docs/kernels.md). Every other target, format and nq = 1 match the
// reference up to f32 rounding. MultiKernelsQuantize() says whether the
// dispatched target takes this path (or the one of AccumulateValueBlocksMulti);
// MultiValuesQuantize() whether it takes the value path (AVX3_DL, AVX2, and
// ARM where the scores take theirs: the same int16 weight codes and int32
// sums, outputs equal to AVX3_DL's bit for bit).
bool MultiKernelsQuantize();
bool MultiValuesQuantize();

// For each i < nq: out[i·head_dim + c] += Σ_b Σ_{t<G} weights[i·weights_stride + b·G + t] · v_{b,t}[c].
// weights: [nq] rows of weights_stride ≥ n_blocks·G floats (masked slots 0).
// With MultiValuesQuantize(), int8/int4 values, nq ≥ 2 and D ≥ 32, the
// folded weights w_t·scale_{t,j} of each (query, block, value group j) are
// rounded to int16 with step δ = max_t |w_t·scale_{t,j}| / 32767 and summed
// by vpdpwssd (ARM: sdot/udot, svdot on the split bytes); out then differs from the f32 result by at most
// Σ_b Σ_t (δ_{b,j}/2)·code_{b,t,c} (tested).
// out: [nq][head_dim] f32, accumulated into. Blocks are streamed once per 8
// queries (GQA groups of ≤ 8: once).
void AccumulateValueBlocksMulti(KvFormat f, int head_dim, const float* weights, size_t weights_stride, size_t nq,
                                const uint8_t* const* blocks, size_t n_blocks, float* out);

// In place over x[0..n): x = exp(x − max) / Σ exp(x − max). Entries equal to
// −infinity become 0 (masked slots). Returns the max (for logsumexp users).
// n ≥ 1 and at least one finite entry.
float SoftmaxInPlace(float* x, size_t n);

// ---- Prefetch ----

// Every attention kernel above issues L2 prefetches for the blocks ahead of
// the one it works on (blocks of a run lie where the ring and H2O put them,
// so hardware stream prefetchers alone leave the kernels waiting on DRAM
// latency). A run's first kKvPrefetchBlocks blocks are the caller's to
// prefetch, early (the cache does it one lane ahead); from there the kernel
// runs ahead two blocks per block until it leads by kKvPrefetchLeadBytes of
// blocks (at least kKvPrefetchBlocks), then keeps that lead
// (KvPrefetchAhead). On Zen 5, for int4 hd64 keys (1,280-byte blocks), a
// lead of 16 blocks against 4 took scores from DRAM at depth 16,384 from
// 130 to 118 µs per lane and values from 234 to 208; f16 blocks (4 KiB)
// decoded slower with 16 than with 4 (docs/performance.md, twenty-first
// session), hence a lead in bytes.
inline constexpr size_t kKvPrefetchBlocks = 4;
inline constexpr size_t kKvPrefetchLeadBytes = 20 << 10;

// How many of a run's blocks of `bytes` each are prefetched once the kernel
// has entered blocks 0..k−1: the caller's kKvPrefetchBlocks, then two more
// per block up to the lead. At block b a kernel prefetches blocks
// [KvPrefetchAhead(b), KvPrefetchAhead(b + 1)) that exist.
constexpr size_t KvPrefetchAhead(size_t k, size_t bytes) {
  const size_t fit = kKvPrefetchLeadBytes / bytes;
  const size_t lead = fit > kKvPrefetchBlocks ? fit : kKvPrefetchBlocks;
  return kKvPrefetchBlocks + 2 * k < k + lead ? kKvPrefetchBlocks + 2 * k : k + lead;
}

// An L2 prefetch (x86 prefetcht1) for every 64-byte line of the n blocks of
// `bytes` each. L2, not L1: an L1 prefetch from DRAM holds one of the few
// L1 miss buffers per line until its data arrives, and a burst of them
// stalls the kernel's own loads (measured in simd/kv_kernels.cc). The x86
// kernels then bring each block from L2 into L1 one block ahead
// (PrefetchNextBlockToL1 there), a short wait per line.
inline void PrefetchKvBlocks(const uint8_t* const* blocks, size_t n, size_t bytes) {
  for (size_t b = 0; b < n; ++b) {
    for (size_t off = 0; off < bytes; off += 64) __builtin_prefetch(blocks[b] + off, 0, 2);
  }
}

// ---- RoPE ----

// cos/sin of θ_i·d for i < rope_dim/2, θ_i = base^(−2i/rope_dim), at any
// distance d (computed in double, so exact far past the trained context).
// out: [rope_dim] — cosines then sines, the per-block layout ScoreKeyBlocks reads.
void RopeAngles(double base, int rope_dim, int64_t distance, float* out);

// out = R(angles) x for one vector of `dim` (pairs (2i,2i+1) for 2i < rope_dim
// rotated by the i-th cos/sin of `angles` laid out as RopeAngles writes;
// the rest copied). out may equal x.
void RopeRotate(int dim, int rope_dim, const float* angles, const float* x, float* out);

// Angles of α+β from those of α and β (both laid out as RopeAngles writes):
// out[i] = cos α_i·cos β_i − sin α_i·sin β_i, out[half+i] = sin α_i·cos β_i +
// cos α_i·sin β_i for i < half = rope_dim/2. RopeTable's per-block rotation
// rows; out aliases neither input.
void RopeAnglesSum(int rope_dim, const float* a, const float* b, float* out);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_KV_KERNELS_H_
