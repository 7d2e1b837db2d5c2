// The decode worker: admit, prefill, step every sequence once, finish.
#include "runtime/server/scheduler.h"

#include <chrono>
#include <utility>

#include "platform/clock.h"
#include "runtime/engine/generator.h"
#include "runtime/engine/sampler.h"

namespace kvedge::server {

bool Job::WaitAdmitted(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu);
  return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return admitted || done; });
}

bool Job::Take(std::string* out, int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu);
  cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !text.empty() || done; });
  out->swap(text);
  text.clear();
  if (!out->empty()) cv.notify_all();  // room again for a paused sequence
  return done && text.empty();
}

// A job being answered: its session, sampler settings and loop state.
struct Scheduler::Sequence {
  std::shared_ptr<Job> job;
  SessionManager::Lease lease;
  std::string reply;
  bool first_token = true;

  chat::Conversation& conv() { return *lease.conversation; }
  GenerationStream& stream() { return conv().generator().stream(); }
  // The text sink: the reply and the job's buffer.
  bool Emit(std::string_view text) {
    reply.append(text);
    std::lock_guard<std::mutex> lock(job->mu);
    job->text.append(text);
    job->cv.notify_all();
    return true;
  }
  bool Paused(size_t limit) {
    std::lock_guard<std::mutex> lock(job->mu);
    return job->text.size() >= limit;
  }
};

Scheduler::Scheduler(SessionManager& sessions, const Tokenizer& tokenizer, std::unique_ptr<BatchDecoder> batch,
                     SchedulerOptions options)
    : sessions_(sessions), tokenizer_(tokenizer), batch_(std::move(batch)), options_(options) {
  worker_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() { Drain(); }

std::optional<ApiError> Scheduler::Submit(std::shared_ptr<Job> job) {
  std::lock_guard<std::mutex> lock(mu_);
  ApiError e;
  e.retry_after = 1;
  if (draining_) {
    e.http_status = 503;
    e.type = "server_error";
    e.code = "shutting_down";
    e.message = "the server is shutting down";
    return e;
  }
  if (queue_.size() >= options_.max_queued) {
    e.http_status = 429;
    e.type = "rate_limit_error";
    e.code = "queue_full";
    e.message = std::to_string(queue_.size()) + " requests are waiting already: retry later";
    return e;
  }
  job->submitted_at = NowSeconds();
  queue_.push_back(std::move(job));
  metrics_.queued = static_cast<int>(queue_.size());
  cv_.notify_all();
  return std::nullopt;
}

void Scheduler::Drain() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    draining_ = true;
    cv_.notify_all();
  }
  if (worker_.joinable()) worker_.join();
}

SchedulerMetrics Scheduler::Metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void Scheduler::Fail(Job& job, ApiError error) {
  std::lock_guard<std::mutex> lock(job.mu);
  job.error = std::move(error);
  job.finish_reason = "error";
  job.done = true;
  job.cv.notify_all();
}

void Scheduler::Admit(const std::shared_ptr<Job>& job, std::vector<std::unique_ptr<Sequence>>* active) {
  const auto fail = [&](ApiError e) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++metrics_.failed;
    }
    Fail(*job, std::move(e));
  };
  const auto server_error = [](const Status& s, int http) {
    ApiError e;
    e.http_status = http;
    e.type = "server_error";
    e.message = s.message();
    if (http == 503) e.retry_after = 1;
    return e;
  };
  if (job->cancel.load()) return fail(BadRequest("the client went away", "", "cancelled"));
  auto lease = sessions_.Acquire(job->kind, job->rendered);
  if (!lease.ok()) {
    return fail(server_error(lease.status(), lease.status().code() == StatusCode::kResourceExhausted ? 503 : 500));
  }
  auto seq = std::make_unique<Sequence>();
  seq->job = job;
  seq->lease = *lease;
  chat::Conversation& c = seq->conv();
  const auto release_with = [&](ApiError e) {
    sessions_.Release(seq->lease.id);
    fail(std::move(e));
  };
  // The request's sampler and stop strings (the template's end of turn first).
  SamplerOptions so;
  so.temperature = job->params.temperature;
  so.top_k = 0;
  so.top_p = job->params.top_p;
  so.seed = job->params.seed.has_value() ? *job->params.seed : std::random_device{}();
  auto sampler = Sampler::Create(so, c.session().vocab_size());
  if (!sampler.ok()) return release_with(BadRequest(sampler.status().message()));
  c.set_sampler(std::move(*sampler));
  std::vector<std::string> stops;
  if (!c.end_of_turn().empty()) stops.push_back(c.end_of_turn());
  for (const std::string& s : job->params.stop) stops.push_back(s);
  if (const Status s = c.generator().stream().SetStopStrings(std::move(stops)); !s.ok()) {
    return release_with(BadRequest(s.message(), "stop"));
  }
  if (const Status s = c.SetMessages(job->messages); !s.ok()) return release_with(BadRequest(s.message(), "messages"));
  bool refed = false;
  auto ids = c.PrepareReply(&refed);
  if (!ids.ok()) return release_with(BadRequest(ids.status().message(), "messages", "template_error"));
  const uint64_t cached = c.session().tokens_fed();
  const int capacity = sessions_.session_capacity_tokens();
  if (ids->size() > static_cast<size_t>(capacity)) {
    return release_with(BadRequest("the prompt adds " + std::to_string(ids->size()) +
                                       " tokens; a session's cache holds at most " + std::to_string(capacity) +
                                       " (--session-budget)",
                                   job->kind == SessionKind::kChat ? "messages" : "prompt", "context_length_exceeded"));
  }
  if (ids->empty() && cached == 0) return release_with(BadRequest("the prompt is empty", "prompt"));
  if (!ids->empty()) {
    const Status fed = c.mutable_session().Feed(ids->data(), ids->size());
    if (!fed.ok()) {
      c.FinishReply(/*prompt_fed=*/false, "", "");
      return release_with(server_error(fed, 400));
    }
  }
  const int prev = c.session().history().last();
  c.generator().stream().Begin(prev, job->params.max_tokens, &job->cancel);
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests;
    metrics_.prompt_tokens += ids->size();
    metrics_.cached_tokens += cached;
  }
  {
    std::lock_guard<std::mutex> lock(job->mu);
    job->session_id = seq->lease.id;
    job->cached_tokens = static_cast<int64_t>(cached);
    job->prompt_tokens = static_cast<int64_t>(cached + ids->size());
    job->admitted = true;
    job->cv.notify_all();
  }
  active->push_back(std::move(seq));
}

void Scheduler::Finish(Sequence& seq) {
  Job& job = *seq.job;
  GenerationStream& stream = seq.stream();
  const GenerationResult r = stream.Finish([&](std::string_view t) { return seq.Emit(t); });
  chat::Conversation& c = seq.conv();
  c.FinishReply(/*prompt_fed=*/true, std::move(seq.reply),
                r.reason == StopReason::kStopString ? stream.stopped_by() : std::string_view());
  const KvCacheStats st = c.session().cache().Stats();
  sessions_.Release(seq.lease.id);
  {
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.generated_tokens += static_cast<uint64_t>(r.tokens);
    if (r.reason == StopReason::kError) ++metrics_.failed;
  }
  std::lock_guard<std::mutex> lock(job.mu);
  job.completion_tokens = r.tokens;
  switch (r.reason) {
    case StopReason::kMaxTokens: job.finish_reason = "length"; break;
    case StopReason::kEndOfGeneration:
    case StopReason::kStopString: job.finish_reason = "stop"; break;
    case StopReason::kCancelled:
    case StopReason::kSinkStopped: job.finish_reason = "cancelled"; break;
    case StopReason::kError: job.finish_reason = "error"; break;
  }
  if (r.reason == StopReason::kError) {
    ApiError e;
    e.http_status = 500;
    e.type = "server_error";
    e.message = r.status.message();
    job.error = std::move(e);
  }
  job.tokens_in_cache = st.tokens_held;
  job.kv_bytes = st.held_bytes;
  job.kv_budget_bytes = st.arena_bytes;
  job.done = true;
  job.cv.notify_all();
}

void Scheduler::Loop() {
  std::vector<std::unique_ptr<Sequence>> active;
  std::vector<Session*> sessions;
  std::vector<int> tokens;
  std::vector<Sequence*> stepping;
  std::vector<Status> fed;
  sessions.reserve(options_.max_streams);
  tokens.reserve(options_.max_streams);
  stepping.reserve(options_.max_streams);
  fed.reserve(options_.max_streams);
  for (;;) {
    std::vector<std::shared_ptr<Job>> joining;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return !queue_.empty() || !active.empty() || draining_; });
      if (draining_ && queue_.empty() && active.empty()) break;
      while (!queue_.empty() && active.size() + joining.size() < static_cast<size_t>(options_.max_streams)) {
        joining.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      metrics_.queued = static_cast<int>(queue_.size());
    }
    for (const auto& job : joining) Admit(job, &active);
    // One step: every decoding sequence that is not paused gets one token.
    sessions.clear();
    tokens.clear();
    stepping.clear();
    for (size_t i = 0; i < active.size();) {
      Sequence& seq = *active[i];
      if (!seq.job->cancel.load() && seq.Paused(options_.max_buffered_bytes)) {
        ++i;
        continue;
      }
      int token;
      if (!seq.stream().Next(seq.conv().session().Logits(), seq.conv().sampler(), &token)) {
        Finish(seq);
        active.erase(active.begin() + static_cast<ptrdiff_t>(i));
        continue;
      }
      sessions.push_back(&seq.conv().mutable_session());
      tokens.push_back(token);
      stepping.push_back(&seq);
      ++i;
    }
    if (!stepping.empty()) {
      const double t0 = NowSeconds();
      // A refused step changes no session; then each row is stepped alone,
      // so only the one at fault (a `full` cache that is full) fails.
      const Status step = batch_->Step(sessions.data(), tokens.data(), sessions.size());
      fed.assign(stepping.size(), step);
      if (!step.ok()) {
        for (size_t k = 0; k < stepping.size(); ++k) fed[k] = batch_->Step(&sessions[k], &tokens[k], 1);
      }
      const double t1 = NowSeconds();
      for (size_t k = 0; k < stepping.size(); ++k) {
        Sequence& seq = *stepping[k];
        if (seq.first_token) {
          seq.first_token = false;
          const double ttft = t1 - seq.job->submitted_at;
          {
            std::lock_guard<std::mutex> lock(seq.job->mu);
            seq.job->ttft_seconds = ttft;
          }
          std::lock_guard<std::mutex> lock(mu_);
          metrics_.ttft_seconds_sum += ttft;
          ++metrics_.ttft_count;
        }
        if (!seq.stream().Accept(tokens[k], fed[k], [&](std::string_view t) { return seq.Emit(t); })) {
          Finish(seq);
          for (size_t i = 0; i < active.size(); ++i) {
            if (active[i].get() == &seq) {
              active.erase(active.begin() + static_cast<ptrdiff_t>(i));
              break;
            }
          }
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      ++metrics_.steps;
      metrics_.decode_seconds += t1 - t0;
    } else if (!active.empty()) {
      // Every sequence waits for its client to read: wait for room (or news).
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(5));
    }
    std::lock_guard<std::mutex> lock(mu_);
    metrics_.active = static_cast<int>(active.size());
  }
}

}  // namespace kvedge::server
