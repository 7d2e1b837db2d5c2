// A model's chat template and its bos/eos token strings, read from GGUF
// metadata (tokenizer.chat_template, tokenizer.ggml.{bos,eos}_token_id and
// tokenizer.ggml.tokens). Compiled into kvedge_runtime (it reads model files);
// the interpreter itself is kvedge_chat.
#ifndef KVEDGE_RUNTIME_CHAT_GGUF_CHAT_TEMPLATE_H_
#define KVEDGE_RUNTIME_CHAT_GGUF_CHAT_TEMPLATE_H_

#include <string>

#include "platform/status.h"
#include "runtime/model/gguf.h"

namespace kvedge::chat {

struct ModelChatTemplate {
  std::string source;        // the Jinja source; kChatMlTemplate when the model has none
  bool from_model = false;   // false: the ChatML fallback (callers warn)
  std::string bos_token;     // empty when the vocabulary names no BOS
  std::string eos_token;
};

// From parsed metadata. Errors: a chat template or token id of the wrong
// type, a token id outside the vocabulary.
StatusOr<ModelChatTemplate> ChatTemplateFromGguf(const GgufFile& gguf);

// Maps and parses the GGUF at `path` (metadata only) and reads it as above.
StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& path);

}  // namespace kvedge::chat

#endif  // KVEDGE_RUNTIME_CHAT_GGUF_CHAT_TEMPLATE_H_
