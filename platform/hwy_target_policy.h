// Highway target policy for every SIMD translation unit in kvedge. Include this
// first, before any hwy header. The knobs themselves are global compile
// definitions in the top-level CMakeLists.txt (so the library and its
// per-target tests agree); this header checks they are in force.
//
// - HWY_COMPILE_ALL_ATTAINABLE: every target this compiler can build, so tests
//   run each path dispatch can take (x86: SCALAR, SSSE3, SSE4, AVX2, AVX3,
//   and AVX3_DL through HWY_WANT_AVX3_DL;
//   aarch64: SCALAR, NEON, SVE, SVE2, SVE_256, SVE2_128).
// - GCC 12.2 marks EMU128 broken (GCC bug 106322); Highway then falls back to
//   the 1-lane HWY_SCALAR target, so every kernel must compile for it.
#ifndef KVEDGE_PLATFORM_HWY_TARGET_POLICY_H_
#define KVEDGE_PLATFORM_HWY_TARGET_POLICY_H_

#ifndef HWY_COMPILE_ALL_ATTAINABLE
#error "kvedge SIMD code must be built with HWY_COMPILE_ALL_ATTAINABLE (set by CMakeLists.txt)"
#endif

#endif  // KVEDGE_PLATFORM_HWY_TARGET_POLICY_H_
