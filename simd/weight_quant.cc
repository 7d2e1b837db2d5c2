// Reference weight quantizers, transcribed from ggml's scalar reference
// algorithms so files kvedge writes load identically in llama.cpp.
#include "simd/weight_quant.h"

#include <algorithm>
#include <cstddef>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

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

// Where the bytes of a Q4_K / Q5_K super-block go in its 16-row group's
// super-block (layout: model_kernels.h), row i: copy(group_offset,
// block_offset, bytes) per run.
template <class Block, class F>
void ForQ45KRuns(size_t i, const F& copy) {
  copy(kILKDOffset + 2 * i, offsetof(Block, d), 2);
  copy(kILKDminOffset + 2 * i, offsetof(Block, dmin), 2);
  for (size_t k = 0; k < 3; ++k) copy(kILKScalesOffset + 64 * k + 4 * i, offsetof(Block, scales) + 4 * k, 4);
  for (size_t v = 0; v < 32; ++v) copy(kILKCodesOffset + 64 * v + 4 * i, offsetof(Block, qs) + 4 * v, 4);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    for (size_t u = 0; u < 8; ++u) copy(kILQ5BOffset + 64 * u + 4 * i, offsetof(Block, qh) + 4 * u, 4);
  }
}

// InterleaveGroups for Q4_K and Q5_K: each row's super-block spread over its
// group's super-block, byte for byte (Q5_K's codes re-coded first,
// EncodeQ5KCodes).
template <class Block>
void InterleaveGroupsQ45K(const MatrixView& src, size_t group_begin, size_t group_end, uint8_t* dst) {
  const size_t nsb = src.cols / kSuperBlock;
  const size_t row_bytes = WeightRowBytes(src.type, src.cols);
  const size_t group_bytes = InterleavedGroupBytes(src.type, src.cols);
  const uint8_t* rows = static_cast<const uint8_t*>(src.data);
  for (size_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + g * group_bytes;
    // Every byte of a full group is written below: only a short last group
    // is zeroed first (missing rows: d = dmin = 0, zero weights), so the
    // loader's fresh pages are written once.
    if ((g + 1) * kInterleaveRows > src.rows) std::fill(group, group + group_bytes, uint8_t{0});
    for (size_t i = 0; i < kInterleaveRows && g * kInterleaveRows + i < src.rows; ++i) {
      const uint8_t* row = rows + (g * kInterleaveRows + i) * row_bytes;
      for (size_t s = 0; s < nsb; ++s) {
        uint8_t* sb = group + s * sizeof(Block) * kInterleaveRows;
        const uint8_t* bytes = row + s * sizeof(Block);
        Block recoded;
        if constexpr (std::is_same_v<Block, BlockQ5_K>) {
          std::memcpy(&recoded, bytes, sizeof(Block));
          EncodeQ5KCodes(bytes + offsetof(Block, qs), bytes + offsetof(Block, qh), recoded.qs, recoded.qh);
          bytes = reinterpret_cast<const uint8_t*>(&recoded);
        }
        ForQ45KRuns<Block>(i, [&](size_t to, size_t from, size_t n) { std::memcpy(sb + to, bytes + from, n); });
      }
    }
  }
}

// InterleaveGroups for Q6_K (layout: model_kernels.h): byte for byte, its
// codes re-coded (EncodeQ6KCodes).
void InterleaveGroupsQ6K(const MatrixView& src, size_t group_begin, size_t group_end, uint8_t* dst) {
  const size_t nsb = src.cols / kSuperBlock;
  const size_t row_bytes = WeightRowBytes(src.type, src.cols);
  const size_t group_bytes = InterleavedGroupBytes(src.type, src.cols);
  const uint8_t* rows = static_cast<const uint8_t*>(src.data);
  for (size_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + g * group_bytes;
    // As Q4_K: a full group's bytes are all written but the padding after
    // the d array (odd nsb), zeroed here (missing rows: d = 0).
    if ((g + 1) * kInterleaveRows > src.rows) {
      std::fill(group, group + group_bytes, uint8_t{0});
    } else {
      std::fill(group + InterleavedQ6DOffset(nsb) + 32 * nsb, group + group_bytes, uint8_t{0});
    }
    for (size_t i = 0; i < kInterleaveRows && g * kInterleaveRows + i < src.rows; ++i) {
      const auto* blocks = reinterpret_cast<const BlockQ6_K*>(rows + (g * kInterleaveRows + i) * row_bytes);
      for (size_t s = 0; s < nsb; ++s) {
        const BlockQ6_K& b = blocks[s];
        uint8_t* sb = group + s * kILQ6SuperBytes;
        std::memcpy(group + InterleavedQ6DOffset(nsb) + 32 * s + 2 * i, &b.d, 2);
        for (size_t k = 0; k < 4; ++k) std::memcpy(sb + kILQ6ScalesOffset + 64 * k + 4 * i, b.scales + 4 * k, 4);
        uint8_t a[sizeof(b.ql)], bits[sizeof(b.qh)];
        EncodeQ6KCodes(b.ql, b.qh, a, bits);
        for (size_t v = 0; v < 32; ++v) std::memcpy(sb + kILQ6AOffset + 64 * v + 4 * i, a + 4 * v, 4);
        for (size_t u = 0; u < 16; ++u) std::memcpy(sb + kILQ6BOffset + 64 * u + 4 * i, bits + 4 * u, 4);
      }
    }
  }
}

// Where the GGUF bytes of a Q3_K / Q2_K / IQ4_XS row's super-block s live
// inside its 16-row group (layout: model_kernels.h), row i of the group:
// calls copy(group_offset, block_offset, bytes) per run.
template <class F>
void ForQ23KRuns(WeightType t, size_t s, size_t i, const F& copy) {
  if (t == WeightType::kIQ4_XS) {
    const size_t sb = s * kILXSuperBytes;
    copy(sb + kILXDOffset + 2 * i, offsetof(BlockIQ4_XS, d), 2);
    copy(sb + kILXScalesHOffset + 2 * i, offsetof(BlockIQ4_XS, scales_h), 2);
    copy(sb + kILXScalesLOffset + 4 * i, offsetof(BlockIQ4_XS, scales_l), 4);
    for (size_t v = 0; v < 32; ++v) copy(sb + kILXQsOffset + 64 * v + 4 * i, offsetof(BlockIQ4_XS, qs) + 4 * v, 4);
    return;
  }
  if (t == WeightType::kQ3_K) {
    // The block's hmask and qs (96 bytes from hmask on) hold its re-coded
    // codes x (EncodeQ3KCodes) on both sides of the copy.
    static_assert(offsetof(BlockQ3_K, qs) == offsetof(BlockQ3_K, hmask) + 32, "x spans hmask and qs");
    const size_t body = InterleavedQ3KBodyOffset(s);
    copy(InterleavedQ3KDOffset(s) + 2 * i, offsetof(BlockQ3_K, d), 2);
    for (size_t k = 0; k < 3; ++k) copy(body + kILQ3ScalesOffset + 64 * k + 4 * i, offsetof(BlockQ3_K, scales) + 4 * k, 4);
    for (size_t n = 0; n < 24; ++n) copy(body + kILQ3CodesOffset + 64 * n + 4 * i, offsetof(BlockQ3_K, hmask) + 4 * n, 4);
    return;
  }
  const size_t sb = s * kILQ2SuperBytes;
  copy(sb + kILQ2DOffset + 2 * i, offsetof(BlockQ2_K, d), 2);
  copy(sb + kILQ2DminOffset + 2 * i, offsetof(BlockQ2_K, dmin), 2);
  for (size_t k = 0; k < 4; ++k) copy(sb + kILQ2ScalesOffset + 64 * k + 4 * i, offsetof(BlockQ2_K, scales) + 4 * k, 4);
  for (size_t v = 0; v < 16; ++v) copy(sb + kILQ2QsOffset + 64 * v + 4 * i, offsetof(BlockQ2_K, qs) + 4 * v, 4);
}

// InterleaveGroups for Q3_K, Q2_K and IQ4_XS: each row's super-blocks spread
// over its group, byte for byte (Q3_K's codes re-coded first,
// EncodeQ3KCodes); missing rows and an odd pair's second d are zero.
void InterleaveGroupsQ23K(const MatrixView& src, size_t group_begin, size_t group_end, uint8_t* dst) {
  const size_t nsb = src.cols / kSuperBlock, block_bytes = GetWeightFormat(src.type).block_bytes;
  const size_t row_bytes = WeightRowBytes(src.type, src.cols);
  const size_t group_bytes = InterleavedGroupBytes(src.type, src.cols);
  const uint8_t* rows = static_cast<const uint8_t*>(src.data);
  for (size_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + g * group_bytes;
    std::fill(group, group + group_bytes, uint8_t{0});
    for (size_t i = 0; i < kInterleaveRows && g * kInterleaveRows + i < src.rows; ++i) {
      const uint8_t* row = rows + (g * kInterleaveRows + i) * row_bytes;
      for (size_t s = 0; s < nsb; ++s) {
        const uint8_t* bytes = row + s * block_bytes;
        BlockQ3_K recoded;
        if (src.type == WeightType::kQ3_K) {
          std::memcpy(&recoded, bytes, sizeof(recoded));
          EncodeQ3KCodes(bytes + offsetof(BlockQ3_K, qs), bytes + offsetof(BlockQ3_K, hmask), recoded.hmask);
          bytes = reinterpret_cast<const uint8_t*>(&recoded);
        }
        ForQ23KRuns(src.type, s, i, [&](size_t to, size_t from, size_t n) { std::memcpy(group + to, bytes + from, n); });
      }
    }
  }
}

void ReadInterleavedQ6K(const MatrixView& w, size_t r, size_t s, BlockQ6_K* out) {
  const size_t nsb = w.cols / kSuperBlock;
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + r / kInterleaveRows * InterleavedGroupBytes(w.type, w.cols);
  const uint8_t* sb = group + s * kILQ6SuperBytes;
  const size_t i = r % kInterleaveRows;
  std::memcpy(&out->d, group + InterleavedQ6DOffset(nsb) + 32 * s + 2 * i, 2);
  for (size_t k = 0; k < 4; ++k) std::memcpy(out->scales + 4 * k, sb + kILQ6ScalesOffset + 64 * k + 4 * i, 4);
  uint8_t a[sizeof(out->ql)], bits[sizeof(out->qh)];
  for (size_t v = 0; v < 32; ++v) std::memcpy(a + 4 * v, sb + kILQ6AOffset + 64 * v + 4 * i, 4);
  for (size_t u = 0; u < 16; ++u) std::memcpy(bits + 4 * u, sb + kILQ6BOffset + 64 * u + 4 * i, 4);
  DecodeQ6KCodes(a, bits, out->ql, out->qh);
}

void ReadInterleavedQ23K(const MatrixView& w, size_t r, size_t s, void* out) {
  const uint8_t* group = static_cast<const uint8_t*>(w.data) + r / kInterleaveRows * InterleavedGroupBytes(w.type, w.cols);
  auto* block = static_cast<uint8_t*>(out);
  ForQ23KRuns(w.type, s, r % kInterleaveRows, [&](size_t from, size_t to, size_t n) {
    std::memcpy(block + to, group + from, n);
  });
  if (w.type == WeightType::kQ3_K) {
    auto* b = static_cast<BlockQ3_K*>(out);
    uint8_t x[sizeof(b->hmask) + sizeof(b->qs)];
    std::memcpy(x, b->hmask, sizeof(x));
    DecodeQ3KCodes(x, b->qs, b->hmask);
  }
}

template <class Block>
void ReadInterleavedQ45K(const MatrixView& w, size_t r, size_t s, Block* out) {
  const uint8_t* sb = static_cast<const uint8_t*>(w.data) + r / kInterleaveRows * InterleavedGroupBytes(w.type, w.cols) +
                      s * sizeof(Block) * kInterleaveRows;
  auto* block = reinterpret_cast<uint8_t*>(out);
  ForQ45KRuns<Block>(r % kInterleaveRows,
                     [&](size_t from, size_t to, size_t n) { std::memcpy(block + to, sb + from, n); });
  if constexpr (std::is_same_v<Block, BlockQ5_K>) {
    uint8_t a[sizeof(out->qs)], b[sizeof(out->qh)];
    std::memcpy(a, out->qs, sizeof(a));
    std::memcpy(b, out->qh, sizeof(b));
    DecodeQ5KCodes(a, b, out->qs, out->qh);
  }
}

}  // namespace

void EncodeQ5KCodes(const uint8_t* qs, const uint8_t* qh, uint8_t* a, uint8_t* b) {
  // 8 weight positions t at a time, one per byte of a 64-bit word (every
  // shift is masked back inside its byte): the loader runs this over every
  // Q5_K super-block, and a byte loop took 6–13 % of a short Q5_K_M run.
  constexpr uint64_t k01 = 0x0101010101010101ull, k07 = 0x0707070707070707ull, k0f = 0x0F0F0F0F0F0F0F0Full;
  for (int w = 0; w < 4; ++w) {
    uint64_t h, bits = 0;
    std::memcpy(&h, qh + 8 * w, 8);
    for (int p = 0; p < 4; ++p) {
      uint64_t q;
      std::memcpy(&q, qs + 32 * p + 8 * w, 8);
      const uint64_t lo = (q & k0f) | (h >> (2 * p) & k01) << 4;       // the low nibble's code
      const uint64_t hi_low3 = q >> 4 & k07;                            // the high nibble's code & 7
      const uint64_t hi_top2 = (q >> 7 & k01) | (h >> (2 * p + 1) & k01) << 1;  // … >> 3
      const uint64_t code = lo | hi_low3 << 5;
      std::memcpy(a + 32 * p + 8 * w, &code, 8);
      bits |= hi_top2 << (2 * p);
    }
    std::memcpy(b + 8 * w, &bits, 8);
  }
}

void DecodeQ5KCodes(const uint8_t* a, const uint8_t* b, uint8_t* qs, uint8_t* qh) {
  std::fill(qh, qh + 32, uint8_t{0});
  for (int p = 0; p < 4; ++p) {
    for (int t = 0; t < 32; ++t) {
      const int lo = a[32 * p + t] & 31;
      const int hi = a[32 * p + t] >> 5 | (b[t] >> (2 * p) & 3) << 3;
      qs[32 * p + t] = static_cast<uint8_t>((lo & 15) | (hi & 15) << 4);
      qh[t] = static_cast<uint8_t>(qh[t] | (lo >> 4) << (2 * p) | (hi >> 4) << (2 * p + 1));
    }
  }
}

void EncodeQ6KCodes(const uint8_t* ql, const uint8_t* qh, uint8_t* a, uint8_t* b) {
  // 8 positions l at a time, as EncodeQ5KCodes.
  constexpr uint64_t k03 = 0x0303030303030303ull, k0f = 0x0F0F0F0F0F0F0F0Full, kf0 = ~k0f;
  for (int h = 0; h < 2; ++h) {
    for (int w = 0; w < 4; ++w) {
      uint64_t bits, q0, q1;
      std::memcpy(&bits, qh + 32 * h + 8 * w, 8);
      std::memcpy(&q0, ql + 64 * h + 8 * w, 8);       // c_0's and c_2's nibbles
      std::memcpy(&q1, ql + 64 * h + 32 + 8 * w, 8);  // c_1's and c_3's
      const uint64_t a0 = (q0 & k0f) | (bits & k03) << 4 | (bits >> 4 & k03) << 6;
      const uint64_t a1 = (q1 & k0f) | (bits >> 2 & k03) << 4 | (bits >> 6 & k03) << 6;
      const uint64_t b2 = (q0 >> 4 & k0f) | (q1 & kf0);
      std::memcpy(a + 64 * h + 8 * w, &a0, 8);
      std::memcpy(a + 64 * h + 32 + 8 * w, &a1, 8);
      std::memcpy(b + 32 * h + 8 * w, &b2, 8);
    }
  }
}

void DecodeQ6KCodes(const uint8_t* a, const uint8_t* b, uint8_t* ql, uint8_t* qh) {
  for (int h = 0; h < 2; ++h) {
    for (int l = 0; l < 32; ++l) {
      const int a0 = a[64 * h + l], a1 = a[64 * h + 32 + l], bits = b[32 * h + l];
      const int c0 = a0 & 63, c1 = a1 & 63, c2 = (bits & 15) | (a0 >> 6) << 4, c3 = bits >> 4 | (a1 >> 6) << 4;
      ql[64 * h + l] = static_cast<uint8_t>((c0 & 15) | (c2 & 15) << 4);
      ql[64 * h + 32 + l] = static_cast<uint8_t>((c1 & 15) | (c3 & 15) << 4);
      qh[32 * h + l] = static_cast<uint8_t>(c0 >> 4 | (c1 >> 4) << 2 | (c2 >> 4) << 4 | (c3 >> 4) << 6);
    }
  }
}

void EncodeQ3KCodes(const uint8_t* qs, const uint8_t* hmask, uint8_t* x) {
  // Triple T = 4h + j holds GGUF's bit pair j of qs[32h + col] and bit
  // 4h + j of hmask[col], col = 4m + t < 32: 8 columns at a time, one per
  // byte of a 64-bit word (every shift is masked back inside its byte).
  constexpr uint64_t k01 = 0x0101010101010101ull, k03 = 0x0303030303030303ull;
  constexpr uint32_t k01w = 0x01010101u, k03w = 0x03030303u;
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      uint32_t lo[4], hi[4];  // codes of columns 8w … 8w + 3 and 8w + 4 … 8w + 7
      for (int w = 0; w < 4; ++w) {
        uint64_t q, m;
        std::memcpy(&q, qs + 32 * h + 8 * w, 8);
        std::memcpy(&m, hmask + 8 * w, 8);
        const uint64_t c = (q >> (2 * j) & k03) | (m >> (4 * h + j) & k01) << 2;
        lo[w] = static_cast<uint32_t>(c);
        hi[w] = static_cast<uint32_t>(c >> 32);
      }
      // Slots m = 0 … 7 are columns 4m … 4m + 3: lo[w] is slot 2w, hi[w] slot 2w + 1.
      const uint32_t a = lo[0] | hi[0] << 3 | (lo[3] & k03w) << 6;
      const uint32_t b = lo[1] | hi[1] << 3 | (hi[3] & k03w) << 6;
      const uint32_t c = lo[2] | hi[2] << 3 | (lo[3] >> 2 & k01w) << 6 | (hi[3] >> 2 & k01w) << 7;
      uint8_t* out = x + 12 * (4 * h + j);
      std::memcpy(out, &a, 4);
      std::memcpy(out + 4, &b, 4);
      std::memcpy(out + 8, &c, 4);
    }
  }
}

void DecodeQ3KCodes(const uint8_t* x, uint8_t* qs, uint8_t* hmask) {
  std::memset(qs, 0, 64);
  std::memset(hmask, 0, 32);
  for (int tri = 0; tri < 8; ++tri) {
    const uint8_t* p = x + 12 * tri;
    const int h = tri / 4, j = tri % 4;
    for (int t = 0; t < 4; ++t) {
      const int a = p[t], b = p[4 + t], c = p[8 + t];
      const int code[8] = {a & 7, a >> 3 & 7, b & 7, b >> 3 & 7, c & 7, c >> 3 & 7,
                           (a >> 6) | (c >> 6 & 1) << 2, (b >> 6) | (c >> 7) << 2};
      for (int m = 0; m < 8; ++m) {
        const int col = 4 * m + t;
        qs[32 * h + col] = static_cast<uint8_t>(qs[32 * h + col] | (code[m] & 3) << (2 * j));
        hmask[col] = static_cast<uint8_t>(hmask[col] | (code[m] >> 2) << (4 * h + j));
      }
    }
  }
}

void ReadInterleavedSuperBlock(const MatrixView& w, size_t r, size_t s, void* out) {
  switch (w.type) {
    case WeightType::kQ4_K: return ReadInterleavedQ45K(w, r, s, static_cast<BlockQ4_K*>(out));
    case WeightType::kQ5_K: return ReadInterleavedQ45K(w, r, s, static_cast<BlockQ5_K*>(out));
    case WeightType::kQ6_K: return ReadInterleavedQ6K(w, r, s, static_cast<BlockQ6_K*>(out));
    case WeightType::kQ3_K:
    case WeightType::kQ2_K:
    case WeightType::kIQ4_XS: return ReadInterleavedQ23K(w, r, s, out);
    default:
      std::fprintf(stderr, "%s:%d: %s has no interleaved super-blocks\n", __FILE__, __LINE__, WeightTypeName(w.type));
      std::abort();
  }
}

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
    std::fprintf(stderr, "%s:%d: only row-major IsInterleavable matrices interleave (got %s)\n", __FILE__, __LINE__,
                 WeightTypeName(src.type));
    std::abort();
  }
  if (src.type == WeightType::kQ4_K) return InterleaveGroupsQ45K<BlockQ4_K>(src, group_begin, group_end, dst);
  if (src.type == WeightType::kQ5_K) return InterleaveGroupsQ45K<BlockQ5_K>(src, group_begin, group_end, dst);
  if (src.type == WeightType::kQ6_K) return InterleaveGroupsQ6K(src, group_begin, group_end, dst);
  if (src.type == WeightType::kQ3_K || src.type == WeightType::kQ2_K || src.type == WeightType::kIQ4_XS) {
    return InterleaveGroupsQ23K(src, group_begin, group_end, dst);
  }
  CheckBlockMultiple(src.cols, "InterleaveGroups");
  const WeightType t = src.type;
  const bool q8 = t == WeightType::kQ8_0;
  const bool has_min = InterleavedHasMin(t);
  const bool has_fifth = InterleavedHasFifthBits(t);
  const size_t qs_bytes = q8 ? 32 : 16;  // per block and row
  // GGUF block: f16 d, [f16 m], [4 bytes qh], qs (weight_format.h).
  const size_t qh_at = has_min ? 4 : 2;
  const size_t qs_at = qh_at + (has_fifth ? 4 : 0);
  const size_t block_bytes = GetWeightFormat(t).block_bytes;
  const size_t nb = src.cols / kQuantBlock;
  const size_t row_bytes = WeightRowBytes(t, src.cols);
  const size_t group_bytes = InterleavedGroupBytes(t, src.cols);
  const uint8_t* rows = static_cast<const uint8_t*>(src.data);
  for (size_t g = group_begin; g < group_end; ++g) {
    uint8_t* group = dst + g * group_bytes;
    std::fill(group, group + group_bytes, uint8_t{0});
    for (size_t i = 0; i < kInterleaveRows; ++i) {
      const size_t r = g * kInterleaveRows + i;
      for (size_t b = 0; b < nb; ++b) {
        uint8_t* codes = group + InterleavedCodeOffset(t, b) + 4 * i;  // qs byte j at 64·(j/4) + j%4
        if (r >= src.rows) {
          // A zero weight: scale (and min) 0; Q4_0 code 8 (both nibbles),
          // Q8_0 128, the other codes 0.
          const uint8_t zero = q8 ? 0x80 : t == WeightType::kQ4_0 ? 0x88 : 0;
          for (size_t j = 0; j < qs_bytes; ++j) codes[64 * (j / 4) + j % 4] = zero;
          continue;
        }
        const uint8_t* block = rows + r * row_bytes + b * block_bytes;
        std::memcpy(group + InterleavedScaleOffset(t, b) + i * sizeof(uint16_t), block, sizeof(uint16_t));
        if (has_min) std::memcpy(group + InterleavedMinOffset(t, b) + i * sizeof(uint16_t), block + 2, sizeof(uint16_t));
        const uint32_t bias = q8 ? 0x80808080u : 0u;  // Q8_0 codes + 128 (xor of each byte's sign bit)
        for (size_t j = 0; j < qs_bytes; j += 4) {
          uint32_t four;
          std::memcpy(&four, block + qs_at + j, sizeof(four));
          four ^= bias;
          std::memcpy(codes + 16 * j, &four, sizeof(four));  // 64·(j/4)
        }
        if (has_fifth) {
          uint32_t qh;
          std::memcpy(&qh, block + qh_at, sizeof(qh));
          uint8_t* fifth = group + InterleavedFifthBitsOffset(t, b) + 4 * i;
          for (size_t v = 0; v < 8; ++v) {  // code vector v: bit v of byte k
            for (size_t k = 0; k < 4; ++k) {
              fifth[k] |= static_cast<uint8_t>(((qh >> (InterleavedColumn(t, v) + k)) & 1) << v);
            }
          }
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
