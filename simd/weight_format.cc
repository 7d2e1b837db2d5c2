// The weight format table and its scalar dequantizers: ggml's to_float
// (ggml-quants.c, dequantize_row_*), the same f32 expressions in the same
// order. This file is compiled with -ffp-contract=off (simd/CMakeLists.txt)
// so `a*b - c` stays two roundings, as in ggml's reference build: the results
// are bit-identical to ggml's, which tests/simd/weight_format_test.cc checks
// against the reference kit.
#include "simd/weight_format.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "simd/float16.h"
#include "simd/weight_quant.h"

namespace kvedge {
namespace {

inline float H(uint16_t h) { return F32FromF16(h); }

void DequantF32(const void* src, float* out, size_t n) { std::memcpy(out, src, n * sizeof(float)); }

void DequantF16(const void* src, float* out, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) out[i] = F32FromF16(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
}

void DequantBF16(const void* src, float* out, size_t n) {
  const auto* p = static_cast<const uint8_t*>(src);
  for (size_t i = 0; i < n; ++i) out[i] = F32FromBF16(static_cast<uint16_t>(p[2 * i] | p[2 * i + 1] << 8));
}

void DequantQ8_0(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ8_0*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    for (int j = 0; j < kQuantBlock; ++j) y[j] = x[i].qs[j] * d;
  }
}

void DequantQ4_0(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ4_0*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int x0 = (x[i].qs[j] & 0x0F) - 8;
      const int x1 = (x[i].qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + kQuantBlock / 2] = x1 * d;
    }
  }
}

void DequantQ4_1(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ4_1*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    const float m = H(x[i].m);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const int x0 = x[i].qs[j] & 0x0F;
      const int x1 = x[i].qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + kQuantBlock / 2] = x1 * d + m;
    }
  }
}

void DequantQ5_0(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ5_0*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int32_t x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
      const int32_t x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
      y[j] = x0 * d;
      y[j + kQuantBlock / 2] = x1 * d;
    }
  }
}

void DequantQ5_1(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ5_1*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    const float m = H(x[i].m);
    uint32_t qh;
    std::memcpy(&qh, x[i].qh, sizeof(qh));
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
      const uint8_t xh_1 = ((qh >> (j + 12))) & 0x10;
      const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
      const int x1 = (x[i].qs[j] >> 4) | xh_1;
      y[j] = x0 * d + m;
      y[j + kQuantBlock / 2] = x1 * d + m;
    }
  }
}

void DequantQ2_K(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ2_K*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const float d = H(x[i].d);
    const float min = H(x[i].dmin);
    const uint8_t* q = x[i].qs;
    int is = 0;
    for (int n128 = 0; n128 < kSuperBlock; n128 += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        uint8_t sc = x[i].scales[is++];
        float dl = d * (sc & 0xF), ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l] >> shift) & 3) - ml;
        sc = x[i].scales[is++];
        dl = d * (sc & 0xF), ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<int8_t>((q[l + 16] >> shift) & 3) - ml;
        shift += 2;
      }
      q += 32;
    }
  }
}

void DequantQ3_K(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ3_K*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const float d_all = H(x[i].d);
    const uint8_t* q = x[i].qs;
    const uint8_t* hm = x[i].hmask;
    uint8_t m = 1;
    int8_t scales[16];
    UnpackQ3KScales(x[i].scales, scales);
    int is = 0;
    for (int n128 = 0; n128 < kSuperBlock; n128 += 128) {
      int shift = 0;
      for (int j = 0; j < 4; ++j) {
        float dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l + 0] >> shift) & 3) - ((hm[l + 0] & m) ? 0 : 4));
        }
        dl = d_all * (scales[is++] - 32);
        for (int l = 0; l < 16; ++l) {
          *y++ = dl * (static_cast<int8_t>((q[l + 16] >> shift) & 3) - ((hm[l + 16] & m) ? 0 : 4));
        }
        shift += 2;
        m <<= 1;
      }
      q += 32;
    }
  }
}

void DequantQ4_K(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ4_K*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const uint8_t* q = x[i].qs;
    const float d = H(x[i].d);
    const float min = H(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    for (int j = 0; j < kSuperBlock; j += 64) {
      KScaleMin(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      KScaleMin(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
      q += 32;
      is += 2;
    }
  }
}

void DequantQ5_K(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ5_K*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const uint8_t* ql = x[i].qs;
    const uint8_t* qh = x[i].qh;
    const float d = H(x[i].d);
    const float min = H(x[i].dmin);
    int is = 0;
    uint8_t sc, m;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < kSuperBlock; j += 64) {
      KScaleMin(is + 0, x[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = min * m;
      KScaleMin(is + 1, x[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = min * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
      ql += 32;
      is += 2;
      u1 <<= 2;
      u2 <<= 2;
    }
  }
}

void DequantQ6_K(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockQ6_K*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const float d = H(x[i].d);
    const uint8_t* ql = x[i].ql;
    const uint8_t* qh = x[i].qh;
    const int8_t* sc = x[i].scales;
    for (int n128 = 0; n128 < kSuperBlock; n128 += 128) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = static_cast<int8_t>((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

void DequantIQ4_NL(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockIQ4_NL*>(src);
  for (size_t i = 0; i < n / kQuantBlock; ++i, y += kQuantBlock) {
    const float d = H(x[i].d);
    for (int j = 0; j < kQuantBlock / 2; ++j) {
      y[j] = d * kIq4nlValues[x[i].qs[j] & 0xf];
      y[j + kQuantBlock / 2] = d * kIq4nlValues[x[i].qs[j] >> 4];
    }
  }
}

void DequantIQ4_XS(const void* src, float* y, size_t n) {
  const auto* x = static_cast<const BlockIQ4_XS*>(src);
  for (size_t i = 0; i < n / kSuperBlock; ++i) {
    const uint8_t* qs = x[i].qs;
    const float d = H(x[i].d);
    for (int ib = 0; ib < kSuperBlock / 32; ++ib) {
      const int ls = ((x[i].scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((x[i].scales_h >> 2 * ib) & 3) << 4);
      const float dl = d * (ls - 32);
      for (int j = 0; j < 16; ++j) {
        y[j + 0] = dl * kIq4nlValues[qs[j] & 0xf];
        y[j + 16] = dl * kIq4nlValues[qs[j] >> 4];
      }
      y += 32;
      qs += 16;
    }
  }
}

void QuantF32(const float* x, void* dst, size_t n) { std::memcpy(dst, x, n * sizeof(float)); }
void QuantF16(const float* x, void* dst, size_t n) { QuantizeRowF16(x, n, static_cast<uint16_t*>(dst)); }
void QuantBF16(const float* x, void* dst, size_t n) { QuantizeRowBF16(x, n, static_cast<uint16_t*>(dst)); }
void QuantQ8_0(const float* x, void* dst, size_t n) { QuantizeRowQ8_0(x, n, static_cast<BlockQ8_0*>(dst)); }
void QuantQ4_0(const float* x, void* dst, size_t n) { QuantizeRowQ4_0(x, n, static_cast<BlockQ4_0*>(dst)); }
template <class Block, void (*F)(const float*, size_t, Block*)>
void Quant(const float* x, void* dst, size_t n) { F(x, n, static_cast<Block*>(dst)); }

using K = WeightKernel;
constexpr WeightFormat kFormats[kNumWeightTypes] = {
    {WeightType::kF32, "f32", "F32", kGgmlF32, 1, 4, K::kFloat, DequantF32, QuantF32},
    {WeightType::kF16, "f16", "F16", kGgmlF16, 1, 2, K::kFloat, DequantF16, QuantF16},
    {WeightType::kBF16, "bf16", "BF16", kGgmlBF16, 1, 2, K::kFloat, DequantBF16, QuantBF16},
    {WeightType::kQ8_0, "q8_0", "Q8_0", kGgmlQ8_0, 32, sizeof(BlockQ8_0), K::kInt8, DequantQ8_0, QuantQ8_0},
    {WeightType::kQ4_0, "q4_0", "Q4_0", kGgmlQ4_0, 32, sizeof(BlockQ4_0), K::kInt8, DequantQ4_0, QuantQ4_0},
    {WeightType::kQ4_1, "q4_1", "Q4_1", kGgmlQ4_1, 32, sizeof(BlockQ4_1), K::kInt8, DequantQ4_1, Quant<BlockQ4_1, QuantizeRowQ4_1>},
    {WeightType::kQ5_0, "q5_0", "Q5_0", kGgmlQ5_0, 32, sizeof(BlockQ5_0), K::kInt8, DequantQ5_0, Quant<BlockQ5_0, QuantizeRowQ5_0>},
    {WeightType::kQ5_1, "q5_1", "Q5_1", kGgmlQ5_1, 32, sizeof(BlockQ5_1), K::kInt8, DequantQ5_1, Quant<BlockQ5_1, QuantizeRowQ5_1>},
    {WeightType::kQ2_K, "q2_k", "Q2_K", kGgmlQ2_K, 256, sizeof(BlockQ2_K), K::kInt8K, DequantQ2_K, Quant<BlockQ2_K, QuantizeRowQ2_K>},
    {WeightType::kQ3_K, "q3_k", "Q3_K", kGgmlQ3_K, 256, sizeof(BlockQ3_K), K::kInt8K, DequantQ3_K, Quant<BlockQ3_K, QuantizeRowQ3_K>},
    {WeightType::kQ4_K, "q4_k", "Q4_K", kGgmlQ4_K, 256, sizeof(BlockQ4_K), K::kInt8K, DequantQ4_K, Quant<BlockQ4_K, QuantizeRowQ4_K>},
    {WeightType::kQ5_K, "q5_k", "Q5_K", kGgmlQ5_K, 256, sizeof(BlockQ5_K), K::kInt8K, DequantQ5_K, Quant<BlockQ5_K, QuantizeRowQ5_K>},
    {WeightType::kQ6_K, "q6_k", "Q6_K", kGgmlQ6_K, 256, sizeof(BlockQ6_K), K::kInt8K, DequantQ6_K, Quant<BlockQ6_K, QuantizeRowQ6_K>},
    {WeightType::kIQ4_NL, "iq4_nl", "IQ4_NL", kGgmlIQ4_NL, 32, sizeof(BlockIQ4_NL), K::kInt8, DequantIQ4_NL, Quant<BlockIQ4_NL, QuantizeRowIQ4_NL>},
    {WeightType::kIQ4_XS, "iq4_xs", "IQ4_XS", kGgmlIQ4_XS, 256, sizeof(BlockIQ4_XS), K::kInt8K, DequantIQ4_XS, Quant<BlockIQ4_XS, QuantizeRowIQ4_XS>},
};

constexpr bool TableInEnumOrder() {
  for (int i = 0; i < kNumWeightTypes; ++i) {
    if (static_cast<int>(kFormats[i].type) != i) return false;
  }
  return true;
}
static_assert(TableInEnumOrder(), "kFormats[i].type == i");

bool EqualsIgnoreCase(std::string_view a, const char* b) {
  const size_t n = std::strlen(b);
  if (a.size() != n) return false;
  for (size_t i = 0; i < n; ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

}  // namespace

const WeightFormat& GetWeightFormat(WeightType t) {
  const auto i = static_cast<size_t>(t);
  if (i >= kNumWeightTypes) {
    std::fprintf(stderr, "%s:%d: invalid WeightType %zu\n", __FILE__, __LINE__, i);
    std::abort();
  }
  return kFormats[i];
}

const WeightFormat* FindWeightFormatByGgml(uint32_t ggml_type) {
  for (const WeightFormat& f : kFormats) {
    if (f.ggml_type == ggml_type) return &f;
  }
  return nullptr;
}

const WeightFormat* FindWeightFormat(std::string_view name) {
  for (const WeightFormat& f : kFormats) {
    if (EqualsIgnoreCase(name, f.name)) return &f;
  }
  return nullptr;
}

std::string ReadableWeightTypes() {
  std::string s;
  for (const WeightFormat& f : kFormats) {
    if (!s.empty()) s += ", ";
    s += f.ggml_name;
  }
  return s;
}

const GgmlTypeInfo* FindGgmlType(uint32_t id) {
  // ggml's type_traits (ggml.c): block sizes of every type a GGUF may carry;
  // the readable ones point at their kFormats entry.
  static const GgmlTypeInfo kTypes[] = {
      {"F32", 1, 4, nullptr},        {"F16", 1, 2, nullptr},         {"Q4_0", 32, 18, nullptr},
      {"Q4_1", 32, 20, nullptr},     {nullptr, 0, 0, nullptr},       {nullptr, 0, 0, nullptr},
      {"Q5_0", 32, 22, nullptr},     {"Q5_1", 32, 24, nullptr},      {"Q8_0", 32, 34, nullptr},
      {"Q8_1", 32, 36, nullptr},     {"Q2_K", 256, 84, nullptr},     {"Q3_K", 256, 110, nullptr},
      {"Q4_K", 256, 144, nullptr},   {"Q5_K", 256, 176, nullptr},    {"Q6_K", 256, 210, nullptr},
      {"Q8_K", 256, 292, nullptr},   {"IQ2_XXS", 256, 66, nullptr},  {"IQ2_XS", 256, 74, nullptr},
      {"IQ3_XXS", 256, 98, nullptr}, {"IQ1_S", 256, 50, nullptr},    {"IQ4_NL", 32, 18, nullptr},
      {"IQ3_S", 256, 110, nullptr},  {"IQ2_S", 256, 82, nullptr},    {"IQ4_XS", 256, 136, nullptr},
      {"I8", 1, 1, nullptr},         {"I16", 1, 2, nullptr},         {"I32", 1, 4, nullptr},
      {"I64", 1, 8, nullptr},        {"F64", 1, 8, nullptr},         {"IQ1_M", 256, 56, nullptr},
      {"BF16", 1, 2, nullptr},       {nullptr, 0, 0, nullptr},       {nullptr, 0, 0, nullptr},
      {nullptr, 0, 0, nullptr},      {"TQ1_0", 256, 54, nullptr},    {"TQ2_0", 256, 66, nullptr},
  };
  constexpr uint32_t kCount = sizeof(kTypes) / sizeof(kTypes[0]);
  // Link each readable type once; the sizes must agree with kFormats.
  static const GgmlTypeInfo* const linked = [] {
    static GgmlTypeInfo table[kCount];
    for (uint32_t i = 0; i < kCount; ++i) {
      table[i] = kTypes[i];
      if (const WeightFormat* f = FindWeightFormatByGgml(i)) {
        if (f->block != table[i].block || f->block_bytes != table[i].block_bytes) {
          std::fprintf(stderr, "%s:%d: %s: format table and ggml sizes disagree\n", __FILE__, __LINE__, f->name);
          std::abort();
        }
        table[i].format = f;
      }
    }
    return table;
  }();
  if (id >= kCount || linked[id].name == nullptr) return nullptr;
  return &linked[id];
}

}  // namespace kvedge
