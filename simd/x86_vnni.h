// The function attribute for AVX-512 VNNI code inside Highway's HWY_AVX3_DL
// target section (raw intrinsics; Highway 1.0.3 has no u8×i8 dot product).
// Use only between `#if HWY_TARGET == HWY_AVX3_DL` and its `#endif`: it
// expands HWY_TARGET_STR at the point of use.
//
// Highway 1.0.3's AVX3_DL target string names "avxvnni" (the VEX form)
// instead of "avx512vnni", so functions that call vpdpbusd on zmm add it.
// GFNI is not in that string either; every CPU with AVX3_DL's VBMI2 + VAES +
// VPCLMULQDQ has it (Ice Lake, Zen 4 and later). The attribute repeats the
// target string: clang replaces the pragma's target with a function's own
// instead of adding to it.
#ifndef KVEDGE_SIMD_X86_VNNI_H_
#define KVEDGE_SIMD_X86_VNNI_H_

#define KVEDGE_ATTR_VNNI512 __attribute__((target(HWY_TARGET_STR ",avx512vnni,gfni")))

#endif  // KVEDGE_SIMD_X86_VNNI_H_
