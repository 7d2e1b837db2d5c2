// Tokenizer interface (text ↔ token ids) and the factory that builds one from
// a model: a GGUF's embedded vocabulary or a llama2.c tokenizer.bin.
#ifndef KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "platform/status.h"

namespace kvedge {

class GgufFile;
struct ModelWeights;

// Immutable after construction: Encode/DecodePiece may be called from many
// threads at once. Not copyable; owned through std::unique_ptr.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids for `text` (UTF-8), BOS first if `add_bos`. Invalid UTF-8 gives
  // InvalidArgument naming the byte offset. O(n log n) in the text length.
  virtual StatusOr<std::vector<int>> Encode(std::string_view text, bool add_bos) const = 0;

  // The bytes `token` contributes after `prev_token` (the SentencePiece
  // tokenizers drop the leading space of the first piece after BOS, and
  // `<0xXX>` pieces yield the raw byte). Valid while the tokenizer lives;
  // empty for ids out of range. Never allocates.
  std::string_view DecodePiece(int prev_token, int token) const;
  // Convenience: the concatenated pieces of `tokens` (a leading BOS yields nothing).
  std::string Decode(const std::vector<int>& tokens) const;

  int bos() const { return bos_; }  // -1 if the vocabulary has none
  int eos() const { return eos_; }
  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  // The vocabulary's text for `id` (spaces as ' ', byte tokens as "<0xXX>"
  // for SentencePiece; byte-level form for GPT-2); empty if out of range.
  std::string_view TokenText(int id) const;

 protected:
  Tokenizer() = default;

  std::vector<std::string> pieces_;   // [vocab] vocabulary text
  std::vector<std::string> decoded_;  // [vocab] bytes each token decodes to
  int bos_ = -1;
  int eos_ = -1;
  bool strip_space_after_bos_ = false;
};

// The GGUF's `tokenizer.ggml.*` vocabulary (model "llama" or "gpt2").
StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& gguf);

// A tokenizer for `model`: from `tokenizer_bin_path` (a llama2.c
// tokenizer.bin) when given, else the GGUF's embedded vocabulary. llama2.c
// checkpoints carry no vocabulary and need the path. The vocabulary size must
// equal the model's.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelWeights& model,
                                                   const std::string& tokenizer_bin_path = "");

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_
