// Request parsing for `kvedge serve`: untrusted JSON in, checked fields out.
#include "runtime/server/api.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/engine/generator.h"
#include "runtime/tokenizer/utf8.h"

namespace kvedge::server {
namespace {

using Json = nlohmann::json;

// The body as a JSON object, or an error.
std::optional<ApiError> ParseObject(std::string_view body, Json* out) {
  *out = Json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out->is_discarded()) return BadRequest("the request body is not valid JSON", "", "invalid_json");
  if (!out->is_object()) return BadRequest("the request body must be a JSON object", "", "invalid_json");
  return std::nullopt;
}

// The field's value, or null when absent (OpenAI treats null as absent).
const Json* Field(const Json& j, const char* name) {
  const auto it = j.find(name);
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

std::optional<ApiError> Wrong(const char* name, const char* what) {
  return BadRequest(std::string("'") + name + "' must be " + what, name, "invalid_type");
}

std::optional<ApiError> ParseParams(const Json& j, const RequestLimits& limits, GenerationParams* p) {
  *p = GenerationParams();
  p->max_tokens = limits.default_max_tokens;
  for (const char* name : {"max_tokens", "max_completion_tokens"}) {
    if (const Json* v = Field(j, name)) {
      if (!v->is_number_integer()) return Wrong(name, "an integer");
      if (v->is_number_unsigned() ? false : v->get<int64_t>() < 0) {
        return BadRequest(std::string("'") + name + "' must be ≥ 0", name, "invalid_value");
      }
      const uint64_t n = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
      p->max_tokens_clamped = n > static_cast<uint64_t>(limits.max_tokens_limit);
      p->max_tokens = p->max_tokens_clamped ? limits.max_tokens_limit : static_cast<int64_t>(n);
    }
  }
  if (const Json* v = Field(j, "temperature")) {
    if (!v->is_number()) return Wrong("temperature", "a number");
    const double t = v->get<double>();
    if (!(t >= 0 && t <= 2)) return BadRequest("'temperature' must be in [0, 2]", "temperature", "invalid_value");
    p->temperature = static_cast<float>(t);
  }
  if (const Json* v = Field(j, "top_p")) {
    if (!v->is_number()) return Wrong("top_p", "a number");
    const double t = v->get<double>();
    if (!(t > 0 && t <= 1)) return BadRequest("'top_p' must be in (0, 1]", "top_p", "invalid_value");
    p->top_p = static_cast<float>(t);
  }
  if (const Json* v = Field(j, "seed")) {
    if (!v->is_number_integer()) return Wrong("seed", "an integer");
    p->seed = v->is_number_unsigned() ? v->get<uint64_t>() : static_cast<uint64_t>(v->get<int64_t>());
  }
  if (const Json* v = Field(j, "n")) {
    if (!v->is_number_integer() || v->get<int64_t>() != 1) {
      return BadRequest("only 'n' = 1 is supported", "n", "unsupported_value");
    }
  }
  if (const Json* v = Field(j, "stream")) {
    if (!v->is_boolean()) return Wrong("stream", "a boolean");
    p->stream = v->get<bool>();
  }
  if (const Json* v = Field(j, "model")) {
    if (!v->is_string()) return Wrong("model", "a string");
    p->model = v->get<std::string>();
  }
  if (const Json* v = Field(j, "stop")) {
    if (v->is_string()) {
      p->stop.push_back(v->get<std::string>());
    } else if (v->is_array()) {
      for (const Json& s : *v) {
        if (!s.is_string()) return Wrong("stop", "a string or an array of strings");
        p->stop.push_back(s.get<std::string>());
      }
    } else {
      return Wrong("stop", "a string or an array of strings");
    }
    if (p->stop.size() > TextStream::kMaxStopStrings) {
      return BadRequest("'stop' has " + std::to_string(p->stop.size()) + " strings: at most " +
                            std::to_string(TextStream::kMaxStopStrings),
                        "stop", "invalid_value");
    }
    for (const std::string& s : p->stop) {
      if (s.empty()) return BadRequest("'stop' strings must not be empty", "stop", "invalid_value");
      if (s.size() > TextStream::kMaxStopBytes) {
        return BadRequest("a 'stop' string is " + std::to_string(s.size()) + " bytes: at most " +
                              std::to_string(TextStream::kMaxStopBytes),
                          "stop", "invalid_value");
      }
    }
  }
  return std::nullopt;
}

}  // namespace

ApiError BadRequest(std::string message, std::string param, std::string code) {
  ApiError e;
  e.message = std::move(message);
  e.param = std::move(param);
  e.code = std::move(code);
  return e;
}

std::string ErrorJson(const ApiError& e) {
  Json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? Json() : Json(e.param)},
              {"code", e.code.empty() ? Json() : Json(e.code)}}}};
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits, ChatRequest* out) {
  Json j;
  if (auto e = ParseObject(body, &j)) return e;
  const Json* messages = Field(j, "messages");
  if (messages == nullptr) return BadRequest("'messages' is required", "messages", "missing_field");
  if (!messages->is_array()) return Wrong("messages", "an array of messages");
  if (messages->empty()) return BadRequest("'messages' must not be empty", "messages", "invalid_value");
  if (messages->size() > limits.max_messages) {
    return BadRequest("'messages' has " + std::to_string(messages->size()) + " entries: at most " +
                          std::to_string(limits.max_messages),
                      "messages", "invalid_value");
  }
  out->messages.clear();
  for (size_t i = 0; i < messages->size(); ++i) {
    const Json& m = (*messages)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return BadRequest(where + " must be an object", where, "invalid_type");
    const Json* role = Field(m, "role");
    if (role == nullptr || !role->is_string() || role->get_ref<const std::string&>().empty()) {
      return BadRequest(where + ".role must be a non-empty string", where + ".role", "invalid_type");
    }
    chat::ChatMessage msg;
    msg.role = role->get<std::string>();
    const Json* content = Field(m, "content");
    if (content == nullptr && msg.role != "assistant") {
      // As OpenAI: only an assistant message (one that called tools) may
      // come without content.
      return BadRequest(where + ".content is required for role '" + msg.role + "'", where + ".content",
                        "missing_field");
    }
    if (content != nullptr) {
      if (content->is_string()) {
        msg.content = content->get<std::string>();
      } else if (content->is_array()) {  // [{"type": "text", "text": "…"}, …]
        for (const Json& part : *content) {
          const Json* type = part.is_object() ? Field(part, "type") : nullptr;
          const Json* text = part.is_object() ? Field(part, "text") : nullptr;
          if (type == nullptr || !type->is_string() || *type != "text" || text == nullptr || !text->is_string()) {
            return BadRequest(where + ".content: only text parts ({\"type\": \"text\", \"text\": …}) are supported",
                              where + ".content", "invalid_type");
          }
          msg.content += text->get<std::string>();
        }
      } else {
        return BadRequest(where + ".content must be a string or an array of text parts", where + ".content",
                          "invalid_type");
      }
    }
    out->messages.push_back(std::move(msg));
  }
  return ParseParams(j, limits, &out->params);
}

std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out) {
  Json j;
  if (auto e = ParseObject(body, &j)) return e;
  const Json* prompt = Field(j, "prompt");
  if (prompt == nullptr) return BadRequest("'prompt' is required", "prompt", "missing_field");
  if (prompt->is_string()) {
    out->prompt = prompt->get<std::string>();
  } else if (prompt->is_array() && prompt->size() == 1 && (*prompt)[0].is_string()) {
    out->prompt = (*prompt)[0].get<std::string>();
  } else {
    return Wrong("prompt", "a string (or an array of one string)");
  }
  return ParseParams(j, limits, &out->params);
}

std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out) {
  Json j;
  if (auto e = ParseObject(body, &j)) return e;
  const Json* content = Field(j, "content");
  if (content == nullptr) return BadRequest("'content' is required", "content", "missing_field");
  if (!content->is_string()) return Wrong("content", "a string");
  out->content = content->get<std::string>();
  if (const Json* v = Field(j, "add_special")) {
    if (!v->is_boolean()) return Wrong("add_special", "a boolean");
    out->add_special = v->get<bool>();
  }
  return std::nullopt;
}

std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, int vocab_size, std::vector<int>* out) {
  Json j;
  if (auto e = ParseObject(body, &j)) return e;
  const Json* tokens = Field(j, "tokens");
  if (tokens == nullptr) return BadRequest("'tokens' is required", "tokens", "missing_field");
  if (!tokens->is_array()) return Wrong("tokens", "an array of token ids");
  out->clear();
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    if (!t.is_number_integer()) return Wrong("tokens", "an array of token ids");
    const int64_t id = t.is_number_unsigned() ? static_cast<int64_t>(std::min<uint64_t>(t.get<uint64_t>(), INT64_MAX))
                                              : t.get<int64_t>();
    if (id < 0 || id >= vocab_size) {
      return BadRequest("tokens[" + std::to_string(i) + "] = " + std::to_string(id) + " is not a token id (the vocabulary has " +
                            std::to_string(vocab_size) + ")",
                        "tokens", "invalid_value");
    }
    out->push_back(static_cast<int>(id));
  }
  return std::nullopt;
}

bool BearerMatches(std::string_view header, std::string_view key) {
  static constexpr std::string_view kPrefix = "Bearer ";
  // Compare over the expected length whatever the header is, so the time
  // says nothing about how much of the key matched.
  const std::string expected = std::string(kPrefix) + std::string(key);
  unsigned diff = header.size() == expected.size() ? 0u : 1u;
  for (size_t i = 0; i < expected.size(); ++i) {
    const char got = i < header.size() ? header[i] : '\0';
    diff |= static_cast<unsigned char>(got ^ expected[i]);
  }
  return diff == 0;
}

}  // namespace kvedge::server
