// Conversation: render → feed the unseen suffix → generate → remember.
#include "runtime/chat/conversation.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/session_file.h"

namespace kvedge::chat {
namespace {

using Json = nlohmann::json;

bool ValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 2) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff)) {
      return false;
    }
    i += n;
  }
  return true;
}

std::string MessagesJson(const std::vector<ChatMessage>& messages) {
  Json a = Json::array();
  for (const ChatMessage& m : messages) a.push_back(Json{{"role", m.role}, {"content", m.content}});
  return a.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string Hex(std::string_view s) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}
bool Unhex(std::string_view s, std::string* out) {
  if (s.size() % 2 != 0) return false;
  const auto digit = [](char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; };
  out->clear();
  for (size_t i = 0; i < s.size(); i += 2) {
    const int hi = digit(s[i]), lo = digit(s[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

// temp file + fsync + rename + directory fsync, as SaveSession.
Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmp.data());
  if (fd < 0) return IoError("cannot create a temporary file beside '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return IoError("cannot write '" + tmp + "': " + why);
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    return IoError("cannot save '" + path + "': " + why);
  }
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<Conversation>> Conversation::Create(const Tokenizer& tokenizer,
                                                             std::unique_ptr<Session> session, Sampler sampler,
                                                             ConversationOptions options) {
  if (!ValidUtf8(options.system_prompt)) return InvalidArgument("the system prompt is not valid UTF-8");
  // The end-of-turn text: what the template writes after an assistant
  // message's content, found by rendering a probe conversation.
  static constexpr char kProbe[] = "\x01kvedge-probe\x02";
  ChatTemplateInputs in;
  in.bos_token = options.bos_token;
  in.eos_token = options.eos_token;
  in.messages_json = MessagesJson({{"user", "hi"}, {"assistant", kProbe}});
  auto probe = RenderChatTemplate(options.template_source, in);
  if (!probe.ok()) return Status(probe.status().code(), "the chat template: " + probe.status().message());
  std::string end_of_turn;
  if (const size_t at = probe->rfind(kProbe); at != std::string::npos) {
    end_of_turn = probe->substr(at + std::strlen(kProbe));
    while (!end_of_turn.empty() && std::isspace(static_cast<unsigned char>(end_of_turn.back()))) end_of_turn.pop_back();
    while (!end_of_turn.empty() && std::isspace(static_cast<unsigned char>(end_of_turn.front()))) {
      end_of_turn.erase(0, 1);
    }
  }
  GeneratorOptions go;
  if (!end_of_turn.empty()) go.stop_strings.push_back(end_of_turn);
  KVEDGE_ASSIGN_OR_RETURN(Generator generator, Generator::Create(tokenizer, std::move(go)));
  std::unique_ptr<Conversation> c(new Conversation(tokenizer, std::move(session), std::move(sampler),
                                                   std::move(options), std::move(end_of_turn), std::move(generator)));
  c->Reset();
  return c;
}

Conversation::Conversation(const Tokenizer& tokenizer, std::unique_ptr<Session> session, Sampler sampler,
                           ConversationOptions options, std::string end_of_turn, Generator generator)
    : tokenizer_(&tokenizer),
      session_(std::move(session)),
      sampler_(std::move(sampler)),
      options_(std::move(options)),
      end_of_turn_(std::move(end_of_turn)),
      generator_(std::move(generator)) {}

Status Conversation::AddMessage(std::string role, std::string content) {
  if (role.empty()) return InvalidArgument("a message needs a role");
  if (!ValidUtf8(role) || !ValidUtf8(content)) return InvalidArgument("the " + role + " message is not valid UTF-8");
  messages_.push_back({std::move(role), std::move(content)});
  return OkStatus();
}

StatusOr<std::string> Conversation::Render(bool add_generation_prompt) const {
  return RenderMessages(options_, messages_, add_generation_prompt);
}

StatusOr<std::string> Conversation::RenderMessages(const ConversationOptions& options,
                                                   const std::vector<ChatMessage>& messages,
                                                   bool add_generation_prompt) {
  ChatTemplateInputs in;
  in.bos_token = options.bos_token;
  in.eos_token = options.eos_token;
  in.add_generation_prompt = add_generation_prompt;
  in.messages_json = MessagesJson(messages);
  return RenderChatTemplate(options.template_source, in);
}

// The first piece of a stream starts with BOS: the template's own bos_token
// text when it writes one, else what the tokenizer adds.
StatusOr<std::vector<int>> Conversation::Tokenize(std::string_view text, bool first) const {
  if (first && !options_.bos_token.empty() && tokenizer_->bos() >= 0 && text.starts_with(options_.bos_token)) {
    KVEDGE_ASSIGN_OR_RETURN(std::vector<int> ids,
                            tokenizer_->Encode(text.substr(options_.bos_token.size()), EncodeOptions{false, /*parse_special=*/true}));
    ids.insert(ids.begin(), tokenizer_->bos());
    return ids;
  }
  return tokenizer_->Encode(text, EncodeOptions{first, /*parse_special=*/true});
}

void Conversation::ClearCache() {
  session_->mutable_cache().Reset();
  session_->mutable_history().Clear();
  session_->RestoreStream(0, nullptr);
  fed_text_.clear();
}

void Conversation::Reset() {
  messages_.clear();
  if (!options_.system_prompt.empty()) messages_.push_back({"system", options_.system_prompt});
  ClearCache();
}

std::unique_ptr<Session> Conversation::ReleaseSession() {
  ClearCache();
  return std::move(session_);
}

Status Conversation::SetMessages(std::vector<ChatMessage> messages) {
  for (const ChatMessage& m : messages) {
    if (m.role.empty()) return InvalidArgument("a message needs a role");
    if (!ValidUtf8(m.role) || !ValidUtf8(m.content)) return InvalidArgument("the " + m.role + " message is not valid UTF-8");
  }
  messages_ = std::move(messages);
  return OkStatus();
}

StatusOr<std::vector<int>> Conversation::PrepareReply(bool* refed) {
  KVEDGE_ASSIGN_OR_RETURN(std::string rendered, Render(/*add_generation_prompt=*/true));
  *refed = false;
  if (!rendered.starts_with(fed_text_)) {
    // The template spells what was fed differently now (it trims, or drops
    // an earlier turn). The cache cannot rewind: start it again.
    ClearCache();
    *refed = true;
  }
  pending_ = rendered.substr(fed_text_.size());
  return Tokenize(pending_, session_->tokens_fed() == 0);
}

void Conversation::FinishReply(bool prompt_fed, std::string reply, std::string_view stop_string) {
  // What the template will render for what was fed: the reply as shown
  // (whole characters, invalid bytes as U+FFFD — the message holds the same)
  // and the stop string when the model wrote it (the end-of-turn text). Bytes
  // a token carried past the stop string, or a sink that stopped with bytes
  // held, make the next rendering differ: that turn is fed again from empty.
  if (!prompt_fed) return;
  fed_text_.append(pending_);
  fed_text_.append(reply);
  fed_text_.append(stop_string);
  pending_.clear();
  messages_.push_back({"assistant", std::move(reply)});
}

StatusOr<TurnStats> Conversation::GenerateReply(int64_t max_tokens, const std::atomic<bool>* cancel, TextSink sink) {
  TurnStats stats;
  KVEDGE_ASSIGN_OR_RETURN(std::vector<int> ids, PrepareReply(&stats.refed));
  stats.prompt_tokens = static_cast<int64_t>(ids.size());
  GenerationRequest request;
  request.prompt = ids.data();
  request.prompt_len = ids.size();
  request.prev_token = session_->history().last();
  request.max_tokens = max_tokens;
  request.cancel = cancel;
  std::string reply;
  const GenerationResult result = generator_.Run(*session_, sampler_, request, [&](std::string_view text) {
    reply.append(text);
    return sink(text);
  });
  if (result.last_token < 0 && !ids.empty()) return result.status;  // the prompt was refused: nothing fed
  FinishReply(/*prompt_fed=*/true, std::move(reply),
              result.reason == StopReason::kStopString ? std::string_view(end_of_turn_) : std::string_view());
  stats.reply_tokens = result.tokens;
  stats.reason = result.reason;
  stats.prefill_seconds = result.prefill_seconds;
  stats.decode_seconds = result.decode_seconds;
  if (!result.status.ok()) return result.status;
  return stats;
}

Status Conversation::Save(const std::string& path) const {
  KVEDGE_RETURN_IF_ERROR(SaveSession(*session_, &sampler_, path));
  Json j;
  j["kvedge_conversation"] = 1;
  j["tokens_fed"] = session_->tokens_fed();
  j["history_hash"] = session_->history().hash();
  j["fed_text_hex"] = Hex(fed_text_);
  Json m = Json::array();
  for (const ChatMessage& msg : messages_) m.push_back(Json{{"role", msg.role}, {"content", msg.content}});
  j["messages"] = std::move(m);
  return WriteFileAtomically(path + ".chat", j.dump(1, ' ', false, Json::error_handler_t::replace) + "\n");
}

StatusOr<Conversation::SavedInfo> Conversation::ReadSaved(const std::string& path) {
  const std::string chat_path = path + ".chat";
  if (::access(path.c_str(), F_OK) != 0) return NotFound("no session file '" + path + "'");
  std::string bytes;
  if (FILE* f = std::fopen(chat_path.c_str(), "rb")) {
    char buf[65536];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) bytes.append(buf, n);
    std::fclose(f);
  } else {
    return DataLoss("'" + path + "' has no conversation file '" + chat_path + "' beside it");
  }
  const Json j = Json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  const auto bad = [&](const std::string& what) { return DataLoss("conversation file '" + chat_path + "': " + what); };
  if (!j.is_object() || !j.contains("kvedge_conversation") || j["kvedge_conversation"] != 1) {
    return bad("not a version-1 kvedge conversation file");
  }
  if (!j.contains("tokens_fed") || !j["tokens_fed"].is_number_unsigned() || !j.contains("history_hash") ||
      !j["history_hash"].is_number_unsigned() || !j.contains("fed_text_hex") || !j["fed_text_hex"].is_string() ||
      !j.contains("messages") || !j["messages"].is_array()) {
    return bad("a field is missing or of the wrong type");
  }
  SavedInfo info;
  info.tokens_fed = j["tokens_fed"].get<uint64_t>();
  info.history_hash = j["history_hash"].get<uint64_t>();
  if (!Unhex(j["fed_text_hex"].get<std::string>(), &info.fed_text)) return bad("fed_text_hex is not hex");
  for (const Json& m : j["messages"]) {
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      return bad("a message without a string role and content");
    }
    info.messages.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return info;
}

Status Conversation::Load(const std::string& path) {
  // Read and check the conversation file first, so a refusal changes nothing.
  KVEDGE_ASSIGN_OR_RETURN(SavedInfo info, ReadSaved(path));
  // LoadSession changes nothing on error; the binding can only be checked
  // after it, and a mismatch empties the cache.
  KVEDGE_RETURN_IF_ERROR(LoadSession(path, session_.get(), &sampler_));
  if (session_->tokens_fed() != info.tokens_fed || session_->history().hash() != info.history_hash) {
    const uint64_t fed = session_->tokens_fed();
    Reset();
    return DataLoss("conversation file '" + path + ".chat': saved for another state of the session (" +
                    std::to_string(info.tokens_fed) + " tokens fed; the session file has " + std::to_string(fed) +
                    "): the conversation starts afresh");
  }
  messages_ = std::move(info.messages);
  fed_text_ = std::move(info.fed_text);
  return OkStatus();
}

}  // namespace kvedge::chat
