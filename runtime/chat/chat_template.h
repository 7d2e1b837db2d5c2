// Chat templates: render a model's tokenizer.chat_template (Jinja) for a list
// of messages exactly as Hugging Face transformers' apply_chat_template does.
// The variables a template sees are those transformers passes: messages,
// add_generation_prompt, bos_token, eos_token, and tools = documents = None.
#ifndef KVEDGE_RUNTIME_CHAT_CHAT_TEMPLATE_H_
#define KVEDGE_RUNTIME_CHAT_CHAT_TEMPLATE_H_

#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "platform/status.h"
#include "runtime/chat/jinja_render.h"

namespace kvedge::chat {

// The fallback for models whose GGUF has no tokenizer.chat_template: ChatML
// (<|im_start|>role\ncontent<|im_end|>\n per message, then
// <|im_start|>assistant\n with add_generation_prompt), transformers' former
// default template.
extern const char kChatMlTemplate[];

struct ChatTemplateInputs {
  // A JSON array of message objects ({"role": …, "content": …, and any other
  // fields the template reads}), or an object holding one under "messages".
  std::string messages_json;
  bool add_generation_prompt = false;
  std::string bos_token;
  std::string eos_token;
  // strftime_now()'s time; the local time when unset.
  std::optional<std::tm> now;
};

// Parses `messages_json` into the messages value (insertion-ordered objects,
// integers and floats as Python's json.loads gives them).
StatusOr<jinja::Value> ParseMessagesJson(std::string_view messages_json);

// "YYYY-MM-DDTHH:MM[:SS]" (a space for the T also accepted) → broken-down
// local time with its weekday and day of the year filled in.
StatusOr<std::tm> ParseIsoTime(std::string_view text);

// Parses and renders `template_source` for the inputs.
StatusOr<std::string> RenderChatTemplate(std::string_view template_source, const ChatTemplateInputs& inputs,
                                         const jinja::RenderLimits& limits = {});

}  // namespace kvedge::chat

#endif  // KVEDGE_RUNTIME_CHAT_CHAT_TEMPLATE_H_
