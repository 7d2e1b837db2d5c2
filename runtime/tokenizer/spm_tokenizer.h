// SentencePiece-style BPE as llama2.c runs it (tokenizer.bin, or a GGUF
// vocabulary of model "llama"): dummy-prefix space, per-code-point lookup
// with <0xXX> byte fallback, then greedy highest-score merges.
#ifndef KVEDGE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/model/vocabulary.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge {

class SpmTokenizer final : public Tokenizer {
 public:
  // `pieces` use ' ' for spaces (GGUF's U+2581 already replaced); `scores`
  // rank merges (higher first). `mergeable[i]` says whether piece i may be
  // produced by lookup or merging (control tokens may not); empty = all.
  // Byte-fallback ids are found by their "<0xXX>" text. `unk` replaces bytes
  // without a fallback token.
  static StatusOr<std::unique_ptr<SpmTokenizer>> Create(std::vector<std::string> pieces, std::vector<float> scores,
                                                        const std::vector<bool>& mergeable, int bos, int eos,
                                                        int unk);

  // llama2.c's encode: BOS when options.add_special, a dummy-prefix space,
  // byte fallback for characters (and invalid UTF-8 bytes) not in the
  // vocabulary. parse_special has nothing to match: tokenizer.bin marks no
  // control tokens.
  using Tokenizer::Encode;
  StatusOr<std::vector<int>> Encode(std::string_view text, const EncodeOptions& options) const override;

  // Merge score of `id` (< vocab_size()); higher merges first.
  float score(int id) const { return scores_[id]; }
  int unk() const { return unk_; }
  // The vocabulary as a GGUF stores it (for ConvertToGguf).
  SpmVocabulary Vocabulary() const;

 private:
  SpmTokenizer() = default;
  int Lookup(std::string_view piece) const;

  std::vector<float> scores_;
  std::unordered_map<std::string_view, int> ids_;  // piece → first id; views into pieces_
  int byte_ids_[256];                              // "<0xXX>" ids, or unk
  int unk_ = 0;
};

// Parses llama2.c's tokenizer.bin: int32 max_token_length, then per token
// f32 score, int32 length, bytes. `vocab_size` records are read and must end
// exactly at the end of the data (0: read records until the end). Ids 0, 1, 2
// are unk, BOS, EOS. `name` labels errors.
StatusOr<std::unique_ptr<SpmTokenizer>> ParseLlama2cTokenizer(const uint8_t* data, size_t size, int vocab_size,
                                                              const std::string& name);
StatusOr<std::unique_ptr<SpmTokenizer>> LoadLlama2cTokenizer(const std::string& path, int vocab_size);

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_SPM_TOKENIZER_H_
