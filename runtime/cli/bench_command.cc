// `kvedge bench`: fill the cache to a depth (batched prefill), then decode N
// tokens; report prefill and decode speed, median ms/token, KV bytes, RSS.
// With --streams S, S sessions (each its own cache, filled alike with its own
// tokens) decode together through one BatchDecoder: one pass over the
// weights per step yields S tokens; the aggregate tokens/s is reported.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "platform/clock.h"
#include "platform/memory.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

struct BenchOptions {
  ModelFlags model;
  KvFlags kv;
  int depth = 512;
  int n_decode = 32;
  int streams = 1;
  std::string fill = "model";
  bool json = false;
};

int RunBench(const BenchOptions& opt) {
  if (opt.depth < 0 || opt.n_decode < 1) {
    return ReportError("bench", InvalidArgument("--depth must be ≥ 0 and -n ≥ 1"));
  }
  if (opt.streams < 1 || opt.streams > 4096) {
    return ReportError("bench", InvalidArgument("--streams must be 1 to 4096"));
  }
  auto loaded = LoadModelAndTokenizer(opt.model, /*need_tokenizer=*/false);
  if (!loaded.ok()) return ReportError("bench", loaded.status());
  const ModelWeights& model = *loaded->weights;
  KvFlags kv = opt.kv;
  if (kv.capacity == 0 && kv.budget.empty()) kv.capacity = opt.depth + opt.n_decode + 1;
  auto so = MakeSessionOptions(kv, model.config);
  if (!so.ok()) return ReportError("bench", so.status());
  so->max_batch = 64;
  const size_t n_streams = static_cast<size_t>(opt.streams);
  std::vector<std::unique_ptr<Session>> sessions;
  for (size_t i = 0; i < n_streams; ++i) {
    auto session = Session::Create(model, *so);
    if (!session.ok()) return ReportError("bench", session.status());
    sessions.push_back(std::move(session).value());
  }
  std::unique_ptr<BatchDecoder> decoder;
  if (n_streams > 1) {
    auto d = BatchDecoder::Create(model, opt.streams, so->threads);
    if (!d.ok()) return ReportError("bench", d.status());
    decoder = std::move(d).value();
  }

  // Depth: `model` prefills depth + 1 random token ids (seeded, BOS first)
  // through the model; `synthetic` appends all but the last 64 as synthetic
  // keys/values and prefills only those 64 (the prefill speed reported).
  // `keys` appends all depth + 1 as synthetic keys/values and prefills
  // nothing (decode only; the first step feeds BOS). Stream i draws its ids
  // from seed 42 + i.
  const size_t total = static_cast<size_t>(opt.depth) + 1;
  const size_t synthetic = opt.fill == "keys"                      ? total
                           : opt.fill == "synthetic" && total > 64 ? total - 64
                                                                   : 0;
  std::vector<int> fill(total - synthetic);
  double prefill_s = 0;
  for (size_t i = 0; i < n_streams; ++i) {
    Session& s = *sessions[i];
    Status st = s.FillSynthetic(synthetic, 42);
    if (!st.ok()) return ReportError("bench", st);
    std::mt19937 rng(static_cast<uint32_t>(42 + i));
    std::uniform_int_distribution<int> pick(3, model.config.vocab_size - 1);
    for (int& id : fill) id = pick(rng);
    if (synthetic == 0) fill[0] = 1;
    if (fill.empty()) continue;
    const double t0 = NowSeconds();
    st = s.Feed(fill.data(), fill.size());
    prefill_s += NowSeconds() - t0;
    if (!st.ok()) return ReportError("bench", st);
  }

  // One step: every stream's greedy next token, fed (one session) or
  // stepped together (BatchDecoder).
  std::vector<Session*> rows;
  for (const auto& s : sessions) rows.push_back(s.get());
  std::vector<int> next(n_streams);
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(opt.n_decode));
  const double d0 = NowSeconds();
  const std::clock_t c0 = std::clock();  // process CPU time: on a shared machine, the work without the waits
  for (int i = 0; i < opt.n_decode; ++i) {
    for (size_t r = 0; r < n_streams; ++r) {
      const float* lg = rows[r]->Logits();
      next[r] = i == 0 && fill.empty() ? 1 : static_cast<int>(std::max_element(lg, lg + rows[r]->vocab_size()) - lg);
    }
    const double a = NowSeconds();
    const Status st = decoder != nullptr ? decoder->Step(rows.data(), next.data(), n_streams)
                                         : rows[0]->Feed(next.data(), 1);
    step_ms.push_back((NowSeconds() - a) * 1e3);
    if (!st.ok()) return ReportError("bench", st);
  }
  const double decode_s = NowSeconds() - d0;
  const double decode_cpu_s = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const Session& s = *sessions[0];
  const KvCacheStats cs = s.cache().Stats();
  const KvCachePlan& plan = s.cache().plan();
  const double prefill_tokens = static_cast<double>(fill.size() * n_streams);
  const double prefill_tps = prefill_s > 0 ? prefill_tokens / prefill_s : 0.0;
  const double decode_tps = decode_s > 0 ? static_cast<double>(opt.n_decode) * opt.streams / decode_s : 0.0;
  if (opt.json) {
    nlohmann::json j;
    j["model"] = opt.model.model;
    j["weight_bytes"] = model.weight_bytes;
    j["threads"] = so->threads;
    j["streams"] = opt.streams;
    j["policy"] = EvictionPolicyName(plan.policy);
    j["key_format"] = KvFormatName(plan.key_format);
    j["value_format"] = KvFormatName(plan.value_format);
    j["capacity"] = plan.capacity;
    j["depth"] = opt.depth;
    j["n_decode"] = opt.n_decode;
    j["fill"] = opt.fill;
    j["prefill_tokens"] = fill.size();  // per stream
    j["prefill_tokens_per_s"] = prefill_tps;
    j["decode_tokens_per_s"] = decode_tps;  // all streams together
    j["decode_tokens_per_s_per_stream"] = decode_tps / opt.streams;
    j["decode_ms_per_step"] = median;  // median step: one token of every stream
    j["decode_ms_per_token"] = median / opt.streams;
    j["decode_cpu_ms_per_step"] = decode_cpu_s * 1e3 / opt.n_decode;  // mean, all threads' CPU time
    j["decode_ms_min"] = sorted.front();
    j["decode_ms_max"] = sorted.back();
    j["kv_bytes"] = cs.held_bytes;  // per stream (all alike)
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
  if (!fill.empty()) {
    std::printf("prefill %zu tokens%s: %.1f tokens/s\n", fill.size(), n_streams > 1 ? " per stream" : "",
                prefill_tps);
  }
  if (n_streams > 1) {
    std::printf("decode  %d steps of %d streams at depth %d: %.1f tokens/s (%.1f per stream), median %.2f ms/step "
                "(min %.2f, max %.2f)\n",
                opt.n_decode, opt.streams, opt.depth, decode_tps, decode_tps / opt.streams, median, sorted.front(),
                sorted.back());
  } else {
    std::printf("decode  %d tokens at depth %d: %.1f tokens/s, median %.2f ms/token (min %.2f, max %.2f)\n",
                opt.n_decode, opt.depth, decode_tps, median, sorted.front(), sorted.back());
  }
  std::printf("kv held %s (arena %s)%s, tokens held %llu; peak RSS %s\n", FormatBytes(cs.held_bytes).c_str(),
              FormatBytes(cs.arena_bytes).c_str(), n_streams > 1 ? " per stream" : "",
              static_cast<unsigned long long>(cs.tokens_held), FormatBytes(PeakRssBytes()).c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterBenchCommand(CLI::App& app) {
  auto opt = std::make_shared<BenchOptions>();
  CLI::App* sub = app.add_subcommand("bench", "Decode speed at a cache depth (like llama-bench -d)");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("-d,--depth", opt->depth, "Tokens in the cache before decoding (default 512)");
  sub->add_option("-n,--n-decode", opt->n_decode, "Tokens to decode (default 32; per stream)");
  sub->add_option("--streams", opt->streams,
                  "Sequences decoding together, each with its own cache filled to the depth: one pass over the "
                  "weights per step (batched decode); reports the aggregate tokens/s (default 1)");
  sub->add_option("--fill", opt->fill,
                  "How the depth is reached: model (prefill every token, default) or synthetic (seeded keys and "
                  "values straight into the cache, then a real 64-token prefill; decode times the same, much "
                  "faster to set up at large depths), or keys (seeded keys and values for the whole depth, no "
                  "prefill: decode only, the first step feeds BOS)")
      ->check(CLI::IsMember({"model", "synthetic", "keys"}));
  sub->add_flag("--json", opt->json, "Print one JSON object");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunBench(*opt); };
}

}  // namespace kvedge::cli
