// Armv8.2 dot products (sdot) for the NEON target: Highway 1.0.3 has no
// int8 dot-product op and its NEON target is plain Armv8.0 (Cortex-A72 and
// up), so kernels that use vdotq_s32 are compiled with KVEDGE_ATTR_DOTPROD
// and called only when ArmHasDotProd() (Linux HWCAP_ASIMDDP: Cortex-A55/A76
// and later, Neoverse N1 and later, Apple M1 and later). SVE has svdot
// always and needs neither.
//
// KVEDGE_ATTR_DOTPROD names the whole architecture: GCC 12 defines vdotq_s32
// under "arch=armv8.2-a+dotprod" and refuses to inline it into a function
// with only "+dotprod" ("target specific option mismatch"); "+crypto" is the
// NEON target's own string (HWY_TARGET_STR), kept so Highway's inline ops
// still inline.
#ifndef KVEDGE_SIMD_ARM_DOTPROD_H_
#define KVEDGE_SIMD_ARM_DOTPROD_H_

// True in the per-target passes that have ARM dot-product kernels (NEON:
// sdot when ArmHasDotProd(); SVE, SVE2 at any width: svdot). Evaluated at
// each use, so inside Highway's foreach_target passes after hwy/highway.h.
#define KVEDGE_HWY_ARM_DOT_TARGET                                                                          \
  (HWY_TARGET == HWY_NEON || HWY_TARGET == HWY_SVE || HWY_TARGET == HWY_SVE2 || HWY_TARGET == HWY_SVE_256 || \
   HWY_TARGET == HWY_SVE2_128)

#if defined(__aarch64__)
#if defined(__linux__)
#include <sys/auxv.h>
#endif

#define KVEDGE_ATTR_DOTPROD __attribute__((target("arch=armv8.2-a+crypto+dotprod")))

namespace kvedge {

// True when this CPU executes sdot/udot (read once).
inline bool ArmHasDotProd() {
#if defined(__ARM_FEATURE_DOTPROD)
  return true;
#elif defined(__linux__) && defined(HWCAP_ASIMDDP)
  static const bool has = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
  return has;
#else
  return false;
#endif
}

}  // namespace kvedge
#endif  // __aarch64__

#endif  // KVEDGE_SIMD_ARM_DOTPROD_H_
