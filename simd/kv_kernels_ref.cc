// Scalar reference KV kernels: one element at a time, straight from the
// layout description in kv_format.h and the contracts in kv_kernels.h.
#include "simd/kv_kernels_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace kvedge {
namespace ref {
namespace {

constexpr int kG = kKvBlockTokens;

// Codes of the [G][D] / [D][G] element order, one byte per code (int4
// unpacked), for formats that store codes as bytes or nibbles.
uint8_t KeyCode(KvFormat f, int d, const uint8_t* block, int c, int t) {
  if (f == KvFormat::kInt8) return block[c * kG + t];
  const uint8_t byte = block[c * (kG / 2) + t % (kG / 2)];
  return t < kG / 2 ? (byte & 0xF) : (byte >> 4);
}

uint8_t ValueCode(KvFormat f, int d, const uint8_t* block, int t, int c) {
  if (f == KvFormat::kInt8) return block[t * d + c];
  const uint8_t byte = block[t * (d / 2) + c % (d / 2)];
  return c < d / 2 ? (byte & 0xF) : (byte >> 4);
}

uint16_t LoadF16(const uint8_t* p, size_t index) {
  uint16_t h;
  std::memcpy(&h, p + 2 * index, 2);
  return h;
}
void StoreF16(uint8_t* p, size_t index, uint16_t h) { std::memcpy(p + 2 * index, &h, 2); }

// Element e of the [G][D] (values) or [D][G] (keys) order of an f32/f16 block.
float LoadFloatElement(KvFormat f, const uint8_t* block, size_t e) {
  if (f == KvFormat::kF32) {
    float x;
    std::memcpy(&x, block + 4 * e, 4);
    return x;
  }
  return F32FromF16(LoadF16(block, e));
}

void StoreFloatElement(KvFormat f, uint8_t* block, size_t e, float x) {
  if (f == KvFormat::kF32) {
    std::memcpy(block + 4 * e, &x, 4);
  } else {
    StoreF16(block, e, F16FromF32(x));
  }
}

// Dequantized key element (channel c, token t) of any format.
float KeyElement(KvFormat f, int d, const uint8_t* block, int c, int t) {
  if (!IsQuantized(f)) return LoadFloatElement(f, block, static_cast<size_t>(c) * kG + t);
  const float s = F32FromF16(LoadF16(block + KeyBlockScalesOffset(f, d), c));
  const float m = F32FromF16(LoadF16(block + KeyBlockMinsOffset(f, d), c));
  return s * static_cast<float>(KeyCode(f, d, block, c, t)) + m;
}

// Dequantized value element (token t, channel c) of any format.
float ValueElement(KvFormat f, int d, const uint8_t* block, int t, int c) {
  const size_t e = static_cast<size_t>(t) * d + c;
  if (!IsQuantized(f)) return LoadFloatElement(f, block, e);
  const size_t g = e / kValueGroup;
  const float s = F32FromF16(LoadF16(block + ValueBlockScalesOffset(f, d), g));
  const float m = F32FromF16(LoadF16(block + ValueBlockMinsOffset(f, d), g));
  return s * static_cast<float>(ValueCode(f, d, block, t, c)) + m;
}

}  // namespace

void QuantizeGroup(const float* x, int n, int bits, uint8_t* codes, uint16_t* scale_f16, uint16_t* min_f16) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  const float max_code = static_cast<float>((1 << bits) - 1);
  *scale_f16 = F16FromF32((hi - lo) / max_code);
  *min_f16 = F16FromF32(lo);
  const float s = F32FromF16(*scale_f16);
  const float m = F32FromF16(*min_f16);
  for (int i = 0; i < n; ++i) {
    float code = 0.0f;
    if (s != 0.0f) code = std::clamp(std::nearbyint((x[i] - m) / s), 0.0f, max_code);
    codes[i] = static_cast<uint8_t>(code);
  }
}

void EncodeKeyBlock(KvFormat f, int d, const float* src, uint8_t* block) {
  if (!IsQuantized(f)) {
    for (size_t e = 0; e < static_cast<size_t>(d) * kG; ++e) StoreFloatElement(f, block, e, src[e]);
    return;
  }
  const int bits = KvCodeBits(f);
  uint8_t* scales = block + KeyBlockScalesOffset(f, d);
  uint8_t* mins = block + KeyBlockMinsOffset(f, d);
  for (int c = 0; c < d; ++c) {
    uint8_t codes[kG];  // [G] one channel
    uint16_t s, m;
    QuantizeGroup(src + c * kG, kG, bits, codes, &s, &m);
    StoreF16(scales, c, s);
    StoreF16(mins, c, m);
    if (f == KvFormat::kInt8) {
      std::memcpy(block + c * kG, codes, kG);
    } else {
      for (int j = 0; j < kG / 2; ++j) {
        block[c * (kG / 2) + j] = static_cast<uint8_t>(codes[j] | (codes[j + kG / 2] << 4));
      }
    }
  }
}

void DecodeKeyBlock(KvFormat f, int d, const uint8_t* block, float* dst) {
  for (int c = 0; c < d; ++c) {
    for (int t = 0; t < kG; ++t) dst[c * kG + t] = KeyElement(f, d, block, c, t);
  }
}

void EncodeValueBlock(KvFormat f, int d, const float* src, uint8_t* block) {
  const size_t n = static_cast<size_t>(d) * kG;
  if (!IsQuantized(f)) {
    for (size_t e = 0; e < n; ++e) StoreFloatElement(f, block, e, src[e]);
    return;
  }
  uint8_t codes[kG * kMaxHeadDim];  // [G][D] one code per byte
  uint8_t* scales = block + ValueBlockScalesOffset(f, d);
  uint8_t* mins = block + ValueBlockMinsOffset(f, d);
  for (size_t g = 0; g < n / kValueGroup; ++g) {
    uint16_t s, m;
    QuantizeGroup(src + g * kValueGroup, kValueGroup, KvCodeBits(f), codes + g * kValueGroup, &s, &m);
    StoreF16(scales, g, s);
    StoreF16(mins, g, m);
  }
  if (f == KvFormat::kInt8) {
    std::memcpy(block, codes, n);
    return;
  }
  const int half = d / 2;
  for (int t = 0; t < kG; ++t) {
    for (int j = 0; j < half; ++j) {
      block[t * half + j] = static_cast<uint8_t>(codes[t * d + j] | (codes[t * d + j + half] << 4));
    }
  }
}

void DecodeValueBlock(KvFormat f, int d, const uint8_t* block, float* dst) {
  for (int t = 0; t < kG; ++t) {
    for (int c = 0; c < d; ++c) dst[t * d + c] = ValueElement(f, d, block, t, c);
  }
}

void ScoreKeyBlocks(KvFormat f, int d, int rope_dim, const float* q, const float* rot,
                    const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores) {
  for (size_t b = 0; b < n_blocks; ++b) {
    float qr[kMaxHeadDim];
    RopeRotate(d, rope_dim, rot + b * rope_dim, q, qr);
    for (int t = 0; t < kG; ++t) {
      double dot = 0.0;
      for (int c = 0; c < d; ++c) dot += static_cast<double>(qr[c]) * KeyElement(f, d, blocks[b], c, t);
      scores[b * kG + t] = scale * static_cast<float>(dot);
    }
  }
}

void AccumulateValueBlocks(KvFormat f, int d, const float* weights, const uint8_t* const* blocks,
                           size_t n_blocks, float* out) {
  for (int c = 0; c < d; ++c) {
    double sum = 0.0;
    for (size_t b = 0; b < n_blocks; ++b) {
      for (int t = 0; t < kG; ++t) sum += static_cast<double>(weights[b * kG + t]) * ValueElement(f, d, blocks[b], t, c);
    }
    out[c] += static_cast<float>(sum);
  }
}

void ScoreKeyBlocksMulti(KvFormat f, int d, int rope_dim, const float* q, size_t nq, const float* rot,
                         const uint8_t* const* blocks, size_t n_blocks, float scale, float* scores,
                         size_t scores_stride) {
  for (size_t i = 0; i < nq; ++i) {
    ScoreKeyBlocks(f, d, rope_dim, q + i * d, rot, blocks, n_blocks, scale, scores + i * scores_stride);
  }
}

void AccumulateValueBlocksMulti(KvFormat f, int d, const float* weights, size_t weights_stride, size_t nq,
                                const uint8_t* const* blocks, size_t n_blocks, float* out) {
  for (size_t i = 0; i < nq; ++i) {
    AccumulateValueBlocks(f, d, weights + i * weights_stride, blocks, n_blocks, out + i * d);
  }
}

float SoftmaxInPlace(float* x, size_t n) {
  float max = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) {
    x[i] = std::isinf(x[i]) && x[i] < 0 ? 0.0f : std::exp(x[i] - max);
    sum += x[i];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (size_t i = 0; i < n; ++i) x[i] *= inv;
  return max;
}

void RopeAngles(double base, int rope_dim, int64_t distance, float* out) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const double theta = std::pow(base, -2.0 * i / rope_dim);
    const double angle = theta * static_cast<double>(distance);
    out[i] = static_cast<float>(std::cos(angle));
    out[half + i] = static_cast<float>(std::sin(angle));
  }
}

void RopeRotate(int dim, int rope_dim, const float* angles, const float* x, float* out) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float c = angles[i], s = angles[half + i];
    const float x0 = x[2 * i], x1 = x[2 * i + 1];
    out[2 * i] = x0 * c - x1 * s;
    out[2 * i + 1] = x0 * s + x1 * c;
  }
  for (int i = 2 * half; i < dim; ++i) out[i] = x[i];
}

void RopeAnglesSum(int rope_dim, const float* a, const float* b, float* out) {
  const int half = rope_dim / 2;
  for (int i = 0; i < half; ++i) {
    const float ca = a[i], sa = a[half + i], cb = b[i], sb = b[half + i];
    out[i] = ca * cb - sa * sb;         // cos(α+β)
    out[half + i] = sa * cb + ca * sb;  // sin(α+β)
  }
}

}  // namespace ref
}  // namespace kvedge
