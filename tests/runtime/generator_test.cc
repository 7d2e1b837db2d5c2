// The generation loop: whole UTF-8 out of split pieces, stop strings held back
// across pieces, max tokens, cancel, end-of-generation ids, and output equal to
// the plain sample → feed → decode loop for a fixed seed.
#include "runtime/engine/generator.h"

#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include "platform/alloc_counter.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/model/model_loader.h"
#include "runtime/tokenizer/utf8.h"
#include "tests/testing/stories.h"
#include "tests/testing/test_data.h"

namespace kvedge {
namespace {

// Collects what a sink receives, one string per call.
struct Collected {
  std::vector<std::string> chunks;
  std::string Text() const {
    std::string t;
    for (const auto& c : chunks) t += c;
    return t;
  }
  bool AllValidUtf8() const {
    for (const auto& c : chunks) {
      if (FindInvalidUtf8(c) != kUtf8Valid) return false;
    }
    return true;
  }
};

auto Into(Collected* c) {
  return [c](std::string_view text) {
    c->chunks.emplace_back(text);
    return true;
  };
}

TextStream MakeStream(std::vector<std::string> stops, size_t max_piece = 16) {
  auto s = TextStream::Create(std::move(stops), max_piece);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return std::move(s).value();
}

TEST(TextStreamTest, CharactersSplitAcrossPiecesComeOutWhole) {
  TextStream s = MakeStream({});
  Collected out;
  auto sink = Into(&out);
  // "a€b" with € (E2 82 AC) split over three pieces, then 😀 (F0 9F 98 80) byte by byte.
  for (std::string_view p : {"a\xE2", "\x82", "\xAC" "b", "\xF0", "\x9F", "\x98", "\x80", "!"}) {
    ASSERT_EQ(s.Push(p, sink), TextStream::Result::kMore);
  }
  ASSERT_TRUE(s.Flush(sink));
  EXPECT_EQ(out.Text(), "a\xE2\x82\xAC" "b\xF0\x9F\x98\x80!");
  EXPECT_TRUE(out.AllValidUtf8());
  EXPECT_EQ(out.chunks.front(), "a") << "the lead byte is held until its character completes";
}

TEST(TextStreamTest, InvalidAndUnfinishedBytesBecomeReplacementCharacters) {
  TextStream s = MakeStream({});
  Collected out;
  auto sink = Into(&out);
  ASSERT_EQ(s.Push("x\xFF" "y\xC3", sink), TextStream::Result::kMore);  // FF is never valid; C3 may continue
  EXPECT_EQ(s.held(), 1u);
  ASSERT_EQ(s.Push("z", sink), TextStream::Result::kMore);  // C3 then 'z': invalid
  ASSERT_EQ(s.Push("\xE2\x82", sink), TextStream::Result::kMore);
  ASSERT_TRUE(s.Flush(sink));  // the stream ends inside €
  EXPECT_EQ(out.Text(), "x\xEF\xBF\xBDy\xEF\xBF\xBDz\xEF\xBF\xBD");
  EXPECT_TRUE(out.AllValidUtf8());
}

TEST(TextStreamTest, StopStringAcrossPiecesIsHeldBackAndNeverShown) {
  TextStream s = MakeStream({"END", "stop"});
  Collected out;
  auto sink = Into(&out);
  ASSERT_EQ(s.Push("abcE", sink), TextStream::Result::kMore);
  EXPECT_EQ(out.Text(), "abc");
  ASSERT_EQ(s.Push("N", sink), TextStream::Result::kMore);
  EXPECT_EQ(out.Text(), "abc") << "\"EN\" may still become END";
  EXPECT_EQ(s.Push("Dxyz", sink), TextStream::Result::kStop);
  EXPECT_EQ(out.Text(), "abc");
  EXPECT_EQ(s.held(), 0u);
}

TEST(TextStreamTest, PrefixThatNeverCompletesIsReleased) {
  TextStream s = MakeStream({"END"});
  Collected out;
  auto sink = Into(&out);
  ASSERT_EQ(s.Push("xE", sink), TextStream::Result::kMore);
  ASSERT_EQ(s.Push("Ny", sink), TextStream::Result::kMore);
  EXPECT_EQ(out.Text(), "xENy");
  ASSERT_EQ(s.Push("EN", sink), TextStream::Result::kMore);
  ASSERT_TRUE(s.Flush(sink));  // the stream ended: the held prefix is text
  EXPECT_EQ(out.Text(), "xENyEN");
}

TEST(TextStreamTest, EarliestOfSeveralStopStringsInOnePieceWins) {
  TextStream s = MakeStream({"two", "one"});
  Collected out;
  EXPECT_EQ(s.Push("zero one two", Into(&out)), TextStream::Result::kStop);
  EXPECT_EQ(out.Text(), "zero ");
}

TEST(TextStreamTest, MultiByteStopString) {
  TextStream s = MakeStream({"\xE2\x80\x94" "end"});  // "—end"
  Collected out;
  auto sink = Into(&out);
  ASSERT_EQ(s.Push("a\xE2\x80", sink), TextStream::Result::kMore);
  ASSERT_EQ(s.Push("\x94" "e", sink), TextStream::Result::kMore);
  EXPECT_EQ(s.Push("nd", sink), TextStream::Result::kStop);
  EXPECT_EQ(out.Text(), "a");
}

TEST(TextStreamTest, SinkStops) {
  TextStream s = MakeStream({});
  EXPECT_EQ(s.Push("abc", [](std::string_view) { return false; }), TextStream::Result::kSinkStop);
}

TEST(TextStreamTest, RejectsBadStopStrings) {
  EXPECT_EQ(TextStream::Create({""}, 8).status().code(), StatusCode::kInvalidArgument);
  const auto bad = TextStream::Create({"ok", "a\xFF"}, 8);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("stop string 2"), std::string::npos) << bad.status().ToString();
  EXPECT_FALSE(TextStream::Create({std::string(TextStream::kMaxStopBytes + 1, 'a')}, 8).ok());
}

// --- The loop on the real model -------------------------------------------

class GeneratorTest : public ::testing::Test {
 protected:
  GeneratorTest() : model_(&testing::StoriesModel()), tok_(&testing::StoriesTokenizer()) {}

  std::unique_ptr<Session> NewSession(int threads = 1) {
    SessionOptions o;
    o.kv.capacity = 160;
    o.kv.key_format = o.kv.value_format = KvFormat::kInt8;
    o.threads = threads;
    auto s = Session::Create(*model_, o);
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(s).value();
  }
  static Sampler NewSampler(uint64_t seed) {
    SamplerOptions so;
    so.seed = seed;
    auto s = Sampler::Create(so, 512);
    EXPECT_TRUE(s.ok());
    return std::move(s).value();
  }
  std::vector<int> Prompt() const { return *tok_->Encode("Once upon a time", true); }

  // The plain loop `kvedge generate` ran before the Generator: its tokens and
  // text, into ids and text (default: ref_ids_ and ref_text_).
  void Reference(uint64_t seed, int n, std::vector<int>* ids = nullptr, std::string* text = nullptr) {
    if (ids == nullptr) ids = &ref_ids_;
    if (text == nullptr) text = &ref_text_;
    auto s = NewSession();
    Sampler sampler = NewSampler(seed);
    const std::vector<int> prompt = Prompt();
    ASSERT_TRUE(s->Feed(prompt.data(), prompt.size()).ok());
    int prev = prompt.back();
    for (int i = 0; i < n; ++i) {
      const int next = sampler.Sample(s->Logits());
      if (next == tok_->eos()) break;
      text->append(tok_->DecodePiece(prev, next));
      ids->push_back(next);
      ASSERT_TRUE(s->Feed(&next, 1).ok());
      prev = next;
    }
  }

  // One run's setup: a generator with `go`, a fresh session, a sampler of
  // `seed` and a request over Prompt() (in gen_, session_, sampler_, req_).
  void Prepare(uint64_t seed, GeneratorOptions go = {}) {
    auto g = Generator::Create(*tok_, std::move(go));
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    gen_.emplace(std::move(g).value());
    session_ = NewSession();
    sampler_.emplace(NewSampler(seed));
    prompt_ = Prompt();
    req_ = GenerationRequest();
    req_.prompt = prompt_.data();
    req_.prompt_len = prompt_.size();
  }
  GenerationResult RunInto(Collected* out) { return gen_->Run(*session_, *sampler_, req_, Into(out)); }

  const ModelWeights* model_;
  const Tokenizer* tok_;
  std::vector<int> ref_ids_;
  std::string ref_text_;
  std::optional<Generator> gen_;
  std::unique_ptr<Session> session_;
  std::optional<Sampler> sampler_;
  std::vector<int> prompt_;
  GenerationRequest req_;
};

TEST_F(GeneratorTest, SameTextAsThePlainLoopForAFixedSeed) {
  ASSERT_NO_FATAL_FAILURE(Reference(42, 300));
  ASSERT_NO_FATAL_FAILURE(Prepare(42));
  req_.max_tokens = 300;
  Collected out;
  const GenerationResult r = RunInto(&out);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.reason, StopReason::kMaxTokens);
  EXPECT_EQ(r.tokens, 300);
  EXPECT_EQ(out.Text(), ref_text_);
  EXPECT_EQ(r.last_token, ref_ids_.back());
  EXPECT_EQ(session_->tokens_fed(), prompt_.size() + 300);
}

// The loop in step form, as the server runs it: two streams whose tokens are
// fed by one batched step give what each gets from Run alone; a stop string
// set per generation ends one and says which.
TEST_F(GeneratorTest, StreamsSteppedTogetherEqualRunAlone) {
  std::vector<int> ref_ids[2];
  std::string ref_text[2];
  Reference(7, 60, &ref_ids[0], &ref_text[0]);
  Reference(8, 60, &ref_ids[1], &ref_text[1]);
  const std::string stop = ref_text[1].substr(40, 6);  // appears in stream 1's text
  auto batch = BatchDecoder::Create(*model_, 2, 1);
  ASSERT_TRUE(batch.ok());
  std::unique_ptr<Session> sessions[2] = {NewSession(), NewSession()};
  Sampler samplers[2] = {NewSampler(7), NewSampler(8)};
  std::vector<GenerationStream> streams;
  Collected out[2];
  const std::vector<int> prompt = Prompt();
  for (int i = 0; i < 2; ++i) {
    auto g = GenerationStream::Create(*tok_, {});
    ASSERT_TRUE(g.ok());
    streams.push_back(std::move(*g));
    ASSERT_TRUE(sessions[i]->Feed(prompt.data(), prompt.size()).ok());
  }
  ASSERT_TRUE(streams[1].SetStopStrings({stop}).ok());
  for (int i = 0; i < 2; ++i) streams[i].Begin(prompt.back(), 60, nullptr);
  bool live[2] = {true, true};
  while (live[0] || live[1]) {
    Session* step[2];
    int tokens[2], who[2];
    size_t n = 0;
    for (int i = 0; i < 2; ++i) {
      if (live[i] && streams[i].Next(sessions[i]->Logits(), samplers[i], &tokens[n])) {
        step[n] = sessions[i].get();
        who[n++] = i;
      } else {
        live[i] = false;
      }
    }
    if (n == 0) break;
    const Status fed = (*batch)->Step(step, tokens, n);
    for (size_t k = 0; k < n; ++k) {
      if (!streams[who[k]].Accept(tokens[k], fed, Into(&out[who[k]]))) live[who[k]] = false;
    }
  }
  const GenerationResult r0 = streams[0].Finish(Into(&out[0]));
  const GenerationResult r1 = streams[1].Finish(Into(&out[1]));
  EXPECT_EQ(r0.reason, StopReason::kMaxTokens);
  EXPECT_EQ(out[0].Text(), ref_text[0]);
  EXPECT_EQ(r1.reason, StopReason::kStopString);
  EXPECT_EQ(streams[1].stopped_by(), stop);
  EXPECT_EQ(out[1].Text(), ref_text[1].substr(0, ref_text[1].find(stop)));
  EXPECT_TRUE(streams[0].stopped_by().empty());
}

TEST_F(GeneratorTest, ContinuesASessionAcrossRuns) {
  ASSERT_NO_FATAL_FAILURE(Reference(5, 120));
  ASSERT_NO_FATAL_FAILURE(Prepare(5));
  req_.max_tokens = 50;
  Collected out;
  GenerationResult r = RunInto(&out);
  ASSERT_EQ(r.tokens, 50);
  req_ = GenerationRequest();
  req_.prev_token = r.last_token;
  req_.max_tokens = 70;
  r = RunInto(&out);
  EXPECT_EQ(r.tokens, 70);
  EXPECT_EQ(out.Text(), ref_text_);
}

TEST_F(GeneratorTest, EndOfGenerationIdIsNeitherFedNorShown) {
  ASSERT_NO_FATAL_FAILURE(Reference(9, 60));
  ASSERT_GE(ref_ids_.size(), 30u);
  const int end_id = ref_ids_[20];
  size_t first = 0;
  while (ref_ids_[first] != end_id) ++first;
  GeneratorOptions go;
  go.is_end_of_generation = [end_id](int t) { return t == end_id; };
  ASSERT_NO_FATAL_FAILURE(Prepare(9, std::move(go)));
  Collected out;  // max_tokens -1: only the end id stops it
  const GenerationResult r = RunInto(&out);
  EXPECT_EQ(r.reason, StopReason::kEndOfGeneration);
  EXPECT_EQ(r.tokens, static_cast<int64_t>(first));
  EXPECT_EQ(session_->tokens_fed(), prompt_.size() + first);
  std::string expected;
  int prev = prompt_.back();
  for (size_t i = 0; i < first; ++i) {
    expected.append(tok_->DecodePiece(prev, ref_ids_[i]));
    prev = ref_ids_[i];
  }
  EXPECT_EQ(out.Text(), expected);
}

TEST_F(GeneratorTest, StopStringSpanningTokensEndsTheTextBeforeIt) {
  ASSERT_NO_FATAL_FAILURE(Reference(3, 200));
  // A stop string made of the last byte of one piece and the first of the
  // next, at its first occurrence in the text.
  std::string stop;
  size_t at = 0, boundary = 0;
  int prev = Prompt().back();
  for (size_t i = 0; i + 1 < ref_ids_.size() && stop.empty(); ++i) {
    const std::string_view a = tok_->DecodePiece(prev, ref_ids_[i]);
    const std::string_view b = tok_->DecodePiece(ref_ids_[i], ref_ids_[i + 1]);
    boundary += a.size();
    prev = ref_ids_[i];
    if (a.empty() || b.empty()) continue;
    const std::string candidate = std::string(1, a.back()) + b.front();
    if (ref_text_.find(candidate) == boundary - 1 && FindInvalidUtf8(candidate) == kUtf8Valid && i > 10) {
      stop = candidate;
      at = boundary - 1;
    }
  }
  ASSERT_FALSE(stop.empty());
  GeneratorOptions go;
  go.stop_strings = {stop};
  ASSERT_NO_FATAL_FAILURE(Prepare(3, std::move(go)));
  req_.max_tokens = 200;
  Collected out;
  const GenerationResult r = RunInto(&out);
  EXPECT_EQ(r.reason, StopReason::kStopString);
  EXPECT_EQ(out.Text(), ref_text_.substr(0, at)) << "stop '" << stop << "'";
}

TEST_F(GeneratorTest, CancelIsCheckedBeforeEveryToken) {
  ASSERT_NO_FATAL_FAILURE(Prepare(1));
  std::atomic<bool> cancel{false};
  req_.cancel = &cancel;
  uint64_t fed_at_cancel = 0;
  const GenerationResult r = gen_->Run(*session_, *sampler_, req_, [&](std::string_view) {
    if (session_->tokens_fed() >= prompt_.size() + 7 && !cancel.load()) {
      cancel.store(true);
      fed_at_cancel = session_->tokens_fed();
    }
    return true;
  });
  EXPECT_EQ(r.reason, StopReason::kCancelled);
  EXPECT_EQ(session_->tokens_fed(), fed_at_cancel) << "no token after the flag was set";

  cancel.store(true);  // set before the run: the prompt is fed, nothing generated
  auto s2 = NewSession();
  const GenerationResult r2 = gen_->Run(*s2, *sampler_, req_, [](std::string_view) { return true; });
  EXPECT_EQ(r2.reason, StopReason::kCancelled);
  EXPECT_EQ(r2.tokens, 0);
  EXPECT_EQ(s2->tokens_fed(), prompt_.size());
}

TEST_F(GeneratorTest, SinkStopsAndErrors) {
  ASSERT_NO_FATAL_FAILURE(Prepare(1));
  GenerationRequest empty;  // nothing fed yet and no prompt
  GenerationResult r = gen_->Run(*session_, *sampler_, empty, [](std::string_view) { return true; });
  EXPECT_EQ(r.reason, StopReason::kError);
  EXPECT_EQ(r.status.code(), StatusCode::kFailedPrecondition);

  GenerationRequest req = req_;
  r = gen_->Run(*session_, *sampler_, req, [](std::string_view) { return false; });
  EXPECT_EQ(r.reason, StopReason::kSinkStopped);
  EXPECT_GE(r.tokens, 1);
  EXPECT_LE(r.tokens, 2);  // the first text may wait one token for a whole character

  const int bad[] = {1, 512};
  req.prompt = bad;
  req.prompt_len = 2;
  r = gen_->Run(*session_, *sampler_, req, [](std::string_view) { return true; });
  EXPECT_EQ(r.reason, StopReason::kError);
  EXPECT_EQ(r.status.code(), StatusCode::kInvalidArgument);

  // A `full` cache fills up: the loop ends with the feed's error.
  SessionOptions o;
  o.kv.policy = EvictionPolicy::kFull;
  o.kv.capacity = 64;
  auto full = Session::Create(*model_, o);
  ASSERT_TRUE(full.ok());
  r = gen_->Run(**full, *sampler_, req_, [](std::string_view) { return true; });
  EXPECT_EQ(r.reason, StopReason::kError);
  EXPECT_EQ(r.status.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(r.tokens, 64 - static_cast<int64_t>(prompt_.size()));
}

// Two threads, an evicting cache and stop strings that keep prefixes held:
// the loop allocates nothing in the whole process.
TEST_F(GeneratorTest, LoopAllocatesNothing) {
  GeneratorOptions go;
  go.stop_strings = {"\x01never", "e never\x01", " the end of the end"};
  go.is_end_of_generation = [](int) { return false; };
  ASSERT_NO_FATAL_FAILURE(Prepare(11, std::move(go)));
  auto s = NewSession(/*threads=*/2);
  ASSERT_TRUE(s->Feed(prompt_.data(), prompt_.size()).ok());
  GenerationRequest req;
  req.prev_token = prompt_.back();
  req.max_tokens = testing::ScaledCount(3000, 200);
  std::atomic<bool> cancel{false};
  req.cancel = &cancel;
  size_t bytes = 0;
  GenerationResult r;
  {
    ScopedAllocationCounter allocations;
    r = gen_->Run(*s, *sampler_, req, [&](std::string_view t) {
      bytes += t.size();
      return true;
    });
    EXPECT_EQ(allocations.count(), 0);
  }
  EXPECT_EQ(r.reason, StopReason::kMaxTokens);
  EXPECT_EQ(r.tokens, req.max_tokens);
  EXPECT_GT(bytes, static_cast<size_t>(req.max_tokens));
}

}  // namespace
}  // namespace kvedge
