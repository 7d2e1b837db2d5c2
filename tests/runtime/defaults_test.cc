// One set of defaults: DefaultConfig follows the measured rule, and the CLI's
// flags and the C API's config build the same cache for the same size.
#include "runtime/engine/defaults.h"

#include <gtest/gtest.h>

#include <string>

#include "kvedge.h"
#include "runtime/cli/common.h"
#include "runtime/engine/session.h"
#include "runtime/model/model_loader.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

const ModelWeights& Stories() {
  static const auto model = LoadModel(testing::SharedPath("models/stories260K.bin"));
  EXPECT_TRUE(model.ok()) << model.status().ToString();
  return **model;
}

StatusOr<KvCachePlan> PlanOf(const ModelConfig& c, const KvRequest& r, int threads) {
  return PlanKvCache(KvShapeOf(c), DefaultConfig(c, r, threads), threads);
}

TEST(DefaultConfigTest, Int8WhenTheBudgetHoldsTheContextElseInt4PreRope) {
  const ModelConfig& c = Stories().config;  // context 512
  KvRequest r;
  r.budget_bytes = 4u << 20;
  auto big = PlanOf(c, r, 1);
  ASSERT_TRUE(big.ok()) << big.status().ToString();
  EXPECT_EQ(big->key_format, KvFormat::kInt8);
  EXPECT_EQ(big->value_format, KvFormat::kInt8);
  EXPECT_EQ(big->capacity, c.context_length) << "spare bytes never buy positions past the context";
  EXPECT_EQ(big->policy, EvictionPolicy::kSinks);
  EXPECT_EQ(big->sinks, 2);

  r.budget_bytes = 100u << 10;  // int8 at 512 tokens needs more
  auto small = PlanOf(c, r, 1);
  ASSERT_TRUE(small.ok()) << small.status().ToString();
  EXPECT_EQ(small->key_format, KvFormat::kInt4);
  EXPECT_EQ(small->value_format, KvFormat::kInt4);
  EXPECT_EQ(small->key_rope, KeyRope::kPre);
  EXPECT_LE(small->arena_bytes, r.budget_bytes);

  r.key_rope = KeyRope::kInBlock;  // a given rotation stays
  auto in_block = PlanOf(c, r, 1);
  ASSERT_TRUE(in_block.ok());
  EXPECT_EQ(in_block->key_rope, KeyRope::kInBlock);
}

TEST(DefaultConfigTest, WindowBelow128TokensSinksFrom128) {
  const ModelConfig& c = Stories().config;
  for (int capacity : {64, 127, 128, 300}) {
    KvRequest r;
    r.capacity = capacity;
    auto plan = PlanOf(c, r, 1);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    EXPECT_EQ(plan->capacity, capacity);
    EXPECT_EQ(plan->key_format, KvFormat::kInt8) << "a token capacity keeps int8";
    EXPECT_EQ(plan->policy, capacity < 128 ? EvictionPolicy::kWindow : EvictionPolicy::kSinks) << capacity;
    EXPECT_EQ(plan->sinks, capacity < 128 ? 0 : 2) << capacity;
  }
  KvRequest none;  // no size: the trained context
  auto plan = PlanOf(c, none, 1);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->capacity, c.context_length);
}

TEST(DefaultConfigTest, GivenChoicesStay) {
  const ModelConfig& c = Stories().config;
  KvRequest r;
  r.budget_bytes = 100u << 10;
  r.policy = EvictionPolicy::kH2O;
  r.key_format = KvFormat::kInt8;
  auto plan = PlanOf(c, r, 1);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->policy, EvictionPolicy::kH2O);
  EXPECT_EQ(plan->key_format, KvFormat::kInt8);
  EXPECT_EQ(plan->value_format, KvFormat::kInt8) << "an unset value format is the default, int8";
  EXPECT_EQ(plan->sinks, 4) << "a given policy keeps its own sink default";
}

// The same size through `kvedge` flags and through kvedge_session_create:
// the same cache (capacity, arena bytes, everything reserved).
TEST(DefaultConfigTest, CliAndCApiBuildTheSameCache) {
  const ModelWeights& model = Stories();
  kvedge_model* cmodel = nullptr;
  ASSERT_EQ(kvedge_model_load(testing::SharedPath("models/stories260K.bin").c_str(),
                              testing::SharedPath("models/tok512.bin").c_str(), &cmodel),
            KVEDGE_OK)
      << kvedge_last_error();
  struct Size {
    const char* budget;  // CLI spelling, or nullptr
    int capacity;
  };
  const Size sizes[] = {{"50KiB", 0},  {"64KiB", 0}, {"100KiB", 0}, {"200KiB", 0},
                        {"1MiB", 0},   {nullptr, 64}, {nullptr, 200}, {nullptr, 0}};
  for (const Size& size : sizes) {
    for (int threads : {1, 2}) {
      const std::string label = std::string(size.budget ? size.budget : "-") + " c" + std::to_string(size.capacity) +
                                " t" + std::to_string(threads);
      cli::KvFlags flags;
      if (size.budget != nullptr) flags.budget = size.budget;
      flags.capacity = size.capacity;
      flags.threads = threads;
      auto options = cli::MakeSessionOptions(flags, model.config);
      ASSERT_TRUE(options.ok()) << label << ": " << options.status().ToString();
      auto session = Session::Create(model, *options);
      ASSERT_TRUE(session.ok()) << label << ": " << session.status().ToString();

      kvedge_session_config config;
      kvedge_session_config_init(&config);
      if (size.budget != nullptr) config.budget_bytes = *ParseByteSize(size.budget);
      config.capacity_tokens = size.capacity;
      config.threads = threads;
      kvedge_session* csession = nullptr;
      ASSERT_EQ(kvedge_session_create(cmodel, &config, &csession), KVEDGE_OK) << label << ": " << kvedge_last_error();
      kvedge_stats stats;
      ASSERT_EQ(kvedge_session_stats(csession, &stats), KVEDGE_OK);
      const KvCachePlan& plan = (*session)->cache().plan();
      EXPECT_EQ(stats.capacity_tokens, static_cast<uint64_t>(plan.capacity)) << label << ": " << plan.Describe();
      EXPECT_EQ(stats.arena_bytes, plan.arena_bytes) << label << ": " << plan.Describe();
      EXPECT_EQ(stats.reserved_bytes, (*session)->reserved_bytes()) << label;
      kvedge_session_free(csession);
    }
  }
  kvedge_model_free(cmodel);
}

}  // namespace
}  // namespace kvedge
