// The memory promise at CI size: for every policy and every KV format, 20,000
// decode steps through the generation loop (model, cache, sampler, text with
// stop strings) allocate nothing anywhere in the process, keep
// the arena bytes constant, keep held bytes within the arena and every logit
// finite. Sanitizer builds (≈10x slower) check the same over 4,000 steps, and
// `full` (whose attention grows with every token, O(n²) over the run) over
// 3,000: it never evicts, so a longer run exercises nothing new. Under qemu
// (KVEDGE_TEST_SCALE) a few hundred: there the point is the NEON/SVE paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "platform/alloc_counter.h"
#include "runtime/engine/generator.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr int kSteps = 4000;
#else
constexpr int kSteps = 20000;
#endif

struct Config {
  EvictionPolicy policy;
  KvFormat format;
};

class SteadyStateTest : public ::testing::TestWithParam<Config> {};

TEST_P(SteadyStateTest, DecodeStepsAllocateNothingAndStayInTheArena) {
  static const auto model = LoadModel(testing::SharedPath("models/stories260K.bin"));
  ASSERT_TRUE(model.ok()) << model.status().ToString();
  SessionOptions o;
  o.kv.policy = GetParam().policy;
  o.kv.key_format = GetParam().format;
  o.kv.value_format = GetParam().format;
  const bool full = GetParam().policy == EvictionPolicy::kFull;
  const int steps = testing::ScaledCount(full ? std::min(kSteps, 3000) : kSteps, 200);
  // `full` must hold the whole run; the evicting policies run at 160 tokens.
  o.kv.capacity = full ? steps + 1 : 160;
  auto session = Session::Create(**model, o);
  ASSERT_TRUE(session.ok()) << session.status().ToString();
  SamplerOptions so;
  so.temperature = 1.0f;
  so.seed = 7;
  auto sampler = Sampler::Create(so, 512);
  ASSERT_TRUE(sampler.ok());
  static const auto tokenizer = LoadTokenizer(**model, testing::SharedPath("models/tok512.bin"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status().ToString();
  Session& s = **session;
  // The steps run through the generation loop (runtime/engine/generator.h),
  // with stop strings whose prefixes keep text held. Its end-of-generation
  // predicate sees every sampled token before it is fed: it checks the logits
  // there and never ends the run.
  int nonfinite = 0;
  GeneratorOptions go;
  go.stop_strings = {"e never\x01", " the\x01"};  // held often, never complete
  go.is_end_of_generation = [&s, &nonfinite](int) {
    const float* lg = s.Logits();
    for (int v = 0; v < 512; ++v) nonfinite += !std::isfinite(lg[v]);
    return false;
  };
  auto generator = Generator::Create(**tokenizer, std::move(go));
  ASSERT_TRUE(generator.ok());
  int token = 1;
  ASSERT_TRUE(s.Feed(&token, 1).ok());
  const uint64_t arena = s.cache().Stats().arena_bytes;
  GenerationRequest request;
  request.prev_token = token;
  request.max_tokens = steps;
  uint64_t pieces = 0, over_arena = 0, arena_changed = 0;
  ScopedAllocationCounter allocations;
  const GenerationResult result = generator->Run(s, *sampler, request, [&](std::string_view) {
    if (++pieces % 997 == 0) {
      const KvCacheStats st = s.cache().Stats();
      arena_changed += st.arena_bytes != arena;
      over_arena += st.held_bytes > st.arena_bytes;
    }
    return true;
  });
  const int64_t allocated = allocations.count();
  ASSERT_TRUE(result.status.ok()) << result.status.ToString();
  EXPECT_EQ(result.tokens, steps);
  EXPECT_EQ(arena_changed, 0u);
  EXPECT_EQ(over_arena, 0u);
  EXPECT_EQ(allocated, 0);
  EXPECT_EQ(nonfinite, 0);
  const KvCacheStats st = s.cache().Stats();
  EXPECT_EQ(st.tokens_seen, static_cast<uint64_t>(steps) + 1);
  EXPECT_EQ(st.arena_bytes, arena);
}

std::vector<Config> AllConfigs() {
  std::vector<Config> out;
  for (EvictionPolicy p : {EvictionPolicy::kFull, EvictionPolicy::kWindow, EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
    for (KvFormat f : {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) out.push_back({p, f});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(AllPoliciesAndFormats, SteadyStateTest, ::testing::ValuesIn(AllConfigs()),
                         [](const ::testing::TestParamInfo<Config>& info) {
                           return std::string(EvictionPolicyName(info.param.policy)) + "_" +
                                  KvFormatName(info.param.format);
                         });

}  // namespace
}  // namespace kvedge
