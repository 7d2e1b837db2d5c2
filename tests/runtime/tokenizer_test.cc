// Tokenizers: llama2.c tokenizer.bin and the GGUF-embedded vocabulary on real
// text, invalid UTF-8, and GPT-2 byte-level BPE on a synthetic vocabulary.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "runtime/model/gguf.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/gpt2_tokenizer.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
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
  EXPECT_EQ(gguf_->TokenText(403), " Once");      // U+2581 mapped to ' '
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

TEST_F(SharedTokenizers, InvalidUtf8NamesOffset) {
  for (const Tokenizer* t : {bin_.get(), gguf_.get()}) {
    auto r = t->Encode(std::string("Once upon a time\xFF"), true);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("invalid UTF-8 at byte 16 of the prompt"), std::string::npos)
        << r.status().message();
    auto overlong = t->Encode(std::string("ab\xC0\xAF"), false);
    ASSERT_FALSE(overlong.ok());
    EXPECT_NE(overlong.status().message().find("byte 2"), std::string::npos);
    auto truncated = t->Encode(std::string("abc\xE2\x96"), false);
    ASSERT_FALSE(truncated.ok());
    EXPECT_NE(truncated.status().message().find("byte 3"), std::string::npos);
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

TEST(Gpt2TokenizerTest, MergesInRankOrder) {
  const std::vector<std::string_view> merges = {"b c", "a b", "h e", "l l", "he ll", "hell o", "\xC4\xA0 w",
                                                "\xC4\xA0w o", "r l", "\xC4\xA0wo rl", "\xC4\xA0worl d"};
  const auto vocab = Gpt2Vocab(merges);
  const int eot = IdOf(vocab, "<|endoftext|>");
  auto t = Gpt2Tokenizer::Create(vocab, merges, eot, eot);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  auto abc = (*t)->Encode("abc", false);
  ASSERT_TRUE(abc.ok());
  EXPECT_EQ(*abc, (std::vector<int>{IdOf(vocab, "a"), IdOf(vocab, "bc")}));  // "b c" ranks first
  auto hw = (*t)->Encode("hello world", true);
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(*hw, (std::vector<int>{eot, IdOf(vocab, "hello"), IdOf(vocab, "\xC4\xA0world")}));
  EXPECT_EQ((*t)->DecodePiece(eot, IdOf(vocab, "\xC4\xA0world")), " world");  // no SentencePiece space stripping

  // Swapping the first two ranks changes the result.
  std::vector<std::string_view> swapped = merges;
  std::swap(swapped[0], swapped[1]);
  auto t2 = Gpt2Tokenizer::Create(Gpt2Vocab(swapped), swapped, -1, -1);
  ASSERT_TRUE(t2.ok());
  auto abc2 = (*t2)->Encode("abc", true);  // no BOS in this vocabulary: nothing added
  ASSERT_TRUE(abc2.ok());
  EXPECT_EQ(*abc2, (std::vector<int>{IdOf(Gpt2Vocab(swapped), "ab"), IdOf(Gpt2Vocab(swapped), "c")}));
}

TEST(Gpt2TokenizerTest, BytesRoundTrip) {
  const std::vector<std::string_view> merges = {"\xC4\xA0 t", "h e", "\xC4\xA0t he"};
  const auto vocab = Gpt2Vocab(merges);
  auto t = Gpt2Tokenizer::Create(vocab, merges, -1, -1);
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
  auto bad = (*t)->Encode("ok\x80", false);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("byte 2"), std::string::npos);
}

TEST(Gpt2TokenizerTest, RejectsIncompleteVocabularyAndBadMerges) {
  std::vector<std::string> vocab = Gpt2Vocab({});
  vocab.erase(vocab.begin() + 'x');
  auto t = Gpt2Tokenizer::Create(vocab, {}, -1, -1);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no token for byte"), std::string::npos);
  auto m = Gpt2Tokenizer::Create(Gpt2Vocab({}), {"ab"}, -1, -1);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("merge #0"), std::string::npos);
}

}  // namespace
}  // namespace kvedge
