// Batched decode steps over many sessions' caches (see batch_decoder.h).
#include "runtime/engine/batch_decoder.h"

#include <string>

namespace kvedge {

BatchDecoder::~BatchDecoder() = default;

StatusOr<std::unique_ptr<BatchDecoder>> BatchDecoder::Create(const ModelWeights& model, int max_streams,
                                                             int threads) {
  if (max_streams < 1 || max_streams > 4096) {
    return InvalidArgument("batch of " + std::to_string(max_streams) + " streams is out of range (1 to 4096)");
  }
  std::unique_ptr<BatchDecoder> b(new BatchDecoder(model));
  KVEDGE_ASSIGN_OR_RETURN(b->threads_, ThreadArena::Create(threads));
  KVEDGE_ASSIGN_OR_RETURN(b->scratch_,
                          ForwardScratch::Allocate(model.config, static_cast<size_t>(max_streams), nullptr));
  b->caches_.assign(static_cast<size_t>(max_streams), nullptr);
  return b;
}

Status BatchDecoder::Check(Session* const* sessions, const int* tokens, size_t n) const {
  if (n > scratch_.rows) {
    return InvalidArgument("batch of " + std::to_string(n) + " streams exceeds the decoder's " +
                           std::to_string(scratch_.rows));
  }
  const int vocab = model_.config.vocab_size;
  // Messages are built only on error: a good step allocates nothing.
  const auto row = [](size_t i) { return "batch row " + std::to_string(i); };
  for (size_t i = 0; i < n; ++i) {
    if (sessions[i] == nullptr) return InvalidArgument(row(i) + " has no session");
    if (&sessions[i]->model() != &model_) return InvalidArgument(row(i) + ": the session runs another model");
    for (size_t j = 0; j < i; ++j) {
      if (sessions[j] == sessions[i]) {
        return InvalidArgument(row(i) + " repeats the session of row " + std::to_string(j) +
                               " (one token per session and step)");
      }
    }
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return InvalidArgument(row(i) + ": token id " + std::to_string(tokens[i]) + " is outside the vocabulary (0 to " +
                             std::to_string(vocab - 1) + ")");
    }
    const Status room = sessions[i]->cache().CheckRoom(1);
    if (!room.ok()) return Status(room.code(), row(i) + ": " + room.message());
  }
  return OkStatus();
}

Status BatchDecoder::Step(Session* const* sessions, const int* tokens, size_t n) {
  if (n == 0) return OkStatus();
  KVEDGE_RETURN_IF_ERROR(Check(sessions, tokens, n));
  for (size_t i = 0; i < n; ++i) caches_[i] = &sessions[i]->mutable_cache();
  Forward(model_, scratch_, RowCaches(caches_.data()), tokens, n, /*all_logits=*/true, threads_.get());
  const size_t vocab = static_cast<size_t>(model_.config.vocab_size);
  for (size_t i = 0; i < n; ++i) sessions[i]->AdoptStep(tokens[i], scratch_.logits + i * vocab);
  return OkStatus();
}

}  // namespace kvedge
