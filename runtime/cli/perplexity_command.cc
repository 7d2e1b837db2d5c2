// `kvedge perplexity`: stream a text through the chosen cache (no resets, far
// past the trained context if the text is long) and report perplexity; with
// --compare-full, KL divergence and top-1 agreement against an f32 full-cache
// twin run in lockstep; with --oracle, against the recompute oracle (below).
// --tokens scores a JSON array of ids as given; --save-logits writes every
// position's logits, to compare kvedge with another runtime or cache.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "platform/clock.h"
#include "platform/function_ref.h"
#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

struct PerplexityOptions {
  ModelFlags model;
  KvFlags kv;
  std::string text_file;
  std::string tokens_file;  // --tokens: a JSON array of ids, used as given (no BOS added)
  std::string save_logits;  // --save-logits: [positions × vocab] little-endian f32
  int64_t max_tokens = 0;
  bool compare_full = false;
  bool oracle = false;
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

// The ids of a JSON array in `text` (from `where`), each in [0, vocab).
StatusOr<std::vector<int>> ParseTokenIds(const std::string& text, const std::string& where, int vocab) {
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_array()) {
    return InvalidArgument(where + ": expected a JSON array of token ids, e.g. [1, 306, 4658]");
  }
  std::vector<int> ids;
  ids.reserve(j.size());
  for (size_t i = 0; i < j.size(); ++i) {
    const nlohmann::json& e = j[i];
    const bool in_range = (e.is_number_unsigned() && e.get<uint64_t>() < static_cast<uint64_t>(vocab)) ||
                          (e.is_number_integer() && !e.is_number_unsigned() && e.get<int64_t>() >= 0 &&
                           e.get<int64_t>() < vocab);
    if (!in_range) {
      return InvalidArgument(where + ": element " + std::to_string(i) + " (" + e.dump().substr(0, 40) +
                             ") is not a token id in 0.." + std::to_string(vocab - 1));
    }
    ids.push_back(e.is_number_unsigned() ? static_cast<int>(e.get<uint64_t>()) : static_cast<int>(e.get<int64_t>()));
  }
  return ids;
}

// Streams rows of logits to a file as little-endian float32.
class LogitsWriter {
 public:
  static StatusOr<std::unique_ptr<LogitsWriter>> Open(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr) return NotFound("cannot create '" + path + "': " + std::strerror(errno));
    return std::unique_ptr<LogitsWriter>(new LogitsWriter(f, path));
  }
  ~LogitsWriter() {
    if (file_ != nullptr) std::fclose(file_);
  }
  Status Write(const float* row, size_t n) {
    if constexpr (std::endian::native == std::endian::big) {
      for (size_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, row + i, 4);
        u = __builtin_bswap32(u);
        if (std::fwrite(&u, 4, 1, file_) != 1) return Failed();
      }
      return OkStatus();
    }
    return std::fwrite(row, sizeof(float), n, file_) == n ? OkStatus() : Failed();
  }
  Status Close() {
    const int rc = std::fclose(file_);
    file_ = nullptr;
    return rc == 0 ? OkStatus() : Failed();
  }

 private:
  LogitsWriter(std::FILE* f, std::string path) : file_(f), path_(std::move(path)) {}
  Status Failed() const { return DataLoss("writing '" + path_ + "' failed: " + std::strerror(errno)); }
  std::FILE* file_;
  std::string path_;
};

// An f32 cache that holds everything (policy full) for `capacity` tokens.
StatusOr<std::unique_ptr<Session>> FullF32Session(const ModelWeights& model, const SessionOptions& base,
                                                  size_t capacity) {
  SessionOptions full = base;
  full.kv = KvCacheOptions();
  full.kv.policy = EvictionPolicy::kFull;
  full.kv.key_format = KvFormat::kF32;
  full.kv.value_format = KvFormat::kF32;
  full.kv.capacity = static_cast<int>(std::min<size_t>(capacity, 1 << 26));
  return Session::Create(model, full);
}

// The recompute oracle: what the model does best without any cache past its
// trained context T. Token i < T is scored by an f32 full cache from the
// start. Past T, every T/2 tokens a fresh f32 full-cache session re-reads the
// previous T/2 tokens at positions 0…T/2−1 and then scores the next T/2, so
// each scored token sees T/2…T−1 predecessors, all at positions < T. Costs
// about twice the compute of a full cache and T tokens of f32 cache.
class Oracle {
 public:
  static StatusOr<Oracle> Create(const ModelWeights& model, const SessionOptions& base, int context) {
    if (context < 2) return InvalidArgument("--oracle needs a trained context of at least 2 tokens");
    Oracle o(model, base, context);
    KVEDGE_ASSIGN_OR_RETURN(o.session_, FullF32Session(model, base, static_cast<size_t>(context)));
    return o;
  }

  // Feeds ids[start, start+len) (the stream so far is ids[0, start)) and calls
  // on_logits(j, logits) for token start+j.
  Status FeedAll(const std::vector<int>& ids, size_t start, size_t len,
                 FunctionRef<void(size_t, const float*)> on_logits) {
    const size_t t = static_cast<size_t>(context_), half = t / 2;
    for (size_t i = start; i < start + len;) {
      size_t end = std::min(start + len, t);
      if (i >= t) {
        if ((i - t) % half == 0) {
          KVEDGE_ASSIGN_OR_RETURN(session_, FullF32Session(*model_, base_, t));
          KVEDGE_RETURN_IF_ERROR(session_->Feed(ids.data() + (i - half), half));
        }
        end = std::min(start + len, i + half - (i - t) % half);
      }
      KVEDGE_RETURN_IF_ERROR(session_->FeedAll(ids.data() + i, end - i, [&](size_t j, const float* lg) {
        on_logits(i - start + j, lg);
      }));
      i = end;
    }
    return OkStatus();
  }

 private:
  Oracle(const ModelWeights& model, const SessionOptions& base, int context)
      : model_(&model), base_(base), context_(context) {}
  const ModelWeights* model_;
  SessionOptions base_;
  int context_;
  std::unique_ptr<Session> session_;
};

// Sums split at the trained context: stream index i (predicting ids[i+1]) is
// inside when i < T, i.e. it attends over at most T tokens.
struct Split {
  double in = 0, past = 0;
  int64_t n_in = 0, n_past = 0;
  void Add(bool inside, double x) {
    (inside ? in : past) += x;
    ++(inside ? n_in : n_past);
  }
  double Mean() const { return (in + past) / static_cast<double>(std::max<int64_t>(n_in + n_past, 1)); }
  double MeanIn() const { return in / static_cast<double>(std::max<int64_t>(n_in, 1)); }
  double MeanPast() const { return past / static_cast<double>(std::max<int64_t>(n_past, 1)); }
};

// The tested cache against one reference: KL(ref ‖ test), top-1 agreement,
// and the reference's own NLL per bucket.
struct Comparison {
  Split kld, agree, nll;
  std::vector<double> bucket_nll;
  double bucket_sum = 0;
  int64_t bucket_n = 0;

  void AddBucket(double token_nll, int bucket) {
    bucket_sum += token_nll;
    if (++bucket_n == bucket) Flush();
  }
  void Flush() {
    if (bucket_n > 0) bucket_nll.push_back(bucket_sum / static_cast<double>(bucket_n));
    bucket_sum = 0;
    bucket_n = 0;
  }
  // Fields `<prefix>kld`, `<prefix>top1_agree` (+ _in_ctx, _past_ctx); with
  // `with_nll`, also `<prefix>nll`, `<prefix>ppl` and the split NLLs.
  void ToJson(const std::string& prefix, bool with_nll, nlohmann::json& j) const {
    j[prefix + "kld"] = kld.Mean();
    j[prefix + "kld_in_ctx"] = kld.MeanIn();
    j[prefix + "kld_past_ctx"] = kld.MeanPast();
    j[prefix + "top1_agree"] = agree.Mean();
    j[prefix + "top1_agree_in_ctx"] = agree.MeanIn();
    j[prefix + "top1_agree_past_ctx"] = agree.MeanPast();
    if (!with_nll) return;
    j[prefix + "nll"] = nll.Mean();
    j[prefix + "ppl"] = std::exp(nll.Mean());
    j[prefix + "nll_in_ctx"] = nll.MeanIn();
    j[prefix + "nll_past_ctx"] = nll.MeanPast();
    j[prefix + "bucket_nll"] = bucket_nll;
  }
};

int RunPerplexity(const PerplexityOptions& opt) {
  const bool from_ids = !opt.tokens_file.empty();
  if (opt.text_file.empty() == !from_ids) {
    return ReportError("perplexity", InvalidArgument("give the text to score as -f FILE or the ids as --tokens FILE.json"));
  }
  if (opt.max_tokens < 0) return ReportError("perplexity", InvalidArgument("--max-tokens must be ≥ 0"));
  if (opt.bucket < 1) return ReportError("perplexity", InvalidArgument("--bucket must be ≥ 1"));
  const std::string& input = from_ids ? opt.tokens_file : opt.text_file;
  auto text = ReadTextFile(input);
  if (!text.ok()) return ReportError("perplexity", text.status());
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/!from_ids);
  if (!loaded.ok()) return ReportError("perplexity", loaded.status());
  const ModelWeights& model = *loaded->weights;
  auto ids_or = from_ids ? ParseTokenIds(*text, input, model.config.vocab_size)
                         : loaded->tokenizer->Encode(*text, /*add_bos=*/true);
  if (!ids_or.ok()) return ReportError("perplexity", Status(ids_or.status().code(), from_ids ? ids_or.status().message() : input + ": " + ids_or.status().message()));
  std::vector<int> ids = std::move(ids_or).value();
  if (opt.max_tokens > 0 && static_cast<int64_t>(ids.size()) > opt.max_tokens + 1) ids.resize(opt.max_tokens + 1);
  if (ids.size() < 2) return ReportError("perplexity", InvalidArgument("'" + input + "' has fewer than 2 tokens"));
  const size_t n_pred = ids.size() - 1;  // logits at i predict ids[i+1]
  // With --save-logits the last token is fed too: a row for every position.
  const size_t n_feed = opt.save_logits.empty() ? n_pred : ids.size();
  std::unique_ptr<LogitsWriter> logits_out;
  if (!opt.save_logits.empty()) {
    auto w = LogitsWriter::Open(opt.save_logits);
    if (!w.ok()) return ReportError("perplexity", w.status());
    logits_out = std::move(w).value();
  }
  const size_t context = static_cast<size_t>(model.config.context_length);

  auto so = MakeSessionOptions(opt.kv, model.config);
  if (!so.ok()) return ReportError("perplexity", so.status());
  auto session = Session::Create(model, *so);
  if (!session.ok()) return ReportError("perplexity", session.status());
  std::unique_ptr<Session> twin;
  if (opt.compare_full) {
    auto t = FullF32Session(model, *so, ids.size());
    if (!t.ok()) return ReportError("perplexity", t.status());
    twin = std::move(t).value();
  }
  std::unique_ptr<Oracle> oracle;
  if (opt.oracle) {
    auto o = Oracle::Create(model, *so, model.config.context_length);
    if (!o.ok()) return ReportError("perplexity", o.status());
    oracle = std::make_unique<Oracle>(std::move(o).value());
  }

  const int vocab = model.config.vocab_size;
  const size_t batch = static_cast<size_t>(so->max_batch);
  std::vector<float> held(batch * static_cast<size_t>(vocab));  // test logits of one chunk
  std::vector<double> held_lse(batch);                           // and their log Σ exp
  std::vector<int> held_top(batch);
  Split nll;
  Comparison vs_full, vs_oracle;
  std::vector<double> bucket_nll;
  double bucket_sum = 0;
  int64_t bucket_n = 0;
  double ratio_sum = 0, ratio_worst = 0;
  int64_t ratio_n = 0;
  double decode_seconds = 0;
  const int capacity = (*session)->cache().plan().capacity;

  for (size_t start = 0; start < n_feed; start += batch) {
    const size_t fed = std::min(batch, n_feed - start);
    const double t0 = NowSeconds();
    Status st = (*session)->FeedAll(ids.data() + start, fed, [&](size_t i, const float* lg) {
      std::copy(lg, lg + vocab, held.begin() + static_cast<ptrdiff_t>(i * vocab));
    });
    decode_seconds += NowSeconds() - t0;
    if (!st.ok()) return ReportError("perplexity", st);
    if (logits_out) {
      st = logits_out->Write(held.data(), fed * static_cast<size_t>(vocab));
      if (!st.ok()) return ReportError("perplexity", st);
    }
    const size_t len = std::min(fed, n_pred - std::min(start, n_pred));  // positions scored (the last predicts nothing)
    if (len == 0) continue;
    for (size_t i = 0; i < len; ++i) {
      const float* lg = held.data() + i * vocab;
      held_lse[i] = LogSumExp(lg, vocab, &held_top[i]);
      const double token_nll = held_lse[i] - lg[ids[start + i + 1]];
      nll.Add(start + i < context, token_nll);
      bucket_sum += token_nll;
      if (++bucket_n == opt.bucket) {
        bucket_nll.push_back(bucket_sum / static_cast<double>(bucket_n));
        bucket_sum = 0;
        bucket_n = 0;
      }
    }
    // Compares the reference's logits for token start+i with the held ones.
    const auto compare = [&](Comparison& c) {
      return [&, cp = &c](size_t i, const float* ref) {
        const float* lg = held.data() + i * vocab;
        const bool inside = start + i < context;
        int top_ref = 0;
        const double lse_ref = LogSumExp(ref, vocab, &top_ref);
        double kl = 0;
        for (int v = 0; v < vocab; ++v) {
          const double lp = ref[v] - lse_ref;
          kl += std::exp(lp) * (lp - (lg[v] - held_lse[i]));
        }
        cp->kld.Add(inside, std::max(0.0, kl));
        cp->agree.Add(inside, held_top[i] == top_ref ? 1.0 : 0.0);
        const double ref_nll = lse_ref - ref[ids[start + i + 1]];
        cp->nll.Add(inside, ref_nll);
        cp->AddBucket(ref_nll, opt.bucket);
      };
    };
    if (twin) {
      const auto fn = compare(vs_full);
      st = twin->FeedAll(ids.data() + start, len, fn);
      if (!st.ok()) return ReportError("perplexity", st);
    }
    if (oracle) {
      const auto fn = compare(vs_oracle);
      st = oracle->FeedAll(ids, start, len, fn);
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
  if (logits_out) {
    const Status st = logits_out->Close();
    if (!st.ok()) return ReportError("perplexity", st);
  }
  vs_full.Flush();
  vs_oracle.Flush();

  const KvCacheStats cs = (*session)->cache().Stats();
  const double mean_nll = nll.Mean();
  const double compression = static_cast<double>(cs.f16_full_bytes) / static_cast<double>(std::max<uint64_t>(cs.held_bytes, 1));
  const KvCachePlan& plan = (*session)->cache().plan();
  const double tokens_per_s = TokensPerSecond(static_cast<int64_t>(n_feed), decode_seconds);
  if (opt.json) {
    nlohmann::json j;
    j["model"] = opt.model.model;
    j["text"] = opt.text_file;
    if (from_ids) j["tokens_file"] = opt.tokens_file;
    if (!opt.save_logits.empty()) j["logits_file"] = opt.save_logits;
    j["policy"] = EvictionPolicyName(plan.policy);
    j["key_format"] = KvFormatName(plan.key_format);
    j["value_format"] = KvFormatName(plan.value_format);
    j["key_axis"] = KeyQuantAxisName(plan.key_axis);
    j["key_rope"] = KeyRopeName(plan.key_rope);
    j["hot_tail"] = plan.hot_tail;
    j["positions"] = PositionModeName(plan.positions);
    j["sinks"] = plan.sinks;
    j["heavy"] = plan.heavy;
    j["window"] = plan.window;
    j["capacity"] = plan.capacity;
    j["h2o_score"] = H2OScoreName(plan.h2o_score);
    j["h2o_decay"] = plan.h2o_decay;
    j["h2o_lifetime"] = plan.h2o_lifetime;
    j["context_length"] = context;
    j["tokens"] = n_pred;
    j["tokens_in_ctx"] = nll.n_in;
    j["tokens_past_ctx"] = nll.n_past;
    j["nll"] = mean_nll;
    j["ppl"] = std::exp(mean_nll);
    j["nll_in_ctx"] = nll.MeanIn();
    j["nll_past_ctx"] = nll.MeanPast();
    j["kv_bytes"] = cs.held_bytes;
    j["kv_tokens_held"] = cs.tokens_held;
    j["kv_arena_bytes"] = cs.arena_bytes;
    j["kv_bytes_f16_full"] = cs.f16_full_bytes;
    j["compression"] = compression;
    j["compression_avg"] = ratio_sum / static_cast<double>(std::max<int64_t>(ratio_n, 1));
    j["compression_worst"] = ratio_worst;
    j["decode_tokens_per_s"] = tokens_per_s;
    j["bucket"] = opt.bucket;
    j["bucket_nll"] = bucket_nll;
    j["peak_rss_bytes"] = PeakRssBytes();
    if (twin) {
      vs_full.ToJson("", /*with_nll=*/false, j);
      j["full_nll"] = vs_full.nll.Mean();
      j["full_ppl"] = std::exp(vs_full.nll.Mean());
      j["full_bucket_nll"] = vs_full.bucket_nll;
    }
    if (oracle) vs_oracle.ToJson("oracle_", /*with_nll=*/true, j);
    std::printf("%s\n", j.dump().c_str());
    return 0;
  }
  std::printf("%s\n", plan.Describe().c_str());
  std::printf("tokens %zu  perplexity %.4f  (mean NLL %.5f nats)\n", n_pred, std::exp(mean_nll), mean_nll);
  if (twin) {
    std::printf("vs f32 full cache: mean KL %.6f  top-1 agreement %.2f%%\n", vs_full.kld.Mean(),
                100.0 * vs_full.agree.Mean());
  }
  if (oracle) {
    std::printf("recompute oracle: perplexity %.4f; vs oracle: mean KL %.6f (past the context %.6f)  top-1 %.2f%%\n",
                std::exp(vs_oracle.nll.Mean()), vs_oracle.kld.Mean(), vs_oracle.kld.MeanPast(),
                100.0 * vs_oracle.agree.Mean());
  }
  std::printf("kv held %s (arena %s); f16 full cache %s; compression %.1fx\n", FormatBytes(cs.held_bytes).c_str(),
              FormatBytes(cs.arena_bytes).c_str(), FormatBytes(cs.f16_full_bytes).c_str(), compression);
  std::printf("%.1f tokens/s; peak RSS %s\n", tokens_per_s, FormatBytes(PeakRssBytes()).c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterPerplexityCommand(CLI::App& app) {
  auto opt = std::make_shared<PerplexityOptions>();
  CLI::App* sub = app.add_subcommand("perplexity", "Stream a text through the cache and report perplexity");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  CLI::Option* file =
      sub->add_option("-f,--file", opt->text_file, "Text file (UTF-8), scored as one stream after a BOS");
  sub->add_option("--tokens", opt->tokens_file,
                  "JSON array of token ids, scored as given (no BOS added; no tokenizer needed)")
      ->excludes(file);
  sub->add_option("--save-logits", opt->save_logits,
                  "Write every position's logits (the last token's too) as little-endian float32 [positions x vocab]");
  sub->add_option("--max-tokens", opt->max_tokens, "Score at most this many tokens (default: all)");
  sub->add_flag("--compare-full", opt->compare_full, "Also run an f32 full-cache twin: KL divergence, top-1 agreement");
  sub->add_flag("--oracle", opt->oracle,
                "Also run the recompute oracle (f32, restarted every context/2 tokens past the context): its NLL, "
                "and KL divergence / top-1 agreement against it");
  sub->add_flag("--json", opt->json, "Print one JSON object");
  sub->add_option("--bucket", opt->bucket, "Tokens per NLL bucket in the JSON (default 1024)");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunPerplexity(*opt); };
}

}  // namespace kvedge::cli
