// Strict UTF-8 validation, decoding and encoding, shared by the GGUF reader
// (keys must be UTF-8), the tokenizers and the generation loop.
#ifndef KVEDGE_PLATFORM_UTF8_H_
#define KVEDGE_PLATFORM_UTF8_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvedge {

inline constexpr size_t kUtf8Valid = static_cast<size_t>(-1);

// Byte offset of the first invalid sequence (overlong forms, surrogates,
// code points past U+10FFFF and truncated sequences are invalid), or
// kUtf8Valid. O(n), no allocation.
size_t FindInvalidUtf8(std::string_view text);

// Length in bytes of the valid sequence starting at text[pos] (1..4), or 0 if
// it is invalid. *cp receives the code point. pos < text.size().
int DecodeUtf8(std::string_view text, size_t pos, uint32_t* cp);

// Appends the UTF-8 encoding of cp (≤ U+10FFFF, not a surrogate).
void AppendUtf8(uint32_t cp, std::string* out);

}  // namespace kvedge

#endif  // KVEDGE_PLATFORM_UTF8_H_
