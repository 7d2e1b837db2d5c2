// `kvedge chat`: a multi-turn chat through the model's chat template. In a
// terminal: a prompt on stderr, streamed replies, /reset /stats /save /quit,
// Ctrl-C stops a reply (twice, or at the prompt, quits). From a pipe: one
// user message per line, each reply then one empty line on stdout, nothing
// else there (status goes to stderr).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>
#include <random>
#include <string>

#include "platform/memory.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/conversation.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

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
  int n_predict = 512;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  int64_t seed = -1;
};

bool Emit(std::string_view s) {
  if (s.empty()) return true;
  if (std::fwrite(s.data(), 1, s.size(), stdout) != s.size()) return false;
  return std::fflush(stdout) == 0;
}

// One line from stdin without its newline; false at EOF or when Ctrl-C
// interrupted the read (SIGINT is installed without SA_RESTART).
bool ReadLine(std::string* line) {
  line->clear();
  for (;;) {
    const int c = std::fgetc(stdin);
    if (c == EOF) {
      if (std::ferror(stdin) && errno == EINTR && !g_quit.load()) {
        std::clearerr(stdin);
        continue;
      }
      return !line->empty() && !g_quit.load();
    }
    if (c == '\n') return true;
    line->push_back(static_cast<char>(c));
  }
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
  auto loaded = LoadModelAndTokenizer(opt.model, /*need_tokenizer=*/true);
  if (!loaded.ok()) return ReportError(kCmd, loaded.status());
  const ModelWeights& model = *loaded->weights;
  const Tokenizer& tok = *loaded->tokenizer;
  // The template: --chat-template, else the GGUF's, else ChatML (warned).
  bool from_model = false;
  co.template_source = chat::kChatMlTemplate;
  co.bos_token = std::string(tok.TokenText(tok.bos()));
  co.eos_token = std::string(tok.TokenText(tok.eos()));
  if (model.gguf != nullptr) {
    auto t = chat::ChatTemplateFromGguf(*model.gguf);
    if (!t.ok()) return ReportError(kCmd, t.status());
    from_model = t->from_model;
    co.template_source = t->source;
    co.bos_token = t->bos_token;
    co.eos_token = t->eos_token;
  }
  if (!opt.template_file.empty()) {
    auto t = ReadTextFile(opt.template_file);
    if (!t.ok()) return ReportError(kCmd, t.status());
    co.template_source = std::move(t).value();
  } else if (!from_model) {
    std::fprintf(stderr, "kvedge chat: warning: the model has no chat template; using ChatML (<|im_start|>role\\n"
                         "content<|im_end|>)\n");
  }
  auto session_options = MakeSessionOptions(opt.kv, model.config);
  if (!session_options.ok()) return ReportError(kCmd, session_options.status());
  SamplerOptions so;
  so.temperature = opt.temperature;
  so.top_k = opt.top_k;
  so.top_p = opt.top_p;
  so.seed = opt.seed >= 0 ? static_cast<uint64_t>(opt.seed) : std::random_device{}();
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
  while (!g_quit.load()) {
    if (tty) std::fputs("> ", stderr);
    if (!ReadLine(&line)) break;
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
    last_rate = stats->decode_seconds > 0 ? static_cast<double>(stats->reply_tokens) / stats->decode_seconds : 0;
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
  AddKvFlags(sub, &opt->kv);
  sub->add_option("--temp", opt->temperature, "Temperature; 0 = greedy (default 0.8)");
  sub->add_option("--top-k", opt->top_k, "Top-k cut; 0 = off (default 40)");
  sub->add_option("--top-p", opt->top_p, "Top-p (nucleus) cut; 1 = off (default 0.95)");
  sub->add_option("-s,--seed", opt->seed, "Sampling seed (default: random, printed at the start)");
  return [opt] { return RunChat(*opt); };
}

}  // namespace kvedge::cli
