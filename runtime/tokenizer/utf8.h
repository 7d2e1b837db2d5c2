// UTF-8 for the tokenizers: platform/utf8.h and byte-token pieces.
#ifndef KVEDGE_RUNTIME_TOKENIZER_UTF8_H_
#define KVEDGE_RUNTIME_TOKENIZER_UTF8_H_

#include <string_view>

#include "platform/utf8.h"

namespace kvedge {

// A byte token's piece "<0xHH>" (upper or lower case hex) → HH; -1 otherwise.
int ParseBytePiece(std::string_view piece);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_UTF8_H_
