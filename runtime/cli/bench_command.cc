// `kvedge bench`: fill the cache to a depth (batched prefill), then decode N
// tokens; report prefill and decode speed, median ms/token, KV bytes, RSS.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "platform/clock.h"
#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

struct BenchOptions {
  ModelFlags model;
  KvFlags kv;
  int depth = 512;
  int n_decode = 32;
  std::string fill = "model";
  bool json = false;
};

int RunBench(const BenchOptions& opt) {
  if (opt.depth < 0 || opt.n_decode < 1) {
    return ReportError("bench", InvalidArgument("--depth must be ≥ 0 and -n ≥ 1"));
  }
  auto loaded = LoadModelAndTokenizer(opt.model, /*need_tokenizer=*/false);
  if (!loaded.ok()) return ReportError("bench", loaded.status());
  const ModelWeights& model = *loaded->weights;
  KvFlags kv = opt.kv;
  if (kv.capacity == 0 && kv.budget.empty()) kv.capacity = opt.depth + opt.n_decode + 1;
  auto so = MakeSessionOptions(kv, model.config);
  if (!so.ok()) return ReportError("bench", so.status());
  so->max_batch = 64;
  auto session = Session::Create(model, *so);
  if (!session.ok()) return ReportError("bench", session.status());
  Session& s = **session;

  // Depth: `model` prefills depth + 1 random token ids (seeded, BOS first)
  // through the model; `synthetic` appends all but the last 64 as synthetic
  // keys/values and prefills only those 64 (the prefill speed reported).
  const size_t total = static_cast<size_t>(opt.depth) + 1;
  const size_t synthetic = opt.fill == "synthetic" && total > 64 ? total - 64 : 0;
  Status st = s.FillSynthetic(synthetic, 42);
  if (!st.ok()) return ReportError("bench", st);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int> pick(3, model.config.vocab_size - 1);
  std::vector<int> fill(total - synthetic);
  for (int& id : fill) id = pick(rng);
  if (synthetic == 0) fill[0] = 1;
  const double t0 = NowSeconds();
  st = s.Feed(fill.data(), fill.size());
  const double prefill_s = NowSeconds() - t0;
  if (!st.ok()) return ReportError("bench", st);

  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(opt.n_decode));
  const double d0 = NowSeconds();
  for (int i = 0; i < opt.n_decode; ++i) {
    const float* lg = s.Logits();
    const int next = static_cast<int>(std::max_element(lg, lg + s.vocab_size()) - lg);
    const double a = NowSeconds();
    st = s.Feed(&next, 1);
    step_ms.push_back((NowSeconds() - a) * 1e3);
    if (!st.ok()) return ReportError("bench", st);
  }
  const double decode_s = NowSeconds() - d0;
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const KvCacheStats cs = s.cache().Stats();
  const KvCachePlan& plan = s.cache().plan();
  const double prefill_tps = TokensPerSecond(static_cast<int64_t>(fill.size()), prefill_s);
  const double decode_tps = TokensPerSecond(opt.n_decode, decode_s);
  if (opt.json) {
    nlohmann::json j;
    j["model"] = opt.model.model;
    j["weight_bytes"] = model.weight_bytes;
    j["threads"] = so->threads;
    j["policy"] = EvictionPolicyName(plan.policy);
    j["key_format"] = KvFormatName(plan.key_format);
    j["value_format"] = KvFormatName(plan.value_format);
    j["capacity"] = plan.capacity;
    j["depth"] = opt.depth;
    j["n_decode"] = opt.n_decode;
    j["fill"] = opt.fill;
    j["prefill_tokens"] = fill.size();
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;
    j["decode_ms_per_token"] = median;
    j["decode_ms_min"] = sorted.front();
    j["decode_ms_max"] = sorted.back();
    j["kv_bytes"] = cs.held_bytes;
    j["kv_arena_bytes"] = cs.arena_bytes;
    j["kv_bytes_f16_full"] = cs.f16_full_bytes;
    j["tokens_held"] = cs.tokens_held;
    j["peak_rss_bytes"] = PeakRssBytes();
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model %s (%s of weights), %d threads\n", opt.model.model.c_str(), FormatBytes(model.weight_bytes).c_str(),
              so->threads);
  std::printf("%s\n", plan.Describe().c_str());
  if (synthetic > 0) std::printf("synthetic fill %zu tokens (keys/values only)\n", synthetic);
  std::printf("prefill %zu tokens: %.1f tokens/s\n", fill.size(), prefill_tps);
  std::printf("decode  %d tokens at depth %d: %.1f tokens/s, median %.2f ms/token (min %.2f, max %.2f)\n",
              opt.n_decode, opt.depth, decode_tps, median, sorted.front(), sorted.back());
  std::printf("kv held %s (arena %s), tokens held %llu; peak RSS %s\n", FormatBytes(cs.held_bytes).c_str(),
              FormatBytes(cs.arena_bytes).c_str(), static_cast<unsigned long long>(cs.tokens_held),
              FormatBytes(PeakRssBytes()).c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterBenchCommand(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Decode speed at a cache depth (like llama-bench -d)");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("-d,--depth", opt->depth, "Tokens in the cache before decoding (default 512)");
  sub->add_option("-n,--n-decode", opt->n_decode, "Tokens to decode (default 32)");
  sub->add_option("--fill", opt->fill,
                  "How the depth is reached: model (prefill every token, default) or synthetic (seeded keys and "
                  "values straight into the cache, then a real 64-token prefill; decode times the same, much "
                  "faster to set up at large depths)")
      ->check(CLI::IsMember({"model", "synthetic"}));
  sub->add_flag("--json", opt->json, "Print one JSON object");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunBench(*opt); };
}

}  // namespace kvedge::cli
