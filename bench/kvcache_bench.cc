// Per-token cost of the KV arena for one layer of a realistic shape (32 query
// heads, 8 kv heads, head_dim 128): append (incl. sealing and eviction) plus
// attention, at cache sizes 512…32768 for every format and policy, and a long
// stream showing the cost stays flat once the budget is full.
#include <benchmark/benchmark.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kvcache/kv_cache.h"

namespace kvedge {
namespace {

// One layer of Llama-3-8B's attention: 32 query heads, 8 kv heads, head_dim 128.
const KvShape kShape = [] {
  KvShape s;
  s.n_layers = 1;
  s.n_heads = 32;
  s.n_kv_heads = 8;
  s.head_dim = s.rope_dim = 128;
  return s;
}();
constexpr int kPool = 64;  // distinct random tokens cycled through

struct Tokens {
  std::vector<float> k, v, q;  // [kPool][kv·D], [kPool][kv·D], [kPool][heads·D]
  Tokens() {
    std::mt19937 rng(1);
    std::normal_distribution<float> n(0.0f, 1.0f);
    const size_t kvd = static_cast<size_t>(kShape.n_kv_heads) * kShape.head_dim;
    const size_t qd = static_cast<size_t>(kShape.n_heads) * kShape.head_dim;
    k.resize(kPool * kvd);
    v.resize(kPool * kvd);
    q.resize(kPool * qd);
    for (auto& x : k) x = n(rng);
    for (auto& x : v) x = n(rng);
    for (auto& x : q) x = n(rng);
  }
};
const Tokens& Pool() {
  static const Tokens t;
  return t;
}

std::unique_ptr<KvCache> MakeCache(EvictionPolicy policy, KvFormat f, int capacity) {
  KvCacheOptions o;
  o.policy = policy;
  o.key_format = f;
  o.value_format = f;
  o.capacity = capacity;
  auto plan = PlanKvCache(kShape, o, 1);
  if (!plan.ok()) return nullptr;
  auto cache = KvCache::Create(*plan, nullptr);
  return cache.ok() ? std::move(cache).value() : nullptr;
}

// One token: append K/V to the layer, attend with every query head.
void Step(KvCache& cache, int64_t t, float* out) {
  const Tokens& p = Pool();
  const size_t i = static_cast<size_t>(t % kPool);
  const size_t kvd = static_cast<size_t>(kShape.n_kv_heads) * kShape.head_dim;
  const size_t qd = static_cast<size_t>(kShape.n_heads) * kShape.head_dim;
  cache.Append(0, p.k.data() + i * kvd, p.v.data() + i * kvd);
  cache.Attend(0, p.q.data() + i * qd, out, nullptr);
}

// The cache holds `size` tokens (full: exactly; evicting policies: at steady
// state with capacity `size`) and each iteration adds and attends one token.
void BM_AppendAttend(benchmark::State& state, EvictionPolicy policy, KvFormat f, int size) {
  const int iterations_max = 1 << 14;
  auto cache = MakeCache(policy, f, policy == EvictionPolicy::kFull ? size + iterations_max : size);
  if (!cache) {
    state.SkipWithError("plan failed");
    return;
  }
  std::vector<float> out(static_cast<size_t>(kShape.n_heads) * kShape.head_dim);
  int64_t t = 0;
  const int64_t warm = policy == EvictionPolicy::kFull ? size : 2 * static_cast<int64_t>(size);
  for (; t < warm; ++t) Step(*cache, t, out.data());
  for (auto _ : state) {
    Step(*cache, t++, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.counters["tokens_held"] = static_cast<double>(cache->Stats().tokens_held);
  state.counters["arena_MiB"] = static_cast<double>(cache->Stats().arena_bytes) / (1 << 20);
}

// A 4096-token int4 cache far into a stream: per-token cost at stream
// position `pos` (it must not grow with the position).
void BM_LongStream(benchmark::State& state, EvictionPolicy policy, int64_t pos) {
  auto cache = MakeCache(policy, KvFormat::kInt4, 4096);
  std::vector<float> out(static_cast<size_t>(kShape.n_heads) * kShape.head_dim);
  int64_t t = 0;
  for (; t < pos; ++t) Step(*cache, t, out.data());
  for (auto _ : state) {
    Step(*cache, t++, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations());
}

int RegisterAll() {
  for (EvictionPolicy p : {EvictionPolicy::kFull, EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
    for (KvFormat f : {KvFormat::kF32, KvFormat::kF16, KvFormat::kInt8, KvFormat::kInt4}) {
      for (int size : {512, 2048, 8192, 32768}) {
        const std::string name = std::string("AppendAttend/") + EvictionPolicyName(p) + "/" + KvFormatName(f) +
                                 "/ctx" + std::to_string(size);
        benchmark::RegisterBenchmark(name.c_str(), BM_AppendAttend, p, f, size)
            ->Unit(benchmark::kMicrosecond)
            ->Iterations(size >= 8192 ? 300 : 2000);
      }
    }
  }
  for (EvictionPolicy p : {EvictionPolicy::kSinks, EvictionPolicy::kH2O}) {
    for (int64_t pos : {4096, 16384, 65536}) {
      const std::string name = std::string("LongStream/") + EvictionPolicyName(p) + "/int4/cap4096/pos" +
                               std::to_string(pos);
      benchmark::RegisterBenchmark(name.c_str(), BM_LongStream, p, pos)->Unit(benchmark::kMicrosecond)->Iterations(2000);
    }
  }
  return 0;
}
const int kRegistered = RegisterAll();

}  // namespace
}  // namespace kvedge
