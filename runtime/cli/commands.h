// The kvedge CLI's subcommands: each registers its flags on a CLI11 app and
// runs after parsing, returning the process exit code.
#ifndef KVEDGE_RUNTIME_CLI_COMMANDS_H_
#define KVEDGE_RUNTIME_CLI_COMMANDS_H_

#include <CLI/CLI.hpp>
#include <functional>

namespace kvedge::cli {

// Registers a subcommand; the returned function runs it after a successful parse.
using CommandRunner = std::function<int()>;
CommandRunner RegisterInfoCommand(CLI::App& app);
CommandRunner RegisterGenerateCommand(CLI::App& app);
CommandRunner RegisterPerplexityCommand(CLI::App& app);
CommandRunner RegisterBenchCommand(CLI::App& app);
CommandRunner RegisterSynthCommand(CLI::App& app);
CommandRunner RegisterSoakCommand(CLI::App& app);
CommandRunner RegisterChatTemplateCommand(CLI::App& app);
CommandRunner RegisterChatCommand(CLI::App& app);
CommandRunner RegisterQuantizeCommand(CLI::App& app);
CommandRunner RegisterTokenizeCommand(CLI::App& app);
CommandRunner RegisterServeCommand(CLI::App& app);

}  // namespace kvedge::cli

#endif  // KVEDGE_RUNTIME_CLI_COMMANDS_H_
