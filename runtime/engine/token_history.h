// TokenHistory: what a Session remembers of the tokens it has processed, in
// bounded memory however long the stream runs.
//
// A million-token stream cannot keep every id, and does not need to: the KV
// cache has already forgotten most of them, so a session can only ever be
// continued, never rolled back. What a server needs to reuse a session for a
// new request is "does this prompt start with exactly the tokens the session
// has seen?" — answered by the count and a chained hash of every id (check
// the prompt's first size() ids with MatchesPrefixOf, then feed the rest).
// The last `capacity` ids are kept verbatim for the rest (the last token for
// piece decoding, stop strings, repetition checks, display).
#ifndef KVEDGE_RUNTIME_ENGINE_TOKEN_HISTORY_H_
#define KVEDGE_RUNTIME_ENGINE_TOKEN_HISTORY_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "platform/status.h"

namespace kvedge {

// Not thread-safe; owned by one Session. Appending allocates nothing.
class TokenHistory {
 public:
  static constexpr int32_t kSyntheticToken = -1;  // id recorded for Session::FillSynthetic

  explicit TokenHistory(size_t capacity = 0);  // reserves the recent ring once

  void Append(const int* tokens, size_t n);
  void Clear();

  uint64_t size() const { return size_; }           // tokens over the stream's life
  uint64_t hash() const { return hash_; }           // chain over all of them (HashOf)
  size_t capacity() const { return ring_.size(); }
  size_t held() const { return held_; }             // ids kept: ≤ capacity, ≤ size
  // The i-th oldest held id, i < held().
  int32_t Recent(size_t i) const;
  int32_t last() const { return held() > 0 ? Recent(held() - 1) : -1; }

  // The hash of a stream of exactly `tokens`, as hash() would be after
  // appending them to an empty history. Chained per id (XXH3, 64 bit), so a
  // caller can extend it token by token.
  static uint64_t HashOf(const int* tokens, size_t n);
  static uint64_t Extend(uint64_t hash, int32_t token);
  // True if prompt[0, size()) is the stream this history recorded (up to a
  // 64-bit hash collision) — the prompt continues this session.
  bool MatchesPrefixOf(const int* prompt, size_t n) const;

  // Restores a saved history: `recent` holds the last min(size, capacity of
  // the saved history) ids, oldest first; the newest min(capacity(), n) are
  // kept. Errors: more recent ids than the stream's size.
  Status Restore(uint64_t size, uint64_t hash, const int32_t* recent, size_t n);

 private:
  std::vector<int32_t> ring_;  // [capacity] the last ids; slot (size_ - 1) % capacity is the newest
  size_t held_ = 0;
  uint64_t size_ = 0;
  uint64_t hash_ = 0;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_TOKEN_HISTORY_H_
