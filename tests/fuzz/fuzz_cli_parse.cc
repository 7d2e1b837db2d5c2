// libFuzzer target for the CLI's flag parsing: byte sizes, formats, policies,
// and KV flags all the way to a cache plan (absurd counts, budgets, formats).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kvcache/kv_cache_plan.h"
#include "platform/memory.h"
#include "runtime/cli/common.h"
#include "simd/kv_format.h"

namespace {

// Splits the input into NUL-separated fields; missing fields are empty.
std::vector<std::string> Fields(const uint8_t* data, size_t size, size_t n) {
  std::vector<std::string> out(n);
  size_t f = 0;
  for (size_t i = 0; i < size && f < n; ++i) {
    if (data[i] == 0) {
      ++f;
    } else {
      out[f].push_back(static_cast<char>(data[i]));
    }
  }
  return out;
}

// A token count in [−100, 199900) from a field, −1 (unset) when empty.
int ToInt(const std::string& s) {
  uint32_t v = 0;
  for (char c : s) v = v * 31u + static_cast<unsigned char>(c);
  return s.empty() ? -1 : static_cast<int>(v % 200000u) - 100;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto f = Fields(data, size, 12);
  (void)kvedge::ParseByteSize(f[0]);
  kvedge::KvFormat fmt;
  (void)kvedge::ParseKvFormat(f[1], &fmt);
  kvedge::EvictionPolicy policy;
  (void)kvedge::ParseEvictionPolicy(f[2], &policy);

  kvedge::cli::KvFlags flags;
  flags.budget = f[0];
  flags.kv = f[1];
  flags.policy = f[2];
  flags.kv_keys = f[3];
  flags.kv_values = f[4];
  flags.positions = f[5].empty() ? "in-cache" : f[5];
  flags.capacity = ToInt(f[6]);
  flags.sinks = ToInt(f[7]);
  flags.window = ToInt(f[8]);
  flags.heavy = ToInt(f[9]);
  flags.threads = ToInt(f[10]) % 300;
  if (!f[11].empty()) flags.h2o_decay = static_cast<float>(ToInt(f[11])) / 1000.0f;
  kvedge::ModelConfig config;
  config.n_layers = 2;
  config.n_heads = 4;
  config.n_kv_heads = 2;
  config.head_dim = 16;
  config.rope_dim = 16;
  config.context_length = 128;
  auto options = kvedge::cli::MakeSessionOptions(flags, config);
  if (!options.ok()) return 0;
  // Budgets past 64 MiB are valid but would make each run slow to plan.
  if (options->kv.budget_bytes > (64u << 20) || options->kv.capacity > (1 << 20)) return 0;
  auto plan = kvedge::PlanKvCache(kvedge::KvShapeOf(config), options->kv, options->threads);
  if (plan.ok() && options->kv.budget_bytes > 0 && plan->arena_bytes > options->kv.budget_bytes) __builtin_trap();
  return 0;
}
