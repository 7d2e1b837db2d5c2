// Reads a model's chat template and bos/eos strings from GGUF metadata.
#include "runtime/chat/gguf_chat_template.h"

#include "platform/mapped_file.h"
#include "runtime/chat/chat_template.h"

namespace kvedge::chat {
namespace {

// The vocabulary string of the token id stored under `key`; empty if absent.
StatusOr<std::string> TokenString(const GgufFile& gguf, const char* key) {
  const GgufValue* id = gguf.Find(key);
  if (!id) return std::string();
  const auto v = id->AsInt();
  if (!v) return InvalidArgument(gguf.name() + ": " + key + " is not an integer");
  const GgufValue* tokens = gguf.Find("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != GgufType::kArray || tokens->elem_type != GgufType::kString) {
    return InvalidArgument(gguf.name() + ": " + key + " is set but tokenizer.ggml.tokens is not a string array");
  }
  if (*v < 0 || static_cast<uint64_t>(*v) >= tokens->strings.size()) {
    return InvalidArgument(gguf.name() + ": " + key + " = " + std::to_string(*v) + " is outside the vocabulary of " +
                           std::to_string(tokens->strings.size()) + " tokens");
  }
  return std::string(tokens->strings[static_cast<size_t>(*v)]);
}

}  // namespace

StatusOr<ModelChatTemplate> ChatTemplateFromGguf(const GgufFile& gguf) {
  ModelChatTemplate out;
  if (const GgufValue* t = gguf.Find("tokenizer.chat_template")) {
    if (t->type != GgufType::kString) {
      return InvalidArgument(gguf.name() + ": tokenizer.chat_template is a " + GgufTypeName(t->type) +
                             ", expected a string");
    }
    out.source = std::string(t->str);
    out.from_model = true;
  } else {
    out.source = kChatMlTemplate;
  }
  KVEDGE_ASSIGN_OR_RETURN(out.bos_token, TokenString(gguf, "tokenizer.ggml.bos_token_id"));
  KVEDGE_ASSIGN_OR_RETURN(out.eos_token, TokenString(gguf, "tokenizer.ggml.eos_token_id"));
  return out;
}

StatusOr<ModelChatTemplate> LoadModelChatTemplate(const std::string& path) {
  KVEDGE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(path));
  KVEDGE_ASSIGN_OR_RETURN(GgufFile gguf, GgufFile::Parse(file.data(), file.size(), path));
  return ChatTemplateFromGguf(gguf);
}

}  // namespace kvedge::chat
