// Tokenizers: llama2.c tokenizer.bin and the GGUF-embedded vocabulary on real
// text, invalid UTF-8, GPT-2 byte-level BPE on a synthetic vocabulary, the
// pre-tokenizer splits, special tokens and the end-of-generation set.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "platform/mapped_file.h"
#include "runtime/model/gguf.h"
#include "runtime/model/gguf_writer.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/pre_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/vocab_tokenizer.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

using ::kvedge::testing::SharedPath;

std::string ReadText(const std::string& relative) {
  std::ifstream in(SharedPath(relative), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Splits text into chunks of about `size` bytes on UTF-8 boundaries.
std::vector<std::string_view> Chunks(std::string_view text, size_t size) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.size(), pos + size);
    while (end < text.size() && (static_cast<uint8_t>(text[end]) & 0xC0) == 0x80) ++end;
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// llama2.c's encode() transcribed directly from run.c (bsearch lookup,
// O(n²) rescans for the best merge), reading tokenizer.bin itself: the
// reference the priority-queue implementation must equal.
class ReferenceLlama2c {
 public:
  explicit ReferenceLlama2c(const std::string& bytes) {
    size_t pos = 4;
    for (int i = 0; i < 512; ++i) {
      float score;
      int32_t len;
      std::memcpy(&score, bytes.data() + pos, 4);
      std::memcpy(&len, bytes.data() + pos + 4, 4);
      vocab_.push_back(bytes.substr(pos + 8, len));
      scores_.push_back(score);
      pos += 8 + len;
    }
    for (int i = 0; i < 512; ++i) sorted_.emplace_back(vocab_[i], i);
    std::sort(sorted_.begin(), sorted_.end());
  }
  int Lookup(std::string_view s) const {
    const auto it = std::lower_bound(sorted_.begin(), sorted_.end(), std::make_pair(std::string(s), -1));
    return it != sorted_.end() && it->first == s ? it->second : -1;
  }
  std::vector<int> Encode(std::string_view text) const {
    std::vector<int> tokens = {1};
    if (!text.empty()) tokens.push_back(Lookup(" "));
    for (size_t i = 0; i < text.size();) {
      size_t len = 1;
      while (i + len < text.size() && (static_cast<uint8_t>(text[i + len]) & 0xC0) == 0x80 && len < 4) ++len;
      const int id = Lookup(text.substr(i, len));
      if (id >= 0) {
        tokens.push_back(id);
      } else {
        for (size_t k = 0; k < len; ++k) tokens.push_back(static_cast<uint8_t>(text[i + k]) + 3);
      }
      i += len;
    }
    while (true) {
      float best_score = -1e10f;
      int best_id = -1, best_idx = -1;
      for (size_t i = 0; i + 1 < tokens.size(); ++i) {  // run.c's loop includes BOS
        const int id = Lookup(vocab_[tokens[i]] + vocab_[tokens[i + 1]]);
        if (id != -1 && scores_[id] > best_score) best_score = scores_[id], best_id = id, best_idx = static_cast<int>(i);
      }
      if (best_idx == -1) break;
      tokens[best_idx] = best_id;
      tokens.erase(tokens.begin() + best_idx + 1);
    }
    return tokens;
  }

 private:
  std::vector<std::string> vocab_;
  std::vector<float> scores_;
  std::vector<std::pair<std::string, int>> sorted_;
};

class SharedTokenizers : public ::testing::Test {
 protected:
  void SetUp() override {
    auto bin = LoadLlama2cTokenizer(SharedPath("models/tok512.bin"), 512);
    ASSERT_TRUE(bin.ok()) << bin.status().ToString();
    bin_ = std::move(bin).value();
    auto model = LoadModel(SharedPath("models/stories260K_llamacpp.gguf"));
    ASSERT_TRUE(model.ok()) << model.status().ToString();
    model_ = std::move(model).value();
    auto gguf = LoadTokenizer(*model_);
    ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
    gguf_ = std::move(gguf).value();
  }
  std::unique_ptr<Tokenizer> bin_;
  std::unique_ptr<ModelWeights> model_;
  std::unique_ptr<Tokenizer> gguf_;
};

TEST_F(SharedTokenizers, OnceUponATime) {
  const std::vector<int> expected = {1, 403, 407, 261, 378};
  auto a = bin_->Encode("Once upon a time", true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, expected);
  auto b = gguf_->Encode("Once upon a time", true);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, expected);
  EXPECT_EQ(bin_->Decode(*a), "Once upon a time");
  EXPECT_EQ(bin_->DecodePiece(1, 403), "Once");   // leading space dropped after BOS
  EXPECT_EQ(bin_->DecodePiece(403, 407), " upon");
  EXPECT_EQ(bin_->TokenText(403), " Once");
  EXPECT_EQ(gguf_->TokenText(403), "\xE2\x96\x81Once");  // the GGUF's own text (U+2581 for the space)
  EXPECT_EQ(gguf_->DecodePiece(403, 403), " Once");
  EXPECT_EQ(bin_->bos(), 1);
  EXPECT_EQ(bin_->eos(), 2);
  EXPECT_EQ(gguf_->bos(), 1);
  EXPECT_EQ(gguf_->eos(), 2);
  EXPECT_EQ(bin_->vocab_size(), 512);
}

TEST_F(SharedTokenizers, EmptyAndByteFallback) {
  auto empty = bin_->Encode("", true);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(*empty, std::vector<int>{1});
  auto none = bin_->Encode("", false);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  // U+4E2D is not in the 512-token vocabulary: its three bytes fall back to <0xE4><0xB8><0xAD>.
  auto e = bin_->Encode("\xE4\xB8\xAD", false);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(*e, (std::vector<int>{bin_->Encode(" ", false)->at(0), 0xE4 + 3, 0xB8 + 3, 0xAD + 3}));
  EXPECT_EQ(bin_->TokenText(0xE4 + 3), "<0xE4>");
  EXPECT_EQ(bin_->DecodePiece(0, 0xE4 + 3), "\xE4");
  EXPECT_EQ(bin_->DecodePiece(0, 100000), "");
  EXPECT_EQ(bin_->DecodePiece(0, -1), "");
}

// Invalid UTF-8 is tokenized, as llama.cpp does: SentencePiece spells each
// byte that starts no valid sequence with its <0xXX> token, so decoding gives
// the bytes back.
TEST_F(SharedTokenizers, InvalidUtf8IsTokenizedAsBytes) {
  for (const Tokenizer* t : {bin_.get(), gguf_.get()}) {
    for (const std::string& text : {std::string("Once upon a time\xFF"), std::string("ab\xC0\xAF"),
                                   std::string("abc\xE2\x96"), std::string("\x80"), std::string("x\xED\xA0\x80y")}) {
      auto r = t->Encode(text, true);
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(t->Decode(*r), text);
    }
    auto ff = t->Encode(std::string("Once upon a time\xFF"), true);
    EXPECT_EQ(ff->back(), 0xFF + 3);  // <0xFF>
  }
}

TEST_F(SharedTokenizers, RoundTripAndAgreementOnSharedText) {
  for (const char* file : {"data/tinystories_valid_head.txt", "data/tinystories_train_2MiB.txt",
                           "data/pride_and_prejudice_pg1342.txt"}) {
    SCOPED_TRACE(file);
    const std::string text = ReadText(file);
    ASSERT_FALSE(text.empty());
    size_t tokens = 0;
    for (std::string_view chunk : Chunks(text, 16384)) {
      auto a = bin_->Encode(chunk, true);
      auto b = gguf_->Encode(chunk, true);
      ASSERT_TRUE(a.ok()) << a.status().ToString();
      ASSERT_TRUE(b.ok()) << b.status().ToString();
      ASSERT_EQ(*a, *b) << "tokenizer.bin and the GGUF vocabulary disagree";
      ASSERT_EQ(bin_->Decode(*a), chunk);
      ASSERT_EQ(gguf_->Decode(*b), chunk);
      tokens += a->size();
    }
    // Even a 512-token BPE merges: clearly fewer tokens than bytes.
    EXPECT_LT(tokens, text.size() * 7 / 10);
  }
}

TEST_F(SharedTokenizers, EqualsLlama2cReference) {
  const ReferenceLlama2c ref(ReadText("models/tok512.bin"));
  for (const char* file : {"data/tinystories_valid_head.txt", "data/pride_and_prejudice_pg1342.txt"}) {
    const std::string text = ReadText(file);
    const auto chunks = Chunks(std::string_view(text).substr(0, 60000), 300);
    for (std::string_view chunk : chunks) {
      auto ids = bin_->Encode(chunk, true);
      ASSERT_TRUE(ids.ok());
      ASSERT_EQ(*ids, ref.Encode(chunk)) << chunk;
    }
  }
}

TEST_F(SharedTokenizers, LongTextIsFast) {
  // 2 MiB in one call: the priority-queue merge is O(n log n).
  const std::string text = ReadText("data/tinystories_train_2MiB.txt");
  auto a = bin_->Encode(text, true);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(bin_->Decode(*a), text);
}

TEST(TokenizerTest, AidreamsVocabulary) {
  auto t = LoadLlama2cTokenizer(SharedPath("models/aidreams260K_tok512.bin"), 512);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string text = "Echoes of vectors unfold, a gentle hum of precision.";
  auto ids = (*t)->Encode(text, true);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*t)->Decode(*ids), text);
  // The wrong vocabulary size is refused with a hint.
  auto wrong = LoadLlama2cTokenizer(SharedPath("models/tok512.bin"), 256);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("bytes left after 256 tokens"), std::string::npos);
}

TEST(TokenizerTest, Llama2cModelNeedsTokenizerBin) {
  auto model = LoadModel(SharedPath("models/stories260K.bin"));
  ASSERT_TRUE(model.ok());
  auto none = LoadTokenizer(**model);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("tokenizer.bin"), std::string::npos);
  auto truncated = LoadTokenizer(**model, SharedPath("models/stories260K.bin"));  // not a tokenizer
  ASSERT_FALSE(truncated.ok());
  auto ok = LoadTokenizer(**model, SharedPath("models/tok512.bin"));
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
}

// A byte-level vocabulary: the 256 byte symbols, then the given merges' results.
std::vector<std::string> Gpt2Vocab(const std::vector<std::string_view>& merges) {
  std::vector<std::string> v;
  for (int b = 0; b < 256; ++b) v.push_back(Gpt2ByteToUnicode(b));
  for (std::string_view m : merges) {
    std::string s(m);
    s.erase(s.find(' '), 1);
    v.push_back(s);
  }
  v.push_back("<|endoftext|>");
  return v;
}

int IdOf(const std::vector<std::string>& vocab, std::string_view s) {
  for (size_t i = 0; i < vocab.size(); ++i) {
    if (vocab[i] == s) return static_cast<int>(i);
  }
  return -1;
}

// A GPT-2 style vocabulary (pre "gpt-2"); <|endoftext|> is a control token.
StatusOr<std::unique_ptr<VocabTokenizer>> MakeGpt2(std::vector<std::string> vocab,
                                                   const std::vector<std::string_view>& merges,
                                                   std::optional<bool> add_bos = std::nullopt) {
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "gpt-2";
  spec.types.assign(vocab.size(), 1);
  const int eot = IdOf(vocab, "<|endoftext|>");
  if (eot >= 0) {
    spec.types[eot] = 3;
    spec.bos = spec.eos = eot;
  }
  spec.tokens = std::move(vocab);
  spec.merges.assign(merges.begin(), merges.end());
  spec.add_bos = add_bos;
  return VocabTokenizer::Create(std::move(spec));
}

TEST(Gpt2TokenizerTest, MergesInRankOrder) {
  const std::vector<std::string_view> merges = {"b c", "a b", "h e", "l l", "he ll", "hell o", "\xC4\xA0 w",
                                                "\xC4\xA0w o", "r l", "\xC4\xA0wo rl", "\xC4\xA0worl d"};
  const auto vocab = Gpt2Vocab(merges);
  const int eot = IdOf(vocab, "<|endoftext|>");
  auto t = MakeGpt2(vocab, merges, /*add_bos=*/true);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto abc = (*t)->Encode("abc", false);
  ASSERT_TRUE(abc.ok());
  EXPECT_EQ(*abc, (std::vector<int>{IdOf(vocab, "a"), IdOf(vocab, "bc")}));  // "b c" ranks first
  auto hw = (*t)->Encode("hello world", true);
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(*hw, (std::vector<int>{eot, IdOf(vocab, "hello"), IdOf(vocab, "\xC4\xA0world")}));
  EXPECT_EQ((*t)->DecodePiece(eot, IdOf(vocab, "\xC4\xA0world")), " world");  // no SentencePiece space stripping
  EXPECT_EQ((*t)->DecodePiece(-1, eot), "");  // control tokens print nothing

  // Swapping the first two ranks changes the result.
  std::vector<std::string_view> swapped = merges;
  std::swap(swapped[0], swapped[1]);
  auto t2 = MakeGpt2(Gpt2Vocab(swapped), swapped);
  ASSERT_TRUE(t2.ok());
  auto abc2 = (*t2)->Encode("abc", true);  // GPT-2 adds no BOS unless add_bos_token says so
  ASSERT_TRUE(abc2.ok());
  EXPECT_EQ(*abc2, (std::vector<int>{IdOf(Gpt2Vocab(swapped), "ab"), IdOf(Gpt2Vocab(swapped), "c")}));
}

TEST(Gpt2TokenizerTest, BytesRoundTrip) {
  const std::vector<std::string_view> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he"};
  const auto vocab = Gpt2Vocab(merges);
  auto t = MakeGpt2(vocab, merges);
  ASSERT_TRUE(t.ok());
  const std::string texts[] = {
      "the  the\n\n  end ", "caf\xC3\xA9 na\xC3\xAFve \xE2\x80\x94 \xE2\x9C\x93 100% it's 42.5\t\r\n",
      "\xF0\x9F\x98\x80 emoji and \xE4\xB8\xAD\xE6\x96\x87", "   ", "", "don't we'll they're I'M"};
  for (const std::string& text : texts) {
    auto ids = (*t)->Encode(text, false);
    ASSERT_TRUE(ids.ok()) << text;
    EXPECT_EQ((*t)->Decode(*ids), text);
  }
  auto the = (*t)->Encode(" the", false);
  ASSERT_TRUE(the.ok());
  EXPECT_EQ(*the, std::vector<int>{IdOf(vocab, "\xC4\xA0the")});
  // Every byte value survives.
  std::string all;
  for (int b = 0; b < 128; ++b) all.push_back(static_cast<char>(b));
  auto ids = (*t)->Encode(all, false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*t)->Decode(*ids), all);
  // A byte that starts no valid UTF-8 sequence reads as U+FFFD, as in llama.cpp.
  auto bad = (*t)->Encode("ok\x80", false);
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ((*t)->Decode(*bad), "ok\xEF\xBF\xBD");
  auto truncated = (*t)->Encode("a\xE2\x82", false);
  ASSERT_TRUE(truncated.ok());
  EXPECT_EQ((*t)->Decode(*truncated), "a\xEF\xBF\xBD\xEF\xBF\xBD");
}

// Falcon's and StarCoder's vocabularies lack some byte tokens; llama.cpp
// loads them and drops what it cannot spell.
TEST(Gpt2TokenizerTest, IncompleteVocabularyLoadsAsLlamaCpp) {
  std::vector<std::string> vocab = Gpt2Vocab({});
  vocab.erase(vocab.begin() + 'x');
  auto t = MakeGpt2(vocab, {"a b", "bogus"});
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto ids = (*t)->Encode("axb", false);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ((*t)->Decode(*ids), "ab");
  std::vector<std::string> dup = Gpt2Vocab({});
  dup.push_back("a");
  auto d = MakeGpt2(dup, {});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("duplicate token"), std::string::npos);
}

std::vector<std::string> Pieces(const PreTokenizer& p, std::string_view text) {
  std::vector<std::string> out;
  size_t start = 0;
  auto lengths = p.Split(text);
  EXPECT_TRUE(lengths.ok()) << lengths.status().ToString();
  if (!lengths.ok()) return out;
  for (size_t len : *lengths) {
    out.emplace_back(text.substr(start, len));
    start += len;
  }
  EXPECT_EQ(start, text.size());
  return out;
}

TEST(PreTokenizerTest, SplitsFollowTheirDefinitions) {
  using V = std::vector<std::string>;
  const auto split = [](std::string_view name, std::string_view text) {
    auto p = PreTokenizer::Create(name);
    EXPECT_TRUE(p.ok()) << p.status().ToString();
    return p.ok() ? Pieces(*p, text) : V{};
  };
  // Llama 3: digits in threes, a letter run takes one leading non-letter, contractions any case.
  EXPECT_EQ(split("llama-bpe", "12345 Hello world's IT'S"),
            (V{"123", "45", " Hello", " world", "'s", " IT", "'S"}));
  EXPECT_EQ(split("llama-bpe", "a  \n\n b"), (V{"a", "  \n\n", " b"}));
  EXPECT_EQ(split("qwen2", "12345"), (V{"1", "2", "3", "4", "5"}));
  EXPECT_EQ(split("gpt-2", "12345 it's  ok"), (V{"12345", " it", "'s", " ", " ok"}));
  EXPECT_EQ(split("gpt-2", "IT'S"), (V{"IT", "'", "S"}));  // GPT-2's contractions are lower case only
  EXPECT_EQ(split("starcoder", "x12 ab"), (V{"x", "1", "2", " ab"}));
  EXPECT_EQ(split("falcon", "1234567 a,b"), (V{"123", "456", "7", " a", ",", "b"}));
  EXPECT_EQ(split("tekken", "HelloWorld ABC"), (V{"Hello", "World", " ABC"}));
  EXPECT_EQ(split("deepseek-coder", "ab12\n\xE4\xB8\xAD\xE6\x96\x87!"),
            (V{"ab", "1", "2", "\n", "\xE4\xB8\xAD\xE6\x96\x87", "!"}));
  // Each regex splits the pieces of the previous one; unmatched runs stay whole.
  EXPECT_EQ(split("deepseek-llm", "Hi  \xE4\xB8\xAD 42"), (V{"Hi", "  ", "\xE4\xB8\xAD", " ", "42"}));
  // Unicode categories come from PCRE2: "é" is a letter, "½" a number,
  // U+3000 a space; U+180E is not White_Space (PCRE2's own \s would take it).
  EXPECT_EQ(split("gpt-2", "caf\xC3\xA9 \xC2\xBD\xE3\x80\x80x"), (V{"caf\xC3\xA9", " \xC2\xBD", "\xE3\x80\x80", "x"}));
  EXPECT_EQ(split("gpt-2", "a\xE1\xA0\x8E"), (V{"a", "\xE1\xA0\x8E"}));
  EXPECT_EQ(split("gpt-2", ""), V{});
}

// Long runs of one kind of character split in linear time and without
// exhausting PCRE2's stack: 1 MiB of letters (tekken's letter classes once
// overflowed the JIT stack at a few hundred), spaces, punctuation, é.
TEST(PreTokenizerTest, LongRunsSplit) {
  for (const char* name : {"tekken", "llama-bpe", "qwen2", "gpt-2", "default", "falcon", "starcoder", "deepseek-llm",
                           "deepseek-coder"}) {
    auto p = PreTokenizer::Create(name);
    ASSERT_TRUE(p.ok());
    for (const std::string unit : {"a", "Z", " ", "!", "\xC3\xA9"}) {
      std::string text;
      while (text.size() < (1 << 20)) text += unit;
      text += " b";
      const auto pieces = Pieces(*p, text);
      ASSERT_FALSE(pieces.empty());
      EXPECT_EQ(pieces.back(), " b") << name << " '" << unit << "'";  // the last space joins the word
    }
  }
}

TEST(PreTokenizerTest, EveryKnownNameCompilesAndUnknownIsRefused) {
  for (const std::string& name : PreTokenizer::KnownNames()) {
    auto p = PreTokenizer::Create(name);
    ASSERT_TRUE(p.ok()) << name << ": " << p.status().ToString();
    EXPECT_EQ(Pieces(*p, "Hello, world 123!\n").size() > 1, true) << name;
  }
  for (const char* required : {"default", "llama-bpe", "qwen2", "smollm", "gpt-2", "deepseek-llm", "deepseek-coder",
                               "starcoder", "refact", "falcon", "mpt", "gpt-neox", "phi-2", "tekken"}) {
    EXPECT_TRUE(PreTokenizer::Create(required).ok()) << required;
  }
  auto unknown = PreTokenizer::Create("llama-9");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(unknown.status().message().find("unknown pre-tokenizer 'llama-9'"), std::string::npos);
  EXPECT_NE(unknown.status().message().find("--tokenizer-pre"), std::string::npos);
}

// A ChatML-like vocabulary: control tokens are single ids only when asked;
// user-defined tokens always; EOG from the texts llama.cpp knows.
TEST(VocabTokenizerTest, SpecialTokensAndEndOfGeneration) {
  std::vector<std::string> vocab = Gpt2Vocab({});
  const int im_start = static_cast<int>(vocab.size());
  vocab.push_back("<|im_start|>");
  vocab.push_back("<|im_end|>");
  vocab.push_back("<tool>");
  const int im_end = im_start + 1, tool = im_start + 2;
  VocabSpec spec;
  spec.model = "gpt2";
  spec.pre = "qwen2";
  spec.tokens = vocab;
  spec.types.assign(vocab.size(), 1);
  spec.types[im_start] = spec.types[im_end] = 3;
  spec.types[tool] = 4;
  spec.eos = 256;  // <|endoftext|>
  spec.eot = im_end;
  auto t = VocabTokenizer::Create(spec);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  const std::string text = "<|im_start|>hi<tool><|im_end|>";
  auto plain = (*t)->Encode(text, EncodeOptions{.add_special = false, .parse_special = false});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(std::count(plain->begin(), plain->end(), im_start), 0);
  EXPECT_EQ(std::count(plain->begin(), plain->end(), tool), 1);  // user-defined: always one token
  EXPECT_EQ((*t)->Decode(*plain), text);
  auto parsed = (*t)->Encode(text, EncodeOptions{.add_special = false, .parse_special = true});
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, (std::vector<int>{im_start, 'h', 'i', tool, im_end}));  // byte b has id b here
  EXPECT_TRUE((*t)->IsEndOfGeneration(im_end));
  EXPECT_TRUE((*t)->IsEndOfGeneration(256));
  EXPECT_FALSE((*t)->IsEndOfGeneration(im_start));
  EXPECT_FALSE((*t)->IsEndOfGeneration(-1));
  EXPECT_FALSE((*t)->IsEndOfGeneration(1 << 20));
  EXPECT_EQ((*t)->eot(), im_end);
}

// The Llama 3 vocabulary (conformance kit): BOS by default, the chat
// template's control tokens, and its end-of-generation ids.
TEST(VocabTokenizerTest, Llama3SpecialTokens) {
  auto file = MappedFile::Open(SharedPath("conformance/tokenizers/ggml-vocab-llama-bpe.gguf"));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  auto gguf = GgufFile::Parse(file->data(), file->size(), "llama-bpe");
  ASSERT_TRUE(gguf.ok());
  auto t = LoadGgufTokenizer(*gguf);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto with_bos = (*t)->Encode("Hello", true);
  ASSERT_TRUE(with_bos.ok());
  EXPECT_EQ(*with_bos, (std::vector<int>{128000, 9906}));
  auto eot = (*t)->Encode("<|eot_id|>", EncodeOptions{.add_special = false, .parse_special = true});
  EXPECT_EQ(*eot, std::vector<int>{128009});
  auto spelled = (*t)->Encode("<|eot_id|>", false);
  EXPECT_GT(spelled->size(), 1u);
  for (int id : {128001, 128009}) EXPECT_TRUE((*t)->IsEndOfGeneration(id)) << id;  // <|end_of_text|>, <|eot_id|>
  EXPECT_FALSE((*t)->IsEndOfGeneration(128000));
  EXPECT_FALSE((*t)->IsEndOfGeneration(9906));
  // --tokenizer-pre overrides the file; a name kvedge does not know is refused.
  auto bad = LoadGgufTokenizer(*gguf, "no-such-pre");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'no-such-pre'"), std::string::npos);
  auto gpt2 = LoadGgufTokenizer(*gguf, "gpt-2");
  ASSERT_TRUE(gpt2.ok());
  EXPECT_EQ(dynamic_cast<const VocabTokenizer&>(**gpt2).pre(), "gpt-2");
  EXPECT_EQ(dynamic_cast<const VocabTokenizer&>(**t).pre(), "llama-bpe");
  // Llama 3 splits " IT'S" as " IT" + "'S"; GPT-2's lower-case contractions leave "'" and "S" apart.
  EXPECT_NE(*(*gpt2)->Encode(" IT'S", false), *(*t)->Encode(" IT'S", false));
}

// A vocabulary-only GGUF naming a pre-tokenizer kvedge does not know is
// refused with its name, never tokenized with another split.
TEST(VocabTokenizerTest, UnknownPreInFileIsRefused) {
  const std::string path = testing::TempDir() + "/unknown_pre.gguf";
  {
    GgufWriter w;
    w.SetString("general.architecture", "llama");
    w.SetString("tokenizer.ggml.model", "gpt2");
    w.SetString("tokenizer.ggml.pre", "llama-9");
    w.SetStringArray("tokenizer.ggml.tokens", Gpt2Vocab({"a b"}));
    w.SetStringArray("tokenizer.ggml.merges", {"a b"});
    ASSERT_TRUE(w.Begin(path).ok());
    ASSERT_TRUE(w.Finish().ok());
  }
  auto file = MappedFile::Open(path);
  ASSERT_TRUE(file.ok());
  auto gguf = GgufFile::Parse(file->data(), file->size(), path);
  ASSERT_TRUE(gguf.ok()) << gguf.status().ToString();
  auto t = LoadGgufTokenizer(*gguf);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("unknown pre-tokenizer 'llama-9'"), std::string::npos) << t.status().message();
  auto overridden = LoadGgufTokenizer(*gguf, "gpt-2");
  ASSERT_TRUE(overridden.ok()) << overridden.status().ToString();
  EXPECT_EQ(*(*overridden)->Encode("ab", false), std::vector<int>{256});  // the merge "a b"
}

}  // namespace
}  // namespace kvedge
