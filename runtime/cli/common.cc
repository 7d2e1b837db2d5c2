// Shared CLI flag handling.
#include "runtime/cli/common.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "platform/memory.h"
#include "platform/thread_arena.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/engine/defaults.h"
#include "runtime/model/model_loader.h"

namespace kvedge::cli {

void AddModelFlags(CLI::App* app, ModelFlags* f, bool required) {
  auto* m = app->add_option("-m,--model", f->model, "Model file: GGUF, or a llama2.c .bin checkpoint");
  if (required) m->required();
  app->add_option("--tokenizer", f->tokenizer, "llama2.c tokenizer.bin (for .bin models; GGUF carries its own)");
  app->add_option("--tokenizer-pre", f->tokenizer_pre,
                  "Pre-tokenizer to use instead of the GGUF's tokenizer.ggml.pre (llama-bpe, qwen2, gpt-2…)");
  app->add_flag("--no-repack", f->no_repack,
                "Use the quantized weights (Q8_0 … Q5_1, IQ4_NL, Q2_K … Q6_K, IQ4_XS) in place from the file instead of "
                "copying them into the interleaved layout the x86 kernels read faster (shares the page cache, slower on "
                "those CPUs)");
}

void AddSamplingFlags(CLI::App* app, SamplingFlags* f, const char* seed_note) {
  app->add_option("--temp", f->temperature, "Temperature; 0 = greedy (default 0.8)");
  app->add_option("--top-k", f->top_k, "Top-k cut; 0 = off (default 40)");
  app->add_option("--top-p", f->top_p, "Top-p (nucleus) cut; 1 = off (default 0.95)");
  app->add_option("-s,--seed", f->seed, std::string("Sampling seed (default: random, ") + seed_note + ")");
}

SamplerOptions MakeSamplerOptions(const SamplingFlags& f) {
  SamplerOptions so;
  so.temperature = f.temperature;
  so.top_k = f.top_k;
  so.top_p = f.top_p;
  so.seed = f.seed >= 0 ? static_cast<uint64_t>(f.seed) : std::random_device{}();
  return so;
}

void AddKvFlags(CLI::App* app, KvFlags* f) {
  app->add_option("-c,--ctx-size", f->capacity, "KV cache capacity in tokens per lane (sinks + heavy + window)");
  app->add_option("--kv-budget", f->budget, "KV arena byte budget, e.g. 64MiB (capacity follows from the formats)");
  app->add_option("--kv", f->kv, "Key and value format: f32 f16 int8 int4");
  app->add_option("--kv-keys", f->kv_keys, "Key format: f32 f16 int8 int4 (channel-wise quantized)");
  app->add_option("--kv-values", f->kv_values, "Value format: f32 f16 int8 int4 (token-wise quantized)");
  app->add_option("--policy", f->policy, "Eviction: full window sinks h2o (default sinks)");
  app->add_option("--sinks", f->sinks, "Attention-sink tokens pinned (sinks/h2o; default 4)");
  app->add_option("--window", f->window, "Recent-window tokens (default: what the capacity leaves)");
  app->add_option("--heavy", f->heavy, "Heavy-hitter tokens for h2o (default: half of what remains)");
  app->add_option("--positions", f->positions, "RoPE positions: in-cache (default) or absolute");
  app->add_option("--h2o-decay", f->h2o_decay, "h2o score decay per step in (0,1]; 1 = cumulative");
  app->add_option("--h2o-score", f->h2o_score,
                  "h2o ranking: cumulative (sum), decay (--h2o-decay, default 0.99), tova (latest attention), "
                  "age (mean attention per query seen)");
  app->add_option("--h2o-lifetime", f->h2o_lifetime, "h2o: heavy hitters older than N tokens leave first (0: never)");
  app->add_option("--key-axis", f->key_axis, "Quantized keys share scales per channel (default) or per token (ablation)");
  app->add_option("--key-rope", f->key_rope,
                  "Stored key rotation: in-block (default), post (absolute, classic), pre (KVQuant; slow path)");
  app->add_flag("--no-hot-tail", f->no_hot_tail, "Ablation: hold the newest partial block quantized, not in f16");
  app->add_option("-t,--threads", f->threads,
                  "Threads that decode, and that repack the weights at load (default: all hardware threads)");
}

namespace {
Status ParseFormatFlag(const std::string& flag, const std::string& value, std::optional<KvFormat>* out) {
  KvFormat f;
  if (!ParseKvFormat(value, &f)) {
    return InvalidArgument(flag + " '" + value + "' is not a KV format: use f32, f16, int8 or int4");
  }
  *out = f;
  return OkStatus();
}
}  // namespace

StatusOr<SessionOptions> MakeSessionOptions(const KvFlags& f, const ModelConfig& config) {
  KvRequest r;
  if (!f.kv.empty()) {
    KVEDGE_RETURN_IF_ERROR(ParseFormatFlag("--kv", f.kv, &r.key_format));
    r.value_format = r.key_format;
  }
  if (!f.kv_keys.empty()) KVEDGE_RETURN_IF_ERROR(ParseFormatFlag("--kv-keys", f.kv_keys, &r.key_format));
  if (!f.kv_values.empty()) KVEDGE_RETURN_IF_ERROR(ParseFormatFlag("--kv-values", f.kv_values, &r.value_format));
  if (!f.policy.empty()) {
    EvictionPolicy p;
    if (!ParseEvictionPolicy(f.policy, &p)) {
      return InvalidArgument("--policy '" + f.policy + "' is unknown: use full, window, sinks or h2o");
    }
    r.policy = p;
  }
  if (!ParsePositionMode(f.positions, &r.positions)) {
    return InvalidArgument("--positions '" + f.positions + "' is unknown: use in-cache or absolute");
  }
  if (f.capacity < 0) return InvalidArgument("-c " + std::to_string(f.capacity) + ": the capacity must be positive");
  if (f.sinks < -1 || f.window < -1 || f.heavy < -1) {
    return InvalidArgument("--sinks, --window and --heavy take token counts ≥ 0");
  }
  r.capacity = f.capacity;
  r.sinks = f.sinks;
  r.window = f.window;
  r.heavy = f.heavy;
  if (f.h2o_score == "decay") {
    r.h2o_score = H2OScore::kCumulative;
    r.h2o_decay = f.h2o_decay.value_or(0.99f);
    if (r.h2o_decay >= 1.0f) return InvalidArgument("--h2o-score decay needs --h2o-decay below 1");
  } else if (!ParseH2OScore(f.h2o_score, &r.h2o_score)) {
    return InvalidArgument("--h2o-score '" + f.h2o_score + "' is unknown: use cumulative, decay, tova or age");
  } else {
    r.h2o_decay = f.h2o_decay.value_or(1.0f);
  }
  r.h2o_lifetime = f.h2o_lifetime;
  if (!ParseKeyQuantAxis(f.key_axis, &r.key_axis)) {
    return InvalidArgument("--key-axis '" + f.key_axis + "' is unknown: use channel or token");
  }
  if (!f.key_rope.empty()) {
    KeyRope rope;
    if (!ParseKeyRope(f.key_rope, &rope)) {
      return InvalidArgument("--key-rope '" + f.key_rope + "' is unknown: use in-block, post or pre");
    }
    r.key_rope = rope;
  }
  r.hot_tail = !f.no_hot_tail;
  if (!f.budget.empty()) {
    if (f.capacity > 0) return InvalidArgument("give either -c or --kv-budget, not both");
    KVEDGE_ASSIGN_OR_RETURN(r.budget_bytes, ParseByteSize(f.budget));
    if (r.budget_bytes == 0) return InvalidArgument("--kv-budget must be larger than 0");
  }
  SessionOptions o;
  KVEDGE_ASSIGN_OR_RETURN(o.threads, ResolveThreads(f.threads));
  o.kv = DefaultConfig(config, r, o.threads);
  return o;
}

StatusOr<int> ResolveThreads(int flag) {
  const int threads = flag == 0 ? HardwareThreads() : flag;
  if (threads < 1 || threads > kMaxThreads) {
    return InvalidArgument("-t " + std::to_string(flag) + ": threads must be 1 to " + std::to_string(kMaxThreads) +
                           " (this machine has " + std::to_string(HardwareThreads()) + ")");
  }
  return threads;
}

StatusOr<LoadedModel> LoadModelAndTokenizer(const ModelFlags& f, int threads_flag, bool need_tokenizer) {
  if (f.model.empty()) return InvalidArgument("no model given: use -m FILE (GGUF or llama2.c .bin)");
  LoadedModel out;
  LoadOptions load;
  load.interleave = !f.no_repack;
  KVEDGE_ASSIGN_OR_RETURN(load.threads, ResolveThreads(threads_flag));
  KVEDGE_ASSIGN_OR_RETURN(out.weights, LoadModel(f.model, load));
  if (!need_tokenizer) return out;
  auto tok = LoadTokenizer(*out.weights, f.tokenizer, f.tokenizer_pre);
  if (!tok.ok()) return tok.status();
  out.tokenizer = std::move(tok).value();
  return out;
}

StatusOr<chat::ConversationOptions> ModelChatOptions(const ModelWeights& model,
                                                        const Tokenizer& tokenizer, const std::string& template_file,
                                                        bool* from_model) {
  chat::ConversationOptions co;
  *from_model = false;
  co.template_source = chat::kChatMlTemplate;
  co.bos_token = std::string(tokenizer.TokenText(tokenizer.bos()));
  co.eos_token = std::string(tokenizer.TokenText(tokenizer.eos()));
  if (model.gguf != nullptr) {
    KVEDGE_ASSIGN_OR_RETURN(chat::ModelChatTemplate t, chat::ChatTemplateFromGguf(*model.gguf));
    *from_model = t.from_model;
    co.template_source = t.source;
    co.bos_token = t.bos_token;
    co.eos_token = t.eos_token;
  }
  if (!template_file.empty()) {
    KVEDGE_ASSIGN_OR_RETURN(co.template_source, ReadTextFile(template_file));
    *from_model = true;
  }
  return co;
}

StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return InvalidArgument("'" + path + "' is a directory, expected a text file");
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound("cannot open text file '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int ReportError(const char* command, const Status& status) {
  std::fprintf(stderr, "kvedge %s: error: %s\n", command, status.ToString().c_str());
  return 1;
}

}  // namespace kvedge::cli
