// `kvedge chat`'s input: libedit on a terminal, plain lines otherwise.
#include "runtime/cli/line_reader.h"

#include <fcntl.h>
#include <histedit.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <clocale>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace kvedge::cli {
namespace {

// Lines as they come: the only reader for pipes and files (tests pipe stdin).
class PlainLineReader final : public LineReader {
 public:
  PlainLineReader(const char* prompt, const std::atomic<bool>* quit)
      : prompt_(::isatty(STDIN_FILENO) != 0 ? prompt : nullptr), quit_(quit) {}

  bool Read(std::string* line) override {
    if (prompt_ != nullptr) std::fputs(prompt_, stderr);
    line->clear();
    for (;;) {
      const int c = std::fgetc(stdin);
      if (c == EOF) {
        if (std::ferror(stdin) && errno == EINTR && !quit_->load()) {
          std::clearerr(stdin);
          continue;
        }
        return !line->empty() && !quit_->load();
      }
      if (c == '\n') return true;
      line->push_back(static_cast<char>(c));
    }
  }

 private:
  const char* prompt_;  // null: stdin is not a terminal, no prompt
  const std::atomic<bool>* quit_;
};

// libedit's editor (emacs bindings): the prompt and the echo go to stderr, so
// stdout holds only the replies even on a terminal.
class EditLineReader final : public LineReader {
 public:
  EditLineReader(const char* prompt, const std::atomic<bool>* quit, std::string history_file)
      : prompt_(prompt), quit_(quit), history_file_(std::move(history_file)) {
    hist_ = ::history_init();
    ::history(hist_, &ev_, H_SETSIZE, 1000);
    ::history(hist_, &ev_, H_SETUNIQUE, 1);  // no run of the same line
    if (!history_file_.empty()) ::history(hist_, &ev_, H_LOAD, history_file_.c_str());  // absent: a new history
    el_ = ::el_init("kvedge", stdin, stderr, stderr);
    ::el_set(el_, EL_CLIENTDATA, this);
    ::el_set(el_, EL_PROMPT, &EditLineReader::Prompt);
    ::el_set(el_, EL_EDITOR, "emacs");
    ::el_set(el_, EL_HIST, ::history, hist_);
    ::el_source(el_, nullptr);  // the user's ~/.editrc, as other libedit programs
  }

  ~EditLineReader() override {
    if (!history_file_.empty()) SaveHistory();
    ::el_end(el_);
    ::history_end(hist_);
  }

  bool Read(std::string* line) override {
    for (;;) {
      int count = 0;
      errno = 0;
      const char* s = ::el_gets(el_, &count);
      if (s == nullptr || count <= 0) {
        if (errno == EINTR && !quit_->load()) continue;
        return false;  // end of input (Ctrl-D) or Ctrl-C
      }
      if (quit_->load()) return false;
      line->assign(s, static_cast<size_t>(count));
      while (!line->empty() && (line->back() == '\n' || line->back() == '\r')) line->pop_back();
      if (!line->empty()) ::history(hist_, &ev_, H_ENTER, line->c_str());
      return true;
    }
  }

 private:
  static const char* Prompt(EditLine* el) {
    void* self = nullptr;
    ::el_get(el, EL_CLIENTDATA, &self);
    return static_cast<EditLineReader*>(self)->prompt_;
  }

  // The file holds the user's messages: created private, its folder too.
  void SaveHistory() {
    std::error_code ec;
    const std::filesystem::path path(history_file_);
    if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
    const int fd = ::open(history_file_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0 || ::history(hist_, &ev_, H_SAVE, history_file_.c_str()) < 0) {
      std::fprintf(stderr, "kvedge chat: warning: cannot save the line history to '%s'\n", history_file_.c_str());
    }
    if (fd >= 0) ::close(fd);
  }

  const char* prompt_;
  const std::atomic<bool>* quit_;
  std::string history_file_;
  History* hist_ = nullptr;
  HistEvent ev_ = {};
  EditLine* el_ = nullptr;
};

}  // namespace

std::unique_ptr<LineReader> LineReader::Create(const char* prompt, const std::atomic<bool>* quit,
                                               const std::string& history_file) {
  if (::isatty(STDIN_FILENO) == 0 || ::isatty(STDERR_FILENO) == 0) {
    return std::make_unique<PlainLineReader>(prompt, quit);
  }
  // libedit decodes the keyboard's bytes with the C library's multibyte
  // functions; kvedge speaks UTF-8 whatever the environment's locale says.
  if (std::setlocale(LC_CTYPE, "") == nullptr || MB_CUR_MAX == 1) std::setlocale(LC_CTYPE, "C.UTF-8");
  return std::make_unique<EditLineReader>(prompt, quit, history_file);
}

std::string DefaultChatHistoryPath() {
  if (const char* state = std::getenv("XDG_STATE_HOME"); state != nullptr && state[0] == '/') {
    return std::string(state) + "/kvedge/chat_history";
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && home[0] != '\0') {
    return std::string(home) + "/.local/state/kvedge/chat_history";
  }
  return "";
}

}  // namespace kvedge::cli
