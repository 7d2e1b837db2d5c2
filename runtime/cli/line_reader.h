// The lines `kvedge chat` reads: on a terminal through libedit (emacs-style
// editing, arrow keys, history), from a pipe or file one plain line at a time.
#ifndef KVEDGE_RUNTIME_CLI_LINE_READER_H_
#define KVEDGE_RUNTIME_CLI_LINE_READER_H_

#include <atomic>
#include <memory>
#include <string>

namespace kvedge::cli {

// Reads one line after another from stdin. Not thread-safe; one per process
// (the editor owns the terminal's settings while it reads).
class LineReader {
 public:
  virtual ~LineReader() = default;

  // The next line without its newline. False at end of input, or when a
  // signal interrupted the read and `*quit` is set (SIGINT must be installed
  // without SA_RESTART for Ctrl-C to end a read).
  virtual bool Read(std::string* line) = 0;

  // Libedit on a terminal (stdin and stderr both terminals), the plain reader
  // otherwise. `prompt` goes to stderr before each line when stdin is a
  // terminal. The editor keeps its history in memory; with a non-empty
  // `history_file` it also loads it at start and saves it (mode 0600, the
  // lines are the user's messages) when destroyed.
  static std::unique_ptr<LineReader> Create(const char* prompt, const std::atomic<bool>* quit,
                                            const std::string& history_file);
};

// $XDG_STATE_HOME/kvedge/chat_history, else ~/.local/state/kvedge/chat_history
// (the XDG base directory default); empty when neither variable is set.
std::string DefaultChatHistoryPath();

}  // namespace kvedge::cli

#endif  // KVEDGE_RUNTIME_CLI_LINE_READER_H_
