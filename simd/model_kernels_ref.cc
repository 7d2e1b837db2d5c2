// Scalar reference kernels for model_kernels.h.
#include "simd/model_kernels_ref.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "simd/float16.h"
#include "simd/matvec_kquant.h"
#include "simd/weight_quant.h"

namespace kvedge {

namespace ref {
namespace {

const uint8_t* RowPtr(const MatrixView& w, size_t r) {
  return static_cast<const uint8_t*>(w.data) + r * WeightRowBytes(w.type, w.cols);
}

// Block b of row r of an interleaved matrix (layout in model_kernels.h),
// read back into its GGUF bytes (weight_format.h) at out.
void InterleavedBlock(const MatrixView& w, size_t r, size_t b, uint8_t* out) {
  const WeightType t = w.type;
  const bool q8 = t == WeightType::kQ8_0;
  const size_t i = r % kInterleaveRows;
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + r / kInterleaveRows * InterleavedGroupBytes(t, w.cols);
  std::memcpy(out, group + InterleavedScaleOffset(t, b) + 2 * i, 2);
  size_t at = 2;
  if (InterleavedHasMin(t)) {
    std::memcpy(out + at, group + InterleavedMinOffset(t, b) + 2 * i, 2);
    at += 2;
  }
  if (InterleavedHasFifthBits(t)) {
    const uint8_t* fifth = group + InterleavedFifthBitsOffset(t, b) + 4 * i;
    uint32_t qh = 0;
    for (size_t v = 0; v < 8; ++v) {
      for (size_t k = 0; k < 4; ++k) qh |= static_cast<uint32_t>((fifth[k] >> v) & 1) << (InterleavedColumn(t, v) + k);
    }
    std::memcpy(out + at, &qh, 4);
    at += 4;
  }
  const size_t qs_bytes = q8 ? 32 : 16;
  for (size_t j = 0; j < qs_bytes; ++j) {
    const uint8_t code = group[InterleavedCodeOffset(t, b) + 64 * (j / 4) + 4 * i + j % 4];
    out[at + j] = q8 ? code ^ 0x80 : code;
  }
}

// The 32-weight block of type t holding weight j (< 32) of a row: its signed
// integer code q, f16 scale d and (Q4_1/Q5_1, else 0) f16 min m, w = d·q + m
// (weight_format.h). The integer semantics of every kInt8 kernel.
int BlockCode(WeightType t, const uint8_t* block, int j, float* d, float* m) {
  constexpr int kHalf = kQuantBlock / 2;
  const auto nibble = [&](const uint8_t* qs) { return j < kHalf ? qs[j] & 15 : qs[j - kHalf] >> 4; };
  const auto fifth = [&](const uint8_t* qh) {
    uint32_t bits;
    std::memcpy(&bits, qh, sizeof(bits));
    return static_cast<int>((bits >> j) & 1) << 4;
  };
  *m = 0.0f;
  switch (t) {
    case WeightType::kQ8_0: {
      const auto& b = *reinterpret_cast<const BlockQ8_0*>(block);
      *d = F32FromF16(b.d);
      return b.qs[j];
    }
    case WeightType::kQ4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(block);
      *d = F32FromF16(b.d);
      return nibble(b.qs) - 8;
    }
    case WeightType::kQ4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(block);
      *d = F32FromF16(b.d);
      *m = F32FromF16(b.m);
      return nibble(b.qs);
    }
    case WeightType::kQ5_0: {
      const auto& b = *reinterpret_cast<const BlockQ5_0*>(block);
      *d = F32FromF16(b.d);
      return (nibble(b.qs) | fifth(b.qh)) - 16;
    }
    case WeightType::kQ5_1: {
      const auto& b = *reinterpret_cast<const BlockQ5_1*>(block);
      *d = F32FromF16(b.d);
      *m = F32FromF16(b.m);
      return nibble(b.qs) | fifth(b.qh);
    }
    case WeightType::kIQ4_NL: {
      const auto& b = *reinterpret_cast<const BlockIQ4_NL*>(block);
      *d = F32FromF16(b.d);
      return kIq4nlValues[nibble(b.qs)];
    }
    default:
      std::fprintf(stderr, "%s:%d: %s has no int8-activation code\n", __FILE__, __LINE__, WeightTypeName(t));
      std::abort();
  }
}

}  // namespace

int QuantCode(const MatrixView& w, size_t r, size_t c, float* d, float* m) {
  if (w.layout == WeightLayout::kInterleaved16) {
    uint8_t block[sizeof(BlockQ8_0)];  // the largest legacy block
    InterleavedBlock(w, r, c / kQuantBlock, block);
    return BlockCode(w.type, block, static_cast<int>(c % kQuantBlock), d, m);
  }
  const size_t block_bytes = GetWeightFormat(w.type).block_bytes;
  return BlockCode(w.type, RowPtr(w, r) + c / kQuantBlock * block_bytes, static_cast<int>(c % kQuantBlock), d, m);
}

float DequantizeWeight(const MatrixView& w, size_t r, size_t c) {
  if (w.layout == WeightLayout::kInterleaved16 && GetWeightFormat(w.type).kernel == WeightKernel::kInt8K) {
    alignas(8) uint8_t block[sizeof(BlockQ6_K)];  // the largest K-quant block
    float values[kSuperBlock];
    ReadInterleavedSuperBlock(w, r, c / kSuperBlock, block);
    GetWeightFormat(w.type).dequantize(block, values, kSuperBlock);
    return values[c % kSuperBlock];
  }
  if (w.layout == WeightLayout::kInterleaved16) {
    // The block read back into GGUF bytes, decoded by the format table.
    uint8_t block[sizeof(BlockQ8_0)];  // the largest legacy block
    float values[kQuantBlock];
    InterleavedBlock(w, r, c / kQuantBlock, block);
    GetWeightFormat(w.type).dequantize(block, values, kQuantBlock);
    return values[c % kQuantBlock];
  }
  const uint8_t* row = RowPtr(w, r);
  switch (w.type) {
    case WeightType::kF32: return reinterpret_cast<const float*>(row)[c];
    case WeightType::kF16: return F32FromF16(reinterpret_cast<const uint16_t*>(row)[c]);
    case WeightType::kBF16: return F32FromBF16(reinterpret_cast<const uint16_t*>(row)[c]);
    case WeightType::kQ8_0:
    case WeightType::kQ4_0: {
      float d, m;
      const int q = QuantCode(w, r, c, &d, &m);
      return d * static_cast<float>(q);
    }
    default: {
      // The block holding c, decoded by the format table (ggml's to_float).
      const WeightFormat& f = GetWeightFormat(w.type);
      float block[kSuperBlock];
      f.dequantize(row + c / f.block * f.block_bytes, block, f.block);
      return block[c % f.block];
    }
  }
}

void DequantizeRow(const MatrixView& w, size_t r, float* out) {
  if (w.layout == WeightLayout::kRows) return DequantizeRow(w.type, RowPtr(w, r), out, w.cols);
  for (size_t c = 0; c < w.cols; ++c) out[c] = DequantizeWeight(w, r, c);
}

void MatVecRows(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  std::vector<float> row(w.cols);
  for (size_t r = row_begin; r < row_end; ++r) {
    DequantizeRow(w, r, row.data());
    double sum = 0.0;
    for (size_t c = 0; c < w.cols; ++c) sum += static_cast<double>(row[c]) * x[c];
    y[r] = static_cast<float>(sum);
  }
}

void QuantizeActivations(const float* x, size_t cols, int16_t* q, float* dx) {
  for (size_t b = 0; b < cols / kQuantBlock; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.0f;
    for (int j = 0; j < kQuantBlock; ++j) amax = std::fmax(amax, std::fabs(xb[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dx[b] = d;
    for (int j = 0; j < kQuantBlock; ++j) {
      q[b * kQuantBlock + j] = static_cast<int16_t>(std::nearbyint(xb[j] * id));
    }
  }
}

void MatVecRowsQuantizedActivations(const MatrixView& w, const float* x, float* y, size_t row_begin,
                                    size_t row_end) {
  if (!IsQuantizedWeight(w.type)) {
    std::fprintf(stderr, "%s:%d: quantized-activation reference needs a legacy 32-block type (kInt8), got %s\n",
                 __FILE__, __LINE__, WeightTypeName(w.type));
    std::abort();
  }
  const size_t num_blocks = w.cols / kQuantBlock;
  std::vector<int16_t> q(w.cols);     // [cols] int8 codes held in int16
  std::vector<float> dx(num_blocks);  // [cols/32] f32 block scales
  QuantizeActivations(x, w.cols, q.data(), dx.data());
  for (size_t r = row_begin; r < row_end; ++r) {
    double sum = 0.0;
    for (size_t b = 0; b < num_blocks; ++b) {
      float dw = 0.0f, mw = 0.0f;
      int32_t isum = 0, qsum = 0;
      for (int j = 0; j < kQuantBlock; ++j) {
        isum += QuantCode(w, r, b * kQuantBlock + j, &dw, &mw) * q[b * kQuantBlock + j];
        qsum += q[b * kQuantBlock + j];
      }
      sum += static_cast<double>(dw) * dx[b] * isum + static_cast<double>(mw) * dx[b] * qsum;
    }
    y[r] = static_cast<float>(sum);
  }
}

namespace {

// Super-block sb of row r: S, M (see MatVecRowsQ8K), dw and dmin.
struct KSums {
  int64_t s = 0, m = 0;
  float dw = 0.0f, dmin = 0.0f;
};

template <class Block>
KSums Q45Sums(const Block& b, const uint8_t* qh, const BlockQ8_K& a) {
  KSums out;
  out.dw = F32FromF16(b.d);
  out.dmin = F32FromF16(b.dmin);
  for (int j = 0; j < 8; ++j) {  // sub-blocks of 32: nibble j % 2 of bytes 32·(j/2) …
    uint8_t sc, mn;
    KScaleMin(j, b.scales, &sc, &mn);
    for (int l = 0; l < 32; ++l) {
      int q = (b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15;
      if (qh != nullptr) q += ((qh[l] >> j) & 1) << 4;
      out.s += static_cast<int64_t>(sc) * q * a.qs[32 * j + l];
    }
    out.m += static_cast<int64_t>(mn) * (a.bsums[2 * j] + a.bsums[2 * j + 1]);
  }
  return out;
}

KSums Q6Sums(const BlockQ6_K& b, const BlockQ8_K& a) {
  KSums out;
  out.dw = F32FromF16(b.d);
  for (int i = 0; i < kSuperBlock; ++i) {
    const int half = i / 128, quarter = (i % 128) / 32, l = i % 32;
    const uint8_t low = b.ql[64 * half + l + 32 * (quarter & 1)];
    const int lo = quarter < 2 ? low & 15 : low >> 4;
    const int hi = (b.qh[32 * half + l] >> (2 * quarter)) & 3;
    const int sc = b.scales[8 * half + l / 16 + 2 * quarter];
    out.s += static_cast<int64_t>(sc) * ((lo | hi << 4) - 32) * a.qs[i];
  }
  return out;
}

// Weight i = 128h + 32j + l of Q2_K/Q3_K: bits 2j of qs[32h + l] (and, Q3_K,
// bit 4h + j of hmask[l]); scale i / 16.
int Q23Low(const uint8_t* qs, int i) { return (qs[32 * (i / 128) + i % 32] >> (2 * ((i % 128) / 32))) & 3; }

KSums Q2Sums(const BlockQ2_K& b, const BlockQ8_K& a) {
  KSums out;
  out.dw = F32FromF16(b.d);
  out.dmin = F32FromF16(b.dmin);
  for (int i = 0; i < kSuperBlock; ++i) out.s += static_cast<int64_t>(b.scales[i / 16] & 15) * Q23Low(b.qs, i) * a.qs[i];
  for (int g = 0; g < 16; ++g) out.m += static_cast<int64_t>(b.scales[g] >> 4) * a.bsums[g];
  return out;
}

KSums Q3Sums(const BlockQ3_K& b, const BlockQ8_K& a) {
  KSums out;
  out.dw = F32FromF16(b.d);
  int8_t sc[16];  // stored + 32
  UnpackQ3KScales(b.scales, sc);
  for (int i = 0; i < kSuperBlock; ++i) {
    const int high = (b.hmask[i % 32] >> (4 * (i / 128) + (i % 128) / 32)) & 1;
    const int q = Q23Low(b.qs, i) - (high != 0 ? 0 : 4);
    out.s += static_cast<int64_t>(sc[i / 16] - 32) * q * a.qs[i];
  }
  return out;
}

KSums IQ4XSSums(const BlockIQ4_XS& b, const BlockQ8_K& a) {
  KSums out;
  out.dw = F32FromF16(b.d);
  for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4);
    for (int j = 0; j < 16; ++j) {
      const uint8_t q = b.qs[16 * ib + j];
      out.s += static_cast<int64_t>(ls - 32) * (kIq4nlValues[q & 15] * a.qs[32 * ib + j] +
                                                 kIq4nlValues[q >> 4] * a.qs[32 * ib + 16 + j]);
    }
  }
  return out;
}

}  // namespace

void MatVecRowsQ8K(const MatrixView& w, const float* x, float* y, size_t row_begin, size_t row_end) {
  const bool interleaved = w.layout == WeightLayout::kInterleaved16;
  if (GetWeightFormat(w.type).kernel != WeightKernel::kInt8K || (interleaved && !IsInterleavable(w.type))) {
    std::fprintf(stderr, "%s:%d: Q8_K reference needs a Q2_K … Q6_K or IQ4_XS matrix in rows (or interleaved)\n",
                 __FILE__, __LINE__);
    std::abort();
  }
  const size_t nsb = w.cols / kSuperBlock;
  std::vector<BlockQ8_K> a(nsb);
  QuantizeRowQ8_K(x, a.data(), w.cols);
  const size_t row_bytes = WeightRowBytes(w.type, w.cols);
  std::vector<uint8_t> read_back(interleaved ? row_bytes : 0);  // an interleaved row in GGUF bytes
  for (size_t r = row_begin; r < row_end; ++r) {
    const uint8_t* row = static_cast<const uint8_t*>(w.data) + r * row_bytes;
    if (interleaved) {
      const size_t block_bytes = GetWeightFormat(w.type).block_bytes;
      for (size_t s = 0; s < nsb; ++s) ReadInterleavedSuperBlock(w, r, s, read_back.data() + s * block_bytes);
      row = read_back.data();
    }
    float acc = 0.0f;
    for (size_t s = 0; s < nsb; ++s) {
      KSums k;
      switch (w.type) {
        case WeightType::kQ2_K: k = Q2Sums(reinterpret_cast<const BlockQ2_K*>(row)[s], a[s]); break;
        case WeightType::kQ3_K: k = Q3Sums(reinterpret_cast<const BlockQ3_K*>(row)[s], a[s]); break;
        case WeightType::kIQ4_XS: k = IQ4XSSums(reinterpret_cast<const BlockIQ4_XS*>(row)[s], a[s]); break;
        case WeightType::kQ4_K: k = Q45Sums(reinterpret_cast<const BlockQ4_K*>(row)[s], nullptr, a[s]); break;
        case WeightType::kQ5_K: {
          const auto& b = reinterpret_cast<const BlockQ5_K*>(row)[s];
          k = Q45Sums(b, b.qh, a[s]);
          break;
        }
        default: k = Q6Sums(reinterpret_cast<const BlockQ6_K*>(row)[s], a[s]); break;
      }
      acc = std::fma(k.dw * a[s].d, static_cast<float>(static_cast<int32_t>(k.s)), acc);
      const bool mins = w.type == WeightType::kQ2_K || w.type == WeightType::kQ4_K || w.type == WeightType::kQ5_K;
      if (mins) acc = std::fma(-(k.dmin * a[s].d), static_cast<float>(static_cast<int32_t>(k.m)), acc);
    }
    y[r] = acc;
  }
}

void RmsNorm(const float* x, const float* weight, size_t n, float eps, float* out) {
  double ss = 0.0;
  for (size_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const double scale = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * scale * weight[i]);
}

void SwiGlu(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void GeluTanhMul(const float* gate, const float* up, size_t n, float* out) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    const double t = std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g));
    out[i] = static_cast<float>(0.5 * g * (1.0 + t) * up[i]);
  }
}

void SoftCap(const float* x, size_t n, float cap, float* out) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(cap * std::tanh(static_cast<double>(x[i]) / cap));
}

void AddInPlace(float* acc, const float* x, size_t n) {
  for (size_t i = 0; i < n; ++i) acc[i] += x[i];
}

float DotF32(const float* a, const float* b, size_t n) {
  double sum = 0.0;
  for (size_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

}  // namespace ref
}  // namespace kvedge
