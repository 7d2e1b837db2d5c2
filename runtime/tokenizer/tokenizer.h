// Tokenizer interface (text ↔ token ids) and the factory that builds one from
// a model: a GGUF's embedded vocabulary or a llama2.c tokenizer.bin.
#ifndef KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "platform/status.h"

namespace kvedge {

class GgufFile;
struct ModelWeights;

// How Encode treats the text.
struct EncodeOptions {
  // Add what the vocabulary asks for around the text: BOS when its
  // add_bos_token is set (or defaulted, as llama.cpp does: SentencePiece and
  // Llama 3 yes, GPT-2 no), EOS when add_eos_token is set.
  bool add_special = true;
  // Control tokens written in the text ("<|im_start|>", "<|eot_id|>") become
  // their single ids. Off for user text: there they are spelled out in
  // ordinary tokens. User-defined tokens are always matched, as llama.cpp does.
  bool parse_special = false;
};

// Per-token attributes (llama.cpp's llama_token_attr bits, from
// tokenizer.ggml.token_type plus the tokens llama.cpp marks by their text).
enum TokenAttr : uint8_t {
  kTokenAttrUndefined = 0,
  kTokenAttrUnknown = 1 << 0,
  kTokenAttrUnused = 1 << 1,
  kTokenAttrNormal = 1 << 2,
  kTokenAttrControl = 1 << 3,
  kTokenAttrUserDefined = 1 << 4,
  kTokenAttrByte = 1 << 5,
  kTokenAttrLstrip = 1 << 6,  // parsing it also drops spaces before it
  kTokenAttrRstrip = 1 << 7,  // parsing it also drops spaces after it
};

// Immutable after construction: Encode/DecodePiece may be called from many
// threads at once. Not copyable; owned through std::unique_ptr.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Token ids for `text`. Any bytes are accepted, as llama.cpp accepts them:
  // SentencePiece vocabularies spell bytes that are not valid UTF-8 with
  // their byte tokens; byte-level BPE reads each such byte as U+FFFD (what
  // llama.cpp's UTF-8 decoder yields). O(n log n) in the text length.
  virtual StatusOr<std::vector<int>> Encode(std::string_view text, const EncodeOptions& options) const = 0;
  // Encode(text, {add_special, parse_special = false}).
  StatusOr<std::vector<int>> Encode(std::string_view text, bool add_special) const {
    return Encode(text, EncodeOptions{add_special, false});
  }

  // The bytes `token` contributes after `prev_token` (the SentencePiece
  // tokenizers drop the leading space of the first piece after BOS, and
  // `<0xXX>` pieces yield the raw byte). Valid while the tokenizer lives;
  // empty for ids out of range. Never allocates.
  std::string_view DecodePiece(int prev_token, int token) const;
  // Convenience: the concatenated pieces of `tokens` (a leading BOS yields nothing).
  std::string Decode(const std::vector<int>& tokens) const;

  int bos() const { return bos_; }  // -1 if the vocabulary has none
  int eos() const { return eos_; }
  int eot() const { return eot_; }  // end of turn (<|eot_id|>, <|im_end|>…), -1 if none
  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  // Whether generation ends at `id`: EOS, EOT, EOM and the tokens llama.cpp
  // recognises by their text (<|im_end|>, <|end|>, <end_of_turn>,
  // <|endoftext|>, the FIM pad/repo/file-separator tokens…). O(1).
  bool IsEndOfGeneration(int id) const {
    return id >= 0 && id < static_cast<int>(eog_.size()) && eog_[id];
  }
  // The end-of-generation ids, ascending.
  std::vector<int> EndOfGenerationIds() const;
  // TokenAttr bits of `id`; kTokenAttrUndefined if out of range.
  uint8_t attributes(int id) const {
    return id >= 0 && id < static_cast<int>(attrs_.size()) ? attrs_[id] : uint8_t{kTokenAttrUndefined};
  }
  // The vocabulary's text for `id` (spaces as ' ', byte tokens as "<0xXX>"
  // for SentencePiece; byte-level form for GPT-2); empty if out of range.
  std::string_view TokenText(int id) const;

 protected:
  Tokenizer() = default;

  std::vector<std::string> pieces_;   // [vocab] vocabulary text
  std::vector<std::string> decoded_;  // [vocab] bytes each token decodes to
  std::vector<uint8_t> attrs_;        // [vocab] TokenAttr bits
  std::vector<bool> eog_;             // [vocab] ends generation
  int bos_ = -1;
  int eos_ = -1;
  int eot_ = -1;
  bool strip_space_after_bos_ = false;
};

// The GGUF's `tokenizer.ggml.*` vocabulary (model "llama" or "gpt2"); needs
// no tensors. `pre_override`, when not empty, replaces tokenizer.ggml.pre
// (an unknown pre-tokenizer name is an error naming it).
StatusOr<std::unique_ptr<Tokenizer>> LoadGgufTokenizer(const GgufFile& gguf, std::string_view pre_override = "");

// A tokenizer for `model`: from `tokenizer_bin_path` (a llama2.c
// tokenizer.bin) when given, else the GGUF's embedded vocabulary. llama2.c
// checkpoints carry no vocabulary and need the path. The vocabulary size must
// equal the model's.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const ModelWeights& model,
                                                   const std::string& tokenizer_bin_path = "",
                                                   std::string_view pre_override = "");

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_TOKENIZER_H_
