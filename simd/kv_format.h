// KV block formats: the byte layout of one block of kKvBlockTokens token slots
// of one lane (layer × kv head), for keys and for values. SIMD-free; the
// kernels in kv_kernels.h read and write exactly these layouts.
//
// Keys are stored channel-major (quantized channel-wise, as KIVI/KVQuant):
//   f32   float    codes[D][G]
//   f16   float16  codes[D][G]
//   int8  uint8    codes[D][G]      then f16 scale[D], f16 min[D]
//   int4  uint8    codes[D][G/2]    then f16 scale[D], f16 min[D]
//         byte j of channel c: token j in the low nibble, token j+G/2 in the high
// Values are stored token-major (quantized token-wise in groups of 32 elements):
//   f32   float    codes[G][D]
//   f16   float16  codes[G][D]
//   int8  uint8    codes[G][D]      then f16 scale[G*D/32], f16 min[G*D/32]
//   int4  uint8    codes[G][D/2]    then f16 scale[G*D/32], f16 min[G*D/32]
//         byte j of token t: channel j in the low nibble, channel j+D/2 in the high
// A value group is 32 consecutive elements of the [G][D] element order: for
// D ≥ 32 that is 32 channels of one token; for D = 8 or 16 it spans 32/D tokens,
// which keeps scale bytes from eating the savings at tiny head sizes.
// Dequantization everywhere: x = scale * code + min  (code unsigned).
// For other D (24, 40, 48, 80, 112…) groups straddle token boundaries.
// Head dims: any multiple of 8 up to 256.
#ifndef KVEDGE_SIMD_KV_FORMAT_H_
#define KVEDGE_SIMD_KV_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "simd/float16.h"

namespace kvedge {

enum class KvFormat : uint8_t { kF32 = 0, kF16 = 1, kInt8 = 2, kInt4 = 3 };

inline constexpr int kKvBlockTokens = 32;  // G: token slots per block
inline constexpr int kValueGroup = 32;     // elements sharing a value scale/min
inline constexpr int kMaxHeadDim = 256;

// "f32", "f16", "int8", "int4".
const char* KvFormatName(KvFormat f);
// Parses the names above; false if unknown.
bool ParseKvFormat(const std::string& name, KvFormat* out);
bool IsQuantized(KvFormat f);
// Bits per stored code (32, 16, 8, 4).
int KvCodeBits(KvFormat f);
// True if kvedge's blocks support this head dimension (see above).
bool IsSupportedHeadDim(int head_dim);

// Bytes of one key / value block for head dimension D (codes + scales + mins).
size_t KeyBlockBytes(KvFormat f, int head_dim);
size_t ValueBlockBytes(KvFormat f, int head_dim);

// Offsets of the f16 scale and min arrays inside a quantized block.
size_t KeyBlockScalesOffset(KvFormat f, int head_dim);
size_t KeyBlockMinsOffset(KvFormat f, int head_dim);
size_t ValueBlockScalesOffset(KvFormat f, int head_dim);
size_t ValueBlockMinsOffset(KvFormat f, int head_dim);

// One channel's codes in a key block, and one token's codes in a value
// block, as plain structs: the sizes the layout above implies.
struct Int4KeyChannel { uint8_t codes[kKvBlockTokens / 2]; };
struct Int8KeyChannel { uint8_t codes[kKvBlockTokens]; };
static_assert(sizeof(Int4KeyChannel) == 16, "int4 key channel: 32 tokens, two a byte");
static_assert(sizeof(Int8KeyChannel) == 32, "int8 key channel: 32 tokens");

}  // namespace kvedge

#endif  // KVEDGE_SIMD_KV_FORMAT_H_
