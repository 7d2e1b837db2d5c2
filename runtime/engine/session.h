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

// The forward pass's scratch for up to `rows` rows: views into one buffer,
// each [rows][width] f32. Reserved once (Session::Create, BatchDecoder::Create).
struct ForwardScratch {
  static StatusOr<ForwardScratch> Allocate(const ModelConfig& c, size_t rows, MemoryBudget* budget);

  AlignedBuffer buffer;
  size_t rows = 0;
  float* x = nullptr;       // residual stream [rows][dim]
  float* xb = nullptr;      // normed input [rows][dim]
  float* q = nullptr;       // [rows][n_heads·head_dim]
  float* k = nullptr;       // [rows][kv_dim]
  float* v = nullptr;       // [rows][kv_dim]
  float* att = nullptr;     // [rows][n_heads·head_dim]
  float* proj = nullptr;    // [rows][dim]
  float* h1 = nullptr;      // [rows][hidden]
  float* h3 = nullptr;      // [rows][hidden]
  float* logits = nullptr;  // [rows][vocab]
};

// The cache each row of a forward pass appends to and attends: one cache for
// every row (a Session's chunk: row i is the stream's token i, attending rows
// < i through the cache) or one per row (BatchDecoder: row i is the next token
// of its own stream). Non-owning.
class RowCaches {
 public:
  explicit RowCaches(KvCache* all) : all_(all) {}
  explicit RowCaches(KvCache* const* per_row) : per_row_(per_row) {}
  KvCache& operator[](size_t row) const { return per_row_ != nullptr ? *per_row_[row] : *all_; }
  // The cache every row shares, or null when each row has its own.
  KvCache* shared() const { return all_; }

 private:
  KvCache* all_ = nullptr;
  KvCache* const* per_row_ = nullptr;
};

// The Llama forward pass of n ≤ s.rows rows, one pass over the weights
// (batched MatMuls over the rows): row i embeds tokens[i] (a valid id),
// appends its keys and values to caches[i] and attends there (each cache has
// room: CheckRoom first). Writes s.logits: every row's [n][vocab] if
// all_logits, else the last row's [1][vocab]. Allocates nothing.
void Forward(const ModelWeights& model, const ForwardScratch& s, RowCaches caches, const int* tokens, size_t n,
             bool all_logits, ThreadArena* threads);

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

  // For BatchDecoder, whose Forward appended `token` to this session's cache:
  // takes its logits ([vocab], copied into the session's own buffer) and
  // advances history and tokens_fed as Feed(&token, 1) does.
  void AdoptStep(int token, const float* logits);

 private:
  Session(const ModelWeights& model, const SessionOptions& options);
  Status FeedImpl(const int* tokens, size_t n, bool all, FunctionRef<void(size_t, const float*)> on_logits);

  const ModelWeights& model_;
  SessionOptions options_;
  std::unique_ptr<KvCache> cache_;
  std::unique_ptr<ThreadArena> threads_;
  ForwardScratch scratch_;  // [max_batch] rows
  const float* last_logits_ = nullptr;  // a row of scratch_.logits
  uint64_t tokens_fed_ = 0;
  TokenHistory history_;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_SESSION_H_
