// `kvedge generate`: stream a continuation of a prompt to stdout inside a
// fixed KV budget; a summary of speed and memory goes to stderr.
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <memory>

#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/chat/session_file.h"
#include "runtime/cli/common.h"
#include "runtime/engine/generator.h"
#include "runtime/engine/sampler.h"

namespace kvedge::cli {
namespace {

std::atomic<bool> g_interrupted{false};
void OnSigint(int) { g_interrupted.store(true); }

struct GenerateOptions {
  ModelFlags model;
  KvFlags kv;
  std::string prompt;
  std::string prompt_file;
  int n_predict = 256;
  SamplingFlags sampling;
  bool no_echo = false;
  std::string session_file;
};

// Writes bytes to stdout; false once stdout is closed (EPIPE) or failing.
bool Emit(const char* data, size_t n) {
  if (n == 0) return true;
  if (std::fwrite(data, 1, n, stdout) != n) return false;
  return std::fflush(stdout) == 0;
}

int RunGenerate(const GenerateOptions& opt) {
  if (!opt.prompt.empty() && !opt.prompt_file.empty()) {
    return ReportError("generate", InvalidArgument("give either -p PROMPT or -f FILE, not both"));
  }
  if (opt.n_predict < -1) {
    return ReportError("generate", InvalidArgument("-n " + std::to_string(opt.n_predict) +
                                                       ": give a token count ≥ 0, or -1 to run until EOS / Ctrl-C"));
  }
  std::string prompt = opt.prompt;
  if (!opt.prompt_file.empty()) {
    auto text = ReadTextFile(opt.prompt_file);
    if (!text.ok()) return ReportError("generate", text.status());
    prompt = std::move(text).value();
  }
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/true);
  if (!loaded.ok()) return ReportError("generate", loaded.status());
  const ModelWeights& model = *loaded->weights;
  const Tokenizer& tok = *loaded->tokenizer;
  auto session_options = MakeSessionOptions(opt.kv, model.config);
  if (!session_options.ok()) return ReportError("generate", session_options.status());
  const SamplerOptions so = MakeSamplerOptions(opt.sampling);
  auto sampler = Sampler::Create(so, model.config.vocab_size);
  if (!sampler.ok()) return ReportError("generate", sampler.status());
  auto generator = Generator::Create(tok, GeneratorOptions{});
  if (!generator.ok()) return ReportError("generate", generator.status());
  auto session = Session::Create(model, *session_options);
  if (!session.ok()) return ReportError("generate", session.status());
  Session& s = **session;
  // --session FILE: continue the stream it holds (a missing file starts one).
  if (!opt.session_file.empty()) {
    const Status loaded_session = LoadSession(opt.session_file, &s, &*sampler);
    if (!loaded_session.ok() && loaded_session.code() != StatusCode::kNotFound) {
      return ReportError("generate", loaded_session);
    }
    if (loaded_session.ok()) {
      std::fprintf(stderr, "kvedge generate: continuing session '%s' (%llu tokens)\n", opt.session_file.c_str(),
                   static_cast<unsigned long long>(s.tokens_fed()));
    }
  }
  // BOS starts a stream; a continued one goes on from its last token.
  auto ids = tok.Encode(prompt, /*add_special=*/s.tokens_fed() == 0);
  if (!ids.ok()) return ReportError("generate", ids.status());
  if (ids->empty() && s.tokens_fed() == 0) {  // an empty prompt where the vocabulary adds no BOS (GPT-2 style)
    if (tok.bos() < 0) return ReportError("generate", InvalidArgument("empty prompt and no BOS token: give -p TEXT"));
    ids->push_back(tok.bos());
  }

  ::signal(SIGPIPE, SIG_IGN);
  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  ::sigaction(SIGINT, &sa, nullptr);

  bool out_ok = opt.no_echo || Emit(prompt.data(), prompt.size());
  GenerationRequest request;
  request.prompt = ids->data();
  request.prompt_len = ids->size();
  request.prev_token = s.history().last();  // a continued session with no new prompt
  request.max_tokens = out_ok ? opt.n_predict : 0;  // stdout already closed: the prompt only
  request.cancel = &g_interrupted;
  const GenerationResult result = generator->Run(s, *sampler, request, [&](std::string_view text) {
    out_ok = Emit(text.data(), text.size());
    return out_ok;
  });
  const Status& status = result.status;
  const int64_t generated = result.tokens;
  if (out_ok) Emit("\n", 1);

  const KvCacheStats st = s.cache().Stats();
  const double prefill_s = result.prefill_seconds, decode_s = result.decode_seconds;
  std::fprintf(stderr, "\n");
  if (g_interrupted.load()) std::fprintf(stderr, "kvedge generate: interrupted\n");
  std::fprintf(stderr, "kvedge generate: %s\n", s.cache().plan().Describe().c_str());
  std::fprintf(stderr, "  prompt    %6zu tokens  %9.1f tokens/s\n", ids->size(),
               TokensPerSecond(static_cast<int64_t>(ids->size()), prefill_s));
  std::fprintf(stderr, "  generated %6lld tokens  %9.1f tokens/s\n", static_cast<long long>(generated),
               TokensPerSecond(generated, decode_s));
  std::fprintf(stderr, "  kv held %s of %s reserved; an f16 full cache would need %s (%.1fx)\n",
               FormatBytes(st.held_bytes).c_str(), FormatBytes(st.arena_bytes).c_str(),
               FormatBytes(st.f16_full_bytes).c_str(),
               st.held_bytes > 0 ? static_cast<double>(st.f16_full_bytes) / static_cast<double>(st.held_bytes) : 0.0);
  std::fprintf(stderr, "  tokens held %llu, evicted %llu; peak RSS %s; seed %llu\n",
               static_cast<unsigned long long>(st.tokens_held), static_cast<unsigned long long>(st.tokens_evicted),
               FormatBytes(PeakRssBytes()).c_str(), static_cast<unsigned long long>(so.seed));
  // Every sampled token was fed (a refused feed changes nothing): the state is
  // consistent whatever stopped the loop.
  if (!opt.session_file.empty()) {
    const Status saved = SaveSession(s, &*sampler, opt.session_file);
    if (!saved.ok()) return ReportError("generate", saved);
    std::fprintf(stderr, "  session saved to '%s' (%llu tokens)\n", opt.session_file.c_str(),
                 static_cast<unsigned long long>(s.tokens_fed()));
  }
  if (!status.ok()) return ReportError("generate", status);
  return 0;
}

}  // namespace

CommandRunner RegisterGenerateCommand(CLI::App& app) {
  auto opt = std::make_shared<GenerateOptions>();
  CLI::App* sub = app.add_subcommand("generate", "Stream a continuation of a prompt inside a fixed KV budget");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("-p,--prompt", opt->prompt, "Prompt text (UTF-8); empty starts from BOS");
  sub->add_option("-f,--file", opt->prompt_file, "Read the prompt from a file");
  sub->add_option("-n,--n-predict", opt->n_predict, "Tokens to generate; -1 = until EOS or Ctrl-C (default 256)");
  AddKvFlags(sub, &opt->kv);
  AddSamplingFlags(sub, &opt->sampling, "printed in the summary");
  sub->add_flag("--no-echo", opt->no_echo, "Do not print the prompt before the continuation");
  sub->add_option("--session", opt->session_file,
                  "Continue the stream saved in FILE if it exists (same model and KV flags), save it there after");
  return [opt] { return RunGenerate(*opt); };
}

}  // namespace kvedge::cli
