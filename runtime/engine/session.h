// Session: one stream of tokens through a loaded model with its own KV arena,
// scratch buffers and threads. Everything is reserved in Create(); feeding
// tokens allocates nothing.
#ifndef KVEDGE_RUNTIME_ENGINE_SESSION_H_
#define KVEDGE_RUNTIME_ENGINE_SESSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>

#include "kvcache/kv_cache.h"
#include "platform/function_ref.h"
#include "platform/memory.h"
#include "platform/status.h"
#include "platform/thread_arena.h"
#include "runtime/engine/token_history.h"
#include "runtime/model/model.h"

namespace kvedge {

// Most tokens one prefill chunk may batch (SessionOptions::max_batch).
inline constexpr int kMaxBatch = 4096;

struct SessionOptions {
  KvCacheOptions kv;
  int threads = 1;      // 1 … kMaxThreads
  int max_batch = 32;   // tokens per prefill chunk (batched matmuls), 1 … kMaxBatch
  // Recent token ids the session keeps verbatim (TokenHistory), 0 …
  // kMaxContext; the count and hash of all of them are kept whatever this is.
  int history_tokens = 4096;
};

// The KV shape a model implies.
KvShape KvShapeOf(const ModelConfig& c);

// Owns its cache, scratch and thread arena; borrows the model, which must
// outlive it (models are immutable and may be shared by many sessions).
// Not thread-safe: drive one session from one thread at a time.
class Session {
 public:
  // Reserves the KV arena (from `budget` if given) and scratch. Errors: a
  // plan the budget cannot hold, bad thread counts, bad options.
  static StatusOr<std::unique_ptr<Session>> Create(const ModelWeights& model, const SessionOptions& options,
                                                   MemoryBudget* budget = nullptr);
  ~Session();

  // Runs tokens through the model, in chunks of max_batch (batched matmuls,
  // attention token by token through the arena). Afterwards Logits() holds the
  // last token's logits. Errors: token ids out of range, a full `full` cache.
  Status Feed(const int* tokens, size_t n);
  // As Feed, and calls on_logits(i, logits[vocab]) for every token i.
  Status FeedAll(const int* tokens, size_t n, FunctionRef<void(size_t, const float*)> on_logits);

  // For benchmarks that need a deep cache fast: appends n tokens of seeded
  // synthetic keys and values (standard normal, cycled from a small pool) to
  // every layer without running the model. Attention costs the same whatever
  // the cached values, so decode after this fill times like decode after a
  // real prefill; H2O scores get no attention mass from it. Logits() is not
  // updated (Feed a token next). Errors: a `full` cache without room.
  Status FillSynthetic(size_t n, uint32_t seed);

  const float* Logits() const { return last_logits_; }
  int vocab_size() const { return model_.config.vocab_size; }
  const KvCache& cache() const { return *cache_; }
  const ModelWeights& model() const { return model_; }
  uint64_t tokens_fed() const { return tokens_fed_; }
  // Every token fed (FillSynthetic's as TokenHistory::kSyntheticToken).
  const TokenHistory& history() const { return history_; }

  // For session files (runtime/chat/session_file.h), which restore the cache
  // and history in place, then the stream's counters and last logits
  // ([vocab]; null when nothing was fed).
  KvCache& mutable_cache() { return *cache_; }
  TokenHistory& mutable_history() { return history_; }
  void RestoreStream(uint64_t tokens_fed, const float* logits);
  // Bytes reserved by this session: arena + scratch.
  uint64_t reserved_bytes() const;

 private:
  Session(const ModelWeights& model, const SessionOptions& options);
  Status FeedImpl(const int* tokens, size_t n, bool all, FunctionRef<void(size_t, const float*)> on_logits);
  void ForwardChunk(const int* tokens, size_t n, bool all_logits);

  const ModelWeights& model_;
  SessionOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ThreadArena> threads_;
  AlignedBuffer scratch_;
  // Views into scratch_, each [max_batch][width] f32.
  float* x_ = nullptr;       // residual stream [B][dim]
  float* xb_ = nullptr;      // normed input [B][dim]
  float* q_ = nullptr;       // [B][n_heads·head_dim]
  float* k_ = nullptr;       // [B][kv_dim]
  float* v_ = nullptr;       // [B][kv_dim]
  float* att_ = nullptr;     // [B][n_heads·head_dim]
  float* proj_ = nullptr;    // [B][dim]
  float* h1_ = nullptr;      // [B][hidden]
  float* h3_ = nullptr;      // [B][hidden]
  float* logits_ = nullptr;  // [B][vocab]
  const float* last_logits_ = nullptr;
  uint64_t tokens_fed_ = 0;
  TokenHistory history_;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_SESSION_H_
