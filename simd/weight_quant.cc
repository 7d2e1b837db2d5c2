// Reference weight quantizers, transcribed from ggml's scalar reference
// algorithms so files kvedge writes load identically in llama.cpp.
#include "simd/weight_quant.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/float16.h"

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
    const float d = LargestMagnitude(xb, kQuantBlock) / -8.0f;
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

void InterleaveGroups(const MatrixView& src, size_t group_begin, size_t group_end, uint8_t* dst) {
  if (!IsInterleavable(src.type) || src.layout != WeightLayout::kRows) {
    std::fprintf(stderr, "%s:%d: only row-major Q8_0/Q4_0 matrices interleave (got %s)\n", __FILE__, __LINE__,
                 WeightTypeName(src.type));
    std::abort();
  }
  CheckBlockMultiple(src.cols, "InterleaveGroups");
  const bool q8 = src.type == WeightType::kQ8_0;
  const size_t qs_bytes = q8 ? 32 : 16;  // per block and row
  const size_t nb = src.cols / kQuantBlock;
  const size_t row_bytes = WeightRowBytes(src.type, src.cols);
  const size_t group_bytes = InterleavedGroupBytes(src.type, src.cols);
  const uint8_t* rows = static_cast<const uint8_t*>(src.data);
  for (size_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + g * group_bytes;
    std::fill(group, group + group_bytes, uint8_t{0});
    for (size_t i = 0; i < kInterleaveRows; ++i) {
      const size_t r = g * kInterleaveRows + i;
      for (size_t b = 0; b < nb; ++b) {
        uint8_t* scale = group + InterleavedScaleOffset(src.type, b) + i * sizeof(uint16_t);
        uint8_t* codes = group + InterleavedCodeOffset(src.type, b) + 4 * i;  // qs byte j at 64·(j/4) + j%4
        if (r >= src.rows) {
          // A zero weight: scale 0, code 8 (Q4_0: both nibbles) or 128.
          for (size_t j = 0; j < qs_bytes; ++j) codes[64 * (j / 4) + j % 4] = q8 ? 0x80 : 0x88;
          continue;
        }
        const uint8_t* block = rows + r * row_bytes + b * (2 + qs_bytes);  // f16 d, then qs
        std::memcpy(scale, block, sizeof(uint16_t));
        const uint32_t bias = q8 ? 0x80808080u : 0u;  // Q8_0 codes + 128 (xor of each byte's sign bit)
        for (size_t j = 0; j < qs_bytes; j += 4) {
          uint32_t four;
          std::memcpy(&four, block + 2 + j, sizeof(four));
          four ^= bias;
          std::memcpy(codes + 16 * j, &four, sizeof(four));  // 64·(j/4)
        }
      }
    }
  }
}

MatrixView InterleavedView(const MatrixView& src, const uint8_t* dst) {
  MatrixView v = src;
  v.data = dst;
  v.layout = WeightLayout::kInterleaved16;
  return v;
}

}  // namespace kvedge
