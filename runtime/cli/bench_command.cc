// `kvedge bench`: fill the cache to a depth (batched prefill), optionally
// prefill a timed prompt on top of it (time to first token), then decode N
// tokens; report prefill and decode speed, median ms/token, KV bytes, RSS.
// With --streams S, S sessions (each its own cache, filled alike with its own
// tokens) decode together through one BatchDecoder: one pass over the
// weights per step yields S tokens; the aggregate tokens/s is reported.
#include <nlohmann/json.hpp>

#include <time.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "platform/clock.h"
#include "platform/memory.h"
#include "platform/thread_arena.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

// CPU seconds of the whole process (every thread). On a shared, loaded
// machine wall time mostly measures the other tenants; CPU time per token is
// what the code costs (with 1 thread, the same as wall time on an idle core).
double ProcessCpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// The greedy next token of a session's last logits.
int Greedy(const Session& s) {
  const float* lg = s.Logits();
  return static_cast<int>(std::max_element(lg, lg + s.vocab_size()) - lg);
}

struct BenchOptions {
  ModelFlags model;
  KvFlags kv;
  int depth = 512;
  int n_decode = 32;
  int streams = 1;
  int prompt = 0;  // tokens of the timed prompt on top of the depth (0: none)
  std::string fill = "model";
  bool bound = false;
  bool json = false;
};

// The bytes one decode step reads of the weights, in the order it reads
// them: every layer's matrices, then the output matrix (the token embedding
// only as that: its lookup reads one row). Norms and biases are left out
// (≤ 0.1% of a model).
std::vector<std::pair<const uint8_t*, size_t>> StepWeightRegions(const ModelWeights& w) {
  std::vector<std::pair<const uint8_t*, size_t>> r;
  const auto add = [&r](const MatrixView& m) {
    if (m.data != nullptr) r.emplace_back(static_cast<const uint8_t*>(m.data), MatrixBytes(m.type, m.layout, m.rows, m.cols));
  };
  for (const LayerWeights& l : w.layers) {
    for (const MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3, &l.w2}) add(*m);
  }
  add(w.output);
  return r;
}

// One streaming read (StreamRead) of the regions, each split across the
// arena's threads as the matmuls split rows. sums: [threads] word sums.
void ReadWeights(const std::vector<std::pair<const uint8_t*, size_t>>& regions, ThreadArena& arena,
                 std::vector<uint64_t>& sums) {
  for (const auto& [p, bytes] : regions) {
    arena.ParallelFor(bytes / 64, [&, p = p](size_t begin, size_t end, int thread) {
      sums[static_cast<size_t>(thread)] += StreamRead(p + 64 * begin, 64 * (end - begin));
    });
  }
}

int RunBench(const BenchOptions& opt) {
  if (opt.depth < 0 || opt.n_decode < 1 || opt.prompt < 0) {
    return ReportError("bench", InvalidArgument("--depth and --prompt must be ≥ 0 and -n ≥ 1"));
  }
  if (opt.streams < 1 || opt.streams > 4096) {
    return ReportError("bench", InvalidArgument("--streams must be 1 to 4096"));
  }
  if (opt.prompt > 0 && opt.streams > 1) {
    return ReportError("bench", InvalidArgument("--prompt times one stream's first token: use it with --streams 1"));
  }
  const double load_c0 = ProcessCpuSeconds();
  const double load_t0 = NowSeconds();
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/false);
  if (!loaded.ok()) return ReportError("bench", loaded.status());
  const double load_s = NowSeconds() - load_t0;  // map, parse, repack (interleaved layouts)
  const double load_cpu_s = ProcessCpuSeconds() - load_c0;
  const ModelWeights& model = *loaded->weights;
  KvFlags kv = opt.kv;
  if (kv.capacity == 0 && kv.budget.empty()) kv.capacity = opt.depth + opt.prompt + opt.n_decode + 1;
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

  // Depth without --prompt: `model` prefills depth + 1 random token ids
  // (seeded, BOS first) through the model; `synthetic` appends all but the
  // last 64 as synthetic keys/values and prefills only those 64 (the prefill
  // speed reported); `keys` appends all depth + 1 as synthetic keys/values
  // and prefills nothing (decode only; the first step feeds BOS). With
  // --prompt N the depth is reached untimed (`model`: depth tokens
  // prefilled, otherwise depth synthetic tokens) and the N prompt tokens are
  // the timed prefill; time to first token is that prefill plus picking the
  // first token from its logits. Stream i draws its ids from seed 42 + i.
  const size_t depth = static_cast<size_t>(opt.depth);
  const bool synthetic_fill = opt.fill != "model";
  size_t synthetic = 0;
  size_t timed = 0;  // tokens of the timed prefill, per stream
  if (opt.prompt > 0) {
    synthetic = synthetic_fill ? depth : 0;
    timed = static_cast<size_t>(opt.prompt);
  } else {
    const size_t total = depth + 1;
    synthetic = opt.fill == "keys" ? total : opt.fill == "synthetic" && total > 64 ? total - 64 : 0;
    timed = total - synthetic;
  }
  std::vector<int> untimed(opt.prompt > 0 && !synthetic_fill ? depth : 0);
  std::vector<int> fill(timed);
  double prefill_s = 0;
  double prefill_cpu_s = 0;
  double ttft_s = 0;
  std::vector<int> first(n_streams, 1);  // each stream's first decoded token (BOS after a `keys` fill)
  for (size_t i = 0; i < n_streams; ++i) {
    Session& s = *sessions[i];
    Status st = s.FillSynthetic(synthetic, 42);
    if (!st.ok()) return ReportError("bench", st);
    std::mt19937 rng(static_cast<uint32_t>(42 + i));
    std::uniform_int_distribution<int> pick(3, model.config.vocab_size - 1);
    for (int& id : untimed) id = pick(rng);
    if (!untimed.empty()) untimed[0] = 1;
    if (!untimed.empty()) st = s.Feed(untimed.data(), untimed.size());
    if (!st.ok()) return ReportError("bench", st);
    for (int& id : fill) id = pick(rng);
    if (!fill.empty() && synthetic == 0 && untimed.empty()) fill[0] = 1;
    if (fill.empty()) continue;
    const double c0 = ProcessCpuSeconds();
    const double t0 = NowSeconds();
    st = s.Feed(fill.data(), fill.size());
    prefill_s += NowSeconds() - t0;
    if (!st.ok()) return ReportError("bench", st);
    first[i] = Greedy(s);
    ttft_s = NowSeconds() - t0;  // --prompt runs one stream: its time to first token
    prefill_cpu_s += ProcessCpuSeconds() - c0;
  }

  // One step: every stream's greedy next token, fed (one session) or
  // stepped together (BatchDecoder).
  std::vector<Session*> rows;
  for (const auto& s : sessions) rows.push_back(s.get());
  std::vector<int> next(n_streams);
  std::vector<double> step_ms;
  step_ms.reserve(static_cast<size_t>(opt.n_decode));
  // --bound: before each step, one streaming read of the weights it reads,
  // on as many threads: that step's bandwidth bound on this machine at this
  // moment (shared machines' DRAM rates move by tens of % within minutes).
  std::vector<double> read_ms, ratio;
  std::vector<std::pair<const uint8_t*, size_t>> regions;
  std::unique_ptr<ThreadArena> read_arena;
  std::vector<uint64_t> read_sums(static_cast<size_t>(so->threads), 0);
  uint64_t read_bytes = 0;
  if (opt.bound) {
    read_ms.reserve(static_cast<size_t>(opt.n_decode));
    ratio.reserve(static_cast<size_t>(opt.n_decode));
    regions = StepWeightRegions(model);
    for (const auto& r : regions) read_bytes += r.second;
    auto a = ThreadArena::Create(so->threads);
    if (!a.ok()) return ReportError("bench", a.status());
    read_arena = std::move(a).value();
  }
  double read_s = 0, read_cpu_s = 0;
  const double d0 = NowSeconds();
  const double dc0 = ProcessCpuSeconds();  // process CPU time: on a shared machine, the work without the waits
  for (int i = 0; i < opt.n_decode; ++i) {
    for (size_t r = 0; r < n_streams; ++r) next[r] = i == 0 ? first[r] : Greedy(*rows[r]);
    if (opt.bound) {
      const double c = ProcessCpuSeconds();
      const double t = NowSeconds();
      ReadWeights(regions, *read_arena, read_sums);
      read_ms.push_back((NowSeconds() - t) * 1e3);
      read_s += read_ms.back() * 1e-3;
      read_cpu_s += ProcessCpuSeconds() - c;
    }
    const double a = NowSeconds();
    const Status st = decoder != nullptr ? decoder->Step(rows.data(), next.data(), n_streams)
                                         : rows[0]->Feed(next.data(), 1);
    step_ms.push_back((NowSeconds() - a) * 1e3);
    if (!st.ok()) return ReportError("bench", st);
    if (opt.bound) ratio.push_back(step_ms.back() / read_ms.back());
  }
  const double decode_s = NowSeconds() - d0 - read_s;
  const double decode_cpu_s = ProcessCpuSeconds() - dc0 - read_cpu_s;
  static volatile uint64_t read_total = 0;  // the sums are the reads' only output: keep it
  for (uint64_t x : read_sums) read_total = read_total + x;
  const auto median_of = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::vector<double> sorted = step_ms;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  const Session& s = *sessions[0];
  const KvCacheStats cs = s.cache().Stats();
  const KvCachePlan& plan = s.cache().plan();
  const double prefill_tps = TokensPerSecond(static_cast<int64_t>(fill.size() * n_streams), prefill_s);
  const double decode_tps = TokensPerSecond(static_cast<int64_t>(opt.n_decode) * opt.streams, decode_s);
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
    j["prompt"] = opt.prompt;
    j["load_s"] = load_s;
    j["load_cpu_s"] = load_cpu_s;
    j["prefill_tokens"] = fill.size();  // per stream
    j["prefill_tokens_per_s"] = prefill_tps;
    j["prefill_cpu_s"] = prefill_cpu_s;
    if (opt.prompt > 0) j["ttft_s"] = ttft_s;
    j["decode_tokens_per_s"] = decode_tps;  // all streams together
    j["decode_tokens_per_s_per_stream"] = decode_tps / opt.streams;
    j["decode_ms_per_step"] = median;  // median step: one token of every stream
    j["decode_ms_per_token"] = median / opt.streams;
    j["decode_cpu_ms_per_step"] = decode_cpu_s * 1e3 / opt.n_decode;  // mean, all threads' CPU time
    j["decode_cpu_ms_per_token"] = decode_cpu_s * 1e3 / opt.n_decode / opt.streams;
    j["decode_ms_min"] = sorted.front();
    j["decode_ms_max"] = sorted.back();
    j["kv_bytes"] = cs.held_bytes;  // per stream (all alike)
    j["kv_arena_bytes"] = cs.arena_bytes;
    j["kv_bytes_f16_full"] = cs.f16_full_bytes;
    j["tokens_held"] = cs.tokens_held;
    j["peak_rss_bytes"] = PeakRssBytes();
    if (opt.bound) {
      j["bound_read_bytes"] = read_bytes;
      j["bound_ms_per_step"] = median_of(read_ms);  // median of the paired reads
      j["bound_read_gb_per_s"] = static_cast<double>(read_bytes) / median_of(read_ms) * 1e-6;
      j["bound_ratio"] = median_of(ratio);  // median over steps of step ÷ its read
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("model %s (%s of weights), %d threads\n", opt.model.model.c_str(), FormatBytes(model.weight_bytes).c_str(),
              so->threads);
  std::printf("%s\n", plan.Describe().c_str());
  if (synthetic > 0) std::printf("synthetic fill %zu tokens (keys/values only)\n", synthetic);
  if (opt.prompt > 0) {
    std::printf("prompt %zu tokens on depth %d: %.1f tokens/s, time to first token %.3f s\n", fill.size(), opt.depth,
                prefill_tps, ttft_s);
  } else if (!fill.empty()) {
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
  if (opt.bound) {
    std::printf("bound   reading the step's %s of weights: median %.2f ms (%.1f GB/s); step ÷ read, median of "
                "pairs: %.2fx\n",
                FormatBytes(read_bytes).c_str(), median_of(read_ms),
                static_cast<double>(read_bytes) / median_of(read_ms) * 1e-6, median_of(ratio));
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
  sub->add_option("--prompt", opt->prompt,
                  "Prefill this many random tokens on top of --depth and time them (prefill tokens/s of the "
                  "prompt and time to first token, ttft_s); 0 (default): the depth's own prefill is timed");
  sub->add_option("--fill", opt->fill,
                  "How the depth is reached: model (prefill every token, default) or synthetic (seeded keys and "
                  "values straight into the cache, then a real 64-token prefill; decode times the same, much "
                  "faster to set up at large depths), or keys (seeded keys and values for the whole depth, no "
                  "prefill: decode only, the first step feeds BOS)")
      ->check(CLI::IsMember({"model", "synthetic", "keys"}));
  sub->add_flag("--bound", opt->bound,
                "Before each decode step, time a plain streaming read of the weight bytes the step reads (the "
                "token embedding excluded), on as many threads: the step's bandwidth bound, measured beside it; "
                "reports its median (bound_ms_per_step, bound_read_gb_per_s) and the median of step ÷ read "
                "(bound_ratio). Decode times exclude the reads");
  sub->add_flag("--json", opt->json, "Print one JSON object");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunBench(*opt); };
}

}  // namespace kvedge::cli
