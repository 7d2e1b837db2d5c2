// `kvedge quantize IN.gguf OUT.gguf --type PRESET`: re-encodes a model's
// weights with one of llama-quantize's presets (runtime/model/gguf_quantize.h),
// one progress line per tensor on stderr.
#include <cstdio>
#include <memory>
#include <string>

#include "platform/mapped_file.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "runtime/model/gguf.h"
#include "runtime/model/gguf_quantize.h"

namespace kvedge::cli {
namespace {

struct QuantizeOptions {
  std::string input, output, type;
};

int RunQuantize(const QuantizeOptions& opt) {
  const QuantizePreset* preset = FindQuantizePreset(opt.type);
  if (preset == nullptr) {
    return ReportError("quantize", InvalidArgument("--type '" + opt.type + "' is unknown: use " + QuantizePresetNames()));
  }
  if (opt.input == opt.output) return ReportError("quantize", InvalidArgument("input and output are the same file"));
  auto file = MappedFile::Open(opt.input);
  if (!file.ok()) return ReportError("quantize", file.status());
  auto gguf = GgufFile::Parse(file->data(), file->size(), opt.input);
  if (!gguf.ok()) return ReportError("quantize", gguf.status());
  int requantized = 0;
  const Status st = QuantizeGguf(*gguf, opt.output, *preset, [&](const QuantizeProgress& p) {
    std::fprintf(stderr, "[%4d/%4d] %-32.*s %-6s -> %-6s [%llu x %llu]%s\n", p.index + 1, p.count,
                 static_cast<int>(p.name.size()), p.name.data(), p.from, p.to,
                 static_cast<unsigned long long>(p.rows), static_cast<unsigned long long>(p.cols),
                 p.requantized ? "  (re-quantized: quantized source)" : "");
    requantized += p.requantized;
  });
  if (!st.ok()) {
    std::remove(opt.output.c_str());
    return ReportError("quantize", st);
  }
  if (requantized > 0) {
    std::fprintf(stderr, "kvedge quantize: warning: %d tensors were already quantized and lost precision twice; "
                         "quantize from an F32/F16/BF16 file when you can\n", requantized);
  }
  std::fprintf(stderr, "kvedge quantize: wrote %s (%s)\n", opt.output.c_str(), preset->name);
  return 0;
}

}  // namespace

CommandRunner RegisterQuantizeCommand(CLI::App& app) {
  auto opt = std::make_shared<QuantizeOptions>();
  CLI::App* sub = app.add_subcommand("quantize", "Re-encode a GGUF model's weights with a llama-quantize preset");
  sub->add_option("input", opt->input, "Source .gguf (F32/F16/BF16; quantized sources are re-quantized)")->required();
  sub->add_option("output", opt->output, "Output .gguf")->required();
  sub->add_option("--type", opt->type, "Preset: Q4_K_M Q5_K_M Q6_K Q8_0 Q4_0 Q3_K_M Q2_K IQ4_NL IQ4_XS")->required();
  return [opt] { return RunQuantize(*opt); };
}

}  // namespace kvedge::cli
