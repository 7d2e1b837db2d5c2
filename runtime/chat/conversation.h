// Conversation: a chat on one Session — a message list rendered through the
// model's chat template, fed to the cache incrementally (each turn feeds only
// the text the cache has not seen), replies streamed by the Generator. Shared
// by `kvedge chat`, the C API and a future server.
#ifndef KVEDGE_RUNTIME_CHAT_CONVERSATION_H_
#define KVEDGE_RUNTIME_CHAT_CONVERSATION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "platform/status.h"
#include "runtime/engine/generator.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge::chat {

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", … (the template decides what it accepts)
  std::string content;  // UTF-8
};

struct ConversationOptions {
  std::string template_source;  // Jinja (chat_template.h); the caller picks the model's or ChatML
  std::string bos_token;        // the template's bos_token / eos_token strings
  std::string eos_token;
  std::string system_prompt;    // empty: no system message
};

// What one GenerateReply did.
struct TurnStats {
  int64_t prompt_tokens = 0;    // tokens fed before the reply (only the new suffix, unless refed)
  int64_t reply_tokens = 0;     // generated and fed
  bool refed = false;           // the template re-rendered what was fed differently: fed again from empty
  StopReason reason = StopReason::kMaxTokens;
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// Owns its Session and Sampler; borrows the tokenizer (and, through the
// session, the model), which must outlive it. Not thread-safe: one thread at
// a time (the cancel flag may be set from any thread or a signal handler).
class Conversation {
 public:
  // Errors: a template that fails to render a probe conversation, invalid
  // UTF-8 in the system prompt. The end-of-turn text (what the template puts
  // after an assistant message, e.g. "<|im_end|>") becomes a stop string.
  static StatusOr<std::unique_ptr<Conversation>> Create(const Tokenizer& tokenizer, std::unique_ptr<Session> session,
                                                        Sampler sampler, ConversationOptions options);

  // Appends a message (not yet fed). Errors: an empty role, invalid UTF-8.
  Status AddMessage(std::string role, std::string content);

  // Renders the conversation with add_generation_prompt, feeds what the cache
  // has not seen (if the rendering no longer starts with what was fed, the
  // cache — which cannot rewind — is emptied and the whole text fed again;
  // TurnStats::refed says so), then generates up to `max_tokens` (< 0: no
  // limit) streaming text to `sink`, and appends the reply as an assistant
  // message (also when cancelled: the text shown is what the cache holds).
  // Stops at end-of-generation ids and at the template's end-of-turn text.
  // Errors: a template error (nothing fed), a feed error (a `full` cache that
  // is full: the reply so far is kept).
  StatusOr<TurnStats> GenerateReply(int64_t max_tokens, const std::atomic<bool>* cancel, TextSink sink);

  // The step-wise form of GenerateReply, for a caller that runs the
  // generation loop itself (the server's batched decode): PrepareReply
  // renders, empties the cache if the rendering no longer starts with what
  // was fed (*refed says so) and returns the tokens to feed (nothing fed);
  // the caller feeds them and generates through generator().stream(), then
  // FinishReply records what was fed — the prompt (if `prompt_fed`), the
  // reply text as shown and the stop string that ended it — and appends the
  // reply as an assistant message. Errors: a template error.
  StatusOr<std::vector<int>> PrepareReply(bool* refed);
  void FinishReply(bool prompt_fed, std::string reply, std::string_view stop_string);

  // Replaces the messages (a server request carries the whole conversation;
  // the system prompt option is not added). Errors as AddMessage; nothing
  // changes on error.
  Status SetMessages(std::vector<ChatMessage> messages);

  // Forgets every message but the system prompt and empties the cache.
  void Reset();
  // Empties the cache and hands over the session (its KV arena, scratch and
  // threads) for a new conversation to reuse: a server recycles the sessions
  // it swaps out instead of allocating and freeing one per conversation. The
  // conversation is unusable afterwards: destroy it.
  std::unique_ptr<Session> ReleaseSession();

  // Saves to `path` (a session file, runtime/chat/session_file.h) and
  // `path`.chat (the messages and the text fed, bound to the session file by
  // its token count and history hash), each atomically. Load restores both;
  // NotFound when `path` does not exist; a conversation file that does not
  // match the session file (a kill between the two renames) is DataLoss, and
  // nothing changes.
  Status Save(const std::string& path) const;
  Status Load(const std::string& path);

  // What a saved conversation file (`path`.chat) says, read without loading
  // the session: for a server that indexes its saved conversations.
  // Errors: DataLoss naming the file and what is wrong; NotFound.
  struct SavedInfo {
    uint64_t tokens_fed = 0;
    uint64_t history_hash = 0;
    std::string fed_text;
    std::vector<ChatMessage> messages;
  };
  static StatusOr<SavedInfo> ReadSaved(const std::string& path);

  const std::vector<ChatMessage>& messages() const { return messages_; }
  const Session& session() const { return *session_; }
  Session& mutable_session() { return *session_; }
  Sampler& sampler() { return sampler_; }
  void set_sampler(Sampler sampler) { sampler_ = std::move(sampler); }
  Generator& generator() { return generator_; }
  // What the template renders for the tokens fed: a request whose rendering
  // starts with it continues this conversation.
  const std::string& fed_text() const { return fed_text_; }
  const std::string& end_of_turn() const { return end_of_turn_; }
  // The prompt text the conversation renders now (add_generation_prompt).
  StatusOr<std::string> Render(bool add_generation_prompt) const;
  // What the template of `options` renders for `messages` (no conversation
  // needed: a server matches a request against its conversations with it).
  static StatusOr<std::string> RenderMessages(const ConversationOptions& options,
                                              const std::vector<ChatMessage>& messages, bool add_generation_prompt);

 private:
  Conversation(const Tokenizer& tokenizer, std::unique_ptr<Session> session, Sampler sampler,
               ConversationOptions options, std::string end_of_turn, Generator generator);
  StatusOr<std::vector<int>> Tokenize(std::string_view text, bool first) const;
  void ClearCache();

  const Tokenizer* tokenizer_;
  std::unique_ptr<Session> session_;
  Sampler sampler_;
  ConversationOptions options_;
  std::string end_of_turn_;
  Generator generator_;
  std::vector<ChatMessage> messages_;
  std::string fed_text_;  // what the template renders for the tokens fed: a prefix of the next rendering
  std::string pending_;   // PrepareReply's suffix, fed_text_'s next part once fed
};

}  // namespace kvedge::chat

#endif  // KVEDGE_RUNTIME_CHAT_CONVERSATION_H_
