// The HTTP face of `kvedge serve` (cpp-httplib): OpenAI-compatible routes,
// API-key check, body and time limits, errors in OpenAI's JSON shape. Parses
// and renders requests on the handler threads; all model work goes through
// the Scheduler.
#ifndef KVEDGE_RUNTIME_SERVER_HTTP_SERVER_H_
#define KVEDGE_RUNTIME_SERVER_HTTP_SERVER_H_

#include <memory>
#include <string>

#include "platform/status.h"
#include "runtime/chat/conversation.h"
#include "runtime/server/api.h"
#include "runtime/server/scheduler.h"
#include "runtime/server/session_manager.h"

namespace httplib {
class Server;
}

namespace kvedge::server {

struct HttpOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                    // 0: any free port
  std::string api_key;                // empty: no check
  std::string model_name;             // GET /v1/models
  size_t max_body_bytes = 1 << 20;    // larger bodies: 413
  int read_timeout_s = 30;            // a client that sends nothing for this long is dropped
  int write_timeout_s = 30;           // a client that reads nothing for this long is dropped (its sequence cancelled)
  int handler_threads = 64;           // connections served at once
  RequestLimits limits;
};

class HttpServer {
 public:
  // Borrows everything; they must outlive it.
  HttpServer(SessionManager& sessions, Scheduler& scheduler, const Tokenizer& tokenizer,
             chat::ConversationOptions chat, HttpOptions options);
  ~HttpServer();
  // Binds the socket. Returns the port. Errors: the address cannot be bound.
  StatusOr<int> Bind();
  // Serves until Stop(); returns once the handlers in flight have finished.
  void Run();
  // Stops accepting (callable from any thread).
  void Stop();

 private:
  void Routes();

  SessionManager& sessions_;
  Scheduler& scheduler_;
  const Tokenizer& tokenizer_;
  chat::ConversationOptions chat_;
  HttpOptions options_;
  std::unique_ptr<httplib::Server> http_;
  double started_ = 0;
};

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_HTTP_SERVER_H_
