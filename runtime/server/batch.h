// The batched decode step the scheduler calls. A stand-in with the API of
// runtime/engine/batch_decoder.h (being written) until it lands: one token to
// each of n sessions, each session fed in turn.
#ifndef KVEDGE_RUNTIME_SERVER_BATCH_H_
#define KVEDGE_RUNTIME_SERVER_BATCH_H_

#include <cstddef>
#include <memory>

#include "platform/status.h"
#include "runtime/engine/session.h"
#include "runtime/model/model.h"

namespace kvedge::server {

class BatchDecoder {
 public:
  static StatusOr<std::unique_ptr<BatchDecoder>> Create(const ModelWeights& /*model*/, int max_streams,
                                                        int /*threads*/) {
    if (max_streams < 1) return InvalidArgument("a batch needs at least one stream");
    return std::unique_ptr<BatchDecoder>(new BatchDecoder());
  }
  // Feeds tokens[i] to sessions[i] for i < n. Errors: the first failed feed.
  Status Step(Session* const* sessions, const int* tokens, size_t n) {
    Status first;
    for (size_t i = 0; i < n; ++i) {
      Status s = sessions[i]->Feed(&tokens[i], 1);
      if (!s.ok() && first.ok()) first = std::move(s);
    }
    return first;
  }

 private:
  BatchDecoder() = default;
};

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_BATCH_H_
