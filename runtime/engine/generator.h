// The generation loop, written once for `kvedge generate`, the C API, chat and
// the server: prompt tokens → a stream of text with stop conditions
// (end-of-generation ids, stop strings, max tokens, cancel). Nothing in the
// loop allocates; buffers are sized when the Generator is created.
#ifndef KVEDGE_RUNTIME_ENGINE_GENERATOR_H_
#define KVEDGE_RUNTIME_ENGINE_GENERATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "platform/function_ref.h"
#include "platform/status.h"
#include "runtime/engine/sampler.h"
#include "runtime/engine/session.h"
#include "runtime/tokenizer/tokenizer.h"

namespace kvedge {

// Receives text; returns false to stop generating (stdout closed, a client
// gone). Every call carries whole UTF-8 characters.
using TextSink = FunctionRef<bool(std::string_view)>;

// Turns token pieces into text a consumer may show at once: whole UTF-8
// characters only (a piece that ends inside a character is held until the
// next completes it; invalid bytes become U+FFFD), and nothing of a stop
// string (a suffix that could begin one is held until it cannot). Buffers
// are fixed at Create. Not thread-safe; one per stream.
class TextStream {
 public:
  // `max_piece`: the longest piece Push will be given. Errors: an empty or
  // invalid-UTF-8 stop string, more than kMaxStopStrings, one longer than
  // kMaxStopBytes.
  static constexpr size_t kMaxStopStrings = 64;
  static constexpr size_t kMaxStopBytes = 1024;
  static StatusOr<TextStream> Create(std::vector<std::string> stop_strings, size_t max_piece);
  // Replaces the stop strings (allocates: call between generations). Errors
  // as Create; nothing changes on error.
  Status SetStopStrings(std::vector<std::string> stop_strings);

  enum class Result : uint8_t {
    kMore,      // go on
    kStop,      // a stop string completed: the text before it was emitted, it and the rest dropped
    kSinkStop,  // the sink returned false
  };
  // Appends `piece` (at most max_piece bytes) and emits what is safe.
  Result Push(std::string_view piece, TextSink sink);
  // The stream ended: emits what is held (a stop-string prefix that never
  // completed; an unfinished character as U+FFFD). False if the sink stopped.
  bool Flush(TextSink sink);
  // Drops what is held.
  void Reset() {
    held_ = 0;
    stopped_by_ = -1;
  }
  size_t held() const { return held_; }
  // The stop string that made Push return kStop since the last Reset (empty if none).
  std::string_view stopped_by() const { return stopped_by_ < 0 ? std::string_view() : stop_[stopped_by_]; }

 private:
  TextStream(std::vector<std::string> stop_strings, size_t capacity, size_t max_piece);
  // Longest suffix of text that is a proper prefix of a stop string.
  size_t StopPrefixSuffix(std::string_view text) const;

  std::vector<std::string> stop_;
  std::vector<char> buffer_;  // [longest stop + max_piece + 4] held bytes then the new piece
  size_t max_piece_ = 0;
  size_t held_ = 0;
  int stopped_by_ = -1;
};

enum class StopReason : uint8_t {
  kMaxTokens,        // max_tokens generated
  kEndOfGeneration,  // the sampler picked an end-of-generation id (neither fed nor shown)
  kStopString,       // a stop string appeared (its tokens are fed; the text ends before it)
  kCancelled,        // the cancel flag was set
  kSinkStopped,      // the text sink returned false
  kError,            // a feed failed: GenerationResult::status
};
const char* StopReasonName(StopReason r);

struct GeneratorOptions {
  // The output ends before the first occurrence of any of these.
  std::vector<std::string> stop_strings;
  // End-of-generation ids (EOS, and EOG ids such as <|eot_id|> when the
  // tokenizer knows them). Unset: the tokenizer's IsEndOfGeneration.
  std::function<bool(int)> is_end_of_generation;
};

struct GenerationRequest {
  const int* prompt = nullptr;  // fed first; may be empty to continue the session
  size_t prompt_len = 0;
  int prev_token = -1;          // with an empty prompt: the last token fed (for the first piece)
  int64_t max_tokens = -1;      // < 0: no limit
  const std::atomic<bool>* cancel = nullptr;  // checked before every token (Ctrl-C, a client gone)
};

struct GenerationResult {
  int64_t tokens = 0;  // generated and fed (end-of-generation ids excluded)
  StopReason reason = StopReason::kMaxTokens;
  Status status;       // why a feed failed (kError), else OK
  int last_token = -1; // the last token fed, -1 if none
  double prefill_seconds = 0;
  double decode_seconds = 0;
};

// One generation, step by step: the loop's state and stop checks for a
// caller that feeds the tokens itself — Generator::Run feeds one session, the
// server feeds every decoding sequence with one batched step. Per token:
// Next (stop checks, sample) → the caller feeds the token → Accept (text,
// stop strings). Borrows the tokenizer (must outlive it). Allocates nothing
// between Begin and Finish (given a sink that does not). Not thread-safe;
// one per stream.
class GenerationStream {
 public:
  // Sizes the text buffers from the vocabulary's longest piece. Errors: bad
  // stop strings (see TextStream::Create).
  static StatusOr<GenerationStream> Create(const Tokenizer& tokenizer, GeneratorOptions options);

  // Replaces the stop strings (allocates: call between generations). Errors
  // as TextStream::Create; nothing changes on error.
  Status SetStopStrings(std::vector<std::string> stop_strings);

  // Starts a generation after the prompt was fed; `prev_token` is the last
  // token fed (-1 if none: the first piece is decoded without one).
  void Begin(int prev_token, int64_t max_tokens, const std::atomic<bool>* cancel);
  // The token to feed next, sampled from `logits` (the last fed token's);
  // false when the generation ends before it (max tokens, cancel, an
  // end-of-generation id, which is neither fed nor shown).
  bool Next(const float* logits, Sampler& sampler, int* token);
  // After Next's token was fed, with the feed's status: passes its text to
  // `sink`; false when the generation ends (a stop string, the sink, a
  // failed feed).
  bool Accept(int token, const Status& fed, TextSink sink);
  // Ends the generation: emits what is held unless the sink stopped.
  GenerationResult Finish(TextSink sink);

  const GenerationResult& result() const { return result_; }
  // The stop string that ended the generation (empty if none).
  std::string_view stopped_by() const { return text_.stopped_by(); }

 private:
  GenerationStream(const Tokenizer& tokenizer, GeneratorOptions options, TextStream text);

  const Tokenizer* tokenizer_;
  GeneratorOptions options_;
  TextStream text_;
  GenerationResult result_;
  int prev_ = -1;
  int64_t max_tokens_ = -1;
  const std::atomic<bool>* cancel_ = nullptr;
};

// One session's generation loop on a GenerationStream. Borrows the tokenizer
// (must outlive it). Not thread-safe; one per stream.
class Generator {
 public:
  // Errors: bad stop strings (see TextStream::Create).
  static StatusOr<Generator> Create(const Tokenizer& tokenizer, GeneratorOptions options);

  // Feeds the prompt, then samples, feeds and decodes token by token until a
  // stop condition, passing text to `sink`. Allocates nothing (given a sink
  // that does not). Errors (reason kError): the prompt or a token could not
  // be fed (ids out of range; a `full` cache is full), or there is nothing to
  // continue from (empty prompt on an empty session).
  GenerationResult Run(Session& session, Sampler& sampler, const GenerationRequest& request, TextSink sink);

  // The stream Run drives, for a caller that feeds tokens itself.
  GenerationStream& stream() { return stream_; }

 private:
  explicit Generator(GenerationStream stream) : stream_(std::move(stream)) {}

  GenerationStream stream_;
};

}  // namespace kvedge

#endif  // KVEDGE_RUNTIME_ENGINE_GENERATOR_H_
