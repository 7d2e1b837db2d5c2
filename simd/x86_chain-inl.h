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
//     loop read 12.4; Q4_K, Zen 1).
#if defined(KVEDGE_SIMD_X86_CHAIN_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef KVEDGE_SIMD_X86_CHAIN_INL_H_
#undef KVEDGE_SIMD_X86_CHAIN_INL_H_
#else
#define KVEDGE_SIMD_X86_CHAIN_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace kvedge {
namespace HWY_NAMESPACE {

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
#endif

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace kvedge
HWY_AFTER_NAMESPACE();

#endif  // KVEDGE_SIMD_X86_CHAIN_INL_H_
