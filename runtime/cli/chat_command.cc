// `kvedge chat`: a multi-turn chat through the model's chat template. In a
// terminal: a prompt on stderr with line editing and history (libedit),
// streamed replies, /reset /stats /save /quit, Ctrl-C stops a reply (twice,
// or at the prompt, quits). From a pipe: one user message per line, each
// reply then one empty line on stdout, nothing else there (status goes to
// stderr).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <string>

#include "platform/memory.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/conversation.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "runtime/cli/line_reader.h"

namespace kvedge::cli {
namespace {

constexpr char kCmd[] = "chat";

std::atomic<bool> g_cancel{false};    // stop the current reply
std::atomic<bool> g_quit{false};      // leave after it
std::atomic<bool> g_in_reply{false};

void OnSigint(int) {
  if (!g_in_reply.load() || g_cancel.load()) g_quit.store(true);
  g_cancel.store(true);
}

struct ChatOptions {
  ModelFlags model;
  KvFlags kv;
  std::string system;
  std::string system_file;
  std::string session_file;
  std::string template_file;
  bool history = false;
  int n_predict = 512;
  SamplingFlags sampling;
};

bool Emit(std::string_view s) {
  if (s.empty()) return true;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) return false;
  return std::fflush(stdout) == 0;
}

void PrintStats(const chat::Conversation& c, double tokens_per_s) {
  const KvCacheStats st = c.session().cache().Stats();
  std::fprintf(stderr,
               "kv held %s of %s reserved; tokens held %llu, evicted %llu, fed %llu; %zu messages; last reply %.1f "
               "tokens/s\n",
               FormatBytes(st.held_bytes).c_str(), FormatBytes(st.arena_bytes).c_str(),
               static_cast<unsigned long long>(st.tokens_held), static_cast<unsigned long long>(st.tokens_evicted),
               static_cast<unsigned long long>(c.session().tokens_fed()), c.messages().size(), tokens_per_s);
}

int RunChat(const ChatOptions& opt) {
  if (!opt.system.empty() && !opt.system_file.empty()) {
    return ReportError(kCmd, InvalidArgument("give either --system TEXT or --system-file FILE, not both"));
  }
  std::string history_file;
  if (opt.history) {
    history_file = DefaultChatHistoryPath();
    if (history_file.empty()) {
      return ReportError(kCmd, InvalidArgument("--history: neither XDG_STATE_HOME nor HOME is set"));
    }
  }
  if (opt.n_predict < -1) {
    return ReportError(kCmd, InvalidArgument("-n " + std::to_string(opt.n_predict) +
                                                 ": give a token count ≥ 0, or -1 for no limit per reply"));
  }
  chat::ConversationOptions co;
  co.system_prompt = opt.system;
  if (!opt.system_file.empty()) {
    auto text = ReadTextFile(opt.system_file);
    if (!text.ok()) return ReportError(kCmd, text.status());
    co.system_prompt = std::move(text).value();
  }
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/true);
  if (!loaded.ok()) return ReportError(kCmd, loaded.status());
  const ModelWeights& model = *loaded->weights;
  const Tokenizer& tok = *loaded->tokenizer;
  // The template: --chat-template, else the GGUF's, else ChatML (warned).
  bool from_model = false;
  auto templ = ModelChatOptions(model, tok, opt.template_file, &from_model);
  if (!templ.ok()) return ReportError(kCmd, templ.status());
  templ->system_prompt = std::move(co.system_prompt);
  co = std::move(templ).value();
  if (!from_model) {
    std::fprintf(stderr, "kvedge chat: warning: the model has no chat template; using ChatML (<|im_start|>role\\n"
                         "content<|im_end|>)\n");
  }
  auto session_options = MakeSessionOptions(opt.kv, model.config);
  if (!session_options.ok()) return ReportError(kCmd, session_options.status());
  const SamplerOptions so = MakeSamplerOptions(opt.sampling);
  auto sampler = Sampler::Create(so, model.config.vocab_size);
  if (!sampler.ok()) return ReportError(kCmd, sampler.status());
  auto session = Session::Create(model, *session_options);
  if (!session.ok()) return ReportError(kCmd, session.status());
  const std::string plan = (*session)->cache().plan().Describe();
  auto conversation = chat::Conversation::Create(tok, std::move(*session), std::move(*sampler), std::move(co));
  if (!conversation.ok()) return ReportError(kCmd, conversation.status());
  chat::Conversation& c = **conversation;
  if (!opt.session_file.empty()) {
    const Status s = c.Load(opt.session_file);
    if (!s.ok() && s.code() != StatusCode::kNotFound) return ReportError(kCmd, s);
    if (s.ok()) {
      std::fprintf(stderr, "kvedge chat: continuing '%s' (%zu messages, %llu tokens)\n", opt.session_file.c_str(),
                   c.messages().size(), static_cast<unsigned long long>(c.session().tokens_fed()));
    }
  }
  const bool tty = ::isatty(STDIN_FILENO) != 0;
  std::fprintf(stderr, "kvedge chat: %s; seed %llu%s\n", plan.c_str(), static_cast<unsigned long long>(so.seed),
               tty ? "\n  /reset forgets the chat, /stats shows memory and speed, /save, /quit; Ctrl-C stops a reply"
                   : "");

  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {};
  sa.sa_handler = OnSigint;  // no SA_RESTART: Ctrl-C at the prompt ends the read
  ::sigaction(SIGINT, &sa, nullptr);

  const auto save = [&]() -> Status {
    if (opt.session_file.empty()) return InvalidArgument("no --session FILE to save to");
    KVEDGE_RETURN_IF_ERROR(c.Save(opt.session_file));
    std::fprintf(stderr, "kvedge chat: saved '%s' (%llu tokens)\n", opt.session_file.c_str(),
                 static_cast<unsigned long long>(c.session().tokens_fed()));
    return OkStatus();
  };
  double last_rate = 0;
  int turn = 0;
  Status failure;
  std::string line;
  const std::unique_ptr<LineReader> reader = LineReader::Create("> ", &g_quit, history_file);
  while (!g_quit.load()) {
    if (!reader->Read(&line)) break;
    if (line.empty()) continue;
    if (line == "/quit" || line == "/exit") break;
    if (line == "/reset") {
      c.Reset();
      std::fprintf(stderr, "kvedge chat: conversation reset\n");
      continue;
    }
    if (line == "/stats") {
      PrintStats(c, last_rate);
      continue;
    }
    if (line == "/save") {
      if (const Status s = save(); !s.ok()) std::fprintf(stderr, "kvedge chat: %s\n", s.message().c_str());
      continue;
    }
    if (const Status s = c.AddMessage("user", line); !s.ok()) {
      std::fprintf(stderr, "kvedge chat: %s\n", s.message().c_str());
      continue;
    }
    g_cancel.store(false);
    g_in_reply.store(true);
    bool out_ok = true;
    auto stats = c.GenerateReply(opt.n_predict, &g_cancel, [&](std::string_view text) {
      out_ok = Emit(text);
      return out_ok;
    });
    g_in_reply.store(false);
    Emit(tty ? "\n" : "\n\n");
    if (!stats.ok()) {
      failure = stats.status();
      break;
    }
    ++turn;
    last_rate = TokensPerSecond(stats->reply_tokens, stats->decode_seconds);
    if (stats->reason == StopReason::kCancelled) std::fprintf(stderr, "kvedge chat: reply stopped\n");
    if (!tty || stats->refed) {
      std::fprintf(stderr, "kvedge chat: turn %d: fed %lld prompt tokens%s, generated %lld (%s), %.1f tokens/s\n",
                   turn, static_cast<long long>(stats->prompt_tokens),
                   stats->refed ? " (the template re-rendered the history: fed again from the start)" : "",
                   static_cast<long long>(stats->reply_tokens), StopReasonName(stats->reason), last_rate);
    }
    if (!out_ok) break;
  }
  if (tty) std::fputs("\n", stderr);
  if (!opt.session_file.empty()) {
    if (const Status s = save(); !s.ok()) return ReportError(kCmd, s);
  }
  if (!failure.ok()) return ReportError(kCmd, failure);
  return 0;
}

}  // namespace

CommandRunner RegisterChatCommand(CLI::App& app) {
  auto opt = std::make_shared<ChatOptions>();
  CLI::App* sub = app.add_subcommand("chat", "Chat with a model through its chat template (a terminal or a pipe)");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("--system", opt->system, "System prompt");
  sub->add_option("--system-file", opt->system_file, "Read the system prompt from a file");
  sub->add_option("--chat-template", opt->template_file, "Jinja chat template file (overrides the model's)");
  sub->add_option("--session", opt->session_file,
                  "Continue the chat saved in FILE (and FILE.chat) if it exists; save there on exit and /save");
  sub->add_option("-n,--n-predict", opt->n_predict, "Most tokens per reply; -1 = no limit (default 512)");
  sub->add_flag("--history", opt->history,
               "Keep the typed lines across runs in $XDG_STATE_HOME/kvedge/chat_history (default: this run only)");
  AddKvFlags(sub, &opt->kv);
  AddSamplingFlags(sub, &opt->sampling, "printed at the start");
  return [opt] { return RunChat(*opt); };
}

}  // namespace kvedge::cli
