// Conversation on stories260K (no chat template: ChatML) — each turn feeds
// only the unseen suffix, /reset empties, Save/Load continues exactly.
#include "runtime/chat/conversation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "runtime/chat/chat_template.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/stories.h"
#include "tests/testing/test_data.h"

namespace kvedge::chat {
namespace {

class ConversationTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = &testing::StoriesModel();
    tok_ = &testing::StoriesTokenizer();
  }

  std::unique_ptr<Conversation> New(int capacity = 512, std::string system = "You tell short stories.") {
    SessionOptions o;
    o.kv.capacity = capacity;
    o.kv.policy = EvictionPolicy::kSinks;
    o.kv.sinks = 4;
    auto s = Session::Create(*model_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    SamplerOptions so;
    so.seed = 1234;
    auto sampler = Sampler::Create(so, model_->config.vocab_size);
    EXPECT_TRUE(sampler.ok());
    ConversationOptions co;
    co.template_source = kChatMlTemplate;
    co.bos_token = "<s>";
    co.eos_token = "</s>";
    co.system_prompt = std::move(system);
    auto c = Conversation::Create(*tok_, std::move(*s), std::move(*sampler), std::move(co));
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return std::move(c).value();
  }

  static std::string Turn(Conversation& c, const std::string& user, TurnStats* stats = nullptr) {
    EXPECT_TRUE(c.AddMessage("user", user).ok());
    std::string out;
    auto st = c.GenerateReply(40, nullptr, [&](std::string_view t) {
      out.append(t);
      return true;
    });
    EXPECT_TRUE(st.ok()) << st.status().ToString();
    if (stats != nullptr && st.ok()) *stats = *st;
    return out;
  }

  static const ModelWeights* model_;
  static const Tokenizer* tok_;
};
const ModelWeights* ConversationTest::model_ = nullptr;
const Tokenizer* ConversationTest::tok_ = nullptr;

TEST_F(ConversationTest, EndOfTurnIsTheTemplatesText) { EXPECT_EQ(New()->end_of_turn(), "<|im_end|>"); }

TEST_F(ConversationTest, SecondTurnFeedsOnlyTheSuffix) {
  auto c = New();
  TurnStats t1, t2;
  const std::string r1 = Turn(*c, "Tell me about a cat.", &t1);
  EXPECT_FALSE(t1.refed);
  const uint64_t fed_after_1 = c->session().tokens_fed();
  EXPECT_EQ(fed_after_1, static_cast<uint64_t>(t1.prompt_tokens + t1.reply_tokens));
  ASSERT_EQ(c->messages().size(), 3u);
  EXPECT_EQ(c->messages()[2].role, "assistant");
  EXPECT_EQ(c->messages()[2].content, r1);

  // The next rendering starts with everything fed: only its tail is fed.
  ASSERT_TRUE(c->AddMessage("user", "And a dog?").ok());
  const std::string full = c->Render(true).value();
  auto st = c->GenerateReply(40, nullptr, [](std::string_view) { return true; });
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  t2 = *st;
  EXPECT_FALSE(t2.refed);
  const auto all = tok_->Encode(full, true);
  ASSERT_TRUE(all.ok());
  EXPECT_GT(t2.prompt_tokens, 0);
  EXPECT_LT(static_cast<size_t>(t2.prompt_tokens) * 3, all->size()) << "the second turn fed most of the chat again";
  EXPECT_EQ(c->session().tokens_fed(), fed_after_1 + static_cast<uint64_t>(t2.prompt_tokens + t2.reply_tokens));
}

TEST_F(ConversationTest, ResetEmptiesTheCacheAndKeepsTheSystemPrompt) {
  auto c = New();
  const std::string first = Turn(*c, "Once upon a time");
  Turn(*c, "Then what?");
  c->Reset();
  EXPECT_EQ(c->session().tokens_fed(), 0u);
  EXPECT_EQ(c->session().cache().Stats().tokens_held, 0u);
  ASSERT_EQ(c->messages().size(), 1u);
  EXPECT_EQ(c->messages()[0].role, "system");
  // The same first turn from an empty cache is fed in full again.
  TurnStats t;
  Turn(*c, "Once upon a time", &t);
  EXPECT_EQ(c->session().tokens_fed(), static_cast<uint64_t>(t.prompt_tokens + t.reply_tokens));
}

TEST_F(ConversationTest, RefeedsWhenTheTemplateRewritesHistory) {
  // A template that shows only the last user message: each rendering drops
  // what was fed, so the cache starts again.
  SessionOptions o;
  o.kv.capacity = 256;
  auto s = Session::Create(*model_, o);
  ASSERT_TRUE(s.ok());
  auto sampler = Sampler::Create(SamplerOptions{}, model_->config.vocab_size);
  ConversationOptions co;
  co.template_source = "{{ messages[-1]['content'] }}{% if add_generation_prompt %}:{% endif %}";
  auto c = Conversation::Create(*tok_, std::move(*s), std::move(*sampler), std::move(co));
  ASSERT_TRUE(c.ok());
  TurnStats a, b;
  Turn(**c, "One day", &a);
  Turn(**c, "Lily saw", &b);
  EXPECT_FALSE(a.refed);
  EXPECT_TRUE(b.refed);
  EXPECT_EQ((*c)->session().tokens_fed(), static_cast<uint64_t>(b.prompt_tokens + b.reply_tokens));
}

TEST_F(ConversationTest, SaveLoadContinuesAsIfNeverStopped) {
  char dir[] = "/tmp/kvedge_conv_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/chat.kvs";
  auto straight = New(96);  // small: the chat evicts
  Turn(*straight, "Tell me about a cat.");
  const std::string expected = Turn(*straight, "And a dog?");

  auto first = New(96);
  Turn(*first, "Tell me about a cat.");
  ASSERT_TRUE(first->Save(path).ok());
  auto second = New(96);
  ASSERT_TRUE(second->Load(path).ok());
  EXPECT_EQ(second->messages().size(), first->messages().size());
  TurnStats t;
  EXPECT_EQ(Turn(*second, "And a dog?", &t), expected);
  EXPECT_FALSE(t.refed);

  // A conversation file that does not match its session file is refused.
  Turn(*first, "More!");
  ASSERT_TRUE(first->Save(path + ".other").ok());
  std::rename((path + ".other.chat").c_str(), (path + ".chat").c_str());
  auto third = New(96);
  const Status s = third->Load(path);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("another state"), std::string::npos) << s.ToString();
  EXPECT_EQ(third->session().tokens_fed(), 0u);
  EXPECT_EQ(New(96)->Load(std::string(dir) + "/missing.kvs").code(), StatusCode::kNotFound);
  // Hostile conversation files: refused by name, nothing restored.
  for (const char* junk : {"", "[]", "{\"kvedge_conversation\": 1}", "{\"kvedge_conversation\": 2}",
                           "{\"kvedge_conversation\": 1, \"tokens_fed\": 1, \"history_hash\": 2, "
                           "\"fed_text_hex\": \"zz\", \"messages\": []}",
                           "{\"kvedge_conversation\": 1, \"tokens_fed\": 1, \"history_hash\": 2, "
                           "\"fed_text_hex\": \"\", \"messages\": [{\"role\": 3}]}"}) {
    std::ofstream(path + ".chat", std::ios::binary | std::ios::trunc) << junk;
    auto fresh = New(96);
    const Status bad = fresh->Load(path);
    EXPECT_EQ(bad.code(), StatusCode::kDataLoss) << junk << ": " << bad.ToString();
    EXPECT_EQ(fresh->session().tokens_fed(), 0u) << junk;
  }
  std::remove((path + ".other").c_str());
  std::remove((path + ".chat").c_str());
  std::remove(path.c_str());
  rmdir(dir);
}

TEST_F(ConversationTest, RefusesInvalidUtf8AndEmptyRoles) {
  auto c = New();
  EXPECT_EQ(c->AddMessage("user", "bad \xff").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->AddMessage("", "x").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->messages().size(), 1u);
}

// A real byte-level vocabulary with random weights: replies full of broken
// UTF-8 (shown as U+FFFD) still leave the next rendering a continuation of
// what was fed, so no turn feeds the chat again.
TEST(ConversationBytesTest, BrokenUtf8RepliesDoNotForceARefeed) {
  auto model = LoadModel(testing::SharedPath("conformance/architectures/llama-linear.gguf"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  auto tok = LoadTokenizer(**model);
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  SessionOptions o;
  o.kv.capacity = 256;
  auto s = Session::Create(**model, o);
  ASSERT_TRUE(s.ok());
  SamplerOptions so;
  so.seed = 1;
  auto sampler = Sampler::Create(so, (*model)->config.vocab_size);
  ConversationOptions co;
  co.template_source = kChatMlTemplate;
  auto c = Conversation::Create(**tok, std::move(*s), std::move(*sampler), std::move(co));
  ASSERT_TRUE(c.ok());
  bool replaced = false;
  for (const char* user : {"Hello there", "How are you?", "Tell me more."}) {
    ASSERT_TRUE((*c)->AddMessage("user", user).ok());
    auto t = (*c)->GenerateReply(12, nullptr, [](std::string_view) { return true; });
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_FALSE(t->refed) << "turn " << user;
    replaced = replaced || (*c)->messages().back().content.find("\xEF\xBF\xBD") != std::string::npos;
  }
  EXPECT_TRUE(replaced) << "the random model wrote only valid UTF-8: the test no longer tests the replacement";
}

}  // namespace
}  // namespace kvedge::chat
