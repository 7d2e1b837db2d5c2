// Fuzzes tokenizer.bin parsing (the input as a vocabulary) and encoding /
// decoding of arbitrary bytes: llama2.c's tokenizer, a byte-level BPE
// vocabulary under every pre-tokenizer family (PCRE2 splits), with and
// without special-token parsing, and the conformance kit's real GGUF
// vocabularies. Decoding must give the input back (invalid UTF-8 as U+FFFD
// in byte-level BPE) whenever every id is printable text.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "platform/mapped_file.h"
#include "runtime/model/gguf.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/utf8.h"
#include "runtime/tokenizer/vocab_tokenizer.h"

namespace {

struct Checked {
  std::unique_ptr<kvedge::Tokenizer> tok;
  bool byte_level;  // invalid UTF-8 decodes as U+FFFD
};
std::vector<Checked> g_tokenizers;

std::string ReplaceInvalid(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    uint32_t cp;
    const int len = kvedge::DecodeUtf8(text, pos, &cp);
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++pos;
    } else {
      out.append(text, pos, len);
      pos += len;
    }
  }
  return out;
}

void Check(const Checked& c, std::string_view text, bool parse_special) {
  const kvedge::Tokenizer& t = *c.tok;
  auto ids = t.Encode(text, kvedge::EncodeOptions{.add_special = true, .parse_special = parse_special});
  if (!ids.ok()) __builtin_trap();  // any bytes tokenize
  for (size_t i = 0; i < ids->size(); ++i) {
    const int id = (*ids)[i];
    if (id < 0 || id >= t.vocab_size()) __builtin_trap();
    const uint8_t a = t.attributes(id);
    const bool bos = i == 0 && id == t.bos();
    if (!bos && !(a & (kvedge::kTokenAttrNormal | kvedge::kTokenAttrByte | kvedge::kTokenAttrUserDefined))) return;
    if (a & kvedge::kTokenAttrRstrip) return;  // spaces after it are dropped by design
  }
  const std::string want = c.byte_level ? ReplaceInvalid(text) : std::string(text);
  if (t.Decode(*ids) != want) {
    std::fprintf(stderr, "round trip mismatch\n");
    __builtin_trap();
  }
}

// The 256 byte symbols, a few merges, a user-defined and two control tokens.
std::unique_ptr<kvedge::Tokenizer> SyntheticBpe(const std::string& pre) {
  kvedge::VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = pre;
  for (int b = 0; b < 256; ++b) spec.tokens.push_back(kvedge::Gpt2ByteToUnicode(b));
  spec.merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 a", "1 2", "12 3"};
  for (const std::string& m : spec.merges) {
    std::string s = m;
    s.erase(s.find(' '), 1);
    spec.tokens.push_back(s);
  }
  spec.types.assign(spec.tokens.size(), 1);
  spec.tokens.push_back("<tool>");
  spec.types.push_back(4);
  spec.tokens.push_back("<|im_end|>");
  spec.types.push_back(3);
  // BOS/EOS of its own: llama.cpp's BPE default BOS is id 11, here the byte '\v'.
  spec.tokens.push_back("<|endoftext|>");
  spec.types.push_back(3);
  spec.bos = spec.eos = static_cast<int64_t>(spec.tokens.size()) - 1;
  auto t = kvedge::VocabTokenizer::Create(std::move(spec));
  if (!t.ok()) __builtin_trap();
  return std::move(t).value();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const char* pre : {"default", "llama-bpe", "dbrx", "deepseek-llm", "deepseek-coder", "falcon", "gpt-2",
                                 "starcoder", "qwen2", "tekken"}) {
    g_tokenizers.push_back({SyntheticBpe(pre), true});
  }
  const char* shared = std::getenv("KVEDGE_SHARED");
  if (shared == nullptr) return 0;
  auto spm = kvedge::LoadLlama2cTokenizer(std::string(shared) + "/models/tok512.bin", 512);
  if (spm.ok()) g_tokenizers.push_back({std::move(spm).value(), false});
  for (const char* name : {"llama-spm", "gpt-2", "llama-bpe"}) {
    const std::string path = std::string(shared) + "/conformance/tokenizers/ggml-vocab-" + name + ".gguf";
    auto file = kvedge::MappedFile::Open(path);
    if (!file.ok()) continue;
    auto gguf = kvedge::GgufFile::Parse(file->data(), file->size(), path);
    if (!gguf.ok()) continue;
    auto t = kvedge::LoadGgufTokenizer(*gguf);
    if (t.ok()) g_tokenizers.push_back({std::move(t).value(), std::string_view(name) != "llama-spm"});
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<uint8_t> buf(data, data + size);
  auto parsed = kvedge::ParseLlama2cTokenizer(buf.data(), buf.size(), 0, "fuzz.bin");
  const std::string_view text(reinterpret_cast<const char*>(buf.data()), buf.size());
  if (parsed.ok()) {
    const kvedge::Tokenizer& t = **parsed;
    auto ids = t.Encode(text.substr(0, 256), true);
    if (ids.ok()) (void)t.Decode(*ids);
    for (int id = -1; id <= t.vocab_size(); ++id) (void)t.DecodePiece(1, id);
  }
  for (const Checked& c : g_tokenizers) {
    Check(c, text, false);
    Check(c, text, true);
  }
  return 0;
}
