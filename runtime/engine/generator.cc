// The generation loop and the text stage between token pieces and a consumer.
#include "runtime/engine/generator.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "platform/clock.h"
#include "platform/enum_names.h"
#include "runtime/tokenizer/utf8.h"

namespace kvedge {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Bytes at the end of `text` that begin a UTF-8 character the next bytes may
// still complete (0 to 3): a valid lead byte followed by fewer continuation
// bytes than it announces, each in its allowed range.
size_t UnfinishedCharacter(std::string_view text) {
  const size_t n = text.size();
  for (size_t back = 1; back <= std::min<size_t>(3, n); ++back) {
    const auto b = static_cast<unsigned char>(text[n - back]);
    if ((b & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (need <= back) return 0;  // ASCII, invalid, or complete
    if (back >= 2) {  // the second byte's range depends on the lead (no overlongs, surrogates, > U+10FFFF)
      const auto c = static_cast<unsigned char>(text[n - back + 1]);
      const unsigned char lo = b == 0xE0 ? 0xA0 : b == 0xF0 ? 0x90 : 0x80;
      const unsigned char hi = b == 0xED ? 0x9F : b == 0xF4 ? 0x8F : 0xBF;
      if (c < lo || c > hi) return 0;
    }
    return back;
  }
  return 0;
}

// Emits `text` as valid UTF-8: valid runs as they are, each invalid byte as
// U+FFFD. False once the sink stops.
bool EmitUtf8(std::string_view text, TextSink sink) {
  size_t run = 0, i = 0;
  while (i < text.size()) {
    if (static_cast<unsigned char>(text[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    const int len = DecodeUtf8(text, i, &cp);
    if (len > 0) {
      i += static_cast<size_t>(len);
      continue;
    }
    if (i > run && !sink(text.substr(run, i - run))) return false;
    if (!sink(kReplacement)) return false;
    run = ++i;
  }
  return run == text.size() || sink(text.substr(run));
}

}  // namespace

StatusOr<TextStream> TextStream::Create(std::vector<std::string> stop_strings, size_t max_piece) {
  if (stop_strings.size() > kMaxStopStrings) {
    return InvalidArgument(std::to_string(stop_strings.size()) + " stop strings: at most " +
                           std::to_string(kMaxStopStrings));
  }
  size_t longest = 0;
  for (size_t i = 0; i < stop_strings.size(); ++i) {
    const std::string& s = stop_strings[i];
    const std::string which = "stop string " + std::to_string(i + 1);
    if (s.empty()) return InvalidArgument(which + " is empty");
    if (s.size() > kMaxStopBytes) {
      return InvalidArgument(which + " is " + std::to_string(s.size()) + " bytes: at most " +
                             std::to_string(kMaxStopBytes));
    }
    const size_t bad = FindInvalidUtf8(s);
    if (bad != kUtf8Valid) return InvalidArgument(which + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    longest = std::max(longest, s.size());
  }
  // Held: at most longest − 1 bytes of a stop prefix or 3 of a character.
  return TextStream(std::move(stop_strings), std::max<size_t>(longest, 4) + max_piece, max_piece);
}

TextStream::TextStream(std::vector<std::string> stop_strings, size_t capacity, size_t max_piece)
    : stop_(std::move(stop_strings)), buffer_(capacity), max_piece_(max_piece) {}

Status TextStream::SetStopStrings(std::vector<std::string> stop_strings) {
  KVEDGE_ASSIGN_OR_RETURN(TextStream fresh, Create(std::move(stop_strings), max_piece_));
  *this = std::move(fresh);
  return OkStatus();
}

size_t TextStream::StopPrefixSuffix(std::string_view text) const {
  size_t best = 0;
  for (const std::string& s : stop_) {
    for (size_t k = std::min(s.size() - 1, text.size()); k > best; --k) {
      if (text.substr(text.size() - k) == std::string_view(s).substr(0, k)) {
        best = k;
        break;
      }
    }
  }
  return best;
}

TextStream::Result TextStream::Push(std::string_view piece, TextSink sink) {
  KVEDGE_CHECK(piece.size() <= buffer_.size() - held_);
  std::memcpy(buffer_.data() + held_, piece.data(), piece.size());
  const std::string_view text(buffer_.data(), held_ + piece.size());
  size_t stop_at = std::string_view::npos;
  for (const std::string& s : stop_) stop_at = std::min(stop_at, text.find(s));
  if (stop_at != std::string_view::npos) {
    for (size_t i = 0; i < stop_.size(); ++i) {
      if (text.find(stop_[i]) == stop_at) {
        stopped_by_ = static_cast<int>(i);
        break;
      }
    }
    held_ = 0;
    return EmitUtf8(text.substr(0, stop_at), sink) ? Result::kStop : Result::kSinkStop;
  }
  const size_t hold = std::max(StopPrefixSuffix(text), UnfinishedCharacter(text));
  const bool more = EmitUtf8(text.substr(0, text.size() - hold), sink);
  std::memmove(buffer_.data(), buffer_.data() + text.size() - hold, hold);
  held_ = hold;
  return more ? Result::kMore : Result::kSinkStop;
}

bool TextStream::Flush(TextSink sink) {
  const std::string_view text(buffer_.data(), held_);
  held_ = 0;
  const size_t unfinished = UnfinishedCharacter(text);
  if (!EmitUtf8(text.substr(0, text.size() - unfinished), sink)) return false;
  return unfinished == 0 || sink(kReplacement);
}

namespace {
constexpr EnumName<StopReason> kStopReasonNames[] = {{StopReason::kMaxTokens, "max tokens"},
                                                     {StopReason::kEndOfGeneration, "end of generation"},
                                                     {StopReason::kStopString, "stop string"},
                                                     {StopReason::kCancelled, "cancelled"},
                                                     {StopReason::kSinkStopped, "consumer stopped"},
                                                     {StopReason::kError, "error"}};
}  // namespace

const char* StopReasonName(StopReason r) { return NameOf(kStopReasonNames, r, "unknown"); }

StatusOr<GenerationStream> GenerationStream::Create(const Tokenizer& tokenizer, GeneratorOptions options) {
  size_t max_piece = 0;
  for (int t = 0; t < tokenizer.vocab_size(); ++t) max_piece = std::max(max_piece, tokenizer.DecodePiece(-1, t).size());
  KVEDGE_ASSIGN_OR_RETURN(TextStream text, TextStream::Create(std::move(options.stop_strings), max_piece));
  if (!options.is_end_of_generation) {
    options.is_end_of_generation = [&tokenizer](int t) { return tokenizer.IsEndOfGeneration(t); };
  }
  return GenerationStream(tokenizer, std::move(options), std::move(text));
}

GenerationStream::GenerationStream(const Tokenizer& tokenizer, GeneratorOptions options, TextStream text)
    : tokenizer_(&tokenizer), options_(std::move(options)), text_(std::move(text)) {}

Status GenerationStream::SetStopStrings(std::vector<std::string> stop_strings) {
  return text_.SetStopStrings(std::move(stop_strings));
}

void GenerationStream::Begin(int prev_token, int64_t max_tokens, const std::atomic<bool>* cancel) {
  text_.Reset();  // drop what a generation stopped by its sink left held
  result_ = GenerationResult();
  result_.last_token = prev_token;
  prev_ = prev_token;
  max_tokens_ = max_tokens;
  cancel_ = cancel;
}

bool GenerationStream::Next(const float* logits, Sampler& sampler, int* token) {
  if (max_tokens_ >= 0 && result_.tokens >= max_tokens_) {
    result_.reason = StopReason::kMaxTokens;
    return false;
  }
  if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
    result_.reason = StopReason::kCancelled;
    return false;
  }
  const int next = sampler.Sample(logits);
  if (options_.is_end_of_generation(next)) {
    result_.reason = StopReason::kEndOfGeneration;
    return false;
  }
  *token = next;
  return true;
}

bool GenerationStream::Accept(int token, const Status& fed, TextSink sink) {
  if (!fed.ok()) {
    result_.status = fed;
    result_.reason = StopReason::kError;
    return false;
  }
  ++result_.tokens;
  result_.last_token = token;
  const TextStream::Result pushed = text_.Push(tokenizer_->DecodePiece(prev_, token), sink);
  prev_ = token;
  if (pushed == TextStream::Result::kStop) {
    result_.reason = StopReason::kStopString;
    return false;
  }
  if (pushed == TextStream::Result::kSinkStop) {
    result_.reason = StopReason::kSinkStopped;
    return false;
  }
  return true;
}

GenerationResult GenerationStream::Finish(TextSink sink) {
  if (result_.reason != StopReason::kSinkStopped) text_.Flush(sink);
  return result_;
}

StatusOr<Generator> Generator::Create(const Tokenizer& tokenizer, GeneratorOptions options) {
  KVEDGE_ASSIGN_OR_RETURN(GenerationStream stream, GenerationStream::Create(tokenizer, std::move(options)));
  return Generator(std::move(stream));
}

GenerationResult Generator::Run(Session& session, Sampler& sampler, const GenerationRequest& request, TextSink sink) {
  const double t0 = NowSeconds();
  int prev = request.prev_token;
  if (request.prompt_len > 0) {
    const Status fed = session.Feed(request.prompt, request.prompt_len);
    if (!fed.ok()) {
      GenerationResult result;
      result.status = fed;
      result.reason = StopReason::kError;
      return result;
    }
    prev = request.prompt[request.prompt_len - 1];
  } else if (session.tokens_fed() == 0) {
    GenerationResult result;
    result.status = FailedPrecondition("nothing to generate from: the prompt is empty and no token was fed before");
    result.reason = StopReason::kError;
    return result;
  }
  const double t1 = NowSeconds();
  stream_.Begin(prev, request.max_tokens, request.cancel);
  int next;
  while (stream_.Next(session.Logits(), sampler, &next) && stream_.Accept(next, session.Feed(&next, 1), sink)) {
  }
  GenerationResult result = stream_.Finish(sink);
  result.prefill_seconds = t1 - t0;
  result.decode_seconds = NowSeconds() - t1;
  return result;
}

}  // namespace kvedge
