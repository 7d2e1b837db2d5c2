// `kvedge chat-template`: renders a chat template (a model's, or a file) for a
// messages JSON file and prints the prompt text byte for byte to stdout, as
// transformers' apply_chat_template would produce it.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "runtime/chat/chat_template.h"
#include "runtime/chat/gguf_chat_template.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"

namespace kvedge::cli {
namespace {

struct ChatTemplateOptions {
  std::string model;
  std::string template_file;
  std::string messages_file;
  bool add_generation_prompt = false;
  std::optional<std::string> bos;
  std::optional<std::string> eos;
  std::string now;
};

int RunChatTemplate(const ChatTemplateOptions& opt) {
  const char* cmd = "chat-template";
  if (opt.model.empty() && opt.template_file.empty()) {
    return ReportError(cmd, InvalidArgument("give -m MODEL or --template FILE"));
  }
  chat::ChatTemplateInputs in;
  std::string source;
  if (!opt.model.empty()) {
    auto t = chat::LoadModelChatTemplate(opt.model);
    if (!t.ok()) return ReportError(cmd, t.status());
    if (!t->from_model && opt.template_file.empty()) {
      std::fprintf(stderr,
                   "kvedge %s: warning: '%s' has no tokenizer.chat_template; using the ChatML fallback "
                   "(<|im_start|>role\\ncontent<|im_end|>)\n",
                   cmd, opt.model.c_str());
    }
    source = t->source;
    in.bos_token = t->bos_token;
    in.eos_token = t->eos_token;
  }
  if (!opt.template_file.empty()) {
    auto t = ReadTextFile(opt.template_file);
    if (!t.ok()) return ReportError(cmd, t.status());
    source = std::move(*t);
  }
  auto messages = ReadTextFile(opt.messages_file);
  if (!messages.ok()) return ReportError(cmd, messages.status());
  in.messages_json = std::move(*messages);
  in.add_generation_prompt = opt.add_generation_prompt;
  if (opt.bos) in.bos_token = *opt.bos;
  if (opt.eos) in.eos_token = *opt.eos;
  if (!opt.now.empty()) {
    auto now = chat::ParseIsoTime(opt.now);
    if (!now.ok()) return ReportError(cmd, Status(now.status().code(), "--now: " + now.status().message()));
    in.now = *now;
  }
  auto text = chat::RenderChatTemplate(source, in);
  if (!text.ok()) return ReportError(cmd, text.status());
  if (std::fwrite(text->data(), 1, text->size(), stdout) != text->size() || std::fflush(stdout) != 0) {
    return ReportError(cmd, IoError("cannot write the rendered text to stdout"));
  }
  return 0;
}

}  // namespace

CommandRunner RegisterChatTemplateCommand(CLI::App& app) {
  auto opt = std::make_shared<ChatTemplateOptions>();
  CLI::App* sub = app.add_subcommand(
      "chat-template", "Render a chat template for a messages JSON file and print the prompt text exactly");
  sub->add_option("-m,--model", opt->model, "GGUF model: its tokenizer.chat_template and bos/eos tokens");
  sub->add_option("--template,--chat-template", opt->template_file,
                  "Jinja template file (overrides the model's template)");
  sub->add_option("--messages", opt->messages_file, "JSON file: [{\"role\": …, \"content\": …}, …]")->required();
  sub->add_flag("--add-generation-prompt", opt->add_generation_prompt, "End with the assistant turn's header");
  sub->add_option("--bos", opt->bos, "bos_token string (default: the model's)");
  sub->add_option("--eos", opt->eos, "eos_token string (default: the model's)");
  sub->add_option("--now", opt->now, "strftime_now() time, YYYY-MM-DDTHH:MM:SS (default: now)");
  return [opt] { return RunChatTemplate(*opt); };
}

}  // namespace kvedge::cli
