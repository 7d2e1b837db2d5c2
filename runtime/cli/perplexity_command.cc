// `kvedge perplexity`: stream a text through the chosen cache (no resets, far
// past the trained context if the text is long) and report perplexity; with
// --compare-full, KL divergence and top-1 agreement against an f32 full-cache
// twin run in lockstep.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

#include "platform/clock.h"
#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

struct PerplexityOptions {
  ModelFlags model;
  KvFlags kv;
  std::string text_file;
  int64_t max_tokens = 0;
  bool compare_full = false;
  bool json = false;
  int bucket = 1024;
};

// log Σ exp(logits) in double, and the argmax.
double LogSumExp(const float* lg, int n, int* argmax) {
  int best = 0;
  for (int v = 1; v < n; ++v) {
    if (lg[v] > lg[best]) best = v;
  }
  *argmax = best;
  const double mx = lg[best];
  double sum = 0;
  for (int v = 0; v < n; ++v) sum += std::exp(static_cast<double>(lg[v]) - mx);
  return mx + std::log(sum);
}

int RunPerplexity(const PerplexityOptions& opt) {
  if (opt.text_file.empty()) return ReportError("perplexity", InvalidArgument("no text given: use -f FILE"));
  if (opt.max_tokens < 0) return ReportError("perplexity", InvalidArgument("--max-tokens must be ≥ 0"));
  if (opt.bucket < 1) return ReportError("perplexity", InvalidArgument("--bucket must be ≥ 1"));
  auto text = ReadTextFile(opt.text_file);
  if (!text.ok()) return ReportError("perplexity", text.status());
  auto loaded = LoadModelAndTokenizer(opt.model, /*need_tokenizer=*/true);
  if (!loaded.ok()) return ReportError("perplexity", loaded.status());
  const ModelWeights& model = *loaded->weights;
  auto ids_or = loaded->tokenizer->Encode(*text, /*add_bos=*/true);
  if (!ids_or.ok()) return ReportError("perplexity", Status(ids_or.status().code(), opt.text_file + ": " + ids_or.status().message()));
  std::vector<int> ids = std::move(ids_or).value();
  if (opt.max_tokens > 0 && static_cast<int64_t>(ids.size()) > opt.max_tokens + 1) ids.resize(opt.max_tokens + 1);
  if (ids.size() < 2) return ReportError("perplexity", InvalidArgument("'" + opt.text_file + "' has fewer than 2 tokens"));
  const size_t n_pred = ids.size() - 1;  // logits at i predict ids[i+1]

  auto so = MakeSessionOptions(opt.kv, model.config);
  if (!so.ok()) return ReportError("perplexity", so.status());
  auto session = Session::Create(model, *so);
  if (!session.ok()) return ReportError("perplexity", session.status());
  std::unique_ptr<Session> twin;
  if (opt.compare_full) {
    SessionOptions full = *so;
    full.kv = KvCacheOptions();
    full.kv.policy = EvictionPolicy::kFull;
    full.kv.key_format = KvFormat::kF32;
    full.kv.value_format = KvFormat::kF32;
    full.kv.capacity = static_cast<int>(std::min<size_t>(ids.size(), 1 << 26));
    auto t = Session::Create(model, full);
    if (!t.ok()) return ReportError("perplexity", t.status());
    twin = std::move(t).value();
  }

  const int vocab = model.config.vocab_size;
  const size_t batch = static_cast<size_t>(so->max_batch);
  std::vector<float> held(batch * static_cast<size_t>(vocab));  // test logits of one chunk
  double nll = 0, kld = 0;
  int64_t agree = 0;
  std::vector<double> bucket_nll;
  double bucket_sum = 0;
  int64_t bucket_n = 0;
  double ratio_sum = 0, ratio_worst = 0;
  int64_t ratio_n = 0;
  double decode_seconds = 0;
  const int capacity = (*session)->cache().plan().capacity;

  for (size_t start = 0; start < n_pred; start += batch) {
    const size_t len = std::min(batch, n_pred - start);
    const double t0 = NowSeconds();
    Status st = (*session)->FeedAll(ids.data() + start, len, [&](size_t i, const float* lg) {
      std::copy(lg, lg + vocab, held.begin() + static_cast<ptrdiff_t>(i * vocab));
    });
    decode_seconds += NowSeconds() - t0;
    if (!st.ok()) return ReportError("perplexity", st);
    for (size_t i = 0; i < len; ++i) {
      const float* lg = held.data() + i * vocab;
      int top = 0;
      const double token_nll = LogSumExp(lg, vocab, &top) - lg[ids[start + i + 1]];
      nll += token_nll;
      bucket_sum += token_nll;
      if (++bucket_n == opt.bucket) {
        bucket_nll.push_back(bucket_sum / static_cast<double>(bucket_n));
        bucket_sum = 0;
        bucket_n = 0;
      }
    }
    if (twin) {
      st = twin->FeedAll(ids.data() + start, len, [&](size_t i, const float* ref) {
        const float* lg = held.data() + i * vocab;
        int top_ref = 0, top = 0;
        const double lse_ref = LogSumExp(ref, vocab, &top_ref);
        const double lse = LogSumExp(lg, vocab, &top);
        double kl = 0;
        for (int v = 0; v < vocab; ++v) {
          const double lp = ref[v] - lse_ref;
          kl += std::exp(lp) * (lp - (lg[v] - lse));
        }
        kld += std::max(0.0, kl);
        agree += (top == top_ref);
      });
      if (!st.ok()) return ReportError("perplexity", st);
    }
    const KvCacheStats cs = (*session)->cache().Stats();
    const double ratio = static_cast<double>(cs.f16_full_bytes) / static_cast<double>(std::max<uint64_t>(cs.held_bytes, 1));
    ratio_sum += ratio;
    ++ratio_n;
    if (cs.tokens_seen >= static_cast<uint64_t>(capacity) || start + len == n_pred) {
      ratio_worst = ratio_worst == 0 ? ratio : std::min(ratio_worst, ratio);
    }
  }
  if (bucket_n > 0) bucket_nll.push_back(bucket_sum / static_cast<double>(bucket_n));

  const KvCacheStats cs = (*session)->cache().Stats();
  const double mean_nll = nll / static_cast<double>(n_pred);
  const double compression = static_cast<double>(cs.f16_full_bytes) / static_cast<double>(std::max<uint64_t>(cs.held_bytes, 1));
  const KvCachePlan& plan = (*session)->cache().plan();
  if (opt.json) {
    nlohmann::json j;
    j["model"] = opt.model.model;
    j["text"] = opt.text_file;
    j["policy"] = EvictionPolicyName(plan.policy);
    j["key_format"] = KvFormatName(plan.key_format);
    j["value_format"] = KvFormatName(plan.value_format);
    j["positions"] = PositionModeName(plan.positions);
    j["sinks"] = plan.sinks;
    j["heavy"] = plan.heavy;
    j["window"] = plan.window;
    j["capacity"] = plan.capacity;
    j["h2o_decay"] = plan.h2o_decay;
    j["tokens"] = n_pred;
    j["nll"] = mean_nll;
    j["ppl"] = std::exp(mean_nll);
    j["kv_bytes"] = cs.held_bytes;
    j["kv_arena_bytes"] = cs.arena_bytes;
    j["kv_bytes_f16_full"] = cs.f16_full_bytes;
    j["compression"] = compression;
    j["compression_avg"] = ratio_sum / static_cast<double>(std::max<int64_t>(ratio_n, 1));
    j["compression_worst"] = ratio_worst;
    j["decode_tokens_per_s"] = decode_seconds > 0 ? static_cast<double>(n_pred) / decode_seconds : 0.0;
    j["bucket"] = opt.bucket;
    j["bucket_nll"] = bucket_nll;
    j["peak_rss_bytes"] = PeakRssBytes();
    if (twin) {
      j["kld"] = kld / static_cast<double>(n_pred);
      j["top1_agree"] = static_cast<double>(agree) / static_cast<double>(n_pred);
    }
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s\n", plan.Describe().c_str());
  std::printf("tokens %zu  perplexity %.4f  (mean NLL %.5f nats)\n", n_pred, std::exp(mean_nll), mean_nll);
  if (twin) {
    std::printf("vs f32 full cache: mean KL %.6f  top-1 agreement %.2f%%\n", kld / static_cast<double>(n_pred),
                100.0 * static_cast<double>(agree) / static_cast<double>(n_pred));
  }
  std::printf("kv held %s (arena %s); f16 full cache %s; compression %.1fx\n", FormatBytes(cs.held_bytes).c_str(),
              FormatBytes(cs.arena_bytes).c_str(), FormatBytes(cs.f16_full_bytes).c_str(), compression);
  std::printf("%.1f tokens/s; peak RSS %s\n", decode_seconds > 0 ? static_cast<double>(n_pred) / decode_seconds : 0.0,
              FormatBytes(PeakRssBytes()).c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterPerplexityCommand(CLI::App& app) {
  auto opt = std::make_shared<PerplexityOptions>();
  CLI::App* sub = app.add_subcommand("perplexity", "Stream a text through the cache and report perplexity");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("-f,--file", opt->text_file, "Text file (UTF-8), scored as one stream after a BOS")->required();
  sub->add_option("--max-tokens", opt->max_tokens, "Score at most this many tokens (default: all)");
  sub->add_flag("--compare-full", opt->compare_full, "Also run an f32 full-cache twin: KL divergence, top-1 agreement");
  sub->add_flag("--json", opt->json, "Print one JSON object");
  sub->add_option("--bucket", opt->bucket, "Tokens per NLL bucket in the JSON (default 1024)");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunPerplexity(*opt); };
}

}  // namespace kvedge::cli
