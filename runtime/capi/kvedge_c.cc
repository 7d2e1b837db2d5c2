// The C API (include/kvedge.h) over Session, Sampler and Tokenizer: handles,
// status mapping, thread-local error messages; no exception crosses it.
#include "kvedge.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kvcache/kv_cache_plan.h"
#include "platform/status.h"
#include "platform/thread_arena.h"
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
  mutable std::atomic<int> references{1};
};

// One stream: owns its Session and Sampler; used by one thread at a time.
struct kvedge_session {
  kvedge_session(const kvedge_model* m, std::unique_ptr<kvedge::Session> s, kvedge::Sampler sp)
      : model(m), session(std::move(s)), sampler(std::move(sp)) {}

  const kvedge_model* model;  // a counted reference
  std::unique_ptr<kvedge::Session> session;
  kvedge::Sampler sampler;
  int last_token = -1;
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

// Parses an optional name with `parse`; NULL keeps *out.
template <typename T, typename Parse>
Status ParseName(const char* field, const char* name, Parse parse, const char* accepted, T* out) {
  if (name == nullptr) return OkStatus();
  if (!parse(std::string(name), out)) {
    return InvalidArgument(std::string("config.") + field + " '" + name + "' is unknown (expected " + accepted + ")");
  }
  return OkStatus();
}

bool ParsePositions(const std::string& name, PositionMode* out) {
  for (PositionMode m : {PositionMode::kInCache, PositionMode::kAbsolute}) {
    if (name == PositionModeName(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

Status ToOptions(const kvedge_model& model, const kvedge_session_config& c, SessionOptions* session,
                 SamplerOptions* sampler) {
  KvCacheOptions& kv = session->kv;
  KVEDGE_RETURN_IF_ERROR(ParseName("policy", c.policy, ParseEvictionPolicy, "full, window, sinks or h2o", &kv.policy));
  KVEDGE_RETURN_IF_ERROR(
      ParseName("key_format", c.key_format, ParseKvFormat, "f32, f16, int8 or int4", &kv.key_format));
  KVEDGE_RETURN_IF_ERROR(
      ParseName("value_format", c.value_format, ParseKvFormat, "f32, f16, int8 or int4", &kv.value_format));
  KVEDGE_RETURN_IF_ERROR(ParseName("positions", c.positions, ParsePositions, "in-cache or absolute", &kv.positions));
  if (c.threads < 1 || c.threads > kMaxThreads) {
    return InvalidArgument("config.threads is " + std::to_string(c.threads) + " (expected 1 to " +
                           std::to_string(kMaxThreads) + ")");
  }
  kv.sinks = c.sinks;
  kv.heavy = c.heavy;
  kv.window = c.window;
  kv.capacity = c.capacity_tokens;
  kv.budget_bytes = c.budget_bytes;
  kv.h2o_decay = c.h2o_decay;
  // Neither a size nor a shape given: the model's trained context.
  if (kv.capacity == 0 && kv.budget_bytes == 0 && kv.window < 0 && kv.heavy < 0) {
    kv.capacity = model.weights->config.context_length;
  }
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

const char* kvedge_status_name(kvedge_status status) {
  switch (status) {
    case KVEDGE_OK: return "ok";
    case KVEDGE_INVALID_ARGUMENT: return "invalid argument";
    case KVEDGE_NOT_FOUND: return "not found";
    case KVEDGE_CORRUPT: return "corrupt";
    case KVEDGE_UNSUPPORTED: return "unsupported";
    case KVEDGE_OUT_OF_BUDGET: return "out of budget";
    case KVEDGE_CONTEXT_FULL: return "context full";
    case KVEDGE_BUFFER_TOO_SMALL: return "buffer too small";
    case KVEDGE_FAILED_PRECONDITION: return "failed precondition";
    case KVEDGE_IO: return "i/o error";
    case KVEDGE_OUT_OF_MEMORY: return "out of memory";
    case KVEDGE_INTERNAL: return "internal error";
  }
  return "unknown status";
}

const char* kvedge_last_error(void) { return kvedge::t_last_error; }

const char* kvedge_version(void) { return KVEDGE_VERSION_STRING; }

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
    *out = model.release();
    return KVEDGE_OK;
  });
}

void kvedge_model_free(kvedge_model* model) {
  if (model != nullptr) kvedge::Release(model);
}

kvedge_status kvedge_model_get_info(const kvedge_model* model, kvedge_model_info* info) {
  if (model == nullptr) return NullArgument(__func__, "model");
  if (info == nullptr) return NullArgument(__func__, "info");
  const kvedge::ModelConfig& c = model->weights->config;
  info->name = c.name.c_str();
  info->format = model->weights->format.c_str();
  info->vocab_size = c.vocab_size;
  info->context_length = c.context_length;
  info->n_layers = c.n_layers;
  info->dim = c.dim;
  info->hidden_dim = c.hidden_dim;
  info->n_heads = c.n_heads;
  info->n_kv_heads = c.n_kv_heads;
  info->head_dim = c.head_dim;
  info->bos_token = model->tokenizer->bos();
  info->eos_token = model->tokenizer->eos();
  info->weight_bytes = model->weights->weight_bytes;
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

void kvedge_session_config_init(kvedge_session_config* config) {
  if (config == nullptr) return;
  const kvedge::KvCacheOptions kv;
  const kvedge::SessionOptions session;
  const kvedge::SamplerOptions sampler;
  *config = kvedge_session_config{};
  config->policy = kvedge::EvictionPolicyName(kv.policy);
  config->key_format = kvedge::KvFormatName(kv.key_format);
  config->value_format = kvedge::KvFormatName(kv.value_format);
  config->sinks = kv.sinks;
  config->heavy = kv.heavy;
  config->window = kv.window;
  config->capacity_tokens = kv.capacity;
  config->budget_bytes = kv.budget_bytes;
  config->positions = kvedge::PositionModeName(kv.positions);
  config->h2o_decay = kv.h2o_decay;
  config->threads = session.threads;
  config->max_batch = session.max_batch;
  config->temperature = sampler.temperature;
  config->top_k = sampler.top_k;
  config->top_p = sampler.top_p;
  config->seed = sampler.seed;
}

kvedge_status kvedge_session_create(const kvedge_model* model, const kvedge_session_config* config,
                                    kvedge_session** out) {
  const char* const fn = __func__;  // __func__ inside a lambda names the lambda
  if (model == nullptr) return NullArgument(fn, "model");
  if (out == nullptr) return NullArgument(fn, "out");
  return Guarded(fn, [&] {
    kvedge_session_config defaults;
    if (config == nullptr) {
      kvedge_session_config_init(&defaults);
      config = &defaults;
    }
    kvedge::SessionOptions options;
    kvedge::SamplerOptions sampler_options;
    const kvedge::Status parsed = kvedge::ToOptions(*model, *config, &options, &sampler_options);
    if (!parsed.ok()) return Fail(parsed, fn);
    auto sampler = kvedge::Sampler::Create(sampler_options, model->weights->config.vocab_size);
    if (!sampler.ok()) return Fail(sampler.status(), fn);
    auto session = kvedge::Session::Create(*model->weights, options);
    if (!session.ok()) return Fail(session.status(), fn);
    auto handle = std::make_unique<kvedge_session>(model, std::move(session).value(), std::move(sampler).value());
    model->references.fetch_add(1, std::memory_order_relaxed);
    *out = handle.release();
    return KVEDGE_OK;
  });
}

void kvedge_session_free(kvedge_session* session) {
  if (session == nullptr) return;
  const kvedge_model* model = session->model;
  delete session;  // the Session borrows the model's weights: release them after
  kvedge::Release(model);
}

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

kvedge_status kvedge_session_stats(const kvedge_session* session, kvedge_stats* stats) {
  if (session == nullptr) return NullArgument(__func__, "session");
  if (stats == nullptr) return NullArgument(__func__, "stats");
  const kvedge::KvCache& cache = session->session->cache();
  const kvedge::KvCacheStats s = cache.Stats();
  stats->tokens_seen = s.tokens_seen;
  stats->tokens_held = s.tokens_held;
  stats->tokens_evicted = s.tokens_evicted;
  stats->capacity_tokens = static_cast<uint64_t>(cache.plan().capacity);
  stats->arena_bytes = s.arena_bytes;
  stats->held_bytes = s.held_bytes;
  stats->f16_full_bytes = s.f16_full_bytes;
  stats->reserved_bytes = session->session->reserved_bytes();
  stats->compression =
      s.held_bytes > 0 ? static_cast<double>(s.f16_full_bytes) / static_cast<double>(s.held_bytes) : 0.0;
  return KVEDGE_OK;
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
    const kvedge::Tokenizer& tok = *session->model->tokenizer;
    kvedge_status ready = kvedge::NeedLogits(*session, fn);
    for (int32_t i = 0; ready == KVEDGE_OK && i < max_tokens; ++i) {
      const int prev = session->last_token;
      const int token = session->sampler.Sample(session->session->Logits());
      if (tok.IsEndOfGeneration(token)) break;
      ready = kvedge::FeedTokens(*session, &token, 1, fn);
      if (ready != KVEDGE_OK) break;
      if (n_generated != nullptr) *n_generated = i + 1;
      if (callback != nullptr) {
        const std::string_view piece = tok.DecodePiece(prev, token);
        if (callback(piece.data(), piece.size(), user) != 0) break;
      }
    }
    return ready;
  });
}

}  // extern "C"
