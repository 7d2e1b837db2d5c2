// Exact IEEE half → float, inline and branch free, for kernels that convert
// one f16 block scale at a time. SIMD-free; equal to F32FromF16
// (kv_format.h, the plain reference) for every input.
#ifndef KVEDGE_SIMD_HALF_INLINE_H_
#define KVEDGE_SIMD_HALF_INLINE_H_

#include <cstdint>
#include <cstring>

namespace kvedge {

inline float BitsToFloat(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}
inline uint32_t FloatToBits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return bits;
}

// Every input (zero, subnormal, inf, nan), Maratos' FP16 algorithm: a few
// integer ops, much cheaper than the out-of-line reference F32FromF16.
inline float HalfToFloat(uint16_t h) {
  const uint32_t w = static_cast<uint32_t>(h) << 16;
  const uint32_t sign = w & 0x80000000u;
  const uint32_t two_w = w + w;
  // Normal (and inf/nan): move the exponent, rebias by 2^-112.
  const float normalized = BitsToFloat((two_w >> 4) + (0xE0u << 23)) * 0x1.0p-112f;
  // Subnormal: place the mantissa under a 0.5 exponent and subtract 0.5.
  const float denormalized = BitsToFloat((two_w >> 17) | (126u << 23)) - 0.5f;
  const uint32_t magnitude = two_w < (1u << 27) ? FloatToBits(denormalized) : FloatToBits(normalized);
  return BitsToFloat(sign | magnitude);
}

}  // namespace kvedge

#endif  // KVEDGE_SIMD_HALF_INLINE_H_
