// The kvedge command line: subcommands in the style of llama.cpp's tools.
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "platform/target_report.h"
#include "runtime/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"kvedge: streaming LLM inference on CPUs with a compressed, bounded KV cache"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("kvedge ") + KVEDGE_VERSION);
  std::vector<std::pair<CLI::App*, kvedge::cli::CommandRunner>> commands;
  const auto add = [&](kvedge::cli::CommandRunner run) {
    commands.emplace_back(app.get_subcommands({}).back(), std::move(run));
  };
  add(kvedge::cli::RegisterGenerateCommand(app));
  add(kvedge::cli::RegisterPerplexityCommand(app));
  add(kvedge::cli::RegisterBenchCommand(app));
  add(kvedge::cli::RegisterInfoCommand(app));
  add(kvedge::cli::RegisterSynthCommand(app));
  add(kvedge::cli::RegisterSoakCommand(app));
  add(kvedge::cli::RegisterQuantizeCommand(app));
  add(kvedge::cli::RegisterChatTemplateCommand(app));
  add(kvedge::cli::RegisterChatCommand(app));
  add(kvedge::cli::RegisterTokenizeCommand(app));
  add(kvedge::cli::RegisterServeCommand(app));
  const auto is_command = [&](const char* name) {
    for (const auto& [sub, run] : commands) {
      if (sub->get_name() == name) return true;
    }
    return false;
  };
  if (const kvedge::Status s = kvedge::RestrictDispatchFromEnvironment(); !s.ok()) {
    std::fprintf(stderr, "kvedge: %s\n", s.message().c_str());
    return 2;
  }
  if (argc > 1 && argv[1][0] != '-' && !is_command(argv[1])) {
    std::string names;  // "generate, perplexity, …", from the registered commands
    for (const auto& [sub, run] : commands) names += (names.empty() ? "" : ", ") + sub->get_name();
    std::fprintf(stderr, "kvedge: unknown command '%s': use one of %s\n", argv[1], names.c_str());
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kvedge: %s\nRun 'kvedge --help' (or 'kvedge <command> --help') for usage.\n", e.what());
    return 2;
  }
  for (auto& [sub, run] : commands) {
    if (sub->parsed()) return run();
  }
  return 2;
}
