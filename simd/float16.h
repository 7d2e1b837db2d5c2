// Scalar IEEE half and bfloat16 <-> float conversions: the f16 KV formats,
// the weight formats and their scalar references, the GGUF reader and writer.
#ifndef KVEDGE_SIMD_FLOAT16_H_
#define KVEDGE_SIMD_FLOAT16_H_

#include <cstdint>

namespace kvedge {

// IEEE half <-> float, round to nearest even; the scalar references (and the
// f16 formats) use these. F16 bits are stored as uint16_t.
uint16_t F16FromF32(float f);
float F32FromF16(uint16_t h);
// bfloat16 bits (upper half of an f32), round to nearest even.
uint16_t BF16FromF32(float f);
float F32FromBF16(uint16_t b);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_FLOAT16_H_
