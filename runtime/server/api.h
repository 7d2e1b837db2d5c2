// The OpenAI-compatible request and response shapes of `kvedge serve`:
// parsing untrusted JSON bodies into requests (every field checked for type
// and range, unknown fields ignored) and the error shape
// {"error": {"message", "type", "param", "code"}} with its HTTP status.
#ifndef KVEDGE_RUNTIME_SERVER_API_H_
#define KVEDGE_RUNTIME_SERVER_API_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/chat/conversation.h"

namespace kvedge::server {

// An error as the client sees it.
struct ApiError {
  int http_status = 400;
  std::string type = "invalid_request_error";  // OpenAI's error types
  std::string message;
  std::string param;   // the request field at fault ("" if none)
  std::string code;    // a short machine-readable code ("" if none)
  int retry_after = 0; // seconds, for 429/503 (sent as Retry-After)
};
ApiError BadRequest(std::string message, std::string param = "", std::string code = "");
// {"error": {...}}, param and code null when empty.
std::string ErrorJson(const ApiError& e);

// Limits a request must respect; set by the server's flags.
struct RequestLimits {
  int64_t default_max_tokens = 256;   // when the request gives none
  int64_t max_tokens_limit = 4096;    // larger max_tokens are clamped to this
  size_t max_messages = 4096;
};

// The sampling and stopping fields shared by both endpoints.
struct GenerationParams {
  int64_t max_tokens = 0;           // after defaults and clamping, ≥ 0
  bool max_tokens_clamped = false;  // the request asked for more than the limit
  float temperature = 1.0f;         // OpenAI's default; 0 = greedy
  float top_p = 1.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;    // ≤ TextStream::kMaxStopStrings, each valid UTF-8 and ≤ kMaxStopBytes
  bool stream = false;
  std::string model;                // echoed back; any value is accepted
};

struct ChatRequest {
  std::vector<chat::ChatMessage> messages;
  GenerationParams params;
};

struct CompletionRequest {
  std::string prompt;
  GenerationParams params;
};

// Parse a request body. On error returns the error (status 400) naming the
// field, and leaves *out unspecified.
std::optional<ApiError> ParseChatRequest(std::string_view body, const RequestLimits& limits, ChatRequest* out);
std::optional<ApiError> ParseCompletionRequest(std::string_view body, const RequestLimits& limits,
                                               CompletionRequest* out);

// POST /tokenize {"content": string, "add_special": bool} and
// POST /detokenize {"tokens": [int]} (llama.cpp's server shapes).
struct TokenizeRequest {
  std::string content;
  bool add_special = false;
};
std::optional<ApiError> ParseTokenizeRequest(std::string_view body, TokenizeRequest* out);
// Token ids must lie in [0, vocab_size).
std::optional<ApiError> ParseDetokenizeRequest(std::string_view body, int vocab_size, std::vector<int>* out);

// Constant-time comparison of an Authorization header with "Bearer KEY".
bool BearerMatches(std::string_view header, std::string_view key);

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_API_H_
