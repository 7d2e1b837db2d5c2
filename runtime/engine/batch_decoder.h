// BatchDecoder: continuous batching of decode steps. Many Sessions of one
// model each take one token per Step, and the step reads the weights once for
// all of them: the matrix products run over a [n][width] batch of rows (row i
// is sessions[i]'s next token), while attention stays per row, in row i's own
// session's compressed KV arena (its own format, policy and position). Since
// decode is bound by streaming the weights, n streams cost little more than
// one. Sequences join and leave between steps: each Step names its sessions.
//
// The forward pass is Session's (Forward in session.h); only its caches
// differ (RowCaches per row instead of one). Every weight kernel computes a
// (weight row, input row) pair with the same op sequence whatever the batch
// (simd/model_kernels.h), and attention is per cache, so a session stepped
// in a batch gets the logits it would get fed alone, bit for bit.
#ifndef KVEDGE_RUNTIME_ENGINE_BATCH_DECODER_H_
#define KVEDGE_RUNTIME_ENGINE_BATCH_DECODER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "platform/status.h"
#include "platform/thread_arena.h"
#include "runtime/engine/session.h"
#include "runtime/model/model.h"

namespace kvedge {

// Borrows the model (which must outlive it); owns scratch for max_streams
// rows and its own threads, which run the MatMuls and each row's attention
// (a session whose cache was planned for fewer threads attends on one: same
// result). The sessions it steps are borrowed per call and driven from the
// calling thread, so nothing else may use them during a Step. Not
// thread-safe.
class BatchDecoder {
 public:
  // Scratch for up to max_streams rows (1 … 4096), its own ThreadArena of
  // `threads`. Errors: bad counts.
  static StatusOr<std::unique_ptr<BatchDecoder>> Create(const ModelWeights& model, int max_streams, int threads);
  ~BatchDecoder();

  // Feeds tokens[i] to sessions[i] (n ≤ max_streams distinct sessions of this
  // model): one pass over the weights (batched MatMuls over the n rows),
  // attention of row i in sessions[i]'s own cache. Afterwards
  // sessions[i]->Logits() holds its logits, and each session's history and
  // tokens_fed advanced exactly as sessions[i]->Feed(&tokens[i], 1) would
  // have. Allocates nothing. Errors (checked before anything runs, so no
  // session changes): n over max_streams, a null or repeated session, one of
  // another model, a token id out of range, a `full` cache that is full —
  // each naming the row.
  Status Step(Session* const* sessions, const int* tokens, size_t n);

  int max_streams() const { return static_cast<int>(scratch_.rows); }
  int threads() const { return threads_->num_threads(); }
  const ModelWeights& model() const { return model_; }
  // Bytes reserved: the scratch of max_streams rows.
  uint64_t reserved_bytes() const { return scratch_.buffer.size(); }

 private:
  explicit BatchDecoder(const ModelWeights& model) : model_(model) {}
  Status Check(Session* const* sessions, const int* tokens, size_t n) const;

  const ModelWeights& model_;
  std::unique_ptr<ThreadArena> threads_;
  ForwardScratch scratch_;       // [max_streams] rows
  std::vector<KvCache*> caches_;  // [max_streams]: the step's row caches
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_BATCH_DECODER_H_
