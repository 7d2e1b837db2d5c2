// Fuzzes tokenizer.bin parsing (the input as a vocabulary) and encoding /
// decoding of arbitrary bytes with real vocabularies, which must round-trip
// any valid UTF-8 exactly.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/gpt2_tokenizer.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/utf8.h"

namespace {

std::unique_ptr<kvedge::Tokenizer> g_spm;   // tok512.bin from $KVEDGE_SHARED, if present
std::unique_ptr<kvedge::Tokenizer> g_gpt2;  // byte symbols plus a few merges

void CheckRoundTrip(const kvedge::Tokenizer& t, std::string_view text) {
  auto ids = t.Encode(text, true);
  const bool valid = kvedge::FindInvalidUtf8(text) == kvedge::kUtf8Valid;
  if (ids.ok() != valid) __builtin_trap();  // errors exactly for invalid UTF-8
  if (valid && t.Decode(*ids) != text) {
    std::fprintf(stderr, "round trip mismatch\n");
    __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* shared = std::getenv("KVEDGE_SHARED");
  if (shared != nullptr) {
    auto t = kvedge::LoadLlama2cTokenizer(std::string(shared) + "/models/tok512.bin", 512);
    if (t.ok()) g_spm = std::move(t).value();
  }
  std::vector<std::string> vocab;
  for (int b = 0; b < 256; ++b) vocab.push_back(kvedge::Gpt2ByteToUnicode(b));
  const std::vector<std::string_view> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he", "i n", "\xC4\xA0 a"};
  for (std::string_view m : merges) {
    std::string s(m);
    s.erase(s.find(' '), 1);
    vocab.push_back(s);
  }
  auto g = kvedge::Gpt2Tokenizer::Create(vocab, merges, -1, -1);
  if (!g.ok()) __builtin_trap();
  g_gpt2 = std::move(g).value();
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
  if (g_spm) CheckRoundTrip(*g_spm, text);
  CheckRoundTrip(*g_gpt2, text);
  return 0;
}
