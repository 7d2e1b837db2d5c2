// kvedge serve in process: request parsing (hostile bodies), the session
// manager (continue, swap to disk, restore, restart), the scheduler
// (concurrent sequences give what each gets alone; cancel mid-reply) and the
// HTTP server over loopback (a non-streaming client that leaves).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runtime/chat/chat_template.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/model/model_loader.h"
#include "runtime/server/api.h"
#include "runtime/server/client_socket.h"
#include "runtime/server/http_server.h"
#include "runtime/server/scheduler.h"
#include "runtime/server/session_manager.h"
#include "tests/testing/stories.h"
#include "tests/testing/test_data.h"

namespace kvedge::server {
namespace {

RequestLimits Limits() { return RequestLimits{}; }

TEST(ApiTest, ParsesAChatRequest) {
  ChatRequest r;
  const auto e = ParseChatRequest(
      R"({"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
          "max_tokens":7,"temperature":0,"top_p":0.5,"seed":42,"stop":["x","yz"],"stream":true,"frobnicate":{"x":1}})",
      Limits(), &r);
  ASSERT_FALSE(e.has_value()) << e->message;
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "ab");
  EXPECT_EQ(r.params.max_tokens, 7);
  EXPECT_EQ(r.params.temperature, 0.0f);
  EXPECT_EQ(r.params.top_p, 0.5f);
  EXPECT_EQ(r.params.seed, 42u);
  EXPECT_EQ(r.params.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(r.params.stream);
  ASSERT_FALSE(ParseChatRequest(R"({"messages":[{"role":"user","content":"hi"}],"stop":"END"})", Limits(), &r));
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.max_tokens, Limits().default_max_tokens);
}

TEST(ApiTest, RefusesHostileBodiesNamingTheField) {
  struct Case {
    const char* body;
    const char* param;
  };
  const Case cases[] = {
      {"", ""},
      {"{bad", ""},
      {"[1,2]", ""},
      {"\"text\"", ""},
      {R"({"messages":"hi"})", "messages"},
      {R"({"messages":[]})", "messages"},
      {R"({})", "messages"},
      {R"({"messages":[1]})", "messages[0]"},
      {R"({"messages":[{"content":"x"}]})", "messages[0].role"},
      {R"({"messages":[{"role":"user","content":5}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"system","content":null},{"role":"user","content":"x"}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":[{"type":"image_url"}]}]})", "messages[0].content"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":"5"})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":-1})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"max_tokens":1.5})", "max_tokens"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":"hot"})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"temperature":9})", "temperature"},
      {R"({"messages":[{"role":"user","content":"x"}],"top_p":0})", "top_p"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[1]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stop":[""]})", "stop"},
      {R"({"messages":[{"role":"user","content":"x"}],"stream":"yes"})", "stream"},
      {R"({"messages":[{"role":"user","content":"x"}],"n":3})", "n"},
      {R"({"messages":[{"role":"user","content":"x"}],"seed":"s"})", "seed"},
      {"{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", ""},  // invalid UTF-8
  };
  for (const Case& c : cases) {
    ChatRequest r;
    const auto e = ParseChatRequest(c.body, Limits(), &r);
    ASSERT_TRUE(e.has_value()) << c.body;
    EXPECT_EQ(e->http_status, 400) << c.body;
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_FALSE(e->message.empty());
    const std::string json = ErrorJson(*e);
    EXPECT_NE(json.find("\"error\""), std::string::npos);
    EXPECT_NE(json.find("\"type\":\"invalid_request_error\""), std::string::npos) << json;
  }
  std::string many = R"({"messages":[{"role":"user","content":"x"}],"stop":[)";
  for (int i = 0; i < 65; ++i) many += std::string(i ? "," : "") + "\"s" + std::to_string(i) + "\"";
  ChatRequest r;
  EXPECT_EQ(ParseChatRequest(many + "]}", Limits(), &r)->param, "stop");
}

TEST(ApiTest, HugeMaxTokensIsClamped) {
  ChatRequest r;
  ASSERT_FALSE(
      ParseChatRequest(R"({"messages":[{"role":"user","content":"x"}],"max_tokens":18446744073709551615})", Limits(), &r));
  EXPECT_EQ(r.params.max_tokens, Limits().max_tokens_limit);
  EXPECT_TRUE(r.params.max_tokens_clamped);
}

TEST(ApiTest, CompletionTokenizeDetokenize) {
  CompletionRequest c;
  ASSERT_FALSE(ParseCompletionRequest(R"({"prompt":["Once"],"max_tokens":3})", Limits(), &c));
  EXPECT_EQ(c.prompt, "Once");
  EXPECT_EQ(ParseCompletionRequest(R"({"prompt":5})", Limits(), &c)->param, "prompt");
  TokenizeRequest t;
  ASSERT_FALSE(ParseTokenizeRequest(R"({"content":"a b","add_special":true})", &t));
  EXPECT_TRUE(t.add_special);
  EXPECT_EQ(ParseTokenizeRequest(R"({"content":1})", &t)->param, "content");
  std::vector<int> ids;
  ASSERT_FALSE(ParseDetokenizeRequest(R"({"tokens":[1,2,511]})", 512, &ids));
  EXPECT_EQ(ids, (std::vector<int>{1, 2, 511}));
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens":[512]})", 512, &ids)->param, "tokens");
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens":[-1]})", 512, &ids)->param, "tokens");
  EXPECT_EQ(ParseDetokenizeRequest(R"({"tokens":[1e30]})", 512, &ids)->param, "tokens");
}

TEST(ApiTest, BearerKeyComparison) {
  EXPECT_TRUE(BearerMatches("Bearer sekret", "sekret"));
  EXPECT_FALSE(BearerMatches("Bearer sekreT", "sekret"));
  EXPECT_FALSE(BearerMatches("Bearer sekret2", "sekret"));
  EXPECT_FALSE(BearerMatches("Bearer sekre", "sekret"));
  EXPECT_FALSE(BearerMatches("", "sekret"));
  EXPECT_FALSE(BearerMatches("sekret", "sekret"));
}

// Loopback TCP for the tests: a listening socket, connections, one end's
// address as httplib prints it.
int Listen(int* port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(s, 4) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(s);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return s;
}
int Connect(int port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(s);
    return -1;
  }
  return s;
}
int LocalPort(int s) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  return ntohs(a.sin_port);
}
void SendAll(int s, const std::string& bytes) {
  for (size_t at = 0; at < bytes.size();) {
    const ssize_t n = send(s, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    ASSERT_GT(n, 0);
    at += static_cast<size_t>(n);
  }
}
// Polls `done` every 10 ms for up to `seconds`.
template <typename F>
bool WaitFor(double seconds, F done) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (!done()) {
    if (std::chrono::steady_clock::now() > end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

TEST(ClientSocketTest, FindsTheConnectionByItsAddressesAndSeesItsPeerLeave) {
  int port = 0;
  const int listener = Listen(&port);
  ASSERT_GE(listener, 0);
  const int client = Connect(port);
  ASSERT_GE(client, 0);
  const int served = accept(listener, nullptr, nullptr);
  ASSERT_GE(served, 0);
  const int client_port = LocalPort(client);
  const ClientSocket found = ClientSocket::Find("127.0.0.1", port, "127.0.0.1", client_port);
  ASSERT_TRUE(found.found());
  EXPECT_FALSE(found.Gone());
  // Another pair names no socket here (the listener has no peer).
  const ClientSocket none = ClientSocket::Find("127.0.0.1", port, "127.0.0.1", client_port == 1 ? 2 : 1);
  EXPECT_FALSE(none.found());
  EXPECT_FALSE(none.Gone());
  // Unread bytes (a pipelined request) before the end: still there, and the
  // peek consumed nothing.
  SendAll(client, "GET");
  EXPECT_TRUE(WaitFor(5, [&] {
    char b[4];
    return recv(served, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT) == 3;
  }));
  EXPECT_FALSE(found.Gone());
  close(client);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(found.Gone());
  char b[4];
  ASSERT_EQ(recv(served, b, sizeof(b), 0), 3);
  EXPECT_TRUE(WaitFor(5, [&] { return found.Gone(); }));
  close(served);

  // A reset (SO_LINGER 0) is gone too.
  const int client2 = Connect(port);
  ASSERT_GE(client2, 0);
  const int served2 = accept(listener, nullptr, nullptr);
  ASSERT_GE(served2, 0);
  const ClientSocket found2 = ClientSocket::Find("127.0.0.1", port, "127.0.0.1", LocalPort(client2));
  ASSERT_TRUE(found2.found());
  EXPECT_FALSE(found2.Gone());
  linger l{1, 0};
  ASSERT_EQ(setsockopt(client2, SOL_SOCKET, SO_LINGER, &l, sizeof(l)), 0);
  close(client2);
  EXPECT_TRUE(WaitFor(5, [&] { return found2.Gone(); }));
  close(served2);
  close(listener);
}

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = &testing::StoriesModel();
    tok_ = &testing::StoriesTokenizer();
  }
  void SetUp() override {
    dir_ = testing::TempDir() + "/server_test_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SessionManagerOptions Options(int max_live, bool with_dir = true) const {
    SessionManagerOptions o;
    o.session.kv.capacity = 128;
    o.session.kv.policy = EvictionPolicy::kSinks;
    o.session.kv.sinks = 4;
    o.session.threads = 1;
    o.total_budget = uint64_t{1} << 30;
    o.max_live = max_live;
    if (with_dir) o.dir = dir_;
    o.chat.template_source = chat::kChatMlTemplate;
    o.chat.bos_token = "<s>";
    o.chat.eos_token = "</s>";
    return o;
  }
  std::unique_ptr<SessionManager> Manager(int max_live, bool with_dir = true) const {
    std::vector<std::string> warnings;
    auto m = SessionManager::Create(*model_, *tok_, Options(max_live, with_dir), &warnings);
    EXPECT_TRUE(m.ok()) << m.status().ToString();
    EXPECT_TRUE(warnings.empty());
    return std::move(m).value();
  }
  std::unique_ptr<Scheduler> NewScheduler(SessionManager& m, int streams = 8) const {
    auto b = BatchDecoder::Create(*model_, streams, 1);
    EXPECT_TRUE(b.ok());
    SchedulerOptions so;
    so.max_streams = streams;
    return std::make_unique<Scheduler>(m, *tok_, std::move(*b), so);
  }
  // One chat request through the scheduler: the reply and the job.
  std::shared_ptr<Job> Ask(Scheduler& s, const std::vector<chat::ChatMessage>& messages, int64_t max_tokens,
                           std::string* reply) const {
    auto job = std::make_shared<Job>();
    job->kind = SessionKind::kChat;
    job->messages = messages;
    chat::ConversationOptions co = Options(1).chat;
    auto rendered = chat::Conversation::RenderMessages(co, messages, true);
    EXPECT_TRUE(rendered.ok());
    job->rendered = *rendered;
    job->params.max_tokens = max_tokens;
    job->params.temperature = 0;
    EXPECT_FALSE(s.Submit(job).has_value());
    reply->clear();
    std::string part;
    for (;;) {
      const bool end = job->Take(&part, 1000);
      reply->append(part);
      if (end) break;
    }
    return job;
  }

  static const ModelWeights* model_;
  static const Tokenizer* tok_;
  std::string dir_;
};
const ModelWeights* ServerTest::model_ = nullptr;
const Tokenizer* ServerTest::tok_ = nullptr;

// Conversation i's turn t: the user messages differ per conversation.
std::string UserText(int conversation, int turn) {
  static const char* kWords[] = {"cat", "dog", "ball", "tree", "sun", "boat", "cake", "bird"};
  return std::string("Tell me about the ") + kWords[conversation % 8] + " number " + std::to_string(conversation) +
         ", part " + std::to_string(turn);
}

TEST_F(ServerTest, ASecondTurnContinuesTheSessionAndFeedsOnlyTheSuffix) {
  auto m = Manager(4);
  auto s = NewScheduler(*m);
  std::vector<chat::ChatMessage> msgs = {{"user", UserText(0, 0)}};
  std::string reply;
  auto j1 = Ask(*s, msgs, 12, &reply);
  ASSERT_FALSE(j1->error.has_value());
  EXPECT_EQ(j1->cached_tokens, 0);
  EXPECT_EQ(j1->completion_tokens, 12);
  msgs.push_back({"assistant", reply});
  msgs.push_back({"user", UserText(0, 1)});
  auto j2 = Ask(*s, msgs, 12, &reply);
  ASSERT_FALSE(j2->error.has_value());
  EXPECT_EQ(j2->session_id, j1->session_id);
  EXPECT_EQ(j2->cached_tokens, j1->prompt_tokens + j1->completion_tokens);
  EXPECT_GT(j2->prompt_tokens, j2->cached_tokens);
  // A conversation that differs gets its own session.
  auto j3 = Ask(*s, {{"user", UserText(1, 0)}}, 4, &reply);
  EXPECT_NE(j3->session_id, j1->session_id);
  EXPECT_EQ(j3->cached_tokens, 0);
}

// 12 conversations of 3 turns on 2 live sessions (the rest swapped to disk),
// interleaved, 4 at a time: every reply equals the one the conversation gets
// alone on a server of its own.
TEST_F(ServerTest, InterleavedConversationsSwappedToDiskReplyAsAlone) {
  constexpr int kConversations = 12, kTurns = 3, kTokens = 10;
  std::vector<std::vector<std::string>> alone(kConversations);
  for (int c = 0; c < kConversations; ++c) {
    std::filesystem::remove_all(dir_);
    auto m = Manager(1, /*with_dir=*/false);
    auto s = NewScheduler(*m);
    std::vector<chat::ChatMessage> msgs;
    for (int t = 0; t < kTurns; ++t) {
      msgs.push_back({"user", UserText(c, t)});
      std::string reply;
      Ask(*s, msgs, kTokens, &reply);
      alone[c].push_back(reply);
      msgs.push_back({"assistant", reply});
    }
  }
  std::filesystem::remove_all(dir_);
  auto m = Manager(2);
  auto s = NewScheduler(*m, 4);
  std::vector<std::vector<chat::ChatMessage>> msgs(kConversations);
  for (int t = 0; t < kTurns; ++t) {
    for (int c0 = 0; c0 < kConversations; c0 += 2) {  // two at a time: both live sessions busy
      std::vector<std::thread> clients;
      for (int c = c0; c < c0 + 2; ++c) {
        clients.emplace_back([&, c] {
          msgs[c].push_back({"user", UserText(c, t)});
          std::string reply;
          auto job = Ask(*s, msgs[c], kTokens, &reply);
          EXPECT_FALSE(job->error.has_value()) << job->error->message;
          EXPECT_EQ(reply, alone[c][t]) << "conversation " << c << " turn " << t;
          if (t > 0) {
            EXPECT_GT(job->cached_tokens, 0) << "conversation " << c << " turn " << t;
          }
          msgs[c].push_back({"assistant", reply});
        });
      }
      for (auto& th : clients) th.join();
    }
  }
  const SessionTotals totals = m->Totals();
  EXPECT_EQ(totals.live, 2);
  EXPECT_EQ(totals.on_disk, kConversations - 2);
  EXPECT_GT(totals.restores, 0u);
  // Two Sessions served all twelve: a swap empties one for the next.
  EXPECT_EQ(totals.allocated, 2u);
  EXPECT_EQ(totals.reserved_bytes, 2 * m->session_reserved_bytes());
  // A restart finds every conversation: the next turn continues from disk.
  s->Drain();
  ASSERT_TRUE(m->SaveAll().ok());
  s.reset();
  m.reset();
  auto m2 = Manager(2);
  EXPECT_EQ(m2->Totals().on_disk, kConversations);
  auto s2 = NewScheduler(*m2);
  msgs[5].push_back({"user", UserText(5, kTurns)});
  std::string reply;
  auto job = Ask(*s2, msgs[5], kTokens, &reply);
  EXPECT_GT(job->cached_tokens, 0);
  EXPECT_EQ(m2->Totals().restores, 1u);
}

TEST_F(ServerTest, EveryLiveSessionBusyIsResourceExhausted) {
  auto m = Manager(1);
  auto a = m->Acquire(SessionKind::kChat, "<|im_start|>user\nhi");
  ASSERT_TRUE(a.ok());
  auto b = m->Acquire(SessionKind::kChat, "<|im_start|>user\nho");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kResourceExhausted);
  m->Release(a->id);
  EXPECT_TRUE(m->Acquire(SessionKind::kChat, "<|im_start|>user\nho").ok());
}

TEST_F(ServerTest, CancelMidReplyLeavesTheSessionConsistent) {
  auto m = Manager(2);
  auto s = NewScheduler(*m);
  std::vector<chat::ChatMessage> msgs = {{"user", UserText(3, 0)}};
  auto job = std::make_shared<Job>();
  job->kind = SessionKind::kChat;
  job->messages = msgs;
  job->rendered = *chat::Conversation::RenderMessages(Options(1).chat, msgs, true);
  job->params.max_tokens = 100000;
  job->params.temperature = 0;
  ASSERT_FALSE(s->Submit(job).has_value());
  std::string text, part;
  while (text.size() < 10) {
    ASSERT_FALSE(job->Take(&part, 1000));
    text += part;
  }
  job->cancel.store(true);
  while (!job->Take(&part, 1000)) text += part;
  text += part;
  EXPECT_EQ(job->finish_reason, "cancelled");
  EXPECT_LT(job->completion_tokens, 100000);
  // The next turn continues the cancelled reply's session.
  msgs.push_back({"assistant", text});
  msgs.push_back({"user", UserText(3, 1)});
  std::string reply;
  auto next = Ask(*s, msgs, 5, &reply);
  EXPECT_EQ(next->session_id, job->session_id);
  EXPECT_EQ(next->cached_tokens, job->prompt_tokens + job->completion_tokens);
}

TEST_F(ServerTest, APromptOverTheSessionCacheIsRefusedNamingTheSizes) {
  auto m = Manager(2);
  auto s = NewScheduler(*m);
  std::string reply;
  std::string big;
  for (int i = 0; i < 60; ++i) big += "once upon a time ";
  auto job = Ask(*s, {{"user", big}}, 5, &reply);
  ASSERT_TRUE(job->error.has_value());
  EXPECT_EQ(job->error->http_status, 400);
  EXPECT_NE(job->error->message.find("at most 128"), std::string::npos) << job->error->message;
  EXPECT_EQ(job->error->code, "context_length_exceeded");
}

TEST_F(ServerTest, AFullQueueIs429AndDrainingIs503) {
  auto m = Manager(2);
  auto b = BatchDecoder::Create(*model_, 1, 1);
  ASSERT_TRUE(b.ok());
  SchedulerOptions so;
  so.max_streams = 1;
  so.max_queued = 0;
  Scheduler s(*m, *tok_, std::move(*b), so);
  auto job = std::make_shared<Job>();
  auto e = s.Submit(job);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 429);
  EXPECT_GT(e->retry_after, 0);
  s.Drain();
  e = s.Submit(job);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->http_status, 503);
}

// A non-streaming client with a huge max_tokens that leaves before its
// reply: the server notices on the socket, stops the sequence and frees the
// session (kept with what was generated, as after a dropped stream); the next
// request is served.
TEST_F(ServerTest, ANonStreamingClientThatLeavesStopsItsSequence) {
  auto m = Manager(1);
  auto s = NewScheduler(*m, 2);
  HttpOptions ho;
  ho.port = 0;
  ho.model_name = "stories";
  ho.handler_threads = 4;
  ho.limits.max_tokens_limit = 1000000;
  HttpServer http(*m, *s, *tok_, Options(1).chat, ho);
  auto port = http.Bind();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  std::thread serving([&] { http.Run(); });
  const auto post = [&](const std::string& body) {
    return "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n"
           "Content-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  };
  const int client = Connect(*port);
  ASSERT_GE(client, 0);
  SendAll(client, post(R"({"prompt":"Once upon a time","max_tokens":1000000,"temperature":0.8})"));
  ASSERT_TRUE(WaitFor(30, [&] { return s->Metrics().active == 1; }));
  ASSERT_TRUE(WaitFor(30, [&] { return s->Metrics().steps > 0; }));
  const auto left = std::chrono::steady_clock::now();
  close(client);
  EXPECT_TRUE(WaitFor(10, [&] { return s->Metrics().active == 0; })) << "the sequence still decodes";
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - left).count();
  EXPECT_LT(seconds, 5.0);
  const SchedulerMetrics after = s->Metrics();
  EXPECT_LT(after.generated_tokens, 1000000u);
  for (const SessionInfo& i : m->List()) EXPECT_FALSE(i.busy) << i.id;
  // The next request (on the one live session) is served.
  const int next = Connect(*port);
  ASSERT_GE(next, 0);
  SendAll(next, post(R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0})"));
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = recv(next, buf, sizeof(buf), 0)) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(next);
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"completion_tokens\":4"), std::string::npos) << reply;
  http.Stop();
  serving.join();
  s->Drain();
}

// One owner per session directory and per port; accepted connections carry
// keepalive and a user timeout, so a peer that vanishes without a FIN ends
// its connection (and ClientSocket::Gone sees it) within a minute.
TEST_F(ServerTest, OneOwnerPerDirectoryAndPortAndVanishedPeersTimeOut) {
  auto m = Manager(1);
  std::vector<std::string> warnings;
  auto second = SessionManager::Create(*model_, *tok_, Options(1), &warnings);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("is in use by another process"), std::string::npos)
      << second.status().message();

  auto s = NewScheduler(*m, 1);
  HttpOptions ho;
  ho.port = 0;
  ho.model_name = "stories";
  HttpServer http(*m, *s, *tok_, Options(1).chat, ho);
  auto port = http.Bind();
  ASSERT_TRUE(port.ok()) << port.status().ToString();
  HttpOptions same = ho;
  same.port = *port;
  HttpServer rival(*m, *s, *tok_, Options(1).chat, same);
  auto rival_port = rival.Bind();
  ASSERT_FALSE(rival_port.ok()) << "a second server bound port " << *port;
  EXPECT_NE(rival_port.status().message().find("cannot bind"), std::string::npos) << rival_port.status().message();

  std::thread serving([&] { http.Run(); });
  const int client = Connect(*port);
  ASSERT_GE(client, 0);
  ClientSocket conn;
  ASSERT_TRUE(WaitFor(10, [&] {
    conn = ClientSocket::Find("127.0.0.1", *port, "127.0.0.1", LocalPort(client));
    return conn.found();
  }));
  const int served = conn.fd();
  int keepalive = 0, idle = 0, count = 0;
  unsigned user_timeout = 0;
  socklen_t len = sizeof(int);
  ASSERT_EQ(getsockopt(served, SOL_SOCKET, SO_KEEPALIVE, &keepalive, &len), 0);
  ASSERT_EQ(getsockopt(served, IPPROTO_TCP, TCP_KEEPIDLE, &idle, &len), 0);
  ASSERT_EQ(getsockopt(served, IPPROTO_TCP, TCP_KEEPCNT, &count, &len), 0);
  len = sizeof(user_timeout);
  ASSERT_EQ(getsockopt(served, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, &len), 0);
  EXPECT_EQ(keepalive, 1);
  EXPECT_GT(idle, 0);
  EXPECT_LE(idle, 60);
  EXPECT_GT(count, 0);
  EXPECT_GT(user_timeout, 0u);
  EXPECT_LE(user_timeout, 60000u);
  close(client);
  http.Stop();
  serving.join();
  s->Drain();
}

}  // namespace
}  // namespace kvedge::server
