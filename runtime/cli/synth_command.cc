// `kvedge synth`: write a random-weight llama GGUF of a realistic shape, for
// speed and memory tests at real sizes.
#include <cstdio>
#include <memory>
#include <sstream>

#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "platform/mapped_file.h"
#include "runtime/model/gguf.h"
#include "runtime/model/gguf_quantize.h"
#include "runtime/model/model_export.h"
#include "simd/model_kernels.h"

namespace kvedge::cli {
namespace {

struct SynthOptions {
  std::string shape;
  std::string dims;
  std::string weights = "q4_0";
  std::string output;
  int64_t seed = 1;
};

StatusOr<SynthShape> ParseDims(const std::string& text) {
  SynthShape s;
  s.name = "custom";
  int* fields[] = {&s.dim, &s.n_layers, &s.n_heads, &s.n_kv_heads, &s.hidden_dim, &s.vocab_size, &s.context_length};
  std::stringstream ss(text);
  std::string item;
  size_t i = 0;
  while (std::getline(ss, item, ',')) {
    if (i >= std::size(fields)) break;
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v <= 0 || v > (1 << 24)) {
      return InvalidArgument("--dims field " + std::to_string(i + 1) + " '" + item + "' is not a positive integer");
    }
    *fields[i++] = static_cast<int>(v);
  }
  if (i != std::size(fields) || ss.rdbuf()->in_avail() > 0) {
    return InvalidArgument("--dims '" + text + "': expected 7 numbers dim,layers,heads,kv_heads,ffn,vocab,context");
  }
  return s;
}

int RunSynth(const SynthOptions& opt) {
  if (opt.output.empty()) return ReportError("synth", InvalidArgument("no output given: use -o FILE.gguf"));
  if (opt.shape.empty() == opt.dims.empty()) {
    return ReportError("synth", InvalidArgument("give exactly one of --shape NAME (tinyllama-1.1b, llama-7b) or --dims"));
  }
  StatusOr<SynthShape> shape = opt.shape.empty() ? ParseDims(opt.dims) : SynthPreset(opt.shape);
  if (!shape.ok()) return ReportError("synth", shape.status());
  // A llama-quantize preset (other than the plain q8_0 / q4_0 types): random
  // F16 weights written beside the output, then quantized with the preset.
  const QuantizePreset* preset = FindQuantizePreset(opt.weights);
  const WeightFormat* format = FindWeightFormat(opt.weights);
  // q8_0 and q4_0 are written directly (WriteRandomLlamaGguf), the others quantized.
  const bool direct = format != nullptr && (format->type == WeightType::kQ8_0 || format->type == WeightType::kQ4_0);
  if (preset != nullptr && !direct) {
    const std::string f16 = opt.output + ".f16.tmp";
    Status st = WriteRandomLlamaGguf(*shape, WeightType::kF16, static_cast<uint64_t>(opt.seed), f16);
    if (st.ok()) {
      auto file = MappedFile::Open(f16);
      st = file.status();
      if (st.ok()) {
        auto gguf = GgufFile::Parse(file->data(), file->size(), f16);
        st = gguf.ok() ? QuantizeGguf(*gguf, opt.output, *preset, nullptr) : gguf.status();
      }
    }
    std::remove(f16.c_str());
    if (!st.ok()) return ReportError("synth", st);
  } else {
    if (format == nullptr || (format->type != WeightType::kF16 && !direct)) {
      return ReportError("synth", InvalidArgument("--weights '" + opt.weights +
                                                  "' is unknown: use f16, q8_0, q4_0 or a preset " +
                                                  QuantizePresetNames()));
    }
    const Status st = WriteRandomLlamaGguf(*shape, format->type, static_cast<uint64_t>(opt.seed), opt.output);
    if (!st.ok()) return ReportError("synth", st);
  }
  std::fprintf(stderr, "kvedge synth: wrote %s (%s: dim %d, %d layers, %d heads, %d kv heads, ffn %d, vocab %d, %s)\n",
               opt.output.c_str(), shape->name.c_str(), shape->dim, shape->n_layers, shape->n_heads, shape->n_kv_heads,
               shape->hidden_dim, shape->vocab_size, opt.weights.c_str());
  return 0;
}

}  // namespace

CommandRunner RegisterSynthCommand(CLI::App& app) {
  auto opt = std::make_shared<SynthOptions>();
  CLI::App* sub = app.add_subcommand("synth", "Write a random-weight llama GGUF of a realistic shape");
  sub->add_option("--shape", opt->shape, "Preset: tinyllama-1.1b, llama-7b");
  sub->add_option("--dims", opt->dims, "Custom shape: dim,layers,heads,kv_heads,ffn,vocab,context");
  sub->add_option("--weights", opt->weights, "Weight type: f16 q8_0 q4_0, or a quantize preset Q4_K_M Q5_K_M Q6_K Q3_K_M Q2_K IQ4_NL IQ4_XS (default q4_0)");
  sub->add_option("-o,--output", opt->output, "Output .gguf file")->required();
  sub->add_option("--seed", opt->seed, "Random seed (default 1)");
  return [opt] { return RunSynth(*opt); };
}

}  // namespace kvedge::cli
