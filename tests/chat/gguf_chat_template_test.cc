// A model's chat template and bos/eos strings from GGUF metadata, and the
// ChatML fallback for models without one.
#include <string>

#include "gtest/gtest.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/model/gguf_writer.h"
#include "tests/testing/test_data.h"

namespace kvedge::chat {
namespace {

std::string WriteVocabGguf(const std::string& name, const char* chat_template, int bos, int eos) {
  const std::string path = testing::TempDir() + "/" + name;
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetStringArray("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "hi"});
  w.SetUint32("tokenizer.ggml.bos_token_id", bos);
  w.SetUint32("tokenizer.ggml.eos_token_id", eos);
  if (chat_template) w.SetString("tokenizer.chat_template", chat_template);
  EXPECT_TRUE(w.Begin(path).ok());
  EXPECT_TRUE(w.Finish().ok());
  return path;
}

TEST(GgufChatTemplate, ReadsTemplateAndSpecialTokens) {
  const auto t = LoadModelChatTemplate(
      WriteVocabGguf("t.gguf", "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}", 1, 2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(t->from_model);
  EXPECT_EQ(t->bos_token, "<s>");
  EXPECT_EQ(t->eos_token, "</s>");
  ChatTemplateInputs in;
  in.messages_json = R"([{"role": "user", "content": "hi"}])";
  in.bos_token = t->bos_token;
  in.eos_token = t->eos_token;
  const auto r = RenderChatTemplate(t->source, in);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(*r, "<s>[hi]</s>");
}

TEST(GgufChatTemplate, FallsBackToChatMl) {
  const auto t = LoadModelChatTemplate(WriteVocabGguf("none.gguf", nullptr, 1, 2));
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_FALSE(t->from_model);
  EXPECT_EQ(t->source, kChatMlTemplate);
  // A real model without a template (llama.cpp's stories260K conversion).
  const auto real = LoadModelChatTemplate(testing::SharedPath("models/stories260K_llamacpp.gguf"));
  ASSERT_TRUE(real.ok()) << real.status().ToString();
  EXPECT_FALSE(real->from_model);
  EXPECT_EQ(real->bos_token, "<s>");
  EXPECT_EQ(real->eos_token, "</s>");
}

TEST(GgufChatTemplate, BadMetadataIsAnError) {
  const auto t = LoadModelChatTemplate(WriteVocabGguf("bad.gguf", "x", 1, 99));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("outside the vocabulary"), std::string::npos) << t.status().message();
  EXPECT_FALSE(LoadModelChatTemplate(testing::TempDir() + "/missing.gguf").ok());
}

}  // namespace
}  // namespace kvedge::chat
