// `kvedge soak`: generate a very long stream (default 1,000,000 tokens) and
// report, every interval, speed, RSS, arena bytes, allocations since start and
// non-finite logits: the evidence that memory stays flat and nothing allocates.
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <memory>

#include "platform/alloc_counter.h"
#include "platform/clock.h"
#include "platform/memory.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "runtime/engine/sampler.h"

namespace kvedge::cli {
namespace {

struct SoakOptions {
  ModelFlags model;
  KvFlags kv;
  int64_t tokens = 1000000;
  int64_t report = 50000;
  float temperature = 1.0f;
  int64_t seed = 1;
  bool json = false;
};

int RunSoak(const SoakOptions& opt) {
  if (opt.tokens < 1 || opt.report < 1) return ReportError("soak", InvalidArgument("--tokens and --report must be ≥ 1"));
  auto loaded = LoadModelAndTokenizer(opt.model, opt.kv.threads, /*need_tokenizer=*/false);
  if (!loaded.ok()) return ReportError("soak", loaded.status());
  const ModelWeights& model = *loaded->weights;
  auto so = MakeSessionOptions(opt.kv, model.config);
  if (!so.ok()) return ReportError("soak", so.status());
  auto session = Session::Create(model, *so);
  if (!session.ok()) return ReportError("soak", session.status());
  SamplerOptions sampler_options;
  sampler_options.temperature = opt.temperature;
  sampler_options.seed = static_cast<uint64_t>(opt.seed);
  auto sampler = Sampler::Create(sampler_options, model.config.vocab_size);
  if (!sampler.ok()) return ReportError("soak", sampler.status());
  Session& s = **session;
  const int vocab = s.vocab_size();

  std::fprintf(stderr, "kvedge soak: %s, %lld tokens\n", s.cache().plan().Describe().c_str(),
               static_cast<long long>(opt.tokens));
  if (!opt.json) {
    std::printf("%10s %10s %12s %12s %12s %12s %8s\n", "tokens", "tokens/s", "rss", "peak_rss", "arena", "allocs",
                "nonfinite");
  }
  int token = 1;  // BOS
  Status st = s.Feed(&token, 1);
  if (!st.ok()) return ReportError("soak", st);
  const int64_t allocs_start = ProcessAllocationCount();
  int64_t report_allocs = 0;
  int64_t nonfinite = 0;
  double interval_start = NowSeconds();
  for (int64_t i = 1; i <= opt.tokens; ++i) {
    const float* lg = s.Logits();
    for (int v = 0; v < vocab; ++v) {
      if (!std::isfinite(lg[v])) {
        ++nonfinite;
        break;
      }
    }
    token = sampler->Sample(lg);
    st = s.Feed(&token, 1);
    if (!st.ok()) return ReportError("soak", st);
    if (i % opt.report == 0 || i == opt.tokens) {
      const double now = NowSeconds();
      const int64_t n = i % opt.report == 0 ? opt.report : i % opt.report;
      const KvCacheStats cs = s.cache().Stats();
      // Decode steps only: the reports' own allocations (reading RSS, JSON) are left out.
      const int64_t report_start = ProcessAllocationCount();
      const int64_t allocs = report_start - allocs_start - report_allocs;
      if (opt.json) {
        nlohmann::json j = {{"tokens", i}, {"tokens_per_s", n / (now - interval_start)},
                            {"rss_bytes", CurrentRssBytes()}, {"peak_rss_bytes", PeakRssBytes()},
                            {"arena_bytes", cs.arena_bytes}, {"held_bytes", cs.held_bytes},
                            {"allocations", allocs}, {"nonfinite_logits", nonfinite}};
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%10lld %10.1f %12llu %12llu %12llu %12lld %8lld\n", static_cast<long long>(i),
                    n / (now - interval_start), static_cast<unsigned long long>(CurrentRssBytes()),
                    static_cast<unsigned long long>(PeakRssBytes()), static_cast<unsigned long long>(cs.arena_bytes),
                    static_cast<long long>(allocs), static_cast<long long>(nonfinite));
      }
      std::fflush(stdout);
      report_allocs += ProcessAllocationCount() - report_start;
      interval_start = NowSeconds();
    }
  }
  return nonfinite == 0 ? 0 : 1;
}

}  // namespace

CommandRunner RegisterSoakCommand(CLI::App& app) {
  auto opt = std::make_shared<SoakOptions>();
  CLI::App* sub = app.add_subcommand("soak", "Generate a very long stream and report memory, allocations and speed");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("--tokens", opt->tokens, "Tokens to generate (default 1000000)");
  sub->add_option("--report", opt->report, "Report every N tokens (default 50000)");
  sub->add_option("--temp", opt->temperature, "Sampling temperature (default 1)");
  sub->add_option("-s,--seed", opt->seed, "Sampling seed (default 1)");
  sub->add_flag("--json", opt->json, "One JSON object per report line");
  AddKvFlags(sub, &opt->kv);
  return [opt] { return RunSoak(*opt); };
}

}  // namespace kvedge::cli
