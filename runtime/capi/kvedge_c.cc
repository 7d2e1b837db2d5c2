// The C API (include/kvedge.h) over Session, Sampler and Tokenizer: handles,
// status mapping, thread-local error messages; no exception crosses it.
#include "kvedge.h"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvcache/kv_cache_plan.h"
#include "platform/enum_names.h"
#include "platform/status.h"
#include "platform/thread_arena.h"
#include "runtime/engine/defaults.h"
#include "runtime/chat/session_file.h"
#include "runtime/engine/generator.h"
#include "runtime/chat/chat_template.h"
#include "runtime/chat/conversation.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/tokenizer.h"

// Token ids cross the API as int32_t and are used as int inside.
static_assert(std::is_same_v<int32_t, int>, "kvedge assumes a 32-bit int");

// Immutable after loading. The count holds the caller's reference plus one per
// session, so sessions keep their model alive.
struct kvedge_model {
  std::unique_ptr<kvedge::ModelWeights> weights;
  std::unique_ptr<kvedge::Tokenizer> tokenizer;
  // tokenizer.chat_template of a GGUF, or ChatML; bos/eos as vocabulary text.
  kvedge::chat::ModelChatTemplate chat;
  mutable std::atomic<int> references{1};
};

// One stream: owns its Session and Sampler; used by one thread at a time.
struct kvedge_session {
  kvedge_session(const kvedge_model* m, std::unique_ptr<kvedge::Session> s, kvedge::Sampler sp, kvedge::Generator g)
      : model(m), session(std::move(s)), sampler(std::move(sp)), generator(std::move(g)) {}

  const kvedge_model* model;  // a counted reference
  std::unique_ptr<kvedge::Session> session;
  kvedge::Sampler sampler;
  kvedge::Generator generator;  // kvedge_session_generate's loop, buffers reserved here
  int last_token = -1;
};

// One conversation (runtime/chat/conversation.h); used by one thread at a time.
struct kvedge_chat {
  const kvedge_model* model;  // a counted reference
  std::unique_ptr<kvedge::chat::Conversation> conversation;
};

namespace kvedge {
namespace {

// Fixed storage: recording an error never allocates, so it also works when
// the heap is exhausted. Longer messages are truncated.
thread_local char t_last_error[1024] = "";

kvedge_status Fail(kvedge_status code, const char* function, std::string_view message) {
  std::snprintf(t_last_error, sizeof(t_last_error), "%s: %.*s", function, static_cast<int>(message.size()),
                message.data());
  return code;
}

kvedge_status NullArgument(const char* function, const char* argument) {
  std::snprintf(t_last_error, sizeof(t_last_error), "%s: argument '%s' is NULL", function, argument);
  return KVEDGE_INVALID_ARGUMENT;
}

kvedge_status ToC(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return KVEDGE_OK;
    case StatusCode::kInvalidArgument: return KVEDGE_INVALID_ARGUMENT;
    case StatusCode::kNotFound: return KVEDGE_NOT_FOUND;
    case StatusCode::kDataLoss: return KVEDGE_CORRUPT;
    case StatusCode::kUnsupported: return KVEDGE_UNSUPPORTED;
    case StatusCode::kResourceExhausted: return KVEDGE_OUT_OF_BUDGET;
    case StatusCode::kFailedPrecondition: return KVEDGE_FAILED_PRECONDITION;
    case StatusCode::kIoError: return KVEDGE_IO;
    case StatusCode::kInternal: return KVEDGE_INTERNAL;
  }
  return KVEDGE_INTERNAL;
}

kvedge_status Fail(const Status& status, const char* function) {
  return Fail(ToC(status.code()), function, status.message());
}

// Runs `body` (returning kvedge_status) so that no exception escapes.
template <typename Body>
kvedge_status Guarded(const char* function, Body&& body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(KVEDGE_OUT_OF_MEMORY, function, "out of memory");
  } catch (const std::exception& e) {
    return Fail(KVEDGE_INTERNAL, function, e.what());
  } catch (...) {
    return Fail(KVEDGE_INTERNAL, function, "unknown exception");
  }
}

void Release(const kvedge_model* model) {
  if (model->references.fetch_sub(1, std::memory_order_acq_rel) == 1) delete model;
}

// Gives the caller a session or chat handle, which holds a counted reference
// to its model.
template <typename Handle>
kvedge_status Hand(std::unique_ptr<Handle> handle, Handle** out) {
  handle->model->references.fetch_add(1, std::memory_order_relaxed);
  *out = handle.release();
  return KVEDGE_OK;
}

// Frees a handle of Hand, then its model reference: the handle's Session
// borrows the model's weights. NULL is a no-op.
template <typename Handle>
void FreeHandle(Handle* handle) {
  if (handle == nullptr) return;
  const kvedge_model* model = handle->model;
  delete handle;
  Release(model);
}

// Parses an optional name with `parse`; NULL leaves *out unset.
template <typename T, typename Parse>
Status ParseName(const char* field, const char* name, Parse parse, const char* accepted, std::optional<T>* out) {
  if (name == nullptr) return OkStatus();
  T value;
  if (!parse(std::string(name), &value)) {
    return InvalidArgument(std::string("config.") + field + " '" + name + "' is unknown (expected " + accepted + ")");
  }
  *out = value;
  return OkStatus();
}

Status ToOptions(const kvedge_model& model, const kvedge_session_config& c, SessionOptions* session,
                 SamplerOptions* sampler) {
  KvRequest r;
  KVEDGE_RETURN_IF_ERROR(ParseName("policy", c.policy, ParseEvictionPolicy, "full, window, sinks or h2o", &r.policy));
  KVEDGE_RETURN_IF_ERROR(
      ParseName("key_format", c.key_format, ParseKvFormat, "f32, f16, int8 or int4", &r.key_format));
  KVEDGE_RETURN_IF_ERROR(
      ParseName("value_format", c.value_format, ParseKvFormat, "f32, f16, int8 or int4", &r.value_format));
  std::optional<PositionMode> positions;
  KVEDGE_RETURN_IF_ERROR(ParseName("positions", c.positions, ParsePositionMode, "in-cache or absolute", &positions));
  r.positions = positions.value_or(PositionMode::kInCache);
  if (c.threads < 1 || c.threads > kMaxThreads) {
    return InvalidArgument("config.threads is " + std::to_string(c.threads) + " (expected 1 to " +
                           std::to_string(kMaxThreads) + ")");
  }
  r.sinks = c.sinks;
  r.heavy = c.heavy;
  r.window = c.window;
  r.capacity = c.capacity_tokens;
  r.budget_bytes = c.budget_bytes;
  r.h2o_decay = c.h2o_decay;
  session->kv = DefaultConfig(model.weights->config, r, c.threads);
  session->threads = c.threads;
  session->max_batch = c.max_batch;
  sampler->temperature = c.temperature;
  sampler->top_k = c.top_k;
  sampler->top_p = c.top_p;
  sampler->seed = c.seed;
  return OkStatus();
}

// Feeds all of tokens[0, n) or nothing: ids are range-checked and a `full`
// cache's room is checked before any layer changes. Allocates nothing on success.
kvedge_status FeedTokens(kvedge_session& s, const int* tokens, size_t n, const char* function) {
  if (n == 0) return KVEDGE_OK;
  const int capacity = s.session->cache().plan().capacity;
  const Status room =
      s.session->cache().CheckRoom(static_cast<int>(std::min<size_t>(n, static_cast<size_t>(capacity) + 1)));
  if (!room.ok()) {
    return Fail(room.code() == StatusCode::kResourceExhausted ? KVEDGE_CONTEXT_FULL : ToC(room.code()), function,
                room.message());
  }
  const Status fed = s.session->Feed(tokens, n);
  if (!fed.ok()) return Fail(fed, function);
  s.last_token = tokens[n - 1];
  return KVEDGE_OK;
}

// The bytes of each struct in ABI 0, the smallest `size` accepted. Frozen:
// fields appended later lie past these and are read or written only when the
// caller's size covers them.
constexpr size_t kModelInfoSizeAbi0 = offsetof(kvedge_model_info, weight_bytes) + sizeof(uint64_t);
constexpr size_t kSessionConfigSizeAbi0 = offsetof(kvedge_session_config, seed) + sizeof(uint64_t);
constexpr size_t kStatsSizeAbi0 = offsetof(kvedge_stats, compression) + sizeof(double);

// Allocates nothing, also on failure.
kvedge_status CheckSize(size_t size, size_t minimum, const char* function, const char* field) {
  if (size >= minimum) return KVEDGE_OK;
  std::snprintf(t_last_error, sizeof(t_last_error), "%s: %s is %zu (expected at least %zu: set it to the struct's sizeof)",
                function, field, size, minimum);
  return KVEDGE_INVALID_ARGUMENT;
}

// Copies the fields of `full` that fit in out->size bytes to *out and sets
// out->size to the bytes copied. `size` is each struct's first member.
template <typename T>
void CopySized(const T& full, T* out) {
  const size_t n = std::min(out->size, sizeof(T));
  std::memcpy(static_cast<void*>(out), &full, n);
  out->size = n;
}

// The defaults of every field but `size`: those of the C++ options.
// The C API's defaults: NULL policy and formats, so that DefaultConfig
// (runtime/engine/defaults.h) chooses them from the size, as the CLI does.
void FillConfigDefaults(kvedge_session_config* config) {
  const KvRequest kv;
  const SessionOptions session;
  const SamplerOptions sampler;
  config->policy = nullptr;
  config->key_format = nullptr;
  config->value_format = nullptr;
  config->sinks = kv.sinks;
  config->heavy = kv.heavy;
  config->window = kv.window;
  config->capacity_tokens = kv.capacity;
  config->budget_bytes = kv.budget_bytes;
  config->positions = PositionModeName(kv.positions);
  config->h2o_decay = kv.h2o_decay;
  config->threads = session.threads;
  config->max_batch = session.max_batch;
  config->temperature = sampler.temperature;
  config->top_k = sampler.top_k;
  config->top_p = sampler.top_p;
  config->seed = sampler.seed;
}

// The options of a caller's config for kvedge_session_create and
// kvedge_chat_create: the caller's fields over the defaults (NULL: all
// defaults); fields past config->size keep theirs.
kvedge_status ReadConfig(const kvedge_model& model, const kvedge_session_config* config, const char* function,
                         SessionOptions* session, SamplerOptions* sampler) {
  kvedge_session_config merged{};
  FillConfigDefaults(&merged);
  if (config != nullptr) {
    const kvedge_status sized = CheckSize(config->size, kSessionConfigSizeAbi0, function, "config->size");
    if (sized != KVEDGE_OK) return sized;
    std::memcpy(static_cast<void*>(&merged), config, std::min(config->size, sizeof(merged)));
  }
  merged.size = sizeof(merged);
  const Status parsed = ToOptions(model, merged, session, sampler);
  return parsed.ok() ? KVEDGE_OK : Fail(parsed, function);
}

kvedge_status NeedLogits(const kvedge_session& s, const char* function) {
  if (s.session->tokens_fed() == 0) {
    return Fail(KVEDGE_FAILED_PRECONDITION, function, "no logits yet: feed at least one token first");
  }
  return KVEDGE_OK;
}

}  // namespace
}  // namespace kvedge

using kvedge::Fail;
using kvedge::Guarded;
using kvedge::NullArgument;

extern "C" {

namespace {
constexpr kvedge::EnumName<kvedge_status> kStatusNames[] = {{KVEDGE_OK, "ok"},
                                                            {KVEDGE_INVALID_ARGUMENT, "invalid argument"},
                                                            {KVEDGE_NOT_FOUND, "not found"},
                                                            {KVEDGE_CORRUPT, "corrupt"},
                                                            {KVEDGE_UNSUPPORTED, "unsupported"},
                                                            {KVEDGE_OUT_OF_BUDGET, "out of budget"},
                                                            {KVEDGE_CONTEXT_FULL, "context full"},
                                                            {KVEDGE_BUFFER_TOO_SMALL, "buffer too small"},
                                                            {KVEDGE_FAILED_PRECONDITION, "failed precondition"},
                                                            {KVEDGE_IO, "i/o error"},
                                                            {KVEDGE_OUT_OF_MEMORY, "out of memory"},
                                                            {KVEDGE_INTERNAL, "internal error"}};
}  // namespace

const char* kvedge_status_name(kvedge_status status) { return kvedge::NameOf(kStatusNames, status, "unknown status"); }

const char* kvedge_last_error(void) { return kvedge::t_last_error; }

const char* kvedge_version(void) { return KVEDGE_VERSION_STRING; }

int32_t kvedge_abi_version(void) { return KVEDGE_ABI_VERSION; }

kvedge_status kvedge_model_load(const char* model_path, const char* tokenizer_path, kvedge_model** out) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model_path == nullptr) return NullArgument(fn, "model_path");
  if (out == nullptr) return NullArgument(fn, "out");
  return Guarded(fn, [&] {
    auto weights = kvedge::LoadModel(model_path);
    if (!weights.ok()) return Fail(weights.status(), fn);
    auto tokenizer = kvedge::LoadTokenizer(**weights, tokenizer_path != nullptr ? tokenizer_path : "");
    if (!tokenizer.ok()) return Fail(tokenizer.status(), fn);
    auto model = std::make_unique<kvedge_model>();
    model->weights = std::move(weights).value();
    model->tokenizer = std::move(tokenizer).value();
    if (model->weights->gguf != nullptr) {
      auto chat = kvedge::chat::ChatTemplateFromGguf(*model->weights->gguf);
      if (!chat.ok()) return Fail(chat.status(), fn);
      model->chat = std::move(chat).value();
    } else {
      model->chat.source = kvedge::chat::kChatMlTemplate;
      const kvedge::Tokenizer& t = *model->tokenizer;
      if (t.bos() >= 0) model->chat.bos_token = std::string(t.TokenText(t.bos()));
      if (t.eos() >= 0) model->chat.eos_token = std::string(t.TokenText(t.eos()));
    }
    *out = model.release();
    return KVEDGE_OK;
  });
}

void kvedge_model_free(kvedge_model* model) {
  if (model != nullptr) kvedge::Release(model);
}

kvedge_status kvedge_model_get_info_sized(const kvedge_model* model, kvedge_model_info* info) {
  if (model == nullptr) return NullArgument(__func__, "model");
  if (info == nullptr) return NullArgument(__func__, "info");
  const kvedge_status sized = kvedge::CheckSize(info->size, kvedge::kModelInfoSizeAbi0, __func__, "info->size");
  if (sized != KVEDGE_OK) return sized;
  const kvedge::ModelConfig& c = model->weights->config;
  kvedge_model_info full{};
  full.size = sizeof(full);
  full.name = c.name.c_str();
  full.format = model->weights->format.c_str();
  full.vocab_size = c.vocab_size;
  full.context_length = c.context_length;
  full.n_layers = c.n_layers;
  full.dim = c.dim;
  full.hidden_dim = c.hidden_dim;
  full.n_heads = c.n_heads;
  full.n_kv_heads = c.n_kv_heads;
  full.head_dim = c.head_dim;
  full.bos_token = model->tokenizer->bos();
  full.eos_token = model->tokenizer->eos();
  full.weight_bytes = model->weights->weight_bytes;
  kvedge::CopySized(full, info);
  return KVEDGE_OK;
}

kvedge_status kvedge_tokenize(const kvedge_model* model, const char* text, int add_bos, int32_t* out, size_t capacity,
                              size_t* n_tokens) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr) return NullArgument(fn, "model");
  if (text == nullptr) return NullArgument(fn, "text");
  if (n_tokens == nullptr) return NullArgument(fn, "n_tokens");
  if (out == nullptr && capacity > 0) return NullArgument(fn, "out (with capacity > 0)");
  return Guarded(fn, [&] {
    auto ids = model->tokenizer->Encode(text, add_bos != 0);
    if (!ids.ok()) return Fail(ids.status(), fn);
    *n_tokens = ids->size();
    if (ids->size() > capacity) {
      return Fail(
          KVEDGE_BUFFER_TOO_SMALL, fn,
          "the text needs " + std::to_string(ids->size()) + " token ids; the buffer holds " + std::to_string(capacity));
    }
    std::copy(ids->begin(), ids->end(), out);
    return KVEDGE_OK;
  });
}

kvedge_status kvedge_token_piece(const kvedge_model* model, int32_t prev_token, int32_t token, const char** piece,
                                 size_t* len) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr) return NullArgument(fn, "model");
  if (piece == nullptr) return NullArgument(fn, "piece");
  if (len == nullptr) return NullArgument(fn, "len");
  return Guarded(fn, [&] {
    const kvedge::Tokenizer& tok = *model->tokenizer;
    if (token < 0 || token >= tok.vocab_size()) {
      return Fail(KVEDGE_INVALID_ARGUMENT, fn,
                  "token " + std::to_string(token) + " is outside the vocabulary (0 to " +
                      std::to_string(tok.vocab_size() - 1) + ")");
    }
    // Control tokens are not text; DecodePiece would render BOS as "\n<s>\n".
    const bool control = (tok.attributes(token) & kvedge::kTokenAttrControl) != 0;
    const std::string_view p = control ? std::string_view("") : tok.DecodePiece(prev_token, token);
    *piece = p.data();
    *len = p.size();
    return KVEDGE_OK;
  });
}

kvedge_status kvedge_session_config_init_sized(kvedge_session_config* config) {
  if (config == nullptr) return NullArgument(__func__, "config");
  const kvedge_status sized =
      kvedge::CheckSize(config->size, kvedge::kSessionConfigSizeAbi0, __func__, "config->size");
  if (sized != KVEDGE_OK) return sized;
  kvedge_session_config full{};
  full.size = sizeof(full);
  kvedge::FillConfigDefaults(&full);
  kvedge::CopySized(full, config);
  return KVEDGE_OK;
}

kvedge_status kvedge_session_create(const kvedge_model* model, const kvedge_session_config* config,
                                    kvedge_session** out) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr) return NullArgument(fn, "model");
  if (out == nullptr) return NullArgument(fn, "out");
  return Guarded(fn, [&] {
    kvedge::SessionOptions options;
    kvedge::SamplerOptions sampler_options;
    const kvedge_status read = kvedge::ReadConfig(*model, config, fn, &options, &sampler_options);
    if (read != KVEDGE_OK) return read;
    auto sampler = kvedge::Sampler::Create(sampler_options, model->weights->config.vocab_size);
    if (!sampler.ok()) return Fail(sampler.status(), fn);
    auto generator = kvedge::Generator::Create(*model->tokenizer, kvedge::GeneratorOptions{});
    if (!generator.ok()) return Fail(generator.status(), fn);
    auto session = kvedge::Session::Create(*model->weights, options);
    if (!session.ok()) return Fail(session.status(), fn);
    auto handle = std::make_unique<kvedge_session>(model, std::move(session).value(), std::move(sampler).value(),
                                                   std::move(generator).value());
    return kvedge::Hand(std::move(handle), out);
  });
}

void kvedge_session_free(kvedge_session* session) { kvedge::FreeHandle(session); }

kvedge_status kvedge_session_feed_tokens(kvedge_session* session, const int32_t* tokens, size_t n) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (session == nullptr) return NullArgument(fn, "session");
  if (tokens == nullptr && n > 0) return NullArgument(fn, "tokens");
  return Guarded(fn, [&] { return kvedge::FeedTokens(*session, tokens, n, fn); });
}

kvedge_status kvedge_session_feed_text(kvedge_session* session, const char* text, int add_bos) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (session == nullptr) return NullArgument(fn, "session");
  if (text == nullptr) return NullArgument(fn, "text");
  return Guarded(fn, [&] {
    auto ids = session->model->tokenizer->Encode(text, add_bos != 0);
    if (!ids.ok()) return Fail(ids.status(), fn);
    return kvedge::FeedTokens(*session, ids->data(), ids->size(), fn);
  });
}

kvedge_status kvedge_session_sample(kvedge_session* session, int32_t* token) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (session == nullptr) return NullArgument(fn, "session");
  if (token == nullptr) return NullArgument(fn, "token");
  return Guarded(fn, [&] {
    const kvedge_status ready = kvedge::NeedLogits(*session, fn);
    if (ready != KVEDGE_OK) return ready;
    *token = session->sampler.Sample(session->session->Logits());
    return KVEDGE_OK;
  });
}

kvedge_status kvedge_session_logits(const kvedge_session* session, const float** logits, int32_t* n_vocab) {
  if (session == nullptr) return NullArgument(__func__, "session");
  if (logits == nullptr) return NullArgument(__func__, "logits");
  if (n_vocab == nullptr) return NullArgument(__func__, "n_vocab");
  const kvedge_status ready = kvedge::NeedLogits(*session, __func__);
  if (ready != KVEDGE_OK) return ready;
  *logits = session->session->Logits();
  *n_vocab = session->session->vocab_size();
  return KVEDGE_OK;
}

kvedge_status kvedge_session_last_token(const kvedge_session* session, int32_t* token) {
  if (session == nullptr) return NullArgument(__func__, "session");
  if (token == nullptr) return NullArgument(__func__, "token");
  *token = session->last_token;
  return KVEDGE_OK;
}

const kvedge_model* kvedge_session_model(const kvedge_session* session) {
  return session != nullptr ? session->model : nullptr;
}

namespace kvedge {
namespace {
// Fills the caller's kvedge_stats (as many fields as its size says) from a session.
kvedge_status FillStats(const Session& session, kvedge_stats* stats, const char* function) {
  const kvedge_status sized = CheckSize(stats->size, kStatsSizeAbi0, function, "stats->size");
  if (sized != KVEDGE_OK) return sized;
  const KvCache& cache = session.cache();
  const KvCacheStats s = cache.Stats();
  kvedge_stats full{};
  full.size = sizeof(full);
  full.tokens_seen = s.tokens_seen;
  full.tokens_held = s.tokens_held;
  full.tokens_evicted = s.tokens_evicted;
  full.capacity_tokens = static_cast<uint64_t>(cache.plan().capacity);
  full.arena_bytes = s.arena_bytes;
  full.held_bytes = s.held_bytes;
  full.f16_full_bytes = s.f16_full_bytes;
  full.reserved_bytes = session.reserved_bytes();
  full.compression =
      s.held_bytes > 0 ? static_cast<double>(s.f16_full_bytes) / static_cast<double>(s.held_bytes) : 0.0;
  CopySized(full, stats);
  return KVEDGE_OK;
}
}  // namespace
}  // namespace kvedge

kvedge_status kvedge_session_stats_sized(const kvedge_session* session, kvedge_stats* stats) {
  if (session == nullptr) return NullArgument(__func__, "session");
  if (stats == nullptr) return NullArgument(__func__, "stats");
  return kvedge::FillStats(*session->session, stats, __func__);
}

kvedge_status kvedge_session_generate(kvedge_session* session, int32_t max_tokens, kvedge_piece_callback callback,
                                      void* user, int32_t* n_generated) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (n_generated != nullptr) *n_generated = 0;
  if (session == nullptr) return NullArgument(fn, "session");
  return Guarded(fn, [&] {
    if (max_tokens < 0) {
      return Fail(KVEDGE_INVALID_ARGUMENT, fn, "max_tokens is " + std::to_string(max_tokens) + " (expected >= 0)");
    }
    const kvedge_status ready = kvedge::NeedLogits(*session, fn);
    if (ready != KVEDGE_OK) return ready;
    kvedge::GenerationRequest request;
    request.prev_token = session->last_token;
    request.max_tokens = max_tokens;
    const kvedge::GenerationResult result =
        session->generator.Run(*session->session, session->sampler, request, [&](std::string_view text) {
          return callback == nullptr || callback(text.data(), text.size(), user) == 0;
        });
    session->last_token = result.last_token;
    if (n_generated != nullptr) *n_generated = static_cast<int32_t>(result.tokens);
    if (result.reason != kvedge::StopReason::kError) return KVEDGE_OK;
    // A sampled id is always in the vocabulary: a failed feed is a full `full` cache.
    return result.status.code() == kvedge::StatusCode::kResourceExhausted
               ? Fail(KVEDGE_CONTEXT_FULL, fn, result.status.message())
               : Fail(result.status, fn);
  });
}

kvedge_status kvedge_session_save(const kvedge_session* session, const char* path) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (session == nullptr) return NullArgument(fn, "session");
  if (path == nullptr) return NullArgument(fn, "path");
  return Guarded(fn, [&] {
    const kvedge::Status s = kvedge::SaveSession(*session->session, &session->sampler, path);
    return s.ok() ? KVEDGE_OK : Fail(s, fn);
  });
}

kvedge_status kvedge_session_load(kvedge_session* session, const char* path) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (session == nullptr) return NullArgument(fn, "session");
  if (path == nullptr) return NullArgument(fn, "path");
  return Guarded(fn, [&] {
    const kvedge::Status s = kvedge::LoadSession(path, session->session.get(), &session->sampler);
    if (!s.ok()) return Fail(s, fn);
    session->last_token = session->session->history().last();
    return KVEDGE_OK;
  });
}

}  // extern "C"

kvedge_status kvedge_chat_template_render(const kvedge_model* model, const char* template_source,
                                          const char* messages_json, int add_generation_prompt,
                                          const char* bos_token, const char* eos_token, char* out,
                                          size_t capacity, size_t* out_len) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr && template_source == nullptr) return NullArgument(fn, "template_source (without a model)");
  if (messages_json == nullptr) return NullArgument(fn, "messages_json");
  if (out_len == nullptr) return NullArgument(fn, "out_len");
  if (out == nullptr && capacity > 0) return NullArgument(fn, "out (with capacity > 0)");
  return Guarded(fn, [&] {
    kvedge::chat::ChatTemplateInputs in;
    in.messages_json = messages_json;
    in.add_generation_prompt = add_generation_prompt != 0;
    if (model != nullptr) {
      in.bos_token = model->chat.bos_token;
      in.eos_token = model->chat.eos_token;
    }
    if (bos_token != nullptr) in.bos_token = bos_token;
    if (eos_token != nullptr) in.eos_token = eos_token;
    const std::string_view source = template_source != nullptr ? std::string_view(template_source)
                                                               : std::string_view(model->chat.source);
    auto text = kvedge::chat::RenderChatTemplate(source, in);
    if (!text.ok()) return Fail(text.status(), fn);
    *out_len = text->size();
    if (text->size() >= capacity) {
      return Fail(KVEDGE_BUFFER_TOO_SMALL, fn,
                  "the text needs " + std::to_string(text->size() + 1) + " bytes with its NUL; the buffer holds " +
                      std::to_string(capacity));
    }
    std::copy(text->begin(), text->end(), out);
    out[text->size()] = '\0';
    return KVEDGE_OK;
  });
}

kvedge_status kvedge_chat_create(const kvedge_model* model, const kvedge_session_config* config,
                                 const char* system_prompt, const char* template_source, kvedge_chat** out) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr) return NullArgument(fn, "model");
  if (out == nullptr) return NullArgument(fn, "out");
  return Guarded(fn, [&] {
    kvedge::SessionOptions options;
    kvedge::SamplerOptions sampler_options;
    const kvedge_status read = kvedge::ReadConfig(*model, config, fn, &options, &sampler_options);
    if (read != KVEDGE_OK) return read;
    auto sampler = kvedge::Sampler::Create(sampler_options, model->weights->config.vocab_size);
    if (!sampler.ok()) return Fail(sampler.status(), fn);
    auto session = kvedge::Session::Create(*model->weights, options);
    if (!session.ok()) return Fail(session.status(), fn);
    kvedge::chat::ConversationOptions co;
    co.template_source = template_source != nullptr ? template_source : model->chat.source;
    co.bos_token = model->chat.bos_token;
    co.eos_token = model->chat.eos_token;
    if (system_prompt != nullptr) co.system_prompt = system_prompt;
    auto conversation = kvedge::chat::Conversation::Create(*model->tokenizer, std::move(session).value(),
                                                           std::move(sampler).value(), std::move(co));
    if (!conversation.ok()) return Fail(conversation.status(), fn);
    auto handle = std::make_unique<kvedge_chat>();
    handle->model = model;
    handle->conversation = std::move(conversation).value();
    return kvedge::Hand(std::move(handle), out);
  });
}

void kvedge_chat_free(kvedge_chat* chat) { kvedge::FreeHandle(chat); }

kvedge_status kvedge_chat_add_message(kvedge_chat* chat, const char* role, const char* content) {
  const char* const fn = __func__;
  if (chat == nullptr) return NullArgument(fn, "chat");
  if (role == nullptr) return NullArgument(fn, "role");
  if (content == nullptr) return NullArgument(fn, "content");
  return Guarded(fn, [&] {
    const kvedge::Status s = chat->conversation->AddMessage(role, content);
    return s.ok() ? KVEDGE_OK : Fail(s, fn);
  });
}

kvedge_status kvedge_chat_generate_reply(kvedge_chat* chat, int32_t max_tokens, kvedge_piece_callback callback,
                                         void* user, int32_t* n_generated) {
  const char* const fn = __func__;
  if (n_generated != nullptr) *n_generated = 0;
  if (chat == nullptr) return NullArgument(fn, "chat");
  return Guarded(fn, [&] {
    if (max_tokens < 0) {
      return Fail(KVEDGE_INVALID_ARGUMENT, fn, "max_tokens is " + std::to_string(max_tokens) + " (expected >= 0)");
    }
    auto turn = chat->conversation->GenerateReply(max_tokens, nullptr, [&](std::string_view text) {
      return callback == nullptr || callback(text.data(), text.size(), user) == 0;
    });
    if (turn.ok()) {
      if (n_generated != nullptr) *n_generated = static_cast<int32_t>(turn->reply_tokens);
      return KVEDGE_OK;
    }
    return turn.status().code() == kvedge::StatusCode::kResourceExhausted
               ? Fail(KVEDGE_CONTEXT_FULL, fn, turn.status().message())
               : Fail(turn.status(), fn);
  });
}

kvedge_status kvedge_chat_reset(kvedge_chat* chat) {
  if (chat == nullptr) return NullArgument(__func__, "chat");
  chat->conversation->Reset();
  return KVEDGE_OK;
}

kvedge_status kvedge_chat_save(const kvedge_chat* chat, const char* path) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (chat == nullptr) return NullArgument(fn, "chat");
  if (path == nullptr) return NullArgument(fn, "path");
  return Guarded(fn, [&] {
    const kvedge::Status s = chat->conversation->Save(path);
    return s.ok() ? KVEDGE_OK : Fail(s, fn);
  });
}

kvedge_status kvedge_chat_load(kvedge_chat* chat, const char* path) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (chat == nullptr) return NullArgument(fn, "chat");
  if (path == nullptr) return NullArgument(fn, "path");
  return Guarded(fn, [&] {
    const kvedge::Status s = chat->conversation->Load(path);
    return s.ok() ? KVEDGE_OK : Fail(s, fn);
  });
}

kvedge_status kvedge_chat_message_count(const kvedge_chat* chat, size_t* count) {
  if (chat == nullptr) return NullArgument(__func__, "chat");
  if (count == nullptr) return NullArgument(__func__, "count");
  *count = chat->conversation->messages().size();
  return KVEDGE_OK;
}

kvedge_status kvedge_chat_message(const kvedge_chat* chat, size_t i, const char** role, const char** content) {
  const char* const fn = __func__;
  if (chat == nullptr) return NullArgument(fn, "chat");
  if (role == nullptr) return NullArgument(fn, "role");
  if (content == nullptr) return NullArgument(fn, "content");
  const auto& messages = chat->conversation->messages();
  if (i >= messages.size()) {
    return Fail(KVEDGE_INVALID_ARGUMENT, fn,
                "message " + std::to_string(i) + " of " + std::to_string(messages.size()));
  }
  *role = messages[i].role.c_str();
  *content = messages[i].content.c_str();
  return KVEDGE_OK;
}

kvedge_status kvedge_chat_stats_sized(const kvedge_chat* chat, kvedge_stats* stats) {
  if (chat == nullptr) return NullArgument(__func__, "chat");
  if (stats == nullptr) return NullArgument(__func__, "stats");
  return kvedge::FillStats(chat->conversation->session(), stats, __func__);
}
