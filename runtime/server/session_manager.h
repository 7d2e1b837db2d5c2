// The server's conversations, each a chat::Conversation on its own Session,
// inside one memory budget. A request continues the idle session whose fed
// text its rendered prompt extends (only the new suffix is fed: the match is
// on what the session was fed, never on what its cache still holds, so a
// session whose early tokens were evicted or quantized continues all the
// same). When the total budget cannot hold another live session, the least
// recently used idle one is saved to the session directory (a session file
// and its conversation file, runtime/chat/session_file.h, each written
// atomically) and freed; it is restored on its next request. On start the
// directory's saved sessions are indexed, so nothing is lost across a
// restart.
#ifndef KVEDGE_RUNTIME_SERVER_SESSION_MANAGER_H_
#define KVEDGE_RUNTIME_SERVER_SESSION_MANAGER_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "platform/dir_lock.h"
#include "platform/status.h"
#include "runtime/chat/conversation.h"
#include "runtime/engine/session.h"
#include "runtime/model/model.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge::server {

// XXH3-128 of a text.
struct TextDigest {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const TextDigest&) const = default;
};
TextDigest DigestOf(std::string_view text);

// Chat sessions render messages through the model's chat template; text
// sessions (/v1/completions) feed the prompt as it is.
enum class SessionKind : uint8_t { kChat, kText };

struct SessionManagerOptions {
  SessionOptions session;          // every session's cache and threads
  uint64_t total_budget = 0;       // bytes all live sessions may reserve together (arena + scratch)
  int max_live = 0;                // most live sessions; 0: what the budget holds
  std::string dir;                 // where idle sessions go; empty: they are dropped (a client resends them)
  chat::ConversationOptions chat;  // the model's chat template
};

// One session as GET /v1/sessions shows it.
struct SessionInfo {
  std::string id;
  uint64_t tokens = 0;           // fed over the session's life
  uint64_t tokens_in_cache = 0;  // held by its cache now (0 on disk)
  uint64_t kv_bytes = 0;         // arena bytes holding them (0 on disk)
  uint64_t kv_budget_bytes = 0;  // its arena (also when on disk)
  bool on_disk = false;          // swapped out (not in memory)
  bool busy = false;             // a request is using it
  double last_used = 0;          // Unix seconds
};

struct SessionTotals {
  int live = 0;
  int on_disk = 0;
  int capacity = 0;              // live sessions the budget holds
  uint64_t kv_held_bytes = 0;    // held by live sessions' caches
  uint64_t reserved_bytes = 0;   // reserved by sessions in memory, live or kept for reuse (arena + scratch)
  uint64_t budget_bytes = 0;     // --kv-budget-total
  uint64_t saves = 0;            // sessions swapped to disk
  uint64_t restores = 0;         // sessions read back
  uint64_t allocated = 0;        // Sessions (arena + scratch) allocated so far: at most capacity, then reused
};

// Acquire, Release and SaveAll are called by one thread (the scheduler's
// worker, which owns all model work); List and Totals from any thread.
class SessionManager {
 public:
  // Measures one session's reservation and indexes the saved sessions in
  // `dir` (created if missing; files that are not readable saved sessions
  // are reported in *warnings and left alone). The directory is locked
  // (DirLock) for the manager's lifetime. Errors: a budget that holds no
  // session (naming both sizes), a session directory that cannot be created
  // or read, or that another process (server) holds.
  static StatusOr<std::unique_ptr<SessionManager>> Create(const ModelWeights& model, const Tokenizer& tokenizer,
                                                          SessionManagerOptions options,
                                                          std::vector<std::string>* warnings);

  struct Lease {
    std::string id;
    chat::Conversation* conversation = nullptr;  // owned by the manager; valid until Release
  };
  // The idle session of `kind` whose fed text `rendered` extends the most —
  // live, else saved (restored) — else a new one. Making room saves (or,
  // with no directory, drops) the least recently used idle session.
  // Errors: ResourceExhausted when every live session is busy; IoError when
  // a save fails (the session stays live).
  StatusOr<Lease> Acquire(SessionKind kind, const std::string& rendered);
  // The session is idle again (last used now).
  void Release(const std::string& id);
  // Saves every live session to the directory (shutdown). Errors: the first
  // failed save (the others are still attempted).
  Status SaveAll();

  std::vector<SessionInfo> List() const;
  SessionTotals Totals() const;
  uint64_t session_reserved_bytes() const { return per_session_bytes_; }
  int session_capacity_tokens() const { return capacity_tokens_; }

 private:
  struct Entry {
    SessionKind kind = SessionKind::kChat;
    std::unique_ptr<chat::Conversation> conversation;  // null: on disk only
    // Of a session on disk (live ones answer for themselves): the length and
    // 128-bit hash of its fed text, so an idle session costs a few bytes of
    // memory whatever its length (the text itself is in its file, and is
    // compared in full when the session is read back).
    uint64_t fed_len = 0;
    TextDigest fed_digest;
    bool busy = false;
    bool saved = false;        // a file holds its latest state
    double last_used = 0;
    SessionInfo info;          // figures as of the last Acquire/Release (read by List)
  };
  SessionManager(const ModelWeights& model, const Tokenizer& tokenizer, SessionManagerOptions options);
  std::string PathOf(const std::string& id) const;
  // A conversation around a spare session, else a new one.
  StatusOr<std::unique_ptr<chat::Conversation>> NewConversation(SessionKind kind);
  // Frees one live idle session (saving it first when there is a directory);
  // its Session, emptied, becomes a spare.
  Status MakeRoom();
  int LiveCount() const;
  void Refresh(const std::string& id, Entry& e);
  std::string NewId(SessionKind kind);

  const ModelWeights& model_;
  const Tokenizer& tokenizer_;
  SessionManagerOptions options_;
  DirLock dir_lock_;  // held while options_.dir is in use (none without a directory)
  chat::ConversationOptions text_options_;
  uint64_t per_session_bytes_ = 0;
  uint64_t arena_bytes_ = 0;  // one session's KV arena
  int capacity_ = 0;
  int capacity_tokens_ = 0;
  mutable std::mutex mu_;  // guards entries_ and the counters
  std::map<std::string, Entry> entries_;
  // Sessions of conversations swapped out, emptied, for the next ones: at
  // most capacity_ Sessions ever exist (live + spare), so the arenas are
  // allocated once: a swap allocates no arena (and the allocator keeps no
  // freed ones).
  std::vector<std::unique_ptr<Session>> spare_;
  uint64_t allocated_ = 0;  // Sessions created
  uint64_t saves_ = 0;
  uint64_t restores_ = 0;
  std::mt19937_64 ids_;
};

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_SESSION_MANAGER_H_
