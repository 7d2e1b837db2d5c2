// KV block format table: names, sizes, offsets.
#include "simd/kv_format.h"

#include "platform/enum_names.h"

namespace kvedge {

namespace {
constexpr EnumName<KvFormat> kKvFormatNames[] = {
    {KvFormat::kF32, "f32"}, {KvFormat::kF16, "f16"}, {KvFormat::kInt8, "int8"}, {KvFormat::kInt4, "int4"}};
}  // namespace

const char* KvFormatName(KvFormat f) { return NameOf(kKvFormatNames, f); }
bool ParseKvFormat(const std::string& name, KvFormat* out) { return ParseName(kKvFormatNames, name, out); }

bool IsQuantized(KvFormat f) { return f == KvFormat::kInt8 || f == KvFormat::kInt4; }

int KvCodeBits(KvFormat f) {
  switch (f) {
    case KvFormat::kF32: return 32;
    case KvFormat::kF16: return 16;
    case KvFormat::kInt8: return 8;
    case KvFormat::kInt4: return 4;
  }
  return 0;
}

bool IsSupportedHeadDim(int d) {
  return d > 0 && d <= kMaxHeadDim && d % 8 == 0;
}

namespace {
size_t CodeBytes(KvFormat f, int d) {
  return static_cast<size_t>(kKvBlockTokens) * static_cast<size_t>(d) * static_cast<size_t>(KvCodeBits(f)) / 8;
}
size_t ValueGroups(int d) { return static_cast<size_t>(kKvBlockTokens) * static_cast<size_t>(d) / kValueGroup; }
}  // namespace

size_t KeyBlockBytes(KvFormat f, int d) {
  return CodeBytes(f, d) + (IsQuantized(f) ? 2 * sizeof(uint16_t) * static_cast<size_t>(d) : 0);
}
size_t ValueBlockBytes(KvFormat f, int d) {
  return CodeBytes(f, d) + (IsQuantized(f) ? 2 * sizeof(uint16_t) * ValueGroups(d) : 0);
}
size_t KeyBlockScalesOffset(KvFormat f, int d) { return CodeBytes(f, d); }
size_t KeyBlockMinsOffset(KvFormat f, int d) { return CodeBytes(f, d) + sizeof(uint16_t) * static_cast<size_t>(d); }
size_t ValueBlockScalesOffset(KvFormat f, int d) { return CodeBytes(f, d); }
size_t ValueBlockMinsOffset(KvFormat f, int d) { return CodeBytes(f, d) + sizeof(uint16_t) * ValueGroups(d); }

}  // namespace kvedge
