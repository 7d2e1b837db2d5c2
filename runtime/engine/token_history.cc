// Bounded token history: a ring of recent ids and a chained hash of all.
#include "runtime/engine/token_history.h"

#include <algorithm>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvedge {

TokenHistory::TokenHistory(size_t capacity) : ring_(capacity, 0) {}

int32_t TokenHistory::Recent(size_t i) const {
  KVEDGE_CHECK(i < held());
  const uint64_t index = size_ - held_ + i;  // stream index of the i-th oldest held id
  return ring_[static_cast<size_t>(index % ring_.size())];
}

uint64_t TokenHistory::Extend(uint64_t hash, int32_t token) {
  return XXH3_64bits_withSeed(&token, sizeof(token), hash);
}

uint64_t TokenHistory::HashOf(const int* tokens, size_t n) {
  uint64_t h = 0;
  for (size_t i = 0; i < n; ++i) h = Extend(h, tokens[i]);
  return h;
}

void TokenHistory::Append(const int* tokens, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (!ring_.empty()) {
      ring_[static_cast<size_t>(size_ % ring_.size())] = tokens[i];
      held_ = std::min(held_ + 1, ring_.size());
    }
    hash_ = Extend(hash_, tokens[i]);
    ++size_;
  }
}

void TokenHistory::Clear() {
  held_ = 0;
  size_ = 0;
  hash_ = 0;
}

bool TokenHistory::MatchesPrefixOf(const int* prompt, size_t n) const {
  return n >= size_ && HashOf(prompt, static_cast<size_t>(size_)) == hash_;
}

Status TokenHistory::Restore(uint64_t size, uint64_t hash, const int32_t* recent, size_t n) {
  if (n > size) {
    return DataLoss("token history holds " + std::to_string(n) + " recent ids of a stream of " + std::to_string(size));
  }
  size_ = size;
  hash_ = hash;
  const size_t keep = std::min(n, ring_.size());
  held_ = keep;
  for (size_t i = n - keep; i < n; ++i) {
    const uint64_t index = size - n + i;  // stream index of recent[i]
    ring_[static_cast<size_t>(index % ring_.size())] = recent[i];
  }
  return OkStatus();
}

}  // namespace kvedge
