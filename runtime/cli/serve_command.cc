// `kvedge serve`: a local OpenAI-compatible server (runtime/server/).
// Prints "kvedge serve: listening on http://HOST:PORT" on stdout once bound;
// SIGTERM/SIGINT stop it: new requests get 503, the ones in flight finish,
// every live session is saved to --session-dir.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "runtime/server/http_server.h"
#include "runtime/server/scheduler.h"
#include "runtime/server/session_manager.h"

namespace kvedge::cli {
namespace {

constexpr char kCmd[] = "serve";

struct ServeOptions {
  ModelFlags model;
  KvFlags kv;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string total_budget = "1GiB";
  int max_sessions = 0;
  std::string session_dir;
  std::string api_key;
  std::string template_file;
  int parallel = 8;
  int max_queued = 256;
  int64_t max_tokens = 4096;
  std::string max_body = "1MiB";
  int timeout_s = 30;
};

int RunServe(const ServeOptions& opt) {
  if (opt.port < 0 || opt.port > 65535) {
    return ReportError(kCmd, InvalidArgument("--port " + std::to_string(opt.port) + ": give 0 to 65535"));
  }
  if (opt.parallel < 1 || opt.parallel > 256) {
    return ReportError(kCmd, InvalidArgument("--parallel " + std::to_string(opt.parallel) + ": give 1 to 256"));
  }
  if (opt.max_queued < 0 || opt.max_queued > 65536) {
    return ReportError(kCmd, InvalidArgument("--max-queued " + std::to_string(opt.max_queued) + ": give 0 to 65536"));
  }
  if (opt.timeout_s < 1) return ReportError(kCmd, InvalidArgument("--timeout must be at least 1 second"));
  if (opt.max_tokens < 1) return ReportError(kCmd, InvalidArgument("--max-tokens must be at least 1"));
  if (opt.max_sessions < 0) return ReportError(kCmd, InvalidArgument("--max-sessions must be ≥ 0"));
  auto total = ParseByteSize(opt.total_budget);
  if (!total.ok()) return ReportError(kCmd, Status(total.status().code(), "--kv-budget-total: " + total.status().message()));
  auto max_body = ParseByteSize(opt.max_body);
  if (!max_body.ok()) return ReportError(kCmd, Status(max_body.status().code(), "--max-body: " + max_body.status().message()));
  ReturnFreedMemoryPromptly();  // RSS follows what the sessions hold, however many handler threads ran
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/true);
  if (!loaded.ok()) return ReportError(kCmd, loaded.status());
  const ModelWeights& model = *loaded->weights;
  const Tokenizer& tok = *loaded->tokenizer;
  bool from_model = false;
  auto chat_options = ModelChatOptions(model, tok, opt.template_file, &from_model);
  if (!chat_options.ok()) return ReportError(kCmd, chat_options.status());
  if (!from_model) std::fprintf(stderr, "kvedge serve: warning: the model has no chat template; using ChatML\n");
  auto session_options = MakeSessionOptions(opt.kv, model.config);
  if (!session_options.ok()) return ReportError(kCmd, session_options.status());

  server::SessionManagerOptions so;
  so.session = *session_options;
  so.total_budget = *total;
  so.max_live = opt.max_sessions;
  so.dir = opt.session_dir;
  so.chat = *chat_options;
  std::vector<std::string> warnings;
  auto sessions = server::SessionManager::Create(model, tok, so, &warnings);
  if (!sessions.ok()) return ReportError(kCmd, sessions.status());
  for (const std::string& w : warnings) std::fprintf(stderr, "kvedge serve: warning: %s\n", w.c_str());
  auto batch = BatchDecoder::Create(model, opt.parallel, session_options->threads);
  if (!batch.ok()) return ReportError(kCmd, batch.status());

  // SIGINT/SIGTERM go to one thread (sigwait), blocked everywhere else:
  // block them before any thread starts.
  ::signal(SIGPIPE, SIG_IGN);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  server::SchedulerOptions sched_options;
  sched_options.max_streams = opt.parallel;
  sched_options.max_queued = static_cast<size_t>(opt.max_queued);
  server::Scheduler scheduler(**sessions, tok, std::move(*batch), sched_options);
  server::HttpOptions ho;
  ho.host = opt.host;
  ho.port = opt.port;
  ho.api_key = opt.api_key;
  ho.model_name = std::filesystem::path(opt.model.model).filename().string();
  ho.max_body_bytes = *max_body;
  ho.read_timeout_s = opt.timeout_s;
  ho.write_timeout_s = opt.timeout_s;
  ho.limits.max_tokens_limit = opt.max_tokens;
  ho.limits.default_max_tokens = std::min<int64_t>(256, opt.max_tokens);
  ho.handler_threads = std::max(64, 4 * opt.parallel);  // a streaming client holds one while it reads
  server::HttpServer http(**sessions, scheduler, tok, *chat_options, ho);
  auto port = http.Bind();
  if (!port.ok()) {
    scheduler.Drain();
    return ReportError(kCmd, port.status());
  }
  const server::SessionTotals t = (*sessions)->Totals();
  std::fprintf(stderr,
               "kvedge serve: %s; %d live sessions of %s each in %s; %d saved sessions in '%s'; up to %d sequences "
               "decode together\n",
               ho.model_name.c_str(), t.capacity, FormatBytes((*sessions)->session_reserved_bytes()).c_str(),
               FormatBytes(*total).c_str(), t.on_disk, opt.session_dir.empty() ? "(none: idle sessions are dropped)" : opt.session_dir.c_str(),
               opt.parallel);
  std::printf("kvedge serve: listening on http://%s:%d\n", opt.host.c_str(), *port);
  std::fflush(stdout);

  std::thread stopper([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    std::fprintf(stderr, "kvedge serve: %s: finishing the requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    scheduler.Drain();  // new requests get 503; the running ones finish
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // their last bytes reach the clients
    http.Stop();
  });
  http.Run();
  stopper.join();
  const Status saved = (*sessions)->SaveAll();
  const server::SessionTotals end = (*sessions)->Totals();
  if (!saved.ok()) return ReportError(kCmd, saved);
  std::fprintf(stderr, "kvedge serve: stopped; %d sessions saved in total this run\n", static_cast<int>(end.saves));
  return 0;
}

}  // namespace

CommandRunner RegisterServeCommand(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  CLI::App* sub = app.add_subcommand("serve", "Serve the model over an OpenAI-compatible HTTP API (loopback by default)");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("--host", opt->host, "Address to listen on (default 127.0.0.1: this machine only)");
  sub->add_option("--port", opt->port, "Port (default 8080; 0 = any free port, printed)");
  sub->add_option("--kv-budget-total", opt->total_budget,
                  "Memory all live sessions share (KV arenas and scratch), e.g. 2GiB (default 1GiB)");
  sub->add_option("--session-budget", opt->kv.budget, "Each session's KV arena, e.g. 64MiB (same as --kv-budget)");
  sub->add_option("--max-sessions", opt->max_sessions, "Most sessions in memory (default: what the total budget holds)");
  sub->add_option("--session-dir", opt->session_dir,
                  "Where idle sessions are saved when memory is needed, and at exit (found again on start)");
  sub->add_option("--api-key", opt->api_key, "Require 'Authorization: Bearer KEY' on the API");
  sub->add_option("--chat-template", opt->template_file, "Jinja chat template file (overrides the model's)");
  sub->add_option("--parallel", opt->parallel, "Most sequences decoding together (default 8)");
  sub->add_option("--max-queued", opt->max_queued,
                  "Most requests waiting for a decoding slot beyond --parallel (default 256; more: 429)");
  sub->add_option("--max-tokens", opt->max_tokens, "Largest max_tokens a request gets (larger are clamped; default 4096)");
  sub->add_option("--max-body", opt->max_body, "Largest request body (default 1MiB; larger: 413)");
  sub->add_option("--timeout", opt->timeout_s,
                  "Seconds a client may stay silent while sending, or not read while receiving (default 30)");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunServe(*opt); };
}

}  // namespace kvedge::cli
