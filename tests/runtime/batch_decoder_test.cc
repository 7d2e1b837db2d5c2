// BatchDecoder: sessions stepped together get, bit for bit, the logits each
// gets fed alone — for real models (llama2.c and GGUF, every legacy and
// K-quant weight type of the conformance kit, the architecture kit's
// biases/post-norms/soft-caps/sliding windows) and synthetic ones, with a
// different prompt and KV configuration (format, policy) per session and
// sequences joining and leaving between steps. An error in any row changes
// no session; a step allocates nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "platform/alloc_counter.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_export.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

// One KV configuration per stream, cycled: every format, the evicting
// policies at capacities the runs exceed, and `full`.
SessionOptions StreamOptions(size_t i, int threads = 1) {
  struct Kv {
    EvictionPolicy policy;
    KvFormat key, value;
    int capacity;
  };
  static const Kv kKv[] = {
      {EvictionPolicy::kFull, KvFormat::kF32, KvFormat::kF32, 256},
      {EvictionPolicy::kWindow, KvFormat::kInt4, KvFormat::kInt4, 40},
      {EvictionPolicy::kH2O, KvFormat::kInt8, KvFormat::kInt8, 72},
      {EvictionPolicy::kSinks, KvFormat::kF16, KvFormat::kF16, 70},
      {EvictionPolicy::kH2O, KvFormat::kInt4, KvFormat::kInt8, 80},
      {EvictionPolicy::kWindow, KvFormat::kF16, KvFormat::kInt4, 256},
  };
  const Kv& kv = kKv[i % std::size(kKv)];
  SessionOptions o;
  o.kv.policy = kv.policy;
  o.kv.key_format = kv.key;
  o.kv.value_format = kv.value;
  o.kv.capacity = kv.capacity;
  o.threads = threads;
  o.max_batch = 16;
  return o;
}

std::vector<int> Prompt(size_t stream, int vocab) {
  std::vector<int> p;
  for (size_t i = 0; i < 3 + 9 * stream; ++i) p.push_back(1 + static_cast<int>((i * 37 + stream * 101) % (vocab - 1)));
  return p;
}

int Argmax(const Session& s) {
  const float* lg = s.Logits();
  return static_cast<int>(std::max_element(lg, lg + s.vocab_size()) - lg);
}

std::unique_ptr<Session> NewSession(const ModelWeights& model, const SessionOptions& o) {
  auto s = Session::Create(model, o);
  if (!s.ok()) std::fprintf(stderr, "%s\n", s.status().ToString().c_str());
  KVEDGE_CHECK(s.ok());
  return std::move(s).value();
}

// A batched stream and its twin fed alone.
struct Stream {
  std::unique_ptr<Session> batched, alone;
};

Stream NewStream(const ModelWeights& model, size_t i, int threads = 1) {
  Stream s{NewSession(model, StreamOptions(i, threads)), NewSession(model, StreamOptions(i, threads))};
  const std::vector<int> p = Prompt(i, model.config.vocab_size);
  KVEDGE_CHECK(s.batched->Feed(p.data(), p.size()).ok());
  KVEDGE_CHECK(s.alone->Feed(p.data(), p.size()).ok());
  return s;
}

// Both twins in the same state: logits bit for bit, counters, history, cache.
void ExpectSame(const Session& a, const Session& b, const std::string& what) {
  ASSERT_EQ(std::memcmp(a.Logits(), b.Logits(), sizeof(float) * static_cast<size_t>(a.vocab_size())), 0) << what;
  EXPECT_EQ(a.tokens_fed(), b.tokens_fed()) << what;
  EXPECT_EQ(a.history().size(), b.history().size()) << what;
  EXPECT_EQ(a.history().hash(), b.history().hash()) << what;
  const KvCacheStats x = a.cache().Stats(), y = b.cache().Stats();
  EXPECT_EQ(x.tokens_seen, y.tokens_seen) << what;
  EXPECT_EQ(x.tokens_held, y.tokens_held) << what;
  EXPECT_EQ(x.held_bytes, y.held_bytes) << what;
}

// Up to 7 streams over `steps` steps; stream i is active at step t unless
// (t + i) % 4 == 3 (leaves, rejoins), and streams 5 and 6 join at steps 4
// and 9 (prefilled then). Every batched session matches its twin after every
// step in which it ran, and both continue greedily from the same logits.
void CheckBatchEqualsAlone(const ModelWeights& model, const std::string& name, int steps, int threads = 1) {
  constexpr size_t kStreams = 7;
  auto decoder = BatchDecoder::Create(model, static_cast<int>(kStreams), threads);
  ASSERT_TRUE(decoder.ok()) << decoder.status().ToString();
  std::vector<Stream> streams;
  for (size_t i = 0; i < 5; ++i) streams.push_back(NewStream(model, i, i % 2 == 0 ? threads : 1));
  std::vector<Session*> rows;
  std::vector<int> tokens;
  std::vector<size_t> which;
  for (int t = 0; t < steps; ++t) {
    if (t == 4 || t == 9) streams.push_back(NewStream(model, streams.size(), threads));
    rows.clear(), tokens.clear(), which.clear();
    // Rows in a different order each step.
    for (size_t k = 0; k < streams.size(); ++k) {
      const size_t i = (k + static_cast<size_t>(t)) % streams.size();
      if ((static_cast<size_t>(t) + i) % 4 == 3) continue;
      rows.push_back(streams[i].batched.get());
      tokens.push_back(Argmax(*streams[i].alone));
      which.push_back(i);
    }
    ASSERT_TRUE((*decoder)->Step(rows.data(), tokens.data(), rows.size()).ok()) << name << " step " << t;
    for (size_t r = 0; r < rows.size(); ++r) {
      ASSERT_TRUE(streams[which[r]].alone->Feed(&tokens[r], 1).ok());
      ExpectSame(*streams[which[r]].batched, *streams[which[r]].alone,
                 name + " step " + std::to_string(t) + " stream " + std::to_string(which[r]));
      if (::testing::Test::HasFatalFailure()) return;
    }
  }
}

std::unique_ptr<ModelWeights> Load(const std::string& path) {
  auto m = LoadModel(path);
  KVEDGE_CHECK(m.ok());
  return std::move(m).value();
}

class RealModelTest : public ::testing::TestWithParam<const char*> {};

TEST_P(RealModelTest, SessionsSteppedTogetherMatchEachFedAlone) {
  const auto model = Load(testing::SharedPath(GetParam()));
  CheckBatchEqualsAlone(*model, GetParam(), testing::ScaledCount(24, 12));
}

INSTANTIATE_TEST_SUITE_P(
    Models, RealModelTest,
    ::testing::Values("models/stories260K.bin", "models/stories260K_llamacpp.gguf",
                      "conformance/weights/models/stories260K-pad256-Q4_0.gguf",
                      "conformance/weights/models/stories260K-pad256-Q8_0.gguf",
                      "conformance/weights/models/stories260K-pad256-Q4_K_M.gguf",
                      "conformance/weights/models/stories260K-pad256-Q6_K.gguf",
                      "conformance/weights/models/stories260K-pad256-Q5_1.gguf",
                      "conformance/weights/models/stories260K-pad256-IQ4_XS.gguf",
                      "conformance/architectures/gemma2.gguf", "conformance/architectures/qwen2.gguf",
                      "conformance/architectures/phi3.gguf", "conformance/architectures/llama3.gguf"),
    [](const ::testing::TestParamInfo<const char*>& info) {
      std::string n = info.param;
      n = n.substr(n.rfind('/') + 1);
      for (char& ch : n) {
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      }
      return n;
    });

// Synthetic random models (`kvedge synth`) in the formats it writes: Q8_0 and
// Q4_0 take the interleaved layout where the CPU prefers it.
TEST(BatchDecoderTest, SyntheticModelsMatchEachFedAlone) {
  const SynthShape shape{"small", 128, 2, 4, 2, 352, 1000, 256};
  for (WeightType type : {WeightType::kF16, WeightType::kQ8_0, WeightType::kQ4_0}) {
    const std::string path = testing::TempDir() + "/batch_synth.gguf";
    ASSERT_TRUE(WriteRandomLlamaGguf(shape, type, 11, path).ok());
    const auto model = Load(path);
    CheckBatchEqualsAlone(*model, GetWeightFormat(type).name, testing::ScaledCount(16, 8));
  }
}

// Two threads in the decoder; sessions planned for two threads or one (these
// attend on one thread in the batch). Same logits as alone.
TEST(BatchDecoderTest, ThreadedDecoderMatchesEachFedAlone) {
  const auto model = Load(testing::SharedPath("conformance/weights/models/stories260K-pad256-Q4_K_M.gguf"));
  CheckBatchEqualsAlone(*model, "threads", testing::ScaledCount(16, 8), 2);
}

struct Snapshot {
  std::vector<float> logits;
  uint64_t fed, seen, held, hash;
};

Snapshot Snap(const Session& s) {
  const KvCacheStats st = s.cache().Stats();
  return {std::vector<float>(s.Logits(), s.Logits() + s.vocab_size()), s.tokens_fed(), st.tokens_seen,
          st.tokens_held, s.history().hash()};
}

void ExpectUnchanged(const std::vector<std::unique_ptr<Session>>& s, const std::vector<Snapshot>& before,
                     const std::string& what) {
  for (size_t i = 0; i < s.size(); ++i) {
    const Snapshot now = Snap(*s[i]);
    EXPECT_EQ(now.logits, before[i].logits) << what << " session " << i;
    EXPECT_EQ(now.fed, before[i].fed) << what;
    EXPECT_EQ(now.seen, before[i].seen) << what;
    EXPECT_EQ(now.held, before[i].held) << what;
    EXPECT_EQ(now.hash, before[i].hash) << what;
  }
}

TEST(BatchDecoderTest, AnErrorInOneRowChangesNoSession) {
  const auto model = Load(testing::SharedPath("models/stories260K.bin"));
  const auto other = Load(testing::SharedPath("models/stories260K.bin"));
  std::vector<std::unique_ptr<Session>> s;
  for (size_t i = 0; i < 3; ++i) s.push_back(NewSession(*model, StreamOptions(i)));
  SessionOptions full = StreamOptions(0);
  full.kv.capacity = 8;
  s.push_back(NewSession(*model, full));
  for (size_t i = 0; i < s.size(); ++i) {
    const std::vector<int> p = Prompt(0, 512);  // 3 tokens each
    ASSERT_TRUE(s[i]->Feed(p.data(), p.size()).ok());
  }
  auto foreign = NewSession(*other, StreamOptions(0));
  auto decoder = BatchDecoder::Create(*model, 4, 1);
  ASSERT_TRUE(decoder.ok());
  std::vector<Snapshot> before;
  for (const auto& x : s) before.push_back(Snap(*x));
  const auto expect_error = [&](std::vector<Session*> rows, std::vector<int> tokens, StatusCode code,
                                const std::string& message) {
    const Status st = (*decoder)->Step(rows.data(), tokens.data(), rows.size());
    EXPECT_EQ(st.code(), code) << st.ToString();
    EXPECT_NE(st.message().find(message), std::string::npos) << st.ToString();
    ExpectUnchanged(s, before, message);
  };
  Session* a = s[0].get();
  Session* b = s[1].get();
  Session* c = s[2].get();
  expect_error({a, b, c}, {5, 512, 6}, StatusCode::kInvalidArgument, "batch row 1: token id 512");
  expect_error({a, b, c}, {5, 6, -1}, StatusCode::kInvalidArgument, "batch row 2: token id -1");
  expect_error({a, b, a}, {5, 6, 7}, StatusCode::kInvalidArgument, "batch row 2 repeats the session of row 0");
  expect_error({a, nullptr}, {5, 6}, StatusCode::kInvalidArgument, "batch row 1 has no session");
  expect_error({a, foreign.get()}, {5, 6}, StatusCode::kInvalidArgument, "batch row 1: the session runs another");
  expect_error({a, b, c, s[3].get(), a}, {1, 2, 3, 4, 5}, StatusCode::kInvalidArgument,
               "batch of 5 streams exceeds the decoder's 4");
  // The `full` session (capacity 8, 3 fed) takes 5 more, then refuses.
  Session* f = s[3].get();
  for (int i = 0; i < 5; ++i) {
    Session* one[] = {f};
    const int tok[] = {9};
    ASSERT_TRUE((*decoder)->Step(one, tok, 1).ok());
  }
  before[3] = Snap(*f);
  expect_error({a, b, f, c}, {5, 6, 7, 8}, StatusCode::kResourceExhausted, "batch row 2: ");
  // Nothing to step is a no-op.
  EXPECT_TRUE((*decoder)->Step(nullptr, nullptr, 0).ok());
  ExpectUnchanged(s, before, "empty step");
}

TEST(BatchDecoderTest, CreateRejectsBadCounts) {
  const auto model = Load(testing::SharedPath("models/stories260K.bin"));
  EXPECT_EQ(BatchDecoder::Create(*model, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(BatchDecoder::Create(*model, 4097, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(BatchDecoder::Create(*model, 4, 0).ok());
  EXPECT_FALSE(BatchDecoder::Create(*model, 4, 100000).ok());
  auto d = BatchDecoder::Create(*model, 16, 2);
  ASSERT_TRUE(d.ok());
  EXPECT_EQ((*d)->max_streams(), 16);
  EXPECT_EQ((*d)->threads(), 2);
}

// Continuous batching at steady state: 6 streams of every format and
// policy, rows joining and leaving, hundreds of steps; no allocation.
TEST(BatchDecoderTest, StepsAllocateNothing) {
  const auto model = Load(testing::SharedPath("models/stories260K.bin"));
  std::vector<std::unique_ptr<Session>> s;
  for (size_t i = 0; i < 6; ++i) {
    SessionOptions o = StreamOptions(i, 2);
    if (o.kv.policy == EvictionPolicy::kFull) o.kv.policy = EvictionPolicy::kSinks;
    s.push_back(NewSession(*model, o));
    const std::vector<int> p = Prompt(i, 512);
    ASSERT_TRUE(s.back()->Feed(p.data(), p.size()).ok());
  }
  auto decoder = BatchDecoder::Create(*model, 6, 2);
  ASSERT_TRUE(decoder.ok());
  std::vector<Session*> rows(6);
  std::vector<int> tokens(6);
  const int steps = testing::ScaledCount(400, 50);
  ScopedAllocationCounter allocations;
  for (int t = 0; t < steps; ++t) {
    size_t n = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      if ((static_cast<size_t>(t) * 7 + i) % 5 == 0) continue;
      rows[n] = s[i].get();
      tokens[n++] = Argmax(*s[i]);
    }
    ASSERT_TRUE((*decoder)->Step(rows.data(), tokens.data(), n).ok());
  }
  EXPECT_EQ(allocations.count(), 0);
}

}  // namespace
}  // namespace kvedge
