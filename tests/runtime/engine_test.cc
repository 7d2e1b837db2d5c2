// Forward pass conformance on the real stories260K model: the reference greedy
// ids and text with the f32 cache (llama2.c .bin, kvedge's own GGUF, llama.cpp's
// GGUF), reference perplexity, prefill = decode, zero allocations per token.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "platform/alloc_counter.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_export.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/spm_tokenizer.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

const std::vector<int> kOnceUponATimeGreedy = {
    432, 383, 286, 261, 376, 298, 315, 421, 395, 317, 426, 338, 401, 396, 267, 337, 410, 408, 419, 292, 411, 322, 265,
    282, 295, 433, 426, 385, 328, 432, 358, 394, 261, 370, 432, 352, 266, 268, 388, 426, 338, 391, 266, 267, 337, 335,
    312, 432, 398, 312};

const char kBosOnly200[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a "
    "big, red ball. She wanted to play with it, but it was too high.\nLily's mom said, \"Lily, let's go to the park.\" "
    "Lily was sad and didn't know what to do. She said, \"I want to play with your ball, but I can't find it.\"\nLily "
    "was sad and didn't know what to do. She said, \"I'm sorry, Lily. I didn't know what to do.\"\nLily didn't want "
    "to help her mom, so she";

std::unique_ptr<ModelWeights> Load(const std::string& rel) {
  auto m = LoadModel(testing::SharedPath(rel));
  KVEDGE_CHECK(m.ok());
  return std::move(m).value();
}

SessionOptions FullF32(int capacity) {
  SessionOptions o;
  o.kv.policy = EvictionPolicy::kFull;
  o.kv.key_format = KvFormat::kF32;
  o.kv.value_format = KvFormat::kF32;
  o.kv.capacity = capacity;
  return o;
}

// Greedy continuation of `prompt` for n tokens.
std::vector<int> Greedy(const ModelWeights& model, const std::vector<int>& prompt, int n, SessionOptions o) {
  auto s = Session::Create(model, o);
  KVEDGE_CHECK(s.ok());
  KVEDGE_CHECK((*s)->Feed(prompt.data(), prompt.size()).ok());
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    const float* lg = (*s)->Logits();
    const int next = static_cast<int>(std::max_element(lg, lg + (*s)->vocab_size()) - lg);
    out.push_back(next);
    KVEDGE_CHECK((*s)->Feed(&next, 1).ok());
  }
  return out;
}

TEST(EngineTest, ReproducesReferenceGreedyIds) {
  const auto model = Load("models/stories260K.bin");
  const std::vector<int> prompt = {1, 403, 407, 261, 378};
  EXPECT_EQ(Greedy(*model, prompt, 50, FullF32(512)), kOnceUponATimeGreedy);
}

TEST(EngineTest, ReproducesReferenceTextFromBos) {
  const auto model = Load("models/stories260K.bin");
  auto tok = LoadTokenizer(*model, testing::SharedPath("models/tok512.bin"));
  ASSERT_TRUE(tok.ok()) << tok.status().ToString();
  std::vector<int> ids = {1};
  const auto gen = Greedy(*model, ids, 200, FullF32(512));
  ids.insert(ids.end(), gen.begin(), gen.end());
  EXPECT_EQ((*tok)->Decode(ids), kBosOnly200);
}

TEST(EngineTest, GgufFilesBehaveLikeTheBin) {
  const auto bin = Load("models/stories260K.bin");
  auto tok = LoadLlama2cTokenizer(testing::SharedPath("models/tok512.bin"), 512);
  ASSERT_TRUE(tok.ok());
  const std::string path = testing::TempDir() + "/stories260K_kvedge.gguf";
  ASSERT_TRUE(ConvertToGguf(*bin, (*tok)->Vocabulary(), path, WeightType::kF32).ok());
  auto ours = LoadModel(path);
  ASSERT_TRUE(ours.ok()) << ours.status().ToString();
  const auto theirs = Load("models/stories260K_llamacpp.gguf");
  const std::vector<int> prompt = {1, 403, 407, 261, 378};
  EXPECT_EQ(Greedy(**ours, prompt, 50, FullF32(512)), kOnceUponATimeGreedy);
  EXPECT_EQ(Greedy(*theirs, prompt, 50, FullF32(512)), kOnceUponATimeGreedy);
}

// Models of every IsInterleavable type run the same on both weight layouts:
// the stories model converted to each format (w2, 172 columns, stays f16), loaded in place
// and interleaved. The layouts hold the same weights; only the f32 order of
// the block sums differs, so logits agree to ~1e-5 of their range and greedy
// decoding picks the same tokens. LoadModel interleaves exactly when the CPU
// prefers it, and the interleaved copies replace the mapped pages.
TEST(EngineTest, InterleavedWeightsMatchTheFileLayout) {
  const auto bin = Load("models/stories260K.bin");
  auto tok = LoadLlama2cTokenizer(testing::SharedPath("models/tok512.bin"), 512);
  ASSERT_TRUE(tok.ok());
  const std::vector<int> prompt = {1, 403, 407, 261, 378};
  for (WeightType type : {WeightType::kQ8_0, WeightType::kQ4_0, WeightType::kQ4_1, WeightType::kQ5_0,
                          WeightType::kQ5_1, WeightType::kIQ4_NL}) {
    ASSERT_TRUE(IsInterleavable(type));
    const std::string path = testing::TempDir() + "/stories260K_" + WeightTypeName(type) + ".gguf";
    ASSERT_TRUE(ConvertToGguf(*bin, (*tok)->Vocabulary(), path, type).ok());
    LoadOptions in_place;
    in_place.interleave = false;
    auto rows = LoadModel(path, in_place);
    auto auto_layout = LoadModel(path);
    auto interleaved = LoadModel(path, in_place);
    ASSERT_TRUE(rows.ok() && auto_layout.ok() && interleaved.ok());
    ASSERT_TRUE(InterleaveWeights(interleaved->get()).ok());
    const LayerWeights& l0 = (*interleaved)->layers[0];
    EXPECT_EQ(l0.wq.layout, WeightLayout::kInterleaved16);
    EXPECT_EQ(l0.w2.layout, WeightLayout::kRows);  // f16: not interleavable
    EXPECT_EQ(l0.w2.type, WeightType::kF16);
    EXPECT_EQ((*interleaved)->token_embedding.layout, WeightLayout::kRows);
    EXPECT_EQ((*rows)->layers[0].wq.layout, WeightLayout::kRows);
    EXPECT_EQ((*auto_layout)->layers[0].wq.layout,
              InterleavedWeightsPreferred() ? WeightLayout::kInterleaved16 : WeightLayout::kRows);

    auto a = Session::Create(**rows, FullF32(512));
    auto b = Session::Create(**interleaved, FullF32(512));
    ASSERT_TRUE(a.ok() && b.ok());
    float max_diff = 0.0f, max_abs = 0.0f;
    for (int t : prompt) {
      ASSERT_TRUE((*a)->Feed(&t, 1).ok());
      ASSERT_TRUE((*b)->Feed(&t, 1).ok());
      for (int v = 0; v < (*a)->vocab_size(); ++v) {
        max_diff = std::max(max_diff, std::fabs((*a)->Logits()[v] - (*b)->Logits()[v]));
        max_abs = std::max(max_abs, std::fabs((*a)->Logits()[v]));
      }
    }
    EXPECT_LE(max_diff, 1e-4f * max_abs) << WeightTypeName(type);
    EXPECT_EQ(Greedy(**interleaved, prompt, 30, FullF32(512)), Greedy(**rows, prompt, 30, FullF32(512)))
        << WeightTypeName(type);
  }
}

// The README's reference: first 6,000 characters of the validation text as one
// stream with a single BOS, 1,024 tokens scored in two 512-token windows with
// the cache reset per window: mean NLL 1.3759.
TEST(EngineTest, ReferencePerplexity) {
  const auto model = Load("models/stories260K.bin");
  auto tok = LoadTokenizer(*model, testing::SharedPath("models/tok512.bin"));
  ASSERT_TRUE(tok.ok());
  std::ifstream in(testing::SharedPath("data/tinystories_valid_head.txt"), std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.resize(6000);
  auto ids = (*tok)->Encode(text, /*add_bos=*/true);
  ASSERT_TRUE(ids.ok());
  ASSERT_GE(ids->size(), 1025u);
  double nll = 0;
  int count = 0;
  for (int w = 0; w < 2; ++w) {
    auto s = Session::Create(*model, FullF32(512));
    ASSERT_TRUE(s.ok());
    const int* win = ids->data() + w * 512;
    // Window w predicts tokens w·512+1 … w·512+512 from the 512 tokens before them.
    ASSERT_TRUE((*s)->FeedAll(win, 512, [&](size_t i, const float* lg) {
                     const int target = win[i + 1];
                     double mx = lg[0];
                     for (int v = 1; v < 512; ++v) mx = std::max(mx, static_cast<double>(lg[v]));
                     double sum = 0;
                     for (int v = 0; v < 512; ++v) sum += std::exp(lg[v] - mx);
                     nll += std::log(sum) + mx - lg[target];
                     ++count;
                   }).ok());
  }
  EXPECT_EQ(count, 1024);
  EXPECT_NEAR(nll / count, 1.3759, 5e-4);
}

// A chunk longer than the window gives what feeding its tokens one by one
// gives, for every policy: the ring evicts inside the chunk, H2O ranks by
// the scores each token's attention added. Logits near (batched matmuls
// round differently), cache contents equal, H2O scores near.
TEST(EngineTest, PrefillEqualsTokenByToken) {
  const auto model = Load("models/stories260K.bin");
  std::vector<int> prompt;
  for (int i = 0; i < 90; ++i) prompt.push_back(1 + (i * 37) % 500);
  for (EvictionPolicy p : {EvictionPolicy::kFull, EvictionPolicy::kWindow, EvictionPolicy::kSinks,
                           EvictionPolicy::kH2O}) {
    for (KvFormat f : {KvFormat::kF32, KvFormat::kInt4}) {
      SessionOptions o;
      o.kv.policy = p;
      o.kv.key_format = f;
      o.kv.value_format = f;
      o.kv.capacity = p == EvictionPolicy::kFull ? 96 : 68;  // the others evict inside the prompt
      o.max_batch = 64;
      auto batched = Session::Create(*model, o);
      o.max_batch = 1;
      auto single = Session::Create(*model, o);
      ASSERT_TRUE(batched.ok() && single.ok());
      ASSERT_TRUE((*batched)->Feed(prompt.data(), prompt.size()).ok());
      for (int t : prompt) ASSERT_TRUE((*single)->Feed(&t, 1).ok());
      const std::string what = std::string(EvictionPolicyName(p)) + " " + KvFormatName(f);
      if (p != EvictionPolicy::kFull) {
        EXPECT_GT((*single)->cache().Stats().tokens_evicted, 0u) << what;
      }
      for (int v = 0; v < 512; ++v) {
        ASSERT_NEAR((*batched)->Logits()[v], (*single)->Logits()[v], 1e-4) << what << " logit " << v;
      }
      const KvCachePlan& plan = (*single)->cache().plan();
      for (int l = 0; l < plan.shape.n_layers; ++l) {
        for (int h = 0; h < plan.shape.n_kv_heads; ++h) {
          const auto a = (*batched)->cache().Contents(l, h);
          const auto b = (*single)->cache().Contents(l, h);
          ASSERT_EQ(a.tokens, b.tokens) << what << " layer " << l << " head " << h;
          ASSERT_EQ(a.positions, b.positions) << what << " layer " << l << " head " << h;
          ASSERT_EQ(a.scores.size(), b.scores.size()) << what;
          for (size_t j = 0; j < a.scores.size(); ++j) {
            ASSERT_NEAR(a.scores[j], b.scores[j], 1e-4) << what << " layer " << l << " head " << h << " slot " << j;
          }
        }
      }
    }
  }
}

TEST(EngineTest, DecodeAllocatesNothingPerToken) {
  const auto model = Load("models/stories260K.bin");
  for (EvictionPolicy p : {EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
    SessionOptions o;
    o.kv.policy = p;
    o.kv.capacity = 128;
    o.threads = 2;
    auto s = Session::Create(*model, o);
    ASSERT_TRUE(s.ok());
    SamplerOptions so;
    so.seed = 3;
    auto sampler = Sampler::Create(so, 512);
    ASSERT_TRUE(sampler.ok());
    int t = 1;
    ASSERT_TRUE((*s)->Feed(&t, 1).ok());
    ScopedAllocationCounter allocations;
    for (int i = 0; i < testing::ScaledCount(2000, 200); ++i) {
      t = sampler->Sample((*s)->Logits());
      ASSERT_TRUE((*s)->Feed(&t, 1).ok());
    }
    EXPECT_EQ(allocations.count(), 0) << EvictionPolicyName(p);
    EXPECT_EQ((*s)->cache().Stats().tokens_seen, static_cast<uint64_t>(testing::ScaledCount(2000, 200)) + 1);
  }
}

TEST(EngineTest, RejectsOutOfRangeTokens) {
  const auto model = Load("models/stories260K.bin");
  auto s = Session::Create(*model, FullF32(64));
  ASSERT_TRUE(s.ok());
  const int bad[] = {1, 512};
  const Status st = (*s)->Feed(bad, 2);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("token id 512 at position 1"), std::string::npos);
}

// The benchmark fill: synthetic tokens count like fed ones (held, positions),
// a `full` cache refuses a fill it cannot hold, and decoding afterwards works.
TEST(EngineTest, SyntheticFillReachesDepthWithoutTheModel) {
  const auto model = Load("models/stories260K.bin");
  auto s = Session::Create(*model, FullF32(100));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->FillSynthetic(90, 1).ok());
  EXPECT_EQ((*s)->tokens_fed(), 90u);
  EXPECT_EQ((*s)->cache().Stats().tokens_held, 90u);
  const int bos = 1;
  ASSERT_TRUE((*s)->Feed(&bos, 1).ok());
  const float* lg = (*s)->Logits();
  for (int i = 0; i < (*s)->vocab_size(); ++i) ASSERT_TRUE(std::isfinite(lg[i])) << i;
  const Status st = (*s)->FillSynthetic(10, 1);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ((*s)->cache().Stats().tokens_held, 91u);
}

TEST(EngineTest, FullCacheRefusesWithContextFull) {
  const auto model = Load("models/stories260K.bin");
  auto s = Session::Create(*model, FullF32(40));
  ASSERT_TRUE(s.ok());
  std::vector<int> ids(40, 5);
  ASSERT_TRUE((*s)->Feed(ids.data(), ids.size()).ok());
  const Status st = (*s)->Feed(ids.data(), 1);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("context full"), std::string::npos);
}

}  // namespace
}  // namespace kvedge
