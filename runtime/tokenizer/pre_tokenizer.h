// Pre-tokenizers of byte-level BPE vocabularies (GGUF `tokenizer.ggml.pre`):
// the regex splits llama.cpp applies before merging, by name, on PCRE2.
#ifndef KVEDGE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
#define KVEDGE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "platform/status.h"

namespace kvedge {

// What a `pre` name implies beside its split (llama.cpp's load()).
struct PreTokenizerTraits {
  bool ignore_merges = false;  // a word that is itself a token is not merged (Llama 3, tekken)
  bool add_bos = false;        // the default for add_bos_token when the GGUF does not say
};

// An ordered list of regexes. Split() applies the first to the whole text,
// each next one to every piece the previous produced; a piece becomes its
// matches plus the unmatched runs between them (nothing is dropped), as
// llama.cpp's unicode_regex_split does. Patterns are compiled with
// PCRE2_UTF | PCRE2_UCP (Unicode categories from PCRE2's tables, JIT when
// available); `\s` means the Unicode White_Space property, as in llama.cpp.
//
// Immutable after Create: Split may run on many threads at once (match
// data is per call). Move-only.
class PreTokenizer {
 public:
  // The pre-tokenizer llama.cpp selects for `name` (e.g. "llama-bpe",
  // "qwen2", "gpt-2"); an unknown name is Unsupported, naming it and the
  // names kvedge knows. "" is llama.cpp's "default".
  static StatusOr<PreTokenizer> Create(std::string_view name);
  // Every name Create accepts, for messages and tests.
  static std::vector<std::string> KnownNames();

  PreTokenizer(PreTokenizer&&) noexcept;
  PreTokenizer& operator=(PreTokenizer&&) noexcept;
  ~PreTokenizer();

  const std::string& name() const { return name_; }
  const PreTokenizerTraits& traits() const { return traits_; }

  // Byte lengths of the consecutive pieces of `text` (valid UTF-8; they sum
  // to text.size()). O(n) in the text for these patterns. An error only if
  // PCRE2 runs out of its match or heap limits (none seen on 4 MiB runs of
  // one character class), naming the byte offset.
  StatusOr<std::vector<size_t>> Split(std::string_view text) const;

 private:
  struct Compiled;
  PreTokenizer() = default;

  std::string name_;
  PreTokenizerTraits traits_;
  std::vector<std::unique_ptr<Compiled>> regexes_;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_TOKENIZER_PRE_TOKENIZER_H_
