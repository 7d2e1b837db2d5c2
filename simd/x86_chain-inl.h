// Two asm statements that pin what GCC would otherwise move, for x86 kernels
// inside a Highway target section (included after hwy/highway.h, once per
// target; x86 targets only):
//   KeepChain(acc): an empty asm on an accumulator after each add of a
//     chain, so that GCC does not reassociate the chain into a tree (which
//     holds every term live at once and, with 16 ymm registers, spills them:
//     Q4_K MatVec 1.4x slower on a Zen-1 core);
//   KeepChainPrefetch(acc, line): the same with a prefetch of the line at
//     `line` tied to that point of the chain (GCC hoists _mm_prefetch calls
//     to the top of an unrolled loop body, and a super-block's prefetches in
//     one burst there read 7.6 GB/s from DRAM where the same spread over the
//     loop read 12.4; Q4_K, Zen 1);
// the software prefetch along a 16-row group's weight stream
// (PrefetchStreamAhead), for the interleaved MatVec kernels; and on AVX2
// the AVX-VNNI byte dot product (DpbusdAvxVnni) their MatMul tiles share.
#if defined(KVEDGE_SIMD_X86_CHAIN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_X86_CHAIN_INL_H_
#undef KVEDGE_SIMD_X86_CHAIN_INL_H_
#else
#define KVEDGE_SIMD_X86_CHAIN_INL_H_
#endif

#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX2
// acc += the 4 u8 × s8 products of each int32 lane, in one AVX-VNNI
// vpdpbusd (exact in int32). {vex} forces the VEX form: the assembler would
// otherwise pick AVX512_VNNI's EVEX encoding, which an AVX-VNNI CPU without
// AVX-512 (Alder Lake) does not execute; "x" keeps the registers in
// ymm0–15, all VEX can name. Only where AvxVnniEnabled()
// (platform/target_report.h).
HWY_INLINE __m256i DpbusdAvxVnni(__m256i acc, __m256i u8, __m256i s8) {
  __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u8), "x"(s8));
  return acc;
}
#endif

#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
template <class V>
HWY_INLINE V KeepChain(V acc) {
  __asm__("" : "+v"(acc));
  return acc;
}
template <class V>
HWY_INLINE V KeepChainPrefetch(V acc, const char* line) {
  __asm__("prefetcht0 %1" : "+v"(acc) : "m"(*line));
  return acc;
}

// Software prefetch distance in bytes along a 16-row group's stream when
// one vector streams it (MatVec): 8 KiB, the rows kernels' kPrefetchBytes.
// Without it Q4_K's one-vector kernel read 16.2 GB/s from DRAM where the
// rows kernel read 18.3 (AVX3_DL; AVX2 13.6 vs 15.4); 4 KiB left Q6_K's at
// a third of the rows kernel's rate. The legacy 32-blocks' one-vector tile
// (matvec_interleaved.cc) uses it too.
inline constexpr size_t kStreamPrefetchBytes = 8192;

// Where byte `at` (relative to the group) of a group's chunk span
// [span_begin, span_end) continues: itself inside the span, and past its
// end the stream's next bytes, the next group's span (group_bytes further:
// the kernels walk the chunk group by group).
HWY_INLINE const char* StreamAt(const uint8_t* group, size_t group_bytes, size_t span_begin, size_t span_end,
                                size_t at) {
  return reinterpret_cast<const char*>(group) + (at < span_end ? at : group_bytes + span_begin + (at - span_end));
}

// Prefetches the 64-byte lines kAhead bytes past bytes [from, to) of the
// group's chunk span [span_begin, span_end) along that stream (the rows
// kernels' distance is kPrefetchBytes; a group kernel calls it once per
// block or super-block it reads). Prefetches past the matrix are dropped,
// never fault.
template <size_t kAhead>
HWY_INLINE void PrefetchStreamAhead(const uint8_t* group, size_t group_bytes, size_t span_begin, size_t span_end,
                                    size_t from, size_t to) {
  for (size_t off = from + kAhead; off < to + kAhead; off += 64) {
    _mm_prefetch(StreamAt(group, group_bytes, span_begin, span_end, off), _MM_HINT_T0);
  }
}
#endif

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_X86_CHAIN_INL_H_
