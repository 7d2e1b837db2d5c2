// GPT-2 byte-level BPE (a GGUF vocabulary of model "gpt2"): bytes mapped to
// printable code points, a regex-like pre-split, then merges by rank.
#ifndef KVEDGE_RUNTIME_TOKENIZER_GPT2_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_GPT2_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/tokenizer.h"

namespace kvedge {

// GPT-2's byte → code point map (printable bytes map to themselves, the rest
// to U+0100 onwards), as UTF-8 strings.
const std::string& Gpt2ByteToUnicode(uint8_t byte);

class Gpt2Tokenizer final : public Tokenizer {
 public:
  // `tokens` in byte-level form; `merges` are "left right" lines in rank
  // order (rank = index). The vocabulary must hold all 256 byte symbols so
  // every input encodes. bos/eos may be -1.
  static StatusOr<std::unique_ptr<Gpt2Tokenizer>> Create(std::vector<std::string> tokens,
                                                         const std::vector<std::string_view>& merges, int bos,
                                                         int eos);

  // Pre-tokenization approximates GPT-2's regex
  //   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  // with \p{N} = ASCII digits, \s = ASCII and Unicode spaces, and \p{L} = ASCII
  // letters plus every other non-ASCII code point except spaces and the
  // common punctuation blocks (Latin-1 symbols, U+2000–U+206F, U+3000–U+303F).
  StatusOr<std::vector<int>> Encode(std::string_view text, bool add_bos) const override;

 private:
  Gpt2Tokenizer() = default;
  void EncodeWord(std::string_view word, std::vector<int>* out) const;

  std::vector<std::string> merges_;                   // [rank] "left right"
  std::unordered_map<std::string_view, int> ranks_;   // views into merges_
  std::unordered_map<std::string_view, int> ids_;     // views into pieces_
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_GPT2_TOKENIZER_H_
