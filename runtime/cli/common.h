// Flags and helpers shared by the kvedge subcommands: model loading, KV-cache
// flags (llama.cpp-style names where one exists), error printing.
#ifndef KVEDGE_RUNTIME_CLI_COMMON_H_
#define KVEDGE_RUNTIME_CLI_COMMON_H_

#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>

#include "kvcache/kv_cache_plan.h"
#include "platform/status.h"
#include "runtime/chat/conversation.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge::cli {

// -m / --tokenizer / --tokenizer-pre.
struct ModelFlags {
  std::string model;
  std::string tokenizer;
  std::string tokenizer_pre;  // replaces the GGUF's tokenizer.ggml.pre
  bool no_repack = false;  // keep Q8_0/Q4_0 matrices in the file's layout
};
void AddModelFlags(CLI::App* app, ModelFlags* f, bool required);

// -c / --kv-budget / --kv / --kv-keys / --kv-values / --policy / --sinks /
// --window / --heavy / --positions / --h2o-decay / --h2o-score /
// --h2o-lifetime / --key-axis / --key-rope / --no-hot-tail / -t.
struct KvFlags {
  int capacity = 0;
  std::string budget;
  std::string kv;
  std::string kv_keys;
  std::string kv_values;
  std::string policy;
  int sinks = -1;
  int window = -1;
  int heavy = -1;
  std::string positions = "in-cache";
  std::optional<float> h2o_decay;  // unset: 1, or 0.99 with --h2o-score decay
  std::string h2o_score = "cumulative";
  int h2o_lifetime = 0;
  std::string key_axis = "channel";
  std::string key_rope;  // empty: the measured default (DefaultConfig)
  bool no_hot_tail = false;
  int threads = 0;  // 0: all hardware threads
};
void AddKvFlags(CLI::App* app, KvFlags* f);

// Session options from the flags; what they leave unset is DefaultConfig's
// (runtime/engine/defaults.h).
StatusOr<SessionOptions> MakeSessionOptions(const KvFlags& f, const ModelConfig& config);

// --temp / --top-k / --top-p / -s,--seed (generate, chat).
struct SamplingFlags {
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  int64_t seed = -1;  // < 0: a random seed
};
// `seed_note` says where a random seed is printed ("printed in the summary").
void AddSamplingFlags(CLI::App* app, SamplingFlags* f, const char* seed_note);

// Sampler options from the flags, with a fresh random seed when none was
// given (print options.seed so the run can be repeated).
SamplerOptions MakeSamplerOptions(const SamplingFlags& f);

// count / seconds for the summaries; 0 when no time was measured.
inline double TokensPerSecond(int64_t count, double seconds) {
  return seconds > 0 ? static_cast<double>(count) / seconds : 0.0;
}

// -t's value as a thread count: 0 is every hardware thread. Errors: outside
// 1..kMaxThreads.
StatusOr<int> ResolveThreads(int flag);

struct LoadedModel {
  std::unique_ptr<ModelWeights> weights;
  std::unique_ptr<Tokenizer> tokenizer;
};
// Loads the model and its tokenizer: --tokenizer when given, else the GGUF's
// embedded vocabulary. A llama2.c .bin carries none and needs --tokenizer: a
// tokenizer.bin lying beside it is not proof that it is the model's.
// `threads_flag` is -t (ResolveThreads): the threads that repack the weights.
StatusOr<LoadedModel> LoadModelAndTokenizer(const ModelFlags& f, int threads_flag, bool need_tokenizer);

// The chat template and its bos/eos strings for `model`: `template_file`
// when given, else the GGUF's template, else ChatML (*from_model false: the
// caller warns). Errors: an unreadable template file or GGUF template.
StatusOr<chat::ConversationOptions> ModelChatOptions(const ModelWeights& model,
                                                        const Tokenizer& tokenizer, const std::string& template_file,
                                                        bool* from_model);

// Reads a whole text file. Errors name the path.
StatusOr<std::string> ReadTextFile(const std::string& path);

// Prints "kvedge <command>: error: <status>" to stderr; returns exit code 1.
int ReportError(const char* command, const Status& status);

}  // namespace kvedge::cli

#endif  // KVEDGE_RUNTIME_CLI_COMMON_H_
