// `kvedge tokenize`: a model's (or a vocabulary-only GGUF's) token ids for a
// text, like llama.cpp's llama-tokenize.
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "platform/mapped_file.h"
#include "runtime/cli/commands.h"
#include "runtime/cli/common.h"
#include "runtime/model/gguf.h"

namespace kvedge::cli {
namespace {

struct TokenizeOptions {
  ModelFlags model;
  std::string prompt;
  std::string prompt_file;
  bool prompt_given = false;
  bool ids = false;
  bool pieces = false;
  bool no_bos = false;
  bool special = false;
};

// The tokenizer alone: a GGUF's vocabulary needs no tensors (vocabulary-only
// files load); a llama2.c checkpoint goes through the model loader for its
// vocab_size and needs --tokenizer.
StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerOnly(const ModelFlags& f) {
  if (f.model.empty()) return InvalidArgument("no model given: use -m FILE (GGUF or llama2.c .bin)");
  KVEDGE_ASSIGN_OR_RETURN(MappedFile file, MappedFile::Open(f.model));
  uint32_t magic = 0;
  if (file.size() >= 4) std::memcpy(&magic, file.data(), 4);
  if (magic == kGgufMagic && f.tokenizer.empty()) {
    KVEDGE_ASSIGN_OR_RETURN(GgufFile g, GgufFile::Parse(file.data(), file.size(), f.model));
    return LoadGgufTokenizer(g, f.tokenizer_pre);
  }
  KVEDGE_ASSIGN_OR_RETURN(LoadedModel loaded, LoadModelAndTokenizer(f, /*threads_flag=*/0, /*need_tokenizer=*/true));
  return std::move(loaded.tokenizer);
}

// What a token shows as: its bytes, or its vocabulary text for control
// tokens (which print nothing in generated text).
std::string_view Shown(const Tokenizer& tok, int id) {
  if (tok.attributes(id) & (kTokenAttrControl | kTokenAttrUnknown)) return tok.TokenText(id);
  return tok.DecodePiece(-1, id);
}

int RunTokenize(const TokenizeOptions& opt) {
  if (!opt.prompt_file.empty() && opt.prompt_given) {
    return ReportError("tokenize", InvalidArgument("give either -p TEXT or -f FILE, not both"));
  }
  if (opt.prompt_file.empty() && !opt.prompt_given) {
    return ReportError("tokenize", InvalidArgument("no text: give -p TEXT or -f FILE"));
  }
  if (opt.ids && opt.pieces) return ReportError("tokenize", InvalidArgument("give either --ids or --pieces, not both"));
  std::string text = opt.prompt;
  if (!opt.prompt_file.empty()) {
    auto read = ReadTextFile(opt.prompt_file);  // the file's bytes exactly
    if (!read.ok()) return ReportError("tokenize", read.status());
    text = std::move(read).value();
  }
  auto tok = LoadTokenizerOnly(opt.model);
  if (!tok.ok()) return ReportError("tokenize", tok.status());
  auto ids = (*tok)->Encode(text, EncodeOptions{.add_special = !opt.no_bos, .parse_special = opt.special});
  if (!ids.ok()) return ReportError("tokenize", ids.status());
  std::string out;
  for (size_t i = 0; i < ids->size(); ++i) {
    const int id = (*ids)[i];
    if (opt.ids) {
      out.append(i == 0 ? "" : " ").append(std::to_string(id));
    } else if (opt.pieces) {
      out.append("'").append(Shown(**tok, id)).append("'\n");
    } else {
      char num[16];
      std::snprintf(num, sizeof(num), "%6d", id);
      out.append(num).append(" -> '").append(Shown(**tok, id)).append("'\n");
    }
  }
  if (opt.ids) out.push_back('\n');
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    return ReportError("tokenize", IoError("cannot write to stdout"));
  }
  return 0;
}

}  // namespace

CommandRunner RegisterTokenizeCommand(CLI::App& app) {
  auto opt = std::make_shared<TokenizeOptions>();
  CLI::App* sub = app.add_subcommand("tokenize", "Print the token ids of a text (like llama-tokenize)");
  AddModelFlags(sub, &opt->model, /*required=*/true);
  sub->add_option("-p,--prompt", opt->prompt, "Text to tokenize")->each([opt](const std::string&) {
    opt->prompt_given = true;
  });
  sub->add_option("-f,--file", opt->prompt_file, "Tokenize this file's bytes exactly (nothing stripped)");
  sub->add_flag("--ids", opt->ids, "Print only the ids, space-separated on one line");
  sub->add_flag("--pieces", opt->pieces, "Print only the pieces, one per line");
  sub->add_flag("--no-bos", opt->no_bos, "Add no BOS/EOS even where the vocabulary asks for them");
  sub->add_flag("--special", opt->special, "Parse control tokens written in the text (<|im_start|>…) as single tokens");
  return [opt] { return RunTokenize(*opt); };
}

}  // namespace kvedge::cli
