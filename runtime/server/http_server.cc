// Routes of `kvedge serve`.
#include "runtime/server/http_server.h"

#include <httplib.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <chrono>
#include <ctime>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "platform/clock.h"
#include "runtime/server/chat_page.h"
#include "runtime/server/client_socket.h"

namespace kvedge::server {
namespace {

// Options of the listening socket; Linux copies them to every accepted
// connection. They replace httplib's default, which sets SO_REUSEPORT: with
// it a second server could bind the same port and take a share of the
// connections (and, with another session directory, of the conversations).
// SO_REUSEADDR still lets a restarted server bind at once. Keepalive (idle
// kKeepIdleS, then kKeepCount probes kKeepIntervalS apart) and
// TCP_USER_TIMEOUT end a connection whose peer vanished without a FIN or RST
// (power lost, network gone): ClientSocket::Gone then sees the error and the
// sequence stops, where it would otherwise decode to max_tokens.
constexpr int kKeepIdleS = 15, kKeepIntervalS = 5, kKeepCount = 3;
constexpr unsigned kUserTimeoutMs = 30000;

void ServerSocketOptions(socket_t sock) {
  const int yes = 1;
  setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  setsockopt(sock, SOL_SOCKET, SO_KEEPALIVE, &yes, sizeof(yes));
  setsockopt(sock, IPPROTO_TCP, TCP_KEEPIDLE, &kKeepIdleS, sizeof(kKeepIdleS));
  setsockopt(sock, IPPROTO_TCP, TCP_KEEPINTVL, &kKeepIntervalS, sizeof(kKeepIntervalS));
  setsockopt(sock, IPPROTO_TCP, TCP_KEEPCNT, &kKeepCount, sizeof(kKeepCount));
  setsockopt(sock, IPPROTO_TCP, TCP_USER_TIMEOUT, &kUserTimeoutMs, sizeof(kUserTimeoutMs));
}

using Json = nlohmann::json;

std::string Dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

void SendJson(httplib::Response& res, int status, const Json& j) {
  res.status = status;
  res.set_content(Dump(j), "application/json");
}

void SendError(httplib::Response& res, const ApiError& e) {
  res.status = e.http_status;
  if (e.retry_after > 0) res.set_header("Retry-After", std::to_string(e.retry_after));
  res.set_content(ErrorJson(e), "application/json");
}

ApiError ErrorFor(int status) {
  ApiError e;
  e.http_status = status;
  switch (status) {
    case 404: e.message = "no such endpoint"; e.code = "not_found"; break;
    case 405: e.message = "method not allowed"; e.code = "method_not_allowed"; break;
    case 413: e.message = "the request body is too large"; e.code = "payload_too_large"; break;
    case 414: e.message = "the request URI is too long"; e.code = "uri_too_long"; break;
    default: e.message = "the request could not be served (HTTP " + std::to_string(status) + ")"; break;
  }
  if (status >= 500) e.type = "server_error";
  return e;
}

// The kvedge extension every chat completion carries.
Json KvedgeFields(const Job& job) {
  return Json{{"session", job.session_id},         {"cached_tokens", job.cached_tokens},
              {"tokens_in_cache", job.tokens_in_cache}, {"kv_bytes", job.kv_bytes},
              {"kv_budget_bytes", job.kv_budget_bytes}, {"ttft_s", job.ttft_seconds},
              {"max_tokens", job.params.max_tokens}};
}

Json Usage(const Job& job) {
  return Json{{"prompt_tokens", job.prompt_tokens},
              {"completion_tokens", job.completion_tokens},
              {"total_tokens", job.prompt_tokens + job.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", job.cached_tokens}}}};
}

std::string NewCompletionId(const char* prefix) {
  static std::atomic<uint64_t> counter{0};
  return std::string(prefix) + std::to_string(static_cast<uint64_t>(std::time(nullptr))) + "-" +
         std::to_string(counter.fetch_add(1));
}

}  // namespace

HttpServer::HttpServer(SessionManager& sessions, Scheduler& scheduler, const Tokenizer& tokenizer,
                       chat::ConversationOptions chat, HttpOptions options)
    : sessions_(sessions),
      scheduler_(scheduler),
      tokenizer_(tokenizer),
      chat_(std::move(chat)),
      options_(std::move(options)),
      http_(std::make_unique<httplib::Server>()) {
  started_ = static_cast<double>(std::time(nullptr));
  Routes();
}

HttpServer::~HttpServer() = default;

StatusOr<int> HttpServer::Bind() {
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
    if (port < 0) return IoError("cannot bind " + options_.host + " to a free port");
    return port;
  }
  if (!http_->bind_to_port(options_.host, port)) {
    return IoError("cannot bind " + options_.host + ":" + std::to_string(port) +
                   " (in use, or not an address of this machine)");
  }
  return port;
}

void HttpServer::Run() { http_->listen_after_bind(); }

void HttpServer::Stop() { http_->stop(); }

void HttpServer::Routes() {
  httplib::Server& s = *http_;
  s.set_payload_max_length(options_.max_body_bytes);
  s.set_read_timeout(options_.read_timeout_s, 0);
  s.set_write_timeout(options_.write_timeout_s, 0);
  s.set_keep_alive_max_count(100);
  s.set_socket_options(ServerSocketOptions);
  const int threads = options_.handler_threads;
  s.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };

  // Every error status gets OpenAI's JSON shape (httplib's own 404/413/…
  // come with no body).
  s.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const ApiError e = ErrorFor(res.status);
    res.set_content(ErrorJson(e), "application/json");
    return httplib::Server::HandlerResponse::Handled;
  }));
  const std::string key = options_.api_key;
  s.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
    if (key.empty() || req.path == "/" || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
    if (BearerMatches(req.get_header_value("Authorization"), key)) return httplib::Server::HandlerResponse::Unhandled;
    ApiError e;
    e.http_status = 401;
    e.type = "authentication_error";
    e.code = "invalid_api_key";
    e.message = "a valid API key is required (Authorization: Bearer KEY)";
    SendError(res, e);
    res.set_header("WWW-Authenticate", "Bearer");
    return httplib::Server::HandlerResponse::Handled;
  });

  s.Get("/", [](const httplib::Request&, httplib::Response& res) {
    const std::string_view page = ChatPageHtml();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  s.Get("/health", [](const httplib::Request&, httplib::Response& res) { SendJson(res, 200, {{"status", "ok"}}); });
  s.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200,
             {{"object", "list"},
              {"data", Json::array({{{"id", options_.model_name},
                                     {"object", "model"},
                                     {"created", static_cast<int64_t>(started_)},
                                     {"owned_by", "kvedge"}}})}});
  });
  s.Get("/v1/sessions", [this](const httplib::Request&, httplib::Response& res) {
    Json data = Json::array();
    for (const SessionInfo& i : sessions_.List()) {
      data.push_back({{"id", i.id},
                      {"tokens", i.tokens},
                      {"tokens_in_cache", i.tokens_in_cache},
                      {"kv_bytes", i.kv_bytes},
                      {"kv_budget_bytes", i.kv_budget_bytes},
                      {"on_disk", i.on_disk},
                      {"busy", i.busy},
                      {"last_used", i.last_used}});
    }
    SendJson(res, 200, {{"object", "list"}, {"data", std::move(data)}});
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    const SchedulerMetrics m = scheduler_.Metrics();
    const SessionTotals t = sessions_.Totals();
    std::string out;
    const auto metric = [&](const char* name, const char* type, const char* help, double value) {
      out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " ";
      char buf[64];
      std::snprintf(buf, sizeof(buf), "%.17g\n", value);
      out += buf;
    };
    metric("kvedge_requests_total", "counter", "Generation requests admitted", static_cast<double>(m.requests));
    metric("kvedge_request_errors_total", "counter", "Generation requests that failed after parsing",
           static_cast<double>(m.failed));
    metric("kvedge_prompt_tokens_total", "counter", "Prompt tokens fed", static_cast<double>(m.prompt_tokens));
    metric("kvedge_cached_prompt_tokens_total", "counter", "Prompt tokens a session already held",
           static_cast<double>(m.cached_tokens));
    metric("kvedge_generated_tokens_total", "counter", "Tokens generated", static_cast<double>(m.generated_tokens));
    metric("kvedge_decode_steps_total", "counter", "Batched decode steps", static_cast<double>(m.steps));
    metric("kvedge_decode_seconds_total", "counter", "Seconds in batched decode steps", m.decode_seconds);
    metric("kvedge_decode_tokens_per_second", "gauge", "Generated tokens per second of decode (all sequences)",
           m.decode_seconds > 0 ? static_cast<double>(m.generated_tokens) / m.decode_seconds : 0);
    metric("kvedge_ttft_seconds_sum", "counter", "Sum of times from request to first token", m.ttft_seconds_sum);
    metric("kvedge_ttft_seconds_count", "counter", "Requests with a first token", static_cast<double>(m.ttft_count));
    metric("kvedge_sequences_active", "gauge", "Sequences decoding", m.active);
    metric("kvedge_requests_queued", "gauge", "Requests waiting for a decode slot", m.queued);
    metric("kvedge_sessions_live", "gauge", "Sessions in memory", t.live);
    metric("kvedge_sessions_on_disk", "gauge", "Sessions swapped to the session directory", t.on_disk);
    metric("kvedge_sessions_capacity", "gauge", "Live sessions the budget holds", t.capacity);
    metric("kvedge_session_saves_total", "counter", "Sessions saved to disk", static_cast<double>(t.saves));
    metric("kvedge_session_restores_total", "counter", "Sessions restored from disk", static_cast<double>(t.restores));
    metric("kvedge_session_arenas_allocated_total", "counter",
           "Sessions (KV arena and scratch) allocated; at most the capacity, then reused", static_cast<double>(t.allocated));
    metric("kvedge_kv_held_bytes", "gauge", "KV arena bytes holding tokens (live sessions)",
           static_cast<double>(t.kv_held_bytes));
    metric("kvedge_kv_reserved_bytes", "gauge", "Bytes reserved by sessions in memory, live or kept for reuse (arena and scratch)",
           static_cast<double>(t.reserved_bytes));
    metric("kvedge_kv_budget_bytes", "gauge", "The total budget (--kv-budget-total)",
           static_cast<double>(t.budget_bytes));
    res.set_content(out, "text/plain; version=0.0.4");
  });
  s.Post("/tokenize", [this](const httplib::Request& req, httplib::Response& res) {
    TokenizeRequest r;
    if (auto e = ParseTokenizeRequest(req.body, &r)) return SendError(res, *e);
    auto ids = tokenizer_.Encode(r.content, EncodeOptions{r.add_special, /*parse_special=*/false});
    if (!ids.ok()) return SendError(res, BadRequest(ids.status().message(), "content"));
    SendJson(res, 200, {{"tokens", *ids}});
  });
  s.Post("/detokenize", [this](const httplib::Request& req, httplib::Response& res) {
    std::vector<int> ids;
    if (auto e = ParseDetokenizeRequest(req.body, tokenizer_.vocab_size(), &ids)) return SendError(res, *e);
    SendJson(res, 200, {{"content", tokenizer_.Decode(ids)}});
  });

  // Both generation endpoints: submit, wait for admission (errors before the
  // reply keep their status), then one JSON body or an SSE stream. Until the
  // first byte is written a client that leaves is noticed on its socket
  // (ClientSocket, checked every kLivenessMs); a stream notices it when a
  // write fails. Either way its job is cancelled and its sequence stops at
  // the next step.
  static constexpr int kLivenessMs = 100;
  const auto generate = [this](const httplib::Request& req, httplib::Response& res, std::shared_ptr<Job> job,
                               bool chat) {
    if (auto e = scheduler_.Submit(job)) return SendError(res, *e);
    const ClientSocket client = ClientSocket::Find(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    const auto cancel_if_gone = [&] {
      if (!job->cancel.load() && client.Gone()) job->cancel.store(true);
    };
    while (!job->WaitAdmitted(kLivenessMs)) cancel_if_gone();
    {
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->error.has_value()) return SendError(res, *job->error);
    }
    const std::string id = NewCompletionId(chat ? "chatcmpl-" : "cmpl-");
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    const std::string model = options_.model_name;
    if (!job->params.stream) {
      std::string all, part;
      for (;;) {
        const bool end = job->Take(&part, kLivenessMs);
        all += part;
        if (end) break;
        cancel_if_gone();
      }
      std::lock_guard<std::mutex> lock(job->mu);
      if (job->error.has_value()) return SendError(res, *job->error);
      Json choice = {{"index", 0}, {"finish_reason", job->finish_reason}, {"logprobs", nullptr}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", all}};
      } else {
        choice["text"] = all;
      }
      return SendJson(res, 200,
                      {{"id", id},
                       {"object", chat ? "chat.completion" : "text_completion"},
                       {"created", created},
                       {"model", model},
                       {"choices", Json::array({choice})},
                       {"usage", Usage(*job)},
                       {"kvedge", KvedgeFields(*job)}});
    }
    res.set_header("Cache-Control", "no-cache");
    auto started = std::make_shared<bool>(false);
    const auto chunk = [=](const Json& choice) {
      return Json{{"id", id},
                  {"object", chat ? "chat.completion.chunk" : "text_completion"},
                  {"created", created},
                  {"model", model},
                  {"choices", Json::array({choice})}};
    };
    const auto delta = [=](const std::string& text) {
      Json c = {{"index", 0}, {"finish_reason", nullptr}};
      if (chat) {
        c["delta"] = {{"content", text}};
      } else {
        c["text"] = text;
      }
      return c;
    };
    res.set_chunked_content_provider(
        "text/event-stream",
        [=](size_t, httplib::DataSink& sink) {
          const auto send = [&](const Json& j) {
            const std::string event = "data: " + Dump(j) + "\n\n";
            if (sink.write(event.data(), event.size())) return true;
            job->cancel.store(true);  // the client is gone: stop its sequence
            return false;
          };
          if (!*started) {
            *started = true;
            if (chat) {
              Json c = {{"index", 0}, {"finish_reason", nullptr}, {"delta", {{"role", "assistant"}, {"content", ""}}}};
              if (!send(chunk(c))) return false;
            }
          }
          std::string text;
          const bool end = job->Take(&text, 250);
          if (!text.empty() && !send(chunk(delta(text)))) return false;
          if (!end) return true;
          std::lock_guard<std::mutex> lock(job->mu);
          if (job->error.has_value()) {
            const std::string event = "data: " + ErrorJson(*job->error) + "\n\n";
            if (!sink.write(event.data(), event.size())) return false;
          }
          Json last = {{"index", 0}, {"finish_reason", job->finish_reason}};
          if (chat) {
            last["delta"] = Json::object();
          } else {
            last["text"] = "";
          }
          Json j = chunk(last);
          j["usage"] = Usage(*job);
          j["kvedge"] = KvedgeFields(*job);
          if (!send(j)) return false;
          static constexpr char kDone[] = "data: [DONE]\n\n";
          if (!sink.write(kDone, sizeof(kDone) - 1)) return false;
          sink.done();
          return true;
        },
        [job](bool) { job->cancel.store(true); });  // ended, or the client left: stop if still running
  };

  s.Post("/v1/chat/completions", [this, generate](const httplib::Request& req, httplib::Response& res) {
    auto job = std::make_shared<Job>();
    ChatRequest r;
    if (auto e = ParseChatRequest(req.body, options_.limits, &r)) return SendError(res, *e);
    auto rendered = chat::Conversation::RenderMessages(chat_, r.messages, /*add_generation_prompt=*/true);
    if (!rendered.ok()) {
      return SendError(res, BadRequest("the chat template cannot render these messages: " +
                                           rendered.status().message(),
                                       "messages", "template_error"));
    }
    job->kind = SessionKind::kChat;
    job->messages = std::move(r.messages);
    job->rendered = std::move(rendered).value();
    job->params = std::move(r.params);
    generate(req, res, std::move(job), /*chat=*/true);
  });
  s.Post("/v1/completions", [this, generate](const httplib::Request& req, httplib::Response& res) {
    auto job = std::make_shared<Job>();
    CompletionRequest r;
    if (auto e = ParseCompletionRequest(req.body, options_.limits, &r)) return SendError(res, *e);
    job->kind = SessionKind::kText;
    job->rendered = r.prompt;
    job->messages = {{"user", std::move(r.prompt)}};
    job->params = std::move(r.params);
    generate(req, res, std::move(job), /*chat=*/false);
  });
}

}  // namespace kvedge::server
