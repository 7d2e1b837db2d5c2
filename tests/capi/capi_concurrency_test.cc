// The C API's concurrency guarantees: sessions with different caches running
// in parallel over one model equal the same sessions run one by one; session
// churn leaks nothing; the decode loop through the C API allocates nothing.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "kvedge.h"
#include "platform/alloc_counter.h"
#include "platform/memory.h"
#include "tests/testing/test_data.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KVEDGE_TEST_SANITIZED 1  // quarantine and shadow memory make RSS meaningless
#else
#define KVEDGE_TEST_SANITIZED 0
#endif

namespace kvedge {
namespace {

class CapiConcurrencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string model = testing::SharedPath("models/stories260K.bin");
    const std::string tokenizer = testing::SharedPath("models/tok512.bin");
    ASSERT_EQ(kvedge_model_load(model.c_str(), tokenizer.c_str(), &model_), KVEDGE_OK) << kvedge_last_error();
  }
  void TearDown() override { kvedge_model_free(model_); }

  kvedge_model* model_ = nullptr;
};

struct StreamSpec {
  const char* policy;
  const char* format;
  int capacity;
  int threads;
};

// Four different caches; all but the first evict within 300 tokens.
const StreamSpec kSpecs[] = {
    {"full", "f32", 512, 1},
    {"sinks", "int8", 96, 1},
    {"sinks", "int4", 64, 1},
    {"h2o", "int4", 160, 2},
};

struct StreamResult {
  std::vector<int32_t> ids;
  std::string text;
  kvedge_stats stats{};
  kvedge_status status = KVEDGE_INTERNAL;
};

kvedge_session_config ConfigOf(const StreamSpec& spec) {
  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.policy = spec.policy;
  config.key_format = spec.format;
  config.value_format = spec.format;
  config.capacity_tokens = spec.capacity;
  config.threads = spec.threads;
  config.temperature = 0.0f;
  return config;
}

// Greedy: "Once upon a time" with BOS, then 300 sampled-and-fed tokens,
// decoded through the model's pieces. No gtest assertions: runs on any thread.
StreamResult RunStream(const kvedge_model* model, const StreamSpec& spec) {
  StreamResult r;
  const kvedge_session_config config = ConfigOf(spec);
  kvedge_session* session = nullptr;
  r.status = kvedge_session_create(model, &config, &session);
  if (r.status != KVEDGE_OK) return r;
  r.status = kvedge_session_feed_text(session, "Once upon a time", 1);
  int32_t prev = 0;
  kvedge_session_last_token(session, &prev);
  for (int i = 0; i < 300 && r.status == KVEDGE_OK; ++i) {
    int32_t token = -1;
    r.status = kvedge_session_sample(session, &token);
    if (r.status == KVEDGE_OK) r.status = kvedge_session_feed_tokens(session, &token, 1);
    const char* piece = nullptr;
    size_t len = 0;
    if (r.status == KVEDGE_OK) r.status = kvedge_token_piece(model, prev, token, &piece, &len);
    if (r.status == KVEDGE_OK) r.text.append(piece, len);
    r.ids.push_back(token);
    prev = token;
  }
  kvedge_session_stats(session, &r.stats);
  kvedge_session_free(session);
  return r;
}

TEST_F(CapiConcurrencyTest, ParallelSessionsEqualSerialOnes) {
  std::vector<StreamResult> serial;
  for (const StreamSpec& spec : kSpecs) serial.push_back(RunStream(model_, spec));
  for (size_t i = 0; i < serial.size(); ++i) {
    ASSERT_EQ(serial[i].status, KVEDGE_OK) << kSpecs[i].policy << " " << kSpecs[i].format;
    ASSERT_EQ(serial[i].ids.size(), 300u);
    EXPECT_EQ(serial[i].stats.tokens_seen, 305u);
  }
  // The configurations really differ: the f32 full cache holds everything,
  // the others evicted, and their streams are not all the same.
  EXPECT_EQ(serial[0].stats.tokens_evicted, 0u);
  for (size_t i = 1; i < serial.size(); ++i) EXPECT_GT(serial[i].stats.tokens_evicted, 0u) << i;
  EXPECT_NE(serial[0].ids, serial[2].ids);

  for (int round = 0; round < 2; ++round) {
    std::vector<StreamResult> parallel(std::size(kSpecs));
    std::vector<std::thread> threads;
    for (size_t i = 0; i < std::size(kSpecs); ++i) {
      threads.emplace_back([&, i] { parallel[i] = RunStream(model_, kSpecs[i]); });
    }
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < parallel.size(); ++i) {
      ASSERT_EQ(parallel[i].status, KVEDGE_OK) << i;
      EXPECT_EQ(parallel[i].ids, serial[i].ids) << kSpecs[i].policy << " " << kSpecs[i].format;
      EXPECT_EQ(parallel[i].text, serial[i].text) << i;
      EXPECT_EQ(parallel[i].stats.tokens_held, serial[i].stats.tokens_held) << i;
    }
  }
}

// Sessions hold the model: the caller frees it first and the threads' last
// session_free releases it (the reference count is shared across threads).
TEST_F(CapiConcurrencyTest, LastSessionOnAnyThreadReleasesTheModel) {
  std::vector<kvedge_session*> sessions(4, nullptr);
  for (size_t i = 0; i < sessions.size(); ++i) {
    const kvedge_session_config config = ConfigOf(kSpecs[i]);
    ASSERT_EQ(kvedge_session_create(model_, &config, &sessions[i]), KVEDGE_OK) << kvedge_last_error();
  }
  kvedge_model_free(model_);
  model_ = nullptr;
  std::vector<int32_t> generated(sessions.size(), -1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < sessions.size(); ++i) {
    threads.emplace_back([&, i] {
      if (kvedge_session_feed_text(sessions[i], "Once upon a time", 1) == KVEDGE_OK) {
        kvedge_session_generate(sessions[i], 20, nullptr, nullptr, &generated[i]);
      }
      kvedge_session_free(sessions[i]);
    });
  }
  for (std::thread& t : threads) t.join();
  for (int32_t n : generated) EXPECT_EQ(n, 20);
}

TEST_F(CapiConcurrencyTest, LastErrorIsPerThread) {
  kvedge_session* session = nullptr;
  ASSERT_EQ(kvedge_session_create(nullptr, nullptr, &session), KVEDGE_INVALID_ARGUMENT);
  const std::string mine = kvedge_last_error();
  EXPECT_NE(mine.find("'model'"), std::string::npos) << mine;
  std::string theirs_before, theirs_after;
  std::thread other([&] {
    theirs_before = kvedge_last_error();
    kvedge_session_config config;
    kvedge_session_config_init(&config);
    config.threads = 0;
    kvedge_session_create(model_, &config, &session);
    theirs_after = kvedge_last_error();
  });
  other.join();
  EXPECT_EQ(theirs_before, "");
  EXPECT_NE(theirs_after.find("threads"), std::string::npos) << theirs_after;
  EXPECT_EQ(kvedge_last_error(), mine);
}

// 10,000 create/free cycles (every tenth also feeds a token, every tenth is a
// refused config) leak nothing: LSan checks the heap under ASan; here the RSS
// must stay flat.
TEST_F(CapiConcurrencyTest, SessionChurnLeaksNothing) {
  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.capacity_tokens = 40;
  kvedge_session_config refused = config;
  refused.key_format = "int5";
  const auto cycle = [&](int i) {
    kvedge_session* session = nullptr;
    if (i % 10 == 9) {
      ASSERT_EQ(kvedge_session_create(model_, &refused, &session), KVEDGE_INVALID_ARGUMENT);
      return;
    }
    ASSERT_EQ(kvedge_session_create(model_, &config, &session), KVEDGE_OK) << kvedge_last_error();
    if (i % 10 == 0) {  // a used session releases the same memory as a fresh one; feeding costs time
      const int32_t token = 1 + i % 500;
      ASSERT_EQ(kvedge_session_feed_tokens(session, &token, 1), KVEDGE_OK);
    }
    kvedge_session_free(session);
  };
  for (int i = 0; i < 200; ++i) cycle(i);  // warm the allocators
  const uint64_t rss_before = CurrentRssBytes();
  const int cycles = kvedge::testing::ScaledCount(10000, 200);
  for (int i = 0; i < cycles; ++i) {
    cycle(i);
    if (HasFatalFailure()) return;
  }
  const uint64_t rss_after = CurrentRssBytes();
  if (!KVEDGE_TEST_SANITIZED) {
    EXPECT_LT(rss_after, rss_before + (4u << 20)) << FormatBytes(rss_before) << " -> " << FormatBytes(rss_after);
  }
}

// The per-token path of an embedder: sample, feed, piece, logits, stats and
// generate, through an evicting int4 cache with two threads.
TEST_F(CapiConcurrencyTest, DecodeThroughTheCApiAllocatesNothing) {
  ASSERT_TRUE(AllocationHookInstalled());
  kvedge_session_config config;
  kvedge_session_config_init(&config);
  config.policy = "sinks";
  config.key_format = "int4";
  config.value_format = "int4";
  config.capacity_tokens = 64;
  config.threads = 2;
  config.seed = 7;
  kvedge_session* session = nullptr;
  ASSERT_EQ(kvedge_session_create(model_, &config, &session), KVEDGE_OK) << kvedge_last_error();
  ASSERT_EQ(kvedge_session_feed_text(session, "Once upon a time", 1), KVEDGE_OK);
  size_t bytes = 0;
  int32_t generated = 0;
  const auto count_bytes = [](const char*, size_t len, void* user) {
    *static_cast<size_t*>(user) += len;
    return 0;
  };
  int64_t allocations = 0;
  {
    ScopedAllocationCounter counter;
    int32_t prev = 378;
    for (int i = 0; i < 1000; ++i) {
      int32_t token = -1;
      ASSERT_EQ(kvedge_session_sample(session, &token), KVEDGE_OK);
      ASSERT_EQ(kvedge_session_feed_tokens(session, &token, 1), KVEDGE_OK);
      const char* piece = nullptr;
      size_t len = 0;
      ASSERT_EQ(kvedge_token_piece(model_, prev, token, &piece, &len), KVEDGE_OK);
      bytes += len;
      prev = token;
    }
    const float* logits = nullptr;
    int32_t n_vocab = 0;
    kvedge_stats stats;
    ASSERT_EQ(kvedge_session_logits(session, &logits, &n_vocab), KVEDGE_OK);
    ASSERT_EQ(kvedge_session_stats(session, &stats), KVEDGE_OK);
    ASSERT_EQ(kvedge_session_generate(session, 500, count_bytes, &bytes, &generated), KVEDGE_OK);
    allocations = counter.count();
  }
  EXPECT_EQ(allocations, 0);
  EXPECT_GT(bytes, 1000u);
  EXPECT_GT(generated, 0);
  kvedge_stats stats;
  ASSERT_EQ(kvedge_session_stats(session, &stats), KVEDGE_OK);
  EXPECT_EQ(stats.tokens_seen, 5u + 1000u + static_cast<uint64_t>(generated));
  EXPECT_GT(stats.tokens_evicted, 0u);
  EXPECT_GT(stats.compression, 1.0);
  kvedge_session_free(session);
}

}  // namespace
}  // namespace kvedge
