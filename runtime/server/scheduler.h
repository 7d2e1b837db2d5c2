// The server's one decode worker: it owns all model work. HTTP handler
// threads Submit jobs and read their results from the job's bounded text
// buffer; the worker runs continuous batching — between steps sequences
// join (their new prompt suffix is prefilled) and leave (a stop condition, a
// cancel, a client gone), and every step feeds ONE token to every decoding
// sequence through one BatchDecoder::Step call. Each sequence runs the
// engine's one generation loop step by step (GenerationStream). A sequence
// whose client does not read (its buffer is full) sits out steps until it
// does: the worker never blocks on a client.
#ifndef KVEDGE_RUNTIME_SERVER_SCHEDULER_H_
#define KVEDGE_RUNTIME_SERVER_SCHEDULER_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/server/api.h"
#include "runtime/engine/batch_decoder.h"
#include "runtime/server/session_manager.h"

namespace kvedge::server {

// One request's life between an HTTP thread and the worker. The HTTP thread
// fills the request part, Submits, then waits on the channel.
struct Job {
  // Request (set before Submit).
  SessionKind kind = SessionKind::kChat;
  std::vector<chat::ChatMessage> messages;  // kText: one message holding the prompt
  std::string rendered;                     // the prompt text (the template's rendering, or the prompt)
  GenerationParams params;
  std::atomic<bool> cancel{false};          // set by the HTTP thread when the client is gone

  // Channel (guarded by mu; cv signals every change).
  std::mutex mu;
  std::condition_variable cv;
  bool admitted = false;         // the prompt was fed: the reply starts
  bool done = false;             // the reply ended (or the job failed)
  std::optional<ApiError> error; // failed before or during the reply
  std::string text;              // reply text not yet taken by the HTTP thread
  // Results (valid once admitted / done).
  std::string session_id;
  int64_t prompt_tokens = 0;     // the whole prompt, in tokens (cached + fed)
  int64_t cached_tokens = 0;     // prompt tokens the session already held (not fed again)
  int64_t completion_tokens = 0;
  std::string finish_reason;     // "stop", "length", "cancelled", "error"
  uint64_t tokens_in_cache = 0;
  uint64_t kv_bytes = 0;
  uint64_t kv_budget_bytes = 0;
  double ttft_seconds = 0;       // submit → first token
  double submitted_at = 0;

  // HTTP side: waits up to `timeout_ms` until admitted or done. True if so.
  bool WaitAdmitted(int timeout_ms);
  // HTTP side: waits up to `timeout_ms` for text or the end; moves the text
  // out. True when the job is done and all text was taken.
  bool Take(std::string* out, int timeout_ms);
};

struct SchedulerOptions {
  int max_streams = 16;              // sequences decoding together
  size_t max_queued = 256;           // jobs waiting beyond them: more is 429
  size_t max_buffered_bytes = 1 << 16;  // reply text a client has not read: more pauses the sequence
};

struct SchedulerMetrics {
  uint64_t requests = 0;          // admitted
  uint64_t failed = 0;            // ended with an error
  uint64_t prompt_tokens = 0;     // fed (not cached)
  uint64_t cached_tokens = 0;
  uint64_t generated_tokens = 0;
  uint64_t steps = 0;             // batched decode steps
  double decode_seconds = 0;      // in Step calls
  double ttft_seconds_sum = 0;
  uint64_t ttft_count = 0;
  int active = 0;
  int queued = 0;
};

class Scheduler {
 public:
  // Borrows the manager and tokenizer; starts the worker.
  Scheduler(SessionManager& sessions, const Tokenizer& tokenizer, std::unique_ptr<BatchDecoder> batch,
            SchedulerOptions options);
  ~Scheduler();  // Drain()s

  // Queues a job. Errors: 429 (queue full) or 503 (draining), with Retry-After.
  std::optional<ApiError> Submit(std::shared_ptr<Job> job);
  // Refuses new jobs, lets the queued and running ones finish, stops the
  // worker. Idempotent.
  void Drain();
  SchedulerMetrics Metrics() const;

 private:
  struct Sequence;
  void Loop();
  void Admit(const std::shared_ptr<Job>& job, std::vector<std::unique_ptr<Sequence>>* active);
  void Finish(Sequence& seq);
  static void Fail(Job& job, ApiError error);

  SessionManager& sessions_;
  const Tokenizer& tokenizer_;
  std::unique_ptr<BatchDecoder> batch_;
  SchedulerOptions options_;
  mutable std::mutex mu_;  // queue_, draining_, metrics_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool draining_ = false;
  SchedulerMetrics metrics_;
  std::thread worker_;
};

}  // namespace kvedge::server

#endif  // KVEDGE_RUNTIME_SERVER_SCHEDULER_H_
