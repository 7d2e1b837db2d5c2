// Pre-tokenizer regex lists per `tokenizer.ggml.pre` name (the ones
// llama.cpp's llama-vocab.cpp defines), matched with PCRE2.
#include "runtime/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

namespace kvedge {
namespace {

// llama.cpp's patterns, written as there. Its `\s` is the Unicode
// White_Space property (non-ASCII spaces are folded to \v before std::regex
// runs); ToPcre2 spells that out, since PCRE2's UCP `\s` also takes U+180E.
// The `(?i:'s|...)` of the original tokenizer.json files is written with
// explicit case classes, as llama.cpp does: PCRE2's caseless matching would
// also fold U+017F (ſ) to s and U+212A (K) to k.
constexpr const char* kGpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2 =
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Mistral's tekken. tokenizer.json has
//   [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|...
// llama.cpp runs "a letter other than a-z" / "other than A-Z" instead
// (((?=[\p{L}])([^a-z]))*...), so its ids follow that; written here as the
// equivalent single classes [^\P{L}a-z] / [^\P{L}A-Z], which PCRE2 repeats
// without a stack frame per letter (the group form overflows the JIT stack
// on a few hundred letters).
constexpr const char* kTekken =
    R"([^\r\n\p{L}\p{N}]?[^\P{L}a-z]*[^\P{L}A-Z]+|[^\r\n\p{L}\p{N}]?[^\P{L}a-z]+[^\P{L}A-Z]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kCjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+";
constexpr const char* kDeepseekLlmLetters =
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af\u0370-\u0373"
    "\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f"
    "\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d\u1f5f-\u1f7d"
    "\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4"
    "\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3\ua640-\ua66d"
    "\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a"
    "\uff41-\uff5a\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+";
constexpr const char* kDeepseekLlmPunct = "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+";

struct PreDefinition {
  std::vector<const char*> names;
  std::vector<const char*> regexes;
  PreTokenizerTraits traits;
};

const std::vector<PreDefinition>& Definitions() {
  static const std::vector<PreDefinition> defs = {
      {{"default", ""}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}, {}},
      {{"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"},
       {kLlama3},
       {.ignore_merges = true, .add_bos = true}},
      {{"dbrx", "smaug-bpe"}, {kLlama3}, {}},
      {{"deepseek-llm"}, {"[\r\n]", kDeepseekLlmLetters, kDeepseekLlmPunct, "\\s+$", kCjk, R"(\p{N}+)"}, {}},
      {{"deepseek-coder"}, {"[\r\n]", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjk, R"(\p{N})"}, {}},
      {{"falcon"}, {R"([\p{P}\$\+<=>\^~\|]+)", kGpt2, "[0-9][0-9][0-9]"}, {}},
      // GPT-NeoX's tokenizer.json pre-tokenizer is ByteLevel with the GPT-2
      // pattern (llama.cpp's converter writes its family as "gpt-2"/"olmo"/"mpt").
      {{"gpt-2", "gpt-neox", "mpt", "phi-2", "olmo", "jais", "trillion", "granite-docling", "exaone4", "jina-es",
        "jina-de", "jina-v2-es", "jina-v2-de", "gigachat", "a.x-4.0", "mellum", "modern-bert"},
       {kGpt2},
       {}},
      {{"starcoder", "refact", "smollm", "command-r", "codeshell", "exaone", "minerva-7b", "mellum2"},
       {R"(\p{N})", kGpt2},
       {}},
      {{"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan", "solar-open", "kormo", "f2llmv2"},
       {kQwen2},
       {}},
      {{"tekken"}, {kTekken}, {.ignore_merges = true, .add_bos = true}},
  };
  return defs;
}

// `\s` / `\S` (unescaped) → the White_Space property, inside classes too.
std::string ToPcre2(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += "\\p{White_Space}";
      } else if (next == 'S') {
        out += "\\P{White_Space}";
      } else {
        out += '\\';
        out += next;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

}  // namespace

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreTokenizer&&) noexcept = default;
PreTokenizer& PreTokenizer::operator=(PreTokenizer&&) noexcept = default;
PreTokenizer::~PreTokenizer() = default;

std::vector<std::string> PreTokenizer::KnownNames() {
  std::vector<std::string> names;
  for (const PreDefinition& d : Definitions()) {
    for (const char* n : d.names) {
      if (*n != '\0') names.emplace_back(n);
    }
  }
  return names;
}

StatusOr<PreTokenizer> PreTokenizer::Create(std::string_view name) {
  const PreDefinition* def = nullptr;
  for (const PreDefinition& d : Definitions()) {
    for (const char* n : d.names) {
      if (name == n) def = &d;
    }
  }
  if (def == nullptr) {
    std::string known;
    for (const PreDefinition& d : Definitions()) known.append(known.empty() ? "" : ", ").append(d.names[0]);
    return Unsupported("unknown pre-tokenizer '" + std::string(name.substr(0, 64)) +
                       "' (tokenizer.ggml.pre); kvedge knows " + known +
                       " and llama.cpp's other names for these. Override with --tokenizer-pre NAME if the "
                       "vocabulary is one of them");
  }
  PreTokenizer p;
  p.name_ = name.empty() ? "default" : std::string(name);
  p.traits_ = def->traits;
  for (const char* regex : def->regexes) {
    const std::string pattern = ToPcre2(regex);
    int error = 0;
    PCRE2_SIZE error_offset = 0;
    auto compiled = std::make_unique<Compiled>();
    compiled->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error, &error_offset, nullptr);
    if (compiled->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      return Internal("pre-tokenizer '" + p.name_ + "': PCRE2 rejects pattern at offset " +
                      std::to_string(error_offset) + ": " + reinterpret_cast<const char*>(message));
    }
    pcre2_jit_compile(compiled->code, PCRE2_JIT_COMPLETE);  // the interpreter runs when JIT is unavailable
    p.regexes_.push_back(std::move(compiled));
  }
  return p;
}

StatusOr<std::vector<size_t>> PreTokenizer::Split(std::string_view text) const {
  std::vector<size_t> pieces;
  if (!text.empty()) pieces.push_back(text.size());
  std::vector<size_t> next;
  for (const auto& regex : regexes_) {
    pcre2_match_data* match = pcre2_match_data_create_from_pattern(regex->code, nullptr);
    next.clear();
    size_t start = 0;
    for (const size_t len : pieces) {
      const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data() + start);
      size_t pos = 0;   // next search offset in the piece
      size_t done = 0;  // end of the last emitted piece
      while (pos < len) {
        int rc = pcre2_match(regex->code, subject, len, pos, PCRE2_NO_UTF_CHECK, match, nullptr);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {  // the interpreter keeps its frames on the heap
          rc = pcre2_match(regex->code, subject, len, pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, match, nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          pcre2_match_data_free(match);
          PCRE2_UCHAR message[256];
          pcre2_get_error_message(rc, message, sizeof(message));
          return ResourceExhausted("pre-tokenizer '" + name_ + "': cannot split the text at byte " +
                                   std::to_string(start + pos) + ": " + reinterpret_cast<const char*>(message));
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
        if (ov[1] == ov[0]) {  // an empty match splits nothing: step over one code point
          pos = ov[0] + 1;
          while (pos < len && (static_cast<uint8_t>(text[start + pos]) & 0xC0) == 0x80) ++pos;
          continue;
        }
        if (ov[0] > done) next.push_back(ov[0] - done);
        next.push_back(ov[1] - ov[0]);
        done = pos = ov[1];
      }
      if (done < len) next.push_back(len - done);
      start += len;
    }
    pcre2_match_data_free(match);
    pieces.swap(next);
  }
  return pieces;
}

}  // namespace kvedge
