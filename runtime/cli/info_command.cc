// `kvedge info`: version, CPU, SIMD targets, threads; with -m, the model's
// metadata and weight bytes, and the KV memory plan for the given flags.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <string>

#include "platform/memory.h"
#include "platform/target_report.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "simd/model_kernels.h"

namespace kvedge::cli {
namespace {

std::string Join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += ' ';
    out += s;
  }
  return out;
}

struct InfoOptions {
  ModelFlags model;
  KvFlags kv;
  bool json = false;
};

int RunInfo(const InfoOptions& opt) {
  const TargetReport r = GetTargetReport();
  nlohmann::json j;
  j["version"] = KVEDGE_VERSION;
  j["cpu"] = r.cpu;
  j["arch"] = r.arch;
  j["simd_compiled"] = r.compiled;
  j["simd_supported"] = r.supported;
  j["simd_dispatch"] = r.chosen;
  j["hardware_threads"] = r.hardware_threads;
  j["weight_types"] = ReadableWeightTypes();
  if (!opt.json) {
    std::printf("kvedge %s\n", KVEDGE_VERSION);
    std::printf("cpu:               %s (%s)\n", r.cpu.c_str(), r.arch.c_str());
    std::printf("simd compiled:     %s\n", Join(r.compiled).c_str());
    std::printf("simd supported:    %s\n", Join(r.supported).c_str());
    std::printf("simd dispatch:     %s\n", r.chosen.c_str());
    std::printf("hardware threads:  %d (default -t %d)\n", r.hardware_threads, r.hardware_threads);
    std::printf("weight types:      %s\n", ReadableWeightTypes().c_str());
  }
  if (!opt.model.model.empty()) {
    // Metadata only: no interleaved copy (generate/bench would make one).
    ModelFlags metadata_only = opt.model;
    metadata_only.no_repack = true;
    auto loaded = LoadModelAndTokenizer(metadata_only, opt.kv.threads, /*need_tokenizer=*/false);
    if (!loaded.ok()) return ReportError("info", loaded.status());
    const ModelConfig& c = loaded->weights->config;
    auto so = MakeSessionOptions(opt.kv, c);
    if (!so.ok()) return ReportError("info", so.status());
    auto plan = PlanKvCache(KvShapeOf(c), so->kv, so->threads);
    if (!plan.ok()) return ReportError("info", plan.status());
    j["model"] = {{"path", opt.model.model}, {"name", c.name}, {"architecture", c.architecture},
                  {"dim", c.dim}, {"hidden_dim", c.hidden_dim}, {"layers", c.n_layers}, {"heads", c.n_heads},
                  {"kv_heads", c.n_kv_heads}, {"head_dim", c.head_dim}, {"rope_dim", c.rope_dim},
                  {"rope_theta", c.rope_theta}, {"vocab", c.vocab_size}, {"context_length", c.context_length},
                  {"weight_bytes", loaded->weights->weight_bytes}};
    // Matrices per weight type, in the format table's order: "q4_k ×32, q6_k ×5".
    const ModelWeights& mw = *loaded->weights;
    int counts[kNumWeightTypes] = {};
    ++counts[static_cast<int>(mw.token_embedding.type)];
    if (mw.output.data != mw.token_embedding.data) ++counts[static_cast<int>(mw.output.type)];
    for (const LayerWeights& l : mw.layers) {
      for (const MatrixView* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w3, &l.w2}) ++counts[static_cast<int>(m->type)];
    }
    std::string mix;
    int interleavable = 0;  // matrices of the types the interleaved layout applies to
    for (int t = 0; t < kNumWeightTypes; ++t) {
      if (counts[t] == 0) continue;
      if (IsInterleavable(static_cast<WeightType>(t))) interleavable += counts[t];
      const char* name = WeightTypeName(static_cast<WeightType>(t));
      j["matrix_types"][name] = counts[t];
      mix += (mix.empty() ? "" : ", ") + std::string(name) + " x" + std::to_string(counts[t]);
    }
    // What generate/bench do with the IsInterleavable matrices on this CPU.
    const char* layout = InterleavedWeightsPreferred() && !opt.model.no_repack ? "interleaved16" : "file";
    j["weight_layout"] = layout;
    j["kv_plan"] = {{"policy", EvictionPolicyName(plan->policy)}, {"key_format", KvFormatName(plan->key_format)},
                    {"value_format", KvFormatName(plan->value_format)}, {"capacity", plan->capacity},
                    {"sinks", plan->sinks}, {"heavy", plan->heavy}, {"window", plan->window},
                    {"arena_bytes", plan->arena_bytes},
                    {"f16_full_bytes_at_capacity", plan->F16FullBytes(static_cast<uint64_t>(plan->capacity))}};
    if (!opt.json) {
      std::printf("model:             %s (%s, %s)\n", opt.model.model.c_str(), c.name.c_str(), c.architecture.c_str());
      std::printf("  dim %d, ffn %d, %d layers, %d heads, %d kv heads, head dim %d, rope dim %d (theta %g)\n", c.dim,
                  c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.rope_dim, c.rope_theta);
      std::printf("  vocab %d, trained context %d, weights %s\n", c.vocab_size, c.context_length,
                  FormatBytes(loaded->weights->weight_bytes).c_str());
      std::printf("  matrices: %s\n", mix.c_str());
      if (interleavable > 0) {
        std::printf("  interleavable layout %s\n", std::string(layout) == "file"
                                                   ? "as in the file (used in place)"
                                                   : "interleaved16 (copied at load for the x86 kernels)");
      }
      std::printf("kv plan:           %s\n", plan->Describe().c_str());
      std::printf("  %d tokens per lane fit; an f16 cache of that many tokens needs %s\n", plan->capacity,
                  FormatBytes(plan->F16FullBytes(static_cast<uint64_t>(plan->capacity))).c_str());
    }
  }
  if (opt.json) std::printf("%s\n", j.dump().c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterInfoCommand(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Show the CPU and SIMD targets; with -m, the model and its KV memory plan");
  AddModelFlags(sub, &opt->model, /*required=*/false);
  AddKvFlags(sub, &opt->kv);
  sub->add_flag("--json", opt->json, "Print one JSON object");
  return [opt] { return RunInfo(*opt); };
}

}  // namespace kvedge::cli
