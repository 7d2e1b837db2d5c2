// Sessions in one budget: match, restore, make room, save.
#include "runtime/server/session_manager.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "platform/memory.h"
#include "runtime/engine/sampler.h"

namespace kvedge::server {

TextDigest DigestOf(std::string_view text) {
  const XXH128_hash_t h = XXH3_128bits(text.data(), text.size());
  return TextDigest{h.low64, h.high64};
}
namespace {

// Feeds the prompt exactly as given: /v1/completions.
constexpr char kTextTemplate[] = "{% for message in messages %}{{ message['content'] }}{% endfor %}";
constexpr char kSuffix[] = ".kvs";

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const char* KindPrefix(SessionKind k) { return k == SessionKind::kChat ? "chat-" : "text-"; }

// "chat-" or "text-" and 16 lowercase hex digits.
bool ParseId(const std::string& id, SessionKind* kind) {
  if (id.size() != 21) return false;
  if (id.starts_with("chat-")) {
    *kind = SessionKind::kChat;
  } else if (id.starts_with("text-")) {
    *kind = SessionKind::kText;
  } else {
    return false;
  }
  return std::all_of(id.begin() + 5, id.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

}  // namespace

SessionManager::SessionManager(const ModelWeights& model, const Tokenizer& tokenizer, SessionManagerOptions options)
    : model_(model), tokenizer_(tokenizer), options_(std::move(options)), ids_(std::random_device{}()) {
  text_options_.template_source = kTextTemplate;
  text_options_.bos_token = options_.chat.bos_token;
  text_options_.eos_token = options_.chat.eos_token;
}

StatusOr<std::unique_ptr<SessionManager>> SessionManager::Create(const ModelWeights& model,
                                                                 const Tokenizer& tokenizer,
                                                                 SessionManagerOptions options,
                                                                 std::vector<std::string>* warnings) {
  std::unique_ptr<SessionManager> m(new SessionManager(model, tokenizer, std::move(options)));
  {
    KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<Session> probe, Session::Create(model, m->options_.session));
    m->per_session_bytes_ = probe->reserved_bytes();
    m->capacity_tokens_ = probe->cache().plan().capacity;
    m->arena_bytes_ = probe->cache().Stats().arena_bytes;
    m->spare_.push_back(std::move(probe));  // the first conversation's
    m->allocated_ = 1;
  }
  const uint64_t fit = m->options_.total_budget / m->per_session_bytes_;
  if (fit == 0) {
    return InvalidArgument("--kv-budget-total " + FormatBytes(m->options_.total_budget) +
                           " holds no session: one reserves " + FormatBytes(m->per_session_bytes_) +
                           " (KV arena and scratch; see --session-budget)");
  }
  m->capacity_ = static_cast<int>(std::min<uint64_t>(fit, 1u << 20));
  if (m->options_.max_live > 0) m->capacity_ = std::min(m->capacity_, m->options_.max_live);
  if (m->options_.dir.empty()) return m;
  std::error_code ec;
  std::filesystem::create_directories(m->options_.dir, ec);
  if (ec) return IoError("cannot create the session directory '" + m->options_.dir + "': " + ec.message());
  KVEDGE_ASSIGN_OR_RETURN(m->dir_lock_, DirLock::Acquire(m->options_.dir));
  std::filesystem::directory_iterator it(m->options_.dir, ec);
  if (ec) return IoError("cannot read the session directory '" + m->options_.dir + "': " + ec.message());
  for (const auto& f : it) {
    const std::string name = f.path().filename().string();
    if (!name.ends_with(kSuffix)) continue;
    const std::string id = name.substr(0, name.size() - std::strlen(kSuffix));
    Entry e;
    if (!ParseId(id, &e.kind)) {
      warnings->push_back("'" + f.path().string() + "' is not named like a saved session (chat-<16 hex>.kvs): ignored");
      continue;
    }
    auto info = chat::Conversation::ReadSaved(f.path().string());
    if (!info.ok()) {
      warnings->push_back(info.status().message() + ": ignored");
      continue;
    }
    e.fed_len = info->fed_text.size();
    e.fed_digest = DigestOf(info->fed_text);
    e.saved = true;
    const auto mtime = std::filesystem::last_write_time(f.path(), ec);
    e.last_used = ec ? 0
                     : std::chrono::duration<double>(std::chrono::file_clock::to_sys(mtime).time_since_epoch()).count();
    e.info.id = id;
    e.info.tokens = info->tokens_fed;
    e.info.kv_budget_bytes = m->arena_bytes_;
    e.info.on_disk = true;
    e.info.last_used = e.last_used;
    m->entries_.emplace(id, std::move(e));
  }
  return m;
}

std::string SessionManager::PathOf(const std::string& id) const { return options_.dir + "/" + id + kSuffix; }

std::string SessionManager::NewId(SessionKind kind) {
  static const char kHex[] = "0123456789abcdef";
  for (;;) {
    std::string id = KindPrefix(kind);
    uint64_t r = ids_();
    for (int i = 0; i < 16; ++i, r >>= 4) id.push_back(kHex[r & 15]);
    if (!entries_.contains(id)) return id;
  }
}

StatusOr<std::unique_ptr<chat::Conversation>> SessionManager::NewConversation(SessionKind kind) {
  std::unique_ptr<Session> session;
  if (!spare_.empty()) {
    session = std::move(spare_.back());
    spare_.pop_back();
  } else {
    KVEDGE_ASSIGN_OR_RETURN(session, Session::Create(model_, options_.session));
    ++allocated_;
  }
  KVEDGE_ASSIGN_OR_RETURN(Sampler sampler, Sampler::Create(SamplerOptions{}, model_.config.vocab_size));
  return chat::Conversation::Create(tokenizer_, std::move(session), std::move(sampler),
                                    kind == SessionKind::kChat ? options_.chat : text_options_);
}

int SessionManager::LiveCount() const {
  int n = 0;
  for (const auto& [id, e] : entries_) n += e.conversation != nullptr;
  return n;
}

void SessionManager::Refresh(const std::string& id, Entry& e) {
  e.info.id = id;
  e.info.busy = e.busy;
  e.info.last_used = e.last_used;
  e.info.on_disk = e.conversation == nullptr;
  if (e.conversation != nullptr) {
    const KvCacheStats st = e.conversation->session().cache().Stats();
    e.info.tokens = e.conversation->session().tokens_fed();
    e.info.tokens_in_cache = st.tokens_held;
    e.info.kv_bytes = st.held_bytes;
    e.info.kv_budget_bytes = st.arena_bytes;
  } else {
    e.info.tokens_in_cache = 0;
    e.info.kv_bytes = 0;
  }
}

Status SessionManager::MakeRoom() {
  std::string victim;
  double oldest = 0;
  for (const auto& [id, e] : entries_) {
    if (e.conversation == nullptr || e.busy) continue;
    if (victim.empty() || e.last_used < oldest) {
      victim = id;
      oldest = e.last_used;
    }
  }
  if (victim.empty()) {
    return ResourceExhausted("all " + std::to_string(capacity_) + " sessions the budget holds are busy");
  }
  Entry& e = entries_[victim];
  if (options_.dir.empty()) {
    spare_.push_back(e.conversation->ReleaseSession());
    entries_.erase(victim);  // the client holds the conversation; a later request feeds it again
    return OkStatus();
  }
  if (!e.saved) {
    KVEDGE_RETURN_IF_ERROR(e.conversation->Save(PathOf(victim)));
    ++saves_;
  }
  e.fed_len = e.conversation->fed_text().size();
  e.fed_digest = DigestOf(e.conversation->fed_text());
  e.saved = true;
  spare_.push_back(e.conversation->ReleaseSession());
  e.conversation.reset();
  Refresh(victim, e);
  return OkStatus();
}

StatusOr<SessionManager::Lease> SessionManager::Acquire(SessionKind kind, const std::string& rendered) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string best;
  size_t best_len = 0;
  bool best_live = false;
  std::map<size_t, TextDigest> prefix_digests;  // of rendered's prefixes, by length, as sessions on disk ask
  for (const auto& [id, e] : entries_) {
    if (e.kind != kind || e.busy) continue;
    const bool live = e.conversation != nullptr;
    size_t fed_len = 0;
    if (live) {
      const std::string& fed = e.conversation->fed_text();
      if (fed.empty() || !rendered.starts_with(fed)) continue;
      fed_len = fed.size();
    } else {
      if (e.fed_len == 0 || e.fed_len > rendered.size()) continue;
      auto [it, fresh] = prefix_digests.try_emplace(e.fed_len);
      if (fresh) it->second = DigestOf(std::string_view(rendered).substr(0, e.fed_len));
      if (!(it->second == e.fed_digest)) continue;
      fed_len = e.fed_len;
    }
    if (best.empty() || fed_len > best_len || (fed_len == best_len && live && !best_live)) {
      best = id;
      best_len = fed_len;
      best_live = live;
    }
  }
  if (best.empty() || !best_live) {
    if (LiveCount() >= capacity_) KVEDGE_RETURN_IF_ERROR(MakeRoom());
  }
  if (!best.empty() && !best_live) {
    Entry& e = entries_[best];
    KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<chat::Conversation> c, NewConversation(kind));
    const Status loaded = c->Load(PathOf(best));
    if (!loaded.ok()) {
      // A damaged or foreign file: the conversation is fed again from its
      // messages in a fresh session under the same id (the client resends them).
      c->Reset();
      e.saved = false;
      e.conversation = std::move(c);
    } else if (rendered.starts_with(c->fed_text())) {
      ++restores_;
      e.conversation = std::move(c);
    } else {
      best.clear();  // the digests matched but the texts do not (a collision): this request starts afresh
      spare_.push_back(c->ReleaseSession());
    }
  }
  if (best.empty()) {
    KVEDGE_ASSIGN_OR_RETURN(std::unique_ptr<chat::Conversation> c, NewConversation(kind));
    best = NewId(kind);
    Entry e;
    e.kind = kind;
    e.conversation = std::move(c);
    entries_.emplace(best, std::move(e));
  }
  Entry& e = entries_[best];
  e.busy = true;
  e.saved = false;  // about to change
  e.last_used = UnixNow();
  Refresh(best, e);
  return Lease{best, e.conversation.get()};
}

void SessionManager::Release(const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(id);
  if (it == entries_.end()) return;
  it->second.busy = false;
  it->second.last_used = UnixNow();
  Refresh(id, it->second);
}

Status SessionManager::SaveAll() {
  std::lock_guard<std::mutex> lock(mu_);
  if (options_.dir.empty()) return OkStatus();
  Status first;
  for (auto& [id, e] : entries_) {
    if (e.conversation == nullptr || e.saved) continue;
    const Status s = e.conversation->Save(PathOf(id));
    if (s.ok()) {
      e.saved = true;
      ++saves_;
    } else if (first.ok()) {
      first = s;
    }
  }
  return first;
}

std::vector<SessionInfo> SessionManager::List() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SessionInfo> out;
  out.reserve(entries_.size());
  for (const auto& [id, e] : entries_) out.push_back(e.info);
  std::sort(out.begin(), out.end(), [](const SessionInfo& a, const SessionInfo& b) { return a.last_used > b.last_used; });
  return out;
}

SessionTotals SessionManager::Totals() const {
  std::lock_guard<std::mutex> lock(mu_);
  SessionTotals t;
  t.capacity = capacity_;
  t.budget_bytes = options_.total_budget;
  t.saves = saves_;
  t.restores = restores_;
  t.allocated = allocated_;
  t.reserved_bytes = spare_.size() * per_session_bytes_;
  for (const auto& [id, e] : entries_) {
    if (e.conversation != nullptr) {
      ++t.live;
      t.kv_held_bytes += e.info.kv_bytes;
      t.reserved_bytes += per_session_bytes_;
    } else {
      ++t.on_disk;
    }
  }
  return t;
}

}  // namespace kvedge::server
