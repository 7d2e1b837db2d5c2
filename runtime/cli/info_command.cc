// `kvedge info`: version, CPU, Highway targets, threads.
#include <cstdio>
#include <memory>
#include <string>

#include "platform/target_report.h"
#include "runtime/cli/commands.h"

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
  bool json = false;
};

int RunInfo(const InfoOptions& opt) {
  const TargetReport r = GetTargetReport();
  if (opt.json) {
    std::printf("{\"version\":\"%s\",\"arch\":\"%s\",\"chosen_target\":\"%s\",\"hardware_threads\":%d}\n",
                KVEDGE_VERSION, r.arch.c_str(), r.chosen.c_str(), r.hardware_threads);
    return 0;
  }
  std::printf("kvedge %s\n", KVEDGE_VERSION);
  std::printf("cpu:               %s (%s)\n", r.cpu.c_str(), r.arch.c_str());
  std::printf("simd compiled:     %s\n", Join(r.compiled).c_str());
  std::printf("simd supported:    %s\n", Join(r.supported).c_str());
  std::printf("simd dispatch:     %s\n", r.chosen.c_str());
  std::printf("hardware threads:  %d (default -t %d)\n", r.hardware_threads, r.hardware_threads);
  return 0;
}

}  // namespace

CommandRunner RegisterInfoCommand(CLI::App& app) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand("info", "Show the CPU, SIMD targets and threads");
  sub->add_flag("--json", opt->json, "Print one JSON object");
  return [opt] { return RunInfo(*opt); };
}

}  // namespace kvedge::cli
