// ggml reference quantization: Q8_0 d = amax/127, q = round(x/d);
// Q4_0 d = (signed value of largest |x|)/-8, q = min(15, (int8)(x/d + 8.5)).
#include "runtime/model/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "simd/kv_format.h"

namespace kvedge {

void QuantizeRowQ8_0(const float* x, BlockQ8_0* y, size_t n) {
  for (size_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F16FromF32(d);
    for (int j = 0; j < kQuantBlock; ++j) y[b].qs[j] = static_cast<int8_t>(std::roundf(x[j] * id));
  }
}

void QuantizeRowQ4_0(const float* x, BlockQ4_0* y, size_t n) {
  for (size_t b = 0; b < n / kQuantBlock; ++b, x += kQuantBlock) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (amax < std::fabs(x[j])) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y[b].d = F16FromF32(d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const uint8_t q0 = std::min<int8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
      const uint8_t q1 = std::min<int8_t>(15, static_cast<int8_t>(x[j + kQuantBlock / 2] * id + 8.5f));
      y[b].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void DequantizeRowQ8_0(const BlockQ8_0* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = F32FromF16(x[b].d);
    for (int j = 0; j < kQuantBlock; ++j) y[b * kQuantBlock + j] = d * x[b].qs[j];
  }
}

void DequantizeRowQ4_0(const BlockQ4_0* x, float* y, size_t n) {
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float d = F32FromF16(x[b].d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[b * kQuantBlock + j] = d * ((x[b].qs[j] & 15) - 8);
      y[b * kQuantBlock + j + kQuantBlock / 2] = d * ((x[b].qs[j] >> 4) - 8);
    }
  }
}

}  // namespace kvedge
