// Reference weight quantizers, transcribed from ggml's scalar reference
// algorithms so files kvedge writes load identically in llama.cpp.
#include "simd/weight_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "simd/kv_format.h"

namespace kvedge {
namespace {

void CheckBlockMultiple(size_t n, const char* what) {
  if (n % kQuantBlock != 0) {
    std::fprintf(stderr, "%s:%d: %s needs a multiple of %d values, got %zu\n", __FILE__, __LINE__, what,
                 kQuantBlock, n);
    std::abort();
  }
}

}  // namespace

void QuantizeRowQ8_0(const float* x, size_t n, BlockQ8_0* out) {
  CheckBlockMultiple(n, "QuantizeRowQ8_0");
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = F16FromF32(d);
    for (int j = 0; j < kQuantBlock; ++j) out[b].qs[j] = static_cast<int8_t>(std::roundf(xb[j] * id));
  }
}

void QuantizeRowQ4_0(const float* x, size_t n, BlockQ4_0* out) {
  CheckBlockMultiple(n, "QuantizeRowQ4_0");
  constexpr int kHalf = kQuantBlock / 2;
  for (size_t b = 0; b < n / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) {
      if (amax < std::fabs(xb[j])) {
        amax = std::fabs(xb[j]);
        max = xb[j];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    out[b].d = F16FromF32(d);
    for (int j = 0; j < kHalf; ++j) {
      // ggml truncates toward zero after adding 8.5: round-half-up of x/d + 8.
      const int lo = std::min(15, static_cast<int>(static_cast<int8_t>(xb[j] * id + 8.5f)));
      const int hi = std::min(15, static_cast<int>(static_cast<int8_t>(xb[j + kHalf] * id + 8.5f)));
      out[b].qs[j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void QuantizeRowF16(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = F16FromF32(x[i]);
}

void QuantizeRowBF16(const float* x, size_t n, uint16_t* out) {
  for (size_t i = 0; i < n; ++i) out[i] = BF16FromF32(x[i]);
}

}  // namespace kvedge
