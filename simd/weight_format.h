// Weight formats: the one table of the tensor types kvedge reads (name, ggml
// type id, block size, bytes per block, scalar dequantization), as
// kv_format.h is for KV blocks. SIMD-free. The GGUF reader and writer, the
// model loader, `kvedge info`, the quantizers and the kernels all read it.
//
// Every block struct is byte-identical to ggml's (ggml-common.h); f16 fields
// are IEEE half bits. Dequantization (DequantizeRow) is bit-exact to ggml's
// to_float: plain f32 expressions in ggml's order, compiled without FMA
// contraction (weight_dequant.cc).
#ifndef KVEDGE_SIMD_WEIGHT_FORMAT_H_
#define KVEDGE_SIMD_WEIGHT_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace kvedge {

// The types kvedge reads. Values are kvedge's own (not ggml ids).
enum class WeightType : uint8_t {
  kF32 = 0, kF16 = 1, kBF16 = 2, kQ8_0 = 3, kQ4_0 = 4,
  kQ4_1 = 5, kQ5_0 = 6, kQ5_1 = 7,
  kQ2_K = 8, kQ3_K = 9, kQ4_K = 10, kQ5_K = 11, kQ6_K = 12,
  kIQ4_NL = 13, kIQ4_XS = 14,
};
inline constexpr int kNumWeightTypes = 15;

// ggml type ids (ggml.h enum ggml_type) kvedge refers to by name.
inline constexpr uint32_t kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6,
                          kGgmlQ5_1 = 7, kGgmlQ8_0 = 8, kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12,
                          kGgmlQ5_K = 13, kGgmlQ6_K = 14, kGgmlIQ4_NL = 20, kGgmlIQ4_XS = 23, kGgmlBF16 = 30;

// ------------------------------ block structs (ggml-common.h)
inline constexpr int kQuantBlock = 32;  // weights per legacy block (Q4_0 … Q8_0, IQ4_NL)
inline constexpr int kSuperBlock = 256;  // weights per K-quant / IQ4_XS super-block (QK_K)

// w[j] = d·qs[j]
struct BlockQ8_0 { uint16_t d; int8_t qs[kQuantBlock]; };
// w[j] = d·((qs[j] & 15) − 8), w[j+16] = d·((qs[j] >> 4) − 8), j < 16
struct BlockQ4_0 { uint16_t d; uint8_t qs[kQuantBlock / 2]; };
// as Q4_0 without the −8, plus m: w = q·d + m
struct BlockQ4_1 { uint16_t d; uint16_t m; uint8_t qs[kQuantBlock / 2]; };
// 5-bit codes: low 4 bits as Q4_0, bit 4 of weight j in bit j of qh; w = d·(q − 16)
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQuantBlock / 2]; };
// as Q5_0 without the −16, plus m: w = q·d + m
struct BlockQ5_1 { uint16_t d; uint16_t m; uint8_t qh[4]; uint8_t qs[kQuantBlock / 2]; };
// 16 sub-blocks of 16: 4-bit scale (low) and min (high) per sub-block, 2-bit codes
struct BlockQ2_K { uint8_t scales[16]; uint8_t qs[64]; uint16_t d; uint16_t dmin; };
// 16 sub-blocks of 16: 6-bit signed scales packed in 12 bytes, 2 low bits + 1 high bit
struct BlockQ3_K { uint8_t hmask[32]; uint8_t qs[64]; uint8_t scales[12]; uint16_t d; };
// 8 sub-blocks of 32: 6-bit scale and min packed in 12 bytes, 4-bit codes
struct BlockQ4_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qs[128]; };
// as Q4_K plus a fifth bit per weight in qh
struct BlockQ5_K { uint16_t d; uint16_t dmin; uint8_t scales[12]; uint8_t qh[32]; uint8_t qs[128]; };
// 16 sub-blocks of 16: int8 scales, 6-bit codes (4 low in ql, 2 high in qh), w = d·sc·(q − 32)
struct BlockQ6_K { uint8_t ql[128]; uint8_t qh[64]; int8_t scales[16]; uint16_t d; };
// 4-bit indices into the non-linear table kIq4nlValues; w = d·value
struct BlockIQ4_NL { uint16_t d; uint8_t qs[kQuantBlock / 2]; };
// 8 sub-blocks of 32 with 6-bit scales (4 low bits in scales_l, 2 high in scales_h), IQ4_NL codes
struct BlockIQ4_XS { uint16_t d; uint16_t scales_h; uint8_t scales_l[4]; uint8_t qs[128]; };

static_assert(sizeof(BlockQ8_0) == 34, "ggml block_q8_0");
static_assert(sizeof(BlockQ4_0) == 18, "ggml block_q4_0");
static_assert(sizeof(BlockQ4_1) == 20, "ggml block_q4_1");
static_assert(sizeof(BlockQ5_0) == 22, "ggml block_q5_0");
static_assert(sizeof(BlockQ5_1) == 24, "ggml block_q5_1");
static_assert(sizeof(BlockQ2_K) == 84, "ggml block_q2_K");
static_assert(sizeof(BlockQ3_K) == 110, "ggml block_q3_K");
// The Q3_K kernels load the scales as 16 bytes from qs + 62 (codes' last two
// bytes, the 12 scale bytes, d): that needs this field order.
static_assert(offsetof(BlockQ3_K, scales) == offsetof(BlockQ3_K, qs) + 64 &&
                  offsetof(BlockQ3_K, d) == offsetof(BlockQ3_K, scales) + 12,
              "BlockQ3_K: scales follow qs, d follows scales");
static_assert(sizeof(BlockQ4_K) == 144, "ggml block_q4_K");
static_assert(sizeof(BlockQ5_K) == 176, "ggml block_q5_K");
static_assert(sizeof(BlockQ6_K) == 210, "ggml block_q6_K");
static_assert(sizeof(BlockIQ4_NL) == 18, "ggml block_iq4_nl");
static_assert(sizeof(BlockIQ4_XS) == 136, "ggml block_iq4_xs");

// Scale and min of sub-block j (0..7) from a Q4_K/Q5_K super-block's 12
// packed scale bytes (ggml's get_scale_min_k4): 6 bits each.
inline void KScaleMin(int j, const uint8_t* scales, uint8_t* d, uint8_t* m) {
  if (j < 4) {
    *d = scales[j] & 63;
    *m = scales[j + 4] & 63;
  } else {
    *d = (scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4);
    *m = (scales[j + 4] >> 4) | ((scales[j - 0] >> 6) << 4);
  }
}

// The 16 6-bit scales (stored + 32) of a Q3_K super-block from its 12 packed
// bytes: low 4 bits in bytes 0..7, high 2 bits in bytes 8..11.
inline void UnpackQ3KScales(const uint8_t* packed, int8_t scales[16]) {
  constexpr uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f;
  uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(scales, aux, 16);
}

// ggml's kvalues_iq4nl: the 16 levels of IQ4_NL / IQ4_XS.
inline constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

// ------------------------------ the table
// Which kernel family computes products with a type (model_kernels.h):
//   kFloat: f32/f16/bf16 weights widened to f32;
//   kInt8: the legacy blocks of 32 (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL)
//     with int8 activations and exact integer block dots (matvec_legacy.cc);
//     all of them also interleave (IsInterleavable, model_kernels.h);
//   kInt8K: Q2_K … Q6_K and IQ4_XS with Q8_K int8 activations
//     (matvec_kquant.h);
enum class WeightKernel : uint8_t { kFloat, kInt8, kInt8K };

struct WeightFormat {
  WeightType type;
  const char* name;          // "q4_k": kvedge's spelling (CLI, logs)
  const char* ggml_name;     // "Q4_K": ggml's spelling (GGUF tools, errors)
  uint32_t ggml_type;        // ggml type id in GGUF tensor infos
  uint32_t block;            // weights per block (1 for float types)
  uint32_t block_bytes;      // bytes per block
  WeightKernel kernel;
  // out[0, n) = the n weights stored at src (n a multiple of block):
  // ggml's to_float, bit for bit.
  void (*dequantize)(const void* src, float* out, size_t n);
  // dst = x[0, n) quantized to this type (n a multiple of block), or nullptr
  // when kvedge has no quantizer for it. See weight_quant.h.
  void (*quantize)(const float* x, void* dst, size_t n);
};

// The entry of t (every WeightType has one).
const WeightFormat& GetWeightFormat(WeightType t);
// The entry with this ggml id, or nullptr when kvedge does not read it.
const WeightFormat* FindWeightFormatByGgml(uint32_t ggml_type);
// By name, either spelling, case-insensitive ("q4_k", "Q4_K"); nullptr if unknown.
const WeightFormat* FindWeightFormat(std::string_view name);
// "F32, F16, BF16, Q4_0, …, IQ4_XS": for error messages.
std::string ReadableWeightTypes();

inline const char* WeightTypeName(WeightType t) { return GetWeightFormat(t).name; }
inline uint32_t WeightBlockSize(WeightType t) { return GetWeightFormat(t).block; }
// Bytes of one row of `cols` weights (cols a multiple of the block size).
inline size_t WeightRowBytes(WeightType t, size_t cols) {
  const WeightFormat& f = GetWeightFormat(t);
  return cols / f.block * f.block_bytes;
}
// The legacy 32-blocks: the int8-activation kernels and the kInterleaved16 layout.
inline bool IsQuantizedWeight(WeightType t) { return GetWeightFormat(t).kernel == WeightKernel::kInt8; }
// out[0, n) = the first n weights of a row stored at src (n a multiple of the block size).
inline void DequantizeRow(WeightType t, const void* src, float* out, size_t n) {
  GetWeightFormat(t).dequantize(src, out, n);
}

// Every ggml type a GGUF file may carry, read or not: the reader sizes
// tensors from it. `format` is null for types kvedge does not read.
struct GgmlTypeInfo {
  const char* name;      // "Q4_K"
  uint32_t block;        // elements per block
  uint32_t block_bytes;  // bytes per block
  const WeightFormat* format;
};
// nullptr for ids ggml does not define.
const GgmlTypeInfo* FindGgmlType(uint32_t type_id);

}  // namespace kvedge

#endif  // KVEDGE_SIMD_WEIGHT_FORMAT_H_
