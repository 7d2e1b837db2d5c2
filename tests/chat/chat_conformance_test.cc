// Every case of ../shared/conformance/chat/cases.json: the template rendered
// for the case's messages and flags must equal transformers' text byte for
// byte, or fail where transformers fails (with the template's own message for
// raise_exception).
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "runtime/chat/chat_template.h"
#include "tests/testing/test_data.h"

namespace kvedge::chat {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Shows where two renderings part.
std::string FirstDifference(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  const size_t from = i > 40 ? i - 40 : 0;
  return "at byte " + std::to_string(i) + "\n  got:  " + nlohmann::json(got.substr(from, 120)).dump() +
         "\n  want: " + nlohmann::json(want.substr(from, 120)).dump();
}

TEST(ChatConformance, EveryCaseMatchesTransformers) {
  const std::string dir = testing::SharedPath("conformance/chat/");
  const std::string cases_text = ReadFile(dir + "cases.json");
  ASSERT_FALSE(cases_text.empty()) << "missing " << dir << "cases.json";
  const nlohmann::ordered_json cases = nlohmann::ordered_json::parse(cases_text);
  ASSERT_GT(cases.size(), 100u);
  int passed = 0, errors_expected = 0;
  for (const auto& c : cases) {
    const std::string id = c.at("id").get<std::string>();
    SCOPED_TRACE(id);
    const std::string source = ReadFile(dir + "templates/" + c.at("template").get<std::string>());
    ASSERT_FALSE(source.empty()) << id;
    ChatTemplateInputs in;
    in.messages_json = c.at("messages").dump();
    in.add_generation_prompt = c.value("add_generation_prompt", false);
    in.bos_token = c.value("bos_token", "");
    in.eos_token = c.value("eos_token", "");
    if (c.contains("now") && c["now"].is_string()) {
      auto now = ParseIsoTime(c["now"].get<std::string>());
      ASSERT_TRUE(now.ok()) << now.status().ToString();
      in.now = *now;
    }
    const auto got = RenderChatTemplate(source, in);
    if (c.value("expected_error", false)) {
      ++errors_expected;
      EXPECT_FALSE(got.ok()) << id << ": rendered instead of failing";
      if (!got.ok() && c.value("error_kind", "") == "raise_exception") {
        EXPECT_EQ(got.status().message(), c.at("error_message").get<std::string>()) << id;
      }
      if (!got.ok()) ++passed;
      continue;
    }
    ASSERT_TRUE(c.at("expected").is_string()) << id;
    const std::string want = c["expected"].get<std::string>();
    if (!got.ok()) {
      ADD_FAILURE() << id << ": " << got.status().ToString();
      continue;
    }
    EXPECT_TRUE(*got == want) << id << ": " << FirstDifference(*got, want);
    if (*got == want) ++passed;
  }
  std::printf("chat conformance: %d of %zu cases pass (%d expect an error)\n", passed, cases.size(), errors_expected);
}

}  // namespace
}  // namespace kvedge::chat
