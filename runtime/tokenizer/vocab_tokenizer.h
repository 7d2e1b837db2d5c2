// GGUF vocabularies tokenized exactly as llama.cpp does: SentencePiece
// ("llama") and byte-level BPE ("gpt2") with the named pre-tokenizer, token
// types, special-token parsing and the end-of-generation set.
#ifndef KVEDGE_RUNTIME_TOKENIZER_VOCAB_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_VOCAB_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge {

// GPT-2's byte → code point map (printable bytes map to themselves, the rest
// to U+0100 onwards), as UTF-8: the alphabet of byte-level BPE vocabularies.
const std::string& Gpt2ByteToUnicode(uint8_t byte);

// A vocabulary as a GGUF stores it (`tokenizer.ggml.*`), before llama.cpp's
// defaults are applied. Absent keys are nullopt / empty.
struct VocabSpec {
  std::string model;                // "llama" (SentencePiece) or "gpt2" (byte-level BPE)
  std::string pre;                  // tokenizer.ggml.pre; "" = llama.cpp's "default" split
  std::string name;                 // general.name (Phi-3 special tokens strip following spaces)
  std::vector<std::string> tokens;  // as stored (SentencePiece spaces as U+2581, BPE byte-level)
  std::vector<float> scores;        // empty: all 0
  std::vector<int32_t> types;       // 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte; empty: normal
  std::vector<std::string> merges;  // BPE "left right", rank = index
  std::optional<int64_t> bos, eos, eot, eom, unk, pad, fim_pad, fim_rep, fim_sep;
  std::optional<bool> add_bos, add_eos, add_space_prefix;
};

// Immutable after Create; Encode may run on many threads at once.
class VocabTokenizer final : public Tokenizer {
 public:
  // Applies llama.cpp's defaults (special ids, add_bos per model and pre,
  // EOG tokens found by their text) and validates: duplicate tokens, ids
  // outside the vocabulary, add_bos/add_eos without the token, an unknown
  // pre-tokenizer are InvalidArgument naming the key or value.
  static StatusOr<std::unique_ptr<VocabTokenizer>> Create(VocabSpec spec);

  using Tokenizer::Encode;
  StatusOr<std::vector<int>> Encode(std::string_view text, const EncodeOptions& options) const override;

  bool is_bpe() const { return pre_.has_value(); }
  // The pre-tokenizer's name ("llama-bpe", "default"…); empty for SentencePiece.
  std::string_view pre() const { return pre_ ? std::string_view(pre_->name()) : std::string_view(); }
  bool add_bos() const { return add_bos_; }
  bool add_eos() const { return add_eos_; }
  bool add_space_prefix() const { return add_space_prefix_; }

 private:
  VocabTokenizer() = default;
  int Find(std::string_view text) const;
  void EncodeSpm(std::string_view text, std::vector<int>* out) const;
  Status EncodeBpe(std::string_view text, std::vector<int>* out) const;
  void EncodeBpeWord(const std::string& word, std::vector<int>* out) const;

  std::unordered_map<std::string_view, int> ids_;    // views into pieces_
  std::vector<std::string> merges_;                  // [rank] "left right"
  std::unordered_map<std::string_view, int> ranks_;  // views into merges_
  std::vector<float> scores_;                        // [vocab]
  std::vector<int> special_;  // control / user-defined / unknown ids, longest text first: matched in this order
  std::optional<PreTokenizer> pre_;
  int unk_ = -1;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  bool ignore_merges_ = false;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_VOCAB_TOKENIZER_H_
