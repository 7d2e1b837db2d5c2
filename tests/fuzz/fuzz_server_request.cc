// Fuzzes kvedge serve's request path up to the model: an HTTP body parsed as
// a chat completion request (JSON → checked fields → messages) and rendered
// through the chat template, and the same body as a completion, tokenize and
// detokenize request. Any input must give a request or a 400 error with a
// message — never a crash, a hang or an unbounded allocation.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/conversation.h"
#include "runtime/server/api.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  const kvedge::server::RequestLimits limits;
  kvedge::server::ChatRequest chat;
  if (const auto e = kvedge::server::ParseChatRequest(body, limits, &chat)) {
    if (e->http_status != 400 || e->message.empty()) __builtin_trap();
    if (kvedge::server::ErrorJson(*e).empty()) __builtin_trap();
  } else {
    if (chat.messages.empty() || chat.params.max_tokens < 0 || chat.params.max_tokens > limits.max_tokens_limit) {
      __builtin_trap();
    }
    kvedge::chat::ConversationOptions options;
    options.template_source = kvedge::chat::kChatMlTemplate;
    options.bos_token = "<s>";
    options.eos_token = "</s>";
    const auto rendered = kvedge::chat::Conversation::RenderMessages(options, chat.messages, true);
    if (rendered.ok() && rendered->find(chat.messages.back().content) == std::string::npos) __builtin_trap();
  }
  kvedge::server::CompletionRequest completion;
  (void)kvedge::server::ParseCompletionRequest(body, limits, &completion);
  kvedge::server::TokenizeRequest tokenize;
  (void)kvedge::server::ParseTokenizeRequest(body, &tokenize);
  std::vector<int> ids;
  if (!kvedge::server::ParseDetokenizeRequest(body, 512, &ids)) {
    for (int id : ids) {
      if (id < 0 || id >= 512) __builtin_trap();
    }
  }
  return 0;
}
